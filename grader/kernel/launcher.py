"""Start a student's kernel inside a sandbox, then become it (``exec``).

Run as ``python -m grader.kernel.launcher POLICY_JSON -- KERNEL_ARGV...``, by the kernel
manager, in place of the kernel itself. Before the kernel's first instruction it:

1. enters new namespaces: network (no interface but a loopback that is down, so no network),
   processes (the kernel is process 1 of its own PID namespace: it sees no other process, and
   everything it starts dies with it) and mounts; as root directly, otherwise inside a new user
   namespace that maps the grader's own user;
2. builds a new root from an allow-list, then ``pivot_root``\\s into it: read-only binds of the
   system's folders and of the Python environment the kernel needs, its working folder and
   session folder (read-write), the model zoo (read-only), private ``/tmp`` and ``/dev/shm``
   (tmpfs of the policy's size, gone with the kernel), a few device nodes and a ``/proc`` of its
   own PID namespace. Nothing else of the machine exists there; folders the grader must hide
   but that lie inside an allowed one (its own package, say) are covered by empty folders;
3. gives the connection file to the kernel's user, sets resource limits (processes, size of a
   written file, no core dumps), forbids gaining privileges (setuid binaries) and, as root,
   drops to the policy's unprivileged user and group, with no supplementary groups, and
   forbids new user namespaces (seccomp), in which it could mount what nothing counts;
4. stays behind as the kernel's parent (outside its PID namespace) and kills the kernel's whole
   namespace, and removes the session's folders, as soon as the grader's process that started
   it is gone, however it ended (``kill -9`` included). The kernel itself gets ``SIGKILL`` if
   this parent dies (``PR_SET_PDEATHSIG``).

Any step that fails stops the launch with a message on stderr (exit status 70): the grader
probed beforehand what this machine allows and asks only for that, so a failure is real.
Standard library only: this runs before the kernel, in the interpreter the kernel will use.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import json
import os
import platform
import resource
import shutil
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
# (audit architecture, clone, unshare, clone3) for the seccomp filter that forbids new user namespaces
SECCOMP_ARCH = {"x86_64": (0xC000003E, 56, 272, 435), "aarch64": (0xC00000B7, 220, 97, 435)}
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217}
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri")
EXIT_LAUNCH_FAILED = 70
WATCH_INTERVAL_S = 0.2


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


def _mount(libc: Any, source: str | None, target: str, kind: str | None, flags: int, data: str | None, what: str) -> None:
    encoded = [value.encode() if value is not None else None for value in (source, target, kind, data)]
    _check(libc.mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]), what)


def enter_namespaces(libc: Any, user_namespace: bool, own_pids: bool) -> None:
    """New network, mount and (with ``own_pids``, for the next child) PID namespaces, inside a
    new user namespace when not root."""
    pids = CLONE_NEWPID if own_pids else 0
    if user_namespace:
        uid, gid = os.getuid(), os.getgid()
        _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | pids), "unshare(user, mount, network, pid)")
        # Map the grader's user to itself: the kernel keeps its identity, gains nothing outside.
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    else:
        _check(libc.unshare(CLONE_NEWNS | CLONE_NEWNET | pids), "unshare(mount, network, pid)")
    # Mounts made from here on stay in this namespace.
    _mount(libc, "none", "/", None, MS_REC | MS_PRIVATE, None, "making mounts private")


def _locked_flags(path: str) -> int:
    """The flags of the mount holding ``path`` that a bind's remount must keep (inside a user
    namespace the kernel refuses a remount that would drop them)."""
    kept = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME
    return os.statvfs(path).f_flag & kept


def bind(libc: Any, source: str, target: str, read_only: bool, recursive: bool = True) -> None:
    """Show ``source`` (with what is mounted below it, if ``recursive``) at ``target``; read-only
    if asked, below too."""
    _mount(libc, source, target, None, MS_BIND | (MS_REC if recursive else 0), None, f"binding {source}")
    if not read_only:
        return
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV
    for mount_point in [target, *_mounts_below(target)]:
        _mount(libc, None, mount_point, None, flags | _locked_flags(mount_point), None, f"making {mount_point} read-only")


def _mounts_below(target: str) -> list[str]:
    """Mount points strictly below ``target`` (from this process's mount table)."""
    prefix = target.rstrip("/") + "/"
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as table:
        for line in table:
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(prefix):
                found.append(point)
    return found


def _mirror(root: str, path: str, is_dir: bool) -> str:
    """Create ``path`` (a folder or an empty file) and its parents under ``root``; its new name."""
    target = root + path
    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
    if is_dir:
        os.makedirs(target, mode=0o755, exist_ok=True)
    elif not os.path.lexists(target):
        open(target, "w").close()
    return target


def build_root(libc: Any, policy: dict[str, Any]) -> None:
    """Make the allow-listed view of the filesystem under ``policy["new_root"]`` and enter it."""
    root = str(policy["new_root"])
    tmpfs_bytes = int(policy.get("tmpfs_bytes", 64 * 1024**2))
    _mount(libc, "none", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755", "creating the new root")
    # The private /tmp first: what is shown below it (a Python environment under the machine's /tmp) is bound on top.
    private = f"size={tmpfs_bytes},mode=1777"
    _mount(libc, "none", _mirror(root, "/tmp", True), "tmpfs", MS_NOSUID | MS_NODEV, private, "creating /tmp")
    for path in policy.get("read_only", []):
        if os.path.islink(path):  # /bin -> usr/bin on a merged /usr
            _mirror(root, os.path.dirname(path), True)
            os.symlink(os.readlink(path), root + path)
        elif os.path.exists(path):
            bind(libc, path, _mirror(root, path, os.path.isdir(path)), read_only=True)
    dev = _mirror(root, "/dev", True)
    _mount(libc, "none", dev, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755", "creating /dev")
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            bind(libc, f"/dev/{name}", _mirror(root, f"/dev/{name}", False), read_only=False, recursive=False)
    for pattern in GPU_DEVICES:
        for path in glob.glob(pattern):
            bind(libc, path, _mirror(root, path, os.path.isdir(path)), read_only=False)
    for name, link in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1")):
        os.symlink(link, f"{dev}/{name}")
    os.symlink("/proc/self/fd/2", f"{dev}/stderr")
    _mount(libc, "none", _mirror(root, "/dev/shm", True), "tmpfs", MS_NOSUID | MS_NODEV, private, "creating /dev/shm")
    covers = []
    for path in policy.get("masks", []):
        target = root + path
        if os.path.isdir(target):
            _mount(libc, "none", target, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755", f"hiding {path}")
            covers.append(target)
        elif os.path.exists(target):
            _mount(libc, "/dev/null", target, None, MS_BIND, None, f"hiding {path}")
    for path in policy.get("writable", []):  # not what is mounted below: the new root may be
        bind(libc, path, _mirror(root, path, True), read_only=False, recursive=False)
    for source, view in policy.get("bind_read_only", []):
        bind(libc, source, _mirror(root, view, True), read_only=True)
    if policy.get("own_pids"):
        _mount(libc, "proc", _mirror(root, "/proc", True), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None, "mounting /proc")
    for target in [*covers, dev]:
        _mount(libc, None, target, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None, f"sealing {target}")
    pivot_root(libc, root)


def pivot_root(libc: Any, root: str) -> None:
    """Make ``root`` this mount namespace's root and let go of the old one."""
    number = SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise LaunchError(f"pivot_root's system call number is not known on {platform.machine()}")
    os.chdir(root)
    _check(libc.syscall(number, b".", b"."), "pivot_root")  # the old root now lies below the new one
    _check(libc.umount2(b".", MNT_DETACH), "detaching the old root")
    os.chdir("/")
    _mount(libc, None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None, "making the new root read-only")


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def forbid_user_namespaces(libc: Any) -> None:
    """A seccomp filter: no ``clone``/``unshare`` with ``CLONE_NEWUSER`` (``clone3``, whose flags a
    filter cannot read, says ENOSYS and the C library falls back to ``clone``), no system call
    of another ABI. In a user namespace of its own a kernel could mount a tmpfs that nothing
    sizes or counts, or reach kernel code that only root should."""
    known = SECCOMP_ARCH.get(platform.machine())
    if known is None:
        raise LaunchError(f"no seccomp filter is known for {platform.machine()}")
    arch, clone, unshare, clone3 = known
    load, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, enosys, eperm = 0x7FFF0000, 0x00050000 | 38, 0x00050000 | 1
    program = [
        (load, 0, 0, 4),  # the architecture
        (jeq, 0, 9, arch),
        (load, 0, 0, 0),  # the system call's number
        (jge, 7, 0, 0x40000000),  # x32
        (jeq, 5, 0, clone3),
        (jeq, 1, 0, unshare),
        (jeq, 0, 2, clone),
        (load, 0, 0, 16),  # its flags (first argument, low 32 bits)
        (jset, 2, 0, CLONE_NEWUSER),
        (ret, 0, 0, allow),
        (ret, 0, 0, enosys),
        (ret, 0, 0, eperm),
    ]
    filters = (_SockFilter * len(program))(*(_SockFilter(*instruction) for instruction in program))
    fprog = _SockFprog(len(program), filters)
    _check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "installing the seccomp filter")


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


def drop_privileges(uid: int, gid: int) -> None:
    """Become ``uid``/``gid`` for good (no supplementary groups, no way back)."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise LaunchError(f"could not become uid {uid}")


def become_kernel(libc: Any, policy: dict[str, Any]) -> None:
    """The steps taken in the process that becomes the kernel (inside its PID namespace)."""
    namespaces = policy.get("namespaces", "none")
    cwd = os.getcwd()
    if namespaces != "none":
        if not policy.get("new_root") or not policy.get("own_pids"):
            # Without a root of its own the kernel would see the whole machine: refuse.
            raise LaunchError("the policy gives the kernel no root or PID namespace of its own")
        # A mount namespace of the kernel's own, so that the launcher keeps the machine's view.
        _check(libc.unshare(CLONE_NEWNS), "unshare(mount)")
        build_root(libc, policy)
        os.chdir(cwd)
    uid = int(policy["uid"]) if policy.get("uid") is not None else None
    gid = int(policy.get("gid", uid) or 0)
    if uid is not None:
        for path in policy.get("give", []):
            if os.path.exists(path):
                os.chown(path, uid, gid)
    set_limits(policy)
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "forbidding new privileges")
    if uid is not None:
        drop_privileges(uid, gid)
    if namespaces != "none":
        forbid_user_namespaces(libc)
    if policy.get("own_pids"):
        # After the change of user (which clears it): die with the launcher that waits for us.
        _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "asking to die with the launcher")
    keep_visible_import_path()


def keep_visible_import_path() -> None:
    """Keep in ``PYTHONPATH`` only the folders the kernel can see now: the grader's own import path (a ``pip install
    --target`` environment) reaches the kernel, the folders hidden from it (the grader's checkout) are not named."""
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    visible = [entry for entry in entries if entry and os.path.isdir(entry)]
    if visible:
        os.environ["PYTHONPATH"] = os.pathsep.join(visible)
    else:
        os.environ.pop("PYTHONPATH", None)


def watch_kernel(child: int, grader_alive: Callable[[], bool], cleanup: list[str]) -> int:
    """Wait for the kernel (``child``); kill its namespace once ``grader_alive`` says the grader's
    side (the process that started the launch) is gone.

    Returns the exit status to pass on. An interrupt (SIGINT) is the kernel's, not ours; a
    SIGTERM is passed on to the kernel.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda signum, frame: _kill_quietly(child, signal.SIGTERM))
    while True:
        try:
            pid, status = os.waitpid(child, os.WNOHANG)
        except ChildProcessError:
            return EXIT_LAUNCH_FAILED
        if pid == child:
            if os.WIFSIGNALED(status):
                return 128 + os.WTERMSIG(status)
            return os.WEXITSTATUS(status)
        if not grader_alive():  # nothing may outlive the grader
            _kill_quietly(child, signal.SIGKILL)  # process 1 of the namespace: every process in it dies
            for path in cleanup:
                shutil.rmtree(path, ignore_errors=True)
            return EXIT_LAUNCH_FAILED
        time.sleep(WATCH_INTERVAL_S)


def signal_when_parent_ends(signum: int) -> bool:
    """Have the system send ``signum`` to this process when its parent ends; whether the parent
    was still there once that was asked (if not, the signal will never come)."""
    parent = os.getppid()
    _check(_libc().prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0), "asking to be signalled when the parent ends")
    return os.getppid() == parent


def die_with_parent() -> None:
    """Have the system kill this process (SIGKILL) when its parent ends; end now if it already has."""
    if not signal_when_parent_ends(signal.SIGKILL):
        os._exit(EXIT_LAUNCH_FAILED)


def _kill_quietly(pid: int, signum: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signum)


def apply(
    policy: dict[str, Any],
    grader_alive: Callable[[], bool] | None = None,
    on_started: Callable[[int], None] | None = None,
) -> int | None:
    """Every sandboxing step the policy asks for, in order.

    Returns None in the process that is to become the kernel, or the exit status for the
    launcher that stayed behind to watch it. The watcher kills the kernel once ``grader_alive``
    turns false (by default: once this process's parent, the grader, is gone), and calls
    ``on_started`` with the kernel's pid once its sandbox is set up.
    """
    libc = _libc()
    namespaces = policy.get("namespaces", "none")
    if grader_alive is None:
        grader = os.getppid()

        def grader_alive() -> bool:
            return os.getppid() == grader  # reparented: the grader died

    if namespaces != "none":
        enter_namespaces(libc, user_namespace=namespaces == "user", own_pids=bool(policy.get("own_pids")))
    if namespaces != "none" and policy.get("own_pids"):
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(read)
            try:
                become_kernel(libc, policy)
            except (LaunchError, OSError, ValueError) as error:
                os.write(write, str(error).encode(errors="replace")[:4000])
                os._exit(EXIT_LAUNCH_FAILED)
            os.close(write)  # (close-on-exec anyway) an empty pipe: the setup worked
            return None
        os.close(write)
        problem = b""
        while chunk := os.read(read, 4096):
            problem += chunk
        os.close(read)
        if problem:
            os.waitpid(child, 0)
            raise LaunchError(problem.decode(errors="replace"))
        if on_started is not None:
            on_started(child)
        return watch_kernel(child, grader_alive, [str(path) for path in policy.get("cleanup", [])])
    become_kernel(libc, policy)
    return None


def main(argv: list[str]) -> int:
    """Apply the policy in ``argv[0]``, then exec the command after ``--``."""
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m grader.kernel.launcher POLICY_JSON -- COMMAND...", file=sys.stderr)
        return 2
    policy = json.loads(argv[0])
    command = argv[2:]
    try:
        status = apply(policy)
    except (LaunchError, OSError, ValueError) as error:
        print(f"the grader's sandbox could not be set up: {error}", file=sys.stderr)
        return EXIT_LAUNCH_FAILED
    if status is not None:
        return status
    try:
        os.execv(command[0], command)
    except OSError as error:
        print(f"the grader's sandbox could not start the kernel {command[0]}: {error}", file=sys.stderr)
    return EXIT_LAUNCH_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
