"""The gradebook, incremental regrades, parallel workers, and a run killed and started again.

All through the real `grade` command on real notebooks (perplexity's samples: the quickest to
grade), except the first test, which exercises the gradebook's skip rule directly.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from grader.reports.results import CheckResult, SubmissionResult
from grader.scale.gradebook import Fingerprint, Gradebook
from tests.conftest import SEED
from tests.contract import results, run_grade

SAMPLES = ["solution", "mistake-batch-means", "mistake-token-count"]


def _result(submission_id: str, sha: str) -> SubmissionResult:
    check = CheckResult("c", "a check", "f", "kind", "public", "any", 2.0, 1.0, "failed", "half right")
    return SubmissionResult(submission_id, "x.ipynb", "perplexity", checks=(check,), provenance={"notebook_sha256": sha})


def test_a_stored_result_is_reused_only_while_nothing_it_depends_on_changed(tmp_path: Path) -> None:
    fingerprint = Fingerprint("rubric-1", "0.1", "tiny")
    with Gradebook(tmp_path / "book.sqlite") as book:
        book.record(_result("alice", "nb-1"), fingerprint)
        book.record(_result("alice", "nb-1"), fingerprint)  # the same submission twice: one row
        assert book.count() == 1
        assert book.unchanged("alice", "nb-1", lambda name: fingerprint) == _result("alice", "nb-1")
        assert book.unchanged("alice", "nb-2", lambda name: fingerprint) is None  # the notebook changed
        assert book.unchanged("alice", "nb-1", lambda name: Fingerprint("rubric-2", "0.1", "tiny")) is None
        assert book.unchanged("alice", "nb-1", lambda name: Fingerprint("rubric-1", "0.2", "tiny")) is None
        assert book.unchanged("alice", "nb-1", lambda name: None) is None  # the assignment is gone
        assert book.unchanged("bob", "nb-1", lambda name: fingerprint) is None
        book.record(_result("carol", "nb-3"), fingerprint, regrade=True)  # a grader failure: never reused
        assert book.unchanged("carol", "nb-3", lambda name: fingerprint) is None
    rows = sqlite3.connect(tmp_path / "book.sqlite").execute("SELECT submission_id, check_id, score FROM checks").fetchall()
    assert sorted(rows) == [("alice", "c", 1.0), ("carol", "c", 1.0)]


@pytest.fixture
def class_folder(tmp_path: Path, root: Path) -> Path:
    folder = tmp_path / "class"
    folder.mkdir()
    for name in SAMPLES:
        shutil.copy(root / "submissions" / "perplexity" / f"{name}.ipynb", folder / f"{name}.ipynb")
    return folder


def _outcomes(out: Path, name: str) -> dict[str, tuple[str, float]]:
    graded = results(out, name)
    return {check_id: (test.extra_data["outcome"], test.score) for check_id, test in graded.by_id().items()}


def test_workers_agree_with_one_worker_and_unchanged_submissions_are_skipped(
    class_folder: Path, tmp_path: Path, root: Path
) -> None:
    out = tmp_path / "out"
    run_grade(str(class_folder), "--out", str(out), "--workers", "1", cwd=root)

    started = time.monotonic()
    again = run_grade(str(class_folder), "--out", str(out), "--workers", "1", cwd=root)
    assert "3 unchanged submissions were not graded again" in again.stderr
    assert time.monotonic() - started < 30  # no kernel started (the benchmark measures the real figure)

    edited = json.loads((class_folder / "mistake-token-count.ipynb").read_text())
    edited["cells"][0]["source"] = "# Perplexity, edited after the deadline\n" + "".join(edited["cells"][0]["source"])
    (class_folder / "mistake-token-count.ipynb").write_text(json.dumps(edited))
    changed = run_grade(str(class_folder), "--out", str(out), "--workers", "1", cwd=root)
    assert "2 unchanged submissions were not graded again" in changed.stderr
    one_worker = {name: _outcomes(out, name) for name in SAMPLES}

    # Every submission again, on two workers writing the one gradebook: the same verdicts as one worker's.
    forced = run_grade(str(class_folder), "--out", str(out), "--workers", "2", "--force", cwd=root)
    assert "not graded again" not in forced.stderr and "3 graded, 0 unchanged" in forced.stderr
    for name in SAMPLES:
        assert _outcomes(out, name) == one_worker[name], name
    with sqlite3.connect(out / "gradebook.sqlite") as book:
        assert book.execute("SELECT COUNT(*) FROM submissions").fetchone()[0] == 3
        stored = results(out, "solution")  # checks not run here (GPU-only) are listed apart from Gradescope's tests
        assert book.execute("SELECT COUNT(*) FROM checks WHERE submission_id = 'solution'").fetchone()[0] == len(
            stored.tests
        ) + len(stored.extra_data.get("not_run", []))


def test_a_run_killed_mid_way_finishes_the_rest_when_started_again(class_folder: Path, tmp_path: Path, root: Path) -> None:
    """...and the run started again removes the temporary folders of the killed one, which nothing of it could."""
    scratch = Path(tempfile.mkdtemp(prefix="llm-grader-gb-"))  # the runs' temporary folder: short, it holds IPC sockets
    try:
        _killed_and_started_again(class_folder, tmp_path / "out", root, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _killed_and_started_again(class_folder: Path, out: Path, root: Path, scratch: Path) -> None:
    env = {**os.environ, "TMPDIR": str(scratch)}
    command = [sys.executable, "-m", "grader", str(class_folder), "--out", str(out), "--workers", "1", "--seed", str(SEED), "-q"]
    process = subprocess.Popen(
        command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and process.poll() is None:
            if (out / "gradebook.sqlite").exists():
                with contextlib.suppress(sqlite3.OperationalError), sqlite3.connect(out / "gradebook.sqlite") as book:
                    # (the file exists a moment before its tables do)
                    if book.execute("SELECT COUNT(*) FROM submissions").fetchone()[0] >= 1:
                        break
            time.sleep(0.2)
        assert process.poll() is None, "the run finished before it could be killed"
        os.killpg(process.pid, signal.SIGKILL)  # the grader, its kernel and the warm one: no clean-up at all
    finally:
        process.wait(timeout=30)
    with sqlite3.connect(out / "gradebook.sqlite") as book:
        first = {row[0] for row in book.execute("SELECT submission_id FROM submissions")}
    assert 1 <= len(first) < len(SAMPLES)
    (lock,) = scratch.glob("llm-grader-run-*.lock")
    killed = lock.name.removeprefix("llm-grader-run-").removesuffix(".lock")
    # Left behind: such as the kernel template's and the unpacked course's folders, which only the run itself removes. (A
    # kernel's folder may be there too, or already removed by its watcher, which outlives the kill by up to its poll
    # interval: CI saw both.)
    left = sorted(path.name for path in scratch.glob(f"llm-grader-*-{killed}-*"))
    assert left

    resumed = run_grade(str(class_folder), "--out", str(out), "--workers", "1", cwd=root, env={"TMPDIR": str(scratch)})
    assert sorted(path.name for path in scratch.iterdir() if path.name.startswith("llm-grader-")) == []
    assert f"{len(first)} unchanged submission" in resumed.stderr
    with sqlite3.connect(out / "gradebook.sqlite") as book:
        assert sorted(row[0] for row in book.execute("SELECT submission_id FROM submissions")) == sorted(SAMPLES)
    for name in SAMPLES:
        assert results(out, name).tests
    assert results(out, "solution").score == results(out, "solution").max_score
