"""The reference side of the checks, live or replayed from recorded values (the student kit).

Checks reach the reference implementation in two ways only: ``context.reference.NAME(...)``
calls a function of ``assignments/<assignment>/reference.py``, and ``context.expected(FUNCTION,
...)`` calls a check module's own function marked :func:`reference_side` (one that embeds the
method, such as the token-weighted loss). Both go through a :class:`ReferenceSide`:

- **live** (the instructor's grader): the function runs in this process; when recording, its
  JSON result is kept under a key made of the function's name and its arguments (reference
  models and tokenizers by their spec).
- **replay** (a student kit, which holds neither ``reference.py`` nor the bodies of
  :func:`reference_side` functions): the result is read back from ``recorded.json``, written
  by ``grade build-student-kit`` from the public checks' calls on the tiny models.

The recording is made by grading the solution notebook, so a check should ask the reference side
for everything it may need before it judges the student's value (as ``memory_footprint`` asks for
the classic mistakes' values up front), with arguments that do not depend on that value. A call
the kit did not record makes only its check say it cannot be judged offline.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from grader.errors import CourseError

if TYPE_CHECKING:
    from grader.grading.reference import ReferenceModels
    from grader.zoo import ModelZoo

RECORDED_FILE = "recorded.json"
RECORDED_FORMAT = 1
REFERENCE_SIDE_MARK = "__reference_side__"
Function = TypeVar("Function", bound=Callable[..., Any])


def reference_side(function: Function) -> Function:
    """Mark a check module's function as part of the reference side.

    Its result is recorded for the student kit, and the kit carries it without its body, so
    code that computes an expected value the way a solution would never reaches students.
    Call it through ``context.expected(function, ...)``.
    """
    setattr(function, REFERENCE_SIDE_MARK, True)
    return function


class NotRecorded(Exception):
    """A replayed reference call whose value the student kit does not hold."""


class Unrecordable(Exception):
    """An argument or a result that has no JSON form (so it cannot be recorded or looked up)."""


@dataclass(frozen=True)
class Recording:
    """Recorded reference results of one assignment, and the models they were computed on."""

    assignment: str
    zoo: str  # the zoo key: the tiny models' weights depend on it
    versions: Mapping[str, str]  # torch, transformers, tokenizers when recorded
    calls: Mapping[str, Any]

    @classmethod
    def read(cls, path: Path) -> Recording:
        """Load ``recorded.json``; a clear error if it is unreadable."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != RECORDED_FORMAT:
                raise ValueError(f"format {data.get('format')!r}, expected {RECORDED_FORMAT}")
            return cls(data["assignment"], data["zoo"], dict(data.get("versions", {})), dict(data["calls"]))
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise CourseError(
                f"the recorded reference values {path} cannot be read ({error}); rebuild the student kit"
            ) from error

    def write(self, path: Path) -> None:
        """Write ``recorded.json`` (sorted keys, so a rebuild changes only what changed)."""
        data = {
            "format": RECORDED_FORMAT,
            "assignment": self.assignment,
            "zoo": self.zoo,
            "versions": dict(self.versions),
            "calls": dict(self.calls),
        }
        path.write_text(json.dumps(data, indent=1, sort_keys=True, allow_nan=True) + "\n", encoding="utf-8")


class ReferenceSide:
    """Runs reference calls live (optionally recording them) or replays recorded ones."""

    def __init__(
        self,
        models: ReferenceModels,
        module: ModuleType | None = None,
        recording: Recording | None = None,
        record: bool = False,
    ) -> None:
        if module is None and recording is None:
            raise ValueError("a reference side needs the reference module or a recording")
        self.models = models
        self.module = module
        self.recording = recording
        self.record = record
        self.recorded: dict[str, Any] = {}
        self.unrecordable: set[str] = set()  # functions whose arguments or result have no JSON form

    @property
    def replaying(self) -> bool:
        """Whether values come from a recording (a student kit) rather than the reference code."""
        return self.module is None

    def call(self, name: str, function: Callable[..., Any] | None, args: tuple[Any, ...]) -> Any:
        """``function(*args)`` live, or its recorded value; :class:`NotRecorded` if the kit lacks it."""
        if self.replaying:
            assert self.recording is not None
            try:
                key = self._key(name, args)
            except Unrecordable as error:
                raise NotRecorded(f"{name} was called with {error}") from error
            if key not in self.recording.calls:
                raise NotRecorded(f"{name} was not recorded for these inputs")
            return decode(self.recording.calls[key])
        if function is None:
            raise CourseError(f"the reference implementation has no function {name.removeprefix('reference.')!r}")
        result = function(*args)
        if self.record:
            try:
                self.recorded[self._key(name, args)] = encode(result)
            except Unrecordable:  # a kit reports the check as not recorded; the kit's builder says which
                self.unrecordable.add(name)
        return result

    def _key(self, name: str, args: tuple[Any, ...]) -> str:
        return json.dumps([name, [self._argument(arg) for arg in args]], sort_keys=True)

    def _argument(self, value: Any) -> Any:
        described = self.models.describe(value)
        if described is not None:
            return {"$reference": described}
        if isinstance(value, (list, tuple)):
            return [self._argument(item) for item in value]
        if isinstance(value, dict):
            return {str(key): self._argument(item) for key, item in value.items()}
        return encode(value)


class ReferenceFunctions:
    """``context.reference``: the reference module's functions, through a :class:`ReferenceSide`."""

    def __init__(self, side: ReferenceSide) -> None:
        self._side = side

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        side = self._side
        function = getattr(side.module, name, None) if side.module is not None else None

        def call(*args: Any) -> Any:
            return side.call(f"reference.{name}", function, args)

        return call

    def trace(self, name: str, *args: Any) -> dict[str, Any]:
        """What the reference function ``name`` does on ``args``: its generate calls and forward passes and the models
        it ran, as a kernel's call answer gives a student's (grader/grading/tracing.py); live or replayed."""
        side = self._side
        function = getattr(side.module, name, None) if side.module is not None else None

        def run(*arguments: Any) -> dict[str, Any]:
            from grader.grading.tracing import traced

            assert function is not None
            return traced(function, *arguments)

        trace: dict[str, Any] = side.call(f"trace.{name}", run if function is not None else None, args)
        return trace

    def expected(self, function: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """A check module's :func:`reference_side` function, live or replayed."""
        if not getattr(function, REFERENCE_SIDE_MARK, False):
            raise TypeError(f"{function.__qualname__} is not marked @reference_side")
        return self._side.call(f"{function.__module__}.{function.__qualname__}", function, args)


def encode(value: Any) -> Any:
    """A JSON form of a reference result or argument (tuples as lists, dtypes tagged)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: encode(item) for key, item in value.items()}
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        return {"$dtype": str(value).removeprefix("torch.")}
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", None) == 0:
        return encode(value.item())  # a numpy or torch scalar
    raise Unrecordable(f"a value of type {type(value).__name__}")


def decode(value: Any) -> Any:
    """The value :func:`encode` recorded (tuples come back as lists)."""
    if isinstance(value, list):
        return [decode(item) for item in value]
    if isinstance(value, dict):
        if set(value) == {"$dtype"}:
            import torch

            return getattr(torch, value["$dtype"])
        return {key: decode(item) for key, item in value.items()}
    return value


def recorded_elsewhere(reference: ReferenceSide, zoo: ModelZoo | None) -> list[str]:
    """A warning when a student kit's recorded values were recorded on other tiny models than this machine builds."""
    recording = reference.recording
    if reference.replaying and recording is not None and zoo is not None and recording.zoo != zoo.key:
        versions = ", ".join(f"{name} {version}" for name, version in sorted(recording.versions.items()))
        return [
            f"Warning: the expected values of this kit were recorded on tiny models built with {versions or 'other versions'} "
            f"(zoo {recording.zoo}), but this machine builds different ones (zoo {zoo.key}); values compared with "
            "the reference may be off. Install the versions in the kit's constraints.txt."
        ]
    return []
