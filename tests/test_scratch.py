"""A run's temporary folders: named after the run, swept by a later run once the run is dead, never before.

Real processes hold real locks; the runs here are small Python processes that do what `grade` does at its start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import scratch

RUN = """
import json, os, sys, time
from grader import scratch
scratch.start_run()
folders = [str(scratch.mkdtemp(kind)) for kind in ("kernel", "work")]
(__import__("pathlib").Path(folders[1]) / "notebook.ipynb").write_text("{}")
print(json.dumps({"run": scratch.run_id(), "folders": folders}), flush=True)
if sys.argv[1] == "exit":
    sys.exit(0)  # a normal end: atexit hooks run
if sys.argv[1] == "crash":
    os._exit(1)  # no clean-up at all, as kill -9
time.sleep(600)
"""


@pytest.fixture
def tmp() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="llm-grader-scratch-test-"))
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=False)


def start(tmp: Path, how: str) -> tuple[subprocess.Popen[str], dict]:
    env = {name: value for name, value in os.environ.items() if name != scratch.RUN_ENV}
    process = subprocess.Popen(
        [sys.executable, "-c", RUN, how], env={**env, "TMPDIR": str(tmp)}, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    seen = json.loads(process.stdout.readline())
    if how != "sleep":
        process.wait()  # ended: its lock is free
        process.stdout.close()
    return process, seen


def names(tmp: Path) -> list[str]:
    return sorted(path.name for path in tmp.iterdir())


def test_a_killed_runs_folders_are_swept_and_a_live_runs_are_not(tmp: Path) -> None:
    alive, live = start(tmp, "sleep")
    try:
        _, dead = start(tmp, "crash")
        assert live["run"] != dead["run"] and len(live["run"]) == 8
        assert all(
            Path(folder).name.startswith(f"llm-grader-{kind}-{dead['run']}-")
            for kind, folder in zip(("kernel", "work"), dead["folders"], strict=True)
        )
        swept = scratch.sweep(tmp)
        assert sorted(swept) == sorted(Path(folder).name for folder in dead["folders"])
        assert names(tmp) == sorted([f"llm-grader-run-{live['run']}.lock", *(Path(folder).name for folder in live["folders"])])
        assert scratch.sweep(tmp) == []  # the live run keeps everything
    finally:
        alive.send_signal(signal.SIGKILL)
        alive.wait()
    assert sorted(scratch.sweep(tmp)) == sorted(Path(folder).name for folder in live["folders"])
    assert names(tmp) == []


def test_a_run_that_ends_normally_leaves_no_lock(tmp: Path) -> None:
    process, seen = start(tmp, "exit")
    assert process.wait() == 0
    assert names(tmp) == sorted(Path(folder).name for folder in seen["folders"])  # the run's own code removes these


def test_the_next_run_sweeps_at_its_start_and_a_run_inside_a_run_does_not_start_another(tmp: Path) -> None:
    _, dead = start(tmp, "crash")
    script = (
        "import json, os\nfrom grader import scratch\n"
        "first = scratch.start_run(); run = scratch.run_id(); again = scratch.start_run()\n"
        "print(json.dumps([first, again, run == scratch.run_id()]))"
    )
    env = {name: value for name, value in os.environ.items() if name != scratch.RUN_ENV}
    done = subprocess.run(
        [sys.executable, "-c", script], env={**env, "TMPDIR": str(tmp)}, capture_output=True, text=True, check=True
    )
    first, again, same = json.loads(done.stdout)
    assert sorted(first) == sorted(Path(folder).name for folder in dead["folders"])
    assert again == [] and same
    assert names(tmp) == []


def test_a_sweep_follows_no_link_and_leaves_folders_made_outside_a_run(tmp: Path) -> None:
    _, dead = start(tmp, "crash")
    precious = tmp / "precious"
    precious.mkdir()
    (precious / "grades.csv").write_text("keep me")
    (tmp / f"llm-grader-work-{dead['run']}-link").symlink_to(precious)
    outside = tmp / "llm-grader-work-abcdefgh"  # the library used directly: no run's id in the name
    outside.mkdir()
    scratch.sweep(tmp)
    assert (precious / "grades.csv").read_text() == "keep me"
    assert (tmp / f"llm-grader-work-{dead['run']}-link").is_symlink() and outside.is_dir()
    assert not any(Path(folder).exists() for folder in dead["folders"])
