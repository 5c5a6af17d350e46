"""Kernel templates: a process that has imported torch and transformers and forks each submission's kernel
(:class:`KernelTemplate`, started here, or :class:`SharedTemplate`, a run's, reached by its address)."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from grader import scratch
from grader.kernel.sandbox import SandboxPolicy

ZOO_VIEW = "/llm-grader/zoo"  # where a sandboxed kernel sees the model zoo (one place for every kernel)
# Modules a kernel imports before it answers: what nearly every notebook of the course imports,
# and what the grader's runtime patches. Only ``sys.modules`` changes; no name is bound.
PRELOAD = ("torch", "transformers", "transformers.generation.utils", "transformers.modeling_utils")
# What a kernel template imports besides, where installed: the course's other common imports
# (pandas, matplotlib with its font list, the Agg renderer and figures that every inline plot is drawn with,
# and the tiny models' GPT-2 code), free to a forked kernel, about half a second of CPU to each notebook that imports
# them itself. Not ``matplotlib.pyplot`` or ``matplotlib_inline`` (they hook into the IPython they are first
# imported in, which a template has not got), nor Optimum's ONNX Runtime models or bitsandbytes (importing them
# starts a thread, and a process with threads cannot be forked safely).
TEMPLATE_EXTRAS = (
    "pandas",
    "matplotlib",
    "matplotlib.font_manager",
    "matplotlib.figure",
    "matplotlib.backends.backend_agg",
    "transformers.models.gpt2.modeling_gpt2",
)
# Imported by a template only where torch was built for CPUs alone: bitsandbytes (about a second of CPU to
# each ptq-bnb kernel, its kernels compiled with torch.compile at import) asks torch for GPUs when imported, and
# a process that has started a GPU driver cannot fork a kernel that uses it. It starts no thread on one thread.
TEMPLATE_CPU_EXTRAS = ("bitsandbytes",)
# A template imports with one OpenMP/MKL thread, whatever its kernels are given, so that it has no thread pool to
# fork; each kernel sets its own threads after the fork.
IMPORT_THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


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


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (an ended one not yet reaped by its parent does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


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
            if not _running(self.address.pid):
                from grader.kernel.template import WHY_SUFFIX  # (POSIX-only: the launcher; templates run only there)

                try:  # the template says why beside its socket (grader.kernel.template._refuse)
                    self.problem = Path(str(self.socket) + WHY_SUFFIX).read_text()[:500] or "it ended before it was ready"
                except OSError:
                    self.problem = "it ended before it was ready"
                return False
            if time.monotonic() > deadline:
                self.problem = f"it was not ready after {timeout_s:.0f} s"
                return False
            time.sleep(0.05)
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
            env={**env, "HOME": str(home), "TMPDIR": str(home), **IMPORT_THREADS},
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


def start_template(env: Mapping[str, str], sandbox: SandboxPolicy, preload: tuple[str, ...] = PRELOAD) -> KernelTemplate:
    """A template for kernels with environment ``env`` in ``sandbox``, importing ``preload`` (and the extras)."""
    return KernelTemplate.start(zoo_viewed_env(env, sandbox), preload, TEMPLATE_EXTRAS, TEMPLATE_CPU_EXTRAS)
