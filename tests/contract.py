"""The output contract as tests read it: Gradescope's results.json, and running `grade`."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tests.conftest import SEED
from tests.corpus import CORPUS
from tests.grade_server import grade_process

# What only an instructor's grader talks about: a student's self-check never shows these.
INSTRUCTOR_WORDS = ("Sandbox", "sandbox", "as root", "Errno", "namespace", "kernel uid", "unprivileged")
Visibility = Literal["visible", "hidden", "after_due_date", "after_published"]
Format = Literal["text", "simple_format", "html", "md", "ansi"]


class GradescopeTest(BaseModel):
    """One test of Gradescope's results.json: only the keys Gradescope documents
    (https://gradescope-autograders.readthedocs.io/en/latest/specs/#output-format)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    name: str
    score: float
    max_score: float
    status: Literal["passed", "failed"] | None = None  # documented as optional; left out only for a check not run
    output: str
    output_format: Format | None = None
    tags: list[str]
    visibility: Visibility
    extra_data: dict[str, Any]


class GradescopeResults(BaseModel):
    """Gradescope's results.json, top level: only the keys Gradescope documents."""

    model_config = ConfigDict(extra="forbid", strict=True)
    score: float
    execution_time: float
    output: str
    output_format: Format
    visibility: Visibility
    stdout_visibility: Visibility
    tests: list[GradescopeTest]
    extra_data: dict[str, Any]

    @property
    def max_score(self) -> float:
        """The points the tests could award (Gradescope takes the assignment's total from the tests)."""
        return sum(test.max_score for test in self.tests)

    def not_run(self) -> list[GradescopeTest]:
        """Checks that could not run here (GPU-only on a CPU grader): kept out of ``tests``, in ``extra_data``."""
        return [GradescopeTest.model_validate(test) for test in self.extra_data.get("not_run", [])]

    def by_id(self) -> dict[str, GradescopeTest]:
        """Every check by id: Gradescope's tests and the checks not run here."""
        return {test.extra_data["check_id"]: test for test in [*self.tests, *self.not_run()]}

    def losing(self) -> set[str]:
        """Ids of checks that did not award all their points."""
        return {check_id for check_id, test in self.by_id().items() if test.score < test.max_score}


def on_cuda() -> bool:
    """Whether this machine's kernels see a CUDA device: then the rubrics' CUDA-only checks run instead of being skipped."""
    import torch

    return torch.cuda.is_available()


def device_points(assignment: str, device: str) -> float:
    """Points of the assignment's checks that run only on ``device`` (``cuda`` or ``cpu``)."""
    import yaml

    rubric = yaml.safe_load((Path(__file__).resolve().parent.parent / "assignments" / assignment / "rubric.yaml").read_text())
    return sum(float(check["points"]) for check in rubric["checks"] if check.get("device") == device)


def here(assignment: str, cpu_total: float) -> float:
    """What ``cpu_total`` points (counted on a CPU grader) are on this machine: on a GPU the CUDA-only checks
    count and the CPU-only ones are skipped (perplexity's "float32 on the CPU" checks a CPU's fallback)."""
    if not on_cuda():
        return cpu_total
    return cpu_total + device_points(assignment, "cuda") - device_points(assignment, "cpu")


def run_grade(
    *args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None, check: bool = True, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """Run the real `grade` command with the tests' hidden-input seed.

    ``env`` is added to this process's environment; with ``check``, fail loudly if it fails.
    """
    completed = grade_process(
        [*args, "--seed", str(SEED)], cwd=cwd, env={**os.environ, **env} if env is not None else None, timeout=timeout
    )
    if check:
        assert completed.returncode == 0, completed.stderr[-3000:]
    return completed


def results(out: Path, submission: str) -> GradescopeResults:
    """A submission's results.json, validated against the schema."""
    return GradescopeResults.model_validate(json.loads((out / submission / "results.json").read_text()))


# One run grades an assignment's samples and corpus (about 150 notebooks): every test of its module waits for it,
# on a loaded machine for longer than the suite's 600 s per test (quantization's took 44 minutes on 2 cores beside
# latency's and ptq-bnb's, 2026-11-28).
CORPUS_TIMEOUT_S = 3600


# Where the samples were already graded with the tests' seed (`grade submissions/ --seed 20261123 -o DIR`): a GPU
# machine lent for minutes grades the samples once and reads its verdicts from DIR/<assignment>, with the corpus tests
# deselected (-k "not correct_notebook and not variant_loses and not cheat_loses"). See README, "Verified on a GPU".
PREGRADED = os.environ.get("GRADER_TESTS_PREGRADED", "")


def grade_samples(tmp_path_factory: Any, root: Path, assignment: str) -> Path:
    """Run the real `grade` command once on an assignment's sample submissions and its corpus of independently
    written notebooks (tests/corpus/<assignment>), as one batch; the output folder."""
    if PREGRADED:
        return Path(PREGRADED) / assignment
    out: Path = tmp_path_factory.mktemp(f"graded-{assignment}")
    run_grade(
        str(root / "submissions" / assignment), str(CORPUS / assignment), "--out", str(out), cwd=root, timeout=CORPUS_TIMEOUT_S
    )
    return out


def assert_gpu_mistake(out: Path, sample: str, losses: Mapping[str, str]) -> GradescopeResults:
    """A mistake only a GPU shows: on CUDA it loses the points of exactly these checks, each failing with a message
    holding its words (``losses``: check id -> words); on a CPU-only machine it keeps every point."""
    result = results(out, sample)
    if not on_cuda():
        assert result.losing() == set() and result.score == result.max_score
        return result
    assert result.losing() == set(losses), {c: t.output[:300] for c, t in result.by_id().items() if c in result.losing()}
    for check_id, words in losses.items():
        test = result.by_id()[check_id]
        assert test.status == "failed" and words in test.output, test.output
    return result


def assert_loses_exactly(out: Path, sample: str, expected_losses: set[str], words: str) -> GradescopeResults:
    """The sample loses the points of exactly these checks, each failing with a message holding ``words``."""
    result = results(out, sample)
    assert result.losing() == expected_losses
    for check_id in expected_losses:
        test = result.by_id()[check_id]
        assert test.status == "failed" and words in test.output, test.output
    assert result.score == result.max_score - sum(result.by_id()[c].max_score for c in expected_losses)
    return result
