"""The output contract as tests read it: Gradescope's results.json, and running `grade`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tests.conftest import SEED


class GradescopeTest(BaseModel):
    """One test of Gradescope's results.json, as this grader writes it."""

    model_config = ConfigDict(extra="forbid", strict=True)
    name: str
    score: float
    max_score: float
    status: Literal["passed", "failed"]
    output: str
    tags: list[str]
    visibility: Literal["visible", "hidden", "after_due_date", "after_published"]
    extra_data: dict[str, Any]


class GradescopeResults(BaseModel):
    """Gradescope's results.json, top level."""

    model_config = ConfigDict(extra="forbid", strict=True)
    score: float
    max_score: float | None = None  # left out when the autograder itself failed: Gradescope uses the assignment's
    execution_time: float
    output: str
    visibility: str
    stdout_visibility: str
    tests: list[GradescopeTest]
    extra_data: dict[str, Any]

    def by_id(self) -> dict[str, GradescopeTest]:
        """Tests by check id."""
        return {test.extra_data["check_id"]: test for test in self.tests}

    def losing(self) -> set[str]:
        """Ids of checks that did not award all their points."""
        return {check_id for check_id, test in self.by_id().items() if test.score < test.max_score}


def run_grade(
    *args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run the real `grade` command with the tests' hidden-input seed.

    ``env`` is added to this process's environment; with ``check``, fail loudly if it fails.
    """
    completed = subprocess.run(
        [sys.executable, "-m", "grader", *args, "--seed", str(SEED)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=cwd,
        env={**os.environ, **env} if env is not None else None,
    )
    if check:
        assert completed.returncode == 0, completed.stderr[-3000:]
    return completed


def results(out: Path, submission: str) -> GradescopeResults:
    """A submission's results.json, validated against the schema."""
    return GradescopeResults.model_validate(json.loads((out / submission / "results.json").read_text()))


def grade_samples(tmp_path_factory: Any, root: Path, assignment: str) -> Path:
    """Run the real `grade` command once on an assignment's sample submissions; the output folder."""
    out: Path = tmp_path_factory.mktemp(f"graded-{assignment}")
    run_grade(str(root / "submissions" / assignment), "--out", str(out), cwd=root)
    return out


def assert_loses_exactly(out: Path, sample: str, expected_losses: set[str], words: str) -> GradescopeResults:
    """The sample loses the points of exactly these checks, each failing with a message holding ``words``."""
    result = results(out, sample)
    assert result.losing() == expected_losses
    for check_id in expected_losses:
        test = result.by_id()[check_id]
        assert test.status == "failed" and words in test.output, test.output
    assert result.score == result.max_score - sum(result.by_id()[c].max_score for c in expected_losses)
    return result
