"""Each quantization check fails a named mistake; bundles of independent mistakes are graded once each.

The samples under submissions/quantization cover one mistake each (tests/test_samples_quantization.py);
these bundles cover the other checks. A timer around the warm-up is charged once, in measure_generation's
check, although the ablation built on it reports the same latencies; a perplexity function that drops a
model makes the controller (and so the table it would have built) fail too, and the test says so.
"""

from __future__ import annotations

import math

import pytest

from grader.grading.grader import Grader
from grader.reports.results import SubmissionResult
from tests.conftest import grade_bundles, lost, outcome

BUNDLES: dict[str, list[tuple[str, str]]] = {
    # The tokenizer comes from another id; ms_per_token in seconds; the PTQ info names neither backend
    # nor precision; the ablation keys have a space; the table has no quantized row; measure_batched
    # has no latency_per_sample_s column, and builds every batch with the first size's count of prompts
    # (the later ones made long, so its two timed calls take different times: the first row is judged
    # against the call it reports, not the other call of that size); probe_edge_prompts reports for the
    # repetitive prompt the very short one's metrics, scaled: no call returned them. (An exact copy is
    # not always visible: on the tiny model, with this measure_generation's paced tokenizer inside its
    # timer, the two calls can return the same latency within the tolerance, and then either entry's
    # metrics are the other's as far as anything can tell; such a copy failed this test once in five runs.)
    "tokenizer-seconds-info-keys-table-columns": [
        (
            "        batch = [prompts[i % len(prompts)] for i in range(batch_size)]",
            '        batch = [prompts[i % len(prompts)] + " and so on" * (0 if batch_size == batch_sizes[0] else 150)\n'
            "                 for i in range(batch_sizes[0])]",
        ),
        (
            "    tokenizer = AutoTokenizer.from_pretrained(model_id)",
            '    tokenizer = AutoTokenizer.from_pretrained("distilgpt2")',
        ),
        ('        "ms_per_token": 1000 * latency / max(new_tokens, 1),', '        "ms_per_token": latency / max(new_tokens, 1),'),
        (
            '    return quantized, "onnxruntime int8 (dynamic PTQ, Optimum ORTQuantizer)"',
            '    return quantized, "dynamic quantization"',
        ),
        (
            '            results[f"use_cache={use_cache},padding={side}"] = measure_generation(',
            '            results[f"use_cache={use_cache}, padding={side}"] = measure_generation(',
        ),
        ('ablation["use_cache=True,padding=left"]', 'ablation["use_cache=True, padding=left"]'),
        ('ablation["use_cache=False,padding=left"]', 'ablation["use_cache=False, padding=left"]'),
        ('        row("quantized (onnxruntime int8)", results["quantized"], results["perplexity"]["quantized"]["ppx"]),\n', ""),
        ('            "latency_per_sample_s": metrics["latency_s"] / batch_size,\n', ""),
        (
            "    return {kind: measure_generation(model, tokenizer, [prompt], max_new_tokens=max_new_tokens)\n"
            "            for kind, prompt in edge_prompts.items()}",
            "    results = {kind: measure_generation(model, tokenizer, [prompt], max_new_tokens=max_new_tokens)\n"
            "               for kind, prompt in edge_prompts.items()}\n"
            '    results["repetitive"] = {key: value * 3 for key, value in results["very_short"].items()}\n'
            "    return results",
        ),
        (
            "{int(smallest['batch_size'])}; latency per sample \"\n"
            "        f\"{largest['latency_per_sample_s']:.3f} s vs {smallest['latency_per_sample_s']:.3f} s.\",",
            "{int(smallest['batch_size'])}.\",",
        ),
    ],
    # The warm-up inside the timer; measure_batched always generates every prompt at once;
    # perplexity in base 2.
    "warmup-timed-one-batch-base2": [
        (
            "        model.generate(**inputs, max_new_tokens=4, **settings)  # warm-up, not timed\n"
            "        if on_cuda:\n            torch.cuda.synchronize()\n        start = time.perf_counter()\n",
            "        start = time.perf_counter()\n        model.generate(**inputs, max_new_tokens=4, **settings)  # warm-up\n"
            "        if on_cuda:\n            torch.cuda.synchronize()\n",
        ),
        ("        batch = [prompts[i % len(prompts)] for i in range(batch_size)]", "        batch = prompts"),
        (
            '        results[label] = {"loss": loss, "ppx": math.exp(loss)}',
            '        results[label] = {"loss": loss, "ppx": 2 ** loss}',
        ),
    ],
    # compare_ppplx stops after the first model; the ablation reports milliseconds under latency_s. And the machine is
    # busy once, inside the timer of the first batch of each new measure_batched call: that call is made again, and no
    # batching point is lost (a preempted run does not repeat; a mistake does).
    "ppx-first-model-ablation-ms": [
        (
            "def measure_batched(",
            "_PAUSED, _PAUSE_ONCE = set(), []\n\n\ndef measure_batched(",
        ),
        (
            "        metrics = measure_generation(model, tokenizer, batch, max_new_tokens=max_new_tokens)\n",
            "        if (tuple(prompts), tuple(batch_sizes)) not in _PAUSED:\n"
            "            _PAUSED.add((tuple(prompts), tuple(batch_sizes)))\n"
            "            _PAUSE_ONCE.append(True)\n"
            "        metrics = measure_generation(model, tokenizer, batch, max_new_tokens=max_new_tokens)\n",
        ),
        (
            "        start = time.perf_counter()\n",
            "        start = time.perf_counter()\n"
            '        if globals().get("_PAUSE_ONCE"):\n'
            "            _PAUSE_ONCE.pop()\n"
            "            time.sleep(0.3)  # the machine was busy, once\n",
        ),
        (
            '        results[label] = {"loss": loss, "ppx": math.exp(loss)}\n',
            '        results[label] = {"loss": loss, "ppx": math.exp(loss)}\n        break  # one model is enough\n',
        ),
        (
            '            results[f"use_cache={use_cache},padding={side}"] = measure_generation(\n'
            "                model, tokenizer, prompts, max_new_tokens=max_new_tokens, use_cache=use_cache)",
            "            metrics = measure_generation(\n"
            "                model, tokenizer, prompts, max_new_tokens=max_new_tokens, use_cache=use_cache)\n"
            '            results[f"use_cache={use_cache},padding={side}"] = {**metrics, "latency_s": 1000 * metrics["latency_s"]}',
        ),
    ],
    # measure_generation generates PROMPTS[0] once per prompt it is given, whatever they are (charged in its own checks),
    # and each function built on it is wrong too: they are judged by what they gave measure_generation, not excused.
    # The ablation never passes use_cache; measure_batched gives every prompt whatever the batch size; the multi-line
    # edge prompt has its line breaks replaced by spaces.
    "measure-ignores-prompts-and-callers-wrong": [
        (
            'inputs = tokenizer(list(prompts), return_tensors="pt", padding=True).to(model.device)',
            'inputs = tokenizer([PROMPTS[0]] * len(prompts), return_tensors="pt", padding=True).to(model.device)',
        ),
        (
            "                model, tokenizer, prompts, max_new_tokens=max_new_tokens, use_cache=use_cache)",
            "                model, tokenizer, prompts, max_new_tokens=max_new_tokens)",
        ),
        ("        batch = [prompts[i % len(prompts)] for i in range(batch_size)]", "        batch = list(prompts)"),
        (
            '"multi_line": "Shopping list:\\n- eggs\\n- milk\\n- bread\\nRemember:",',
            '"multi_line": "Shopping list: - eggs - milk - bread Remember:",',
        ),
    ],
    # Mistakes the reference comparison catches, one per function: the loader keeps GPT-2's right padding; the PTQ
    # exports gpt2 whatever id it is given; measure_batched repeats the first prompt; the table builder swaps the
    # baseline's and the quantized model's rows; the controller measures with its own max_new_tokens; the edge probe
    # files the short prompt's metrics under very_long and the long one's under very_short; the perplexity runs with
    # gradients on.
    "reference-compared-mistakes": [
        ('    tokenizer.padding_side = "left"  # decoder-only generation continues from the last real token\n', ""),
        (
            "    exported = ORTModelForCausalLM.from_pretrained(model_id, export=True)",
            "    exported = ORTModelForCausalLM.from_pretrained(MODEL_ID, export=True)",
        ),
        ("        batch = [prompts[i % len(prompts)] for i in range(batch_size)]", "        batch = prompts[:1] * batch_size"),
        (
            '        row(f"baseline ({results[\'dtype\']})", results["baseline"], results["perplexity"]["baseline"]["ppx"]),\n'
            '        row("quantized (onnxruntime int8)", results["quantized"], results["perplexity"]["quantized"]["ppx"]),',
            '        row(f"baseline ({results[\'dtype\']})", results["quantized"], results["perplexity"]["quantized"]["ppx"]),\n'
            '        row("quantized (onnxruntime int8)", results["baseline"], results["perplexity"]["baseline"]["ppx"]),',
        ),
        (
            "    tokenizer, model = load_model_and_tokenizer(model_id)\n    device, dtype",
            "    max_new_tokens = MAX_NEW_TOKENS  # the same length in every comparison\n"
            "    tokenizer, model = load_model_and_tokenizer(model_id)\n    device, dtype",
        ),
        ('        "very_short": "Hi",', '        "very_long": "Hi",'),
        ('        "very_long": " ".join(', '        "very_short": " ".join('),
        (
            "        with torch.inference_mode():\n            for start in range(0, len(texts), PPX_BATCH_SIZE):",
            "        if True:  # gradients on\n            for start in range(0, len(texts), PPX_BATCH_SIZE):",
        ),
    ],
}

EXPECTED_LOSSES = {
    "tokenizer-seconds-info-keys-table-columns": {
        "loader-same-id",
        "measure-tokens",
        "ptq-generates",
        "ablation-keys",
        "build-results-table",
        "batching-rows",
        "batching-sizes",
        "edge-prompts",
    },
    "warmup-timed-one-batch-base2": {"measure-latency", "batching-sizes", "ppx-exp"},
    "ppx-first-model-ablation-ms": {"ppx-quantized", "build-results-table", "results-table", "takeaways", "ablation-keys"},
    "measure-ignores-prompts-and-callers-wrong": {
        "measure-latency",
        "measure-tokens",
        "ablation-settings",
        "batching-sizes",
        "edge-prompts",
    },
    "reference-compared-mistakes": {
        "loader-same-id",
        "ptq-quantized",
        "batching-sizes",
        "build-results-table",
        "results-table",
        "edge-prompts",
        "ppx-loss",
    },
}


@pytest.fixture(scope="module")
def bundles(grader: Grader, tmp_path_factory: pytest.TempPathFactory) -> dict[str, SubmissionResult]:
    """Grade every bundle once for this module."""
    return grade_bundles(grader, "quantization", BUNDLES, tmp_path_factory.mktemp("bundles"))


@pytest.mark.parametrize("bundle", sorted(BUNDLES))
def test_each_bundle_loses_exactly_its_mistakes(bundles, bundle: str) -> None:
    assert lost(bundles[bundle]) == EXPECTED_LOSSES[bundle]


def test_tokenizer_and_model_from_the_same_id(bundles) -> None:
    result, message = outcome(bundles, "tokenizer-seconds-info-keys-table-columns", "loader-same-id")
    assert result == "failed" and "tokenizer from 'distilgpt2'" in message


def test_ms_per_token_in_seconds_is_named(bundles) -> None:
    result, message = outcome(bundles, "tokenizer-seconds-info-keys-table-columns", "measure-tokens")
    assert result == "failed" and "it is in seconds; multiply by 1000" in message


def test_the_info_string_names_backend_and_precision(bundles) -> None:
    result, message = outcome(bundles, "tokenizer-seconds-info-keys-table-columns", "ptq-generates")
    assert result == "failed" and "does not name the backend (ONNX Runtime / Optimum) or the precision (int8)" in message
    assert outcome(bundles, "tokenizer-seconds-info-keys-table-columns", "ptq-quantized")[0] == "passed"


def test_ablation_keys_are_spelled_as_asked(bundles) -> None:
    result, message = outcome(bundles, "tokenizer-seconds-info-keys-table-columns", "ablation-keys")
    assert result == "failed" and "'use_cache=True,padding=left'" in message
    assert outcome(bundles, "tokenizer-seconds-info-keys-table-columns", "ablation-settings")[0] == "passed"


def test_the_table_needs_every_scenario_and_batching_every_column(bundles) -> None:
    result, message = outcome(bundles, "tokenizer-seconds-info-keys-table-columns", "build-results-table")
    assert result == "failed" and "has no row for quantized" in message
    result, message = outcome(bundles, "tokenizer-seconds-info-keys-table-columns", "results-table")
    assert result == "passed" and "charged in build_results_table's own check" in message
    result, message = outcome(bundles, "tokenizer-seconds-info-keys-table-columns", "batching-rows")
    assert result == "failed" and "no column latency_per_sample_s" in message
    result, message = outcome(bundles, "tokenizer-seconds-info-keys-table-columns", "batching-sizes")
    assert result == "failed" and "no timed generate call ran a batch drawn from the prompts it was given" in message
    first_size = int(message.split("received batches of [")[1].split(",")[0])
    assert f"received batches of [{first_size}, {first_size}] prompts" in message
    # Two calls of the first size, the second far longer: the first row's latency is its own call's.
    assert outcome(bundles, "tokenizer-seconds-info-keys-table-columns", "batching-throughput")[0] == "passed"


def test_a_timed_warm_up_is_charged_once_in_measure_generation(bundles) -> None:
    result, message = outcome(bundles, "warmup-timed-one-batch-base2", "measure-latency")
    assert result == "failed" and "The timer surrounds 2 generate calls" in message
    result, message = outcome(bundles, "warmup-timed-one-batch-base2", "ablation-keys")
    assert result == "passed" and "which is charged in its own check" in message


def test_batches_must_hold_batch_size_prompts(bundles) -> None:
    result, message = outcome(bundles, "warmup-timed-one-batch-base2", "batching-sizes")
    assert result == "failed" and "received batches of [4, 4] prompts" in message
    assert outcome(bundles, "warmup-timed-one-batch-base2", "batching-throughput")[0] == "passed"


def test_a_batch_preempted_once_is_measured_again_not_failed(bundles) -> None:
    for check_id in ("batching-rows", "batching-sizes", "batching-throughput"):
        assert outcome(bundles, "ppx-first-model-ablation-ms", check_id)[0] == "passed", check_id


def test_perplexity_is_exp_of_the_loss(bundles) -> None:
    result, message = outcome(bundles, "warmup-timed-one-batch-base2", "ppx-exp")
    assert result == "failed" and "perplexity is exp of the token-weighted loss" in message
    assert outcome(bundles, "warmup-timed-one-batch-base2", "ppx-loss")[0] == "passed"


def test_every_model_is_evaluated(bundles) -> None:
    result, message = outcome(bundles, "ppx-first-model-ablation-ms", "ppx-quantized")
    assert result == "failed" and "under 'quantized'" in message
    assert outcome(bundles, "ppx-first-model-ablation-ms", "ppx-loss")[0] == "passed"
    assert outcome(bundles, "ppx-first-model-ablation-ms", "ppx-exp")[0] == "passed"
    result, message = outcome(bundles, "ppx-first-model-ablation-ms", "results-table")
    assert result == "error" and "KeyError" in message
    result, message = outcome(bundles, "ppx-first-model-ablation-ms", "build-results-table")
    assert result == "error" and "KeyError" in message  # the controller raised before the table was built


def test_each_setting_reports_its_own_calls_metrics(bundles) -> None:
    result, message = outcome(bundles, "ppx-first-model-ablation-ms", "ablation-keys")
    assert result == "failed" and "it is in milliseconds; return seconds" in message
    assert outcome(bundles, "ppx-first-model-ablation-ms", "ablation-settings")[0] == "passed"


def _graph(nodes: list, initializers: list, outputs: list[str]):
    """A small ONNX model of ``nodes`` with float input x and the given outputs."""
    from onnx import TensorProto, helper

    return helper.make_model(
        helper.make_graph(
            nodes,
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
            [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs],
            initializers,
        )
    )


def test_only_integer_products_on_the_path_to_the_outputs_count() -> None:
    """A dangling DynamicQuantizeLinear beside a float MatMul is not quantization; MatMulInteger feeding the logits is."""
    from course_assignments.quantization.checks import judge_graph
    from onnx import TensorProto, helper

    from grader.kernel.runtime import graph_summary

    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], [0.5] * 16)
    dangling = _graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["logits"]),
            helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", TensorProto.FLOAT, [2], [0.0, 1.0])),
            helper.make_node("DynamicQuantizeLinear", ["c"], ["q", "s", "z"]),
        ],
        [weight],
        ["logits"],
    )
    summary = graph_summary(dangling)
    assert (summary["integer_matmuls_main"], summary["float_weight_matmuls_main"], summary["int8_initializers_main"]) == (0, 1, 0)
    probe = {"probe": {"runs": 1, "own_session_runs": 1}}
    assert judge_graph({**summary, **probe}, "the quantized model").outcome == "failed"

    quantized_weight = helper.make_tensor("wq", TensorProto.INT8, [4, 4], [1] * 16)
    zero = helper.make_tensor("wz", TensorProto.INT8, [], [0])
    integer = _graph(
        [
            helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
            helper.make_node("MatMulInteger", ["xq", "wq", "xz", "wz"], ["acc"]),
            helper.make_node("Cast", ["acc"], ["logits"], to=TensorProto.FLOAT),
        ],
        [quantized_weight, zero],
        ["logits"],
    )
    summary = graph_summary(integer)
    assert (summary["integer_matmuls_main"], summary["float_weight_matmuls_main"], summary["int8_initializers_main"]) == (1, 0, 2)
    assert judge_graph({**summary, **probe}, "the quantized model").outcome == "passed"
    assert judge_graph({**summary, "probe": {"runs": 0, "own_session_runs": 0}}, "the quantized model").outcome == "failed"
    assert judge_graph({"problem": "it is a builtins.object, not an Optimum ORTModel"}, "the model").outcome == "failed"


def test_callers_of_a_measure_function_that_ignores_its_prompts_are_judged_by_what_they_gave_it(bundles) -> None:
    """Not excused as "charged in measure_generation's own checks": each names what it failed to ask for."""
    bundle = "measure-ignores-prompts-and-callers-wrong"
    for check_id, words in (
        ("ablation-settings", "use_cache=False was never passed to measure_generation"),
        ("batching-sizes", "measure_batched gave measure_generation (max_new_tokens="),
        ("edge-prompts", "never gave measure_generation a multi-line prompt"),
    ):
        result, message = outcome(bundles, bundle, check_id)
        assert result == "failed" and words in message, message
    result, message = outcome(bundles, bundle, "batching-throughput")
    assert result == "passed" and "what measure_generation measured for its batch" in message


def test_an_edge_entry_reporting_metrics_no_call_of_its_own_returned_is_named(bundles) -> None:
    result, message = outcome(bundles, "tokenizer-seconds-info-keys-table-columns", "edge-prompts")
    assert result == "failed" and "reports for 'repetitive'" in message, message


def test_each_function_is_charged_for_its_own_mistake_against_the_reference(bundles) -> None:
    bundle = "reference-compared-mistakes"
    for check_id, words in (
        ("loader-same-id", "the tokenizer pads on the right"),
        ("ptq-quantized", "that is not the distilgpt2 model"),
        ("batching-sizes", "no timed generate call ran a batch drawn from the prompts it was given"),
        ("build-results-table", "which the row"),
        ("results-table", "with max_new_tokens=16, not the max_new_tokens="),
        ("edge-prompts", "holds the metrics of another kind of prompt"),
        ("ppx-loss", "ran with gradients on"),
    ):
        result, message = outcome(bundles, bundle, check_id)
        assert result == "failed" and words in message, (check_id, message)
    # Batches of one prompt repeated are still each one batch's timed generate call: only how they are drawn is wrong.
    assert outcome(bundles, bundle, "batching-throughput")[0] == "passed"


def test_weights_read_through_pass_through_nodes_and_products_of_zeros_are_not_quantization() -> None:
    """A float graph whose weights sit behind Identity nodes, plus one MatMulInteger of int8 zeros added to the
    logits, computes with float products; a DequantizeLinear read through a Transpose is a quantized product."""
    from course_assignments.quantization.checks import judge_graph
    from onnx import TensorProto, helper

    from grader.kernel.runtime import graph_summary

    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], [0.5] * 16)
    zeros = [helper.make_tensor(name, TensorProto.INT8, [1, 1], [0]) for name in ("a", "b")]
    wrapped = _graph(
        [
            helper.make_node("Identity", ["w"], ["w_read"]),
            helper.make_node("Cast", ["w_read"], ["w_cast"], to=TensorProto.FLOAT),
            helper.make_node("MatMul", ["x", "w_cast"], ["float_logits"]),
            helper.make_node("MatMulInteger", ["a", "b"], ["zero"]),
            helper.make_node("Cast", ["zero"], ["zero_float"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["float_logits", "zero_float"], ["logits"]),
        ],
        [weight, *zeros],
        ["logits"],
    )
    summary = graph_summary(wrapped)
    assert (summary["integer_matmuls_main"], summary["float_weight_matmuls_main"]) == (0, 1)
    probe = {"probe": {"runs": 1, "own_session_runs": 1}}
    assert judge_graph({**summary, **probe}, "the quantized model").outcome == "failed"

    quantized = helper.make_tensor("wq", TensorProto.INT8, [4, 4], [3] * 16)
    scale = helper.make_tensor("s", TensorProto.FLOAT, [], [0.1])
    qdq = _graph(
        [
            helper.make_node("DequantizeLinear", ["wq", "s"], ["wd"]),
            helper.make_node("Transpose", ["wd"], ["wt"]),
            helper.make_node("MatMul", ["x", "wt"], ["logits"]),
        ],
        [quantized, scale],
        ["logits"],
    )
    summary = graph_summary(qdq)
    assert (summary["integer_matmuls_main"], summary["float_weight_matmuls_main"], summary["int8_initializers_main"]) == (1, 0, 1)
    assert judge_graph({**summary, **probe}, "the quantized model").outcome == "passed"


def test_the_graph_is_read_from_what_the_session_was_created_from(tmp_path) -> None:
    """A session whose _model_path is pointed at another file is caught: by what it was created from where that was
    recorded, else by what the native session reports of the graph it runs."""
    import onnx
    import onnxruntime
    from course_assignments.quantization.checks import judge_graph
    from onnx import helper

    from grader.kernel import runtime

    def write(name: str, producer: str) -> str:
        model = _graph([helper.make_node("Identity", ["x"], ["logits"])], [], ["logits"])
        model.producer_name = producer
        model.opset_import[0].version = 17
        model.ir_version = 8
        path = str(tmp_path / name)
        onnx.save(model, path)
        return path

    exported, quantized = write("model.onnx", "pytorch"), write("model_quantized.onnx", "onnx.quantize")
    session = onnxruntime.InferenceSession(exported, providers=["CPUExecutionProvider"])
    session._model_path = quantized  # the float export, claiming the quantized file
    with pytest.raises(runtime.SessionFileMismatch):
        runtime._session_graph(session)
    assert runtime._session_graph(onnxruntime.InferenceSession(quantized, providers=["CPUExecutionProvider"]))[1] == (
        "model_quantized.onnx"
    )
    recorded = onnxruntime.InferenceSession(exported, providers=["CPUExecutionProvider"])
    runtime.SESSION_SOURCES[recorded] = runtime._creation_record(exported)
    recorded._model_path = quantized
    graph, source = runtime._session_graph(recorded)
    assert source == "model.onnx" and graph.producer_name == "pytorch"
    verdict = judge_graph({"problem": "the graph of its session cannot be read (SessionFileMismatch)"}, "the model")
    assert verdict.outcome == "failed" and "names a file that is not the graph it was created from" in verdict.message


def test_a_row_labelled_not_quantized_is_the_baseline() -> None:
    from grader.checks.labels import read_scenario

    baselines = (
        "baseline (float32, not quantized)",
        "FP32, non-quantized",
        "no quantization",
        "before quantization (PyTorch)",
        "full precision",
        "unquantised",
    )
    for label in baselines:
        assert (read_scenario(label).baseline, read_scenario(label).quantized) == (True, False), label
    assert read_scenario("quantized INT8 (KV cache on, left padding)").quantized
    for label in ("quantised (ONNX)", "INT-8 dynamic", "after quantisation"):  # either spelling, a dash
        assert (read_scenario(label).baseline, read_scenario(label).quantized) == (False, True), label


def _run():
    from course_assignments.quantization.checks import Measurement, Run

    measurements = [
        Measurement("baseline", {"latency_s": 0.2, "tokens_per_s": 240.0, "ms_per_token": 1000 / 240}, "baseline"),
        Measurement("quantized", {"latency_s": 0.1, "tokens_per_s": 480.0, "ms_per_token": 1000 / 480}, "quantized"),
        Measurement(
            "use_cache=False,padding=left", {"latency_s": 0.5, "tokens_per_s": 96.0, "ms_per_token": 1000 / 96}, "ablation"
        ),
        Measurement("batch_size=4", {"latency_s": 0.4, "tokens_per_s": 480.0}, "batching"),
    ]
    return Run(measurements, {"baseline": [20.0], "quantized": [20.1]})


def _table(rows: list[tuple[str, float, float, float, float]]):
    from grader.kernel.values import Frame

    columns = ("scenario", "latency_s", "tokens_per_s", "ms_per_token", "ppx")
    return Frame(columns, ("object",) + ("float64",) * 4, tuple(rows), len(rows))


RIGHT_ROWS = [
    ("baseline (KV cache on, left padding)", 0.2, 240.0, 1000 / 240, 20.0),
    ("quantized (int8)", 0.1, 480.0, 1000 / 480, 20.1),
    ("use_cache=False,padding=left", 0.5, 96.0, 1000 / 96, math.nan),
    ("batch_size=4", 0.4, 480.0, 1000 / 480, math.nan),
]


def test_a_table_row_is_charged_to_the_builder_or_the_controller_by_what_the_builder_was_handed() -> None:
    """A row holding part of its measurement, or another row's, or ms in seconds, or no ppx: the builder had the
    measurement. A row holding none of its own measurement, which no row holds: the controller never handed it."""
    from course_assignments.quantization.checks import ControllerParams, judge_rows

    params = ControllerParams(function="run_quantization_exercise")
    run = _run()
    right = judge_rows(_table(RIGHT_ROWS), run, params)
    assert (right.builder, right.controller) == ([], [])
    rounded = [(label, round(lat, 3), round(rate, 1), round(ms, 2), round(ppx, 2)) for label, lat, rate, ms, ppx in RIGHT_ROWS]
    assert judge_rows(_table(rounded), run, params).builder == []
    swapped = [RIGHT_ROWS[1][:1] + RIGHT_ROWS[0][1:], RIGHT_ROWS[0][:1] + RIGHT_ROWS[1][1:], *RIGHT_ROWS[2:]]
    judged = judge_rows(_table(swapped), run, params)
    assert judged.controller == [] and any("which the row" in problem for problem in judged.builder)
    per_sample = [*RIGHT_ROWS[:3], ("batch_size=4", 0.4, 120.0, 1000 / 120, math.nan)]
    judged = judge_rows(_table(per_sample), run, params)
    assert judged.controller == [] and "put the measurement in the row as it is" in judged.builder[0]
    seconds = [*RIGHT_ROWS[:3], ("batch_size=4", 0.4, 480.0, 1 / 480, math.nan)]
    assert "not 1000" in judge_rows(_table(seconds), run, params).builder[0]
    no_ppx = [(label, lat, rate, ms, math.nan) for label, lat, rate, ms, _ in RIGHT_ROWS]
    assert any("gives ppx" in problem for problem in judge_rows(_table(no_ppx), run, params).builder)
    from_baseline = [*RIGHT_ROWS[:2], ("use_cache=False,padding=left", 0.2, 240.0, 1000 / 240, math.nan), RIGHT_ROWS[3]]
    judged = judge_rows(_table(from_baseline), run, params)
    assert judged.builder == [] and "returned" in judged.controller[0]


def test_edge_entries_are_read_by_the_kind_their_key_names() -> None:
    from course_assignments.quantization.checks import key_kind, keyed_kinds

    assert [key_kind(key) for key in ("very_short", "Very long", "multi-line", "repetitive", "other")] == [
        "very short",
        "very long",
        "multi-line",
        "repetitive",
        None,
    ]
    assert keyed_kinds({"a": 1, "b": 2, "c": 3, "d": 4}) is None
    assert keyed_kinds({"short": 1, "long": 2, "multi_line": 3, "repeat": 4}) == {
        "short": "very short",
        "long": "very long",
        "multi_line": "multi-line",
        "repeat": "repetitive",
    }


def test_batches_are_drawn_as_the_reference_cycles_them_or_as_the_seed_groups_them() -> None:
    from course_assignments.quantization.checks import cycled, grouped

    prompts = ["a", "b", "c", "d"]
    assert cycled(prompts, 5) == [["a", "b", "c", "d", "a"]]
    assert grouped(prompts, 3) == [["a", "b", "c"], ["d"]]
    assert grouped(prompts, 5) == [prompts]


def test_edge_kinds_read_a_prompt_as_its_writer_meant_it() -> None:
    """ "Hello there!" is very short though the tiny zoo's tokenizer splits it into five tokens; a word said ten times
    after an instruction ("Repeat after me: na na ...") is repetitive though a third of its tokens differ; a plain
    sentence is neither."""
    from course_assignments.quantization.checks import EdgeParams, edge_kinds

    params = EdgeParams(function="probe_edge_prompts")
    assert edge_kinds([1, 2, 3, 4, 5], "Hello there!", params) == {"very short"}
    assert edge_kinds(list(range(9)), "The old cat sat by the open door all day.", params) == set()
    repeat = "Repeat after me: " + "na " * 10
    assert edge_kinds([1, 2, 3, 4, 5, 6, 7, *[8] * 10, 9, 10, 11, 12, 13, 14, 15, 16, 17], repeat, params) == {"repetitive"}
    sentence = "A sentence with many different words in it, none of them said twice, and a comma."
    assert "repetitive" not in edge_kinds(list(range(20)), sentence, params)
    # A word said five times is repetitive however few tokens it is; a paragraph of 70 words is very long.
    assert "repetitive" in edge_kinds([1, 2, 2, 2, 2], "la la la la la", params)
    assert "repetitive" not in edge_kinds([1, 2, 3], "la la la", params)
    assert "very long" in edge_kinds(list(range(112)), " ".join(["word"] + [f"w{index}" for index in range(70)]), params)
    assert "very long" not in edge_kinds(list(range(20)), sentence, params)


def test_the_same_step_clock_in_both_scenarios_is_alike_however_large_a_share_it_took() -> None:
    from course_assignments.quantization.checks import AddedWork

    plain = AddedWork(prefilled=False, slept=False, hooks=0, hooks_heavy=False, processors=0, heavy=False)
    clock_light = AddedWork(prefilled=False, slept=False, hooks=0, hooks_heavy=False, processors=1, heavy=False)
    clock_heavy = AddedWork(prefilled=False, slept=False, hooks=0, hooks_heavy=False, processors=1, heavy=True)
    # A step clock in both generates: the faster model's share crosses the bound on a loaded machine, still alike.
    assert clock_light.alike(clock_heavy) and clock_heavy.alike(clock_light)
    # One model's generate alone carries processors that took most of it: unalike, and in words "with work added".
    assert not plain.alike(clock_heavy) and bool(clock_heavy) and not bool(plain)
    # A cheap processor in one alone takes no share worth charging.
    assert plain.alike(clock_light)
    streamer = AddedWork(prefilled=False, slept=False, hooks=1, hooks_heavy=True, processors=0, heavy=False)
    assert not plain.alike(streamer)
    assert streamer.alike(AddedWork(prefilled=False, slept=False, hooks=1, hooks_heavy=False, processors=0, heavy=False))
    assert not plain.alike(AddedWork(prefilled=True, slept=False, hooks=0, hooks_heavy=False, processors=0, heavy=False))


def test_one_processor_class_in_both_scenarios_that_works_only_for_the_baseline_is_not_alike() -> None:
    """Round 15's cheat: the controller hands both generates a logits processor of one class, busy (60 matmuls a step)
    only in the baseline's. The counts match; the seconds per step do not, far past a loaded machine's noise."""
    from course_assignments.quantization.checks import AddedWork

    def processor(heavy: bool, step_s: float) -> AddedWork:
        return AddedWork(
            prefilled=False, slept=False, hooks=0, hooks_heavy=False, processors=1, heavy=heavy, processors_step_s=step_s
        )

    assert not processor(True, 0.004).alike(processor(False, 0.00005))
    assert not processor(False, 0.00005).alike(processor(True, 0.004))
    # One step clock in both, preempted now and then in the fast model's: alike.
    assert processor(False, 0.00008).alike(processor(True, 0.0003))
