"""Keep library chatter (warnings, info logs) out of the grader's own output."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import warnings
from collections.abc import Iterator
from typing import Any

LIBRARIES = ("transformers", "bitsandbytes", "accelerate", "optimum", "onnxruntime")


class _SharedQuiet:
    """The quiet state, shared by every thread: the first block to enter sets it, the last to leave restores what was
    there before. (``warnings.catch_warnings`` and saved logger levels are per block: two threads' blocks that overlap
    would each restore what the other set, and the one still inside would hear the libraries again.)"""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._warnings: Any = None
        self._levels: list[int] = []

    def enter(self, loggers: list[logging.Logger]) -> None:
        with self._lock:
            if self._depth == 0:
                self._levels = [logger.level for logger in loggers]
                self._warnings = warnings.catch_warnings()
                self._warnings.__enter__()
                warnings.simplefilter("ignore")
                for logger in loggers:
                    logger.setLevel(logging.ERROR)
            self._depth += 1

    def leave(self, loggers: list[logging.Logger]) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                self._warnings.__exit__(None, None, None)
                for logger, level in zip(loggers, self._levels, strict=True):
                    logger.setLevel(level)


_QUIET = _SharedQuiet()


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """Silence warnings and below-error logs of the ML libraries for the duration (safe across threads)."""
    loggers = [logging.getLogger(name) for name in LIBRARIES]
    _QUIET.enter(loggers)
    try:
        yield
    finally:
        _QUIET.leave(loggers)


def quiet_library_defaults() -> None:
    """Show only the ML libraries' errors in the grader's own process and its workers (never its kernels).

    Transformers and Optimum set their loggers' level when first imported, from
    ``TRANSFORMERS_VERBOSITY``; an import inside :func:`quiet_libraries` would otherwise reset it
    and let lines such as Optimum's "Found different candidate ONNX initializers" through.
    Kernels do not inherit it (their environment is an allow-list).
    """
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(logging.ERROR)
