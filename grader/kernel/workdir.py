"""A submission's working folder: a private copy of the notebook and its given files, owned by the kernel's user."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def prepare_workdir(notebook_path: Path, given_files: list[Path], parent: Path | None = None) -> Path:
    """A temporary working copy: the notebook and the files the assignment gives, nothing else."""
    workdir = Path(tempfile.mkdtemp(prefix="llm-grader-work-", dir=parent))
    populate_workdir(workdir, notebook_path, given_files)
    return workdir


def populate_workdir(workdir: Path, notebook_path: Path, given_files: list[Path], owner: int | None = None) -> None:
    """Copy the notebook and the files the assignment gives into an (empty) working folder
    (given to the kernel's user ``owner``, if it has one)."""
    copied = [workdir / notebook_path.name]
    shutil.copyfile(notebook_path, copied[0])  # the bytes only: not a link, not its owner or mode
    for path in given_files:
        target = workdir / path.name
        if path.is_dir():
            shutil.copytree(path, target)
        else:
            shutil.copy2(path, target)
        copied.append(target)
    if owner is not None:
        for path in copied:
            for item in [path, *(path.rglob("*") if path.is_dir() else [])]:
                os.lchown(item, owner, owner)
