"""Check kinds of the ``perplexity`` assignment: batched, no-grad, token-weighted perplexity.

Values are compared with the reference computed in the grader's process on the same model,
on hidden corpora drawn at grading time: long predictable texts first and short odd texts
last, with a batch size that leaves a ragged last batch, so that every classic way of
averaging wrongly lands far from the token-weighted loss. Gradients, eval mode, devices and
batching are judged from the instrumented forward passes of the student's own call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from grader.checks.base import CheckContext, StopCheck, TargetParams, Verdict, check_kind
from grader.checks.behaviour import Behaviour, judge_passes
from grader.checks.calls import Argument, GradedCall, graded_call, handed
from grader.checks.loss import (
    CorpusParams,
    draw_corpora,
    judge_loss,
    reference_variants,
)
from grader.checks.shapes import keys
from grader.checks.timed import TIMED_ASPECTS, Timed, judge_timed_settings, timed_call
from grader.checks.timing import LatencyTolerance, judge_rates, judge_timed_latency, new_tokens_range
from grader.kernel.harness import CallOutcome
from grader.kernel.values import is_number, kind_of, scalar


@dataclass(frozen=True)
class Evaluation:
    """One call of evaluate_loss: its model, texts and batch size, and the call."""

    hub_id: str
    texts: list[str]
    batch_size: int
    graded: GradedCall

    @property
    def outcome(self) -> CallOutcome:
        return self.graded.outcome

    @property
    def where(self) -> str:
        """How the call reads in feedback."""
        return f"on {len(self.texts)} texts in batches of {self.batch_size} ({self.hub_id})"


def evaluations(context: CheckContext, params: CorpusParams) -> list[Evaluation]:
    """evaluate_loss called on each corpus of the params (once per corpus and submission; the checks share them),
    with the model and tokenizer the notebook's loader gives (the grader's where they break the starter's contract)."""
    calls = []
    for hub_id, texts, batch_size in draw_corpora(context, params):
        objects = handed(context, hub_id)
        graded = graded_call(
            context,
            params.function,
            objects.model,
            objects.tokenizer,
            Argument.value(texts, f"{len(texts)} texts"),
            Argument.value(batch_size),
            memo="evaluation:" + json.dumps([params.function, hub_id, texts, batch_size]),
        )
        calls.append(Evaluation(hub_id, texts, batch_size, graded))
    return calls


def _returned_dict(context: CheckContext, params: CorpusParams, outcome: CallOutcome, needed: tuple[str, ...]) -> dict[str, Any]:
    """The returned dict, or stop: only the keys this check judges are required."""
    return dict(context.returned(outcome, params.function, keys(*needed, text="a dict with 'loss', 'perplexity' and 'tokens'")))


class LossParams(CorpusParams):
    """How closely a returned field is judged."""

    rel_tolerance: float = Field(1e-4, gt=0, lt=0.01, description="Relative tolerance (the same batches give the same sums).")


@dataclass(frozen=True)
class ReturnedField:
    """A field of the dict evaluate_loss returned on a corpus, with the reference's values on it."""

    value: dict[str, Any]
    found: float
    variants: dict[str, float]
    where: str
    data: dict[str, Any]


def returned_fields(context: CheckContext, params: LossParams, field: str, needed: tuple[str, ...]) -> list[ReturnedField]:
    """``field`` of evaluate_loss's dict as a number on each corpus, or stop with why not."""
    fields = []
    for evaluation in evaluations(context, params):
        value = _returned_dict(context, params, evaluation.outcome, needed)
        variants = reference_variants(context, evaluation.hub_id, evaluation.texts, evaluation.batch_size)
        found = value[field] = scalar(value[field])
        if not is_number(found):
            raise StopCheck(Verdict.failed(f"'{field}' should be a number, but it is {kind_of(found)}.", found=kind_of(found)))
        data = {
            "model": evaluation.hub_id,
            "texts": len(evaluation.texts),
            "batch_size": evaluation.batch_size,
            "found": float(found),
            **{k: round(v, 6) for k, v in variants.items()},
        }
        fields.append(ReturnedField(value, float(found), variants, evaluation.where, data))
    return fields


@check_kind("perplexity_loss", LossParams)
def perplexity_loss(context: CheckContext, params: LossParams) -> Verdict:
    """evaluate_loss's loss is the token-weighted mean cross-entropy (padding masked), against the reference, on each
    model and corpus it is given."""
    verdicts = [
        judge_loss(returned.found, returned.variants, returned.where, params.rel_tolerance, returned.data)
        for returned in returned_fields(context, params, "loss", ("loss",))
    ]
    return next((verdict for verdict in verdicts if verdict.outcome != "passed"), verdicts[-1])


def _forward_passes(context: CheckContext, params: CorpusParams) -> list[tuple[Evaluation, Behaviour, Behaviour]]:
    """Each evaluation's forward passes beside the reference's on the same inputs; stop when one made none."""
    judged = []
    for evaluation in evaluations(context, params):
        context.returned(evaluation.outcome, params.function)
        behaviour = evaluation.graded.behaviour
        if not behaviour.passes:
            raise StopCheck(
                Verdict.error(
                    f"No forward pass of a model was seen during {params.function} {evaluation.where}: call the model as "
                    "model(**batch, labels=labels).",
                    found="no forward pass",
                )
            )
        judged.append((evaluation, behaviour, evaluation.graded.reference()))
    return judged


@check_kind("evaluation_mode", CorpusParams)
def evaluation_mode(context: CheckContext, params: CorpusParams) -> Verdict:
    """Every forward pass of the evaluation runs the model it was given, with gradients off, in eval mode, with inputs
    on the model's device (each graded call starts with gradients on, as a fresh kernel)."""
    count = 0
    for evaluation, behaviour, reference in _forward_passes(context, params):
        judgement = judge_passes(behaviour, reference, evaluation.batch_size, ("model", "grad", "training", "inputs"))
        if judgement.problems:
            return Verdict.failed(
                f"{params.function} {evaluation.where}: " + "; ".join(judgement.problems) + ".",
                expected="no gradients, eval mode, inputs on the model's device, the model passed",
                found="; ".join(judgement.problems),
            )
        count += len(behaviour.passes)
    passes = "The forward pass" if count == 1 else "Both forward passes" if count == 2 else f"All {count} forward passes"
    return Verdict.passed(f"{passes} ran the model passed, without gradients, in eval mode, on its device.")


@check_kind("evaluation_batching", CorpusParams)
def evaluation_batching(context: CheckContext, params: CorpusParams) -> Verdict:
    """The evaluation really batches: every text once, in as many batches of at most batch_size texts as the reference
    makes (any order or grouping), each as wide as its texts."""
    for evaluation, behaviour, reference in _forward_passes(context, params):
        judgement = judge_passes(behaviour, reference, evaluation.batch_size, ("batches",))
        if judgement.problems:
            return Verdict.failed(
                f"{params.function} {evaluation.where}: " + "; ".join(judgement.problems) + ".",
                expected=f"{len(reference.passes)} forward passes of at most {evaluation.batch_size} texts, every text once",
                found=judgement.found,
            )
    return Verdict.passed(f"{params.function} runs every text once, in batches of at most batch_size texts, as expected.")


# --------------------------------------------------------------------------------------
# time_generation
# --------------------------------------------------------------------------------------


class TimingParams(LatencyTolerance, TargetParams):
    """Calls that check time_generation against the instrumented generate call (the public check's prompt is shown to students)."""

    model: str = Field("gpt2", description="Hub ID of the model of the first call.")
    other_model: str = Field("distilgpt2", description="Hub ID of the model of the second call (every argument differs).")
    prompts: list[str] = Field(min_length=1, description="Prompts; one is drawn at grading time.")
    tokens: list[int] = Field([24, 40], min_length=2, max_length=2, description="Range [low, high] of max_new_tokens.")
    eos_prompt: str = Field("Thank you for reading.", description="A prompt after which the model stops early at EOS.")
    eos_tokens: int = Field(32, ge=1, description="max_new_tokens for the early-stopping prompt.")
    rate_tolerance: float = Field(0.02, gt=0, description="Relative tolerance on tokens_per_s = new tokens / latency_s.")


def timing_calls(context: CheckContext, params: TimingParams) -> list[tuple[int, Timed]]:
    """The time_generation calls (max_new_tokens, the timed call), every argument of the second different."""
    rng = context.rng_for(f"timing:{context.check.id}")
    plan = [
        (params.model, rng.choice(params.prompts), rng.randint(*params.tokens)),
        (params.other_model, params.eos_prompt, params.eos_tokens),
    ]
    calls = []
    for hub_id, prompt, max_new_tokens in plan:
        objects = handed(context, hub_id)
        call = f"{params.function}({hub_id} model, tokenizer, {prompt!r}, max_new_tokens={max_new_tokens})"
        arguments = [objects.model, objects.tokenizer, Argument.value(prompt), Argument.value(max_new_tokens)]

        def returns(outcome: CallOutcome, call: str = call) -> Any:
            return dict(context.returned(outcome, call, keys("latency_s", "tokens_per_s")))

        timed = timed_call(
            context,
            params,
            params.function,
            arguments,
            hub_id,
            call,
            lambda value: value.get("latency_s"),
            returns,
            # And the dtype: the generate times the model it is given as it is (autocast to bfloat16 times another
            # precision; nothing in the course asks for it here).
            aspects=(*TIMED_ASPECTS, "dtype"),
            memo=f"{call}:{params.pace_s}:{objects.own}",
        )
        calls.append((max_new_tokens, timed))
    return calls


@check_kind("generation_timing", TimingParams)
def generation_timing(context: CheckContext, params: TimingParams) -> Verdict:
    """time_generation's generate does what the reference's does (the model, prompt and max_new_tokens it is given),
    latency_s is what a timer of that call reads, and tokens_per_s counts the tokens really generated."""
    for max_new_tokens, timed in timing_calls(context, params):
        value = timed.value
        latency, rate = value["latency_s"], value["tokens_per_s"]
        if not is_number(latency) or latency <= 0 or not is_number(rate):
            return Verdict.failed(
                f"latency_s and tokens_per_s should be positive numbers, but they are {kind_of(latency)} and {kind_of(rate)}.",
                found=f"{kind_of(latency)}, {kind_of(rate)}",
            )
        verdict = judge_timed_settings(context, timed) or judge_timed_latency(
            params, float(latency), timed.outcome, timed.timed(), max_new_tokens
        )
        if verdict is not None:
            return verdict
        generated, _ = new_tokens_range(timed.timed()[-1])
        verdict = judge_rates(
            params.rate_tolerance,
            float(latency),
            generated,
            rate,
            max_new_tokens=max_new_tokens,
            runs=[float(event["duration_s"]) for event in timed.timed()],
        )
        if verdict is not None:
            return verdict
    return Verdict.passed(
        f"{params.function} reports the generate call's latency and counts the tokens it really generated, also when it stops early."
    )
