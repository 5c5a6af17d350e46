"""A course brings its own assignment: one folder, its own check kinds, no edit to the package.

A toy fifth assignment is written into a temporary course folder (rubric, reference, starter,
solution, a public check kind in its own ``checks.py`` and a hidden one in ``hidden_checks.py``),
then graded with the real ``grade --course`` and packed into a student kit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from grader.authoring import make_notebook, write_notebook
from grader.errors import CourseError, UsageError
from grader.grading.course import Course
from tests.contract import run_grade
from tests.grade_server import grade_process

NAME = "word-stats"

RUBRIC = """\
assignment: word-stats
title: "Word statistics"
identify:
  functions: [count_words]
checks:
  - id: count-public
    name: "count_words: the public texts"
    kind: word_count
    target: count_words
    points: 2
    hint: "Split on any run of whitespace."
    params:
      texts: ["one two three", "a b", "single"]
  - id: count-hidden
    name: "count_words: texts drawn at grading time"
    kind: word_count_drawn
    target: count_words
    points: 3
    visibility: hidden
    params:
      cases: 4
"""

CHECKS = '''\
"""The word-stats assignment's public check kind."""

from __future__ import annotations

from pydantic import Field

from grader.checks.base import CheckContext, Params, Verdict, check_kind
from grader.kernel.harness import literal


class CountParams(Params):
    """Texts count_words is called on."""

    function: str = Field("count_words", description="The student's function.")
    texts: list[str] = Field(min_length=1, description="The texts.")


def judge_counts(context: CheckContext, function: str, texts: list[str]) -> Verdict:
    """Each text's count against the reference's."""
    for text in texts:
        call = f"{function}({text!r})"
        found = context.returned(context.call(function, literal(text)), call)
        expected = context.reference.count_words(text)
        if found != expected:
            return Verdict.failed(
                f"{call} returned {found!r}, but the text has {expected} words.", expected=str(expected), found=repr(found)
            )
    return Verdict.passed(f"{function} counts the words of {len(texts)} texts.")


@check_kind("word_count", CountParams)
def word_count(context: CheckContext, params: CountParams) -> Verdict:
    """count_words on the rubric's texts."""
    return judge_counts(context, params.function, params.texts)
'''

HIDDEN_CHECKS = '''\
"""The word-stats assignment's hidden check kind: texts with tabs, newlines and runs of spaces."""

from __future__ import annotations

from pydantic import Field

from grader.checks.base import CheckContext, Params, Verdict, check_kind

from .checks import judge_counts

SEPARATORS = ["  ", "\\t", "\\n", " \\t "]
WORDS = ["grebe", "quokka", "tapir", "okapi", "ibis", "dugong"]


class DrawnParams(Params):
    """How many texts are drawn."""

    function: str = Field("count_words", description="The student's function.")
    cases: int = Field(3, ge=1, description="Texts drawn.")


@check_kind("word_count_drawn", DrawnParams)
def word_count_drawn(context: CheckContext, params: DrawnParams) -> Verdict:
    """count_words on texts drawn at grading time, separated by any whitespace."""
    texts = []
    for _ in range(params.cases):
        words = context.rng.sample(WORDS, context.rng.randint(2, 5))
        texts.append(words[0] + "".join(context.rng.choice(SEPARATORS) + word for word in words[1:]))
    return judge_counts(context, params.function, texts)
'''

REFERENCE = """\
def count_words(text):
    return len(text.split())
"""

STARTER = [
    ("markdown", "# Word statistics\\n\\nWrite `count_words(text)`: the number of words, separated by any whitespace."),
    ("code", 'def count_words(text: str) -> int:\n    # TODO\n    raise NotImplementedError("count_words")'),
]


def solution(body: str) -> list[tuple[str, str]]:
    return [STARTER[0], ("code", f"def count_words(text: str) -> int:\n    {body}")]


@pytest.fixture(scope="module")
def toy_course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A course folder holding only the toy assignment."""
    course = tmp_path_factory.mktemp("toy-course")
    folder = course / "assignments" / NAME
    folder.mkdir(parents=True)
    (folder / "rubric.yaml").write_text(RUBRIC)
    (folder / "checks.py").write_text(CHECKS)
    (folder / "hidden_checks.py").write_text(HIDDEN_CHECKS)
    (folder / "reference.py").write_text(REFERENCE)
    write_notebook(folder / "starter.ipynb", make_notebook(NAME, STARTER))
    write_notebook(folder / "solution.ipynb", make_notebook(NAME, solution("return len(text.split())")))
    return course


def copy_course(toy_course: Path, course: Path) -> Path:
    """A copy of the toy course, to change."""
    shutil.copytree(toy_course, course)
    return course


def grade(*args: str, cwd: Path | None = None, kit: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`grade` from the repository, or (``kit``) from the kit's own copy of the grader."""
    environ = {**os.environ, "PYTHONPATH": str(kit)} if kit is not None else None
    return grade_process(args, cwd=cwd, env=environ, timeout=600)


def outcomes(out: Path, submission: str) -> dict[str, str]:
    data = json.loads((out / submission / "results.json").read_text())
    return {test["extra_data"]["check_id"]: test["extra_data"]["outcome"] for test in data["tests"]}


def test_a_course_folder_brings_an_assignment_and_its_check_kinds(toy_course: Path, tmp_path: Path, zoo: object) -> None:
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    notebooks = {
        "split": "return len(text.split())",  # correct
        "regex": "import re\n    return len(re.findall(r'\\S+', text))",  # correct, another way
        "spaces-only": "return len(text.split(' '))",  # right on single spaces only: the hidden texts catch it
        "off-by-one": "return text.count(' ')",  # wrong everywhere
    }
    for name, body in notebooks.items():
        write_notebook(submissions / f"{name}.ipynb", make_notebook(NAME, solution(body)))
    out = tmp_path / "out"
    run_grade(str(submissions), "--course", str(toy_course), "--out", str(out))
    assert outcomes(out, "split") == outcomes(out, "regex") == {"count-public": "passed", "count-hidden": "passed"}
    assert outcomes(out, "spaces-only") == {"count-public": "passed", "count-hidden": "failed"}
    assert outcomes(out, "off-by-one") == {"count-public": "failed", "count-hidden": "failed"}
    message = next(
        test["output"]
        for test in json.loads((out / "off-by-one" / "results.json").read_text())["tests"]
        if test["extra_data"]["check_id"] == "count-public"
    )
    assert "count_words('one two three') returned 2, but the text has 3 words." in message


def test_the_student_kit_ships_the_public_check_kind_only(toy_course: Path, tmp_path: Path, zoo: object) -> None:
    built = grade("build-student-kit", NAME, str(tmp_path / "kits"), "--course", str(toy_course))
    assert built.returncode == 0, built.stderr[-3000:]
    kit = Path(built.stdout.strip())
    with zipfile.ZipFile(kit.parent / f"{kit.name}.zip") as archive:
        files = {name.removeprefix(f"{kit.name}/"): archive.read(name).decode() for name in archive.namelist()}
    assert f"assignments/{NAME}/checks.py" in files and f"assignments/{NAME}/recorded.json" in files
    assert not [name for name in files if name.endswith(("hidden_checks.py", f"{NAME}/reference.py", "solution.ipynb"))]
    assert not [name for name, text in files.items() if "word_count_drawn" in text or "quokka" in text]
    assert "count-hidden" not in files[f"assignments/{NAME}/rubric.yaml"]
    # The kit checks a notebook with the public check, replaying the reference's recorded values.
    results = tmp_path / "check.json"
    notebook = tmp_path / "mine.ipynb"
    write_notebook(notebook, make_notebook(NAME, solution("return text.count(' ')")))
    checked = grade("check", str(notebook), "--json", str(results), cwd=kit, kit=kit)
    assert checked.returncode == 1, checked.stdout + checked.stderr[-2000:]
    tests = json.loads(results.read_text())["tests"]
    assert [(t["extra_data"]["check_id"], t["extra_data"]["outcome"]) for t in tests] == [("count-public", "failed")]


def test_a_hidden_only_kind_in_the_shipped_module_is_refused(toy_course: Path, tmp_path: Path) -> None:
    """checks.py is what a kit ships: a kind only hidden checks use must live in hidden_checks.py."""
    course = copy_course(toy_course, tmp_path / "course")
    folder = course / "assignments" / NAME
    (folder / "checks.py").write_text(CHECKS + "\n\n" + HIDDEN_CHECKS.split("from .checks import judge_counts\n")[1])
    (folder / "hidden_checks.py").unlink()
    with pytest.raises(CourseError, match=r"only hidden checks use \(word_count_drawn\): move them to hidden_checks\.py"):
        Course(course).assignment(NAME)


def test_course_mistakes_are_named(toy_course: Path, tmp_path: Path) -> None:
    course = copy_course(toy_course, tmp_path / "course")
    folder = course / "assignments" / NAME
    # A kind named like one of the package's.
    (folder / "checks.py").write_text(CHECKS.replace('@check_kind("word_count"', '@check_kind("written_answer"'))
    with pytest.raises(CourseError, match="named like the grader's own: written_answer"):
        Course(course).assignment(NAME)
    # A check module that does not import.
    (folder / "checks.py").write_text(CHECKS + "\nimport nothing_of_that_name\n")
    with pytest.raises(CourseError, match=r"checks\.py failed to import: ModuleNotFoundError"):
        Course(course).assignment(NAME)
    # The old layout (rubrics/, reference/) is named, with what to do.
    old = tmp_path / "old"
    (old / "rubrics").mkdir(parents=True)
    with pytest.raises(UsageError, match="old layout"):
        from grader.grading.course import find_course_root

        find_course_root(old)


KILLER = '''

@check_kind("kills_its_worker", CountParams)
def kills_its_worker(context: CheckContext, params: CountParams) -> Verdict:
    """A grader bug, made to order: the check kills the process grading the submission when count_words('x') is 99."""
    import os
    import signal

    if context.returned(context.call(params.function, literal("x")), "count_words('x')") == 99:
        os.kill(os.getpid(), signal.SIGKILL)
    return Verdict.passed("count_words('x') is not 99.")
'''


def test_a_worker_that_dies_gives_an_internal_error_that_the_next_run_grades_again(
    toy_course: Path, tmp_path: Path, zoo: object
) -> None:
    """The result says the grader failed (a typed fact, not its wording), and only that submission is graded again."""
    course = copy_course(toy_course, tmp_path / "course")
    folder = course / "assignments" / NAME
    (folder / "checks.py").write_text(CHECKS + KILLER)
    check = "  - id: worker\n    name: a worker-killing check\n    kind: kills_its_worker\n    target: count_words\n"
    (folder / "rubric.yaml").write_text(RUBRIC + check + "    points: 1\n    params: {texts: [x]}\n")
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    write_notebook(submissions / "fine.ipynb", make_notebook(NAME, solution("return len(text.split())")))
    write_notebook(submissions / "fatal.ipynb", make_notebook(NAME, solution("return 99 if text == 'x' else len(text.split())")))
    out = tmp_path / "out"
    arguments = (str(submissions), "--course", str(course), "--out", str(out), "--workers", "2")
    run_grade(*arguments)
    fatal = json.loads((out / "fatal" / "results.json").read_text())["extra_data"]
    assert fatal["internal_error"] is True and "the worker process grading this submission was killed" in fatal["error"]
    assert outcomes(out, "fine") == {"count-public": "passed", "count-hidden": "passed", "worker": "passed"}
    again = run_grade(*arguments)
    assert "1 unchanged submission was not graded again" in again.stdout + again.stderr
    assert json.loads((out / "fatal" / "results.json").read_text())["extra_data"]["internal_error"] is True


def test_the_kinds_a_rubric_can_name_are_listed_with_where_they_come_from(toy_course: Path) -> None:
    listed = grade_process(["list-kinds", NAME, "--course", str(toy_course)], timeout=120, env={**os.environ, "COLUMNS": "250"})
    assert listed.returncode == 0, listed.stderr
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in listed.stdout.splitlines() if line.count("│") >= 4}
    assert rows["word_count"] == "checks.py" and rows["word_count_drawn"] == "hidden_checks.py"
    assert rows["written_answer"] == "grader" and "kills_its_worker" not in rows
    assert "count_words on the rubric's texts." in listed.stdout and "function, texts" in listed.stdout
