"""The reference side is the solution notebook's own definitions (grader/grading/reference.py): what it defines is
kept, what it runs is not, and a function that needs something the notebook computes when it runs is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.authoring import make_notebook, write_notebook
from grader.errors import CourseError
from grader.grading.reference import load_reference_module, solution_definitions


def solution(folder: Path, *cells: str) -> Path:
    path = folder / "solution.ipynb"
    write_notebook(path, make_notebook("toy", [("markdown", "# A toy exercise"), *(("code", cell) for cell in cells)]))
    return path


def test_definitions_are_kept_and_what_the_notebook_runs_is_not(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    path = solution(
        tmp_path,
        "%pip install -q nothing-at-all\nimport math\nfrom collections import Counter",
        "SCALE = 2.5\nWORDS: list[str] = ['a', 'b']\nLABELS = {'low': 0, 'high': 1}",
        "def scaled(x: float) -> float:\n    '''x times SCALE, rounded.'''\n    return round(x * SCALE, 2)\n\n"
        "class Counts:\n    def of(self, text):\n        return Counter(text.split())",
        f"result = scaled(4)\nopen({str(marker)!r}, 'w').write('the notebook ran')\nprint(result)",
        "def top(text, n=1):\n    return [word for word, _ in Counts().of(text).most_common(n)]",
    )
    source = solution_definitions(path)
    assert "def scaled" in source and "class Counts" in source and "SCALE = 2.5" in source
    assert "result = scaled(4)" not in source and "%pip" not in source
    reference = load_reference_module(path, "toy")
    assert reference.scaled(2) == 5.0 and reference.top("b a b") == ["b"] and math_is(reference)
    assert not marker.exists()  # nothing the notebook runs is run


def math_is(module: object) -> bool:
    import math

    return getattr(module, "math", None) is math


def test_a_constant_computed_when_the_notebook_runs_is_left_out(tmp_path: Path) -> None:
    path = solution(
        tmp_path,
        "import torch",
        "device = torch.device('cpu')\ncompute_dtype = torch.float16 if device.type == 'cuda' else torch.float32",
        "def footprint(model):\n    return sum(p.numel() for p in model.parameters())",
    )
    source = solution_definitions(path)
    assert "compute_dtype" not in source and "device =" not in source and "def footprint" in source


def test_a_function_that_reads_what_the_notebook_computes_is_named(tmp_path: Path) -> None:
    path = solution(
        tmp_path,
        "import torch",
        "DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'",
        "def to_device(tensor):\n    return tensor.to(DEVICE)",
    )
    with pytest.raises(CourseError, match=r"cell 4: to_device reads DEVICE, which the notebook sets by running code"):
        solution_definitions(path)


def test_a_solution_that_does_not_parse_is_named(tmp_path: Path) -> None:
    path = solution(tmp_path, "def broken(:\n    pass")
    with pytest.raises(CourseError, match=r"cell 2 is not valid Python"):
        solution_definitions(path)
