"""The grader's evidence against a call's records (grader/kernel/evidence.py), on made-up events: fast, no kernel.

Each forgery a notebook that read the grader's source can write into its own kernel's records must be ruled
out by what the grader measures itself; an honest call's records, on an idle or a loaded machine, never are.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from grader.checks.timing import LatencyTolerance, judge_latency
from grader.kernel.evidence import (
    CPU_MIN_CLAIM_S,
    Measured,
    Pause,
    attribute_pauses,
    forgery,
    produced_tokens,
    recorded_forgery,
    scheduled_forgery,
    with_queue_waits,
)
from tests.events import event, generate_event, tokenize_event

PACE = 0.2437


def generate(start: float, duration: float, paced: float | None = None, device: str = "cpu", **fields: Any) -> Any:
    made = {"start": start, "duration_s": duration, "output_shape": [1, 29], "model_device": device, "paced_s": paced}
    return generate_event(**{**made, **fields})


def tokenize(start: float, paced: float = PACE) -> Any:
    return tokenize_event(start, start + paced + 0.001, paced_s=paced)


def honest() -> list[dict[str, Any]]:
    """Tokenize (paced), a warm-up generate (paced), the timed generate."""
    return [tokenize(0.0), generate(0.3, 0.08 + PACE, paced=PACE), generate(0.7, 0.08)]


def test_an_honest_paced_call_is_trusted_idle_and_loaded() -> None:
    assert forgery(1.0, honest(), Measured(wall_s=1.02, pace_s=PACE, cpu_s=0.2)) == ""
    # Loaded: the same work takes three times as long by the clock, with the same CPU time.
    loaded = [tokenize(0.0), generate(0.3, 0.24 + PACE, paced=PACE), generate(0.9, 0.24)]
    assert forgery(1.4, loaded, Measured(wall_s=1.45, pace_s=PACE, cpu_s=0.16)) == ""


def test_a_changed_runtime_is_named() -> None:
    why = forgery(1.0, honest(), Measured(1.02, PACE, 0.2, altered=("runtime._sleep", "recorder.pace_s")))
    assert why.startswith("the notebook changed the grader's instrumentation in the kernel (runtime._sleep, recorder.pace_s")


def test_an_event_longer_than_the_request_is_ruled_out() -> None:
    why = forgery(0.5, [generate(0.0, 30.0, paced=PACE)], Measured(0.6, PACE))
    assert "a generate event took 30.000 s by the kernel's records, in a request of 0.600 s" in why


def test_pacing_the_grader_did_not_wait_for_is_ruled_out() -> None:
    """A no-op sleep patched into the runtime: the events claim pacing the grader's clock never saw."""
    slept_through = [tokenize(0.0, paced=PACE), generate(0.01, 0.09, paced=PACE), generate(0.11, 0.08)]
    slept_through[0]["end"] = 0.01
    why = forgery(0.2, slept_through, Measured(0.25, PACE, 0.2))
    assert why == f"the records claim {2 * PACE:.3f} s of pacing in a request of 0.250 s by the grader's clock"


def test_pacing_other_than_asked_is_ruled_out() -> None:
    events = [tokenize(0.0, paced=0.001), generate(0.01, 0.09, paced=0.001), generate(0.2, 0.08)]
    assert forgery(0.3, events, Measured(0.35, PACE, 0.2)) == (
        f"an event records 0.001 s of pacing, but the grader asked for {PACE:.3f} s"
    )


def test_tokens_generated_without_pacing_show_it_was_switched_off() -> None:
    """pace_s set to 0 in the kernel: nothing is paced or recorded as paced, yet generate produced tokens."""
    events = [generate(0.0, 0.08), generate(0.1, 0.08)]
    assert "produced tokens without the pacing" in forgery(0.2, events, Measured(0.25, PACE, 0.2))
    # Not paced either when no pacing was asked, or when generate produced nothing (the runtime paces neither).
    assert forgery(0.2, events, Measured(0.25, 0.0, 0.2)) == ""
    empty = [generate(0.0, 0.08, output_shape=[1, 5]), generate(0.1, 0.01, error="ValueError: no")]
    assert forgery(0.2, empty, Measured(0.25, PACE, 0.2)) == ""


def test_generate_work_the_kernel_never_did_on_the_cpu_is_ruled_out() -> None:
    """Forged events that sleep for the time they claim: the grader's clock agrees, /proc does not."""
    events = [generate(0.0, 0.3 + PACE, paced=PACE), generate(0.6, 0.3)]
    why = forgery(0.9, events, Measured(0.95, PACE, cpu_s=0.02))
    assert why.startswith("its generate calls on the CPU claim 0.600 s of work, but the kernel used 0.020 s of CPU")
    assert forgery(0.9, events, Measured(0.95, PACE, cpu_s=None)) == ""  # /proc not readable here: not judged
    on_gpu = [generate(0.0, 0.3 + PACE, paced=PACE, device="cuda:0"), generate(0.6, 0.3, device="cuda:0")]
    assert forgery(0.9, on_gpu, Measured(0.95, PACE, cpu_s=0.02)) == ""  # a GPU's work is not the kernel's CPU time


def test_a_kernel_starved_by_a_busy_machine_waited_to_run_and_is_not_a_forgery() -> None:
    """Seen in the full suite (two pytest workers, each grading with workers that overlap notebooks and checks): an
    honest generate of 1.03 s in which the kernel ran 0.057 s. A starved kernel waits on a run queue meanwhile; one
    that sleeps through its claimed work does not, however busy the machine."""
    events = [generate(0.0, 0.3 + PACE, paced=PACE), generate(0.6, 0.3)]
    assert forgery(0.9, events, Measured(0.95, PACE, cpu_s=0.02, ready_s=0.62)) == ""
    slept = forgery(0.9, events, Measured(0.95, PACE, cpu_s=0.02, ready_s=0.05))
    assert slept.startswith("its generate calls on the CPU claim 0.600 s of work, but the kernel used 0.020 s of CPU and ")
    assert "waited 0.030 s to run" in slept


@pytest.mark.parametrize("claim", [CPU_MIN_CLAIM_S * 0.9, 0.05])
def test_claims_too_small_for_proc_are_left_to_the_other_evidence(claim: float) -> None:
    assert forgery(0.5, [generate(0.0, claim + PACE, paced=PACE)], Measured(0.55, PACE, cpu_s=0.0)) == ""


def test_produced_tokens_reads_shapes_as_the_runtime_paces() -> None:
    assert produced_tokens(generate_event(input_shape=[2, 5], output_shape=[2, 7]))
    assert not produced_tokens(generate_event(input_shape=[2, 5], output_shape=[2, 5]))
    assert not produced_tokens(generate_event(input_shape=[2, 5], output_shape=[2, 7], error="RuntimeError: x"))
    assert not produced_tokens(generate_event(valid=False, output_shape="forged"))


ORIGIN = 1000.0  # the kernel's clock origin on the grader's clock


def timeline(*spans: tuple[float, float, float]) -> list[tuple[float, float]]:
    """Samples every 4 ms over (start, end, share of the CPU the main thread got), in the kernel's seconds."""
    samples, cpu = [], 0.0
    for start, end, share in spans:
        moment = start
        while moment < end:
            samples.append((ORIGIN + moment, cpu))
            cpu += 0.004 * share
            moment += 0.004
    return samples


def honest_timeline(share: float = 0.9) -> list[tuple[float, float]]:
    """honest(): the tokenizer sleeps its pacing then runs, the warm-up runs then sleeps, the timed call runs."""
    return timeline(
        (-0.01, 0.0, share),
        (0.0, PACE, 0.0),
        (PACE, 0.3, share),
        (0.3, 0.38, share),
        (0.38, 0.38 + PACE, 0.0),
        (0.38 + PACE, 0.81, share),
    )


def test_an_honest_timeline_is_trusted_idle_and_loaded() -> None:
    for share in (0.9, 0.3):
        measured = Measured(1.0, PACE, 0.3, timeline=honest_timeline(share), clock_origin=ORIGIN)
        assert forgery(0.8, honest(), measured) == ""


def slept_through() -> tuple[list[dict[str, Any]], Measured]:
    """A timed generate's events stamped over a time.sleep: the grader's clock agrees, the thread's CPU time does not."""
    events = [tokenize(0.0), generate(0.3, 0.3 + PACE, paced=PACE), generate(0.9, 0.3)]
    measured = Measured(
        1.3,
        PACE,
        0.6,
        timeline=timeline((-0.01, 0.0, 0.9), (0.0, PACE, 0.0), (PACE, 0.3, 0.9), (0.3, 1.25, 0.0)),
        clock_origin=ORIGIN,
    )
    return events, measured


def test_generate_work_while_the_main_thread_slept_is_ruled_out() -> None:
    """Events stamped over a time.sleep: the grader's clock agrees, the thread's CPU time does not."""
    events, measured = slept_through()
    why = forgery(1.2, events, measured)
    assert why.startswith("a generate call claims 0.300 s of work on the CPU, during which the kernel's main thread ran 0.000 s")


def test_a_generate_starved_by_a_busy_machine_is_not_a_forgery_but_one_that_slept_still_is() -> None:
    """A loaded machine can hold an honest generate's thread on a run queue for most of its time (the full suite, run
    beside an install, starved one to 2.6 % of 0.78 s): /proc counts that wait, and a thread asleep does not wait."""
    events, slept = slept_through()
    spans = ((-0.01, 0.0, 0.9), (0.0, PACE, 0.0), (PACE, 0.3, 0.9))
    starved = dataclasses.replace(
        slept,
        timeline=timeline(*spans, (0.3, 1.25, 0.02)),  # it ran 2 % of the generate's time ...
        runnable=timeline(*spans, (0.3, 1.25, 0.98)),  # ... and waited on a run queue for the rest
    )
    assert forgery(1.2, events, starved) == ""
    asleep = dataclasses.replace(slept, runnable=timeline(*spans, (0.3, 1.25, 0.0)))
    assert forgery(1.2, events, asleep).startswith("a generate call claims 0.300 s of work on the CPU")


def test_pacing_the_main_thread_did_not_sleep_through_is_ruled_out() -> None:
    """Stamps moved so each event lasts its pacing, but the thread was computing all along."""
    measured = Measured(1.0, PACE, 0.8, timeline=timeline((-0.01, 0.85, 0.9)), clock_origin=ORIGIN)
    assert forgery(0.8, honest(), measured).startswith(
        f"the pacing a tokenize event records ({PACE:.3f} s) was not slept: the kernel's main thread ran"
    )


def test_an_event_stamped_outside_the_request_is_ruled_out() -> None:
    events = [*honest(), generate(50.0, 0.08)]
    measured = Measured(1.0, PACE, 0.3, timeline=honest_timeline(), clock_origin=ORIGIN)
    assert forgery(0.8, events, measured) == "a generate event is stamped outside the request, by the grader's clock"


def test_pacing_an_event_did_not_last_is_ruled_out() -> None:
    events = [tokenize(0.0), generate(0.3, 0.09, paced=PACE), generate(0.5, 0.08)]
    events[0]["end"] = 0.002
    assert forgery(0.7, events, Measured(1.0, PACE, 0.3)) == (
        f"a tokenize event records {PACE:.3f} s of pacing but lasted 0.002 s (the pacing was not slept)"
    )


def test_a_forged_warm_up_the_runtime_would_have_paced_is_ruled_out() -> None:
    """A warm-up event pushed into the recorder with token counts only (no shapes), then an honest timed call."""
    forged = generate_event(start=0.0, end=0.02, new_tokens=[4], input_shape=None, output_shape=None)
    events = [forged, tokenize(0.05), generate(0.3, 0.08 + PACE, paced=PACE)]
    assert "produced tokens without the pacing" in forgery(0.7, events, Measured(1.0, PACE, 0.3))


def test_an_event_stamped_inside_another_is_ruled_out() -> None:
    """A forged warm-up laid over the tokenizer's real pacing, so the thread really slept while it claims to."""
    forged = generate(0.0, PACE + 0.001, paced=PACE)
    events = [forged, tokenize(0.0), generate(0.4, 0.08)]
    assert forgery(0.6, events, Measured(1.0, PACE, 0.3)) == (
        "a tokenize event is stamped inside a generate event (the runtime records them one after another)"
    )


PRICE = 0.0015  # CPU seconds per token of the model passed, as the grader measured it


def test_tokens_made_faster_than_the_model_can_make_them_are_ruled_out() -> None:
    """A forged timed call of 24 tokens in 8 ms (under the clock's slack), with the pacing really slept."""
    events = [tokenize(0.0), generate(0.3, 0.004 + PACE, paced=PACE, new_tokens=[4]), generate(0.6, 0.008, new_tokens=[24])]
    assert forgery(0.7, events, Measured(0.75, PACE, 0.2, token_price_s=PRICE)) == (
        "a generate call claims 24 new tokens in 8.0 ms, but this model needs 36.0 ms of CPU for them on this machine "
        "(measured by the grader)"
    )
    # Honest: each call at least as long as its tokens' price, and the kernel's CPU covers them.
    honest_calls = [tokenize(0.0), generate(0.3, 0.007 + PACE, paced=PACE, new_tokens=[4]), generate(0.6, 0.04, new_tokens=[24])]
    assert forgery(0.7, honest_calls, Measured(0.75, PACE, 0.05, token_price_s=PRICE)) == ""


def test_tokens_the_kernel_never_spent_cpu_on_are_ruled_out() -> None:
    """Plausible durations, slept through: the kernel's CPU over the call is far below what the tokens cost."""
    events = [tokenize(0.0), generate(0.3, 0.01 + PACE, paced=PACE, new_tokens=[4]), generate(0.6, 0.04, new_tokens=[24])]
    why = forgery(0.7, events, Measured(0.75, PACE, 0.004, token_price_s=PRICE))
    assert why == (
        "its generate calls claim 28 new tokens, 42.0 ms of CPU for this model on this machine, but the kernel used "
        "4.0 ms of CPU during the whole call (read from /proc)"
    )
    assert forgery(0.7, events, Measured(0.75, PACE, 0.004)) == ""  # no price (no model passed): not judged


def test_a_generate_called_around_the_instrumentation_is_ruled_out() -> None:
    """The original generate taken from the wrapper's closure: its decoding loop still reports itself."""
    events = [event("bypass", method="_sample", time=0.1), *honest()]
    assert forgery(0.8, events, Measured(1.0, PACE, 0.3)) == (
        "a generation loop (GenerationMixin._sample) ran outside the grader's instrumented generate: generate was "
        "called around the instrumentation"
    )


def test_a_generate_run_while_a_wrapper_was_swapped_out_is_ruled_out() -> None:
    """The tokenizer's original methods put back for the call (and restored before the probe could see)."""
    events = honest()
    events[2]["instrumentation_replaced"] = ["PreTrainedTokenizerBase.__call__"]
    assert forgery(0.8, events, Measured(1.0, PACE, 0.3)) == (
        "a generate call ran while the grader's instrumentation was replaced (PreTrainedTokenizerBase.__call__)"
    )


def test_a_generate_event_no_decoding_loop_ran_in_is_ruled_out() -> None:
    """A forged event, pacing and all, pushed into the recorder: the instrumented generate never counted a loop in it."""
    forged = generate(0.3, 0.02 + PACE, paced=PACE)
    forged["decoding_loops"] = 0
    events = [tokenize(0.0), forged, generate(0.6, 0.08)]
    assert forgery(0.7, events, Measured(1.0, PACE, 0.3)) == (
        "a generate event records new tokens, but no decoding loop ran inside it: the instrumented generate did not record it"
    )


def test_an_onnx_runtime_generate_computes_off_the_main_thread() -> None:
    """ONNX Runtime runs its session on threads of its own: the caller waits, idle, and is not ruled out for it."""
    ort = "optimum.onnxruntime.modeling_decoder.ORTModelForCausalLM"
    events = [tokenize(0.0), generate(0.3, 0.3 + PACE, paced=PACE, model_type=ort), generate(0.9, 0.3, model_type=ort)]
    idle = timeline((-0.01, 0.0, 0.9), (0.0, 1.25, 0.02))
    assert forgery(1.2, events, Measured(1.3, PACE, 0.6, timeline=idle, clock_origin=ORIGIN, token_price_s=0.01)) == ""
    torch_events = [tokenize(0.0), generate(0.3, 0.3 + PACE, paced=PACE), generate(0.9, 0.3)]
    assert "main thread ran" in forgery(1.2, torch_events, Measured(1.3, PACE, 0.6, timeline=idle, clock_origin=ORIGIN))


def test_what_cpu_time_alone_rules_out_is_told_apart_from_the_records_own_contradictions() -> None:
    """The harness calls again before ruling on CPU time alone (a busy machine can starve an honest call); what the
    records contradict by the grader's clock, pacing or integrity does not depend on the machine's load."""
    starved, measured = slept_through()  # as a forgery over a sleep, or an honest call starved of CPU, shows
    assert recorded_forgery(1.2, starved, measured) == ""
    assert scheduled_forgery(starved, measured) == forgery(1.2, starved, measured) != ""
    priced = [tokenize(0.0), generate(0.3, 0.004 + PACE, paced=PACE, new_tokens=[4]), generate(0.6, 0.008, new_tokens=[24])]
    assert recorded_forgery(0.7, priced, Measured(0.75, PACE, 0.2, token_price_s=PRICE)) == ""
    assert scheduled_forgery(priced, Measured(0.75, PACE, 0.2, token_price_s=PRICE)) != ""
    # The records' own contradictions: the same answer whatever the CPU time says.
    altered = Measured(1.02, PACE, 0.2, altered=("runtime._sleep",))
    assert recorded_forgery(1.0, honest(), altered) == forgery(1.0, honest(), altered) != ""
    assert recorded_forgery(0.5, [generate(0.0, 30.0, paced=PACE)], Measured(0.6, PACE)) != ""


# ---------------------------------------------------------------- pauses the grader served (attribute_pauses)


def served_call() -> tuple[list[dict[str, Any]], tuple[Pause, ...]]:
    """Tokenize and warm-up each holding a pause the grader served (the runtime records its number, not its length),
    then the timed generate; and the grader's log of those pauses, on its clock (the kernel's origin at ORIGIN)."""
    events = [
        tokenize_event(0.0, 0.2512, pause=1),
        generate(0.3, 0.08 + 0.2801, pause=2),
        generate(0.7, 0.08),
    ]
    pauses = (Pause("1", ORIGIN + 0.0004, ORIGIN + 0.2508, 0.2503), Pause("2", ORIGIN + 0.3803, ORIGIN + 0.6598, 0.2793))
    return events, pauses


def served(pauses: tuple[Pause, ...]) -> Measured:
    return Measured(1.02, 0.25, 0.2, clock_origin=ORIGIN, pauses=pauses)


def test_served_pauses_give_their_events_the_time_the_grader_held_the_kernel() -> None:
    """The length drawn, or the span from receiving the request to the release where the grader's thread was late."""
    events, pauses = served_call()
    attributed, why = attribute_pauses(events, served(pauses))
    assert why == ""
    assert [event.get("paced_s") for event in attributed] == [pytest.approx(0.2504), pytest.approx(0.2795), None]
    late = (pauses[0], Pause("2", ORIGIN + 0.3803, ORIGIN + 0.6598, 0.2))  # drew 0.2 s, released 0.28 s later
    assert attribute_pauses(events, served(late))[0][1].get("paced_s") == pytest.approx(0.2795)
    assert recorded_forgery(1.0, attributed, served(pauses)) == ""  # lengths drawn per pause, not one per call
    # The kernel paced itself (no channel): its events are judged as recorded.
    assert attribute_pauses(honest(), Measured(1.02, PACE)) == (tuple(honest()), "")


def test_a_length_of_pacing_recorded_in_the_kernel_is_forged() -> None:
    events, pauses = served_call()
    events[1]["paced_s"] = 0.25  # a guess at the pacing, written into the warm-up
    assert attribute_pauses(events, served(pauses))[1].startswith("a generate event records a length of pacing (0.25)")


def test_a_pause_the_records_do_not_hold_is_ruled_out() -> None:
    """The tokenize event removed (a timer around tokenizing hidden), or a pause asked outside the instrumentation."""
    events, pauses = served_call()
    why = attribute_pauses(events[1:], served(pauses))[1]
    assert why.startswith("the grader paused the kernel 2 time(s) during the call, but its records hold 1 of those pauses")


def test_a_pause_the_grader_did_not_serve_is_ruled_out() -> None:
    events, pauses = served_call()
    assert "records a pause (number 2) that the grader did not serve" in attribute_pauses(events, served(pauses[:1]))[1]
    events[2]["pause"] = 1  # a forged copy of the tokenizer's pause on the timed call
    assert "records again a pause (number 1)" in attribute_pauses(events, served(pauses))[1]


@pytest.mark.parametrize("moved", ["start", "end"])
def test_an_event_that_does_not_hold_its_pause_is_ruled_out(moved: str) -> None:
    """A pause answered in the kernel (the reply written ahead: the event ends before the grader released it), or
    an event restamped after the fact."""
    events, pauses = served_call()
    events[1][moved] = events[1][moved] + (0.1 if moved == "start" else -0.1)
    why = attribute_pauses(events, served(pauses))[1]
    assert why.startswith("the grader held the kernel from 0.380 s to 0.660 s (by its clock), outside the generate event")


def test_a_timer_is_allowed_what_its_thread_waited_on_a_run_queue_around_the_generate_and_no_more() -> None:
    """A busy machine can hold the kernel between a generate's end and the timer's stop (CI: 43 ms past a 57 ms
    generate, on two cores): what the main thread waited on a run queue there is the timer's allowance; a sleep, or
    work run there, waits on none."""
    events = [generate(0.3, 0.06), generate(0.5, 0.06)]
    spans = ((-0.01, 0.3, 0.9), (0.3, 0.36, 0.9), (0.36, 0.5, 0.9), (0.5, 0.56, 0.9), (0.56, 0.62, 0.1))
    ran = timeline(*spans)
    ready = timeline(*spans[:-1], (0.56, 0.62, 1.0))  # after the last generate: 6 ms run, 54 ms waited to run
    measured = Measured(0.65, PACE, 0.3, timeline=ran, runnable=ready, clock_origin=ORIGIN)
    first, last = (item for item in with_queue_waits(events, measured) if item["type"] == "generate")
    assert first["queued_s"] == pytest.approx(0.0, abs=0.002)
    assert last["queued_s"] == pytest.approx(0.054, abs=0.005)
    tolerance = LatencyTolerance()
    assert judge_latency(tolerance, 0.06 + 0.05, [last], 32) is None
    assert judge_latency(tolerance, 0.06 + 0.05, [{**last, "queued_s": 0.0}], 32) is not None
    assert judge_latency(tolerance, 0.06 + 0.12, [last], 32) is not None
    # Asleep there, not waiting: nothing is allowed, and a value the kernel wrote is replaced.
    asleep = dataclasses.replace(measured, runnable=ran)
    forged = [generate(0.3, 0.06), generate(0.5, 0.06, queued_s=5.0)]
    assert [item["queued_s"] for item in with_queue_waits(forged, asleep)] == [pytest.approx(0.0, abs=0.002)] * 2
    # Not sampled: nothing allowed.
    unsampled = Measured(0.65, PACE, 0.3)
    assert [item["queued_s"] for item in with_queue_waits(forged, unsampled)] == [0.0, 0.0]


def test_a_timer_around_a_worker_thread_is_allowed_what_the_main_thread_waited_to_run_around_its_generate() -> None:
    """A generate run in a worker thread the main thread starts and joins (CI: a timer read 57 ms around a 19 ms
    ONNX Runtime generate, on two cores busy with its spinning pool): the main thread's own waits to run, to start the
    worker and to wake from the join, are the timer's allowance too; the worker's samples do not hold them."""
    worker = 77
    events = [generate(0.3, 0.02, thread=worker)]
    main_spans = ((0.0, 0.3, 0.9), (0.3, 0.32, 0.0), (0.32, 0.36, 0.1))
    main_ran = timeline(*main_spans)
    main_ready = timeline(*main_spans[:-1], (0.32, 0.36, 1.0))  # after the join: 4 ms run, 36 ms waited to run
    worker_spans = ((0.29, 0.3, 0.9), (0.3, 0.32, 0.9), (0.32, 0.33, 0.9))
    measured = Measured(
        0.4,
        PACE,
        0.3,
        timeline=main_ran,
        runnable=main_ready,
        clock_origin=ORIGIN,
        main_thread=1,
        thread_timelines={worker: timeline(*worker_spans)},
        thread_runnable={worker: timeline(*worker_spans)},
    )
    (event,) = with_queue_waits(events, measured)
    assert event["queued_s"] == pytest.approx(0.036, abs=0.005)
    tolerance = LatencyTolerance()
    assert judge_latency(tolerance, 0.02 + 0.045, [event], 32) is None
    assert judge_latency(tolerance, 0.02 + 0.045, [{**event, "queued_s": 0.0}], 32) is not None
    # The same generate on the main thread: the worker's part is its own, nothing of another thread's is added.
    on_main = [generate(0.3, 0.02, thread=1)]
    (event,) = with_queue_waits(on_main, dataclasses.replace(measured, runnable=main_ran))
    assert event["queued_s"] == pytest.approx(0.0, abs=0.002)
