"""The kernel manager's stand-in for a kernel forked from a template.

Run as ``python -m grader.kernel.forked SOCKET PIDFILE POLICY_JSON -- KERNEL_ARGV...`` by the
kernel manager, in place of the sandbox launcher. It asks the kernel template listening on
``SOCKET`` (see :mod:`grader.kernel.template`) for a kernel under ``POLICY_JSON``, handing over
its standard streams, environment, working folder and the arguments that follow
``ipykernel_launcher`` in ``KERNEL_ARGV``; writes the pid of the kernel's watcher (the root of
the kernel's process tree, for the grader's resource watch) to ``PIDFILE``; then stands in for
the kernel: an interrupt or termination sent to it is passed on to the kernel, it ends with the
kernel's exit status, and if it is killed, the watcher kills the kernel. It dies with the
process that started it. Standard library only, so it starts in milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys

from grader.kernel.launcher import EXIT_LAUNCH_FAILED, die_with_parent

REPLY_BYTES = 1 << 16


def _kernel_args(command: list[str]) -> list[str]:
    """The arguments ``ipykernel_launcher`` would get in ``command``."""
    marker = command.index("ipykernel_launcher")
    return command[marker + 1 :]


def main(argv: list[str]) -> int:
    """Ask for the kernel, stand in for it, return its exit status."""
    if len(argv) < 5 or argv[3] != "--":
        print("usage: python -m grader.kernel.forked SOCKET PIDFILE POLICY_JSON -- COMMAND...", file=sys.stderr)
        return 2
    socket_path, pidfile, policy = argv[0], argv[1], json.loads(argv[2])
    die_with_parent()
    request = {
        "argv": _kernel_args(argv[4:]),
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "policy": policy,
        "client": os.getpid(),
    }
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        connection.connect(socket_path)
        socket.send_fds(connection, [json.dumps(request).encode()], [0, 1, 2])
        reply = json.loads(connection.recv(REPLY_BYTES) or b'{"error": "the kernel template closed the connection"}')
    except (OSError, ValueError) as error:
        print(f"the grader's kernel template did not answer: {error}", file=sys.stderr)
        return EXIT_LAUNCH_FAILED
    if "error" in reply:
        print(reply["error"], file=sys.stderr)
        return EXIT_LAUNCH_FAILED
    kernel = int(reply["kernel"])
    with open(pidfile + ".part", "w", encoding="ascii") as handle:
        handle.write(str(int(reply["watcher"])))
    os.replace(pidfile + ".part", pidfile)

    def pass_on(signum: int, frame: object) -> None:
        with contextlib.suppress(OSError):
            os.kill(kernel, signum)

    signal.signal(signal.SIGINT, pass_on)
    signal.signal(signal.SIGTERM, pass_on)
    while True:
        try:
            message = connection.recv(REPLY_BYTES)
        except OSError:
            return EXIT_LAUNCH_FAILED
        if not message:  # the watcher is gone without a word
            return EXIT_LAUNCH_FAILED
        status = json.loads(message).get("exit")
        if status is not None:
            return int(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
