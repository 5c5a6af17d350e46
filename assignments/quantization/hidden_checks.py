"""Hidden check kinds of the ``quantization`` assignment: those only its hidden checks use.

The student kit does not ship this module (only ``checks.py``), so neither these kinds' logic nor
their default inputs reach students.
"""

from __future__ import annotations

from typing import Any

from grader.checks.base import CheckContext, Verdict, check_kind
from grader.checks.timing import (
    carries_prompt,
    event_rows,
    judge_generate_inputs,
    judge_timed_call,
    row_text,
    tokens_limit,
)
from grader.kernel.values import is_number

from .checks import (
    SETTINGS,
    AblationParams,
    BatchParams,
    MeasureCall,
    MeasureParams,
    PpxParams,
    _ablation,
    _baseline_loss,
    _comparison,
    _label_result,
    _measured,
    _setting_events,
    asked_batches,
    batching_run,
    measure_calls,
    measure_ignores_inputs,
    setting_key,
)


@check_kind("batch_measure_latency", MeasureParams)
def batch_measure_latency(context: CheckContext, params: MeasureParams) -> Verdict:
    """measure_generation on a batch times the timed generate call alone."""
    _, max_new_tokens, outcome, value = _measured(context, params)
    latency = float(value["latency_s"])
    verdict = judge_timed_call(params, latency, outcome, max_new_tokens)
    if verdict is not None:
        return verdict
    return Verdict.passed(f"{params.function} times only the generate call of the batch.")


@check_kind("ablation_settings", AblationParams)
def ablation_settings(context: CheckContext, params: AblationParams) -> Verdict:
    """Every setting of the ablation reaches model.generate: use_cache toggled, left and right padding, the prompts and max_new_tokens."""
    prompts, max_new_tokens, outcome, _ = _ablation(context, params)
    problems = []
    events = outcome.generate_events()
    if not any(event["use_cache"] is False for event in events):
        problems.append("use_cache=False never reached model.generate: pass use_cache=use_cache to generate")
    if not any(event["padding_side"] == "left" for event in events):
        problems.append("no generate call received left-padded inputs: set tokenizer.padding_side before tokenizing the prompts")
    if not any(event["padding_side"] == "right" for event in events):
        problems.append("no generate call received right-padded inputs")
    if not problems:
        missing = [setting_key(*setting) for setting in SETTINGS if not _setting_events(outcome, *setting, max_new_tokens)]
        if missing:
            tokens = sorted({str(tokens_limit(event)) for event in events})
            problems.append(
                f"no generate call ran {', '.join(missing)} with max_new_tokens={max_new_tokens} (max_new_tokens seen: {', '.join(tokens)})"
            )
    if not problems:
        reference_tokenizer = context.models.tokenizer(params.model)
        for use_cache, side in SETTINGS:
            timed = _setting_events(outcome, use_cache, side, max_new_tokens)[-1]
            wrong_inputs = judge_generate_inputs(reference_tokenizer, timed, prompts, max_new_tokens, params.function)
            if wrong_inputs is not None:
                problems.append(f"under {setting_key(use_cache, side)!r}: {wrong_inputs.message.rstrip('.')}")
                break
    if problems and measure_ignores_inputs(context, outcome, params.measure_function):
        # Its generate calls show what measure_generation ran, not what the ablation asked of it: judged by that.
        asked = ablation_asked(measure_calls(outcome, params.measure_function), prompts, max_new_tokens, params.measure_function)
        if not asked:
            return Verdict.passed(
                f"The ablation asked {params.measure_function} for every setting, with the prompts and max_new_tokens="
                f"{max_new_tokens}; {params.measure_function} does not generate the prompts it is given, which is "
                "charged in its own checks."
            )
        problems = asked
    if problems:
        return Verdict.failed(
            f"Called with {len(SETTINGS)} settings to compare, {'; '.join(problems)}.",
            expected=f"generate calls with use_cache True and False, left and right padding, max_new_tokens={max_new_tokens}",
            found="; ".join(problems),
        )
    return Verdict.passed(
        f"Every setting reached model.generate: use_cache toggled, left and right padding, max_new_tokens={max_new_tokens}."
    )


@check_kind("ppx_loss", PpxParams)
def ppx_loss(context: CheckContext, params: PpxParams) -> Verdict:
    """compare_ppplx's baseline loss is the token-weighted mean cross-entropy at the batch size its forward passes used."""
    texts, outcome, value = _comparison(context, params)
    _label_result(value, "baseline", params.function)
    return _baseline_loss(context, params, texts, outcome, value)


@check_kind("batching_sizes", BatchParams)
def batching_sizes(context: CheckContext, params: BatchParams) -> Verdict:
    """The timed generate calls of measure_batched receive batches of the sizes its rows report, drawn from its prompts."""
    run = batching_run(context, params)
    prompts, max_new_tokens, outcome, timed, shapes, claimed = (
        run.prompts,
        run.max_new_tokens,
        run.outcome,
        run.timed,
        run.shapes,
        run.claimed,
    )
    if run.ignores_inputs(context, params):
        return batches_asked_sizes(params, prompts, max_new_tokens, claimed, measure_calls(outcome, params.measure_function))
    if shapes != claimed:
        return Verdict.failed(
            f"The rows report batch sizes {claimed}, but the timed generate calls (max_new_tokens={max_new_tokens}) received "
            f"batches of {shapes} prompts: tokenize batch_size prompts together and pass them to one generate call.",
            expected=f"batches of {claimed}",
            found=f"batches of {shapes}",
        )
    reference_tokenizer = context.models.tokenizer(params.model)
    for timed_event in timed:
        batch = event_rows(timed_event) or []
        stray = next((row for row in batch if not any(carries_prompt(reference_tokenizer, row, p) for p in prompts)), None)
        if stray is not None and measure_ignores_inputs(context, outcome, params.measure_function):
            return batches_asked_sizes(params, prompts, max_new_tokens, claimed, measure_calls(outcome, params.measure_function))
        if stray is not None:
            text = row_text(reference_tokenizer, stray)
            return Verdict.failed(
                f"A timed generate call of {params.function} (batch of {len(batch)}) ran a row that is none of the prompts "
                f"it was given: it reads {text!r}. Build each batch from the prompts argument.",
                expected="rows drawn from the prompts passed",
                found=repr(text),
            )
    return Verdict.passed(f"The timed generate calls received batches of {shapes} prompts, as the rows report.")


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
