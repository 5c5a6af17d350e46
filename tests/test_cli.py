"""The `grade` command: usage errors are clear, one notebook can be graded on its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.authoring import make_notebook, write_notebook
from tests.conftest import SEED


def grade(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def test_help_lists_the_commands_and_options() -> None:
    completed = grade("--help")
    assert completed.returncode == 0 and "run*" in completed.stdout and "gradescope" in completed.stdout
    completed = grade("run", "--help")
    assert completed.returncode == 0
    for option in ("--assignment", "--out", "--workers", "--force", "--layout", "--json", "--real-models", "--seed", "--course"):
        assert option in completed.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["nowhere/"], "nowhere does not exist"),
        (["{empty}"], "holds no .ipynb notebooks"),
        (
            ["{empty}", "--assignment", "latency-typo"],
            "unknown assignment 'latency-typo'; this course has: latency, perplexity, ptq-bnb",
        ),
    ],
)
def test_usage_errors_are_clear(tmp_path: Path, args: list[str], words: str) -> None:
    completed = grade(*[arg.replace("{empty}", str(tmp_path)) for arg in args], cwd=tmp_path.parent)
    assert completed.returncode == 2
    assert words in completed.stderr


def test_one_notebook_with_assignment_and_out(tmp_path: Path, ptq_sources, zoo: object) -> None:
    helpers = next(cell for cell in ptq_sources.solution_cells() if "def get_model_memory_footprint" in cell[1])
    imports = next(cell for cell in ptq_sources.solution_cells() if "import torch" in cell[1])
    notebook = tmp_path / "alice.ipynb"
    write_notebook(notebook, make_notebook(None, [imports, helpers]))  # no metadata
    out = tmp_path / "results"
    completed = grade(str(notebook), "--assignment", "ptq-bnb", "--out", str(out), "--seed", str(SEED))
    assert completed.returncode == 0, completed.stderr[-2000:]
    results = json.loads((out / "alice" / "results.json").read_text())
    outcomes = {test["extra_data"]["check_id"]: test["extra_data"]["outcome"] for test in results["tests"]}
    assert outcomes["memory-fp32"] == outcomes["generate-output"] == "passed"
    assert "alice" in completed.stdout
    assert (out / "summary.html").exists() and (out / "alice" / "feedback.html").exists()


def test_a_notebook_without_metadata_is_recognised_by_its_functions(tmp_path: Path, ptq_sources, zoo: object) -> None:
    helpers = next(cell for cell in ptq_sources.solution_cells() if "def get_model_memory_footprint" in cell[1])
    notebook = tmp_path / "bob.ipynb"
    write_notebook(notebook, make_notebook(None, [("code", "import torch, time"), helpers, ("code", "configurations = []")]))
    completed = grade(str(notebook), "--out", str(tmp_path / "out"), "--seed", str(SEED))
    assert completed.returncode == 0, completed.stderr[-2000:]
    results = json.loads((tmp_path / "out" / "bob" / "results.json").read_text())
    assert results["extra_data"]["assignment"] == "ptq-bnb"
    assert "defines 3 of the functions" in results["extra_data"]["notes"][0]
