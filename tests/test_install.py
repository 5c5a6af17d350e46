"""The README's install script, run for real into a fresh venv (minutes of pip: `pytest -m install`)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from grader.authoring import make_notebook, write_notebook


@pytest.mark.install
def test_scripts_install_makes_a_venv_under_tmp_that_grades_sandboxed_even_when_pytorchs_index_is_unreachable(
    root: Path, tmp_path: Path
) -> None:
    """Here only the package registries are reachable, as on a machine whose pip knows a mirror alone:
    the script must still install (torch from pip's own sources) and say where torch came from. The clone lies in
    the machine's /tmp, as a new instructor's might: its kernels get a /tmp of their own, and must still see the
    Python environment (not fall back to no sandbox: a sandbox that cannot start stops the run)."""
    scratch = Path(tempfile.mkdtemp(prefix="llm-grader-install-", dir="/tmp"))
    try:
        _install_and_grade(root, tmp_path, scratch / "clone")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _install_and_grade(root: Path, tmp_path: Path, clone: Path) -> None:
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
    # Graded from that venv, sandboxed: the kernel sees neither the course nor the machine's /dev/shm.
    left = tmp_path / "left-in-dev-shm"
    probe = (
        "import os\n"
        f"assert not os.path.exists({str(root / 'assignments')!r}), 'the course is visible'\n"
        f"open('/dev/shm/{left.name}', 'w').write('x' * 1000)\n"
        "print('probe ran')"
    )
    write_notebook(tmp_path / "in" / "probe.ipynb", make_notebook("ptq-bnb", [("code", probe)]))
    command = [str(clone / ".venv" / "bin" / "grade"), str(tmp_path / "in"), "--course", str(root)]
    graded = subprocess.run(
        [*command, "--out", str(tmp_path / "out"), "--workers", "1", "--seed", "1"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert graded.returncode == 0, graded.stdout[-2000:] + graded.stderr[-3000:]
    extra = json.loads((tmp_path / "out" / "probe" / "results.json").read_text())["extra_data"]
    assert extra["sandbox"] == "own-user" and not extra["sandbox_warning"], extra["notes"]
    assert extra["cell_problems"] == [], extra["cell_problems"]
    assert not Path("/dev/shm", left.name).exists()
    assert "Sandbox warning" not in graded.stderr
