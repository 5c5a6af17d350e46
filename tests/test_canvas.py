"""Canvas's gradebook import file, from made-up results (the real one, from a graded Canvas download, is in test_lms)."""

from __future__ import annotations

import csv
import io

from grader.reports.render import render_feedback
from grader.reports.results import CheckResult, SubmissionResult, canvas_csv

COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def _check(check_id: str, points: float, score: float, visibility: str = "public", **more: object) -> CheckResult:
    outcome = "passed" if score == points else "failed"
    return CheckResult(check_id, f"the {check_id} check", "f", "kind", visibility, "any", points, score, outcome, "why", **more)  # type: ignore[arg-type]


def _result(submission_id: str, student: str | None, assignment: str, *checks: CheckResult, **more: object) -> SubmissionResult:
    return SubmissionResult(submission_id, "x.ipynb", assignment, student=student, checks=checks, **more)  # type: ignore[arg-type]


def _rows(text: str | None) -> list[list[str]]:
    assert text is not None
    return list(csv.reader(io.StringIO(text)))


def test_one_row_per_student_one_column_per_assignment_with_its_points_possible() -> None:
    written = _check("w", 3, 0, graded_by="instructor")
    written = CheckResult(**{**written.__dict__, "outcome": "manual"})
    gpu = CheckResult(**{**_check("g", 1, 0).__dict__, "outcome": "skipped"})
    results = [
        _result(
            "roerichard_5678", "5678", "latency", _check("a", 2, 2), _check("b", 4, 1), written, gpu, student_name="roerichard"
        ),
        _result("doejane_1234", "1234", "latency", _check("a", 2, 2), _check("b", 4, 4), written, gpu, student_name="doejane"),
        _result("doejane_1234-pp", "1234", "perplexity", _check("p", 20, 17), student_name="doejane"),
        _result("by-path", None, "latency", _check("a", 2, 0)),  # no Canvas id: not in the file
    ]
    header, possible, *students = _rows(canvas_csv(results))
    assert header == [*COLUMNS, "latency", "perplexity"]
    # Automatic and by hand: a GPU-only check skipped on this machine is no point a student here could earn.
    assert possible == ["    Points Possible", "", "", "", "", "9", "20"]
    assert students == [["doejane", "1234", "", "", "", "6", "17"], ["roerichard", "5678", "", "", "", "3", ""]]


def test_no_canvas_ids_no_file_and_an_ungradeable_notebook_leaves_its_cell_blank() -> None:
    assert canvas_csv([_result("a", None, "latency", _check("a", 2, 2))]) is None
    broken = SubmissionResult.without_results("zz_42", "x.ipynb", "not a notebook", assignment="latency", student="42")
    _, _, row = _rows(canvas_csv([broken]))
    assert row == ["", "42", "", "", "", ""]


def test_a_published_page_shows_hidden_verdicts_but_not_the_seed() -> None:
    hidden = _check("h", 4, 0, visibility="hidden", hint="count every token", expected="12", found="11")
    result = _result("s", "1", "latency", _check("a", 2, 2), hidden, provenance={"seed": 987654321})
    before = render_feedback(result, "student")
    assert "the h check" not in before and "when grades are published" in before
    after = render_feedback(result, "student", published=True)
    assert "the h check" in after and "count every token" in after and "hidden, published" in after
    assert "987654321" not in after and "987654321" in render_feedback(result, "instructor")
