"""Kernels forked from a pre-imported template: the same kernel as a launched one, for less CPU.

Real kernels, forked by a real template inside the grader's sandbox; nothing is mocked.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from queue import Empty

import psutil
import pytest

from grader.authoring import make_notebook
from grader.grading.grader import Grader
from grader.kernel.client import ReadyKernelClient
from grader.kernel.sandbox import WARNING_PREFIX, sandbox_notices
from grader.kernel.session import KernelSession
from grader.kernel.supply import KernelSupply
from grader.kernel.templates import TemplateAddress, start_template
from grader.reports.results import SubmissionResult

PROBE = """
import getpass, json, os, random, sys, threading, time, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained("gpt2")
model = AutoModelForCausalLM.from_pretrained("gpt2").eval()
ids = model.generate(**tokenizer("The cat sat", return_tensors="pt"), max_new_tokens=8, do_sample=False)[0].tolist()
a = torch.randn(1500, 1500)
for _ in range(6):
    a @ a
print(json.dumps({
    "threads": torch.get_num_threads(),
    "os_threads": len(os.listdir("/proc/self/task")),
    "generated": ids,
    "grader_modules": sorted(name for name in sys.modules if name == "grader" or name.startswith("grader.")),
    "cwd": os.getcwd(),
    "path0": sys.path[0],
    "hub": os.environ.get("HF_HUB_CACHE"),
    "hub_exists": os.path.isdir(os.environ.get("HF_HUB_CACHE", "/nowhere")),
    "fds": sorted(os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}")),
    "random": random.random(),
    "torch_random": float(torch.rand(1)),
    "pid": os.getpid(),
    "uid": os.getuid(),
    "user": getpass.getuser(),
    "policy_in_frames": policy_in_frames(),
}))
"""

# What a student can reach by walking up the stack from a cell: no frame may still hold the
# request the template got (its policy lists what the sandbox hides).
FRAMES = """
import sys
def policy_in_frames():
    key = "ma" + "sks"  # (spelled apart: this cell's own source is in the history, up the stack too)
    def holds(value, depth=0):
        if isinstance(value, (str, bytes)):
            return f'"{key}"'.encode() in (value if isinstance(value, bytes) else value.encode())
        if isinstance(value, dict):
            return key in value or any(holds(v, depth + 1) for v in value.values()) if depth < 3 else False
        if isinstance(value, (list, tuple)):
            return any(holds(v, depth + 1) for v in value) if depth < 3 else False
        return False
    frame, found = sys._getframe(), []
    while frame is not None:
        found += [f"{frame.f_code.co_name}:{name}" for name, value in frame.f_locals.items() if holds(value)]
        frame = frame.f_back
    return found
"""


@contextlib.contextmanager
def taken(supply: KernelSupply) -> Iterator[KernelSession]:
    """A kernel of ``supply``, connected; its working folder goes with it, as the grader removes a submission's."""
    session = supply.take()
    try:
        with session:
            yield session
    finally:
        shutil.rmtree(session.workdir, ignore_errors=True)


def probe(supply: KernelSupply) -> tuple[str, dict]:
    with taken(supply) as session:
        notebook = make_notebook(None, [("code", FRAMES), ("code", PROBE)])
        record = session.cells.run(notebook, 120, 240)
        assert record.problems == (), record.problems
        # (stdout only: transformers' warning about the pad token is on stderr, before or after it)
        printed = "".join(output["text"] for output in notebook.cells[1].outputs if output.get("name") == "stdout")
        return session.mode, json.loads(printed)


@pytest.fixture(scope="module")
def two_threads(grader: Grader) -> dict[str, str]:
    if grader.sandbox is None or grader.sandbox.isolation.namespaces == "none":
        pytest.skip("this machine gives kernels no namespaces: they are launched, never forked")
    return {**grader.kernels.env, "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}


@pytest.fixture(scope="module")
def forked(grader: Grader, two_threads: dict[str, str]) -> Iterator[KernelSupply]:
    supply = KernelSupply(two_threads, warm=False, sandbox=grader.sandbox)
    yield supply
    supply.close()


def test_a_forked_kernel_runs_multithreaded_torch_and_generates_like_a_launched_one(
    grader: Grader, forked: KernelSupply, two_threads: dict[str, str]
) -> None:
    mode, seen = probe(forked)
    launched = KernelSupply(two_threads, warm=False, sandbox=grader.sandbox, fork=False)
    try:
        launched_mode, expected = probe(launched)
    finally:
        launched.close()
    assert (mode, launched_mode) == ("forked", "launched")
    assert seen["threads"] == 2 and seen["os_threads"] >= 2  # the intra-op pool was started in the kernel
    assert seen["generated"] == expected["generated"]
    assert seen["pid"] == expected["pid"] == 1  # process 1 of a PID namespace of its own
    assert (seen["uid"] != 0) == (expected["uid"] != 0)  # its own user wherever a launched one has one
    # A uid of its own has no passwd entry: the kernel is named by USER/LOGNAME instead, or getpass.getuser()
    # raises (torch 2.11's first import of torch._dynamo called it unguarded: every GPU kernel failed).
    for kernel in (seen, expected):
        assert kernel["user"] == (f"kernel-{kernel['uid']}" if kernel["uid"] != 0 else "root")
    assert seen["hub"] == expected["hub"] and seen["hub_exists"]


def test_a_forked_kernel_keeps_nothing_of_the_template(forked: KernelSupply) -> None:
    _, first = probe(forked)
    _, second = probe(forked)
    assert first["grader_modules"] == []
    assert first["policy_in_frames"] == []  # nothing up the stack still holds the sandbox's request
    assert first["cwd"] == first["path0"]  # the session's folder, as `python -m ipykernel_launcher` has it
    assert not [target for target in first["fds"] if "template" in target or target.endswith(".log")]  # nothing inherited
    assert first["random"] != second["random"] and first["torch_random"] != second["torch_random"]


def test_a_forked_kernel_is_interrupted_and_stopped_like_a_launched_one(forked: KernelSupply) -> None:
    with taken(forked) as session:
        session.interrupt_grace_s = 3
        notebook = make_notebook(None, [("code", "x = 41"), ("code", "while True:\n    pass"), ("code", "print(x + 1)")])
        record = session.cells.run(notebook, cell_timeout_s=3, notebook_timeout_s=60)
        assert [(p.cell_index, p.kind) for p in record.problems] == [(1, "timeout")]
        assert notebook.cells[2].outputs[0]["text"] == "42\n"
        stubborn = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
        record = session.cells.run(make_notebook(None, [("code", stubborn), ("code", "print(1)")]), 3, 60)
        assert [p.kind for p in record.problems] == ["timeout", "not-run"]
        assert not session.alive


def test_the_workers_of_a_run_fork_their_kernels_from_its_one_template(grader: Grader, two_threads: dict[str, str]) -> None:
    """As a run's main process starts one template and each worker's supply is given its address."""
    assert grader.sandbox is not None
    template = start_template(two_threads, grader.sandbox)
    try:
        parents, modes = [], []
        for _ in range(2):  # two workers' supplies
            supply = KernelSupply(two_threads, warm=False, sandbox=grader.sandbox, shared=template.address)
            with taken(supply) as session:
                notebook = make_notebook(None, [("code", "print(6 * 7)")])
                assert session.cells.run(notebook, 30, 60).problems == ()
                assert notebook.cells[0].outputs[0]["text"] == "42\n"
                assert session.root_pid is not None
                parents.append(psutil.Process(session.root_pid).ppid())  # the kernel's watcher: the template's child
            modes.append(session.mode)
            supply.close()
        assert modes == ["forked", "forked"] and parents == [template.process.pid] * 2
        assert template.process.poll() is None  # a worker that is done leaves the run's template serving
    finally:
        template.close()
    assert not template.folder.exists()


def test_a_worker_whose_run_template_is_gone_launches_its_kernels_and_says_why(grader: Grader, tmp_path: Path) -> None:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    address = TemplateAddress(str(tmp_path / "template.sock"), ended.pid)  # never bound: its process has ended
    supply = KernelSupply(grader.kernels.env, warm=False, sandbox=grader.sandbox, shared=address)
    try:
        with taken(supply) as session:
            notebook = make_notebook(None, [("code", "print(6 * 7)")])
            assert session.cells.run(notebook, 30, 60).problems == ()
        assert session.mode == "launched"
        assert supply.why_launched == "the kernel template could not start: it ended before it was ready"
    finally:
        supply.close()


def test_a_worker_is_told_why_the_runs_template_ended(grader: Grader) -> None:
    """A worker shares only the run template's address: the template's own reason reaches it (beside its socket),
    not only "it ended" (on an H200 the run said only that, and why the template had refused was lost)."""
    assert grader.sandbox is not None
    template = start_template(grader.kernels.env, grader.sandbox, preload=("torch", "no_such_module_x"))
    try:
        supply = KernelSupply(grader.kernels.env, warm=False, sandbox=grader.sandbox, shared=template.address)
        try:
            with taken(supply) as session:
                assert session.cells.run(make_notebook(None, [("code", "print(6 * 7)")]), 30, 60).problems == ()
            assert session.mode == "launched"
            assert supply.why_launched == (
                "the kernel template could not start: importing what kernels import failed: "
                "ModuleNotFoundError: No module named 'no_such_module_x'"
            )
        finally:
            supply.close()
    finally:
        template.close()
    assert not template.folder.exists()


def test_a_template_that_cannot_start_falls_back_to_launching_and_says_why(grader: Grader, tmp_path: Path) -> None:
    supply = KernelSupply(grader.kernels.env, warm=False, sandbox=grader.sandbox, preload=("torch", "no_such_module_x"))
    try:
        with taken(supply) as session:
            notebook = make_notebook(None, [("code", "print(6 * 7)")])
            assert session.cells.run(notebook, 30, 60).problems == ()
            assert notebook.cells[0].outputs[0]["text"] == "42\n"
        assert session.mode == "launched"
        assert "could not start" in (supply.why_launched or "") and "no_such_module_x" in (supply.why_launched or "")
    finally:
        supply.close()


def test_without_a_sandbox_kernels_are_launched(tmp_path: Path) -> None:
    session = KernelSession(tmp_path, {}, template=None)
    assert session.mode == "launched"
    session.close()  # its connection folder


def test_the_run_says_how_its_kernels_were_started() -> None:
    forked = "forked from a template that had imported torch and transformers."
    results = [
        SubmissionResult("a", "a.ipynb", "latency", kernel_start=forked),
        SubmissionResult("b", "b.ipynb", "latency", kernel_start=forked),
        SubmissionResult(
            "c",
            "c.ipynb",
            "latency",
            kernel_start="launched afresh (the kernel template could not start: boom).",
            sandbox_warning="weak",
        ),
    ]
    notices = sandbox_notices(results)
    assert notices[-1] == (
        "Kernels: forked from a template that had imported torch and transformers (2); "
        "launched afresh (the kernel template could not start: boom) (1)."
    )
    assert notices[0].startswith(WARNING_PREFIX)
    # A run that graded only "a" (the others' results kept from an earlier run): its kernels are a's, and the
    # sandbox warning says when its submission was graded.
    notices = sandbox_notices(results, {"a"})
    assert notices == [
        f"{WARNING_PREFIX}weak (1 submission graded so, all in an earlier run)",
        "Kernels: forked from a template that had imported torch and transformers (1).",
    ]
    assert sandbox_notices(results, set()) == [f"{WARNING_PREFIX}weak (1 submission graded so, all in an earlier run)"]


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "launched"])
def test_a_kernel_is_ready_with_its_readiness_messages_read(grader: Grader, fork: bool) -> None:
    """A kernel is taken as ready when its kernel_info request's "idle" status arrives, not after 0.2 s of quiet
    on IOPub (jupyter_client's wait, which every submission paid before its first cell): nothing of the
    readiness requests is left for the first cell to read, and the first cell runs as before."""
    supply = KernelSupply(grader.kernels.env, warm=False, sandbox=grader.sandbox, fork=fork)
    try:
        with taken(supply) as session:
            kc = session.client().kc
            assert isinstance(kc, ReadyKernelClient)

            async def left_on_iopub() -> list[str]:
                left = []
                with contextlib.suppress(Empty):
                    while True:
                        message = await kc.iopub_channel.get_msg(timeout=0.5)
                        left.append(f"{message['msg_type']}: {message['content']}")
                return left

            assert session.run(left_on_iopub()) == []
            notebook = make_notebook(None, [("code", "print(6 * 7)")])
            assert session.cells.run(notebook, 30, 60).problems == ()
            assert notebook.cells[0].outputs[0]["text"] == "42\n"
    finally:
        supply.close()


def test_the_next_kernel_is_started_once_the_first_cell_has_run(grader: Grader) -> None:
    """The grader forks the next submission's kernel after this one's first cell (``after_first_cell``), not before
    this one starts: the hook runs once, between the first and second cells, and also for a notebook whose first
    cell ends the run or that has no code at all."""
    supply = KernelSupply(grader.kernels.env, warm=True, sandbox=grader.sandbox)
    try:
        with taken(supply) as session:
            notebook = make_notebook(None, [("markdown", "# Q1"), ("code", "print(1)"), ("code", "print(2)")])
            seen: list[tuple[int, int]] = []

            def started() -> None:
                seen.append((len(notebook.cells[1].outputs), len(notebook.cells[2].get("outputs", []))))
                supply.prepare_next()

            assert session.cells.run(notebook, 30, 60, after_first_cell=started).problems == ()
            assert seen == [(1, 0)]
            warm = supply._next
            assert warm is not None and warm.launched_at is not None
            supply.prepare_next()  # one warm kernel at most
            assert supply._next is warm
        with taken(supply) as session:
            assert session is warm  # the next take gets it
            calls: list[str] = []
            empty = make_notebook(None, [("markdown", "nothing to run")])
            session.cells.run(empty, 30, 60, after_first_cell=lambda: calls.append("empty"))
            dying = make_notebook(None, [("code", "import os; os._exit(1)"), ("code", "print(2)")])
            session.cells.run(dying, 30, 60, after_first_cell=lambda: calls.append("died"))
            assert calls == ["empty", "died"]
    finally:
        supply.close()


NAMED_THREAD = """
import ctypes, json, sys, threading
from grader.kernel import template
started, stop = threading.Event(), threading.Event()
def run(name):
    ctypes.CDLL(None).prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME: the name /proc/self/task/*/comm shows
    started.set()
    stop.wait()
thread = threading.Thread(target=run, args=(sys.argv[1],))
thread.start()
started.wait()
print(json.dumps(template._threads()))
stop.set()
"""


@pytest.mark.parametrize(("name", "counted"), [("jemalloc_bg_thd", 1), ("OMP worker", 2)])
def test_only_threads_that_cannot_survive_a_fork_keep_the_template_from_forking(name: str, counted: int) -> None:
    """jemalloc's background purger (an H100 image's libraries start one at import) locks its allocator around a fork
    itself; any other thread could hold a lock the child would never see released."""
    shown = subprocess.run([sys.executable, "-c", NAMED_THREAD, name], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(shown.stdout) == counted
