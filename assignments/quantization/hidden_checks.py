"""Hidden check kinds of the ``quantization`` assignment: those only its hidden checks use.

The student kit does not ship this module (only ``checks.py``), so neither these kinds' logic nor
their default inputs reach students.
"""

from __future__ import annotations

from typing import Any

from grader.checks.base import CheckContext, Verdict, check_kind
from grader.checks.behaviour import Behaviour, carrying, describe_generation, judge_passes, unmatched_of, unmatched_sentence
from grader.checks.timed import judge_timed_settings
from grader.checks.timing import judge_timed_latency
from grader.kernel.values import is_number

from .checks import (
    ABLATION_ASPECTS,
    BATCH_ASPECTS,
    MEASURE_FIX,
    PLANS,
    SETTINGS,
    AblationParams,
    Batched,
    BatchParams,
    MeasureCall,
    MeasureParams,
    PpxParams,
    _baseline_loss,
    _label_result,
    ablation_calls,
    ablation_value,
    asked_batches,
    batched_calls,
    batched_frame,
    caller_aspects,
    claimed_sizes,
    comparisons,
    measure_calls,
    measure_ignores_inputs,
    measured_calls,
    setting_key,
)


@check_kind("batch_measure_latency", MeasureParams)
def batch_measure_latency(context: CheckContext, params: MeasureParams) -> Verdict:
    """measure_generation's timed generate does what the reference's does on the same inputs, and its latency_s is what
    a timer of that call reads (one run, or the fastest, median or mean of repeated runs), and only it."""
    for measured in measured_calls(context, params):
        verdict = judge_timed_settings(context, measured.timed, MEASURE_FIX) or judge_timed_latency(
            params, float(measured.value["latency_s"]), measured.timed.outcome, measured.timed.timed(), measured.max_new_tokens
        )
        if verdict is not None:
            return verdict
    return Verdict.passed(f"{params.function} times only the generate call of the batch it is given.")


@check_kind("ablation_settings", AblationParams)
def ablation_settings(context: CheckContext, params: AblationParams) -> Verdict:
    """Every setting of the ablation reaches model.generate as the reference's does on the same inputs: use_cache
    toggled, left and right padding, the prompts and max_new_tokens it is given, on the model it is given."""
    for ablation in ablation_calls(context, params):
        ablation_value(context, ablation)
        events = ablation.outcome.generate_events()
        problems = []
        if not any(event["use_cache"] is False for event in events):
            problems.append("use_cache=False never reached model.generate: pass use_cache=use_cache to generate")
        if not any(event["padding_side"] == "left" for event in events):
            problems.append(
                "no generate call received left-padded inputs: set tokenizer.padding_side before tokenizing the prompts"
            )
        if not any(event["padding_side"] == "right" for event in events):
            problems.append("no generate call received right-padded inputs")
        settings = ablation.settings()
        wanted = [settings[setting] for setting in SETTINGS if setting in settings]
        fits = carrying(context.models.tokenizer(ablation.hub_id))
        aspects = caller_aspects(context, ablation.outcome, ABLATION_ASPECTS, params.measure_function)
        missing = unmatched_of(ablation.graded.behaviour, wanted, fits, aspects)
        if missing and not problems:
            problems.append(unmatched_sentence(missing[0], hidden=True).rstrip("."))
        if problems and measure_ignores_inputs(context, ablation.outcome, params.measure_function):
            # Its generate calls show what measure_generation ran, not what the ablation asked of it: judged by that.
            calls = measure_calls(ablation.outcome, params.measure_function)
            problems = ablation_asked(calls, ablation.prompts, ablation.max_new_tokens, params.measure_function)
            if not problems:
                continue
        if problems:
            return Verdict.failed(
                f"In {ablation.call}, with {len(SETTINGS)} settings to compare, {'; '.join(problems)}.",
                expected=f"generate calls with use_cache True and False, left and right padding, max_new_tokens={ablation.max_new_tokens}",
                found="; ".join(problems),
            )
    return Verdict.passed(
        "Every setting reached model.generate as the reference's does: use_cache toggled, left and right padding, the "
        "prompts and max_new_tokens given."
    )


def ablation_asked(calls: list[MeasureCall], prompts: list[str], max_new_tokens: int, function: str) -> list[str]:
    """What an ablation failed to ask of measure_generation (empty: every setting, with the prompts and max_new_tokens)."""
    problems = []
    if all(call.uses_cache for call in calls):
        problems.append(f"use_cache=False was never passed to {function}: pass use_cache=use_cache")
    for side in ("left", "right"):
        if not any(side in call.padding_sides for call in calls):
            problems.append(f"{function} was never called with the tokenizer's padding_side set to {side!r}")
    if not problems:
        missing = [
            setting_key(use_cache, side)
            for use_cache, side in SETTINGS
            if not any(
                call.given(prompts, max_new_tokens) and call.uses_cache == use_cache and side in call.padding_sides
                for call in calls
            )
        ]
        if missing:
            problems.append(
                f"{function} was never given the prompts and max_new_tokens={max_new_tokens} under {', '.join(missing)}"
            )
    return problems


@check_kind("ppx_loss", PpxParams)
def ppx_loss(context: CheckContext, params: PpxParams) -> Verdict:
    """compare_ppplx's baseline loss is the token-weighted mean cross-entropy at the batch size its forward passes used,
    computed as the reference computes it: with gradients off, in eval mode."""
    verdict = Verdict.passed("")
    for comparison in comparisons(context, params):
        _label_result(comparison.value, "baseline", params.function)
        # The reference computes every loss under inference_mode, in eval mode: no pass of its has either, so the
        # judgement needs none of its passes (its trace would load an ONNX model in the grader's process).
        judgement = judge_passes(comparison.behaviour(context), Behaviour((), ()), None, ("grad", "training"))
        problems = [problem for problem in judgement.problems if problem != "it ran no forward pass of a model"]
        if problems:
            return Verdict.failed(
                f"{params.function} {comparison.where}: " + "; ".join(problems) + ".",
                expected="every forward pass with gradients off, in eval mode",
                found="; ".join(problems),
            )
        verdict = _baseline_loss(context, params, comparison)
        if verdict.outcome != "passed":
            return verdict
    return verdict


@check_kind("batching_sizes", BatchParams)
def batching_sizes(context: CheckContext, params: BatchParams) -> Verdict:
    """The timed generate calls of measure_batched receive, for each batch size, batches drawn from its prompts as the
    reference draws them (batch_size prompts, cycling through them) or as the seed groups them (every prompt, in
    consecutive batches of batch_size)."""
    asked = False
    for batched in batched_calls(context, params):
        frame = batched_frame(context, batched, ("batch_size",))
        missing = [size for size in batched.sizes if not batched.runs(context, size)]
        if not missing:
            continue
        if measure_ignores_inputs(context, batched.outcome, params.measure_function):
            asked = True
            calls = measure_calls(batched.outcome, params.measure_function)
            verdict = batches_asked_sizes(params, batched.prompts, batched.max_new_tokens, claimed_sizes(frame), calls)
            if verdict.outcome != "passed":
                return verdict
            continue
        return _not_drawn(context, batched, missing[0])
    if asked:
        function = params.measure_function
        return Verdict.passed(
            f"{params.function} gave {function} batches of every size drawn from its prompts; {function} does not "
            "generate the prompts it is given, which is charged in its own checks."
        )
    return Verdict.passed(
        f"For every batch size, {params.function}'s timed generate calls received batches drawn from the prompts it is given."
    )


def _not_drawn(context: CheckContext, batched: Batched, size: int) -> Verdict:
    """The failed verdict for a batch size whose batches no plan explains, with the closest call to the reference's."""
    wanted = batched.batches(context, size, next(iter(PLANS)))
    fits = carrying(context.models.tokenizer(batched.hub_id))
    aspects = caller_aspects(context, batched.outcome, BATCH_ASPECTS)
    missing = unmatched_of(batched.graded.behaviour, wanted, fits, aspects)
    decode = context.models.tokenizer(batched.hub_id).decode
    sentence = unmatched_sentence(missing[0], hidden=True) if missing else ""
    timed = [call for call in batched.graded.behaviour.generations if call.limit == batched.max_new_tokens]
    shapes = [len(call.rows or ()) for call in timed]
    return Verdict.failed(
        f"In {batched.call}, for batch size {size}, no timed generate call ran a batch drawn from the prompts it was "
        f"given ({', '.join(PLANS)}): its timed generate calls received batches of {shapes} prompts. {sentence} Build "
        "each batch from the prompts argument (batch_size of them) and generate it in one call.",
        expected=f"batches of {size} prompts drawn from the prompts passed",
        found=describe_generation(missing[0].closest, decode, show_rows=False)
        if missing and missing[0].closest
        else f"batches of {shapes}",
    )


def batches_asked_sizes(
    params: BatchParams, prompts: list[str], max_new_tokens: int, claimed: list[Any], calls: list[MeasureCall]
) -> Verdict:
    """measure_batched's batches judged by the calls it made of a measure_generation that does not generate what it is
    given (charged in its own checks): a batch of each claimed size drawn from the prompts, with max_new_tokens."""
    function = params.measure_function
    asked, batches = asked_batches(prompts, max_new_tokens, calls)
    missing = [size for size in claimed if not (is_number(size) and int(size) in batches)]
    if missing:
        given = [len(call.prompts or []) for call in asked]
        return Verdict.failed(
            f"The rows report batch sizes {claimed}, but {params.function} gave {function} (max_new_tokens="
            f"{max_new_tokens}) batches of {given} prompts drawn from the prompts: pass each batch of batch_size prompts.",
            expected=f"batches of {claimed}",
            found=f"batches of {given}",
        )
    return Verdict.passed(
        f"{params.function} gave {function} batches of {claimed} prompts; {function} does not generate the prompts "
        "it is given, which is charged in its own checks."
    )
