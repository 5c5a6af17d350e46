"""The kits of the other assignments: built from their solution, each passes it and names a public mistake.

In a file of its own so that pytest-xdist runs it beside `tests/test_student_kit.py` (each kit
build grades the solution; `ptq-bnb`'s kit is covered there, by its memory-footprint test).
"""

from __future__ import annotations

import ast
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
    # Nothing only the hidden check kinds hold (their names, their helpers', their default inputs and messages) is in
    # any file of the kit.
    hidden = ast.parse((root / "assignments" / assignment / "hidden_checks.py").read_text())
    public = "\n".join(
        path.read_text() for path in [root / "assignments" / assignment / "checks.py", *(root / "grader").rglob("*.py")]
    )
    secrets = {node.name for node in ast.walk(hidden) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    secrets |= {node.value for node in ast.walk(hidden) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    secrets = {secret for secret in secrets if len(secret) >= 4 and secret not in public}
    assert {"precision_invalid", "fp64", "float8"} <= secrets or assignment != "latency"
    shipped = "\n".join(path.read_text(errors="replace") for path in kit.rglob("*") if path.is_file() and path.suffix != ".zip")
    assert not {secret for secret in secrets if secret in shipped}
    for sample, status in (("solution", 0), (mistake, 1)):
        results = tmp_path / f"{sample}.json"
        notebook = root / "submissions" / assignment / f"{sample}.ipynb"
        completed = run("check", str(notebook), "--json", str(results), cwd=kit, kit=kit)
        assert completed.returncode == status, completed.stdout + completed.stderr[-2000:]
        outcomes = {t["extra_data"]["check_id"]: t["extra_data"]["outcome"] for t in json.loads(results.read_text())["tests"]}
        assert {check for check, outcome in outcomes.items() if outcome == "failed"} == (set() if status == 0 else {public_check})
