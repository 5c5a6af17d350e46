"""Check kinds of the ``perplexity`` assignment: batched, no-grad, token-weighted perplexity.

Values are compared with the reference computed in the grader's process on the same model,
on hidden corpora drawn at grading time: long predictable texts first and short odd texts
last, with a batch size that leaves a ragged last batch, so that every classic way of
averaging wrongly lands far from the token-weighted loss. Gradients, eval mode, devices and
batching are judged from the instrumented forward passes of the student's own call.
"""

from __future__ import annotations

import functools
import json
import math
import random
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from grader.checks.base import CheckContext, Params, StopCheck, Verdict, check_kind, number
from grader.checks.identity import other_model
from grader.checks.timing import (
    LatencyTolerance,
    call_timed,
    judge_generate_inputs,
    judge_synchronize,
    judge_timed_call,
    retry_while_too_long,
)
from grader.harness import CallOutcome, literal, model, model_spec
from grader.quiet import quiet_libraries
from grader.replay import reference_side
from grader.values import Model, Tokenizer, is_number, kind_of
from grader.zoo.build import CORPUS_PATH, read_documents

GUIDANCE = "add up loss x predicted tokens over all batches, divide by the total number of predicted tokens, then take exp"


# --------------------------------------------------------------------------------------
# load_model_and_tokenizer
# --------------------------------------------------------------------------------------


class LoaderParams(Params):
    """How the student's loader is called and what is judged."""

    expect: Literal["same_id", "eval_device", "cpu_float32"] = Field(description="What this check judges.")
    model_id: str = Field("gpt2", description="The model id passed.")
    precision: str | None = Field("float32", description="The precision passed (null: the loader takes only the id).")
    function: str = Field("load_model_and_tokenizer", description="The student's function.")
    more_ids: list[str] = Field(
        default_factory=list,
        description="Further model ids the loader is called with (same_id): a name hard-coded in the loader matches at most one.",
    )

    @property
    def call_text(self) -> str:
        """How the call reads in feedback."""
        arguments = [self.model_id] if self.precision is None else [self.model_id, self.precision]
        return f"{self.function}({', '.join(map(repr, arguments))})"


def _loaded(context: CheckContext, params: LoaderParams) -> tuple[Tokenizer, Model]:
    key = f"loader:{params.function}:{params.model_id}:{params.precision}"
    if key not in context.memo:
        arguments = [literal(params.model_id)] + ([] if params.precision is None else [literal(params.precision)])
        outcome = context.call(params.function, *arguments)
        context.memo[key] = outcome
    outcome = context.memo[key]
    value = context.returned(outcome, params.function)
    if isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], Model) and isinstance(value[1], Tokenizer):
        raise StopCheck(
            Verdict.failed(
                f"{params.function} returns (model, tokenizer): the order is (tokenizer, model).",
                expected="(tokenizer, model)",
                found="(model, tokenizer)",
            )
        )
    if not (
        isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], Tokenizer) and isinstance(value[1], Model)
    ):
        raise StopCheck(
            Verdict.failed(
                f"{params.function} should return (tokenizer, model), but it returned {kind_of(value)}.",
                expected="a tuple (tokenizer, model)",
                found=kind_of(value),
            )
        )
    return value[0], value[1]


@check_kind("perplexity_loader", LoaderParams)
def perplexity_loader(context: CheckContext, params: LoaderParams) -> Verdict:
    """The loader: same id for model and tokenizer, eval mode on the right device, float32 on CPU."""
    if params.expect == "same_id":
        for model_id in [params.model_id, *params.more_ids]:
            asked = params.model_copy(update={"model_id": model_id})
            loaded_tokenizer, loaded_model = _loaded(context, asked)
            # The model is known by its weights (a name_or_path can be set to anything); the tokenizer by its name.
            wrong = {}
            if loaded_tokenizer.name_or_path != model_id:
                wrong["tokenizer"] = repr(loaded_tokenizer.name_or_path)
            other = other_model(context, loaded_model, model_id)
            if other:
                wrong["model"] = f"weights that are not {model_id!r}'s ({other})"
            if wrong:
                found = ", ".join(f"{part} from {name}" for part, name in wrong.items())
                return Verdict.failed(
                    f"{asked.call_text} loads the {' and the '.join(wrong)} from another id ({found}): load both from model_id, "
                    "or the tokenizer's ids will not match the model's vocabulary.",
                    expected=f"tokenizer and model from {model_id!r}",
                    found=found,
                )
        return Verdict.passed(f"{params.call_text} loads the tokenizer and the model from the same id, whichever id it is given.")
    loaded_tokenizer, loaded_model = _loaded(context, params)
    call = params.call_text
    if params.expect == "eval_device":
        device = "cuda" if context.on_cuda else "cpu"
        problems = []
        if loaded_model.training:
            problems.append("the model is in training mode: call model.eval()")
        if not loaded_model.device.startswith(device):
            problems.append(f"the model is on {loaded_model.device}, not {device}")
        if problems:
            return Verdict.failed(
                f"{call}: {'; '.join(problems)}.",
                expected=f"a model in eval mode on {device}",
                found="; ".join(problems),
            )
        return Verdict.passed(f"{call} returns the model in eval mode on {device}.")
    if loaded_model.dtype != "torch.float32":
        return Verdict.failed(
            f"On the CPU, {call} loads the model in {loaded_model.dtype.replace('torch.', '')}: the CPU must use float32 whatever precision was asked for.",
            expected="torch.float32",
            found=loaded_model.dtype,
        )
    return Verdict.passed(f"On the CPU, {call} falls back to float32.")


# --------------------------------------------------------------------------------------
# evaluate_loss
# --------------------------------------------------------------------------------------


class CorpusParams(Params):
    """The corpus evaluate_loss is called on: fixed public texts, or hidden ones drawn at grading time."""

    model: str = Field("gpt2", description="Hub ID of the model.")
    function: str = Field("evaluate_loss", description="The student's function.")
    texts: list[str] = Field(default_factory=list, description="Public texts; empty means a hidden corpus is drawn.")
    batch_size: int = Field(4, ge=1, description="Batch size for the public texts.")
    corpus: str = Field("hidden", description="Name of the hidden corpus: checks naming the same corpus share its draw.")
    long_texts: list[int] = Field([4, 6], min_length=2, max_length=2, description="Range of long predictable texts drawn.")
    short_texts: list[int] = Field([3, 5], min_length=2, max_length=2, description="Range of short odd texts drawn.")
    batch_sizes: list[int] = Field(
        [2, 3, 4], min_length=1, description="Batch sizes to draw from (one leaving a ragged last batch)."
    )
    odd_words: list[str] = Field(
        default_factory=lambda: (
            [
                "zebra",
                "quantum",
                "violin",
                "xylophone",
                "grumpy",
                "nebula",
                "walrus",
                "saxophone",
                "marmalade",
                "kettle",
                "glacier",
                "trombone",
            ]
        ),
        description="Words the short odd texts are made of.",
    )


def hidden_corpus(rng: random.Random, params: CorpusParams) -> tuple[list[str], int]:
    """A hidden corpus and batch size: long predictable texts first, short odd texts last.

    Batches then differ in size and loss, and the batch size leaves a ragged last batch, so that
    every wrong way of averaging lands far from the token-weighted mean.
    """
    documents = read_documents(CORPUS_PATH)
    starts = rng.sample(range(len(documents)), rng.randint(*params.long_texts))
    longs = [" ".join(documents[(s + i) % len(documents)] for i in range(rng.randint(1, 4))) for s in starts]
    shorts = [
        " ".join(rng.sample(params.odd_words, rng.randint(2, 4))).capitalize() + "."
        for _ in range(rng.randint(*params.short_texts))
    ]
    texts = longs + shorts
    ragged = [size for size in params.batch_sizes if len(texts) % size]
    return texts, rng.choice(ragged or params.batch_sizes)


def draw_corpus(context: CheckContext, params: CorpusParams) -> tuple[list[str], int]:
    """The texts and batch size of a call: the public ones, or a hidden draw shared by name."""
    if params.texts:
        return list(params.texts), params.batch_size
    return hidden_corpus(context.rng_for(f"corpus:{params.corpus}"), params)


def evaluation_call(context: CheckContext, params: CorpusParams) -> tuple[list[str], int, CallOutcome]:
    """evaluate_loss called once per corpus and submission; the checks of that corpus share it."""
    texts, batch_size = draw_corpus(context, params)
    key = "evaluation:" + json.dumps([params.function, params.model, texts, batch_size])
    if key not in context.memo:
        context.memo[key] = context.call(
            params.function,
            model(model_spec(params.model, dtype="float32")),
            context.tokenizer(params.model),
            literal(texts),
            literal(batch_size),
        )
    return texts, batch_size, context.memo[key]


def _returned_dict(context: CheckContext, params: CorpusParams, outcome: CallOutcome, needed: tuple[str, ...]) -> dict[str, Any]:
    """The returned dict, or stop: only the keys this check judges are required."""
    value = context.returned(outcome, params.function)
    missing = [key for key in needed if not isinstance(value, dict) or key not in value]
    if missing:
        raise StopCheck(
            Verdict.failed(
                f"{params.function} should return a dict with 'loss', 'perplexity' and 'tokens', but "
                + (
                    f"it has no {', '.join(repr(m) for m in missing)}."
                    if isinstance(value, dict)
                    else f"it returned {kind_of(value)}."
                ),
                expected="{'loss': float, 'perplexity': float, 'tokens': int}",
                found=kind_of(value) if not isinstance(value, dict) else f"keys {sorted(map(str, value))}",
            )
        )
    return value


@dataclass(frozen=True)
class BatchFacts:
    """What one batch of the reference evaluation gives."""

    loss: float  # mean over the batch's predicted tokens (padding masked)
    predicted: int  # tokens predicted: labels[:, 1:] != -100
    inputs: int  # tokens in the batch, first tokens included, padding excluded
    unmasked_loss: float  # the mean when padding is not masked
    positions: int  # every predicted position, padding included
    text_losses: tuple[float, ...]  # each text's own mean loss


@reference_side
def _batch_facts(reference_model: Any, reference_tokenizer: Any, texts: list[str], batch_size: int) -> list[BatchFacts]:
    import torch

    facts = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = reference_tokenizer(texts[start : start + batch_size], return_tensors="pt", padding=True).to(
                reference_model.device
            )
            labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
            output = reference_model(**batch, labels=labels)
            token_losses = torch.nn.functional.cross_entropy(
                output.logits[:, :-1].float().transpose(1, 2), labels[:, 1:], ignore_index=-100, reduction="none"
            )
            facts.append(
                BatchFacts(
                    loss=output.loss.item(),
                    predicted=int((labels[:, 1:] != -100).sum()),
                    inputs=int(batch["attention_mask"].sum()),
                    unmasked_loss=reference_model(**batch, labels=batch["input_ids"]).loss.item(),
                    positions=batch["input_ids"][:, 1:].numel(),
                    text_losses=tuple((token_losses.sum(dim=1) / (labels[:, 1:] != -100).sum(dim=1)).tolist()),
                )
            )
    return facts


@reference_side
def loss_variants(reference_model: Any, reference_tokenizer: Any, texts: list[str], batch_size: int) -> dict[str, float]:
    """The loss and token count of the right way and of each classic wrong way, on these texts."""
    if reference_tokenizer.pad_token is None:
        reference_tokenizer.pad_token = reference_tokenizer.eos_token
    reference_tokenizer.padding_side = "left"
    left = _batch_facts(reference_model, reference_tokenizer, texts, batch_size)
    reference_tokenizer.padding_side = "right"
    right = _batch_facts(reference_model, reference_tokenizer, texts, batch_size)
    predicted = sum(b.predicted for b in right)
    inputs = sum(b.inputs for b in right)
    positions = sum(b.positions for b in right)
    weighted = sum(b.loss * b.predicted for b in right)
    text_losses = [loss for b in right for loss in b.text_losses]
    return {
        "loss": weighted / predicted,
        "loss, left padding": sum(b.loss * b.predicted for b in left) / sum(b.predicted for b in left),
        "tokens": float(predicted),
        "mean of per-batch losses": sum(b.loss for b in right) / len(right),
        "mean of per-text losses": sum(text_losses) / len(text_losses),
        "padding counted": sum(b.unmasked_loss * b.positions for b in right) / positions,
        "padding counted, weighted by predicted tokens": sum(b.unmasked_loss * b.predicted for b in right) / predicted,
        "weighted by input tokens": sum(b.loss * b.inputs for b in right) / inputs,
        "divided by input tokens": weighted / inputs,
        "perplexity: mean of per-batch perplexities": sum(math.exp(b.loss) for b in right) / len(right),
        "tokens: every input token": float(inputs),
        "tokens: padding included": float(positions),
        "tokens: left padding": float(sum(b.predicted for b in left)),
    }


@reference_side
def text_token_lengths(reference_tokenizer: Any, texts: list[str]) -> list[int]:
    """How many tokens each text is, as the model's tokenizer splits it (no padding, no special tokens added by padding)."""
    return [len(reference_tokenizer(text)["input_ids"]) for text in texts]


# Each classic mistake: the variants of loss_variants() it can produce, and the sentence naming it.
LOSS_MISTAKES: dict[tuple[str, ...], str] = {
    ("mean of per-batch losses",): "averages the per-batch mean losses, so a small last batch weighs as much as a full one",
    ("mean of per-text losses",): "averages per-text losses, so a short text weighs as much as a long one",
    ("padding counted", "padding counted, weighted by predicted tokens"): (
        "counts padding positions in the loss: set the labels of padding (attention_mask == 0) to -100"
    ),
    ("weighted by input tokens",): (
        "weights each batch by its input tokens, but the first token of each text is never predicted: count labels[:, 1:] != -100"
    ),
    ("loss, left padding",): (
        "pads on the left, and GPT-2 uses absolute positions: every token of a shorter text moves to a later position "
        "and its loss changes; pad on the right (the tokenizer's default) or pass position_ids computed from the attention mask"
    ),
    ("divided by input tokens",): (
        "divides by the number of input tokens, but only the tokens after the first of each text are predicted: "
        "count labels[:, 1:] != -100"
    ),
}
TOKEN_MISTAKES = {
    "tokens: every input token": "counts every input token, but the first token of each text is never predicted: count labels[:, 1:] != -100",
    "tokens: padding included": "counts padding positions too",
    "tokens: left padding": (
        "pads on the left, so the first token of each padded text is 'predicted' from padding and counted: pad on the right"
    ),
}


def judge_loss(found: float, variants: dict[str, float], where: str, rel_tolerance: float, data: dict[str, Any]) -> Verdict:
    """A reported loss against the token-weighted reference, naming the classic mistake it matches."""
    expected = variants["loss"]
    if math.isclose(found, expected, rel_tol=rel_tolerance):
        return Verdict.passed(f"The loss {where} is the token-weighted mean ({number(found)}).", data=data)
    for names, explanation in LOSS_MISTAKES.items():
        name = next((n for n in names if math.isclose(found, variants[n], rel_tol=rel_tolerance)), None)
        if name is not None:
            return Verdict.failed(
                f"The loss {where} is {number(found)}, but the token-weighted mean is {number(expected)}: your function {explanation}. "
                f"To fix it, {GUIDANCE}.",
                expected=number(expected),
                found=number(found),
                data={**data, "mistake": name},
            )
    return Verdict.failed(
        f"The loss {where} is {number(found)}, but the token-weighted mean cross-entropy is {number(expected)}. {GUIDANCE.capitalize()}.",
        expected=number(expected),
        found=number(found),
        data=data,
    )


class LossParams(CorpusParams):
    """Which returned field is judged, and how closely."""

    field: Literal["loss", "perplexity", "tokens"] = Field(description="The field of the returned dict that is judged.")
    rel_tolerance: float = Field(1e-4, gt=0, lt=0.01, description="Relative tolerance (the same batches give the same sums).")


@check_kind("perplexity_value", LossParams)
def perplexity_value(context: CheckContext, params: LossParams) -> Verdict:
    """loss (token-weighted, padding masked), perplexity (= exp(loss)) or tokens, against the reference."""
    texts, batch_size, outcome = evaluation_call(context, params)
    value = _returned_dict(context, params, outcome, ("loss", "perplexity") if params.field == "perplexity" else (params.field,))
    key = "variants:" + json.dumps([params.model, texts, batch_size])
    if key not in context.memo:
        with quiet_libraries():
            reference = context.models.model(model_spec(params.model, dtype="float32")), context.models.tokenizer(params.model)
            context.memo[key] = context.expected(loss_variants, *reference, texts, batch_size)
    variants = context.memo[key]
    where = f"on {len(texts)} texts in batches of {batch_size}"
    found = value[params.field]
    if not is_number(found):
        return Verdict.failed(f"'{params.field}' should be a number, but it is {kind_of(found)}.", found=kind_of(found))
    found = float(found)
    data = {"texts": len(texts), "batch_size": batch_size, "found": found, **{k: round(v, 6) for k, v in variants.items()}}
    if params.field == "loss":
        return judge_loss(found, variants, where, params.rel_tolerance, data)
    if params.field == "perplexity":
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


def _forward_passes(context: CheckContext, params: CorpusParams) -> tuple[list[str], int, list[dict[str, Any]]]:
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
    with_grad = sum(
        1 for event in forwards if event.get("grad_enabled") is not False or event.get("output_requires_grad") is True
    )
    if with_grad:
        problems.append(
            f"{with_grad} of {len(forwards)} forward passes ran with gradients on: wrap the loop in torch.no_grad() or torch.inference_mode()"
        )
    training = sum(1 for event in forwards if event.get("model_training") is not False)
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
    sizes = [event["input_shape"][0] if event.get("input_shape") else None for event in forwards]
    widths = [event["input_shape"][1] if len(event.get("input_shape") or []) > 1 else 0 for event in forwards]
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


class TimingParams(LatencyTolerance):
    """Hidden calls that check time_generation against the instrumented generate call."""

    model: str = Field("gpt2", description="Hub ID of the model.")
    function: str = Field("time_generation", description="The student's function.")
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
    if not isinstance(value, dict) or not {"latency_s", "tokens_per_s"} <= set(value):
        raise StopCheck(
            Verdict.failed(
                f"{params.function} should return a dict with 'latency_s' and 'tokens_per_s', but it returned {kind_of(value)}.",
                expected="{'latency_s': float, 'tokens_per_s': float}",
                found=kind_of(value),
            )
        )
    if not outcome.generate_events():
        raise StopCheck(Verdict.failed(f"{params.function} never called model.generate.", found="no generate call"))
    return outcome, value


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


@check_kind("generation_synchronize", TimingParams)
def generation_synchronize(context: CheckContext, params: TimingParams) -> Verdict:
    """On CUDA, time_generation synchronises before and after the generate call."""
    rng = context.rng_for("timing-cuda")
    outcome, _ = _timing_call(context, params, rng.choice(params.prompts), rng.randint(*params.tokens), device="cuda")
    return judge_synchronize(outcome, params.function)
