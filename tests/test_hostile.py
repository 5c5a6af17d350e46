"""The hostile corpus, graded in one `grade` run next to a good submission.

Every submission gets a result with a clear message, none gets points it did not earn, none
changes another's result or any file outside its sandbox (the course, the submissions, the
model zoo, the grader's package), no process of a kernel outlives the run, and the grader exits
normally. The run uses a copy of the course whose ptq-bnb rubric has small limits.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import psutil
import pytest

from grader.authoring import make_notebook, write_notebook
from grader.kernel.sandbox import KERNEL_UID_BASE
from grader.zoo import ModelZoo
from tests.contract import run_grade
from tests.hostile import HOSTILE_MARKER, Attack, Targets, write_corpus

ENV_SECRET = "grader-env-secret-7f3a9c"
CONTROL_SECRET = "control-secret-51d2e8"
# A constant of the course's solution notebook: the reference side the grader loads holds it (grader/grading/reference.py).
REFERENCE_SECRET = "reference-secret-0c94b1"
LIMITS = "limits:\n  cell_timeout_s: 180\n  notebook_timeout_s: 900\n  call_timeout_s: 60\n"
SMALL_LIMITS = (
    "limits:\n  cell_timeout_s: 30\n  notebook_timeout_s: 120\n  call_timeout_s: 30\n  memory_mib: 1536\n"
    "  max_processes: 128\n  max_file_mib: 16\n  max_output_kib: 64\n  max_notebook_mib: 2\n"
)


def digests(*folders: Path) -> dict[str, str]:
    """The SHA-256 of every file under ``folders`` (links not followed)."""
    found = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts:
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def kernel_processes() -> list[psutil.Process]:
    """Processes running as a kernel's own user that no live grader owns any more.

    Kernels of other tests, graded at the same time by the other pytest worker, descend from a
    grader process (not a kernel's user, not init); what the corpus left behind does not.
    """
    found = []
    for process in psutil.process_iter(["uids", "status"]):
        uids = process.info["uids"]
        if uids is None or uids.real < KERNEL_UID_BASE or process.info["status"] == psutil.STATUS_ZOMBIE:
            continue  # a zombie has ended (it waits for init to reap it), as in test_sandbox's kill -9 test
        with contextlib.suppress(psutil.Error):
            owners = [parent for parent in process.parents() if parent.pid != 1 and parent.uids().real < KERNEL_UID_BASE]
            if not owners:
                found.append(process)
    return found


class PeakMemory:
    """The largest RSS any of the grader's own processes (not a kernel, not a launcher) reached
    while it ran, sampled every 0.2 s."""

    def __init__(self) -> None:
        self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.wait(0.2):
            for process in me.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    command = " ".join(process.cmdline())
                    if process.uids().real >= KERNEL_UID_BASE or "launcher" in command or "ipykernel" in command:
                        continue
                    self.bytes = max(self.bytes, process.memory_info().rss)


@pytest.fixture(scope="module")
def run(root: Path, ptq_sources: Any, zoo: ModelZoo) -> Iterator[dict[str, Any]]:
    """Write the corpus and the control, grade them in one run, and record what changed.

    Everything lies in a folder anyone may read (pytest's own is private to its user), so
    that only the sandbox keeps the kernels from the course, the output and each other.
    """
    base = Path(tempfile.mkdtemp(prefix="llm-grader-hostile-"))
    base.chmod(0o755)
    try:
        yield _grade_corpus(base, root, ptq_sources, zoo)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _grade_corpus(base: Path, root: Path, ptq_sources: Any, zoo: ModelZoo) -> dict[str, Any]:
    course = base / "course"
    # ptq-bnb alone, so that its small limits are the largest any assignment asks for.
    shutil.copytree(root / "assignments" / "ptq-bnb", course / "assignments" / "ptq-bnb")
    rubric = course / "assignments" / "ptq-bnb" / "rubric.yaml"
    assert LIMITS in rubric.read_text()
    rubric.write_text(rubric.read_text().replace(LIMITS, SMALL_LIMITS))
    solution_path = course / "assignments" / "ptq-bnb" / "solution.ipynb"
    with_secret = nbformat.read(solution_path, as_version=4)
    with_secret.cells.append(nbformat.v4.new_code_cell(f"REFERENCE_SECRET = {REFERENCE_SECRET!r}"))
    nbformat.write(with_secret, solution_path)
    folder = base / "submissions"
    folder.mkdir()
    out = base / "out"
    out.mkdir()
    solution = ptq_sources.solution_cells()
    control = folder / "control.ipynb"
    write_notebook(control, make_notebook("ptq-bnb", [*solution, ("code", f"# {CONTROL_SECRET}")]))
    scratch = base / "tmp"  # the grader's temporary folder, next to everything the kernels must not see
    scratch.mkdir()
    targets = Targets(out, course, control, CONTROL_SECRET, ENV_SECRET, source=root, scratch=scratch)
    corpus = write_corpus(folder, targets, solution)
    watched = (course, folder, zoo.root, root / "grader")  # this zoo only: others share the cache folder
    before = digests(*watched)
    with PeakMemory() as peak:
        completed = run_grade(
            str(folder),
            "--out",
            str(out),
            "--course",
            str(course),
            "--workers",
            "2",
            env={"GRADER_TEST_SECRET": ENV_SECRET, "TMPDIR": str(scratch)},
            check=False,  # the exit status is a test of its own
        )
    return {
        "peak_bytes": peak.bytes,
        # The kernels' folders (the grader's own torch may keep a compile cache there).
        "scratch_left": sorted(path.name for path in scratch.glob("llm-grader-*")),
        "markers_left": [str(path) for folder in (Path("/tmp"), Path("/dev/shm")) for path in folder.glob(f"{HOSTILE_MARKER}*")],
        "completed": completed,
        "out": out,
        "corpus": corpus,
        "changed": {path for path, digest in digests(*watched).items() if before.get(path) != digest},
        "leftovers": kernel_processes(),
        "reference": REFERENCE_SECRET,
        "rubric": rubric.read_text(),
    }


def results(run: dict[str, Any], name: str) -> dict[str, Any]:
    return json.loads((run["out"] / name / "results.json").read_text())


def everything_said(result: dict[str, Any]) -> str:
    """The result's error, cell problems and check messages, as one text."""
    extra = result["extra_data"]
    parts = [result.get("output", ""), str(extra.get("error") or "")]
    parts += [problem["message"] + "\n" + problem.get("traceback", "") for problem in extra.get("cell_problems", [])]
    parts += [test["output"] for test in result["tests"]]
    return "\n".join(parts)


def test_the_grader_exits_normally_and_grades_every_submission(run: dict[str, Any]) -> None:
    completed = run["completed"]
    assert completed.returncode == 0, completed.stderr[-3000:]
    corpus: list[Attack] = run["corpus"]
    assert len(corpus) >= 25
    graded = {path.parent.name for path in run["out"].glob("*/results.json")}
    assert graded == {attack.name for attack in corpus} | {"control"}


def test_the_control_keeps_full_marks(run: dict[str, Any]) -> None:
    control = results(run, "control")
    lost = {test["name"]: test["output"][:600] for test in control["tests"] if test["score"] < test["max_score"]}
    lost["cell problems"] = [problem["message"] for problem in control["extra_data"].get("cell_problems", [])]
    assert control["score"] == 25 and control["extra_data"]["error"] is None, lost
    assert "ran as its own unprivileged user" in " ".join(control["extra_data"]["notes"])


def test_no_attack_gets_points_it_did_not_earn(run: dict[str, Any]) -> None:
    for attack in run["corpus"]:
        result = results(run, attack.name)
        if attack.solution_based:
            assert result["score"] == 25, attack.name  # earned by its solution cells
        elif attack.name == "hard-coded-answers":
            lost = {test["extra_data"]["check_id"] for test in result["tests"] if test["score"] < test["max_score"]}
            assert {"memory-int8", "memory-nf4"} <= lost  # hidden inputs: another model, another answer
        else:
            assert result["score"] == 0, (attack.name, result["score"])


def test_every_result_says_what_happened(run: dict[str, Any]) -> None:
    for attack in run["corpus"]:
        result = results(run, attack.name)
        said = everything_said(result)
        assert "internal grader error" not in said, (attack.name, said[-2000:])
        for words in attack.words:
            assert words in said, (attack.name, words, said[-2000:])


def test_nothing_secret_reaches_any_result(run: dict[str, Any]) -> None:
    reference_line = run["reference"]
    rubric_line = next(line for line in run["rubric"].splitlines() if line.startswith("#"))
    for attack in run["corpus"]:
        folder = run["out"] / attack.name
        text = "\n".join(path.read_text(errors="replace") for path in folder.iterdir())
        for secret in (ENV_SECRET, "GRADER_TEST_SECRET", CONTROL_SECRET, reference_line, rubric_line):
            assert secret not in text, (attack.name, secret)


def test_no_file_outside_the_sandboxes_changed_and_no_process_is_left(run: dict[str, Any]) -> None:
    assert run["changed"] == set()
    assert not (run["out"] / "late.txt").exists()
    for name in ("write-results", "control"):
        assert results(run, name)["tests"], name  # the grader's own results, not the forged ones
    assert run["leftovers"] == []


def test_huge_outputs_are_cut_and_bad_links_are_not_followed(run: dict[str, Any]) -> None:
    page = run["out"] / "huge-print" / "feedback-instructor.html"
    assert page.stat().st_size < 1024**2
    assert "link-to-solution" not in {path.parent.name for path in run["out"].glob("*/results.json")}
    assert "outside" in (run["out"] / "summary.html").read_text()


def test_nothing_is_left_in_tmp_or_dev_shm(run: dict[str, Any]) -> None:
    """Each kernel had /tmp and /dev/shm of its own, gone with it; its folders were removed."""
    assert run["markers_left"] == []
    assert run["scratch_left"] == []


def test_no_kernel_sees_the_graders_command_line(run: dict[str, Any]) -> None:
    said = everything_said(results(run, "read-cmdlines"))
    assert "ipykernel_launcher" in said or "grader.kernel.template" in said  # it read its own (launched or forked)
    for secret in ("--seed", str(run["out"]), "multiprocessing"):
        assert secret not in said, secret


def test_the_graders_memory_stays_bounded(run: dict[str, Any]) -> None:
    """An 8 MB answer, a 40 MB print and a gigabyte of /dev/shm cost the grader's processes little."""
    assert 0 < run["peak_bytes"] < 1.5 * 1024**3, run["peak_bytes"] / 1024**2
