"""Requests to the grader's runtime in a kernel: code run silently, its answer published on a channel of
its own and collected from the kernel's messages, interrupted (and the kernel stopped if it then does not
answer) past its time; and the pauses the runtime asks for while a request runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from grader.kernel.client import describe_error, strip_ansi
from grader.kernel.measure import PauseServer

if TYPE_CHECKING:
    from grader.kernel.session import KernelSession

MAX_REQUEST_STDOUT = 64 * 1024  # characters of a grading request's stray output kept


@dataclass(frozen=True)
class KernelReply:
    """The messages one harness request produced, filtered to that request."""

    payload: str | None
    status: str  # "ok", "error", "timeout", "dead"
    stdout: str = ""
    error: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0


class RequestChannel:
    """The harness's requests to one kernel session (``session.channel``)."""

    def __init__(self, session: KernelSession) -> None:
        self.session = session

    def serve_pauses(self, draw: Callable[[], float]) -> PauseServer:
        """A server of the runtime's pauses, each ``draw()`` seconds long, while a request runs (a context manager)."""
        return PauseServer(self.session.pause_fds, draw)

    def request(self, code: str, channel: str, timeout_s: float) -> KernelReply:
        """Run ``code`` silently and collect the payload published on ``channel``.

        On timeout the kernel is interrupted; if it does not answer within the grace period
        it is stopped, and the session is dead for later requests.
        """
        session = self.session
        if not session.alive:
            return KernelReply(None, "dead", error={"message": session.dead_reason or "the kernel is not running"})
        client = session.client()
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
                    if not await session.km_alive():
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
            reply = session.run(exchange())
        except Exception as error:  # a kernel that broke Jupyter's protocol (see run_notebook)
            session.mark_dead(f"the kernel stopped speaking Jupyter's protocol during a grading call ({describe_error(error)})")
            return KernelReply(None, "dead", error={"message": session.dead_reason or ""})
        if reply.status == "timeout":
            session.interrupt()
            if not session.answers_within(session.interrupt_grace_s):
                session.mark_dead("the kernel did not stop after a grading call was interrupted")
        elif reply.status == "dead":
            session.mark_dead("the kernel died during a grading call")
        return reply
