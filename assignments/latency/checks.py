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
import math
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from grader.checks.base import (
    CheckContext,
    StopCheck,
    TargetParams,
    Verdict,
    check_kind,
    expect_shape,
    failed_call,
)
from grader.checks.shapes import ANY, FRAME, MODEL, STRING, TOKENIZER, instance, items, keyed_by, keys
from grader.checks.timing import (
    LatencyTolerance,
    call_timed,
    cuda_misuse,
    retry_while_too_long,
    warmup_before,
)
from grader.grading.replay import NotRecorded
from grader.kernel.evidence import generated_anything
from grader.kernel.harness import CallOutcome, ExceptionInfo, literal
from grader.kernel.protocol import FigureAxes, GenerateEvent
from grader.kernel.values import DType, Frame, Model, Tokenizer, is_number, kind_of

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
    key = f"resolve:{function}:{precision}:{device}"
    return context.once(key, lambda: context.call(function, literal(precision), literal(device)))


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
    for spelling, device, expected in cases:
        call = f"{params.function}({spelling!r}, {device!r})"
        outcome = _resolve(context, params.function, spelling, device)
        exception = outcome.exception
        if (
            outcome.status == "raised"
            and exception is not None
            and exception.type == "ValueError"
            and spelling != spelling.lower()
        ):
            return Verdict.failed(
                f"{call} raised ValueError ({exception.message.rstrip('.')}): accept any capitalisation "
                "(normalise with .lower()).",
                expected=f"({expected}, label)",
                found="ValueError raised",
            )
        dtype, _ = _resolved(context, params.function, spelling, device)
        if dtype.name != expected:
            hint = " It should follow the device argument, not torch.cuda.is_available()." if device == "cuda" else ""
            return Verdict.failed(f"{call} returned {dtype.name}, not {expected}.{hint}", expected=expected, found=dtype.name)
    return Verdict.passed(f"{params.function} accepts float32 and float16 in any capitalisation.")


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
    _, plain = _resolved(context, params.function, "float32", "cpu")
    if label == plain or not any(name in label.casefold() for name in ("float32", "fp32")):
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

    model: str = Field("gpt2", description="Hub ID of the model.")
    prompts: list[str] = Field(min_length=1, description="Hidden prompts; one is drawn at grading time.")
    tokens: list[int] = Field([20, 40], min_length=2, max_length=2, description="Range [low, high] of max_new_tokens.")
    use_cache: bool = Field(False, description="use_cache for the drawn prompt (the other call uses the default, True).")
    eos_prompt: str = Field("Thank you for reading.", description="A prompt after which the model stops early at EOS.")
    eos_tokens: int = Field(32, ge=1, description="max_new_tokens for the early-stopping prompt.")
    rate_tolerance: float = Field(0.02, gt=0, description="Relative tolerance of tokens_per_s and ms_per_token.")


def measured_calls(context: CheckContext, params: MeasureParams) -> list[tuple[str, int, bool, CallOutcome, dict[str, Any]]]:
    """The hidden measure_generation calls (shared by this function's checks), retried when too long."""
    rng = context.rng_for("measure")
    plan = [
        (rng.choice(params.prompts), rng.randint(*params.tokens), params.use_cache),
        (params.eos_prompt, params.eos_tokens, True),
    ]
    key = f"measure:{params.function}:{params.model}:{plan}:{params.pace_s}"

    def measure() -> list[tuple[str, int, bool, CallOutcome, dict[str, Any]]]:
        calls = []
        for prompt, max_new_tokens, use_cache in plan:
            outcome, value = retry_while_too_long(
                params,
                functools.partial(_measure, context, params, prompt, max_new_tokens, use_cache),
                lambda value: value["latency_s"],
            )
            calls.append((prompt, max_new_tokens, use_cache, outcome, value))
        return calls

    return context.once(key, measure)


def _measure(
    context: CheckContext, params: MeasureParams, prompt: str, max_new_tokens: int, use_cache: bool, device: str = "auto"
) -> tuple[CallOutcome, dict[str, Any]]:
    outcome, value = call_timed(
        context,
        params.function,
        params.model,
        prompt,
        max_new_tokens,
        literal(use_cache),
        device=device,
        dtype="float32",
        pace_s=params.pace_s,
    )
    expect_shape(value, keys(*METRICS), params.function)
    if not outcome.generate_events():
        raise StopCheck(Verdict.failed(f"{params.function} never called model.generate.", found="no generate call"))
    return outcome, value


def _describe_call(prompt: str, max_new_tokens: int, use_cache: bool) -> str:
    return f"measure_generation(model, tokenizer, {prompt!r}, max_new_tokens={max_new_tokens}, use_cache={use_cache})"


@check_kind("measure_warmup", MeasureParams)
def measure_warmup(context: CheckContext, params: MeasureParams) -> Verdict:
    """measure_generation runs an untimed warm-up generate (at least one token, same model) before the timed one."""
    for prompt, max_new_tokens, use_cache, outcome, _ in measured_calls(context, params):
        call = _describe_call(prompt, max_new_tokens, use_cache)
        events = outcome.generate_events()
        if warmup_before(events, events[-1]) is None:
            earlier = events[:-1]
            why = (
                "calls model.generate only once"
                if not earlier
                else f"makes {len(earlier)} earlier generate call(s), but none generated a token on the same model "
                f"and device ({_earlier_calls(earlier)})"
            )
            return Verdict.failed(
                f"{call} {why}, so the timed call pays the first call's one-time costs: "
                "run one brief generate (at least one new token) on the same model before the timed one and do not time it.",
                expected="an untimed warm-up generate that produces tokens, then the timed generate",
                found=f"{len(events)} generate call(s), no real warm-up",
            )
    return Verdict.passed(f"{params.function} runs an untimed warm-up generate before the timed one.")


@dataclass(frozen=True)
class TimedMeasurement:
    """One hidden measure_generation call, its returned metrics and its timed generate's record."""

    call: str
    prompt: str
    max_new_tokens: int
    use_cache: bool
    outcome: CallOutcome
    value: dict[str, Any]
    timed: GenerateEvent
    latency: float


def timed_measurements(context: CheckContext, params: MeasureParams) -> list[TimedMeasurement]:
    """The hidden calls whose latency_s is a positive number of seconds; stop when one's is not."""
    measurements = []
    for prompt, max_new_tokens, use_cache, outcome, value in measured_calls(context, params):
        latency = value["latency_s"]
        if not is_number(latency) or float(latency) <= 0:
            raise StopCheck(
                Verdict.failed(
                    f"latency_s should be a positive number of seconds, but it is {kind_of(latency)}.", found=kind_of(latency)
                )
            )
        call = _describe_call(prompt, max_new_tokens, use_cache)
        timed = outcome.generate_events()[-1]
        measurements.append(TimedMeasurement(call, prompt, max_new_tokens, use_cache, outcome, value, timed, float(latency)))
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


class SweepParams(TargetParams):
    """A hidden prompt-length sweep: base text, target lengths and settings drawn at grading time."""

    model: str = Field("gpt2", description="Hub ID of the model.")
    measure_function: str = Field("measure_generation", description="The student's measuring function.")
    base_texts: list[str] = Field(min_length=1, description="Hidden base texts; one is drawn.")
    lengths: list[list[int]] = Field(
        [[8, 20], [40, 70], [100, 160]], min_length=2, description="Ranges the increasing target lengths are drawn from."
    )
    tokens: list[int] = Field([8, 16], min_length=2, max_length=2, description="Range [low, high] of max_new_tokens.")
    use_cache: bool = Field(False, description="use_cache passed to the sweep (the default is True).")
    rel_tolerance: float = Field(1e-6, gt=0, description="Relative tolerance when matching plotted data to the frame.")

    @model_validator(mode="after")
    def _ranges(self) -> SweepParams:
        if any(len(pair) != 2 or pair[0] > pair[1] for pair in self.lengths):
            raise ValueError("each entry of lengths must be a range [low, high]")
        return self


def sweep_call(context: CheckContext, params: SweepParams) -> tuple[list[int], int, CallOutcome]:
    """The hidden sweep, called once per submission and shared by the sweep checks."""
    rng = context.rng_for("sweep")
    base = rng.choice(params.base_texts)
    lengths = [rng.randint(low, high) for low, high in params.lengths]
    max_new_tokens = rng.randint(*params.tokens)
    key = f"sweep:{params.function}:{params.model}:{base}:{lengths}:{max_new_tokens}:{params.use_cache}"
    outcome = context.once(
        key,
        lambda: context.call_with_model(
            params.function,
            params.model,
            literal(base),
            literal(lengths),
            literal(max_new_tokens),
            literal(params.use_cache),
            figures=True,
        ),
    )
    return lengths, max_new_tokens, outcome


def _sweep_frame(context: CheckContext, params: SweepParams, lengths: list[int], outcome: CallOutcome) -> Frame:
    call = f"{params.function}(model, tokenizer, base_text, {lengths}, ...)"
    misuse = cuda_misuse(outcome, params.function, context.on_cuda)
    if misuse is not None:
        raise StopCheck(misuse)
    frame = context.returned(outcome, call, FRAME)
    missing = [column for column in SWEEP_COLUMNS if column not in frame.columns]
    if missing:
        raise StopCheck(
            Verdict.failed(
                f"The sweep's DataFrame has no column {', '.join(missing)} (it has {', '.join(map(str, frame.columns))}).",
                expected=", ".join(SWEEP_COLUMNS),
                found=", ".join(map(str, frame.columns)),
            )
        )
    if frame.length != len(lengths):
        raise StopCheck(
            Verdict.failed(
                f"The sweep over {len(lengths)} lengths {lengths} returned {frame.length} rows: one row per length.",
                expected=f"{len(lengths)} rows",
                found=f"{frame.length} rows",
            )
        )
    return frame


def _timed_per_row(frame: Frame, outcome: CallOutcome) -> list[GenerateEvent | None]:
    """For each row, the last generate call whose prompt had that row's prompt_tokens."""
    events = outcome.generate_events()
    timed: list[GenerateEvent | None] = []
    for tokens in frame.column("prompt_tokens"):
        matching = [e for e in events if (shape := e["input_shape"]) and is_number(tokens) and shape[-1] == tokens]
        timed.append(matching[-1] if matching else None)
    return timed


@dataclass(frozen=True)
class Sweep:
    """The hidden sweep's inputs, its call and the frame it returned."""

    lengths: list[int]
    max_new_tokens: int
    outcome: CallOutcome
    frame: Frame


def sweep_result(context: CheckContext, params: SweepParams) -> Sweep:
    """The hidden sweep and its returned frame, or stop with why there is none."""
    lengths, max_new_tokens, outcome = sweep_call(context, params)
    return Sweep(lengths, max_new_tokens, outcome, _sweep_frame(context, params, lengths, outcome))


@check_kind("sweep_rows", SweepParams)
def sweep_rows(context: CheckContext, params: SweepParams) -> Verdict:
    """sweep_prompt_lengths returns one row per length, each row the prompt measured and positive metrics."""
    sweep = sweep_result(context, params)
    lengths, outcome, frame = sweep.lengths, sweep.outcome, sweep.frame
    prompt_tokens = frame.column("prompt_tokens")
    timed = _timed_per_row(frame, outcome)
    measured = sorted({shape[-1] for e in outcome.generate_events() if (shape := e["input_shape"])})
    for column in SWEEP_COLUMNS:
        bad = [v for v in frame.column(column) if not is_number(v) or float(v) <= 0]
        if bad:
            return Verdict.failed(
                f"Column {column} of the sweep should hold positive numbers, but it holds {kind_of(bad[0])}.",
                found=kind_of(bad[0]),
            )
    if any(event is None for event in timed):
        targets = [length for length, event in zip(lengths, timed, strict=True) if event is None]
        reported = [tokens for tokens, event in zip(prompt_tokens, timed, strict=True) if event is None]
        return Verdict.failed(
            f"prompt_tokens reads {reported}, but no generate call had a prompt of that many tokens "
            f"(the prompts measured had {measured} tokens; targets {targets}): report the tokenized length "
            "of the prompt that was measured.",
            expected=f"prompt lengths among {measured}",
            found=str(reported),
        )
    return Verdict.passed(f"The sweep returns one row per length with {', '.join(SWEEP_COLUMNS)}.")


@check_kind("sweep_plots", SweepParams)
def sweep_plots(context: CheckContext, params: SweepParams) -> Verdict:
    """sweep_prompt_lengths draws latency and tokens/s against prompt length, with labelled axes."""
    sweep = sweep_result(context, params)
    return _judge_plots(params, sweep.frame, sweep.lengths, sweep.outcome)


def _close(a: list[float | None] | None, b: list[float], rel: float) -> bool:
    return (
        a is not None
        and len(a) == len(b)
        and all(x is not None and math.isclose(x, y, rel_tol=rel, abs_tol=1e-12) for x, y in zip(a, b, strict=True))
    )


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
    found: dict[str, FigureAxes] = {}
    for name, ys in wanted.items():
        for ax in axes:
            for series in ax["series"]:
                if any(_close(series.get("y"), y, params.rel_tolerance) for y in ys) and any(
                    _close(series.get("x"), x, params.rel_tolerance) for x in xs
                ):
                    found.setdefault(name, ax)
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
        for name, ax in found.items()
        if not str(ax["xlabel"]).strip() or not str(ax["ylabel"]).strip()
    ]
    if unlabelled:
        return Verdict.failed(
            f"{'; '.join(unlabelled).capitalize()}: label both axes with what they show and their units "
            "(ax.set_xlabel('Prompt length (tokens)'), ax.set_ylabel('Latency (s)')).",
            expected="labelled x and y axes on both plots",
            found="; ".join(unlabelled),
        )
    return Verdict.passed("The sweep plots latency and tokens/s against prompt length, with labelled axes.")


# --------------------------------------------------------------------------------------
# sweep_precisions
# --------------------------------------------------------------------------------------


class PrecisionSweepParams(TargetParams):
    """A hidden precision sweep."""

    model: str = Field("gpt2", description="The one candidate passed.")
    precisions: list[str] = Field(["float32", "float16"], min_length=1, description="Precisions passed.")
    prompts: list[str] = Field(min_length=1, description="Hidden prompts; one is drawn.")
    tokens: list[int] = Field([8, 16], min_length=2, max_length=2, description="Range [low, high] of max_new_tokens.")


def precision_sweep_call(context: CheckContext, params: PrecisionSweepParams) -> tuple[str, int, CallOutcome]:
    """The hidden precision sweep, called once per submission and shared by its checks."""
    rng = context.rng_for("precision-sweep")
    prompt, max_new_tokens = rng.choice(params.prompts), rng.randint(*params.tokens)
    key = f"precision-sweep:{params.function}:{params.model}:{params.precisions}:{prompt}:{max_new_tokens}"
    outcome = context.once(
        key,
        lambda: context.call(
            params.function, literal([params.model]), literal(list(params.precisions)), literal(prompt), literal(max_new_tokens)
        ),
    )
    return prompt, max_new_tokens, outcome


def _segments(events: list[GenerateEvent]) -> list[list[GenerateEvent]]:
    """Generate calls split where the model or its dtype changes: one segment per precision measured."""
    segments: list[list[GenerateEvent]] = []
    for event in events:
        if segments and (segments[-1][-1]["model_serial"], segments[-1][-1]["model_dtype"]) == (
            event["model_serial"],
            event["model_dtype"],
        ):
            segments[-1].append(event)
        else:
            segments.append([event])
    return segments


@dataclass(frozen=True)
class PrecisionSweep:
    """The hidden precision sweep's call, what it returned, and each precision as the student's resolve_precision resolves it."""

    call: str
    max_new_tokens: int
    outcome: CallOutcome
    value: dict[str, Any]
    resolved: dict[str, tuple[str, str]]


def precision_sweep_result(context: CheckContext, params: PrecisionSweepParams) -> PrecisionSweep:
    """The hidden precision sweep and its returned dict, or stop with why there is none."""
    prompt, max_new_tokens, outcome = precision_sweep_call(context, params)
    call = f"{params.function}([{params.model!r}], {params.precisions!r}, {prompt!r}, {max_new_tokens})"
    misuse = cuda_misuse(outcome, params.function, context.on_cuda)
    if misuse is not None:
        raise StopCheck(misuse)
    value = context.returned(outcome, call, keyed_by("dtype label"))
    device = "cuda" if context.on_cuda else "cpu"
    resolved = {precision: student_resolution(context, precision, device) for precision in params.precisions}
    return PrecisionSweep(call, max_new_tokens, outcome, value, resolved)


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


@check_kind("precision_sweep_keys", PrecisionSweepParams)
def precision_sweep_keys(context: CheckContext, params: PrecisionSweepParams) -> Verdict:
    """sweep_precisions keys its results by the dtype labels resolve_precision gives, each holding the metrics of measure_generation."""
    sweep = precision_sweep_result(context, params)
    call, value, resolved = sweep.call, sweep.value, sweep.resolved
    labels = {label for _, label in resolved.values()}
    if set(value) != labels:
        requested = set(value) == set(params.precisions)
        return Verdict.failed(
            f"{call} returned the keys {sorted(map(str, value))}, but the dtype labels are {sorted(labels)}"
            + (": key each result by the label resolve_precision gives, not by the precision requested." if requested else "."),
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
    return Verdict.passed(f"The precision sweep is keyed by the dtype labels {sorted(labels)}.")


@check_kind("precision_sweep_fp16_cuda", PrecisionSweepParams)
def precision_sweep_fp16_cuda(context: CheckContext, params: PrecisionSweepParams) -> Verdict:
    """On CUDA, the float16 run of sweep_precisions really uses a float16 model."""
    sweep = precision_sweep_result(context, params)
    return judge_fp16_run(sweep, params)


def judge_fp16_run(sweep: PrecisionSweep, params: PrecisionSweepParams) -> Verdict:
    """Whether a timed generate of the sweep ran a float16 model, when a precision resolves to float16."""
    timed = timed_per_precision(sweep, params)
    wanted = [p for p in params.precisions if sweep.resolved[p][0] == "torch.float16"]
    dtypes = [event["model_dtype"] for event in timed]
    if wanted and "torch.float16" not in dtypes:
        return Verdict.failed(
            f"On CUDA, no timed generate of the precision sweep ran a float16 model (dtypes {dtypes}): "
            "load the model in float16 (or move it with model.to(torch.float16)) for the float16 run.",
            expected="a float16 model for the float16 run",
            found=str(dtypes),
        )
    return Verdict.passed("On CUDA, the float16 run really uses a float16 model.")
