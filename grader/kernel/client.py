"""The notebook client a kernel session runs cells through, and the text helpers its cells and requests share."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import nbformat
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
