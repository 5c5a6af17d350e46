"""The tests' grade server (tests/grade_server.py) runs a command as a fresh `python -m grader` would."""

from __future__ import annotations

import os
from pathlib import Path

from tests.grade_server import TESTS_ENV, _server, grade_process, stop_servers


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
