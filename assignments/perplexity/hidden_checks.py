"""Hidden check kinds of the ``perplexity`` assignment: those only its hidden checks use.

The student kit does not ship this module (only ``checks.py``), so neither these kinds' logic nor
their default inputs reach students.
"""

from __future__ import annotations

import math

from grader.checks.base import CheckContext, Verdict, check_kind, number
from grader.checks.loss import (
    TOKEN_MISTAKES,
)
from grader.checks.numbers import agrees, half_unit
from grader.kernel.values import is_number, kind_of, scalar

from .checks import (
    LossParams,
    ReturnedField,
    returned_fields,
)


@check_kind("perplexity_exp", LossParams)
def perplexity_exp(context: CheckContext, params: LossParams) -> Verdict:
    """evaluate_loss's perplexity is exp of the loss it reports (not a mean of per-batch perplexities), on each call."""
    verdicts = [
        _judge_perplexity(params, returned) for returned in returned_fields(context, params, "perplexity", ("loss", "perplexity"))
    ]
    return next((verdict for verdict in verdicts if verdict.outcome != "passed"), verdicts[-1])


# The roughest rounding of a perplexity judged at its precision (relative): the tiny models' perplexities are 4 to 8,
# so one decimal is 1 % of them (the seed's 55.14 shows two); the mean of per-batch perplexities lands far further off.
PERPLEXITY_COARSEST = 0.02


def _judge_perplexity(params: LossParams, returned: ReturnedField) -> Verdict:
    value, found, variants, where, data = returned.value, returned.found, returned.variants, returned.where, returned.data
    loss = scalar(value["loss"])
    if not is_number(loss):
        return Verdict.failed(f"'loss' should be a number, but it is {kind_of(loss)}.", found=kind_of(loss))
    # Either may be rounded for the report (the seed shows a perplexity of 55.14): each at the precision it shows.
    expected = math.exp(float(loss))
    slack = half_unit(found) + expected * half_unit(float(loss))
    # A loss and a perplexity both right at the precision each shows (1.80 and 6.05) are exp of each other as rounded.
    reference = variants["loss"]
    both_right = agrees(loss, reference, params.rel_tolerance, coarsest=0.005) and agrees(
        found, math.exp(reference), params.rel_tolerance, coarsest=PERPLEXITY_COARSEST
    )
    # A perplexity rounded from exp of the loss as reported (round(exp(1.70), 2) = 5.47): its own rounding alone.
    rounded = half_unit(found)
    if (
        both_right
        or math.isclose(found, expected, rel_tol=params.rel_tolerance)
        or (abs(found - expected) <= slack and slack <= PERPLEXITY_COARSEST * expected * (1 + 1e-6))
        or (abs(found - expected) <= rounded * (1 + 1e-6) and rounded <= PERPLEXITY_COARSEST * expected * (1 + 1e-6))
    ):
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
    verdicts = [_judge_tokens(returned) for returned in returned_fields(context, params, "tokens", ("tokens",))]
    return next((verdict for verdict in verdicts if verdict.outcome != "passed"), verdicts[-1])


def _judge_tokens(returned: ReturnedField) -> Verdict:
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
