"""Each quantization check fails a named mistake; bundles of independent mistakes are graded once each.

The samples under submissions/quantization cover one mistake each (tests/test_samples_quantization.py);
these bundles cover the other checks. A timer around the warm-up is charged once, in measure_generation's
check, although the ablation built on it reports the same latencies; a perplexity function that drops a
model makes the controller (and so the table it would have built) fail too, and the test says so.
"""

from __future__ import annotations

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
    assert result == "failed" and "but the timed generate calls" in message
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
    assert result == "failed" and "received batches of [3] prompts" in message
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
