"""Check kinds, registered through one door.

The package's generic kinds (written answers, a model loader's contract, ...) are declared in
the modules listed in :data:`CHECK_MODULES`; each assignment's own kinds in its folder's
``checks.py`` and ``hidden_checks.py`` (:mod:`grader.grading.course`). Both are read by
:func:`load_registry`: a module's kinds are the :class:`~grader.checks.base.CheckKind` objects
it holds at module level.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from types import ModuleType

from grader.checks.base import CheckContext, CheckKind, StopCheck, Verdict, check_kind
from grader.errors import CourseError

CHECK_MODULES: tuple[str, ...] = (
    "grader.checks.common",
    "grader.checks.loss",
    "grader.checks.timing",
)


def load_registry(modules: Iterable[str | ModuleType] = CHECK_MODULES) -> dict[str, CheckKind]:
    """Every check kind the modules (imported, or named) declare, by name; two kinds with one name is an error."""
    kinds: dict[str, CheckKind] = {}
    for named in modules:
        module = importlib.import_module(named) if isinstance(named, str) else named
        module_name = module.__name__
        for value in vars(module).values():
            if isinstance(value, CheckKind):
                if value.name in kinds and kinds[value.name] is not value:
                    raise CourseError(f"two check kinds are named {value.name!r} ({module_name})")
                kinds[value.name] = value
    return kinds


__all__ = ["CHECK_MODULES", "CheckContext", "CheckKind", "StopCheck", "Verdict", "check_kind", "load_registry"]
