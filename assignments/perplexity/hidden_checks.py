"""Hidden check kinds of the ``perplexity`` assignment: those only its hidden checks use.

The student kit does not ship this module (only ``checks.py``), so neither these kinds' logic nor
their default inputs reach students.
"""

from __future__ import annotations

import functools
import math

from grader.checks.base import CheckContext, Verdict, check_kind, number
from grader.checks.loss import (
    TOKEN_MISTAKES,
)
from grader.checks.timing import judge_generate_inputs, judge_rates, judge_timed_call, new_tokens_range, retry_while_too_long
from grader.kernel.values import is_number, kind_of

from .checks import (
    LossParams,
    TimingParams,
    _timing_call,
    returned_field,
)


@check_kind("generation_timing", TimingParams)
def generation_timing(context: CheckContext, params: TimingParams) -> Verdict:
    """latency_s is the generate call's duration; tokens_per_s counts the tokens really generated."""
    calls = [(context.rng.choice(params.prompts), context.rng.randint(*params.tokens)), (params.eos_prompt, params.eos_tokens)]
    for prompt, max_new_tokens in calls:
        outcome, value = retry_while_too_long(
            params,
            functools.partial(_timing_call, context, params, prompt, max_new_tokens),
            lambda value: value["latency_s"],
        )
        latency, rate = value["latency_s"], value["tokens_per_s"]
        if not is_number(latency) or latency <= 0 or not is_number(rate):
            return Verdict.failed(
                f"latency_s and tokens_per_s should be positive numbers, but they are {kind_of(latency)} and {kind_of(rate)}.",
                found=f"{kind_of(latency)}, {kind_of(rate)}",
            )
        events = outcome.generate_events()
        verdict = judge_generate_inputs(
            context.models.tokenizer(params.model), events[-1], [prompt], max_new_tokens, params.function
        ) or judge_timed_call(params, float(latency), outcome, max_new_tokens)
        if verdict is not None:
            return verdict
        generated, _ = new_tokens_range(events[-1])
        verdict = judge_rates(params.rate_tolerance, float(latency), generated, rate, max_new_tokens=max_new_tokens)
        if verdict is not None:
            return verdict
    return Verdict.passed(
        f"{params.function} reports the generate call's latency and counts the tokens it really generated, also when it stops early."
    )


@check_kind("perplexity_exp", LossParams)
def perplexity_exp(context: CheckContext, params: LossParams) -> Verdict:
    """evaluate_loss's perplexity is exp of the loss it reports (not a mean of per-batch perplexities)."""
    returned = returned_field(context, params, "perplexity", ("loss", "perplexity"))
    value, found, variants, where, data = returned.value, returned.found, returned.variants, returned.where, returned.data
    loss = value["loss"]
    if not is_number(loss):
        return Verdict.failed(f"'loss' should be a number, but it is {kind_of(loss)}.", found=kind_of(loss))
    if math.isclose(found, math.exp(float(loss)), rel_tol=params.rel_tolerance):
        return Verdict.passed(f"The perplexity {where} is exp of the loss you report ({number(found)}).", data=data)
    mistake = variants["perplexity: mean of per-batch perplexities"]
    why = (
        "it is the mean of the per-batch perplexities"
        if math.isclose(found, mistake, rel_tol=params.rel_tolerance)
        else f"exp of your loss is {number(math.exp(float(loss)))}"
    )
    return Verdict.failed(
        f"The perplexity {where} is {number(found)}, but {why}: perplexity is exp of the global token-weighted loss.",
        expected=number(math.exp(float(loss))),
        found=number(found),
        data=data,
    )


@check_kind("perplexity_tokens", LossParams)
def perplexity_tokens(context: CheckContext, params: LossParams) -> Verdict:
    """evaluate_loss's tokens counts the predicted tokens: every token after the first of each text, padding excluded."""
    returned = returned_field(context, params, "tokens", ("tokens",))
    found, variants, where, data = returned.found, returned.variants, returned.where, returned.data
    expected_tokens = int(variants["tokens"])
    if found == expected_tokens:
        return Verdict.passed(f"'tokens' {where} counts the {expected_tokens} predicted tokens.", data=data)
    for name, explanation in TOKEN_MISTAKES.items():
        if found == variants[name]:
            return Verdict.failed(
                f"'tokens' {where} is {found:g}, but {expected_tokens} tokens were predicted: your function {explanation}.",
                expected=str(expected_tokens),
                found=f"{found:g}",
                data=data,
            )
    return Verdict.failed(
        f"'tokens' {where} is {found:g}, but {expected_tokens} tokens were predicted (every token after the first of each text, padding excluded).",
        expected=str(expected_tokens),
        found=f"{found:g}",
        data=data,
    )
