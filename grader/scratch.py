"""The temporary folders of a run: named after the run, and swept by the next run when it was killed outright.

A run's processes make folders in the temporary directory (kernels' connection files, the working copies of
submissions, the kernel template's socket, unpacked archives, models built once per run) and remove them when
they are done; the launchers and the template's janitor remove a kernel's when its grader dies. A run killed
with everything it started at once (``kill -9`` of its process group, the OOM killer, a stopped container)
removes nothing. So every run holds a lock for its whole life (``flock`` on
``llm-grader-run-<id>.lock``, held by its main process: the kernel releases it however the process ends; its
workers die with that process), names its folders ``llm-grader-<kind>-<id>-…``, and at its start removes the folders of every earlier run
whose lock is free. Runs that are alive, other users' runs, and folders made outside a run (the library used
directly, tests) are never touched. (Windows has no ``flock``: there a run's folders are not swept.)
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path

RUN_ENV = "LLM_GRADER_RUN"  # the run's id, inherited by its workers (kernels' environments are allow-listed)
PREFIX = "llm-grader-"
LOCK_NAME = re.compile(r"llm-grader-run-([0-9a-f]{8})\.lock")
STAGING = "llm-grader-lock-"  # a lock file before it is locked and renamed into place
STAGING_AGE_S = 600.0  # a staging file this old was left by a run killed in the microseconds before its rename


def run_id() -> str | None:
    """The id of the run this process belongs to, if it belongs to one."""
    run = os.environ.get(RUN_ENV, "")
    return run if re.fullmatch(r"[0-9a-f]{8}", run) else None


def _prefix(kind: str) -> str:
    run = run_id()
    return f"{PREFIX}{kind}-{run}-" if run else f"{PREFIX}{kind}-"


def mkdtemp(kind: str) -> Path:
    """A new private folder in the temporary directory, named after this process's run (see the module)."""
    return Path(tempfile.mkdtemp(prefix=_prefix(kind)))


def temporary_directory(kind: str) -> tempfile.TemporaryDirectory[str]:
    """:func:`mkdtemp`'s folder, removed when the returned object is cleaned up or collected."""
    return tempfile.TemporaryDirectory(prefix=_prefix(kind))


def start_run() -> list[str]:
    """Make this process a run's main process: sweep what killed runs left in the temporary directory (their
    folders' names are returned), then hold a lock of its own until it exits and pass its id to the processes it
    starts. Does nothing in a process that already belongs to a run (a worker, or ``grade`` started by ``grade``),
    and nothing more than sweep where no lock can be made (the run then goes on with plain folder names)."""
    if run_id() is not None or sys.platform == "win32":  # (Windows has no flock: its runs are not swept)
        return []
    import fcntl

    folder = Path(tempfile.gettempdir())
    swept = sweep(folder)
    try:
        descriptor, staging = tempfile.mkstemp(prefix=STAGING, dir=folder)
    except OSError:
        return swept
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        run = secrets.token_hex(4)
        lock = folder / f"llm-grader-run-{run}.lock"
        os.rename(staging, lock)  # visible under its final name only once locked: a sweep never finds it unheld
    except OSError:
        os.close(descriptor)
        with contextlib.suppress(OSError):
            os.unlink(staging)
        return swept
    os.environ[RUN_ENV] = run  # the descriptor stays open, and the lock held, until the process ends
    atexit.register(_end_run, lock, descriptor, os.getpid())
    return swept


def _end_run(lock: Path, descriptor: int, pid: int) -> None:
    """At the main process's normal exit its folders are gone, so its lock goes too (not in a child forked from it
    that runs exit hooks: the run goes on)."""
    if os.getpid() == pid:
        with contextlib.suppress(OSError):
            lock.unlink()
        with contextlib.suppress(OSError):
            os.close(descriptor)


def sweep(folder: Path) -> list[str]:
    """Remove the folders of every run in ``folder`` whose lock no process holds, and those locks; the names of
    what was removed. Only this user's locks are considered; links are never followed."""
    swept: list[str] = []
    if sys.platform == "win32":
        return swept
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            match = LOCK_NAME.fullmatch(entry.name)
            if match is not None:
                swept += _sweep_run(folder, entry.name, match.group(1))
            elif entry.name.startswith(STAGING):
                _remove_stale_staging(Path(entry.path))
    return swept


def _sweep_run(folder: Path, lock_name: str, run: str) -> list[str]:
    import fcntl

    try:
        descriptor = os.open(folder / lock_name, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return []  # gone meanwhile (another run swept it), or a link
    try:
        if os.fstat(descriptor).st_uid != os.getuid():
            return []  # another user's run
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return []  # its run is alive
        swept = []
        for path in folder.glob(f"{PREFIX}*-{run}-*"):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
                swept.append(path.name)
        with contextlib.suppress(OSError):
            os.unlink(folder / lock_name)  # last: a run interrupted here is swept again next time
        return swept
    finally:
        os.close(descriptor)


def _remove_stale_staging(path: Path) -> None:
    with contextlib.suppress(OSError):
        status = path.lstat()
        if status.st_uid == os.getuid() and time.time() - status.st_mtime > STAGING_AGE_S and not path.is_symlink():
            path.unlink()
