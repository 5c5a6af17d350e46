"""Check kinds of the ``quantization`` assignment: Optimum PTQ, cache/padding ablation, batching (seeds 001, 002).

Each function is called on two hidden input sets that differ in every argument (the model, ``gpt2`` then
``distilgpt2``, the prompts, the lengths, the batch sizes, ``use_cache``), with the model and tokenizer the notebook's
own loader returns where they keep the starter's contract (grader/checks/calls.py). What a call did is compared with
what the reference implementation (the solution's definitions, run in the grader's process) does on the same inputs,
as multisets of generate calls (grader/checks/behaviour.py): order, threads, repetitions (a best-of-three timer),
warm-ups and helper calls are free. Timings are judged against the instrumented generate calls they time, paced as in
the ``latency`` assignment (grader/checks/timed.py, grader/checks/timing.py). The quantized model is judged by the ONNX
graph its live session was created from (read in the kernel); perplexity by the shared code of the ``perplexity``
assignment, with an INT8 ONNX model the grader quantizes itself (a PTQ mistake is charged once); the controller's
table against what its own measuring calls returned during the run, each row against its scenario's measurement.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import shutil
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field

from grader.checks.base import (
    CheckContext,
    StopCheck,
    TargetParams,
    Verdict,
    check_kind,
    expect_shape,
    number,
    shape_verdict,
)
from grader.checks.behaviour import (
    Behaviour,
    Generation,
    adds_work,
    carrying,
    hooks_add_work,
    matching,
    sleeps_in,
)
from grader.checks.calls import Argument, GradedCall, graded_call, handed
from grader.checks.common import claim_records, screen_answer, table_facts
from grader.checks.identity import identify, reference_fingerprint
from grader.checks.labels import missing_scenarios, read_scenario
from grader.checks.loss import CorpusParams, draw_corpus, hidden_corpus, judge_loss, reference_variants, text_token_lengths
from grader.checks.numbers import agrees, shown_decimals
from grader.checks.shapes import ANY, FRAME, items, keyed_by, keys
from grader.checks.timed import Timed, again_while_alike, judge_timed_settings, reads_too_long, timed_call
from grader.checks.timing import (
    LatencyTolerance,
    again_while,
    agrees_with_timed,
    event_rows,
    judge_latency,
    judge_measurement,
    judge_timed_latency,
    latency_readings,
    max_matching,
    mean_of_rates,
    new_tokens_range,
    span,
    tokens_limit,
    upper_bound,
    warmup_before,
)
from grader.grading.replay import NotRecorded
from grader.grading.rubric import validated_params
from grader.kernel.harness import CallOutcome, literal, mapping, onnx_model
from grader.kernel.protocol import GenerateEvent, OnnxRunEvent, ReturnedEvent
from grader.kernel.values import Frame, OnnxModel, decode, is_number, kind_of
from grader.quiet import quiet_libraries

QUANTIZED_FILE = "model_quantized.onnx"  # the file ORTQuantizer writes
METRICS = ("latency_s", "new_tokens", "tokens_per_s", "ms_per_token")
SETTING_METRICS = ("latency_s", "tokens_per_s", "ms_per_token")


class PromptsParams(LatencyTolerance):
    """Two hidden input sets: prompts of different lengths (so that a batch is padded) and max_new_tokens, on two models."""

    model: str = Field("gpt2", description="Hub ID of the model of the first call.")
    other_model: str = Field("distilgpt2", description="Hub ID of the model of the second call (every argument differs).")
    prompts: list[str] = Field(
        min_length=3, description="Hidden prompts; each call draws some (the first the shortest and longest)."
    )
    draws: int = Field(3, ge=2, description="How many prompts each call is passed.")
    tokens: list[int] = Field([12, 24], min_length=2, max_length=2, description="Range [low, high] of max_new_tokens.")
    rate_tolerance: float = Field(0.02, gt=0, description="Relative tolerance of derived rates (tokens_per_s, ms_per_token).")


def two_lengths(rng: Any, low: int, high: int) -> tuple[int, int]:
    """Two different values in [low, high] (or just above it): one drawn, the other its mirror."""
    first = rng.randint(low, high)
    second = low + high - first
    if second == first:
        second = first + 1
    return first, second


def draw_inputs(context: CheckContext, params: PromptsParams, name: str) -> list[tuple[str, list[str], int]]:
    """The two hidden calls' (hub id, prompts, max_new_tokens), every one different: the first call gets the shortest
    and longest prompts and some others, the second the prompts the first did not get (topped up from the others)."""
    rng = context.rng_for(name)
    ordered = sorted(params.prompts, key=len)
    middle = rng.sample(ordered[1:-1], min(max(params.draws - 2, 0), len(ordered) - 2))
    first = [ordered[-1], *middle, ordered[0]]
    second = [prompt for prompt in ordered if prompt not in first][: params.draws]
    second += [prompt for prompt in middle if prompt not in second][: params.draws - len(second)]
    second += [prompt for prompt in (ordered[0], ordered[-1]) if prompt not in second][: max(params.draws - len(second), 0)]
    rng.shuffle(first)
    rng.shuffle(second)
    tokens = two_lengths(rng, *params.tokens)
    return [(params.model, first, tokens[0]), (params.other_model, second, tokens[1])]


def _metrics_dict(value: Any, call: str, names: tuple[str, ...]) -> dict[str, Any]:
    value = expect_shape(value, keys(*names), call)
    bad = [key for key in names if not is_number(value[key]) or float(value[key]) <= 0]
    if bad:
        raise StopCheck(
            Verdict.failed(
                f"In {call}, {bad[0]} should be a positive number, but it is {kind_of(value[bad[0]])}.",
                found=kind_of(value[bad[0]]),
            )
        )
    return value


def watched_arguments(event: ReturnedEvent) -> list[Any]:
    """What a watched function was given, in its signature's order (defaults applied), each decoded (a model or
    tokenizer stays the raw description, with its ``serial`` or ``padding_side``)."""
    pairs = event["arguments"]
    pairs = [pair for pair in pairs if isinstance(pair, list) and len(pair) == 2] if isinstance(pairs, list) else []
    return [
        decode(description) if isinstance(description, dict) and description.get("kind") not in ("object", None) else description
        for _, description in pairs
    ]


def argument(event: ReturnedEvent, name: str, position: int) -> Any:
    """The argument a watched function was given as ``name`` (the starter's parameter name), else at ``position``
    (in its signature's order; None where it took fewer), decoded as :func:`watched_arguments` decodes it."""
    pairs = event["arguments"] if isinstance(event["arguments"], list) else []
    values = watched_arguments(event)
    names = [pair[0] if isinstance(pair, list) and len(pair) == 2 else None for pair in pairs]
    names = [pair_name for pair_name in names if pair_name is not None]
    if name in names:
        return values[names.index(name)]
    return values[position] if position < len(values) else None


def is_onnx_argument(value: Any) -> bool:
    """Whether a watched argument (a raw description) is an Optimum ONNX Runtime model."""
    return isinstance(value, dict) and value.get("kind") in ("object", "onnx_model") and "onnxruntime" in str(value.get("type"))


def is_torch_argument(value: Any) -> bool:
    """Whether a watched argument (a raw description) is a PyTorch model the runtime knows by its serial."""
    return isinstance(value, dict) and isinstance(value.get("serial"), int) and not is_onnx_argument(value)


# --------------------------------------------------------------------------------------
# measure_generation
# --------------------------------------------------------------------------------------


class MeasureParams(PromptsParams, TargetParams):
    """Two hidden calls of measure_generation on a batch of prompts, paced so that a timer around other work shows."""

    use_cache: bool = Field(False, description="use_cache passed to the first call (the second gets the other value).")


# What the timed generate of measure_generation is compared on with the reference's: the model it was given, the
# prompts' ids, the limit of new tokens, use_cache, the padding side of the batch, and inputs on the model's device.
MEASURE_ASPECTS = ("model", "rows", "limit", "use_cache", "beams", "padding", "dtype", "device", "inputs", "added")


@dataclass(frozen=True)
class Measured:
    """One hidden measure_generation call: its inputs, and the timed call (what it did beside the reference)."""

    hub_id: str
    prompts: list[str]
    max_new_tokens: int
    use_cache: bool
    timed: Timed

    @property
    def call(self) -> str:
        return self.timed.call

    @property
    def value(self) -> dict[str, Any]:
        value: dict[str, Any] = self.timed.value
        return value


def measured_calls(context: CheckContext, params: MeasureParams) -> list[Measured]:
    """The two hidden measure_generation calls (shared by its checks), each made again while its latency reads too
    long (a preempted run does not repeat; a timer around other work does)."""
    calls = []
    for index, (hub_id, prompts, max_new_tokens) in enumerate(draw_inputs(context, params, "measure")):
        use_cache = params.use_cache if index == 0 else not params.use_cache
        objects = handed(context, hub_id)
        call = (
            f"{params.function}({hub_id} model, tokenizer, <{len(prompts)} prompts>, max_new_tokens={max_new_tokens}, "
            f"use_cache={use_cache})"
        )
        arguments = [
            objects.model,
            objects.tokenizer,
            Argument.value(prompts, f"{len(prompts)} prompts"),
            Argument.value(max_new_tokens),
            Argument.value(use_cache),
        ]

        def returns(outcome: CallOutcome, call: str = call) -> Any:
            return _metrics_dict(context.returned(outcome, call, keys(*METRICS)), call, METRICS)

        timed = timed_call(
            context,
            params,
            params.function,
            arguments,
            hub_id,
            call,
            lambda value: value.get("latency_s"),
            returns,
            MEASURE_ASPECTS,
            memo=f"{call}:{prompts}:{params.pace_s}:{objects.own}",
        )
        calls.append(Measured(hub_id, prompts, max_new_tokens, use_cache, timed))
    return calls


MEASURE_FIX = (
    "Tokenize the prompts you are given as one padded batch, and pass it with max_new_tokens and use_cache to "
    "model.generate on the model you are given, with the inputs moved to model.device."
)


@check_kind("batch_measure_tokens", MeasureParams)
def batch_measure_tokens(context: CheckContext, params: MeasureParams) -> Verdict:
    """measure_generation's timed generate does what the reference's does on the same inputs (the model, prompts,
    max_new_tokens and use_cache it is given), it counts the new tokens of every sequence and derives its rates."""
    for measured in measured_calls(context, params):
        timed = measured.timed.timed()
        value = measured.value
        verdict = judge_timed_settings(context, measured.timed, MEASURE_FIX) or judge_measurement(
            params.rate_tolerance, value, timed, measured.max_new_tokens
        )
        if verdict is not None:
            return verdict
    return Verdict.passed(
        f"{params.function} generates the prompts, max_new_tokens and use_cache it is given on the model it is given, "
        "counts the new tokens of every sequence and derives its rates from them."
    )


# The kinds of measure_generation's own checks (batch_measure_latency is hidden_checks.py's): their hidden calls are
# the ones the checks of functions built on measure_generation ask about.
MEASURE_KINDS = ("batch_measure_latency", "batch_measure_tokens")


def _measure_params(context: CheckContext) -> MeasureParams | None:
    for check in context.rubric.checks:
        if check.kind in MEASURE_KINDS:
            return validated_params(MeasureParams, check)
    return None


def measure_drops(context: CheckContext) -> set[str]:
    """What the notebook's measure_generation itself does not pass on in its own hidden calls (charged in its own
    checks, not again in its callers'): "rows" (the prompts), "limit" (max_new_tokens), "use_cache", "padding",
    "model"."""
    params = _measure_params(context)
    if params is None:
        return set()
    try:
        calls = measured_calls(context, params)
    except StopCheck:
        return set()
    # Only what its timed generate does (charged in its own checks): a warm-up of its own on a model it loaded itself
    # is charged nowhere, so it must not excuse its callers from running the models they are given.
    return {aspect for measured in calls for unmatched in measured.timed.unmatched() for aspect in unmatched.differ}


def measure_mistimes(context: CheckContext) -> bool:
    """Whether the notebook's measure_generation itself reports a latency its timed generate disagrees with (charged in
    its own check, not again where a caller reports what it returned)."""
    params = _measure_params(context)
    if params is None:
        return False
    try:
        calls = measured_calls(context, params)
    except StopCheck:
        return False
    return any(
        judge_timed_latency(params, float(m.value["latency_s"]), m.timed.outcome, m.timed.timed(), m.max_new_tokens) is not None
        for m in calls
    )


def measure_ignores_inputs(context: CheckContext, outcome: CallOutcome, measure_function: str = "measure_generation") -> bool:
    """Whether a call that went through the notebook's measure_generation can be judged only by what it gave it:
    measure_generation itself does not generate the prompts, max_new_tokens, use_cache or padding it is given (charged
    in its own checks)."""
    if not outcome.returned_events(measure_function):
        return False  # the call never used measure_generation: its own generate calls are its own
    return bool(measure_drops(context) & {"rows", "limit", "use_cache", "padding"})


def caller_aspects(
    context: CheckContext, outcome: CallOutcome, aspects: tuple[str, ...], measure_function: str = "measure_generation"
) -> tuple[str, ...]:
    """What a call that went through the notebook's measure_generation is compared on: ``aspects``, less the model
    where measure_generation itself runs another model than the one it is given (charged in its own checks)."""
    if "model" not in aspects or not outcome.returned_events(measure_function) or "model" not in measure_drops(context):
        return aspects
    return tuple(aspect for aspect in aspects if aspect != "model")


@dataclass(frozen=True)
class MeasureCall:
    """One call of the student's measure_generation inside a hidden call of a function built on it, as its caller
    made it: the arguments in measure_generation's order (model, tokenizer, prompts, max_new_tokens, use_cache: the
    order the grader's own hidden calls rely on), read as the call began, and what it returned."""

    prompts: list[str] | None
    max_new_tokens: Any
    use_cache: Any
    padding_sides: frozenset[str]  # "left"/"right" passed beyond the five parameters, else the tokenizer's padding_side
    returned: Any
    model: Any = None  # the model argument's raw description (its type and serial)

    @property
    def uses_cache(self) -> bool:
        return not (isinstance(self.use_cache, (bool, int)) and not self.use_cache)

    def given(self, prompts: list[str], max_new_tokens: int) -> bool:
        """Whether this call was given these prompts (in any order) and this max_new_tokens."""
        return self.prompts is not None and sorted(self.prompts) == sorted(prompts) and self.max_new_tokens == max_new_tokens


def measure_calls(outcome: CallOutcome, function: str) -> list[MeasureCall]:
    """Every call of the watched ``function`` during a hidden call, in order (see :class:`MeasureCall`)."""
    calls = []
    for event in outcome.returned_events(function):
        values = watched_arguments(event)
        positional = (values + [None] * 5)[:5]
        given = positional[2]
        prompts = list(given) if isinstance(given, (list, tuple)) and all(isinstance(p, str) for p in given) else None
        # A side passed to measure_generation beyond its five parameters is the one asked for; else the tokenizer's.
        sides = {value for value in values[5:] if value in ("left", "right")}
        if not sides and len(values) > 1 and isinstance(values[1], dict):
            sides = {values[1].get("padding_side")}
        calls.append(
            MeasureCall(
                prompts=prompts,
                max_new_tokens=positional[3],
                use_cache=positional[4],
                padding_sides=frozenset(side for side in sides if isinstance(side, str)),
                returned=decode(event["value"]),
                model=positional[0],
            )
        )
    return calls


def _returned_latencies(outcome: CallOutcome, function: str) -> set[float]:
    """The latency_s of every dict a watched function returned during the call."""
    return {
        float(item["latency_s"])
        for returned in outcome.returned_events(function)
        if isinstance(item := decode(returned["value"]), dict) and is_number(item.get("latency_s"))
    }


# --------------------------------------------------------------------------------------
# Sweeps built on measure_generation: called paced, watching it, made again while a latency reads too long
# --------------------------------------------------------------------------------------


def sweep_call(
    context: CheckContext,
    params: Any,
    arguments: list[Argument],
    too_long: Callable[[GradedCall], bool],
    memo: str,
    paced: bool = True,
) -> GradedCall:
    """``params.function(*arguments)``, watching the student's measuring function, paced (the first of a function's
    two calls: a timer around a warm-up shows there; the second, there to vary every argument, is not, which saves
    a pause per batch); made again (see :func:`again_while_alike`) while it returns and ``too_long`` says a latency it
    reports reads too long. Once per memo."""
    pace_s = params.pace_s if paced else 0.0

    def attempt() -> GradedCall:
        return graded_call(context, params.function, *arguments, pace_s=pace_s, watch=(params.measure_function,))

    return context.once(
        memo,
        lambda: again_while_alike(
            params.attempts,
            attempt,
            lambda graded: graded.outcome.ok and too_long(graded),
            lambda graded: graded,
            tokenizing=False,  # an encoding cached by the tokenizer's id (a fresh copy may reuse it) is not other work
        ),
    )


# --------------------------------------------------------------------------------------
# run_static_ptq_optimum
# --------------------------------------------------------------------------------------


class PtqParams(TargetParams):
    """How the PTQ function is called (once per model id: every argument differs) and judged."""

    model: str = Field("gpt2", description="Hub ID passed to the first call.")
    other_model: str = Field("distilgpt2", description="Hub ID passed to the second call.")
    prompt: str = Field("The capital of France is", description="Prompt the quantized model must continue.")
    max_new_tokens: int = Field(8, ge=1, description="Tokens generated from the quantized model.")


@dataclass(frozen=True)
class Quantized:
    """One hidden PTQ call: the id it was given, the model it returned (kept in the kernel), its info string."""

    hub_id: str
    handle: str
    call: str
    model: OnnxModel
    described: dict[str, Any]  # the kernel's description of the model (its serial and config sizes)
    info: str


def _ptq(context: CheckContext, params: PtqParams, hub_id: str) -> Quantized:
    harness = context.require_harness()
    handle = f"quantization:ptq:{hub_id}"

    def quantize() -> CallOutcome:
        save_dir = harness.session.workdir / f"grader-ptq-{secrets.token_hex(4)}"  # removed with the working folder
        return harness.call(
            params.function, [literal(hub_id), literal(str(save_dir))], timeout_s=context.timeout_s, keep_as=handle
        )

    outcome = context.once(f"ptq:{params.function}:{hub_id}", quantize)
    call = f"{params.function}({hub_id!r}, save_dir)"
    quantized, info = context.returned(outcome, call, items(ANY, ANY, names="(quantized_model, info)"))
    if not isinstance(quantized, OnnxModel):  # described as one only when it is an instance of Optimum's ORTModel
        raise StopCheck(
            Verdict.failed(
                f"{call} returned {kind_of(quantized)} as the quantized model: export and quantize it with Optimum "
                "(ORTModelForCausalLM, ORTQuantizer) and return the ONNX Runtime model loaded from the quantized file.",
                expected="an ONNX Runtime model (ORTModelForCausalLM)",
                found=kind_of(quantized),
            )
        )
    value = outcome.raw.get("value") or {}
    described = (value.get("items") or [{}])[0] if isinstance(value, dict) else {}
    return Quantized(
        hub_id, handle, call, quantized, described if isinstance(described, dict) else {}, info if isinstance(info, str) else ""
    )


def ptq_calls(context: CheckContext, params: PtqParams) -> list[Quantized]:
    """run_static_ptq_optimum called with each model id (shared by the PTQ checks)."""
    return [_ptq(context, params, hub_id) for hub_id in (params.model, params.other_model)]


def _count(value: Any) -> int:
    """A count the kernel reported (anything else is none)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def judge_graph(graph: dict[str, Any], what: str) -> Verdict:
    """A quantized model's live graph, as the kernel summarised it: integer products carry its weights to the outputs."""
    if graph.get("problem"):
        problem = str(graph["problem"])
        if "SessionFileMismatch" in problem:
            return Verdict.failed(
                f"The session of {what} names a file that is not the graph it was created from and runs: return the "
                "ONNX Runtime model loaded from the quantized file itself.",
                expected="a session created from the quantized graph",
                found="a session that runs another graph than the file it names",
            )
        return Verdict.failed(
            f"{what.capitalize()} is not an ONNX Runtime model running a session: {problem[:300]}.",
            expected="an Optimum ORTModel whose onnxruntime.InferenceSession runs a quantized graph",
            found=problem[:300],
        )
    probe: dict[str, Any] = graph["probe"] if isinstance(graph.get("probe"), dict) else {}
    if not _count(probe.get("own_session_runs")):
        return Verdict.failed(
            f"Running {what} on a few tokens did not run its own ONNX Runtime session"
            + (f" ({str(probe['error'])[:200]})" if probe.get("error") else "")
            + ": the model must compute with the session it holds.",
            expected="the model's forward runs model.session",
            found=f"{_count(probe.get('runs'))} session runs, none of its own",
        )
    integer, floats = _count(graph.get("integer_matmuls_main")), _count(graph.get("float_weight_matmuls_main"))
    int8 = _count(graph.get("int8_initializers_main"))
    operators: dict[str, Any] = graph["operators"] if isinstance(graph.get("operators"), dict) else {}
    common = ", ".join(f"{op} x{count}" for op, count in list(operators.items())[:4])
    found = (
        f"{integer} integer and {floats} float weight products on the path to the outputs, {int8} int8 weights there "
        f"({_count(graph.get('nodes'))} nodes: {common})"
    )
    if not integer or not int8 or floats >= integer:
        return Verdict.failed(
            f"The graph the quantized model's session runs ({str(graph.get('source', '?'))[:100]}) computes its outputs with "
            f"{integer} integer matrix products and {floats} float ones, using {int8} int8 weights: it was exported but not "
            "quantized (integer operators that feed nothing, or multiply only zeros, do not count; a weight read through "
            "Identity, Cast, Reshape or Transpose is still that weight). Quantize it with "
            "ORTQuantizer.quantize(save_dir=..., quantization_config=AutoQuantizationConfig.avx2(is_static=False)) and load "
            "the quantized file (file_name='model_quantized.onnx').",
            expected="MatMulInteger / QLinearMatMul (or quantized weights) on the path to the logits, with int8 weights",
            found=found,
        )
    integer_ops: dict[str, Any] = graph["integer_ops"] if isinstance(graph.get("integer_ops"), dict) else {}
    held = ", ".join(f"{op} x{_count(count)}" for op, count in sorted(integer_ops.items())[:8])
    return Verdict.passed(
        f"The graph the quantized model's session runs ({str(graph.get('source', '?'))[:100]}) computes its outputs with {integer} "
        f"integer matrix products on {int8} int8 weights ({floats} float ones); it holds {held}."
    )


def exported_another(context: CheckContext, quantized: Quantized, graph: dict[str, Any]) -> str | None:
    """Why the quantized model is not the model of the id it was given (None when it is): its config sizes against the
    model the grader loads under that id, and the layers whose cache its graph takes against that model's layers."""
    expected = reference_fingerprint(context, quantized.hub_id).get("sizes") or {}
    sizes = quantized.described.get("sizes")
    differing = [
        f"{name} {sizes.get(name)!r} (expected {value!r})"
        for name, value in expected.items()
        if isinstance(sizes, dict) and name in sizes and sizes.get(name) != value
    ]
    layers = _count(graph.get("past_layers"))
    wanted = expected.get("n_layer", expected.get("num_hidden_layers"))
    if layers and isinstance(wanted, int) and layers != wanted:
        differing.append(f"its graph takes the cache of {layers} layers (expected {wanted})")
    return ", ".join(differing) or None


@check_kind("ptq_quantized", PtqParams)
def ptq_quantized(context: CheckContext, params: PtqParams) -> Verdict:
    """The PTQ model of each id it is given is that id's model, and the ONNX graph its live session was created from is
    really quantized to integers."""
    verdicts = []
    for quantized in ptq_calls(context, params):
        # Read in the kernel from the live session (never from a path the kernel names: the grader opens none).
        outcome = context.require_harness().onnx_graph(quantized.handle, item=0, timeout_s=context.timeout_s)
        graph = outcome.raw.get("graph") if outcome.ok else None
        if not isinstance(graph, dict):
            return Verdict.error(
                f"The grader could not read the graph of the model {quantized.call} returned: "
                f"{outcome.message or outcome.exception or 'no answer'}."
            )
        verdict = judge_graph(graph, f"the model {quantized.call} returned")
        if verdict.outcome != "passed":
            return verdict
        other = exported_another(context, quantized, graph) if not graph.get("problem") else None
        if other:
            return Verdict.failed(
                f"{quantized.call} returned a quantized model that is not the {quantized.hub_id} model: {other}. Export the "
                "model_id you are given (ORTModelForCausalLM.from_pretrained(model_id, export=True)), not a fixed one.",
                expected=f"the quantized {quantized.hub_id} model",
                found=other,
            )
        verdicts.append(verdict)
    return replace(verdicts[0], message=verdicts[0].message + f" The same holds for {params.other_model!r}.")


@check_kind("ptq_generates", PtqParams)
def ptq_generates(context: CheckContext, params: PtqParams) -> Verdict:
    """The PTQ model generates text by running its ONNX session, and its info names backend and precision."""
    for quantized in ptq_calls(context, params):
        generated = context.require_harness().generate(
            quantized.handle, quantized.hub_id, params.prompt, params.max_new_tokens, timeout_s=context.timeout_s, item=0
        )
        if not generated.ok:
            return Verdict.failed(
                f"The model {quantized.call} returned could not generate text for {params.prompt!r}: "
                f"{generated.exception or generated.message}.",
                expected="generated text",
                found=str(generated.exception or generated.message),
            )
        text = generated.value if isinstance(generated.value, str) else ""
        if not text.strip():
            return Verdict.failed(
                f"The model {quantized.call} returned generated no text for {params.prompt!r}.",
                expected="generated text",
                found=repr(text),
            )
        if not generated.onnx_run_events():
            return Verdict.failed(
                f"The model {quantized.call} returned continued {params.prompt!r} without running any ONNX Runtime "
                "session: its forward must compute with the quantized graph, not with another model.",
                expected="generation through the model's ONNX Runtime session",
                found="no session run",
            )
        missing = [
            what
            for what, pattern in (
                ("the backend (ONNX Runtime / Optimum)", r"onnx|\bort(?:\b|quantizer|model)|optimum"),
                ("the precision (int8)", r"int[\s_-]?8|8[- ]?bit"),
            )
            if not re.search(pattern, quantized.info, re.IGNORECASE)
        ]
        if missing:
            return Verdict.failed(
                f"The quantized model generates text, but its info string {quantized.info!r} does not name "
                f"{' or '.join(missing)}.",
                expected="an info string such as 'onnxruntime int8 (dynamic PTQ)'",
                found=repr(quantized.info),
            )
    first = ptq_calls(context, params)[0]
    return Verdict.passed(
        f"The quantized models of {params.model!r} and {params.other_model!r} continue {params.prompt!r} by running their "
        f"ONNX Runtime sessions; info: {first.info!r}."
    )


# --------------------------------------------------------------------------------------
# ablate_cache_and_padding
# --------------------------------------------------------------------------------------

SETTINGS = tuple((use_cache, side) for use_cache in (True, False) for side in ("left", "right"))
# What each setting's timed generate is compared on with the reference's.
ABLATION_ASPECTS = ("model", "rows", "limit", "use_cache", "beams", "padding", "width", "device", "inputs", "added")


def setting_key(use_cache: bool, side: str) -> str:
    """The key of one ablation setting, as the starter spells it."""
    return f"use_cache={use_cache},padding={side}"


class AblationParams(PromptsParams, TargetParams):
    """Two hidden ablation calls."""

    measure_function: str = Field(
        "measure_generation", description="The student's measuring function, watched (what it generates is its own check's)."
    )


@dataclass(frozen=True)
class Ablation:
    """One hidden ablation call: its inputs, and what it did beside the reference."""

    hub_id: str
    prompts: list[str]
    max_new_tokens: int
    graded: GradedCall
    call: str

    @property
    def outcome(self) -> CallOutcome:
        return self.graded.outcome

    def settings(self) -> dict[tuple[bool, str], Generation]:
        """The reference's timed generate call of each setting (use_cache, padding side)."""
        timed = [call for call in self.graded.reference().generations if call.limit == self.max_new_tokens]
        return {(bool(call.use_cache), str(call.padding)): call for call in timed}

    def runs(self, context: CheckContext, use_cache: bool, side: str) -> list[GenerateEvent]:
        """The student's generate calls that do what the reference's timed call of this setting does."""
        wanted = self.settings().get((use_cache, side))
        if wanted is None:
            return []
        fits = carrying(context.models.tokenizer(self.hub_id))
        aspects = caller_aspects(context, self.outcome, ABLATION_ASPECTS)
        return [call.event for call in matching(self.graded.behaviour.generations, wanted, fits, aspects)]


def _ablation_too_long(context: CheckContext, params: AblationParams, ablation: Ablation) -> bool:
    value = ablation.outcome.value
    if not isinstance(value, dict):
        return False
    for use_cache, side in SETTINGS:
        metrics = value.get(setting_key(use_cache, side))
        latency = metrics.get("latency_s") if isinstance(metrics, dict) else None
        if reads_too_long(params, latency, ablation.runs(context, use_cache, side)):
            return True
    return False


def ablation_calls(context: CheckContext, params: AblationParams) -> list[Ablation]:
    """The two hidden ablation calls (shared by its checks)."""
    calls = []
    for index, (hub_id, prompts, max_new_tokens) in enumerate(draw_inputs(context, params, "ablation")):
        objects = handed(context, hub_id)
        call = f"{params.function}({hub_id} model, tokenizer, <{len(prompts)} prompts>, max_new_tokens={max_new_tokens})"
        arguments = [
            objects.model,
            objects.tokenizer,
            Argument.value(prompts, f"{len(prompts)} prompts"),
            Argument.value(max_new_tokens),
        ]

        def too_long(
            graded: GradedCall, hub_id: str = hub_id, prompts: list[str] = prompts, tokens: int = max_new_tokens
        ) -> bool:
            return _ablation_too_long(context, params, Ablation(hub_id, prompts, tokens, graded, ""))

        memo = f"ablation:{call}:{prompts}:{objects.own}"
        graded = sweep_call(context, params, arguments, too_long, memo, paced=index == 0)
        calls.append(Ablation(hub_id, prompts, max_new_tokens, graded, call))
    return calls


def ablation_value(context: CheckContext, ablation: Ablation) -> dict[str, Any]:
    """What an ablation call returned (a dict keyed by setting), or stop."""
    return dict(context.returned(ablation.outcome, ablation.call, keyed_by("setting")))


@check_kind("ablation_keys", AblationParams)
def ablation_keys(context: CheckContext, params: AblationParams) -> Verdict:
    """The ablation reports the four settings keyed as the starter says, each with the metrics of its own timed
    generate calls (those doing what the reference's call of that setting does)."""
    wanted = [setting_key(use_cache, side) for use_cache, side in SETTINGS]
    forgiven = False
    for ablation in ablation_calls(context, params):
        value = ablation_value(context, ablation)
        if sorted(map(str, value)) != sorted(wanted):
            return Verdict.failed(
                f"The ablation returned the keys {sorted(map(str, value))}: key the four settings exactly as "
                f"{', '.join(repr(k) for k in wanted)}.",
                expected=", ".join(wanted),
                found=", ".join(sorted(map(str, value))),
            )
        for use_cache, side in SETTINGS:
            name = setting_key(use_cache, side)
            metrics = _metrics_dict(value[name], f"the ablation's {name!r}", SETTING_METRICS)
            runs = ablation.runs(context, use_cache, side)
            if not runs:
                continue  # the setting never reached generate as the reference's does: charged by the settings check
            latency = float(metrics["latency_s"])
            if agrees_with_timed(params, latency, runs):
                wrong = _setting_rates_problem(params, metrics, runs, ablation.outcome)
                if wrong:
                    return Verdict.failed(
                        f"In {ablation.call}, under {name!r}: {wrong}. Report each setting's metrics as measured.",
                        expected="tokens_per_s = new tokens / latency_s, ms_per_token = 1000 / tokens_per_s",
                        found=wrong,
                    )
                continue
            # A latency measure_generation itself mistimes is charged in its own check, not again here.
            if latency in _returned_latencies(ablation.outcome, params.measure_function) and measure_mistimes(context):
                forgiven = True
                continue
            verdict = judge_latency(params, latency, runs[-1:], ablation.max_new_tokens) or Verdict.failed("")
            return Verdict.failed(
                f"In {ablation.call}, under {name!r}: {verdict.message} Measure each setting with its own generate call "
                "and report that call's metrics.",
                expected=verdict.expected,
                found=verdict.found,
            )
    if forgiven:
        return Verdict.passed(
            "The ablation reports all four settings; their latencies disagree with their generate calls as "
            "measure_generation's own do, which is charged in its own check."
        )
    return Verdict.passed("The ablation reports all four settings, each with the metrics of its own generate calls.")


def _setting_rates_problem(
    params: AblationParams, metrics: dict[str, Any], runs: list[GenerateEvent], outcome: CallOutcome
) -> str:
    """Why a setting's rates are not those of its timed runs ("" when they are): tokens_per_s x latency_s must be the
    new tokens a run produced (up to each row's end-of-text, up to rows x width) and ms_per_token x tokens_per_s
    1000. Rates measure_generation returned as they are are its own check's to judge, not charged here."""
    rate, per_token, latency = float(metrics["tokens_per_s"]), float(metrics["ms_per_token"]), float(metrics["latency_s"])
    returned = [
        item for event in outcome.returned_events(params.measure_function) if isinstance(item := decode(event["value"]), dict)
    ]
    if any(is_number(item.get("tokens_per_s")) and agrees(rate, float(item["tokens_per_s"]), 1e-6) for item in returned):
        return ""
    ranges = [new_tokens_range(run) for run in runs]
    fewest, most = min(r[0] for r in ranges), max(r[1] for r in ranges)
    produced = rate * latency
    if not fewest * (1 - params.rate_tolerance) <= produced <= most * (1 + params.rate_tolerance):
        return (
            f"tokens_per_s x latency_s is {number(produced)} tokens, but its timed generate produced "
            f"{span(fewest, most)} new tokens"
        )
    if not _unit_consistent(per_token, rate, params.rate_tolerance):
        return f"ms_per_token {number(per_token)} beside tokens_per_s {number(rate)} is not 1000 / tokens_per_s"
    return ""


# --------------------------------------------------------------------------------------
# measure_batched
# --------------------------------------------------------------------------------------

BATCH_COLUMNS = ("batch_size", "latency_s", "tokens_per_s", "latency_per_sample_s")
# What each batch's timed generate is compared on with the reference's (or the seed's grouping's).
BATCH_ASPECTS = ("model", "rows", "limit", "use_cache", "beams", "width", "device", "inputs", "added")


class BatchParams(PromptsParams, TargetParams):
    """Two hidden batching calls."""

    measure_function: str = Field(
        "measure_generation", description="The student's measuring function, watched (a latency it returns is its own check's)."
    )
    batch_sizes: list[list[int]] = Field(
        [[1, 2], [3, 5]], min_length=2, description="Ranges the increasing batch sizes are drawn from."
    )


def cycled(prompts: list[str], size: int) -> list[list[str]]:
    """The reference's batch of ``size``: one batch, cycling through the prompts."""
    return [[prompts[index % len(prompts)] for index in range(size)]]


def grouped(prompts: list[str], size: int) -> list[list[str]]:
    """The seed's grouping ("group prompts into batches and generate per batch"): every prompt, in consecutive
    batches of ``size`` (the last one ragged)."""
    return [prompts[start : start + size] for start in range(0, len(prompts), size)]


PLANS = {"the prompts cycled into one batch": cycled, "every prompt in consecutive batches": grouped}


@dataclass(frozen=True)
class Batched:
    """One hidden measure_batched call: its inputs, and what it did beside the reference."""

    hub_id: str
    prompts: list[str]
    sizes: list[int]
    max_new_tokens: int
    graded: GradedCall
    call: str

    @property
    def outcome(self) -> CallOutcome:
        return self.graded.outcome

    def batches(self, context: CheckContext, size: int, plan: str) -> list[Generation]:
        """The timed generate calls a plan makes for one batch size: the reference's own call of that size (it cycles
        through the prompts), with the rows of each batch of the plan."""
        timed = [call for call in self.graded.reference().required() if call.limit == self.max_new_tokens]
        if size not in self.sizes or len(timed) != len(self.sizes):
            return []
        model = timed[self.sizes.index(size)]
        reference_tokenizer = context.models.tokenizer(self.hub_id)
        wanted = []
        for batch in PLANS[plan](self.prompts, size):
            rows = tuple(tuple(reference_tokenizer(prompt)["input_ids"]) for prompt in batch)
            wanted.append(replace(model, rows=rows, padding=model.padding if len({len(row) for row in rows}) > 1 else None))
        return wanted

    def runs(self, context: CheckContext, size: int) -> list[list[list[GenerateEvent]]]:
        """For each plan whose every batch of ``size`` the call ran (the reference's first), each batch's timed
        generate calls; empty where it ran no plan's batches. (A plan's first batch can be another's: the prompts
        cycled into one batch of two are the first of the consecutive batches of two.)"""
        fits = carrying(context.models.tokenizer(self.hub_id))
        aspects = caller_aspects(context, self.outcome, BATCH_ASPECTS)
        plans = []
        for plan in PLANS:
            wanted = self.batches(context, size, plan)
            found = [[call.event for call in matching(self.graded.behaviour.generations, need, fits, aspects)] for need in wanted]
            if wanted and all(found) and found not in plans:
                plans.append(found)
        return plans

    def by_width(self, size: int) -> list[list[GenerateEvent]]:
        """Where no plan's batches ran: the timed generate calls of ``size`` rows with its max_new_tokens, one batch
        each (a row is judged against any of them: which call it reports is not for the grader to guess)."""
        return [
            [event]
            for event in self.outcome.generate_events()
            if tokens_limit(event) == self.max_new_tokens and int((event["input_shape"] or [0])[0]) == size
        ]


def _batched_too_long(context: CheckContext, params: BatchParams, batched: Batched) -> bool:
    """Whether a row's latency reads longer than its batches' timed generate calls allow (worth another call)."""
    frame = batched.outcome.value
    if not isinstance(frame, Frame) or "batch_size" not in frame.columns or "latency_s" not in frame.columns:
        return False
    for row in frame.records():
        size, latency = row["batch_size"], row["latency_s"]
        if not is_number(size) or not is_number(latency):
            continue
        plans = batched.runs(context, int(size)) or [[events] for events in batched.by_width(int(size))]
        if all(batches and float(latency) > _latency_span(params, batches)[1] for batches in plans):
            return True
    return False


def batched_calls(context: CheckContext, params: BatchParams) -> list[Batched]:
    """The two hidden measure_batched calls (shared by its checks)."""
    calls = []
    rng = context.rng_for("batching-sizes")
    plans = draw_inputs(context, params, "batching")
    first = [rng.randint(low, high) for low, high in params.batch_sizes]
    second = [rng.randint(low, high) for low, high in params.batch_sizes]
    # The smallest batch (one prompt: what batching's gain is measured against) in the first call, another in the
    # second: a function that measures one of them otherwise than the rest shows whichever it is.
    low, high = params.batch_sizes[0]
    first[0], second[0] = low, rng.randint(low + 1, high) if high > low else low
    if second == first:
        second = [first[0], *(size + 1 if size < params.batch_sizes[-1][1] else size - 1 for size in first[1:])]
    for index, ((hub_id, prompts, max_new_tokens), sizes) in enumerate(zip(plans, (first, second), strict=True)):
        objects = handed(context, hub_id)
        call = f"{params.function}({hub_id} model, tokenizer, <{len(prompts)} prompts>, {sizes}, max_new_tokens={max_new_tokens})"
        arguments = [
            objects.model,
            objects.tokenizer,
            Argument.value(prompts, f"{len(prompts)} prompts"),
            Argument.value(sizes),
            Argument.value(max_new_tokens),
        ]

        def too_long(
            graded: GradedCall,
            hub_id: str = hub_id,
            prompts: list[str] = prompts,
            sizes: list[int] = sizes,
            tokens: int = max_new_tokens,
        ) -> bool:
            return _batched_too_long(context, params, Batched(hub_id, prompts, sizes, tokens, graded, ""))

        memo = f"batched:{call}:{prompts}:{objects.own}"
        graded = sweep_call(context, params, arguments, too_long, memo, paced=index == 0)
        calls.append(Batched(hub_id, prompts, sizes, max_new_tokens, graded, call))
    return calls


def _require_columns(frame: Frame, columns: tuple[str, ...]) -> None:
    """Stop unless the frame has these columns (each check asks only for those it reads)."""
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise StopCheck(
            Verdict.failed(
                f"The batching DataFrame has no column {', '.join(missing)} (it has {', '.join(map(str, frame.columns))}).",
                expected=", ".join(BATCH_COLUMNS),
                found=", ".join(map(str, frame.columns)),
            )
        )


def batched_frame(context: CheckContext, batched: Batched, columns: tuple[str, ...]) -> Frame:
    """The DataFrame a batching call returned, with these columns, or stop."""
    frame = context.returned(batched.outcome, batched.call, FRAME)
    _require_columns(frame, columns)
    return frame


def claimed_sizes(frame: Frame) -> list[Any]:
    """The rows' own batch sizes."""
    return [int(v) if is_number(v) else v for v in frame.column("batch_size")]


@check_kind("batching_rows", BatchParams)
def batching_rows(context: CheckContext, params: BatchParams) -> Verdict:
    """measure_batched returns one row per batch size it is given, in order, with every column."""
    for batched in batched_calls(context, params):
        frame = batched_frame(context, batched, BATCH_COLUMNS)
        reported = frame.column("batch_size")
        if frame.length != len(batched.sizes) or claimed_sizes(frame) != batched.sizes:
            return Verdict.failed(
                f"Called with batch sizes {batched.sizes}, the DataFrame's batch_size column reads {reported}: one row per "
                "batch size, in order.",
                expected=str(batched.sizes),
                found=str(reported),
            )
    return Verdict.passed(f"One row per batch size it is given, in order, with {', '.join(BATCH_COLUMNS)}.")


def _latency_span(tolerance: LatencyTolerance, batches: list[list[GenerateEvent]]) -> tuple[float, float]:
    """The latencies a row may report for these batches, each timed as an honest timer reads it (one run, or the
    fastest, median or mean of its runs): one batch's reading, or their total."""
    readings = [latency_readings(events) or [0.0] for events in batches]
    count = len(batches)
    low = sum(min(values) for values in readings) * (1 - tolerance.lower_rel) - count * tolerance.lower_abs_s
    high = sum(upper_bound(tolerance, max(values), events) for values, events in zip(readings, batches, strict=True))
    return low, high


def _distance(value: float, bounds: tuple[float, float]) -> float:
    """How far ``value`` lies outside ``bounds`` (0 inside)."""
    return max(bounds[0] - value, value - bounds[1], 0.0)


def _not_positive(row: dict[str, Any]) -> Verdict | None:
    """A batching row whose values are not all positive numbers."""
    values = (row["latency_s"], row["tokens_per_s"], row.get("latency_per_sample_s", row["latency_s"]), row["batch_size"])
    if not all(is_number(v) and float(v) > 0 for v in values):
        return Verdict.failed(f"The row for batch size {row['batch_size']} holds values that are not positive numbers.")
    return None


def _per_sample_problem(row: dict[str, Any], samples: set[int], tolerance: float) -> Verdict | None:
    """A batching row whose latency_per_sample_s is not latency_s over its samples (batch_size, or every prompt its
    batches generated)."""
    latency, size = float(row["latency_s"]), int(row["batch_size"])
    if "latency_per_sample_s" not in row:
        return None
    reported = float(row["latency_per_sample_s"])
    if any(agrees(reported, latency / count, tolerance) for count in {size, *samples} if count > 0):
        return None
    return Verdict.failed(
        f"For batch size {size}, latency_per_sample_s is {number(reported)}, but latency_s / batch_size is "
        f"{number(latency / size)}.",
        expected=number(latency / size),
        found=number(reported),
    )


def judge_batched_row(
    context: CheckContext, params: BatchParams, batched: Batched, row: dict[str, Any], measured: set[float]
) -> Verdict | None:
    """None if a row's latency is its batches' timed generate calls (one batch, or the total of the seed's consecutive
    batches), its tokens_per_s counts every sequence they generated, and latency_per_sample_s is per sample."""
    if (wrong := _not_positive(row)) is not None:
        return wrong
    size, latency = int(row["batch_size"]), float(row["latency_s"])
    plans = batched.runs(context, size)
    if not plans:
        # Calls of this size that are no plan's (charged by the sizes check): the row may report any one of them.
        plans = [[events] for events in batched.by_width(size)]
    if not plans:
        return None  # batches of another size are charged by the sizes check
    verdicts = [_judge_plan(context, params, batched, row, batches, measured) for batches in plans]
    if any(verdict is None for verdict in verdicts):
        return None
    # The plan the row reports is the one its latency reads (else the closest): its verdict says what is wrong.
    closest = min(range(len(plans)), key=lambda index: _distance(latency, _latency_span(params, plans[index])))
    return verdicts[closest]


def _judge_plan(
    context: CheckContext,
    params: BatchParams,
    batched: Batched,
    row: dict[str, Any],
    batches: list[list[GenerateEvent]],
    measured: set[float],
) -> Verdict | None:
    """None if a row reports these batches' timed generate calls (see :func:`judge_batched_row`)."""
    size, latency, rate = int(row["batch_size"]), float(row["latency_s"]), float(row["tokens_per_s"])
    low, high = _latency_span(params, batches)
    count = len(batches)
    if count > 1 and not low <= latency <= high and low / count <= latency <= high / count:
        # The mean latency of one of its batches ("latency for each batch size"): its rates are over their total time.
        latency *= count
        row = {**row, "latency_s": latency}
    if not low <= latency <= high:
        # A latency measure_generation returned is judged in its own check: not charged twice here.
        if latency in measured and measure_mistimes(context):
            return None
        timed = [events[-1] for events in batches]
        verdict = judge_latency(params, latency, timed[-1:], batched.max_new_tokens) if len(batches) == 1 else None
        message = (
            verdict.message
            if verdict is not None
            else f"The reported latency ({number(latency, 's')}) is not the total of its {len(batches)} batches' timed "
            f"generate calls ({number(sum(float(event['duration_s']) for event in timed), 's')})."
        )
        return Verdict.failed(
            f"In {batched.call}, for batch size {size}: {message} Report the latency of the batch's own timed generate call.",
            expected=f"about {number(sum(float(event['duration_s']) for event in timed), 's')}",
            found=number(latency, "s"),
        )
    ranges = [new_tokens_range(events[-1]) for events in batches]
    fewest, most = sum(r[0] for r in ranges), sum(r[1] for r in ranges)
    rows = sum(int((events[-1]["input_shape"] or [1])[0]) for events in batches)
    produced = rate * latency
    # One batch timed several times may report the mean of its runs' rates (see mean_of_rates).
    repeats = [float(event["duration_s"]) for event in batches[0] if tokens_limit(event) == tokens_limit(batches[0][-1])]
    averaged = count == 1 and any(
        mean_of_rates(rate, tokens, latency, repeats, params.rate_tolerance) for tokens in {fewest, most}
    )
    if not averaged and not fewest * (1 - params.rate_tolerance) <= produced <= most * (1 + params.rate_tolerance):
        first_only = rows > 1 and produced <= most / rows * (1 + params.rate_tolerance)
        why = (
            f"it counts the tokens of one sequence of the {rows}; count every sequence's new tokens"
            if first_only
            else "tokens_per_s should be the new tokens of all sequences divided by latency_s"
        )
        return Verdict.failed(
            f"In {batched.call}, for batch size {size}, tokens_per_s x latency_s is {number(produced)} tokens, but the "
            f"batch produced {span(fewest, most)} new tokens: {why}.",
            expected=f"{span(number(fewest / latency), number(most / latency))} tokens/s",
            found=number(rate),
        )
    return _per_sample_problem(row, {rows}, params.rate_tolerance)


@check_kind("batching_throughput", BatchParams)
def batching_throughput(context: CheckContext, params: BatchParams) -> Verdict:
    """Each row's latency is its batches' timed generate calls; tokens_per_s counts every sequence; latency_per_sample_s
    is per sample."""
    asked = False
    for batched in batched_calls(context, params):
        frame = batched_frame(context, batched, BATCH_COLUMNS[:3])
        if batched_ignores_inputs(context, params, batched, frame):
            asked = True
            calls = measure_calls(batched.outcome, params.measure_function)
            verdict = batches_asked_throughput(
                params, batched.prompts, batched.max_new_tokens, claimed_sizes(frame), frame, calls
            )
            if verdict.outcome != "passed":
                return verdict
            continue
        measured = _returned_latencies(batched.outcome, params.measure_function)
        for row in frame.records():
            wrong = judge_batched_row(context, params, batched, row, measured)
            if wrong is not None:
                return wrong
    if asked:
        return Verdict.passed(
            f"Each row reports what {params.measure_function} measured for its batch ({params.measure_function} does not "
            "generate the prompts it is given, which is charged in its own checks)."
        )
    return Verdict.passed(
        "Each row's latency is its batches' timed generate calls, tokens_per_s counts the new tokens of every sequence, "
        "and latency_per_sample_s is per sample."
    )


def batched_ignores_inputs(context: CheckContext, params: BatchParams, batched: Batched, frame: Frame) -> bool:
    """Whether the batches the rows report were not generated because measure_generation ignores its inputs (charged
    in its own checks): they are then judged by what measure_batched gave measure_generation."""
    ran = all(batched.runs(context, size) for size in batched.sizes)
    return not ran and measure_ignores_inputs(context, batched.outcome, params.measure_function)


def _returned_range(calls: list[MeasureCall]) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """(latency_s low, high), (new tokens low, high) over what these calls of measure_generation returned: a caller
    may report any one of them, or their best or mean. None where none returned numbers (judged in its own check)."""
    returned = [
        (float(r["latency_s"]), float(r["tokens_per_s"]) * float(r["latency_s"]))
        for call in calls
        if isinstance(r := call.returned, dict) and all(is_number(r.get(key)) for key in ("latency_s", "tokens_per_s"))
    ]
    if not returned:
        return None
    latencies, tokens = [latency for latency, _ in returned], [count for _, count in returned]
    return (min(latencies), max(latencies)), (min(tokens), max(tokens))


def _within(value: float, bounds: tuple[float, float], tolerance: float) -> bool:
    return bounds[0] * (1 - tolerance) <= value <= bounds[1] * (1 + tolerance)


def asked_batches(
    prompts: list[str], max_new_tokens: int, calls: list[MeasureCall]
) -> tuple[list[MeasureCall], dict[int, list[MeasureCall]]]:
    """The calls of measure_generation with max_new_tokens, and those of them whose prompts are all among ``prompts``, by
    batch size."""
    asked = [call for call in calls if call.max_new_tokens == max_new_tokens and call.prompts is not None]
    batches: dict[int, list[MeasureCall]] = {}
    for call in asked:
        if all(p in prompts for p in call.prompts or []):
            batches.setdefault(len(call.prompts or []), []).append(call)
    return asked, batches


def batches_asked_throughput(
    params: BatchParams, prompts: list[str], max_new_tokens: int, claimed: list[Any], frame: Frame, calls: list[MeasureCall]
) -> Verdict:
    """measure_batched's rows judged by the calls it made of a measure_generation that does not generate what it is given
    (charged in its own checks): each row reports what measure_generation returned for its batch."""
    function = params.measure_function
    _, batches = asked_batches(prompts, max_new_tokens, calls)
    for row in frame.records():
        latency, rate = row["latency_s"], row["tokens_per_s"]
        if (wrong := _not_positive(row)) is not None:
            return wrong
        spans = _returned_range(batches.get(int(row["batch_size"]), []))
        if spans is None:
            continue  # batches of another size are charged by the sizes check; what it returned, in its own check
        rows, (latencies, counts) = int(row["batch_size"]), spans
        if not _within(float(latency), latencies, params.rate_tolerance):
            return Verdict.failed(
                f"For batch size {rows}, latency_s is {number(float(latency), 's')}, but {function} returned "
                f"{span(number(latencies[0], 's'), number(latencies[1], 's'))} for that batch: report the latency it measured.",
                expected=span(number(latencies[0], "s"), number(latencies[1], "s")),
                found=number(float(latency), "s"),
            )
        produced = float(rate) * float(latency)
        everyone = math.isclose(produced, rows * max_new_tokens, rel_tol=params.rate_tolerance)
        if not (everyone or _within(produced, counts, params.rate_tolerance)):
            return Verdict.failed(
                f"For batch size {rows}, tokens_per_s x latency_s is {number(produced)} tokens, but {function} counted "
                f"{span(number(counts[0]), number(counts[1]))} new tokens for that batch: tokens_per_s should be the "
                "batch's new tokens divided by latency_s.",
                expected=f"{span(number(counts[0] / float(latency)), number(counts[1] / float(latency)))} tokens/s",
                found=number(float(rate)),
            )
        if (wrong := _per_sample_problem(row, set(), params.rate_tolerance)) is not None:
            return wrong
    return Verdict.passed(
        f"Each row reports what {function} measured for its batch ({function} does not generate the prompts it is given, "
        "which is charged in its own checks)."
    )


# --------------------------------------------------------------------------------------
# compare_ppplx
# --------------------------------------------------------------------------------------


class PpxParams(CorpusParams):
    """compare_ppplx on two hidden corpora, each with a baseline model and an INT8 ONNX model of it the grader quantizes."""

    other_model: str = Field("distilgpt2", description="Hub ID of the baseline of the second call (every argument differs).")
    other_corpus: str = Field("hidden-ppx-b", description="Name of the second call's hidden corpus.")
    rel_tolerance: float = Field(
        1e-4, gt=0, lt=0.01, description="Relative tolerance of the baseline loss and of ppx = exp(loss)."
    )
    drift: float = Field(0.05, gt=0, lt=1, description="Largest relative difference between the INT8 and the baseline loss.")


def quantize_int8(source: str, save_dir: Path) -> None:
    """Write the INT8 comparison model of ``source`` (an exported, dynamically quantized ONNX graph) to ``save_dir``.

    The grader's own model for compare_ppplx, so a PTQ mistake is charged only once. It runs in
    student kits too: its method is the one the PTQ checks' hints give, so it gives nothing away.
    """
    from optimum.onnxruntime import ORTModelForCausalLM, ORTQuantizer
    from optimum.onnxruntime.configuration import AutoQuantizationConfig

    exported = ORTModelForCausalLM.from_pretrained(source, export=True)  # kept: its files live as long as it does
    config = AutoQuantizationConfig.avx2(is_static=False, per_channel=False)
    ORTQuantizer.from_pretrained(exported).quantize(save_dir=save_dir, quantization_config=config)


@dataclass(frozen=True)
class Comparison:
    """One hidden compare_ppplx call: its baseline's hub id, its texts, and the call's outcome and value."""

    hub_id: str
    texts: list[str]
    outcome: CallOutcome
    value: dict[str, Any]

    @property
    def where(self) -> str:
        return f"on {len(self.texts)} hidden texts ({self.hub_id})"

    def behaviour(self, context: CheckContext) -> Behaviour:
        """What the call did: its forward passes (the baseline's) and generate calls."""
        return Behaviour.of(self.outcome.events, self.outcome.models, lambda found: identify(context, found))


def comparisons(context: CheckContext, params: PpxParams) -> list[Comparison]:
    """compare_ppplx called on each hidden corpus (once per submission; shared by its checks): the notebook loader's
    model as the baseline (the grader's where it breaks the contract) and the grader's INT8 ONNX model of it."""
    first, _ = draw_corpus(context, params)
    second, _ = hidden_corpus(context.rng_for(f"corpus:{params.other_corpus}"), params)
    calls = []
    for hub_id, texts in ((params.model, first), (params.other_model, second)):
        objects = handed(context, hub_id)
        key = "ppx-comparison:" + json.dumps([params.function, hub_id, texts, objects.own])

        def compare(hub_id: str = hub_id, texts: list[str] = texts, objects: Any = objects) -> CallOutcome:
            harness = context.require_harness()
            quantized_dir = harness.session.workdir / f"grader-int8-{secrets.token_hex(4)}"  # removed with the working folder
            with quiet_libraries():
                built = context.models.built(f"int8:{hub_id}", partial(quantize_int8, context.models.source(hub_id)))
            shutil.copytree(built, quantized_dir)  # each kernel its own copy: a notebook may change the files it is given
            return context.call(
                params.function,
                mapping({"baseline": objects.model.recipe, "quantized": onnx_model(str(quantized_dir), QUANTIZED_FILE)}),
                objects.tokenizer.recipe,
                literal(texts),
            )

        outcome = context.once(key, compare)
        value = context.returned(outcome, f"{params.function}(models, tokenizer, texts)", keyed_by("model label"))
        calls.append(Comparison(hub_id, texts, outcome, value))
    return calls


def _label_result(value: dict[str, Any], label: str, function: str) -> tuple[float, float]:
    result = value.get(label)
    if not isinstance(result, dict) or not is_number(result.get("loss")) or not is_number(result.get("ppx")):
        raise StopCheck(
            Verdict.failed(
                f"{function}({{'baseline': ..., 'quantized': ...}}, ...) returned {kind_of(result)} under {label!r}: "
                "give every model in `models` its {'loss': ..., 'ppx': ...}.",
                expected=f"{{'loss': float, 'ppx': float}} under {label!r}",
                found=kind_of(result) + (f" with keys {sorted(map(str, result))}" if isinstance(result, dict) else ""),
            )
        )
    return float(result["loss"]), float(result["ppx"])


def _quantized_runs(context: CheckContext, params: PpxParams, comparison: Comparison) -> Verdict | None:
    """None if the INT8 model's loss comes from runs of its ONNX Runtime session over every text; else the failed verdict."""
    texts, outcome, value = comparison.texts, comparison.outcome, comparison.value
    runs = [event for event in outcome.onnx_run_events() if event["grader_session"] is True]
    if not runs:
        return Verdict.failed(
            f"{params.function} reports a loss for the INT8 model {comparison.where}, but never ran its ONNX Runtime "
            "session: evaluate every model in `models` by calling it on each batch (model(**batch).logits).",
            expected="the INT8 model's session run on every batch",
            found="no run of its session",
        )
    with quiet_libraries():
        lengths = context.expected(text_token_lengths, context.models.tokenizer(comparison.hub_id), texts)
    counted = [row_tokens for event in runs if (row_tokens := event["row_tokens"]) is not None]
    covered = sum(_count(count) for row_tokens in counted for count in row_tokens)
    if not counted:
        # IO binding (or a feed that is not a dict of arrays): nothing shows which tokens the runs covered.
        return Verdict.failed(
            f"{params.function} ran the INT8 model's session {len(runs)} time(s) {comparison.where}, but never with inputs "
            "the grader can read (IO binding): nothing shows that its loss covers every text. Call the model with its "
            "inputs (model(**batch)), without use_io_binding.",
            expected="session runs whose inputs cover every token of the texts",
            found=f"{len(runs)} run(s) without a readable feed",
        )
    if covered < sum(lengths):
        return Verdict.failed(
            f"{params.function} ran the INT8 model's session on {covered} tokens in all ({len(runs)} runs) "
            f"{comparison.where}, fewer than the {len(texts)} texts hold: its loss cannot come from those runs. Evaluate "
            "it on every batch, as the baseline.",
            expected="runs covering every token of the texts",
            found=f"{covered} tokens in {len(runs)} runs",
        )
    quantized, _ = _label_result(value, "quantized", params.function)
    # The runs whose logits the kernel saw (a run on the cache of the one before is scored on its first token too, so
    # a text run in pieces is scored whole): where they cover every text, the loss must be theirs; where they do not,
    # coverage is the evidence.
    implied = session_losses(runs, sum(lengths))
    if implied is None:
        return None
    try:
        if _baseline_loss(context, params, comparison).outcome != "passed":
            return None  # a wrong method is charged once, on the baseline
    except NotRecorded:  # a student kit holds the reference's loss at the solution's batch size only
        return None
    # At the precision the loss is shown with, as the baseline's (2.08 for 2.0791).
    if implied and not any(agrees(quantized, loss, params.rel_tolerance, coarsest=0.005) for loss in implied):
        return Verdict.failed(
            f"The INT8 model's loss ({number(quantized)}) {comparison.where} is not what its own session runs give: their "
            f"logits give {number(implied[0])} on the tokens they predicted. Report the loss computed from the INT8 "
            "model's logits.",
            expected=number(implied[0]),
            found=number(quantized),
        )
    return None


def session_losses(runs: list[OnnxRunEvent], tokens: int) -> list[float] | None:
    """The losses ONNX Runtime session runs' logits give (over the predicted pairs, and over every target), from the
    runs whose logits the kernel scored; None where those runs do not cover ``tokens`` tokens (no evidence of the
    loss then)."""
    seen = [
        (run["nll_sums"], run["nll_counts"], run["row_tokens"] or [])
        for run in runs
        if isinstance(run["nll_sums"], dict) and isinstance(run["nll_counts"], dict)
    ]
    if sum(_count(count) for _, _, rows in seen for count in rows) < tokens:
        return None
    implied = []
    for way in ("pairs", "targets"):
        total = sum(float(sums.get(way, 0.0)) for sums, _, _ in seen if is_number(sums.get(way)))
        counted = sum(_count(counts.get(way)) for _, counts, _ in seen)
        if counted:
            implied.append(total / counted)
    return implied


def _baseline_loss(context: CheckContext, params: PpxParams, comparison: Comparison) -> Verdict:
    """The baseline's loss against the token-weighted reference at the batch size its own forward passes used."""
    loss, _ = _label_result(comparison.value, "baseline", params.function)
    forwards = [event for event in comparison.outcome.forward_events() if event["input_shape"]]
    if not forwards:
        return Verdict.error(
            f"No forward pass of the baseline model was seen during {params.function} {comparison.where}: call the model "
            "as model(**batch).",
            found="no forward pass",
        )
    batch_size = max(int((event["input_shape"] or [1])[0]) for event in forwards)
    variants = reference_variants(context, comparison.hub_id, comparison.texts, batch_size)
    data = {"texts": len(comparison.texts), "batch_size": batch_size, "found": loss}
    where = f"{comparison.where}, batches of {batch_size}"
    return judge_loss(loss, variants, f"of the baseline {where}", params.rel_tolerance, data)


@check_kind("ppx_exp", PpxParams)
def ppx_exp(context: CheckContext, params: PpxParams) -> Verdict:
    """compare_ppplx's ppx is exp of the loss it reports, for every model, on each call."""
    for comparison in comparisons(context, params):
        value = comparison.value
        for label in [label for label in ("baseline", "quantized") if label in value]:  # a missing one is charged elsewhere
            loss, ppx = _label_result(value, label, params.function)
            if not math.isclose(ppx, math.exp(loss), rel_tol=params.rel_tolerance):
                return Verdict.failed(
                    f"Under {label!r} {comparison.where}, ppx is {number(ppx)} but the loss is {number(loss)}, and "
                    f"exp({number(loss)}) = {number(math.exp(loss))}: perplexity is exp of the token-weighted loss.",
                    expected=number(math.exp(loss)),
                    found=number(ppx),
                )
    return Verdict.passed("ppx is exp(loss) for every model evaluated.")


@check_kind("ppx_quantized", PpxParams)
def ppx_quantized(context: CheckContext, params: PpxParams) -> Verdict:
    """compare_ppplx evaluates the INT8 ONNX model by running its own session on every text, on each call."""
    for comparison in comparisons(context, params):
        baseline, _ = _label_result(comparison.value, "baseline", params.function)
        quantized, _ = _label_result(comparison.value, "quantized", params.function)
        verdict = _quantized_runs(context, params, comparison)
        if verdict is not None:
            return verdict
        if abs(quantized - baseline) > params.drift * abs(baseline):
            return Verdict.failed(
                f"The INT8 model's loss ({number(quantized)}) is far from the baseline's ({number(baseline)}) "
                f"{comparison.where}; the grader's INT8 model drifts by well under {params.drift:.0%}: evaluate each model "
                "in `models` the same way.",
                expected=f"within {params.drift:.0%} of {number(baseline)}",
                found=number(quantized),
            )
    return Verdict.passed(
        "The INT8 ONNX model is evaluated by running its session on every text, and its loss is the one its logits give."
    )


# --------------------------------------------------------------------------------------
# probe_edge_prompts
# --------------------------------------------------------------------------------------

EDGE_KINDS = ("very short", "very long", "multi-line", "repetitive")


class EdgeParams(LatencyTolerance, TargetParams):
    """How the edge prompts are probed (two calls: every argument differs) and told apart, and how far their metrics
    may be from their generate calls."""

    measure_function: str = Field(
        "measure_generation", description="The student's measuring function, watched (a latency it returns is its own check's)."
    )
    rate_tolerance: float = Field(0.02, gt=0, description="Relative tolerance of derived rates (tokens_per_s, ms_per_token).")
    model: str = Field("gpt2", description="Hub ID of the model and tokenizer of the first call.")
    other_model: str = Field("distilgpt2", description="Hub ID of the model and tokenizer of the second call.")
    tokens: list[int] = Field([6, 12], min_length=2, max_length=2, description="Range [low, high] of max_new_tokens.")
    short_tokens: int = Field(4, ge=1, description="A prompt of at most this many tokens is very short.")
    long_tokens: int = Field(
        64,
        ge=10,
        description=(
            "A prompt of at least this many tokens is very long (the seeds set no number: a paragraph of fifty words, "
            "ten times the seeds' prompts, is)."
        ),
    )
    repetitive_share: float = Field(
        0.25,
        gt=0,
        lt=1,
        description="Distinct tokens / tokens at most this is repetitive (as is a phrase said three times or more).",
    )


def edge_kinds(ids: list[int], text: str, params: EdgeParams) -> set[str]:
    """Every edge kind a prompt can stand for (a long repetitive prompt is both long and repetitive)."""
    kinds = set()
    if "\n" in text.strip():
        kinds.add("multi-line")
    if len(ids) >= params.long_tokens:
        kinds.add("very long")
    if len(ids) >= 8 and len(set(ids)) <= params.repetitive_share * len(ids):
        kinds.add("repetitive")
    elif len(ids) >= 6 and re.fullmatch(r"\s*(\S.*?)(?:\s*\1){2,}\s*", text, re.DOTALL):
        kinds.add("repetitive")  # a phrase said three times or more ("I am happy." x 4: a third of its tokens distinct)
    elif re.fullmatch(r"\s*(\S.*?)(?:\s*\1){3,}\s*", text, re.DOTALL):
        kinds.add("repetitive")  # a word or phrase said four times or more, however short ("la la la la la")
    elif len(ids) >= 8 and (run := re.search(r"(\S+?)(?:\s*\1){4,}", text)) and len(run.group(0)) * 3 >= len(text.strip()):
        kinds.add("repetitive")  # a word said five times or more after a few others ("Repeat after me: na na na ...")
    # Very short by its tokens, or by its words where a tokenizer splits words finely (the tiny zoo's gives "Hello
    # there!" five tokens; GPT-2's, three).
    words = text.split()
    if len(ids) <= params.short_tokens or (0 < len(words) <= params.short_tokens and len(text.strip()) <= 30):
        kinds.add("very short")
    return kinds


def key_kind(key: Any) -> str | None:
    """The edge kind an entry's key names ("very_short", "Very long", "multi-line", "repetitive", ...), if any."""
    text = re.sub(r"[\s_-]+", " ", str(key).casefold())
    for kind, words in (
        ("very short", ("short",)),
        ("very long", ("long",)),
        ("multi-line", ("multi", "line")),
        ("repetitive", ("repet", "repeat")),
    ):
        if any(word in text for word in words):
            return kind
    return None


def keyed_kinds(value: dict[Any, Any]) -> dict[Any, str] | None:
    """Each entry's kind as its key names it, where the keys name the four kinds one each; else None (the entries are
    then matched to the calls whatever their keys)."""
    kinds = {key: key_kind(key) for key in value}
    named = [kind for kind in kinds.values() if kind is not None]
    if len(value) != len(EDGE_KINDS) or sorted(named) != sorted(EDGE_KINDS):
        return None
    return {key: str(kind) for key, kind in kinds.items()}


def assign_kinds(prompts: list[set[str]], wanted: tuple[str, ...]) -> dict[str, int]:
    """The most edge kinds covered with each prompt standing for one kind: kind -> prompt index."""
    best: dict[str, int] = {}

    def extend(index: int, chosen: dict[str, int]) -> None:
        nonlocal best
        if len(chosen) > len(best):
            best = dict(chosen)
        if index == len(prompts) or len(best) == len(wanted):
            return
        for kind in sorted(prompts[index]):
            if kind in wanted and kind not in chosen:
                extend(index + 1, {**chosen, kind: index})
        extend(index + 1, chosen)

    extend(0, {})
    return best


@dataclass(frozen=True)
class EdgeRun:
    """The generate calls of one prompt during an edge probe (a warm-up, the timed call, repetitions), with what the
    prompt is."""

    events: list[GenerateEvent]
    kinds: set[str]

    def timed(self, max_new_tokens: int) -> list[GenerateEvent]:
        """Its calls with the max_new_tokens asked (else all of them)."""
        return [event for event in self.events if tokens_limit(event) == max_new_tokens] or self.events


def edge_runs(context: CheckContext, params: EdgeParams, hub_id: str, outcome: CallOutcome) -> list[EdgeRun]:
    """The generate calls of a probe grouped by the prompt they ran (runs of the same inputs one after another)."""
    reference_tokenizer = context.models.tokenizer(hub_id)
    runs: list[EdgeRun] = []
    previous: tuple[Any, ...] | None = None
    for event in outcome.generate_events():
        key = (tuple(event["input_ids"] or ()), event["padding_side"])
        if key == previous and runs:
            runs[-1].events.append(event)
            continue
        previous = key
        # The prompt without its padding (a batch padded to a multiple of 8 holds "Hi" in 8 positions).
        rows = event_rows(event)
        ids = list(rows[0]) if rows else list(event["input_ids"] or [])
        runs.append(EdgeRun([event], edge_kinds(ids, reference_tokenizer.decode(ids, skip_special_tokens=True), params)))
    return runs[:12]


def _edge_fits(params: EdgeParams, metrics: Any, run: EdgeRun, max_new_tokens: int) -> bool:
    """Whether an edge entry's metrics are those of this prompt's timed generate calls."""
    if not isinstance(metrics, dict) or not all(is_number(metrics.get(key)) for key in SETTING_METRICS):
        return False
    latency, rate = float(metrics["latency_s"]), float(metrics["tokens_per_s"])
    timed = run.timed(max_new_tokens)
    if latency <= 0 or not agrees_with_timed(params, latency, timed):
        return False
    low, high = new_tokens_range(timed[-1])
    if low * (1 - params.rate_tolerance) <= rate * latency <= high * (1 + params.rate_tolerance):
        return True
    # Or the mean of its repeats' rates (see mean_of_rates), as measure_generation may report them.
    durations = [float(event["duration_s"]) for event in timed]
    return any(mean_of_rates(rate, tokens, latency, durations, params.rate_tolerance) for tokens in {low, high})


def _edge_unmatched(params: EdgeParams, value: Any, runs: list[EdgeRun], max_new_tokens: int, by_key: bool) -> str | None:
    """The first entry whose metrics no distinct prompt's timed calls explain (with ``by_key``, a prompt of the kind its
    key names); None if all are."""
    if not isinstance(value, dict):
        return None
    kinds = keyed_kinds(value) if by_key else None
    names = list(value)
    fits = [
        [
            index
            for index, run in enumerate(runs)
            if (kinds is None or kinds[name] in run.kinds) and _edge_fits(params, value[name], run, max_new_tokens)
        ]
        for name in names
    ]
    if max_matching(fits) == len(names):
        return None
    return str(next((name for name, fit in zip(names, fits, strict=True) if not fit), names[-1]))


def edge_plan(context: CheckContext, params: EdgeParams) -> list[tuple[str, int]]:
    """The two hidden probes: (hub id, max_new_tokens), every argument different."""
    tokens = two_lengths(context.rng_for("edge"), *params.tokens)
    return [(params.model, tokens[0]), (params.other_model, tokens[1])]


def edge_call(context: CheckContext, params: EdgeParams, hub_id: str, max_new_tokens: int) -> tuple[str, CallOutcome]:
    """One hidden probe (shared), made again while an entry's metrics fit no call (a preempted run does not repeat)."""
    objects = handed(context, hub_id)
    call = f"{params.function}({hub_id} model, tokenizer, max_new_tokens={max_new_tokens})"

    def attempt() -> CallOutcome:
        return context.call(
            params.function,
            objects.model.recipe,
            objects.tokenizer.recipe,
            literal(max_new_tokens),
            watch=(params.measure_function,),
        )

    def again(outcome: CallOutcome) -> bool:
        # (not again where measure_generation ignores its prompts: its calls share one input, never told apart) An entry
        # that fits no call, or only another kind's (two prompts' calls of close durations, one of them preempted), is
        # measured again: a misfiled entry repeats, a preempted run does not.
        runs = edge_runs(context, params, hub_id, outcome)
        unmatched = outcome.ok and (
            _edge_unmatched(params, outcome.value, runs, max_new_tokens, by_key=False) is not None
            or (
                isinstance(outcome.value, dict)
                and keyed_kinds(outcome.value) is not None
                and _edge_unmatched(params, outcome.value, runs, max_new_tokens, by_key=True) is not None
            )
        )
        return unmatched and not measure_ignores_inputs(context, outcome, params.measure_function)

    outcome = context.once(f"edge:{call}:{objects.own}", lambda: again_while(params.attempts, attempt, again))
    return call, outcome


@check_kind("edge_prompts", EdgeParams)
def edge_prompts(context: CheckContext, params: EdgeParams) -> Verdict:
    """probe_edge_prompts: very short, very long, multi-line and repetitive prompts, each entry the measurement of a
    prompt of the kind its key names, each with the max_new_tokens it is given."""
    for hub_id, max_new_tokens in edge_plan(context, params):
        verdict = _judge_edges(context, params, hub_id, max_new_tokens)
        if verdict is not None:
            return verdict
    return Verdict.passed("All four edge prompt kinds were measured with the max_new_tokens given, each entry its own prompt's.")


def _judge_edges(context: CheckContext, params: EdgeParams, hub_id: str, max_new_tokens: int) -> Verdict | None:
    call, outcome = edge_call(context, params, hub_id, max_new_tokens)
    value = context.returned(outcome, call, keyed_by(f"edge kind, one entry each ({', '.join(EDGE_KINDS)})", len(EDGE_KINDS)))
    for name, metrics in value.items():
        _metrics_dict(metrics, f"the edge prompt {name!r}", SETTING_METRICS)
    # The zoo's models share a tokenizer: the prompts fit whatever model ran them, so the model is asked apart (a
    # model it loaded with the weights of the one it was given, a copy, is the same model).
    passed = {seen["serial"] for seen in outcome.models if seen["argument"]}
    ran = {int(event["model_serial"]) for event in outcome.generate_events() if not event["error"]}
    others = [
        seen for seen in outcome.models if seen["serial"] in ran - passed and identify(context, seen["fingerprint"]) != hub_id
    ]
    if passed and others and "model" not in measure_drops(context):  # measure_generation's own model: its checks'
        named = identify(context, others[0]["fingerprint"])
        return Verdict.failed(
            f"{call}'s generate calls ran a model it was not given ({f'a {named} model' if named else 'another model'} it "
            f"loaded itself) where it was given {hub_id}: measure the edge prompts on the model passed in.",
            expected=f"every generate on the model passed in ({hub_id})",
            found=f"a {named} model" if named else "another model",
        )
    reference_tokenizer = context.models.tokenizer(hub_id)
    runs = edge_runs(context, params, hub_id, outcome)
    # Each kind stands for a prompt run with the max_new_tokens asked where one is (a warm-up of a few words with
    # fewer tokens is a very short prompt too, but not the one measured).
    as_asked = [tokens_limit(run.timed(max_new_tokens)[-1]) == max_new_tokens for run in runs]
    kinds = assign_kinds([run.kinds if fair else set() for run, fair in zip(runs, as_asked, strict=True)], EDGE_KINDS)
    if len(kinds) < len(EDGE_KINDS):
        kinds = assign_kinds([run.kinds for run in runs], EDGE_KINDS)
    missing = [kind for kind in EDGE_KINDS if kind not in kinds]
    if missing and measure_ignores_inputs(context, outcome, params.measure_function):
        # Its generate calls show what measure_generation ran, not what it was given: judged by what it was given.
        asked = edges_asked(
            params, reference_tokenizer, max_new_tokens, call, measure_calls(outcome, params.measure_function), value
        )
        return asked if asked.outcome != "passed" else None
    limits = [tokens_limit(runs[index].timed(max_new_tokens)[-1]) for index in kinds.values()]
    coverage = _edge_coverage(
        params, max_new_tokens, missing, list(kinds), limits, f"No generate call of {call} had", "some edge prompts ran with"
    )
    if coverage is not None:
        return coverage
    unmatched = _edge_unmatched(params, value, runs, max_new_tokens, by_key=False)
    if unmatched is not None:
        measured = _returned_latencies(outcome, params.measure_function)
        latencies = [float(metrics["latency_s"]) for metrics in value.values()]
        # Latencies measure_generation itself mistimes are charged in its own check, not here again.
        if not (all(latency in measured for latency in latencies) and measure_mistimes(context)):
            return Verdict.failed(
                f"The metrics {call} reports for {unmatched!r} are not those of any generate call it made (latency_s "
                "within the tolerance of the call's duration, tokens_per_s x latency_s its new tokens): report each "
                "prompt's own measurement.",
                expected="each entry's metrics from its own timed generate call",
                found=f"{unmatched!r}: latency_s {number(float(value[unmatched]['latency_s']), 's')}",
            )
    elif keyed_kinds(value) is not None:
        misfiled = _edge_unmatched(params, value, runs, max_new_tokens, by_key=True)
        if misfiled is not None:
            return _misfiled(call, misfiled, value)
    # Through measure_generation, each entry must also be what the calls of a prompt of its own returned: on a small
    # model two prompts' generate calls can take the same time, so one entry copying another's metrics fits a call.
    calls = measure_calls(outcome, params.measure_function)
    return _entries_unreported(call, params, reference_tokenizer, calls, value) if calls else None


def _misfiled(call: str, name: Any, value: dict[Any, Any]) -> Verdict:
    kind = key_kind(name)
    return Verdict.failed(
        f"The entry {name!r} of {call} holds the metrics of another kind of prompt than a {kind} one: file each prompt's "
        "measurement under the key of its own kind.",
        expected=f"the metrics of a {kind} prompt under {name!r}",
        found=f"{name!r}: latency_s {number(float(value[name]['latency_s']), 's')}, another kind's",
    )


def _edge_coverage(
    params: EdgeParams, max_new_tokens: int, missing: list[str], found: list[str], limits: list[Any], who: str, lead: str
) -> Verdict | None:
    """The failed verdict where an edge kind was not run (``who`` ... "a multi-line prompt") or a kind's run had
    another max_new_tokens than asked (``limits``, one per kind found; ``lead`` ... "max_new_tokens=32"); else None."""
    if missing:
        return Verdict.failed(
            f"{who} a {' or a '.join(missing)} prompt (very short: at most {params.short_tokens} tokens or words; very long: at "
            f"least {params.long_tokens}; multi-line: holds a line break; repetitive: a few tokens repeated).",
            expected=", ".join(EDGE_KINDS),
            found=", ".join(found) or "none of them",
        )
    unfair = sorted(set(map(str, limits)) - {str(max_new_tokens)})
    if unfair:
        return Verdict.failed(
            f"Called with max_new_tokens={max_new_tokens}, {lead} max_new_tokens={', '.join(unfair)}: pass the same "
            "max_new_tokens to every measurement so the comparison is fair.",
            expected=f"max_new_tokens={max_new_tokens} everywhere",
            found=", ".join(unfair),
        )
    return None


def edges_asked(
    params: EdgeParams, reference_tokenizer: Any, max_new_tokens: int, call: str, calls: list[MeasureCall], value: dict[Any, Any]
) -> Verdict:
    """probe_edge_prompts judged by what it gave a measure_generation that does not generate what it is given
    (charged in its own checks) and what it reports: every edge kind, each with the max_new_tokens it was called
    with, and each entry ``value`` holds the metrics one of those calls returned."""
    function = params.measure_function
    given = [(prompt, measured) for measured in calls[:12] for prompt in measured.prompts or []]
    traits = [edge_kinds(reference_tokenizer(prompt)["input_ids"], prompt, params) for prompt, _ in given]
    kinds = assign_kinds(traits, EDGE_KINDS)
    missing = [kind for kind in EDGE_KINDS if kind not in kinds]
    limits = [given[index][1].max_new_tokens for index in kinds.values()]
    lead = f"{call} gave {function} some edge prompts with"
    coverage = _edge_coverage(params, max_new_tokens, missing, list(kinds), limits, f"{call} never gave {function}", lead)
    if coverage is not None:
        return coverage
    # Each entry reports what the calls of its own prompt returned (its generate calls, all on the one input
    # measure_generation generates, are not told apart: their metrics are what there is to match).
    unreported = _entries_unreported(call, params, reference_tokenizer, calls, value)
    if unreported is not None:
        return unreported
    return Verdict.passed(
        f"All four edge prompt kinds were given to {function} with max_new_tokens={max_new_tokens}, each entry what its "
        f"call returned ({function} does not generate the prompts it is given, which is charged in its own checks)."
    )


def _entries_unreported(
    call: str, params: EdgeParams, reference_tokenizer: Any, calls: list[MeasureCall], value: dict[Any, Any]
) -> Verdict | None:
    """The failed verdict where an entry is not what the calls of a prompt of its own returned: misfiled where every
    entry is some call's metrics, only not under its own kind's key; else None."""
    name = _entry_unreported(params, reference_tokenizer, calls, value)
    if name is None:
        return None
    if keyed_kinds(value) is not None and _entry_unreported(params, reference_tokenizer, calls, value, by_kind=False) is None:
        return _misfiled(call, name, value)
    return _unreported(call, params.measure_function, name, value)


def _entry_unreported(
    params: EdgeParams, reference_tokenizer: Any, calls: list[MeasureCall], value: dict[Any, Any], by_kind: bool = True
) -> Any:
    """The key of the first edge entry whose metrics are not what the calls of a prompt of its own returned (the calls
    grouped by the prompts they were given, each group to one entry at most, of the kind its key names where the keys
    name the four kinds and ``by_kind``); None if every entry is."""
    groups: dict[tuple[str, ...], list[MeasureCall]] = {}
    for measured in calls:
        groups.setdefault(tuple(measured.prompts or ()), []).append(measured)
    spans = [(prompts, span) for prompts, group in groups.items() if (span := _returned_range(group)) is not None]
    traits = [
        set().union(*(edge_kinds(reference_tokenizer(prompt)["input_ids"], prompt, params) for prompt in prompts))
        if prompts
        else set()
        for prompts, _ in spans
    ]
    names = list(value)
    kinds = keyed_kinds(value) if by_kind else None
    fits = [
        [
            index
            for index, (_, bounds) in enumerate(spans)
            if (kinds is None or kinds[name] in traits[index]) and _reports(params, value[name], bounds)
        ]
        for name in names
    ]
    if max_matching(fits) == len(names):
        return None
    return next((name for name, fit in zip(names, fits, strict=True) if not fit), names[-1])


def _unreported(call: str, function: str, name: Any, value: dict[Any, Any]) -> Verdict:
    return Verdict.failed(
        f"The metrics {call} reports for {name!r} are not what any call of {function} it made returned for a prompt "
        "of its own: report each prompt's own measurement.",
        expected=f"each entry's metrics from its own call of {function}",
        found=f"{name!r}: latency_s {number(float(value[name]['latency_s']), 's')}",
    )


def _reports(params: EdgeParams, metrics: Any, bounds: tuple[tuple[float, float], tuple[float, float]]) -> bool:
    """Whether an entry's metrics are what calls of one prompt returned (latency_s, and the tokens they imply)."""
    if not (isinstance(metrics, dict) and all(is_number(metrics.get(key)) for key in ("latency_s", "tokens_per_s"))):
        return False
    latency, produced = float(metrics["latency_s"]), float(metrics["tokens_per_s"]) * float(metrics["latency_s"])
    return _within(latency, bounds[0], params.rate_tolerance) and _within(produced, bounds[1], params.rate_tolerance)


# --------------------------------------------------------------------------------------
# run_quantization_exercise
# --------------------------------------------------------------------------------------

TABLE_COLUMNS = ("scenario", "latency_s", "tokens_per_s", "ms_per_token", "ppx")
ROW_METRICS = ("latency_s", "tokens_per_s", "ms_per_token")


class ControllerParams(LatencyTolerance, TargetParams):
    """A hidden run of the whole exercise (the tolerance: a table latency against a generate call of the run)."""

    table_function: str = Field("build_results_table", description="The student's function that builds the table.")
    model: str = Field("gpt2", description="Model id passed.")
    batch_sizes: list[list[int]] = Field([[1, 2], [3, 5]], min_length=2, description="Ranges the batch sizes are drawn from.")
    tokens: list[int] = Field([6, 10], min_length=2, max_length=2, description="Range [low, high] of max_new_tokens.")
    takeaways: list[int] = Field([3, 5], min_length=2, max_length=2, description="How many takeaways, at least and at most.")
    takeaways_question: str = Field(
        "A short takeaway (3-5 bullets) stating the biggest wins and when they apply.",
        description="What the takeaways answer (a takeaway that copies or rewords it is flagged).",
    )
    measure_function: str = Field("measure_generation", description="The student's measuring function, watched during the run.")
    measure_functions: list[str] = Field(
        ["measure_generation", "ablate_cache_and_padding", "measure_batched", "probe_edge_prompts"],
        description="The student's measuring functions, watched during the run: the table's latencies come from them.",
    )
    ppx_function: str = Field("compare_ppplx", description="The student's perplexity function, watched during the run.")
    ablation_function: str = Field("ablate_cache_and_padding", description="Whose entries a cache/padding row reports.")
    batched_function: str = Field("measure_batched", description="Whose rows a batch-size row reports.")
    edge_function: str = Field("probe_edge_prompts", description="The student's edge-prompt probe, watched during the run.")
    ptq_function: str = Field("run_static_ptq_optimum", description="The student's PTQ function, watched during the run.")
    unit_tolerance: float = Field(0.01, gt=0, description="Relative tolerance of ms_per_token x tokens_per_s = 1000 in a row.")
    match_tolerance: float = Field(
        1e-3, gt=0, description="Relative tolerance of a table number against the measurement it reports."
    )


# Where each measuring function takes max_new_tokens (its signature's order: the starter's).
MAX_NEW_TOKENS_AT = {"measure_generation": 3, "ablate_cache_and_padding": 3, "measure_batched": 4, "probe_edge_prompts": 2}


def _controller_call(context: CheckContext, params: ControllerParams) -> tuple[list[int], int, str, CallOutcome]:
    rng = context.rng_for("controller")
    sizes = [rng.randint(low, high) for low, high in params.batch_sizes]
    max_new_tokens = rng.randint(*params.tokens)
    call = f"{params.function}({params.model!r}, batch_sizes={tuple(sizes)}, max_new_tokens={max_new_tokens})"
    key = f"controller:{call}:{params.table_function}"
    watched = (params.table_function, *params.measure_functions, params.ppx_function, params.ptq_function)
    outcome = context.once(
        key,
        lambda: context.call(
            params.function,
            literal(params.model),
            literal(sizes),
            literal(max_new_tokens),
            watch=tuple(dict.fromkeys(watched)),
        ),
    )
    return sizes, max_new_tokens, call, outcome


def _reported(value: Any, key: str) -> list[float]:
    """Every number under ``key`` in what a measuring function returned: a dict, a dict of dicts, or a DataFrame's column."""
    if isinstance(value, Frame):
        return [float(v) for v in value.column(key) if is_number(v)] if key in value.columns else []
    if not isinstance(value, dict):
        return []
    if is_number(value.get(key)):
        return [float(value[key])]
    return [number for item in value.values() for number in _reported(item, key) if isinstance(item, (dict, Frame))]


def _close(value: float, candidates: list[float]) -> bool:
    """Whether ``value`` is one of ``candidates``, as printed to 3 decimals or more."""
    return any(math.isclose(value, candidate, rel_tol=1e-3, abs_tol=5e-4) for candidate in candidates)


def _metrics(value: Any) -> dict[str, float]:
    """The latency_s, tokens_per_s and ms_per_token of a returned entry (those that are numbers)."""
    if not isinstance(value, dict):
        return {}
    return {key: float(value[key]) for key in ROW_METRICS if is_number(value.get(key))}


@dataclass(frozen=True)
class Measurement:
    """What a measuring call of the run returned for one scenario."""

    scenario: str  # "baseline", "quantized", "use_cache=True,padding=left", "batch_size=4", ...
    metrics: dict[str, float]
    source: str  # how feedback names where it came from


@dataclass(frozen=True)
class Run:
    """What the controller's run did, as its watched calls show: each scenario's measurements, and the perplexities."""

    measurements: list[Measurement]
    perplexities: dict[str, list[float]]  # "baseline" / "quantized" / "" (a label read as neither) -> ppx returned

    def of(self, scenario: str) -> list[Measurement]:
        return [measurement for measurement in self.measurements if measurement.scenario == scenario]


# How a row may sum up several runs of one scenario: their mean, their median, their best.
REPEATS: tuple[tuple[str, Callable[[list[float]], float]], ...] = (
    ("mean", statistics.fmean),
    ("median", statistics.median),
    ("best", min),
)


T = TypeVar("T")


def in_a_row(items: list[T]) -> list[list[T]]:
    """Every run of two or more consecutive items (what a mean, median or best of repeated runs may summarise)."""
    return [items[start:stop] for start in range(len(items)) for stop in range(start + 2, len(items) + 1)]


def repeated_measurements(measured: list[Measurement], function: str) -> list[Measurement]:
    """What a row may report of runs in a row of one scenario (a controller that measures the baseline three times and
    reports their mean): each metric's mean or median over them, or their mean, median or best latency with the rates
    it gives (where every run made the same tokens)."""
    found = []
    for window in in_a_row(measured):
        latencies = [m.metrics.get("latency_s") for m in window]
        if not all(is_number(latency) and latency for latency in latencies):
            continue
        shared = [key for key in ROW_METRICS if all(key in m.metrics for m in window)]
        made = [m.metrics["tokens_per_s"] * m.metrics["latency_s"] for m in window] if "tokens_per_s" in shared else []
        alike = bool(made) and all(math.isclose(tokens, made[0], rel_tol=1e-3) for tokens in made)
        for how, pick in REPEATS:
            source = f"the {how} of {len(window)} {function} runs on the {window[0].scenario} model"
            if how != "best":
                each = {key: pick([m.metrics[key] for m in window]) for key in shared}
                found.append(Measurement(window[0].scenario, each, source))
            if alike:
                latency = pick([float(value) for value in latencies if value])
                derived = {"latency_s": latency, "tokens_per_s": made[0] / latency, "ms_per_token": 1000 * latency / made[0]}
                found.append(Measurement(window[0].scenario, {k: v for k, v in derived.items() if k in shared}, source))
    return found


def run_record(outcome: CallOutcome, params: ControllerParams) -> Run:
    """Each scenario's measurements during the run: measure_generation on a PyTorch model (baseline) or on an ONNX
    Runtime model (quantized), the ablation's entry of each setting, measure_batched's row of each batch size."""
    measurements = []
    for event in outcome.returned_events(params.measure_function):
        model = argument(event, "model", 0)
        scenario = "quantized" if is_onnx_argument(model) else "baseline" if is_torch_argument(model) else ""
        if scenario and (metrics := _metrics(decode(event["value"]))):
            measurements.append(Measurement(scenario, metrics, f"{params.measure_function} on the {scenario} model"))
    for scenario in ("baseline", "quantized"):
        measurements += repeated_measurements([m for m in measurements if m.scenario == scenario], params.measure_function)
    for event in outcome.returned_events(params.ablation_function):
        value = decode(event["value"])
        for key, entry in value.items() if isinstance(value, dict) else ():
            setting = read_scenario(key)
            if setting.use_cache is not None and setting.padding is not None and (metrics := _metrics(entry)):
                name = setting_key(setting.use_cache, setting.padding)
                measurements.append(Measurement(name, metrics, f"{params.ablation_function}'s {key!r}"))
    for event in outcome.returned_events(params.batched_function):
        frame = decode(event["value"])
        if isinstance(frame, Frame) and "batch_size" in frame.columns:
            for row in frame.records():
                size: Any = row.get("batch_size")
                if is_number(size) and (metrics := _metrics(row)):
                    measurements.append(
                        Measurement(f"batch_size={int(size)}", metrics, f"{params.batched_function}'s row for {int(size)}")
                    )
    perplexities: dict[str, list[float]] = {}
    for event in outcome.returned_events(params.ppx_function):
        value = decode(event["value"])
        for label, entry in value.items() if isinstance(value, dict) else ():
            scenarios = [name for name in ppx_scenarios(event, label) if name in ("baseline", "quantized")]
            perplexities.setdefault(scenarios[0] if scenarios else "", []).extend(_reported(entry, "ppx"))
    return Run(measurements, perplexities)


def row_scenarios(label: Any) -> list[str]:
    """The scenario names a table row's label may stand for (empty: none the table must have)."""
    read = read_scenario(label)
    named = [name for name, said in (("baseline", read.baseline), ("quantized", read.quantized)) if said]
    if named:
        return named  # "baseline (KV cache on, left padding)" is the baseline, beside the ablation's rows
    if read.use_cache is not None and read.padding is not None:
        return [setting_key(read.use_cache, read.padding)]
    if read.batch_size is not None:
        return [f"batch_size={read.batch_size}"]
    return []


def _onnx_models(description: Any) -> list[dict[str, Any]]:
    """The ONNX Runtime models a returned value's description holds (itself, or in a tuple or list)."""
    if is_onnx_argument(description):
        return [description]
    items = description.get("items") if isinstance(description, dict) else None
    return [model for item in items or [] for model in _onnx_models(item)]


class QuantizedModels:
    """The ONNX Runtime models a run's quantization function returned: by object (serial), and by the ONNX file their
    session runs (a model loaded again from the saved quantized file is the same model)."""

    def __init__(self, params: ControllerParams, outcome: CallOutcome) -> None:
        returned = [model for event in outcome.returned_events(params.ptq_function) for model in _onnx_models(event["value"])]
        self.known = bool(returned)
        self.serials = {model.get("serial") for model in returned if isinstance(model.get("serial"), int)}
        # The ONNX files their sessions run, resolved in the kernel (links and the working folder).
        self.files = {str(model["path"]) for model in returned if model.get("path")}

    def other(self, model: Any) -> str:
        """How an ONNX Runtime model is not one of them ('' where it is, or where nothing can be told)."""
        if not self.known or not is_onnx_argument(model):
            return ""
        if model.get("serial") in self.serials or str(model.get("path") or "") in self.files:
            return ""
        return str(model.get("path") or "another object")


def _not_the_quantized_model(params: ControllerParams, outcome: CallOutcome) -> list[str]:
    """Where the run scores, under a label that names the quantized model, the perplexity of an ONNX Runtime model
    that is not the one its quantization function returned (an FP32 export, another model's). Its rows' measurements
    are held to the same in :func:`judge_alike`, which knows which measurement each row reports."""
    quantized = QuantizedModels(params, outcome)
    for event in outcome.returned_events(params.ppx_function):
        for key, model in (handed_models(event) or {}).items():
            # Only under a label that names the quantized model: an unquantized export scored beside it under a label of
            # its own ("reference", "onnx_fp32") is a row beside the comparison.
            other = quantized.other(model) if "quantized" in row_scenarios(key) else ""
            if other:
                return [
                    f"it scored, as the quantized model's perplexity, an ONNX Runtime model that {params.ptq_function} "
                    f"did not return ({other}): the quantized row's perplexity must be the quantized model's"
                ]
    return []


def handed_models(event: ReturnedEvent) -> dict[str, Any] | None:
    """The models a perplexity call was handed, by label (each its raw description); None where its ``models``
    argument cannot be read as labelled entries."""
    models = argument(event, "models", 0)  # an object argument stays its description: its entries' models
    entries = models.get("entries") if isinstance(models, dict) else None
    if not isinstance(entries, list):
        return None
    return {str(entry[0]): entry[1] for entry in entries if isinstance(entry, list) and len(entry) == 2}


def ppx_scenarios(event: ReturnedEvent, label: Any) -> list[str]:
    """The scenarios a perplexity call's result under ``label`` stands for: those its label names, else the model
    handed under it (an ONNX Runtime model is the quantized one, a PyTorch model the baseline: {"A": model} names
    neither, and the model decides)."""
    named = row_scenarios(label)
    if named or read_scenario(label).extra:  # "onnx_fp32": the unquantized ONNX model, beside the comparison
        return named
    model = (handed_models(event) or {}).get(str(label))
    return ["quantized"] if is_onnx_argument(model) else ["baseline"] if is_torch_argument(model) else []


def measured_rows(table: Frame) -> list[dict[Any, Any]]:
    """The table's rows that report a measurement: a row with no number in any metric column is a caption (seed 001
    asks for the model id, device and dtype "in the table caption or a header row"), no scenario's."""
    return [row for row in table.records() if any(is_number(row.get(key)) for key in (*ROW_METRICS, "ppx"))]


def _row_metrics(row: dict[Any, Any]) -> dict[str, float]:
    return {key: float(row[key]) for key in ROW_METRICS if is_number(row.get(key))}


def _agreeing(row: dict[str, float], measured: dict[str, float], tolerance: float) -> tuple[int, int]:
    """(how many, of how many) metrics a row and a measurement both give agree (each at the precision it is shown)."""
    shared = [key for key in ROW_METRICS if key in row and key in measured]
    return sum(1 for key in shared if agrees(row[key], measured[key], tolerance)), len(shared)


def holds(row: dict[str, float], measured: Measurement, tolerance: float) -> bool:
    """Whether a row reports this measurement: its latency_s and every other metric both give."""
    agreeing, shared = _agreeing(row, measured.metrics, tolerance)
    return shared > 0 and "latency_s" in row and "latency_s" in measured.metrics and agreeing == shared


def partly(row: dict[str, float], measured: Measurement, tolerance: float) -> bool:
    """Whether a row reports some of this measurement's metrics and not the others (a measurement transformed)."""
    agreeing, shared = _agreeing(row, measured.metrics, tolerance)
    return 0 < agreeing < shared


@dataclass(frozen=True)
class RowJudgement:
    """What is wrong with the table's rows: what the builder did with what it was handed (``builder``), and what the
    controller handed it or measured (``controller``); empty: nothing."""

    builder: list[str]
    controller: list[str]


def judge_rows(table: Frame, run: Run, params: ControllerParams) -> RowJudgement:
    """Each row against its scenario's measurement in the run.

    The builder is answerable for what it does with what it is handed: a row reporting some of its scenario's
    measurement but not the rest (a unit or a per-sample rate of its own), two rows holding each other's measurements,
    ms_per_token x tokens_per_s not 1000, the baseline's or the quantized model's ppx missing or the other's. Where a
    row holds none of its scenario's measurement, and that measurement is nowhere in the table, the builder cannot have
    been handed it: that is the controller's."""
    builder: list[str] = []
    controller: list[str] = []
    tolerance = params.match_tolerance
    rows = [(row, row_scenarios(row.get("scenario")), _row_metrics(row)) for row in measured_rows(table)]
    for row, scenarios, metrics in rows:
        ms, rate = metrics.get("ms_per_token"), metrics.get("tokens_per_s")
        as_measured = any(
            "ms_per_token" in measurement.metrics and holds(metrics, measurement, tolerance)
            for scenario in scenarios
            for measurement in run.of(scenario)
        )
        if as_measured:
            continue  # the row is its measurement as it was handed: a unit that is wrong there is the measuring function's
        if ms is not None and rate is not None and rate > 0 and not _unit_consistent(ms, rate, params.unit_tolerance):
            builder.append(
                f"the row {row.get('scenario')!r} gives ms_per_token {number(ms)} beside tokens_per_s {number(rate)}, whose "
                f"product is {number(ms * rate)}, not 1000: ms_per_token is 1000 / tokens_per_s (milliseconds)"
            )
    for row, scenarios, metrics in rows:
        label = row.get("scenario")
        own = [measurement for scenario in scenarios for measurement in run.of(scenario)]
        if not own or not metrics or any(holds(metrics, measurement, tolerance) for measurement in own):
            continue
        shown = ", ".join(f"{key} {number(value)}" for key, value in metrics.items())
        wanted = ", ".join(f"{key} {number(value)}" for key, value in own[-1].metrics.items())
        part = next((measurement for measurement in own if partly(metrics, measurement, tolerance)), None)
        if part is not None:
            builder.append(
                f"the row {label!r} reports {shown}, but {part.source} returned {', '.join(f'{k} {number(v)}' for k, v in part.metrics.items())}: "
                "put the measurement in the row as it is, in its units"
            )
            continue
        elsewhere = [
            other_row.get("scenario")
            for other_row, other_scenarios, other_metrics in rows
            if other_row is not row and any(holds(other_metrics, measurement, tolerance) for measurement in own)
        ]
        if elsewhere:
            builder.append(
                f"the row {label!r} does not hold its own measurement ({wanted}), which the row {elsewhere[0]!r} holds: "
                "each row must hold its own scenario's measurement"
            )
        else:
            controller.append(
                f"the row {label!r} reports {shown}, but {own[-1].source} returned {wanted} for that scenario during the run"
            )
    builder += _ppx_problems(rows, run, tolerance)
    return RowJudgement(builder, controller)


def _unit_consistent(ms: float, rate: float, tolerance: float) -> bool:
    """Whether ms_per_token x tokens_per_s is 1000, within ``tolerance`` and the precision each is shown with."""
    slack = tolerance
    for value in (ms, rate):
        decimals = shown_decimals(value)
        if decimals is not None and value:
            slack += 0.5 * 10.0**-decimals / abs(value)
    return abs(ms * rate - 1000) <= 1000 * slack


def _ppx_problems(rows: list[tuple[dict[Any, Any], list[str], dict[str, float]]], run: Run, tolerance: float) -> list[str]:
    """What is wrong with the baseline's and the quantized model's ppx in the table, against what the run's perplexity
    function returned for each (nothing where it returned none)."""
    problems = []
    # An ablation or batching row on the baseline model ("baseline: use_cache=False,padding=right", "baseline:
    # batch_size=4") reads as the baseline's too: it need not repeat the perplexity where another of its rows gives it.
    given = {
        name
        for row, scenarios, _ in rows
        for name in scenarios[:1]
        if is_number(row.get("ppx")) and not math.isnan(float(row["ppx"]))
    }
    for row, scenarios, _ in rows:
        for scenario in [name for name in scenarios if name in ("baseline", "quantized")][:1]:
            own = run.perplexities.get(scenario, [])
            other = run.perplexities.get("quantized" if scenario == "baseline" else "baseline", [])
            if not own:
                continue
            ppx: Any = row.get("ppx")
            setting = read_scenario(row.get("scenario"))
            missing = not is_number(ppx) or math.isnan(float(ppx))
            another = (setting.use_cache is not None and setting.padding is not None) or setting.batch_size is not None
            if missing and scenario in given and another:
                continue
            if not is_number(ppx):
                problems.append(
                    f"the row {row.get('scenario')!r} gives ppx {kind_of(ppx)}, but the run computed {number(own[-1])} for "
                    f"the {scenario} model: put its perplexity in the row"
                )
            elif not any(agrees(ppx, value, tolerance) for value in own) and any(
                agrees(ppx, value, tolerance) for value in other
            ):
                problems.append(
                    f"the row {row.get('scenario')!r} gives the other model's ppx ({number(float(ppx))}), not the {scenario} "
                    f"model's ({number(own[-1])})"
                )
    return problems


def judge_table_sources(context: CheckContext, params: ControllerParams, table: Frame) -> Verdict | None:
    """None if every latency of the table is one the run measured and every perplexity one the run computed.

    A latency counts as measured when a watched measuring function returned it during the run, or when it
    agrees with the duration of a generate call of the run; a perplexity when the watched perplexity
    function returned it.
    """
    _, _, call, outcome = _controller_call(context, params)
    events = outcome.generate_events()
    by_function = [
        [latency for event in outcome.returned_events(name) for latency in _reported(decode(event["value"]), "latency_s")]
        for name in params.measure_functions
    ]
    # Each latency a measuring function returned, or the mean, median or best of runs in a row of one of them.
    latencies = [latency for runs in by_function for latency in runs]
    latencies += [pick(window) for runs in by_function for window in in_a_row(runs) for _, pick in REPEATS]
    perplexities = [
        ppx for event in outcome.returned_events(params.ppx_function) for ppx in _reported(decode(event["value"]), "ppx")
    ]
    other_texts = _ppx_from_other_texts(params, outcome, table, call)
    if other_texts is not None:
        return other_texts
    for row in measured_rows(table):
        scenario: Any = row.get("scenario")
        latency: Any = row.get("latency_s")
        ppx: Any = row.get("ppx")
        if not is_number(latency):
            return Verdict.failed(
                f"The results table's row {scenario!r} has latency_s {kind_of(latency)}: report the measured latency.",
                found=kind_of(latency),
            )
        measured = any(agrees(latency, value, params.match_tolerance) for value in latencies) or _close(float(latency), latencies)
        measured = measured or any(
            judge_latency(params, float(latency), [event], int(event["max_new_tokens"] or 0)) is None for event in events
        )
        if not measured:
            return Verdict.failed(
                f"The row {scenario!r} of the table {call} returned reads latency_s {number(float(latency), 's')}, which no "
                f"measurement of the run gave ({len(events)} generate call(s), {len(latencies)} latencies returned by "
                f"{', '.join(params.measure_functions)}): fill the table from the run's own results.",
                expected="latencies measured during the run",
                found=number(float(latency), "s"),
            )
        if is_number(ppx) and not any(agrees(ppx, value, params.match_tolerance) for value in perplexities):
            return Verdict.failed(
                f"The row {scenario!r} of the table {call} returned reads ppx {number(float(ppx))}, which {params.ppx_function} "
                f"did not return during the run ({len(perplexities)} perplexities): take ppx from its results.",
                expected=f"a perplexity {params.ppx_function} returned",
                found=number(float(ppx)),
            )
    return None


def _ppx_from_other_texts(params: ControllerParams, outcome: CallOutcome, table: Frame, call: str) -> Verdict | None:
    """None unless the table's baseline and quantized perplexities were returned by perplexity calls on other texts
    (each row's value found, but on no texts both were): a quality drift compares the two models on one corpus."""
    scored: dict[str, dict[str, list[float]]] = {}  # texts -> scenario -> the perplexities returned for it on them
    for event in outcome.returned_events(params.ppx_function):
        value = decode(event["value"]) if isinstance(event["value"], dict) else None
        texts = json.dumps(argument(event, "texts", 2), sort_keys=True, default=str)
        for key, item in value.items() if isinstance(value, dict) else ():
            found = [float(item)] if is_number(item) else _reported(item, "ppx")
            for scenario in ppx_scenarios(event, key):
                scored.setdefault(texts, {}).setdefault(scenario, []).extend(found)
    common: set[str] | None = None
    for row in measured_rows(table):
        ppx: Any = row.get("ppx")
        for scenario in set(row_scenarios(row.get("scenario"))) & {"baseline", "quantized"} if is_number(ppx) else ():
            on = {
                texts for texts, by in scored.items() if any(agrees(ppx, v, params.match_tolerance) for v in by.get(scenario, []))
            }
            if on:  # a perplexity no call returned is another check's
                common = on if common is None else common & on
    if common is not None and not common:
        return Verdict.failed(
            f"In the table {call} returned, the baseline's and the quantized model's perplexities come from "
            f"{params.ppx_function} calls on other texts: a quality drift compares the two models on the same corpus.",
            expected="both perplexities from one corpus",
            found="each from other texts",
        )
    return None


def _longest_generates(events: list[GenerateEvent], start: float, end: float) -> list[GenerateEvent]:
    """The generates a measuring call that ran from ``start`` to ``end`` made with the most new tokens (its timed
    runs: a warm-up's few, a one-token generate after the timer stopped, are not)."""
    ran = [event for event in events if start <= float(event["start"]) and float(event["end"]) <= end]
    most = max((limit for event in ran if isinstance(limit := tokens_limit(event), int)), default=None)
    return [event for event in ran if most is None or tokens_limit(event) == most]


def _timed_generate(events: list[GenerateEvent], start: float, end: float, latency: float) -> GenerateEvent | None:
    """The generate a measuring call that ran from ``start`` to ``end`` timed to report ``latency``: of its generates
    with the most new tokens (a warm-up's few, a one-token generate after the timer stopped, are not it), the last
    that a timer reading ``latency`` surrounds; else the last of them."""
    longest = _longest_generates(events, start, end)
    timed = [event for event in longest if agrees_with_timed(LatencyTolerance(), latency, [event])]
    chosen = timed or longest
    return chosen[-1] if chosen else None


def _settings(generation: Generation) -> dict[str, Any]:
    """What a generate ran with that a comparison of two models must keep constant."""
    event = generation.event
    return {
        "prompts": sorted(tuple(row) for row in event["rows"] or []),
        "max_new_tokens": tokens_limit(event),
        "use_cache": event["use_cache"] is not False,
        "num_beams": event["num_beams"] if isinstance(event["num_beams"], int) else 1,
        "assisted": event.get("decoding") == "_assisted_decoding",
        "more_passes": generation.more_passes,
        "threads": event.get("torch_threads"),
        "autocast": event["autocast"],
    }


# Two generates' added work per step is alike within twice the other's and this (a loaded machine preempting a step
# clock now and then adds a share of a millisecond per step; a processor or hook that works only for one model adds
# milliseconds to each of its steps).
STEP_SLACK_S = 0.0005


@dataclass(frozen=True)
class AddedWork:
    """What a timed generate did besides its model's decoding, or less of it: a prefilled cache, a sleep inside it,
    how many streamers or forward hooks it ran, whether they took a share of it (``hooks_heavy``) and their seconds
    per forward pass, how many logits processors and stopping criteria of its own it passed, whether they took a
    large share (``heavy``; see behaviour.adds_work) and their seconds per forward pass."""

    prefilled: bool
    slept: bool
    hooks: int
    hooks_heavy: bool
    processors: int
    heavy: bool
    hooks_step_s: float = 0.0
    processors_step_s: float = 0.0

    @classmethod
    def of(cls, generation: Generation) -> AddedWork:
        event = generation.event
        steps = max(int(event.get("forward_calls") or 0), 1)
        return cls(
            prefilled=generation.prefilled,
            slept=sleeps_in(event),
            hooks=int(event.get("added_items") or 0),
            hooks_heavy=hooks_add_work(event),
            processors=int(event.get("custom_processors") or 0),
            heavy=adds_work(event, hooks=False),
            hooks_step_s=float(event.get("added_s") or 0.0) / steps,
            processors_step_s=float(event.get("processors_s") or 0.0) / steps,
        )

    def __bool__(self) -> bool:
        return self.prefilled or self.slept or self.hooks_heavy or self.heavy

    def alike(self, other: AddedWork) -> bool:
        """Whether two generates added the same work: none that took a share in either; or the same hooks and
        processors in both, taking about as long per step in each (a step clock passed to both models' generates
        takes a larger share of the faster model's, or of a call a loaded machine preempted inside one, but not
        longer; a processor that works only when it is handed the baseline does)."""
        return (
            (self.prefilled, self.slept) == (other.prefilled, other.slept)
            and (
                not (self.hooks_heavy or other.hooks_heavy)
                or (self.hooks == other.hooks and _per_step_alike(self.hooks_step_s, other.hooks_step_s))
            )
            and (
                not (self.heavy or other.heavy)
                or (self.processors == other.processors and _per_step_alike(self.processors_step_s, other.processors_step_s))
            )
        )


def _per_step_alike(one: float, other: float) -> bool:
    """Whether two generates' seconds per step of the same added work are alike (see STEP_SLACK_S)."""
    return max(one, other) <= 2 * min(one, other) + STEP_SLACK_S


def _runs_alike(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two timed generates ran alike in every setting that ALIKE_NAMES lists."""
    return not _differ(one, other)


def _differ(one: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """The settings of ALIKE_NAMES two timed generates ran unalike."""
    return [
        name for name in ALIKE_NAMES if not (one[name].alike(other[name]) if name == "added_work" else one[name] == other[name])
    ]


def _same_runs(one: frozenset[tuple[tuple[str, Any], ...]], other: frozenset[tuple[tuple[str, Any], ...]]) -> bool:
    """Whether two measurements ran alike: each run of one like some run of the other, both ways."""
    ones, others = [dict(run) for run in one], [dict(run) for run in other]
    return all(any(_runs_alike(a, b) for b in others) for a in ones) and all(any(_runs_alike(b, a) for a in ones) for b in others)


ALIKE_NAMES = {
    "prompts": "other prompts",
    "max_new_tokens": "another max_new_tokens",
    "use_cache": "another use_cache",
    "num_beams": "another number of beams",
    "assisted": "another decoding (an assistant: a draft model, prompt lookup)",
    "more_passes": "more forward passes than one per token in one (classifier-free guidance) and not the other",
    "warmed_up": "a warm-up in one measurement and none in the other",
    "padded_wide": "a batch padded far past its longest prompt in one and not the other",
    "added_work": "work added to one's steps (a streamer, forward hooks, logits processors) or a prefilled cache",
    "threads": "another number of torch threads (torch.set_num_threads)",
    "autocast": "autocast in one and not the other (a float32 model computing in another precision)",
}


def _summarised(
    returned: list[tuple[float, float, float]],
    latency: float,
    tolerance: float,
    models: dict[tuple[float, float], int | None],
) -> list[list[tuple[float, float, float]]]:
    """The measuring calls (start, end, latency) a row's latency reports: each call that reports it alone; where none
    does, each run of 2 to 6 consecutive calls of one model (``models``: each call's) whose mean, median or fastest it
    is (a row averaged over repeats)."""
    single = [[item] for item in returned if agrees(latency, item[2], tolerance)]
    if single:
        return single
    groups = []
    for size in range(2, 7):
        for first in range(len(returned) - size + 1):
            group = returned[first : first + size]
            if len({models.get((item[0], item[1])) for item in group}) > 1:
                continue
            values = [item[2] for item in group]
            summaries = (statistics.fmean(values), statistics.median(values), min(values))
            if any(agrees(latency, summary, tolerance) for summary in summaries):
                groups.append(group)
    return groups


def _hashable(value: Any) -> Any:
    """A setting's value as a set can hold it (prompts are a list)."""
    return tuple(_hashable(item) for item in value) if isinstance(value, list) else value


def _unalike_pair(base: list[dict[str, Any]], quantized: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run of the baseline's measurement and one of the quantized model's that differ, the fewest settings apart
    (a baseline averaged over a cached and two uncached runs beside cached quantized runs: an uncached one)."""
    pairs = [(one, other) for one in base for other in quantized if not _runs_alike(one, other)]
    return min(pairs, key=lambda pair: len(_differ(*pair)))


def _reads_long(tolerance: LatencyTolerance, measured: float, ran: list[GenerateEvent]) -> bool:
    """Whether a latency the run's measuring call returned reads longer than a timer of its generates does, past the
    tolerance of the grader's own calls (a tighter bound, a timer's own work beyond the measured waits, charged honest
    measurements on a loaded machine)."""
    longest = max(latency_readings(ran))
    if measured <= longest:
        return False
    return not agrees_with_timed(tolerance, measured, ran)


def judge_alike(context: CheckContext, params: ControllerParams, table: Frame) -> Verdict | None:
    """None unless the table's baseline and quantized rows report generates run unalike: the seed compares scenarios
    with everything but the model kept constant, so the generate the measurement of one row timed (see
    _timed_generate) must run the prompts, max_new_tokens, use_cache and beams the other row's ran, each after a
    warm-up in its measuring call or neither (seed 000: don't compare the warm-up against real runs)."""
    _, _, call, outcome = _controller_call(context, params)
    events = [event for event in outcome.generate_events() if not event["error"]]
    returned = [  # (start, end, latency) of each measuring call
        (float(event["start"]), float(event["time"]), reported)
        for event in outcome.returned_events(params.measure_function)
        for reported in _reported(decode(event["value"]), "latency_s")
    ]
    # The model each measuring call was given (its first model argument, as described; its serial: a row averages runs
    # of one model).
    described = {
        (float(event["start"]), float(event["time"])): next(
            (item for _, item in event["arguments"] if isinstance(item, dict) and isinstance(item.get("serial"), int)), None
        )
        for event in outcome.returned_events(params.measure_function)
    }
    models = {interval: model.get("serial") if model is not None else None for interval, model in described.items()}
    quantized_models = QuantizedModels(params, outcome)
    not_quantized: list[str] = []  # the quantized row's measurements of a model the quantization did not return
    # Per scenario, the settings of each measurement a row reports (one measuring call, or the runs its latency
    # summarises: a mean, median or minimum of consecutive calls), as the set of distinct settings its runs had.
    settings: dict[str, list[frozenset[tuple[tuple[str, Any], ...]]]] = {}
    dtypes: list[str] = []  # the models the baseline row's timed generates ran on
    reads_short: list[tuple[str, float, float]] = []  # (scenario, latency, its shortest generate)
    reads_long: list[tuple[str, float, float]] = []  # (scenario, latency, its longest reading)
    short = LatencyTolerance()
    for row in measured_rows(table):
        latency: Any = row.get("latency_s")
        if not is_number(latency):
            continue
        for scenario in set(row_scenarios(row.get("scenario"))) & {"baseline", "quantized"}:
            groups = _summarised(returned, float(latency), params.match_tolerance, models)
            if scenario == "quantized":
                # The measurements the row may report (by its latency; another model's may read the same): charged only
                # where none of them measured the model the quantization returned.
                others = [[quantized_models.other(described.get((start, end))) for start, end, _ in group] for group in groups]
                if others and all(any(group) for group in others):
                    not_quantized.append(next(other for group in others for other in group if other))
            for group in groups:
                ran_as: set[tuple[tuple[str, Any], ...]] = set()
                for start, end, measured in group:
                    timed = _timed_generate(events, start, end, measured)
                    ran = _longest_generates(events, start, end)
                    if ran and measured < min(latency_readings(ran)) * (1 - short.lower_rel) - short.lower_abs_s:
                        reads_short.append((scenario, measured, min(latency_readings(ran))))
                    elif ran and _reads_long(short, measured, ran):
                        # Nor longer than a timer of one of them reads (a latency inflated for one kind of model only,
                        # in the run alone: the grader's own calls of the measuring function get the truth).
                        reads_long.append((scenario, measured, max(latency_readings(ran))))
                    if timed is None:
                        continue
                    # Whether the measuring call warmed the model up before its timed generate: one row's
                    # measurement warmed and the other's cold times a first call's one-time costs in one row only.
                    within = [event for event in events if float(event["start"]) >= start]
                    generation = Generation.of(timed, {})
                    alike = {
                        **_settings(generation),
                        "warmed_up": warmup_before(within, timed) is not None,
                        "added_work": AddedWork.of(generation),
                        "padded_wide": generation.padded_wide,
                    }
                    ran_as.add(tuple(sorted((name, _hashable(value)) for name, value in alike.items())))
                    if scenario == "baseline" and str(timed["model_dtype"]).startswith("torch."):
                        dtypes.append(str(timed["model_dtype"]))
                if ran_as:
                    settings.setdefault(scenario, []).append(frozenset(ran_as))
    if not_quantized:
        return Verdict.failed(
            f"In the table {call} returned, the quantized row measures an ONNX Runtime model that {params.ptq_function} "
            f"did not return ({not_quantized[0]}): the quantized row must time the quantized model it returns.",
            expected=f"the model {params.ptq_function} returned",
            found=not_quantized[0],
        )
    if reads_short and not measure_mistimes(context):
        scenario, measured, took = reads_short[0]
        # A timer cannot read shorter than the generate it surrounds (a latency shrunk for one kind of model only).
        return Verdict.failed(
            f"In the table {call} returned, the {scenario} row's latency ({number(measured, 's')}) is shorter than any "
            f"generate its measurement ran ({number(took, 's')}): report what the timer read.",
            expected=f"at least {number(took, 's')}",
            found=number(measured, "s"),
        )
    if reads_long and not measure_mistimes(context):
        scenario, measured, took = reads_long[0]
        return Verdict.failed(
            f"In the table {call} returned, the {scenario} row's latency ({number(measured, 's')}) is longer than a timer "
            f"of any generate its measurement ran reads (the longest took {number(took, 's')}): report what the timer "
            "read.",
            expected=f"about {number(took, 's')}",
            found=number(measured, "s"),
        )
    if dtypes and "torch.float32" not in dtypes:
        # The seed's baseline is the float32 model: one timed in float64 (or float16) is slower (or faster) than it.
        return Verdict.failed(
            f"In the table {call} returned, the baseline row times a generate on a {dtypes[0].removeprefix('torch.')} "
            "model: the baseline is the model as loaded, in float32.",
            expected="the baseline row measured on the float32 model",
            found=dtypes[0].removeprefix("torch."),
        )
    if len(settings) < 2 or any(
        _same_runs(base, quantized) for base in settings["baseline"] for quantized in settings["quantized"]
    ):
        return None
    base_runs, quantized_runs = (
        sorted((dict(runs) for runs in settings[scenario][0]), key=repr) for scenario in ("baseline", "quantized")
    )
    base, quantized = _unalike_pair(base_runs, quantized_runs)
    differ = _differ(base, quantized)
    shown = {
        "use_cache": lambda value: f"use_cache={value}",
        "num_beams": lambda value: f"{value} beam{'s' if value != 1 else ''}",
        "max_new_tokens": lambda value: f"max_new_tokens={value}",
        "prompts": lambda value: f"{len(value)} prompt{'s' if len(value) != 1 else ''}",
        "warmed_up": lambda value: "warmed up" if value else "timed cold",
        "assisted": lambda value: "assisted decoding" if value else "greedy decoding",
        "more_passes": lambda value: "more than one forward pass per token" if value else "one forward pass per token",
        "added_work": lambda value: "with work added to its steps" if value else "plain",
        "padded_wide": lambda value: "padded far past its prompts" if value else "padded to its longest prompt",
        "threads": lambda value: f"on {value} torch threads",
        "autocast": lambda value: f"under autocast ({value})" if value else "without autocast",
    }
    found = "; ".join(
        f"the baseline {shown[name](base[name])}, the quantized model {shown[name](quantized[name])}" for name in differ
    )
    return Verdict.failed(
        f"In the table {call} returned, the baseline and the quantized rows time generates run with "
        f"{', '.join(ALIKE_NAMES[name] for name in differ)} ({found}): compare the scenarios with the same prompts and "
        "settings, only the model changing.",
        expected="the baseline and the quantized model measured on the same prompts with the same settings",
        found=found,
    )


PPX_KINDS = ("ppx_loss", "ppx_quantized")


def ppx_miscomputes(context: CheckContext) -> bool:
    """Whether compare_ppplx itself is charged on the grader's own calls (its baseline's loss, or its INT8 model's
    against that model's session runs): not charged again where the controller reports what it returned."""
    params = next((validated_params(PpxParams, check) for check in context.rubric.checks if check.kind in PPX_KINDS), None)
    if params is None:
        return False
    try:
        return any(
            _baseline_loss(context, params, comparison).outcome != "passed"
            or _quantized_runs(context, params, comparison) is not None
            for comparison in comparisons(context, params)
        )
    except (StopCheck, NotRecorded):
        return False


def _losses_unlike_runs(context: CheckContext, params: ControllerParams, outcome: CallOutcome) -> list[str]:
    """Where the run's perplexity function reported a quantized model's loss other than the ONNX Runtime session runs
    it made meanwhile give (the runs of one session covering every token of its texts): the quantized model's
    perplexity, as on the grader's own calls, is what its logits give."""
    if ppx_miscomputes(context):
        return []
    problems = []
    tokenizer = context.models.tokenizer(params.model)
    for event in outcome.returned_events(params.ppx_function):
        value = decode(event["value"]) if isinstance(event["value"], dict) else None
        texts = argument(event, "texts", 2)
        if not isinstance(value, dict) or not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            continue
        reported = [
            float(item["loss"])
            for key, item in value.items()
            if "quantized" in ppx_scenarios(event, key) and isinstance(item, dict) and is_number(item.get("loss"))
        ]
        sessions: dict[int, list[OnnxRunEvent]] = {}
        for run in outcome.onnx_run_events():
            if float(event["start"]) <= float(run["start"]) and float(run["end"]) <= float(event["time"]):
                sessions.setdefault(int(run["session_serial"]), []).append(run)
        with quiet_libraries():
            tokens = sum(context.expected(text_token_lengths, tokenizer, texts))
        implied = [loss for runs in sessions.values() for loss in session_losses(runs, tokens) or []]
        for loss in reported:
            if implied and not any(agrees(loss, given, 1e-4, coarsest=0.005) for given in implied):
                problems.append(
                    f"its {params.ppx_function} reported the quantized model's loss as {number(loss)}, but the ONNX "
                    f"Runtime session runs it made meanwhile give {number(implied[0])} on those texts: report the loss "
                    "the quantized model's logits give"
                )
                return problems
    return problems


def judge_run(context: CheckContext, params: ControllerParams) -> Verdict | None:
    """None if the run measured what it was asked to: the baseline and a quantized (ONNX Runtime) model, the ablation,
    batching with the batch sizes it was given and the edge prompts, each with the max_new_tokens it was given."""
    sizes, max_new_tokens, call, outcome = _controller_call(context, params)
    problems = []
    for function, position in MAX_NEW_TOKENS_AT.items():
        if function not in params.measure_functions:
            continue
        given = [argument(event, "max_new_tokens", position) for event in outcome.returned_events(function)]
        given = [value for value in given if value is not None]  # a call whose arguments were not recorded says nothing
        if any(value != max_new_tokens for value in given):  # every measurement, the quantized model's as the baseline's
            problems.append(
                f"it called {function} with max_new_tokens="
                f"{', '.join(sorted({str(value) for value in given if value != max_new_tokens}))}, not the "
                f"max_new_tokens={max_new_tokens} it was given"
            )
    generations = [event for event in outcome.generate_events() if tokens_limit(event) == max_new_tokens]
    onnx = [event for event in outcome.generate_events() if "onnxruntime" in str(event["model_type"])]
    quantized = [
        event for event in outcome.returned_events(params.measure_function) if is_onnx_argument(argument(event, "model", 0))
    ]
    if not onnx and not quantized:
        problems.append(
            "no ONNX Runtime model generated during the run: measure the model run_static_ptq_optimum returns for the "
            "quantized scenario"
        )
    elif not generations:
        problems.append(f"no generate call of the run had max_new_tokens={max_new_tokens}")
    quantized_ids = {argument(event, "model_id", 0) for event in outcome.returned_events(params.ptq_function)}
    others = sorted(str(value) for value in quantized_ids if isinstance(value, str) and value != params.model)
    if others:  # the INT8 row compares the quantized model with the baseline: both must be the model it was given
        problems.append(
            f"it called {params.ptq_function} with {', '.join(map(repr, others))}, not the model id {params.model!r} it "
            "was given: the quantized model must be the baseline's model, quantized"
        )
    problems += _not_the_quantized_model(params, outcome)
    ablations = outcome.returned_events(params.ablation_function)
    if ablations:  # what ran after the ablation returned is not the ablation's: its right padding is not asked for
        began, after = float(ablations[0]["start"]), float(ablations[-1]["time"])
        sides = [(float(event["start"]), event["padding_side"]) for event in outcome.generate_events()]
        right = [start for start, side in sides if start > after and side == "right"]
        # Right-padded before the ablation too: the loader's padding (charged in its own check), not the ablation's.
        if right and not any(start < began and side == "right" for start, side in sides):
            problems.append(
                f"after {params.ablation_function} returned, {len(right)} generate call(s) of the run ran right-padded "
                "batches (a decoder generates after its padding): restore the tokenizer's padding side once the ablation "
                "is done, as the starter asks"
            )
    stopped = [event for event in generations if event["cut_short"]]
    if stopped:
        made = max(stopped[0]["new_tokens"] or [0])
        problems.append(
            f"{len(stopped)} of its generate calls with max_new_tokens={max_new_tokens} stopped short of it (the first, on "
            f"{'the ONNX model' if 'onnxruntime' in str(stopped[0]['model_type']) else 'the PyTorch model'}, after {made} "
            "new tokens) at an end the model did not choose: an end-of-text id the call added, a stopping criterion or "
            "max_time"
        )
    handed = [handed_models(event) for event in outcome.returned_events(params.ppx_function)]
    if (
        handed
        and all(models is not None for models in handed)
        and not any(is_onnx_argument(model) for models in handed for model in (models or {}).values())
    ):
        problems.append(
            f"it never handed {params.ppx_function} the quantized (ONNX Runtime) model: the quantized model's "
            "perplexity must come from the quantized model"
        )
    for models in handed:
        for key, model in (models or {}).items():
            read = read_scenario(key)
            if (read.quantized and is_torch_argument(model)) or (read.baseline and is_onnx_argument(model)):
                problems.append(
                    f"it handed {params.ppx_function} the {'PyTorch' if read.quantized else 'ONNX Runtime'} model under "
                    f"the label {key!r}: the quantized model's perplexity must come from the quantized model"
                )
                break
    scored: dict[str, set[str]] = {"baseline": set(), "quantized": set()}  # the texts each scenario's ppx was scored on
    for event in outcome.returned_events(params.ppx_function):
        value = decode(event["value"]) if isinstance(event["value"], dict) else None
        texts = json.dumps(argument(event, "texts", 2), sort_keys=True, default=str)
        for key in value if isinstance(value, dict) else ():
            for scenario in set(ppx_scenarios(event, key)) & {"baseline", "quantized"}:
                scored[scenario].add(texts)
    if scored["baseline"] and scored["quantized"] and not scored["baseline"] & scored["quantized"]:
        problems.append(
            f"its baseline's and its quantized model's perplexities come from {params.ppx_function} calls on other texts: "
            "a quality drift compares the two models on the same corpus"
        )
    if not outcome.returned_events(params.ppx_function):
        problems.append(
            f"{params.ppx_function} never returned during the run: the baseline's and the quantized model's rows need "
            "the perplexities it computes"
        )
    problems += _losses_unlike_runs(context, params, outcome)
    batched = [argument(event, "batch_sizes", 3) for event in outcome.returned_events(params.batched_function)]
    asked = [list(value) for value in batched if isinstance(value, (list, tuple))]
    # Every size it was given, in its order; a single-sample size beside them is the comparison the seed asks for.
    if asked and not any([size for size in value if size not in (1,) or size in sizes] == sizes for value in asked):
        problems.append(
            f"it called {params.batched_function} with batch sizes {', '.join(map(str, asked))}, not the batch sizes "
            f"{sizes} it was given"
        )
    if not problems:
        return None
    return Verdict.failed(
        f"{call} does not measure what it is asked to: {'; '.join(problems)}.",
        expected=f"every measurement with max_new_tokens={max_new_tokens}, batching with {sizes}, a quantized model",
        found="; ".join(problems),
    )


def _controller(context: CheckContext, params: ControllerParams) -> tuple[list[int], Frame, Any]:
    sizes, _, call, outcome = _controller_call(context, params)
    table, takeaways = context.returned(outcome, call, items(FRAME, ANY, names="(results table DataFrame, takeaways list)"))
    return sizes, table, takeaways


def _built_table(context: CheckContext, params: ControllerParams) -> tuple[list[int], Any]:
    """What the table builder last returned during the controller's run (stop if it was never called)."""
    sizes, _, call, outcome = _controller_call(context, params)
    built = outcome.returned_events(params.table_function)
    if not built:
        context.returned(outcome, call)  # the controller's own failure, if any, says more
        raise StopCheck(
            Verdict.failed(
                f"{call} never called {params.table_function}, so the table it builds could not be judged: "
                f"build the results table with {params.table_function}(results).",
                expected=f"{params.table_function} called by {params.function}",
                found="not called",
            )
        )
    return sizes, decode(built[-1]["value"])


def judge_table(table: Any, sizes: list[int], who: str) -> Verdict | None:
    """None if ``table`` holds every column and scenario (labels read by meaning); else the failed verdict."""
    wrong = shape_verdict(table, FRAME, who)
    if wrong is not None or not isinstance(table, Frame):
        return wrong
    missing = [column for column in TABLE_COLUMNS if column not in table.columns]
    if missing:
        return Verdict.failed(
            f"The results table of {who} has no column {', '.join(missing)} (it has {', '.join(map(str, table.columns))}): "
            "one table with a scenario column and the metrics in their units.",
            expected=", ".join(TABLE_COLUMNS),
            found=", ".join(map(str, table.columns)),
        )
    labels = [row.get("scenario") for row in measured_rows(table)]
    absent = missing_scenarios(labels, sizes, SETTINGS)
    if absent:
        return Verdict.failed(
            f"Run with batch sizes {sizes}, the results table of {who} has no row for {', '.join(absent)} "
            f"(its scenarios: {', '.join(map(str, labels))}).",
            expected="rows for baseline, quantized, every cache/padding setting and every batch size",
            found=", ".join(map(str, labels)),
        )
    return None


def judge_takeaways(takeaways: Any, count: list[int], question: str) -> Verdict:
    """3 to 5 takeaway sentences pass; text that copies or rewords the question, repeats itself or is filler goes
    to the instructor, flagged, instead of passing silently."""
    low, high = count
    listed = takeaways if isinstance(takeaways, list) else []
    real = [item for item in listed if isinstance(item, str) and len(item.split()) >= 3]
    if not isinstance(takeaways, list) or len(real) != len(listed) or not low <= len(listed) <= high:
        return Verdict.failed(
            f"The controller returned {kind_of(takeaways)} as its takeaways ({len(real)} of a few words or more): "
            f"return {low} to {high} takeaway sentences.",
            expected=f"a list of {low} to {high} sentences",
            found=kind_of(takeaways),
        )
    flags = screen_answer("\n".join(real), question)
    if len({" ".join(item.casefold().split()) for item in real}) < len(real) and "repeats itself" not in flags:
        flags = (*flags, "repeats a takeaway")
    if flags:
        return Verdict.manual(
            f"The controller returns {len(real)} takeaways; they go to your instructor, flagged ({'; '.join(flags)}).",
            answer="\n".join(f"- {item}" for item in real),
            flags=flags,
        )
    return Verdict.passed(f"The controller returns {len(real)} takeaways.")


@check_kind("controller_builder", ControllerParams)
def controller_builder(context: CheckContext, params: ControllerParams) -> Verdict:
    """The table build_results_table returns during the run holds every scenario, each row what its scenario's
    measurement gave (as it was handed), in its units, with the baseline's and the quantized model's perplexities."""
    sizes, built = _built_table(context, params)
    verdict = judge_table(built, sizes, params.table_function)
    if verdict is not None:
        return verdict
    outcome = _controller_call(context, params)[3]
    judgement = judge_rows(built, run_record(outcome, params), params)
    if judgement.builder:
        return Verdict.failed(
            f"The table {params.table_function} builds during the run: {'; '.join(judgement.builder[:3])}.",
            expected="each row its scenario's measurement, ms_per_token = 1000 / tokens_per_s, ppx for both models",
            found="; ".join(judgement.builder[:3]),
        )
    return Verdict.passed(
        f"{params.table_function} builds a table with every scenario and {', '.join(TABLE_COLUMNS)}, each row its "
        "scenario's measurement, in its units."
    )


@check_kind("controller_table", ControllerParams)
def controller_table(context: CheckContext, params: ControllerParams) -> Verdict:
    """The controller measures what it is asked to (a quantized model, the batch sizes and max_new_tokens it is given),
    and its results table holds every scenario, each row its own scenario's measurement from the run."""
    sizes, table, _ = _controller(context, params)
    _, _, _, outcome = _controller_call(context, params)
    wrong = judge_run(context, params)
    if wrong is not None:
        return wrong
    verdict = judge_table(table, sizes, params.function)
    built = outcome.returned_events(params.table_function)
    returned = (outcome.raw.get("value") or {}).get("items") or [None]
    # Compared as described by the kernel (a NaN ppx makes decoded frames unequal to themselves).
    own_table = bool(built) and json.dumps(built[-1]["value"], sort_keys=True) == json.dumps(returned[0], sort_keys=True)
    if verdict is not None:
        if own_table:
            return Verdict.passed(
                f"{params.function} returns the table {params.table_function} built; what that table lacks is charged "
                f"in {params.table_function}'s own check."
            )
        return verdict
    judgement = judge_rows(table, run_record(outcome, params), params)
    if judgement.controller:
        return Verdict.failed(
            f"In the table {params.function} returns, {'; '.join(judgement.controller[:3])}: hand the table each "
            "scenario's own results.",
            expected="each row its own scenario's measurement from the run",
            found="; ".join(judgement.controller[:3]),
        )
    if judgement.builder and not own_table:
        return Verdict.failed(
            f"The table {params.function} returns: {'; '.join(judgement.builder[:3])}.",
            expected="each row its scenario's measurement, in its units",
            found="; ".join(judgement.builder[:3]),
        )
    unmeasured = judge_table_sources(context, params, table) or judge_alike(context, params, table)
    if unmeasured is not None:
        return unmeasured
    return Verdict.passed(
        f"The run measures what it is asked to, and its results table holds every scenario ({table.length} rows), each "
        "row its own scenario's measurement."
    )


@check_kind("controller_takeaways", ControllerParams)
def controller_takeaways(context: CheckContext, params: ControllerParams) -> Verdict:
    """The controller runs end to end in time and returns 3 to 5 takeaways drawn from a run that generated text."""
    _, table, takeaways = _controller(context, params)
    verdict = judge_takeaways(takeaways, params.takeaways, params.takeaways_question)
    if isinstance(takeaways, list) and verdict.outcome != "failed":
        # The numbers the takeaways state, held against the results table the same run returned (evidence, no score).
        claims = claim_records(" ".join(str(item) for item in takeaways), table_facts(table))
        if claims:
            verdict = replace(verdict, data={**verdict.data, "claims": claims})
    if verdict.outcome != "failed" and not _controller_call(context, params)[3].generate_events():
        return Verdict.failed(
            "The controller made no generate call, so its takeaways rest on no measurement: run the experiment "
            "(baseline, quantized, ablation, batching, edge prompts) and draw the takeaways from its results.",
            expected="takeaways from a run that generated text",
            found="no generate call during the run",
        )
    return verdict
