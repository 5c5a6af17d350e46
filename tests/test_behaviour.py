"""What a call did against what the reference does, judged on made-up records (grader/checks/behaviour.py): the
comparisons hold however a student spells the work (repetitions, order, threads, helpers), and fail what the
reference never does (another model, another prompt, another limit, a batching of its own)."""

from __future__ import annotations

from typing import Any

from grader.checks.behaviour import (
    ANOTHER,
    Behaviour,
    added_work_text,
    adds_work,
    describe_generation,
    exact_row,
    judge_passes,
    model_labels,
    padded_row,
    stray_generations,
    unmatched_generations,
)
from grader.checks.numbers import agrees, shown_decimals
from grader.checks.timing import LatencyTolerance, agrees_with_timed, judge_rates, latency_readings, sleep_covered
from grader.kernel.harness import models_from_events
from tests.events import event, generate_event

GPT2 = {"sizes": {"n_layer": 2}, "embedding": [0.1, 0.2]}
PROMPT = [11, 12, 13]
OTHER_PROMPT = [21, 22]


def seen(serial: int, argument: str | None, fingerprint: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "serial": serial,
        "argument": argument,
        "type": "transformers.models.gpt2.modeling_gpt2.GPT2LMHeadModel",
        "dtype": "torch.float32",
        "device": "cpu",
        "quantization": None,
        "fingerprint": fingerprint,
    }


def identify(fingerprint: Any) -> str | None:
    return "gpt2" if fingerprint == GPT2 else None


def generation(serial: int, rows: list[list[int]], limit: int, start: float, **fields: Any) -> Any:
    width = fields.pop("width", max(len(row) for row in rows))
    return generate_event(
        model_serial=serial,
        rows=rows,
        input_shape=[len(rows), width],
        output_shape=[len(rows), width + limit],
        new_tokens=[limit] * len(rows),
        new_tokens_limit=limit,
        max_new_tokens=limit,
        start=start,
        end=start + fields.pop("duration_s", 0.1),
        **fields,
    )


def behaviour(events: list[Any], models: list[dict[str, Any]]) -> Behaviour:
    return Behaviour.of(events, models, identify)


ARGUMENT = [seen(1, "argument 1")]
# What the reference's measure_generation does: a short warm-up, then the timed call on the same prompt.
REFERENCE = behaviour([generation(1, [PROMPT], 4, 0.0), generation(1, [PROMPT], 17, 0.2)], ARGUMENT)


def test_the_reference_s_warm_up_is_not_required_its_timed_call_is() -> None:
    assert [call.limit for call in REFERENCE.required()] == [17]


def test_a_best_of_three_timer_matches_and_a_warm_up_with_other_settings_is_free() -> None:
    calls = [generation(1, [PROMPT], 1, 0.0)] + [generation(1, [PROMPT], 17, 0.2 * k + 0.2) for k in range(3)]
    assert unmatched_generations(behaviour(calls, ARGUMENT), REFERENCE, exact_row) == []


def test_a_fixed_prompt_another_limit_or_another_model_is_named() -> None:
    wrong_prompt = behaviour([generation(1, [OTHER_PROMPT], 17, 0.0)], ARGUMENT)
    wrong_limit = behaviour([generation(1, [PROMPT], 32, 0.0)], ARGUMENT)
    global_model = behaviour([generation(2, [PROMPT], 17, 0.0)], [*ARGUMENT, seen(2, None, GPT2)])
    for student, aspect in ((wrong_prompt, "rows"), (wrong_limit, "limit"), (global_model, "model")):
        (missing,) = unmatched_generations(student, REFERENCE, exact_row)
        assert missing.differ == (aspect,)
    assert [call.model for call in stray_generations(global_model, REFERENCE)] == ["own gpt2"]


def test_two_timed_calls_of_the_reference_need_two_of_the_student_s() -> None:
    """A precision sweep measures each precision: a sweep that measures once and copies the result is one short."""
    reference = behaviour(
        [generation(3, [PROMPT], 8, 0.0), generation(4, [PROMPT], 8, 0.5)], [seen(3, None, GPT2), seen(4, None, GPT2)]
    )
    once = behaviour([generation(5, [PROMPT], 8, 0.0)], [seen(5, None, GPT2)])
    twice = behaviour([generation(5, [PROMPT], 8, 0.0), generation(5, [PROMPT], 8, 0.3)], [seen(5, None, GPT2)])
    assert len(unmatched_generations(once, reference, exact_row)) == 1
    assert unmatched_generations(twice, reference, exact_row) == []


def test_models_are_named_by_where_they_were_passed_or_by_their_weights() -> None:
    labels = model_labels([seen(1, "argument 1"), seen(2, None, GPT2), seen(3, None, {"sizes": {}})], identify)
    assert labels == {1: "argument 1", 2: "own gpt2", 3: ANOTHER}


def test_the_models_of_a_call_come_from_its_streamed_records() -> None:
    records = [
        event("arguments", models={"1": "argument 1"}),
        event("model", serial=1, model_type="x", dtype="torch.float32", device="cpu", quantization=None, fingerprint=GPT2),
        event("model", serial=7, model_type="x", dtype="torch.float32", device="cpu", quantization=None, fingerprint=None),
    ]
    models = models_from_events(records)
    assert [(model["serial"], model["argument"]) for model in models] == [(1, "argument 1"), (7, None)]


def forward(serial: int, rows: list[list[int]], grad: bool = False, training: bool = False, width: int = 0) -> Any:
    return event(
        "forward",
        thread=1,
        model_id=serial,
        model_serial=serial,
        model_type="transformers.models.gpt2.modeling_gpt2.GPT2LMHeadModel",
        start=0.0,
        grad_enabled=grad,
        inference_mode=False,
        model_training=training,
        model_device="cpu",
        input_shape=[len(rows), width or max(len(row) for row in rows)],
        input_device="cpu",
        row_tokens=[len(row) for row in rows],
        rows=rows,
        has_labels=True,
        has_attention_mask=True,
        nested=False,
        part_of=None,
        end=0.1,
        error=None,
        output_requires_grad=False,
    )


TEXTS = [[1, 2, 3, 4], [5, 6], [7, 8, 9], [10, 11], [12]]
EVALUATION = behaviour([forward(1, TEXTS[0:2]), forward(1, TEXTS[2:4]), forward(1, TEXTS[4:5])], ARGUMENT)


def batches(*groups: list[list[int]], **fields: Any) -> Behaviour:
    return behaviour([forward(1, group, **fields) for group in groups], ARGUMENT)


def test_batches_in_any_order_or_grouping_pass() -> None:
    by_length = batches([TEXTS[4], TEXTS[1]], [TEXTS[3], TEXTS[2]], [TEXTS[0]])
    assert judge_passes(by_length, EVALUATION, 2, ("batches",)).problems == ()
    # A batch run twice (once for the loss, once for the logits) is the same batch.
    twice = batches(TEXTS[0:2], TEXTS[0:2], TEXTS[2:4], TEXTS[4:5])
    assert judge_passes(twice, EVALUATION, 2, ("batches",)).problems == ()


def test_one_text_at_a_time_all_at_once_or_a_text_dropped_fail() -> None:
    one_by_one = batches(*[[text] for text in TEXTS])
    all_at_once = batches(TEXTS)
    dropped = batches(TEXTS[0:2], TEXTS[2:4])
    assert "one text at a time" in judge_passes(one_by_one, EVALUATION, 2, ("batches",)).problems[0]
    assert "at most batch_size" in judge_passes(all_at_once, EVALUATION, 2, ("batches",)).problems[0]
    assert "never run whole" in judge_passes(dropped, EVALUATION, 2, ("batches",)).problems[0]


def test_a_text_given_twice_may_be_run_once_but_no_text_more_often_than_given() -> None:
    """Run once and weighted twice, a repeated text gives the same loss; a text run in two batches is run twice."""
    reference = behaviour([forward(1, [[1, 2, 3], [1, 2, 3]]), forward(1, [[2, 3]])], ARGUMENT)
    assert judge_passes(batches([[1, 2, 3], [2, 3]]), reference, 2, ("batches",)).problems == ()
    assert judge_passes(batches([[1, 2, 3], [1, 2, 3]], [[2, 3]]), reference, 2, ("batches",)).problems == ()
    again = batches([[1, 2, 3], [2, 3]], [[2, 3]])
    assert "more than one batch" in judge_passes(again, reference, 2, ("batches",)).problems[0]
    assert not padded_row([1, 4, 2, 3], [2, 3])  # two other tokens before it are another text, not padding
    assert padded_row([2, 3, 0, 0], [2, 3]) and padded_row([0, 2, 3], [2, 3])


def test_a_batch_padded_far_past_its_texts_or_a_generate_in_the_evaluation_fails() -> None:
    """Padding to a multiple is fine; padding every batch to the model's 1,024 positions is not; nor is a loss that
    comes from a generate call (its forward passes are not the evaluation's)."""
    padded = behaviour(
        [forward(1, TEXTS[0:2], width=8), forward(1, TEXTS[2:4], width=8), forward(1, TEXTS[4:5], width=8)], ARGUMENT
    )
    assert judge_passes(padded, EVALUATION, 2, ("batches",)).problems == ()
    fixed = behaviour([forward(1, group, width=1024) for group in (TEXTS[0:2], TEXTS[2:4], TEXTS[4:5])], ARGUMENT)
    assert "padded to 1024 positions" in judge_passes(fixed, EVALUATION, 2, ("batches",)).problems[0]
    # The corpus tokenized once, padded to its longest text (here 300 tokens), and sliced into batches: the same loss.
    long_text = list(range(100, 400))
    texts = [*TEXTS, long_text]
    reference = behaviour([forward(1, texts[0:2]), forward(1, texts[2:4]), forward(1, texts[4:6])], ARGUMENT)
    once = behaviour([forward(1, texts[start : start + 2], width=300) for start in (0, 2, 4)], ARGUMENT)
    assert judge_passes(once, reference, 2, ("batches",)).problems == ()
    past = behaviour([forward(1, texts[start : start + 2], width=1024) for start in (0, 2, 4)], ARGUMENT)
    assert "padded to 1024 positions" in judge_passes(past, reference, 2, ("batches",)).problems[0]
    generating = behaviour(
        [generation(1, [PROMPT], 1, 0.0), *[forward(1, group) for group in (TEXTS[0:2], TEXTS[2:4], TEXTS[4:5])]], ARGUMENT
    )
    assert "called model.generate" in judge_passes(generating, EVALUATION, 2, ("batches",)).problems[0]


def test_gradients_training_mode_and_another_model_are_named() -> None:
    assert "gradients on" in judge_passes(batches(TEXTS, grad=True), EVALUATION, 5, ("grad",)).problems[0]
    assert "training mode" in judge_passes(batches(TEXTS, training=True), EVALUATION, 5, ("training",)).problems[0]
    other = behaviour([forward(2, TEXTS)], [*ARGUMENT, seen(2, None, GPT2)])
    assert "gpt2 model it loaded" in judge_passes(other, EVALUATION, 5, ("model",)).problems[0]


def test_a_best_of_or_median_timer_agrees_and_a_timer_around_a_warm_up_does_not() -> None:
    tolerance = LatencyTolerance()
    warm_up = generation(1, [PROMPT], 17, 0.0, duration_s=0.35, pause=1, paced_s=0.25)
    runs = [generation(1, [PROMPT], 17, 0.4 + k, duration_s=duration) for k, duration in enumerate((0.12, 0.10, 0.11))]
    assert agrees_with_timed(tolerance, 0.10, [warm_up, *runs])  # the fastest
    assert agrees_with_timed(tolerance, 0.11, [warm_up, *runs])  # the median
    # A timer around the warm-up and a timed call reads their sum: never a reading of the timed calls alone.
    assert not agrees_with_timed(tolerance, 0.35 + 0.12, [warm_up, *runs])
    assert max(latency_readings([warm_up, *runs])) < 0.2
    # The mean of three repeats holds the pause its first run took: an average of runs, not a warm-up in the timer.
    first = generation(1, [PROMPT], 17, 0.0, duration_s=0.37, pause=1, paced_s=0.25)
    assert agrees_with_timed(tolerance, (0.37 + 0.10 + 0.11) / 3, [first, *runs[1:]])


def test_a_number_is_right_at_the_precision_it_is_shown_with() -> None:
    assert shown_decimals(4.6) == 1 and shown_decimals(4.63) == 2 and shown_decimals(12.0) == 0
    assert agrees(4.6, 4.632) and agrees(0.13, 0.1349) and agrees(4.632, 4.6321)
    assert not agrees(4.6, 4.66) and not agrees(0.13, 0.1361)
    assert not agrees(5.0, 4.44)  # shown without decimals, 4.44 is 4
    assert agrees(8, 8.0137)


def test_a_rounding_whose_last_decimals_are_zeros_is_read_at_its_precision() -> None:
    """A loss rounded to 2 decimals may end in 0: the float 1.8 is 1.80, not a one-decimal rounding."""
    assert agrees(1.8, 1.7996, 1e-4, coarsest=0.005)  # 1.80
    assert agrees(2.0, 1.9996, 1e-4, coarsest=0.005)  # 2.00
    assert not agrees(1.8, 1.7796, 1e-4, coarsest=0.005)  # 1.78 rounded again to 1.8: too coarse
    assert not agrees(2.0, 2.04, 1e-4, coarsest=0.005)
    # A rounding exactly as coarse as the coarsest accepted is accepted: 0.05 s shown to two decimals, a 10 % coarsest.
    assert agrees(0.05, 0.05143, 1e-3, coarsest=0.1) and not agrees(0.05, 0.0556, 1e-3, coarsest=0.1)


def test_a_timer_shaved_by_a_few_percent_reads_shorter_than_its_generate() -> None:
    tolerance = LatencyTolerance()
    (run,) = [generation(1, [PROMPT], 17, 0.0, duration_s=0.2)]
    assert agrees_with_timed(tolerance, 0.2, [run]) and agrees_with_timed(tolerance, 0.1985, [run])  # a clock's rounding
    assert not agrees_with_timed(tolerance, 0.2 * 0.95 - 0.0015, [run])


def test_a_beam_search_is_not_the_greedy_search_asked_for() -> None:
    beams = behaviour([generation(1, [PROMPT], 17, 0.0, num_beams=4)], ARGUMENT)
    (missing,) = unmatched_generations(beams, REFERENCE, exact_row)
    assert missing.differ == ("beams",)
    greedy = behaviour([generation(1, [PROMPT], 17, 0.0, num_beams=1)], ARGUMENT)
    assert unmatched_generations(greedy, REFERENCE, exact_row) == []


def test_work_added_to_the_steps_or_a_prefill_done_before_the_call_is_not_the_reference_s_call() -> None:
    """A logits processor that sleeps (passed, or set in the generation config), or a cache of the prompt filled
    before the timed generate (its prefill outside the timer), is other work than the reference's greedy call."""
    throttled = behaviour([generation(1, [PROMPT], 17, 0.0, duration_s=0.3, processors_s=0.2, custom_processors=1)], ARGUMENT)
    prefilled = behaviour(
        [generation(1, [PROMPT], 17, 0.0, kwargs={"past_key_values": {"type": "DynamicCache", "filled": 3}})], ARGUMENT
    )
    for student in (throttled, prefilled):
        (missing,) = unmatched_generations(student, REFERENCE, exact_row)
        assert missing.differ == ("added",)
    static = behaviour(
        [generation(1, [PROMPT], 17, 0.0, kwargs={"past_key_values": {"type": "StaticCache", "filled": 0}})], ARGUMENT
    )
    assert unmatched_generations(static, REFERENCE, exact_row) == []  # an empty cache made for speed is its own to fill
    clocked = behaviour([generation(1, [PROMPT], 17, 0.0, duration_s=0.3, processors_s=0.0004, custom_processors=1)], ARGUMENT)
    assert unmatched_generations(clocked, REFERENCE, exact_row) == []  # a step clock reading the time adds no work
    # generate's own criteria, slow on a loaded machine (their thread pool waits to be scheduled), add none.
    loaded = behaviour([generation(1, [PROMPT], 17, 0.0, duration_s=2.2, processors_s=0.98)], ARGUMENT)
    assert unmatched_generations(loaded, REFERENCE, exact_row) == []


def test_a_streamer_or_hooks_that_take_a_share_of_the_call_add_work() -> None:
    """A streamer or forward hooks (or sleeps on generate's thread) that take a fifth of the call or more are work the
    reference's call does not do; a streamer that decodes each token (a few percent of the call) is not."""
    sleepy = behaviour([generation(1, [PROMPT], 17, 0.0, duration_s=0.3, added_items=1, added_s=0.1)], ARGUMENT)
    (missing,) = unmatched_generations(sleepy, REFERENCE, exact_row)
    assert missing.differ == ("added",)
    streaming = behaviour([generation(1, [PROMPT], 17, 0.0, duration_s=0.3, added_items=1, added_s=0.015)], ARGUMENT)
    assert unmatched_generations(streaming, REFERENCE, exact_row) == []


def test_assisted_decoding_or_a_model_with_parts_taken_out_is_not_the_reference_s_call() -> None:
    """Prompt lookup (an assistant) decodes with other work per token than greedy search; a model whose blocks were
    taken out for the call (fewer parameter tensors than the reference's run of the same model) is another model."""
    reference = behaviour([generation(1, [PROMPT], 17, 0.0, model_size=28)], ARGUMENT)
    assisted = behaviour([generation(1, [PROMPT], 17, 0.0, model_size=28, decoding="_assisted_decoding")], ARGUMENT)
    (missing,) = unmatched_generations(assisted, reference, exact_row)
    assert missing.differ == ("beams",)
    truncated = behaviour([generation(1, [PROMPT], 17, 0.0, model_size=16)], ARGUMENT)
    (missing,) = unmatched_generations(truncated, reference, exact_row)
    assert missing.differ == ("model",)
    same = behaviour([generation(1, [PROMPT], 17, 0.0, model_size=28, decoding="_sample")], ARGUMENT)
    assert unmatched_generations(same, reference, exact_row) == []


def test_more_forward_passes_than_one_per_token_is_another_decoding() -> None:
    """Classifier-free guidance (guidance_scale) runs the model twice a step: other work per token than greedy
    search's, as beams and an assistant are; one pass per token (give or take one) is greedy search."""
    reference = behaviour([generation(1, [PROMPT], 17, 0.0, forward_calls=17)], ARGUMENT)
    guided = behaviour([generation(1, [PROMPT], 17, 0.0, forward_calls=34)], ARGUMENT)
    (missing,) = unmatched_generations(guided, reference, exact_row)
    assert missing.differ == ("beams",)
    same = behaviour([generation(1, [PROMPT], 17, 0.0, forward_calls=18)], ARGUMENT)
    assert unmatched_generations(same, reference, exact_row) == []


def test_a_model_running_code_of_the_notebook_s_is_not_the_reference_s_model() -> None:
    """A generate whose model ran a module class's forward the notebook replaced (every block but the first skipped,
    the MLPs zeroed) is another model's call, and the description says which code ran."""
    reference = behaviour([generation(1, [PROMPT], 17, 0.0, model_size=28)], ARGUMENT)
    recoded = behaviour([generation(1, [PROMPT], 17, 0.0, model_size=28, model_code=["GPT2MLP.forward"])], ARGUMENT)
    (missing,) = unmatched_generations(recoded, reference, exact_row)
    assert missing.differ == ("model",)
    assert missing.closest is not None and "running the notebook's GPT2MLP.forward" in describe_generation(missing.closest)
    same = behaviour([generation(1, [PROMPT], 17, 0.0, model_size=28, model_code=[])], ARGUMENT)
    assert unmatched_generations(same, reference, exact_row) == []


def test_a_batch_padded_far_past_its_prompts_is_other_work_where_width_is_compared() -> None:
    """Padding one scenario's batch to 512 positions slows it without changing its rows; a multiple of 8 does not."""
    reference = behaviour([generation(1, [PROMPT], 17, 0.0, width=3)], ARGUMENT)
    wide = behaviour([generation(1, [PROMPT], 17, 0.0, width=512)], ARGUMENT)
    (missing,) = unmatched_generations(wide, reference, exact_row, ("rows", "limit", "width"))
    assert missing.differ == ("width",)
    eight = behaviour([generation(1, [PROMPT], 17, 0.0, width=8)], ARGUMENT)
    assert unmatched_generations(eight, reference, exact_row, ("rows", "limit", "width")) == []
    assert unmatched_generations(wide, reference, exact_row, ("rows", "limit")) == []  # not compared where not asked


def test_a_sleep_inside_generate_is_added_work_however_small_a_share_a_loaded_machine_leaves_it() -> None:
    """A processor or hook that sleeps 2 ms a step added 64 ms to a call a loaded machine stretched to 0.5 s: under
    the hooks' share, still time added to the call (CI kept a throttled batch size and a hooked baseline so)."""
    loaded = {"duration_s": 0.5, "custom_processors": 1, "processors_s": 0.07, "added_items": 32}
    slept = generate_event(**loaded, added_s=0.064, slept_s=0.064)
    assert adds_work(slept)
    assert "slept or waited 0.064 s" in added_work_text(slept)
    # The same share of CPU work in a hook (a streamer decoding each token) is its own.
    assert not adds_work(generate_event(**loaded, added_s=0.064, slept_s=0.0))
    assert not adds_work(generate_event(**loaded, added_s=0.004, slept_s=0.004))


def test_hooks_the_caller_hung_on_its_model_are_not_the_call_s_work() -> None:
    """A notebook that hooks its baseline model and then calls an honest timing function: the function added nothing
    (its processors are its own, the caller's hooks are not)."""
    hooked = generate_event(duration_s=0.5, added_s=0.3, added_items=50)
    assert adds_work(hooked)
    assert not adds_work(hooked, hooks=False)
    processed = generate_event(duration_s=0.5, custom_processors=1, processors_s=0.3, added_s=0.3, added_items=50)
    assert adds_work(processed, hooks=False)
    assert "logits processors" in added_work_text(processed, hooks=False)


def test_a_timer_is_charged_with_a_sleep_only_where_no_timer_that_long_could_miss_it() -> None:
    """Sleeps in a call of the timing function, against a timer that surrounds its generate (1.0 to 1.3) and lies
    within the call (0.0 to 1.4)."""
    generate, call = (1.0, 1.3), (0.0, 1.4)
    # Slept 0.9 to 0.95, then timed: a loaded machine read 0.35 s, 0.05 s past the generate: a timer from 1.0 misses it.
    assert sleep_covered(0.35, [(0.9, 0.95)], generate, call) == 0.0
    assert sleep_covered(0.45, [(0.85, 0.95)], generate, call) == 0.0
    # A timer of 0.5 s ends by 1.4, so it began by 0.9: it covers the last 0.05 s of a sleep from 0.85 to 0.95.
    assert abs(sleep_covered(0.5, [(0.85, 0.95)], generate, call) - 0.05) < 1e-9
    assert abs(sleep_covered(0.55, [(0.8, 0.95)], generate, call) - 0.1) < 1e-9
    # A sleep after the generate, before the call returned: a timer that ends at the generate's end can miss it ...
    assert sleep_covered(0.35, [(1.32, 1.38)], generate, call) == 0.0
    # ... unless the call began too late for that: begun at 0.99, a 0.35 s timer ends at 1.34 at the earliest.
    assert abs(sleep_covered(0.35, [(1.32, 1.38)], generate, (0.99, 1.4)) - 0.02) < 1e-9
    # Sleeps on both sides: the timer may lie between them.
    assert sleep_covered(0.32, [(0.5, 0.9), (1.35, 1.39)], generate, call) == 0.0
    # No timer that long fits the call, or one shorter than the generate: no contiguous timer, nothing covered.
    assert sleep_covered(2.0, [(0.5, 0.9)], generate, call) == 0.0
    assert sleep_covered(0.2, [(0.5, 0.9)], generate, call) == 0.0


def test_a_rate_may_be_the_mean_of_the_runs_rates() -> None:
    """Five timed runs of 32 tokens, reported as their mean latency and the mean of their rates (error bars over
    repeats): the mean of rates is above the rate of the mean latency, and no higher than the fastest run's."""
    runs = [0.30, 0.35, 0.40, 0.45, 0.50]
    latency = sum(runs) / len(runs)
    mean_rate = sum(32 / run for run in runs) / len(runs)
    assert judge_rates(0.01, latency, 32, 32 / latency) is None
    assert judge_rates(0.01, latency, 32, mean_rate) is not None  # without the runs: not derived from the latency
    assert judge_rates(0.01, latency, 32, mean_rate, runs=runs) is None
    assert judge_rates(0.01, latency, 32, 32 / latency * 0.95, runs=runs) is not None  # below any mean of rates
    assert judge_rates(0.01, latency, 32, 32 / 0.30 * 1.05, runs=runs) is not None  # above the fastest run's
