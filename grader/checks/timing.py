"""Judging timed generation against the instrumented generate call (shared by assignments).

A reported latency must match the duration the instrumentation measured for the generate call
the student's own function made, within a tolerance for clock differences and the small work
around the call; it holds on a busy machine and a hard-coded number fails. Timed calls are
*paced* (``LatencyTolerance.pace_s``): the first generate of each new prompt and every tokenizer
call are slowed, so that a timer around a warm-up or a tokenization shows however fast the
model is.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import Field

from grader.checks.base import CheckContext, Params, StopCheck, TargetParams, Verdict, check_kind, number
from grader.checks.numbers import half_unit
from grader.kernel.evidence import generated_anything
from grader.kernel.harness import CallOutcome, literal
from grader.kernel.protocol import GenerateEvent, Recipe
from grader.kernel.values import is_number, kind_of

T = TypeVar("T")
R = TypeVar("R")


class LatencyTolerance(Params):
    """How far a reported latency may be from the instrumented generate duration."""

    # A timer around a call of the instrumented generate reads at least its duration (the instrumentation's own work
    # is inside both): shorter is only a clock's rounding, or a latency shaved by hand.
    lower_rel: float = Field(
        0.02, ge=0, lt=1, description="How much shorter than generate the latency may read (clock differences)."
    )
    lower_abs_s: float = Field(0.001, ge=0, description="Absolute allowance below the generate duration.")
    upper_rel: float = Field(0.25, ge=0, description="How much longer than generate the latency may read (tokenization, noise).")
    upper_abs_s: float = Field(0.015, ge=0, description="Absolute allowance above the generate duration.")
    attempts: int = Field(
        3,
        ge=1,
        le=10,
        description="Calls tried while the latency reads too long (a preempted run does not repeat; a mistake does).",
    )
    pace_s: float = Field(
        0.25,
        ge=0,
        le=2,
        description=(
            "Seconds added, during the timed call, to the first generate of each new prompt and to each tokenizer "
            "call: a timer around a warm-up or a tokenization then reads far longer than the generate it reports."
        ),
    )


def queued(events: Sequence[GenerateEvent]) -> float:
    """The longest a timer around one of these generate calls can have waited, beside it, for a busy machine to run
    the kernel (``queued_s``, measured by the grader: grader/kernel/evidence.py ``with_queue_waits``)."""
    return max((float(event.get("queued_s") or 0.0) for event in events), default=0.0)


def upper_bound(tolerance: LatencyTolerance, reading: float, events: Sequence[GenerateEvent]) -> float:
    """The longest latency an honest timer of ``reading`` seconds of these generate calls reports: the tolerance above
    it, and what it waited beside them for the machine to run the kernel."""
    return reading * (1 + tolerance.upper_rel) + tolerance.upper_abs_s + queued(events)


def sleep_covered(
    latency: float, sleeps: Sequence[tuple[float, float]], generate: tuple[float, float], call: tuple[float, float]
) -> float:
    """The least seconds of these sleeps a timer reading ``latency`` seconds covers, where it surrounds the
    ``generate`` (start, end) and lies within the ``call`` (start, end), all on one clock: 0.0 where such a timer can
    miss every sleep, or where no contiguous timer reads ``latency`` (a best-of-three's mean; judged elsewhere).

    A timer started after its sleep (a pause to settle the machine) can always be placed after it; one that read the
    sleep cannot, wherever its end lies between the generate's end and the call's."""
    started, ended = generate
    lo, hi = max(ended, call[0] + latency), min(call[1], started + latency)
    if hi < lo:
        return 0.0

    def covered(end: float) -> float:
        return sum(max(0.0, min(end, stop) - max(end - latency, start)) for start, stop in sleeps)

    # The covered time is piecewise linear in where the timer ends: least at an end of the range or where a sleep's
    # edge meets one of the timer's.
    turns = {lo, hi} | {edge + shift for sleep in sleeps for edge in sleep for shift in (0.0, latency)}
    return min(covered(end) for end in turns if lo <= end <= hi)


def call_timed(
    context: CheckContext,
    function: str,
    hub_id: str,
    prompt: str,
    max_new_tokens: int,
    *more: Recipe,
    device: str = "auto",
    dtype: str = "auto",
    pace_s: float = 0.0,
) -> tuple[CallOutcome, Any]:
    """Call ``function(model, tokenizer, prompt, max_new_tokens, *more)``; stop on CUDA misuse or a failed call.

    ``more`` are further argument recipes; ``pace_s`` paces the call (see ``Harness.call``).
    """
    outcome = context.call_with_model(
        function, hub_id, literal(prompt), literal(max_new_tokens), *more, device=device, dtype=dtype, pace_s=pace_s
    )
    misuse = cuda_misuse(outcome, function, context.on_cuda)
    if misuse is not None:
        raise StopCheck(misuse)
    return outcome, context.returned(outcome, function)


def again_while(attempts: int, attempt: Callable[[], R], reads_too_long: Callable[[R], bool]) -> R:
    """What ``attempt`` gives, made up to ``attempts`` times while ``reads_too_long`` says a latency it reports reads
    too long: a run the operating system preempted does not repeat, a timer around other work does."""
    for _ in range(attempts):
        result = attempt()
        if not reads_too_long(result):
            break
    return result


def retry_while_too_long(
    tolerance: LatencyTolerance, attempt: Callable[[], tuple[CallOutcome, T]], latency_of: Callable[[T], Any]
) -> tuple[CallOutcome, T]:
    """Call ``attempt`` up to ``tolerance.attempts`` times while the latency it reports reads too long."""
    return again_while(
        tolerance.attempts, attempt, lambda called: too_long(tolerance, latency_of(called[1]), called[0].generate_events())
    )


def too_long(tolerance: LatencyTolerance, latency: Any, events: list[GenerateEvent]) -> bool:
    """Whether a latency exceeds the upper allowance over the call's last generate (worth a retry)."""
    if not events or not isinstance(latency, (int, float)):
        return False
    return float(latency) > upper_bound(tolerance, float(events[-1]["duration_s"]), events[-1:])


def judge_latency(
    tolerance: LatencyTolerance, latency: float, events: list[GenerateEvent], max_new_tokens: int
) -> Verdict | None:
    """None if ``latency`` agrees with the last generate call; else the failed verdict that says how."""
    duration = float(events[-1]["duration_s"])
    total = sum(float(event["duration_s"]) for event in events)
    lower = duration * (1 - tolerance.lower_rel) - tolerance.lower_abs_s
    upper = upper_bound(tolerance, duration, events[-1:])
    expected = f"about {number(duration, 's')} (the generate call of {max_new_tokens} new tokens)"
    if lower <= latency <= upper:
        return None
    if math.isclose(latency, duration * 1000, rel_tol=tolerance.upper_rel):
        return Verdict.failed(
            f"The latency reads {number(latency)} for a generate call of {number(duration, 's')}: it is in milliseconds; return seconds.",
            expected=expected,
            found=number(latency),
        )
    if latency < lower:
        return Verdict.failed(
            f"The reported latency ({number(latency, 's')}) is shorter than the generate call itself ({number(duration, 's')}): "
            "the timer must start before model.generate and stop after it (or the value is not measured).",
            expected=expected,
            found=number(latency, "s"),
        )
    # Surrounding several calls: at least their total, and not wildly more than their span (a
    # hard-coded number far above both is "not measured", below). Generous above: a busy
    # machine stretches what lies between the calls.
    span = float(events[-1]["end"]) - float(events[0]["start"])
    if len(events) > 1 and total * (1 - tolerance.lower_rel) - tolerance.lower_abs_s <= latency <= 2 * span + 0.05:
        return Verdict.failed(
            f"The timer surrounds {len(events)} generate calls ({number(total, 's')} in all): time the single generate call whose result you return.",
            expected=expected,
            found=number(latency, "s"),
        )
    return Verdict.failed(
        f"The reported latency ({number(latency, 's')}) is much longer than the generate call ({number(duration, 's')}): "
        "the timed block includes other work (or the value is not measured); start the timer right before "
        "model.generate and stop it right after.",
        expected=expected,
        found=number(latency, "s"),
    )


def latency_readings(timed: Sequence[GenerateEvent]) -> list[float]:
    """The latencies an honest timer of these timed generate calls (the same work, repeated) can report: each call's,
    and their fastest, median and mean (a best-of-three or median-of-five timer, an average of runs).

    A call that holds a pacing pause (the first of its prompt: a warm-up, however it was spelled) counts only where
    every timed call holds one: a warm-up with the timed call's settings is not a timed run, and a timer around it and
    the timed call must not read as one slow run. The mean of two or more repeats counts them all, the paced first
    one included (an average of runs holds the pause its first run took; a timer around a warm-up does not read as
    it). A paced call's own duration is no reading where an unpaced one follows: on the tiny models a timer around a
    warm-up and the timed call reads within the tolerance of the warm-up's paced duration alone."""
    unpaced = [event for event in timed if not event["paced_s"] and event["pause"] is None]
    durations = [float(event["duration_s"]) for event in (unpaced or timed)]
    if not durations:
        return []
    readings = [*durations, min(durations), statistics.median(durations), statistics.fmean(durations)]
    if unpaced and len(unpaced) < len(timed):
        readings.append(statistics.fmean(float(event["duration_s"]) for event in timed))
    return readings


def agrees_with_timed(tolerance: LatencyTolerance, latency: float, timed: Sequence[GenerateEvent]) -> bool:
    """Whether ``latency`` reads one of :func:`latency_readings` of the timed calls, within the tolerance."""
    return any(
        reading * (1 - tolerance.lower_rel) - tolerance.lower_abs_s <= latency <= upper_bound(tolerance, reading, timed)
        for reading in latency_readings(timed)
    )


def judge_timed_latency(
    params: LatencyTolerance,
    latency: float,
    outcome: CallOutcome,
    timed: Sequence[GenerateEvent],
    max_new_tokens: int,
) -> Verdict | None:
    """None if ``latency`` is what a timer of the call's timed generate calls reads (see :func:`agrees_with_timed`:
    one of them, or their fastest, median or mean); else :func:`judge_timed_call`'s verdict on the last of them, which
    names a warm-up or a tokenization inside the timer."""
    if timed and agrees_with_timed(params, latency, timed):
        return None
    return judge_timed_call(params, latency, outcome, max_new_tokens, timed[-1] if timed else None)


def judge_timed_call(
    params: LatencyTolerance, latency: float, outcome: CallOutcome, max_new_tokens: int, timed: GenerateEvent | None = None
) -> Verdict | None:
    """judge_latency on a paced call's timed generate (default: its last), naming the tokenization when that is what
    the timer surrounds."""
    events = outcome.generate_events()
    if timed is not None and any(event is timed for event in events):
        events = events[: next(index for index, event in enumerate(events) if event is timed) + 1]
    verdict = judge_latency(params, latency, events, max_new_tokens)
    if verdict is None or latency < float(events[-1]["duration_s"]):
        return verdict
    timed = events[-1]
    # Tokenizer calls after any earlier generate and before the timed one; the timer surrounds
    # them when the latency covers the time from the first of them to the end of the generate.
    between = [
        event
        for event in outcome.tokenize_events()
        if event["end"] <= timed["start"] and all(g["end"] <= event["start"] for g in events[:-1])
    ]
    covered = float(timed["end"]) - float(between[0]["start"]) if between else math.inf
    if latency >= covered * (1 - params.lower_rel) - params.lower_abs_s:
        return Verdict.failed(
            f"The reported latency ({number(latency, 's')}) includes tokenizing the prompt, not only the generate call "
            f"({number(float(timed['duration_s']), 's')}; the grader slows each tokenizer call by {number(float(between[0]['paced_s'] or params.pace_s), 's')} "
            "to show it): tokenize and move the inputs before starting the timer.",
            expected=verdict.expected,
            found=verdict.found,
        )
    return verdict


def new_tokens_range(event: GenerateEvent) -> tuple[int, int]:
    """New tokens of every sequence of a generate call: (up to each one's end-of-text, every generated position).
    One sequence stops at its end-of-text, so the two agree; a batch's finished rows are padded to the longest."""
    rows = int((event["input_shape"] or [1])[0])
    width = int((event["output_shape"] or [0, 0])[-1]) - int((event["input_shape"] or [0, 0])[-1])
    width = max(width, 0)  # no output shape recorded (a generate that returned something else)
    counts = event["new_tokens"] or [width]
    return int(sum(counts)), rows * width


def span(low: object, high: object) -> str:
    """``low`` alone where it is ``high``, else "low to high"."""
    return str(low) if low == high else f"{low} to {high}"


def judge_new_tokens(reported: Any, timed: GenerateEvent, max_new_tokens: int) -> Verdict | None:
    """None if ``reported`` counts the new tokens the timed generate produced (every sequence of a batch; a
    sequence ends at its end-of-text); else the failed verdict, naming the usual ways to miscount."""
    low, high = new_tokens_range(timed)
    rows = int((timed["input_shape"] or [1])[0])
    if is_number(reported) and float(reported) == int(reported) and low <= int(reported) <= high:
        return None
    if rows == 1 and reported == max_new_tokens and low != max_new_tokens:
        message = (
            f"new_tokens assumes all {max_new_tokens} tokens were generated, but the model stopped after {low} "
            "(end-of-text): count the new tokens in the output (output length minus input length)."
        )
    else:
        first_only = rows > 1 and is_number(reported) and float(reported) <= high / rows
        why = f": it counts one sequence of the {rows}; count the new tokens of every sequence of the batch" if first_only else ""
        prompts = f" of {rows} prompts" if rows > 1 else ""
        message = f"new_tokens is {reported!r}, but the timed generate{prompts} produced {span(low, high)} new tokens{why}."
    return Verdict.failed(message, expected=span(low, high), found=repr(reported))


ABSENT: Any = object()  # a metric the function does not report (its check then judges the others)


def derived_agrees(reported: float, derive: Callable[[float], float], latency: float, tolerance: float) -> bool:
    """Whether a rate is ``derive(latency)``: computed from the latency before it was rounded to the precision it is
    reported with, and shown at its own precision; within 0.5 % (``tolerance`` where tighter) beyond that. A rate
    fudged by a percent or two, which a looser tolerance let through, is not."""
    strict = min(tolerance, 0.005)
    rounding = half_unit(latency)
    values = [derive(seconds) for seconds in (latency - rounding, latency, latency + rounding) if seconds > 0]
    low, high = min(values), max(values)
    margin = half_unit(reported)
    return low * (1 - strict) - margin <= reported <= high * (1 + strict) + margin


# The most runs whose every subset is tried as the runs a mean of rates averaged (2**12 subsets); past it, runs in a
# row (the last k, a window) only.
SUBSETS_UP_TO = 12


def _run_sets(count: int) -> list[tuple[int, ...]]:
    """The sets of runs (indices, two or more) a mean over repeats may have averaged: any, for a few runs; runs in a
    row, for many."""
    if count <= SUBSETS_UP_TO:
        return [combo for size in range(2, count + 1) for combo in itertools.combinations(range(count), size)]
    return [tuple(range(start, end)) for start in range(count) for end in range(start + 2, count + 1)]


def mean_of_rates(reported: float, tokens: float, latency: float, runs: Sequence[float], tolerance: float) -> bool:
    """Whether a rate is the mean of the rates of timed ``runs`` (their generate durations) whose mean latency is
    ``latency`` (each run's rate averaged, as error bars over repeats take it): no lower than the rate of the mean
    latency (a mean of rates never is), no higher than the mean of the rates of some set of the runs (those a warm-up
    left in) whose mean duration that latency reads (each timer read at least its run, and little more). A rate of the
    fastest run beside the mean latency is neither."""
    if len(runs) < 2 or any(run <= 0 for run in runs):
        return False
    strict, margin = min(tolerance, 0.005), half_unit(reported)
    if reported < tokens / (latency + half_unit(latency)) * (1 - strict) - margin:
        return False
    for chosen in _run_sets(len(runs)):
        durations = [runs[index] for index in chosen]
        mean = statistics.fmean(durations)
        if not mean - half_unit(latency) <= latency * (1 + strict) <= upper_bound(LatencyTolerance(), mean, ()):
            continue
        if reported <= statistics.fmean(tokens / run for run in durations) * (1 + strict) + margin:
            return True
    return False


def judge_measurement(
    tolerance: float, value: dict[str, Any], timed: Sequence[GenerateEvent], max_new_tokens: int
) -> Verdict | None:
    """None if a measuring function's metrics (new_tokens, latency_s, tokens_per_s, ms_per_token) count the new tokens
    of its last timed generate and derive its rates (see :func:`judge_rates`, the runs being its timed generates);
    else the failed verdict."""
    return judge_new_tokens(value["new_tokens"], timed[-1], max_new_tokens) or judge_rates(
        tolerance,
        float(value["latency_s"]),
        float(value["new_tokens"]),
        value["tokens_per_s"],
        value["ms_per_token"],
        runs=[float(event["duration_s"]) for event in timed],
    )


def judge_rates(
    tolerance: float,
    latency: float,
    tokens: float,
    tokens_per_s: Any,
    ms_per_token: Any = ABSENT,
    max_new_tokens: int = 0,
    runs: Sequence[float] = (),
) -> Verdict | None:
    """None if tokens_per_s (and ms_per_token, where reported) derive from ``tokens`` new tokens in ``latency``
    seconds, within ``tolerance`` (relative), or tokens_per_s is the mean of the rates of the timed ``runs`` (their
    generate durations; see :func:`mean_of_rates`); else the failed verdict. With ``max_new_tokens``, a rate that
    assumes every asked token was generated, when fewer were, is named."""
    expected_rate = tokens / latency
    shown = number(float(tokens_per_s)) if is_number(tokens_per_s) else kind_of(tokens_per_s)
    if not is_number(tokens_per_s) or not (
        derived_agrees(float(tokens_per_s), lambda seconds: tokens / seconds, latency, tolerance)
        or mean_of_rates(float(tokens_per_s), tokens, latency, runs, tolerance)
    ):
        if (
            max_new_tokens
            and tokens != max_new_tokens
            and is_number(tokens_per_s)
            and math.isclose(float(tokens_per_s), max_new_tokens / latency, rel_tol=tolerance)
        ):
            message = (
                f"tokens_per_s assumes all {max_new_tokens} tokens were generated, but the model stopped after {tokens:g} "
                "(end-of-text): count the new tokens in the output."
            )
        else:
            message = f"tokens_per_s is {shown}, but {tokens:g} new tokens in {number(latency, 's')} is {number(expected_rate)}."
        return Verdict.failed(message, expected=number(expected_rate), found=shown)
    if ms_per_token is ABSENT:
        return None
    expected_ms = 1000 * latency / max(tokens, 1)
    per_token = max(tokens, 1)
    if not is_number(ms_per_token) or not derived_agrees(
        float(ms_per_token), lambda seconds: 1000 * seconds / per_token, latency, tolerance
    ):
        seconds = is_number(ms_per_token) and math.isclose(float(ms_per_token), expected_ms / 1000, rel_tol=tolerance)
        shown = number(float(ms_per_token)) if is_number(ms_per_token) else kind_of(ms_per_token)
        return Verdict.failed(
            f"ms_per_token is {shown}, but {number(latency, 's')} over {tokens:g} tokens is {number(expected_ms)} ms"
            + (": it is in seconds; multiply by 1000." if seconds else "."),
            expected=number(expected_ms),
            found=shown,
        )
    return None


def warmup_before(events: list[GenerateEvent], timed: GenerateEvent) -> GenerateEvent | None:
    """The warm-up of ``timed``: an earlier generate that really generated tokens on the same model and device."""
    for event in events:
        if event is timed or float(event["end"]) > float(timed["start"]):
            continue
        same_model = event["model_serial"] == timed["model_serial"] and event["model_device"] == timed["model_device"]
        if same_model and generated_anything(event):
            return event
    return None


def _work(event: GenerateEvent) -> tuple[object, ...]:
    """What a generate did, to tell a repeat of the timed call from a warm-up: its model, its rows and its limit."""
    return (event["model_serial"], repr(event["rows"] or event["input_ids"]), event["new_tokens_limit"])


def timed_block(events: Sequence[GenerateEvent]) -> list[GenerateEvent]:
    """The generate calls a timer surrounds, as synchronising judges them: the last, and the repeats of its work just
    before it (a best-of-three timer's three); less the first of those where there are several and no other generate
    came before them: that one is the warm-up, of the same work (so a timer that repeats with no warm-up at all, which
    loses the warm-up's points, is held to a wait before its second repeat)."""
    block = [events[-1]]
    for event in reversed(events[:-1]):
        if _work(event) != _work(block[0]):
            break
        block.insert(0, event)
    return block[1:] if len(block) > 1 and len(block) == len(events) else block


def reported_latency(value: Any) -> float | None:
    """The latency a timing function returned, where it says which number that is: the value itself (a number), or
    the one entry of a returned dict whose key names a latency (``latency_s``, ``latency``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dict):
        numbers = [item for key, item in value.items() if "latency" in str(key).lower() and isinstance(item, (int, float))]
        if len(numbers) == 1 and not isinstance(numbers[0], bool):
            return float(numbers[0])
    return None


def timer_surrounds(events: Sequence[GenerateEvent], block: list[GenerateEvent], latency: float | None) -> list[GenerateEvent]:
    """``block`` grown back to the earlier generate calls that a reported ``latency`` also holds (a warm-up inside the
    timer: that mistake is the latency check's; the timer's waits are judged around what it really surrounds)."""
    if latency is None or not math.isfinite(latency) or latency <= max(latency_readings(block), default=0.0) * 1.02 + 0.002:
        return block  # what the block alone reads: its own waits are judged
    start = next(index for index, event in enumerate(events) if event is block[0])
    for index in range(start):
        covered = list(events[index:])
        total = sum(float(event["duration_s"]) for event in covered)
        span = float(covered[-1]["end"]) - float(covered[0]["start"])
        if total * 0.98 - 0.001 <= latency <= 2 * span + 0.05:
            return covered
    return block


def judge_synchronize(outcome: CallOutcome, function: str, latency: float | None = None) -> Verdict:
    """Whether the GPU is waited for right before the timed generate calls and right after them.

    Before: ``torch.cuda.synchronize()`` (or a stream's or CUDA event's ``synchronize``, or a CUDA event recorded: a
    timer of events starts in stream order) after any other generate call, the warm-up's included, has ended. After: a
    wait once the last timed generate has ended. A wait before the warm-up leaves the warm-up's work in the timer,
    unless the reported ``latency`` says the timer holds the warm-up too (one mistake, which the latency check takes)."""
    events = outcome.generate_events()
    if not events:
        return Verdict.failed(f"{function} never called model.generate.", found="no generate call")
    block = timer_surrounds(events, timed_block(events), latency)
    first, last = float(block[0]["start"]), float(block[-1]["end"])
    since = max((float(event["end"]) for event in events if float(event["end"]) <= first), default=float("-inf"))
    marks = [event for event in outcome.synchronize_events() if event["error"] is None]
    before = any(since <= float(mark["start"]) and float(mark["end"]) <= first for mark in marks)
    after = any(float(mark["start"]) >= last and mark["via"] != "Event.record" for mark in marks)
    if before and after:
        return Verdict.passed(f"{function} synchronises before and after the timed generate call on CUDA.")
    missing = " and ".join(where for where, ok in (("before", before), ("after", after)) if not ok)
    earlier = (
        " (one before the warm-up leaves the warm-up's GPU work inside the timer)" if not before and since > float("-inf") else ""
    )
    return Verdict.failed(
        f"On CUDA, {function} does not call torch.cuda.synchronize() {missing} the generate call{earlier}, so the timer "
        "can start before the GPU is idle or stop before it finishes.",
        expected="torch.cuda.synchronize() right before the timed model.generate (after the warm-up) and right after it",
        found=f"{len(marks)} synchronize call(s), none {missing}",
    )


class TimedGenerateParams(TargetParams):
    """How a function ``target(model, tokenizer, prompt, max_new_tokens, *more)`` that times a generate call is called."""

    model: str = Field("gpt2", description="Hub ID of the model.")
    prompts: list[str] = Field(min_length=1, description="Prompts; one is drawn from the hidden seed at grading time.")
    tokens: list[int] = Field(
        [20, 40], min_length=2, max_length=2, description="Range [low, high] of max_new_tokens, drawn with the prompt."
    )
    more: list[Any] = Field([], description="Further arguments after max_new_tokens, as JSON values (e.g. use_cache).")


@check_kind("timed_generate_synchronize", TimedGenerateParams)
def timed_generate_synchronize(context: CheckContext, params: TimedGenerateParams) -> Verdict:
    """On CUDA, the target calls torch.cuda.synchronize() before its timed (last) generate call and after it."""
    function = params.function
    rng = context.rng_for(f"{context.check.id}:cuda")
    prompt, max_new_tokens = rng.choice(params.prompts), rng.randint(*params.tokens)
    more = [literal(value) for value in params.more]
    outcome, returned = call_timed(context, function, params.model, prompt, max_new_tokens, *more, device="cuda")
    return judge_synchronize(outcome, function, reported_latency(returned))


def cuda_misuse(outcome: CallOutcome, function: str, on_cuda: bool) -> Verdict | None:
    """An error verdict when a call failed because it used CUDA on a CPU-only machine."""
    if outcome.status != "raised" or outcome.exception is None or on_cuda:
        return None
    text = f"{outcome.exception.message} {outcome.exception.traceback}"
    if "synchronize" not in text and "CUDA" not in text and "NVIDIA driver" not in text:
        return None
    return Verdict.error(
        f"{function} uses CUDA although the model is on the CPU ({outcome.exception}): "
        "call torch.cuda.synchronize() only when model.device.type == 'cuda'.",
        found=f"{outcome.exception.type} raised",
        details=(outcome.exception.traceback,) if outcome.exception.traceback else (),
    )


def contains_run(row: list[int], ids: list[int]) -> bool:
    """Whether ``ids`` occur in ``row`` as one contiguous run."""
    width = len(ids)
    return width > 0 and any(row[start : start + width] == ids for start in range(len(row) - width + 1))


def carries_prompt(reference_tokenizer: Any, row: list[int], prompt: str) -> bool:
    """Whether a generate row holds ``prompt``: its ids in a run (special tokens or a template around them
    allowed), or its text in the row's decoded text (a template may tokenize its edges differently)."""
    ids = list(reference_tokenizer(prompt, add_special_tokens=False)["input_ids"])
    if contains_run(row, ids):
        return True
    text = prompt.strip()
    return bool(text) and text in reference_tokenizer.decode(row, skip_special_tokens=True)


def row_text(reference_tokenizer: Any, row: list[int]) -> str:
    """What a generate row reads, for a failure message: its first 40 ids decoded, cut to 80 characters."""
    return str(reference_tokenizer.decode(row[:40], skip_special_tokens=True))[:80]


def match(options: Sequence[Sequence[int]]) -> dict[int, int]:
    """A largest matching of items to partners (``options[item]``: the partners it may take, each taken once), as
    {partner: item}."""
    owner: dict[int, int] = {}

    def assign(item: int, seen: set[int]) -> bool:
        for partner in options[item]:
            if partner not in seen:
                seen.add(partner)
                if partner not in owner or assign(owner[partner], seen):
                    owner[partner] = item
                    return True
        return False

    for item in range(len(options)):
        assign(item, set())
    return owner


def max_matching(fits: Sequence[Sequence[int]]) -> int:
    """The most items that can each be given a distinct partner they fit (``fits[item]``: partner indices)."""
    return len(match(fits))


def prompt_width(event: GenerateEvent) -> int:
    """The width of a generate call's input (its longest prompt's tokens, padding included); 0 when not recorded."""
    shape = event["input_shape"] or []
    return shape[-1] if shape and isinstance(shape[-1], int) else 0


def event_rows(event: GenerateEvent) -> list[list[int]] | None:
    """The recorded rows of a generate call (ids without padding), if the record holds well-formed ones."""
    rows = event["rows"]
    if not isinstance(rows, list) or not all(
        isinstance(row, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in row) for row in rows
    ):
        return None
    return rows


def judge_generate_inputs(
    reference_tokenizer: Any, event: GenerateEvent, prompts: list[str], max_new_tokens: int | None, function: str
) -> Verdict | None:
    """None if the generate call ran the prompts ``function`` was given (one row each, in any order) with
    the ``max_new_tokens`` it was given; else the failed verdict that names what differed.

    Hidden prompts are not shown: the message says what the generate call received instead.
    """
    rows = event_rows(event)
    if rows is None:
        return Verdict.failed(
            f"The generate call of {function} received no input ids the grader could read: pass the tokenized prompt "
            "(input_ids and attention_mask) to model.generate.",
            expected="input_ids of the prompt passed",
            found="no input_ids",
        )
    shape = event["input_shape"] or [len(rows)]
    received = int(shape[0]) if shape and isinstance(shape[0], int) else len(rows)
    if received != len(prompts):
        return Verdict.failed(
            f"{function} was given {len(prompts)} prompt(s), but its timed generate call received {received} row(s): "
            "generate from exactly the prompts passed to the function.",
            expected=f"{len(prompts)} row(s)",
            found=f"{received} row(s)",
        )
    fits = [[index for index, prompt in enumerate(prompts) if carries_prompt(reference_tokenizer, row, prompt)] for row in rows]
    if max_matching(fits) < len(rows):
        stray = next((row for row, fit in zip(rows, fits, strict=True) if not fit), rows[0])
        text = row_text(reference_tokenizer, stray)
        return Verdict.failed(
            f"The timed generate call of {function} did not run the prompt(s) it was given: a row reads {text!r}"
            f"{'...' if len(stray) > 40 else ''}. Tokenize the prompt argument itself, not a fixed or global prompt.",
            expected="the tokens of the prompt(s) passed",
            found=repr(text),
        )
    if max_new_tokens is None:
        return None
    limit = _recorded_limit(event)
    if limit is None:
        # No readable limit: at least no more tokens than asked may have been generated.
        output, inputs = event["output_shape"] or [0, 0], event["input_shape"] or [0, 0]
        limit = int(output[-1]) - int(inputs[-1]) if int(output[-1]) - int(inputs[-1]) > max_new_tokens else max_new_tokens
    if limit != max_new_tokens:
        return Verdict.failed(
            f"{function} was called with max_new_tokens={max_new_tokens}, but its timed generate call ran with a limit of "
            f"{limit} new tokens: pass the max_new_tokens argument to model.generate.",
            expected=f"max_new_tokens={max_new_tokens}",
            found=f"a limit of {limit} new tokens",
        )
    return None


def _recorded_limit(event: GenerateEvent) -> int | None:
    """The new-token limit the runtime recorded in force for a generate call (max_length less the
    prompt counts), if it is readable."""
    limit = event["new_tokens_limit"]
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


def tokens_limit(event: GenerateEvent) -> Any:
    """The new-token limit a generate call ran with, else its max_new_tokens."""
    limit = _recorded_limit(event)
    return limit if limit is not None else event["max_new_tokens"]
