"""Whether a call's records can be trusted: what the kernel reported, against what the grader measured itself.

The grader's runtime records events (generate calls, tokenizer calls, pacing) inside the student's own
process, where a notebook that has read the grader's source can reach and rewrite them. So every call's
records are checked against evidence from outside the kernel, which no notebook can change:

- the grader's own clock around the request (a recorded event cannot last longer than the request,
  and the pacing the events claim must have cost the grader that much wall-clock time);
- the pauses the grader served itself (the runtime asks for each on a FIFO and waits; the grader draws its
  length, holds the kernel and logs when): each must lie inside exactly one event, no event may hold one the
  grader did not serve or record a length of its own, and a call whose generate produced tokens must hold one
  (the runtime pauses the first such generate of every call). Where the kernel could only sleep its pacing
  itself, every paced event must carry exactly the length the grader asked for;
- the CPU time of the kernel's processes, read from /proc (generate calls that claim seconds of work on
  the CPU must have used a share of it: a forged or slept-through event uses none);
- a timeline of the kernel's main thread's CPU time, sampled by the grader every few milliseconds against
  the clock the kernel stamps its events with: each generate call on the CPU must have run while it
  claims to have, each pacing must have been slept while it claims to have been, and no event may lie
  outside the request;
- the price of a generated token on the model the grader passed, measured in the grader's own process
  (CPU time per new token of a greedy generate at batch size 1, the cheapest case): no generate call can
  produce its tokens in much less time by the clock, nor the kernel in much less CPU time;
- a fingerprint of the runtime read by a fresh probe after every call (grader/kernel/integrity.py),
  compared with the one read before any cell ran.

:func:`attribute_pauses` gives each event its served pause's length first. :func:`forgery` says in one sentence
what the records claim that the evidence rules out ("" when all is consistent): :func:`recorded_forgery` (clock,
pacing, integrity) or, failing that, :func:`scheduled_forgery`
(CPU time, which a busy enough machine can starve an honest call of: the harness calls again before it
believes this alone). A call it speaks against is *tampered*: its checks fail, and the result carries the flag.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from grader.kernel.protocol import (
    BypassEvent,
    Event,
    ForwardEvent,
    GenerateEvent,
    OnnxRunEvent,
    SynchronizeEvent,
    TokenizeEvent,
)

# The events stamped with a start and an end, and those that can hold a pacing pause.
Stamped = GenerateEvent | TokenizeEvent | SynchronizeEvent | ForwardEvent | OnnxRunEvent
Paced = GenerateEvent | TokenizeEvent

# The two clocks (grader's, kernel's) are both monotonic; this covers rounding and message latency.
CLOCK_SLACK_S = 0.05
# A served pause lies inside the event that records it (both clocks are the same monotonic one): the event began
# before the runtime asked, and ended after the grader released it. This covers rounding only.
PAUSE_SLACK_S = 0.002
# The least share of its wall-clock time a generate running on the CPU spends on the CPU, even on a
# machine whose every core is busy with other work (measured: benchmarks/evidence.py). The kernel's
# tree is charged for the whole request, so the bound is a floor with room to spare.
CPU_SHARE = 0.15
# Claimed CPU work below this is not judged against /proc: the request's own overhead hides it.
CPU_MIN_CLAIM_S = 0.25
# The timeline: a generate's compute interval at least this long is judged; the main thread must have run
# at least RUN_SHARE of it. A pacing interval must have been slept: the thread ran at most SLEEP_SHARE of it.
# TIMELINE_SLACK_S covers the samples' spacing at both ends of an interval. Measured (benchmarks/evidence.py):
# an honest generate's main thread ran 0.44 of its work's time at least on this 2-CPU machine with other work,
# 0.19 with a busy loop on each CPU as well (a forgery over a sleep: 0.00); an honest pacing, 0.02 at most.
RUN_MIN_INTERVAL_S = 0.03
RUN_SHARE = 0.05
SLEEP_SHARE = 0.5
TIMELINE_SLACK_S = 0.01
# A generate's tokens cost at least PRICE_SHARE of the grader's price per token (a batch of one, the shortest
# prompt, one thread): by the clock for each call, and in the kernel's CPU time for the whole request.
PRICE_SHARE = 0.3


@dataclass(frozen=True)
class Pause:
    """One pause the grader served: the runtime's sequence number for it (as it wrote it), and when the grader
    received the request and released the kernel, on its own monotonic clock (``time.perf_counter``)."""

    seq: str
    start: float
    end: float
    seconds: float  # the length the grader drew for it (the kernel was held at least this long)


@dataclass(frozen=True)
class Measured:
    """What the grader measured itself around one request into the kernel."""

    wall_s: float  # its own clock, from sending the request to the answer
    pace_s: float = 0.0  # the pacing it asked for
    cpu_s: float | None = None  # CPU seconds the kernel's processes used meanwhile (None: not readable here)
    altered: tuple[str, ...] = ()  # entries of the runtime's fingerprint that changed since it was installed
    # (grader's perf_counter, CPU seconds of the kernel's main thread) samples over the request, and the kernel's
    # clock origin on that same clock (events are stamped in seconds since it): empty / None where not readable.
    timeline: Sequence[tuple[float, float]] = field(default_factory=tuple)
    clock_origin: float | None = None
    token_price_s: float | None = None  # CPU seconds per generated token of the model passed (None: no price)
    # The pauses the grader served during the request (None: the kernel paced itself, having no channel to ask on).
    pauses: tuple[Pause, ...] | None = None
    # (grader's perf_counter, seconds the main thread ran or waited on a run queue to run) samples: a thread a busy
    # machine starves is runnable meanwhile, a thread that sleeps is not (empty where not readable).
    runnable: Sequence[tuple[float, float]] = field(default_factory=tuple)
    # Seconds the kernel's processes ran or waited on a run queue to run meanwhile (None: not readable here): on a
    # machine too busy to run them, what they waited makes up their share of the call's time; sleeping is neither.
    ready_s: float | None = None
    # The kernel's main thread (its native id, as events name their thread; None: unknown, every event is read as
    # the main thread's) and the other threads' samples, like ``timeline`` and ``runnable``: an event run in a worker
    # thread (a thread pool, a streamer) is judged by its own thread's samples, or not at all where it has none.
    main_thread: int | None = None
    thread_timelines: Mapping[int, Sequence[tuple[float, float]]] = field(default_factory=dict)
    thread_runnable: Mapping[int, Sequence[tuple[float, float]]] = field(default_factory=dict)

    def samples_of(self, event: Event) -> tuple[Sequence[tuple[float, float]], Sequence[tuple[float, float]]]:
        """The CPU samples (ran; ran or waited to run) of the thread an event ran in (empty: none were taken)."""
        thread = event.get("thread")
        if not self.off_main(event) or not isinstance(thread, int):
            return self.timeline, self.runnable
        return self.thread_timelines.get(thread, ()), self.thread_runnable.get(thread, ())

    def off_main(self, event: Event) -> bool:
        """Whether an event ran in a thread known to be another than the kernel's main thread."""
        thread = event.get("thread")
        return self.main_thread is not None and isinstance(thread, int) and thread != self.main_thread


class Timeline:
    """The main thread's CPU seconds at any time of the grader's clock, interpolated between samples."""

    def __init__(self, samples: Sequence[tuple[float, float]]) -> None:
        self.samples = sorted(samples)
        self.times = [moment for moment, _ in self.samples]

    def cpu_between(self, start: float, end: float) -> float:
        """CPU seconds the thread ran between two times."""
        return self._cpu_at(end) - self._cpu_at(start)

    def _cpu_at(self, moment: float) -> float:
        index = bisect.bisect_left(self.times, moment)
        if index <= 0:
            return self.samples[0][1]
        if index >= len(self.times):
            return self.samples[-1][1]
        (t0, c0), (t1, c1) = self.samples[index - 1], self.samples[index]
        return c0 + (c1 - c0) * (moment - t0) / (t1 - t0) if t1 > t0 else c1


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _is_paced(event: Event) -> TypeGuard[Paced]:
    return event["type"] in ("generate", "tokenize")


def _is_stamped(event: Event) -> TypeGuard[Stamped]:
    return event["type"] in ("generate", "tokenize", "synchronize", "forward", "onnx_run")


def _generates(events: Sequence[Event]) -> list[GenerateEvent]:
    return [event for event in events if event["type"] == "generate"]


def _paced_s(event: Event) -> float:
    return (_seconds(event["paced_s"]) or 0.0) if _is_paced(event) else 0.0


def produced_tokens(event: GenerateEvent) -> bool:
    """Whether a recorded generate call returned sequences longer than its prompt (what the runtime paces)."""
    output, inputs = event["output_shape"], event["input_shape"]
    if event["error"] or not isinstance(output, list) or not output:
        return False
    prompt = inputs[-1] if isinstance(inputs, list) and inputs else 0
    return isinstance(output[-1], int) and isinstance(prompt, int) and output[-1] > prompt


def generated_anything(event: GenerateEvent) -> bool:
    """Whether a recorded generate call returned and produced at least one new token (what a check counts)."""
    if event["error"]:
        return False
    counts = event["new_tokens"]
    if isinstance(counts, list) and counts:
        return any(isinstance(count, int) and count > 0 for count in counts)
    return produced_tokens(event)


def _overlapping(events: Sequence[Event]) -> tuple[Paced, Paced] | None:
    """Two generate or tokenizer events of one thread that overlap in time: the runtime records only the outermost of
    each, one after another on each thread, so only a forged stamp overlaps another of its thread (two threads may
    well run at once: a generate in a worker thread while the main thread tokenizes)."""
    threads: dict[Any, list[tuple[float, float, Paced]]] = {}
    for event in events:
        if _is_paced(event) and (start := _seconds(event["start"])) is not None and (end := _seconds(event["end"])) is not None:
            threads.setdefault(event.get("thread"), []).append((start, end, event))
    for stamped in threads.values():
        stamped.sort(key=lambda item: item[0])
        for (_, end, earlier), (start, _, later) in itertools.pairwise(stamped):
            if start < end - 0.001:
                return earlier, later
    return None


def attribute_pauses(events: Sequence[Event], measured: Measured) -> tuple[tuple[Event, ...], str]:
    """The call's events, each that holds a pause the grader served given that pause's length as ``paced_s``; and
    what in them contradicts the grader's log of the pauses it served ("" when nothing).

    The runtime records only that an event holds a pause (its number, ``pause``), never how long it lasted: the
    grader drew the length and held the kernel itself. So a recorded length is forged; every served pause must be
    held by exactly one event, which began before the grader received the request and ended after it released
    the kernel; and no event may hold a pause the grader did not serve. Events as they are where the kernel paced
    itself (``measured.pauses`` None).
    """
    if measured.pauses is None:
        return tuple(events), ""
    claimed = next((event for event in events if _is_paced(event) and event["paced_s"] is not None), None)
    if claimed is not None and _is_paced(claimed):
        return tuple(events), (
            f"a {claimed['type']} event records a length of pacing ({claimed['paced_s']!r}), "
            "which the grader's runtime never knows: the grader serves each pause and measures it itself"
        )
    served = {pause.seq: pause for pause in measured.pauses}
    held: set[str] = set()
    attributed: list[Event] = []
    for event in events:
        if not _is_paced(event) or event["pause"] is None:
            attributed.append(event)
            continue
        kind, seq = event["type"], str(event["pause"])[:32]
        pause = served.get(seq)
        if pause is None or seq in held:
            again = "again " if pause is not None else ""
            return tuple(events), f"a {kind} event records {again}a pause (number {seq}) that the grader did not serve"
        held.add(seq)
        start, end = _seconds(event["start"]), _seconds(event["end"])
        if measured.clock_origin is not None:
            origin = measured.clock_origin
            if (
                start is None
                or end is None
                or origin + start > pause.start + PAUSE_SLACK_S
                or origin + end < pause.end - PAUSE_SLACK_S
            ):
                return tuple(events), (
                    f"the grader held the kernel from {pause.start - origin:.3f} s to {pause.end - origin:.3f} s (by its clock), "
                    f"outside the {kind} event that records the pause ({start!r} to {end!r} s)"
                )
        held_event = event.copy()
        # How long the grader held the kernel, by its own clock: the length it drew, or more where its serving thread
        # was late to release it on a busy machine (the kernel slept that long too, and did no work meanwhile).
        held_event["paced_s"] = max(pause.seconds, pause.end - pause.start)
        attributed.append(held_event)
    if len(held) < len(served):
        return tuple(events), (
            f"the grader paused the kernel {len(measured.pauses)} time(s) during the call, but its records hold "
            f"{len(held)} of those pauses (events were removed, or a pause was asked for outside the instrumentation)"
        )
    return tuple(attributed), ""


def with_queue_waits(events: Sequence[Event], measured: Measured) -> tuple[Event, ...]:
    """The call's events, each generate given ``queued_s``: the seconds its thread waited on a run queue (ready to
    run, not running: the grader's samples of its ``schedstat``) between the generate before it, or the call's start,
    and the one after it, or the call's end, outside itself. A timer around the generate reads that wait as well on a
    machine too busy to run the kernel; work the notebook put inside the timer runs meanwhile and is not excused (a
    sleep waits on no run queue). Set by the grader on every generate event, 0.0 where its thread was not sampled: a
    value the kernel wrote is never kept."""
    generates = [event for event in events if _is_generate(event)]
    if not generates:
        return tuple(events)
    # The watched calls (a measuring function's): a timer inside one ends when it returns, so the gaps around a
    # generate are bounded by the innermost watched call holding it (not the next generate, seconds of other work on).
    watched = [
        (float(event["start"]), float(event["time"]))
        for event in events
        if event["type"] == "returned" and isinstance(event.get("start"), (int, float))
    ]
    queued: dict[int, float] = {}
    for event in generates:
        queued[id(event)] = 0.0
        if measured.clock_origin is None:
            continue
        holding = [(began, ended) for began, ended in watched if began <= float(event["start"]) and float(event["end"]) <= ended]
        bounds = min(holding, key=lambda interval: interval[1] - interval[0]) if holding else None
        same = [other for other in generates if other.get("thread") == event.get("thread")]
        samples, runnable = measured.samples_of(event)
        queued[id(event)] = _gap_waits(samples, runnable, event, same, bounds, measured.clock_origin)
        if measured.off_main(event):
            # Run in a worker thread (a thread pool, a streamer) that the main thread started and joins: a timer on
            # the main thread also reads the main thread's own waits to run around it (to start the worker, to wake
            # from the join), which the worker's samples do not hold.
            queued[id(event)] += _gap_waits(measured.timeline, measured.runnable, event, generates, bounds, measured.clock_origin)
    result: list[Event] = []
    for item in events:
        if _is_generate(item):
            given = item.copy()
            given["queued_s"] = queued[id(item)]
            result.append(given)
        else:
            result.append(item)
    return tuple(result)


def _gap_waits(
    samples: Sequence[tuple[float, float]],
    runnable: Sequence[tuple[float, float]],
    event: GenerateEvent,
    neighbours: Sequence[GenerateEvent],
    bounds: tuple[float, float] | None,
    origin: float,
) -> float:
    """Seconds a thread (its samples) waited to run between the last of ``neighbours`` to end before ``event`` (or its
    first sample, or the start of the watched call holding it: ``bounds``, kernel clock) and ``event``'s start, and
    between ``event``'s end and the first to start after it (or its last sample, or the watched call's end)."""
    if len(samples) < 2 or len(runnable) < 2:
        return 0.0
    ran, ready = Timeline(samples), Timeline(runnable)
    start, end = float(event["start"]), float(event["end"])
    before = max((origin + float(other["end"]) for other in neighbours if float(other["end"]) <= start), default=ran.times[0])
    after = min((origin + float(other["start"]) for other in neighbours if float(other["start"]) >= end), default=ran.times[-1])
    if bounds is not None:
        before, after = max(before, origin + bounds[0]), min(after, origin + bounds[1])
    return _waited(ran, ready, before, origin + start) + _waited(ran, ready, origin + end, after)


def _is_generate(event: Event) -> TypeGuard[GenerateEvent]:
    return event["type"] == "generate"


def _waited(ran: Timeline, ready: Timeline, start: float, end: float) -> float:
    """Seconds a thread was ready to run and not running between two times (0 where they are out of order)."""
    return max(0.0, ready.cpu_between(start, end) - ran.cpu_between(start, end)) if end > start else 0.0


def forgery(duration_s: Any, events: Sequence[Event], measured: Measured) -> str:
    """What a call's records claim that the grader's own measurements rule out; "" when they agree."""
    return recorded_forgery(duration_s, events, measured) or scheduled_forgery(events, measured)


def altered_runtime(measured: Measured) -> str:
    """What the integrity probe found changed in the runtime ("" when nothing): said first, since every record
    made after is the changed runtime's."""
    return altered_message(measured.altered)


def altered_message(altered: Sequence[str]) -> str:
    """What changed in the runtime, as a sentence ("" when nothing)."""
    if not altered:
        return ""
    shown = ", ".join(altered[:4]) + (f" and {len(altered) - 4} more" if len(altered) > 4 else "")
    return f"the notebook changed the grader's instrumentation in the kernel ({shown})"


def recorded_forgery(duration_s: Any, events: Sequence[Event], measured: Measured) -> str:
    """What the records claim that the grader's clock, its pacing and the runtime's integrity rule out: the same
    records give the same answer however busy the machine was."""
    changed = altered_runtime(measured)
    if changed:
        return changed
    bypass: BypassEvent | None = next((event for event in events if event["type"] == "bypass"), None)
    if bypass is not None:
        return (
            f"a generation loop (GenerationMixin.{bypass['method']}) ran outside the grader's instrumented generate: "
            "generate was called around the instrumentation"
        )
    unlooped = next(
        (event for event in _generates(events) if generated_anything(event) and not _count(event["decoding_loops"])),
        None,
    )
    if unlooped is not None:
        return (
            "a generate event records new tokens, but no decoding loop ran inside it: the instrumented generate did not record it"
        )
    replaced = next((event for event in _generates(events) if event["instrumentation_replaced"]), None)
    if replaced is not None:
        names = ", ".join(map(str, replaced["instrumentation_replaced"]))
        return f"a generate call ran while the grader's instrumentation was replaced ({names})"
    ceiling = measured.wall_s + CLOCK_SLACK_S
    claims = [("the call", duration_s)] + [("a generate event", event["duration_s"]) for event in _generates(events)]
    for name, value in claims:
        seconds = _seconds(value)
        if seconds is not None and not 0 <= seconds <= ceiling:
            return f"{name} took {seconds:.3f} s by the kernel's records, in a request of {measured.wall_s:.3f} s by the grader's clock"
    paced = [seconds for event in events if (seconds := _paced_s(event)) > 0]
    if sum(paced) > ceiling:
        return f"the records claim {sum(paced):.3f} s of pacing in a request of {measured.wall_s:.3f} s by the grader's clock"
    for event in filter(_is_paced, events):
        paced_s, start, end = _paced_s(event), _seconds(event["start"]), _seconds(event["end"])
        if paced_s and start is not None and end is not None and end - start < paced_s - CLOCK_SLACK_S / 5:
            return (
                f"a {event['type']} event records {paced_s:.3f} s of pacing but lasted {end - start:.3f} s "
                "(the pacing was not slept)"
            )
    if measured.pace_s > 0:
        # Where the kernel paced itself, it slept the one length the grader asked for; served pauses are checked
        # against the grader's own log (attribute_pauses).
        if measured.pauses is None:
            wrong = next((seconds for seconds in paced if abs(seconds - measured.pace_s) > 1e-6), None)
            if wrong is not None:
                return f"an event records {wrong:.3f} s of pacing, but the grader asked for {measured.pace_s:.3f} s"
        generates = sorted(
            (event for event in _generates(events) if produced_tokens(event) or generated_anything(event)),
            key=lambda event: _seconds(event["start"]) or 0.0,
        )
        if generates and not _seconds(generates[0]["paced_s"]):
            return "a generate call produced tokens without the pacing the grader asked for (it was switched off)"
    overlap = _overlapping(events)
    if overlap is not None:
        earlier, later = overlap
        return f"a {later['type']} event is stamped inside a {earlier['type']} event (the runtime records them one after another)"
    return ""


def scheduled_forgery(events: Sequence[Event], measured: Measured) -> str:
    """What the kernel's CPU time rules out (the main thread's timeline, the price of a token, the tree's share):
    evidence that a machine busy enough can starve an honest call of, so the grader measures a call again before
    it rules on this alone (grader/kernel/harness.py); a forgery repeats, a scheduling accident does not."""
    timeline = _timeline(events, measured)
    if timeline:
        return timeline
    priced = _priced(events, measured)
    if priced:
        return priced
    if measured.cpu_s is not None:
        claimed = sum(
            max(0.0, (_seconds(event["duration_s"]) or 0.0) - _paced_s(event))
            for event in _generates(events)
            if event["model_device"].startswith("cpu")
        )
        # What ran, or was ready to run and waited for a CPU (a kernel starved by a busy machine: seen in the full
        # suite, an honest generate of 1.03 s in which its kernel ran 0.057 s).
        ready = measured.ready_s if measured.ready_s is not None else measured.cpu_s
        if claimed >= CPU_MIN_CLAIM_S and ready < CPU_SHARE * claimed:
            waited = f" and waited {ready - measured.cpu_s:.3f} s to run" if ready > measured.cpu_s else ""
            return (
                f"its generate calls on the CPU claim {claimed:.3f} s of work, but the kernel used {measured.cpu_s:.3f} s "
                f"of CPU{waited} during the whole call (read by the grader from /proc)"
            )
    return ""


def work_and_pause(event: Stamped, origin: float = 0.0) -> tuple[tuple[float, float], tuple[float, float]]:
    """An event's work and its pacing, as (start, end) intervals on the clock ``origin`` gives its times from.

    The runtime sleeps a generate's pacing after it returns, a tokenizer call's before it runs.
    """
    start, end = origin + float(event["start"]), origin + float(event["end"])
    paced = _paced_s(event)
    if event["type"] == "generate":
        return (start, end - paced), (end - paced, end)
    return (start + paced, end), (start, start + paced)


def _timeline(events: Sequence[Event], measured: Measured) -> str:
    """What the sampled CPU time of each event's thread rules out of the events' own times ("" when nothing)."""
    if measured.clock_origin is None or len(measured.timeline) < 2:
        return ""
    main = Timeline(measured.timeline)
    first, last = main.times[0], main.times[-1]
    for event in filter(_is_stamped, events):
        start, end = _seconds(event["start"]), _seconds(event["end"])
        if start is None or end is None:
            continue
        if measured.clock_origin + start < first - CLOCK_SLACK_S or measured.clock_origin + end > last + CLOCK_SLACK_S:
            return f"a {event['type']} event is stamped outside the request, by the grader's clock"
        samples, runnable_samples = measured.samples_of(event)
        if len(samples) < 2:
            continue  # a thread the grader did not see (it began and ended between two samples): no evidence
        timeline = Timeline(samples)
        runnable_timeline = Timeline(runnable_samples) if len(runnable_samples) >= 2 else None
        if not _covers(timeline, measured.clock_origin + start, measured.clock_origin + end):
            continue  # the thread's samples do not span the event (it started or ended inside it): no evidence
        paced = _paced_s(event)
        compute, sleep = work_and_pause(event, measured.clock_origin)
        if paced > 2 * TIMELINE_SLACK_S:
            ran = timeline.cpu_between(*sleep)
            if ran > SLEEP_SHARE * paced + TIMELINE_SLACK_S:
                return (
                    f"the pacing a {event['type']} event records ({paced:.3f} s) was not slept: the kernel's main thread "
                    f"ran {ran:.3f} s of it (sampled by the grader from /proc)"
                )
        length = compute[1] - compute[0]
        if event["type"] == "generate" and _torch_on_cpu(event) and not event["error"] and length >= RUN_MIN_INTERVAL_S:
            ran = timeline.cpu_between(*compute)
            # Starved, not asleep: the time it waited on a run queue counts (an overloaded machine, not a forgery).
            runnable = runnable_timeline.cpu_between(*compute) if runnable_timeline is not None else ran
            if runnable < RUN_SHARE * length - TIMELINE_SLACK_S * RUN_SHARE:
                which = "main thread" if samples is measured.timeline else f"thread {event['thread']}"
                return (
                    f"a generate call claims {length:.3f} s of work on the CPU, during which the kernel's {which} ran "
                    f"{ran:.3f} s (sampled by the grader from /proc)"
                )
    return ""


def _covers(timeline: Timeline, start: float, end: float) -> bool:
    """Whether a thread's samples span an interval (the thread lived, and was sampled, from before it to after it)."""
    return timeline.times[0] <= start + TIMELINE_SLACK_S and timeline.times[-1] >= end - TIMELINE_SLACK_S


def _torch_on_cpu(event: GenerateEvent) -> bool:
    """Whether a generate ran a PyTorch model on the CPU: its work then runs on the calling thread (and its tokens
    have the grader's price). An ONNX Runtime session computes on threads of its own while the caller waits, and a
    GPU's work is not the kernel's CPU time."""
    return str(event["model_device"]).startswith("cpu") and str(event["model_type"]).startswith("transformers.")


def decoding_steps(event: GenerateEvent) -> int:
    """The new tokens a generate call produced for its longest row (what its loop had to run)."""
    counts = event["new_tokens"]
    if isinstance(counts, list) and counts and all(isinstance(count, int) and not isinstance(count, bool) for count in counts):
        return max(counts)
    if produced_tokens(event):
        return int((event["output_shape"] or [0])[-1]) - int((event["input_shape"] or [0])[-1])
    return 0


def _priced(events: Sequence[Event], measured: Measured) -> str:
    """What the price of a token on this machine rules out: tokens made faster than the model can make them."""
    price = measured.token_price_s
    if not price:
        return ""
    total = 0
    for event in _generates(events):
        if event["error"] or not _torch_on_cpu(event):
            continue  # priced on PyTorch models only: an ONNX Runtime model's tokens may cost less
        steps = decoding_steps(event)
        total += steps
        work = (_seconds(event["duration_s"]) or 0.0) - _paced_s(event)
        if steps >= 2 and work < PRICE_SHARE * steps * price:
            return (
                f"a generate call claims {steps} new tokens in {work * 1000:.1f} ms, but this model needs "
                f"{steps * price * 1000:.1f} ms of CPU for them on this machine (measured by the grader)"
            )
    if measured.cpu_s is not None and total >= 2 and measured.cpu_s < PRICE_SHARE * total * price - 0.002:
        return (
            f"its generate calls claim {total} new tokens, {total * price * 1000:.1f} ms of CPU for this model on this "
            f"machine, but the kernel used {measured.cpu_s * 1000:.1f} ms of CPU during the whole call (read from /proc)"
        )
    return ""
