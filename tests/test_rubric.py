"""Rubrics are validated strictly: a typo is an error naming the file and the key path."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.errors import RubricError
from grader.grading.course import Course
from grader.grading.rubric import load_rubric

ROOT = Path(__file__).resolve().parent.parent
# Every kind of the course: the package's generic ones and each assignment's own.
KINDS = {kind.name: kind.params for assignment in Course(ROOT).all() for kind in assignment.kinds.values()}


def write(tmp_path: Path, text: str, name: str = "demo") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


GOOD = """
assignment: demo
title: Demo
checks:
  - id: memory
    name: Memory
    kind: memory_footprint
    target: get_model_memory_footprint
    points: 2
    params: {quantization: int8}
"""


def problems(path: Path) -> list[str]:
    with pytest.raises(RubricError) as raised:
        load_rubric(path, KINDS)
    assert str(path) in str(raised.value)
    return raised.value.problems


def test_the_course_rubric_is_valid(root: Path) -> None:
    rubric, params = load_rubric(root / "assignments" / "ptq-bnb" / "rubric.yaml", KINDS, name="ptq-bnb")
    assert rubric.assignment == "ptq-bnb"
    assert set(params) == {check.id for check in rubric.checks}
    assert {check.device for check in rubric.checks} == {"any", "cuda"}
    assert all(check.docs for check in rubric.checks if check.kind != "written_answer")


def test_a_good_rubric_loads_with_defaults(tmp_path: Path) -> None:
    rubric, params = load_rubric(write(tmp_path, GOOD), KINDS)
    assert rubric.limits.cell_timeout_s == 120
    assert rubric.checks[0].visibility == "public"
    assert params["memory"].quantization == "int8"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD + "colour: blue\n", "colour: unknown key"),
        (GOOD.replace("    points: 2", "    points: 2\n    pionts: 3"), "checks[0].pionts: unknown key"),
        (GOOD.replace("{quantization: int8}", "{quantisation: int8}"), "checks[0].params.quantisation: unknown key"),
        (GOOD.replace("{quantization: int8}", "{quantization: int3}"), "checks[0].params.quantization:"),
        (GOOD.replace("points: 2", 'points: "two"'), "checks[0].points:"),
        (GOOD.replace("memory_footprint", "memory_footprints"), "checks[0].kind: unknown check kind 'memory_footprints'"),
        (GOOD.replace("title: Demo\n", ""), "title: required key is missing"),
        (GOOD.replace("assignment: demo", "assignment: other"), "does not match the file name"),
        (GOOD + GOOD.split("checks:\n")[1].replace("  - id", "  - id", 1), "two checks have the id 'memory'"),
        (GOOD.replace("title: Demo", "title: Demo\ntitle: Again"), "the key 'title' appears twice"),
        ("- just\n- a list\n", "must be a mapping"),
        ("assignment: [unclosed\n", "is not valid YAML"),
    ],
)
def test_a_broken_rubric_names_the_key(tmp_path: Path, text: str, expected: str) -> None:
    found = problems(write(tmp_path, text))
    assert any(expected in problem for problem in found), found


def test_cli_stops_on_a_broken_rubric_before_grading(tmp_path: Path, root: Path) -> None:
    course = tmp_path / "course"
    shutil.copytree(root / "assignments", course / "assignments")
    rubric = course / "assignments" / "ptq-bnb" / "rubric.yaml"
    rubric.write_text(rubric.read_text().replace("    points: 3\n", "    points: 3\n    hidnt: typo\n", 1))
    out = tmp_path / "out"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader",
            str(root / "submissions" / "ptq-bnb" / "solution.ipynb"),
            "--course",
            str(course),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 3
    assert "checks[0].hidnt: unknown key" in completed.stderr
    assert not out.exists()


def test_anchors_under_x_keys_are_shared_and_merged(tmp_path: Path) -> None:
    text = GOOD.replace("checks:", "x-shared: &shared {quantization: nf4}\nchecks:").replace(
        "params: {quantization: int8}", "params: *shared"
    )
    text += (
        "  - {id: other, name: Other, kind: memory_footprint, target: f, points: 1, params: {<<: *shared, quantization: fp4}}\n"
    )
    _, params = load_rubric(write(tmp_path, text), KINDS)
    assert params["memory"].quantization == "nf4"  # type: ignore[attr-defined]
    assert params["other"].quantization == "fp4"  # type: ignore[attr-defined]


def test_keys_outside_x_prefix_stay_strict(tmp_path: Path) -> None:
    found = problems(write(tmp_path, GOOD.replace("checks:", "shared: 1\nchecks:")))
    assert any("shared: unknown key" in problem for problem in found)


def test_kind_names_the_check_code_looks_up_are_the_rubric_s() -> None:
    """A kind named in check code (to reuse another check's call) that no longer exists would silently find nothing."""
    from course_assignments.quantization.checks import MEASURE_KINDS

    quantization = Course(ROOT).assignment("quantization")
    assert set(MEASURE_KINDS) <= {check.kind for check in quantization.rubric.checks}


@pytest.mark.parametrize("assignment", [assignment.name for assignment in Course(ROOT).all()])
def test_every_graded_function_has_a_public_check_a_cpu_runs(assignment: str) -> None:
    """A student whose self-check says "all public checks pass" has called each graded function for real:
    every function the rubric identifies has a public check that runs on the CPU (not only a CUDA one)."""
    rubric = Course(ROOT).assignment(assignment).rubric
    public = {check.target for check in rubric.checks if check.visibility == "public" and check.device != "cuda"}
    missing = [function for function in rubric.identify.functions if function not in public]
    assert not missing, f"{assignment}: no public check on the CPU for {missing}"
