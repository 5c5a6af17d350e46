"""The grader's integrity probe: a fingerprint of its runtime inside the student's kernel.

Like ``runtime.py``, this file is sent into the kernel as source text, but afresh for every probe
and run in a namespace of its own, so nothing a notebook defines or patches in the runtime's module
runs in its place. The harness reads one fingerprint right after installing the runtime (before any
cell runs) and another after every call of a student function; any entry that differs means the
notebook changed the grader's instrumentation (a replaced method, a recorder with methods of its own,
pacing left switched off, another clock or sleep), and that call's evidence is not trusted.

The names ``MODULE`` (the runtime's private module name) and ``CHANNEL`` are given by the harness;
the fingerprint is published as JSON on ``CHANNEL``. A notebook can still defeat a probe that runs in
its own process (it can patch ``marshal`` or the publisher): the probe raises the bar, and the
grader's verdicts rest on what it measures from outside the kernel (see grader/kernel/evidence.py).
"""

import hashlib
import json
import os
import stat
import sys
import types
from typing import Any

MODULE: str = globals().get("MODULE", "")  # given by the harness
CHANNEL: str = globals().get("CHANNEL", "")

# Recorder attributes that must hold these values whenever no call is running.
AT_REST: dict[str, Any] = {
    "call": None,
    "paced": False,
    "pace_s": 0.0,
    "generate_depth": 0,
    "tokenizer_depth": 0,
    "current_generate": None,
}


def _add_code(code: types.CodeType, digest: Any) -> None:
    """Feed a code object's instructions, names and constants (nested code objects too) to ``digest``.

    Not ``marshal.dumps``: its bytes depend on reference counts, which change as the notebook runs.
    """
    digest.update(code.co_code)
    digest.update(repr((code.co_names, code.co_varnames, code.co_freevars)).encode())
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            _add_code(constant, digest)
        else:
            digest.update(repr(constant).encode())


def _digest(function: Any, depth: int = 0) -> str:
    """What a callable runs: its code and its closure's callables (a wrapper's original), hashed."""
    code = getattr(function, "__code__", None)
    if code is None:  # a builtin: where it comes from
        owner = getattr(function, "__self__", None)
        owner_name = getattr(owner, "__name__", type(owner).__name__)
        return f"{type(function).__name__}:{owner_name}.{getattr(function, '__qualname__', '?')}"
    digest = hashlib.sha256()
    _add_code(code, digest)
    for cell in getattr(function, "__closure__", None) or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if depth < 2 and callable(contents) and not isinstance(contents, type):
            digest.update(_digest(contents, depth + 1).encode())
    return digest.hexdigest()[:20]


def _channel(fds: Any) -> str:
    """The pause FIFOs the runtime holds: its descriptors and the files behind them (a descriptor closed, or
    another pipe put in its place with dup2, changes it)."""
    if not isinstance(fds, tuple):
        return f"not a tuple: {type(fds).__name__}"
    described = []
    for fd in fds:
        try:
            status = os.fstat(fd)
        except (OSError, TypeError) as error:
            described.append(f"{fd!r}:{type(error).__name__}")
            continue
        described.append(f"{fd}:{status.st_dev}:{status.st_ino}:{stat.S_ISFIFO(status.st_mode)}")
    return ",".join(described)


def fingerprint() -> dict[str, str]:
    """Every entry the probe compares: the runtime's functions and classes, each attribute it replaced, its recorder."""
    module = sys.modules.get(MODULE)
    if not isinstance(module, types.ModuleType):
        return {"module": "missing"}
    entries: dict[str, str] = {"module": f"{type(module).__name__}:{id(module)}"}
    for name, value in sorted(vars(module).items()):
        if isinstance(value, types.FunctionType):
            entries[f"runtime.{name}"] = _digest(value)
        elif isinstance(value, type) and value.__module__ == MODULE:
            for attribute, member in sorted(vars(value).items()):
                if isinstance(member, (types.FunctionType, staticmethod, classmethod, property)):
                    entries[f"runtime.{name}.{attribute}"] = _digest(getattr(member, "__func__", member))
    for name in ("_sleep", "_perf_counter", "_dumps", "_write", "_read", "_getpid"):
        entries[f"runtime.{name}"] = _digest(getattr(module, name, None))
    entries["pauses"] = f"{_channel(getattr(module, 'PAUSES', None))} in {getattr(module, 'PAUSES_PID', None)!r}"
    entries["events"] = f"{_channel(getattr(module, 'EVENTS', None))} in {getattr(module, 'EVENTS_PID', None)!r}"
    for owner, attribute, *_ in list(getattr(module, "INSTRUMENTED", [])):
        where = f"{getattr(owner, '__module__', '')}.{getattr(owner, '__qualname__', getattr(owner, '__name__', '?'))}"
        member = vars(owner).get(attribute)
        entries[f"instrumented.{where}.{attribute}@{id(owner)}"] = (
            f"{type(member).__name__}:{_digest(getattr(member, '__func__', member))}"  # a classmethod by its function
        )
    recorder = getattr(module, "RECORDER", None)
    entries["recorder.type"] = f"{type(recorder).__qualname__}:{type(recorder) is getattr(module, 'Recorder', None)}"
    entries["recorder.attributes"] = ",".join(sorted(vars(recorder))) if hasattr(recorder, "__dict__") else "none"
    entries["recorder.clock_origin"] = repr(getattr(recorder, "clock_origin", None))
    for attribute, value in AT_REST.items():
        entries[f"recorder.{attribute}"] = repr(getattr(recorder, attribute, "missing") == value)
    return entries


def _publish() -> None:
    module = sys.modules.get(MODULE)
    installed = getattr(module, "INSTALLED", None)
    publish: Any = installed.get("publish") if isinstance(installed, dict) else None
    if publish is None:
        from IPython.display import publish_display_data

        publish = publish_display_data
    publish({CHANNEL: json.dumps({"status": "returned", "fingerprint": fingerprint()})})


if CHANNEL:
    _publish()
