"""Every function and variable a starter asks students to fill in has a check of its own, tagged with its name.

A function the starter leaves with a TODO, a ``raise NotImplementedError`` or a ``___`` blank must be
the ``target`` of at least one automatic check; so must every notebook variable a TODO cell defines at
top level and the rubric names among the assignment's variables; and every markdown section with TODO
questions must have written-answer checks. A starter function judged only through another (the way
``build_results_table`` once was, through the controller) fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = sorted(path.parent.name for path in (ROOT / "assignments").glob("*/rubric.yaml"))
# Variables of a starter's TODO cells that the student fills in and the rubric grades by name.
GRADED_VARIABLES = {"ptq-bnb": {"configurations", "df_results"}}


def _starter(assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "assignments" / assignment / "starter.ipynb", as_version=4)


def _rubric(assignment: str) -> dict:
    return yaml.safe_load((ROOT / "assignments" / assignment / "rubric.yaml").read_text(encoding="utf-8"))


def functions_to_fill(notebook: nbformat.NotebookNode) -> set[str]:
    """Functions whose starter body holds a TODO, a NotImplementedError or a ___ blank."""
    names = set()
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        for node in tree.body:
            text = ast.get_source_segment(cell.source, node) or ""
            if isinstance(node, ast.FunctionDef) and re.search(r"TODO|NotImplementedError|___", text):
                names.add(node.name)
    return names


def variables_in_todo_cells(notebook: nbformat.NotebookNode) -> set[str]:
    """Top-level names assigned in code cells that hold a TODO."""
    names = set()
    for cell in notebook.cells:
        if cell.cell_type == "code" and "TODO" in cell.source:
            for node in ast.parse(cell.source).body:
                for target in getattr(node, "targets", []):
                    if isinstance(target, ast.Name):
                        names.add(target.id)
    return names


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_starter_function_has_a_check_of_its_own(assignment: str) -> None:
    rubric = _rubric(assignment)
    automatic = {check["target"] for check in rubric["checks"] if check["kind"] != "written_answer"}
    missing = functions_to_fill(_starter(assignment)) - automatic
    assert not missing, f"{assignment}: starter functions with no check targeting them: {sorted(missing)}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_graded_variable_has_a_check_of_its_own(assignment: str) -> None:
    graded = GRADED_VARIABLES.get(assignment, set())
    assert graded <= variables_in_todo_cells(_starter(assignment)), "the starter no longer defines these in TODO cells"
    targets = {check["target"] for check in _rubric(assignment)["checks"]}
    assert graded <= targets, f"{assignment}: graded variables with no check: {sorted(graded - targets)}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_written_question_has_a_written_answer_check(assignment: str) -> None:
    questions = 0
    for cell in _starter(assignment).cells:
        if cell.cell_type == "markdown":
            questions += len(re.findall(r"\*\*TODO\*\*", cell.source))
    written = [check for check in _rubric(assignment)["checks"] if check["kind"] == "written_answer"]
    assert len(written) == questions, f"{assignment}: {questions} TODO questions, {len(written)} written-answer checks"


def test_the_scan_finds_what_it_should() -> None:
    """The scan itself: a starter function judged only through another would be reported."""
    assert "build_results_table" in functions_to_fill(_starter("quantization"))
    assert {"configurations", "df_results"} <= variables_in_todo_cells(_starter("ptq-bnb"))
