"""The assertions every assignment's corpus test makes (in tests/test_samples_<assignment>.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.contract import results
from tests.corpus import also_loses, cheats, correct, flagged, variants


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
    assert result.extra_data["flags"] == []  # nothing an honest notebook does reads as tampering


def assert_loses_the_samples_points(out: Path, submission: str, expected: set[str]) -> None:
    """A variant of a sample mistake loses exactly the points the sample loses, each check failed."""
    result = results(out, submission)
    lost = {check_id: test.output[:300] for check_id, test in result.by_id().items() if check_id in result.losing()}
    assert set(lost) == expected, f"{submission}: lost {lost}, expected {sorted(expected)}"
    for check_id in expected:
        assert result.by_id()[check_id].status == "failed"


def assert_flags(out: Path, submission: str, functions: set[str]) -> None:
    """The functions flagged as tampered-evidence are exactly ``functions`` (none for an honest notebook)."""
    flags = results(out, submission).extra_data["flags"]
    assert {flag["function"] for flag in flags} == functions, f"{submission}: flags {flags}"
    assert all(flag["type"] == "tampered-evidence" and flag["why"] for flag in flags)


def assert_written_answers_rejected(out: Path, submission: str, checks: set[str]) -> None:
    """A written-answer mistake: those checks fail (they carry no automatic points), nothing else is lost."""
    result = results(out, submission)
    assert {check_id for check_id in checks if result.by_id()[check_id].extra_data["outcome"] == "failed"} == checks
    assert not result.losing(), f"{submission}: lost {sorted(result.losing())}"


def corpus_tests(
    assignment: str, mistakes: dict[str, tuple[set[str], str]], written: dict[str, set[str]] | None = None
) -> tuple[Callable[..., Any], ...]:
    """The corpus tests of one assignment, a test per notebook, for its samples module (tests/test_samples_<assignment>.py).

    They read the module's ``graded`` fixture: one `grade` run over the samples and the corpus together
    (:func:`tests.contract.grade_samples`), so xdist's ``--dist loadfile`` grades each assignment once, on one
    worker; the module's ``pytestmark`` gives every test the run's timeout (CORPUS_TIMEOUT_S). ``written``
    names the sample mistakes that lie in written answers, with the checks that must reject them.
    """

    @pytest.mark.parametrize("submission", correct(assignment))
    def test_correct_notebook_keeps_every_point(graded: Path, submission: str) -> None:
        assert_full_marks(graded, submission)

    @pytest.mark.parametrize("submission", sorted(variants(assignment)))
    def test_variant_loses_its_samples_points(graded: Path, submission: str) -> None:
        mistake = variants(assignment)[submission]
        assert_flags(graded, submission, set())  # an honest mistake is not tampering
        if written and mistake in written:
            assert_written_answers_rejected(graded, submission, written[mistake])
            return
        assert_loses_the_samples_points(graded, submission, mistakes[mistake][0] | also_loses(assignment, submission))

    @pytest.mark.parametrize("submission", sorted(cheats(assignment)))
    def test_cheat_loses_the_points_it_cheats_for(graded: Path, submission: str) -> None:
        assert_loses_the_samples_points(graded, submission, cheats(assignment)[submission])
        # A cheat that forges the grader's records is flagged for each function it forges them in, and only those.
        assert_flags(graded, submission, flagged(assignment, submission))

    def test_the_corpus_is_big_enough() -> None:
        assert len(correct(assignment)) >= 8
        assert set(variants(assignment).values()) == set(mistakes) | set(written or {})

    return (
        test_correct_notebook_keeps_every_point,
        test_variant_loses_its_samples_points,
        test_cheat_loses_the_points_it_cheats_for,
        test_the_corpus_is_big_enough,
    )
