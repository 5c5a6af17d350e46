"""The assertions every assignment's corpus test makes (tests/test_corpus_<assignment>.py)."""

from __future__ import annotations

from pathlib import Path

from tests.contract import results


def assert_full_marks(out: Path, submission: str) -> None:
    """Every automatic point, and no written answer rejected (skipped GPU checks aside)."""
    result = results(out, submission)
    problems = {
        check_id: test.output[:400]
        for check_id, test in result.by_id().items()
        if test.extra_data["outcome"] in ("failed", "error")
    }
    assert not problems, f"{submission}: {problems}"
    assert result.score == result.max_score


def assert_loses_the_samples_points(out: Path, submission: str, expected: set[str]) -> None:
    """A variant of a sample mistake loses exactly the points the sample loses, each check failed."""
    result = results(out, submission)
    lost = {check_id: test.output[:300] for check_id, test in result.by_id().items() if check_id in result.losing()}
    assert set(lost) == expected, f"{submission}: lost {lost}, expected {sorted(expected)}"
    for check_id in expected:
        assert result.by_id()[check_id].status == "failed"
