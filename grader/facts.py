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


WARNING_PREFIX = "Sandbox warning: "  # a notice of a run whose kernels were less isolated than the sandbox allows
IsolationMode = Literal["own-user", "root", "user", "none"]

# What protects the machine from a student's kernel, per way the sandbox could start (README "Security model" holds
# the same table, with the ways of running that lead to each row).
PROTECTION_NAMES = (
    "own unprivileged user",
    "no network",
    "course, grader and other submissions hidden",
    "private /tmp and /dev/shm",
    "memory, process and file-size limits",
    "killed with the grader",
)
PROTECTIONS: dict[IsolationMode, tuple[str, str, tuple[str, ...]]] = {
    # mode: (how the kernel ran, in words; whether the sandbox is whole; each protection)
    "own-user": ("sandboxed, as a user of its own", "whole", ("yes", "yes", "yes", "yes", "yes", "yes")),
    "root": ("sandboxed, as root", "partial", ("no: root (could remount what it sees)", "yes", "yes", "yes", "yes", "yes")),
    "user": (
        "sandboxed in a user namespace, as the grader's user",
        "partial",
        ("no: the grader's user", "yes", "yes", "yes", "memory and file size (processes not counted per kernel)", "yes"),
    ),
    "none": (
        "not sandboxed",
        "none",
        ("no", "no", "no", "no", "memory and file size", "yes"),
    ),
}
