"""Hidden check kinds of the ``perplexity`` assignment: those only its hidden checks use.

The student kit does not ship this module (only ``checks.py``), so neither these kinds' logic nor
their default inputs reach students.
"""

from __future__ import annotations

import functools
import math

from grader.checks.base import CheckContext, Verdict, check_kind, number
from grader.checks.timing import (
    judge_generate_inputs,
    judge_timed_call,
    retry_while_too_long,
)
from grader.values import is_number, kind_of

from .checks import (
    TimingParams,
    _timing_call,
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
        generated = int(events[-1].get("new_tokens", [max_new_tokens])[0])
        if not math.isclose(float(rate), generated / float(latency), rel_tol=params.rate_tolerance):
            if generated != max_new_tokens and math.isclose(
                float(rate), max_new_tokens / float(latency), rel_tol=params.rate_tolerance
            ):
                message = (
                    f"tokens_per_s assumes all {max_new_tokens} tokens were generated, but the model stopped after {generated} "
                    f"(end-of-text): count the new tokens in the output."
                )
            else:
                message = f"tokens_per_s is {number(float(rate))}, but {generated} new tokens in {number(float(latency), 's')} is {number(generated / float(latency))}."
            return Verdict.failed(message, expected=number(generated / float(latency)), found=number(float(rate)))
    return Verdict.passed(
        f"{params.function} reports the generate call's latency and counts the tokens it really generated, also when it stops early."
    )
