"""Generic: a model loader's contract, hidden corpora, and a token-weighted loss judged against the
classic ways of averaging it wrongly. Used by every assignment that loads a model or reports a loss.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from grader.checks.base import (
    CheckContext,
    StopCheck,
    TargetParams,
    Verdict,
    check_kind,
    expect_shape,
    number,
)
from grader.checks.identity import other_model
from grader.checks.numbers import agrees
from grader.checks.shapes import MODEL, TOKENIZER, items
from grader.grading.replay import reference_side
from grader.kernel.harness import CallOutcome, literal, model_spec
from grader.kernel.protocol import Event
from grader.kernel.values import Model, Tokenizer
from grader.quiet import quiet_libraries
from grader.zoo.build import CORPUS_PATH, TINY_MODELS, read_documents

GUIDANCE = "add up loss x predicted tokens over all batches, divide by the total number of predicted tokens, then take exp"


# --------------------------------------------------------------------------------------
# load_model_and_tokenizer
# --------------------------------------------------------------------------------------


class LoaderParams(TargetParams):
    """How the student's loader is called and what is judged."""

    model_id: str = Field("gpt2", description="The model id passed.")
    precision: str | None = Field("float32", description="The precision passed (null: the loader takes only the id).")
    more_ids: list[str] = Field(
        default_factory=list,
        description="Further model ids the loader is called with (loader_same_id): a name hard-coded in the loader matches at most one.",
    )
    more_precisions: list[str] = Field(
        default_factory=list, description="Further precisions the loader is called with (loader_cpu_float32)."
    )
    contract: bool = Field(
        False,
        description="Also judge what the starter asks of the returned objects (eval mode, the tokenizer's pad token and padding side).",
    )

    @property
    def call_text(self) -> str:
        """How the call reads in feedback."""
        arguments = [self.model_id] if self.precision is None else [self.model_id, self.precision]
        return f"{self.function}({', '.join(map(repr, arguments))})"


def _loader_outcome(context: CheckContext, params: LoaderParams) -> CallOutcome:
    key = f"loader:{params.function}:{params.model_id}:{params.precision}"
    arguments = [literal(params.model_id)] + ([] if params.precision is None else [literal(params.precision)])
    outcome: CallOutcome = context.once(key, lambda: context.call(params.function, *arguments))
    return outcome


def _loaded(context: CheckContext, params: LoaderParams) -> tuple[Tokenizer, Model]:
    outcome = _loader_outcome(context, params)
    value = context.returned(outcome, params.function)
    if isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], Model) and isinstance(value[1], Tokenizer):
        raise StopCheck(
            Verdict.failed(
                f"{params.function} returns (model, tokenizer): the order is (tokenizer, model).",
                expected="(tokenizer, model)",
                found="(model, tokenizer)",
            )
        )
    tokenizer, loaded = expect_shape(value, items(TOKENIZER, MODEL, names="(tokenizer, model)"), params.function)
    return tokenizer, loaded


def contract_problems(context: CheckContext, loaded_tokenizer: Tokenizer, loaded_model: Model) -> list[str]:
    """What the starter asks of a loader's objects that these lack: eval mode, and the tokenizer's pad token and padding
    side as the rubric's contract names them (the objects every other check then hands the notebook's functions)."""
    problems = []
    if loaded_model.training:
        problems.append("the model is in training mode: call model.eval()")
    contract = context.rubric.contract.tokenizer
    if contract.pad_token == "eos" and loaded_tokenizer.pad_token is None:
        problems.append("the tokenizer has no pad token: give it one (its end-of-text token, tokenizer.eos_token)")
    if contract.padding_side in ("left", "right") and loaded_tokenizer.padding_side != contract.padding_side:
        problems.append(
            f"the tokenizer pads on the {loaded_tokenizer.padding_side}: set tokenizer.padding_side = {contract.padding_side!r}"
        )
    return problems


def _zoo_model(hub_id: str) -> str | None:
    """The name of the zoo's model that ``hub_id`` loads (None for an id it does not serve)."""
    return next((model.name for model in TINY_MODELS if hub_id in model.hub_ids), None)


def source_names_hub_id(source: str) -> bool:
    """Whether a ``from_pretrained`` source names an id the zoo serves (itself, or its hub cache folder)."""
    return _source_id(source) is not None


def _source_id(source: str) -> str | None:
    """The hub id a ``from_pretrained`` source names: the id itself, or a hub cache's ``models--org--name`` folder."""
    if _zoo_model(source):
        return source
    folder = re.search(r"models--([^/\\]+)", source)
    candidate = folder.group(1).replace("--", "/") if folder else None
    return candidate if candidate and _zoo_model(candidate) else None


def tokenizer_origin(context: CheckContext, events: Sequence[Event], tokenizer: Tokenizer) -> str | None:
    """The hub id ``tokenizer`` was loaded from: as the runtime recorded it while it loaded (in the call that returned
    it, or in the notebook's cells for one made there), else by the hub cache folder its vocabulary was read from (a
    copy of a loaded tokenizer keeps it). None where neither names an id the zoo serves (a tokenizer saved to a folder
    of the student's and loaded from there): the grader cannot tell, and does not charge it."""
    loads = _tokenizer_loads(context, events, tokenizer)
    recorded = _source_id(loads[-1]["source"]) if loads else None
    return recorded or _source_id(tokenizer.files)


def _tokenizer_loads(context: CheckContext, events: Sequence[Event], tokenizer: Tokenizer) -> list[Any]:
    """The runtime's records of ``tokenizer`` being loaded: in the call that returned it, else in the notebook's cells."""
    if not tokenizer.serial:
        return []
    loads = [event for event in events if event["type"] == "tokenizer" and event["serial"] == tokenizer.serial]
    if not loads:
        notebook = context.once("notebook-events", lambda: context.require_harness().notebook_events())
        loads = [event for event in notebook.events if event["type"] == "tokenizer" and event["serial"] == tokenizer.serial]
    return loads


def tokenizer_source(context: CheckContext, events: Sequence[Event], tokenizer: Tokenizer) -> str:
    """What ``tokenizer`` was loaded from, as given to ``from_pretrained`` ('' where not recorded): a hub id, or a
    folder."""
    loads = _tokenizer_loads(context, events, tokenizer)
    return str(loads[-1]["source"]) if loads else ""


def tokenizer_from_another_id(context: CheckContext, events: Sequence[Event], tokenizer: Tokenizer, model_id: str) -> str:
    """Where a loader's tokenizer came from when that is not ``model_id`` (empty when it is, or cannot be told): the id
    it was loaded from (another id of the same zoo model passes)."""
    origin = tokenizer_origin(context, events, tokenizer)
    if origin is None or _zoo_model(origin) == _zoo_model(model_id):
        return ""
    return repr(origin)


@check_kind("loader_same_id", LoaderParams)
def loader_same_id(context: CheckContext, params: LoaderParams) -> Verdict:
    """The loader loads the tokenizer and the model from the id it is given, whichever id that is (and, where the params
    ask, sets them up as the starter says)."""
    sources: dict[str, str] = {}  # a tokenizer's source that names no hub id (a folder) -> the id asked
    for model_id in [params.model_id, *params.more_ids]:
        asked = params.model_copy(update={"model_id": model_id})
        loaded_tokenizer, loaded_model = _loaded(context, asked)
        # The model is known by its weights, the tokenizer by the id it was loaded from (a name_or_path can be set to
        # anything).
        wrong = {}
        events = _loader_outcome(context, asked).events
        tokenizer_from = tokenizer_from_another_id(context, events, loaded_tokenizer, model_id)
        source = tokenizer_source(context, events, loaded_tokenizer)
        if tokenizer_from:
            wrong["tokenizer"] = tokenizer_from
        elif source and not source_names_hub_id(source):
            # A folder of the student's: which id it holds cannot be told, but the same folder for two ids that load
            # other models is a loader that ignores the id it is given.
            earlier = sources.setdefault(source, model_id)
            if _zoo_model(earlier) != _zoo_model(model_id):
                wrong["tokenizer"] = f"{source!r}, the folder it also loads for {earlier!r}"
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
        problems = contract_problems(context, loaded_tokenizer, loaded_model) if params.contract else []
        if problems:
            return Verdict.failed(
                f"{asked.call_text}: {'; '.join(problems)}.",
                expected="the model in eval mode and the tokenizer set up as the starter asks",
                found="; ".join(problems),
            )
    if params.contract:
        return Verdict.passed(
            f"{params.call_text} loads the tokenizer and the model from the same id, whichever id it is given, and sets them "
            "up as the starter asks."
        )
    return Verdict.passed(f"{params.call_text} loads the tokenizer and the model from the same id, whichever id it is given.")


@check_kind("loader_eval_device", LoaderParams)
def loader_eval_device(context: CheckContext, params: LoaderParams) -> Verdict:
    """The loader returns the model in eval mode on the detected device, and the tokenizer with the pad token and
    padding side the starter asks for."""
    loaded_tokenizer, loaded_model = _loaded(context, params)
    call = params.call_text
    device = "cuda" if context.on_cuda else "cpu"
    problems = contract_problems(context, loaded_tokenizer, loaded_model)
    if not loaded_model.device.startswith(device):
        problems.append(f"the model is on {loaded_model.device}, not {device}")
    if problems:
        return Verdict.failed(
            f"{call}: {'; '.join(problems)}.",
            expected=f"a model in eval mode on {device}, and the tokenizer the starter asks for",
            found="; ".join(problems),
        )
    return Verdict.passed(f"{call} returns the model in eval mode on {device}, and the tokenizer the starter asks for.")


@check_kind("loader_cpu_float32", LoaderParams)
def loader_cpu_float32(context: CheckContext, params: LoaderParams) -> Verdict:
    """On the CPU, the loader loads the model in float32 (every parameter) whatever precision was asked for."""
    for precision in [params.precision, *params.more_precisions]:
        asked = params.model_copy(update={"precision": precision})
        try:
            _, loaded_model = _loaded(context, asked)
        except StopCheck:
            if precision == params.precision:
                raise
            continue  # a precision the starter does not name may be refused; loaded, it must be float32
        call = asked.call_text
        others = [dtype for dtype in loaded_model.parameter_dtypes or (loaded_model.dtype,) if dtype != "torch.float32"]
        if loaded_model.dtype != "torch.float32" or others:
            found = ", ".join(sorted({loaded_model.dtype, *others} - {"torch.float32"})).replace("torch.", "")
            return Verdict.failed(
                f"On the CPU, {call} loads the model (or some of its parameters) in {found}: the CPU must use float32 "
                "whatever precision was asked for.",
                expected="torch.float32",
                found=found,
            )
    return Verdict.passed(f"On the CPU, {params.call_text} falls back to float32, whatever precision is asked for.")


# --------------------------------------------------------------------------------------
# evaluate_loss
# --------------------------------------------------------------------------------------


class CorpusParams(TargetParams):
    """The corpus evaluate_loss is called on: fixed public texts, or hidden ones drawn at grading time."""

    model: str = Field("gpt2", description="Hub ID of the model.")
    texts: list[str] = Field(default_factory=list, description="Public texts; empty means a hidden corpus is drawn.")
    batch_size: int = Field(4, ge=1, description="Batch size for the public texts.")
    corpus: str = Field("hidden", description="Name of the hidden corpus: checks naming the same corpus share its draw.")
    long_texts: list[int] = Field([4, 6], min_length=2, max_length=2, description="Range of long predictable texts drawn.")
    short_texts: list[int] = Field([3, 5], min_length=2, max_length=2, description="Range of short odd texts drawn.")
    batch_sizes: list[int] = Field(
        [2, 3, 4], min_length=1, description="Batch sizes to draw from (one leaving a ragged last batch)."
    )
    very_long: list[int] = Field(
        [0, 0],
        min_length=2,
        max_length=2,
        description="Range of documents joined into one very long text among the long ones (0: none): a function that "
        "truncates its batches loses tokens of it.",
    )
    repeated: bool = Field(False, description="Whether one long text is given twice (a function that drops repeats is seen).")
    end_of_text: str = Field(
        "<|endoftext|>",
        description="A document separator put between two documents of one long text (empty: none): a real token that a "
        "function masking the padding by its id (the same end-of-text id) leaves out.",
    )
    other_model: str = Field("distilgpt2", description="Hub ID of the model of the second call (every argument differs).")
    other_corpus: str = Field("", description="Name of the second call's hidden corpus (empty: one call only).")
    other_batch_size: int | None = Field(
        None,
        ge=1,
        description="Batch size of the second call on the public texts (default: the same, so that only the model differs: "
        "a function that remembers its results by texts and batch size answers the second with the first's).",
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
    if params.very_long[1] > 0:
        start = rng.randrange(len(documents))
        longs.insert(
            rng.randrange(len(longs) + 1),
            " ".join(documents[(start + i) % len(documents)] for i in range(rng.randint(*params.very_long))),
        )
    if params.repeated:
        longs.insert(rng.randrange(1, len(longs) + 1), rng.choice(longs))
    shorts = [
        " ".join(rng.sample(params.odd_words, rng.randint(2, 4))).capitalize() + "."
        for _ in range(rng.randint(*params.short_texts))
    ]
    texts = longs + shorts
    ragged = [size for size in params.batch_sizes if len(texts) % size]
    batch_size = rng.choice(ragged or params.batch_sizes)
    if params.end_of_text and longs:
        # Drawn last, so that the texts and batch size drawn before stay what they were for a seed.
        # The longest text not given twice (its repeat must stay the same text): made longer, its batch is padded
        # more, never less, so a loss that counts the padding stays as far from the right one.
        single = [index for index, text in enumerate(longs) if longs.count(text) == 1]
        if single:
            joined = max(single, key=lambda index: len(longs[index]))
            texts[joined] = f"{texts[joined]} {params.end_of_text} {documents[rng.randrange(len(documents))]}"
    return texts, batch_size


def draw_corpus(context: CheckContext, params: CorpusParams) -> tuple[list[str], int]:
    """The texts and batch size of a call: the public ones, or a hidden draw shared by name."""
    if params.texts:
        return list(params.texts), params.batch_size
    return hidden_corpus(context.rng_for(f"corpus:{params.corpus}"), params)


def draw_corpora(context: CheckContext, params: CorpusParams) -> list[tuple[str, list[str], int]]:
    """(hub id, texts, batch size) of each call: the first on ``model``; where the params name a second corpus (or
    public texts), a second on ``other_model`` with another draw (or the public texts at another batch size), every
    argument different."""
    texts, batch_size = draw_corpus(context, params)
    calls = [(params.model, texts, batch_size)]
    if params.texts:
        calls.append((params.other_model, list(params.texts), params.other_batch_size or batch_size))
    elif params.other_corpus:
        other_texts, other_size = hidden_corpus(context.rng_for(f"corpus:{params.other_corpus}"), params)
        if other_size == batch_size:
            sizes = [size for size in params.batch_sizes if size != batch_size]
            other_size = context.rng_for(f"corpus:{params.other_corpus}:size").choice(sizes) if sizes else batch_size + 1
        calls.append((params.other_model, other_texts, other_size))
    return calls


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
    bos = reference_tokenizer.bos_token
    prefixed = _batch_facts(reference_model, reference_tokenizer, [bos + text for text in texts], batch_size) if bos else right
    return {
        "loss, BOS prepended": sum(b.loss * b.predicted for b in prefixed) / sum(b.predicted for b in prefixed),
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
    ("loss, BOS prepended",): (
        "prepends a beginning-of-text token to each text, so its first token is scored too: a convention some use, but "
        "the course's perplexity (the seed's labels=input_ids) scores each text's tokens after its first, as the text "
        "is; tokenize the texts as they are"
    ),
}
# Mistakes that are another convention, not a wrong sum: their explanation says what to do, the usual guidance does not.
CONVENTIONS = {("loss, BOS prepended",)}
TOKEN_MISTAKES = {
    "tokens: every input token": "counts every input token, but the first token of each text is never predicted: count labels[:, 1:] != -100",
    "tokens: padding included": "counts padding positions too",
    "tokens: left padding": (
        "pads on the left, so the first token of each padded text is 'predicted' from padding and counted: pad on the right"
    ),
}


def reference_variants(context: CheckContext, hub_id: str, texts: list[str], batch_size: int) -> dict[str, float]:
    """The reference's token-weighted loss and its classic wrong variants on these texts, once per submission."""

    def compute() -> dict[str, float]:
        with quiet_libraries():
            reference = context.models.model(model_spec(hub_id, dtype="float32")), context.models.tokenizer(hub_id)
            variants: dict[str, float] = context.expected(loss_variants, *reference, texts, batch_size)
            return variants

    return context.once("variants:" + json.dumps([hub_id, texts, batch_size]), compute)


def judge_loss(found: float, variants: dict[str, float], where: str, rel_tolerance: float, data: dict[str, Any]) -> Verdict:
    """A reported loss against the token-weighted reference, naming the classic mistake it matches."""
    expected = variants["loss"]
    # Or at the precision it is shown with (a loss rounded for the report to 2 decimals or more: within 0.5 %).
    if agrees(found, expected, rel_tolerance, coarsest=0.005):
        return Verdict.passed(f"The loss {where} is the token-weighted mean ({number(found)}).", data=data)
    for names, explanation in LOSS_MISTAKES.items():
        name = next((n for n in names if math.isclose(found, variants[n], rel_tol=rel_tolerance)), None)
        if name is not None:
            return Verdict.failed(
                f"The loss {where} is {number(found)}, but the token-weighted mean is {number(expected)}: your function {explanation}."
                + ("" if names in CONVENTIONS else f" To fix it, {GUIDANCE}."),
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
