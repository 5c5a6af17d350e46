"""Reading submitted notebooks, statically: format, defined names, markdown, assignment."""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from nbformat.warnings import MissingIDFieldWarning

from grader.errors import AssignmentNotRecognised, NotebookError

METADATA_KEY = "llm_grader"
MAX_NOTEBOOK_BYTES = 50 * 1024 * 1024


def read_notebook(path: Path, max_bytes: int = MAX_NOTEBOOK_BYTES) -> Any:
    """The notebook at ``path`` as nbformat v4, or a :class:`NotebookError` saying what is wrong.

    A file over ``max_bytes`` is refused by its size, before any of it is read.
    """
    try:
        size = path.stat().st_size
    except OSError as error:
        raise NotebookError(f"{path.name} cannot be read: {error.strerror or error}") from error
    if size > max_bytes:
        raise NotebookError(
            f"{path.name} is {size / 1024**2:.0f} MiB; notebooks over {max_bytes / 1024**2:g} MiB are not accepted "
            "(clear large outputs before submitting)"
        )
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotebookError(
            f"{path.name} is not UTF-8 text (byte {error.start} is invalid): it is not a Jupyter notebook"
        ) from error
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise NotebookError(
            f"{path.name} is not valid notebook JSON (line {error.lineno}, column {error.colno}: "
            f"{error.msg.removesuffix(' at').removesuffix(' starting').lower()}); "
            "open it in Jupyter and save it again, or re-download it"
        ) from error
    if not isinstance(data, dict) or ("cells" not in data and "worksheets" not in data):
        raise NotebookError(f"{path.name} is JSON but not a Jupyter notebook (it has no cells)")
    major = data.get("nbformat")
    if not isinstance(major, int) or major < 3:
        raise NotebookError(f"{path.name} has notebook format {major!r}; only formats 3 and 4 can be graded")
    try:
        # Notebooks saved before nbformat 4.5 have no cell ids: add them rather than warn.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MissingIDFieldWarning)
            notebook = nbformat.reads(text, as_version=4)
        _, normalized = nbformat.validator.normalize(notebook)
        notebook = nbformat.from_dict(normalized)
        nbformat.validate(notebook)
    except Exception as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise NotebookError(f"{path.name} is not a valid Jupyter notebook: {message}") from error
    if not any(cell.cell_type == "code" and cell.source.strip() for cell in notebook.cells):
        raise NotebookError(f"{path.name} has no code cells with code in them: there is nothing to run")
    return notebook


def python_source(cell_source: str) -> str:
    """A code cell's source as plain Python (IPython magics and shell escapes transformed)."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return str(TransformerManager().transform_cell(cell_source))
    except Exception:  # a cell IPython itself cannot parse: leave it for ast to reject
        return cell_source


def code_trees(notebook: Any) -> Iterable[ast.Module]:
    """The syntax tree of each code cell; cells with syntax errors are skipped (the rest of the notebook still counts)."""
    for cell in notebook.cells:
        if cell.cell_type == "code":
            try:
                yield ast.parse(python_source(cell.source))
            except SyntaxError:
                continue


def defined_names(notebook: Any) -> set[str]:
    """Top-level functions, classes and variables the notebook's code cells define (see :func:`code_trees`)."""
    names: set[str] = set()
    for tree in code_trees(notebook):
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    names.update(_target_names(target))
    return names


def called_names(notebook: Any) -> set[str]:
    """The names the notebook's code calls: ``f`` of ``f(...)`` and ``m`` of ``x.m(...)`` (comments and strings
    are not calls; see :func:`code_trees`)."""
    names: set[str] = set()
    for tree in code_trees(notebook):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                if isinstance(node.func, ast.Name):
                    names.add(node.func.id)
                elif isinstance(node.func, ast.Attribute):
                    names.add(node.func.attr)
    return names


def _target_names(target: ast.expr) -> Iterable[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _target_names(element)


def syntax_errors(notebook: Any) -> list[tuple[int, str]]:
    """(cell index, message) for every code cell that is not valid Python."""
    errors = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        try:
            ast.parse(python_source(cell.source))
        except SyntaxError as error:
            errors.append((index, f"line {error.lineno}: {error.msg}"))
    return errors


@dataclass(frozen=True)
class Identification:
    """Which assignment a notebook is, and how the grader knows."""

    assignment: str
    how: str


def identify_assignment(notebook: Any, candidates: Sequence[tuple[str, Sequence[str]]]) -> Identification:
    """Recognise the assignment: the starter's metadata, else the names the notebook defines.

    ``candidates`` holds (assignment name, names its starter asks for) for every assignment.
    """
    known = {name for name, _ in candidates}
    tagged = (
        notebook.metadata.get(METADATA_KEY, {}).get("assignment")
        if isinstance(notebook.metadata.get(METADATA_KEY), dict)
        else None
    )
    if isinstance(tagged, str):
        if tagged in known:
            return Identification(tagged, f"the notebook's metadata names {tagged!r}")
        raise AssignmentNotRecognised(
            f"the notebook's metadata names the assignment {tagged!r}, which this course does not have "
            f"(it has: {', '.join(sorted(known))}); pass --assignment to grade it as one of those"
        )
    defined = defined_names(notebook)
    scores = []
    for name, wanted in candidates:
        if wanted:
            found = [w for w in wanted if w in defined]
            scores.append((len(found) / len(wanted), len(found), name))
    scores.sort(reverse=True)
    if not scores or scores[0][0] < 0.5:
        raise AssignmentNotRecognised(
            "could not tell which assignment this notebook is: its metadata does not say, and it defines "
            "too few of any assignment's functions; pass --assignment NAME"
        )
    if len(scores) > 1 and scores[1][:2] == scores[0][:2]:
        tied = " and ".join(sorted(name for score, count, name in scores if (score, count) == scores[0][:2]))
        raise AssignmentNotRecognised(f"this notebook could be {tied}: pass --assignment NAME to say which")
    _, count, name = scores[0]
    return Identification(name, f"it defines {count} of the functions and variables {name!r} asks for")


HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def section_cells(notebook: Any, heading: str) -> list[str]:
    """The markdown cells of the section under the first heading containing ``heading`` (the heading's own cell first)."""
    wanted = heading.casefold()
    cells: list[str] = []
    level: int | None = None
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            match = HEADING.match(line)
            if match and level is None and wanted in match.group(2).casefold():
                level = len(match.group(1))
            elif match and level is not None and cells and len(match.group(1)) <= level:
                return cells
        if level is not None:
            cells.append(cell.source)
    return cells


def markdown_after(notebook: Any, heading: str) -> str:
    """The markdown text after the section under the first heading containing ``heading`` (from the next heading of
    the same or a higher level on): where a student puts answers under a heading of their own ("## My answers")."""
    wanted = heading.casefold()
    collected: list[str] = []
    level: int | None = None
    ended = False
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            match = HEADING.match(line)
            if match and level is None and wanted in match.group(2).casefold():
                level = len(match.group(1))
            elif match and level is not None and len(match.group(1)) <= level:
                ended = True
            if ended:
                collected.append(line)
        if ended:
            collected.append("")
    return "\n".join(collected)


def markdown_section(notebook: Any, heading: str) -> str | None:
    """The markdown text under the first heading containing ``heading``, up to the next heading of
    the same or a higher level (code cells in between are skipped). None if there is no such heading."""
    wanted = heading.casefold()
    collected: list[str] = []
    level: int | None = None
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            match = HEADING.match(line)
            if match:
                depth = len(match.group(1))
                if level is None and wanted in match.group(2).casefold():
                    level = depth
                    continue
                if level is not None and depth <= level:
                    return "\n".join(collected)
            if level is not None:
                collected.append(line)
        if level is not None:
            collected.append("")
    return "\n".join(collected) if level is not None else None
