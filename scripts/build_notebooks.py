"""Write each assignment's starter, solution and sample submissions from assignments/<name>/notebooks.py.

Usage: python scripts/build_notebooks.py [ASSIGNMENT ...]   (default: every assignment that has one)

Samples are the solution with a few exact edits, so they stay in step with it; an edit that no
longer matches exactly once fails loudly instead of writing a sample without its mistake.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grader.authoring import EditError, load_notebook_sources, make_notebook, with_edits, write_notebook

ROOT = Path(__file__).resolve().parent.parent


def build(name: str) -> None:
    """Write one assignment's notebooks and its samples' README."""
    sources = load_notebook_sources(ROOT / "assignments" / name)
    starter, solution = sources.starter_cells(), sources.solution_cells()
    samples = ROOT / "submissions" / name
    outputs = {
        ROOT / "assignments" / name / "starter.ipynb": starter,
        ROOT / "assignments" / name / "solution.ipynb": solution,
        samples / "solution.ipynb": solution,
        samples / "starter.ipynb": starter,
    }
    lines = [
        f"# Sample submissions: `{name}`",
        "",
        f"Built by `scripts/build_notebooks.py` from `assignments/{name}/notebooks.py`.",
        "",
        "| notebook | what it does |",
        "| --- | --- |",
        "| `solution.ipynb` | the reference solution (full marks on every automatic check) |",
        "| `starter.ipynb` | the untouched starter |",
    ]
    for sample, (description, edits) in sources.SAMPLES.items():
        try:
            outputs[samples / f"{sample}.ipynb"] = with_edits(solution, edits)
        except EditError as error:
            raise SystemExit(f"{name}: sample {sample!r}: {error}") from error
        lines.append(f"| `{sample}.ipynb` | {description} |")
    for path, cells in outputs.items():
        write_notebook(path, make_notebook(name, cells))
        print(f"wrote {path.relative_to(ROOT)}")
    (samples / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(names: list[str]) -> None:
    """Build the named assignments, or all that have a notebooks.py."""
    for name in names or sorted(path.parent.name for path in (ROOT / "assignments").glob("*/notebooks.py")):
        build(name)


if __name__ == "__main__":
    main(sys.argv[1:])
