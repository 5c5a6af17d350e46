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
from tests.contract import GradescopeResults, here, on_cuda
from tests.grade_server import grade_process


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, root: Path) -> Path:
    """The autograder zip for perplexity, unpacked as Gradescope unpacks it (/autograder/source)."""
    out = tmp_path_factory.mktemp("zip")
    built = grade_process(["gradescope", "perplexity", str(out)], cwd=root)
    assert built.returncode == 0, built.stderr
    archive = Path(built.stdout.strip())
    unpacked = tmp_path_factory.mktemp("source")
    with zipfile.ZipFile(archive) as zipped:
        names = zipped.namelist()
        zipped.extractall(unpacked)
        modes = {info.filename: info.external_attr >> 16 for info in zipped.infolist()}
    folder = "course/assignments/perplexity/"
    shipped = {"rubric.yaml", "reference.py", "checks.py", "hidden_checks.py", "starter.ipynb"}
    assert {"setup.sh", "run_autograder", *(folder + name for name in shipped)} <= set(names)
    assert "grader-src/grader/reports/gradescope.py" in names and "grader-src/pyproject.toml" in names
    assert not any("solution" in name or "submissions/" in name for name in names)  # the solution is not shipped
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111
    for script in ("setup.sh", "run_autograder"):
        (unpacked / script).chmod(0o755)
        assert subprocess.run(["bash", "-n", str(unpacked / script)]).returncode == 0
    return unpacked


def gradescope_root(tmp_path: Path, source: Path, files: dict[str, bytes]) -> Path:
    """Lay out a root exactly as Gradescope does: the zip in source/, run_autograder copied to the root."""
    root = tmp_path / "autograder"
    shutil.copytree(source, root / "source")
    shutil.copy2(source / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    (root / "results").mkdir()
    for name, data in files.items():
        (root / "submission" / name).write_bytes(data)
    return root


def run_autograder(root: Path, zoo: ModelZoo) -> tuple[GradescopeResults, str]:
    """Run the copy of run_autograder from the root, as Gradescope does; its results.json and stdout."""
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": sys.executable, "GRADER_CACHE_DIR": str(zoo.cache_dir)}
    env.pop("PYTHONPATH", None)
    completed = subprocess.run(["./run_autograder"], env=env, cwd=root, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-2000:]
    document = json.loads((root / "results" / "results.json").read_text())
    return GradescopeResults.model_validate(document), completed.stdout


def test_the_solution_gets_full_marks_with_hidden_checks_after_publishing(
    source: Path, tmp_path: Path, zoo: ModelZoo, root: Path
) -> None:
    notebook = (root / "submissions" / "perplexity" / "solution.ipynb").read_bytes()
    autograder = gradescope_root(tmp_path, source, {"my_notebook.ipynb": notebook, "notes.txt": b"hi"})
    results, stdout = run_autograder(autograder, zoo)
    assert results.score == results.max_score == here("perplexity", 20)
    assert results.execution_time > 0
    assert 0 < results.extra_data["first_cell_s"] < results.execution_time  # taken to its first cell (the benchmark's row)
    assert results.by_id()["loss-hidden"].visibility == "after_published"
    assert results.by_id()["loss-public"].visibility == "visible"
    # The output states the public score only: students do not see their total while tests are hidden.
    assert results.output_format == "md" and "**Public checks: 9 / 9 points.** 5 hidden checks (11 points)" in results.output
    assert "20" not in results.output
    # On a CPU grader, a check that needs a GPU is never a passed 0 / 0 test: it is named in the output instead.
    if on_cuda():
        assert results.by_id()["timing-cuda-sync"].extra_data["outcome"] == "passed"
    else:
        assert "timing-cuda-sync" not in {test.extra_data["check_id"] for test in results.tests}
        assert results.by_id()["timing-cuda-sync"].extra_data["outcome"] == "skipped"
        assert "**Not graded here:** 1 point needs a GPU" in results.output
    # The debug log, for the instructor: what was graded, each check, where the results went.
    assert f"source {autograder / 'source'}" in stdout and "grading my_notebook.ipynb" in stdout
    assert "passed   4/4 loss-hidden [hidden]" in stdout and "wrote " in stdout


def test_a_mistake_gets_markdown_feedback_with_the_hint_and_links(
    source: Path, tmp_path: Path, zoo: ModelZoo, root: Path
) -> None:
    notebook = (root / "submissions" / "perplexity" / "mistake-batch-means.ipynb").read_bytes()
    results, _ = run_autograder(gradescope_root(tmp_path, source, {"nb.ipynb": notebook}), zoo)
    test = results.by_id()["loss-public"]
    assert test.status == "failed" and test.output_format == "md"
    assert "**Expected:** `" in test.output and "**Hint:**" in test.output and "**Read:** [" in test.output
    assert "**Failing public checks:**" in results.output and test.name in results.output


def test_a_notebook_whose_cells_fail_lists_them_with_their_error_lines(
    source: Path, tmp_path: Path, zoo: ModelZoo, root: Path
) -> None:
    notebook = json.loads((root / "submissions" / "perplexity" / "solution.ipynb").read_text())
    crash = {"cell_type": "code", "execution_count": None, "id": "crash", "metadata": {}, "outputs": [], "source": "1 / 0"}
    notebook["cells"].insert(1, crash)
    results, stdout = run_autograder(gradescope_root(tmp_path, source, {"nb.ipynb": json.dumps(notebook).encode()}), zoo)
    assert "**1 cell of your notebook failed**" in results.output
    assert "- Cell 2: `ZeroDivisionError: division by zero`" in results.output
    assert "ZeroDivisionError" in stdout  # the traceback is in the instructor's log


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
    results, stdout = run_autograder(gradescope_root(tmp_path, source, files), zoo)
    assert results.score == 0 and words in results.output and "wrote " in stdout


def test_a_crashing_autograder_still_writes_results(source: Path, tmp_path: Path, zoo: ModelZoo, root: Path) -> None:
    notebook = (root / "submissions" / "perplexity" / "solution.ipynb").read_bytes()
    autograder = gradescope_root(tmp_path, source, {"nb.ipynb": notebook})
    (autograder / "source" / "course" / "assignments" / "perplexity" / "rubric.yaml").write_text("assignment: [unclosed\n")
    results, stdout = run_autograder(autograder, zoo)
    assert results.score == 0 and "The autograder failed on this submission" in results.output
    assert "tell your instructor" in results.output
    assert "Traceback" in stdout and "Traceback" not in results.output


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


@pytest.mark.install
def test_setup_sh_installs_the_grader_and_its_models_then_run_autograder_grades_with_them(
    source: Path, tmp_path: Path, root: Path
) -> None:
    """setup.sh's install steps as far as this machine allows: Python is already new enough (no apt),
    torch comes from pip's configured index (no PyTorch index: only the package registries are
    reachable here); then the copied run_autograder grades with what setup.sh installed, nothing else."""
    notebook = (root / "submissions" / "perplexity" / "mistake-batch-means.ipynb").read_bytes()
    autograder = gradescope_root(tmp_path, source, {"nb.ipynb": notebook})
    env = {name: value for name, value in os.environ.items() if not name.startswith(("GRADER_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(AUTOGRADER_ROOT=str(autograder), TORCH_INDEX_URL="", PATH=f"{Path(sys.base_prefix) / 'bin'}:{env['PATH']}")
    setup = subprocess.run(["bash", "source/setup.sh"], cwd=autograder, env=env, capture_output=True, text=True, timeout=1500)
    assert setup.returncode == 0, setup.stdout[-2000:] + setup.stderr[-3000:]
    assert (autograder / "venv" / "bin" / "grade").exists() and (autograder / "zoo").is_dir()
    completed = subprocess.run(["./run_autograder"], env=env, cwd=autograder, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0 and f"python {autograder / 'venv' / 'bin' / 'python'}" in completed.stdout, completed.stdout
    results = GradescopeResults.model_validate(json.loads((autograder / "results" / "results.json").read_text()))
    assert results.losing() == {"loss-public", "loss-hidden"} and results.max_score == 20
