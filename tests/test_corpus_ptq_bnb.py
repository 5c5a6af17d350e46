"""`ptq-bnb`, graded as notebooks written independently of the course's solution would be.

One real `grade` run over tests/corpus/ptq-bnb: every correct notebook (each written from the seed and
the starter as a different student would) keeps every automatic point, and every honest variant of a
sample mistake (the same mistake spelled another way) loses exactly the points the sample loses.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.contract import run_grade
from tests.corpus import CORPUS, correct, variants
from tests.corpus_checks import assert_full_marks, assert_loses_the_samples_points
from tests.test_samples_ptq_bnb import MISTAKES

ASSIGNMENT = "ptq-bnb"


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory, root: Path, zoo: object) -> Path:
    """Grade the whole corpus of the assignment in one run."""
    out = tmp_path_factory.mktemp("corpus-ptq-bnb")
    run_grade(str(CORPUS / ASSIGNMENT), "--out", str(out), cwd=root)
    return out


@pytest.mark.parametrize("submission", correct(ASSIGNMENT))
def test_correct_notebook_keeps_every_point(graded: Path, submission: str) -> None:
    assert_full_marks(graded, submission)


@pytest.mark.parametrize("submission", sorted(variants(ASSIGNMENT)))
def test_variant_loses_its_samples_points(graded: Path, submission: str) -> None:
    assert_loses_the_samples_points(graded, submission, MISTAKES[variants(ASSIGNMENT)[submission]][0])


def test_the_corpus_is_big_enough() -> None:
    assert len(correct(ASSIGNMENT)) >= 8
    assert set(variants(ASSIGNMENT).values()) == set(MISTAKES)
