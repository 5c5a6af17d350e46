"""Submissions as an LMS hands them over, graded for real: a Canvas download zip with a duplicate."""

from __future__ import annotations

import csv
import shutil
import subprocess
import zipfile
from pathlib import Path

import torch
import yaml

from tests.contract import SEED, results, run_grade
from tests.grade_server import grade_process

# Canvas's gradebook import format (Instructure's guide "How do I import grades in the Gradebook?"): these columns
# first, then one column per assignment; the row after the header gives each assignment's points possible.
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def grade(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real `grade` command with exactly these arguments (no seed: publish grades nothing)."""
    completed = grade_process(args, cwd=cwd, timeout=300)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed


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
    # Canvas's late mark is kept (the download's folder is gone after the run): in the gradebook, the results, the summary.
    assert (rows["roerichard_5678"]["late"], rows["doejane_1234"]["late"]) == ("late", "")
    assert results(out, "roerichard_5678").extra_data["late"] is True
    assert results(out, "doejane_1234").extra_data["late"] is False
    assert results(out, "doejane_1234").score == results(out, "doejane_1234").max_score
    assert results(out, "roerichard_5678").losing() == {"loss-public", "loss-hidden"}
    page = (out / "summary.html").read_text()
    assert "has 2 notebooks" in page and 'href="doejane_1234-2/feedback-instructor.html"' in page
    assert 'roerichard_5678</a> <span class="flag" title="the LMS marked this submission late">late</span>' in page
    # The samples are the solution with one mistake each: the similarity page, linked from the summary, pairs them.
    assert 'href="similarity.html#similar-perplexity"' in page
    assert 'href="roerichard_5678/feedback-instructor.html"' in (out / "similarity.html").read_text()

    # The export Canvas imports as is: one row per student, the later of two submissions scoring.
    with (out / "grades-canvas.csv").open(newline="") as stream:
        header, possible, *students = list(csv.reader(stream))
    assert header == [*CANVAS_COLUMNS, "perplexity"]
    rubric = yaml.safe_load((root / "assignments" / "perplexity" / "rubric.yaml").read_text())
    # What a student could earn on this machine: the GPU-only check skipped without CUDA is left out (a perfect
    # notebook is 100 %, not 95 %).
    here = [check for check in rubric["checks"] if check.get("device") != "cuda" or torch.cuda.is_available()]
    assert possible == ["    Points Possible", "", "", "", "", f"{sum(check['points'] for check in here):g}"]
    assert students == [
        ["doejane", "1234", "", "", "", f"{results(out, 'doejane_1234-2').score:g}"],
        ["roerichard", "5678", "", "", "", f"{results(out, 'roerichard_5678').score:g}"],
    ]

    # Publishing shows the hidden checks' verdicts on the students' pages (never the hidden inputs' seed).
    feedback = out / "roerichard_5678" / "feedback.html"
    before = feedback.read_text()
    assert "token-weighted loss on hidden corpora" not in before and "when grades are published" in before
    published = grade("publish", str(out), cwd=root)
    assert "3 feedback pages rewritten" in published.stdout, published.stderr
    after = feedback.read_text()
    assert "token-weighted loss on hidden corpora" in after and "hidden, published" in after
    assert "averages the per-batch mean losses" in after  # the hidden check's own explanation
    assert "hidden-input seed" not in after and f"seed {SEED}" not in after  # the instructor's page alone shows it
    assert "hidden-input seed" in (out / "roerichard_5678" / "feedback-instructor.html").read_text()
    assert "when grades are published" not in after
    grade("publish", str(out), "--undo", cwd=root)
    assert "token-weighted loss on hidden corpora" not in feedback.read_text()
    shutil.rmtree(out)
