"""The tests' grade server (tests/grade_server.py) runs a command as a fresh `python -m grader` would."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest

import grader.grading.kernels
import grader.kernel.supply
from grader.kernel import templates
from tests.contract import here
from tests.grade_server import TESTS_ENV, _fork_from_standing, _server, grade_process, import_key, stop_servers


def test_a_command_run_by_the_server_prints_and_exits_as_a_fresh_process(tmp_path: Path) -> None:
    # The tests' own environment is served (else they pay every start), whatever earlier tests left in it.
    differ = sorted(name for name in {*TESTS_ENV, *os.environ} if TESTS_ENV.get(name) != os.environ.get(name))
    assert _server(os.environ) is not None, differ
    (tmp_path / "empty").mkdir()
    for args in (["--version"], ["run", "--help"], ["empty"], ["nowhere.ipynb"]):
        served = grade_process(args, cwd=tmp_path, env={**os.environ, "COLUMNS": "120"}, timeout=120)
        fresh = grade_process(args, cwd=tmp_path, env={**os.environ, "COLUMNS": "120"}, timeout=120, fresh=True)
        assert (served.returncode, served.stdout, served.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr), args
    assert grade_process(["nowhere.ipynb"], cwd=tmp_path).returncode == 2


def test_a_command_in_another_environment_runs_in_a_fresh_process(tmp_path: Path) -> None:
    assert _server({**os.environ, "PYTHONPATH": str(tmp_path)}) is None  # a kit's grader: never the server's
    assert _server({**os.environ, "COLUMNS": "80"}) is not None
    # What `grade` sets itself first, a test may have left in the tests' environment: served all the same.
    assert _server({**os.environ, "LLM_GRADER_RUN": "a-run-of-an-earlier-test", "TRANSFORMERS_VERBOSITY": "error"})
    assert _server({**os.environ, "TRANSFORMERS_VERBOSITY": "info"}) is None
    # What importing Ray sets in the tests' process (the cluster's tests import it there) is what it reads as unset.
    import ray._private.client_mode_hook  # noqa: F401 (it writes RAY_CLIENT_MODE into os.environ)

    assert os.environ["RAY_CLIENT_MODE"] == "0" and _server(os.environ) is not None
    assert _server({**os.environ, "RAY_CLIENT_MODE": "1"}) is None
    # Whichever command comes first, the server is the tests' own (the first, on a worker, may be a kit's).
    stop_servers()
    assert _server({**os.environ, "PYTHONPATH": str(tmp_path)}) is None
    assert _server(os.environ) is not None


def test_a_served_command_forks_its_kernel_from_the_workers_standing_template(tmp_path: Path, root: Path) -> None:
    server = _server(os.environ)
    assert server is not None and server.template is not None
    standing = psutil.Process(server.template.template.address.pid)
    before = {child.pid for child in standing.children()}  # its own (the one that removes its folder when it ends)
    watchers: set[int] = set()
    done = threading.Event()

    def watch() -> None:  # the forked kernel's watcher is a child of the template that forked it
        while not done.wait(0.02):
            watchers.update(child.pid for child in standing.children() if child.pid not in before)

    watching = threading.Thread(target=watch)
    watching.start()
    try:
        notebook = root / "submissions" / "perplexity" / "solution.ipynb"
        completed = grade_process([str(notebook), "--out", str(tmp_path / "out"), "--seed", "1", "-q"], cwd=root, timeout=300)
    finally:
        done.set()
        watching.join()
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert watchers, "no kernel was forked from the standing template"
    result = json.loads((tmp_path / "out" / "solution" / "results.json").read_text())
    assert result["score"] == here("perplexity", 20)  # graded in full


def test_a_run_whose_template_would_differ_starts_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    # The patch a served command applies, applied here (and undone by monkeypatch): which template a run gets.
    for module in (grader.grading.kernels, grader.kernel.supply):
        monkeypatch.setattr(module, "start_template", module.start_template)
    own: list[dict[str, str]] = []
    monkeypatch.setattr(templates, "start_template", lambda env, sandbox, preload=templates.PRELOAD: own.append(dict(env)))
    sandbox: Any = type("Policy", (), {"zoo_dir": None, "isolation": None})()  # no zoo view to apply
    env = {"HF_HUB_CACHE": "/zoo/hub", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin"}
    _fork_from_standing({"socket": "/nowhere/template.sock", "pid": 1, "key": import_key(env, templates.PRELOAD)})

    # Given other threads (set after the fork), the same template: the standing one.
    shared = grader.kernel.supply.start_template({**env, "OMP_NUM_THREADS": "2"}, sandbox)
    assert isinstance(shared, templates.SharedTemplate) and shared.socket == Path("/nowhere/template.sock")
    assert grader.grading.kernels.start_template(env, sandbox).address.pid == 1
    # Another environment or other imports: a template of its own, as any run starts.
    assert grader.kernel.supply.start_template({**env, "HF_HUB_CACHE": "/other/hub"}, sandbox) is None
    assert grader.grading.kernels.start_template(env, sandbox, ("torch",)) is None
    assert [item["HF_HUB_CACHE"] for item in own] == ["/other/hub", "/zoo/hub"]
