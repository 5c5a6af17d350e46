"""Store results: each submission's files as soon as it is graded, and the class reports."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from grader.reports.render import FEEDBACK_FILES, SimilarityReport, render_feedback, render_similarity, render_summary
from grader.reports.results import SubmissionResult, canvas_csv, grades_csv, write_atomically, write_results_json

SIMILARITY_FILE = "similarity.html"  # pairs of submissions whose own code is alike, per assignment
CANVAS_FILE = "grades-canvas.csv"  # the class's scores in Canvas's gradebook import format (Canvas-named submissions)


def write_submission(result: SubmissionResult, out_dir: Path, published: bool = False) -> Path:
    """Write results.json and both feedback pages under OUT/<submission id>/; return that folder. Once grades are
    ``published``, the student's page shows the hidden checks too."""
    folder = out_dir / result.submission_id
    write_results_json(result, folder / "results.json")
    for view, name in FEEDBACK_FILES.items():
        write_atomically(folder / name, render_feedback(result, view, published=published))  # type: ignore[arg-type]
    return folder


def similarity_reports(
    results: Sequence[SubmissionResult], notebooks: Mapping[str, Path], starters: Mapping[str, Path]
) -> list[SimilarityReport]:
    """Per assignment with two or more graded notebooks, the pairs whose own code is alike (grader/reports/similarity.py)."""
    from grader.reports.similarity import DEFAULT_THRESHOLD, compare_class  # (copydetect: class reports only)

    by_assignment: dict[str, dict[str, Path]] = {}
    for result in results:
        path = notebooks.get(result.submission_id)
        if result.assignment and path is not None and path.is_file() and not result.error:
            by_assignment.setdefault(result.assignment, {})[result.submission_id] = path
    reports = []
    for assignment, paths in sorted(by_assignment.items()):
        if len(paths) < 2:
            continue
        starter = starters.get(assignment)
        try:
            pairs, left_out = compare_class(paths, starter)
        except Exception as error:  # a notebook it cannot read must not cost the class its reports
            problem = f"the notebooks could not be compared ({type(error).__name__}: {error})"
            reports.append(SimilarityReport(assignment, 0, DEFAULT_THRESHOLD, (), (), problem))
            continue
        reports.append(SimilarityReport(assignment, len(paths) - len(left_out), DEFAULT_THRESHOLD, tuple(pairs), tuple(left_out)))
    return reports


def write_class_reports(
    results: Sequence[SubmissionResult],
    out_dir: Path,
    notices: Sequence[str] = (),
    notebooks: Mapping[str, Path] | None = None,
    starters: Mapping[str, Path] | None = None,
) -> None:
    """Write summary.html and grades.csv for every result so far (notices head the summary); with the ``notebooks``
    graded (by submission id) and the assignments' ``starters``, the similarity page too, linked from the summary."""
    similarity: list[SimilarityReport] = []
    if notebooks is not None:
        similarity = similarity_reports(results, notebooks, starters or {})
        write_atomically(out_dir / SIMILARITY_FILE, render_similarity(similarity))
    write_atomically(out_dir / "summary.html", render_summary(results, notices, similarity))
    write_atomically(out_dir / "grades.csv", grades_csv(results))
    canvas = canvas_csv(results)
    if canvas is not None:
        write_atomically(out_dir / CANVAS_FILE, canvas)
