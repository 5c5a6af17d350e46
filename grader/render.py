"""Render results as HTML: each student's feedback, and the class summary.

Rendering reads results and nothing else. Templates are Jinja2 with autoescaping on, so text
from a notebook (messages, answers, tracebacks) can never become markup.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from grader.execute import CellProblem
from grader.results import CheckResult, Figure, SubmissionResult

View = Literal["student", "instructor"]
OUTCOME_LABELS = {"passed": "passed", "failed": "failed", "error": "error", "manual": "graded by hand", "skipped": "skipped"}
PROBLEM_LABELS = {"error": "error", "timeout": "timed out", "not-run": "not run", "kernel-died": "kernel died"}
FEEDBACK_FILES = {"student": "feedback.html", "instructor": "feedback-instructor.html"}


def _points(value: float) -> str:
    return f"{value:g}"


def _pts(value: float) -> str:
    return f"{value:g} pt{'' if value == 1 else 's'}"


def _data_uri(figure: Figure) -> str:
    """A data URI for an image; SVG is base64-encoded so it can only ever be an image."""
    if figure.mime == "image/svg+xml":
        return "data:image/svg+xml;base64," + base64.b64encode(figure.data.encode("utf-8")).decode("ascii")
    payload = "".join(figure.data.split())
    try:
        base64.b64decode(payload, validate=True)
    except ValueError:
        return ""
    return "data:image/png;base64," + payload


def problems_summary(problems: Sequence[CellProblem]) -> str:
    """One line about a notebook's cell problems ('2 cell errors, 1 timeout')."""
    counts = {kind: sum(1 for problem in problems if problem.kind == kind) for kind in ("error", "timeout")}
    parts = [f"{count} cell {kind}{'s' if count > 1 else ''}" for kind, count in counts.items() if count]
    if any(problem.kind == "kernel-died" for problem in problems):
        parts.append("kernel died")
    return ", ".join(parts)


def feedback_link(result: SubmissionResult) -> str:
    """The instructor feedback page of a result, relative to the output folder."""
    return f"{result.submission_id}/{FEEDBACK_FILES['instructor']}"


def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("grader", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["points"] = _points
    environment.filters["pts"] = _pts
    environment.filters["data_uri"] = _data_uri
    environment.filters["problems_summary"] = problems_summary
    environment.filters["feedback_link"] = feedback_link
    return environment


def render_feedback(result: SubmissionResult, view: View) -> str:
    """One submission's feedback page; the student view leaves hidden checks out."""
    checks = result.visible_checks(view)
    hidden = [check for check in result.checks if check not in checks]
    shown = [check for check in checks if check.automatic]
    return (
        _environment()
        .get_template("feedback.html.j2")
        .render(
            result=result,
            view=view,
            checks=checks,
            hidden_count=len(hidden),
            hidden_points=sum(check.points for check in hidden),
            shown_score=sum(check.score for check in shown),
            shown_max=sum(check.points for check in shown),
            outcome_labels=OUTCOME_LABELS,
            problem_labels=PROBLEM_LABELS,
        )
    )


@dataclass(frozen=True)
class PassRate:
    """How one check went across the class."""

    check_id: str
    name: str
    points: float
    passed: int = 0
    failed: int = 0
    error: int = 0
    other: int = 0


@dataclass(frozen=True)
class ManualItem:
    """A written answer waiting for the instructor."""

    result: SubmissionResult
    check: CheckResult


@dataclass(frozen=True)
class Group:
    """The results of one assignment (or the ungradeable ones)."""

    name: str | None
    title: str
    results: list[SubmissionResult]
    pass_rates: list[PassRate] = field(default_factory=list)
    manual: list[ManualItem] = field(default_factory=list)


def _groups(results: Sequence[SubmissionResult]) -> list[Group]:
    by_assignment: dict[str | None, list[SubmissionResult]] = {}
    for result in results:
        by_assignment.setdefault(result.assignment, []).append(result)
    groups = []
    for name in sorted(by_assignment, key=lambda key: (key is None, key or "")):
        members = by_assignment[name]
        rates: dict[str, dict[str, Any]] = {}
        manual = []
        for result in members:
            for check in result.checks:
                row = rates.setdefault(
                    check.check_id, {"name": check.name, "points": check.points, "passed": 0, "failed": 0, "error": 0, "other": 0}
                )
                row[check.outcome if check.outcome in ("passed", "failed", "error") else "other"] += 1
                if check.pending:
                    manual.append(ManualItem(result, check))
        title = next((result.title for result in members if result.title), None) or (name or "Not recognised")
        groups.append(Group(name, title, members, [PassRate(check_id, **row) for check_id, row in rates.items()], manual))
    return groups


def render_summary(results: Sequence[SubmissionResult]) -> str:
    """The class summary page: scores, per-check pass counts, the manual-review queue."""
    return (
        _environment()
        .get_template("summary.html.j2")
        .render(
            results=results,
            groups=_groups(results),
            generated_at=dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        )
    )
