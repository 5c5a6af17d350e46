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

from grader.checks.base import CheckContext, StopCheck, TargetParams, Verdict, check_kind, expect_shape
from grader.checks.loss import (
    CorpusParams,
    draw_corpus,
    judge_loss,
    reference_variants,
    text_token_lengths,
)
from grader.checks.shapes import keys
from grader.checks.timing import (
    LatencyTolerance,
    call_timed,
)
from grader.kernel.harness import CallOutcome, literal
from grader.kernel.protocol import ForwardEvent
from grader.kernel.values import is_number, kind_of
from grader.quiet import quiet_libraries


def evaluation_call(context: CheckContext, params: CorpusParams) -> tuple[list[str], int, CallOutcome]:
    """evaluate_loss called once per corpus and submission; the checks of that corpus share it."""
    texts, batch_size = draw_corpus(context, params)
    key = "evaluation:" + json.dumps([params.function, params.model, texts, batch_size])
    outcome = context.once(
        key,
        lambda: context.call_with_model(
            params.function,
            params.model,
            literal(texts),
            literal(batch_size),
        ),
    )
    return texts, batch_size, outcome


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


def returned_field(context: CheckContext, params: LossParams, field: str, needed: tuple[str, ...]) -> ReturnedField:
    """``field`` of evaluate_loss's dict as a number, or stop with why not."""
    texts, batch_size, outcome = evaluation_call(context, params)
    value = _returned_dict(context, params, outcome, needed)
    variants = reference_variants(context, params.model, texts, batch_size)
    found = value[field]
    if not is_number(found):
        raise StopCheck(Verdict.failed(f"'{field}' should be a number, but it is {kind_of(found)}.", found=kind_of(found)))
    data = {"texts": len(texts), "batch_size": batch_size, "found": float(found), **{k: round(v, 6) for k, v in variants.items()}}
    return ReturnedField(value, float(found), variants, f"on {len(texts)} texts in batches of {batch_size}", data)


@check_kind("perplexity_loss", LossParams)
def perplexity_loss(context: CheckContext, params: LossParams) -> Verdict:
    """evaluate_loss's loss is the token-weighted mean cross-entropy (padding masked), against the reference."""
    returned = returned_field(context, params, "loss", ("loss",))
    return judge_loss(returned.found, returned.variants, returned.where, params.rel_tolerance, returned.data)


def _forward_passes(context: CheckContext, params: CorpusParams) -> tuple[list[str], int, list[ForwardEvent]]:
    texts, batch_size, outcome = evaluation_call(context, params)
    context.returned(outcome, params.function)
    forwards = outcome.forward_events()
    if not forwards:
        raise StopCheck(
            Verdict.error(
                f"No forward pass of the model was seen during {params.function}: call the model as model(**batch, labels=labels) "
                "(calling model.forward directly, or another model, cannot be graded).",
                found="no forward pass",
            )
        )
    return texts, batch_size, forwards


@check_kind("evaluation_mode", CorpusParams)
def evaluation_mode(context: CheckContext, params: CorpusParams) -> Verdict:
    """Every forward pass of the evaluation runs with gradients off, in eval mode, with inputs on the model's device."""
    _, _, forwards = _forward_passes(context, params)
    problems = []
    # Sampled inside forward (after every pre-hook) and read off its loss and logits: a hook cannot turn gradients on unseen.
    with_grad = sum(1 for event in forwards if event["grad_enabled"] is not False or event["output_requires_grad"] is True)
    if with_grad:
        problems.append(
            f"{with_grad} of {len(forwards)} forward passes ran with gradients on: wrap the loop in torch.no_grad() or torch.inference_mode()"
        )
    training = sum(1 for event in forwards if event["model_training"] is not False)
    if training:
        problems.append(f"{training} forward passes ran in training mode: keep the model in eval mode")
    elsewhere = [
        event for event in forwards if event["input_device"] is not None and event["input_device"] != event["model_device"]
    ]
    if elsewhere:
        problems.append(
            f"inputs were on {elsewhere[0]['input_device']} but the model on {elsewhere[0]['model_device']}: move the batch with .to(model.device)"
        )
    if problems:
        return Verdict.failed(
            "; ".join(problems).capitalize() + ".",
            expected="no gradients, eval mode, inputs on the model's device",
            found="; ".join(problems),
        )
    return Verdict.passed(f"All {len(forwards)} forward passes ran without gradients, in eval mode, on the model's device.")


@check_kind("evaluation_batching", CorpusParams)
def evaluation_batching(context: CheckContext, params: CorpusParams) -> Verdict:
    """The evaluation really batches: one forward pass per batch of batch_size texts, each covering its texts' tokens."""
    texts, batch_size, forwards = _forward_passes(context, params)
    with quiet_libraries():
        lengths = context.expected(text_token_lengths, context.models.tokenizer(params.model), texts)
    wanted = [min(batch_size, len(texts) - start) for start in range(0, len(texts), batch_size)]
    longest = [max(lengths[start : start + batch_size]) for start in range(0, len(texts), batch_size)]
    shapes = [event["input_shape"] or [] for event in forwards]
    sizes = [shape[0] if shape else None for shape in shapes]
    widths = [shape[1] if len(shape) > 1 else 0 for shape in shapes]
    expected = f"{len(wanted)} forward passes of {wanted} texts"
    if sizes == wanted:
        short = [index for index, (width, needed) in enumerate(zip(widths, longest, strict=True)) if width < needed]
        if not short:
            return Verdict.passed(
                f"{len(texts)} texts in batches of {batch_size} took {len(wanted)} forward passes, as expected."
            )
        index = short[0]
        return Verdict.failed(
            f"{params.function} made {len(forwards)} forward passes of {sizes} texts, but pass {index + 1} covered only "
            f"{widths[index]} tokens per text, fewer than the longest of its texts holds: run the model on the "
            "whole batch (every token of every text), once per batch.",
            expected=f"{expected}, each as wide as its longest text",
            found=f"passes {widths} tokens wide",
        )
    if len(forwards) == len(texts) and all(size == 1 for size in sizes):
        message = f"{params.function} ran the model once per text ({len(texts)} passes) instead of in batches of {batch_size}: tokenize each slice texts[i:i+batch_size] together with padding."
    elif len(forwards) == 1:
        message = f"{params.function} ran all {len(texts)} texts in one forward pass, ignoring batch_size={batch_size}."
    else:
        message = f"{params.function} made {len(forwards)} forward passes of {sizes} texts for {len(texts)} texts in batches of {batch_size}."
    return Verdict.failed(message, expected=expected, found=f"{len(forwards)} passes of {sizes}")


# --------------------------------------------------------------------------------------
# time_generation
# --------------------------------------------------------------------------------------


class TimingParams(LatencyTolerance, TargetParams):
    """Hidden calls that check time_generation against the instrumented generate call."""

    model: str = Field("gpt2", description="Hub ID of the model.")
    prompts: list[str] = Field(min_length=1, description="Hidden prompts; one is drawn at grading time.")
    tokens: list[int] = Field([24, 40], min_length=2, max_length=2, description="Range [low, high] of max_new_tokens.")
    eos_prompt: str = Field("Thank you for reading.", description="A prompt after which the model stops early at EOS.")
    eos_tokens: int = Field(32, ge=1, description="max_new_tokens for the early-stopping prompt.")
    rate_tolerance: float = Field(0.02, gt=0, description="Relative tolerance on tokens_per_s = new tokens / latency_s.")


def _timing_call(
    context: CheckContext, params: TimingParams, prompt: str, max_new_tokens: int, device: str = "auto"
) -> tuple[CallOutcome, dict[str, Any]]:
    outcome, value = call_timed(
        context, params.function, params.model, prompt, max_new_tokens, device=device, dtype="float32", pace_s=params.pace_s
    )
    expect_shape(value, keys("latency_s", "tokens_per_s"), params.function)
    if not outcome.generate_events():
        raise StopCheck(Verdict.failed(f"{params.function} never called model.generate.", found="no generate call"))
    return outcome, value
