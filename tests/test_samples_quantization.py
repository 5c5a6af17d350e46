"""The instructor's story for `quantization`: every sample graded as it should be.

One real `grade` run over submissions/quantization and tests/corpus/quantization (see the corpus
tests below): the solution at full marks, the starter at zero, and each sample mistake losing
exactly the points of its mistake, with feedback naming it. The PTQ samples export and quantize the
tiny model with Optimum and ONNX Runtime for real.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest

from grader.kernel.session import KernelSession
from grader.zoo import ModelZoo
from tests.contract import CORPUS_TIMEOUT_S, assert_loses_exactly, grade_samples, on_cuda, results
from tests.corpus_checks import corpus_tests

MISTAKES: dict[str, tuple[set[str], str]] = {
    "mistake-exported-not-quantized": ({"ptq-quantized"}, "it was exported but not quantized"),
    "mistake-cache-never-toggled": ({"ablation-settings"}, "use_cache=False never reached model.generate"),
    "mistake-padding-never-set": ({"ablation-settings"}, "no generate call received right-padded inputs"),
    "mistake-batch-first-sequence": ({"batching-throughput"}, "it counts the tokens of one sequence of the"),
    "mistake-ppx-padding-counted": ({"ppx-loss"}, "counts padding positions in the loss"),
    "mistake-two-takeaways": ({"takeaways"}, "return 3 to 5 takeaway sentences"),
    "mistake-edge-no-multiline": ({"edge-prompts"}, "had a multi-line prompt"),
}


# Every test waits for the module's one run (samples and corpus), longer than the suite's 600 s per test.
pytestmark = pytest.mark.timeout(CORPUS_TIMEOUT_S)


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory, root: Path, zoo: object) -> Path:
    """Run the real `grade` command once for this module, on the quantization samples and corpus."""
    return grade_samples(tmp_path_factory, root, "quantization")


# The corpus: notebooks written independently of the solution, graded in the same run as the samples. Every
# correct one keeps every automatic point; every honest variant of a sample mistake (the same mistake spelled
# another way) loses exactly the points the sample loses; every cheat loses what it cheats for.
(
    test_correct_notebook_keeps_every_point,
    test_variant_loses_its_samples_points,
    test_cheat_loses_the_points_it_cheats_for,
    test_the_corpus_is_big_enough,
) = corpus_tests("quantization", MISTAKES)


def test_solution_gets_full_marks(graded: Path) -> None:
    solution = results(graded, "solution")
    assert solution.score == solution.max_score == 26
    assert {test.extra_data["outcome"] for test in solution.tests} == {"passed"}
    ptq = solution.by_id()["ptq-quantized"].output
    assert "MatMulInteger" in ptq and "DynamicQuantizeLinear" in ptq


def test_the_solution_prints_what_seed_002_says_a_good_run_shows(tmp_path: Path, root: Path, zoo: ModelZoo) -> None:
    notebook = nbformat.read(root / "submissions" / "quantization" / "solution.ipynb", as_version=4)
    with KernelSession(tmp_path, {**os.environ, **zoo.kernel_env()}) as session:
        record = session.cells.run(notebook, 240, 600)
    assert record.problems == ()
    printed = "".join(output.get("text", "") for output in record.notebook.cells[-1].outputs)
    device = "cuda" if on_cuda() else "cpu"  # the solution runs where the machine's model does (seen on an H100)
    assert f"Loaded: gpt2 | device={device} | dtype=float32" in printed  # the load header
    for block in (
        f"== {device.upper()} FP32 Baseline ==",
        "== Ablation: use_cache x padding ==",
        "== Batching ==",
        "== Perplexity: baseline vs quantized ==",
        "INT8 quality drift",
        "== [6] Summary table",
        "== Takeaways ==",
    ):
        assert block in printed, block
    assert re.search(r"latency \(s\): \d+\.\d{3} \| tokens/s: [\d.]+ \| ms/token: [\d.]+", printed)
    assert all(f"use_cache={cache},padding={side}" in printed for cache in (True, False) for side in ("left", "right"))
    assert len(re.findall(r"^- ", printed.split("== Takeaways ==")[1], re.MULTILINE)) == 5


def test_starter_scores_zero(graded: Path) -> None:
    starter = results(graded, "starter")
    assert starter.score == 0
    assert "NotImplementedError" in starter.by_id()["ptq-quantized"].output


@pytest.mark.parametrize("sample", sorted(MISTAKES))
def test_each_mistake_loses_exactly_its_points(graded: Path, sample: str) -> None:
    assert_loses_exactly(graded, sample, *MISTAKES[sample])


def test_ptq_feedback_links_the_seeds_docs(graded: Path) -> None:
    output = results(graded, "mistake-exported-not-quantized").by_id()["ptq-quantized"].output
    assert "https://huggingface.co/docs/optimum/onnxruntime/usage_guides/quantization" in output
    page = (graded / "mistake-padding-never-set" / "feedback.html").read_text()
    assert "right-padded" not in page  # ablation-settings is a hidden check
