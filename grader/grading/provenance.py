"""What a result records of how it was made: the grader's version, the seed, the models, and the digests of the
notebook and the rubric it was graded against."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grader import __version__
from grader.digest import file_sha256
from grader.grading.course import Assignment
from grader.zoo import ModelZoo


def provenance(path: Path, assignment: Assignment | None, seed: int, zoo: ModelZoo | None) -> dict[str, Any]:
    """The provenance of a result for the notebook at ``path`` (``assignment`` None: it was not identified)."""
    made: dict[str, Any] = {"grader_version": __version__, "seed": seed, "models": "real" if zoo is None else "tiny-zoo"}
    if (notebook := file_sha256(path)) is not None:
        made["notebook_sha256"] = notebook
    if assignment is not None and (rubric := file_sha256(assignment.rubric_path)) is not None:
        made["rubric_sha256"] = rubric
    if zoo is not None:
        made["zoo"] = zoo.key
    return made
