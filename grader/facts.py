"""Value types every layer shares: a check's outcome, whose points it awards, a cell's problem.

A leaf module: it imports nothing of the grader, so reports, results and the kernel side can use
these types without pulling in the checks or the notebook runner (nbclient).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Outcome = Literal["passed", "failed", "error", "manual", "skipped"]
# Whose points a check's are: the grader's (automatic), or the instructor's (graded by hand;
# the check only rejects a missing answer). Fixed per kind, so every student has the same maximum.
GradedBy = Literal["grader", "instructor"]


@dataclass(frozen=True)
class CellProblem:
    """Something that went wrong in one cell of the student's notebook."""

    cell_index: int
    kind: Literal["error", "timeout", "not-run", "kernel-died"]
    message: str
    traceback: str = ""
    source: str = ""
