"""Gradescope: the autograder zip, and what its ``run_autograder`` runs.

``grade gradescope ASSIGNMENT OUTDIR`` writes ``autograder-ASSIGNMENT.zip``, the file Gradescope's
"Configure Autograder" page takes: ``setup.sh`` (installs Python, the CPU build of torch and
this grader, and builds the tiny model zoo into the image), ``run_autograder`` (what Gradescope
runs per submission), the grader's source and the one assignment's course files.

``python -m grader.reports.gradescope --root ROOT`` grades the notebook in ``ROOT/submission`` and writes
``ROOT/results/results.json`` in Gradescope's schema (hidden checks ``after_published``), with a
debug log on stdout (Gradescope shows it to instructors only). Whatever
fails (no notebook, a broken course, a grader bug) it still writes a valid results.json saying
what happened, and exits 0, so Gradescope shows the student that message rather than its own.
The root is ``/autograder`` on Gradescope; tests pass a temporary folder laid out the same way.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import traceback
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader import __version__
from grader.reports.results import SubmissionResult, write_atomically

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the grader package

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu 22.04 or 24.04
# base), with this zip unpacked in /autograder/source. It installs Python 3.11 or newer (only
# when the image's is older), the CPU build of torch, this grader, and builds the tiny model zoo
# into the image, so that grading needs no network.
# AUTOGRADER_ROOT (default /autograder) and TORCH_INDEX_URL (default: PyTorch's CPU wheels;
# empty: pip's own index) let it be tried outside Gradescope.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
TORCH_INDEX_URL="${TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}"
cd "$SOURCE"
python_ok() { command -v python3 >/dev/null && python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }
if ! python_ok; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends python3 python3-venv python3-dev build-essential >/dev/null
    if ! python_ok; then
        apt-get install -y -qq --no-install-recommends software-properties-common >/dev/null
        add-apt-repository -y ppa:deadsnakes/ppa
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends python3.11 python3.11-venv python3.11-dev >/dev/null
        ln -sf "$(command -v python3.11)" /usr/local/bin/python3
    fi
fi
python3 -m venv "$ROOT/venv"
"$ROOT/venv/bin/pip" install -q --upgrade pip
torch="torch==$(sed -n 's/^torch==//p' grader-src/constraints.txt)"
if [ -n "$TORCH_INDEX_URL" ]; then
    "$ROOT/venv/bin/pip" install -q "$torch" --index-url "$TORCH_INDEX_URL"
else
    "$ROOT/venv/bin/pip" install -q "$torch"
fi
"$ROOT/venv/bin/pip" install -q -c grader-src/constraints.txt ./grader-src
GRADER_CACHE_DIR="$ROOT/zoo" "$ROOT/venv/bin/python" -c \\
    'from grader.zoo import ModelZoo; ModelZoo().ensure_built()'
echo "setup.sh: the grader is installed in $ROOT/venv and its tiny models in $ROOT/zoo"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope copies this file to /autograder/run_autograder and runs that copy, from
# /autograder, for each submission: it grades /autograder/submission and writes
# /autograder/results/results.json. Everything it needs is found under the root (the zip is
# unpacked in ROOT/source), never next to this file.
# AUTOGRADER_ROOT (default /autograder), GRADER_PYTHON and GRADER_CACHE_DIR let tests run it
# against a folder laid out like /autograder.
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
SOURCE="$ROOT/source"
PYTHON="${{GRADER_PYTHON:-$ROOT/venv/bin/python}}"
export GRADER_CACHE_DIR="${{GRADER_CACHE_DIR:-$ROOT/zoo}}"
export PYTHONPATH="$SOURCE/grader-src${{PYTHONPATH:+:$PYTHONPATH}}"
echo "run_autograder: root $ROOT, source $SOURCE, python $PYTHON, models $GRADER_CACHE_DIR"
cd "$ROOT" || exit 0
"$PYTHON" -m grader.reports.gradescope --root "$ROOT" --course "$SOURCE/course" --assignment {assignment}
status=$?
if [ ! -s "$ROOT/results/results.json" ]; then
    echo "run_autograder: the grader exited with status $status and wrote no results.json"
    mkdir -p "$ROOT/results"
    printf '%s\\n' '{{"score": 0, "output": "The autograder could not start (exit status '"$status"'); please tell your instructor.", "tests": []}}' \\
        > "$ROOT/results/results.json"
fi
exit 0
"""

# What of the project the zip carries (the grader's source, to pip-install on Gradescope).
GRADER_FILES = ("pyproject.toml", "README.md", "constraints.txt")
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")


def build_autograder(project_root: Path, course_root: Path, assignment: str, out_dir: Path) -> Path:
    """Write ``OUTDIR/autograder-ASSIGNMENT.zip``; return its path."""
    from grader.grading.course import ASSIGNMENTS_DIR, REFERENCE_FILE, Course
    from grader.grading.reference import solution_definitions

    course = Course(course_root)
    spec = course.assignment(assignment)  # a broken rubric stops here, not on Gradescope
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"autograder-{assignment}.zip"
    with tempfile.TemporaryDirectory(prefix="llm-grader-gradescope-") as scratch:
        staging = Path(scratch)
        (staging / "setup.sh").write_text(SETUP_SH)
        (staging / "run_autograder").write_text(RUN_AUTOGRADER.format(assignment=assignment))
        source = staging / "grader-src"
        source.mkdir()
        for name in GRADER_FILES:
            shutil.copy2(project_root / name, source / name)
        shutil.copytree(PACKAGE_DIR, source / "grader", ignore=SKIP)
        folder = staging / "course" / ASSIGNMENTS_DIR / assignment
        folder.mkdir(parents=True)
        for path in [*spec.source_files(), spec.starter]:
            if path == spec.solution:
                # The reference side the solution's definitions are, without the rest of the solution notebook.
                (folder / REFERENCE_FILE).write_text(solution_definitions(path), encoding="utf-8")
            elif path.is_dir():
                shutil.copytree(path, folder / path.name, ignore=SKIP)
            elif path.exists():
                shutil.copy2(path, folder / path.name)
        temporary = target.with_suffix(".zip.part")
        with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(staging.rglob("*")):
                if path.is_file():
                    info = zipfile.ZipInfo.from_file(path, path.relative_to(staging).as_posix())
                    executable = path.name in ("setup.sh", "run_autograder")
                    info.external_attr = (0o100755 if executable else 0o100644) << 16
                    archive.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
        temporary.replace(target)
    return target


# --------------------------------------------------------------------------------------
# run_autograder
# --------------------------------------------------------------------------------------


def failure_results(message: str, started: float, details: str = "") -> dict[str, Any]:
    """A valid Gradescope results.json for a submission the autograder could not grade."""
    return {
        "score": 0,
        "execution_time": round(time.monotonic() - started, 3),
        "output": message,
        "output_format": "md",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
        "extra_data": {"error": message, "grader_version": __version__, **({"details": details} if details else {})},
    }


def pick_notebook(submission: Path, assignment: str) -> tuple[Path | None, str]:
    """The notebook to grade in a Gradescope submission folder, and a note when there was a choice."""
    notebooks = sorted(path for path in submission.rglob("*.ipynb") if ".ipynb_checkpoints" not in path.parts and path.is_file())
    if len(notebooks) <= 1:
        return (notebooks[0] if notebooks else None), ""
    tagged = []
    for path in notebooks:
        try:
            metadata = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(metadata, dict) and (metadata.get("llm_grader") or {}).get("assignment") == assignment:
            tagged.append(path)
    chosen = (tagged or notebooks)[0]
    others = ", ".join(str(path.relative_to(submission)) for path in notebooks if path != chosen)
    return chosen, f"The submission holds {len(notebooks)} notebooks: {chosen.relative_to(submission)} was graded ({others} not)."


def debug_log(line: str) -> None:
    """One line of the instructor's debug log: Gradescope shows run_autograder's stdout to instructors only."""
    print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)


def run(root: Path, course_root: Path, assignment: str, log: Callable[[str], None] = debug_log) -> dict[str, Any]:
    """Grade ``root/submission``; the results.json payload, whatever happens (``log`` gets the debug log)."""
    started = time.monotonic()
    submission = root / "submission"
    log(f"grader {__version__}, assignment {assignment}, course {course_root}")
    try:
        files = sorted(str(path.relative_to(submission)) for path in submission.rglob("*") if path.is_file())
        log(f"submission: {len(files)} file(s): {', '.join(files[:20]) or '(none)'}")
        notebook, note = pick_notebook(submission, assignment)
        if notebook is None:
            log("no notebook to grade")
            return failure_results(
                "Your submission holds no Jupyter notebook (.ipynb): upload your notebook file"
                + (f" (found: {', '.join(files[:20])})." if files else " (the submission is empty)."),
                started,
            )
        log(f"grading {notebook.relative_to(submission)}" + (f" ({note})" if note else ""))
        from grader.grading.course import Course
        from grader.grading.grader import Grader
        from grader.grading.settings import GradingSettings
        from grader.reports.results import gradescope_json
        from grader.zoo import ModelZoo

        course = Course(course_root)
        course.assignment(assignment)  # a broken course is the autograder's failure, not the student's
        zoo = ModelZoo()
        zoo.ensure_built()
        log(f"models: {zoo.root}")
        # The kernel sees neither the results folder nor the submission (it gets a copy). Sandboxed where the container
        # allows it; a container without the capability (Gradescope's default) grades without, said in the result:
        # it is the submission's own, thrown away after it.
        hidden = (str(root / "results"), str(submission))
        with Grader(course, zoo, GradingSettings(warm_kernels=False, hidden_paths=hidden, sandbox_required=False)) as grader:
            result = grader.grade(notebook, notebook.stem, assignment)
        _log_result(result, log)
        payload = gradescope_json(result)
        if note:
            payload["output"] = f"{note}\n\n{payload['output']}"
        return payload
    except BaseException as error:  # the student must get a results.json, whatever broke
        details = traceback.format_exc()
        log(f"the autograder failed:\n{details}")
        return failure_results(
            f"The autograder failed on this submission ({type(error).__name__}: {error}); your score is not final. "
            "Please tell your instructor.",
            started,
            details,
        )


def _log_result(result: SubmissionResult, log: Callable[[str], None]) -> None:
    """What the instructor needs to debug a result: its score, each check, each cell problem, the notes."""
    if result.error:
        log(f"not graded: {result.error}")
    log(f"score {result.score:g} / {result.max_score:g} in {result.duration_s:.1f} s (seed {result.provenance.get('seed')})")
    for check in result.checks:
        log(f"  {check.outcome:<8} {check.score:g}/{check.points:g} {check.check_id} [{check.visibility}]: {check.message}")
    for problem in result.cell_problems:
        where = f"cell {problem.cell_index + 1}" if problem.cell_index >= 0 else "notebook"
        log(f"  {where} {problem.kind}: {problem.message}" + (f"\n{problem.traceback}" if problem.traceback else ""))
    for note in (*result.warnings, *result.notes):
        log(f"  note: {note}")
    if result.traceback:
        log(f"  the grader's traceback:\n{result.traceback}")


def main(argv: list[str] | None = None) -> int:
    """``python -m grader.reports.gradescope --root ROOT --course DIR --assignment NAME``."""
    parser = argparse.ArgumentParser(prog="python -m grader.reports.gradescope", description=__doc__)
    parser.add_argument("--root", type=Path, default=Path("/autograder"), help="Gradescope's root folder")
    parser.add_argument("--course", type=Path, required=True, help="the course folder shipped in the zip")
    parser.add_argument("--assignment", required=True, help="the assignment this autograder grades")
    args = parser.parse_args(argv)
    payload = run(args.root, args.course, args.assignment)
    target = args.root / "results" / "results.json"
    write_atomically(target, json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    debug_log(f"wrote {target}: score {payload['score']:g}, {len(payload['tests'])} test(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
