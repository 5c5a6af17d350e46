"""Submissions as an LMS hands them over, graded for real: a Canvas download zip with a duplicate."""

from __future__ import annotations

import csv
import shutil
import zipfile
from pathlib import Path

from tests.contract import results, run_grade


def test_a_canvas_zip_is_graded_per_student_and_a_duplicate_is_reported(tmp_path: Path, root: Path) -> None:
    samples = root / "submissions" / "perplexity"
    archive = tmp_path / "submissions.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.write(samples / "solution.ipynb", "doejane_1234_5550001_perplexity.ipynb")
        zipped.write(samples / "mistake-token-count.ipynb", "doejane_1234_5550002_perplexity-1.ipynb")
        zipped.write(samples / "mistake-batch-means.ipynb", "roerichard_LATE_5678_5550003_lab.ipynb")
        zipped.writestr("../escape.ipynb", "{}")  # a hostile member: never written outside
    out = tmp_path / "out"
    completed = run_grade(str(archive), "--out", str(out), cwd=root)
    assert "student 1234 (doejane) has 2 notebooks" in completed.stderr
    assert not (tmp_path / "escape.ipynb").exists()
    with (out / "grades.csv").open() as stream:
        rows = {row["submission"]: row for row in csv.DictReader(stream)}
    assert set(rows) == {"doejane_1234", "doejane_1234-2", "roerichard_5678"}
    assert rows["doejane_1234"]["student"] == rows["doejane_1234-2"]["student"] == "1234"
    assert rows["roerichard_5678"]["student"] == "5678"
    assert results(out, "doejane_1234").score == results(out, "doejane_1234").max_score
    assert results(out, "roerichard_5678").losing() == {"loss-public", "loss-hidden"}
    page = (out / "summary.html").read_text()
    assert "has 2 notebooks" in page and 'href="doejane_1234-2/feedback-instructor.html"' in page
    shutil.rmtree(out)
