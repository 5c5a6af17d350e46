"""Scoring: a check's verdict as its result (points, outcome, what to show), and what tampering withholds."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from grader.checks import CheckKind, Verdict
from grader.checks.base import tampered_verdict
from grader.grading.rubric import CheckSpec
from grader.reports.results import CheckResult


def points_not_graded(points: float) -> str:
    return f"its {points_text(points)} {'is' if points == 1 else 'are'} not graded here"


def points_text(points: float) -> str:
    return f"{points:g} point{'' if points == 1 else 's'}"


def check_result(check: CheckSpec, kind: CheckKind, verdict: Verdict, duration_s: float) -> CheckResult:
    if verdict.outcome in ("passed", "failed"):
        fraction = verdict.fraction if verdict.fraction is not None else (1.0 if verdict.outcome == "passed" else 0.0)
    else:
        fraction = 0.0
    return CheckResult(
        check_id=check.id,
        name=check.name,
        target=check.target,
        kind=check.kind,
        visibility=check.visibility,
        device=check.device,
        points=check.points,
        score=round(check.points * max(0.0, min(1.0, fraction)), 4),
        outcome=verdict.outcome,
        message=verdict.message,
        graded_by=kind.graded_by,
        expected=verdict.expected,
        found=verdict.found,
        details=verdict.details,
        hint=check.hint,
        docs=tuple(check.docs),
        answer=verdict.answer,
        data=dict(verdict.data),
        duration_s=duration_s,
        flags=tuple(verdict.flags),
        tampered=verdict.tampered,
    )


def withheld_if_tampered(result: CheckResult, tampered: Mapping[str, str]) -> CheckResult:
    """A check of a function whose records were tampered with, in any of its calls, awards nothing: failed, flagged."""
    why = tampered.get(result.target)
    if why is None or result.tampered or not result.automatic:
        return result
    verdict = tampered_verdict(result.target, why)
    return dataclasses.replace(
        result,
        outcome=verdict.outcome,
        score=0.0,
        message=verdict.message,
        expected=verdict.expected,
        found=verdict.found,
        tampered=why,
    )
