"""Keep library chatter (warnings, info logs) out of the grader's own output."""

from __future__ import annotations

import contextlib
import logging
import os
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
