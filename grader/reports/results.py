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
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import TypeAdapter

from grader.facts import CellProblem, GradedBy, Outcome

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
    flags: tuple[str, ...] = ()  # what the instructor should look at in a written answer (filler, a copied question)
    tampered: str | None = None  # why the evidence of this check's function was tampered with (a typed flag)

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
    student_name: str | None = None  # the student's name as the LMS wrote it (Canvas 'lastfirst'), when known
    late: bool = False  # the LMS marked it late (Canvas's _LATE_ in the download's name)
    checks: tuple[CheckResult, ...] = ()
    cell_problems: tuple[CellProblem, ...] = ()
    figures: tuple[Figure, ...] = ()
    error: str | None = None  # why the submission could not be graded at all
    internal_error: bool = False  # the grader itself failed (not the submission): the next run grades it again
    traceback: str = ""  # the grader's own traceback of an internal error, for the instructor
    notes: tuple[str, ...] = ()  # facts a reader should know (how it was identified, how it was isolated, ...)
    warnings: tuple[str, ...] = ()  # what may make its verdicts wrong (a kit's values recorded on other models)
    sandbox_warning: str = ""  # how the kernel's isolation fell short of the sandbox's, when it did
    sandbox_mode: str = ""  # how its kernel was isolated: a row of grader.kernel.sandbox.PROTECTIONS ('': not known)
    kernel_start: str = ""  # how its kernel was started: forked from a template, or launched (and why)
    duration_s: float = 0.0
    first_cell_s: float | None = None  # from taking the submission to sending its first code cell to the kernel
    node: str = ""  # the machine that graded it: its host name, and on a Ray cluster the node's id
    environment: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)  # hashes, versions, seed

    @classmethod
    def without_results(
        cls, submission_id: str, source: str, error: str, assignment: str | None = None, **fields: Any
    ) -> SubmissionResult:
        """A result for a submission that could not be graded, saying why."""
        return cls(submission_id=submission_id, source=source, assignment=assignment, error=error, **fields)

    @property
    def device(self) -> str:
        """What its kernel ran on: "cpu", or "cuda" and the GPU's name ("" when no kernel started)."""
        if not self.environment:
            return ""
        if self.environment.get("cuda_available"):
            names = self.environment.get("cuda_devices") or []
            return f"cuda ({names[0]})" if names else "cuda"
        return "cpu"

    @property
    def score(self) -> float:
        """Points awarded automatically."""
        return sum(check.score for check in self.checks if check.automatic)

    @property
    def max_score(self) -> float:
        """Points the automatic checks could award here (instructor-graded and skipped checks left out)."""
        return sum(check.points for check in self.checks if check.automatic)

    @property
    def public_score(self) -> float:
        """Points awarded automatically by the public checks (what a student may see before publication)."""
        return sum(check.score for check in self.checks if check.automatic and check.visibility == "public")

    @property
    def public_max_score(self) -> float:
        """Points the public automatic checks could award here."""
        return sum(check.points for check in self.checks if check.automatic and check.visibility == "public")

    @property
    def tampered(self) -> tuple[CheckResult, ...]:
        """The checks whose function's records the grader's own evidence contradicts (the instructor should look)."""
        return tuple(check for check in self.checks if check.tampered)

    def flags(self) -> list[dict[str, str]]:
        """Typed flags for the instructor: one ``tampered-evidence`` flag per function whose records were tampered with."""
        seen: dict[str, dict[str, str]] = {}
        for check in self.tampered:
            seen.setdefault(
                check.target,
                {"type": "tampered-evidence", "function": check.target, "check_id": check.check_id, "why": check.tampered or ""},
            )
        return list(seen.values())

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

    def visible_checks(self, view: Literal["student", "instructor"], published: bool = False) -> tuple[CheckResult, ...]:
        """The checks a view shows: students see public checks only, until grades are published (then every check)."""
        if view == "instructor" or published:
            return self.checks
        return tuple(check for check in self.checks if check.visibility == "public")


def gradescope_json(result: SubmissionResult) -> dict[str, Any]:
    """The result in Gradescope's results.json schema (hidden checks: ``after_published``).

    Only the keys of Gradescope's documented schema are used; everything else goes in
    ``extra_data``. Outputs are Markdown (``output_format: md``). A check that could not run
    here (a GPU-only check on a CPU grader) is not a Gradescope test: Gradescope would show its
    0 / 0 as passed. It is listed in the top-level output and kept in ``extra_data.not_run``.
    """
    tests: list[dict[str, Any]] = []
    not_run: list[dict[str, Any]] = []
    for check in result.checks:
        test: dict[str, Any] = {
            "name": check.name,
            # Instructor-graded checks carry no autograder points: the course's manual questions award them.
            "score": round(check.score, 4) if check.automatic else 0,
            "max_score": round(check.points, 4) if check.automatic else 0,
            "status": "passed" if check.outcome in ("passed", "manual") else "failed",
            "output": _check_output(check),
            "output_format": "md",
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
                **({"flags": list(check.flags)} if check.flags else {}),
                **({"tampered": check.tampered} if check.tampered else {}),
                **({"details": list(check.details)} if check.details else {}),
                **({"data": dict(check.data)} if check.data else {}),
            },
        }
        if check.outcome == "skipped":
            del test["status"], test["output_format"]
            not_run.append(test)
        else:
            tests.append(test)
    return {
        "score": round(result.score, 4),
        "execution_time": round(result.duration_s, 3),
        "output": summary_markdown(result),
        "output_format": "md",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {
            "submission_id": result.submission_id,
            "source": result.source,
            "assignment": result.assignment,
            "late": result.late,
            "error": result.error,
            "max_score": round(result.max_score, 4),
            "public_score": round(result.public_score, 4),
            "public_max_score": round(result.public_max_score, 4),
            "manual_points_pending": result.manual_points,
            "manual_points_max": result.manual_max,
            "skipped_points": result.skipped_points,
            "not_run": not_run,
            "notes": list(result.notes),
            "sandbox": result.sandbox_mode or None,
            "sandbox_warning": result.sandbox_warning or None,
            "warnings": list(result.warnings),
            "internal_error": result.internal_error,
            "first_cell_s": None if result.first_cell_s is None else round(result.first_cell_s, 3),
            "node": result.node,
            "device": result.device,
            "flags": result.flags(),
            "cell_problems": [
                {"cell": problem.cell_index + 1, "kind": problem.kind, "message": problem.message, "traceback": problem.traceback}
                for problem in result.cell_problems
            ],
            "environment": dict(result.environment),
            **dict(result.provenance),
        },
    }


def markdown_text(text: str) -> str:
    """``text`` for a Markdown output: messages already mark code with backticks, so only '<' is escaped.

    (Gradescope sanitises HTML anyway; escaping '<' keeps 'loss < 1' from reading as a tag.)
    """
    return text.replace("<", "\\<")


def markdown_code(text: str) -> str:
    """``text`` as an inline code span (fenced by more backticks than it holds)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    padding = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{padding}{text}{padding}{fence}"


def _check_output(check: CheckResult) -> str:
    """A check's Gradescope output, in Markdown: the verdict, what was expected and found, a hint and links."""
    paragraphs = [markdown_text(check.message)]
    if check.outcome in ("failed", "error"):
        if check.expected is not None:
            paragraphs.append(f"**Expected:** {markdown_code(check.expected)}")
        if check.found is not None:
            paragraphs.append(f"**Found:** {markdown_code(check.found)}")
        if check.hint:
            paragraphs.append(f"**Hint:** {markdown_text(check.hint)}")
        if check.docs:
            paragraphs.append("**Read:** " + " · ".join(f"[{markdown_text(link)}]({link})" for link in check.docs))
    claims = check.data.get("claims") if isinstance(check.data, Mapping) else None
    if isinstance(claims, list) and claims:
        lines = [f"- *{markdown_text(str(c.get('verdict', '')))}*: {markdown_text(str(c.get('message', '')))}" for c in claims]
        paragraphs.append("**The numbers your answer states, against your notebook's results:**\n" + "\n".join(lines))
    return "\n\n".join(paragraphs)


def summary_markdown(result: SubmissionResult) -> str:
    """The top-level output students read on Gradescope, in Markdown.

    It states the public checks' score only: Gradescope does not show students their total
    while hidden tests are hidden, and this text must not reveal it either.
    """
    if result.error:
        return f"**This notebook could not be graded:** {markdown_text(result.error)}"
    paragraphs = [f"**Public checks: {result.public_score:g} / {result.public_max_score:g} points.**"]
    hidden = [check for check in result.checks if check.visibility == "hidden" and check.automatic]
    if hidden:
        hidden_points = sum(check.points for check in hidden)
        paragraphs[0] += (
            f" {len(hidden)} hidden check{'' if len(hidden) == 1 else 's'} ({hidden_points:g} points) ran on inputs drawn at grading time;"
            " their results, and your total, are shown when your instructor publishes the grades."
        )
    errors = [problem for problem in result.cell_problems if problem.kind in ("error", "timeout", "kernel-died")]
    if errors:
        lines = [
            f"**{len(errors)} cell{'' if len(errors) == 1 else 's'} of your notebook failed** (a failing cell can make later cells and checks fail too):"
        ]
        for problem in errors[:10]:
            where = f"Cell {problem.cell_index + 1}" if problem.cell_index >= 0 else "Notebook"
            first = (problem.message.strip().splitlines() or [problem.kind])[-1]
            lines.append(f"- {where}: {markdown_code(first[:300])}")
        if len(errors) > 10:
            lines.append(f"- and {len(errors) - 10} more")
        paragraphs.append("\n".join(lines))
    failing = [check for check in result.visible_checks("student") if check.outcome in ("failed", "error")]
    if failing:
        paragraphs.append(
            "**Failing public checks:** "
            + ", ".join(f"{markdown_text(check.name)} ({check.score:g} / {check.points:g})" for check in failing)
            + ". Each check below says what was expected, what was found, and what to read."
        )
    if result.manual_max:
        missing = result.manual_max - result.manual_points
        paragraphs.append(
            f"Your written answers ({result.manual_max:g} points) are graded by hand by your instructor"
            + (f"; {missing:g} of those points are lost to missing answers." if missing else ".")
        )
    skipped = [check for check in result.checks if check.outcome == "skipped" and check.visibility == "public"]
    if result.skipped_points:
        names = ", ".join(markdown_text(check.name) for check in skipped)
        points = f"{result.skipped_points:g} point{'' if result.skipped_points == 1 else 's'}"
        paragraphs.append(
            f"**Not graded here:** {points} {'needs' if result.skipped_points == 1 else 'need'} a GPU, which this grader does not have"
            + (f" ({names})." if names else ".")
        )
    return "\n\n".join(paragraphs)


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
            "late",
            *check_ids,
        ]
    )
    for result in results:
        by_id = {check.check_id: check for check in result.checks}
        status = (
            "error"
            if result.error
            else "tampered-evidence"
            if result.tampered
            else ("needs-manual-grading" if result.manual_points else "graded")
        )
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
                "late" if result.late else "",
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


CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_ROW = "    Points Possible"


def canvas_csv(results: Sequence[SubmissionResult]) -> str | None:
    """The class's scores in Canvas's gradebook import format, or None when no submission carries a Canvas user id.

    One row per student (``ID``: the Canvas user id its download's name carries; ``Student``: the name as Canvas
    wrote it), after Canvas's "Points Possible" row; one column per assignment, its points possible what a student
    could earn on the machine that graded it: the automatic points (not a check skipped for want of a GPU) and
    those graded by hand. A student's score is what the grader awarded: points graded by hand are the instructor's
    to add. A student with two submissions of one assignment is scored by the later one.
    """
    with_ids = [result for result in results if result.student and result.assignment and not result.internal_error]
    if not with_ids:
        return None
    assignments: list[str] = []
    possible: dict[str, float] = {}
    for result in with_ids:
        assert result.assignment is not None
        if result.assignment not in assignments:
            assignments.append(result.assignment)
        total = result.max_score + result.manual_max
        possible[result.assignment] = max(possible.get(result.assignment, 0.0), total)
    students: dict[str, dict[str, str]] = {}
    names: dict[str, str] = {}
    for result in with_ids:
        assert result.student is not None and result.assignment is not None
        names[result.student] = result.student_name or names.get(result.student, "")
        students.setdefault(result.student, {})[result.assignment] = "" if result.error else f"{result.score:g}"
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([*CANVAS_COLUMNS, *assignments])
    writer.writerow([CANVAS_POINTS_ROW, "", "", "", "", *(f"{possible[name]:g}" for name in assignments)])
    for student in sorted(students, key=lambda student: (names[student].lower(), student)):
        writer.writerow([names[student], student, "", "", "", *(students[student].get(name, "") for name in assignments)])
    return buffer.getvalue()
