"""Check kinds of the ``ptq-bnb`` assignment (Lesson 3, Exercise 1: bitsandbytes PTQ).

Memory is compared with the reference on the same model; timing is judged against the
instrumented ``generate`` call the student's own function made; configurations are really
loaded and run in the student's kernel; the results table is cross-checked with the generate
calls the notebook's experiment loop made.
"""

from __future__ import annotations

import ast
import math
import re
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from grader.checks.base import (
    CheckContext,
    Params,
    StopCheck,
    TargetParams,
    Verdict,
    check_kind,
    expect_shape,
    expect_type,
    failed_call,
    number,
)
from grader.checks.behaviour import Generation, added_work_text, adds_work, carrying
from grader.checks.calls import Argument, grader_model, grader_tokenizer
from grader.checks.identity import fingerprint_difference, other_model, reference_fingerprint
from grader.checks.numbers import agrees
from grader.checks.shapes import ANY, items, numeric
from grader.checks.timed import Timed, judge_timed_settings, timed_call
from grader.checks.timing import (
    LatencyTolerance,
    agrees_with_timed,
    latency_readings,
    prompt_width,
    sleep_covered,
    tokens_limit,
    upper_bound,
)
from grader.discover.notebook import called_names, code_trees
from grader.grading.replay import reference_side
from grader.kernel.harness import CallOutcome, handle, model, model_spec
from grader.kernel.protocol import GenerateEvent, ModelSpec
from grader.kernel.values import ConfigValue, DType, Frame, Model, Tensor, decode, is_number, kind_of

Quantization = Literal["none", "int8", "nf4", "fp4"]
MB = 1024**2


# --------------------------------------------------------------------------------------
# get_model_memory_footprint
# --------------------------------------------------------------------------------------


Dtype = Literal["auto", "float32", "float16", "bfloat16"]


class MemoryParams(TargetParams):
    """Which model the student's function measures (a hidden check draws it from lists at grading time)."""

    model: str = Field("gpt2", description="Hub ID of the model.")
    quantization: Quantization = Field("none", description="bitsandbytes quantization of the model.")
    dtype: Dtype = Field(
        "auto", description="dtype of the model (for bitsandbytes: of the layers it leaves unquantized); auto: the runtime's."
    )
    models: list[str] = Field(
        default_factory=list, description="If given, the hub ID is drawn from these at grading time (instead of model)."
    )
    dtypes: list[Dtype] = Field(
        default_factory=list, description="If given, the dtype is drawn from these at grading time (instead of dtype)."
    )
    count: int = Field(
        1, ge=1, description="How many models are measured (each another hub ID where ``models`` has several): all must be right."
    )
    quantizations: list[Quantization] = Field(
        default_factory=list,
        description="If given, the quantization of each model measured in turn (instead of quantization): NF4 and FP4.",
    )
    rel_tolerance: float = Field(1e-3, gt=0, lt=0.05, description="Relative tolerance on the MB value (the arithmetic is exact).")


@reference_side
def footprint_mistakes(reference_model: Any) -> dict[str, tuple[float, str]]:
    """What the classic mistakes give on this model, each with the sentence that explains it."""
    param_bytes = sum(p.nelement() * p.element_size() for p in reference_model.parameters())
    param_elements = sum(p.nelement() for p in reference_model.parameters())
    buffer_bytes = sum(b.nelement() * b.element_size() for b in reference_model.buffers())
    buffer_elements = sum(b.nelement() for b in reference_model.buffers())
    total = param_bytes + buffer_bytes
    return {
        "elements": (
            (param_elements + buffer_elements) / MB,
            "counts elements (nelement()) instead of bytes: multiply each tensor's nelement() by its element_size()",
        ),
        "elements, no buffers": (
            param_elements / MB,
            "counts parameter elements instead of bytes, and leaves out the buffers",
        ),
        "no buffers": (
            param_bytes / MB,
            "leaves out the model's buffers (model.buffers(), such as GPT-2's attention mask): add their bytes too",
        ),
        "bytes": (float(total), "returns bytes: divide by 1024**2 to get MB"),
        "kilobytes": (total / 1024, "divides by 1024 once, which gives KB: divide by 1024**2 to get MB"),
        "decimal MB": (total / 1e6, "divides by 10**6: the exercise's MB is 1024**2 bytes"),
    }


@check_kind("memory_footprint", MemoryParams)
def memory_footprint(context: CheckContext, params: MemoryParams) -> Verdict:
    """The student's memory footprint equals the reference's on the same models (hidden: ones the notebook never
    loaded, in dtypes drawn at grading time), every one of them."""
    hub_ids = context.rng.sample(params.models, min(params.count, len(params.models))) if params.models else [params.model]
    hub_ids += [context.rng.choice(params.models or [params.model]) for _ in range(params.count - len(hub_ids))]
    verdicts = []
    # Distinct dtypes where there are enough (one model in float32, another in bfloat16): each kind of tensor counts.
    dtypes = context.rng.sample(params.dtypes, len(hub_ids)) if len(params.dtypes) >= len(hub_ids) else None
    for index, hub_id in enumerate(hub_ids):
        dtype = dtypes[index] if dtypes else context.rng.choice(params.dtypes) if params.dtypes else params.dtype
        quantization = params.quantizations[index % len(params.quantizations)] if params.quantizations else params.quantization
        verdict = _judge_footprint(context, params, hub_id, dtype, quantization)
        if verdict.outcome != "passed":
            return verdict
        verdicts.append(verdict)
    if len(verdicts) == 1:
        return verdicts[0]
    return Verdict.passed(
        " ".join(verdict.message for verdict in verdicts), data={"models": [dict(verdict.data) for verdict in verdicts]}
    )


FOOTPRINT_COARSEST = 0.02  # the roughest rounding of a footprint judged at its precision (relative)


def _judge_footprint(context: CheckContext, params: MemoryParams, hub_id: str, dtype: str, quantization: Quantization) -> Verdict:
    """The student's footprint of one model against the reference's, naming the classic mistake it matches."""
    spec = model_spec(hub_id, quantization, dtype=dtype)
    outcome = context.call(params.function, model(spec))
    value = context.returned(outcome, params.function)
    if isinstance(value, Tensor) and value.values is not None and len(value.values) == 1:
        value = value.values[0]
    expect_shape(value, numeric("a number of MB", "a float (MB)"), params.function)
    reference_model = context.models.model(spec)
    expected = float(context.reference.get_model_memory_footprint(reference_model))  # type: ignore[union-attr]
    # Asked before judging, not only on a wrong value: a student kit replays what the solution asked.
    mistakes = context.expected(footprint_mistakes, reference_model)
    label = {"none": "", "int8": "INT8 ", "nf4": "NF4 4-bit ", "fp4": "FP4 4-bit "}[quantization]
    if dtype != "auto":
        label += f"{dtype} " if quantization == "none" else f"({dtype} elsewhere) "
    what = f"the {label}{hub_id} model"
    found = float(value)
    data = {"model": hub_id, "quantization": quantization, "dtype": dtype, "expected_mb": expected, "found_mb": found}
    # At the precision the function rounds to (15.3 for 15.28 MB), down to a rounding of 2 %: no classic mistake is
    # that close to the truth.
    if agrees(found, expected, params.rel_tolerance, coarsest=FOOTPRINT_COARSEST):
        return Verdict.passed(f"On {what} you report {number(found, 'MB')}, as expected.", data=data)
    # A hidden check names the mistake, never the value: the model it drew is one a later run may draw again.
    hidden = context.check.visibility == "hidden"
    takes = "" if hidden else f" {number(expected, 'MB')}"
    expected_text = "its parameter and buffer bytes / 1024**2 (withheld: a hidden check)" if hidden else number(expected, "MB")
    for name, (mistake, explanation) in mistakes.items():
        if mistake > 0 and agrees(found, mistake, params.rel_tolerance, coarsest=FOOTPRINT_COARSEST):
            return Verdict.failed(
                f"On {what} your function returns {number(found, 'MB')}, but the model takes{takes or ' another amount'}: it {explanation}.",
                expected=expected_text,
                found=number(found, "MB"),
                data={**data, "mistake": name},
            )
    return Verdict.failed(
        f"On {what} your function returns {number(found, 'MB')}, but its parameters and buffers take"
        + (takes if not hidden else " another amount (a hidden check, on a model your notebook never loaded)")
        + ".",
        expected=expected_text,
        found=number(found, "MB"),
        data=data,
    )


# --------------------------------------------------------------------------------------
# generate_text_and_time
# --------------------------------------------------------------------------------------


class GenerateParams(TargetParams):
    """How the student's generate-and-time function is called: two calls, every argument of the second different."""

    model: str = Field("gpt2", description="Hub ID of the model.")
    prompt: str = Field("The capital of France is", description="The prompt passed.")
    max_new_tokens: int = Field(20, ge=1, description="max_new_tokens passed.")
    other_model: str = Field("distilgpt2", description="Hub ID of the model of the second call.")
    other_prompt: str = Field("Once upon a time,", description="The prompt of the second call.")
    other_max_new_tokens: int = Field(12, ge=1, description="max_new_tokens of the second call.")


def _text_and_latency(value: Any, function: str) -> tuple[Any, Any]:
    """The (text, latency) pair, or stop with a message about the return value's shape."""
    first, second = expect_shape(value, items(ANY, ANY, names="(generated_text, latency)"), function)
    if is_number(first) and isinstance(second, str):
        raise StopCheck(
            Verdict.failed(
                f"{function} returns (latency, text): the order must be (generated_text, latency).",
                expected="(str, float)",
                found=f"({kind_of(first)}, {kind_of(second)})",
            )
        )
    return first, second


def generate_call(
    context: CheckContext,
    function: str,
    hub_id: str,
    prompt: str,
    max_new_tokens: int,
    pace_s: float,
    tolerance: LatencyTolerance,
) -> Timed:
    """``function(model, tokenizer, prompt, max_new_tokens)`` on the grader's ``hub_id`` model (a timed call, shared by
    the checks that ask for the same one)."""
    call = f"{function}({hub_id} model, tokenizer, {prompt!r}, {max_new_tokens})"
    arguments = [
        grader_model(context, model_spec(hub_id)),
        grader_tokenizer(context, hub_id),
        Argument.value(prompt),
        Argument.value(max_new_tokens),
    ]
    paced = tolerance.model_copy(update={"pace_s": pace_s})
    return timed_call(
        context,
        paced,
        function,
        arguments,
        hub_id,
        call,
        lambda value: _text_and_latency(value, function)[1],
        memo=f"{call}:{pace_s}",
    )


def decoded_variants(context: CheckContext, hub_id: str, event: GenerateEvent) -> dict[str, str]:
    """The texts a correct decode of this generate call can give (with or without the prompt)."""
    reference_tokenizer = context.models.tokenizer(hub_id)
    output_ids = list(event["output_ids"] or [])
    prompt_length = prompt_width(event)
    variants = {}
    for skip in (True, False):
        variants[f"full, skip_special_tokens={skip}"] = reference_tokenizer.decode(output_ids, skip_special_tokens=skip)
        variants[f"continuation, skip_special_tokens={skip}"] = reference_tokenizer.decode(
            output_ids[prompt_length:], skip_special_tokens=skip
        )
    return variants


@check_kind("generate_output", GenerateParams)
def generate_output(context: CheckContext, params: GenerateParams) -> Verdict:
    """Returns (text, latency) in that order; its generate does what the reference's does (the model, prompt and
    max_new_tokens it is given), and the text is the decoded output of that generate call."""
    calls = [
        (params.model, params.prompt, params.max_new_tokens),
        (params.other_model, params.other_prompt, params.other_max_new_tokens),
    ]
    for hub_id, prompt, max_new_tokens in calls:
        timed = generate_call(context, params.function, hub_id, prompt, max_new_tokens, 0.0, LatencyTolerance())
        verdict = _judge_output(context, params, timed, hub_id, prompt)
        if verdict is not None:
            return verdict
    wrong = own_calls_problem(context, params.function, params.model)
    if wrong:
        return Verdict.failed(
            f"{params.function} does what it is asked when the grader calls it, but not when your notebook does: {wrong}. "
            "Pass the prompt and max_new_tokens you are given to model.generate, whoever calls the function.",
            expected="every call's generate on its prompt, with its max_new_tokens",
            found=wrong,
        )
    return Verdict.passed(f"{params.function} returns (text, latency), and the text is the decoded output of its generate call.")


def _decodes_otherwise(event: GenerateEvent) -> bool:
    """Whether a generate decoded with other work per token than greedy search: an assistant (prompt lookup, a draft
    model) or more forward passes than one per token (classifier-free guidance)."""
    generation = Generation.of(event, {})
    return generation.assisted or generation.more_passes


# Seconds of time.sleep within one of the notebook's timed calls below which a timer's excess is not read as it.
SLEPT_S = 0.005


def ran_ways(event: GenerateEvent, hooked: bool = False) -> tuple[bool, bool, bool, bool]:
    """How a generate ran, as flags: (without the cache, with work added to its steps, with another decoding, with
    beams). Where its model came ``hooked`` (forward hooks the caller hung on it: results-latency's charge), its
    processors alone are the function's added work."""
    beams = event["num_beams"] if isinstance(event["num_beams"], int) else 1
    return (event["use_cache"] is False, adds_work(event, hooks=not hooked), _decodes_otherwise(event), beams > 1)


def _unalike_how(event: GenerateEvent, hooked: bool = False) -> str:
    """How a generate of the notebook's own timed calls ran otherwise than the grader's calls of the function run it
    ("" when it did not), in words: the first of ran_ways' flags it raises."""
    no_cache, added, decodes, beams = ran_ways(event, hooked)
    if no_cache:
        return "without the KV cache (use_cache=False)"
    if added:
        return added_work_text(event, hooks=not hooked)
    if decodes:
        return (
            "with an assistant (prompt lookup, a draft model) or more forward passes than one per token "
            "(classifier-free guidance)"
        )
    return "with beam search" if beams else ""


def own_calls_problem(context: CheckContext, function: str, hub_id: str, latency: bool = False) -> str:
    """What the notebook's own calls of the timed function did other than they were asked ("" when nothing, or where
    they were not recorded): each call's last generate must run its prompt with its max_new_tokens and the text it
    returned must be a decode of that generate's output; or (``latency``) the latency it returned must be what a timer
    of that generate reads. A function that honours its arguments, or tells the truth, only when the grader calls it
    (on the grader's float models, not the notebook's quantized ones) shows here."""
    record = notebook_record(context, ResultsTableParams(timed_function=function))
    fits = carrying(context.models.tokenizer(hub_id))
    # The notebook's own calls run once, on a machine busy with other work, and cannot be tried again as the grader's
    # own calls are: a timer may read well past its generate (preempted), never well short of it (what a function that
    # shrinks its latency reports).
    # So one call may read up to twice its generate; the calls of one model, read together (their mean), may not read
    # a tenth more than their generates took (a function that inflates one configuration's latencies shows there, and
    # a busy machine preempts a run now and then, not most of them by as much).
    tolerance = LatencyTolerance(upper_rel=1.0, upper_abs_s=0.25)
    together = LatencyTolerance(upper_rel=0.1)
    readings: dict[int | None, list[tuple[float, list[GenerateEvent]]]] = {}
    ran_with: dict[tuple[Any, Any], str] = {}  # (torch threads, attention implementation) -> the first prompt run so
    previous = 0.0
    for call in record.calls:
        # The call's own generates: begun once it was called (a generate the notebook runs between two calls, an aside
        # without the cache, is nobody's), or since the previous call returned where its start was not recorded.
        began = max(previous, call.start)
        ended = [event for event in record.generates if began <= float(event["start"]) and float(event["end"]) <= call.time]
        finished = any(began < float(event["end"]) <= call.time for event in record.generates)
        previous = call.time
        # A prompt passed as a one-item list is that prompt; one the grader cannot read as text is judged on the rest.
        prompt = call.prompt
        if isinstance(prompt, (list, tuple)) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        shown = repr(prompt[:40]) if isinstance(prompt, str) else f"a {type(call.prompt).__name__} prompt"
        if not finished and (is_number(call.latency) or isinstance(call.text, str)):
            # A result without a generate: remembered from an earlier call (a cache), or another model's.
            return (
                f"called with the prompt {shown}, it returned a result, but no generate ran during the call: "
                "each call must generate (a result kept from an earlier call is not a new measurement)"
            )
        if not ended:
            continue
        timed = ended[-1]
        rows = timed["rows"] or []
        if isinstance(prompt, str):
            ids = list(context.models.tokenizer(hub_id)(prompt)["input_ids"])
            if not rows or not fits(list(rows[0]), ids):
                return f"called with the prompt {shown}, its generate ran another prompt"
            if len(rows) > 1:
                return (
                    f"called with the prompt {shown}, its generate ran {len(rows)} rows for that one prompt: "
                    "a batch is other work than the one prompt the grader's calls time"
                )
        recoded = next((event for event in ended if event.get("model_code")), None)
        if recoded is not None:
            return (
                f"called with the prompt {shown}, its generate ran with code of the notebook's in place of the model's "
                f"({', '.join(recoded.get('model_code') or [])}): its text and latency are not the model's"
            )
        if latency:
            took = call.time - call.start
            if is_number(call.latency) and float(call.latency) > took + 0.002:
                return (
                    f"called with the prompt {shown}, it returned a latency of {float(call.latency):.4g} s, "
                    f"but the whole call took {took:.4g} s: a timer inside the function cannot read longer than it ran"
                )
            # Any generate of the call: one timed without the cache and an untimed one with it for the text is the same.
            how = next((said for event in ended if (said := _unalike_how(event, call.hooked))), "")
            if how:
                return (
                    f"called with the prompt {shown}, its generate ran {how}, which the grader's calls of "
                    "it do not: every configuration is timed the same way (greedy, with the cache, nothing added)"
                )
            # The generate its text came from, and repeats of its work (a best-of-three): a latency read on a
            # shorter generate before it (five tokens timed, fifty run for the text) is not that call's.
            full = [event for event in ended if tokens_limit(event) == tokens_limit(timed) and event["rows"] == timed["rows"]]
            honest = latency_readings(full)
            if is_number(call.latency) and honest and call.slept > SLEPT_S:
                # A sleep in the call read by its timer: the latency exceeds every reading of its generates by most of
                # what it slept (a pause between best-of-three runs, outside each run's timer, adds nothing), and no
                # timer that long around a generate of the call can have missed the sleep (one begun after a pause to
                # settle the machine, read long by a loaded machine, can).
                excess = float(call.latency) - max(honest)
                covered = min(
                    sleep_covered(
                        float(call.latency), call.sleeps, (float(event["start"]), float(event["end"])), (call.start, call.time)
                    )
                    for event in full
                )
                if excess >= max(SLEPT_S, 0.5 * call.slept) and covered >= SLEPT_S:
                    return (
                        f"called with the prompt {shown}, it returned a latency of {float(call.latency):.4g} s, "
                        f"{excess:.3g} s longer than its generate took, and slept {call.slept:.3g} s (time.sleep, or a wait that ran "
                        "out its timeout) "
                        f"meanwhile: a timer that long around its generate covered at least {covered:.3g} s of the sleep"
                    )
            if is_number(call.latency) and not agrees_with_timed(tolerance, float(call.latency), full):
                return (
                    f"called with the prompt {shown}, it returned a latency of {float(call.latency):.4g} s, "
                    f"but its generate took {float(timed['duration_s']):.4g} s"
                )
            if is_number(call.latency):
                readings.setdefault(call.serial, []).append((float(call.latency), full))
            ran_with.setdefault((timed.get("torch_threads"), timed.get("attention")), shown)
            continue
        limit = timed["new_tokens_limit"] if isinstance(timed["new_tokens_limit"], int) else timed["max_new_tokens"]
        if is_number(call.max_new_tokens) and limit != call.max_new_tokens:
            return f"called with max_new_tokens={call.max_new_tokens}, its generate ran with a limit of {limit} new tokens"
        if timed["cut_short"]:
            made = max(timed["new_tokens"] or [0])
            return (
                f"called with the prompt {shown}, its generate stopped after {made} of its {limit} new tokens "
                "at an end the model did not choose (an end-of-text id the call added, a stopping criterion, max_time)"
            )
        decodes = {_same_text(text) for text in decoded_variants(context, hub_id, timed).values()}
        if isinstance(call.text, str) and timed["output_ids"] and _same_text(call.text) not in decodes:
            return f"called with the prompt {shown}, it returned a text that is not a decode of its generate's output"
    if len(ran_with) > 1:
        (threads, attention), shown = next(iter(ran_with.items()))
        (other_threads, other_attention), other_shown = list(ran_with.items())[1]
        differs = (
            f"on {threads} torch threads once and {other_threads} another time (torch.set_num_threads)"
            if threads != other_threads
            else f"with {attention} attention once and {other_attention} another time (attn_implementation)"
        )
        prompts = shown if shown == other_shown else f"{shown} and {other_shown}"
        return (
            f"called with the prompt {prompts}, its generates ran {differs}: every configuration is timed on the same "
            "threads and attention, only the model changing"
        )
    for pairs in readings.values():
        long = [(reported, ended) for reported, ended in pairs if not agrees_with_timed(together, reported, ended)]
        # Together: a run preempted between its timer and its generate now and then is noise; two runs that read long
        # and lift the model's mean latency past what its generates took are time spent outside them (a sleep).
        reported_mean = statistics.fmean(reported for reported, _ in pairs)
        generated_mean = statistics.fmean(max(float(event["duration_s"]) for event in ended) for _, ended in pairs)
        lifted = reported_mean > upper_bound(together, generated_mean, [event for _, ended in pairs for event in ended])
        if len(long) >= 2 and lifted:
            return (
                f"{len(long)} of its {len(pairs)} calls on one model returned latencies longer than their generates took "
                f"(mean {reported_mean:.4g} s for generates of {generated_mean:.4g} s on average): the time a latency "
                "reports is its generate's"
            )
        if len(pairs) >= 3 and len(long) > len(pairs) / 2:
            shown = ", ".join(f"{reported:.4g} s for {float(ended[-1]['duration_s']):.4g} s" for reported, ended in long[:3])
            return (
                f"{len(long)} of its {len(pairs)} calls on one model returned latencies longer than their generates took "
                f"({shown}): a preempted run reads long now and then, not most of the time"
            )
    return ""


def _judge_output(context: CheckContext, params: GenerateParams, timed: Timed, hub_id: str, prompt: str) -> Verdict | None:
    text, latency = _text_and_latency(timed.value, params.function)
    wrong = judge_timed_settings(
        context,
        timed,
        "Call model.generate on the tokenized prompt you are given, with max_new_tokens=max_new_tokens, on the model you are given.",
    )
    if wrong is not None:
        return wrong
    if isinstance(text, Tensor):
        return Verdict.failed(
            f"{params.function} returns the output token tensor instead of text: decode it with tokenizer.decode(outputs[0], skip_special_tokens=True).",
            expected="a str",
            found=kind_of(text),
        )
    if isinstance(text, list) and text and all(isinstance(item, str) for item in text):
        return Verdict.failed(
            f"{params.function} returns a list of texts (batch_decode): return the single string, tokenizer.decode(outputs[0], skip_special_tokens=True).",
            expected="a str",
            found=kind_of(text),
        )
    expect_type(text, str, "The generated text (first item returned)", "a str")
    if not is_number(latency):
        return Verdict.failed(
            f"The latency (second item returned) should be a number of seconds, but it is {kind_of(latency)}.",
            expected="a float (seconds)",
            found=kind_of(latency),
        )
    timed_events = timed.timed()
    variants: dict[str, str] = {}
    for event in timed_events:
        variants |= {
            f"{key} ({index})": value for index, (key, value) in enumerate(decoded_variants(context, hub_id, event).items())
        }
    if text.strip() in {variant.strip() for variant in variants.values()}:
        return None
    first = decoded_variants(context, hub_id, timed_events[-1])
    if text.strip() == prompt.strip():
        return Verdict.failed(
            f"{params.function} returns the prompt itself: decode the generate output (outputs[0]), not the inputs.",
            expected=first["full, skip_special_tokens=True"],
            found=text,
        )
    return Verdict.failed(
        f"The text {params.function} returns is not the decoded output of the generate call it made.",
        expected=first["full, skip_special_tokens=True"],
        found=text,
    )


# --------------------------------------------------------------------------------------
# configurations
# --------------------------------------------------------------------------------------

Expectation = Literal["baseline", "int8", "nf4", "fp4"]
CONFIG_FIXES = {
    "int8": "load it with quantization_config=BitsAndBytesConfig(load_in_8bit=True)",
    "nf4": "load it with quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='nf4')",
    "fp4": "load it with quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='fp4')",
}
LABELS = {"baseline": "baseline", "int8": "INT8", "nf4": "NF4", "fp4": "FP4"}
LOADED_AS = {
    "other": "another model than the one asked for",
    "fp32": "a float32 model",
    "fp16": "a float16 model",
    "bf16": "a bfloat16 model",
    "int8": "an 8-bit bitsandbytes model",
    "nf4": "a 4-bit NF4 bitsandbytes model",
    "fp4": "a 4-bit FP4 bitsandbytes model",
    "4bit": "a 4-bit bitsandbytes model",
    "partial": "a partly quantized model",
}
NAME_HINTS = {
    "int8": ("int8", "8bit", "8-bit", "8 bit"),
    "nf4": ("nf4", "normalfloat", "normal float"),
    "fp4": ("fp4",),
    "baseline": ("baseline", "fp32", "fp16", "bf16", "float32", "float16", "bfloat16", "full precision"),
}
FLOAT_KINDS = {"torch.float32": "fp32", "torch.float16": "fp16", "torch.bfloat16": "bf16"}
# How a name states a float dtype.
FLOAT_NAMES = {"fp32": ("fp32", "float32"), "fp16": ("fp16", "float16", "half"), "bf16": ("bf16", "bfloat16")}


def _stated_floats(name: str) -> set[str]:
    """The float dtypes a configuration's name states ("FP16 (Baseline GPU)": fp16; "Baseline": none); a "bfloat16"
    states bf16 alone, not the "float16" it holds."""
    text = _compact(name)
    stated = {"bf16"} if any(hint in text for hint in FLOAT_NAMES["bf16"]) else set()
    text = text.replace("bfloat16", "").replace("bf16", "")
    return stated | {kind for kind in ("fp32", "fp16") if any(hint in text for hint in FLOAT_NAMES[kind])}


def loaded_kind(model: Model) -> str:
    """What a loaded model really is, from how its linear layers store their weights (the output head aside).

    ``int8``: every linear layer a bitsandbytes INT8 layer holding int8 weights; ``nf4``/``fp4``: every
    one a 4-bit layer holding packed weights of that quant type (``4bit`` if the types are mixed);
    ``partial``: some layers quantized and some not; else the float dtype (``fp32``, ``fp16``, ``bf16``).
    The ``is_loaded_in_8bit``/``is_loaded_in_4bit`` flags and the config are not evidence: a config that
    skips every module sets them on a float model.
    """
    counts = {kind: model.layers.get(kind) for kind in ("int8", "4bit", "float")}
    int8, four_bit, other = (value if isinstance(value, int) and not isinstance(value, bool) else 0 for value in counts.values())
    if int8 and not four_bit and not other:
        return "int8"
    if four_bit and not int8 and not other:
        quant_types = model.layers.get("quant_types")
        if isinstance(quant_types, list) and len(quant_types) == 1 and quant_types[0] in ("nf4", "fp4"):
            return str(quant_types[0])
        return "4bit"
    if int8 or four_bit:
        return "partial"
    return FLOAT_KINDS.get(model.dtype, model.dtype)


def flag_note(model: Model) -> str:
    """Why the loaded kind differs from what the model's flags claim ("" when they agree)."""
    kind = loaded_kind(model)
    total = sum(model.layers.get(key) or 0 for key in ("int8", "4bit", "float") if isinstance(model.layers.get(key), int))
    if kind == "partial":
        return (
            f"only {(model.layers.get('int8') or 0) + (model.layers.get('4bit') or 0)} of its {total} linear layers are "
            "quantized: does llm_int8_skip_modules skip them?"
        )
    if (model.loaded_in_8bit or model.loaded_in_4bit) and kind in FLOAT_KINDS.values():
        flag = "is_loaded_in_8bit" if model.loaded_in_8bit else "is_loaded_in_4bit"
        return (
            f"{flag} is set, but none of its {total} linear layers holds quantized weights: does llm_int8_skip_modules skip them?"
        )
    return ""


def _compact(text: str) -> str:
    """A name without case, spaces, hyphens or underscores ("NF-4" and "nf 4" read as "nf4")."""
    return re.sub(r"[\s_-]+", "", text.casefold())


def names_kind(name: str, kind: str) -> bool:
    """Whether a configuration's name names ``kind`` (one of NAME_HINTS), however it is spaced or hyphenated."""
    text = _compact(name)
    return any(_compact(hint) in text for hint in NAME_HINTS[kind])


def declared_kind(name: str) -> str | None:
    """The configuration kind a name states (``int8``, ``nf4``, ``fp4``, ``baseline``), None if it states none or several."""
    quantized = [kind for kind in ("int8", "nf4", "fp4") if names_kind(name, kind)]
    if len(quantized) == 1:
        return quantized[0]
    if not quantized and names_kind(name, "baseline"):
        return "baseline"
    return None


def name_agrees(name: str, kind: str | None) -> bool:
    """Whether a configuration's name says what it loads (a name that states no kind says nothing wrong)."""
    declared = declared_kind(name)
    if declared is None or kind is None:
        return True
    if declared == "baseline":
        # A float name that names its dtype ("FP16 (Baseline)") must name the one it loads; "Baseline" alone says none.
        stated = _stated_floats(name)
        return kind in FLOAT_KINDS.values() and (not stated or kind in stated)
    return declared == kind


class ConfigurationParams(Params):
    """Which configuration must be present, and how to load and try it."""

    configuration: Expectation = Field(description="The configuration this check looks for: the baseline, int8, nf4 or fp4.")
    variable: str = Field("configurations", description="The notebook variable holding the configurations.")
    model: str = Field("gpt2", description="Hub ID the configurations are loaded with.")
    prompt: str = Field("The capital of France is", description="Prompt used to show that a loaded model generates.")
    max_new_tokens: int = Field(5, ge=1, description="Tokens generated from each loaded configuration.")
    footprint_function: str = Field(
        "get_model_memory_footprint", description="The student's footprint function, also measured on each loaded configuration."
    )


@dataclass(frozen=True)
class LoadedConfiguration:
    """One of the student's configurations, loaded and tried in the kernel."""

    index: int
    name: str
    model: Model | None
    error: str | None
    generated: str | None
    footprints_mb: tuple[float, ...] = ()  # the student's get_model_memory_footprint on this model (before, after generating)
    other: str = ""  # why the loaded model is not the hub ID's (another model, a config of other sizes); "" when it is

    def loaded_as(self) -> str | None:
        """What the loaded model really is (see :func:`loaded_kind`; ``other`` for another model than the hub ID's);
        None if it failed to load."""
        if self.model is None:
            return None
        return "other" if self.other else loaded_kind(self.model)

    def describe(self) -> str:
        """'NAME' and what it became."""
        if self.model is None:
            return f"'{self.name}' (fails to load)"
        if self.other:
            return f"'{self.name}' (loads another model: {self.other})"
        return f"'{self.name}' (loads as {self.loaded_as()})"

    def true_footprint_mb(self) -> float | None:
        """The bytes of the loaded model's parameters and buffers, in MB."""
        return (self.model.parameter_bytes + self.model.buffer_bytes) / MB if self.model is not None else None


def _footprint(outcome: CallOutcome) -> float | None:
    """The number of MB a footprint call returned (None if it returned none)."""
    value = outcome.value if outcome.ok else None
    if isinstance(value, Tensor) and value.values is not None and len(value.values) == 1:
        value = value.values[0]
    return float(value) if is_number(value) else None  # type: ignore[arg-type]


def loaded_configurations(context: CheckContext, params: ConfigurationParams) -> list[LoadedConfiguration]:
    """The notebook's configurations, each loaded with its own load_args in the kernel and tried once.

    Done once per submission and shared by the configuration checks and the results table.
    """
    key = f"configurations:{params.variable}:{params.model}"

    def load() -> tuple[LoadedConfiguration, ...] | Verdict:
        harness = context.require_harness()
        described = harness.describe(params.variable, timeout_s=context.timeout_s)
        try:
            configurations = context.returned(described, f"`{params.variable}`")
            expect_type(configurations, list, f"`{params.variable}`", "a list of dicts with 'name' and 'load_args'")
            if not configurations:
                raise StopCheck(
                    Verdict.failed(
                        f"`{params.variable}` is empty: define the baseline, INT8, NF4 and FP4 configurations.",
                        found="an empty list",
                    )
                )
            for index, item in enumerate(configurations):
                if (
                    not isinstance(item, dict)
                    or not isinstance(item.get("name"), str)
                    or not isinstance(item.get("load_args"), dict)
                ):
                    raise StopCheck(
                        Verdict.failed(
                            f"`{params.variable}[{index}]` should be a dict with a 'name' (str) and 'load_args' (dict), but it is {kind_of(item)}"
                            + (f" with keys {sorted(map(str, item))}" if isinstance(item, dict) else "")
                            + ".",
                            expected="{'name': str, 'load_args': dict}",
                            found=kind_of(item),
                        )
                    )
        except StopCheck as stop:
            return stop.verdict  # kept: the next check of these configurations stops the same way
        loaded = []
        for index, item in enumerate(configurations):
            handle_name = f"configuration-{index}"
            spec: ModelSpec = {"hub_id": params.model, "load_args_path": [params.variable, index, "load_args"]}
            outcome = harness.load_model(spec, handle_name, timeout_s=context.timeout_s)
            if not outcome.ok:
                error = str(outcome.exception) if outcome.exception else outcome.message
                loaded.append(LoadedConfiguration(index, item["name"], None, error, None))
                continue
            # What the student's own footprint function says of this model, before and after it generates
            # (bitsandbytes repacks 4-bit weights on a CPU's first forward): a table row may report either
            # (a wrong formula is charged by the memory checks, not again by the table's).
            before = _footprint(harness.call(params.footprint_function, [handle(handle_name)], timeout_s=context.timeout_s))
            generated = harness.generate(
                handle_name, params.model, params.prompt, params.max_new_tokens, timeout_s=context.timeout_s
            )
            after = _footprint(harness.call(params.footprint_function, [handle(handle_name)], timeout_s=context.timeout_s))
            harness.release([handle_name])
            found = outcome.value if isinstance(outcome.value, Model) else None
            loaded.append(
                LoadedConfiguration(
                    index,
                    item["name"],
                    found,
                    None if generated.ok else f"generating failed: {generated.exception or generated.message}",
                    generated.value if generated.ok else None,
                    tuple(value for value in (before, after) if value is not None),
                    # The model by its config's sizes and its embedding (which quantization leaves as it is), never by
                    # its name: load_args that bring a config of their own (one layer), or another model, load another.
                    other_model(context, found, params.model) or "" if found is not None else "",
                )
            )
        return tuple(loaded)

    loaded = context.once(key, load)
    if isinstance(loaded, Verdict):
        raise StopCheck(loaded)
    return list(loaded)


def _declared_args(load_args: dict[str, Any]) -> str:
    """A short, readable rendering of a configuration's load_args."""
    parts = []
    for key, value in load_args.items():
        if isinstance(value, ConfigValue):
            fields = {k: v for k, v in value.fields.items() if k in ("load_in_8bit", "load_in_4bit", "bnb_4bit_quant_type") and v}
            parts.append(f"{key}={value.short_type}({', '.join(f'{k}={v!r}' for k, v in fields.items())})")
        elif isinstance(value, DType):
            parts.append(f"{key}={value.name}")
        else:
            parts.append(f"{key}={value!r}")
    return ", ".join(parts)


@check_kind("bnb_configuration", ConfigurationParams)
def bnb_configuration(context: CheckContext, params: ConfigurationParams) -> Verdict:
    """A configuration of the expected kind is defined, really loads as that kind (by its layers), is named for it, and generates."""
    configurations = loaded_configurations(context, params)
    baseline = "fp16" if context.on_cuda else "fp32"
    wanted = baseline if params.configuration == "baseline" else params.configuration
    label = LABELS[params.configuration]
    matches = [c for c in configurations if c.loaded_as() == wanted]
    # A configuration counts for the kind it loads only if its name does not say another kind
    # (an "NF4" entry that loads FP4 and an "FP4" one that loads NF4 are both wrong).
    named_right = [c for c in matches if name_agrees(c.name, c.loaded_as())]
    for configuration in named_right:
        if configuration.error is None:
            on_cpu = configuration.model is not None and not configuration.model.device.startswith("cuda")
            if context.on_cuda and params.configuration != "baseline" and on_cpu:
                return Verdict.failed(
                    f"'{configuration.name}' loads as {LOADED_AS[wanted]} but on the CPU, although this machine has CUDA: "
                    'the comparison is of bitsandbytes\' CUDA kernels. On a GPU load it with device_map="auto" (or '
                    "none: bitsandbytes then places it on the GPU); keep the CPU for CPU-only machines.",
                    expected=f"a {label} model on cuda",
                    found=f"a {label} model on {configuration.model.device if configuration.model else 'cpu'}",
                )
            return Verdict.passed(
                f"'{configuration.name}' really loads as {LOADED_AS[wanted]} (by its layers) and generates text ({configuration.generated!r}).",
                data={
                    "configuration": configuration.index,
                    "layers": dict(configuration.model.layers) if configuration.model else {},
                },
            )
    if named_right:
        configuration = named_right[0]
        return Verdict.failed(
            f"'{configuration.name}' loads as {LOADED_AS[wanted]} but {configuration.error}.",
            expected=f"a {label} model that generates text",
            found=configuration.error,
        )
    if matches:
        configuration = matches[0]
        declared = LABELS.get(declared_kind(configuration.name) or "", "another kind")
        return Verdict.failed(
            f"The configuration that loads as {LOADED_AS[wanted]} is named '{configuration.name}', which says {declared}: "
            f"name each configuration for what it loads ({CONFIG_FIXES.get(params.configuration, 'the baseline loads unquantized')}).",
            expected=f"a {label} configuration named {label}",
            found=f"'{configuration.name}' loading as {LOADED_AS[wanted]}",
        )
    named = [c for c in configurations if declared_kind(c.name) == params.configuration]
    named += [c for c in configurations if names_kind(c.name, params.configuration) and c not in named]
    found = ", ".join(c.describe() for c in configurations)
    for configuration in named:
        if configuration.error is not None and configuration.model is None:
            return Verdict.failed(
                f"The configuration '{configuration.name}' fails to load: {configuration.error}.",
                expected=f"a {label} configuration that loads",
                found=configuration.error,
            )
        loaded_as = configuration.loaded_as()
        if params.configuration == "baseline":
            advice = "the baseline is FP16 on a GPU and FP32 on the CPU: load it with dtype=torch.float16 on CUDA, torch.float32 on CPU"
        else:
            advice = CONFIG_FIXES[params.configuration]
        note = configuration.other or (flag_note(configuration.model) if configuration.model is not None else "")
        return Verdict.failed(
            f"The configuration '{configuration.name}' loads as {LOADED_AS.get(loaded_as or '', loaded_as)}"
            + (f" ({note})" if note else "")
            + f", not {LOADED_AS[wanted]}: {advice}.",
            expected=LOADED_AS[wanted],
            found=LOADED_AS.get(loaded_as or "", str(loaded_as)) + (f" ({note})" if note else ""),
        )
    filtered = (
        f" Your notebook filters `{params.variable}` (a comprehension over it with a condition, as the seed's code drops "
        "the bitsandbytes configurations on a CPU): the course's starter keeps all four whatever the device, since "
        "bitsandbytes runs on the CPU too, and the grader runs on a CPU."
        if filters_variable(context.notebook, params.variable)
        else ""
    )
    return Verdict.failed(
        f"No configuration in `{params.variable}` loads as {LOADED_AS[wanted]} ({label}); it holds: {found}.{filtered}",
        expected=f"a {label} configuration",
        found=found or "no configurations",
    )


# --------------------------------------------------------------------------------------
# df_results
# --------------------------------------------------------------------------------------


class ResultsTableParams(Params):
    """Where the results table and its inputs are, and which columns it must have."""

    variable: str = Field("df_results", description="The notebook variable holding the results table.")
    configurations: str = Field("configurations", description="The notebook variable holding the configurations.")
    prompts: str = Field("PROMPTS", description="The notebook variable holding the prompts.")
    least_prompts: int = Field(3, ge=1, description="How many prompts the starter asks for (the table's output columns).")
    least_new_tokens: int = Field(
        50, ge=1, description="The seed's MAX_NEW_TOKENS: the notebook may generate more per call, not fewer."
    )
    max_new_tokens: str = Field("MAX_NEW_TOKENS", description="The notebook variable holding max_new_tokens.")
    timed_function: str = Field(
        "generate_text_and_time", description="The notebook's timed generation function, whose calls the rubric watches."
    )
    model: str = Field("gpt2", description="Hub ID the configurations are loaded with.")
    footprint_function: str = Field(
        "get_model_memory_footprint", description="The student's footprint function, whose values a row may report."
    )
    name_column: str = Field("Float Precision", description="Column naming the configuration.")
    memory_column: str = Field("Memory (MB)", description="Column with the memory footprint.")
    latency_column: str = Field("Avg Latency (s)", description="Column with the average latency.")


def _results_frame(context: CheckContext, params: ResultsTableParams) -> Frame:
    outcome = context.require_harness().describe(params.variable, timeout_s=context.timeout_s)
    frame = context.returned(outcome, f"`{params.variable}`")
    expect_type(frame, Frame, f"`{params.variable}`", "a pandas DataFrame")
    missing = [c for c in (params.name_column, params.memory_column, params.latency_column) if c not in frame.columns]
    if missing:
        raise StopCheck(
            Verdict.failed(
                f"`{params.variable}` lacks the column{'s' if len(missing) > 1 else ''} {', '.join(repr(c) for c in missing)}.",
                expected=f"columns {params.name_column!r}, {params.memory_column!r}, {params.latency_column!r} and one per prompt",
                found=f"columns {list(frame.columns)}",
            )
        )
    # Numbers formatted for display ("8.01", "0.52 s") are those numbers.
    numeric = {frame.columns.index(params.memory_column), frame.columns.index(params.latency_column)}
    rows = tuple(tuple(shown_number(cell) if index in numeric else cell for index, cell in enumerate(row)) for row in frame.rows)
    return Frame(frame.columns, frame.dtypes, rows, frame.length)


_SHOWN_NUMBER = re.compile(r"\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*(?:[a-zA-Z/%]+)?\s*")


def shown_number(value: Any) -> Any:
    """A number shown as text ("8.01", "0.52 s", "4.63 MB") as that number; any other value as it is."""
    if isinstance(value, str):
        match = _SHOWN_NUMBER.fullmatch(value)
        if match:
            return float(match.group(1))
    return value


def _row_configurations(context: CheckContext, params: ResultsTableParams, frame: Frame) -> list[LoadedConfiguration | None]:
    """The configuration each row describes: matched by name, else by position when there is one row per configuration."""
    configuration_params = ConfigurationParams(configuration="baseline", variable=params.configurations, model=params.model)
    try:
        configurations = loaded_configurations(context, configuration_params)
    except StopCheck:
        return [None] * len(frame.rows)
    by_name: dict[str, LoadedConfiguration] = {}
    for configuration in configurations:
        by_name.setdefault(configuration.name, configuration)
    rows: list[LoadedConfiguration | None] = []
    for position, name in enumerate(frame.column(params.name_column)):
        if isinstance(name, str) and name in by_name:
            rows.append(by_name[name])
        elif len(configurations) == len(frame.rows):
            rows.append(configurations[position])
        else:
            rows.append(None)
    return rows


def _row_classes(context: CheckContext, params: ResultsTableParams, frame: Frame) -> list[str | None]:
    """What each row's configuration loads as (None if unknown)."""
    return [c.loaded_as() if c is not None else None for c in _row_configurations(context, params, frame)]


def event_kind(event: GenerateEvent) -> str | None:
    """What the model of a recorded generate call was: its quantization by layers, else its float dtype."""
    label = event["model_quantization"]
    if isinstance(label, str):
        return label
    dtype = event["model_dtype"]
    return FLOAT_KINDS.get(dtype, dtype) if isinstance(dtype, str) else None


def _same_text(text: str) -> str:
    return " ".join(text.split())


def generated_texts(context: CheckContext, hub_id: str, events: list[GenerateEvent]) -> dict[str | None, set[str]]:
    """Every text a correct decode of the notebook's generate calls can give, by the kind of model that generated it."""
    texts: dict[str | None, set[str]] = {}
    tokenizer = context.models.tokenizer(hub_id)
    for event in events:
        if not event["output_ids"]:
            continue
        variants = set(decoded_variants(context, hub_id, event).values())
        # The prompt alone too: a generate_text_and_time that decodes its inputs is charged in generate-output,
        # not again here (its table honestly holds what it returned).
        prompt_ids = list(event["output_ids"])[: prompt_width(event)]
        variants |= {tokenizer.decode(prompt_ids, skip_special_tokens=skip) for skip in (True, False)}
        texts.setdefault(event_kind(event), set()).update(_same_text(variant) for variant in variants)
    return texts


@dataclass(frozen=True)
class OwnCall:
    """A call of the notebook's timed generation function while its cells ran: the model it was given (by serial),
    the prompt and max_new_tokens, the (text, latency) it returned, and when it returned (the runtime's clock) and
    was called."""

    serial: int | None
    prompt: Any
    max_new_tokens: Any
    text: Any
    latency: Any
    time: float = 0.0
    start: float = 0.0
    slept: float = 0.0  # seconds it slept (time.sleep) outside its generate calls
    sleeps: tuple[tuple[float, float], ...] = ()  # when it slept so: (start, end) on the runtime's clock
    hooked: bool = False  # its model carried forward hooks as it was called (the caller's work, not the function's)


@dataclass(frozen=True)
class NotebookRecord:
    """What the notebook's cells did, as streamed from its kernel: its watched calls, and the models that ran."""

    calls: list[OwnCall]
    kinds: dict[int, str]  # serial -> what the model is (int8, nf4, fp4, fp32, ...; "other" for another model's weights)
    generates: list[GenerateEvent]
    hooked: frozenset[int] = frozenset()  # models that ran with forward hooks the notebook put on them


def _text_and_latency_of(returned: Any) -> tuple[Any, Any]:
    """The text and the latency a call of the timed function returned, whatever their order or container (a pair, or
    a dict of the two): the results table is held against them, and the order is generate-output's to charge."""
    values = list(returned.values()) if isinstance(returned, dict) else returned
    if not isinstance(values, (tuple, list)) or len(values) != 2:
        return None, None
    first, second = values
    return (second, first) if isinstance(second, str) and is_number(first) else (first, second)


def _sleeps(recorded: Any) -> Iterator[tuple[float, float]]:
    """A call's recorded sleeps, as (start, end) pairs (any other item left out)."""
    for item in recorded if isinstance(recorded, list) else []:
        if isinstance(item, list) and len(item) == 2 and all(is_number(edge) for edge in item):
            yield float(item[0]), float(item[1])


def notebook_record(context: CheckContext, params: ResultsTableParams) -> NotebookRecord:
    """The notebook's own calls of its timed generation function and the models they ran (once per submission)."""

    def read() -> NotebookRecord | Verdict:
        notebook = context.require_harness().notebook_events()
        if not notebook.ok:
            return failed_call(notebook, "the notebook's generate record")
        kinds: dict[int, str] = {}
        hooked: set[int] = set()
        reference = reference_fingerprint(context, params.model)
        for event in notebook.events:
            if event["type"] == "model":
                if fingerprint_difference(event["fingerprint"] or {}, reference):
                    kind = "other"
                else:
                    kind = event["quantization"] or FLOAT_KINDS.get(event["dtype"], event["dtype"])
                # A model that ran as one kind and then as another (its layers swapped after a first run) is none.
                kinds[event["serial"]] = kind if kinds.get(event["serial"], kind) == kind else "changed"
                if (event["fingerprint"] or {}).get("hooks"):
                    hooked.add(event["serial"])
        for generated in notebook.generate_events():
            # What computed its tokens (a forward borrowed from a float twin is the twin's): a model whose generate
            # ran as another kind than it loaded as is none.
            ran_as = event_kind(generated)
            loaded_as = kinds.get(int(generated["model_serial"]))
            if loaded_as not in (None, "other", "changed", ran_as) and ran_as is not None and not generated["error"]:
                kinds[int(generated["model_serial"])] = "changed"
            # A model that ran with code of the notebook's in place of its own (a module class's forward replaced)
            # computed something else than the model.
            if generated.get("model_code") and not generated["error"]:
                kinds[int(generated["model_serial"])] = "changed"
        calls = []
        for event in notebook.returned_events(params.timed_function):
            described = [description for _, description in event["arguments"]]
            model = next((item for item in described if isinstance(item, dict) and isinstance(item.get("serial"), int)), {})
            serial = model.get("serial")
            values = [decode(item) for item in described]
            returned = decode(event["value"])
            text, latency = _text_and_latency_of(returned)
            calls.append(
                OwnCall(
                    serial,
                    values[2] if len(values) > 2 else None,
                    values[3] if len(values) > 3 else None,
                    text,
                    latency,
                    float(event["time"]),
                    float(event["start"]),
                    float(event.get("slept_s") or 0.0),
                    tuple(_sleeps(event.get("sleeps"))),
                    bool(model.get("hooks")),
                )
            )
        return NotebookRecord(calls, kinds, notebook.generate_events(), frozenset(hooked))

    record = context.once(f"notebook-record:{params.timed_function}", read)
    if isinstance(record, Verdict):
        raise StopCheck(record)
    return record


# What a notebook calls to take a median (statistics, NumPy, pandas, torch; a percentile or quantile at 50 %).
MEDIAN_FUNCTIONS = frozenset(
    {
        "median",
        "nanmedian",
        "median_low",
        "median_high",
        "median_grouped",
        "percentile",
        "nanpercentile",
        "quantile",
        "nanquantile",
    }
)


def filters_variable(notebook: Any, name: str) -> bool:
    """Whether the notebook's code assigns ``name`` a comprehension over ``name`` itself with a condition (a list
    filtered in place: ``configurations = [c for c in configurations if ...]``)."""
    for tree in code_trees(notebook):
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.ListComp):
                continue
            if any(isinstance(target, ast.Name) and target.id == name for target in node.targets) and any(
                isinstance(generator.iter, ast.Name) and generator.iter.id == name and generator.ifs
                for generator in node.value.generators
            ):
                return True
    return False


def takes_medians(notebook: Any) -> bool:
    """Whether the notebook's code computes a median anywhere (a median of three runs is one of the runs, so a
    notebook reporting its last run would read as a median one time in a few: a median counts where one is taken)."""
    return bool(called_names(notebook) & MEDIAN_FUNCTIONS)


def labelled_readings(latencies: list[float], runs: int, medians: bool = True) -> list[tuple[str, float]]:
    """What a row's average latency may be from these timed runs of its first prompt, each named by its statistic
    ("mean", "median"): the mean (and, where the notebook takes ``medians``, the median) of all of them, or of all but
    up to two at their ends (warm-ups before them, output runs after them; at least ``runs`` of them), or of the last
    ``runs`` (as many warm-ups of the same call as the notebook likes before them). Every row of a table must take one
    statistic (a median for the quantized rows beside the baseline's mean favours them); which runs a row leaves out is
    not compared (a warm-up once before the loop, on the first configuration's model, is honest)."""
    return [(name, value) for name, value, _ in _windowed_readings(latencies, runs, medians)]


def _windowed_readings(latencies: list[float], runs: int, medians: bool = True) -> list[tuple[str, float, range]]:
    """labelled_readings, each with the runs (their indices) it averages."""
    # Not any window of a longer series: the slowest three of six for one model and the fastest for another are no
    # average of their runs.
    count = len(latencies)
    windows = [range(ahead, count - behind) for ahead in (0, 1, 2) for behind in (0, 1, 2) if ahead + behind <= 2]
    windows = [window for window in windows if len(window) >= min(runs, count)]
    if runs >= 1 and count - runs > 2:  # more warm-ups than the windows above drop
        windows.append(range(count - runs, count))
    averages = (("mean", statistics.fmean), ("median", statistics.median)) if medians else (("mean", statistics.fmean),)
    return [
        (name, average([latencies[index] for index in window]), window)
        for window in windows
        if window
        for name, average in averages
    ]


def latency_readings_of(latencies: list[float], runs: int, medians: bool = True) -> list[float]:
    """The values of :func:`labelled_readings`."""
    return [value for _, value in labelled_readings(latencies, runs, medians)]


@dataclass(frozen=True)
class RowRuns:
    """What in a results row does not come from the notebook's calls on one model (each list empty: nothing)."""

    serial: int
    outputs: list[str]  # outputs that are not the text the call of their prompt returned
    settings: list[str]  # calls with another max_new_tokens than the notebook's
    latency: list[str]  # an average latency that is not the average of the first prompt's timed runs
    ways: frozenset[str] = frozenset()  # the statistics its average latency may be of its runs ("mean", "median")

    @property
    def count(self) -> int:
        return len(self.outputs) + len(self.settings) + len(self.latency)


def _texts(calls: list[OwnCall], prompt: Any) -> set[str]:
    """The texts these calls on ``prompt`` returned, as a table shows them: whole, or their continuation alone."""
    texts = set()
    for call in calls:
        if call.prompt == prompt and isinstance(call.text, str):
            texts.add(_same_text(call.text))
            if isinstance(prompt, str) and call.text.startswith(prompt):
                texts.add(_same_text(call.text[len(prompt) :]))
    return texts


def _first_latencies(calls: list[OwnCall], prompts: list[Any]) -> list[float]:
    """The latencies these calls on the first prompt returned, in order."""
    return [float(call.latency) for call in calls if prompts and call.prompt == prompts[0] and is_number(call.latency)]


# The roughest rounding of a row's latency judged at its precision (relative): two decimals of 0.05 s or more pass;
# whole seconds of sub-second latencies (0 or 1, hiding the quantized rows' slowdown) do not.
LATENCY_COARSEST = 0.1


def _average_agrees(latency: Any, reading: float) -> bool:
    """Whether a row's latency is this average of its runs: to 0.1 % or 0.1 ms (runs rounded before they are averaged
    give another last digit, not another average), or at the precision it is shown with, if fine enough."""
    return agrees(latency, reading, 1e-3, coarsest=LATENCY_COARSEST) or (
        is_number(latency) and abs(float(latency) - reading) <= 1e-4
    )


def _read_hooked(calls: list[OwnCall], prompts: list[Any], latency: Any, runs: int, medians: bool) -> bool:
    """Whether the first prompt's calls whose latencies a row's average reads ran on a model carrying hooks the
    notebook hung on it: every set of them the average can be of holds a hooked call (where the average is of none of
    them, whether any of them was hooked)."""
    first = [call for call in calls if prompts and call.prompt == prompts[0] and is_number(call.latency)]
    read = [
        window
        for _, reading, window in _windowed_readings([float(call.latency) for call in first], runs, medians)
        if _average_agrees(latency, reading)
    ]
    if not read:
        return any(call.hooked for call in calls if prompts and call.prompt == prompts[0])
    return all(any(first[index].hooked for index in window) for window in read)


def row_runs(
    record: NotebookRecord,
    serial: int,
    outputs: list[Any],
    latency: Any,
    prompts: list[Any],
    runs: int,
    max_new_tokens: Any,
    medians: bool = True,
) -> RowRuns:
    """A row held against the notebook's calls on the model of that serial: its outputs (the text each prompt's call
    returned) and its average latency (of the first prompt's timed runs), from calls run with the notebook's
    max_new_tokens. Other calls (a warm-up with a few tokens) may come and go: only where a row's numbers are explained
    by calls of another max_new_tokens alone is that charged."""
    calls = [call for call in record.calls if call.serial == serial]
    same = [call for call in calls if str(call.max_new_tokens) == str(max_new_tokens)]
    other_limits: set[str] = set()
    wrong_outputs = []
    for index, output in enumerate(outputs):
        prompt = prompts[index] if index < len(prompts) else None
        if isinstance(output, str) and _same_text(output) in _texts(same, prompt):
            continue
        others = [call for call in calls if isinstance(output, str) and _same_text(output) in _texts([call], prompt)]
        if others:
            other_limits.update(str(call.max_new_tokens) for call in others)
        else:
            wrong_outputs.append(f"output {index + 1} is not the text its call on prompt {index + 1} returned")
    wrong_latency = []
    # Hooks on the model as the first prompt's timed calls began, the calls whose latencies the row reads (a hook hung
    # after the timing, to read activations while the other prompts run for their text alone, or on one more call of
    # the first prompt after its timed runs, is no charge).
    if serial in record.hooked and _read_hooked(same, prompts, latency, runs, medians):
        wrong_latency.append(
            "its model ran with forward hooks your notebook put on it (work added to every step): time the model as it loaded"
        )
    first = _first_latencies(same, prompts)
    ways = frozenset(way for way, reading in labelled_readings(first, runs, medians) if _average_agrees(latency, reading))
    if 0 < len(first) < runs:
        wrong_latency.append(f"timed the first prompt {len(first)} time{'s' if len(first) != 1 else ''}, not {runs}")
    elif not ways:
        first_other = _first_latencies([call for call in calls if call not in same], prompts)
        if first_other and any(_average_agrees(latency, reading) for reading in latency_readings_of(first_other, runs, medians)):
            other_limits.update(str(call.max_new_tokens) for call in calls if call not in same)
        elif not first and not first_other:
            wrong_latency.append("no timed run of the first prompt was recorded on its model")
        else:
            runs_seen = first or first_other
            readings = latency_readings_of(runs_seen, runs, medians)
            in_ms = is_number(latency) and any(_average_agrees(float(latency) / 1000, reading) for reading in readings)
            summed = is_number(latency) and _average_agrees(latency, math.fsum(runs_seen[-runs:]))
            one_run = is_number(latency) and any(_average_agrees(latency, value) for value in runs_seen)
            why = (
                ": it is that average in milliseconds; report seconds"
                if in_ms
                else ": it is the sum of the runs, not their average; divide by the number of runs"
                if summed
                else ": it is one of the runs, not their mean (a median counts where your code takes one)"
                if one_run
                else ""
            )
            wrong_latency.append(
                f"its average latency {latency!r} is not the average of its {len(runs_seen)} timed runs of the first prompt "
                f"({', '.join(f'{value:.4g}' for value in runs_seen[:6])} s){why}"
            )
    settings = [f"its runs used max_new_tokens {', '.join(sorted(other_limits))}, not {max_new_tokens}"] if other_limits else []
    return RowRuns(serial, wrong_outputs, settings, wrong_latency, ways)


def rows_runs(
    context: CheckContext, params: ResultsTableParams, frame: Frame, runs: int, outputs: list[Any]
) -> list[tuple[str, RowRuns | None]] | None:
    """Each row of the table (by name) with the model of its configuration's kind whose calls explain it best; None
    where the notebook's calls of its timed function were not recorded (it is called in the very cell that defines
    it), or where some row's kind of model ran none (the loop times generate itself)."""
    record = notebook_record(context, params)
    if not record.calls:
        return None
    harness = context.require_harness()
    prompts = context.returned(harness.describe(params.prompts, timeout_s=context.timeout_s), f"`{params.prompts}`")
    limit = context.returned(harness.describe(params.max_new_tokens, timeout_s=context.timeout_s), f"`{params.max_new_tokens}`")
    prompts = list(prompts) if isinstance(prompts, (list, tuple)) else []  # a tuple of prompts is as good as a list
    medians = takes_medians(context.notebook)
    judged: list[tuple[str, RowRuns | None]] = []
    for position, (name, configuration) in enumerate(
        zip(frame.column(params.name_column), _row_configurations(context, params, frame), strict=True)
    ):
        kind = configuration.loaded_as() if configuration is not None else None
        if configuration is not None and configuration.other:
            # A configuration that loads another model is charged in its own check, not again in the table's.
            judged.append((str(name), RowRuns(-1, [], [], [])))
            continue
        serials = sorted(
            {call.serial for call in record.calls if call.serial is not None and record.kinds.get(call.serial) == kind}
        )
        row = frame.rows[position]
        texts = [row[frame.columns.index(column)] for column in outputs]
        latency = row[frame.columns.index(params.latency_column)]
        candidates = [row_runs(record, serial, texts, latency, prompts, runs, limit, medians) for serial in serials]
        judged.append((str(name), min(candidates, key=lambda found: found.count) if candidates else None))
    unchanged = {record.kinds.get(call.serial) for call in record.calls if call.serial is not None}.isdisjoint(
        {"changed", "other"}
    )
    if unchanged and any(found is None for _, found in judged):
        # Some configuration's model never ran the timed function (and none ran it as another model, charged here):
        # the loop times generate itself (a call of the function aside, a sanity check, is not the experiment),
        # judged from its generate calls.
        return None
    return judged


def unlike_averages(judged: list[tuple[str, RowRuns | None]]) -> str:
    """How the rows' average latencies were taken, where no one way explains them all ("" when one does, or where a
    row's way is unknown): the first row's way beside the first row that cannot have been averaged so."""
    known = [(name, found.ways) for name, found in judged if found is not None and found.ways]
    if len(known) < 2 or frozenset.intersection(*(ways for _, ways in known)):
        return ""
    names, common = [known[0][0]], known[0][1]
    for name, ways in known[1:]:
        if not common & ways:
            before = " and ".join(f"'{earlier}'" for earlier in names)
            return f"{before} take{'s' if len(names) == 1 else ''} the {sorted(common)[0]} of the runs, '{name}' the {sorted(ways)[0]}"
        names, common = [*names, name], common & ways
    return ""


def explained_footprints_mb(model: Model) -> list[float]:
    """What a footprint function can give for a model: its bytes in MB, or one of the classic mistakes the memory check
    charges (elements for bytes, no buffers, bytes, KB, decimal MB: see footprint_mistakes)."""
    total = model.parameter_bytes + model.buffer_bytes
    return [
        total / MB,
        (model.parameter_elements + model.buffer_elements) / MB,
        model.parameter_elements / MB,
        model.parameter_bytes / MB,
        float(total),
        total / 1024,
        total / 1e6,
    ]


def footprint_mistake(context: CheckContext, hub_id: str, function: str, kind: str | None) -> int | None:
    """Which of :func:`explained_footprints_mb` (its index: 0 the right one) the student's footprint function gives for
    the grader's own ``hub_id`` model loaded as ``kind`` (a float kind: as loaded); -1 where it gives another wrong
    value (a mistake of its own, which the memory check charges too); None where it gives none."""
    quantization: Quantization = kind if kind in ("int8", "nf4", "fp4") else "none"  # type: ignore[assignment]

    def ask() -> int | None:
        spec = model_spec(hub_id, quantization)
        given = _footprint(context.call(function, model(spec)))
        if given is None:
            return None
        reference_model = context.models.model(spec)
        # In explained_footprints_mb's order: the right value, then each classic mistake's.
        right = float(context.reference.get_model_memory_footprint(reference_model))  # type: ignore[union-attr]
        explained = [right, *(value for value, _ in context.expected(footprint_mistakes, reference_model).values())]
        return next((index for index, known in enumerate(explained) if agrees(given, known, 1e-3)), -1)

    return context.once(f"footprint-mistake:{function}:{hub_id}:{quantization}", ask)


def memory_agrees(reported: float, configuration: LoadedConfiguration, rel_tolerance: float, mistake: int | None = None) -> bool:
    """A row's memory is that of the model its configuration loads: its bytes, or what the student's own footprint
    function says of it, where that is the ``mistake`` (see :func:`footprint_mistake`) the function makes on the
    grader's model of the same kind, or any of its values where it is wrong there in a way of its own (-1) (charged
    in the memory check; a function that reports another number only for the
    notebook's configurations, which the memory check's models do not load as, is not believed)."""
    if configuration.model is None:
        return False
    explained = explained_footprints_mb(configuration.model)
    if mistake == -1:  # wrong on the grader's model too, in a way of its own: its values are its mistake's
        believed = list(configuration.footprints_mb)
    else:
        made = explained[mistake] if mistake is not None and mistake < len(explained) else None
        believed = [value for value in configuration.footprints_mb if made is not None and agrees(value, made, 1e-3)]
    candidates = [configuration.true_footprint_mb(), *believed]
    return any(value is not None and agrees(reported, value, rel_tolerance, coarsest=FOOTPRINT_COARSEST) for value in candidates)


@check_kind("results_table", ResultsTableParams)
def results_table(context: CheckContext, params: ResultsTableParams) -> Verdict:
    """One row per configuration, no failed rows; each row's memory is that of the model its configuration loads, and its
    outputs are texts the notebook's generate calls on that kind of model produced."""
    frame = _results_frame(context, params)
    harness = context.require_harness()
    configurations = context.returned(
        harness.describe(params.configurations, timeout_s=context.timeout_s), f"`{params.configurations}`"
    )
    prompts = context.returned(harness.describe(params.prompts, timeout_s=context.timeout_s), f"`{params.prompts}`")
    limit = context.returned(harness.describe(params.max_new_tokens, timeout_s=context.timeout_s), f"`{params.max_new_tokens}`")
    if not is_number(limit) or float(limit) < params.least_new_tokens:
        return Verdict.failed(
            f"`{params.max_new_tokens}` is {limit!r}, but the experiment generates {params.least_new_tokens} new tokens per "
            "call (the seed's setting): fewer tokens make every row's latency and outputs incomparable with the seed's.",
            expected=f"{params.max_new_tokens} = {params.least_new_tokens} (or more)",
            found=repr(limit),
        )
    count = len(configurations) if isinstance(configurations, (list, tuple)) else None
    if count is not None and frame.length != count:
        return Verdict.failed(
            f"`{params.variable}` has {frame.length} row{'s' if frame.length != 1 else ''} but `{params.configurations}` has {count} configurations: one row per configuration.",
            expected=f"{count} rows",
            found=f"{frame.length} rows",
        )
    names = frame.column(params.name_column)
    memories = frame.column(params.memory_column)
    failed_rows = [
        f"{name!s}: {memory!r}"
        for name, memory, latency in zip(names, memories, frame.column(params.latency_column), strict=True)
        if not is_number(memory) or not is_number(latency)
    ]
    if failed_rows:
        return Verdict.failed(
            f"Some rows of `{params.variable}` have no numeric memory or latency (the configuration failed in your loop): {'; '.join(failed_rows)}.",
            expected="numbers in every row",
            found="; ".join(failed_rows),
        )
    notebook = harness.notebook_events()
    if not notebook.ok:
        return failed_call(notebook, "the notebook's generate record")
    texts = generated_texts(context, params.model, notebook.generate_events())
    # Where the notebook's calls of its timed function were not recorded: each row's outputs come from generate calls
    # with the notebook's MAX_NEW_TOKENS (a quick test of a few tokens may have run too).
    at_limit = generated_texts(
        context,
        params.model,
        [event for event in notebook.generate_events() if tokens_limit(event) == int(float(limit)) and not event["cut_short"]],
    )
    every_text = set().union(*texts.values()) if texts else set()
    text_columns = [
        column
        for column in frame.columns
        if column not in (params.name_column, params.memory_column, params.latency_column)
        and all(isinstance(value, str) for value in frame.column(column))
    ]
    # An output column holds text the loop generated; any other text column (a device, a note) is left alone.
    output_columns = [c for c in text_columns if any(_same_text(value) in every_text for value in frame.column(c))]
    wanted_outputs = max(len(prompts) if isinstance(prompts, (list, tuple)) else 1, params.least_prompts)
    if len(output_columns) < wanted_outputs:
        return Verdict.failed(
            f"`{params.variable}` should hold one column of generated text per prompt ({wanted_outputs}), but "
            f"{len(output_columns)} of its columns hold text your notebook's generate calls produced"
            + (f" (the text columns {', '.join(repr(c) for c in text_columns)} hold other text)" if text_columns else "")
            + ".",
            expected=f"{wanted_outputs} columns of generated text (e.g. 'Prompt 1 Output')",
            found=f"columns {list(frame.columns)}",
        )
    problems = []
    rows = _row_configurations(context, params, frame)
    # Where the notebook's calls of its timed function were recorded, each row is held against the calls on one model of
    # its configuration's kind: the texts those calls returned, with the notebook's max_new_tokens.
    runs = rows_runs(context, params, frame, 1, output_columns)
    for position, (name, memory, configuration) in enumerate(zip(names, memories, rows, strict=True)):
        if configuration is None or configuration.model is None:
            problems.append(f"row {position + 1} ('{name}') matches no configuration that loads")
            continue
        if configuration.other:
            continue  # a configuration that loads another model is charged in its own check, not again in the table
        mistake = footprint_mistake(context, params.model, params.footprint_function, configuration.loaded_as())
        if not memory_agrees(float(memory), configuration, 1e-3, mistake):
            true_mb = configuration.true_footprint_mb() or 0.0
            problems.append(
                f"'{name}' reports {number(float(memory), 'MB')}, but the model that configuration loads takes {number(true_mb, 'MB')}"
            )
        if runs is not None:
            found = runs[position][1]
            if found is None:
                problems.append(f"no call of your notebook's {params.timed_function} ran a model loaded as '{name}' loads")
            else:
                problems += [f"'{name}': {problem}" for problem in (*found.outputs, *found.settings)]
            continue
        kind = configuration.loaded_as()
        own, as_set = texts.get(kind, set()), at_limit.get(kind, set())
        for column in output_columns:
            value = frame.rows[position][frame.columns.index(column)]
            if _same_text(value) not in own:
                problems.append(f"'{name}' {column!s} is not the text of any generate call your notebook made with that model")
            elif _same_text(value) not in as_set:
                problems.append(
                    f"'{name}' {column!s} is the text of a generate call that did not run {params.max_new_tokens} "
                    f"({limit}): another max_new_tokens, or stopped short at an end the model did not choose"
                )
    if problems:
        return Verdict.failed(
            f"`{params.variable}` does not describe what its configurations load and generate: {'; '.join(problems[:6])}"
            + (f" (and {len(problems) - 6} more)" if len(problems) > 6 else "")
            + ".",
            expected="each row's memory and outputs from the model its configuration loads",
            found="; ".join(problems[:6]),
        )
    memory = {c.loaded_as(): float(value) for c, value in zip(rows, memories, strict=True) if c is not None}
    baseline = memory.get("fp16" if context.on_cuda else "fp32")
    int8 = memory.get("int8")
    four_bit = [memory[k] for k in ("nf4", "fp4") if k in memory]
    if baseline is not None and int8 is not None and four_bit and not baseline > int8 > max(four_bit):
        return Verdict.failed(
            f"Memory should shrink with precision (baseline > INT8 > 4-bit), but the table reads baseline {number(baseline, 'MB')}, INT8 {number(int8, 'MB')}, 4-bit {', '.join(number(v, 'MB') for v in four_bit)}.",
            expected="baseline > INT8 > 4-bit",
            found=f"{number(baseline)} / {number(int8)} / {', '.join(number(v) for v in four_bit)} MB",
        )
    return Verdict.passed(
        f"`{params.variable}` has one row per configuration; each row's memory is that of the model its configuration loads "
        f"({', '.join(number(float(m), 'MB') for m in memories)}), and its {len(output_columns)} outputs are texts that model generated."
    )
