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
from typing import Any, TypeVar

from grader.checks.base import CheckContext, StopCheck, Verdict
from grader.checks.behaviour import (
    Behaviour,
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
from grader.checks.timing import LatencyTolerance, agrees_with_timed, cuda_misuse, latency_readings, upper_bound
from grader.kernel.harness import CallOutcome
from grader.kernel.protocol import GenerateEvent
from grader.kernel.values import is_number

R = TypeVar("R")

# What a timed generate is compared on with the reference's: the model it was given, the prompt's ids, the limit of
# new tokens, use_cache, the padding side of a batch, and inputs on the model's device.
TIMED_ASPECTS = ("model", "rows", "limit", "use_cache", "beams", "padding", "device", "inputs", "added")


@dataclass(frozen=True)
class Timed:
    """One timed call on hidden inputs: what it returned, what it did beside what the reference does."""

    call: str
    hub_id: str
    graded: GradedCall
    value: Any
    aspects: tuple[str, ...]
    fits: RowFit = field(compare=False, repr=False)
    latency: Any = None  # the latency it reported (None: not read)
    tolerance: LatencyTolerance = field(default_factory=LatencyTolerance, compare=False, repr=False)

    @property
    def outcome(self) -> CallOutcome:
        """The call's outcome."""
        return self.graded.outcome

    def unmatched(self) -> list[Unmatched]:
        """The reference's timed generate calls this call's timed generates do not make (with the closest it made
        instead): the generates the latency it reports reads, where it reads some."""
        timed = self.timed()
        student = self.graded.behaviour
        if self._read_apart():  # its latency reads generates other than those that do what the reference's do
            student = Behaviour(
                tuple(call for call in student.generations if any(call.event is e for e in timed)), student.passes
            )
        return unmatched_generations(student, self.graded.reference(), self.fits, self.aspects)

    def stray(self) -> list[Generation]:
        """Its generate calls on a model the reference never runs (a model of the notebook's, not the one given)."""
        return stray_generations(self.graded.behaviour, self.graded.reference())

    def _matching(self) -> list[GenerateEvent]:
        """Its generate calls that do what the reference's timed one does, in order."""
        wanted = self.graded.reference().required()
        generations = self.graded.behaviour.generations
        found = [call.event for need in wanted for call in matching(generations, need, self.fits, self.aspects)]
        return [event for event in self.outcome.generate_events() if any(event is timed for timed in found)]

    def _reading(self) -> list[GenerateEvent]:
        """The generate calls whose duration the reported latency reads (each alone, none the first of its prompt,
        which holds a pacing pause: a warm-up), in order."""
        if not is_number(self.latency):
            return []
        return [
            event
            for event in self.outcome.generate_events()
            if not event["paced_s"] and event["pause"] is None and agrees_with_timed(self.tolerance, float(self.latency), [event])
        ]

    def _read_apart(self) -> bool:
        """Whether the latency reads a generate that came after every one that does what the reference's timed one
        does, and none of those (a warm-up with the right settings, then a timed call with the wrong ones)."""
        matched = self._matching()
        if matched and is_number(self.latency) and agrees_with_timed(self.tolerance, float(self.latency), matched):
            return False
        reading = self._reading()
        return (
            bool(reading)
            and not any(event is other for event in reading for other in matched)
            and all(float(reading[-1]["start"]) >= float(other["end"]) for other in matched)
        )

    def timed(self) -> list[GenerateEvent]:
        """Its timed generate calls: those that do what the reference's timed one does (a best-of-three timer's
        three), in order; but where the latency it reports reads none of them and reads another generate, that one
        (the call timed another generate than it should: its settings' check says how it differs); where neither,
        its last generate call."""
        matched = self._matching()
        if self._read_apart():
            return self._reading()[-1:]
        return matched or self.outcome.generate_events()[-1:]


def call_work(graded: GradedCall, tokenizing: bool = True) -> list[tuple[object, ...]]:
    """What a call did, as a multiset: each generate's model, rows and limit, and (``tokenizing``) how many times it
    tokenized. A call made again because its latency read too long is judged on its first run where the second did
    other work (a warm-up done once per model, or a tokenization cached, inside the timer the first time)."""
    generates = [(repr((call.model, call.rows, call.limit)),) for call in graded.behaviour.generations if call.error is None]
    return [*sorted(generates), *([("tokenize", len(graded.outcome.tokenize_events()))] if tokenizing else [])]


def again_while_alike(
    attempts: int,
    attempt: Callable[[], R],
    too_long: Callable[[R], bool],
    graded: Callable[[R], GradedCall],
    tokenizing: bool = True,
) -> R:
    """What ``attempt`` gives, made up to ``attempts`` times while ``too_long`` says a latency it reports reads too
    long (a preempted run does not repeat); but a run made again that did other work than the first (``call_work``: a
    warm-up once per model, a tokenization cached, inside the timer the first time) leaves the first to be judged.
    Without ``tokenizing``, tokenizations are not counted (a sweep that caches each batch's encoding by its tokenizer's
    id, outside its timers, may find it cached the second time)."""
    first = current = attempt()
    for _ in range(attempts - 1):
        if not too_long(current):
            break
        again = attempt()
        if call_work(graded(again), tokenizing) != call_work(graded(first), tokenizing):
            return first
        current = again
    return current


def reads_too_long(tolerance: LatencyTolerance, latency: Any, timed: Sequence[GenerateEvent]) -> bool:
    """Whether a reported latency reads longer than any honest timer of the timed calls could (worth a new call)."""
    readings = latency_readings(timed)
    return is_number(latency) and bool(readings) and float(latency) > upper_bound(tolerance, max(readings), timed)


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
        return Timed(call, hub_id, graded, value, aspects, row_fit, latency_of(value), tolerance)

    def measure() -> Timed:
        return again_while_alike(
            tolerance.attempts,
            attempt,
            lambda timed: reads_too_long(tolerance, timed.latency, timed.timed()),
            lambda timed: timed.graded,
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
