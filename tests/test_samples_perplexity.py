"""The instructor's story for `perplexity`: every sample graded as it should be.

One real `grade` run over submissions/perplexity: the solution at full marks, the starter at
zero, and each sample mistake losing exactly the points of its mistake, with feedback naming it
and the seed's guidance (token-weighted average, then exp).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.contract import assert_loses_exactly, grade_samples, results

MISTAKES: dict[str, tuple[set[str], str]] = {
    "mistake-batch-means": ({"loss-public", "loss-hidden"}, "averages the per-batch mean losses"),
    "mistake-text-means": ({"loss-public", "loss-hidden"}, "averages per-text losses"),
    "mistake-padding-in-loss": ({"loss-public", "loss-hidden"}, "counts padding positions in the loss"),
    "mistake-perplexity-of-batches": ({"perplexity-hidden"}, "mean of the per-batch perplexities"),
    "mistake-token-count": ({"tokens-hidden"}, "the first token of each text is never predicted"),
    "mistake-gradients-on": ({"evaluation-no-grad"}, "ran with gradients on"),
    "mistake-one-text-at-a-time": ({"evaluation-batching"}, "once per text"),
    "mistake-tokenizer-gpt2": ({"loader-same-id"}, "tokenizer from 'gpt2'"),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory, root: Path, zoo: object) -> Path:
    """Run the real `grade` command on the perplexity samples once for this module."""
    return grade_samples(tmp_path_factory, root, "perplexity")


def test_solution_gets_full_marks(graded: Path) -> None:
    solution = results(graded, "solution")
    assert solution.score == solution.max_score == 20
    outcomes = {check_id: test.extra_data["outcome"] for check_id, test in solution.by_id().items()}
    assert outcomes.pop("timing-cuda-sync") == "skipped"
    assert set(outcomes.values()) == {"passed"}


def test_starter_scores_zero(graded: Path) -> None:
    starter = results(graded, "starter")
    assert starter.score == 0
    assert "NotImplementedError" in starter.by_id()["loss-public"].output


@pytest.mark.parametrize("sample", sorted(MISTAKES))
def test_each_mistake_loses_exactly_its_points(graded: Path, sample: str) -> None:
    assert_loses_exactly(graded, sample, *MISTAKES[sample])


def test_loss_feedback_gives_the_seeds_guidance(graded: Path) -> None:
    output = results(graded, "mistake-batch-means").by_id()["loss-public"].output
    assert (
        "add up loss x predicted tokens over all batches, divide by the total number of predicted tokens, then take exp" in output
    )
    page = (graded / "mistake-batch-means" / "feedback.html").read_text()
    assert "averages the per-batch mean losses" in page
    assert "token-weighted loss on hidden corpora" not in page  # a hidden check
