"""Tools for course authors: build notebooks from cell sources, and variants by exact edits.

``scripts/build_notebooks.py`` writes each assignment's starter, solution and sample
submissions with these; the tests build their mistake notebooks the same way.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat

from grader.discover.notebook import METADATA_KEY

Cells = list[tuple[str, str]]


def load_notebook_sources(reference_dir: Path) -> ModuleType:
    """An assignment's ``notebooks.py`` (starter_cells, solution_cells, SAMPLES)."""
    path = reference_dir / "notebooks.py"
    spec = importlib.util.spec_from_file_location(f"notebooks_{reference_dir.name.replace('-', '_')}", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_notebook(assignment: str | None, cells: Cells) -> Any:
    """A v4 notebook of (cell type, source) pairs, its metadata naming the assignment."""
    made = nbformat.v4.new_notebook()
    made.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    made.metadata["language_info"] = {"name": "python"}
    if assignment is not None:
        made.metadata[METADATA_KEY] = {"assignment": assignment}
    for kind, source in cells:
        made.cells.append(nbformat.v4.new_markdown_cell(source) if kind == "markdown" else nbformat.v4.new_code_cell(source))
    for index, cell in enumerate(made.cells):
        cell["id"] = f"{assignment or 'cell'}-{index}"  # stable ids: rebuilding gives the same files
    return made


class EditError(ValueError):
    """An edit did not match exactly once."""


def with_edits(cells: Cells, edits: list[tuple[str, str]]) -> Cells:
    """The cells with each (old, new) edit applied; each ``old`` must occur exactly once."""
    edited = list(cells)
    for old, new in edits:
        hits = sum(source.count(old) for _, source in edited)
        if hits != 1:
            raise EditError(f"the edit {old[:70]!r} matches {hits} times, not once")
        edited = [(kind, source.replace(old, new)) for kind, source in edited]
    return edited


def write_notebook(path: Path, notebook: Any) -> None:
    """Validate and write a notebook."""
    nbformat.validate(notebook)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(notebook) + "\n", encoding="utf-8")


def questions_section(intro: str, questions: list[tuple[str, str, str]], answers: bool) -> str:
    """A markdown section of numbered questions: the starter's TODO placeholders, or the solution's answers.

    ``questions`` holds (title, the starter's placeholder, the solution's answer); the
    ``written_answer`` check finds each answer under its bold title.
    """
    items = []
    for number, (title, placeholder, answer) in enumerate(questions, start=1):
        text = answer if answers else f"**TODO**: {placeholder}"
        items.append(f"{number}.  **{title}:** \n    *   {text}")
    return intro + "\n" + "\n\n".join(items)
