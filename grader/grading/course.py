"""The course folder: one folder per assignment under ``assignments/``, holding all it needs.

``assignments/<name>/`` holds the rubric (``rubric.yaml``), the starter and the solution notebooks
(and ``notebooks.py``, the sources they are built from), and the assignment's own check kinds:
``checks.py`` (those its public checks use; a student kit ships it) and ``hidden_checks.py`` (those
only its hidden checks use; never shipped). The reference implementation the grader runs is the
solution's own definitions (:func:`grader.grading.reference.solution_definitions`): the solution is written
once. A folder may hold a ``reference.py`` instead, which then is the reference. Check kinds come through one door (:func:`grader.checks.load_registry`): the package's
generic kinds, and each assignment's modules, imported as ``course_assignments.<name>.checks``
so that a course passed with ``--course`` brings its assignments whole.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from grader.checks import CheckKind, load_registry
from grader.discover.notebook import Identification, identify_assignment, read_notebook
from grader.errors import CourseError, GraderError, UsageError
from grader.grading.reference import ReferenceModels, load_reference_module
from grader.grading.replay import RECORDED_FILE, Recording, ReferenceSide
from grader.grading.rubric import Limits, Rubric, load_rubric

ASSIGNMENTS_DIR = "assignments"
RUBRIC_FILE = "rubric.yaml"
REFERENCE_FILE = "reference.py"  # optional: without it, the solution notebook's definitions are the reference
SOLUTION_FILE = "solution.ipynb"
PUBLIC_CHECKS = "checks.py"  # kinds the public checks use: shipped in the student kit
HIDDEN_CHECKS = "hidden_checks.py"  # kinds only hidden checks use: never shipped
CHECK_FILES = (PUBLIC_CHECKS, HIDDEN_CHECKS)
MODULE_ROOT = "course_assignments"


def checks_package(name: str) -> str:
    """The package an assignment's check modules are imported under (one per assignment name, so
    that a kit's recorded reference calls, keyed by module, match the course's)."""
    return f"{MODULE_ROOT}.{name.replace('-', '_')}"


def import_check_modules(name: str, folder: Path) -> tuple[ModuleType, ...]:
    """Import an assignment's ``checks.py`` and ``hidden_checks.py`` (those it has).

    They are imported as ``course_assignments.<name>.checks`` and ``...hidden_checks`` (so
    ``hidden_checks.py`` can ``from .checks import ...``). The first folder imported under a name
    keeps it in ``sys.modules``; another folder with the same assignment name (a student kit,
    another course) is imported under the same names and then put aside, its kinds holding their
    own globals.
    """
    if MODULE_ROOT not in sys.modules:
        root = types.ModuleType(MODULE_ROOT, "Check modules of the course's assignments (grader.grading.course).")
        root.__path__ = []
        sys.modules[MODULE_ROOT] = root
    package = checks_package(name)
    files = [folder / file for file in CHECK_FILES if (folder / file).is_file()]
    current = sys.modules.get(package)
    if current is not None and list(getattr(current, "__path__", [])) == [str(folder)]:
        return tuple(importlib.import_module(f"{package}.{path.stem}") for path in files)
    mine = [key for key in sys.modules if key == package or key.startswith(package + ".")]
    saved = {key: sys.modules.pop(key) for key in mine}
    module = types.ModuleType(package, f"Check modules of the assignment {name!r}, from {folder}.")
    module.__path__ = [str(folder)]
    sys.modules[package] = module
    importlib.invalidate_caches()
    try:
        modules = []
        for path in files:
            try:
                modules.append(importlib.import_module(f"{package}.{path.stem}"))
            except Exception as error:
                raise CourseError(f"the check module {path} failed to import: {type(error).__name__}: {error}") from error
        return tuple(modules)
    finally:
        if saved or len(modules) < len(files):
            for key in [key for key in sys.modules if key == package or key.startswith(package + ".")]:
                del sys.modules[key]
            sys.modules.update(saved)


@dataclass(frozen=True)
class Assignment:
    """An assignment as the grader uses it: its rubric, validated params and reference."""

    name: str
    folder: Path
    rubric: Rubric
    params: dict[str, BaseModel]
    kinds: dict[str, CheckKind]  # the package's generic kinds and the assignment's own

    @property
    def rubric_path(self) -> Path:
        """The rubric file."""
        return self.folder / RUBRIC_FILE

    def check_files(self) -> list[Path]:
        """The assignment's own check modules that exist (checks.py, hidden_checks.py)."""
        return [self.folder / name for name in CHECK_FILES if (self.folder / name).is_file()]

    def source_files(self) -> list[Path]:
        """Every file a verdict can depend on: rubric, reference, check modules, given files."""
        return [self.rubric_path, self.reference_source, *self.check_files(), *self.given_files()]

    @property
    def starter(self) -> Path:
        """The starter notebook students receive."""
        return self.folder / "starter.ipynb"

    @property
    def solution(self) -> Path:
        """The solution notebook (full marks)."""
        return self.folder / SOLUTION_FILE

    @property
    def reference_source(self) -> Path:
        """Where the reference implementation comes from: ``reference.py`` where the folder has one, else the
        solution notebook's definitions."""
        explicit = self.folder / REFERENCE_FILE
        return explicit if explicit.exists() else self.solution

    def given_files(self) -> list[Path]:
        """Files copied next to the notebook before it runs."""
        return [self.folder / name for name in self.rubric.given_files]

    @property
    def recorded(self) -> Path:
        """Recorded reference values, in a student kit (which has no reference implementation)."""
        return self.folder / RECORDED_FILE

    @property
    def in_kit(self) -> bool:
        """Whether this is a student kit's copy: recorded values instead of the reference implementation."""
        return not self.reference_source.exists() and self.recorded.exists()

    def load_reference(self) -> ModuleType:
        """The reference implementation, imported in the grader's process."""
        return load_reference_module(self.reference_source, self.name)

    def reference_side(self, models: ReferenceModels, record: bool = False) -> ReferenceSide:
        """The reference side of the checks: the implementation, or in a kit its recorded values."""
        if self.in_kit:
            return ReferenceSide(models, recording=Recording.read(self.recorded))
        return ReferenceSide(models, module=self.load_reference(), record=record)


def find_course_root(explicit: Path | None = None) -> Path:
    """The folder holding ``assignments/``.

    In order: ``explicit``, ``$GRADER_COURSE_DIR``, the current folder, and the folder the
    ``grader`` package sits in (a checkout installed in editable mode).
    """
    candidates = []
    if explicit is not None:
        candidates.append(explicit)
    elif os.environ.get("GRADER_COURSE_DIR"):
        candidates.append(Path(os.environ["GRADER_COURSE_DIR"]))
    else:
        candidates += [Path.cwd(), Path(__file__).resolve().parents[2]]  # the checkout this package is in
    for candidate in candidates:
        if (candidate / ASSIGNMENTS_DIR).is_dir():
            return candidate.resolve()
        if (candidate / "rubrics").is_dir() and explicit is not None:
            raise UsageError(
                f"{candidate} has the old layout (rubrics/<name>.yaml, reference/<name>/): move each assignment into "
                f"{ASSIGNMENTS_DIR}/<name>/ (rubric.yaml, starter.ipynb, solution.ipynb, checks.py); see README 'Adding an assignment'"
            )
    tried = ", ".join(str(c) for c in candidates)
    raise UsageError(f"no course folder found (a folder with {ASSIGNMENTS_DIR}/); tried: {tried}. Pass --course DIR.")


class Course:
    """The assignments of one course folder, loaded on demand and validated strictly."""

    def __init__(self, root: Path, kinds: dict[str, CheckKind] | None = None) -> None:
        self.root = root
        self.kinds = load_registry() if kinds is None else kinds  # the package's generic kinds
        self._loaded: dict[str, Assignment] = {}

    def folder(self, name: str) -> Path:
        """Where an assignment's files are."""
        return self.root / ASSIGNMENTS_DIR / name

    def names(self) -> list[str]:
        """The assignments that have a rubric."""
        return sorted(path.parent.name for path in (self.root / ASSIGNMENTS_DIR).glob(f"*/{RUBRIC_FILE}"))

    def assignment(self, name: str) -> Assignment:
        """One assignment, validated; a clear error if it does not exist or is malformed."""
        if name not in self._loaded:
            folder = self.folder(name)
            path = folder / RUBRIC_FILE
            if not path.exists():
                known = ", ".join(self.names()) or "none"
                raise UsageError(f"unknown assignment {name!r}; this course has: {known}")
            kinds = self._kinds_of(name, folder)
            rubric, params = load_rubric(path, {kind.name: kind.params for kind in kinds.values()}, name=name)
            _hidden_only_kinds_stay_hidden(name, folder, rubric, kinds, self.kinds)
            self._loaded[name] = Assignment(name, folder, rubric, params, kinds)
        return self._loaded[name]

    def _kinds_of(self, name: str, folder: Path) -> dict[str, CheckKind]:
        own = load_registry(import_check_modules(name, folder))
        clashes = sorted(kind for kind in own if kind in self.kinds and own[kind] is not self.kinds[kind])
        if clashes:
            raise CourseError(
                f"the assignment {name!r} declares check kinds named like the grader's own: {', '.join(clashes)}; rename them"
            )
        return {**self.kinds, **own}

    def all(self) -> list[Assignment]:
        """Every assignment, validated."""
        return [self.assignment(name) for name in self.names()]

    def identify(self, notebook: Any) -> Identification:
        """The assignment a notebook belongs to (metadata first, then the names it defines)."""
        candidates = [
            (assignment.name, [*assignment.rubric.identify.functions, *assignment.rubric.identify.variables])
            for assignment in self.all()
        ]
        return identify_assignment(notebook, candidates)

    def max_notebook_bytes(self, name: str | None) -> int:
        """The size limit for a notebook: its assignment's, or the largest any readable assignment allows."""
        limits = []
        for candidate in [name] if name is not None else self.names():
            with contextlib.suppress(GraderError):
                limits.append(self.assignment(candidate).rubric.limits.max_notebook_mib)
        if not limits and name is not None:
            return self.max_notebook_bytes(None)
        return max(limits or [Limits().max_notebook_mib]) * 1024**2

    def assignment_of(self, path: Path, name: str | None = None) -> Assignment | None:
        """The assignment the notebook at ``path`` is graded as (``name``, else recognised); None where it cannot
        be read or recognised (grading it then says why)."""
        try:
            if name is None:
                name = self.identify(read_notebook(path, max_bytes=self.max_notebook_bytes(None))).assignment
            return self.assignment(name)
        except GraderError:
            return None


def _hidden_only_kinds_stay_hidden(
    name: str, folder: Path, rubric: Rubric, kinds: dict[str, CheckKind], generic: dict[str, CheckKind]
) -> None:
    """A kind only hidden checks use must not be in ``checks.py``, which the student kit ships."""
    public = {check.kind for check in rubric.checks if check.visibility == "public"}
    package = checks_package(name)
    shipped = sorted(
        check.kind
        for check in rubric.checks
        if check.kind not in public
        and check.kind not in generic
        and getattr(kinds[check.kind].run, "__module__", "") == f"{package}.{Path(PUBLIC_CHECKS).stem}"
    )
    if shipped:
        raise CourseError(
            f"{folder / PUBLIC_CHECKS} declares check kinds only hidden checks use ({', '.join(sorted(set(shipped)))}): "
            f"move them to {HIDDEN_CHECKS}, which the student kit does not ship"
        )
