"""The executor runs real notebooks in real kernels, past errors, timeouts and deaths."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from grader.authoring import make_notebook
from grader.kernel.session import KernelSession
from grader.kernel.supply import KernelSupply
from grader.kernel.workdir import prepare_workdir


def run(tmp_path: Path, *sources: str, cell_timeout_s: float = 3, notebook_timeout_s: float = 60):
    notebook = make_notebook(None, [("code", source) for source in sources])
    with KernelSession(tmp_path, os.environ, interrupt_grace_s=3) as session:
        record = session.cells.run(notebook, cell_timeout_s=cell_timeout_s, notebook_timeout_s=notebook_timeout_s)
        alive = session.alive
    return notebook, record, alive


def test_outputs_are_kept_and_the_kernel_runs_in_the_working_copy(tmp_path: Path) -> None:
    notebook, record, _ = run(
        tmp_path,
        "import os\nprint(os.getcwd())",
        "from IPython.display import Image\nImage(data=b'\\x89PNG\\r\\n\\x1a\\n', format='png')",
    )
    assert record.problems == () and record.cells_run == 2
    assert notebook.cells[0].outputs[0]["text"].strip() == str(tmp_path)
    assert "image/png" in notebook.cells[1].outputs[0]["data"]


def test_stdin_is_off(tmp_path: Path) -> None:
    _, record, _ = run(tmp_path, "input('name? ')", "print('after')")
    assert record.problems[0].kind == "error" and "StdinNotImplementedError" in record.problems[0].message


def test_errors_are_recorded_and_execution_continues(tmp_path: Path) -> None:
    notebook, record, alive = run(tmp_path, "1/0", "def f(:\n  pass", "print('still here')")
    assert [(p.cell_index, p.kind) for p in record.problems] == [(0, "error"), (1, "error")]
    assert record.problems[0].message == "ZeroDivisionError: division by zero"
    assert "SyntaxError" in record.problems[1].message
    assert "ZeroDivisionError" in record.problems[0].traceback and "\x1b[" not in record.problems[0].traceback
    assert notebook.cells[2].outputs[0]["text"] == "still here\n"
    assert alive


def test_a_timed_out_cell_is_interrupted_and_the_next_cells_run(tmp_path: Path) -> None:
    notebook, record, alive = run(tmp_path, "x = 41", "while True:\n    pass", "print(x + 1)")
    assert [(p.cell_index, p.kind) for p in record.problems] == [(1, "timeout")]
    assert notebook.cells[2].outputs[0]["text"] == "42\n"
    assert alive


def test_a_kernel_that_ignores_interrupts_is_stopped(tmp_path: Path) -> None:
    stubborn = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    _, record, alive = run(tmp_path, stubborn, "print('never')")
    assert [p.kind for p in record.problems] == ["timeout", "not-run"]
    assert "ignored the interrupt" in record.problems[1].message
    assert not alive


def test_a_dying_kernel_is_reported(tmp_path: Path) -> None:
    _, record, alive = run(tmp_path, "import os\nos._exit(3)", "print('never')")
    assert [p.kind for p in record.problems] == ["kernel-died", "not-run"]
    assert not alive and not record.kernel_alive


def test_the_whole_notebook_budget_bounds_every_cell(tmp_path: Path) -> None:
    _, record, _ = run(
        tmp_path, "import time\ntime.sleep(2.5)", "time.sleep(10)", "print('late')", cell_timeout_s=30, notebook_timeout_s=4
    )
    kinds = [p.kind for p in record.problems]
    assert kinds == ["timeout", "not-run"]
    assert "remaining time" in record.problems[0].message
    assert record.notebook_timed_out


def test_a_kernel_launched_early_is_the_one_taken_even_without_warm_kernels() -> None:
    """A self-check keeps no kernel warm, but launches its one kernel before loading the reference side: the kernel
    started early is the one taken (no second launch)."""
    supply = KernelSupply(os.environ, warm=False, preload=("json",))
    try:
        supply.prepare_next()
        assert supply._next is None  # not warm: no next kernel
        supply.start_launching()
        early = supply._next
        assert early is not None and early.launched_at is not None
        supply.start_launching()  # one is started: nothing more
        assert supply._next is early
        taken = supply.take()
        assert taken is early and supply._next is None
        with taken:
            assert taken.channel.request("print(6 * 7)", channel="-", timeout_s=10).stdout.strip() == "42"
        taken.close()
        shutil.rmtree(taken.workdir, ignore_errors=True)
    finally:
        supply.close()


def test_the_working_copy_holds_only_the_notebook_and_given_files(tmp_path: Path) -> None:
    notebook = tmp_path / "student.ipynb"
    notebook.write_text("{}")
    data = tmp_path / "prompts.txt"
    data.write_text("hello")
    workdir = prepare_workdir(notebook, [data], parent=tmp_path)
    assert sorted(p.name for p in workdir.iterdir()) == ["prompts.txt", "student.ipynb"]


def test_a_warm_kernel_is_preloaded_clean_and_serves_one_submission(tmp_path: Path) -> None:
    supply = KernelSupply(os.environ, warm=True, preload=("json", "email.mime.text"))
    taken: list[KernelSession] = []
    try:
        first = supply.take()
        supply.prepare_next()  # launches the next one at once
        second = supply.take()
        taken += [first, second]
        assert first is not second and first.workdir != second.workdir
        third = supply.take()
        taken.append(third)
        assert third is not second  # never handed out twice
        third.close()
        (second.workdir / "data.txt").write_text("given after the launch")
        notebook = make_notebook(
            None,
            [("code", "import sys, os\nloaded = 'email.mime.text' in sys.modules\nnames = sorted(dir())\nfiles = os.listdir()")],
        )
        with second:
            record = second.cells.run(notebook, cell_timeout_s=10, notebook_timeout_s=30)
            assert record.problems == ()
            reply = second.channel.request("print(loaded, 'email' in names, 'json' in names, files)", channel="-", timeout_s=10)
        assert reply.stdout.strip() == "True False False ['data.txt']"
    finally:
        for session in taken:
            session.close()
            shutil.rmtree(session.workdir, ignore_errors=True)  # as the grader removes a submission's
        supply.close()
