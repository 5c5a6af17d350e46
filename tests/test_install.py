"""The README's install script, run for real into a fresh venv (minutes of pip: `pytest -m install`)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.install
def test_scripts_install_makes_a_venv_with_the_pinned_torch_even_when_pytorchs_index_is_unreachable(
    root: Path, tmp_path: Path
) -> None:
    """Here only the package registries are reachable, as on a machine whose pip knows a mirror alone:
    the script must still install (torch from pip's own sources) and say where torch came from."""
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("pyproject.toml", "constraints.txt", "README.md"):
        shutil.copy(root / name, clone / name)
    shutil.copytree(root / "grader", clone / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    (clone / "scripts").mkdir()
    shutil.copy(root / "scripts" / "install", clone / "scripts" / "install")
    env = {name: value for name, value in os.environ.items() if not name.startswith(("VIRTUAL_ENV", "PYTHON"))}
    # A port nothing listens on: refused at once, as an index that cannot be reached is.
    env.update(TORCH_INDEX_URL="http://127.0.0.1:9/simple", PYTHON=str(Path(sys.base_prefix) / "bin" / "python3"))
    completed = subprocess.run(["sh", "scripts/install"], cwd=clone, env=env, capture_output=True, text=True, timeout=1200)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-3000:]
    assert "Installing torch==2.13.0 from http://127.0.0.1:9/simple" in completed.stdout
    pin = next(
        line.split("==")[1].strip() for line in (root / "constraints.txt").read_text().splitlines() if line.startswith("torch==")
    )
    version = subprocess.run(
        [str(clone / ".venv" / "bin" / "python"), "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert version.split("+")[0] == pin
    assert (clone / ".venv" / "bin" / "grade").exists()
    # A second run keeps the venv and its torch: nothing to fetch.
    again = subprocess.run(["sh", "scripts/install"], cwd=clone, env=env, capture_output=True, text=True, timeout=1200)
    assert again.returncode == 0 and "Installing torch" not in again.stdout, again.stdout + again.stderr[-2000:]
