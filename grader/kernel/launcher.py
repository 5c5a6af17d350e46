"""Start a student's kernel inside a sandbox, then become it (``exec``).

Run as ``python -m grader.kernel.launcher POLICY_JSON -- KERNEL_ARGV...``, by the kernel
manager, in place of the kernel itself. Before the kernel's first instruction it:

1. enters new namespaces: network (no interface but a loopback that is down, so no network)
   and mounts (a private view of the filesystem); as root directly, otherwise inside a new user
   namespace that maps the grader's own user;
2. hides paths (the course's reference solutions and rubrics, the output folder, other
   submissions, the grader's home): an empty read-only tmpfs over each folder, ``/dev/null``
   over each file; folders the kernel needs inside them (its Python) stay visible, read-only;
3. shows the model zoo, read-only, at a path inside the kernel's own folder (so the kernel's
   user reads it even where the zoo lives in a home folder it may not enter);
4. gives the connection file to the kernel's user, sets resource limits (processes, size of a
   written file, no core dumps), forbids gaining privileges (setuid binaries) and, as root,
   drops to the policy's unprivileged user and group, with no supplementary groups.

Any step that fails stops the launch with a message on stderr (exit status 70): the grader
probed beforehand what this machine allows and asks only for that, so a failure is real.
Standard library only: this runs before the kernel, in the interpreter the kernel will use.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_NO_NEW_PRIVS = 38
EXIT_LAUNCH_FAILED = 70


class LaunchError(Exception):
    """A sandboxing step failed."""


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise LaunchError(f"{what} failed: {os.strerror(errno)} (errno {errno})")


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as handle:
        handle.write(text)


def enter_namespaces(libc: Any, user_namespace: bool) -> None:
    """New network and mount namespaces (inside a new user namespace when not root)."""
    if user_namespace:
        uid, gid = os.getuid(), os.getgid()
        _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET), "unshare(user, mount, network)")
        # Map the grader's user to itself: the kernel keeps its identity, gains nothing outside.
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    else:
        _check(libc.unshare(CLONE_NEWNS | CLONE_NEWNET), "unshare(mount, network)")
    # Mounts made from here on stay in this namespace.
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making mounts private")


def hide(libc: Any, path: str, keep: list[str]) -> None:
    """Cover ``path``: an empty read-only folder (but for the folders in ``keep``, which stay
    visible, read-only, at their place), or an empty file."""
    if os.path.isdir(path):
        # Handles on what stays visible, taken before the cover makes them unreachable.
        handles = [(inside, os.open(inside, os.O_PATH | os.O_DIRECTORY)) for inside in keep]
        flags = MS_NOSUID | MS_NODEV
        _check(libc.mount(b"none", path.encode(), b"tmpfs", flags, b"size=64k,mode=0755"), f"hiding {path}")
        for inside, handle in handles:
            os.makedirs(inside, mode=0o755, exist_ok=True)
            bind_read_only(libc, f"/proc/self/fd/{handle}", inside)
            os.close(handle)
        remount = MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV
        _check(libc.mount(b"none", path.encode(), None, remount, None), f"making the cover of {path} read-only")
    elif os.path.exists(path):
        _check(libc.mount(b"/dev/null", path.encode(), None, MS_BIND, None), f"hiding {path}")


def bind_read_only(libc: Any, source: str, target: str) -> None:
    """Show ``source`` at ``target`` (an existing folder), read-only."""
    _check(libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), f"binding {source}")
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV
    _check(libc.mount(b"none", target.encode(), None, flags, None), f"making {target} read-only")


def _lower(limit: int, value: int) -> None:
    """Lower ``limit`` to ``value`` (never above its current hard limit, which only root may raise)."""
    _, hard = resource.getrlimit(limit)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(limit, (value, value))


def set_limits(policy: dict[str, Any]) -> None:
    """Resource limits the kernel and everything it starts inherit."""
    _lower(resource.RLIMIT_CORE, 0)
    if policy.get("max_file_bytes"):
        _lower(resource.RLIMIT_FSIZE, int(policy["max_file_bytes"]))
    if policy.get("max_processes"):
        # Counted per real user: meaningful only for a user of the kernel's own.
        _lower(resource.RLIMIT_NPROC, int(policy["max_processes"]))


def drop_privileges(libc: Any, uid: int, gid: int) -> None:
    """Become ``uid``/``gid`` for good (no supplementary groups, no way back)."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise LaunchError(f"could not become uid {uid}")


def apply(policy: dict[str, Any]) -> None:
    """Every sandboxing step the policy asks for, in order."""
    libc = _libc()
    namespaces = policy.get("namespaces", "none")
    if namespaces != "none":
        enter_namespaces(libc, user_namespace=namespaces == "user")
        for source, target in policy.get("bind_read_only", []):  # first: a source may be hidden next
            bind_read_only(libc, source, target)
        keep = [str(path) for path in policy.get("keep", [])]
        for path in policy.get("hidden", []):
            hide(libc, path, [inside for inside in keep if inside.startswith(path.rstrip("/") + "/")])
    uid = int(policy["uid"]) if policy.get("uid") is not None else None
    gid = int(policy.get("gid", uid) or 0)
    if uid is not None:
        for path in policy.get("give", []):
            if os.path.exists(path):
                os.chown(path, uid, gid)
    set_limits(policy)
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "forbidding new privileges")
    if uid is not None:
        drop_privileges(libc, uid, gid)


def main(argv: list[str]) -> int:
    """Apply the policy in ``argv[0]``, then exec the command after ``--``."""
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m grader.kernel.launcher POLICY_JSON -- COMMAND...", file=sys.stderr)
        return 2
    policy = json.loads(argv[0])
    command = argv[2:]
    try:
        apply(policy)
    except (LaunchError, OSError, ValueError) as error:
        print(f"the grader's sandbox could not be set up: {error}", file=sys.stderr)
        return EXIT_LAUNCH_FAILED
    try:
        os.execv(command[0], command)
    except OSError as error:
        print(f"the grader's sandbox could not start the kernel {command[0]}: {error}", file=sys.stderr)
    return EXIT_LAUNCH_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
