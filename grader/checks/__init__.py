"""Check kinds, registered in one place.

Every module that declares check kinds is listed in :data:`CHECK_MODULES`; built-in and
course-specific kinds come through the same door. A module's kinds are the
:class:`~grader.checks.base.CheckKind` objects it defines at module level.
"""

from __future__ import annotations

import importlib

from grader.checks.base import CheckContext, CheckKind, StopCheck, Verdict, check_kind
from grader.errors import CourseError

CHECK_MODULES: tuple[str, ...] = (
    "grader.checks.common",
    "grader.checks.ptq_bnb",
    "grader.checks.perplexity",
    "grader.checks.latency",
    "grader.checks.quantization",
)


def load_registry(modules: tuple[str, ...] = CHECK_MODULES) -> dict[str, CheckKind]:
    """Every declared check kind, by name; two kinds with one name is an error."""
    kinds: dict[str, CheckKind] = {}
    for module_name in modules:
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            if isinstance(value, CheckKind):
                if value.name in kinds and kinds[value.name] is not value:
                    raise CourseError(f"two check kinds are named {value.name!r} ({module_name})")
                kinds[value.name] = value
    return kinds


__all__ = ["CHECK_MODULES", "CheckContext", "CheckKind", "StopCheck", "Verdict", "check_kind", "load_registry"]
