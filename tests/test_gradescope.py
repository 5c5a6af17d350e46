"""The LMS side: the Gradescope autograder zip, its real run_autograder, and JSON on stdout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.zoo import ModelZoo
from tests.conftest import SEED
from tests.contract import GradescopeResults


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, root: Path) -> Path:
    """The autograder zip for perplexity, unpacked as Gradescope unpacks it (/autograder/source)."""
    out = tmp_path_factory.mktemp("zip")
    built = subprocess.run(
        [sys.executable, "-m", "grader", "gradescope", "perplexity", str(out)], capture_output=True, text=True, cwd=root
    )
    assert built.returncode == 0, built.stderr
    archive = Path(built.stdout.strip())
    unpacked = tmp_path_factory.mktemp("source")
    with zipfile.ZipFile(archive) as zipped:
        names = zipped.namelist()
        zipped.extractall(unpacked)
        modes = {info.filename: info.external_attr >> 16 for info in zipped.infolist()}
    assert {"setup.sh", "run_autograder", "course/rubrics/perplexity.yaml", "course/reference/perplexity/reference.py"} <= set(
        names
    )
    assert "grader-src/grader/gradescope.py" in names and "grader-src/pyproject.toml" in names
    assert not any("solution" in name or "submissions/" in name for name in names)  # the solution is not shipped
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111
    for script in ("setup.sh", "run_autograder"):
        (unpacked / script).chmod(0o755)
        assert subprocess.run(["bash", "-n", str(unpacked / script)]).returncode == 0
    return unpacked


def run_autograder(source: Path, root: Path, zoo: ModelZoo, files: dict[str, bytes]) -> GradescopeResults:
    """Lay out ``root`` like /autograder with these submitted files, run the real script, read results.json."""
    (root / "submission").mkdir(parents=True)
    (root / "results").mkdir()
    for name, data in files.items():
        (root / "submission" / name).write_bytes(data)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": sys.executable, "GRADER_CACHE_DIR": str(zoo.cache_dir)}
    completed = subprocess.run([str(source / "run_autograder")], env=env, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-2000:]
    return GradescopeResults.model_validate(json.loads((root / "results" / "results.json").read_text()))


def test_the_solution_gets_full_marks_with_hidden_checks_after_publishing(
    source: Path, tmp_path: Path, zoo: ModelZoo, root: Path
) -> None:
    notebook = (root / "submissions" / "perplexity" / "solution.ipynb").read_bytes()
    results = run_autograder(source, tmp_path / "autograder", zoo, {"my_notebook.ipynb": notebook, "notes.txt": b"hi"})
    assert results.score == results.max_score == 20 and results.execution_time > 0
    assert results.by_id()["loss-hidden"].visibility == "after_published"
    assert results.by_id()["loss-public"].visibility == "visible"


@pytest.mark.parametrize(
    ("files", "words"),
    [
        ({"my_notebook.ipynb": b'{"cells": [oops'}, "my_notebook.ipynb is not valid notebook JSON"),
        ({"answers.pdf": b"%PDF-1.4"}, "holds no Jupyter notebook (.ipynb): upload your notebook file (found: answers.pdf)"),
        ({}, "the submission is empty"),
    ],
)
def test_bad_submissions_get_a_valid_results_json_saying_why(
    source: Path, tmp_path: Path, zoo: ModelZoo, files: dict[str, bytes], words: str
) -> None:
    results = run_autograder(source, tmp_path / "autograder", zoo, files)
    assert results.score == 0 and words in results.output


def test_a_crashing_autograder_still_writes_results(source: Path, tmp_path: Path, zoo: ModelZoo, root: Path) -> None:
    broken = tmp_path / "broken-source"
    shutil.copytree(source, broken)
    (broken / "course" / "rubrics" / "perplexity.yaml").write_text("assignment: [unclosed\n")
    notebook = (root / "submissions" / "perplexity" / "solution.ipynb").read_bytes()
    results = run_autograder(broken, tmp_path / "autograder", zoo, {"nb.ipynb": notebook})
    assert results.score == 0 and "The autograder failed on this submission" in results.output
    assert "tell your instructor" in results.output


def test_a_submission_on_stdin_gives_its_results_json_on_stdout(root: Path, tmp_path: Path) -> None:
    notebook = (root / "submissions" / "perplexity" / "mistake-token-count.ipynb").read_bytes()
    completed = subprocess.run(
        [sys.executable, "-m", "grader", "-", "--json", "-", "--out", str(tmp_path / "out"), "--seed", str(SEED), "-q"],
        input=notebook,
        capture_output=True,
        cwd=root,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    results = GradescopeResults.model_validate(json.loads(completed.stdout))
    assert results.losing() == {"tokens-hidden"}
    assert (tmp_path / "out" / "stdin" / "results.json").exists()
