"""The grader's error family.

Each user-facing error owns its exit code and its one-line rendering (as click's
``ClickException`` does); only the CLI entry point turns them into an exit. Messages say what
was expected, what was found, and what to do.
"""

from __future__ import annotations

from pathlib import Path


class GraderError(Exception):
    """Base of every error the grader reports to a user."""

    exit_code = 1

    def show(self) -> str:
        """The message a user sees."""
        return str(self)


class UsageError(GraderError):
    """The command line asked for something that cannot be done."""

    exit_code = 2


class RubricError(GraderError):
    """A rubric file is missing, malformed, or does not match the schema."""

    exit_code = 3

    def __init__(self, path: Path | str, problems: list[str]) -> None:
        self.path = Path(path)
        self.problems = problems
        joined = "\n".join(f"  - {problem}" for problem in problems)
        super().__init__(f"invalid rubric {self.path}:\n{joined}")


class CourseError(GraderError):
    """The course folder (its assignments' rubrics, references, check modules) is incomplete or inconsistent."""

    exit_code = 3


class ZooError(GraderError):
    """The tiny model zoo could not be built or cannot serve a requested model."""

    exit_code = 4


class NotebookError(GraderError):
    """A submitted file is not a notebook the grader can run (malformed, wrong format)."""


class AssignmentNotRecognised(GraderError):
    """The grader could not tell which assignment a notebook belongs to."""


class KernelError(GraderError):
    """The notebook's kernel could not be started, died, or stopped answering."""
