"""The notebook client a kernel session runs cells through, and the text helpers its cells and requests share."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from queue import Empty
from typing import Any

import nbformat
from jupyter_client import AsyncKernelManager
from jupyter_client.asynchronous import AsyncKernelClient
from nbclient import NotebookClient

MAX_TRACEBACK_CHARS = 20_000
TIMEOUT_ENAME = "CellTimeoutError"
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """Text without the terminal colour codes IPython puts in tracebacks."""
    return ANSI_ESCAPE.sub("", text)


def describe_error(error: BaseException) -> str:
    """An exception as one line: its type, and its message where it has one."""
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


IOPUB_SETTLE_S = 0.2  # how long a kernel_info request's "idle" status may take to arrive on a connected IOPub


class ReadyKernelClient(AsyncKernelClient):
    """A kernel client that knows its kernel is ready as soon as it is, not 0.2 s later.

    jupyter_client's ``wait_for_ready`` ends by reading IOPub until it has been quiet for 0.2 s (to drop the
    statuses of its own ``kernel_info`` requests), which every submission paid before its first cell. Here the
    wait ends when the last request's own "idle" status arrives: IOPub is connected (a subscriber that joined
    late misses the first requests' statuses, so the request is sent again, as jupyter_client does), and
    everything the kernel published before it has been read.
    """

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        """Send ``kernel_info`` until it is answered on the shell channel and its statuses arrive on IOPub."""
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            request = self.kernel_info()
            try:
                reply = await self.shell_channel.get_msg(timeout=1)
            except Empty:
                reply = None
            if reply is not None and reply["msg_type"] == "kernel_info_reply" and await self._idle_after(request):
                self._handle_kernel_info_reply(reply)
                return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")

    async def _idle_after(self, request: str) -> bool:
        """Whether request ``request``'s "idle" status arrives on IOPub (reading everything published before it)."""
        until = time.monotonic() + IOPUB_SETTLE_S
        while (remaining := until - time.monotonic()) > 0:
            try:
                message = await self.iopub_channel.get_msg(timeout=remaining)
            except Empty:
                return False
            if (
                message["parent_header"].get("msg_id") == request
                and message["msg_type"] == "status"
                and message["content"].get("execution_state") == "idle"
            ):
                return True
        return False


class PromptKernelManager(AsyncKernelManager):
    """A kernel manager that sees its killed kernel gone within 10 ms, not 100 ms.

    After killing a kernel, jupyter_client polls whether its process is still alive every 0.1 s, and a process
    that is killed never ends before the first poll: every submission's kernel cost a tenth of a second to stop.
    """

    async def _async_wait(self, pollinterval: float = 0.01) -> None:
        await super()._async_wait(pollinterval)


class BoundedNotebookClient(NotebookClient):
    """A notebook client that keeps at most ``max_output_bytes`` of a notebook's outputs.

    Past the budget, outputs are dropped (the first one cut to fit) and one note says so, so a
    notebook printing gigabytes costs the grader neither memory nor a huge report. Errors are
    always kept (their tracebacks cut), since they explain lost points.
    """

    max_output_bytes: int | None = None
    kept_bytes = 0
    truncated = False

    def output(self, outs: list[Any], msg: dict[str, Any], display_id: str | None, cell_index: int) -> Any:
        """Keep the output if the budget allows, else drop it (saying so once)."""
        limit = self.max_output_bytes
        kind = msg.get("msg_type")
        content = msg.get("content", {})
        if kind == "error":
            content["traceback"] = _cut_traceback(content.get("traceback", []))
            return super().output(outs, msg, display_id, cell_index)
        if limit is None:
            return super().output(outs, msg, display_id, cell_index)
        size = _output_size(content)
        if self.kept_bytes + size <= limit:
            self.kept_bytes += size
            return super().output(outs, msg, display_id, cell_index)
        if self.truncated:
            return None
        self.truncated = True
        room = limit - self.kept_bytes
        if kind == "stream" and room > 0:
            content["text"] = str(content.get("text", ""))[:room]
            super().output(outs, msg, display_id, cell_index)
        self.kept_bytes = limit
        note = nbformat.v4.new_output(
            "stream",
            name="stderr",
            text=f"\n[output truncated by the grader: the notebook's outputs passed {limit // 1024} KiB; the rest was not kept]\n",
        )
        outs.append(note)
        return note


def _output_size(content: Mapping[str, Any]) -> int:
    """Characters an output carries (text, or every representation of a display)."""
    if "text" in content:
        return len(str(content["text"]))
    data = content.get("data", {})
    return sum(len(value) if isinstance(value, str) else len(json.dumps(value)) for value in data.values())


def _cut_traceback(lines: list[str]) -> list[str]:
    kept: list[str] = []
    total = 0
    for line in lines if isinstance(lines, list) else []:
        total += len(line)
        if total > MAX_TRACEBACK_CHARS:
            kept.append("[traceback cut by the grader]")
            break
        kept.append(line)
    return kept
