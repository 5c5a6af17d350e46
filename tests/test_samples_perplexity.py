"""The instructor's story for `perplexity`: every sample graded as it should be.

One real `grade` run over submissions/perplexity and tests/corpus/perplexity (see the corpus tests
below): the solution at full marks, the starter at zero, and each sample mistake losing exactly the
points of its mistake, with feedback naming it and the seed's guidance (token-weighted average, then
exp).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.contract import CORPUS_TIMEOUT_S, assert_gpu_mistake, assert_loses_exactly, grade_samples, here, on_cuda, results
from tests.corpus_checks import corpus_tests

MISTAKES: dict[str, tuple[set[str], str]] = {
    "mistake-batch-means": ({"loss-public", "loss-hidden"}, "averages the per-batch mean losses"),
    "mistake-text-means": ({"loss-public", "loss-hidden"}, "averages per-text losses"),
    "mistake-padding-in-loss": ({"loss-public", "loss-hidden"}, "counts padding positions in the loss"),
    "mistake-perplexity-of-batches": ({"perplexity-hidden"}, "mean of the per-batch perplexities"),
    "mistake-token-count": ({"tokens-hidden"}, "the first token of each text is never predicted"),
    "mistake-gradients-on": ({"evaluation-no-grad"}, "ran with gradients on"),
    "mistake-one-text-at-a-time": ({"evaluation-batching"}, "one text at a time"),
    "mistake-tokenizer-gpt2": ({"loader-same-id"}, "tokenizer from 'gpt2'"),
}
# A mistake only a GPU shows (on a CPU it keeps every point): check id -> words of its feedback on CUDA.
CUDA_MISTAKES = {
    "mistake-no-cuda-sync": {"timing-cuda-sync": "does not call torch.cuda.synchronize() before and after the generate"}
}


# Every test waits for the module's one run (samples and corpus), longer than the suite's 600 s per test.
pytestmark = pytest.mark.timeout(CORPUS_TIMEOUT_S)


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory, root: Path, zoo: object) -> Path:
    """Run the real `grade` command once for this module, on the perplexity samples and corpus."""
    return grade_samples(tmp_path_factory, root, "perplexity")


# The corpus: notebooks written independently of the solution, graded in the same run as the samples. Every
# correct one keeps every automatic point; every honest variant of a sample mistake (the same mistake spelled
# another way) loses exactly the points the sample loses; every cheat loses what it cheats for.
(
    test_correct_notebook_keeps_every_point,
    test_variant_loses_its_samples_points,
    test_cheat_loses_the_points_it_cheats_for,
    test_the_corpus_is_big_enough,
) = corpus_tests("perplexity", MISTAKES)


def test_solution_gets_full_marks(graded: Path) -> None:
    solution = results(graded, "solution")
    # On a CPU grader the CUDA-only check is skipped (out of the maximum); on a GPU it runs and passes.
    assert solution.score == solution.max_score == here("perplexity", 20)
    outcomes = {check_id: test.extra_data["outcome"] for check_id, test in solution.by_id().items()}
    assert outcomes.pop("timing-cuda-sync") == ("passed" if on_cuda() else "skipped")
    assert outcomes.pop("loader-cpu-float32") == ("skipped" if on_cuda() else "passed")  # a CPU's fallback
    assert set(outcomes.values()) == {"passed"}


def test_starter_scores_zero(graded: Path) -> None:
    starter = results(graded, "starter")
    assert starter.score == 0
    # The starter's placeholder reads as a function not written yet, not as a crash of the student's code.
    assert "is not written yet: it raises NotImplementedError" in starter.by_id()["loss-public"].output


@pytest.mark.parametrize("sample", sorted(MISTAKES))
def test_each_mistake_loses_exactly_its_points(graded: Path, sample: str) -> None:
    assert_loses_exactly(graded, sample, *MISTAKES[sample])


@pytest.mark.parametrize("sample", sorted(CUDA_MISTAKES))
def test_each_gpu_mistake_loses_its_points_on_cuda_only(graded: Path, sample: str) -> None:
    assert_gpu_mistake(graded, sample, CUDA_MISTAKES[sample])


def test_loss_feedback_gives_the_seeds_guidance(graded: Path) -> None:
    output = results(graded, "mistake-batch-means").by_id()["loss-public"].output
    assert (
        "add up loss x predicted tokens over all batches, divide by the total number of predicted tokens, then take exp" in output
    )
    page = (graded / "mistake-batch-means" / "feedback.html").read_text()
    assert "averages the per-batch mean losses" in page
    assert "token-weighted loss on hidden corpora" not in page  # a hidden check
