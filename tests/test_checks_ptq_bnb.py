"""Each ptq-bnb check fails a named mistake (the samples show the reference passing each one).

Every notebook here is the solution with exact edits, executed for real. To keep the suite
fast, one notebook carries mistakes in independent places (different functions or variables),
and each test asserts only on the check its mistake belongs to.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from grader.grading.grader import Grader
from grader.reports.results import SubmissionResult
from tests.conftest import check, grade_bundles, outcome
from tests.contract import on_cuda

SOLUTION_BASELINE = '"load_args": {"dtype": torch.float16 if device.type == "cuda" else torch.float32}},'
SOLUTION_INT8 = '"load_args": {"quantization_config": BitsAndBytesConfig(load_in_8bit=True), "device_map": device_map}},'
SOLUTION_GENERATE = (
    "    outputs = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.eos_token_id)"
)
SOLUTION_AVERAGE = '"Avg Latency (s)": overall_avg_latency_for_config, # Based on first prompt\'s timing'

BUNDLES: dict[str, list[tuple[str, str]]] = {
    # get_model_memory_footprint counts elements; generate_text_and_time returns the raw tensor;
    # the baseline is FP16 on the CPU; the table's latency is in milliseconds.
    "elements-tensor-fp16-ms": [
        ("param.nelement() * param.element_size() for param", "param.nelement() for param"),
        ("buf.nelement() * buf.element_size() for buf", "buf.nelement() for buf"),
        ("    generated_text = tokenizer.decode(outputs[0], skip_special_tokens=True)", "    generated_text = outputs"),
        (SOLUTION_BASELINE, '"load_args": {"dtype": torch.float16}},'),
        (SOLUTION_AVERAGE, '"Avg Latency (s)": overall_avg_latency_for_config * 1000,'),
    ],
    # A warm-up generate inside the timed block; INT8 written in the older load_in_8bit style
    # (which must pass); a written answer of three words.
    "warmup-oldstyle-short": [
        (SOLUTION_GENERATE, "    model.generate(**inputs, max_new_tokens=max_new_tokens)  # warm-up run\n" + SOLUTION_GENERATE),
        (SOLUTION_INT8, '"load_args": {"load_in_8bit": True, "device_map": device_map}},'),
        (
            "    *   The footprint fell from 8.01 MB",
            "    *   It got smaller.\n\n<!-- The footprint fell from 8.01 MB",
        ),
        ("the 4x and 8x the bit widths suggest.", "the 4x and 8x the bit widths suggest. -->"),
    ],
    # A hard-coded latency; no INT8 configuration; the FP4 configuration copy-pasted from NF4;
    # the memory column renamed.
    "hardcoded-noint8-column": [
        ("    latency = end_time - start_time", "    latency = 0.05  # measured once on my laptop"),
        (
            'BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="fp4",',
            'BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",',
        ),
        (
            '    {"name": "INT8 (bitsandbytes)",\n     ' + SOLUTION_INT8 + "\n",
            "",
        ),
        ('"Memory (MB)": memory_mb,', '"Memory": memory_mb,'),
        # Filler for one written answer, the question reworded for another (both flagged, not rejected).
        (
            "Latency did not decrease: on the CPU",
            "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore "
            "magna aliqua. <!-- on the CPU",
        ),
        ("with large models on a GPU.", "with large models on a GPU. -->"),
        (
            "Under greedy decoding all four",
            "Based on my subjective review of the outputs for each prompt and precision, I started to observe significant "
            "degradation in output quality (coherence, relevance, repetitiveness) at some point, for example in the outputs. "
            "<!-- all four",
        ),
        ("while NF4 stayed closest to FP32.", "while NF4 stayed closest to FP32. -->"),
    ],
    # torch.cuda.synchronize() called on the CPU too; MB computed as 10**6 bytes; the INT8
    # configuration asks for a GPU that is not there.
    "cudasync-decimal-loadfail": [
        (
            "    if model.device.type == 'cuda':\n        torch.cuda.synchronize() # Ensure previous CUDA ops are done",
            "    torch.cuda.synchronize() # Ensure previous CUDA ops are done",
        ),
        ("    return mem / 1024**2 # convert to MB", "    return mem / 1e6 # convert to MB"),
        (SOLUTION_INT8, '"load_args": {"quantization_config": BitsAndBytesConfig(load_in_8bit=True), "device_map": "cuda:0"}},'),
    ],
    # Other work inside the timer; a single timing run; the analysis section renamed.
    "slowtimer-onerun-nosection": [
        (
            "    end_time = time.perf_counter()",
            "    time.sleep(0.2)  # let the machine settle\n    end_time = time.perf_counter()",
        ),
        ("            runs = NUM_TIMING_RUNS if i == 0 else 1", "            runs = 1"),
        ("## 5. Analysis and Discussion", "## 5. My thoughts"),
    ],
}


@pytest.fixture(scope="module")
def bundles(grader: Grader, tmp_path_factory: pytest.TempPathFactory) -> dict[str, SubmissionResult]:
    """Grade every bundle once for this module."""
    return grade_bundles(grader, "ptq-bnb", BUNDLES, tmp_path_factory.mktemp("bundles"))


# ------------------------------------------------------------------ get_model_memory_footprint


@pytest.mark.parametrize(
    ("bundle", "words"),
    [
        ("elements-tensor-fp16-ms", "counts elements (nelement()) instead of bytes"),
        ("cudasync-decimal-loadfail", "divides by 10**6"),
    ],
)
def test_memory_mistakes_are_named(bundles, bundle: str, words: str) -> None:
    for check_id in ("memory-fp32", "memory-int8", "memory-nf4"):
        result, message = outcome(bundles, bundle, check_id)
        assert result == "failed"
        assert words in message, message


def test_memory_wrong_return_type_fails(notebook_from: Callable[..., Path], grader: Grader, ptq_sources) -> None:
    cells = [
        cell for cell in ptq_sources.solution_cells() if "def get_model_memory_footprint" in cell[1] or "import torch" in cell[1]
    ]
    path = notebook_from(
        "memory-string", cells, [("    return mem / 1024**2 # convert to MB", '    return f"{mem / 1024**2:.2f} MB"')]
    )
    result = check(grader.grade(path, "memory-string"), "memory-fp32")
    assert result.outcome == "failed"
    assert "should return a number of MB, but it returned a str" in result.message


# ------------------------------------------------------------------ generate_text_and_time


def test_returning_the_output_tensor_fails(bundles) -> None:
    result, message = outcome(bundles, "elements-tensor-fp16-ms", "generate-output")
    assert result == "failed"
    assert "returns the output token tensor instead of text" in message


def test_warm_up_inside_the_timer_fails_latency(bundles) -> None:
    result, message = outcome(bundles, "warmup-oldstyle-short", "generate-latency")
    assert result == "failed"
    assert "surrounds 2 generate calls" in message
    assert outcome(bundles, "warmup-oldstyle-short", "generate-output")[0] == "passed"


def test_hard_coded_latency_fails(bundles) -> None:
    result, message = outcome(bundles, "hardcoded-noint8-column", "generate-latency")
    assert result == "failed"
    assert "same latency" in message and "not measured" in message


def test_other_work_in_the_timer_fails_latency(bundles) -> None:
    result, message = outcome(bundles, "slowtimer-onerun-nosection", "generate-latency")
    assert result == "failed"
    assert "includes other work" in message


def test_synchronize_on_cpu_is_reported(bundles) -> None:
    result, message = outcome(bundles, "cudasync-decimal-loadfail", "generate-output")
    assert result == "error"
    assert "uses CUDA although the model is on the CPU" in message


@pytest.mark.skipif(
    on_cuda(), reason="on a GPU the CUDA-only check runs: its judging is tested on made-up events in test_judging"
)
def test_gpu_only_check_is_skipped_on_cpu(bundles) -> None:
    result, message = outcome(bundles, "warmup-oldstyle-short", "generate-cuda-sync")
    assert result == "skipped"
    assert "needs a CUDA GPU" in message


# ------------------------------------------------------------------ configurations


def test_fp16_baseline_on_cpu_fails(bundles) -> None:
    result, message = outcome(bundles, "elements-tensor-fp16-ms", "config-baseline")
    assert result == "failed"
    assert "loads as a float16 model, not a float32 model" in message


def test_older_load_in_8bit_style_passes(bundles) -> None:
    result, message = outcome(bundles, "warmup-oldstyle-short", "config-int8")
    assert result == "passed", message


def test_missing_int8_configuration_fails(bundles) -> None:
    result, message = outcome(bundles, "hardcoded-noint8-column", "config-int8")
    assert result == "failed"
    assert "No configuration in `configurations` loads as an 8-bit bitsandbytes model" in message


def test_fp4_copied_from_nf4_fails(bundles) -> None:
    result, message = outcome(bundles, "hardcoded-noint8-column", "config-fp4")
    assert result == "failed"
    assert "'FP4 (bitsandbytes)' loads as a 4-bit NF4 bitsandbytes model, not a 4-bit FP4" in message
    assert outcome(bundles, "hardcoded-noint8-column", "config-nf4")[0] == "passed"


def test_configuration_that_cannot_load_fails(bundles) -> None:
    result, message = outcome(bundles, "cudasync-decimal-loadfail", "config-int8")
    assert result == "failed"
    assert "fails to load" in message


# ------------------------------------------------------------------ df_results


def test_missing_column_fails_the_table(bundles) -> None:
    result, message = outcome(bundles, "hardcoded-noint8-column", "results-table")
    assert result == "failed"
    assert "lacks the column 'Memory (MB)'" in message


def test_failed_configurations_leave_error_rows(bundles) -> None:
    result, message = outcome(bundles, "cudasync-decimal-loadfail", "results-table")
    assert result == "failed"
    assert "no numeric memory or latency" in message


def test_latency_in_milliseconds_fails(bundles) -> None:
    result, message = outcome(bundles, "elements-tensor-fp16-ms", "results-latency")
    assert result == "failed"
    assert "in milliseconds" in message


def test_too_few_timing_runs_fail(bundles) -> None:
    result, message = outcome(bundles, "slowtimer-onerun-nosection", "results-latency")
    assert result == "failed"
    assert "timed the first prompt 1 time, not 3" in message


# ------------------------------------------------------------------ analysis


def test_answer_too_short_fails(bundles) -> None:
    result, message = outcome(bundles, "warmup-oldstyle-short", "analysis-memory")
    assert result == "failed"
    assert "3 words of your own" in message
    assert outcome(bundles, "warmup-oldstyle-short", "analysis-latency")[0] == "manual"


def test_filler_and_reworded_answers_are_flagged_for_the_instructor(bundles) -> None:
    result = bundles["hardcoded-noint8-column"]
    filler, reworded, real = (check(result, f"analysis-{part}") for part in ("latency", "quality", "memory"))
    assert filler.outcome == reworded.outcome == "manual"  # the instructor decides; the grader only flags
    assert any("filler" in flag for flag in filler.flags), filler.flags
    assert any("question" in flag for flag in reworded.flags), reworded.flags
    assert "flagged" in filler.message
    assert real.outcome == "manual" and not real.flags


def test_missing_analysis_section_fails(bundles) -> None:
    result, message = outcome(bundles, "slowtimer-onerun-nosection", "analysis-tradeoffs")
    assert result == "failed"
    assert "no 'Analysis and Discussion' section" in message


def test_a_one_off_slow_call_is_retried_not_failed(notebook_from: Callable[..., Path], grader: Grader, ptq_sources) -> None:
    """A preempted run (here: one sleep, only on the first short call) is retried; a real mistake
    inflates every attempt and still fails (see the warm-up and sleep tests above)."""
    cells = [
        cell for cell in ptq_sources.solution_cells() if "def get_model_memory_footprint" in cell[1] or "import torch" in cell[1]
    ]
    path = notebook_from(
        "one-off-pause",
        [*cells, ("code", "_paused = []")],
        [
            (
                "    start_time = time.perf_counter() # Use perf_counter for more precise timing",
                "    start_time = time.perf_counter() # Use perf_counter for more precise timing\n"
                "    if max_new_tokens < 10 and not _paused:\n"
                "        _paused.append(True)\n"
                "        time.sleep(0.3)  # the machine was busy, once",
            )
        ],
    )
    result = check(grader.grade(path, "one-off-pause"), "generate-latency")
    assert result.outcome == "passed", result.message
