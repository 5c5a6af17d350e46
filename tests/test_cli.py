"""The `grade` command: usage errors are clear, one notebook can be graded on its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.authoring import make_notebook, write_notebook
from grader.cli import shown_out
from tests.conftest import SEED
from tests.grade_server import grade_process


def grade(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return grade_process(args, cwd=cwd, timeout=300)


def test_help_lists_the_commands_and_options() -> None:
    completed = grade("--help")
    assert completed.returncode == 0 and "run*" in completed.stdout and "gradescope" in completed.stdout
    # The default command's options are in the top-level help too (`grade PATH...` is `grade run PATH...`).
    assert "Options of `grade run`, the default" in completed.stdout and "--workers" in completed.stdout
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
    assert completed.stderr.count("holds no .ipynb notebooks") <= 1  # said once, not again as its own notice


def test_an_output_folder_that_cannot_be_written_is_one_clear_line(tmp_path: Path, root: Path) -> None:
    (tmp_path / "graded").write_text("a file where the folder should be")
    notebook = root / "submissions" / "perplexity" / "solution.ipynb"
    completed = grade(str(notebook), "--out", str(tmp_path / "graded" / "out"), cwd=tmp_path)
    assert completed.returncode == 2
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot write the output folder {tmp_path / 'graded' / 'out'}"), lines
    assert f"it must be writable by uid {os.getuid()}" in lines[0] and "sqlite" not in completed.stderr


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


def test_the_summary_table_keeps_ids_whole_and_says_what_is_left_to_grade_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    from grader.cli import _report_width, _summary_table
    from grader.reports.results import CheckResult, SubmissionResult

    def essay(outcome: str) -> CheckResult:
        return CheckResult(
            "analysis", "Analysis", "analysis", "written", "public", "any", 3, 0, outcome, "", graded_by="instructor"
        )  # type: ignore[arg-type]

    long_id = "quantization/mistake-exported-not-quantized-and-also-padded"
    results = [
        SubmissionResult(long_id, f"{long_id}.ipynb", "quantization", checks=(essay("manual"),)),
        SubmissionResult("latency/starter", "latency/starter.ipynb", "latency", checks=(essay("failed"),)),
    ]
    buffer = io.StringIO()
    monkeypatch.delenv("COLUMNS", raising=False)
    width = _report_width(stderr=True)  # pytest's stderr is not a terminal: a log or a pipe
    assert width == 160
    Console(file=buffer, width=width).print(_summary_table(results, Path("graded")))
    text = buffer.getvalue()
    assert long_id in text  # on one line, not folded
    assert "3 pts to grade" in text and "3 / 3" not in text and "nothing written" in text
    buffer = io.StringIO()
    Console(file=buffer, width=120).print(_summary_table(results, Path("graded")))
    narrow = buffer.getvalue()
    assert long_id in narrow and "3 pts to grade" in narrow  # narrower, the id is still whole: the notes wrap instead
    assert all(word in narrow for word in ("written", "answers", "missing"))  # wrapped between words, not inside them


def test_library_warnings_stay_out_of_the_grader_output_even_when_first_imported_while_quiet() -> None:
    """Optimum sets its logger's level when first imported; inside quiet_libraries that used to let
    "Found different candidate ONNX initializers" through to the terminal."""
    script = (
        "from grader.quiet import quiet_libraries, quiet_library_defaults\n"
        "quiet_library_defaults()  # what `grade` does first\n"
        "with quiet_libraries():\n"
        "    from optimum.onnx import transformations_utils\n"
        "    transformations_utils.logger.warning('Found different candidate ONNX initializers (inside)')\n"
        "transformations_utils.logger.warning('Found different candidate ONNX initializers (after)')\n"
        "transformations_utils.logger.error('errors still show')\n"
    )
    environ = {name: value for name, value in os.environ.items() if name != "TRANSFORMERS_VERBOSITY"}
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=environ)
    assert completed.returncode == 0, completed.stderr
    assert "Found different candidate" not in completed.stderr and "errors still show" in completed.stderr


def test_in_a_container_the_results_folder_is_named_as_the_host_mounted_it(tmp_path: Path) -> None:
    marker = tmp_path / ".dockerenv"
    assert shown_out(Path("/work/out"), [marker]) == "/work/out/"
    marker.touch()
    assert shown_out(Path("/work/out"), [marker]) == "/work/out/ (in the container: the host folder you mounted at /work/out)"
