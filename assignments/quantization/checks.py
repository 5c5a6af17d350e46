"""Check kinds of the ``quantization`` assignment: Optimum PTQ, cache/padding ablation, batching (seeds 001, 002).

Every timing is judged from the instrumentation of the student's own calls, paced as in the
``latency`` assignment (see :mod:`grader.checks.timing`). The quantized model is judged by the
ONNX graph its session really runs (read with the ``onnx`` package in the grader's process) and
by generating text with it; the ablation and batching by the settings and shapes that reach each
generate call; perplexity by the shared code of the ``perplexity`` assignment, on hidden corpora,
with an INT8 ONNX model the grader quantizes itself so that a PTQ mistake is charged only once.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
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
    shape_verdict,
)
from grader.checks.common import claim_records, screen_answer, table_facts
from grader.checks.labels import Scenario, missing_scenarios, read_scenario
from grader.checks.loss import CorpusParams, draw_corpus, judge_loss, reference_variants, text_token_lengths
from grader.checks.shapes import ANY, FRAME, items, keyed_by, keys
from grader.checks.timing import (
    LatencyTolerance,
    again_while,
    call_timed,
    judge_generate_inputs,
    judge_latency,
    judge_new_tokens,
    judge_rates,
    judge_timed_call,
    max_matching,
    new_tokens_range,
    retry_while_too_long,
    span,
    tokens_limit,
    too_long,
)
from grader.grading.replay import NotRecorded
from grader.grading.rubric import validated_params
from grader.kernel.harness import CallOutcome, literal, mapping, model, model_spec, onnx_model
from grader.kernel.protocol import GenerateEvent
from grader.kernel.values import Frame, OnnxModel, decode, is_number, kind_of
from grader.quiet import quiet_libraries

QUANTIZED_FILE = "model_quantized.onnx"  # the file ORTQuantizer writes
METRICS = ("latency_s", "new_tokens", "tokens_per_s", "ms_per_token")
SETTING_METRICS = ("latency_s", "tokens_per_s", "ms_per_token")


class PromptsParams(LatencyTolerance):
    """Hidden prompts of different lengths (so that a batch is padded) and max_new_tokens."""

    model: str = Field("gpt2", description="Hub ID of the model.")
    prompts: list[str] = Field(min_length=3, description="Hidden prompts; some are drawn, the shortest and the longest always.")
    draws: int = Field(3, ge=2, description="How many prompts are passed.")
    tokens: list[int] = Field([12, 24], min_length=2, max_length=2, description="Range [low, high] of max_new_tokens.")
    rate_tolerance: float = Field(0.02, gt=0, description="Relative tolerance of derived rates (tokens_per_s, ms_per_token).")


def draw_prompts(context: CheckContext, params: PromptsParams, name: str) -> tuple[list[str], int]:
    """Prompts and max_new_tokens for a call: the shortest and longest hidden prompts and a few others."""
    rng = context.rng_for(name)
    ordered = sorted(params.prompts, key=len)
    middle = rng.sample(ordered[1:-1], min(max(params.draws - 2, 0), len(ordered) - 2))
    prompts = [ordered[-1], *middle, ordered[0]]
    rng.shuffle(prompts)
    return prompts, rng.randint(*params.tokens)


def timed_calls(outcome: CallOutcome) -> list[GenerateEvent]:
    """The last generate call of each run of calls on the same inputs (a warm-up, then the timed call)."""
    timed: list[GenerateEvent] = []
    previous: tuple[Any, ...] | None = None
    for event in outcome.generate_events():
        key = (tuple(event["input_shape"] or ()), tuple(event["input_ids"] or ()), event["padding_side"])
        if key == previous and timed:
            timed[-1] = event
        else:
            timed.append(event)
        previous = key
    return timed


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


# --------------------------------------------------------------------------------------
# measure_generation
# --------------------------------------------------------------------------------------


class MeasureParams(PromptsParams, TargetParams):
    """Hidden calls of measure_generation on a batch of prompts, paced so that a timer around other work shows."""

    use_cache: bool = Field(False, description="use_cache passed (the default is True).")


def _measured(context: CheckContext, params: MeasureParams) -> tuple[list[str], int, CallOutcome, dict[str, Any]]:
    prompts, max_new_tokens = draw_prompts(context, params, "measure")
    key = f"quantization-measure:{params.function}:{params.model}:{prompts}:{max_new_tokens}:{params.use_cache}"

    def attempt() -> tuple[CallOutcome, Any]:
        return call_timed(
            context,
            params.function,
            params.model,
            prompts,  # type: ignore[arg-type]  # a list of prompts, passed as a JSON literal
            max_new_tokens,
            literal(params.use_cache),
            dtype="float32",
            pace_s=params.pace_s,
        )

    outcome, value = context.once(
        key,
        lambda: retry_while_too_long(params, attempt, lambda value: value.get("latency_s") if isinstance(value, dict) else None),
    )
    call = f"{params.function}(model, tokenizer, <{len(prompts)} prompts>, max_new_tokens={max_new_tokens}, use_cache={params.use_cache})"
    _metrics_dict(value, call, METRICS)
    if not outcome.generate_events():
        raise StopCheck(Verdict.failed(f"{params.function} never called model.generate.", found="no generate call"))
    wrong_inputs = judge_generate_inputs(
        context.models.tokenizer(params.model), outcome.generate_events()[-1], prompts, max_new_tokens, params.function
    )
    if wrong_inputs is not None:
        raise StopCheck(replace(wrong_inputs, data={**wrong_inputs.data, "ignores_inputs": True}))
    return prompts, max_new_tokens, outcome, value


@check_kind("batch_measure_tokens", MeasureParams)
def batch_measure_tokens(context: CheckContext, params: MeasureParams) -> Verdict:
    """measure_generation on a batch counts the new tokens of every sequence and derives its rates from them."""
    _, max_new_tokens, outcome, value = _measured(context, params)
    latency = float(value["latency_s"])
    timed = outcome.generate_events()[-1]
    verdict = judge_new_tokens(value["new_tokens"], timed, max_new_tokens) or judge_rates(
        params.rate_tolerance, latency, float(value["new_tokens"]), value["tokens_per_s"], value["ms_per_token"]
    )
    if verdict is not None:
        return verdict
    return Verdict.passed(f"{params.function} counts the new tokens of every sequence and derives its rates from them.")


# --------------------------------------------------------------------------------------
# run_static_ptq_optimum
# --------------------------------------------------------------------------------------


class PtqParams(TargetParams):
    """How the PTQ function is called and judged."""

    model: str = Field("gpt2", description="Hub ID passed.")
    prompt: str = Field("The capital of France is", description="Prompt the quantized model must continue.")
    max_new_tokens: int = Field(8, ge=1, description="Tokens generated from the quantized model.")


def _ptq(context: CheckContext, params: PtqParams) -> tuple[OnnxModel, str]:
    harness = context.require_harness()
    key = f"ptq:{params.function}:{params.model}"

    def quantize() -> CallOutcome:
        save_dir = harness.session.workdir / f"grader-ptq-{secrets.token_hex(4)}"  # removed with the working folder
        return harness.call(
            params.function,
            [literal(params.model), literal(str(save_dir))],
            timeout_s=context.timeout_s,
            keep_as="quantization:ptq",
        )

    outcome = context.once(key, quantize)
    call = f"{params.function}({params.model!r}, save_dir)"
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
    return quantized, info if isinstance(info, str) else ""


def _count(value: Any) -> int:
    """A count the kernel reported (anything else is none)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def judge_graph(graph: dict[str, Any], what: str) -> Verdict:
    """A quantized model's live graph, as the kernel summarised it: integer products carry its weights to the outputs."""
    if graph.get("problem"):
        return Verdict.failed(
            f"{what.capitalize()} is not an ONNX Runtime model running a session: {str(graph['problem'])[:300]}.",
            expected="an Optimum ORTModel whose onnxruntime.InferenceSession runs a quantized graph",
            found=str(graph["problem"])[:300],
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
            "quantized (integer operators that feed nothing do not count). Quantize it with "
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


@check_kind("ptq_quantized", PtqParams)
def ptq_quantized(context: CheckContext, params: PtqParams) -> Verdict:
    """The PTQ model's live ONNX graph is really quantized to integers."""
    _ptq(context, params)
    # Read in the kernel from the live session (never from a path the kernel names: the grader opens none).
    outcome = context.require_harness().onnx_graph("quantization:ptq", item=0, timeout_s=context.timeout_s)
    graph = outcome.raw.get("graph") if outcome.ok else None
    if not isinstance(graph, dict):
        return Verdict.error(
            f"The grader could not read the quantized model's graph: {outcome.message or outcome.exception or 'no answer'}."
        )
    return judge_graph(graph, "the quantized model")


@check_kind("ptq_generates", PtqParams)
def ptq_generates(context: CheckContext, params: PtqParams) -> Verdict:
    """The PTQ model generates text by running its ONNX session, and its info names backend and precision."""
    _, info = _ptq(context, params)
    generated = context.require_harness().generate(
        "quantization:ptq", params.model, params.prompt, params.max_new_tokens, timeout_s=context.timeout_s, item=0
    )
    if not generated.ok:
        return Verdict.failed(
            f"The quantized model could not generate text for {params.prompt!r}: {generated.exception or generated.message}.",
            expected="generated text",
            found=str(generated.exception or generated.message),
        )
    text = generated.value if isinstance(generated.value, str) else ""
    if not text.strip():
        return Verdict.failed(
            f"The quantized model generated no text for {params.prompt!r}.", expected="generated text", found=repr(text)
        )
    if not generated.onnx_run_events():
        return Verdict.failed(
            f"The quantized model continued {params.prompt!r} without running any ONNX Runtime session: its forward must "
            "compute with the quantized graph, not with another model.",
            expected="generation through the model's ONNX Runtime session",
            found="no session run",
        )
    missing = [
        what
        for what, pattern in (
            ("the backend (ONNX Runtime / Optimum)", r"onnx|\bort\b|optimum"),
            ("the precision (int8)", r"int8|8[- ]?bit"),
        )
        if not re.search(pattern, info, re.IGNORECASE)
    ]
    if missing:
        return Verdict.failed(
            f"The quantized model generates text, but its info string {info!r} does not name {' or '.join(missing)}.",
            expected="an info string such as 'onnxruntime int8 (dynamic PTQ)'",
            found=repr(info),
        )
    return Verdict.passed(f"The quantized model continues {params.prompt!r} with {text.strip()[:40]!r}; info: {info!r}.")


# --------------------------------------------------------------------------------------
# ablate_cache_and_padding
# --------------------------------------------------------------------------------------

SETTINGS = tuple((use_cache, side) for use_cache in (True, False) for side in ("left", "right"))


def setting_key(use_cache: bool, side: str) -> str:
    """The key of one ablation setting, as the starter spells it."""
    return f"use_cache={use_cache},padding={side}"


class AblationParams(PromptsParams, TargetParams):
    """A hidden ablation call."""

    measure_function: str = Field(
        "measure_generation", description="The student's measuring function, watched (what it generates is its own check's)."
    )


def _setting_events(outcome: CallOutcome, use_cache: bool, side: str, max_new_tokens: int) -> list[GenerateEvent]:
    return [
        event
        for event in outcome.generate_events()
        if event["use_cache"] is use_cache and event["padding_side"] == side and tokens_limit(event) == max_new_tokens
    ]


def _ablation_too_long(params: AblationParams, outcome: CallOutcome, value: Any, max_new_tokens: int) -> bool:
    if not isinstance(value, dict):
        return False
    for use_cache, side in SETTINGS:
        events = _setting_events(outcome, use_cache, side, max_new_tokens)
        metrics = value.get(setting_key(use_cache, side))
        latency = metrics.get("latency_s") if isinstance(metrics, dict) else None
        longest = max((float(event["duration_s"]) for event in events), default=math.inf)
        if is_number(latency) and float(latency or 0) > longest * (1 + params.upper_rel) + params.upper_abs_s:
            return True
    return False


def _timed_sweep(
    context: CheckContext,
    params: AblationParams | BatchParams,
    arguments: tuple[Any, ...],
    too_long: Callable[[CallOutcome], bool],
) -> CallOutcome:
    """``params.function(model, tokenizer, *arguments)``, paced and watching the student's measuring function; made
    again (see :func:`again_while`) while it returns and ``too_long`` says a latency it reports reads too long."""
    return again_while(
        params.attempts,
        lambda: context.call_with_model(
            params.function,
            params.model,
            *arguments,
            pace_s=params.pace_s,
            watch=(params.measure_function,),
        ),
        lambda outcome: outcome.ok and too_long(outcome),
    )


def _ablation(context: CheckContext, params: AblationParams) -> tuple[list[str], int, CallOutcome, dict[str, Any]]:
    prompts, max_new_tokens = draw_prompts(context, params, "ablation")
    key = f"ablation:{params.function}:{params.model}:{prompts}:{max_new_tokens}"
    outcome = context.once(
        key,
        lambda: _timed_sweep(
            context,
            params,
            (literal(prompts), literal(max_new_tokens)),
            lambda outcome: _ablation_too_long(params, outcome, outcome.value, max_new_tokens),
        ),
    )
    call = f"{params.function}(model, tokenizer, <{len(prompts)} prompts>, max_new_tokens={max_new_tokens})"
    value = context.returned(outcome, call, keyed_by("setting"))
    return prompts, max_new_tokens, outcome, value


# The kinds of measure_generation's own checks (batch_measure_latency is hidden_checks.py's): their hidden call is
# the one the checks of functions built on measure_generation ask about.
MEASURE_KINDS = ("batch_measure_latency", "batch_measure_tokens")


def _measure_mistimes(context: CheckContext) -> bool:
    """Whether the student's measure_generation itself reports a latency its generate call disagrees with.

    Its rubric check's hidden call is reused (memoised), so an ablation built on it is not charged twice.
    """
    for check in context.rubric.checks:
        if check.kind == MEASURE_KINDS[0]:
            params = validated_params(MeasureParams, check)
            try:
                _, max_new_tokens, outcome, value = _measured(context, params)
            except StopCheck:
                return False
            return judge_timed_call(params, float(value["latency_s"]), outcome, max_new_tokens) is not None
    return False


def measure_ignores_inputs(context: CheckContext, outcome: CallOutcome, measure_function: str = "measure_generation") -> bool:
    """Whether a call that went through the student's measure_generation fails because that function itself
    does not generate the prompts or max_new_tokens it is given (charged in its own checks, not again)."""
    if not outcome.returned_events(measure_function):
        return False  # the call never used measure_generation: its own generate calls are its own
    for check in context.rubric.checks:
        if check.kind in MEASURE_KINDS:
            try:
                _measured(context, validated_params(MeasureParams, check))
            except StopCheck as stop:
                return bool(stop.verdict.data.get("ignores_inputs"))
            return False
    return False


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
        pairs = event["arguments"]
        pairs = [pair for pair in pairs if isinstance(pair, list) and len(pair) == 2] if isinstance(pairs, list) else []
        values = [
            decode(description) if isinstance(description, dict) and description.get("kind") != "object" else description
            for _, description in pairs
        ]
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
            )
        )
    return calls


@check_kind("ablation_keys", AblationParams)
def ablation_keys(context: CheckContext, params: AblationParams) -> Verdict:
    """The ablation reports the four settings keyed as the starter says, each with the metrics of its own generate call."""
    _, max_new_tokens, outcome, value = _ablation(context, params)
    wanted = [setting_key(use_cache, side) for use_cache, side in SETTINGS]
    if sorted(map(str, value)) != sorted(wanted):
        return Verdict.failed(
            f"The ablation returned the keys {sorted(map(str, value))}: key the four settings exactly as "
            f"{', '.join(repr(k) for k in wanted)}.",
            expected=", ".join(wanted),
            found=", ".join(sorted(map(str, value))),
        )
    forgiven = False
    for use_cache, side in SETTINGS:
        name = setting_key(use_cache, side)
        metrics = _metrics_dict(value[name], f"the ablation's {name!r}", SETTING_METRICS)
        events = _setting_events(outcome, use_cache, side, max_new_tokens)
        if not events:
            continue  # the setting never reached generate: charged by the settings check
        # Any call of this setting will do: a setting that is not really applied is charged by the settings check.
        verdicts = [judge_latency(params, float(metrics["latency_s"]), [event], max_new_tokens) for event in events]
        verdict = None if None in verdicts else verdicts[-1]
        if verdict is not None and _measure_mistimes(context):
            forgiven = True
        elif verdict is not None:
            return Verdict.failed(
                f"Under {name!r}: {verdict.message} Measure each setting with its own generate call and report that call's metrics.",
                expected=verdict.expected,
                found=verdict.found,
            )
    if forgiven:
        return Verdict.passed(
            "The ablation reports all four settings; their latencies disagree with their generate calls as "
            "measure_generation's own do, which is charged in its own check."
        )
    return Verdict.passed("The ablation reports all four settings, each with the metrics of its own generate call.")


# --------------------------------------------------------------------------------------
# measure_batched
# --------------------------------------------------------------------------------------

BATCH_COLUMNS = ("batch_size", "latency_s", "tokens_per_s", "latency_per_sample_s")


class BatchParams(PromptsParams, TargetParams):
    """A hidden batching call."""

    measure_function: str = Field(
        "measure_generation", description="The student's measuring function, watched (a latency it returns is its own check's)."
    )
    batch_sizes: list[list[int]] = Field(
        [[1, 2], [3, 5]], min_length=2, description="Ranges the increasing batch sizes are drawn from."
    )


def _returned_latencies(outcome: CallOutcome, function: str) -> set[float]:
    """The latency_s of every dict a watched function returned during the call."""
    return {
        float(item["latency_s"])
        for returned in outcome.returned_events(function)
        if isinstance(item := decode(returned["value"]), dict) and is_number(item.get("latency_s"))
    }


def _batched(context: CheckContext, params: BatchParams) -> tuple[list[str], list[int], int, CallOutcome, Frame]:
    prompts, max_new_tokens = draw_prompts(context, params, "batching")
    rng = context.rng_for("batching-sizes")
    sizes = [rng.randint(low, high) for low, high in params.batch_sizes]
    key = f"batched:{params.function}:{params.model}:{prompts}:{sizes}:{max_new_tokens}"
    outcome = context.once(
        key,
        lambda: _timed_sweep(
            context,
            params,
            (literal(prompts), literal(sizes), literal(max_new_tokens)),
            lambda outcome: _batched_too_long(params, outcome, max_new_tokens),
        ),
    )
    call = f"{params.function}(model, tokenizer, <{len(prompts)} prompts>, {sizes}, max_new_tokens={max_new_tokens})"
    frame = context.returned(outcome, call, FRAME)
    return prompts, sizes, max_new_tokens, outcome, frame


def _batched_too_long(params: BatchParams, outcome: CallOutcome, max_new_tokens: int) -> bool:
    """Whether a row's latency reads longer than its batch's timed generate allows (worth another call)."""
    frame = outcome.value
    if not isinstance(frame, Frame) or "batch_size" not in frame.columns or "latency_s" not in frame.columns:
        return False
    by_size = _by_size(_timed_batches(outcome, max_new_tokens))
    for row in frame.records():
        size = row["batch_size"]
        events = by_size.get(int(size), []) if is_number(size) else []
        if events and is_number(row["latency_s"]) and all(too_long(params, row["latency_s"], [event]) for event in events):
            return True
    return False


def _timed_batches(outcome: CallOutcome, max_new_tokens: int) -> list[GenerateEvent]:
    """The timed generate calls of a batching call: those with its max_new_tokens."""
    return [event for event in timed_calls(outcome) if tokens_limit(event) == max_new_tokens]


def _batch_size(event: GenerateEvent) -> int:
    """How many rows a generate call ran."""
    return int((event["input_shape"] or [0])[0])


def _by_size(timed: list[GenerateEvent]) -> dict[int, list[GenerateEvent]]:
    """The timed generate calls of each batch size, in order. One per size where the batches are built as asked;
    several where they are not (a measure_generation that ignores its prompts runs one row whatever the size),
    and a row is then judged against any of them: which call it reports is not for the grader to guess."""
    by_size: dict[int, list[GenerateEvent]] = {}
    for event in timed:
        by_size.setdefault(_batch_size(event), []).append(event)
    return by_size


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


@dataclass(frozen=True)
class Batching:
    """The hidden measure_batched call: its inputs, its frame, and the batches its timed generate calls received."""

    prompts: list[str]
    sizes: list[int]
    max_new_tokens: int
    outcome: CallOutcome
    frame: Frame
    timed: list[GenerateEvent]
    shapes: list[int]
    claimed: list[Any]  # the rows' own batch sizes: rows for other sizes than asked are the rows check's

    def ignores_inputs(self, context: CheckContext, params: BatchParams) -> bool:
        """Whether the batches the rows report were not generated because measure_generation ignores its inputs
        (charged in its own checks): then they are judged by what measure_batched gave measure_generation."""
        return self.shapes != self.claimed and measure_ignores_inputs(context, self.outcome, params.measure_function)


def batching_run(context: CheckContext, params: BatchParams) -> Batching:
    """The hidden measure_batched call with its batch_size, latency_s and tokens_per_s columns, or stop."""
    prompts, sizes, max_new_tokens, outcome, frame = _batched(context, params)
    _require_columns(frame, BATCH_COLUMNS[:3])
    timed = _timed_batches(outcome, max_new_tokens)
    claimed = [int(v) if is_number(v) else v for v in frame.column("batch_size")]
    return Batching(prompts, sizes, max_new_tokens, outcome, frame, timed, [_batch_size(event) for event in timed], claimed)


@check_kind("batching_rows", BatchParams)
def batching_rows(context: CheckContext, params: BatchParams) -> Verdict:
    """measure_batched returns one row per batch size, in order, with every column."""
    _, sizes, _, _, frame = _batched(context, params)
    _require_columns(frame, BATCH_COLUMNS)
    reported = frame.column("batch_size")
    if frame.length != len(sizes) or [int(v) if is_number(v) else v for v in reported] != sizes:
        return Verdict.failed(
            f"Called with batch sizes {sizes}, the DataFrame's batch_size column reads {reported}: one row per batch size, in order.",
            expected=str(sizes),
            found=str(reported),
        )
    return Verdict.passed(f"One row per batch size {sizes}, with {', '.join(BATCH_COLUMNS)}.")


@check_kind("batching_throughput", BatchParams)
def batching_throughput(context: CheckContext, params: BatchParams) -> Verdict:
    """Each row's latency is its batch's timed generate; tokens_per_s counts every sequence; latency_per_sample_s is per row."""
    run = batching_run(context, params)
    prompts, max_new_tokens, outcome, frame, timed = run.prompts, run.max_new_tokens, run.outcome, run.frame, run.timed
    if run.ignores_inputs(context, params):
        calls = measure_calls(outcome, params.measure_function)
        return batches_asked_throughput(params, prompts, max_new_tokens, run.claimed, frame, calls)
    by_size = _by_size(timed)
    measured = _returned_latencies(outcome, params.measure_function)
    for row in frame.records():
        latency, rate = row["latency_s"], row["tokens_per_s"]
        if (wrong := _not_positive(row)) is not None:
            return wrong
        events = by_size.get(int(row["batch_size"]), [])
        if not events:
            continue  # batches of another size are charged by the sizes check
        rows = int(row["batch_size"])
        judged = [(judge_latency(params, float(latency), [event], max_new_tokens), event) for event in events]
        mistimed, event = next((pair for pair in judged if pair[0] is None), judged[-1])
        # A latency measure_generation returned is judged in its own check: not charged twice here.
        if mistimed is not None and not (float(latency) in measured and _measure_mistimes(context)):
            return Verdict.failed(
                f"For batch size {rows}: {mistimed.message} Report the latency of the batch's own timed generate call.",
                expected=mistimed.expected,
                found=mistimed.found,
            )
        low, high = new_tokens_range(event)
        produced = float(rate) * float(latency)
        if not low * (1 - params.rate_tolerance) <= produced <= high * (1 + params.rate_tolerance):
            first_only = rows > 1 and produced <= high / rows * (1 + params.rate_tolerance)
            why = (
                f"it counts the tokens of one sequence of the {rows}; count every sequence's new tokens"
                if first_only
                else "tokens_per_s should be the new tokens of all sequences divided by latency_s"
            )
            return Verdict.failed(
                f"For batch size {rows}, tokens_per_s x latency_s is {number(produced)} tokens, but the batch produced "
                f"{span(low, high)} new tokens: {why}.",
                expected=f"{span(number(low / float(latency)), number(high / float(latency)))} tokens/s",
                found=number(float(rate)),
            )
        if (wrong := _per_sample_problem(row, params.rate_tolerance)) is not None:
            return wrong
    return Verdict.passed(
        "tokens_per_s counts the new tokens of every sequence, and latency_per_sample_s is latency_s / batch_size."
    )


def _not_positive(row: dict[str, Any]) -> Verdict | None:
    """A batching row whose values are not all positive numbers."""
    values = (row["latency_s"], row["tokens_per_s"], row.get("latency_per_sample_s", row["latency_s"]), row["batch_size"])
    if not all(is_number(v) and float(v) > 0 for v in values):
        return Verdict.failed(f"The row for batch size {row['batch_size']} holds values that are not positive numbers.")
    return None


def _per_sample_problem(row: dict[str, Any], tolerance: float) -> Verdict | None:
    """A batching row whose latency_per_sample_s is not latency_s / batch_size."""
    latency, rows = float(row["latency_s"]), int(row["batch_size"])
    if "latency_per_sample_s" in row and not math.isclose(float(row["latency_per_sample_s"]), latency / rows, rel_tol=tolerance):
        return Verdict.failed(
            f"For batch size {rows}, latency_per_sample_s is {number(float(row['latency_per_sample_s']))}, but latency_s / "
            f"batch_size is {number(latency / rows)}.",
            expected=number(latency / rows),
            found=number(float(row["latency_per_sample_s"])),
        )
    return None


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


def _within(value: float, span: tuple[float, float], tolerance: float) -> bool:
    return span[0] * (1 - tolerance) <= value <= span[1] * (1 + tolerance)


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
        if (wrong := _per_sample_problem(row, params.rate_tolerance)) is not None:
            return wrong
    return Verdict.passed(
        f"Each row reports what {function} measured for its batch ({function} does not generate the prompts it is given, "
        "which is charged in its own checks)."
    )


# --------------------------------------------------------------------------------------
# compare_ppplx
# --------------------------------------------------------------------------------------


class PpxParams(CorpusParams):
    """compare_ppplx on a hidden corpus with the baseline model and an INT8 ONNX model the grader quantizes."""

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


def _comparison(context: CheckContext, params: PpxParams) -> tuple[list[str], CallOutcome, dict[str, Any]]:
    texts, _ = draw_corpus(context, params)
    key = "ppx-comparison:" + json.dumps([params.function, params.model, texts])

    def compare() -> CallOutcome:
        harness = context.require_harness()
        quantized_dir = harness.session.workdir / f"grader-int8-{secrets.token_hex(4)}"  # removed with the working folder
        with quiet_libraries():
            built = context.models.built(f"int8:{params.model}", partial(quantize_int8, context.models.source(params.model)))
        shutil.copytree(built, quantized_dir)  # each kernel its own copy: a notebook may change the files it is given
        return context.call(
            params.function,
            mapping(
                {
                    "baseline": model(model_spec(params.model, dtype="float32")),
                    "quantized": onnx_model(str(quantized_dir), QUANTIZED_FILE),
                }
            ),
            context.tokenizer(params.model),
            literal(texts),
        )

    outcome = context.once(key, compare)
    value = context.returned(outcome, f"{params.function}(models, tokenizer, texts)", keyed_by("model label"))
    return texts, outcome, value


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


def _quantized_runs(
    context: CheckContext, params: PpxParams, texts: list[str], outcome: CallOutcome, value: dict[str, Any]
) -> Verdict | None:
    """None if the INT8 model's loss comes from runs of its ONNX Runtime session over every text; else the failed verdict."""
    runs = [event for event in outcome.onnx_run_events() if event["grader_session"] is True]
    if not runs:
        return Verdict.failed(
            f"{params.function} reports a loss for the INT8 model, but never ran its ONNX Runtime session: evaluate every "
            "model in `models` by calling it on each batch (model(**batch).logits).",
            expected="the INT8 model's session run on every batch",
            found="no run of its session",
        )
    with quiet_libraries():
        lengths = context.expected(text_token_lengths, context.models.tokenizer(params.model), texts)
    counted = [row_tokens for event in runs if (row_tokens := event["row_tokens"]) is not None]
    covered = sum(_count(count) for row_tokens in counted for count in row_tokens)
    if counted and covered < sum(lengths):
        return Verdict.failed(
            f"{params.function} ran the INT8 model's session on {covered} tokens in all ({len(runs)} runs), fewer than the "
            f"{len(texts)} texts hold: its loss cannot come from those runs. Evaluate it on every batch, as the baseline.",
            expected="runs covering every token of the texts",
            found=f"{covered} tokens in {len(runs)} runs",
        )
    quantized, _ = _label_result(value, "quantized", params.function)
    sums: list[dict[str, Any]] = [event["nll_sums"] for event in runs if isinstance(event["nll_sums"], dict)]
    counts: list[dict[str, Any]] = [event["nll_counts"] for event in runs if isinstance(event["nll_counts"], dict)]
    if len(sums) != len(runs) or len(counts) != len(runs):
        return None  # runs whose logits the kernel did not see (IO binding): coverage is the evidence
    try:
        if _baseline_loss(context, params, texts, outcome, value).outcome != "passed":
            return None  # a wrong method is charged once, on the baseline
    except NotRecorded:  # a student kit holds the reference's loss at the solution's batch size only
        return None
    implied: dict[str, float] = {}
    for way in ("pairs", "targets"):
        total = sum(float(item.get(way, 0.0)) for item in sums if is_number(item.get(way)))
        tokens = sum(_count(item.get(way)) for item in counts)
        if tokens:
            implied[way] = total / tokens
    if implied and not any(math.isclose(quantized, loss, rel_tol=params.rel_tolerance) for loss in implied.values()):
        return Verdict.failed(
            f"The INT8 model's loss ({number(quantized)}) is not what its own session runs give: their logits give "
            f"{number(next(iter(implied.values())))} on the tokens they predicted. Report the loss computed from the INT8 model's logits.",
            expected=number(next(iter(implied.values()))),
            found=number(quantized),
        )
    return None


def _baseline_loss(
    context: CheckContext, params: PpxParams, texts: list[str], outcome: CallOutcome, value: dict[str, Any]
) -> Verdict:
    """The baseline's loss against the token-weighted reference at the batch size its own forward passes used."""
    loss, _ = _label_result(value, "baseline", params.function)
    forwards = [event for event in outcome.forward_events() if event["input_shape"]]
    if not forwards:
        return Verdict.error(
            f"No forward pass of the baseline model was seen during {params.function}: call the model as model(**batch).",
            found="no forward pass",
        )
    batch_size = int((forwards[0]["input_shape"] or [1])[0])
    variants = reference_variants(context, params.model, texts, batch_size)
    data = {"texts": len(texts), "batch_size": batch_size, "found": loss}
    where = f"on {len(texts)} hidden texts"
    return judge_loss(loss, variants, f"of the baseline {where} (batches of {batch_size})", params.rel_tolerance, data)


@check_kind("ppx_exp", PpxParams)
def ppx_exp(context: CheckContext, params: PpxParams) -> Verdict:
    """compare_ppplx's ppx is exp of the loss it reports, for every model."""
    _, _, value = _comparison(context, params)
    for label in [label for label in ("baseline", "quantized") if label in value]:  # a missing one is charged elsewhere
        loss, ppx = _label_result(value, label, params.function)
        if not math.isclose(ppx, math.exp(loss), rel_tol=params.rel_tolerance):
            return Verdict.failed(
                f"Under {label!r}, ppx is {number(ppx)} but the loss is {number(loss)}, and exp({number(loss)}) = "
                f"{number(math.exp(loss))}: perplexity is exp of the token-weighted loss.",
                expected=number(math.exp(loss)),
                found=number(ppx),
            )
    return Verdict.passed("ppx is exp(loss) for every model evaluated.")


@check_kind("ppx_quantized", PpxParams)
def ppx_quantized(context: CheckContext, params: PpxParams) -> Verdict:
    """compare_ppplx evaluates the INT8 ONNX model by running its own session on every text."""
    texts, outcome, value = _comparison(context, params)
    where = f"on {len(texts)} hidden texts"
    baseline, _ = _label_result(value, "baseline", params.function)
    quantized, _ = _label_result(value, "quantized", params.function)
    verdict = _quantized_runs(context, params, texts, outcome, value)
    if verdict is not None:
        return verdict
    if abs(quantized - baseline) > params.drift * abs(baseline):
        return Verdict.failed(
            f"The INT8 model's loss ({number(quantized)}) is far from the baseline's ({number(baseline)}) {where}; the grader's "
            f"INT8 model drifts by well under {params.drift:.0%}: evaluate each model in `models` the same way.",
            expected=f"within {params.drift:.0%} of {number(baseline)}",
            found=number(quantized),
        )
    return Verdict.passed(
        f"The INT8 ONNX model is evaluated by running its session on every text: loss {number(quantized)} vs "
        f"{number(baseline)} for the baseline {where}."
    )


# --------------------------------------------------------------------------------------
# probe_edge_prompts
# --------------------------------------------------------------------------------------

EDGE_KINDS = ("very short", "very long", "multi-line", "repetitive")


class EdgeParams(LatencyTolerance, TargetParams):
    """How the edge prompts are probed and told apart, and how far their metrics may be from their generate calls."""

    measure_function: str = Field(
        "measure_generation", description="The student's measuring function, watched (a latency it returns is its own check's)."
    )
    rate_tolerance: float = Field(0.02, gt=0, description="Relative tolerance of derived rates (tokens_per_s, ms_per_token).")
    model: str = Field("gpt2", description="Hub ID of the model and tokenizer.")
    tokens: list[int] = Field([6, 12], min_length=2, max_length=2, description="Range [low, high] of max_new_tokens.")
    short_tokens: int = Field(4, ge=1, description="A prompt of at most this many tokens is very short.")
    long_tokens: int = Field(200, ge=10, description="A prompt of at least this many tokens is very long.")
    repetitive_share: float = Field(0.25, gt=0, lt=1, description="Distinct tokens / tokens at most this is repetitive.")


def edge_kinds(ids: list[int], text: str, params: EdgeParams) -> set[str]:
    """Every edge kind a prompt can stand for (a long repetitive prompt is both long and repetitive)."""
    kinds = set()
    if "\n" in text.strip():
        kinds.add("multi-line")
    if len(ids) >= params.long_tokens:
        kinds.add("very long")
    if len(ids) >= 8 and len(set(ids)) <= params.repetitive_share * len(ids):
        kinds.add("repetitive")
    if len(ids) <= params.short_tokens:
        kinds.add("very short")
    return kinds


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


@check_kind("edge_prompts", EdgeParams)
def edge_prompts(context: CheckContext, params: EdgeParams) -> Verdict:
    """probe_edge_prompts: very short, very long, multi-line and repetitive prompts, each with the same max_new_tokens."""
    max_new_tokens = context.rng_for("edge").randint(*params.tokens)
    call = f"{params.function}(model, tokenizer, max_new_tokens={max_new_tokens})"
    outcome = again_while(
        params.attempts,
        lambda: context.call_with_model(
            params.function,
            params.model,
            literal(max_new_tokens),
            watch=(params.measure_function,),
        ),
        # (not again where measure_generation ignores its prompts: its calls share one input, never told apart)
        lambda outcome: (
            outcome.ok
            and _edge_unmatched(params, outcome, max_new_tokens) is not None
            and not measure_ignores_inputs(context, outcome, params.measure_function)
        ),
    )
    value = context.returned(outcome, call, keyed_by(f"edge kind, one entry each ({', '.join(EDGE_KINDS)})", len(EDGE_KINDS)))
    for name, metrics in value.items():
        _metrics_dict(metrics, f"the edge prompt {name!r}", SETTING_METRICS)
    reference_tokenizer = context.models.tokenizer(params.model)
    timed = timed_calls(outcome)[:12]
    traits = [
        edge_kinds(list(e["input_ids"] or []), reference_tokenizer.decode(e["input_ids"] or [], skip_special_tokens=True), params)
        for e in timed
    ]
    kinds = {kind: [timed[index]] for kind, index in assign_kinds(traits, EDGE_KINDS).items()}
    missing = [kind for kind in EDGE_KINDS if kind not in kinds]
    if missing and measure_ignores_inputs(context, outcome, params.measure_function):
        # Its generate calls show what measure_generation ran, not what it was given: judged by what it was given.
        return edges_asked(
            params, reference_tokenizer, max_new_tokens, call, measure_calls(outcome, params.measure_function), value
        )
    limits = [tokens_limit(e) for events in kinds.values() for e in events[-1:]]
    coverage = _edge_coverage(
        params, max_new_tokens, missing, list(kinds), limits, f"No generate call of {call} had", "some edge prompts ran with"
    )
    if coverage is not None:
        return coverage
    unmatched = _edge_unmatched(params, outcome, max_new_tokens)
    if unmatched is not None:
        measured = _returned_latencies(outcome, params.measure_function)
        latencies = [float(metrics["latency_s"]) for metrics in value.values()]
        # Latencies measure_generation itself mistimes are charged in its own check, not here again.
        if not (all(latency in measured for latency in latencies) and _measure_mistimes(context)):
            return Verdict.failed(
                f"The metrics {call} reports for {unmatched!r} are not those of any generate call it made (latency_s "
                "within the tolerance of the call's duration, tokens_per_s x latency_s its new tokens): report each "
                "prompt's own measurement.",
                expected="each entry's metrics from its own timed generate call",
                found=f"{unmatched!r}: latency_s {number(float(value[unmatched]['latency_s']), 's')}",
            )
    # Through measure_generation, each entry must also be what the calls of a prompt of its own returned: on a small
    # model two prompts' generate calls can take the same time, so one entry copying another's metrics fits a call.
    calls = measure_calls(outcome, params.measure_function)
    if calls and (copied := _entry_unreported(params, calls, value)) is not None:
        return _unreported(call, params.measure_function, copied, value)
    return Verdict.passed(f"All four edge prompt kinds were measured with max_new_tokens={max_new_tokens}.")


def _edge_coverage(
    params: EdgeParams, max_new_tokens: int, missing: list[str], found: list[str], limits: list[Any], who: str, lead: str
) -> Verdict | None:
    """The failed verdict where an edge kind was not run (``who`` ... "a multi-line prompt") or a kind's run had
    another max_new_tokens than asked (``limits``, one per kind found; ``lead`` ... "max_new_tokens=32"); else None."""
    if missing:
        return Verdict.failed(
            f"{who} a {' or a '.join(missing)} prompt (very short: at most {params.short_tokens} tokens; very long: at "
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
    unmatched = _entry_unreported(params, calls, value)
    if unmatched is not None:
        return _unreported(call, function, unmatched, value)
    return Verdict.passed(
        f"All four edge prompt kinds were given to {function} with max_new_tokens={max_new_tokens}, each entry what its "
        f"call returned ({function} does not generate the prompts it is given, which is charged in its own checks)."
    )


def _entry_unreported(params: EdgeParams, calls: list[MeasureCall], value: dict[Any, Any]) -> Any:
    """The key of the first edge entry whose metrics are not what the calls of a prompt of its own returned (the calls
    grouped by the prompts they were given, each group to one entry at most); None if every entry is."""
    groups: dict[tuple[str, ...], list[MeasureCall]] = {}
    for measured in calls:
        groups.setdefault(tuple(measured.prompts or ()), []).append(measured)
    spans = [span for group in groups.values() if (span := _returned_range(group)) is not None]
    names = list(value)
    fits = [[i for i, span in enumerate(spans) if _reports(params, value[name], span)] for name in names]
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


def _reports(params: EdgeParams, metrics: Any, span: tuple[tuple[float, float], tuple[float, float]]) -> bool:
    """Whether an entry's metrics are what calls of one prompt returned (latency_s, and the tokens they imply)."""
    if not (isinstance(metrics, dict) and all(is_number(metrics.get(key)) for key in ("latency_s", "tokens_per_s"))):
        return False
    latency, produced = float(metrics["latency_s"]), float(metrics["tokens_per_s"]) * float(metrics["latency_s"])
    return _within(latency, span[0], params.rate_tolerance) and _within(produced, span[1], params.rate_tolerance)


def _edge_fits(params: EdgeParams, metrics: Any, event: GenerateEvent, max_new_tokens: int) -> bool:
    """Whether an edge entry's metrics are those of this generate call."""
    if not isinstance(metrics, dict) or not all(is_number(metrics.get(key)) for key in SETTING_METRICS):
        return False
    latency, rate = float(metrics["latency_s"]), float(metrics["tokens_per_s"])
    if latency <= 0 or judge_latency(params, latency, [event], max_new_tokens) is not None:
        return False
    low, high = new_tokens_range(event)
    return low * (1 - params.rate_tolerance) <= rate * latency <= high * (1 + params.rate_tolerance)


def _edge_unmatched(params: EdgeParams, outcome: CallOutcome, max_new_tokens: int) -> str | None:
    """The first entry of the edge result whose metrics no distinct timed generate call of the run explains; None if all are."""
    value = outcome.value
    if not outcome.ok or not isinstance(value, dict):
        return None
    events = timed_calls(outcome)
    names = list(value)
    fits = [[i for i, event in enumerate(events) if _edge_fits(params, value[name], event, max_new_tokens)] for name in names]
    if max_matching(fits) == len(names):
        return None
    return str(next((name for name, fit in zip(names, fits, strict=True) if not fit), names[-1]))


# --------------------------------------------------------------------------------------
# run_quantization_exercise
# --------------------------------------------------------------------------------------

TABLE_COLUMNS = ("scenario", "latency_s", "tokens_per_s", "ms_per_token", "ppx")


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
    measure_functions: list[str] = Field(
        ["measure_generation", "ablate_cache_and_padding", "measure_batched", "probe_edge_prompts"],
        description="The student's measuring functions, watched during the run: the table's latencies come from them.",
    )
    ppx_function: str = Field("compare_ppplx", description="The student's perplexity function, watched during the run.")
    ablation_function: str = Field("ablate_cache_and_padding", description="Whose entries a cache/padding row reports.")
    batched_function: str = Field("measure_batched", description="Whose rows a batch-size row reports.")


def _controller_call(context: CheckContext, params: ControllerParams) -> tuple[list[int], str, CallOutcome]:
    rng = context.rng_for("controller")
    sizes = [rng.randint(low, high) for low, high in params.batch_sizes]
    max_new_tokens = rng.randint(*params.tokens)
    call = f"{params.function}({params.model!r}, batch_sizes={tuple(sizes)}, max_new_tokens={max_new_tokens})"
    key = f"controller:{call}:{params.table_function}"
    outcome = context.once(
        key,
        lambda: context.call(
            params.function,
            literal(params.model),
            literal(sizes),
            literal(max_new_tokens),
            watch=(params.table_function, *params.measure_functions, params.ppx_function),
        ),
    )
    return sizes, call, outcome


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


def _scenario_latencies(params: ControllerParams, outcome: CallOutcome, scenario: Scenario) -> tuple[list[float], str]:
    """What the run's ablation returned for this cache/padding setting, and its batching for this batch size
    (the labels read by meaning), with the functions' names; nothing when the label names neither."""
    found: list[float] = []
    sources = []
    if scenario.use_cache is not None and scenario.padding is not None:
        sources.append(params.ablation_function)
        for event in outcome.returned_events(params.ablation_function):
            value = decode(event["value"])
            for key, metrics in value.items() if isinstance(value, dict) else ():
                setting = read_scenario(key)
                if setting.use_cache is scenario.use_cache and setting.padding == scenario.padding:
                    found += _reported(metrics, "latency_s")
    if scenario.batch_size is not None:
        sources.append(params.batched_function)
        for event in outcome.returned_events(params.batched_function):
            frame = decode(event["value"])
            if isinstance(frame, Frame) and {"batch_size", "latency_s"} <= set(frame.columns):
                found += [
                    float(row["latency_s"])
                    for row in frame.records()
                    if is_number(row["batch_size"])
                    and int(row["batch_size"]) == scenario.batch_size
                    and is_number(row["latency_s"])
                ]
    return found, " and ".join(sources)


def judge_table_sources(context: CheckContext, params: ControllerParams, table: Frame) -> Verdict | None:
    """None if every latency of the table is one the run measured and every perplexity one the run computed.

    A latency counts as measured when a watched measuring function returned it during the run, or when it
    agrees with the duration of a generate call of the run; a perplexity when the watched perplexity
    function returned it.
    """
    _, call, outcome = _controller_call(context, params)
    events = outcome.generate_events()
    returned = [decode(event["value"]) for name in params.measure_functions for event in outcome.returned_events(name)]
    latencies = [latency for value in returned for latency in _reported(value, "latency_s")]
    perplexities = [
        ppx for event in outcome.returned_events(params.ppx_function) for ppx in _reported(decode(event["value"]), "ppx")
    ]
    for row in table.records():
        scenario: Any = row.get("scenario")
        latency: Any = row.get("latency_s")
        ppx: Any = row.get("ppx")
        if not is_number(latency):
            return Verdict.failed(
                f"The results table's row {scenario!r} has latency_s {kind_of(latency)}: report the measured latency.",
                found=kind_of(latency),
            )
        own, sources = _scenario_latencies(params, outcome, read_scenario(scenario))
        if own and not _close(float(latency), own):
            # The function that measured this scenario returned it during the run: the row must say the same.
            return Verdict.failed(
                f"The row {scenario!r} of the table {call} returned reads latency_s {number(float(latency), 's')}, but "
                f"{sources} returned {', '.join(number(value, 's') for value in own[:4])} for that scenario during the run: "
                "fill each row from the results of its own scenario.",
                expected=f"the latency {sources} measured for {scenario!r}",
                found=number(float(latency), "s"),
            )
        measured = _close(float(latency), latencies) or any(
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
        if is_number(ppx) and math.isfinite(float(ppx)) and not _close(float(ppx), perplexities):
            return Verdict.failed(
                f"The row {scenario!r} of the table {call} returned reads ppx {number(float(ppx))}, which {params.ppx_function} "
                f"did not return during the run ({len(perplexities)} perplexities): take ppx from its results.",
                expected=f"a perplexity {params.ppx_function} returned",
                found=number(float(ppx)),
            )
    return None


def _controller(context: CheckContext, params: ControllerParams) -> tuple[list[int], Frame, Any]:
    sizes, call, outcome = _controller_call(context, params)
    table, takeaways = context.returned(outcome, call, items(FRAME, ANY, names="(results table DataFrame, takeaways list)"))
    return sizes, table, takeaways


def _built_table(context: CheckContext, params: ControllerParams) -> tuple[list[int], Any]:
    """What the table builder last returned during the controller's run (stop if it was never called)."""
    sizes, call, outcome = _controller_call(context, params)
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
    labels = list(table.column("scenario"))
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
    items = takeaways if isinstance(takeaways, list) else []
    real = [item for item in items if isinstance(item, str) and len(item.split()) >= 3]
    if not isinstance(takeaways, list) or len(real) != len(items) or not low <= len(items) <= high:
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
    """The table build_results_table returns during the run holds every scenario, with units."""
    sizes, built = _built_table(context, params)
    verdict = judge_table(built, sizes, params.table_function)
    if verdict is not None:
        return verdict
    return Verdict.passed(f"{params.table_function} builds a table with every scenario and {', '.join(TABLE_COLUMNS)}.")


@check_kind("controller_table", ControllerParams)
def controller_table(context: CheckContext, params: ControllerParams) -> Verdict:
    """The controller's results table holds every scenario, its latencies and perplexities those the run measured."""
    sizes, table, _ = _controller(context, params)
    verdict = judge_table(table, sizes, params.function)
    if verdict is not None:
        outcome = _controller_call(context, params)[2]
        built = outcome.returned_events(params.table_function)
        returned = (outcome.raw.get("value") or {}).get("items") or [None]
        # Compared as described by the kernel (a NaN ppx makes decoded frames unequal to themselves).
        if built and json.dumps(built[-1]["value"], sort_keys=True) == json.dumps(returned[0], sort_keys=True):
            return Verdict.passed(
                f"{params.function} returns the table {params.table_function} built; what that table lacks is charged "
                f"in {params.table_function}'s own check."
            )
        return verdict
    unmeasured = judge_table_sources(context, params, table)
    if unmeasured is not None:
        return unmeasured
    return Verdict.passed(
        f"The results table holds every scenario ({table.length} rows) with {', '.join(TABLE_COLUMNS)}, "
        "its latencies and perplexities those the run measured."
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
    if verdict.outcome != "failed" and not _controller_call(context, params)[2].generate_events():
        return Verdict.failed(
            "The controller made no generate call, so its takeaways rest on no measurement: run the experiment "
            "(baseline, quantized, ablation, batching, edge prompts) and draw the takeaways from its results.",
            expected="takeaways from a run that generated text",
            found="no generate call during the run",
        )
    return verdict
