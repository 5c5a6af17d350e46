"""Hidden check kinds of the ``latency`` assignment: those only its hidden checks use.

The student kit does not ship this module (only ``checks.py``), so neither these kinds' logic nor
their default inputs reach students.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from grader.checks.base import CheckContext, StopCheck, TargetParams, Verdict, check_kind, first_failure
from grader.checks.behaviour import (
    Generation,
    carrying,
    describe_generation,
    unmatched_generations,
    unmatched_sentence,
)
from grader.checks.calls import Argument, graded_call, handed
from grader.checks.identity import other_model
from grader.checks.loss import source_names_hub_id, tokenizer_from_another_id, tokenizer_source
from grader.checks.timing import (
    judge_measurement,
    judge_timed_latency,
    tokens_limit,
)
from grader.grading.replay import NotRecorded
from grader.kernel.protocol import GenerateEvent
from grader.kernel.values import kind_of

from .checks import (
    PRECISION_ASPECTS,
    SWEEP_ASPECTS,
    TIMING_GUIDANCE,
    LoaderParams,
    MeasureParams,
    PrecisionSweepParams,
    SweepParams,
    _dtype,
    _loaded,
    _loader_call,
    _missing_id,
    _resolve,
    expect_raise,
    measured_calls,
    precision_sweeps,
    sweep_calls,
    sweep_fits,
    timed_measurements,
    timed_per_precision,
)


class InvalidPrecisionParams(TargetParams):
    """Values resolve_precision must reject, drawn at grading time."""

    invalid: list[str] = Field(
        ["float64", "int8", "float8", "int4", "double", "fp64", "int32", "int16", "uint16", "tfloat32"],
        min_length=1,
        description=(
            "Values that must be rejected (no plausible alias of float32/float16 such as 'half', or 'float': torch.float "
            "is torch.float32)."
        ),
    )
    other_dtypes: dict[str, str] = Field(
        {"bfloat16": "torch.bfloat16"},
        description="Other dtypes' names (asked for 'cuda'): rejected, or resolved to that very dtype (an extra some "
        "students add), never to float16 or float32 (a resolver that finds 'float16' inside 'bfloat16').",
    )
    draws: int = Field(
        10, ge=1, description="How many invalid values are drawn (each a cheap call: near misses such as int32 among them)."
    )


@check_kind("precision_invalid", InvalidPrecisionParams)
def precision_invalid(context: CheckContext, params: InvalidPrecisionParams) -> Verdict:
    """resolve_precision rejects other values with a ValueError naming float32 and float16."""
    # Drawn values on the CPU, and one where CUDA is (not drawn: the other checks' draws stay as they were).
    asked = [(value, "cpu") for value in context.rng.sample(params.invalid, min(params.draws, len(params.invalid)))]
    for value, device in [*asked, (params.invalid[0], "cuda")]:
        call = f"{params.function}({value!r}, {device!r})"
        outcome = _resolve(context, params.function, value, device)
        exception = expect_raise(outcome, call)
        if exception is None:
            return Verdict.failed(
                f"{call} returned {kind_of(outcome.value)} instead of raising ValueError: accept only float32 and float16.",
                expected="ValueError",
                found=f"returned {kind_of(outcome.value)}",
            )
        if not exception.is_a("ValueError"):
            return Verdict.failed(f"{call} raised {exception.type}, not ValueError.", expected="ValueError", found=exception.type)
        missing = [name for name in ("float32", "float16") if name not in exception.message.casefold()]
        if missing:
            return Verdict.failed(
                f"{call} raised ValueError({exception.message!r}), which does not name the accepted value(s) {' and '.join(missing)}.",
                expected="a message naming float32 and float16",
                found=repr(exception.message),
            )
    for value, dtype in params.other_dtypes.items():
        call = f"{params.function}({value!r}, 'cuda')"
        outcome = _resolve(context, params.function, value, "cuda")
        if outcome.ok:
            resolved = outcome.value[0] if isinstance(outcome.value, (tuple, list)) and outcome.value else outcome.value
            name = getattr(resolved, "name", None)
            if name != dtype:
                return Verdict.failed(
                    f"{call} returned {name or kind_of(resolved)}: {value} is another dtype; accept only float32 and float16 "
                    "(compare the whole name, not a part of it).",
                    expected=f"ValueError (or {dtype})",
                    found=str(name or kind_of(resolved)),
                )
    return Verdict.passed(f"{params.function} rejects other values with a ValueError naming float32 and float16.")


@check_kind("latency_loader_fallthrough", LoaderParams)
def latency_loader_fallthrough(context: CheckContext, params: LoaderParams) -> Verdict:
    """A candidate id that does not exist falls through to the next one."""
    candidates = [_missing_id(context, params, 0), params.model_id]
    _, loaded_model, model_id, _ = _loaded(context, params, candidates)
    other = other_model(context, loaded_model, params.model_id)  # its weights, not the name it carries
    if model_id != params.model_id or other:
        model_text = f"another model ({other})" if other else f"the {params.model_id!r} model"
        return Verdict.failed(
            f"With candidates {candidates!r}, the loader returned model_id {model_id!r} and {model_text}: "
            f"the first id that loads ({params.model_id!r}) should win.",
            expected=params.model_id,
            found=f"model_id {model_id!r}, {model_text}",
        )
    return Verdict.passed(f"A candidate that does not exist falls through to the next ({params.model_id!r}).")


@check_kind("latency_loader_same_id", LoaderParams)
def latency_loader_same_id(context: CheckContext, params: LoaderParams) -> Verdict:
    """The tokenizer and the model both come from the id the loader returns."""
    candidates = [params.model_id, "gpt2" if params.model_id != "gpt2" else "distilgpt2"]
    loaded_tokenizer, loaded_model, model_id, _ = _loaded(context, params, candidates)
    # The model is known by its weights, the tokenizer by the id it was loaded from (a name_or_path can be set to
    # anything).
    other = other_model(context, loaded_model, params.model_id)
    tokenizer_from = tokenizer_from_another_id(
        context, _loader_call(context, params, candidates).events, loaded_tokenizer, params.model_id
    )
    if not tokenizer_from:
        # A tokenizer from a folder of the student's: which id it holds cannot be told, but the same folder whichever
        # candidate loads is a loader that ignores the id it tries.
        source = tokenizer_source(context, _loader_call(context, params, candidates).events, loaded_tokenizer)
        if source and not source_names_hub_id(source):
            swapped = [candidates[1], candidates[0]]
            other_tokenizer, _, other_id, _ = _loaded(context, params, swapped)
            if (
                other_id != model_id
                and tokenizer_source(context, _loader_call(context, params, swapped).events, other_tokenizer) == source
            ):
                tokenizer_from = f"{source!r} (also for {other_id!r})"
    names = {
        "tokenizer": tokenizer_from or repr(params.model_id),
        "model": f"another id than {params.model_id!r} ({other})" if other else repr(params.model_id),
    }
    if tokenizer_from or other or model_id != params.model_id:
        found = ", ".join(f"{part} from {name}" for part, name in names.items()) + f", model_id {model_id!r}"
        return Verdict.failed(
            f"With candidates {candidates!r}, the tokenizer and the model do not both come from the returned id: "
            "load both from the candidate being tried, or the tokenizer's ids will not match the model's vocabulary.",
            expected=f"tokenizer, model and model_id all {params.model_id!r}",
            found=found,
        )
    return Verdict.passed("The tokenizer and the model come from the same id, the one returned.")


@check_kind("measure_latency", MeasureParams)
def measure_latency(context: CheckContext, params: MeasureParams) -> Verdict:
    """measure_generation's latency_s is what a timer of its timed generate call reads (a best-of or median of
    repeated timed calls too), and only it."""
    measurements = timed_measurements(context, params)
    verdict = first_failure(
        judge_timed_latency(params, m.latency, m.measurement.outcome, m.timed, m.measurement.max_new_tokens) for m in measurements
    )
    return verdict or Verdict.passed(f"{params.function} times only the generate call ({TIMING_GUIDANCE}).")


@check_kind("measure_new_tokens", MeasureParams)
def measure_new_tokens(context: CheckContext, params: MeasureParams) -> Verdict:
    """measure_generation counts the tokens really generated (also when the model stops early) and derives its rates."""
    measurements = timed_measurements(context, params)
    verdict = first_failure(
        _judge_new_tokens(params, m.measurement.value, m.timed, m.measurement.max_new_tokens) for m in measurements
    )
    return verdict or Verdict.passed(
        f"{params.function} counts the tokens really generated, also when the model stops early, and derives its rates from them."
    )


@check_kind("measure_settings", MeasureParams)
def measure_settings(context: CheckContext, params: MeasureParams) -> Verdict:
    """measure_generation's timed generate does what the reference's does on the same inputs: the model it was given,
    the prompt it was given, its max_new_tokens and use_cache, with the inputs on the model's device."""
    for measured in measured_calls(context, params):
        # A warm-up on another model is the warm-up check's: what this one judges is the timed call.
        missing = measured.unmatched(context)
        if missing:
            decode = context.models.tokenizer(measured.hub_id).decode
            return Verdict.failed(
                f"In {measured.call}, the timed generate does not do what the reference's does. "
                + unmatched_sentence(missing[0], decode)
                + " Pass the prompt, max_new_tokens and use_cache you are given to model.generate, on the model you are "
                "given, with the inputs moved to model.device.",
                expected=describe_generation(missing[0].wanted, decode),
                found=describe_generation(missing[0].closest, decode) if missing[0].closest else "no generate call",
            )
    return Verdict.passed(
        f"{params.function} generates the prompt it is given, with the max_new_tokens and use_cache it is given, on the "
        "model it is given, with the inputs on the model's device."
    )


def _judge_new_tokens(
    params: MeasureParams, value: dict[str, Any], timed: Sequence[GenerateEvent], max_new_tokens: int
) -> Verdict | None:
    return judge_measurement(params.rate_tolerance, value, timed, max_new_tokens)


@check_kind("sweep_settings", SweepParams)
def sweep_settings(context: CheckContext, params: SweepParams) -> Verdict:
    """The sweep's timed generate calls do what the reference's do on the same inputs: one per length it was given,
    of a prompt built from the base text it was given, with its max_new_tokens and use_cache, on its model."""
    notes = set()
    for sweep in sweep_calls(context, params):
        reference = sweep.graded.reference()
        missing = unmatched_generations(
            sweep.graded.behaviour, reference, sweep_fits(context, params, sweep, own=False), SWEEP_ASPECTS
        )
        if missing:  # what the notebook's own build_prompt and measure_generation do is theirs to answer for
            missing = unmatched_generations(sweep.graded.behaviour, reference, sweep_fits(context, params, sweep), SWEEP_ASPECTS)
        if missing:
            forgiven = _measure_ignores(
                context, params.measure_function, sweep.hub_id, params.base_texts, params.tokens, sweep.use_cache
            )
            missing = [m for m in missing if not (m.differ and set(m.differ) <= forgiven)]
            notes |= forgiven
        # Every generate with the max_new_tokens asked runs with the use_cache asked too: a length timed without the
        # cache beside an untimed run with it (which the matching above finds) is measured otherwise.
        otherwise = [
            event
            for event in sweep.outcome.generate_events()
            if tokens_limit(event) == sweep.max_new_tokens
            and isinstance(event["use_cache"], bool)
            and event["use_cache"] != sweep.use_cache
        ]
        if otherwise and "use_cache" not in notes:
            decode = context.models.tokenizer(sweep.hub_id).decode
            return Verdict.failed(
                f"In {sweep.call}, a prompt is generated with use_cache={otherwise[0]['use_cache']} where the sweep is "
                f"asked for use_cache={sweep.use_cache} ({describe_generation(Generation.of(otherwise[0], {}), decode)}): "
                "pass the use_cache you are given to every measurement so the rows are comparable.",
                expected=f"use_cache={sweep.use_cache} in every generate",
                found=f"use_cache={otherwise[0]['use_cache']}",
            )
        if missing:
            decode = context.models.tokenizer(sweep.hub_id).decode
            lengths = ", ".join(map(str, sweep.lengths))
            return Verdict.failed(
                f"In {sweep.call}, the sweep does not measure what the reference measures (a prompt of the base text for "
                f"each length {lengths}, with max_new_tokens={sweep.max_new_tokens} and use_cache={sweep.use_cache}). "
                + unmatched_sentence(missing[0], decode)
                + " Build each prompt from the base text and lengths you are given, and pass max_new_tokens and use_cache "
                "to every measurement so the rows are comparable.",
                expected=f"{len(sweep.lengths)} timed generate calls of prompts of the base text, max_new_tokens="
                f"{sweep.max_new_tokens}, use_cache={sweep.use_cache}",
                found=describe_generation(missing[0].closest, decode) if missing[0].closest else "no generate call",
            )
    dropped = " and ".join(sorted(DROPPED[aspect] for aspect in notes))
    note = f" ({params.measure_function} itself drops {dropped}, which is charged in its own check)" if notes else ""
    return Verdict.passed(
        f"The sweep measures a prompt of the base text for every length it is given, with its max_new_tokens and use_cache{note}."
    )


@check_kind("precision_sweep_settings", PrecisionSweepParams)
def precision_sweep_settings(context: CheckContext, params: PrecisionSweepParams) -> Verdict:
    """sweep_precisions's timed generate calls do what the reference's do on the same inputs: one per precision, on the
    model its candidates load, of the prompt it was given, with the max_new_tokens it was given."""
    notes = set()
    for sweep in precision_sweeps(context, params):
        assert sweep.graded is not None
        reference = sweep.graded.reference()
        fits = carrying(context.models.tokenizer(sweep.hub_id))
        missing = unmatched_generations(sweep.graded.behaviour, reference, fits, PRECISION_ASPECTS)
        if missing:  # what the notebook's own measure_generation and loader do is theirs to answer for
            forgiven = _measure_ignores(context, params.measure_function, sweep.hub_id, params.prompts, params.tokens, True)
            forgiven |= _loader_loads_another(context, params, sweep.hub_id)
            missing = [m for m in missing if not (m.differ and set(m.differ) <= forgiven)]
            notes |= forgiven
        if missing:
            decode = context.models.tokenizer(sweep.hub_id).decode
            return Verdict.failed(
                f"In {sweep.call}, the sweep does not measure what the reference measures (each of the "
                f"{len(reference.required())} precisions on the model its candidates load, with the prompt and "
                f"max_new_tokens={sweep.max_new_tokens} it is given). "
                + unmatched_sentence(missing[0], decode)
                + " Measure every precision, each with a run of its own, with the prompt and max_new_tokens you are given.",
                expected=f"{len(reference.required())} timed generate calls of the prompt passed, max_new_tokens={sweep.max_new_tokens}",
                found=describe_generation(missing[0].closest, decode) if missing[0].closest else "no generate call",
            )
        # On a CPU the dtype is not compared run by run (a notebook whose resolve_precision keeps float16 is charged
        # in its own check), but every run computes in a dtype some precision resolves to, the notebook's way or the
        # reference's: a float32 run on a float64 copy reads slower than float32 is.
        if not context.on_cuda:
            allowed = {dtype.removeprefix("torch.") for dtype, _ in sweep.resolved.values()}
            for precision in sweep.resolved:
                if context.reference is not None:
                    with contextlib.suppress(NotRecorded):
                        allowed.add(str(context.reference.resolve_precision(precision, "cpu")[0]).removeprefix("torch."))
            strays = sorted({_dtype(event).removeprefix("torch.") for event in timed_per_precision(sweep, params)} - allowed)
            if strays:
                return Verdict.failed(
                    f"In {sweep.call}, a precision is timed on a {strays[0]} model: no precision asked resolves to "
                    f"{strays[0]} (they resolve to {', '.join(sorted(allowed))}). Time each precision on the model "
                    "loaded in the dtype resolve_precision gives.",
                    expected=" or ".join(sorted(allowed)),
                    found=strays[0],
                )
        # The reference measures every precision with the same settings: one measured with the KV cache and another
        # without it compares the cache, not the precision. Every generate of the sweep with the max_new_tokens asked
        # (a run timed without the cache, then an untimed one with it for show, is one measured without it).
        asked = [event for event in sweep.outcome.generate_events() if tokens_limit(event) == sweep.max_new_tokens]
        caches = {(str(event["model_dtype"]), event["use_cache"]) for event in [*timed_per_precision(sweep, params), *asked]}
        if len({cache for _, cache in caches}) > 1:
            shown = ", ".join(f"{dtype.removeprefix('torch.')}: use_cache={cache}" for dtype, cache in sorted(caches, key=str))
            return Verdict.failed(
                f"In {sweep.call}, the precisions are not measured alike ({shown}): a run with the KV cache and a run "
                "without it differ by the cache, not by the precision. Measure every precision with the same settings.",
                expected="one use_cache for every precision",
                found=shown,
            )
    dropped = " and ".join(sorted(DROPPED[aspect] for aspect in notes))
    note = f" ({params.measure_function} itself drops {dropped}, which is charged in its own check)" if notes else ""
    return Verdict.passed(f"Every precision is measured with the prompt and max_new_tokens the sweep is given{note}.")


DROPPED = {"limit": "max_new_tokens", "use_cache": "use_cache", "model": "the model it is given"}


def _loader_loads_another(context: CheckContext, params: PrecisionSweepParams, hub_id: str) -> set[str]:
    """``{"model"}`` where the notebook's loader, given ``hub_id`` alone, loads another model (charged in the loader's
    checks, not again in the sweep that calls it)."""
    loader = LoaderParams(function=params.loader_function, model_id=hub_id, precision="float32")
    try:
        _, loaded_model, _, _ = _loaded(context, loader, [hub_id])
    except StopCheck:
        return {"model"}
    return {"model"} if other_model(context, loaded_model, hub_id) else set()


def _measure_ignores(
    context: CheckContext, measure_function: str, hub_id: str, prompts: list[str], tokens: list[int], use_cache: bool
) -> set[str]:
    """The settings (``limit``, ``use_cache``) the notebook's measure_generation itself does not pass to its timed
    generate (charged in its own check, not again in a sweep's)."""
    # The probe's prompt and length are drawn from the hidden seed: a function cannot recognise it.
    rng = context.rng_for("measure-probe")
    prompt, max_new_tokens = rng.choice(prompts), rng.randint(*tokens)
    objects = handed(context, hub_id)
    arguments = (
        objects.model,
        objects.tokenizer,
        Argument.value(prompt),
        Argument.value(max_new_tokens),
        Argument.value(use_cache),
    )
    memo = f"measure-probe:{measure_function}:{hub_id}:{prompt}:{max_new_tokens}:{use_cache}"
    graded = graded_call(context, measure_function, *arguments, memo=memo)
    if not graded.outcome.ok:
        return set()
    fits = carrying(context.models.tokenizer(hub_id))
    reference = graded.reference()
    # Only what its timed generate does otherwise: a generate of its own on another model (a warm-up on a model it
    # loads) is charged in its own checks and forgives a sweep nothing (the sweep's timed generates still must run the
    # model the sweep was given).
    missing = unmatched_generations(graded.behaviour, reference, fits, ("model", "limit", "use_cache"))
    return {aspect for unmatched in missing for aspect in unmatched.differ}
