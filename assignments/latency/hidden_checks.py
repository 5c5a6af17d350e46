"""Hidden check kinds of the ``latency`` assignment: those only its hidden checks use.

The student kit does not ship this module (only ``checks.py``), so neither these kinds' logic nor
their default inputs reach students.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from grader.checks.base import CheckContext, TargetParams, Verdict, check_kind, first_failure
from grader.checks.identity import other_model
from grader.checks.shapes import STRING
from grader.checks.timing import (
    judge_generate_inputs,
    judge_new_tokens,
    judge_rates,
    judge_timed_call,
    prompt_width,
)
from grader.kernel.harness import CallOutcome, literal
from grader.kernel.protocol import GenerateEvent
from grader.kernel.values import kind_of

from .checks import (
    TIMING_GUIDANCE,
    LoaderParams,
    MeasureParams,
    PrecisionSweepParams,
    SweepParams,
    _loaded,
    _missing_id,
    _resolve,
    expect_raise,
    precision_sweep_result,
    sweep_result,
    timed_measurements,
    timed_per_precision,
)


class PromptParams(TargetParams):
    """Hidden base texts and targets for build_prompt."""

    model: str = Field("gpt2", description="Hub ID of the tokenizer.")
    base_texts: list[str] = Field(min_length=1, description="Hidden base texts; some are drawn.")
    targets: list[int] = Field([60, 300], min_length=2, max_length=2, description="Range [low, high] of target token counts.")
    cases: int = Field(3, ge=1, description="How many (base text, target) cases are drawn.")
    slack: int = Field(2, ge=0, description="Tokens a join may add beyond one repetition of the base text.")


@check_kind("prompt_building", PromptParams)
def prompt_building(context: CheckContext, params: PromptParams) -> Verdict:
    """build_prompt reaches the target token count on hidden texts, without going a repetition past it."""
    reference_tokenizer = context.models.tokenizer(params.model)

    def count(text: str) -> int:
        return len(reference_tokenizer(text)["input_ids"])

    bases = context.rng.sample(params.base_texts, min(params.cases, len(params.base_texts)))
    for base in bases:
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
    return Verdict.passed(f"{params.function} reaches the target token count on {len(bases)} hidden base texts.")


class InvalidPrecisionParams(TargetParams):
    """Values resolve_precision must reject, drawn at grading time."""

    invalid: list[str] = Field(
        ["float64", "int8", "float8", "int4", "double", "fp64"],
        min_length=1,
        description="Values that must be rejected (no plausible alias of float32/float16 such as 'half' or 'bfloat16').",
    )
    draws: int = Field(2, ge=1, description="How many invalid values are drawn.")


@check_kind("precision_invalid", InvalidPrecisionParams)
def precision_invalid(context: CheckContext, params: InvalidPrecisionParams) -> Verdict:
    """resolve_precision rejects other values with a ValueError naming float32 and float16."""
    for value in context.rng.sample(params.invalid, min(params.draws, len(params.invalid))):
        call = f"{params.function}({value!r}, 'cpu')"
        outcome = _resolve(context, params.function, value, "cpu")
        exception = expect_raise(outcome, call)
        if exception is None:
            return Verdict.failed(
                f"{call} returned {kind_of(outcome.value)} instead of raising ValueError: accept only float32 and float16.",
                expected="ValueError",
                found=f"returned {kind_of(outcome.value)}",
            )
        if exception.type != "ValueError":
            return Verdict.failed(f"{call} raised {exception.type}, not ValueError.", expected="ValueError", found=exception.type)
        missing = [name for name in ("float32", "float16") if name not in exception.message.casefold()]
        if missing:
            return Verdict.failed(
                f"{call} raised ValueError({exception.message!r}), which does not name the accepted value(s) {' and '.join(missing)}.",
                expected="a message naming float32 and float16",
                found=repr(exception.message),
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
    # The model is known by its weights (a name_or_path can be set to anything); the tokenizer by its name.
    other = other_model(context, loaded_model, params.model_id)
    names = {
        "tokenizer": repr(loaded_tokenizer.name_or_path),
        "model": f"another id than {params.model_id!r} ({other})" if other else repr(params.model_id),
    }
    if loaded_tokenizer.name_or_path != params.model_id or other or model_id != params.model_id:
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
    """measure_generation's latency_s is the duration of the timed generate call alone."""
    measurements = timed_measurements(context, params)
    verdict = first_failure(judge_timed_call(params, m.latency, m.outcome, m.max_new_tokens) for m in measurements)
    return verdict or Verdict.passed(f"{params.function} times only the generate call ({TIMING_GUIDANCE}).")


@check_kind("measure_new_tokens", MeasureParams)
def measure_new_tokens(context: CheckContext, params: MeasureParams) -> Verdict:
    """measure_generation counts the tokens really generated (also when the model stops early) and derives its rates."""
    measurements = timed_measurements(context, params)
    verdict = first_failure(_judge_new_tokens(params, m.value, m.timed, m.max_new_tokens) for m in measurements)
    return verdict or Verdict.passed(
        f"{params.function} counts the tokens really generated, also when the model stops early, and derives its rates from them."
    )


@check_kind("measure_settings", MeasureParams)
def measure_settings(context: CheckContext, params: MeasureParams) -> Verdict:
    """measure_generation passes max_new_tokens and use_cache through, with the inputs on the model's device."""
    for measured in timed_measurements(context, params):
        timed, max_new_tokens, use_cache = measured.timed, measured.max_new_tokens, measured.use_cache
        wrong_inputs = judge_generate_inputs(
            context.models.tokenizer(params.model), timed, [measured.prompt], max_new_tokens, params.function
        )
        if wrong_inputs is not None:
            return wrong_inputs
        problems = []
        if timed["use_cache"] is not use_cache:
            problems.append(f"use_cache={timed['use_cache']} instead of {use_cache}")
        if str(timed["input_device"]) != str(timed["model_device"]):
            problems.append(f"the inputs are on {timed['input_device']} but the model is on {timed['model_device']}")
        if problems:
            return Verdict.failed(
                f"In {measured.call}, the timed generate ran with {'; '.join(problems)}: pass the arguments through to model.generate "
                "and move the inputs with .to(model.device).",
                expected=f"max_new_tokens={max_new_tokens}, use_cache={use_cache}, inputs on the model's device",
                found="; ".join(problems),
            )
    return Verdict.passed(
        f"{params.function} passes max_new_tokens and use_cache through, with the inputs on the model's device."
    )


def _judge_new_tokens(params: MeasureParams, value: dict[str, Any], timed: GenerateEvent, max_new_tokens: int) -> Verdict | None:
    return judge_new_tokens(value["new_tokens"], timed, max_new_tokens) or judge_rates(
        params.rate_tolerance, float(value["latency_s"]), float(value["new_tokens"]), value["tokens_per_s"], value["ms_per_token"]
    )


@check_kind("sweep_settings", SweepParams)
def sweep_settings(context: CheckContext, params: SweepParams) -> Verdict:
    """Every timed generate of the sweep runs with the max_new_tokens and use_cache the sweep was given."""
    sweep = sweep_result(context, params)
    lengths, max_new_tokens, outcome = sweep.lengths, sweep.max_new_tokens, sweep.outcome
    problems = []
    drops_cache = None
    for event in _timed_per_prompt(outcome, min(lengths)):
        tokens = (event["input_shape"] or [0])[-1]
        if event["max_new_tokens"] != max_new_tokens:
            problems.append(f"the {tokens}-token prompt ran with max_new_tokens={event['max_new_tokens']}")
        if event["use_cache"] is not params.use_cache:
            drops_cache = _measure_drops_use_cache(context, params) if drops_cache is None else drops_cache
            if not drops_cache:
                problems.append(f"the {tokens}-token prompt ran with use_cache={event['use_cache']}")
    if problems:
        return Verdict.failed(
            f"Called with max_new_tokens={max_new_tokens} and use_cache={params.use_cache}, {'; '.join(problems)}: "
            "pass both to every measurement so the rows are comparable.",
            expected=f"max_new_tokens={max_new_tokens}, use_cache={params.use_cache} in every timed generate",
            found="; ".join(problems),
        )
    note = " (measure_generation itself drops use_cache, which is charged in its own check)" if drops_cache else ""
    return Verdict.passed(f"Every timed generate of the sweep used the same max_new_tokens and use_cache{note}.")


def _timed_per_prompt(outcome: CallOutcome, shortest: int) -> list[GenerateEvent]:
    """The last generate call of each distinct prompt of at least ``shortest`` tokens (short warm-up prompts aside)."""
    last: dict[tuple[int, ...], GenerateEvent] = {}
    for event in outcome.generate_events():
        if prompt_width(event) >= shortest:
            key = tuple(event["input_ids"] or ())
            last.pop(key, None)
            last[key] = event
    return list(last.values())


def _measure_drops_use_cache(context: CheckContext, params: SweepParams) -> bool:
    """Whether the student's measure_generation itself ignores use_cache (charged in its own check)."""
    # The probe's prompt and length are drawn from the hidden seed: a function cannot recognise it.
    rng = context.rng_for("use-cache-probe")
    prompt, max_new_tokens = rng.choice(params.base_texts), rng.randint(*params.tokens)
    key = f"measure-use-cache:{params.measure_function}:{params.model}:{prompt}:{max_new_tokens}"

    def probe() -> bool:
        outcome = context.call_with_model(
            params.measure_function,
            params.model,
            literal(prompt),
            literal(max_new_tokens),
            literal(params.use_cache),
        )
        events = outcome.generate_events()
        return bool(events) and events[-1]["use_cache"] is not params.use_cache

    return context.once(key, probe)


@check_kind("precision_sweep_settings", PrecisionSweepParams)
def precision_sweep_settings(context: CheckContext, params: PrecisionSweepParams) -> Verdict:
    """Every precision of sweep_precisions is measured with the same prompt and max_new_tokens."""
    sweep = precision_sweep_result(context, params)
    timed, max_new_tokens = timed_per_precision(sweep, params), sweep.max_new_tokens
    problems = []
    prompts = {tuple(event["input_ids"] or ()) for event in timed}
    if len(prompts) > 1:
        problems.append(f"the timed calls used {len(prompts)} different prompts")
    tokens = sorted({str(event["max_new_tokens"]) for event in timed})
    if tokens != [str(max_new_tokens)]:
        problems.append(f"max_new_tokens was {', '.join(tokens)}")
    if problems:
        return Verdict.failed(
            f"Called with max_new_tokens={max_new_tokens}, {'; '.join(problems)}: measure every precision with the same "
            "prompt and max_new_tokens, or the comparison is not fair.",
            expected=f"one prompt, max_new_tokens={max_new_tokens} in every timed generate",
            found="; ".join(problems),
        )
    return Verdict.passed("Every precision is measured with the same prompt and max_new_tokens.")
