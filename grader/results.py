"""Results: plain frozen data, and their Gradescope JSON and CSV forms.

A :class:`SubmissionResult` exists for every submission, whatever happened to it; one that
could not be graded carries the reason (``SubmissionResult.without_results``). Writers here
only read results.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import TypeAdapter

from grader.checks.base import GradedBy, Outcome
from grader.execute import CellProblem

GRADESCOPE_VISIBILITY = {"public": "visible", "hidden": "after_published"}


@dataclass(frozen=True)
class CheckResult:
    """One rubric check's result for one submission."""

    check_id: str
    name: str
    target: str
    kind: str
    visibility: Literal["public", "hidden"]
    device: str
    points: float
    score: float
    outcome: Outcome
    message: str
    graded_by: GradedBy = "grader"
    expected: str | None = None
    found: str | None = None
    details: tuple[str, ...] = ()
    hint: str = ""
    docs: tuple[str, ...] = ()
    answer: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0

    @property
    def automatic(self) -> bool:
        """Whether the grader awards this check's points (not an instructor, not skipped here)."""
        return self.graded_by == "grader" and self.outcome != "skipped"

    @property
    def pending(self) -> bool:
        """Whether the check waits for an instructor to grade it by hand."""
        return self.outcome == "manual"


@dataclass(frozen=True)
class Figure:
    """An image the notebook displayed (base64 PNG or SVG text), by cell."""

    cell_index: int
    mime: str
    data: str


@dataclass(frozen=True)
class SubmissionResult:
    """Everything known about one graded (or ungradeable) submission."""

    submission_id: str
    source: str
    assignment: str | None
    title: str = ""
    student: str | None = None  # the LMS's student id, when the submission's naming gives one
    checks: tuple[CheckResult, ...] = ()
    cell_problems: tuple[CellProblem, ...] = ()
    figures: tuple[Figure, ...] = ()
    error: str | None = None  # why the submission could not be graded at all
    notes: tuple[str, ...] = ()  # facts a reader should know (how it was identified, ...)
    duration_s: float = 0.0
    environment: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)  # hashes, versions, seed

    @classmethod
    def without_results(
        cls, submission_id: str, source: str, error: str, assignment: str | None = None, **fields: Any
    ) -> SubmissionResult:
        """A result for a submission that could not be graded, saying why."""
        return cls(submission_id=submission_id, source=source, assignment=assignment, error=error, **fields)

    @property
    def score(self) -> float:
        """Points awarded automatically."""
        return sum(check.score for check in self.checks if check.automatic)

    @property
    def max_score(self) -> float:
        """Points the automatic checks could award here (instructor-graded and skipped checks left out)."""
        return sum(check.points for check in self.checks if check.automatic)

    @property
    def manual_points(self) -> float:
        """Points awaiting an instructor's grading by hand (answers that were written)."""
        return sum(check.points for check in self.checks if check.pending)

    @property
    def manual_max(self) -> float:
        """Points an instructor grades by hand, written or not."""
        return sum(check.points for check in self.checks if check.graded_by == "instructor")

    @property
    def skipped_points(self) -> float:
        """Points of checks that could not run here (for example, GPU-only checks)."""
        return sum(check.points for check in self.checks if check.outcome == "skipped")

    def visible_checks(self, view: Literal["student", "instructor"]) -> tuple[CheckResult, ...]:
        """The checks a view shows: students see public checks only."""
        if view == "instructor":
            return self.checks
        return tuple(check for check in self.checks if check.visibility == "public")


def gradescope_json(result: SubmissionResult) -> dict[str, Any]:
    """The result in Gradescope's results.json schema (hidden checks: ``after_published``)."""
    tests = []
    for check in result.checks:
        lines = [check.message]
        if check.expected is not None and check.outcome not in ("passed", "manual"):
            lines.append(f"Expected: {check.expected}")
        if check.found is not None and check.outcome not in ("passed", "manual"):
            lines.append(f"Found: {check.found}")
        if check.hint and check.outcome in ("failed", "error"):
            lines.append(f"Hint: {check.hint}")
        lines += [f"Docs: {link}" for link in check.docs] if check.outcome in ("failed", "error") else []
        tests.append(
            {
                "name": check.name,
                # Instructor-graded and skipped checks carry no autograder points: the course's
                # manual questions (or a GPU run) award them.
                "score": round(check.score, 4) if check.automatic else 0,
                "max_score": round(check.points, 4) if check.automatic else 0,
                "status": "passed" if check.outcome in ("passed", "manual", "skipped") else "failed",
                "output": "\n".join(lines),
                "tags": [check.target, check.check_id],
                "visibility": GRADESCOPE_VISIBILITY[check.visibility],
                "extra_data": {
                    "outcome": check.outcome,
                    "graded_by": check.graded_by,
                    "check_id": check.check_id,
                    "kind": check.kind,
                    "device": check.device,
                    "points": check.points,
                    **({"answer": check.answer} if check.answer is not None else {}),
                    **({"details": list(check.details)} if check.details else {}),
                    **({"data": dict(check.data)} if check.data else {}),
                },
            }
        )
    output = _summary_output(result)
    return {
        "score": round(result.score, 4),
        "max_score": round(result.max_score, 4),
        "execution_time": round(result.duration_s, 3),
        "output": output,
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {
            "submission_id": result.submission_id,
            "source": result.source,
            "assignment": result.assignment,
            "error": result.error,
            "manual_points_pending": result.manual_points,
            "manual_points_max": result.manual_max,
            "skipped_points": result.skipped_points,
            "notes": list(result.notes),
            "cell_problems": [
                {"cell": problem.cell_index + 1, "kind": problem.kind, "message": problem.message, "traceback": problem.traceback}
                for problem in result.cell_problems
            ],
            "environment": dict(result.environment),
            **dict(result.provenance),
        },
    }


def _summary_output(result: SubmissionResult) -> str:
    if result.error:
        return f"This notebook could not be graded: {result.error}"
    lines = [f"Automatic score: {result.score:g} / {result.max_score:g}."]
    if result.manual_max:
        lines.append(
            f"Your written answers ({result.manual_max:g} points) are graded by hand by your instructor"
            + (
                f"; {result.manual_max - result.manual_points:g} of those points are lost to missing answers."
                if result.manual_points < result.manual_max
                else "."
            )
        )
    if result.skipped_points:
        points = f"{result.skipped_points:g} point{'' if result.skipped_points == 1 else 's'}"
        lines.append(f"{points} need a GPU and were not graded on this machine.")
    errors = [p for p in result.cell_problems if p.kind in ("error", "timeout", "kernel-died")]
    if errors:
        lines.append(f"{len(errors)} cell(s) of your notebook raised an error or timed out; see the feedback.")
    return " ".join(lines)


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader never sees half a file (temp file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


_RESULT_ADAPTER: TypeAdapter[SubmissionResult] | None = None


def _adapter() -> TypeAdapter[SubmissionResult]:
    global _RESULT_ADAPTER
    if _RESULT_ADAPTER is None:
        _RESULT_ADAPTER = TypeAdapter(SubmissionResult)
    return _RESULT_ADAPTER


def result_to_json(result: SubmissionResult) -> str:
    """The whole result as JSON (the gradebook stores it; workers send it to the main process)."""
    return _adapter().dump_json(result).decode("utf-8")


def result_from_json(text: str | bytes) -> SubmissionResult:
    """A result back from :func:`result_to_json`'s JSON, validated."""
    return _adapter().validate_json(text)


def write_results_json(result: SubmissionResult, path: Path) -> None:
    """Write one submission's results.json."""
    write_atomically(path, json.dumps(gradescope_json(result), indent=2, ensure_ascii=False) + "\n")


def grades_csv(results: Sequence[SubmissionResult]) -> str:
    """The class gradebook: one row per submission, one column per check (points)."""
    check_ids: list[str] = []
    for result in results:
        for check in result.checks:
            if check.check_id not in check_ids:
                check_ids.append(check.check_id)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(
        [
            "submission",
            "student",
            "assignment",
            "score",
            "max_score",
            "manual_points_pending",
            "manual_points_max",
            "status",
            *check_ids,
        ]
    )
    for result in results:
        by_id = {check.check_id: check for check in result.checks}
        status = "error" if result.error else ("needs-manual-grading" if result.manual_points else "graded")
        writer.writerow(
            [
                result.submission_id,
                result.student or "",
                result.assignment or "",
                f"{result.score:g}",
                f"{result.max_score:g}",
                f"{result.manual_points:g}",
                f"{result.manual_max:g}",
                status,
                *[_cell(by_id.get(check_id)) for check_id in check_ids],
            ]
        )
    return buffer.getvalue()


def _cell(check: CheckResult | None) -> str:
    if check is None:
        return ""
    if check.outcome == "manual":
        return "manual"
    if check.outcome == "skipped":
        return "skipped"
    return f"{check.score:g}"
