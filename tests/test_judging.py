"""Fast tests of pure judging logic with made-up events and notebooks (no kernel, no model)."""

from __future__ import annotations

import types
from typing import Any

import nbformat
import pytest
from course_assignments.ptq_bnb.checks import latency_readings_of, takes_medians
from course_assignments.quantization.checks import SETTINGS, Measurement, holds, repeated_measurements

from grader.checks.common import WrittenAnswerParams, written_answer
from grader.checks.labels import missing_scenarios, read_scenario
from grader.checks.timing import judge_new_tokens, judge_rates, warmup_before
from grader.kernel.evidence import generated_anything
from tests.events import event, generate_event, synchronize_event


def generate(start: float, end: float, **fields: Any) -> dict[str, Any]:
    """A made-up generate event."""
    return generate_event(**{"start": start, "end": end, "new_tokens": [4], **fields})


@pytest.mark.parametrize(
    ("label", "use_cache", "padding"),
    [
        ("use_cache=False,padding=left", False, "left"),
        ("KV cache disabled, left padding", False, "left"),
        ("cache: off", False, None),
        ("no-cache / right", False, "right"),
        ("without KV cache (right pad)", False, "right"),
        ("use_cache=True,padding=right", True, "right"),
        ("with cache, left-padded", True, "left"),
        ("Cache=True|left", True, "left"),
        ("baseline", None, None),
        ("uncached, left", False, "left"),
        ("w/o KV cache / right", False, "right"),
        ("cacheless (right padding)", False, "right"),
    ],
)
def test_cache_and_padding_are_read_by_meaning(label: str, use_cache: bool | None, padding: str | None) -> None:
    scenario = read_scenario(label)
    assert (scenario.use_cache, scenario.padding) == (use_cache, padding)


@pytest.mark.parametrize(
    ("label", "size"),
    [
        ("batch_size=4", 4),
        ("bs=2", 2),
        ("batch of 3", 3),
        ("5 prompts", 5),
        ("batched x8", 8),
        ("bsz=4", 4),
        ("batch of size 4", 4),
        ("batch (n=2)", 2),
        ("4-way batch", 4),
        ("1 prompt", 1),
        ("batch (1)", 1),  # round 17: the number alone in brackets
        ("batched (4)", 4),
        ("batch_size (4)", 4),
        ("batch [4]", 4),
        ("x4 batch", 4),
    ],
)
def test_batch_sizes_are_read_by_meaning(label: str, size: int) -> None:
    assert read_scenario(label).batch_size == size


@pytest.mark.parametrize(
    ("label", "baseline", "quantized"),
    [
        ("int8 weights, fp32 activations", False, True),  # a quantized model's label, though it names fp32
        ("PyTorch FP32", True, False),
        ("FP32 baseline", True, False),
        ("ONNX INT8 (dynamic)", False, True),
        ("not quantized", True, False),
        ("ONNX Runtime FP32 (reference)", False, False),  # the unquantized ONNX model, beside the comparison
        ("baseline: edge very_long", False, False),  # an edge prompt's row
        ("ORT QInt8 (dynamic)", False, True),  # round 17: ONNX Runtime's own names
        ("ORT FP32", False, False),
    ],
)
def test_baseline_and_quantized_are_read_by_meaning(label: str, baseline: bool, quantized: bool) -> None:
    scenario = read_scenario(label)
    assert (scenario.baseline, scenario.quantized) == (baseline, quantized)


def test_a_table_worded_its_own_way_has_every_scenario() -> None:
    labels = [
        "Baseline (PyTorch FP32)",
        "ONNX Runtime INT8",
        "KV cache on, left padding",
        "KV cache on, right padding",
        "KV cache disabled, left padding",
        "KV cache disabled, right padding",
        "batch of 1",
        "batch of 4",
    ]
    assert missing_scenarios(labels, [1, 4], SETTINGS) == []
    assert missing_scenarios(labels[:-1], [1, 4], SETTINGS) == ["batch_size=4"]
    assert missing_scenarios([label for label in labels if "disabled, right" not in label], [1, 4], SETTINGS) == [
        "use_cache=False,padding=right"
    ]


def test_a_warm_up_must_generate_tokens_on_the_same_model_and_device() -> None:
    timed = generate(1.0, 1.1)
    assert warmup_before([generate(0.0, 0.1), timed], timed) is not None
    raised = generate(0.0, 0.01, error="ValueError: max_new_tokens must be greater than 0", new_tokens=None, output_shape=None)
    assert warmup_before([raised, timed], timed) is None
    nothing = generate(0.0, 0.01, new_tokens=[0], output_shape=[1, 5])
    assert warmup_before([nothing, timed], timed) is None
    other_model = generate(0.0, 0.1, model_serial=2)
    assert warmup_before([other_model, timed], timed) is None
    other_device = generate(0.0, 0.1, model_device="cuda:0")
    assert warmup_before([other_device, timed], timed) is None
    after = generate(1.2, 1.3)
    assert warmup_before([timed, after], timed) is None


def test_generated_anything_reads_the_output_width_when_no_counts_were_recorded() -> None:
    assert generated_anything(generate_event(input_shape=[2, 5], output_shape=[2, 7]))
    assert not generated_anything(generate_event(input_shape=[2, 5], output_shape=[2, 5]))


def _notebook(*markdown: str) -> Any:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell(text) for text in markdown]
    # The rubric's written answers of the section: each answer is read between its own title and the next question's.
    checks = [
        types.SimpleNamespace(kind="written_answer", params={"section": "Results", "question": question})
        for question in ("Setup", "Trends")
    ]
    return types.SimpleNamespace(notebook=notebook, rubric=types.SimpleNamespace(checks=checks))


QUESTIONS = (
    "## 6. Results\n\n1.  **Setup:**\n    *   **TODO**: Describe your setup.\n\n"
    "2.  **Trends:**\n    *   **TODO**: Give two or three bullet points."
)
SETUP = WrittenAnswerParams(section="Results", question="Setup", prompt="Describe your setup.")
TRENDS = WrittenAnswerParams(section="Results", question="Trends", prompt="Give two or three bullet points.")
ANSWER = (
    "**Setup.** A CPU, gpt2, float32 and float16 (which fell back to float32), 32 new tokens, with the cache on.\n\n"
    "**Trends.** Latency barely grows with the prompt on this tiny model; float16 is the same as float32 on a CPU, "
    "since both run in float32 there."
)


def test_answers_in_a_cell_of_their_own_below_the_todo_questions_are_read() -> None:
    context = _notebook(QUESTIONS, ANSWER)
    assert written_answer.run(context, SETUP).outcome == "manual"
    assert written_answer.run(context, TRENDS).outcome == "manual"


def test_an_answer_typed_under_its_question_below_the_todo_line_is_read() -> None:
    text = QUESTIONS.replace(
        "*   **TODO**: Describe your setup.",
        "*   **TODO**: Describe your setup.\n\n    I ran gpt2 on a CPU in float32 with 32 new tokens.",
    )
    assert written_answer.run(_notebook(text), SETUP).outcome == "manual"


@pytest.mark.parametrize(
    "later",
    [
        "(will fill these in once the experiment has finished running)",
        "",
    ],
)
def test_todo_questions_with_no_real_answer_still_fail(later: str) -> None:
    cells = (QUESTIONS, later) if later else (QUESTIONS,)
    verdict = written_answer.run(_notebook(*cells), SETUP)
    assert verdict.outcome == "failed" and "still reads TODO" in verdict.message


def test_todo_kept_with_a_few_words_added_still_fails() -> None:
    text = QUESTIONS.replace("Describe your setup.", "Describe your setup. CPU, gpt2, float32 and 32 tokens mostly.")
    assert written_answer.run(_notebook(text), SETUP).outcome == "failed"


# A measure_generation that does not generate what it is given is charged in its own checks; the functions built on it
# (ablation, batching, edge prompts) are then judged by what they gave it, from the watched calls' arguments.


def measure_returned(*arguments: tuple[str, Any], latency: float = 0.5, tokens: int = 10) -> dict[str, Any]:
    """A made-up ``returned`` event of measure_generation: its arguments as the kernel describes them."""
    from grader.kernel.runtime import describe

    described = [[name, value if isinstance(value, dict) else describe(value)] for name, value in arguments]
    value = describe({"latency_s": latency, "new_tokens": tokens, "tokens_per_s": tokens / latency, "ms_per_token": 1.0})
    return event("returned", function="measure_generation", start=0.0, time=0.0, arguments=described, value=value)


def tokenizer_at(side: str) -> dict[str, Any]:
    return {"kind": "object", "type": "GPT2TokenizerFast", "padding_side": side}


def measure_call(
    prompts: list[str], max_new_tokens: int, use_cache: Any = True, side: str = "right", *extra: Any, **returned: Any
):
    from course_assignments.quantization.checks import measure_calls

    from grader.kernel.harness import CallOutcome

    arguments = [("model", {"kind": "object", "type": "GPT2LMHeadModel"}), ("tokenizer", tokenizer_at(side))]
    arguments += [("prompts", prompts), ("max_new_tokens", max_new_tokens), ("use_cache", use_cache)]
    arguments += [(f"extra{index}", value) for index, value in enumerate(extra)]
    (call,) = measure_calls(CallOutcome("returned", events=(measure_returned(*arguments, **returned),)), "measure_generation")
    return call


PROMPTS = ["a b c", "d e", "f g h i j"]


def test_an_ablation_that_asked_for_every_setting_is_not_charged_for_its_measure_function() -> None:
    from course_assignments.quantization.hidden_checks import ablation_asked

    calls = [measure_call(list(reversed(PROMPTS)), 7, cache, side) for cache in (True, False) for side in ("left", "right")]
    assert ablation_asked(calls, PROMPTS, 7, "measure_generation") == []
    calls = [measure_call(tuple(PROMPTS), 7, cache, side) for cache in (True, False) for side in ("left", "right")]
    assert ablation_asked(calls, PROMPTS, 7, "measure_generation") == []
    # the side passed as an argument of the student's own, the cache as 0
    calls = [measure_call(PROMPTS, 7, cache, "right", side) for cache in (1, 0) for side in ("left", "right")]
    assert ablation_asked(calls, PROMPTS, 7, "measure_generation") == []


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ([(True, "left"), (True, "right")], "use_cache=False was never passed"),
        ([(cache, "right") for cache in (True, False)], "padding_side set to 'left'"),
        ([(cache, "left") for cache in (True, False)], "padding_side set to 'right'"),
    ],
)
def test_an_ablation_that_never_asked_for_a_setting_is_charged(settings: list[tuple[bool, str]], words: str) -> None:
    from course_assignments.quantization.hidden_checks import ablation_asked

    calls = [measure_call(PROMPTS, 7, cache, side) for cache, side in settings]
    assert any(words in problem for problem in ablation_asked(calls, PROMPTS, 7, "measure_generation"))


def test_an_ablation_that_gave_other_prompts_or_tokens_is_charged() -> None:
    from course_assignments.quantization.hidden_checks import ablation_asked

    settings = [(cache, side) for cache in (True, False) for side in ("left", "right")]
    for prompts, tokens in ((PROMPTS[:1], 7), (PROMPTS, 32), (["x", "y", "z"], 7)):
        calls = [measure_call(prompts, tokens, cache, side) for cache, side in settings]
        (problem,) = ablation_asked(calls, PROMPTS, 7, "measure_generation")
        assert "was never given the prompts and max_new_tokens=7" in problem


def batch_frame(rows: list[tuple[int, float, float, float]]) -> Any:
    from grader.kernel.values import Frame

    columns = ("batch_size", "latency_s", "tokens_per_s", "latency_per_sample_s")
    return Frame(columns, ("int64", "float64", "float64", "float64"), tuple(rows), len(rows))


def test_batches_are_judged_by_what_measure_batched_gave_its_measure_function() -> None:
    from course_assignments.quantization.checks import BatchParams, batches_asked_throughput
    from course_assignments.quantization.hidden_checks import batches_asked_sizes

    params = BatchParams(function="measure_batched", prompts=PROMPTS)
    calls = [
        measure_call([PROMPTS[0]], 7, latency=0.2, tokens=7),
        measure_call([PROMPTS[1], PROMPTS[2], PROMPTS[1]], 7, latency=0.3, tokens=7),
    ]
    right = batch_frame([(1, 0.2, 35.0, 0.2), (3, 0.3, 7 / 0.3, 0.1)])
    assert batches_asked_throughput(params, PROMPTS, 7, [1, 3], right, calls).outcome == "passed"
    assert batches_asked_sizes(params, PROMPTS, 7, [1, 3], calls).outcome == "passed"
    # tokens counted as batch_size x max_new_tokens is the batch's count had it been generated
    assert batches_asked_throughput(params, PROMPTS, 7, [1, 3], batch_frame([(3, 0.3, 21 / 0.3, 0.1)]), calls).outcome == "passed"
    invented = batch_frame([(1, 1.0, 7.0, 1.0), (3, 1.0, 7.0, 1 / 3)])
    verdict = batches_asked_throughput(params, PROMPTS, 7, [1, 3], invented, calls)
    assert verdict.outcome == "failed" and "report the latency it measured" in verdict.message
    first_only = batch_frame([(1, 0.2, 35.0, 0.2), (3, 0.3, 7 / 0.9, 0.1)])
    verdict = batches_asked_throughput(params, PROMPTS, 7, [1, 3], first_only, calls)
    assert verdict.outcome == "failed" and "tokens_per_s x latency_s" in verdict.message
    per_batch = batch_frame([(1, 0.2, 35.0, 0.2), (3, 0.3, 7 / 0.3, 0.3)])
    assert "latency_per_sample_s" in batches_asked_throughput(params, PROMPTS, 7, [1, 3], per_batch, calls).message
    # every prompt whatever the size; prompts of its own; another max_new_tokens
    for wrong in (
        [measure_call(PROMPTS, 7), measure_call(PROMPTS, 7)],
        [measure_call(["hello"], 7), measure_call(["hello"] * 3, 7)],
        [measure_call([PROMPTS[0]], 32), measure_call(PROMPTS, 32)],
    ):
        verdict = batches_asked_sizes(params, PROMPTS, 7, [1, 3], wrong)
        assert verdict.outcome == "failed" and "pass each batch of batch_size prompts" in verdict.message


class WordTokenizer:
    """A made-up tokenizer: one id per word (a line break is a word)."""

    def __call__(self, text: str) -> dict[str, list[int]]:
        return {"input_ids": [hash(word) % 1000 for word in text.replace("\n", " \n ").split(" ") if word]}


EDGES = {"short": "Hi", "long": " ".join(f"w{i}" for i in range(250)), "multi": "list:\n- eggs\n- milk", "repeat": "la " * 40}


def test_edge_prompts_are_judged_by_what_was_given_to_the_measure_function() -> None:
    from course_assignments.quantization.checks import EdgeParams, edges_asked

    params, tokenizer, call = EdgeParams(function="probe_edge_prompts"), WordTokenizer(), "probe_edge_prompts(...)"
    latencies = {kind: 0.1 * (index + 1) for index, kind in enumerate(EDGES)}
    reported = {
        kind: {"latency_s": latency, "tokens_per_s": 9 / latency, "ms_per_token": 1.0} for kind, latency in latencies.items()
    }
    calls = [measure_call([prompt], 9, latency=latencies[kind], tokens=9) for kind, prompt in EDGES.items()]
    assert edges_asked(params, tokenizer, 9, call, calls, reported).outcome == "passed"
    one_line = [measure_call([prompt.replace("\n", " ")], 9) for prompt in EDGES.values()]
    verdict = edges_asked(params, tokenizer, 9, call, one_line, reported)
    assert verdict.outcome == "failed" and "never gave measure_generation a multi-line prompt" in verdict.message
    unfair = [measure_call([prompt], 9 if kind != "long" else 32) for kind, prompt in EDGES.items()]
    verdict = edges_asked(params, tokenizer, 9, call, unfair, reported)
    assert verdict.outcome == "failed" and "max_new_tokens=32" in verdict.message
    # metrics of their own, or one call's metrics for two entries
    for wrong in (
        {**reported, "repeat": {"latency_s": 1.0, "tokens_per_s": 1.0, "ms_per_token": 1.0}},
        {**reported, "repeat": reported["short"]},
    ):
        verdict = edges_asked(params, tokenizer, 9, call, calls, wrong)
        assert verdict.outcome == "failed" and "not what any call of measure_generation it made returned" in verdict.message


def test_a_watched_call_records_its_arguments_small_and_by_position() -> None:
    from grader.kernel.runtime import MAX_STRING, _arguments, _signature

    class Tokenizer:
        padding_side = "left"

    class Hostile:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError("no")

    def measure(model, tokenizer, prompts, max_new_tokens=32, use_cache=True, *rest, **options):
        return None

    recorded = dict(_arguments(_signature(measure), (Hostile(), Tokenizer(), ("a", "b")), {"use_cache": False, "side": "right"}))
    assert list(recorded) == ["model", "tokenizer", "prompts", "max_new_tokens", "use_cache", "side"]
    assert recorded["model"]["kind"] == "undescribable" and recorded["model"]["error"] == "RuntimeError('no')"
    assert recorded["tokenizer"]["kind"] == "object" and recorded["tokenizer"]["padding_side"] == "left"
    assert recorded["prompts"]["kind"] == "tuple" and recorded["max_new_tokens"]["value"] == 32
    assert recorded["use_cache"]["value"] is False and recorded["side"]["value"] == "right"
    assert [name for name, _ in _arguments(_signature(measure), (1, 2, 3, 4, 5, "left"), {})][5:] == ["rest[0]"]
    corpus = ["x" * 10] * 65
    long = "y" * (MAX_STRING + 1)
    recorded = dict(_arguments(_signature(measure), (None, None, corpus, long), {}))
    assert recorded["prompts"] == {"kind": "object", "type": "builtins.list", "length": 65}
    assert recorded["max_new_tokens"] == {"kind": "object", "type": "builtins.str", "length": MAX_STRING + 1}
    # A very long prompt (a thousand tokens of text, some 5,000 characters) is kept whole, alone or in a list.
    essay = "word " * 1_200
    recorded = dict(_arguments(_signature(measure), (None, None, [essay], essay), {}))
    assert recorded["prompts"]["items"][0]["value"] == essay and recorded["max_new_tokens"]["value"] == essay
    # A call its signature does not accept is recorded by position (the call itself then raises, as it would).
    assert [name for name, _ in _arguments(_signature(measure), (1,), {})] == ["0"]


def test_a_caller_may_report_the_best_or_the_mean_of_repeated_measurements() -> None:
    from course_assignments.quantization.checks import BatchParams, EdgeParams, batches_asked_throughput, edges_asked

    params = BatchParams(function="measure_batched", prompts=PROMPTS)
    calls = [measure_call([PROMPTS[0]], 7, latency=latency, tokens=7) for latency in (0.2, 0.3)]
    for latency in (0.2, 0.25, 0.3):
        row = batch_frame([(1, latency, 7 / latency, latency)])
        assert batches_asked_throughput(params, PROMPTS, 7, [1], row, calls).outcome == "passed", latency
    assert batches_asked_throughput(params, PROMPTS, 7, [1], batch_frame([(1, 0.5, 14.0, 0.5)]), calls).outcome == "failed"
    edge = EdgeParams(function="probe_edge_prompts")
    calls = [measure_call([prompt], 9, latency=latency, tokens=9) for prompt in EDGES.values() for latency in (0.1, 0.2)]
    mean = {kind: {"latency_s": 0.15, "tokens_per_s": 9 / 0.15, "ms_per_token": 1.0} for kind in EDGES}
    assert edges_asked(edge, WordTokenizer(), 9, "probe_edge_prompts(...)", calls, mean).outcome == "passed"


# ------------------------------------------------------------------ CUDA judgement, on made-up events
# The CUDA-only checks are skipped on a CPU grader: their judging is proven here, on any machine.


def synchronize(start: float, end: float, via: str = "torch.cuda.synchronize") -> dict[str, Any]:
    """A made-up torch.cuda.synchronize event (or a stream's or CUDA event's synchronize, or an event recorded)."""
    return synchronize_event(start, end, via=via)


@pytest.mark.parametrize(
    ("synchronizes", "missing"),
    [
        ([synchronize(0.90, 0.95), synchronize(1.20, 1.25)], None),
        ([synchronize(0.90, 0.95)], "after"),
        ([synchronize(1.20, 1.25)], "before"),
        ([], "before and after"),
        ([synchronize(1.02, 1.05)], "before and after"),  # during the timed generate: neither
        ([synchronize(0.05, 0.08), synchronize(0.2, 0.3)], "after"),  # around the warm-up, not the timed call
        ([synchronize(-0.1, -0.05), synchronize(1.20, 1.25)], "before"),  # before the warm-up: its work is timed
        (
            [
                synchronize(0.9, 0.91, "Event.record"),
                synchronize(1.12, 1.13, "Event.record"),
                synchronize(1.2, 1.3, "Event.synchronize"),
            ],
            None,
        ),
        ([synchronize(0.9, 0.91, "Stream.synchronize"), synchronize(1.2, 1.3, "Stream.synchronize")], None),
        ([synchronize(0.9, 0.91, "Event.record"), synchronize(1.12, 1.13, "Event.record")], "after"),  # never waited for
        ([synchronize(0.90, 0.95, "torch.cuda.synchronize"), synchronize(1.20, 1.25)], None),
    ],
)
def test_cuda_synchronize_is_judged_around_the_timed_generate(synchronizes: list[dict[str, Any]], missing: str | None) -> None:
    from grader.checks.timing import judge_synchronize
    from grader.kernel.harness import CallOutcome

    warm_up, timed = generate(0.0, 0.1, model_device="cuda:0"), generate(1.0, 1.1, model_device="cuda:0")
    events = sorted([warm_up, timed, *synchronizes], key=lambda event: event["start"])
    verdict = judge_synchronize(CallOutcome("returned", events=tuple(events)), "time_generation")
    if missing is None:
        assert verdict.outcome == "passed"
    else:
        assert verdict.outcome == "failed"
        assert f"does not call torch.cuda.synchronize() {missing} the generate call" in verdict.message


@pytest.mark.parametrize(
    ("warm_up_tokens", "synchronizes", "passes"),
    [
        (4, [(0.90, 0.95), (3.20, 3.25)], True),  # one wait around a best-of-three loop, after a shorter warm-up
        (7, [(0.90, 0.95), (3.20, 3.25)], True),  # ... after a warm-up of the same work
        (7, [(-0.1, -0.05), (3.20, 3.25)], False),  # before a warm-up of the same work: the warm-up is timed
        (None, [(1.15, 1.2), (3.20, 3.25)], True),  # no warm-up: the first repeat is taken for one
        (None, [(0.90, 0.95), (3.20, 3.25)], False),  # ... so a wait before it leaves it inside the timer
    ],
)
def test_cuda_synchronize_around_repeated_timed_generates(
    warm_up_tokens: int | None, synchronizes: list[tuple[float, float]], passes: bool
) -> None:
    from grader.checks.timing import judge_synchronize
    from grader.kernel.harness import CallOutcome

    repeats = [generate(1.0 + k, 1.1 + k, model_device="cuda:0", new_tokens_limit=7) for k in range(3)]
    warm_up = [] if warm_up_tokens is None else [generate(0.0, 0.1, model_device="cuda:0", new_tokens_limit=warm_up_tokens)]
    events = sorted([*warm_up, *repeats, *(synchronize(*span) for span in synchronizes)], key=lambda event: event["start"])
    verdict = judge_synchronize(CallOutcome("returned", events=tuple(events)), "measure_generation")
    assert (verdict.outcome == "passed") is passes, verdict.message


def test_cuda_used_on_a_cpu_grader_is_an_error_that_says_so_and_nothing_on_cuda() -> None:
    from grader.checks.timing import cuda_misuse
    from grader.kernel.harness import CallOutcome, ExceptionInfo

    raised = CallOutcome(
        "raised", exception=ExceptionInfo("AssertionError", "Torch not compiled with CUDA enabled", "in torch.cuda.synchronize()")
    )
    verdict = cuda_misuse(raised, "time_generation", on_cuda=False)
    assert verdict is not None and verdict.outcome == "error"
    assert "call torch.cuda.synchronize() only when model.device.type == 'cuda'" in verdict.message
    assert cuda_misuse(raised, "time_generation", on_cuda=True) is None  # on a GPU the call's own failure is judged
    other = CallOutcome("raised", exception=ExceptionInfo("KeyError", "'latency_s'"))
    assert cuda_misuse(other, "time_generation", on_cuda=False) is None


def test_a_float16_run_on_cuda_is_judged_by_the_dtype_of_the_timed_model() -> None:
    """The float16 run of a precision sweep must time a float16 model: read from the timed generate's record."""
    from course_assignments.latency.checks import PrecisionSweep, PrecisionSweepParams, judge_fp16_run, timed_per_precision

    from grader.kernel.harness import CallOutcome

    params = PrecisionSweepParams(function="sweep_precisions", prompts=["p", "q"], precisions=["float32", "float16"])
    fp32 = [generate(0.0, 0.1, model_serial=1, model_dtype="torch.float32", max_new_tokens=8)]
    fp32 += [generate(0.2, 0.4, model_serial=1, model_dtype="torch.float32", max_new_tokens=8)]
    fp16 = [generate(1.0, 1.1, model_serial=2, model_dtype="torch.float16", max_new_tokens=8)]
    fp16 += [generate(1.2, 1.3, model_serial=2, model_dtype="torch.float16", max_new_tokens=8)]
    resolved = {"float32": ("torch.float32", "float32"), "float16": ("torch.float16", "float16")}

    def sweep(events: list[dict[str, Any]]) -> PrecisionSweep:
        return PrecisionSweep("sweep_precisions(...)", 8, CallOutcome("returned", events=tuple(events)), {}, resolved)

    timed = timed_per_precision(sweep([*fp32, *fp16]), params)
    assert [event["model_dtype"] for event in timed] == ["torch.float32", "torch.float16"]
    assert judge_fp16_run(sweep([*fp32, *fp16]), params).outcome == "passed"
    cast_back = [{**event, "model_dtype": "torch.float32"} for event in fp16]  # float16 asked, float32 timed
    verdict = judge_fp16_run(sweep([*fp32, *cast_back]), params)
    assert verdict.outcome == "failed" and "no timed generate of the precision sweep ran a float16 model" in verdict.message
    # On the CPU the float16 request resolves to float32: nothing to judge.
    on_cpu = {"float32": ("torch.float32", "float32"), "float16": ("torch.float32", "float32 (CPU fallback)")}
    cpu_sweep = PrecisionSweep("sweep_precisions(...)", 8, CallOutcome("returned", events=tuple([*fp32, *cast_back])), {}, on_cpu)
    assert judge_fp16_run(cpu_sweep, params).outcome == "passed"


# One judge of a timed generate's new tokens and rates, used by latency, perplexity and quantization alike.
EARLY_STOP = {"input_shape": [1, 5], "output_shape": [1, 11], "new_tokens": [6], "max_new_tokens": 20}
BATCH = {"input_shape": [3, 5], "output_shape": [3, 13], "new_tokens": [8, 3, 8], "max_new_tokens": 8}


@pytest.mark.parametrize(
    ("timed", "reported", "words"),
    [
        (EARLY_STOP, 6, None),
        (EARLY_STOP, 6.0, None),
        (EARLY_STOP, 20, "new_tokens assumes all 20 tokens were generated, but the model stopped after 6"),
        (EARLY_STOP, 11, "new_tokens is 11, but the timed generate produced 6 new tokens."),
        (EARLY_STOP, "6", "new_tokens is '6'"),
        (EARLY_STOP, 6.5, "new_tokens is 6.5"),
        (BATCH, 19, None),  # every sequence, each up to its end-of-text
        (BATCH, 24, None),  # every generated position of the batch (padding after an early stop counted)
        (BATCH, 8, "it counts one sequence of the 3; count the new tokens of every sequence of the batch"),
        (BATCH, 25, "new_tokens is 25, but the timed generate of 3 prompts produced 19 to 24 new tokens."),
    ],
)
def test_new_tokens_are_those_the_timed_generate_produced(timed: dict[str, Any], reported: Any, words: str | None) -> None:
    verdict = judge_new_tokens(reported, generate_event(**timed), timed["max_new_tokens"])
    assert (verdict is None) == (words is None)
    assert verdict is None or (verdict.outcome == "failed" and words in verdict.message)


@pytest.mark.parametrize(
    ("rate", "per_token", "words"),
    [
        (30.0, 1000 / 30, None),
        (30.3, 33.0, None),  # within the tolerance
        (100.0, 10.0, "tokens_per_s assumes all 20 tokens were generated, but the model stopped after 6"),
        (3.0, 1000 / 30, "tokens_per_s is 3, but 6 new tokens in 0.2 s is 30."),
        ("fast", 1000 / 30, "tokens_per_s is a str ('fast')"),
        (30.0, 1 / 30, "over 6 tokens is 33.33 ms: it is in seconds; multiply by 1000."),
        (30.0, 5.0, "ms_per_token is 5, but 0.2 s over 6 tokens is 33.33 ms."),
        (30.0, None, "ms_per_token is None"),
    ],
)
def test_rates_derive_from_the_new_tokens_and_the_latency(rate: Any, per_token: Any, words: str | None) -> None:
    verdict = judge_rates(0.02, 0.2, 6, rate, per_token, max_new_tokens=20)
    assert (verdict is None) == (words is None), verdict
    assert verdict is None or (verdict.outcome == "failed" and words in verdict.message), verdict.message


def test_a_rate_alone_is_judged_without_ms_per_token() -> None:
    assert judge_rates(0.02, 0.2, 6, 30.0) is None
    assert judge_rates(0.02, 0.2, 6, 100.0) is not None  # no max_new_tokens given: the plain message
    assert "assumes" not in judge_rates(0.02, 0.2, 6, 100.0).message


def test_a_precision_sweep_s_rates_may_come_from_the_mean_latency_of_its_trials() -> None:
    from course_assignments.latency.checks import _same_metrics

    runs = [
        {"latency_s": latency, "new_tokens": 8, "tokens_per_s": 8 / latency, "ms_per_token": 1000 * latency / 8}
        for latency in (0.2, 0.25, 0.3)
    ]
    mean = 0.25
    derived = {"latency_s": mean, "new_tokens": 8, "tokens_per_s": 8 / mean, "ms_per_token": 1000 * mean / 8}
    assert _same_metrics(derived, runs)
    assert not _same_metrics({**derived, "tokens_per_s": 2 * 8 / mean}, runs)  # a rate of nothing measured
    # The mean latency beside the best run's rates: each column a reading, but not one reading.
    assert _same_metrics({"latency_s": 0.2, "new_tokens": 8, "tokens_per_s": 40.0, "ms_per_token": 25.0}, runs)
    assert not _same_metrics({"latency_s": mean, "new_tokens": 8, "tokens_per_s": 40.0, "ms_per_token": 25.0}, runs)
    trials = [
        {"latency_s": latency, "new_tokens": 8, "tokens_per_s": 8 / latency, "ms_per_token": 1000 * latency / 8}
        for latency in (0.2113, 0.2571, 0.3342)
    ]
    assert _same_metrics(trials[0], trials)  # the best (fastest) run
    assert not _same_metrics(trials[2], trials)  # the worst run is no summary of them


def test_a_caption_row_of_the_results_table_is_no_scenario() -> None:
    from course_assignments.quantization.checks import measured_rows

    from grader.kernel.values import Frame

    nan = float("nan")
    table = Frame(
        columns=("scenario", "latency_s", "tokens_per_s", "ms_per_token", "ppx"),
        dtypes=("object", "float64", "float64", "float64", "float64"),
        rows=(("model=gpt2 | device=cpu | dtype=float32", nan, nan, nan, nan), ("baseline", 0.2, 40.0, 25.0, 6.3)),
        length=2,
    )
    assert [row["scenario"] for row in measured_rows(table)] == ["baseline"]


def test_a_median_counts_only_where_the_notebook_takes_one() -> None:
    """A median of three runs is one of them: a notebook reporting its last run would read as a median by chance."""
    runs = [1.4, 1.1, 1.2]  # the last run is the median
    assert 1.2 in latency_readings_of(runs, 3)
    assert 1.2 not in latency_readings_of(runs, 3, medians=False)
    assert latency_readings_of(runs, 3, medians=False) == pytest.approx([sum(runs) / 3])
    six = [2.0, 2.1, 2.2, 1.0, 1.1, 1.2]  # the slowest three of six are no average of them
    assert not any(abs(reading - 2.1) < 1e-9 for reading in latency_readings_of(six, 3, medians=False))

    def notebook(*sources: str) -> Any:
        return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])

    assert takes_medians(notebook("import numpy as np", "latency = float(np.median(times))"))
    assert takes_medians(notebook("import statistics\nm = statistics.median(times)"))
    assert takes_medians(notebook("m = pd.Series(times).quantile(0.5)"))
    assert not takes_medians(notebook("latency = times[-1]  # median of the runs", "print('median')"))
    assert not takes_medians(notebook("def broken(:\n    np.median(x)", "m = sum(times) / len(times)"))


def test_a_text_run_in_pieces_on_the_cache_is_scored_as_one_run() -> None:
    """An ONNX session run on a text's first token, then on the rest with the cache (its mask covering the past too),
    gives the loss one run over the whole text gives: the second run's first token is scored with the first's logits."""
    import numpy

    from grader.kernel import runtime

    rng = numpy.random.default_rng(0)
    ids = numpy.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]])
    logits = rng.normal(size=(2, 5, 10))

    class Session:
        def get_outputs(self) -> list[Any]:
            return [types.SimpleNamespace(name="logits")]

    def run(serial: int, part: slice, past: int) -> dict[str, Any]:
        feed = {"input_ids": ids[:, part], "attention_mask": numpy.ones((2, past + ids[:, part].shape[1]), dtype=int)}
        return dict(runtime._run_tokens(Session(), feed, [logits[:, part]], True, serial))

    whole = run(1, slice(0, 5), 0)
    pieces = [run(2, slice(0, 1), 0), run(2, slice(1, 5), 1)]
    assert pieces[0]["row_tokens"] == [1, 1] and pieces[1]["row_tokens"] == [4, 4]
    for way in ("pairs", "targets"):
        assert sum(piece["nll_counts"][way] for piece in pieces) == whole["nll_counts"][way] == 8
        assert sum(piece["nll_sums"][way] for piece in pieces) == pytest.approx(whole["nll_sums"][way])
    token_by_token = [run(3, slice(0, 1), 0)] + [run(3, slice(i, i + 1), i) for i in range(1, 5)]
    assert sum(piece["nll_sums"]["pairs"] for piece in token_by_token) == pytest.approx(whole["nll_sums"]["pairs"])
    fresh = run(2, slice(1, 5), 0)  # the same tokens on no cache: its first token is not predicted by an earlier run
    assert fresh["nll_counts"]["pairs"] == 6


def test_a_row_may_report_the_mean_median_or_best_of_repeated_runs() -> None:
    """A controller that measures the baseline three times and reports their mean (its rates from the mean latency,
    or each metric averaged) reports its measurements; a latency no run or summary of runs gives does not."""
    runs = [
        Measurement("baseline", {"latency_s": t, "tokens_per_s": 32 / t, "ms_per_token": 1000 * t / 32}, "")
        for t in (1.0, 1.2, 1.7)
    ]
    summaries = repeated_measurements(runs, "measure_generation")
    mean = 3.9 / 3
    assert any(
        holds({"latency_s": mean, "tokens_per_s": 32 / mean, "ms_per_token": 1000 * mean / 32}, m, 1e-3) for m in summaries
    )
    mixed = {"latency_s": mean, "tokens_per_s": 32 / 1.2}  # the mean latency beside one run's rate
    assert not any(holds(mixed, m, 1e-3) for m in summaries)
    averaged = {key: sum(run.metrics[key] for run in runs) / 3 for key in ("latency_s", "tokens_per_s", "ms_per_token")}
    assert any(holds(averaged, m, 1e-3) for m in summaries)
    assert any(holds({"latency_s": 1.0, "tokens_per_s": 32.0}, m, 1e-3) for m in summaries)  # the best of them
    assert not any(holds({"latency_s": 0.9, "tokens_per_s": 32 / 0.9}, m, 1e-3) for m in summaries)
    assert repeated_measurements(runs[:1], "measure_generation") == []


def test_a_rate_fudged_by_two_percent_fails_and_one_from_the_unrounded_latency_passes() -> None:
    """tokens_per_s is the new tokens over the latency: a rate 1.9 % high is not; one computed before the latency was
    rounded for the report (0.0456 s reported as 0.046) is."""
    latency = 0.49873
    assert judge_rates(0.02, latency, 32, 32 / latency) is None
    assert judge_rates(0.02, latency, 32, 32 / latency * 1.019) is not None
    assert judge_rates(0.02, 0.046, 32, 32 / 0.0456) is None
    assert judge_rates(0.02, latency, 32, 32 / latency, 1000 * latency / 32) is None
    assert judge_rates(0.02, latency, 32, 32 / latency, 1000 * latency / 32 * 0.98) is not None


def test_the_generate_a_measurement_timed_is_its_longest_not_a_warm_up_or_a_trailing_one() -> None:
    """Of a measuring call's generates, the one its latency timed has the most new tokens: a 4-token warm-up before it
    or a 1-token generate after the timer stopped is not it, even where its duration agrees with the latency too."""
    from course_assignments.quantization.checks import _timed_generate

    def run(start: float, duration: float, limit: int, use_cache: bool = True) -> Any:
        return generate_event(start=start, duration_s=duration, max_new_tokens=limit, new_tokens_limit=limit, use_cache=use_cache)

    warm_up, timed, trailing = run(0.0, 0.020, 4), run(0.03, 0.030, 7, use_cache=False), run(0.07, 0.005, 1)
    assert _timed_generate([warm_up, timed, trailing], 0.0, 0.1, 0.031) is timed
    assert _timed_generate([warm_up, timed, trailing], 0.0, 0.1, 0.021) is timed  # agreeing with the warm-up alone
    assert _timed_generate([warm_up, timed], 0.05, 0.1, 0.031) is None  # neither ran within the call


@pytest.mark.parametrize(
    ("latency", "passes"),
    [
        (None, False),  # nothing reported: a wait before the warm-up leaves the warm-up inside the timer
        (0.1, False),  # the timer holds the timed call alone: the warm-up's work is still in flight when it starts
        (1.1, True),  # the timer holds the warm-up too: one mistake (the latency check's), its waits are around it
        ({"latency_s": 1.1, "new_tokens": 7}, True),
        ({"latency_s": 0.1, "new_tokens": 7}, False),
    ],
)
def test_cuda_synchronize_before_a_warm_up_the_timer_also_holds(latency: Any, passes: bool) -> None:
    from grader.checks.timing import judge_synchronize, reported_latency
    from grader.kernel.harness import CallOutcome

    warm_up, timed = generate(0.0, 0.1, model_device="cuda:0"), generate(1.0, 1.1, model_device="cuda:0")
    events = (synchronize(-0.1, -0.05), warm_up, timed, synchronize(1.15, 1.2))
    verdict = judge_synchronize(CallOutcome("returned", events=events), "measure_generation", reported_latency(latency))
    assert (verdict.outcome == "passed") is passes, verdict.message


def test_a_row_may_average_the_runs_after_any_number_of_warm_ups() -> None:
    """Three full-length warm-ups, then NUM_TIMING_RUNS timed runs: the row is the mean of the last three."""
    six = [0.5, 0.3, 0.25, 0.1931, 0.225, 0.2441]
    assert any(abs(reading - 0.2207) < 1e-4 for reading in latency_readings_of(six, 3, medians=False))
    assert not any(abs(reading - 0.35) < 1e-4 for reading in latency_readings_of(six, 3, medians=False))  # the first three


def test_a_mean_of_two_runs_is_a_reading_and_a_paced_warm_up_is_not() -> None:
    from grader.checks.timing import latency_readings

    first, second = generate(0.0, 0.35, paced_s=0.25, duration_s=0.35), generate(0.4, 0.5, duration_s=0.1)
    assert latency_readings([first, second]).count(pytest.approx(0.225)) == 1  # the mean of both runs
    assert 0.35 not in latency_readings([first, second])  # a warm-up's own duration is no timed run


def test_a_row_holds_the_prompt_with_a_few_tokens_around_it_not_a_preamble(zoo: Any) -> None:
    from grader.checks.behaviour import carrying
    from grader.grading.reference import ReferenceModels

    tokenizer = ReferenceModels(zoo).tokenizer("gpt2")
    fits = carrying(tokenizer)
    prompt = tokenizer("The capital of France is")["input_ids"]
    eos = tokenizer.eos_token_id
    assert fits([eos, eos, *prompt], prompt)  # left padding
    assert fits([*tokenizer("Question:")["input_ids"], *prompt], prompt)  # a short template
    preamble = tokenizer(" background" * 200)["input_ids"]
    assert not fits([*preamble, *prompt], prompt)  # other work, timed as the prompt's


def test_an_exception_is_an_instance_of_its_bases() -> None:
    """A check that asks for a ValueError accepts a student's subclass of it (a ``class PrecisionError(ValueError)``),
    and nothing else: the kernel reports the exception's bases with its type."""
    from grader.kernel.harness import ExceptionInfo, _outcome_from_answer

    answer = {
        "status": "raised",
        "exception": {
            "type": "PrecisionError",
            "module": "__main__",
            "bases": ["ValueError", "Exception", "BaseException"],
            "message": "use float32 or float16",
            "traceback": "",
        },
    }
    exception = _outcome_from_answer(answer, 0.0).exception
    assert exception is not None and exception.is_a("ValueError") and exception.is_a("PrecisionError")
    assert not exception.is_a("TypeError")
    # An answer without bases (a kernel error, an older record) is its own type only.
    assert ExceptionInfo("ValueError", "x").is_a("ValueError") and not ExceptionInfo("KeyError", "x").is_a("LookupError")


def test_a_mean_of_rates_is_of_the_runs_the_mean_latency_averaged_not_the_fastest_run() -> None:
    from grader.checks.timing import mean_of_rates

    runs = [0.030, 0.036, 0.042]
    tokens = 12.0
    latency = sum(runs) / 3
    honest = sum(tokens / run for run in runs) / 3
    assert mean_of_rates(honest, tokens, latency, runs, 0.02)
    # The last two runs (the first one a warm-up left out), their mean latency beside their mean rate.
    last_two = runs[1:]
    assert mean_of_rates(sum(tokens / run for run in last_two) / 2, tokens, sum(last_two) / 2, runs, 0.02)
    # The fastest run's rate beside the mean latency: a rate no set of runs averaged.
    assert not mean_of_rates(tokens / min(runs), tokens, latency, runs, 0.02)
    # Below the rate of the mean latency: no mean of rates is.
    assert not mean_of_rates(tokens / latency * 0.9, tokens, latency, runs, 0.02)
    assert not mean_of_rates(honest, tokens, latency, runs[:1], 0.02)
