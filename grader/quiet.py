"""Keep library chatter (warnings, info logs) out of the grader's own output."""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator

LIBRARIES = ("transformers", "bitsandbytes", "accelerate", "optimum", "onnxruntime")


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """Silence warnings and below-error logs of the ML libraries for the duration."""
    loggers = [logging.getLogger(name) for name in LIBRARIES]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels, strict=True):
                logger.setLevel(level)
