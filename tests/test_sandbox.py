"""The sandbox's parts, one at a time: what is hidden, what a kernel may keep, the limits.

The whole of it, against real attacks, is in ``test_hostile.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.authoring import make_notebook, write_notebook
from grader.checks import load_registry
from grader.course import Course
from grader.errors import RubricError
from grader.execute import KernelSession
from grader.grading import Grader, GradingSettings
from grader.harness import Harness, literal
from grader.rubric import Limits
from grader.sandbox import hideable, inside, kernel_env, launcher_argv
from grader.zoo import ModelZoo
from tests.conftest import ROOT
from tests.contract import run_grade


def test_hidden_paths_spare_the_kernels_temporary_folder_and_nest_once(tmp_path: Path) -> None:
    (tmp_path / "course" / "reference").mkdir(parents=True)
    (tmp_path / "out").mkdir()
    hidden = hideable(
        [tmp_path / "course", tmp_path / "course" / "reference", tmp_path / "out", tmp_path / "missing", tmp_path.parent],
        writable=[tmp_path / "out" / "work"],
    )
    assert hidden == (str((tmp_path / "course").resolve()),)  # out holds a writable folder; the rest is inside


def test_the_kernels_python_stays_visible_inside_a_hidden_home(tmp_path: Path) -> None:
    python = tmp_path / "home" / ".pyenv" / "versions" / "3.11"
    python.mkdir(parents=True)
    assert inside([python, tmp_path / "elsewhere"], [str(tmp_path / "home")]) == (str(python.resolve()),)


def test_the_kernel_environment_is_an_allow_list() -> None:
    env = kernel_env({"PATH": "/bin", "AWS_SECRET_ACCESS_KEY": "x", "GRADER_TOKEN": "y"}, {"HF_HUB_OFFLINE": "1"})
    assert env == {"PATH": "/bin", "HF_HUB_OFFLINE": "1"}


def test_limits_have_safe_defaults_and_refuse_nonsense() -> None:
    limits = Limits()
    assert (limits.memory_mib, limits.max_processes, limits.max_output_kib, limits.max_notebook_mib) == (4096, 256, 4096, 50)
    with pytest.raises(ValueError, match="greater than or equal to 256"):
        Limits(memory_mib=16)


def test_a_rubric_with_an_unknown_limit_names_it(tmp_path: Path) -> None:
    rubric = (ROOT / "rubrics" / "ptq-bnb.yaml").read_text().replace("limits:\n", "limits:\n  memory_gb: 4\n")
    (tmp_path / "rubrics").mkdir()
    (tmp_path / "rubrics" / "ptq-bnb.yaml").write_text(rubric)
    with pytest.raises(RubricError, match=r"limits\.memory_gb: unknown key"):
        Course(tmp_path, load_registry()).assignment("ptq-bnb")


LAUNCHED_CHECK = """
import os, socket, sys
assert os.listdir(sys.argv[1]) == [], "the hidden folder is visible"
try:
    socket.create_connection(("1.1.1.1", 443), timeout=5)
except OSError as error:
    print(error.strerror)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="creating namespaces in both ways is only sure to work as root")
@pytest.mark.parametrize("namespaces", ["root", "user"])
def test_the_launcher_hides_paths_and_cuts_the_network(tmp_path: Path, namespaces: str) -> None:
    secret = tmp_path / "reference"
    secret.mkdir()
    (secret / "reference.py").write_text("ANSWER = 42")
    policy = {"namespaces": namespaces, "hidden": [str(secret)], "max_file_bytes": 1024**2}
    completed = subprocess.run(
        launcher_argv(policy, [sys.executable, "-c", LAUNCHED_CHECK, str(secret)]), capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "Network is unreachable"
    assert (secret / "reference.py").read_text() == "ANSWER = 42"  # hidden from it, not from the grader


@pytest.mark.skipif(os.geteuid() != 0, reason="the strongest isolation needs root")
def test_as_root_each_kernel_gets_a_user_of_its_own(grader: Grader) -> None:
    isolation = grader.sandbox.isolation  # probed with the policy's hidden home, where this Python may live
    assert (isolation.namespaces, isolation.own_user, isolation.warning) == ("root", True, "")
    assert str(ROOT / "reference") in grader.sandbox.hidden and str(ROOT / "rubrics") in grader.sandbox.hidden


def test_huge_outputs_are_cut_to_the_budget(tmp_path: Path) -> None:
    cells = [("code", "for i in range(50_000):\n    print('spam ' * 20)"), ("code", "print('after')\n1 / 0")]
    with KernelSession(tmp_path, dict(os.environ)) as session:
        record = session.run_notebook(make_notebook(None, cells), 60, 120, max_output_bytes=16 * 1024)
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


def test_a_forged_runtime_answer_is_caught_by_the_graders_clock(tmp_path: Path, zoo: ModelZoo) -> None:
    forge = (
        "import sys, json\n"
        "from IPython.display import publish_display_data\n"
        "def forged(request_text):\n"
        "    request = json.loads(request_text)\n"
        "    answer = {'status': 'returned', 'value': {'kind': 'float', 'value': 0.5}, 'duration_s': 0.5,\n"
        "              'events': [{'type': 'generate', 'duration_s': 30.0, 'paced_s': 0.25}]}\n"
        "    publish_display_data({request['channel']: json.dumps(answer)})\n"
        "def timed(model, tokenizer, prompt):\n"
        "    return 0.5\n"
        "runtime = next(module for name, module in sys.modules.items() if name.startswith('_llm_grader_runtime_'))\n"
        "runtime.run = forged"
    )
    with KernelSession(tmp_path, {**os.environ, **zoo.kernel_env()}) as session:
        kernel = Harness(session, call_timeout_s=30)
        assert kernel.install().ok
        assert session.run_notebook(make_notebook(None, [("code", forge)]), 60, 120).problems == ()
        outcome = kernel.call("timed", [literal(1)], pace_s=0.25)
    assert outcome.status == "internal"
    assert "the grader's own clock rules out (the call took 0.500 s in a request of" in outcome.message
    assert outcome.message.endswith("the grader's runtime in the kernel was tampered with")


def test_a_weaker_sandbox_is_told_once_on_top_of_the_run(tmp_path: Path, zoo: ModelZoo) -> None:
    """Not only inside each result: the terminal and the class dashboard say it, with a count."""
    for name in ("a", "b"):
        write_notebook(tmp_path / "in" / f"{name}.ipynb", make_notebook("ptq-bnb", [("code", "x = 1")]))
    completed = run_grade(
        str(tmp_path / "in"),
        "--out",
        str(tmp_path / "out"),
        "--workers",
        "1",
        env={"GRADER_NO_SANDBOX": "1", "COLUMNS": "300"},
    )
    notice = "Sandbox warning: GRADER_NO_SANDBOX is set: kernels run with the grader's user, files and network. (2 submissions graded so)"
    assert notice in " ".join((completed.stdout + completed.stderr).split())
    assert "GRADER_NO_SANDBOX is set" in (tmp_path / "out" / "summary.html").read_text()
