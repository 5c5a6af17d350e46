"""A student's story: `grade check` and `check()` in the notebook, with the public checks only.

Every run executes the real notebook in a real kernel on the tiny models, in a separate `grade`
process, as a student's laptop would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from grader.authoring import load_notebook_sources, make_notebook, with_edits, write_notebook
from grader.zoo import ModelZoo
from tests.contract import INSTRUCTOR_WORDS, GradescopeResults, here, on_cuda
from tests.grade_server import grade_process

HIDDEN = "5 hidden checks worth 11 points"  # perplexity's hidden checks, counted, never named


def grade_check(*args: str, cwd: Path, columns: int = 200) -> subprocess.CompletedProcess[str]:
    """Run the real `grade check` (by default a wide terminal, so table cells do not wrap mid-word)."""
    return grade_process(["check", *args], cwd=cwd, env={**os.environ, "COLUMNS": str(columns)}, timeout=600)


def outcomes(path: Path) -> dict[str, str]:
    """Check id -> outcome, from the results.json `grade check --json` wrote."""
    return {
        check_id: test.extra_data["outcome"]
        for check_id, test in GradescopeResults.model_validate_json(path.read_text()).by_id().items()
    }


@pytest.fixture(scope="module")
def sources(root: Path):
    return load_notebook_sources(root / "assignments" / "perplexity")


def test_help_names_the_student_commands(tmp_path: Path) -> None:
    completed = subprocess.run([sys.executable, "-m", "grader", "--help"], capture_output=True, text=True, timeout=60)
    assert "check" in completed.stdout and "build-student-kit" in completed.stdout
    completed = grade_check("--help", cwd=tmp_path)
    for option in ("--assignment", "--only", "--html", "--json", "--course"):
        assert option in completed.stdout
    assert "Exit status: 0 when every public check passes, 1 when one fails" in " ".join(completed.stdout.split())


def test_the_solution_passes_every_public_check(tmp_path: Path, root: Path, zoo: object) -> None:
    page, results = tmp_path / "feedback.html", tmp_path / "results.json"
    completed = grade_check(
        str(root / "submissions" / "perplexity" / "solution.ipynb"), "--html", str(page), "--json", str(results), cwd=tmp_path
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr[-2000:]
    public = here("perplexity", 9)  # the CUDA-only check is public
    assert f"Public checks: {public:g} / {public:g} points, all public checks pass." in completed.stdout
    assert HIDDEN in completed.stdout
    ran = outcomes(results)
    assert ran == {
        "loader-eval-device": "passed",
        "loader-cpu-float32": "skipped" if on_cuda() else "passed",  # a CPU's fallback: graded on a CPU only
        "loss-public": "passed",
        "evaluation-no-grad": "passed",
        "evaluation-batching": "passed",
        "timing-public": "passed",
        "timing-cuda-sync": "passed" if on_cuda() else "skipped",  # runs only on a GPU
    }
    html = page.read_text()
    assert "self-check (public checks only)" in html and HIDDEN in html
    assert "token-weighted loss on the notebook" in html
    for hidden_check in ("loss-hidden", "tokens-hidden", "hidden corpora", "number of predicted tokens"):
        assert hidden_check not in completed.stdout and hidden_check not in html and hidden_check not in results.read_text()


def test_a_wrong_notebook_fails_with_why_a_hint_and_a_link(tmp_path: Path, root: Path, zoo: object) -> None:
    results = tmp_path / "results.json"
    completed = grade_check(
        str(root / "submissions" / "perplexity" / "mistake-batch-means.ipynb"), "--json", str(results), cwd=tmp_path, columns=80
    )
    assert completed.returncode == 1, completed.stderr[-2000:]
    # On an 80-column terminal the link is whole, on a line of its own below the table (clickable and copyable).
    assert "[1] https://huggingface.co/docs/transformers/en/perplexity" in completed.stdout.splitlines()
    assert outcomes(results)["loss-public"] == "failed"
    assert {check for check, outcome in outcomes(results).items() if outcome == "failed"} == {"loss-public"}
    # The table's last column ("Why, and what to read"), read down: the text a narrow terminal wrapped.
    why = [line.split("│")[-2] for line in completed.stdout.splitlines() if line.count("│") >= 2]
    out = " ".join(" ".join([*why, completed.stdout]).split())
    # The sentence itself is in the results; the table may wrap it anywhere, so the terminal is
    # checked for its key words, the hint and the link.
    message = json.loads(results.read_text())["tests"]
    assert any("averages the per-batch mean losses" in test["output"] for test in message)
    assert "per-batch mean" in out
    assert "Hint: Weight each batch's loss by its number of predicted tokens" in out
    assert "https://huggingface.co/docs/transformers/en/perplexity" in out
    assert "Public checks: 7 / 9 points, some public checks fail." in out


def test_only_the_checks_of_one_function(tmp_path: Path, root: Path, zoo: object) -> None:
    results = tmp_path / "results.json"
    notebook = root / "submissions" / "perplexity" / "mistake-gradients-on.ipynb"
    completed = grade_check(str(notebook), "--only", "evaluate_loss", "--json", str(results), cwd=tmp_path)
    assert completed.returncode == 1
    assert outcomes(results) == {"loss-public": "passed", "evaluation-no-grad": "failed", "evaluation-batching": "passed"}
    assert "Only the checks of evaluate_loss were run." in " ".join(completed.stdout.split())

    typo = grade_check(str(notebook), "--only", "evaluate_los", cwd=tmp_path)
    assert typo.returncode == 2
    assert "no public check grades evaluate_los; the public checks grade: evaluate_loss, load_model_and_tokenizer" in " ".join(
        typo.stderr.split()
    )


def test_an_unreadable_notebook_gets_a_clear_message(tmp_path: Path, zoo: object) -> None:
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{not json")
    completed = grade_check(str(broken), "--assignment", "perplexity", cwd=tmp_path)
    assert completed.returncode == 1
    assert "Your notebook could not be checked" in completed.stdout and "is not valid notebook JSON" in " ".join(
        completed.stdout.split()
    )


def test_check_in_the_notebook_shows_the_result_under_the_cell(
    tmp_path: Path, sources, zoo: ModelZoo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A student's last cell calls check(); the kernel finds its notebook from Jupyter's JPY_SESSION_NAME."""
    cells = with_edits(sources.solution_cells(), [("total_loss += out.loss.item() * predicted", "total_loss += out.loss.item()")])
    notebook = make_notebook("perplexity", [*cells, ("code", "from grader import check\ncheck()")])
    path = tmp_path / "my work.ipynb"
    write_notebook(path, notebook)
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))  # what Jupyter Server 2 sets in a notebook's kernel
    for name, value in zoo.kernel_env().items():  # the student's own kernel loads "gpt2" offline too
        monkeypatch.setenv(name, value)
    executed = nbformat.read(path, as_version=4)
    NotebookClient(executed, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()

    outputs = executed.cells[-1].outputs
    printed = "".join(output.get("text", "") for output in outputs if output.output_type == "stream")
    assert "Checking the saved file my work.ipynb in a fresh kernel" in printed and "unsaved edits are not seen" in printed
    shown = [output.data for output in outputs if output.output_type == "display_data"]
    assert len(shown) == 1
    page, table = shown[0]["text/html"], " ".join(shown[0]["text/plain"].split())
    # The page is saved next to the notebook, linked relative to it (Jupyter opens it), and stays there.
    saved = tmp_path / "my work-feedback.html"
    assert saved.is_file() and f"The same, as a page: {saved}" in table
    assert '<a href="my work-feedback.html" target="_blank">' in page and "<iframe" in page and "srcdoc=" in page
    assert "token-weighted mean cross-entropy is 2.078" in page  # the mistake, named in the feedback page
    assert "Public checks: 7 / 9 points, some public checks fail." in table and HIDDEN in table
    # The grader ran the notebook in its own kernel, where the check() cell does nothing (no recursion).
    assert "Cell " not in table
    # Nothing meant for the instructor: no sandbox, uid or errno talk, in the table or on the page.
    for text in (table, saved.read_text()):
        assert not any(word in text for word in INSTRUCTOR_WORDS), text


def test_check_in_the_notebook_names_what_it_cannot_find(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.student.notebook_check import NotebookNotFound, notebook_path

    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    (tmp_path / "a.ipynb").write_text("{}")
    (tmp_path / "b.ipynb").write_text("{}")
    assert notebook_path({"__vsc_ipynb_file__": str(tmp_path / "b.ipynb")}, {}, tmp_path) == (tmp_path / "b.ipynb").resolve()
    assert notebook_path({}, {"JPY_SESSION_NAME": "a.ipynb"}, tmp_path) == (tmp_path / "a.ipynb").resolve()
    with pytest.raises(NotebookNotFound, match=r"the folder holds 2 notebooks\): call check\(path='your_notebook.ipynb'\)"):
        notebook_path({}, {}, tmp_path)
    (tmp_path / "b.ipynb").unlink()
    assert notebook_path({}, {}, tmp_path) == (tmp_path / "a.ipynb").resolve()
