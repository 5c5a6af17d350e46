"""Store results: each submission's files as soon as it is graded, and the class reports."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from grader.reports.render import FEEDBACK_FILES, render_feedback, render_summary
from grader.reports.results import SubmissionResult, canvas_csv, grades_csv, write_atomically, write_results_json

CANVAS_FILE = "grades-canvas.csv"  # the class's scores in Canvas's gradebook import format (Canvas-named submissions)


def write_submission(result: SubmissionResult, out_dir: Path, published: bool = False) -> Path:
    """Write results.json and both feedback pages under OUT/<submission id>/; return that folder. Once grades are
    ``published``, the student's page shows the hidden checks too."""
    folder = out_dir / result.submission_id
    write_results_json(result, folder / "results.json")
    for view, name in FEEDBACK_FILES.items():
        write_atomically(folder / name, render_feedback(result, view, published=published))  # type: ignore[arg-type]
    return folder


def write_class_reports(results: Sequence[SubmissionResult], out_dir: Path, notices: Sequence[str] = ()) -> None:
    """Write summary.html and grades.csv for every result so far (notices head the summary)."""
    write_atomically(out_dir / "summary.html", render_summary(results, notices))
    write_atomically(out_dir / "grades.csv", grades_csv(results))
    canvas = canvas_csv(results)
    if canvas is not None:
        write_atomically(out_dir / CANVAS_FILE, canvas)
