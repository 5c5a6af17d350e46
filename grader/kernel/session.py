"""A kernel for one submission, from start to shutdown.

One :class:`KernelSession` per submission: a private kernelspec pinned to this interpreter, IPC
transport, a temporary working copy as the working directory, stdin off, started through the sandbox
(launched, or forked from a template). It owns the kernel's process and its life; what runs in it goes
through its two parts: ``session.cells`` runs the notebook (:mod:`grader.kernel.cells`) and
``session.channel`` carries the harness's requests (:mod:`grader.kernel.channel`). The session stays
open after the notebook has run so that the harness can call the student's functions in the same kernel.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Awaitable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Literal, TypeVar

import nbformat
import psutil
import zmq
from jupyter_client.kernelspec import KernelSpecManager

from grader import scratch
from grader.errors import KernelError
from grader.kernel.cells import CellRunner
from grader.kernel.channel import RequestChannel
from grader.kernel.client import TIMEOUT_ENAME, BoundedNotebookClient, PromptKernelManager, ReadyKernelClient
from grader.kernel.measure import CpuSampler, EventStream
from grader.kernel.sandbox import (
    ResourceWatch,
    SandboxPolicy,
    kernel_processes,
    kill,
    kill_user,
    launcher_argv,
    new_kernel_uid,
)
from grader.kernel.templates import ZOO_VIEW, TemplateClient, zoo_viewed_env

LaunchMode = Literal["forked", "launched"]
T = TypeVar("T")

KERNEL_NAME = "llm-grader-python"
MAX_MESSAGE_BYTES = 64 * 1024**2  # the largest message the grader accepts from a kernel (outputs, answers)


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


# The one thread that runs sessions' event loops for callers already inside an event loop (its thread starts at the
# first such call: a process that never makes one, such as a kernel template, has none).
_LOOP_HELPER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernel-loops")


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _process_cpu_s(pid: int) -> float:
    """CPU seconds a process has used (its threads that ended included) and its waited-for children, from
    ``/proc/<pid>/stat`` (0 where unreadable)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return sum(int(value) for value in fields[11:15]) / CLOCK_TICKS
    except (OSError, ValueError, IndexError):
        return 0.0


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
        self._km: PromptKernelManager | None = None
        self._connected = False
        self._closing = threading.Lock()  # a kernel being checked can be stopped from another thread (a run that stops)
        # This kernel's messages go through an event loop of its own, driven by whichever thread uses the session (one
        # at a time: a submission's notebook runs in one thread and its checks in another, see grader.scale.overlap).
        # A ZeroMQ socket registers with the loop it is first used in; used in a thread's own loop, it would stay
        # registered there after it closed, and the socket of a later kernel that got its number would never wake that
        # loop (a notebook that hangs in a cell it has finished).
        self._loop = asyncio.new_event_loop()
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
        # The FIFO the runtime writes each record to as it makes it (None where FIFOs cannot be made: the grader then
        # reads the records from the answers), and the grader's reader of it.
        self.events_path: str | None = None
        self.events: EventStream | None = None
        self.cells = CellRunner(self)
        self.channel = RequestChannel(self)

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
        pauses = self._make_pause_fifos() + self._make_event_fifo()
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
        self._km = PromptKernelManager(
            kernel_name=KERNEL_NAME,
            kernel_spec_manager=spec_manager,
            **transport,
            connection_file=str(connection_file),
            client_factory=ReadyKernelClient,
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
            self.run(self._client.async_start_new_kernel(cwd=str(self.workdir), env=env))
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

    def _make_event_fifo(self) -> tuple[Path, ...]:
        """The FIFO the runtime streams its records to, in the kernel's runtime folder, opened here (without blocking)
        and read from now on; () where FIFOs cannot be made."""
        if not hasattr(os, "mkfifo"):
            return ()
        path = self._runtime_dir / "events"
        try:
            os.mkfifo(path, 0o600)
            fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return ()
        self.events = EventStream(fd)
        self.events_path = str(path)
        return (path,)

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

    @property
    def pause_fds(self) -> tuple[int, int] | None:
        """The grader's ends of the pause FIFOs (request, reply), or None where there are none."""
        return self._pause_fds

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
        client = self.client()
        client.startup_timeout = int(self.startup_timeout)
        try:
            self.run(client.async_start_new_kernel_client())
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
        with self._closing:
            if self.resource_watch is not None:
                self.resource_watch.stop()
            if self._km is not None:
                km = self._km
                self._km = None
                # Shutting down a dying kernel can fail in many ways; it is gone either way.
                with contextlib.suppress(Exception):
                    if self.run(km.is_alive()):
                        self.run(km.shutdown_kernel(now=True))
                with contextlib.suppress(Exception):
                    self.run(km.cleanup_resources())
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
            if self.events is not None:
                self.events.close()
                with contextlib.suppress(OSError):
                    os.close(self.events.fd)
            shutil.rmtree(self._runtime_dir, ignore_errors=True)
            if not self._loop.is_closed():
                self._loop.close()

    def kill(self) -> None:
        """SIGKILL the kernel's processes (and its client's, where it was forked), touching none of the grader's
        sockets to it: safe from another thread than the one using the session, whose requests then find the kernel
        gone, and which closes the session itself."""
        km = self._km
        process = getattr(km.provisioner, "process", None) if km is not None else None
        pids = [pid for pid in (self.root_pid, process.pid if process is not None else None) if pid is not None]
        kill([found for pid in pids for found in kernel_processes(pid, self.uid)])

    def cpu_seconds(self) -> tuple[float, float] | None:
        """CPU seconds the kernel's process tree has used so far, and those plus the seconds its threads have waited on
        a run queue to run, read by the grader from /proc (None when unknown).

        Evidence from outside the kernel: what a notebook does to its own clocks and records cannot change it.
        Each live thread's ``schedstat`` (nanoseconds: ran, waited to run), summed; a thread that ended no longer
        counts, so two readings bound from below what ran between them. A thread that a busy machine starves waits on
        a run queue meanwhile; one that sleeps does neither.
        """
        if self.root_pid is None:
            return None
        try:
            root = psutil.Process(self.root_pid)
            pids = [root.pid, *(child.pid for child in root.children(recursive=True))]
        except psutil.Error:
            return None
        try:
            os.listdir(f"/proc/{root.pid}/task")
        except OSError:
            return None  # no /proc here (not Linux): not evidence, rather than zero
        ran_s = waited_s = 0.0
        for pid in pids:
            live_ns = live_waited_ns = 0
            with contextlib.suppress(OSError):
                for task in os.listdir(f"/proc/{pid}/task"):
                    with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{pid}/task/{task}/schedstat") as stat:
                        ran, waited = stat.read().split()[:2]
                        live_ns, live_waited_ns = live_ns + int(ran), live_waited_ns + int(waited)
            # The process's own totals also hold the threads that ended (a thread pool's worker, a streamer's
            # generate) and the children it waited for; in clock ticks, so the finer live sum wins while it is larger.
            ran_s += max(live_ns / 1e9, _process_cpu_s(pid))
            waited_s += live_waited_ns / 1e9
        return ran_s, ran_s + waited_s

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
        """A sampler of the kernel's threads' CPU time against the grader's clock (use as a context manager)."""
        return CpuSampler(self.kernel_pid())

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
            return bool(self.run(self._km.is_alive()))
        except Exception:
            return False

    def mark_dead(self, reason: str) -> None:
        """Stop the kernel, saying why (or the resource watch's reason, where it stopped it): later calls get that."""
        if self.stopped_by_watch and self.resource_watch is not None:
            reason = self.resource_watch.message
        self.dead_reason = reason
        if self._km is not None:
            with contextlib.suppress(Exception):
                self.run(self._km.shutdown_kernel(now=True))

    def answers_within(self, seconds: float) -> bool:
        """Whether the kernel answers a kernel_info request within ``seconds`` (not stuck)."""
        client = self.client()

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
            return bool(self.run(ask()))
        except Exception:
            return False

    async def km_alive(self) -> bool:
        """Whether the kernel process lives (asked from within the event loop of a request)."""
        return self._km is not None and bool(await self._km.is_alive())

    def interrupt(self) -> None:
        """Interrupt what the kernel runs (SIGINT, or the kernel's interrupt request)."""
        if self._km is not None:
            with contextlib.suppress(Exception):
                self.run(self._km.interrupt_kernel())

    def run(self, work: Awaitable[T]) -> T:
        """Run ``work`` (a coroutine of this kernel's messages) to its end in the session's own event loop."""
        if self._loop.is_closed():
            if isinstance(work, Coroutine):
                work.close()
            raise KernelError("the kernel session was used after it was closed")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._loop.run_until_complete(work)
        # The caller runs inside an event loop of its own (Playwright's synchronous API, say), where another cannot run:
        # the session's loop runs in a helper thread that lives as long as the process (a kernel started from a thread
        # is told to die with it).
        return _LOOP_HELPER.submit(self._loop.run_until_complete, work).result()

    def client(self) -> BoundedNotebookClient:
        """The notebook client connected to this kernel (its cells and requests go through it)."""
        if self._client is None:
            raise KernelError("the kernel session was used before it started")
        return self._client
