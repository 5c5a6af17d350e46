"""Run a notebook in a fresh kernel and keep what happened.

One :class:`KernelSession` per submission: a private kernelspec pinned to this interpreter,
IPC transport, a temporary working copy as the working directory, stdin off. Cells run one at
a time through nbclient, past errors and past timed-out cells (interrupted, then the kernel
must answer again within a grace period or it is stopped). The session stays open after the
notebook has run so that the harness can call the student's functions in the same kernel.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import nbformat
import psutil
import zmq
from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_core.utils import run_sync
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from grader import scratch
from grader.errors import KernelError
from grader.facts import CellProblem
from grader.kernel.evidence import Pause
from grader.kernel.sandbox import ResourceWatch, SandboxPolicy, kill_user, launcher_argv, new_kernel_uid

ZOO_VIEW = "/llm-grader/zoo"  # where a sandboxed kernel sees the model zoo (one place for every kernel)
LaunchMode = Literal["forked", "launched"]

KERNEL_NAME = "llm-grader-python"
MAX_TRACEBACK_CHARS = 20_000
MAX_REQUEST_STDOUT = 64 * 1024  # characters of a grading request's stray output kept
MAX_MESSAGE_BYTES = 64 * 1024**2  # the largest message the grader accepts from a kernel (outputs, answers)
TIMEOUT_ENAME = "CellTimeoutError"
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """Text without the terminal colour codes IPython puts in tracebacks."""
    return ANSI_ESCAPE.sub("", text)


def kernel_transport(sandbox: SandboxPolicy | None, sockets: Path, platform: str = sys.platform) -> dict[str, str]:
    """How the grader reaches a kernel.

    IPC sockets when the kernel is in its own network namespace (they cross it; TCP on loopback
    does not) and wherever a sandbox is used on a POSIX system. TCP on loopback on Windows, whose
    ZeroMQ has no IPC transport, and for unsandboxed kernels (a student's self-check) everywhere,
    so that the path Windows takes is the one every platform runs and tests.
    """
    namespaced = sandbox is not None and sandbox.isolation.namespaces != "none"
    if namespaced or (sandbox is not None and not platform.startswith("win")):
        return {"transport": "ipc", "ip": str(sockets / "kernel")}
    return {"transport": "tcp", "ip": "127.0.0.1"}


@dataclass(frozen=True)
class ExecutionRecord:
    """What running the notebook did: the executed notebook and every cell problem."""

    notebook: Any  # nbformat.NotebookNode, outputs included
    problems: tuple[CellProblem, ...]
    duration_s: float
    cells_run: int
    kernel_alive: bool
    notebook_timed_out: bool = False


@dataclass(frozen=True)
class KernelReply:
    """The messages one harness request produced, filtered to that request."""

    payload: str | None
    status: str  # "ok", "error", "timeout", "dead"
    stdout: str = ""
    error: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0


class BoundedNotebookClient(NotebookClient):
    """A notebook client that keeps at most ``max_output_bytes`` of a notebook's outputs.

    Past the budget, outputs are dropped (the first one cut to fit) and one note says so, so a
    notebook printing gigabytes costs the grader neither memory nor a huge report. Errors are
    always kept (their tracebacks cut), since they explain lost points.
    """

    max_output_bytes: int | None = None
    kept_bytes = 0
    truncated = False

    def output(self, outs: list[Any], msg: dict[str, Any], display_id: str | None, cell_index: int) -> Any:
        """Keep the output if the budget allows, else drop it (saying so once)."""
        limit = self.max_output_bytes
        kind = msg.get("msg_type")
        content = msg.get("content", {})
        if kind == "error":
            content["traceback"] = _cut_traceback(content.get("traceback", []))
            return super().output(outs, msg, display_id, cell_index)
        if limit is None:
            return super().output(outs, msg, display_id, cell_index)
        size = _output_size(content)
        if self.kept_bytes + size <= limit:
            self.kept_bytes += size
            return super().output(outs, msg, display_id, cell_index)
        if self.truncated:
            return None
        self.truncated = True
        room = limit - self.kept_bytes
        if kind == "stream" and room > 0:
            content["text"] = str(content.get("text", ""))[:room]
            super().output(outs, msg, display_id, cell_index)
        self.kept_bytes = limit
        note = nbformat.v4.new_output(
            "stream",
            name="stderr",
            text=f"\n[output truncated by the grader: the notebook's outputs passed {limit // 1024} KiB; the rest was not kept]\n",
        )
        outs.append(note)
        return note


def _output_size(content: Mapping[str, Any]) -> int:
    """Characters an output carries (text, or every representation of a display)."""
    if "text" in content:
        return len(str(content["text"]))
    data = content.get("data", {})
    return sum(len(value) if isinstance(value, str) else len(json.dumps(value)) for value in data.values())


def _cut_traceback(lines: list[str]) -> list[str]:
    kept: list[str] = []
    total = 0
    for line in lines if isinstance(lines, list) else []:
        total += len(line)
        if total > MAX_TRACEBACK_CHARS:
            kept.append("[traceback cut by the grader]")
            break
        kept.append(line)
    return kept


class CpuSampler:
    """Samples one thread's CPU time (``/proc/<pid>/task/<tid>/schedstat``, nanoseconds) against the grader's
    monotonic clock (``time.perf_counter``, the clock the kernel's runtime stamps its events with), every
    ``interval_s`` in a thread of the grader, while the ``with`` block runs: evidence from outside the kernel
    of when its main thread really ran. ``samples`` is empty where the file cannot be read (not Linux).
    """

    MAX_SAMPLES = 200_000

    def __init__(self, path: Path | None, interval_s: float = 0.004) -> None:
        self.path = path
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._fd: int | None = None  # the file, kept open and read again from its start (cheaper than reopening)

    def _sample(self) -> bool:
        if self._fd is None:
            return False
        try:
            running_ns = int(os.pread(self._fd, 128, 0).split()[0])
        except (OSError, ValueError, IndexError):
            return False
        self.samples.append((time.perf_counter(), running_ns / 1e9))
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s) and len(self.samples) < self.MAX_SAMPLES:
            if not self._sample():
                return

    def __enter__(self) -> CpuSampler:
        if self.path is not None:
            with contextlib.suppress(OSError):
                self._fd = os.open(self.path, os.O_RDONLY)
        if self._sample():
            self._thread = threading.Thread(target=self._run, name="kernel-cpu-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._sample()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class PauseServer:
    """Serves the pauses the kernel's runtime asks for while one request runs (pacing, see grader/kernel/evidence.py).

    The runtime writes a line (its sequence number) on the request FIFO and blocks reading the reply FIFO; this
    thread of the grader reads the line, waits a length it draws itself (``draw()``), and writes one byte back.
    The kernel never learns the length but by timing its own wait; the grader keeps what it served
    (``pauses``) to judge the call's records against.
    """

    MAX_PAUSES = 5_000
    MAX_LINE = 32

    def __init__(self, fds: tuple[int, int] | None, draw: Callable[[], float]) -> None:
        self.fds = fds
        self.draw = draw
        self.pauses: list[Pause] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pending = b""
        self._wake: tuple[int, int] | None = None  # a pipe that ends the thread's wait at once when the request ends

    def _drain(self) -> None:
        """Drop whatever either FIFO holds from before this request (an interrupted pause, a notebook's writes)."""
        assert self.fds is not None
        for fd in self.fds:
            with contextlib.suppress(BlockingIOError, InterruptedError, OSError):
                while os.read(fd, 65536):
                    pass

    def _run(self) -> None:
        assert self.fds is not None and self._wake is not None
        request, reply = self.fds
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([request, self._wake[0]], [], [])
                if self._wake[0] in ready:
                    return
                chunk = os.read(request, 4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return
            self._pending += chunk
            while b"\n" in self._pending and not self._stop.is_set():
                line, self._pending = self._pending.split(b"\n", 1)
                if len(self.pauses) >= self.MAX_PAUSES:
                    return  # the kernel waits until the request's time limit interrupts it
                seconds = self.draw()
                start = time.perf_counter()
                seq = line[: self.MAX_LINE].decode("ascii", "replace")
                if self._stop.wait(seconds):
                    # The request ended during the pause, which no honest call does (its runtime waits for the
                    # release): logged as held until then, for the evidence to place.
                    self.pauses.append(Pause(seq, start, time.perf_counter(), seconds))
                    return
                end = time.perf_counter()
                with contextlib.suppress(OSError):
                    os.write(reply, b"\n")
                self.pauses.append(Pause(seq, start, end, seconds))
            self._pending = self._pending[-self.MAX_LINE :]

    def __enter__(self) -> PauseServer:
        if self.fds is not None:
            self._drain()
            self._wake = os.pipe()
            self._thread = threading.Thread(target=self._run, name="kernel-pause-server", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._wake is not None:
            os.write(self._wake[1], b"\n")
        if self._thread is not None:
            self._thread.join(timeout=2)
        for fd in self._wake or ():
            os.close(fd)
        self._wake = None


class KernelSession:
    """A kernel for one submission, from start to shutdown; use as a context manager.

    With a ``sandbox`` policy the kernel starts through the sandbox launcher (see
    :mod:`grader.kernel.sandbox`): own namespaces, hidden paths, limits, and where the machine allows
    it a uid of its own, to which the working folder and the IPC sockets' folder belong.
    """

    def __init__(
        self,
        workdir: Path,
        env: Mapping[str, str],
        startup_timeout: float = 60.0,
        interrupt_grace_s: float = 5.0,
        preload: tuple[str, ...] = (),
        sandbox: SandboxPolicy | None = None,
        template: TemplateClient | None = None,
    ) -> None:
        self.workdir = workdir
        self.template = template if sandbox is not None and sandbox.isolation.namespaces != "none" else None
        self.mode: LaunchMode = "forked" if self.template is not None else "launched"
        self.env = dict(env)
        self.startup_timeout = startup_timeout
        self.interrupt_grace_s = interrupt_grace_s
        self.preload = preload
        self.sandbox = sandbox
        self._runtime_dir = scratch.mkdtemp("kernel")
        self._client: BoundedNotebookClient | None = None
        self._km: AsyncKernelManager | None = None
        self._connected = False
        self.dead_reason: str | None = None
        self.launched_at: float | None = None
        self.uid: int | None = None
        self.resource_watch: ResourceWatch | None = None
        self.root_pid: int | None = None  # the root of the kernel's process tree, once started
        self._kernel_pid: int | None = None
        # The FIFOs the runtime asks the grader for its pauses through (request, reply), and the grader's own ends,
        # opened before the kernel starts (None where FIFOs cannot be made: the runtime then sleeps its pacing).
        self.pause_paths: tuple[str, str] | None = None
        self._pause_fds: tuple[int, int] | None = None

    # ---------------------------------------------------------------- lifecycle

    def __enter__(self) -> KernelSession:
        if self._km is None:
            self.launch()
        self.connect()
        return self

    def launch(self) -> KernelSession:
        """Start the kernel process and return at once (it starts up, and preloads, on its own).

        ``preload`` names modules the kernel imports before it answers (``sys.modules`` only: no
        name is bound in the user's namespace), so a kernel launched ahead of time is warm when
        its submission comes: ``import torch`` then costs nothing in the notebook.
        """
        kernels = self._runtime_dir / "kernels" / KERNEL_NAME
        kernels.mkdir(parents=True)
        home = self._runtime_dir / "home"
        sockets = self._runtime_dir / "sockets"
        home.mkdir()
        sockets.mkdir()
        pauses = self._make_pause_fifos()
        connection_file = self._runtime_dir / "connection.json"
        argv = [sys.executable, "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        if self.preload:
            # One statement line ending in None: imported, nothing displayed, no name bound.
            line = "; ".join(f"__import__({module!r})" for module in self.preload) + "; None"
            argv.append(f"--IPKernelApp.exec_lines={json.dumps([line])}")
        transport = kernel_transport(self.sandbox, sockets)
        if transport["transport"] == "tcp":
            # ipykernel warns that TCP is unencrypted; this kernel listens on loopback for its own grader only.
            argv.append("--IPKernelApp.log_level=ERROR")
        env = {**self.env, "HOME": str(home), "TMPDIR": str(home)}
        if self.sandbox is not None:
            argv = self._sandboxed(argv, env, self.sandbox, owned=(home, sockets, self.workdir, *pauses), given=connection_file)
        spec = {
            # This very interpreter, so the notebook sees the grader's pinned libraries.
            "argv": argv,
            "display_name": "LLM grader (Python)",
            "language": "python",
        }
        (kernels / "kernel.json").write_text(json.dumps(spec))
        spec_manager = KernelSpecManager(kernel_dirs=[str(self._runtime_dir / "kernels")])
        self._km = AsyncKernelManager(
            kernel_name=KERNEL_NAME,
            kernel_spec_manager=spec_manager,
            **transport,
            connection_file=str(connection_file),
        )
        # Every socket of this kernel's clients refuses a message larger than this before it is
        # read, let alone parsed (the sender is disconnected instead): a kernel cannot make the
        # grader hold a gigabyte message.
        self._km.context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        placeholder = nbformat.v4.new_notebook()
        self._client = BoundedNotebookClient(
            placeholder,
            km=self._km,
            allow_errors=True,
            interrupt_on_timeout=True,
            error_on_timeout={"ename": TIMEOUT_ENAME, "evalue": "", "traceback": []},
            iopub_timeout=int(self.interrupt_grace_s),
            raise_on_iopub_timeout=False,
            record_timing=True,
            startup_timeout=int(self.startup_timeout),
            shutdown_kernel="immediate",
        )
        try:
            self._client.start_new_kernel(cwd=str(self.workdir), env=env)
        except Exception as error:
            self.close()
            raise KernelError(f"the notebook's kernel did not start: {type(error).__name__}: {error}") from error
        self.launched_at = time.monotonic()
        process = getattr(self._km.provisioner, "process", None)
        self.root_pid = process.pid if process is not None else None
        if self.sandbox is not None and process is not None:
            root = process.pid
            if self.template is not None:  # the kernel's tree hangs from the template's child, not from the client
                root = self.template.watcher_pid(self._runtime_dir / "watcher.pid", process, self.startup_timeout)
                if root is None:
                    self.close()
                    raise KernelError("the notebook's kernel did not start: its kernel template did not fork it")
            self.root_pid = root
            # RLIMIT_NPROC counts threads too; the watch counts processes, and stops at half as many.
            self.resource_watch = ResourceWatch(
                root,
                self.uid,
                self.sandbox.memory_bytes,
                max_processes=max(8, self.sandbox.max_processes // 2),
                scratch=self.sandbox.isolation.namespaces != "none",
            ).start()
        return self

    def _make_pause_fifos(self) -> tuple[Path, ...]:
        """The pause FIFOs in the kernel's runtime folder (which the kernel sees at the same path), opened here
        for reading and writing without blocking; () where FIFOs cannot be made (not POSIX)."""
        if not hasattr(os, "mkfifo"):
            return ()
        paths = (self._runtime_dir / "pause-request", self._runtime_dir / "pause-reply")
        try:
            for path in paths:
                os.mkfifo(path, 0o600)
            self._pause_fds = (
                os.open(paths[0], os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC),
                os.open(paths[1], os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC),
            )
        except OSError:
            return ()
        self.pause_paths = (str(paths[0]), str(paths[1]))
        return paths

    def serve_pauses(self, draw: Callable[[], float]) -> PauseServer:
        """A server of the runtime's pauses, each ``draw()`` seconds long, while a request runs (a context manager)."""
        return PauseServer(self._pause_fds, draw)

    def _sandboxed(
        self, argv: list[str], env: dict[str, str], sandbox: SandboxPolicy, owned: tuple[Path, ...], given: Path
    ) -> list[str]:
        """``argv`` started through the sandbox launcher; ``env`` is adjusted in place.

        With a uid of its own, the kernel owns the ``owned`` folders and is given ``given`` (its
        connection file) by the launcher; it may only pass through the session's folder.
        """
        if sandbox.isolation.own_user:
            self.uid = new_kernel_uid()
            self._runtime_dir.chmod(0o711)
            for path in owned:
                os.chown(path, self.uid, self.uid)
                path.chmod(0o700)
        viewed = zoo_viewed_env(env, sandbox)
        zoo_view = ZOO_VIEW if viewed != env else None
        env.update(viewed)
        new_root = self._runtime_dir / "root"  # where the launcher builds the kernel's view of the machine
        new_root.mkdir(mode=0o755)
        policy = sandbox.launcher_policy(
            self.uid,
            give=[str(given)],
            zoo_view=zoo_view,
            new_root=str(new_root),
            writable=[str(self._runtime_dir), str(self.workdir)],
        )
        if self.template is not None:
            return self.template.client_argv(policy, argv, self._runtime_dir / "watcher.pid")
        return launcher_argv(policy, argv)

    def limit_memory(self, limit_bytes: int) -> None:
        """Stop the kernel when its processes use more than ``limit_bytes`` (from now on)."""
        if self.resource_watch is not None:
            self.resource_watch.limit_bytes = limit_bytes

    @property
    def owner(self) -> int | None:
        """The kernel's own uid, to which files given to it belong (None: the grader's user)."""
        return self.uid

    def connect(self) -> KernelSession:
        """Wait until the launched kernel answers (at most ``startup_timeout`` seconds)."""
        if self._connected:
            return self
        client = self._require_client()
        client.startup_timeout = int(self.startup_timeout)
        try:
            client.start_new_kernel_client()
        except Exception as error:
            self.close()
            raise KernelError(f"the notebook's kernel did not start: {type(error).__name__}: {error}") from error
        self._connected = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the kernel (if any) and everything it started, and remove its connection files."""
        if self.resource_watch is not None:
            self.resource_watch.stop()
        if self._km is not None:
            km = self._km
            self._km = None
            # Shutting down a dying kernel can fail in many ways; it is gone either way.
            with contextlib.suppress(Exception):
                if run_sync(km.is_alive)():
                    run_sync(km.shutdown_kernel)(now=True)
            with contextlib.suppress(Exception):
                run_sync(km.cleanup_resources)()
        if self._client is not None and self._client.kc is not None:
            with contextlib.suppress(Exception):
                self._client.kc.stop_channels()
            self._client.kc = None
        if self.uid is not None:
            kill_user(self.uid)  # what the notebook left running, even outside the kernel's tree
        for fd in self._pause_fds or ():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._pause_fds = None
        shutil.rmtree(self._runtime_dir, ignore_errors=True)

    def cpu_seconds(self) -> float | None:
        """CPU seconds the kernel's process tree has used so far, read by the grader from /proc (None when unknown).

        Evidence from outside the kernel: what a notebook does to its own clocks and records cannot change it.
        Each live thread's ``schedstat`` (nanoseconds), summed; a thread that ended no longer counts, so two
        readings bound from below what ran between them.
        """
        if self.root_pid is None:
            return None
        try:
            root = psutil.Process(self.root_pid)
            pids = [root.pid, *(child.pid for child in root.children(recursive=True))]
        except psutil.Error:
            return None
        total_ns = 0
        try:
            os.listdir(f"/proc/{root.pid}/task")
        except OSError:
            return None  # no /proc here (not Linux): not evidence, rather than zero
        for pid in pids:
            with contextlib.suppress(OSError):
                for task in os.listdir(f"/proc/{pid}/task"):
                    with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{pid}/task/{task}/schedstat") as stat:
                        total_ns += int(stat.read().split()[0])
        return total_ns / 1e9

    def kernel_pid(self) -> int | None:
        """The pid of the kernel process itself (whose main thread runs the notebook's code), once known.

        The tree's root is the kernel where it was launched without a sandbox; otherwise the launcher or the
        forked kernel's watcher, with the kernel as its child. The kernel is the first with threads of its own.
        """
        if self._kernel_pid is None and self.root_pid is not None:
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(self.root_pid)
                for process in (root, *root.children(recursive=True)):
                    if process.num_threads() >= 3:
                        self._kernel_pid = process.pid
                        break
        return self._kernel_pid

    def sample_cpu(self) -> CpuSampler:
        """A sampler of the kernel's main thread's CPU time against the grader's clock (use as a context manager)."""
        pid = self.kernel_pid()
        return CpuSampler(Path(f"/proc/{pid}/task/{pid}/schedstat") if pid is not None else None)

    @property
    def stopped_by_watch(self) -> bool:
        """Whether the kernel was stopped for using too much memory or too many processes."""
        return self.resource_watch is not None and self.resource_watch.exceeded is not None

    @property
    def alive(self) -> bool:
        """Whether the kernel can still take requests."""
        if self._km is None or self.dead_reason is not None:
            return False
        try:
            return bool(run_sync(self._km.is_alive)())
        except Exception:
            return False

    def _mark_dead(self, reason: str) -> None:
        if self.stopped_by_watch and self.resource_watch is not None:
            reason = self.resource_watch.message
        self.dead_reason = reason
        if self._km is not None:
            with contextlib.suppress(Exception):
                run_sync(self._km.shutdown_kernel)(now=True)

    # ---------------------------------------------------------------- notebook

    def run_notebook(
        self, notebook: Any, cell_timeout_s: float, notebook_timeout_s: float, max_output_bytes: int | None = None
    ) -> ExecutionRecord:
        """Run every code cell in order, past errors and timeouts, within the notebook's budget
        (keeping at most ``max_output_bytes`` of outputs)."""
        client = self._require_client()
        client.nb = notebook
        client.max_output_bytes = max_output_bytes
        problems: list[CellProblem] = []
        timed_out_cells: set[int] = set()

        def on_cell_error(cell: Any, cell_index: int, execute_reply: dict[str, Any]) -> None:
            if execute_reply.get("content", {}).get("ename") == TIMEOUT_ENAME:
                timed_out_cells.add(cell_index)

        client.on_cell_error = on_cell_error
        started = time.monotonic()
        deadline = started + notebook_timeout_s
        cells_run = 0
        notebook_timed_out = False
        code_cells = [(i, cell) for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]
        for position, (index, cell) in enumerate(code_cells):
            remaining = deadline - time.monotonic()
            if remaining < 1:
                notebook_timed_out = True
                problems.append(_not_run(code_cells[position:], f"the notebook ran out of its {notebook_timeout_s:.0f} s"))
                break
            if not self.alive:
                problems.append(_not_run(code_cells[position:], "the kernel had stopped"))
                break
            budget = min(cell_timeout_s, remaining)
            client.timeout = max(1, int(budget))
            try:
                client.execute_cell(cell, index)
                cells_run += 1
            except (DeadKernelError, KeyError, RuntimeError, ValueError) as error:
                # A KeyError, RuntimeError or ValueError (jupyter_client's "Duplicate Signature",
                # "Invalid Signature") here comes from the kernel's messages: a notebook that
                # replaced json.dumps or the kernel's session breaks Jupyter's protocol.
                self._mark_dead(_death(index, error))
                problems.append(CellProblem(index, "kernel-died", _death_message(self, error), source=cell.source))
                problems.append(_not_run(code_cells[position + 1 :], "the kernel had died"))
                break
            except CellTimeoutError as error:  # raised only if the interrupt path itself fails
                timed_out_cells.add(index)
                problems.append(CellProblem(index, "timeout", str(error), source=cell.source))
            if index in timed_out_cells:
                ran_out = budget < cell_timeout_s
                limit = (
                    f"the notebook's remaining time ({budget:.0f} s)" if ran_out else f"the {cell_timeout_s:.0f} s per-cell limit"
                )
                problems.append(
                    CellProblem(
                        index,
                        "timeout",
                        f"This cell was still running after {limit} and was interrupted.",
                        source=cell.source,
                    )
                )
                if not self._answers_within(self.interrupt_grace_s):
                    self._mark_dead(f"the kernel did not stop after cell {index + 1} was interrupted")
                    problems.append(_not_run(code_cells[position + 1 :], "the kernel ignored the interrupt and was stopped"))
                    break
                if ran_out:
                    notebook_timed_out = True
            else:
                problems.extend(_cell_errors(index, cell))
        problems = [problem for problem in problems if problem.kind != "not-run" or problem.message]
        return ExecutionRecord(
            notebook=notebook,
            problems=tuple(problems),
            duration_s=time.monotonic() - started,
            cells_run=cells_run,
            kernel_alive=self.alive,
            notebook_timed_out=notebook_timed_out,
        )

    def _answers_within(self, seconds: float) -> bool:
        """Whether the kernel answers a kernel_info request within ``seconds`` (not stuck)."""
        client = self._require_client()

        async def ask() -> bool:
            kc = client.kc
            assert kc is not None
            msg_id = kc.kernel_info()
            deadline = time.monotonic() + seconds
            while (remaining := deadline - time.monotonic()) > 0:
                try:
                    message = await kc.shell_channel.get_msg(timeout=remaining)
                except Exception:
                    return False
                if message["parent_header"].get("msg_id") == msg_id:
                    return True
            return False

        try:
            return bool(run_sync(ask)())
        except Exception:
            return False

    # ---------------------------------------------------------------- harness requests

    def request(self, code: str, channel: str, timeout_s: float) -> KernelReply:
        """Run ``code`` silently and collect the payload published on ``channel``.

        On timeout the kernel is interrupted; if it does not answer within the grace period
        it is stopped, and the session is dead for later requests.
        """
        if not self.alive:
            return KernelReply(None, "dead", error={"message": self.dead_reason or "the kernel is not running"})
        client = self._require_client()
        started = time.monotonic()

        async def exchange() -> KernelReply:
            kc = client.kc
            assert kc is not None
            msg_id = kc.execute(code, silent=True, store_history=False, allow_stdin=False, stop_on_error=False)
            payload: str | None = None
            stdout: list[str] = []
            error: dict[str, Any] = {}
            deadline = started + timeout_s
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return KernelReply(payload, "timeout", "".join(stdout), error, time.monotonic() - started)
                try:
                    message = await kc.iopub_channel.get_msg(timeout=min(1.0, remaining))
                except Exception:
                    if not await self._km_alive():
                        return KernelReply(payload, "dead", "".join(stdout), error, time.monotonic() - started)
                    continue
                if message["parent_header"].get("msg_id") != msg_id:
                    continue
                kind = message["msg_type"]
                content = message["content"]
                if kind == "display_data" and channel in content.get("data", {}):
                    payload = content["data"][channel]
                elif kind == "stream" and sum(map(len, stdout)) < MAX_REQUEST_STDOUT:
                    stdout.append(str(content.get("text", ""))[:MAX_REQUEST_STDOUT])
                elif kind == "error":
                    error = {
                        "ename": content.get("ename", ""),
                        "evalue": content.get("evalue", ""),
                        "traceback": strip_ansi("\n".join(content.get("traceback", []))),
                    }
                elif kind == "status" and content.get("execution_state") == "idle":
                    status = "error" if error else "ok"
                    return KernelReply(payload, status, "".join(stdout), error, time.monotonic() - started)

        try:
            reply = run_sync(exchange)()
        except Exception as error:  # a kernel that broke Jupyter's protocol (see run_notebook)
            self._mark_dead(f"the kernel stopped speaking Jupyter's protocol during a grading call ({_what(error)})")
            return KernelReply(None, "dead", error={"message": self.dead_reason or ""})
        if reply.status == "timeout":
            self._interrupt()
            if not self._answers_within(self.interrupt_grace_s):
                self._mark_dead("the kernel did not stop after a grading call was interrupted")
        elif reply.status == "dead":
            self._mark_dead("the kernel died during a grading call")
        return reply

    async def _km_alive(self) -> bool:
        return self._km is not None and bool(await self._km.is_alive())

    def _interrupt(self) -> None:
        if self._km is not None:
            with contextlib.suppress(Exception):
                run_sync(self._km.interrupt_kernel)()

    def _require_client(self) -> BoundedNotebookClient:
        if self._client is None:
            raise KernelError("the kernel session was used before it started")
        return self._client


def _what(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _death(index: int, error: BaseException) -> str:
    if isinstance(error, DeadKernelError):
        return f"the kernel died while running cell {index + 1}"
    return f"the kernel stopped speaking Jupyter's protocol in cell {index + 1} ({_what(error)})"


def _death_message(session: KernelSession, error: BaseException) -> str:
    """What the student is told about a kernel that died in a cell."""
    if session.stopped_by_watch and session.resource_watch is not None:
        return f"While this cell ran, {session.resource_watch.message}. Later cells did not run."
    if isinstance(error, DeadKernelError):
        return (
            "The kernel died while this cell ran (the process exited or crashed, for example out of memory). "
            "Later cells did not run."
        )
    return (
        "The kernel stopped answering in Jupyter's protocol while this cell ran (did the notebook replace "
        f"json, the kernel's session or its sockets? {_what(error)}); it was stopped and later cells did not run."
    )


def _not_run(cells: list[tuple[int, Any]], reason: str) -> CellProblem:
    """One problem summarising the cells that never ran."""
    if not cells:
        return CellProblem(-1, "not-run", "")
    numbers = ", ".join(str(index + 1) for index, _ in cells)
    plural = "s" if len(cells) > 1 else ""
    return CellProblem(cells[0][0], "not-run", f"Cell{plural} {numbers} did not run: {reason}.")


def _cell_errors(index: int, cell: Any) -> list[CellProblem]:
    """The error outputs a cell produced."""
    problems = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            message = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}".strip()
            problems.append(
                CellProblem(
                    index,
                    "error",
                    message,
                    traceback=strip_ansi("\n".join(output.get("traceback", []))),
                    source=cell.source,
                )
            )
    return problems


def prepare_workdir(notebook_path: Path, given_files: list[Path], parent: Path | None = None) -> Path:
    """A temporary working copy: the notebook and the files the assignment gives, nothing else."""
    workdir = Path(tempfile.mkdtemp(prefix="llm-grader-work-", dir=parent))
    populate_workdir(workdir, notebook_path, given_files)
    return workdir


def populate_workdir(workdir: Path, notebook_path: Path, given_files: list[Path], owner: int | None = None) -> None:
    """Copy the notebook and the files the assignment gives into an (empty) working folder
    (given to the kernel's user ``owner``, if it has one)."""
    copied = [workdir / notebook_path.name]
    shutil.copyfile(notebook_path, copied[0])  # the bytes only: not a link, not its owner or mode
    for path in given_files:
        target = workdir / path.name
        if path.is_dir():
            shutil.copytree(path, target)
        else:
            shutil.copy2(path, target)
        copied.append(target)
    if owner is not None:
        for path in copied:
            for item in [path, *(path.rglob("*") if path.is_dir() else [])]:
                os.lchown(item, owner, owner)


# Modules a kernel imports before it answers: what nearly every notebook of the course imports,
# and what the grader's runtime patches. Only ``sys.modules`` changes; no name is bound.
PRELOAD = ("torch", "transformers", "transformers.generation.utils", "transformers.modeling_utils")
# What a kernel template imports besides, where installed: the course's other common imports
# (pandas, matplotlib with its font list), free to a forked kernel, about half a second of CPU
# to each notebook that imports them itself. Not ``matplotlib.pyplot`` (it hooks into the
# IPython it is imported in), nor Optimum's ONNX Runtime models or bitsandbytes (importing them
# starts a thread, and a process with threads cannot be forked safely).
TEMPLATE_EXTRAS = ("pandas", "matplotlib", "matplotlib.font_manager")
# Imported by a template only where torch was built for CPUs alone: bitsandbytes (about a second of CPU to
# each ptq-bnb kernel, its kernels compiled with torch.compile at import) asks torch for GPUs when imported, and
# a process that has started a GPU driver cannot fork a kernel that uses it. It starts no thread on one thread.
TEMPLATE_CPU_EXTRAS = ("bitsandbytes",)


class KernelSupply:
    """Kernels for submissions, one each, never reused: with ``warm``, the next one is launched
    (and imports torch and transformers) while the current submission is graded.

    Each kernel gets a fresh, empty working folder; the submission's files are copied into it
    when it is taken, so a kernel can start before anyone knows which submission it will run.
    """

    def __init__(
        self,
        env: Mapping[str, str],
        warm: bool = True,
        preload: tuple[str, ...] = PRELOAD,
        sandbox: SandboxPolicy | None = None,
        fork: bool = True,
        shared: TemplateAddress | None = None,
    ) -> None:
        self.env = dict(env)
        self.warm = warm
        self.preload = preload
        self.sandbox = sandbox
        self._next: KernelSession | None = None
        self.template: TemplateClient | None = None
        self.why_launched = why_launched(sandbox, fork)  # why kernels are launched rather than forked
        if self.why_launched is None and shared is not None:
            self.template = SharedTemplate(shared)  # the run's, started with this supply's env and preloads
        elif self.why_launched is None and sandbox is not None:
            self.template = start_template(self.env, sandbox, preload)

    def _stop_forking(self, why: str) -> None:
        """Launch this kernel and every later one: the template cannot serve (``why``)."""
        self.why_launched = why
        if self.template is not None:
            self.template.close()
            self.template = None

    def _launch(self) -> KernelSession:
        workdir = scratch.mkdtemp("work")
        if self.template is not None and not self.template.ready():
            self._stop_forking(f"the kernel template could not start: {self.template.problem}")
        if self.template is not None:
            try:
                return KernelSession(
                    workdir, self.env, preload=self.preload, sandbox=self.sandbox, template=self.template
                ).launch()
            except KernelError:
                self._stop_forking("the kernel template failed to fork a kernel")
            except BaseException:
                shutil.rmtree(workdir, ignore_errors=True)
                raise
        try:
            return KernelSession(workdir, self.env, preload=self.preload, sandbox=self.sandbox).launch()
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise

    def take(self, warm_next: bool = True) -> KernelSession:
        """A launched kernel for one submission (connect it with ``with session:``)."""
        session, self._next = self._next, None
        if session is None or session.launched_at is None:
            session = self._launch()
        if self.warm and warm_next:
            with contextlib.suppress(KernelError):  # a failed warm start costs only its time
                self._next = self._launch()
        return session

    def close(self) -> None:
        """Stop the kernel kept warm, if any, and remove its working folder; stop the template."""
        if self._next is not None:
            self._next.close()
            shutil.rmtree(self._next.workdir, ignore_errors=True)
            self._next = None
        if self.template is not None:
            self.template.close()
            self.template = None


def why_launched(sandbox: SandboxPolicy | None, fork: bool = True) -> str | None:
    """Why kernels are launched afresh rather than forked from a template (None: they are forked)."""
    if not fork:
        return "forking kernels was turned off"
    if sandbox is None or sandbox.isolation.namespaces == "none" or not sys.platform.startswith("linux"):
        return "forking a kernel needs the sandbox's namespaces (Linux)"
    return None


def start_template(env: Mapping[str, str], sandbox: SandboxPolicy, preload: tuple[str, ...] = PRELOAD) -> KernelTemplate:
    """A template for kernels with environment ``env`` in ``sandbox``, importing ``preload`` (and the extras)."""
    return KernelTemplate.start(zoo_viewed_env(env, sandbox), preload, TEMPLATE_EXTRAS, TEMPLATE_CPU_EXTRAS)


def zoo_viewed_env(env: Mapping[str, str], sandbox: SandboxPolicy) -> dict[str, str]:
    """``env`` with the zoo's paths as a sandboxed kernel sees them (its read-only view at
    :data:`ZOO_VIEW`), when the kernel has a root of its own and reads the zoo."""
    hub = env.get("HF_HUB_CACHE", "")
    zoo_dir = sandbox.zoo_dir
    viewed = dict(env)
    if zoo_dir is not None and sandbox.isolation.namespaces != "none" and hub.startswith(zoo_dir.rstrip("/") + "/"):
        # Both names: Optimum reads the legacy one (see ModelZoo.kernel_env).
        for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
            if env.get(name) == hub:
                viewed[name] = ZOO_VIEW + hub[len(zoo_dir.rstrip("/")) :]
    return viewed


@dataclass(frozen=True)
class TemplateAddress:
    """Where a kernel template serves forks (``socket``), and its process (``pid``): what a run's workers
    are told of the template its main process started for all of them."""

    socket: str
    pid: int


class TemplateClient:
    """How a kernel is forked from a template: its socket, the client that asks it, the fork's watcher."""

    socket: Path
    problem: str | None = None

    def ready(self, timeout_s: float = 120.0) -> bool:
        """Whether the template serves forks (waiting for its imports, at most ``timeout_s``)."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop using the template (and stop it, where this process started it)."""

    def client_argv(self, policy: Mapping[str, object], command: list[str], pidfile: Path) -> list[str]:
        """What the kernel manager starts in place of ``command``: a client of this template."""
        return [sys.executable, "-m", "grader.kernel.forked", str(self.socket), str(pidfile), json.dumps(policy), "--", *command]

    @staticmethod
    def watcher_pid(pidfile: Path, client: Any, timeout_s: float) -> int | None:
        """The pid of the forked kernel's watcher (the root of its process tree), once the
        client has written it; None if the client ended first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                return int(pidfile.read_text())
            if client.poll() is not None:
                return None
            time.sleep(0.005)
        return None


class SharedTemplate(TemplateClient):
    """A template another process started and stops (the run's main process, for all its workers)."""

    def __init__(self, address: TemplateAddress) -> None:
        self.address = address
        self.socket = Path(address.socket)

    def ready(self, timeout_s: float = 120.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self.socket.exists():  # it appears once the template accepts (see grader.kernel.template)
            if not _process_exists(self.address.pid):
                self.problem = "it ended before it was ready"
                return False
            if time.monotonic() > deadline:
                self.problem = f"it was not ready after {timeout_s:.0f} s"
                return False
            time.sleep(0.05)
        return True


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class KernelTemplate(TemplateClient):
    """A process that has imported what every kernel imports and forks each kernel from itself
    (see :mod:`grader.kernel.template`), so that a kernel's start costs milliseconds of CPU
    instead of seconds. It starts with the kernels' environment (the zoo as they see it, a home
    of its own) and is stopped by the process that started it (a worker, or a run's main process
    for all its workers); it never runs a notebook's code."""

    def __init__(self, process: subprocess.Popen[str], folder: Path) -> None:
        self.process = process
        self.folder = folder
        self.socket = folder / "template.sock"
        self.problem: str | None = None
        self.address = TemplateAddress(str(self.socket), process.pid)
        self._ready = threading.Event()
        self._answered = threading.Event()
        self._said: list[str] = []  # the last lines of its standard error (drained, so it never blocks)
        threading.Thread(target=self._await_ready, name="kernel-template", daemon=True).start()
        threading.Thread(target=self._drain, name="kernel-template-stderr", daemon=True).start()

    @classmethod
    def start(
        cls, env: Mapping[str, str], preload: tuple[str, ...], extras: tuple[str, ...] = (), cpu_extras: tuple[str, ...] = ()
    ) -> KernelTemplate:
        """Start a template in the background (it imports ``preload``, and ``extras`` where they
        are installed, ``cpu_extras`` too where torch was built for CPUs only, for a few seconds, then says ready)."""
        folder = scratch.mkdtemp("template")  # 0700: the grader's user only
        home = folder / "home"
        home.mkdir()
        process = subprocess.Popen(
            [
                sys.executable,
                "-Xfrozen_modules=off",
                "-m",
                "grader.kernel.template",
            ],
            # One OpenMP/MKL thread while importing, so the template has no thread pool to fork;
            # each kernel sets its own threads after the fork.
            env={**env, "HOME": str(home), "TMPDIR": str(home), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
            cwd=str(home),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )
        assert process.stdin is not None
        # On its standard input, not its command line, which every kernel it forks shows as its own.
        with contextlib.suppress(OSError):  # a template that died at once says why on its standard error
            process.stdin.write(
                json.dumps(
                    {
                        "socket": str(folder / "template.sock"),
                        "preload": list(preload),
                        "extras": list(extras),
                        "cpu_extras": list(cpu_extras),
                    }
                )
                + "\n"
            )
        with contextlib.suppress(OSError):
            process.stdin.close()
        return cls(process, folder)

    def _await_ready(self) -> None:
        assert self.process.stdout is not None
        try:
            line = self.process.stdout.readline()
        except (OSError, ValueError):
            line = ""
        if line.strip() == "ready":
            self._ready.set()
        else:
            self.process.wait()
            time.sleep(0.1)  # its last words, drained by the other thread
            self.problem = self._said[-1] if self._said else f"it exited ({self.process.returncode})"
        self._answered.set()

    def _drain(self) -> None:
        assert self.process.stderr is not None
        with contextlib.suppress(OSError, ValueError):
            for line in self.process.stderr:
                if line.strip():
                    self._said = [*self._said[-19:], line.strip()]

    def ready(self, timeout_s: float = 120.0) -> bool:
        if not self._answered.wait(timeout_s):
            self.problem = f"it was not ready after {timeout_s:.0f} s"
            return False
        return self._ready.is_set() and self.process.poll() is None

    def close(self) -> None:
        """Stop the template (its kernels have watchers of their own) and remove its folder."""
        if self.process.poll() is None:
            self.process.kill()
        with contextlib.suppress(Exception):
            self.process.wait(timeout=10)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        shutil.rmtree(self.folder, ignore_errors=True)
