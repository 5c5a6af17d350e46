"""Bad submissions get a clear result and lose nothing else.

One real `grade` run over a folder of broken notebooks, next to a good one: a syntax error, an
exception and an infinite loop in cells, a missing function, a kernel that dies, a loop that
ignores interrupts, a malformed .ipynb, a file that is not a notebook, an unrecognised notebook.
The run uses a copy of the course whose cell time limit is 4 s.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from grader.authoring import make_notebook, write_notebook
from tests.contract import run_grade

IMPORTS_MARKER = "import torch\nfrom transformers import"


@pytest.fixture(scope="module")
def short_limits_course(tmp_path_factory: pytest.TempPathFactory, root: Path) -> Path:
    """A copy of the course whose ptq-bnb rubric interrupts cells after 4 s."""
    copy = tmp_path_factory.mktemp("course")
    shutil.copytree(root / "assignments", copy / "assignments")
    rubric = copy / "assignments" / "ptq-bnb" / "rubric.yaml"
    text = rubric.read_text()
    assert "cell_timeout_s: 180" in text
    rubric.write_text(text.replace("cell_timeout_s: 180", "cell_timeout_s: 4"))
    return copy


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory, ptq_sources, short_limits_course: Path, zoo: object) -> Path:
    """Write the broken submissions and grade them all in one `grade` run."""
    solution = ptq_sources.solution_cells()
    imports = next(cell for cell in solution if IMPORTS_MARKER in cell[1])
    helpers = next(cell for cell in solution if "def get_model_memory_footprint" in cell[1])
    analysis = solution[-1]
    folder = tmp_path_factory.mktemp("submissions")
    notebooks: dict[str, Any] = {
        # A cell that is not valid Python between good ones: the rest still runs and scores.
        "syntax-error": make_notebook("ptq-bnb", [imports, ("code", "def broken(:\n    pass"), helpers]),
        # A cell raising, then a cell that never ends, then the helpers: both get recorded, the
        # helpers still get defined and graded.
        "exception-and-loop": make_notebook(
            "ptq-bnb",
            [imports, ("code", "raise ValueError('my data file is missing')"), ("code", "while True:\n    pass"), helpers],
        ),
        # Only one of the two functions.
        "missing-function": make_notebook("ptq-bnb", [imports, ("code", helpers[1].split("def generate_text_and_time")[0])]),
        # The kernel exits in the middle; the written answers can still be read.
        "kernel-dies": make_notebook("ptq-bnb", [imports, helpers, ("code", "import os\nos._exit(1)"), analysis]),
        # A cell that ignores the interrupt signal and never ends: the kernel has to be stopped.
        "stubborn-loop": make_notebook(
            "ptq-bnb",
            [
                imports,
                helpers,
                ("code", "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"),
            ],
        ),
        # No metadata and none of the assignment's functions.
        "unrecognised": make_notebook(None, [("code", "print('hello')")]),
    }
    for name, notebook in notebooks.items():
        write_notebook(folder / f"{name}.ipynb", notebook)
    (folder / "malformed.ipynb").write_text('{"cells": [ {"cell_type": "code", "source": "x = 1"', encoding="utf-8")
    (folder / "not-a-notebook.ipynb").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    out = tmp_path_factory.mktemp("out")
    run_grade(str(folder), "--out", str(out), "--course", str(short_limits_course))
    return out


def load(out: Path, name: str) -> dict[str, Any]:
    return json.loads((out / name / "results.json").read_text())


def checks_by_id(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {test["extra_data"]["check_id"]: test for test in results["tests"]}


def test_every_submission_gets_a_result(graded: Path) -> None:
    names = {path.parent.name for path in graded.glob("*/results.json")}
    assert names == {
        "syntax-error",
        "exception-and-loop",
        "missing-function",
        "kernel-dies",
        "stubborn-loop",
        "unrecognised",
        "malformed",
        "not-a-notebook",
    }
    assert (graded / "summary.html").exists() and (graded / "grades.csv").exists()


def test_syntax_error_cell_is_reported_and_the_rest_still_scores(graded: Path) -> None:
    results = load(graded, "syntax-error")
    problems = results["extra_data"]["cell_problems"]
    assert [p["kind"] for p in problems] == ["error"]
    assert problems[0]["message"].startswith("SyntaxError")
    outcomes = {check_id: test["extra_data"]["outcome"] for check_id, test in checks_by_id(results).items()}
    assert outcomes["memory-fp32"] == outcomes["generate-output"] == outcomes["generate-latency"] == "passed"


def test_exception_and_infinite_loop_are_recorded_and_grading_goes_on(graded: Path) -> None:
    results = load(graded, "exception-and-loop")
    problems = results["extra_data"]["cell_problems"]
    assert problems[0]["kind"] == "error" and "my data file is missing" in problems[0]["message"]
    assert problems[1]["kind"] == "timeout" and "4 s per-cell limit" in problems[1]["message"]
    tests = checks_by_id(results)
    assert tests["memory-fp32"]["extra_data"]["outcome"] == "passed"  # defined after the loop
    assert "no variable named 'configurations'" in tests["config-int8"]["output"]


def test_missing_function_is_an_error_naming_it(graded: Path) -> None:
    tests = checks_by_id(load(graded, "missing-function"))
    assert tests["memory-fp32"]["extra_data"]["outcome"] == "passed"
    assert tests["generate-output"]["extra_data"]["outcome"] == "error"
    assert "defines no function named 'generate_text_and_time'" in tests["generate-output"]["output"]


def test_dead_kernel_gives_a_result_with_what_could_still_be_graded(graded: Path) -> None:
    results = load(graded, "kernel-dies")
    kinds = [p["kind"] for p in results["extra_data"]["cell_problems"]]
    assert kinds[0] == "kernel-died"
    tests = checks_by_id(results)
    assert tests["memory-fp32"]["extra_data"]["outcome"] == "error"
    assert "died" in tests["memory-fp32"]["output"]
    assert tests["analysis-memory"]["extra_data"]["outcome"] == "manual"  # read from the notebook file


def test_a_loop_that_ignores_interrupts_gets_its_kernel_stopped(graded: Path) -> None:
    results = load(graded, "stubborn-loop")
    kinds = [p["kind"] for p in results["extra_data"]["cell_problems"]]
    assert kinds == ["timeout"]
    message = checks_by_id(results)["memory-fp32"]["output"]
    assert "the kernel did not stop after cell 3 was interrupted" in message


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("malformed", "is not valid notebook JSON"),
        ("not-a-notebook", "is not UTF-8 text"),
        ("unrecognised", "could not tell which assignment"),
    ],
)
def test_unreadable_submissions_get_a_clear_message(graded: Path, name: str, words: str) -> None:
    results = load(graded, name)
    assert results["score"] == 0 and results["tests"] == []
    assert words in results["extra_data"]["error"]
    assert words in results["output"]
    page = (graded / name / "feedback.html").read_text()
    assert "could not be graded" in page
