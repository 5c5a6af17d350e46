"""The sandbox's parts, one at a time: what is hidden, what a kernel may keep, the limits.

The whole of it, against real attacks, is in ``test_hostile.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner

from grader.authoring import make_notebook, write_notebook
from grader.cli import main as cli_main
from grader.discover.submissions import Found
from grader.errors import RubricError
from grader.grading.course import Course
from grader.grading.grader import Grader
from grader.grading.kernels import kernel_view_for
from grader.grading.rubric import Limits
from grader.grading.settings import GradingSettings
from grader.kernel import sandbox as sandbox_module
from grader.kernel.sandbox import (
    Isolation,
    ResourceWatch,
    SandboxError,
    SandboxPolicy,
    kernel_env,
    kernel_processes,
    kernel_view,
    launcher_argv,
    python_paths,
)
from grader.kernel.session import KernelSession
from grader.scale.batch import _hidden_from_kernels
from grader.zoo import ModelZoo
from tests.conftest import ROOT
from tests.contract import run_grade


def test_a_kernel_sees_an_allow_list_and_nothing_of_the_course(tmp_path: Path) -> None:
    course = tmp_path / "course"
    (course / "assignments" / "ptq-bnb").mkdir(parents=True)
    view = kernel_view_for(course, (str(tmp_path / "out"),))
    shown = [Path(path) for path in view.visible]
    python = python_paths()
    for secret in (course, ROOT, ROOT / "submissions", ROOT / ".git", tmp_path / "out", Path.home(), Path("/tmp")):
        assert not any(path == secret or path in secret.parents for path in shown), secret  # nothing shown holds it
        # Only the Python environment may lie inside one (a virtual environment in the checkout, pyenv in a home).
        assert all(path in python for path in shown if secret in path.parents), secret
    assert view.masks == ()  # the grader's package is nowhere in what is shown


def test_a_folder_that_cannot_be_hidden_is_refused_not_dropped() -> None:
    for folder in (Path("/"), Path("/usr"), Path(sys.prefix)):
        with pytest.raises(SandboxError, match="cannot be hidden from the students' kernels"):
            kernel_view([folder])


def test_every_submission_folder_stays_hidden_however_many(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """40 folders whose common parent holds the grader's temporary folder: none is dropped."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)
    found = []
    for number in range(40):
        path = tmp_path / f"student{number}" / "latency.ipynb"
        path.parent.mkdir()
        found.append(Found(f"student{number}", path, student=f"student{number}"))
    hidden = _hidden_from_kernels(found, tmp_path / "out")
    assert len(hidden) == 41
    view = kernel_view_for(ROOT, hidden)
    assert not any(tmp_path in Path(path).parents or Path(path) in tmp_path.parents for path in view.visible)


def test_the_kernel_environment_is_an_allow_list() -> None:
    env = kernel_env({"PATH": "/bin", "AWS_SECRET_ACCESS_KEY": "x", "GRADER_TOKEN": "y"}, {"HF_HUB_OFFLINE": "1"})
    assert env == {"PATH": "/bin", "HF_HUB_OFFLINE": "1"}


def test_limits_have_safe_defaults_and_refuse_nonsense() -> None:
    limits = Limits()
    assert (limits.memory_mib, limits.max_processes, limits.max_output_kib, limits.max_notebook_mib) == (4096, 256, 4096, 50)
    with pytest.raises(ValueError, match="greater than or equal to 256"):
        Limits(memory_mib=16)


def test_a_rubric_with_an_unknown_limit_names_it(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "assignments" / "ptq-bnb", tmp_path / "assignments" / "ptq-bnb")
    rubric = tmp_path / "assignments" / "ptq-bnb" / "rubric.yaml"
    rubric.write_text(rubric.read_text().replace("limits:\n", "limits:\n  memory_gb: 4\n"))
    with pytest.raises(RubricError, match=r"limits\.memory_gb: unknown key"):
        Course(tmp_path).assignment("ptq-bnb")


LAUNCHED_CHECK = """
import os, socket, sys
assert not os.path.exists(sys.argv[1]), "the hidden folder is visible"
assert not os.path.exists(sys.argv[2]), "the grader's source is visible"
assert os.listdir("/tmp") == [os.path.basename(sys.argv[3])] and os.listdir("/dev/shm") == [], "shared scratch is visible"
assert [name for name in os.listdir("/proc") if name.isdigit()] == ["1"], "other processes are visible"
try:
    import grader
    raise AssertionError("the grader's package can be imported")
except ImportError:
    pass
open("/dev/shm/left-behind", "w").write("x")
try:
    socket.create_connection(("1.1.1.1", 443), timeout=5)
except OSError as error:
    print(error.strerror)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="creating namespaces in both ways is only sure to work as root")
@pytest.mark.parametrize("namespaces", ["root", "user"])
def test_the_launcher_builds_an_allow_listed_root_and_cuts_the_network(tmp_path: Path, namespaces: str) -> None:
    secret = tmp_path / "reference"
    secret.mkdir()
    (secret / "reference.py").write_text("ANSWER = 42")
    session = Path(tempfile.mkdtemp(prefix="llm-grader-test-"))
    (session / "root").mkdir()
    view = kernel_view_for(tmp_path)
    policy = SandboxPolicy(Isolation(namespaces, False), visible=view.visible, masks=view.masks).launcher_policy(
        None, give=[], zoo_view=None, new_root=str(session / "root"), writable=[str(session)]
    )
    try:
        command = [sys.executable, "-c", LAUNCHED_CHECK, str(secret), str(ROOT / "grader"), str(session)]
        completed = subprocess.run(launcher_argv(policy, command), capture_output=True, text=True, timeout=60, cwd=session)
    finally:
        shutil.rmtree(session)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "Network is unreachable"
    assert (secret / "reference.py").read_text() == "ANSWER = 42"  # hidden from it, not from the grader
    assert not Path("/dev/shm/left-behind").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="the strongest isolation needs root")
def test_as_root_each_kernel_gets_a_user_of_its_own(grader: Grader) -> None:
    isolation = grader.sandbox.isolation  # probed with the policy's hidden home, where this Python may live
    assert (isolation.namespaces, isolation.own_user, isolation.warning) == ("root", True, "")
    assert not any(
        ROOT in Path(path).parents or Path(path) in ROOT.parents for path in grader.sandbox.visible if path != str(ROOT / ".venv")
    )


def test_the_machines_tmp_is_not_counted_as_a_kernels_memory() -> None:
    """Until the kernel has entered its own root (a launcher still building it), its /tmp is the
    machine's: counting that would stop a kernel for memory it does not use."""
    shell = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    try:
        time.sleep(0.5)
        processes = {process.pid: process for process in kernel_processes(shell.pid)}
        assert len(processes) == 2
        assert ResourceWatch(shell.pid, None, 1024**3, scratch=True)._scratch_bytes(processes) == 0
    finally:
        for process in psutil.Process(shell.pid).children():
            process.kill()
        shell.kill()
        shell.wait()


def test_huge_outputs_are_cut_to_the_budget(tmp_path: Path) -> None:
    cells = [("code", "for i in range(50_000):\n    print('spam ' * 20)"), ("code", "print('after')\n1 / 0")]
    with KernelSession(tmp_path, dict(os.environ)) as session:
        record = session.cells.run(make_notebook(None, cells), 60, 120, max_output_bytes=16 * 1024)
    first, second = record.notebook.cells
    kept = "".join(output.get("text", "") for output in first.outputs)
    assert len(kept) < 17 * 1024 and "output truncated by the grader" in kept
    assert [problem.message for problem in record.problems] == ["ZeroDivisionError: division by zero"]  # errors stay
    assert [output.output_type for output in second.outputs] == ["error"]


def test_without_namespaces_every_result_carries_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, course: Course, zoo: ModelZoo
) -> None:
    monkeypatch.setenv("GRADER_NO_SANDBOX", "1")
    path = tmp_path / "tiny.ipynb"
    write_notebook(path, make_notebook("ptq-bnb", [("code", "x = 1")]))
    with Grader(course, zoo, GradingSettings(seed=1, kernel_threads=1, warm_kernels=False)) as grader:
        result = grader.grade(path, "tiny")
    assert result.error is None
    assert any(note.startswith("Sandbox warning: GRADER_NO_SANDBOX is set") for note in result.notes)


def test_grading_without_the_sandbox_is_asked_by_name_and_said_in_every_result_and_on_top_of_the_run(
    tmp_path: Path, zoo: ModelZoo
) -> None:
    """`--no-sandbox`: not only inside each result, the terminal (in red, counted) and the class dashboard (in red,
    with the protections this run had) say it."""
    for name in ("a", "b"):
        write_notebook(tmp_path / "in" / f"{name}.ipynb", make_notebook("ptq-bnb", [("code", "x = 1")]))
    completed = run_grade(
        str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--workers", "1", "--no-sandbox", env={"COLUMNS": "300"}
    )
    notice = "warning: Sandbox warning: --no-sandbox was given: kernels run with the grader's user, files and network. (2 submissions graded so)"
    assert notice in " ".join((completed.stdout + completed.stderr).split())
    for name in ("a", "b"):
        extra = json.loads((tmp_path / "out" / name / "results.json").read_text())["extra_data"]
        assert extra["sandbox"] == "none" and extra["sandbox_warning"].startswith("--no-sandbox was given"), extra
    summary = (tmp_path / "out" / "summary.html").read_text()
    assert 'class="banner error unprotected"' in summary and "--no-sandbox was given" in summary
    assert '<tr class="isolation-none"><td>not sandboxed</td><td class="num">2</td>' in summary


def test_a_sandbox_that_cannot_start_stops_the_run_before_grading_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, zoo: ModelZoo
) -> None:
    """Every launch is given a bind source that does not exist (as a Python environment under /tmp, covered by the
    kernels' private /tmp, once was): the trial launches fail for real, and the run stops with what failed and how
    to fix it, grading nothing; it never falls back to running the notebooks unprotected."""
    real = sandbox_module.launcher_argv

    def missing_source(policy: Mapping[str, object], command: list[str]) -> list[str]:
        return real({**policy, "bind_read_only": [["/nonexistent-grader-bind-source", "/opt/missing"]]}, command)

    monkeypatch.setattr(sandbox_module, "launcher_argv", missing_source)
    monkeypatch.setenv("COLUMNS", "300")
    write_notebook(tmp_path / "in" / "a.ipynb", make_notebook("ptq-bnb", [("code", "x = 1")]))
    invoked = CliRunner().invoke(cli_main, [str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--workers", "1"])
    said = " ".join(invoked.output.split())
    assert invoked.exit_code == SandboxError.exit_code, said
    assert "error: The sandbox cannot start on this machine, so nothing was graded" in said
    assert "/nonexistent-grader-bind-source" in said and "grade --no-sandbox" in said
    assert not list((tmp_path / "out").glob("*/results.json"))
    # Gradescope's per-submission container may lack the capability: there it grades unsandboxed, and says so.
    isolation = sandbox_module.probe_isolation(str(zoo.cache_dir), required=False)
    assert isolation.mode == "none" and "could not start" in isolation.warning


def test_a_run_killed_with_kill_9_leaves_no_process_behind(tmp_path: Path) -> None:
    """Workers, launchers and kernels all die with the run, however it ends, within 15 s."""
    for name in ("a", "b", "c"):
        cells = [("code", "import time\nfor _ in range(600):\n    time.sleep(0.5)")]
        write_notebook(tmp_path / "in" / f"{name}.ipynb", make_notebook("ptq-bnb", cells))
    scratch = Path(tempfile.mkdtemp(prefix="llm-grader-k9-"))  # short: it holds the kernels' IPC sockets
    command = [sys.executable, "-m", "grader", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--workers", "2"]
    log = tmp_path / "grade.log"
    with log.open("w") as output:
        grade = subprocess.Popen(command, env={**os.environ, "TMPDIR": str(scratch)}, stdout=output, stderr=output)
    try:
        deadline = time.monotonic() + 300
        processes: list[psutil.Process] = []
        while time.monotonic() < deadline:  # until both workers run a notebook's kernel
            processes = psutil.Process(grade.pid).children(recursive=True)
            kernels = [process for process in processes if "ipykernel_launcher" in " ".join(_cmdline(process))]
            if len(kernels) >= 2:
                break
            time.sleep(1)
        assert len(processes) >= 4, (grade.poll(), log.read_text()[-3000:])
        time.sleep(10)  # the notebooks are running
        processes = psutil.Process(grade.pid).children(recursive=True)
    finally:
        grade.kill()
        grade.wait()
    time.sleep(15)
    alive = [_cmdline(process) for process in processes if process.is_running() and process.status() != psutil.STATUS_ZOMBIE]
    # (The main process's own folder for unpacked archives cannot go with a kill -9 of it.)
    left = [
        path.name
        for path in scratch.iterdir()
        if path.name.startswith(("llm-grader-kernel-", "llm-grader-work-", "llm-grader-template-"))
    ]
    shutil.rmtree(scratch, ignore_errors=True)
    assert alive == []
    assert left == []  # the kernels' folders went with them


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def test_a_grader_installed_with_pip_target_hands_its_import_path_to_sandboxed_kernels_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `pip install --target DIR` + PYTHONPATH=DIR (as on a GPU machine whose image lacks the grader's packages): the
    # sandboxed kernel runs the same Python and needs DIR (ipykernel); without it every kernel died before it replied.
    from grader.grading.kernels import kernel_environment
    from grader.grading.settings import GradingSettings
    from grader.kernel.launcher import keep_visible_import_path

    site, hidden = tmp_path / "site", tmp_path / "checkout"
    site.mkdir()
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{hidden}{os.pathsep}")
    assert kernel_environment(None, GradingSettings(sandbox=True))["PYTHONPATH"] == os.environ["PYTHONPATH"]
    assert "PYTHONPATH" not in kernel_environment(None, GradingSettings(sandbox=False))  # a self-check's own Python
    keep_visible_import_path()  # in the kernel, after its new root: the hidden checkout is not even named
    assert os.environ["PYTHONPATH"] == str(site)
    monkeypatch.setenv("PYTHONPATH", str(hidden))
    keep_visible_import_path()
    assert "PYTHONPATH" not in os.environ
