"""A kernel template: a process that has imported what every kernel imports, and forks kernels.

Run as ``python -Xfrozen_modules=off -m grader.kernel.template`` by a run's main process for all its
workers, or by a grader that grades alone (see :class:`grader.kernel.templates.KernelTemplate`), with the kernels' environment and, on its standard
input, one line ``{"socket": SOCKET, "preload": [MODULE, ...], "extras": [MODULE, ...], "cpu_extras": [MODULE, ...]}``.
It imports the modules of ``preload``, those of ``extras`` that are installed (and of ``cpu_extras``, where
torch was built for CPUs only), and ipykernel (about 4 s of CPU that a launched kernel
pays each time), starts no thread, reads nothing of the course, the submissions or the seed,
prints ``ready`` and then serves fork requests on the Unix socket ``SOCKET`` (in a folder only
the grader's user can enter; the socket appears under that name once it accepts).

A request comes from :mod:`grader.kernel.forked`, which the kernel manager starts in place of
the kernel. For each request the template forks a child that never returns to it, and the
template never runs anything but imports and forks. The child:

1. starts a session of its own, and enters the sandbox exactly as the launcher does
   (:func:`grader.kernel.launcher.apply`: namespaces, a new root, limits, its own user, the
   seccomp filter), *before* anything of the submission exists in it;
2. stays behind as the kernel's watcher, outside its PID namespace: it tells the client the
   kernel's pid, kills the kernel's namespace (and removes the session's folders) as soon as
   the client is gone, however it ended, and passes the kernel's exit status on;
3. in the kernel itself (process 1 of the new PID namespace): takes the client's standard
   streams and environment, the session's working folder, fresh random seeds and the threads
   the environment asks for, forgets the template's modules and request, and serves ipykernel
   on the connection file the kernel manager wrote.

A child is used for one kernel only; the template stays single-threaded, so a fork copies no
lock held by another thread.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import shutil
import signal
import socket
import sys
import threading
import time
from typing import Any

from grader.kernel import launcher

MAX_REQUEST_BYTES = 1 << 20
READY = "ready"
WHY_SUFFIX = ".why"  # beside the socket: why a template ended before it served (read by the run's workers)
WHY_KEPT_S = 10.0  # how long that file outlives the template


# Threads that may run beside a fork: jemalloc's background purger (a jemalloc linked into torch's or pyarrow's
# libraries, or preloaded by the machine's image, starts it at the first allocation; seen on an H100 image) takes
# every allocator lock in its own pthread_atfork handlers, and the child starts its own again when it needs one.
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})


def _threads() -> int:
    """Threads of this process that a fork cannot survive, the main one included, as the operating system counts
    them (a thread in :data:`FORK_SAFE_THREADS` is not counted)."""
    names = _thread_names()
    if names:
        return sum(name not in FORK_SAFE_THREADS for name in names) or 1
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _thread_names() -> list[str]:
    """The operating system's names of this process's threads (native ones too: what started a thread at import)."""
    names = []
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError), open(f"/proc/self/task/{task}/comm") as comm:
                names.append(comm.read().strip())
    return names


def _refuse(socket_path: str, why: str) -> int:
    """Say why this template will serve no fork: on standard error (for the process that started it) and
    beside its socket (for the run's workers, which only share its address)."""
    print(why, file=sys.stderr, flush=True)
    with contextlib.suppress(OSError), open(socket_path + WHY_SUFFIX, "w") as file:
        file.write(why)
    return launcher.EXIT_LAUNCH_FAILED


def _client_alive(pid: int) -> Any:
    """A test of whether process ``pid`` (the kernel's client) still exists."""
    try:
        handle = os.pidfd_open(pid)
    except (AttributeError, OSError):
        handle = None
    if handle is None:

        def exists() -> bool:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True

        return exists

    def alive() -> bool:
        readable, _, _ = select.select([handle], [], [], 0)
        return not readable  # a process's pidfd becomes readable when it ends

    return alive


def _send(connection: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        connection.send(json.dumps(message).encode())


def _serve_kernel(argv: list[str], env: dict[str, str], cwd: str) -> int:
    """Become the kernel: what ``python -m ipykernel_launcher ARGV`` does, in this process."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # What the template imported was imported with the template's folders; the kernel's own
    # temporary folder and search path are the session's, as in a launched kernel.
    import tempfile

    tempfile.tempdir = None
    sys.path[0] = cwd
    for name in [name for name in sys.modules if name == "grader" or name.startswith("grader.")]:
        del sys.modules[name]
    _fresh_random_state()
    if "torch" in sys.modules:  # the template imported with one thread: the kernel's own count now
        threads = env.get("OMP_NUM_THREADS", "")
        sys.modules["torch"].set_num_threads(int(threads) if threads.isdigit() else len(os.sched_getaffinity(0)))
    # ipykernel reads these two when it is imported (by the template, before any kernel manager
    # set them): give them to it as a launched kernel would have had them.
    handles = (("parent_handle", "JPY_PARENT_PID"), ("interrupt", "JPY_INTERRUPT_EVENT"))
    given = [f"--IPKernelApp.{trait}={env[name]}" for trait, name in handles if env.get(name, "").isdigit()]
    sys.argv = ["ipykernel_launcher", *argv, *given]
    from ipykernel import kernelapp

    try:
        kernelapp.launch_new_instance()
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    return 0


def _fresh_random_state() -> None:
    """Every kernel gets its own seeds, as a launched one would (a fork copies the template's)."""
    import random

    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.seed()


def _child(listener: socket.socket, connection: socket.socket, payload: list[bytes], fds: list[int]) -> int:
    """The forked child: the watcher's exit status, or the kernel's (``payload`` holds the
    request, and is emptied)."""
    listener.close()
    os.setsid()  # signals to the grader's process groups are not the kernel's
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    request = json.loads(payload.pop())
    argv, env, cwd = list(request["argv"]), dict(request["env"]), str(request["cwd"])
    policy = dict(request["policy"])
    alive = _client_alive(int(request["client"]))
    del request

    def started(kernel: int) -> None:
        _send(connection, {"kernel": kernel, "watcher": os.getpid()})

    os.chdir(cwd)  # the launcher builds the kernel's root around its working folder
    try:
        status = launcher.apply(policy, grader_alive=alive, on_started=started)
    except (launcher.LaunchError, OSError, ValueError) as error:
        _send(connection, {"error": f"the grader's sandbox could not be set up: {error}"})
        return launcher.EXIT_LAUNCH_FAILED
    if status is not None:  # the watcher: the kernel has ended
        _send(connection, {"exit": status})
        return status
    # The kernel.
    connection.close()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(3, 1 << 16)  # nothing of the template's is passed on
    del policy, alive, fds
    return _serve_kernel(argv, env, cwd)


def serve(listener: socket.socket) -> None:
    """Fork a child for each request, forever (until the process that started the template is gone)."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the system
    while True:
        connection, _ = listener.accept()
        try:
            received = socket.recv_fds(connection, MAX_REQUEST_BYTES, 3)
        except OSError:
            connection.close()
            continue
        # The request (the policy names what the sandbox hides) is held in a list the child
        # empties: this frame stays on the kernel's stack, and must not keep it.
        payload, fds = [received[0]], received[1]
        del received
        if len(fds) != 3 or _threads() != 1:
            why = "a template with threads cannot fork safely" if _threads() != 1 else "no standard streams"
            _send(connection, {"error": f"the kernel template cannot start this kernel: {why}"})
        elif os.fork() == 0:
            status = launcher.EXIT_LAUNCH_FAILED
            try:
                status = _child(listener, connection, payload, fds)
            except BaseException as error:  # never return into the template's loop
                with contextlib.suppress(Exception):
                    print(f"the grader's kernel template failed: {type(error).__name__}: {error}", file=sys.stderr)
            finally:
                for stream in (sys.stdout, sys.stderr):
                    with contextlib.suppress(Exception):
                        stream.flush()
                os._exit(status)
        for fd in fds:
            os.close(fd)
        connection.close()


def _leave_nothing_behind(folder: str) -> None:
    """Fork a janitor that removes the template's folder (its socket) when the template ends,
    however it ends: the template dies with the process that started it, by SIGKILL, and cannot clean up itself."""
    if os.fork() != 0:
        return
    try:
        # Not the template's standard output and error: whoever reads them would wait for the janitor to end.
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        if launcher.signal_when_parent_ends(signal.SIGTERM):
            signal.sigwait({signal.SIGTERM})
        with contextlib.suppress(OSError):
            if any(name.endswith(WHY_SUFFIX) for name in os.listdir(folder)):
                time.sleep(WHY_KEPT_S)  # the run's workers, polling for the template, read why it ended first
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        os._exit(0)


def _cpu_only_torch() -> bool:
    """Whether the imported torch was built for no GPU at all: then a module that asks torch for GPUs when
    imported (bitsandbytes does) cannot start a GPU driver in the template, which no forked kernel could use."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    xpu = getattr(torch, "xpu", None)
    return torch.version.cuda is None and torch.version.hip is None and not (xpu is not None and xpu._is_compiled())


def main() -> int:
    """Read where to listen and what to import, import, say ready, serve."""
    try:  # from standard input, not the command line, which every kernel it forks shows as its own
        order = json.loads(sys.stdin.readline())
        socket_path, preload = str(order["socket"]), [str(module) for module in order["preload"]]
    except (ValueError, KeyError, TypeError) as error:
        print(
            f'usage: echo \'{{"socket": PATH, "preload": [MODULE, ...]}}\' | python -m grader.kernel.template ({error})',
            file=sys.stderr,
        )
        return 2
    launcher.die_with_parent()
    _leave_nothing_behind(os.path.dirname(os.path.abspath(socket_path)))
    try:
        for module in preload:
            importlib.import_module(module)
        extras = [str(module) for module in order.get("extras", [])]
        if _cpu_only_torch():
            extras += [str(module) for module in order.get("cpu_extras", [])]
        for module in extras:
            with contextlib.suppress(ImportError):  # not installed: the notebook imports it, or not
                importlib.import_module(module)
        importlib.import_module("ipykernel.kernelapp")
    except Exception as error:
        return _refuse(socket_path, f"importing what kernels import failed: {type(error).__name__}: {error}")
    if _threads() != 1:
        names = ", ".join(sorted(set(_thread_names()) - FORK_SAFE_THREADS))
        return _refuse(socket_path, f"it has {_threads()} threads after its imports ({names}): it cannot fork safely")
    # What was imported lives as long as every kernel: the collector of a kernel need not walk it
    # again at each full collection (about 0.1 s of CPU each, with torch and transformers loaded),
    # and a fork shares its pages rather than copying them as the collector touches them.
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(socket_path + ".binding")
    listener.listen(16)
    # The socket appears under its name only once it accepts: a worker that did not start the
    # template (it shares the run's) takes its presence as "ready".
    os.rename(socket_path + ".binding", socket_path)
    print(READY, flush=True)
    serve(listener)
    return 0


if __name__ == "__main__":
    sys.exit(main())
