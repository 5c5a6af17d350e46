"""``from grader import check; check()``: a student's self-check, from inside their notebook.

The check runs ``grade check`` on the notebook's *saved* file in a separate process, which
executes it in a fresh kernel, exactly as the instructor's grader will: the student's kernel
never imports a check or the reference side, and in a student kit the hidden checks and the
reference implementation are not on the machine at all. The result is shown under the cell as
the same HTML page ``grade check --html`` writes, with the terminal table as plain text.

This module runs in the student's kernel: it imports nothing heavy.
"""

from __future__ import annotations

import html
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Set in every kernel the grader starts, so that a notebook's own check() cell does not grade it again.
GRADING_KERNEL_ENV = "LLM_GRADER_KERNEL"
SELF_CHECK_TIMEOUT_S = 3600


class NotebookNotFound(Exception):
    """check() could not tell which notebook file it is running in."""


def notebook_path(namespace: dict[str, Any], environ: dict[str, str], cwd: Path) -> Path:
    """The notebook file this kernel runs, from what Jupyter and VS Code tell the kernel.

    In order: ``JPY_SESSION_NAME`` (set by Jupyter Server 2 for each notebook's kernel, often as
    ``__session__`` in the namespace too), VS Code's ``__vsc_ipynb_file__``, then the only
    notebook in the working folder.
    """
    candidates = [
        environ.get("JPY_SESSION_NAME"),
        namespace.get("__session__"),
        namespace.get("__vsc_ipynb_file__"),
    ]
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.endswith(".ipynb"):
            for path in (Path(candidate), cwd / candidate, cwd / Path(candidate).name):
                if path.is_file():
                    return path.resolve()
    notebooks = sorted(path for path in cwd.glob("*.ipynb") if path.is_file())
    if len(notebooks) == 1:
        return notebooks[0].resolve()
    raise NotebookNotFound(
        "check() cannot tell which notebook this is (this Jupyter does not say, and the folder holds "
        f"{len(notebooks)} notebooks): call check(path='your_notebook.ipynb')."
    )


def check(target: str | None = None, path: str | os.PathLike[str] | None = None, assignment: str | None = None) -> None:
    """Run the public checks on this notebook's saved file and show the result under the cell.

    ``target`` keeps only the checks of one function or variable (``check("evaluate_loss")``);
    ``path`` names the notebook when it cannot be found; ``assignment`` when its metadata is lost.
    """
    from IPython import get_ipython
    from IPython.display import display

    if os.environ.get(GRADING_KERNEL_ENV):
        print("check() does nothing while the grader itself runs this notebook.")
        return
    shell = get_ipython()
    namespace = dict(shell.user_ns) if shell is not None else {}
    try:
        notebook = Path(path).resolve() if path is not None else notebook_path(namespace, dict(os.environ), Path.cwd())
    except NotebookNotFound as error:
        display({"text/plain": str(error), "text/html": f"<p><strong>{html.escape(str(error))}</strong></p>"}, raw=True)
        return
    print(f"Checking the saved file {notebook.name} in a fresh kernel: save the notebook first, unsaved edits are not seen.")
    page = feedback_page_path(notebook)
    command = [sys.executable, "-m", "grader", "check", str(notebook), "--html", str(page)]
    command += ["--only", target] if target else []
    command += ["--assignment", assignment] if assignment else []
    # Plain text: Jupyter's kernels force colours on (FORCE_COLOR), which would put escape codes and a spinner here.
    environ = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE", "MPLBACKEND")}
    environ.update({"NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "120"})
    started = time.time()
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=SELF_CHECK_TIMEOUT_S, env=environ, cwd=notebook.parent
    )
    table = completed.stdout.strip()
    if not page.exists() or page.stat().st_mtime < started - 1:
        message = (completed.stderr.strip().splitlines() or ["the self-check did not run"])[-1]
        display({"text/plain": f"{table}\n{message}".strip(), "text/html": f"<pre>{html.escape(message)}</pre>"}, raw=True)
        return
    # Jupyter opens a link relative to the notebook in its own file viewer.
    href = page.name if page.parent == notebook.parent else page.as_uri()
    link = f'<p>The same page is saved as <a href="{html.escape(href)}" target="_blank">{html.escape(str(page))}</a>.</p>'
    frame = (
        f'<iframe title="Self-check of {html.escape(notebook.name)}" srcdoc="{html.escape(page.read_text(encoding="utf-8"))}" '
        'style="width: 100%; height: 640px; border: 1px solid #d0d7de; border-radius: 6px;" '
        "onload=\"this.style.height = (this.contentWindow.document.body.scrollHeight + 40) + 'px'\"></iframe>"
    )
    display({"text/plain": table, "text/html": link + frame}, raw=True)


def feedback_page_path(notebook: Path) -> Path:
    """Where check() saves the feedback page: next to the notebook, or in the temporary folder if that is read-only."""
    page = notebook.with_name(f"{notebook.stem}-feedback.html")
    if os.access(notebook.parent, os.W_OK) and (not page.exists() or os.access(page, os.W_OK)):
        return page
    folder = Path(tempfile.gettempdir()) / "llm-grader-check"
    folder.mkdir(exist_ok=True)
    return folder / page.name
