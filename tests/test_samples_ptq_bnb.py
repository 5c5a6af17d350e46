"""The instructor's story: `grade submissions/ptq-bnb` grades every sample as it should.

One real `grade` run (a subprocess, real kernels, tiny model) over the samples and tests/corpus/ptq-bnb
serves every test here (see the corpus tests below): the
solution gets full marks on every automatic check, the starter near zero, and each sample
mistake loses exactly the points of its mistake, with feedback that names it.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from tests.contract import (
    CORPUS_TIMEOUT_S,
    PREGRADED,
    assert_gpu_mistake,
    assert_loses_exactly,
    grade_samples,
    here,
    on_cuda,
    results,
)
from tests.corpus_checks import corpus_tests

# sample -> (checks that lose points, words the failing message must contain)
MISTAKES: dict[str, tuple[set[str], str]] = {
    "mistake-memory-bytes": ({"memory-fp32", "memory-int8", "memory-nf4"}, "returns bytes"),
    "mistake-memory-no-buffers": ({"memory-fp32", "memory-int8", "memory-nf4"}, "leaves out the model's buffers"),
    "mistake-return-order": ({"generate-output", "generate-latency"}, "returns (latency, text)"),
    "mistake-decodes-prompt": ({"generate-output"}, "returns the prompt itself"),
    "mistake-nf4-quant-type": ({"config-nf4"}, "FP4"),
    "mistake-latency-sum": ({"results-latency"}, "sum of the runs"),
}
# Mistakes only a GPU shows (on a CPU they keep every point): check id -> words of its feedback on CUDA.
ON_CPU = "on the CPU, although this machine has CUDA"
CUDA_MISTAKES: dict[str, dict[str, str]] = {
    "mistake-generate-no-sync": {"generate-cuda-sync": "does not call torch.cuda.synchronize() before and after the generate"},
    "mistake-bnb-on-cpu": {"config-int8": ON_CPU, "config-nf4": ON_CPU, "config-fp4": ON_CPU},
}


# Every test waits for the module's one run (samples and corpus), longer than the suite's 600 s per test.
pytestmark = pytest.mark.timeout(CORPUS_TIMEOUT_S)


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory, root: Path, zoo: object) -> Path:
    """Run the real `grade` command once for this module, on the ptq-bnb samples and corpus."""
    return grade_samples(tmp_path_factory, root, "ptq-bnb")


# The corpus: notebooks written independently of the solution, graded in the same run as the samples. Every
# correct one keeps every automatic point; every honest variant of a sample mistake (the same mistake spelled
# another way) loses exactly the points the sample loses; every cheat loses what it cheats for.
(
    test_correct_notebook_keeps_every_point,
    test_variant_loses_its_samples_points,
    test_cheat_loses_the_points_it_cheats_for,
    test_the_corpus_is_big_enough,
) = corpus_tests(
    "ptq-bnb",
    MISTAKES,
    {"mistake-analysis-todo": {f"analysis-{part}" for part in ("memory", "latency", "quality", "tradeoffs")}},
)


def test_every_sample_gets_a_valid_results_json(graded: Path, root: Path) -> None:
    samples = sorted(path.stem for path in (root / "submissions" / "ptq-bnb").glob("*.ipynb"))
    assert len(samples) >= 7
    for sample in samples:
        result = results(graded, sample)
        assert result.extra_data["assignment"] == "ptq-bnb"
        assert result.extra_data["error"] is None
        for test in result.tests:
            assert test.tags[0] in {
                "get_model_memory_footprint",
                "generate_text_and_time",
                "configurations",
                "df_results",
                "analysis",
            }
            assert test.extra_data["outcome"] in {"passed", "failed", "error", "skipped", "manual"}


def test_solution_gets_full_marks_on_every_automatic_check(graded: Path) -> None:
    solution = results(graded, "solution")
    # On a CPU grader the CUDA-only check is skipped (out of the maximum); on a GPU it runs and passes.
    assert solution.score == solution.max_score == here("ptq-bnb", 25)
    outcomes = {check_id: test.extra_data["outcome"] for check_id, test in solution.by_id().items()}
    assert outcomes.pop("generate-cuda-sync") == ("passed" if on_cuda() else "skipped")
    assert {outcomes.pop(f"analysis-{part}") for part in ("memory", "latency", "quality", "tradeoffs")} == {"manual"}
    assert set(outcomes.values()) == {"passed"}
    assert solution.extra_data["manual_points_pending"] == 8
    # The numbers its memory answer states are held against what the student saw: the sample is submitted without
    # outputs, so they are not checked, and it says why (never against the grader's re-run).
    memory = solution.by_id()["analysis-memory"].output
    assert "*not-checked*" in memory and "holds no outputs" in memory and "*contradicts*" not in memory, memory


def test_starter_scores_zero_and_says_why(graded: Path) -> None:
    starter = results(graded, "starter")
    assert starter.score == 0
    tests = starter.by_id()
    assert "TypeError" in tests["memory-fp32"].output
    assert "never called model.generate" in tests["generate-output"].output
    assert "`configurations` is empty" in tests["config-int8"].output
    assert tests["analysis-memory"].extra_data["outcome"] == "failed"


@pytest.mark.parametrize("sample", sorted(MISTAKES))
def test_each_mistake_loses_exactly_its_points_and_is_named(graded: Path, sample: str) -> None:
    result = assert_loses_exactly(graded, sample, *MISTAKES[sample])
    assert result.max_score == here("ptq-bnb", 25)


@pytest.mark.parametrize("sample", sorted(CUDA_MISTAKES))
def test_each_gpu_mistake_loses_its_points_on_cuda_only(graded: Path, sample: str) -> None:
    assert_gpu_mistake(graded, sample, CUDA_MISTAKES[sample])


def test_unwritten_analysis_fails_automatically(graded: Path) -> None:
    result = results(graded, "mistake-analysis-todo")
    assert result.score == here("ptq-bnb", 25)
    for part in ("memory", "latency", "quality", "tradeoffs"):
        test = result.by_id()[f"analysis-{part}"]
        assert test.extra_data["outcome"] == "failed"
        assert "still reads TODO" in test.output
    assert result.extra_data["manual_points_pending"] == 0


def test_hidden_checks_are_after_published_and_out_of_the_student_page(graded: Path) -> None:
    result = results(graded, "mistake-memory-no-buffers")
    hidden = [test for test in result.tests if test.visibility == "after_published"]
    assert {test.extra_data["check_id"] for test in hidden} == {
        "memory-int8",
        "memory-nf4",
        "generate-latency",
        "results-latency",
    }
    student = (graded / "mistake-memory-no-buffers" / "feedback.html").read_text()
    instructor = (graded / "mistake-memory-no-buffers" / "feedback-instructor.html").read_text()
    for test in hidden:
        assert test.name not in student
        assert test.name in instructor
    assert "4 more checks" in student


def test_feedback_explains_the_lost_points_with_hint_and_link(graded: Path) -> None:
    page = (graded / "mistake-memory-no-buffers" / "feedback.html").read_text()
    assert "leaves out the model&#39;s buffers" in page
    # The public memory check measures unquantized distilgpt2 (float32, bfloat16), a model the notebook never loads: its
    # value may be shown.
    shown = re.search(
        r"On the (?:float32|bfloat16) distilgpt2 model your function returns [\d.]+ MB, but the model takes ([\d.]+) MB", page
    )
    assert shown and "Expected" in page and f"<code>{shown[1]} MB</code>" in page
    assert "https://discuss.pytorch.org/t/finding-model-size/130275" in page
    assert "Hint:" in page


@pytest.mark.skipif(bool(PREGRADED), reason="reads this assignment's own run; a pregraded folder is one run of the class")
def test_class_summary_lists_everyone_and_the_answers_to_grade(graded: Path, root: Path) -> None:
    page = (graded / "summary.html").read_text()
    for notebook in (root / "submissions" / "ptq-bnb").glob("*.ipynb"):
        assert f'href="{notebook.stem}/feedback-instructor.html"' in page
    assert "Written answers to grade by hand" in page
    assert "The footprint fell from 8.01 MB" in page  # the solution's written answer
    with (graded / "grades.csv").open() as stream:
        rows = {row["submission"]: row for row in csv.DictReader(stream)}
    assert rows["solution"]["score"] == str(here("ptq-bnb", 25)) and rows["solution"]["status"] == "needs-manual-grading"
    assert rows["starter"]["score"] == "0"
    assert rows["mistake-nf4-quant-type"]["config-nf4"] == "0"
