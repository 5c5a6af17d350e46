"""Graded calls: what a check hands a student function, and the same call made to the reference implementation.

A check calls a student function with :class:`Argument` values, each both a recipe the kernel builds (a model, a
fresh copy of a tokenizer, a literal) and the object the reference side is handed in its place. Where the starter
has the notebook write a loader, the model and tokenizer handed are the ones that loader returns
(:func:`handed`), as the notebook's own functions would receive them; the grader's substitutes only where the loader's
objects break the starter's contract (which the loader's own checks charge, once). :func:`graded_call` makes the call
and gives, beside its outcome, what the student's call did and what the reference does on the same inputs
(grader/checks/behaviour.py), for the checks to compare.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from grader.checks.base import CheckContext, StopCheck, Verdict, failed_call
from grader.checks.behaviour import Behaviour
from grader.checks.identity import identify, other_model
from grader.kernel.harness import CallOutcome, copied, handle, item, literal, model, model_spec, tokenizer
from grader.kernel.protocol import ModelSpec, Recipe
from grader.kernel.values import Model, Tokenizer, kind_of


@dataclass(frozen=True)
class Argument:
    """One argument of a graded call: what the kernel builds, what the reference is handed, how feedback names it."""

    recipe: Recipe
    reference: Callable[[], Any] = field(compare=False)
    key: str  # what it is, for the memo (a recipe names a handle, not what the handle holds)
    shown: str

    @classmethod
    def value(cls, value: Any, shown: str | None = None) -> Argument:
        """A plain JSON value, the same on both sides."""
        text = json.dumps(value, sort_keys=True)
        return cls(literal(value), lambda: value, f"lit:{text}", shown if shown is not None else repr(value))


def model_ids(context: CheckContext, value: Any, shown: str | None = None) -> Argument:
    """A JSON value holding model ids (an id, a list of candidates), handed to the reference side with each id the
    zoo serves as the folder it loads from (the grader's own process does not resolve hub ids offline) and any other
    id as a folder that does not exist (so that it fails at once, as a missing id fails in the kernel)."""

    def mapped(item_: Any) -> Any:
        if isinstance(item_, list):
            return [mapped(part) for part in item_]
        if isinstance(item_, str):
            try:
                return context.models.source(item_) if context.models.serves(item_) else f"/nonexistent/{item_}"
            except Exception:  # an id the zoo cannot build: missing on the reference side too
                return f"/nonexistent/{item_}"
        return item_

    text = json.dumps(value, sort_keys=True)
    return Argument(literal(value), lambda: mapped(value), f"ids:{text}", shown if shown is not None else repr(value))


@dataclass(frozen=True)
class Handed:
    """The model and tokenizer handed to a function for one hub id: the notebook loader's, or the grader's."""

    hub_id: str
    model: Argument
    tokenizer: Argument
    own: bool  # the notebook's own loader's objects
    why: str  # why the grader's own were handed instead ("" when the loader's were)


def _loader_arguments(arguments: list[Any], hub_id: str) -> list[Any]:
    """The loader's arguments with ``"$model_id"`` replaced by ``hub_id`` (in lists too)."""
    return [
        hub_id if value == "$model_id" else _loader_arguments(value, hub_id) if isinstance(value, list) else value
        for value in arguments
    ]


def loader_call(context: CheckContext, hub_id: str) -> tuple[CallOutcome, str, str]:
    """The notebook loader called once per submission for ``hub_id`` (what it returned kept in the kernel); with how
    the call reads and the handle that keeps it."""
    loader = context.rubric.contract.loader
    assert loader is not None
    arguments = _loader_arguments(list(loader.arguments), hub_id)
    keep = f"loaded:{hub_id}"
    call = f"{loader.function}({', '.join(map(repr, arguments))})"
    harness = context.require_harness()
    outcome = context.once(
        f"loader-objects:{hub_id}",
        lambda: harness.call(loader.function, [literal(value) for value in arguments], timeout_s=context.timeout_s, keep_as=keep),
    )
    return outcome, call, keep


def loader_problems(context: CheckContext, hub_id: str) -> tuple[list[str], Tokenizer | None, Model | None]:
    """What keeps the notebook loader's objects for ``hub_id`` from the starter's contract (empty: nothing), with the
    tokenizer and model it returned: the model of that id (by its weights) in eval mode on the grading device, in
    float32 on the CPU, and a tokenizer with the pad token and padding side the contract names."""
    loader = context.rubric.contract.loader
    assert loader is not None
    outcome, call, _ = loader_call(context, hub_id)
    if not outcome.ok:
        raise StopCheck(failed_call(outcome, call))
    value = outcome.value
    if not isinstance(value, (tuple, list)) or len(value) <= max(loader.tokenizer, loader.model):
        return [f"{call} returned {kind_of(value)}, not the starter's tuple"], None, None
    tokenizer_found, model_found = value[loader.tokenizer], value[loader.model]
    if isinstance(tokenizer_found, Model) and isinstance(model_found, Tokenizer):
        return [f"{call} returns the model before the tokenizer: the order is the starter's"], None, None
    problems = []
    if not isinstance(tokenizer_found, Tokenizer):
        problems.append(f"item {loader.tokenizer} of what it returns is {kind_of(tokenizer_found)}, not a tokenizer")
    if not isinstance(model_found, Model):
        problems.append(f"item {loader.model} of what it returns is {kind_of(model_found)}, not a model")
    if problems:
        return problems, None, None
    assert isinstance(tokenizer_found, Tokenizer) and isinstance(model_found, Model)
    device = "cuda" if context.on_cuda else "cpu"
    other = other_model(context, model_found, hub_id)
    if other:
        problems.append(f"the model is not {hub_id!r}'s ({other})")
    if model_found.training:
        problems.append("the model is in training mode: call model.eval()")
    if not model_found.device.startswith(device):
        problems.append(f"the model is on {model_found.device}, not {device}")
    if device == "cpu" and model_found.dtype != "torch.float32":
        problems.append(f"the model is in {model_found.dtype.removeprefix('torch.')}, not float32, on the CPU")
    contract = context.rubric.contract.tokenizer
    if contract.pad_token == "eos" and tokenizer_found.pad_token is None:
        problems.append("the tokenizer has no pad token: give it one (its end-of-text token, tokenizer.eos_token)")
    if contract.padding_side in ("left", "right") and tokenizer_found.padding_side != contract.padding_side:
        problems.append(f"the tokenizer pads on the {tokenizer_found.padding_side}, not the {contract.padding_side}")
    return problems, tokenizer_found, model_found


def handed(context: CheckContext, hub_id: str) -> Handed:
    """The model and tokenizer a check hands a function for ``hub_id``: the notebook loader's (a fresh copy of its
    tokenizer each call), where the rubric names a loader and its objects keep the contract; else the grader's."""
    spec = model_spec(hub_id, dtype="float32")
    contract = context.rubric.contract.tokenizer

    def reference_tokenizer() -> Any:
        return context.models.tokenizer_as(hub_id, contract.pad_token, contract.padding_side)

    def reference_model() -> Any:
        return context.models.model(spec)

    tokenizer_key = f"tokenizer:{hub_id}:{contract.pad_token}:{contract.padding_side}"
    grader_model = Argument(model(spec), reference_model, f"model:{json.dumps(spec, sort_keys=True)}", f"the {hub_id} model")
    grader_tokenizer = Argument(context.tokenizer(hub_id), reference_tokenizer, tokenizer_key, f"the {hub_id} tokenizer")
    loader = context.rubric.contract.loader
    if loader is None or context.harness is None:
        return Handed(hub_id, grader_model, grader_tokenizer, own=False, why="")
    try:
        problems, _, _ = loader_problems(context, hub_id)
    except StopCheck as stop:
        problems = [stop.verdict.message.rstrip(".")]
    if problems:
        return Handed(hub_id, grader_model, grader_tokenizer, own=False, why="; ".join(problems))
    _, _, keep = loader_call(context, hub_id)
    kept = handle(keep)
    return Handed(
        hub_id,
        Argument(item(kept, loader.model), reference_model, f"model:{json.dumps(spec, sort_keys=True)}", f"the {hub_id} model"),
        Argument(copied(item(kept, loader.tokenizer)), reference_tokenizer, tokenizer_key, f"the {hub_id} tokenizer"),
        own=True,
        why="",
    )


def grader_model(context: CheckContext, spec: ModelSpec, shown: str | None = None) -> Argument:
    """A model the grader loads (in the kernel and on the reference side) from ``spec``."""
    return Argument(
        model(spec),
        lambda: context.models.model(spec),
        f"model:{json.dumps(spec, sort_keys=True)}",
        shown or f"the {spec['hub_id']} model",
    )


def grader_tokenizer(context: CheckContext, hub_id: str) -> Argument:
    """The tokenizer of ``hub_id`` as the starter's contract sets it up (a fresh copy each call, on both sides)."""
    contract = context.rubric.contract.tokenizer
    return Argument(
        tokenizer(hub_id, pad_token=contract.pad_token, padding_side=contract.padding_side),
        lambda: context.models.tokenizer_as(hub_id, contract.pad_token, contract.padding_side),
        f"tokenizer:{hub_id}:{contract.pad_token}:{contract.padding_side}",
        f"the {hub_id} tokenizer",
    )


@dataclass(frozen=True)
class GradedCall:
    """A student function's call, and how to read what it did beside what the reference does on the same inputs."""

    function: str
    arguments: tuple[Argument, ...]
    outcome: CallOutcome
    context: CheckContext = field(compare=False, repr=False)

    @property
    def behaviour(self) -> Behaviour:
        """What the student's call did."""
        return Behaviour.of(self.outcome.events, self.outcome.models, lambda found: identify(self.context, found))

    def reference(self, name: str | None = None) -> Behaviour:
        """What the reference implementation of ``name`` (default: the same function) does on the same inputs."""
        return reference_behaviour(self.context, name or self.function, self.arguments)


def reference_behaviour(context: CheckContext, function: str, arguments: tuple[Argument, ...] | list[Argument]) -> Behaviour:
    """What the reference implementation of ``function`` does on these arguments (once per submission and inputs)."""
    if context.reference is None:
        raise StopCheck(Verdict.error("The grader has no reference implementation to compare this call with."))
    reference = context.reference
    key = "reference-trace:" + json.dumps([function, [argument.key for argument in arguments]])
    trace: Mapping[str, Any] = context.once(
        key, lambda: reference.trace(function, *(argument.reference() for argument in arguments))
    )
    return Behaviour.of(trace["events"], trace["models"], lambda found: identify(context, found))


def graded_call(
    context: CheckContext,
    function: str,
    *arguments: Argument,
    pace_s: float = 0.0,
    figures: bool = False,
    watch: tuple[str, ...] = (),
    memo: str | None = None,
) -> GradedCall:
    """Call ``function`` in the kernel with ``arguments``; ``memo`` shares the call between the checks that judge it
    (one call per submission and key)."""

    def call() -> CallOutcome:
        return context.call(function, *(argument.recipe for argument in arguments), pace_s=pace_s, figures=figures, watch=watch)

    outcome = context.once(memo, call) if memo is not None else call()
    return GradedCall(function, tuple(arguments), outcome, context)
