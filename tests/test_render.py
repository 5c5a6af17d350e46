"""Rendering escapes everything that comes from a notebook and hides hidden checks from students."""

from __future__ import annotations

import base64
import dataclasses

from grader.facts import CellProblem
from grader.reports.render import render_feedback, render_summary
from grader.reports.results import CheckResult, Figure, SubmissionResult

SCRIPT = "<script>alert('x')</script>"


def result() -> SubmissionResult:
    def made(check_id: str, visibility: str, outcome: str, **fields) -> CheckResult:
        return CheckResult(
            check_id=check_id,
            name=f"Check {check_id}",
            target="f",
            kind="k",
            visibility=visibility,  # type: ignore[arg-type]
            device="any",
            points=2,
            score=2 if outcome == "passed" else 0,
            outcome=outcome,
            **fields,  # type: ignore[arg-type]
        )

    return SubmissionResult(
        submission_id="student-1",
        source="student-1.ipynb",
        assignment="ptq-bnb",
        title="Demo",
        checks=(
            made("public", "public", "failed", message=f"found {SCRIPT}", expected="1", found=SCRIPT, hint="try <b>this</b>"),
            made("secret", "hidden", "passed", message="hidden detail"),
            made("essay", "public", "manual", message="by hand", answer=SCRIPT, graded_by="instructor"),
        ),
        cell_problems=(CellProblem(0, "error", f"ValueError: {SCRIPT}", traceback=SCRIPT),),
        figures=(
            Figure(0, "image/svg+xml", f"<svg xmlns='http://www.w3.org/2000/svg'>{SCRIPT}</svg>"),
            Figure(1, "image/png", 'not base64 " onerror="alert(1)'),
        ),
    )


def test_notebook_text_is_escaped_everywhere() -> None:
    for page in (render_feedback(result(), "student"), render_feedback(result(), "instructor"), render_summary([result()])):
        assert "<script>" not in page and 'onerror="alert' not in page
    assert "&lt;script&gt;" in render_feedback(result(), "student")


def test_svg_figures_become_base64_images() -> None:
    page = render_feedback(result(), "student")
    svg = base64.b64encode(result().figures[0].data.encode()).decode()
    assert f'src="data:image/svg+xml;base64,{svg}"' in page


def test_students_do_not_see_hidden_checks() -> None:
    student, instructor = render_feedback(result(), "student"), render_feedback(result(), "instructor")
    assert "Check secret" not in student and "hidden detail" not in student
    assert "1 more check (2 points)" in student
    assert "Check secret" in instructor


def test_scores_separate_automatic_and_hand_graded_points() -> None:
    graded = result()
    assert (graded.score, graded.max_score, graded.manual_points, graded.manual_max) == (2, 4, 2, 2)


def test_a_flagged_written_answer_shows_its_flag_to_the_instructor() -> None:
    flagged = dataclasses.replace(
        result(),
        checks=(
            CheckResult(
                check_id="essay",
                name="Check essay",
                target="analysis",
                kind="written_answer",
                visibility="public",
                device="any",
                points=2,
                score=0,
                outcome="manual",
                message="by hand, flagged",
                graded_by="instructor",
                answer="lorem ipsum dolor sit amet",
                flags=("filler text (lorem ipsum or placeholder words)",),
            ),
        ),
    )
    summary = render_summary([flagged])
    assert "1 flagged" in summary and "⚑ filler text" in summary
    assert "Flagged for the instructor: filler text" in render_feedback(flagged, "instructor")


def test_tampered_evidence_is_a_typed_flag_listed_on_top_of_the_summary() -> None:
    """A check whose function's records were tampered with: failed, flagged in results.json and grades.csv,
    and the submission listed (escaped) on top of summary.html with why."""
    from grader.reports.results import grades_csv, gradescope_json

    why = f"the records claim 0.5 s of pacing in a request of 0.1 s {SCRIPT}"
    tampered = dataclasses.replace(result(), submission_id="forger")
    tampered = dataclasses.replace(
        tampered,
        checks=(dataclasses.replace(tampered.checks[0], message="tampered", tampered=why), *tampered.checks[1:]),
    )
    assert gradescope_json(tampered)["extra_data"]["flags"] == [
        {"type": "tampered-evidence", "function": "f", "check_id": "public", "why": why}
    ]
    assert gradescope_json(tampered)["tests"][0]["extra_data"]["tampered"] == why
    assert gradescope_json(result())["extra_data"]["flags"] == []
    assert ",tampered-evidence," in grades_csv([tampered])
    page = render_summary([result(), tampered])
    top = page[: page.index('class="scorebox"')]
    assert "Evidence tampered with" in top and "forger" in top and "student-1" not in top
    assert "&lt;script&gt;" in top and "<script>" not in page
    assert "Evidence tampered with" not in render_summary([result()])
