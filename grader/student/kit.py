"""``grade build-student-kit``: what students get to check their notebook themselves.

A kit is a folder (and the same as a zip) holding the starter notebook, the public rubric (the
hidden checks removed, only their count and points kept), the grader to install, and the
reference side's values for the public checks, recorded on the tiny models. It holds no
reference implementation, no solution notebook and no hidden check or input:

- the reference implementation (the solution notebook's definitions, or the folder's
  ``reference.py``) stays behind; the public checks' calls into it were recorded
  (``recorded.json``) by grading the solution notebook with the public checks, and a kit's
  grader replays them (:mod:`grader.grading.replay`).
- the assignment's ``hidden_checks.py`` stays behind: the kit has only the kinds of its public
  checks (``checks.py``) and the package's generic ones.
- functions of the check modules marked ``@reference_side`` (those that compute an expected
  value the way a solution would) are copied without their body.
"""

from __future__ import annotations

import ast
import importlib.metadata
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from grader import __version__
from grader.errors import CourseError
from grader.grading.course import ASSIGNMENTS_DIR, PUBLIC_CHECKS, RUBRIC_FILE, Assignment, Course
from grader.grading.replay import RECORDED_FILE, Recording
from grader.student import KIT_FILE
from grader.student.selfcheck import SELF_CHECK_ID, self_check_settings
from grader.zoo import ModelZoo

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the grader package
PROJECT_FILES = ("pyproject.toml", "constraints.txt")
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
WITHHELD_BODY = 'raise NotImplementedError("withheld from the student kit: its values are replayed from recorded.json")'

STUDENT_README = r"""# Self-check kit: {title}

This kit checks your notebook for the assignment `{assignment}` on your own computer, offline,
with the **public checks** of the course's grader: the same code, the same tiny models, the same
feedback. Your instructor will also run {hidden} hidden check{hidden_s} ({hidden_points:g} points)
with inputs drawn at grading time; the kit does not hold them, so passing here is necessary,
not sufficient.

## Install (once)

Python 3.11 or newer, on Linux, macOS or Windows. Your notebook runs as an ordinary program
on your computer, as it does in Jupyter (the instructor's grader also isolates it; that does
not change the verdicts). In this folder, on Linux or macOS:

```bash
python3 -m venv .venv
.venv/bin/pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu   # Linux: the CPU build
.venv/bin/pip install -c constraints.txt -e .
```

On Windows (PowerShell or cmd), where PyPI's torch is already the CPU build:

```
py -3 -m venv .venv
.venv\Scripts\pip install -c constraints.txt -e .
```

and write `.venv\Scripts\grade` wherever this page says `.venv/bin/grade`.

(On Linux, PyPI's torch is a CUDA build of several GB; the first line takes the CPU build from
PyTorch's own index, and skipping it only costs the download. On macOS PyPI's build is the CPU
one, and the first line may be left out. `constraints.txt` pins the library versions the
expected values were recorded with; on another torch or transformers the tiny models differ and
the check says so.) The first check builds the tiny models it serves to your notebook as "gpt2"
(under a minute, once), so checking needs no network; your own Jupyter still loads the real
models.

## Check your notebook

Start from `{starter}`. From a terminal:

```bash
.venv/bin/grade check {starter}                       # every public check
.venv/bin/grade check {starter} --only {example_target}   # only the checks of one function
.venv/bin/grade check {starter} --html feedback.html  # also write the feedback page
```

It runs your notebook from top to bottom in a fresh kernel, then calls your functions. It prints
a table: each check, its points, whether it passed and why, a hint and documentation links. The
exit status is 0 when every public check passes, 1 when one fails or the notebook cannot be
checked.

From inside the notebook (install this kit, `pip install -c constraints.txt -e .`, in the Python
environment your Jupyter runs), in the last cell:

```python
from grader import check
check()                      # or check("{example_target}")
```

It checks the notebook's **saved** file (save first: unsaved edits are not seen) in a separate
process and shows the result under the cell. Where Jupyter does not tell the kernel its
notebook's name, write `check(path="{starter}")`.
"""


@dataclass(frozen=True)
class KitBuild:
    """A built kit: its folder, and the reference functions whose values could not be recorded."""

    folder: Path
    unrecordable: tuple[str, ...]


def build_student_kit(project_root: Path, course: Course, assignment: str, out_dir: Path, zoo: ModelZoo) -> KitBuild:
    """Write ``OUTDIR/<assignment>-kit/`` and ``OUTDIR/<assignment>-kit.zip``."""
    spec = course.assignment(assignment)
    if spec.in_kit:
        raise CourseError(f"{spec.folder} is already a student kit's copy; build kits from the course itself")
    recording, unrecordable = record_public_reference(course, spec, zoo)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{assignment}-kit"
    with tempfile.TemporaryDirectory(prefix="llm-grader-kit-", dir=out_dir) as scratch:
        staging = Path(scratch) / target.name
        write_kit(project_root, spec, recording, staging)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    archive = out_dir / f"{assignment}-kit.zip"
    temporary = archive.with_suffix(".zip.part")
    with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(target.rglob("*")):
            if path.is_file():
                bundle.write(path, (Path(target.name) / path.relative_to(target)).as_posix())
    temporary.replace(archive)
    return KitBuild(target, unrecordable)


def record_public_reference(course: Course, spec: Assignment, zoo: ModelZoo) -> tuple[Recording, tuple[str, ...]]:
    """The reference side's values for the public checks (grade the solution with them, recording),
    and the functions whose values have no JSON form."""
    from grader.grading.grader import Grader

    with Grader(course, zoo, self_check_settings(record_reference=True)) as grader:
        result = grader.grade(spec.solution, SELF_CHECK_ID, spec.name)
        side = grader.reference_side(spec.name)
        calls, unrecordable = (dict(side.recorded), tuple(sorted(side.unrecordable))) if side is not None else ({}, ())
    if result.error:
        raise CourseError(f"the solution notebook {spec.solution} could not be graded: {result.error}")
    wrong = [check.check_id for check in result.checks if check.outcome in ("failed", "error")]
    if wrong:
        raise CourseError(f"the solution notebook {spec.solution} fails the public checks {', '.join(wrong)}; fix it first")
    versions = {name: importlib.metadata.version(name) for name in ("torch", "transformers", "tokenizers")}
    return Recording(spec.name, zoo.key, versions, calls), unrecordable


def write_kit(project_root: Path, spec: Assignment, recording: Recording, kit: Path) -> None:
    """Lay out a kit in the new folder ``kit``: grader, public rubric, recorded values, starter, README."""
    kit.mkdir(parents=True)
    for name in PROJECT_FILES:
        shutil.copy2(project_root / name, kit / name)
    copy_package_without_reference_side(PACKAGE_DIR, kit / "grader")
    rubric = spec.rubric.public()
    folder = kit / ASSIGNMENTS_DIR / spec.name
    folder.mkdir(parents=True)
    header = (
        f"# The public checks of {spec.name}, for students' self-checks (written by grade build-student-kit).\n"
        "# The instructor also runs hidden checks; only their count and points are kept here.\n"
    )
    document = yaml.safe_dump(rubric.model_dump(mode="json", exclude_defaults=True), sort_keys=False, allow_unicode=True)
    (folder / RUBRIC_FILE).write_text(header + document, encoding="utf-8")
    public_checks = spec.folder / PUBLIC_CHECKS
    if public_checks.is_file():  # hidden_checks.py stays behind
        copy_without_reference_side(public_checks, folder / PUBLIC_CHECKS)
    recording.write(folder / RECORDED_FILE)
    for path in spec.given_files():
        if path.is_dir():
            shutil.copytree(path, folder / path.name, ignore=SKIP)
            shutil.copytree(path, kit / path.name, ignore=SKIP)
        elif path.exists():
            shutil.copy2(path, folder / path.name)
            shutil.copy2(path, kit / path.name)
    starter = f"{spec.name}.ipynb"
    shutil.copy2(spec.starter, kit / starter)
    hidden = rubric.hidden_summary()
    targets = [check.target for check in rubric.checks]
    (kit / "README.md").write_text(
        STUDENT_README.format(
            title=spec.rubric.title,
            assignment=spec.name,
            hidden=hidden.checks,
            hidden_s="" if hidden.checks == 1 else "s",
            hidden_points=hidden.points,
            starter=starter,
            example_target=targets[0] if targets else "my_function",
        ),
        encoding="utf-8",
    )
    (kit / KIT_FILE).write_text(f"grader {__version__}, assignment {spec.name}, zoo {recording.zoo}\n", encoding="utf-8")


def copy_package_without_reference_side(source: Path, target: Path) -> None:
    """Copy the grader package, replacing the body of every ``@reference_side`` function."""
    shutil.copytree(source, target, ignore=SKIP)
    for path in sorted(target.rglob("*.py")):
        copy_without_reference_side(path, path)


def copy_without_reference_side(source: Path, target: Path) -> None:
    """Copy one module, replacing the body of every ``@reference_side`` function."""
    text = source.read_text(encoding="utf-8")
    target.write_text(withhold_reference_side(text) if "@reference_side" in text else text, encoding="utf-8")


def _reference_side_functions(source: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and any(isinstance(d, ast.Name) and d.id == "reference_side" for d in node.decorator_list)
    ]


def withheld_functions(source: str) -> list[str]:
    """The names of the ``@reference_side`` functions a module's source defines."""
    return [node.name for node in _reference_side_functions(source)]


def withhold_reference_side(source: str) -> str:
    """``source`` with the docstring and body of each ``@reference_side`` function replaced by a raise."""
    lines = source.splitlines(keepends=True)
    for node in sorted(_reference_side_functions(source), key=lambda item: item.lineno, reverse=True):
        first, last = node.body[0].lineno - 1, node.body[-1].end_lineno or node.body[-1].lineno
        if first < node.lineno:  # `def f(): return x` on one line: no body lines to replace
            raise CourseError(f"the @reference_side function {node.name} must not be written on one line")
        indent = " " * node.body[0].col_offset
        lines[first:last] = [f"{indent}{WITHHELD_BODY}\n"]
    return "".join(lines)
