"""Timed calls: a student function that times generate, called on hidden inputs and judged against the reference.

Every assignment has one (latency's and quantization's measure_generation, perplexity's time_generation, ptq-bnb's
generate_text_and_time). A :class:`Timed` call is paced (a timer around a warm-up or a tokenization shows) and made
again while the latency it reports reads too long (a preempted run does not repeat; a timer around other work does).
Its *timed* generate calls are those that do what the reference's timed call does on the same inputs (the model it
was given, the prompt's ids, the limit of new tokens, ...): a best-of-three timer's three, never a warm-up of fewer
tokens; the latency it reports is judged against them (grader/checks/timing.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from grader.checks.base import CheckContext, StopCheck, Verdict
from grader.checks.behaviour import (
    Generation,
    RowFit,
    Unmatched,
    carrying,
    describe_generation,
    matching,
    stray_generations,
    unmatched_generations,
    unmatched_sentence,
)
from grader.checks.calls import Argument, GradedCall, graded_call
from grader.checks.timing import LatencyTolerance, again_while, cuda_misuse, latency_readings
from grader.kernel.harness import CallOutcome
from grader.kernel.protocol import GenerateEvent
from grader.kernel.values import is_number

# What a timed generate is compared on with the reference's: the model it was given, the prompt's ids, the limit of
# new tokens, use_cache, the padding side of a batch, and inputs on the model's device.
TIMED_ASPECTS = ("model", "rows", "limit", "use_cache", "padding", "device", "inputs")


@dataclass(frozen=True)
class Timed:
    """One timed call on hidden inputs: what it returned, what it did beside what the reference does."""

    call: str
    hub_id: str
    graded: GradedCall
    value: Any
    aspects: tuple[str, ...]
    fits: RowFit = field(compare=False, repr=False)

    @property
    def outcome(self) -> CallOutcome:
        """The call's outcome."""
        return self.graded.outcome

    def unmatched(self) -> list[Unmatched]:
        """The reference's timed generate calls this call does not make (with the closest it made instead)."""
        return unmatched_generations(self.graded.behaviour, self.graded.reference(), self.fits, self.aspects)

    def stray(self) -> list[Generation]:
        """Its generate calls on a model the reference never runs (a model of the notebook's, not the one given)."""
        return stray_generations(self.graded.behaviour, self.graded.reference())

    def timed(self) -> list[GenerateEvent]:
        """Its generate calls that do what the reference's timed one does (a best-of-three timer's three), in order;
        where none does (charged by the settings' check), its last generate call."""
        wanted = self.graded.reference().required()
        generations = self.graded.behaviour.generations
        found = [call.event for need in wanted for call in matching(generations, need, self.fits, self.aspects)]
        events = self.outcome.generate_events()
        ordered = [event for event in events if any(event is timed for timed in found)]
        return ordered or events[-1:]


def reads_too_long(tolerance: LatencyTolerance, latency: Any, timed: Sequence[GenerateEvent]) -> bool:
    """Whether a reported latency reads longer than any honest timer of the timed calls could (worth a new call)."""
    readings = latency_readings(timed)
    return (
        is_number(latency)
        and bool(readings)
        and float(latency) > max(readings) * (1 + tolerance.upper_rel) + tolerance.upper_abs_s
    )


def timed_call(
    context: CheckContext,
    tolerance: LatencyTolerance,
    function: str,
    arguments: Sequence[Argument],
    hub_id: str,
    call: str,
    latency_of: Callable[[Any], Any],
    returns: Callable[[CallOutcome], Any] | None = None,
    aspects: tuple[str, ...] = TIMED_ASPECTS,
    memo: str = "",
    fits: RowFit | None = None,
) -> Timed:
    """``function(*arguments)`` paced, made again while the latency it reports (``latency_of(value)``) reads too long;
    shared by every check that asks for the same ``memo``. ``returns`` reads the value (or stops the check with why
    it is not what the function should return); a call that never generated stops the check."""
    row_fit = fits or carrying(context.models.tokenizer(hub_id))

    def attempt() -> Timed:
        graded = graded_call(context, function, *arguments, pace_s=tolerance.pace_s)
        misuse = cuda_misuse(graded.outcome, function, context.on_cuda)
        if misuse is not None:
            raise StopCheck(misuse)
        value = returns(graded.outcome) if returns is not None else context.returned(graded.outcome, call)
        if not graded.outcome.generate_events():
            raise StopCheck(Verdict.failed(f"{call} never called model.generate.", found="no generate call"))
        return Timed(call, hub_id, graded, value, aspects, row_fit)

    def measure() -> Timed:
        return again_while(
            tolerance.attempts, attempt, lambda timed: reads_too_long(tolerance, latency_of(timed.value), timed.timed())
        )

    return context.once(f"timed:{function}:{memo or call}", measure) if memo or call else measure()


def judge_timed_settings(context: CheckContext, timed: Timed, fix: str = "") -> Verdict | None:
    """None if the timed call's generate calls do what the reference's do (on the model it was given, the prompt and
    limit it was given, ...); else the failed verdict naming what its closest call did instead."""
    missing = timed.unmatched()
    if not missing:
        return None
    decode = context.models.tokenizer(timed.hub_id).decode
    return Verdict.failed(
        f"In {timed.call}, the timed generate does not do what the reference's does. "
        + unmatched_sentence(missing[0], decode)
        + (
            f" {fix}"
            if fix
            else " Pass the prompt and max_new_tokens you are given to model.generate, on the model you are given, with "
            "the inputs moved to model.device."
        ),
        expected=describe_generation(missing[0].wanted, decode),
        found=describe_generation(missing[0].closest, decode) if missing[0].closest else "no generate call",
    )
