"""Isolation of a student's kernel: what this machine allows, the policy, the resource watch.

A kernel is launched through :mod:`grader.kernel.launcher`, which applies a
:class:`SandboxPolicy` before the kernel's first instruction. :func:`probe_isolation` finds
out once per grader what the machine allows, by launching a trial process the same way:

- ``root``: the grader runs as root; each kernel gets new network, mount and PID namespaces,
  a root of its own built from an allow-list (:func:`kernel_view`: the system's folders and
  this Python's environment, read-only; its own folders; the zoo; private ``/tmp`` and
  ``/dev/shm``), and runs as a user of its own (a fresh, unprivileged uid). Nothing of the
  course, the grader's source, the output or the submissions exists in its view.
- ``user``: not root, but user namespaces are allowed; the same namespaces and view, but the
  kernel keeps the grader's user, and processes are not counted per kernel.
- ``none``: only when asked (``--no-sandbox``, ``GRADER_NO_SANDBOX``; or where a sandbox is not required, as
  in Gradescope's per-submission container): the kernel runs as the grader's user with its files and network;
  every result carries a warning saying so. Where no mode starts and none was asked for, the probe raises
  :class:`SandboxError` with why and how to fix it: the run grades nothing.

Whatever the mode, the kernel's environment is an allow-list, and a :class:`ResourceWatch` in the
grader's process stops a kernel whose processes (and private ``/tmp`` and ``/dev/shm``) use more
memory than the rubric allows, or are too many.
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
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

import psutil

from grader.errors import GraderError
from grader.facts import WARNING_PREFIX, IsolationMode
from grader.reports.results import SubmissionResult

KERNEL_START_PREFIX = "Kernel: "
KERNEL_UID_BASE = 1_500_000_000  # far above any account or subordinate-uid range
KERNEL_UID_SPAN = 100_000_000
PROBE_TIMEOUT_S = 60.0
ENV_ALLOWED = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES")
Namespaces = Literal["root", "user", "none"]


class SandboxError(GraderError):
    """A folder the kernels must not see cannot be hidden from them: the run is refused."""

    exit_code = 3


@dataclass(frozen=True)
class Isolation:
    """What this machine lets the grader do to a kernel, and what it cannot."""

    namespaces: Namespaces
    own_user: bool  # each kernel runs as a fresh unprivileged uid
    warning: str = ""

    @property
    def shortfall(self) -> str:
        """What this isolation lacks, in words ('' when each kernel runs as its own user in namespaces of its own)."""
        return "" if self.namespaces == "root" and self.own_user else self.warning

    @property
    def mode(self) -> IsolationMode:
        """Which row of :data:`PROTECTIONS` this isolation is."""
        if self.namespaces == "root":
            return "own-user" if self.own_user else "root"
        return self.namespaces

    @property
    def summary(self) -> str:
        """One line for the instructor's report."""
        if not self.shortfall:
            return "Sandbox: the kernel ran as its own unprivileged user, with no network and the course's files hidden."
        return f"{WARNING_PREFIX}{self.shortfall}"


@dataclass(frozen=True)
class SandboxPolicy:
    """How kernels of one grading run are isolated and limited."""

    isolation: Isolation
    visible: tuple[str, ...] = ()  # the allow-list: all a kernel sees of the machine (read-only), besides its folders
    masks: tuple[str, ...] = ()  # folders inside visible ones that the kernel must not see (covered)
    zoo_dir: str | None = None  # shown read-only inside each kernel's folder
    memory_bytes: int = 4096 * 1024**2
    max_processes: int = 256
    max_file_bytes: int = 512 * 1024**2

    def launcher_policy(
        self,
        uid: int | None,
        give: Iterable[str],
        zoo_view: str | None,
        new_root: str | None = None,
        writable: Iterable[str] = (),
    ) -> dict[str, object]:
        """The JSON the launcher applies for one kernel running as ``uid``, seeing the zoo at
        ``zoo_view`` and its own folders ``writable`` (removed by the launcher if the grader dies),
        in a new root built at ``new_root``."""
        policy: dict[str, object] = {"namespaces": self.isolation.namespaces, "max_file_bytes": self.max_file_bytes}
        if self.isolation.namespaces != "none" and new_root is not None:
            policy.update(
                own_pids=True,
                new_root=new_root,
                read_only=list(self.visible),
                masks=list(self.masks),
                writable=list(writable),
                cleanup=list(writable),
                tmpfs_bytes=self.memory_bytes,
            )
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
        (Path(folder) / "root").mkdir()
        Path(folder).chmod(0o711)
        policy = dict(policy)
        if policy.get("namespaces") != "none":
            policy.update(own_pids=True, new_root=str(Path(folder) / "root"), writable=[folder])
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


NO_SANDBOX_FIX = (
    "Run the grader as root (in a container: `docker run --cap-add SYS_ADMIN --security-opt seccomp=unconfined "
    "--security-opt apparmor=unconfined`, or `--privileged`), or allow user namespaces "
    "(`sysctl kernel.unprivileged_userns_clone=1`, `sysctl kernel.apparmor_restrict_unprivileged_userns=0`); or, on a "
    "disposable machine that cannot have a sandbox, grade without it by name: `grade --no-sandbox` "
    "(or GRADER_NO_SANDBOX=1), which every result and the summary then state."
)


def probe_isolation(
    zoo_dir: str | None = None, view: KernelView | None = None, asked_none: bool = False, required: bool = True
) -> Isolation:
    """The strongest isolation this machine allows (each mode tried for real, in order).

    ``zoo_dir`` is the model zoo the kernel must be able to read; ``view`` what kernels see. ``asked_none``: the
    instructor asked to grade without the sandbox (or GRADER_NO_SANDBOX is set): nothing is tried. Otherwise, where no
    mode starts, :class:`SandboxError` says why and how to fix it (fail closed), unless not ``required`` (a disposable
    container that may lack the capability: kernels then run unsandboxed, and every result says so).
    """
    readable = zoo_dir
    view = view or kernel_view([])
    shown = {"read_only": list(view.visible), "masks": list(view.masks)}
    if asked_none or os.environ.get("GRADER_NO_SANDBOX"):
        how = "--no-sandbox was given" if asked_none else "GRADER_NO_SANDBOX is set"
        return Isolation("none", False, f"{how}: kernels run with the grader's user, files and network.")
    if not sys.platform.startswith("linux") or not hasattr(os, "geteuid"):  # namespaces are Linux's
        reason = f"{sys.platform} has no Linux namespaces"
    elif os.geteuid() == 0:
        problem = _trial({"namespaces": "root", "uid": new_kernel_uid(), "max_processes": 64, **shown}, readable)
        if problem is None:
            return Isolation("root", True)
        if _trial({"namespaces": "root", **shown}, readable) is None:
            return Isolation(
                "root",
                False,
                "kernels run as root, without network and with the course's files hidden, but able to write "
                f"anywhere: an unprivileged user could not run this Python or read the models ({problem}).",
            )
        reason = f"the grader runs as root, but a sandboxed kernel could not start: {problem}"
    else:
        problem = _trial({"namespaces": "user", **shown}, readable)
        if problem is None:
            return Isolation(
                "user",
                False,
                "kernels have no network and the course's files are hidden from them, but they run as the grader's "
                "user and could write that user's files (run the grader as root, or in a disposable container).",
            )
        reason = f"the grader is not root, and a kernel in a user namespace could not start: {problem}"
    if required:
        raise SandboxError(
            f"The sandbox cannot start on this machine, so nothing was graded: {reason}. Without it, a student's "
            f"notebook would run with the grader's user, files and network (it could read the course's solutions). "
            f"{NO_SANDBOX_FIX}"
        )
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


SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")


@dataclass(frozen=True)
class KernelView:
    """What a kernel sees of the machine: an allow-list, and covers inside it."""

    visible: tuple[str, ...]  # shown read-only at their own paths
    masks: tuple[str, ...]  # folders inside visible ones that stay hidden


def _resolved(paths: Iterable[str | Path]) -> list[Path]:
    found = []
    for path in paths:
        if not str(path):
            continue
        with contextlib.suppress(OSError):
            found.append(Path(os.path.realpath(path)))
    return found


def _within(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies inside it."""
    return path == folder or folder in path.parents


def python_paths() -> list[Path]:
    """The folders this Python needs: its prefixes, its executable's folder, its import path
    and its libraries' path (what a kernel started with this interpreter reads)."""
    essential = [
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
    ]
    return _resolved(essential)


def _optional_paths() -> list[Path]:
    extra = [*sys.path, *os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)]
    return [path for path in _resolved(extra) if path.is_dir()]


def kernel_view(strict: Iterable[Path], soft: Iterable[Path] = (), package: Path | None = None) -> KernelView:
    """The allow-list of what a kernel sees: the system's folders and this Python's environment.

    ``strict`` folders (the course, the output, the submissions, the grader's source) must stay
    hidden, ``soft`` ones (the grader's home, working and temporary folders) are hidden where
    the kernel does not need them; ``package`` (the grader's own package) is covered wherever it
    lies. A folder is never dropped from what is hidden: one that cannot be hidden (it holds
    the system's folders or is the Python environment itself) raises :class:`SandboxError`.
    """
    strict_paths = _resolved(strict)
    # Shared scratch space is never shown: each kernel gets /tmp and /dev/shm of its own.
    forbidden = strict_paths + _resolved([*soft, tempfile.gettempdir(), "/tmp", "/dev", "/proc", "/run"])
    system = [path for path in _resolved(SYSTEM_PATHS) if path.exists()]
    python = python_paths()
    for folder in strict_paths:
        for needed in system + python:
            if needed == folder or (needed in system and folder in needed.parents):
                raise SandboxError(
                    f"{folder} cannot be hidden from the students' kernels: it holds {needed}, which every kernel needs "
                    "(its system or its Python); move the course, the submissions or the output folder elsewhere."
                )
    visible: list[Path] = []
    for path in [*(Path(item) for item in SYSTEM_PATHS if os.path.lexists(item)), *python, *_optional_paths()]:
        optional = path not in python and str(path) not in SYSTEM_PATHS
        if optional and any(_within(folder, path) or _within(path, folder) for folder in forbidden):
            continue  # an import path that holds (or lies in) a hidden folder: the kernel does without it
        visible.append(path)
    kept = sorted(set(visible), key=lambda path: (len(path.parts), str(path)))
    top = [path for path in kept if not any(other != path and other in path.parents for other in kept)]
    covered = [*forbidden, *([package] if package is not None else [])]
    masks = sorted({str(folder) for folder in _resolved(covered) if any(shown in folder.parents for shown in top)})
    for mask in masks:
        for needed in top:
            if Path(mask) in needed.parents:
                raise SandboxError(f"{mask} cannot be hidden from the students' kernels: it holds {needed}, which they need.")
    return KernelView(tuple(str(path) for path in top), tuple(masks))


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
    TREE_TICKS: ClassVar[int] = 5
    USER_TICKS: ClassVar[int] = 10
    scratch: bool = False  # the kernel has private /tmp and /dev/shm (memory), counted in its use
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
        tree: dict[int, psutil.Process] = {}
        while not self._stop.wait(self.interval_s):
            # Finding processes reads every process of the machine (psutil's parent map): the tree is found
            # again every TREE_TICKS ticks and the kernel's user every USER_TICKS; each tick reads the memory
            # of those found (a new process is counted within TREE_TICKS ticks, a growing one within one).
            if self.uid is not None and ticks % self.USER_TICKS == 0:
                escaped = {process.pid: process for process in kernel_processes(-1, self.uid)}
            if ticks % self.TREE_TICKS == 0:
                tree = {process.pid: process for process in kernel_processes(self.pid)}
            ticks += 1
            processes = {pid: process for pid, process in tree.items() if process.is_running()}
            processes.update({pid: process for pid, process in escaped.items() if process.is_running()})
            if not processes:
                if not psutil.pid_exists(self.pid):
                    return
                continue
            if len(processes) > self.max_processes:
                self._stop_kernel("processes", processes.values())
                return
            used = _memory(processes.values(), "rss") + self._scratch_bytes(processes)
            if used > self.limit_bytes:
                used = _memory(processes.values(), "pss") + self._scratch_bytes(processes)
            self.peak_bytes = max(self.peak_bytes, used)
            if used > self.limit_bytes:
                self._stop_kernel("memory", processes.values())
                return

    def _scratch_bytes(self, processes: Mapping[int, psutil.Process]) -> int:
        """Bytes held in the kernel's private /tmp and /dev/shm (tmpfs: memory no process maps)."""
        if not self.scratch:
            return 0
        try:
            machine = os.stat(f"/proc/{self.pid}/root")  # the launcher keeps the machine's root
        except OSError:
            return 0
        for pid in processes:
            total = 0
            try:
                root = os.stat(f"/proc/{pid}/root")
                if (root.st_dev, root.st_ino) == (machine.st_dev, machine.st_ino):
                    continue  # not (yet) in the kernel's own root: its /tmp would be the machine's
                for folder in ("tmp", "dev/shm"):
                    stats = os.statvfs(f"/proc/{pid}/root/{folder}")
                    total += (stats.f_blocks - stats.f_bfree) * stats.f_frsize
            except OSError:
                continue
            return total
        return 0

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


def sandbox_notices(results: Iterable[SubmissionResult], this_run: Container[str] | None = None) -> list[str]:
    """One notice per distinct sandbox warning of the results, with how many it concerns, and how this run started
    its kernels.

    Each result says how its kernel was isolated; where that is weaker than it should be, the
    instructor is told once, on top of the run's reports, not only inside each result. ``this_run``: the ids of the
    submissions this run graded (the others' results were kept from an earlier run; None: all of them).
    """
    counts: dict[str, list[int]] = {}  # warning -> [submissions, of them graded in an earlier run]
    starts: dict[str, int] = {}
    for result in results:
        now = this_run is None or result.submission_id in this_run
        if result.sandbox_warning:
            count = counts.setdefault(result.sandbox_warning, [0, 0])
            count[0] += 1
            count[1] += not now
        if result.kernel_start and now:
            how = result.kernel_start.rstrip(".")
            starts[how] = starts.get(how, 0) + 1
    notices = [
        f"{WARNING_PREFIX}{warning} ({count} submission{'s' if count != 1 else ''} graded so"
        + ("" if not earlier else ", all in an earlier run" if earlier == count else f", {earlier} of them in an earlier run")
        + ")"
        for warning, (count, earlier) in counts.items()
    ]
    if starts:  # how the run started its kernels: forked from a template, or launched (and why)
        notices.append("Kernels: " + "; ".join(f"{how} ({count})" for how, count in starts.items()) + ".")
    return notices


def kernel_start_text(mode: str, why_launched: str | None) -> str:
    """How a result's kernel was started, in words."""
    if mode == "forked":
        return "forked from a template that had imported torch and transformers."
    return f"launched afresh{f' ({why_launched})' if why_launched else ''}."
