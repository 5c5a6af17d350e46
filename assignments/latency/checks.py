"""Check kinds of the ``latency`` assignment: latency vs prompt length and precision (seed 000).

Precision and loading are judged by calling the student's functions with hidden spellings,
missing model ids and invalid values. Timing is judged from the instrumentation of the
student's own ``measure_generation`` call, paced so that mistakes show: the first generate of
each new prompt (the warm-up) and every tokenizer call are slowed by ``pace_s`` seconds, so a
timer that surrounds the warm-up or the tokenization reads far longer than the timed generate.
Sweeps are judged from their rows, the settings that reach each timed generate call, and the
figures they draw (read from matplotlib's objects: labels and plotted data).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from grader.checks.base import (
    CheckContext,
    StopCheck,
    TargetParams,
    Verdict,
    check_kind,
    failed_call,
)
from grader.checks.behaviour import Generation, RowFit, Unmatched, carrying
from grader.checks.calls import Argument, GradedCall, graded_call, handed, model_ids
from grader.checks.numbers import agrees
from grader.checks.shapes import ANY, FRAME, MODEL, STRING, TOKENIZER, instance, items, keyed_by, keys
from grader.checks.timed import Timed, timed_call
from grader.checks.timing import (
    LatencyTolerance,
    agrees_with_timed,
    contains_run,
    cuda_misuse,
    match,
    max_matching,
    mean_of_rates,
    warmup_before,
)
from grader.grading.replay import NotRecorded
from grader.kernel.evidence import generated_anything
from grader.kernel.harness import CallOutcome, ExceptionInfo, literal
from grader.kernel.protocol import FigureAxes, GenerateEvent
from grader.kernel.values import DType, Frame, Model, Tokenizer, decode, is_number, kind_of

# What the loaders and resolve_precision return.
RESOLVED = items(instance(DType, "a torch dtype"), STRING, names="(torch dtype, label string)")
LOADED = items(TOKENIZER, MODEL, ANY, ANY, names="(tokenizer, model, model_id, dtype_label)")

TIMING_GUIDANCE = "do one untimed warm-up generate, then time only the timed model.generate call"


# --------------------------------------------------------------------------------------
# resolve_precision
# --------------------------------------------------------------------------------------


class PrecisionParams(TargetParams):
    """How resolve_precision is called: spellings drawn at grading time, and devices."""

    float32: list[str] = Field(["FLOAT32", "Float32", "float32", "fLoAt32"], min_length=1, description="Spellings of float32.")
    float16: list[str] = Field(["FLOAT16", "Float16", "float16", "FlOaT16"], min_length=1, description="Spellings of float16.")
    draws: int = Field(2, ge=1, description="How many spellings are drawn per call kind.")


def expect_raise(outcome: CallOutcome, call: str) -> ExceptionInfo | None:
    """The exception a call raised; None if it returned. Stop if it could not run or is not written yet."""
    if outcome.ok:
        return None
    if outcome.status != "raised" or outcome.exception is None or outcome.exception.type == "NotImplementedError":
        raise StopCheck(failed_call(outcome, call))
    return outcome.exception


def _resolve(context: CheckContext, function: str, precision: str, device: str) -> CallOutcome:
    # Asked for "cuda" as on a machine with CUDA: a resolver that also falls back where CUDA is missing (as the notebook
    # decides its device) resolves as it would there.
    key = f"resolve:{function}:{precision}:{device}"
    return context.once(key, lambda: context.call(function, literal(precision), literal(device), cuda=device == "cuda"))


def _resolved(context: CheckContext, function: str, precision: str, device: str) -> tuple[DType, str]:
    """The (dtype, label) the student's function returns, or stop with why not."""
    call = f"{function}({precision!r}, {device!r})"
    dtype, label = context.returned(_resolve(context, function, precision, device), call, RESOLVED)
    return dtype, label


def student_resolution(
    context: CheckContext, precision: str, device: str, function: str = "resolve_precision"
) -> tuple[str, str]:
    """(dtype name, label) as the student's own resolve_precision gives them; the reference's if it fails.

    Checks of other functions compare with this, so a mistake in resolve_precision is charged
    once, in its own checks.
    """
    fallback = None
    if context.reference is not None:
        # Asked up front, not only when the student's fails, so that a student kit records it from the solution.
        with contextlib.suppress(NotRecorded):
            dtype_ref, label_ref = context.reference.resolve_precision(precision, device)
            fallback = str(dtype_ref), label_ref
    try:
        dtype, label = _resolved(context, function, precision, device)
        return dtype.name, label
    except StopCheck:
        if fallback is None:
            raise
        return fallback


@check_kind("precision_names", PrecisionParams)
def precision_names(context: CheckContext, params: PrecisionParams) -> Verdict:
    """resolve_precision accepts float32 and float16 in any capitalisation, and follows the device argument."""
    cases = [(s, "cpu", "torch.float32") for s in context.rng.sample(params.float32, min(params.draws, len(params.float32)))]
    cases += [(s, "cuda", "torch.float16") for s in context.rng.sample(params.float16, min(params.draws, len(params.float16)))]
    # And float32 where CUDA is: it stays float32 there (not drawn, so the other checks' draws stay as they were).
    cases.append((params.float32[0], "cuda", "torch.float32"))
    for spelling, device, expected in cases:
        call = f"{params.function}({spelling!r}, {device!r})"
        outcome = _resolve(context, params.function, spelling, device)
        exception = outcome.exception
        if outcome.status == "raised" and exception is not None and exception.is_a("ValueError") and spelling != spelling.lower():
            return Verdict.failed(
                f"{call} raised ValueError ({exception.message.rstrip('.')}): accept any capitalisation "
                "(normalise with .lower()).",
                expected=f"({expected}, label)",
                found="ValueError raised",
            )
        dtype, _ = _resolved(context, params.function, spelling, device)
        if dtype.name != expected:
            hint = (
                " It should follow the device argument."
                if expected == "torch.float16"
                else " float32 stays float32 on every device."
                if device == "cuda"
                else ""
            )
            return Verdict.failed(f"{call} returned {dtype.name}, not {expected}.{hint}", expected=expected, found=dtype.name)
    return Verdict.passed(f"{params.function} accepts float32 and float16 in any capitalisation.")


# What names float32 in a label (its dtype's names, and how people say it).
FLOAT32_WORDS = ("float32", "fp32", "full precision", "single precision", "32-bit", "32 bit")


@check_kind("precision_cpu_fallback", PrecisionParams)
def precision_cpu_fallback(context: CheckContext, params: PrecisionParams) -> Verdict:
    """On the CPU, resolve_precision falls back from float16 to float32, with a label that says so."""
    call = f"{params.function}('float16', 'cpu')"
    dtype, label = _resolved(context, params.function, "float16", "cpu")
    if dtype.name != "torch.float32":
        return Verdict.failed(
            f"{call} returned {dtype.name}: on the CPU, float16 must fall back to float32.",
            expected="torch.float32",
            found=dtype.name,
        )
    # In any capitalisation (a fallback tested before the name is normalised misses 'FLOAT16'); a spelling the
    # resolver rejects is charged in precision-names.
    spelling = next((name for name in params.float16 if name != name.lower()), None)
    if spelling is not None:
        outcome = _resolve(context, params.function, spelling, "cpu")
        resolved = outcome.value[0] if outcome.ok and isinstance(outcome.value, (tuple, list)) and outcome.value else None
        name = getattr(resolved, "name", None)
        if outcome.ok and name is not None and name != "torch.float32":
            return Verdict.failed(
                f"{params.function}({spelling!r}, 'cpu') returned {name}: on the CPU, float16 in any capitalisation must "
                "fall back to float32 (normalise the name before testing it).",
                expected="torch.float32",
                found=str(name),
            )
    _, plain = _resolved(context, params.function, "float32", "cpu")
    if label == plain or not any(name in label.casefold() for name in FLOAT32_WORDS):
        return Verdict.failed(
            f"{call} returns the label {label!r}, which does not say that float16 fell back to float32 "
            f"(float32 itself gives {plain!r}).",
            expected="a label naming float32 and the fallback, e.g. 'float32 (float16 requested; CPU fallback)'",
            found=repr(label),
        )
    return Verdict.passed(f"On the CPU, float16 falls back to float32 with the label {label!r}.")


# --------------------------------------------------------------------------------------
# load_model_and_tokenizer
# --------------------------------------------------------------------------------------


class LoaderParams(TargetParams):
    """How the loader is called: candidates with missing ids, and the model it should load."""

    model_id: str = Field("distilgpt2", description="The id that loads (for fallthrough and same_id).")
    precision: str = Field("float32", description="The precision passed.")
    missing_prefix: str = Field("course-staff/no-such-model", description="Prefix of the hidden ids that do not exist.")


def _missing_id(context: CheckContext, params: LoaderParams, index: int) -> str:
    return f"{params.missing_prefix}-{context.rng_for('loader-missing').randrange(10**6):06d}-{index}"


def _loader_call(context: CheckContext, params: LoaderParams, candidates: list[str]) -> CallOutcome:
    key = f"latency-loader:{params.function}:{candidates}:{params.precision}"
    return context.once(key, lambda: context.call(params.function, literal(candidates), literal(params.precision)))


def _loaded(context: CheckContext, params: LoaderParams, candidates: list[str]) -> tuple[Tokenizer, Model, Any, Any]:
    call = f"{params.function}({candidates!r}, {params.precision!r})"
    tokenizer, loaded, model_id, label = context.returned(_loader_call(context, params, candidates), call, LOADED)
    return tokenizer, loaded, model_id, label


@check_kind("latency_loader_none_loads", LoaderParams)
def latency_loader_none_loads(context: CheckContext, params: LoaderParams) -> Verdict:
    """When no candidate loads, the loader raises an error naming every id tried."""
    candidates = [_missing_id(context, params, 1), _missing_id(context, params, 2)]
    call = f"{params.function}({candidates!r})"
    outcome = _loader_call(context, params, candidates)
    exception = expect_raise(outcome, call)
    if exception is None:
        return Verdict.failed(
            f"{call} returned {kind_of(outcome.value)} although no candidate exists: raise an error instead.",
            expected="an exception listing every id tried",
            found=f"returned {kind_of(outcome.value)}",
        )
    missing = [candidate for candidate in candidates if candidate not in exception.message]
    stops_early = _loader_call(context, params, [_missing_id(context, params, 0), params.model_id]).status == "raised"
    if missing == candidates[1:] and stops_early:
        # It stops at the first id that fails (charged in the fall-through check) and names what it tried.
        return Verdict.passed(
            f"When no candidate loads, the error names the id it tried ({exception.type}); that it stops at the "
            "first one is charged in the fall-through check."
        )
    if missing:
        return Verdict.failed(
            f"When no candidate loads, the error ({exception}) does not name {', '.join(missing)}: list every id tried.",
            expected=f"an error naming {' and '.join(candidates)}",
            found=str(exception),
        )
    return Verdict.passed(f"When no candidate loads, the error lists every id tried ({exception.type}).")


@check_kind("latency_loader_model", LoaderParams)
def latency_loader_model(context: CheckContext, params: LoaderParams) -> Verdict:
    """The loader returns the model in eval mode on the device, in the dtype and label resolve_precision gives."""
    candidates = [params.model_id]
    _, loaded_model, _, label = _loaded(context, params, candidates)
    device = "cuda" if context.on_cuda else "cpu"
    expected_dtype, expected_label = student_resolution(context, params.precision, device)
    call = f"{params.function}({candidates!r}, {params.precision!r})"
    problems = []
    if loaded_model.training:
        problems.append("the model is in training mode: call model.eval()")
    if not loaded_model.device.startswith(device):
        problems.append(f"the model is on {loaded_model.device}, not {device}")
    if loaded_model.dtype != expected_dtype:
        problems.append(
            f"the model is in {loaded_model.dtype.replace('torch.', '')}, but resolve_precision({params.precision!r}, {device!r}) "
            f"gives {expected_dtype.replace('torch.', '')}"
        )
    if label != expected_label:
        problems.append(f"the label is {label!r}, not the resolved label {expected_label!r}")
    if problems:
        return Verdict.failed(
            f"{call}: {'; '.join(problems)}.",
            expected=f"a model in eval mode on {device} in {expected_dtype}, labelled {expected_label!r}",
            found="; ".join(problems),
        )
    return Verdict.passed(f"{call} returns the model in eval mode on {device}, in the resolved dtype and label.")


# --------------------------------------------------------------------------------------
# measure_generation
# --------------------------------------------------------------------------------------

METRICS = ("latency_s", "new_tokens", "tokens_per_s", "ms_per_token")


class MeasureParams(LatencyTolerance, TargetParams):
    """Hidden calls of measure_generation, paced so that a timer around other work shows."""

    model: str = Field("gpt2", description="Hub ID of the model of the first call.")
    other_model: str = Field("distilgpt2", description="Hub ID of the model of the second call (every argument differs).")
    prompts: list[str] = Field(min_length=1, description="Hidden prompts; one is drawn at grading time.")
    tokens: list[int] = Field([20, 40], min_length=2, max_length=2, description="Range [low, high] of max_new_tokens.")
    use_cache: bool = Field(False, description="use_cache for the drawn prompt (the other call uses the default, True).")
    eos_prompt: str = Field("Thank you for reading.", description="A prompt after which the model stops early at EOS.")
    eos_tokens: int = Field(32, ge=1, description="max_new_tokens for the early-stopping prompt.")
    short_tokens: list[int] = Field(
        [8, 16],
        min_length=2,
        max_length=2,
        description="Range [low, high] of max_new_tokens of a third call: the sweeps' own range, so that the function "
        "shows it follows its arguments where the sweeps call it (not only where this check does).",
    )
    third_model: str = Field(
        "openai-community/gpt2",
        description="Hub ID of the third call's model: another id of the first call's, which the notebook's loader loads "
        "afresh (a notebook that warms each model once warms it again).",
    )
    rate_tolerance: float = Field(0.02, gt=0, description="Relative tolerance of tokens_per_s and ms_per_token.")


# What the timed generate of measure_generation is compared on with the reference's: the model it was given, the
# prompt's ids, the limit of new tokens, use_cache, and inputs on the model's device.
MEASURE_ASPECTS = ("model", "rows", "limit", "use_cache", "beams", "dtype", "device", "inputs", "added")


@dataclass(frozen=True)
class Measurement:
    """One hidden measure_generation call: its inputs, and the timed call (what it did beside the reference)."""

    prompt: str
    max_new_tokens: int
    use_cache: bool
    timed_call: Timed

    @property
    def call(self) -> str:
        return self.timed_call.call

    @property
    def hub_id(self) -> str:
        return self.timed_call.hub_id

    @property
    def outcome(self) -> CallOutcome:
        return self.timed_call.outcome

    @property
    def value(self) -> dict[str, Any]:
        value: dict[str, Any] = self.timed_call.value
        return value

    @property
    def graded(self) -> GradedCall:
        return self.timed_call.graded

    def unmatched(self, context: CheckContext) -> list[Unmatched]:
        """The reference's timed generate calls this call does not make."""
        return self.timed_call.unmatched()

    def timed(self, context: CheckContext) -> list[GenerateEvent]:
        """The call's timed generate calls (see :meth:`Timed.timed`)."""
        return self.timed_call.timed()


def measurement_plan(context: CheckContext, params: MeasureParams) -> list[tuple[str, str, int, bool]]:
    """The hidden calls: (hub id, prompt, max_new_tokens, use_cache), every argument different from one to the other."""
    rng = context.rng_for("measure")
    first, third = rng.sample(params.prompts, 2) if len(params.prompts) > 1 else (params.prompts[0],) * 2
    return [
        (params.model, first, rng.randint(*params.tokens), params.use_cache),
        (params.other_model, params.eos_prompt, params.eos_tokens, not params.use_cache),
        # Where the sweeps call it: a few new tokens, use_cache as the first (a long prompt here made the tiny model
        # stop after a handful of tokens, which a warm-up of as many cannot be told from).
        (params.third_model, third, rng.randint(*params.short_tokens), params.use_cache),
    ]


def measured_calls(context: CheckContext, params: MeasureParams) -> list[Measurement]:
    """The hidden measure_generation calls (shared by this function's checks), each made again while its latency reads
    too long (a preempted run does not repeat; a timer around other work does)."""
    measurements = []
    for hub_id, prompt, max_new_tokens, use_cache in measurement_plan(context, params):
        objects = handed(context, hub_id)
        call = f"{params.function}({hub_id} model, tokenizer, {prompt!r}, max_new_tokens={max_new_tokens}, use_cache={use_cache})"
        arguments = [
            objects.model,
            objects.tokenizer,
            Argument.value(prompt),
            Argument.value(max_new_tokens),
            Argument.value(use_cache),
        ]

        def returns(outcome: CallOutcome, call: str = call) -> Any:
            return dict(context.returned(outcome, call, keys(*METRICS)))

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
            memo=f"{call}:{params.pace_s}:{objects.own}",
        )
        measurements.append(Measurement(prompt, max_new_tokens, use_cache, timed))
    return measurements


@check_kind("measure_warmup", MeasureParams)
def measure_warmup(context: CheckContext, params: MeasureParams) -> Verdict:
    """measure_generation runs an untimed warm-up generate (at least one token, same model) before the timed one."""
    for measurement in measured_calls(context, params):
        events = measurement.outcome.generate_events()
        timed = reported_run(params, measurement.timed(context), measurement.value.get("latency_s"))
        if warmup_before(events, timed) is None:
            earlier = [event for event in events if float(event["end"]) <= float(timed["start"])]
            why = (
                "calls model.generate only once before its timed call"
                if not earlier
                else f"makes {len(earlier)} generate call(s) before its timed one, but none generated a token on the same "
                f"model and device ({_earlier_calls(earlier)})"
            )
            if not earlier:
                why = "calls model.generate only once" if len(events) == 1 else "makes no generate call before its timed one"
            return Verdict.failed(
                f"{measurement.call} {why}, so the timed call pays the first call's one-time costs: "
                "run one brief generate (at least one new token) on the same model before the timed one and do not time it.",
                expected="an untimed warm-up generate that produces tokens, then the timed generate",
                found=f"{len(events)} generate call(s), no real warm-up",
            )
    return Verdict.passed(f"{params.function} runs an untimed warm-up generate before the timed one.")


def reported_run(tolerance: LatencyTolerance, timed: list[GenerateEvent], latency: Any) -> GenerateEvent:
    """The timed generate call a reported latency reads (of those it agrees with, the closest in duration: a best-of
    timer's fastest, a warm-up with the timed call's settings left aside); the last one where it agrees with none."""
    if not is_number(latency):
        return timed[-1]
    unpaced = [event for event in timed if not event["paced_s"] and event["pause"] is None]
    agreeing = [event for event in unpaced or timed if agrees_with_timed(tolerance, float(latency), [event])]
    if not agreeing:
        return timed[-1]
    return min(reversed(agreeing), key=lambda event: abs(float(event["duration_s"]) - float(latency)))


@dataclass(frozen=True)
class TimedMeasurement:
    """One hidden measure_generation call, its returned metrics and its timed generate calls' records."""

    measurement: Measurement
    timed: list[GenerateEvent]
    latency: float

    @property
    def call(self) -> str:
        return self.measurement.call


def timed_measurements(context: CheckContext, params: MeasureParams) -> list[TimedMeasurement]:
    """The hidden calls whose latency_s is a positive number of seconds; stop when one's is not."""
    measurements = []
    for measurement in measured_calls(context, params):
        latency = measurement.value["latency_s"]
        if not is_number(latency) or float(latency) <= 0:
            raise StopCheck(
                Verdict.failed(
                    f"latency_s should be a positive number of seconds, but it is {kind_of(latency)}.", found=kind_of(latency)
                )
            )
        measurements.append(TimedMeasurement(measurement, measurement.timed(context), float(latency)))
    return measurements


def _earlier_calls(events: list[GenerateEvent]) -> str:
    """How the generate calls before the timed one ended, for feedback."""
    described = []
    for event in events:
        if event["error"]:
            described.append(f"one raised {str(event['error']).split(':')[0]}")
        elif not generated_anything(event):
            described.append("one generated no token")
        else:
            described.append(f"one ran a model on {event['model_device']} other than the timed one")
    return "; ".join(described)


# --------------------------------------------------------------------------------------
# build_prompt
# --------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------
# sweep_prompt_lengths
# --------------------------------------------------------------------------------------

SWEEP_COLUMNS = ("prompt_tokens", "latency_s", "tokens_per_s", "ms_per_token")


class SweepParams(LatencyTolerance, TargetParams):
    """Two hidden prompt-length sweeps, every argument of the second other than the first's (model, base text,
    lengths, max_new_tokens, use_cache), drawn at grading time."""

    model: str = Field("gpt2", description="Hub ID of the model of the first sweep.")
    other_model: str = Field("distilgpt2", description="Hub ID of the model of the second sweep.")
    measure_function: str = Field("measure_generation", description="The student's measuring function.")
    prompt_function: str = Field("build_prompt", description="The student's prompt builder.")
    base_texts: list[str] = Field(min_length=2, description="Hidden base texts; one is drawn for each sweep.")
    lengths: list[list[int]] = Field(
        [[8, 20], [40, 70], [100, 160]], min_length=2, description="Ranges the increasing target lengths are drawn from."
    )
    tokens: list[int] = Field([8, 16], min_length=2, max_length=2, description="Range [low, high] of max_new_tokens.")
    use_cache: bool = Field(False, description="use_cache passed to the first sweep (the second gets the other value).")
    rel_tolerance: float = Field(1e-6, gt=0, description="Relative tolerance when matching plotted data to the frame.")
    rate_tolerance: float = Field(0.02, gt=0, description="Relative tolerance of a row's rates against its latency.")

    @model_validator(mode="after")
    def _ranges(self) -> SweepParams:
        if any(len(pair) != 2 or pair[0] > pair[1] for pair in self.lengths):
            raise ValueError("each entry of lengths must be a range [low, high]")
        return self


# What each timed generate of a sweep is compared on with the reference's.
SWEEP_ASPECTS = ("model", "rows", "limit", "use_cache", "beams", "device", "inputs", "added")


@dataclass(frozen=True)
class Sweep:
    """One hidden sweep: its inputs, its call, and what it returned (None: not a frame of the required shape)."""

    hub_id: str
    base: str
    lengths: list[int]
    max_new_tokens: int
    use_cache: bool
    graded: GradedCall
    call: str

    @property
    def outcome(self) -> CallOutcome:
        return self.graded.outcome


def sweep_plan(context: CheckContext, params: SweepParams) -> list[tuple[str, str, list[int], int, bool]]:
    """The two hidden sweeps: (hub id, base text, lengths, max_new_tokens, use_cache), each argument different."""
    rng = context.rng_for("sweep")
    bases = rng.sample(params.base_texts, 2)
    first = [rng.randint(low, high) for low, high in params.lengths]
    second = [rng.randint(low, high) for low, high in params.lengths[: max(2, len(params.lengths) - 1)]]
    while second == first[: len(second)]:
        second = [length + 1 for length in second]
    tokens = rng.randint(*params.tokens)
    other_tokens = params.tokens[0] + params.tokens[1] - tokens
    if other_tokens == tokens:
        other_tokens = tokens + 1
    return [
        (params.model, bases[0], first, tokens, params.use_cache),
        (params.other_model, bases[1], second, other_tokens, not params.use_cache),
    ]


def sweep_calls(context: CheckContext, params: SweepParams) -> list[Sweep]:
    """The hidden sweeps, each called once per submission and shared by the sweep checks."""
    sweeps = []
    for hub_id, base, lengths, max_new_tokens, use_cache in sweep_plan(context, params):
        objects = handed(context, hub_id)
        graded = graded_call(
            context,
            params.function,
            objects.model,
            objects.tokenizer,
            Argument.value(base),
            Argument.value(lengths),
            Argument.value(max_new_tokens),
            Argument.value(use_cache),
            figures=True,
            watch=(params.measure_function,),
            memo=f"sweep:{params.function}:{hub_id}:{base}:{lengths}:{max_new_tokens}:{use_cache}",
        )
        call = f"{params.function}({hub_id} model, tokenizer, {base!r}, {lengths}, {max_new_tokens}, use_cache={use_cache})"
        sweeps.append(Sweep(hub_id, base, lengths, max_new_tokens, use_cache, graded, call))
    return sweeps


def sweep_frame(context: CheckContext, params: SweepParams, sweep: Sweep, one_row_per_length: bool = True) -> Frame:
    """The frame a sweep returned, or stop with why it is not one row per length (where asked) with the required
    columns."""
    misuse = cuda_misuse(sweep.outcome, params.function, context.on_cuda)
    if misuse is not None:
        raise StopCheck(misuse)
    frame = context.returned(sweep.outcome, sweep.call, FRAME)
    missing = [column for column in SWEEP_COLUMNS if column not in frame.columns]
    if missing:
        raise StopCheck(
            Verdict.failed(
                f"The sweep's DataFrame has no column {', '.join(missing)} (it has {', '.join(map(str, frame.columns))}).",
                expected=", ".join(SWEEP_COLUMNS),
                found=", ".join(map(str, frame.columns)),
            )
        )
    if one_row_per_length and frame.length != len(sweep.lengths):
        raise StopCheck(
            Verdict.failed(
                f"The sweep over {len(sweep.lengths)} lengths {sweep.lengths} returned {frame.length} rows: one row per length.",
                expected=f"{len(sweep.lengths)} rows",
                found=f"{frame.length} rows",
            )
        )
    return frame


def sweep_prompts(context: CheckContext, params: SweepParams, sweep: Sweep, own: bool = True) -> list[set[tuple[int, ...]]]:
    """For each target length, the prompts (as the model's token ids) a correct sweep may measure: the reference's
    (its prompt builder on the base text), and (``own``) the notebook's own build_prompt's where it returns a prompt:
    a prompt built otherwise is build_prompt's to answer for, in its own check."""
    reference = [call.rows[0] for call in sweep.graded.reference().required() if call.rows]
    reference_tokenizer = context.models.tokenizer(sweep.hub_id)
    prompts: list[set[tuple[int, ...]]] = []
    for index, length in enumerate(sweep.lengths):
        options = {reference[index]} if index < len(reference) else set()
        if own:
            objects = handed(context, sweep.hub_id)
            arguments = (objects.tokenizer.recipe, literal(sweep.base), literal(length))
            outcome = context.once(
                f"sweep-prompt:{params.prompt_function}:{sweep.hub_id}:{sweep.base}:{length}",
                functools.partial(context.call, params.prompt_function, *arguments),
            )
            if outcome.ok and isinstance(outcome.value, str):
                options.add(tuple(reference_tokenizer(outcome.value)["input_ids"]))
        # A prompt cut to exactly its target is one too (as build_prompt's own check accepts): its first ``length`` ids,
        # passed as ids or decoded and tokenized again.
        for option in list(options):
            if len(option) > length:
                options.add(option[:length])
                options.add(tuple(reference_tokenizer(reference_tokenizer.decode(list(option[:length])))["input_ids"]))
        prompts.append(options)
    return prompts


def sweep_fits(context: CheckContext, params: SweepParams, sweep: Sweep, own: bool = True) -> RowFit:
    """A generate row fits the reference's prompt for a length when it is that prompt, or (``own``) the prompt the
    notebook's own build_prompt gives for that length; a special token at either end allowed."""
    alternatives: dict[tuple[int, ...], set[tuple[int, ...]]] = {}
    reference = [call.rows[0] for call in sweep.graded.reference().required() if call.rows]
    for wanted, options in zip(reference, sweep_prompts(context, params, sweep, own), strict=False):
        alternatives.setdefault(wanted, set()).update(options)

    def fits(found: list[int], wanted: list[int]) -> bool:
        return any(
            found == list(option) or (contains_run(found, list(option)) and len(found) - len(option) <= 2)
            for option in alternatives.get(tuple(wanted), {tuple(wanted)})
        )

    return fits


def _returned_metrics(outcome: CallOutcome, measure_function: str) -> list[dict[str, Any]]:
    """What the notebook's measuring function returned during the sweep, each with the prompt it was given."""
    returned = []
    for event in outcome.returned_events(measure_function):
        value = decode(event["value"])
        arguments = {str(name): decode(description) for name, description in event["arguments"]}
        prompt = arguments.get("prompt", arguments.get("2"))
        settings = {
            "max_new_tokens": arguments.get("max_new_tokens", arguments.get("3")),
            "use_cache": arguments.get("use_cache", arguments.get("4")),
        }
        if isinstance(value, dict):
            returned.append({"prompt": prompt if isinstance(prompt, str) else None, **value, "$settings": settings})
    return returned


def _asked_alike(candidates: list[Any], settings: Callable[[Any], dict[str, Any]], sweep: Sweep) -> list[Any]:
    """Of a row's candidate measurements, those run with the sweep's max_new_tokens and use_cache where any were (a
    setting not passed, or not recorded, is no difference): a row that reports a run of other settings, beside the
    runs the sweep was asked for, reports another measurement. Where none was, all of them (the settings' own check
    charges that)."""
    wanted = {"max_new_tokens": sweep.max_new_tokens, "use_cache": sweep.use_cache}
    alike = [
        candidate
        for candidate in candidates
        if all(value is None or value == wanted[name] for name, value in settings(candidate).items())
    ]
    return alike or candidates


def _readings(values: list[float]) -> list[float]:
    """A row may report one measurement, or the mean, median or fastest of several of one prompt."""
    return [*values, statistics.fmean(values), statistics.median(values), min(values)] if values else []


def _row_readings(own: list[dict[str, Any]]) -> list[tuple[tuple[float, float, float], frozenset[tuple[Any, ...]]]]:
    """The (latency_s, tokens_per_s, ms_per_token) a row may report from these measurements of its prompt, each with
    the ways it was taken: one of them whole (by its place from the last, and its rank by latency); the mean, the
    median or the best of the runs (all, or the last ones), each column taken the same way; or a latency of those
    (one, their mean, median or fastest) with the rates derived from it. Not one column from one run and another from
    another (the slowest run's latency beside the fastest run's rate). Every row of a sweep must share a way (see
    _row_problems): not the slowest run for the short prompts beside the fastest for the long ones."""
    names = ("latency_s", "tokens_per_s", "ms_per_token")
    runs = [
        (float(m["latency_s"]), float(m["tokens_per_s"]), float(m["ms_per_token"]))
        for m in own
        if all(is_number(m.get(name)) for name in names)
    ]
    if not runs:
        return []
    counts = {float(m["new_tokens"]) for m in own if is_number(m.get("new_tokens")) and float(m["new_tokens"]) > 0}
    ranks = sorted(range(len(runs)), key=lambda index: runs[index][0])
    readings: list[tuple[tuple[float, float, float], frozenset[tuple[Any, ...]]]] = []

    def add(triple: tuple[float, float, float], *ways: tuple[Any, ...]) -> None:
        readings.append((triple, frozenset(ways)))

    for index, run in enumerate(runs):
        rank = ranks.index(index)
        add(
            run,
            ("run", len(runs) - index),
            ("rank", rank),
            ("rank from slowest", len(runs) - 1 - rank),
        )
    # All the runs, or the last of them (the first ones warm-ups the row leaves out: seed 000, "don't compare the
    # warm-up against real runs").
    for start in range(max(len(runs) - 1, 1)):
        window = runs[start:]
        last = (len(window), "all") if start == 0 else (len(window),)
        latencies, rates, per_token = ([run[place] for run in window] for place in range(3))
        add((statistics.fmean(latencies), statistics.fmean(rates), statistics.fmean(per_token)), *(("mean", n) for n in last))
        add(
            (statistics.median(latencies), statistics.median(rates), statistics.median(per_token)), *(("median", n) for n in last)
        )
        add((min(latencies), max(rates), min(per_token)), *(("best", n) for n in last))
        for way, latency in zip(
            ("mean", "median", "best"), (statistics.fmean(latencies), statistics.median(latencies), min(latencies)), strict=True
        ):
            for tokens in counts:
                if latency > 0:
                    add((latency, tokens / latency, 1000 * latency / tokens), *((way, n) for n in last))
    return readings


def _row_problems(
    context: CheckContext, params: SweepParams, sweep: Sweep, frame: Frame, prompts: list[set[tuple[int, ...]]]
) -> list[str]:
    """What is wrong with each row of a sweep's frame: its prompt_tokens are not those of a prompt for its length, or
    its metrics are not the measurement of that prompt (what measure_generation returned for it, or what its timed
    generate calls give)."""
    problems = []
    columns = {column: frame.column(column) for column in SWEEP_COLUMNS}
    for column, values in columns.items():
        bad = [value for value in values if not is_number(value) or float(value) <= 0]
        if bad:
            return [f"column {column} should hold positive numbers, but it holds {kind_of(bad[0])}"]
    returned = _returned_metrics(sweep.outcome, params.measure_function)
    reference_tokenizer = context.models.tokenizer(sweep.hub_id)
    behaviour = sweep.graded.behaviour
    fits = carrying(reference_tokenizer)
    # Each row goes with the length whose prompt it reports (rows measured in another order than the lengths are given
    # are fine); where the rows' prompt_tokens do not pair them with the lengths one to one, row i goes with length i.
    reported = [float(value) for value in columns["prompt_tokens"]]
    options = [
        [index for index in range(len(sweep.lengths)) if tokens in {len(o) for o in prompts[index]}] for tokens in reported
    ]
    paired = match(options)
    row_of = (
        {index: paired[index] for index in paired} if len(paired) == len(sweep.lengths) else {i: i for i in range(len(reported))}
    )
    # The prompts the sweep really measured (given to the measuring function, or seen by a generate): a row reports the
    # length of the prompt it measured, not the target when the prompt is longer.
    seen = [tuple(reference_tokenizer(m["prompt"])["input_ids"]) for m in returned if isinstance(m.get("prompt"), str)]
    seen += [tuple(row) for event in sweep.outcome.generate_events() for row in (event.get("rows") or []) if row]

    def was_measured(option: tuple[int, ...]) -> bool:
        return any(ids == option or (contains_run(list(ids), list(option)) and len(ids) - len(option) <= 2) for ids in seen)

    taken: list[tuple[int, frozenset[tuple[Any, ...]]]] = []  # (length, the ways its row's metrics were taken)
    for index, length in enumerate(sweep.lengths):
        row = row_of.get(index, index)
        tokens = reported[row]
        candidates = [option for option in prompts[index] if was_measured(option)] or prompts[index]
        allowed = sorted({len(option) for option in candidates})
        if tokens not in allowed:
            problems.append(
                f"the row for the target of {length} tokens reports prompt_tokens {tokens:g}, but the prompt for that "
                f"target has {' or '.join(map(str, allowed))} tokens"
            )
            continue
        latency = float(columns["latency_s"][row])
        rate = float(columns["tokens_per_s"][row])
        per_token = float(columns["ms_per_token"][row])
        own = [
            metrics
            for metrics in returned
            if isinstance(metrics.get("prompt"), str)
            and tuple(reference_tokenizer(metrics["prompt"])["input_ids"]) in prompts[index]
        ]
        own = _asked_alike(own, lambda metrics: metrics["$settings"], sweep)
        if own:
            measured = {
                name: [float(m[name]) for m in own if is_number(m.get(name))]
                for name in ("latency_s", "tokens_per_s", "ms_per_token")
            }
            fitting = [
                ways
                for triple, ways in _row_readings(own)
                if all(
                    math.isclose(value, reading, rel_tol=params.rate_tolerance)
                    for value, reading in zip((latency, rate, per_token), triple, strict=True)
                )
            ]
            if fitting:
                taken.append((length, frozenset().union(*fitting)))
            else:
                problems.append(
                    f"the row for the target of {length} tokens reports latency_s {latency:.4g}, tokens_per_s {rate:.4g} and "
                    f"ms_per_token {per_token:.4g}, but {params.measure_function} returned "
                    + "; ".join(
                        f"{name} {', '.join(f'{v:.4g}' for v in measured[name][:3])}"
                        for name in ("latency_s", "tokens_per_s", "ms_per_token")
                    )
                    + " for that prompt: put its metrics in the row"
                )
            continue
        # Measured without the notebook's measuring function: the row's latency is what a timer of a generate of its
        # prompt with the sweep's max_new_tokens reads, and its rates count that generate's new tokens.
        ran = [
            call
            for call in behaviour.generations
            if call.rows and len(call.rows) == 1 and any(fits(list(call.rows[0]), list(option)) for option in prompts[index])
        ]
        if not ran:
            problems.append(f"no generate call of the sweep ran the prompt for the target of {length} tokens")
            continue
        limited = _asked_alike(
            [call for call in ran if call.limit == sweep.max_new_tokens], lambda call: {"use_cache": call.use_cache}, sweep
        )
        if not limited:
            problems.append(
                f"no generate call of the prompt for the target of {length} tokens ran with the max_new_tokens the sweep was "
                f"given ({sweep.max_new_tokens}; it ran {', '.join(sorted({str(call.limit) for call in ran}))})"
            )
            continue
        timed = [call for call in limited if agrees_with_timed(params, latency, [call.event])] or (
            limited if agrees_with_timed(params, latency, [call.event for call in limited]) else []
        )
        if not timed:
            problems.append(
                f"the row for the target of {length} tokens reports latency_s {latency:.4g}, but its generate with "
                f"max_new_tokens={sweep.max_new_tokens} took {float(limited[-1].event['duration_s']):.4g} s"
            )
            continue
        generated = timed[-1].new_tokens[0] if timed[-1].new_tokens else None
        # The rate of the mean latency, or the mean of the trials' rates (error bars over trials average each metric).
        durations = [float(call.event["duration_s"]) for call in limited if is_number(call.event.get("duration_s"))]
        if (
            generated
            and not math.isclose(rate, generated / latency, rel_tol=params.rate_tolerance)
            and not mean_of_rates(rate, generated, latency, durations, params.rate_tolerance)
        ):
            problems.append(
                f"the row for the target of {length} tokens reports tokens_per_s {rate:.4g}, but {generated} new tokens in "
                f"{latency:.4g} s is {generated / latency:.4g}"
            )
        elif generated and not math.isclose(per_token, 1000 * latency / generated, rel_tol=params.rate_tolerance):
            problems.append(
                f"the row for the target of {length} tokens reports ms_per_token {per_token:.4g}, but {latency:.4g} s over "
                f"{generated} tokens is {1000 * latency / generated:.4g} ms"
            )
    if not problems and len(taken) > 1 and not frozenset.intersection(*(ways for _, ways in taken)):
        (first, ways), (other, other_ways) = next(
            ((one, two) for one, two in itertools.combinations(taken, 2) if not one[1] & two[1]), (taken[0], taken[-1])
        )
        problems.append(
            f"the rows take their runs differently (the row for {first} tokens {_way_words(ways)}, the row for {other} "
            f"{_way_words(other_ways)}): summarise every length's runs the same way (all their mean, median or best, "
            "or the same run of each)"
        )
    return problems


def _way_words(ways: frozenset[tuple[Any, ...]]) -> str:
    """How a row's metrics were taken from its runs, in words (one of the ways, the plainest)."""
    for way in sorted(ways, key=str):
        if way[0] in ("mean", "median", "best"):
            return f"the {way[0]} of {'all its runs' if way[1] == 'all' else f'its last {way[1]} runs'}"
    if ("rank from slowest", 0) in ways:
        return "its slowest run"
    rank = next((way[1] for way in ways if way[0] == "rank"), None)
    if rank is not None:
        return "its fastest run" if rank == 0 else f"its run {rank + 1} by speed"
    return "one of its runs"


@check_kind("sweep_rows", SweepParams)
def sweep_rows(context: CheckContext, params: SweepParams) -> Verdict:
    """sweep_prompt_lengths returns one row per length it was given: the prompt measured for that length, and that
    measurement's metrics."""
    for sweep in sweep_calls(context, params):
        frame = sweep_frame(context, params, sweep)
        # The reference's prompts first; the notebook's own build_prompt is asked only where they do not explain a row.
        problems = _row_problems(context, params, sweep, frame, sweep_prompts(context, params, sweep, own=False))
        if problems:
            problems = _row_problems(context, params, sweep, frame, sweep_prompts(context, params, sweep))
        if problems:
            return Verdict.failed(
                f"In {sweep.call}, {'; '.join(problems[:3])}"
                + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
                + ". Build one prompt per length you are given (from the base text you are given), measure it, and put "
                "its tokenized length and its metrics in the row.",
                expected="one row per length: the measured prompt's tokens and its metrics",
                found="; ".join(problems[:3]),
            )
    return Verdict.passed(
        f"The sweep returns one row per length it is given, each the measured prompt's tokens and its metrics "
        f"({', '.join(SWEEP_COLUMNS)})."
    )


@check_kind("sweep_plots", SweepParams)
def sweep_plots(context: CheckContext, params: SweepParams) -> Verdict:
    """sweep_prompt_lengths draws latency and tokens/s against prompt length, each axis labelled with what it shows."""
    for sweep in sweep_calls(context, params):
        # The plots are judged against the frame the sweep returned, whatever its rows (those are sweep-rows' to judge).
        verdict = _judge_plots(
            params, sweep_frame(context, params, sweep, one_row_per_length=False), sweep.lengths, sweep.outcome
        )
        if verdict.outcome != "passed":
            return verdict
    return Verdict.passed("The sweep plots latency and tokens/s against prompt length, with axes labelled with what they show.")


def _close(a: list[float | None] | None, b: list[float], rel: float) -> bool:
    return (
        a is not None
        and len(a) == len(b)
        and all(x is not None and math.isclose(x, y, rel_tol=rel, abs_tol=1e-12) for x, y in zip(a, b, strict=True))
    )


# What an axis label must name (any of the words), by what the axis shows.
LABEL_WORDS = {
    "prompt length": ("token", "length", "prompt", "context", "input"),
    # Whole words ("s" alone, not the s of "Sequence length").
    "latency": (r"\blatency\b", r"\btimes?\b", r"\bduration\b", r"\bseconds?\b", r"\bs\b", r"\bms\b", r"\bsecs?\b"),
    # A rate, not a count: "Prompt length (tokens)" on the throughput axis says tokens, not tokens per second.
    "tokens/s": ("throughput", "/s", "/ s", "per s", "per_s", "per second", "rate", "speed", "tps", "s^-1", "s⁻¹"),
}


# A label naming tokens per second names a throughput, whatever "second" it holds.
THROUGHPUT_WORDS = ("throughput", "tokens/s", "tok/s", "token/s", "tokens per s", "tokens / s", "tokens/sec")


def _label_problem(label: str, shows: str, milliseconds: bool | None = None) -> str:
    """Why an axis label does not say what the axis shows ("" when it does); a label in matplotlib's mathtext
    ("tokens s$^{-1}$", "$\\mathrm{latency}$ (s)") is read as it renders."""
    plain = re.sub(r"\\(?:mathrm|mathit|mathbf|text|textrm|rm|operatorname)\b|\\[,;:! ]|[${}]", "", label)
    text = f" {plain.casefold().replace('_', ' ')} "  # a column's name as the label: "latency_s"
    said = (
        any(re.search(pattern, text) for pattern in LABEL_WORDS[shows])
        if shows == "latency"
        else any(word in text for word in LABEL_WORDS[shows])
    )
    if not said:
        return f"the {shows} axis is labelled {label!r}, which does not say it shows {shows}"
    if shows == "latency" and re.search(r"per[\s-]*token|/\s*tok", text):
        return f"the latency axis is labelled {label!r}, which names a time per token, not the latency of the generation"
    if shows == "latency" and re.search(r"first[\s-]*token|\bttft\b|prefill", text):
        return f"the latency axis is labelled {label!r}, which names the time to the first token, not the whole generation's"
    names_prompt = re.search(r"prompt|input|context", text)
    if (
        shows == "prompt length"
        and not names_prompt
        and re.search(r"generat|\bnew[\s-]*tokens?\b|max[\s-]*new|output[\s-]*tokens?", text)
    ):
        return f"the prompt length axis is labelled {label!r}, which names the generated tokens, not the prompt's"
    if shows == "prompt length" and any(word in text for word in (*THROUGHPUT_WORDS, "per second", "per s ")):
        return f"the prompt length axis is labelled {label!r}, which names a throughput, not a prompt length"
    if shows == "latency" and any(word in text for word in THROUGHPUT_WORDS):
        return f"the latency axis is labelled {label!r}, which names a throughput, not a latency"
    if shows == "latency" and milliseconds is not None:
        says_ms = "ms" in text or "milli" in text
        if says_ms != milliseconds:
            unit = "milliseconds" if milliseconds else "seconds"
            return f"the latency axis is labelled {label!r}, but its values are in {unit}"
    return ""


def _judge_plots(params: SweepParams, frame: Frame, lengths: list[int], outcome: CallOutcome) -> Verdict:
    figures = outcome.figure_events()
    axes = [ax for figure in figures for ax in figure["axes"]]
    if not axes:
        return Verdict.failed(
            f"{params.function} drew no figure: plot latency and tokens/s against prompt length with matplotlib.",
            expected="two plots",
            found="no figure",
        )
    xs = [[float(v) for v in frame.column("prompt_tokens")], [float(v) for v in lengths]]
    latency = [float(v) for v in frame.column("latency_s")]
    wanted = {
        "latency": [latency, [1000 * v for v in latency]],
        "tokens/s": [[float(v) for v in frame.column("tokens_per_s")]],
    }
    found: dict[str, tuple[FigureAxes, bool]] = {}
    for name, ys in wanted.items():
        for ax in axes:
            for series in ax["series"]:
                for scale, y in enumerate(ys):
                    if _close(series.get("y"), y, params.rel_tolerance) and any(
                        _close(series.get(key), x, params.rel_tolerance) for x in xs for key in ("x", "x_shown")
                    ):
                        found.setdefault(name, (ax, scale == 1))
    missing = [name for name in wanted if name not in found]
    if missing:
        return Verdict.failed(
            f"No plot shows {' or '.join(missing)} against prompt length (the figures drew {len(axes)} axes): "
            "plot the sweep's columns with prompt_tokens on the x axis.",
            expected="latency_s vs prompt_tokens and tokens_per_s vs prompt_tokens",
            found=f"{len(axes)} axes, none with that data",
        )
    unlabelled = [
        f"the {name} plot has no {' or '.join(a for a in ('xlabel', 'ylabel') if not str(ax.get(a, '')).strip())}"
        for name, (ax, _) in found.items()
        if not str(ax["xlabel"]).strip() or not str(ax["ylabel"]).strip()
    ]
    if unlabelled:
        return Verdict.failed(
            f"{'; '.join(unlabelled).capitalize()}: label both axes with what they show and their units "
            "(ax.set_xlabel('Prompt length (tokens)'), ax.set_ylabel('Latency (s)')).",
            expected="labelled x and y axes on both plots",
            found="; ".join(unlabelled),
        )
    wrong = [
        problem
        for name, (ax, milliseconds) in found.items()
        for problem in (
            _label_problem(str(ax["xlabel"]), "prompt length"),
            _label_problem(str(ax["ylabel"]), name, milliseconds if name == "latency" else None),
        )
        if problem
    ]
    if wrong:
        return Verdict.failed(
            f"{'; '.join(wrong).capitalize()}: label each axis with what it shows and its unit "
            "(ax.set_ylabel('Latency (s)'), ax.set_ylabel('Tokens per second'), ax.set_xlabel('Prompt length (tokens)')).",
            expected="axis labels that name what each axis shows, in its unit",
            found="; ".join(wrong),
        )
    return Verdict.passed("The sweep plots latency and tokens/s against prompt length, with labelled axes.")


# --------------------------------------------------------------------------------------
# sweep_precisions
# --------------------------------------------------------------------------------------


class PrecisionSweepParams(TargetParams):
    """Two hidden precision sweeps, every argument of the second other than the first's."""

    model: str = Field("gpt2", description="The one candidate of the first sweep.")
    other_model: str = Field("distilgpt2", description="The candidate that loads in the second sweep (after a missing one).")
    precisions: list[str] = Field(["float32", "float16"], min_length=1, description="Precisions passed.")
    prompts: list[str] = Field(min_length=2, description="Hidden prompts; one is drawn for each sweep.")
    tokens: list[int] = Field([8, 16], min_length=2, max_length=2, description="Range [low, high] of max_new_tokens.")
    measure_function: str = Field("measure_generation", description="The student's measuring function.")
    loader_function: str = Field("load_model_and_tokenizer", description="The student's loader.")
    missing_prefix: str = Field("course-staff/no-such-model", description="Prefix of the hidden id that does not exist.")


# What each timed generate of a precision sweep is compared on with the reference's (the dtype is judged apart, on CUDA).
PRECISION_ASPECTS = ("model", "rows", "limit", "beams", "device", "inputs", "added")


@dataclass(frozen=True)
class PrecisionSweep:
    """A hidden precision sweep's call, what it returned, and each precision as the student's resolve_precision
    resolves it (what it did beside what the reference does: ``graded``)."""

    call: str
    max_new_tokens: int
    outcome: CallOutcome
    value: dict[str, Any]
    resolved: dict[str, tuple[str, str]]
    graded: GradedCall | None = None
    hub_id: str = ""
    precisions: tuple[str, ...] = ()


def precision_sweep_plan(context: CheckContext, params: PrecisionSweepParams) -> list[tuple[list[str], list[str], str, int, str]]:
    """The two hidden sweeps: (candidates, precisions, prompt, max_new_tokens, the id that loads)."""
    rng = context.rng_for("precision-sweep")
    prompts = rng.sample(params.prompts, 2)
    tokens = rng.randint(*params.tokens)
    other_tokens = params.tokens[0] + params.tokens[1] - tokens
    rng.randrange(10**6)  # drawn as before, so that the draws after it stay as they were
    # The second asks for the last precision alone (a sweep of the precisions it is given, not of the notebook's own
    # list; a missing candidate and other spellings are the loader's and resolve_precision's checks to judge: a
    # mistake there is not charged again here).
    return [
        ([params.model], list(params.precisions), prompts[0], tokens, params.model),
        (
            [params.other_model],
            list(params.precisions[-1:]),
            prompts[1],
            other_tokens if other_tokens != tokens else tokens + 1,
            params.other_model,
        ),
    ]


def precision_sweeps(context: CheckContext, params: PrecisionSweepParams) -> list[PrecisionSweep]:
    """The hidden precision sweeps (each called once per submission and shared by its checks), with what they returned;
    stop with why one did not return results keyed by label."""
    sweeps = []
    device = "cuda" if context.on_cuda else "cpu"
    for candidates, precisions, prompt, max_new_tokens, hub_id in precision_sweep_plan(context, params):
        graded = graded_call(
            context,
            params.function,
            model_ids(context, candidates),
            Argument.value(precisions),
            Argument.value(prompt),
            Argument.value(max_new_tokens),
            watch=(params.measure_function, params.loader_function),
            memo=f"precision-sweep:{params.function}:{candidates}:{precisions}:{prompt}:{max_new_tokens}",
        )
        call = f"{params.function}({candidates!r}, {precisions!r}, {prompt!r}, {max_new_tokens})"
        misuse = cuda_misuse(graded.outcome, params.function, context.on_cuda)
        if misuse is not None:
            raise StopCheck(misuse)
        value = context.returned(graded.outcome, call, keyed_by("dtype label"))
        resolved = {precision: student_resolution(context, precision, device) for precision in precisions}
        sweeps.append(PrecisionSweep(call, max_new_tokens, graded.outcome, value, resolved, graded, hub_id, tuple(precisions)))
    return sweeps


def precision_sweep_result(context: CheckContext, params: PrecisionSweepParams) -> PrecisionSweep:
    """The first hidden precision sweep (see :func:`precision_sweeps`)."""
    return precision_sweeps(context, params)[0]


def _dtype(event: GenerateEvent) -> str:
    """What a generate computed in: autocast's dtype where it was on, else the model's."""
    return str(event["autocast"] or event["model_dtype"])


def _segments(events: list[GenerateEvent]) -> list[list[GenerateEvent]]:
    """Generate calls split where the model or its dtype changes: one segment per precision measured."""
    segments: list[list[GenerateEvent]] = []
    for event in events:
        if segments and (segments[-1][-1]["model_serial"], _dtype(segments[-1][-1])) == (event["model_serial"], _dtype(event)):
            segments[-1].append(event)
        else:
            segments.append([event])
    return segments


def timed_per_precision(sweep: PrecisionSweep, params: PrecisionSweepParams) -> list[GenerateEvent]:
    """The timed generate of each precision's run, or stop when the sweep never generated."""
    segments = _segments(sweep.outcome.generate_events())
    if not segments:
        raise StopCheck(Verdict.failed(f"{sweep.call} never called model.generate.", found="no generate call"))
    timed = [segment[-1] for segment in segments]
    # A warm-up on a model of its own (charged in measure_generation's warm-up check) makes a segment
    # of its own: when the segments run with the asked max_new_tokens cover every precision, they are
    # the timed ones.
    asked = [event for event in timed if event["max_new_tokens"] == sweep.max_new_tokens]
    return asked if len(asked) >= len(params.precisions) else timed


def _returned_by_measure(outcome: CallOutcome, measure_function: str) -> list[dict[str, Any]]:
    """The metrics the notebook's measuring function returned during a call."""
    values = [decode(event["value"]) for event in outcome.returned_events(measure_function)]
    return [value for value in values if isinstance(value, dict)]


def own_measurements(context: CheckContext, params: PrecisionSweepParams, sweep: PrecisionSweep) -> str:
    """Why the results under the sweep's keys are not each measurements of their own ("" when they are): each is what
    the measuring function returned for runs of its own (one, or the mean, median or best of several; at the
    precision the result shows), or, where the sweep measures without it, what a timer of timed generates of its own
    reads."""
    results = [metrics for metrics in sweep.value.values() if isinstance(metrics, dict)]
    returned = _returned_by_measure(sweep.outcome, params.measure_function)
    if returned:
        groups = _measurement_groups(sweep.outcome, params.measure_function)
        if len(groups) >= len(results):
            # A model of its own per precision: each result summarises its model's runs, or their last ones (runs
            # before them warm-ups): their mean, median or best, or the last run alone (not the slowest of several);
            # every precision over as many runs (a best of eight beside a single run reads faster by selection alone).
            # One statistic for every precision, too (float32's mean beside float16's best favours float16).
            for count, way in itertools.product(range(1, max(len(group) for group in groups) + 1), STATISTICS):
                options = [
                    [
                        index
                        for index, group in enumerate(groups)
                        if len(group) >= count and _same_metrics(result, group[len(group) - count :], (way,))
                    ]
                    for result in results
                ]
                if max_matching(options) == len(results):
                    return ""
        else:
            # Precisions measured on one model (autocast): each result one run, or a summary of runs in a row of its
            # own (their last ones, after warm-ups), every precision over as many runs; or one summary per model.
            if _consecutive_summaries(results, returned):
                return ""
            for way in STATISTICS:
                options = [
                    [index for index, group in enumerate(groups) if _same_metrics(result, group, (way,))] for result in results
                ]
                if max_matching(options) == len(results):
                    return ""
        return (
            f"the {len(results)} results are not {len(results)} different measurements: {params.measure_function} returned "
            f"{len(returned)} result(s) during the sweep, and each precision's entry must be of its own run(s): one run, "
            "or the mean, median or best (fastest) of several, or the last of them after warm-ups, never the slowest, and "
            "every precision over as many runs"
        )
    tolerance = LatencyTolerance()
    # Generates with the sweep's max_new_tokens (a warm-up's fewer tokens are not a measurement).
    timed = [
        event
        for event in sweep.outcome.generate_events()
        if generated_anything(event) and Generation.of(event, {}).limit == sweep.max_new_tokens
    ]
    options = [
        [
            index
            for index, event in enumerate(timed)
            if is_number(result.get("latency_s")) and agrees_with_timed(tolerance, float(result["latency_s"]), [event])
        ]
        for result in results
    ]
    if max_matching(options) < len(results):
        return (
            "the results are not what a timer of the sweep's generate calls reads (each precision's latency_s must be the "
            "duration of a generate of its own)"
        )
    # Every precision timed over as many runs (the fastest of five float16 runs beside one float32 run reads faster by
    # selection alone; one more, a warm-up once before the loop on the first precision's model, is honest), and each
    # result's rates those of its own generate's new tokens and its latency.
    counts = [len([event for event in segment if event in timed]) for segment in _segments(sweep.outcome.generate_events())]
    counts = [count for count in counts if count]
    if counts and not (len(set(counts)) == 1 or (counts[0] == counts[1] + 1 and len(set(counts[1:])) == 1)):
        return (
            f"the sweep timed its precisions over different numbers of runs ({', '.join(map(str, counts))}): time every "
            "precision the same way"
        )
    for result in results:
        made = [_generated(event) for event in timed if agrees_with_timed(tolerance, float(result["latency_s"]), [event])]
        wrong = _wrong_rates(result, made)
        if wrong:
            return wrong
    return ""


def _generated(event: GenerateEvent) -> int:
    """The new tokens a generate made, over its rows (each up to its end-of-text)."""
    return sum(event["new_tokens"] or [])


def _wrong_rates(result: dict[str, Any], made: list[int]) -> str:
    """Why a result's new_tokens and rates are not those of a generate that made one of ``made`` new tokens in its
    latency ("" when they are, or where nothing says how many it made)."""
    latency_value: Any = result.get("latency_s")
    tokens: Any = result.get("new_tokens")
    if not made or not is_number(latency_value) or float(latency_value) <= 0:
        return ""
    latency = float(latency_value)
    if is_number(tokens) and int(float(tokens)) not in made:
        return (
            f"a result reports new_tokens={tokens}, but the generate its latency times made {made[0]} new tokens: count "
            "the generated tokens only (output length minus prompt length)"
        )
    count = int(float(tokens)) if is_number(tokens) else made[0]
    expected = {"tokens_per_s": count / latency, "ms_per_token": 1000 * latency / count if count else None}
    for name, value in expected.items():
        reported: Any = result.get(name)
        if value is not None and is_number(reported) and not agrees(reported, value, 0.02):
            return (
                f"a result reports {name}={float(reported):.4g}, but {count} new tokens in {latency:.4g} s give "
                f"{value:.4g}: derive the rates from the generated tokens and the latency (ms_per_token in milliseconds)"
            )
    return ""


def _disjoint_windows(windows: list[list[int]], count: int, taken: tuple[int, ...] = ()) -> bool:
    """Whether each of these lists of window starts can give one window of ``count`` runs, no two overlapping."""
    if len(taken) == len(windows):
        return True
    return any(
        all(abs(start - other) >= count for other in taken) and _disjoint_windows(windows, count, (*taken, start))
        for start in windows[len(taken)]
    )


def _consecutive_summaries(results: list[dict[str, Any]], returned: list[dict[str, Any]]) -> bool:
    """Whether each result is the summary (see _same_metrics) of runs in a row of these returns of its own, no run in
    two results', every result over as many runs and summarised the same way (precisions timed one after another on
    one model, each a few trials: the mean of the last three of six is the second precision's); where each result is
    one run of several, the run at the same place in each precision's trials (the last of each: not float32's slowest
    beside float16's fastest)."""
    for count in range(1, len(returned) // max(len(results), 1) + 1):
        for way in STATISTICS if count > 1 else STATISTICS[:1]:
            windows = [
                [
                    start
                    for start in range(len(returned) - count + 1)
                    if _same_metrics(result, returned[start : start + count], (way,))
                ]
                for result in results
            ]
            if count == 1 and len(returned) > len(results):
                if _same_place(windows, len(returned), len(results)):
                    return True
            elif _disjoint_windows(windows, count):
                return True
    return False


def _same_place(windows: list[list[int]], runs: int, results: int) -> bool:
    """Whether each result can be one run at the same place in its precision's trials: the runs after any warm-ups
    (the first ones) split into one block per result, as many runs each."""
    block = runs // results
    first = runs - block * results
    return any(
        _disjoint_windows(
            [[start for start in window if start >= first and (start - first) % block == place] for window in windows], 1
        )
        for place in range(block)
    )


def _measurement_groups(outcome: CallOutcome, measure_function: str) -> list[list[dict[str, Any]]]:
    """The measuring function's returns during a call, grouped by the model each measured (a precision measured
    several times on its model)."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for event in outcome.returned_events(measure_function):
        value = decode(event["value"])
        serials = [description.get("serial") for _, description in event["arguments"] if isinstance(description, dict)]
        model = next((serial for serial in serials if isinstance(serial, int)), None)
        if isinstance(value, dict):
            groups.setdefault(model if model is not None else len(groups), []).append(value)
    return list(groups.values())


STATISTICS = ("mean", "median", "best")


def _same_metrics(result: dict[str, Any], runs: list[dict[str, Any]], ways: tuple[str, ...] = STATISTICS) -> bool:
    """Whether a result's metrics are those of these runs: one run's, or their mean, median or best (fastest), each at
    the precision the result shows it, every metric taken the same way (the mean latency beside the best run's rates
    favours that precision); the rates may also be derived from the latency reported (new tokens over the mean latency
    of several trials is as good a throughput as the mean of their throughputs)."""
    columns = {name: [float(run[name]) for run in runs if is_number(run.get(name))] for name in METRICS}
    if any(not values or not is_number(result.get(name)) for name, values in columns.items()):
        return False
    latency: Any = result.get("latency_s")
    tokens: Any = result.get("new_tokens")
    derived: dict[str, float] = {}
    if is_number(latency) and is_number(tokens) and float(latency) > 0 and float(tokens) > 0:
        derived = {"tokens_per_s": float(tokens) / float(latency), "ms_per_token": 1000 * float(latency) / float(tokens)}

    def reading(name: str, statistic: str) -> float:
        values = columns[name]
        if statistic == "mean":
            return statistics.fmean(values)
        if statistic == "median":
            return statistics.median(values)
        # The best run is the fastest: the least latency and time per token, the most tokens per second (not the worst).
        return max(values) if name == "tokens_per_s" else min(values)

    return any(
        all(
            any(
                agrees(result[name], value, 1e-6)
                for value in (reading(name, statistic), *([derived[name]] if name in derived else []))
            )
            for name in METRICS
        )
        for statistic in ways
    )


def _loader_labels(outcome: CallOutcome, loader_function: str) -> set[str]:
    """The dtype labels the notebook's loader returned during a call (the last item of each tuple it returned)."""
    labels = set()
    for event in outcome.returned_events(loader_function):
        value = decode(event["value"])
        if isinstance(value, (tuple, list)) and value and isinstance(value[-1], str):
            labels.add(value[-1])
    return labels


@check_kind("precision_sweep_keys", PrecisionSweepParams)
def precision_sweep_keys(context: CheckContext, params: PrecisionSweepParams) -> Verdict:
    """sweep_precisions keys its results by the dtype labels resolve_precision gives, each holding the metrics of a
    measurement of its own."""
    for sweep in precision_sweeps(context, params):
        call, value, resolved = sweep.call, sweep.value, sweep.resolved
        labels = {label for _, label in resolved.values()}
        # The labels the notebook's own loader handed the sweep are its keys too (a loader whose label is wrong is
        # charged in its own check, not again here).
        handed_labels = _loader_labels(sweep.outcome, params.loader_function)
        asked = list(dict.fromkeys(sweep.precisions or params.precisions))
        if len(value) != len(asked) and set(value) != labels:
            return Verdict.failed(
                f"{call} returned {len(value)} result{'s' if len(value) != 1 else ''} ({sorted(map(str, value))}) for the "
                f"{len(asked)} precision{'s' if len(asked) != 1 else ''} it was asked for ({asked}): sweep the "
                "precisions the function is given, not a list of the notebook's.",
                expected=f"one result per precision asked: {sorted(labels)}",
                found=str(sorted(map(str, value))),
            )
        if set(value) != labels and not (handed_labels and set(value) == handed_labels):
            requested = set(value) == set(sweep.precisions or params.precisions)
            return Verdict.failed(
                f"{call} returned the keys {sorted(map(str, value))}, but the dtype labels are {sorted(labels)}"
                + (
                    ": key each result by the label resolve_precision gives, not by the precision requested."
                    if requested
                    else "."
                ),
                expected=str(sorted(labels)),
                found=str(sorted(map(str, value))),
            )
        bad = [key for key, metrics in value.items() if not isinstance(metrics, dict) or not set(METRICS) <= set(metrics)]
        if bad:
            return Verdict.failed(
                f"The result under {bad[0]!r} is {kind_of(value[bad[0]])}, not measure_generation's metrics ({', '.join(METRICS)}).",
                expected="the dict measure_generation returns",
                found=kind_of(value[bad[0]]),
            )
        problem = own_measurements(context, params, sweep)
        if problem:
            return Verdict.failed(
                f"In {call}, {problem}.",
                expected="one measurement per precision, under its label",
                found=problem,
            )
    return Verdict.passed("The precision sweep is keyed by the dtype labels, each with a measurement of its own.")


@check_kind("precision_sweep_fp16_cuda", PrecisionSweepParams)
def precision_sweep_fp16_cuda(context: CheckContext, params: PrecisionSweepParams) -> Verdict:
    """On CUDA, the float16 run of sweep_precisions really computes in float16 (a float16 model, or autocast)."""
    for sweep in precision_sweeps(context, params):
        verdict = judge_fp16_run(sweep, params)
        if verdict.outcome != "passed":
            return verdict
    return Verdict.passed("On CUDA, the float16 run really computes in float16.")


def judge_fp16_run(sweep: PrecisionSweep, params: PrecisionSweepParams) -> Verdict:
    """Whether a timed generate of the sweep computed in float16 (a float16 model, or autocast to float16), when a
    precision resolves to float16."""
    timed = timed_per_precision(sweep, params)
    wanted = [p for p in sweep.resolved if sweep.resolved[p][0] == "torch.float16"]
    dtypes = [_dtype(event) for event in timed]
    if wanted and "torch.float16" not in dtypes:
        return Verdict.failed(
            f"On CUDA, no timed generate of the precision sweep ran a float16 model (dtypes {dtypes}): "
            "load the model in float16 (or move it with model.to(torch.float16), or generate under torch.autocast) for the "
            "float16 run.",
            expected="a float16 model for the float16 run",
            found=str(dtypes),
        )
    return Verdict.passed("On CUDA, the float16 run really uses a float16 model.")


class PromptParams(TargetParams):
    """Base texts and targets for build_prompt (the public check's texts are shown to students, the hidden one's are not)."""

    model: str = Field("gpt2", description="Hub ID of the tokenizer.")
    base_texts: list[str] = Field(min_length=1, description="Base texts; some are drawn.")
    targets: list[int] = Field([60, 300], min_length=2, max_length=2, description="Range [low, high] of target token counts.")
    short_targets: list[int] = Field(
        [8, 20],
        min_length=2,
        max_length=2,
        description="Range of the first case's target: the prompt-length sweep's shortest lengths, so that the function "
        "shows it follows its target where the sweep calls it.",
    )
    cases: int = Field(3, ge=1, description="How many (base text, target) cases are drawn.")
    slack: int = Field(2, ge=0, description="Tokens a join may add beyond one repetition of the base text.")


@check_kind("prompt_building", PromptParams)
def prompt_building(context: CheckContext, params: PromptParams) -> Verdict:
    """build_prompt reaches the target token count on the given texts, without going a repetition past it."""
    reference_tokenizer = context.models.tokenizer(params.model)

    def count(text: str) -> int:
        return len(reference_tokenizer(text)["input_ids"])

    bases = context.rng.sample(params.base_texts, min(params.cases, len(params.base_texts)))
    for index, base in enumerate(bases):
        if index == 0:  # the sweep's shortest lengths, but not below one repetition (a prompt trimmed to fit is fine)
            low, high = params.short_targets
            target = context.rng.randint(max(low, count(base)), max(high, count(base)))
        else:
            target = context.rng.randint(*params.targets)
        call = f"{params.function}(tokenizer, {base!r}, {target})"
        prompt = context.returned(
            context.call(params.function, context.tokenizer(params.model), literal(base), literal(target)), call, STRING
        )
        tokens = count(prompt)
        if base.strip() not in prompt:
            return Verdict.failed(
                f"{call} returned a prompt that does not contain the base text: repeat base_text itself.",
                expected=f"repetitions of {base!r}",
                found=repr(prompt[:80]),
            )
        other = _not_repetition(prompt, base.strip())
        if other:
            return Verdict.failed(
                f"{call} returned a prompt that holds other text than repetitions of the base text ({other[:40]!r}): "
                "build the prompt by repeating base_text only.",
                expected=f"repetitions of {base!r}",
                found=repr(prompt[:80]),
            )
        if tokens < target:
            why = (
                " It counts characters, not tokens: measure len(tokenizer(prompt)['input_ids'])."
                if len(prompt) >= target
                else " Keep repeating until the tokenized prompt reaches the target."
            )
            return Verdict.failed(
                f"{call} returned a prompt of {tokens} tokens, short of the target {target}.{why}",
                expected=f"at least {target} tokens",
                found=f"{tokens} tokens",
            )
        limit = target + count(base) + params.slack
        if tokens > limit:
            return Verdict.failed(
                f"{call} returned a prompt of {tokens} tokens, more than one repetition past the target {target}: "
                "stop repeating as soon as the tokenized prompt reaches the target (count tokens with the tokenizer, "
                "not words or characters).",
                expected=f"{target} to {limit} tokens",
                found=f"{tokens} tokens",
            )
    return Verdict.passed(f"{params.function} reaches the target token count on {len(bases)} base texts.")


def _not_repetition(prompt: str, base: str) -> str:
    """What a prompt holds besides repetitions of ``base`` and what separates them ("" when nothing): the last
    repetition may be cut short (a prompt trimmed to its target)."""
    parts = prompt.split(base)
    *between, last = parts
    for part in between:
        if part.strip():
            return part.strip()
    tail = last.strip()
    return "" if not tail or base.startswith(tail) else tail
