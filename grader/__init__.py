"""An autograder for notebooks of a course on LLM inference performance."""

from __future__ import annotations

__version__ = "0.1.0"


def check(target: str | None = None, path: str | None = None, assignment: str | None = None) -> None:
    """In a notebook: run the public checks on its saved file and show the result under the cell."""
    from grader.student.notebook_check import check as run_check

    run_check(target, path, assignment)
