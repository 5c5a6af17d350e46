"""The instructor's story for `latency`: every sample graded as it should be.

One real `grade` run over submissions/latency and tests/corpus/latency (see the corpus tests below):
the solution at full marks (its GPU checks skipped on a CPU-only machine), the starter at zero, and
each sample mistake losing exactly the points of its mistake, with feedback naming it and the
seed's doc links.
"""

from __future__ import annotations

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

MISTAKES: dict[str, tuple[set[str], str]] = {
    "mistake-precision-case": ({"precision-names"}, "accept any capitalisation"),
    "mistake-no-cpu-fallback": ({"precision-cpu-fallback"}, "float16 must fall back to float32"),
    "mistake-raises-too-early": ({"loader-fallthrough"}, "raised RuntimeError"),
    "mistake-no-warmup": ({"measure-warmup"}, "calls model.generate only once"),
    "mistake-warmup-in-timer": ({"measure-latency"}, "The timer surrounds 2 generate calls"),
    "mistake-timer-includes-tokenizing": ({"measure-latency"}, "includes tokenizing the prompt"),
    "mistake-assumes-max-new-tokens": ({"measure-new-tokens"}, "but the model stopped after"),
    "mistake-characters-not-tokens": ({"build-prompt-public", "build-prompt"}, "It counts characters, not tokens"),
    "mistake-unlabelled-plots": ({"sweep-plots"}, "has no xlabel or ylabel"),
    "mistake-keys-by-request": ({"precision-sweep-keys"}, "not by the precision requested"),
}

# Mistakes only a GPU shows (on a CPU they keep every point): check id -> words of its feedback on CUDA.
CUDA_MISTAKES: dict[str, dict[str, str]] = {
    "mistake-no-cuda-sync": {"measure-cuda-sync": "does not call torch.cuda.synchronize() before and after the generate"},
    "mistake-sync-outside-timer": {"measure-cuda-sync": "one before the warm-up leaves the warm-up's GPU work inside the timer"},
    "mistake-fp16-runs-fp32": {"loader-model": "the model is in float32", "precision-sweep-fp16-cuda": "float32"},
    # On an H100 (2026-11-28) generate raises where the inputs are on another device than the model: every check that
    # calls the function loses its points, the way any function that raises does.
    "mistake-inputs-on-cpu": {
        **dict.fromkeys(
            [
                "measure-warmup",
                "measure-latency",
                "measure-new-tokens",
                "measure-settings",
                "measure-cuda-sync",
                "sweep-rows",
                "sweep-plots",
                "precision-sweep-keys",
                "precision-sweep-settings",
                "precision-sweep-fp16-cuda",
            ],
            "Expected all tensors to be on the same device",
        ),
        "sweep-settings": "the sweep does not measure what the reference measures",
    },
}


# Every test waits for the module's one run (samples and corpus), longer than the suite's 600 s per test.
pytestmark = pytest.mark.timeout(CORPUS_TIMEOUT_S)


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory, root: Path, zoo: object) -> Path:
    """Run the real `grade` command once for this module, on the latency samples and corpus."""
    return grade_samples(tmp_path_factory, root, "latency")


# The corpus: notebooks written independently of the solution, graded in the same run as the samples. Every
# correct one keeps every automatic point; every honest variant of a sample mistake (the same mistake spelled
# another way) loses exactly the points the sample loses; every cheat loses what it cheats for.
(
    test_correct_notebook_keeps_every_point,
    test_variant_loses_its_samples_points,
    test_cheat_loses_the_points_it_cheats_for,
    test_the_corpus_is_big_enough,
) = corpus_tests("latency", MISTAKES)


def test_solution_gets_full_marks(graded: Path) -> None:
    solution = results(graded, "solution")
    # On a CPU grader the CUDA-only checks are skipped (out of the maximum); on a GPU they run and pass.
    assert solution.score == solution.max_score == here("latency", 23)
    outcomes = {check_id: test.extra_data["outcome"] for check_id, test in solution.by_id().items()}
    skipped = {check_id for check_id, outcome in outcomes.items() if outcome == "skipped"}
    assert skipped == (set() if on_cuda() else {"measure-cuda-sync", "precision-sweep-fp16-cuda"})
    assert {outcome for outcome in outcomes.values() if outcome != "skipped"} <= {"passed", "manual"}


def test_starter_scores_zero(graded: Path) -> None:
    starter = results(graded, "starter")
    assert starter.score == 0
    assert "NotImplementedError" in starter.by_id()["measure-latency"].output


@pytest.mark.parametrize("sample", sorted(MISTAKES))
def test_each_mistake_loses_exactly_its_points(graded: Path, sample: str) -> None:
    if sample == "mistake-keys-by-request" and on_cuda():
        # On CUDA float16 is its own label: a sweep keyed by the request is keyed by the label (graded on an H200).
        assert results(graded, sample).losing() == set()
        return
    assert_loses_exactly(graded, sample, *MISTAKES[sample])


@pytest.mark.parametrize("sample", sorted(CUDA_MISTAKES))
def test_each_gpu_mistake_loses_its_points_on_cuda_only(graded: Path, sample: str) -> None:
    assert_gpu_mistake(graded, sample, CUDA_MISTAKES[sample])


def test_float16_by_autocast_keeps_every_point(graded: Path) -> None:
    # The seed allows autocast instead of a float16 model: judged by what generate computed in, on either machine.
    result = results(graded, "correct-autocast")
    assert result.losing() == set() and result.score == result.max_score == here("latency", 23)


def test_timing_feedback_links_the_seeds_docs(graded: Path) -> None:
    output = results(graded, "mistake-warmup-in-timer").by_id()["measure-latency"].output
    assert "https://huggingface.co/docs/transformers/en/main_classes/text_generation" in output
    assert "https://pytorch.org/docs/stable/generated/torch.cuda.synchronize.html" in output
    page = (graded / "mistake-unlabelled-plots" / "feedback.html").read_text()
    assert "has no xlabel or ylabel" in page and "https://matplotlib.org/stable/users/explain/quick_start.html" in page
    assert "latency_s is the timed generate call" not in page  # a hidden check


def test_the_throughput_benchmark_reads_how_kernels_started_and_their_first_cells(graded: Path) -> None:
    """benchmarks/throughput.py reads these from a run's gradebook (it once broke unnoticed: nothing ran it)."""
    from benchmarks.throughput import first_cell_median, graded_results, launch_modes

    run = graded_results(graded if not PREGRADED else graded.parent)  # a pregraded folder is one run of the class
    assert launch_modes(run).startswith("Kernels: ") and "(" in launch_modes(run)
    assert 0 < first_cell_median(run) < results(graded, "solution").execution_time
