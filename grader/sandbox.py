"""Isolation of a student's kernel: what this machine allows, the policy, the resource watch.

A kernel is launched through :mod:`grader.kernel.launcher`, which applies a
:class:`SandboxPolicy` before the kernel's first instruction. :func:`probe_isolation` finds
out once per grader what the machine allows, by launching a trial process the same way:

- ``root``: the grader runs as root; each kernel gets new network and mount namespaces and
  runs as a user of its own (a fresh, unprivileged uid), so it cannot read anything that
  is not readable by everyone, nor write anything outside its working folder, its home and
  the world-writable ``/tmp`` and ``/dev/shm``;
  the course's reference solutions and rubrics, the output folder and the submissions are
  hidden from it besides.
- ``user``: not root, but user namespaces are allowed; the same namespaces and hidden paths,
  but the kernel keeps the grader's user (it could write what that user can write, except the
  model zoo, which it sees read-only), and processes are not counted per kernel.
- ``none``: neither (typically a container that forbids namespaces): the kernel runs as the
  grader's user with its network; every result carries a warning saying so.

Whatever the mode, the kernel's environment is an allow-list, and a :class:`ResourceWatch` in the
grader's process stops a kernel whose processes use more memory than the rubric allows, or are
too many.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import psutil

WARNING_PREFIX = "Sandbox warning: "
KERNEL_UID_BASE = 1_500_000_000  # far above any account or subordinate-uid range
KERNEL_UID_SPAN = 100_000_000
PROBE_TIMEOUT_S = 60.0
ENV_ALLOWED = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES")
Namespaces = Literal["root", "user", "none"]


@dataclass(frozen=True)
class Isolation:
    """What this machine lets the grader do to a kernel, and what it cannot."""

    namespaces: Namespaces
    own_user: bool  # each kernel runs as a fresh unprivileged uid
    warning: str = ""

    @property
    def summary(self) -> str:
        """One line for the instructor's report."""
        if self.namespaces == "root" and self.own_user:
            return "Sandbox: the kernel ran as its own unprivileged user, with no network and the course's files hidden."
        return f"{WARNING_PREFIX}{self.warning}"


@dataclass(frozen=True)
class SandboxPolicy:
    """How kernels of one grading run are isolated and limited."""

    isolation: Isolation
    hidden: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()  # folders inside hidden ones that stay visible (read-only): the kernel's Python
    zoo_dir: str | None = None  # shown read-only inside each kernel's folder
    memory_bytes: int = 4096 * 1024**2
    max_processes: int = 256
    max_file_bytes: int = 512 * 1024**2

    def launcher_policy(self, uid: int | None, give: Iterable[str], zoo_view: str | None) -> dict[str, object]:
        """The JSON the launcher applies for one kernel running as ``uid``, seeing the zoo at ``zoo_view``."""
        policy: dict[str, object] = {
            "namespaces": self.isolation.namespaces,
            "hidden": list(self.hidden),
            "keep": list(self.keep),
            "max_file_bytes": self.max_file_bytes,
        }
        if self.zoo_dir is not None and zoo_view is not None:
            policy["bind_read_only"] = [[self.zoo_dir, zoo_view]]
        if uid is not None:
            policy.update(uid=uid, gid=uid, give=list(give), max_processes=self.max_processes)
        return policy


def launcher_argv(policy: Mapping[str, object], command: list[str]) -> list[str]:
    """``command`` started through the sandbox launcher."""
    return [sys.executable, "-m", "grader.kernel.launcher", json.dumps(policy), "--", *command]


def new_kernel_uid() -> int:
    """A uid no account and no other kernel uses (random in a high range)."""
    return KERNEL_UID_BASE + secrets.randbelow(KERNEL_UID_SPAN)


def _trial(policy: Mapping[str, object], zoo_dir: str | None) -> str | None:
    """Launch a trial process under ``policy``: None if it worked, else why not.

    The trial imports ipykernel and lists the zoo as the kernel will see it.
    """
    with tempfile.TemporaryDirectory(prefix="llm-grader-probe-") as folder:
        view = Path(folder) / "zoo"
        view.mkdir()
        Path(folder).chmod(0o711)
        policy = dict(policy)
        if zoo_dir is not None and policy.get("namespaces") != "none":
            policy["bind_read_only"] = [[zoo_dir, str(view)]]
            readable = [str(view)]
        else:
            readable = [zoo_dir] if zoo_dir is not None else []
        check = "import sys, os, ipykernel\nfor path in sys.argv[1:]: os.listdir(path)"
        command = [sys.executable, "-c", check, *readable]
        try:
            completed = subprocess.run(
                launcher_argv(policy, command), capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, cwd="/"
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return str(error)
    if completed.returncode == 0:
        return None
    lines = completed.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {completed.returncode}"


def probe_isolation(zoo_dir: str | None = None, hidden: Iterable[str] = (), keep: Iterable[str] = ()) -> Isolation:
    """The strongest isolation this machine allows (each mode tried for real, in order).

    ``zoo_dir`` is the model zoo the kernel must be able to read; ``hidden`` and ``keep`` are
    the paths the kernels' policy hides and keeps visible.
    """
    readable = zoo_dir
    view = {"hidden": list(hidden), "keep": list(keep)}
    if os.environ.get("GRADER_NO_SANDBOX"):  # an escape hatch for debugging, said in every result
        return Isolation("none", False, "GRADER_NO_SANDBOX is set: kernels run with the grader's user, files and network.")
    if not sys.platform.startswith("linux") or not hasattr(os, "geteuid"):  # namespaces are Linux's
        return Isolation(
            "none", False, f"kernels run with the grader's user, files and network ({sys.platform} has no namespaces)."
        )
    if os.geteuid() == 0:
        problem = _trial({"namespaces": "root", "uid": new_kernel_uid(), "max_processes": 64, **view}, readable)
        if problem is None:
            return Isolation("root", True)
        if _trial({"namespaces": "root", **view}, readable) is None:
            return Isolation(
                "root",
                False,
                "kernels run as root, without network and with the course's files hidden, but able to write "
                f"anywhere: an unprivileged user could not run this Python or read the models ({problem}).",
            )
        reason = problem
    else:
        if _trial({"namespaces": "user", **view}, readable) is None:
            return Isolation(
                "user",
                False,
                "kernels have no network and the course's files are hidden from them, but they run as the grader's "
                "user and could write that user's files (run the grader as root, or in a disposable container).",
            )
        reason = "user namespaces are not allowed here"
    return Isolation(
        "none",
        False,
        f"kernels run with the grader's user, files and network ({reason}); grade untrusted notebooks "
        "in a disposable machine or container.",
    )


def kernel_env(base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """The kernel's environment: allowed variables of ``base``, then ``extra``."""
    env = {name: base[name] for name in ENV_ALLOWED if name in base}
    env.update(extra)
    return env


def hideable(paths: Iterable[Path], writable: Iterable[Path]) -> tuple[str, ...]:
    """The existing ``paths`` to hide, except those holding a folder the kernel writes in (its
    temporary folders) and those inside another hidden path."""
    needed = [path.resolve() for path in writable]
    kept: set[Path] = set()
    for path in paths:
        with contextlib.suppress(OSError):
            path = path.resolve()
            if path.exists() and not any(item == path or path in item.parents for item in needed):
                kept.add(path)
    return tuple(sorted(str(path) for path in kept if not any(other in path.parents for other in kept)))


def inside(paths: Iterable[Path], hidden: Iterable[str]) -> tuple[str, ...]:
    """Those of ``paths`` that lie inside a hidden path (to be kept visible there)."""
    covers = [Path(path) for path in hidden]
    found = {str(path.resolve()) for path in paths if any(cover in path.resolve().parents for cover in covers)}
    return tuple(sorted(found))


@dataclass
class ResourceWatch:
    """Stops a kernel whose processes together use more than ``limit_bytes`` of memory, or
    that runs more than ``max_processes`` processes at once (a fork bomb).

    The processes are the kernel's tree and, when the kernel has a uid of its own, every process
    of that uid (so a child that left the tree is still counted and still stopped). Memory is
    read as RSS, which counts pages shared by forked children once per child; only when that
    sum passes the limit is it read again as PSS (shared pages split between their users), so
    a notebook with worker processes is not stopped for memory it does not use.
    """

    pid: int
    uid: int | None
    limit_bytes: int
    max_processes: int = 128
    interval_s: float = 0.1
    exceeded: str | None = None  # "memory" or "processes", once the kernel was stopped for it
    peak_bytes: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> ResourceWatch:
        """Watch in a daemon thread until :meth:`stop`."""
        self._thread = threading.Thread(target=self._watch, name=f"resource-watch-{self.pid}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _watch(self) -> None:
        ticks = 0
        escaped: dict[int, psutil.Process] = {}
        while not self._stop.wait(self.interval_s):
            if self.uid is not None and ticks % 10 == 0:  # a scan of every process: not every tick
                escaped = {process.pid: process for process in kernel_processes(-1, self.uid)}
            ticks += 1
            processes = {process.pid: process for process in kernel_processes(self.pid)}
            processes.update({pid: process for pid, process in escaped.items() if process.is_running()})
            if not processes:
                if not psutil.pid_exists(self.pid):
                    return
                continue
            if len(processes) > self.max_processes:
                self._stop_kernel("processes", processes.values())
                return
            used = _memory(processes.values(), "rss")
            if used > self.limit_bytes:
                used = _memory(processes.values(), "pss")
            self.peak_bytes = max(self.peak_bytes, used)
            if used > self.limit_bytes:
                self._stop_kernel("memory", processes.values())
                return

    def _stop_kernel(self, reason: str, processes: Iterable[psutil.Process]) -> None:
        self.exceeded = reason
        kill(processes)
        if self.uid is not None:
            kill_user(self.uid)

    @property
    def message(self) -> str:
        """What the student is told when a limit was hit."""
        if self.exceeded == "processes":
            return f"your notebook ran more than {self.max_processes} processes at once and its kernel was stopped"
        return f"your notebook used more than {self.limit_bytes / 1024**2:.0f} MiB of memory and its kernel was stopped"


def _memory(processes: Iterable[psutil.Process], measure: str) -> int:
    """Bytes the processes use together: ``rss`` (fast) or ``pss`` (exact for shared pages)."""
    total = 0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            info = process.memory_full_info() if measure == "pss" else process.memory_info()
            total += int(getattr(info, measure, info.rss))
    return total


def kernel_processes(pid: int, uid: int | None = None) -> list[psutil.Process]:
    """The kernel process, its descendants and (with ``uid``) every process of that user."""
    found: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.Error, ValueError):
        root = psutil.Process(pid)
        found[root.pid] = root
        for child in root.children(recursive=True):
            found[child.pid] = child
    if uid is not None:
        for process in psutil.process_iter(["uids"]):
            with contextlib.suppress(psutil.Error, TypeError):
                if process.info["uids"].real == uid:
                    found.setdefault(process.pid, process)
    return list(found.values())


def kill(processes: Iterable[psutil.Process]) -> None:
    """SIGKILL each process (gone ones are fine)."""
    for process in processes:
        with contextlib.suppress(psutil.Error, OSError):
            process.send_signal(signal.SIGKILL)


def kill_user(uid: int) -> None:
    """SIGKILL every process of ``uid`` (a kernel's own user: nothing else runs as it)."""
    if uid < KERNEL_UID_BASE:
        raise ValueError(f"refusing to kill the processes of uid {uid}, which is not a kernel's own")
    for _ in range(3):  # a fork bomb may fork between the scan and the kill
        processes = kernel_processes(-1, uid)
        if not processes:
            return
        kill(processes)


def sandbox_notices(notes_of: Iterable[Iterable[str]]) -> list[str]:
    """One notice per distinct sandbox warning in the results' notes, with how many it concerns.

    Each result says how its kernel was isolated; where that is weaker than it should be, the
    instructor is told once, on top of the run's reports, not only inside each result.
    """
    counts: dict[str, int] = {}
    for notes in notes_of:
        for note in notes:
            if note.startswith(WARNING_PREFIX):
                counts[note] = counts.get(note, 0) + 1
    return [f"{note} ({count} submission{'s' if count != 1 else ''} graded so)" for note, count in counts.items()]
