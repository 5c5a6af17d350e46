"""Write each assignment's starter, solution and sample submissions from reference/<name>/notebooks.py.

Usage: python scripts/build_notebooks.py [ASSIGNMENT ...]   (default: every assignment that has one)

Samples are the solution with a few exact edits, so they stay in step with it; an edit that no
longer matches exactly once fails loudly instead of writing a sample without its mistake.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import nbformat

ROOT = Path(__file__).resolve().parent.parent
METADATA_KEY = "llm_grader"


def load(name: str) -> ModuleType:
    """The notebooks module of one assignment."""
    path = ROOT / "reference" / name / "notebooks.py"
    spec = importlib.util.spec_from_file_location(f"notebooks_{name.replace('-', '_')}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def notebook(assignment: str, cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    """A v4 notebook with the grader's metadata naming its assignment."""
    made = nbformat.v4.new_notebook()
    made.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    made.metadata["language_info"] = {"name": "python"}
    made.metadata[METADATA_KEY] = {"assignment": assignment}
    for kind, source in cells:
        made.cells.append(nbformat.v4.new_markdown_cell(source) if kind == "markdown" else nbformat.v4.new_code_cell(source))
    for index, cell in enumerate(made.cells):
        cell["id"] = f"{assignment}-{index}"  # stable ids: rebuilding gives the same files
    return made


def with_edits(cells: list[tuple[str, str]], edits: list[tuple[str, str]], sample: str) -> list[tuple[str, str]]:
    """The cells with each (old, new) edit applied exactly once."""
    edited = list(cells)
    for old, new in edits:
        hits = sum(source.count(old) for _, source in edited)
        if hits != 1:
            raise SystemExit(f"sample {sample!r}: the edit {old[:60]!r} matches {hits} times in the solution, not once")
        edited = [(kind, source.replace(old, new)) for kind, source in edited]
    return edited


def write(path: Path, made: nbformat.NotebookNode) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.validate(made)
    path.write_text(nbformat.writes(made) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}")


def build(name: str) -> None:
    """Write one assignment's notebooks and its samples' README."""
    module = load(name)
    starter, solution = module.starter_cells(), module.solution_cells()
    write(ROOT / "reference" / name / "starter.ipynb", notebook(name, starter))
    write(ROOT / "reference" / name / "solution.ipynb", notebook(name, solution))
    samples = ROOT / "submissions" / name
    write(samples / "solution.ipynb", notebook(name, solution))
    write(samples / "starter.ipynb", notebook(name, starter))
    lines = [
        f"# Sample submissions: `{name}`",
        "",
        "Built by `scripts/build_notebooks.py` from `reference/" + name + "/notebooks.py`.",
        "",
        "| notebook | what it does |",
        "| --- | --- |",
        "| `solution.ipynb` | the reference solution (full marks on every automatic check) |",
        "| `starter.ipynb` | the untouched starter |",
    ]
    for sample, (description, edits) in module.SAMPLES.items():
        write(samples / f"{sample}.ipynb", notebook(name, with_edits(solution, edits, sample)))
        lines.append(f"| `{sample}.ipynb` | {description} |")
    (samples / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(names: list[str]) -> None:
    names = names or sorted(path.parent.name for path in (ROOT / "reference").glob("*/notebooks.py"))
    for name in names:
        build(name)


if __name__ == "__main__":
    main(sys.argv[1:])
