"""The course folder: rubrics, reference solutions and starters, by assignment name."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from pydantic import BaseModel

from grader.checks import CheckKind
from grader.errors import CourseError, UsageError
from grader.reference import ReferenceModels, load_reference_module
from grader.replay import RECORDED_FILE, Recording, ReferenceSide
from grader.rubric import Rubric, load_rubric


@dataclass(frozen=True)
class Assignment:
    """An assignment as the grader uses it: its rubric, validated params and reference."""

    name: str
    rubric: Rubric
    rubric_path: Path
    params: dict[str, BaseModel]
    reference_dir: Path

    @property
    def starter(self) -> Path:
        """The starter notebook students receive."""
        return self.reference_dir / "starter.ipynb"

    @property
    def solution(self) -> Path:
        """The solution notebook (full marks)."""
        return self.reference_dir / "solution.ipynb"

    def given_files(self) -> list[Path]:
        """Files copied next to the notebook before it runs."""
        return [self.reference_dir / name for name in self.rubric.given_files]

    @property
    def recorded(self) -> Path:
        """Recorded reference values, in a student kit (which has no reference implementation)."""
        return self.reference_dir / RECORDED_FILE

    @property
    def in_kit(self) -> bool:
        """Whether this is a student kit's copy: recorded values instead of the reference implementation."""
        return not (self.reference_dir / "reference.py").exists() and self.recorded.exists()

    def load_reference(self) -> ModuleType:
        """The reference implementation, imported in the grader's process."""
        return load_reference_module(self.reference_dir / "reference.py", self.name)

    def reference_side(self, models: ReferenceModels, record: bool = False) -> ReferenceSide:
        """The reference side of the checks: the implementation, or in a kit its recorded values."""
        if self.in_kit:
            return ReferenceSide(models, recording=Recording.read(self.recorded))
        return ReferenceSide(models, module=self.load_reference(), record=record)


def find_course_root(explicit: Path | None = None) -> Path:
    """The folder holding ``rubrics/`` and ``reference/``.

    In order: ``explicit``, ``$GRADER_COURSE_DIR``, the current folder, and the folder the
    ``grader`` package sits in (a checkout installed in editable mode).
    """
    candidates = []
    if explicit is not None:
        candidates.append(explicit)
    elif os.environ.get("GRADER_COURSE_DIR"):
        candidates.append(Path(os.environ["GRADER_COURSE_DIR"]))
    else:
        candidates += [Path.cwd(), Path(__file__).resolve().parent.parent]
    for candidate in candidates:
        if (candidate / "rubrics").is_dir():
            return candidate.resolve()
    tried = ", ".join(str(c) for c in candidates)
    raise UsageError(f"no course folder found (a folder with rubrics/ and reference/); tried: {tried}. Pass --course DIR.")


class Course:
    """The assignments of one course folder, loaded on demand and validated strictly."""

    def __init__(self, root: Path, kinds: dict[str, CheckKind]) -> None:
        self.root = root
        self.kinds = kinds
        self._loaded: dict[str, Assignment] = {}

    def names(self) -> list[str]:
        """The assignments that have a rubric."""
        return sorted(path.stem for path in (self.root / "rubrics").glob("*.yaml"))

    def assignment(self, name: str) -> Assignment:
        """One assignment, validated; a clear error if it does not exist or is malformed."""
        if name not in self._loaded:
            path = self.root / "rubrics" / f"{name}.yaml"
            if not path.exists():
                known = ", ".join(self.names()) or "none"
                raise UsageError(f"unknown assignment {name!r}; this course has: {known}")
            rubric, params = load_rubric(path, {kind.name: kind.params for kind in self.kinds.values()})
            reference_dir = self.root / "reference" / name
            if not reference_dir.is_dir():
                raise CourseError(f"the assignment {name!r} has a rubric but no reference folder {reference_dir}")
            self._loaded[name] = Assignment(name, rubric, path, params, reference_dir)
        return self._loaded[name]

    def all(self) -> list[Assignment]:
        """Every assignment, validated."""
        return [self.assignment(name) for name in self.names()]
