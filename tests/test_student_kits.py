"""The kits of the other assignments: built from their solution, each passes it and names a public mistake.

In a file of its own so that pytest-xdist runs it beside `tests/test_student_kit.py` (each kit
build grades the solution; `ptq-bnb`'s kit is covered there, by its memory-footprint test).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_student_kit import run


@pytest.mark.parametrize(
    ("assignment", "mistake", "public_check"),
    [
        ("latency", "mistake-unlabelled-plots", "sweep-plots"),
        ("quantization", "mistake-exported-not-quantized", "ptq-quantized"),
    ],
)
def test_every_assignment_has_a_kit_that_passes_its_solution(
    assignment: str, mistake: str, public_check: str, root: Path, tmp_path: Path, zoo: object
) -> None:
    """The other assignments' kits: built from their solution, they pass it and name a public mistake."""
    completed = run("build-student-kit", assignment, str(tmp_path / "kits"), cwd=root)
    assert completed.returncode == 0, completed.stdout + completed.stderr[-3000:]
    kit = Path(completed.stdout.strip())
    assert not list(kit.glob("assignments/*/reference.py")) and not list(kit.glob("assignments/*/hidden_checks.py"))
    assert not list(kit.rglob("solution.ipynb"))
    for sample, status in (("solution", 0), (mistake, 1)):
        results = tmp_path / f"{sample}.json"
        notebook = root / "submissions" / assignment / f"{sample}.ipynb"
        completed = run("check", str(notebook), "--json", str(results), cwd=kit, kit=kit)
        assert completed.returncode == status, completed.stdout + completed.stderr[-2000:]
        outcomes = {t["extra_data"]["check_id"]: t["extra_data"]["outcome"] for t in json.loads(results.read_text())["tests"]}
        assert {check for check, outcome in outcomes.items() if outcome == "failed"} == (set() if status == 0 else {public_check})
