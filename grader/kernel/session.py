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
import shutil
import sys
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
from grader.kernel.measure import CpuSampler, PauseServer
from grader.kernel.sandbox import ResourceWatch, SandboxPolicy, kill_user, launcher_argv, new_kernel_uid
from grader.kernel.templates import ZOO_VIEW, TemplateClient, zoo_viewed_env

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
            # The uid has no passwd entry: getpass.getuser() reads these first (torch before 2.12 calls it, unguarded,
            # when torch._dynamo is first imported, e.g. by transformers' modeling_utils, and that import then failed).
            env["USER"] = env["LOGNAME"] = f"kernel-{self.uid}"
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
