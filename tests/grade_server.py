"""`grade` for the tests without paying Python's start and torch's import at every command.

Most tests run the real `grade` command several times, and each run's process first spends about 4 s of CPU
importing torch, transformers and the grader (the suite is CPU-bound on two CPUs). The tests instead ask a server,
one per test process, that has imported them once, as `python -m grader` would (its library settings first, see
``grader.cli.main``), started no thread and graded nothing: for each command it forks a child, which takes the
command's working folder, standard streams and arguments and runs ``grader.cli.main`` as ``python -m grader``
does, then exits as that process would (its ``atexit`` handlers too). The child is a real process of its own:
its workers, kernels and files are those of a `grade` run.

:func:`grade_process` falls back to a fresh ``python -m grader`` whenever a child of the server could differ from
one: a command whose environment differs from the tests' own (a kit's ``PYTHONPATH``, a test's variables; but
for what a command reads only at run time or `grade` sets itself first, AT_RUN_TIME and SET_BY_GRADE), a run on
Ray, or when asked (``fresh``: what a command prints when it first imports a library).

Each run also starts a kernel template (about 5 s of CPU: torch, transformers, ipykernel and the course's common
imports) unless it is given one. A pytest worker keeps one **standing template** (:class:`StandingTemplate`), started
as a run starts its own (:func:`grader.kernel.templates.start_template`, with the kernels' environment of a default
run), and its served commands fork their kernels from it when the template they would start is the same: the same
modules imported in the same environment (:func:`import_key`). A template reads nothing of a run (each fork request
brings its own environment, folder and sandbox policy) and never runs a notebook's code, so one that outlives a run
serves the next as one of its own would. A command whose template would differ starts its own, and commands in a
fresh Python (kits, Gradescope's scripts, Ray) and graders in the tests' own process always do.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from grader.grading.kernels import OPENMP_WAIT_POLICY
from grader.scratch import RUN_ENV

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = "python -m grader"  # click's name for the program run as `python -m grader`
# Variables a command's environment may hold other than the server's: read when the command runs, never by an
# import (rich reads COLUMNS when it draws; pytest names the test it runs in PYTEST_CURRENT_TEST, and reads it alone;
# torch sets TORCHINDUCTOR_CACHE_DIR in a process the first time its compiler's cache is asked for, and reads it then).
AT_RUN_TIME = frozenset({"COLUMNS", "PYTEST_CURRENT_TEST", "TORCHINDUCTOR_CACHE_DIR"})
# What `grade` sets first thing (grader.cli.main), before any import reads it: a test that ran part of the grader
# in its own process (a run's id, the libraries' defaults) leaves them in the tests' environment, and a command's
# process has them all the same once it starts.
SET_BY_GRADE = {"TRANSFORMERS_VERBOSITY": "error", "OMP_WAIT_POLICY": OPENMP_WAIT_POLICY}
# What importing a library writes into its process's environment, whatever was there: Ray's client-mode hook reads
# RAY_CLIENT_MODE, then sets it to "0" (ray/_private/client_mode_hook.py). A test that imports Ray in the tests'
# process (the cluster's) leaves it there, and a command started with it runs as one started without it: it reads
# "0", Ray's default. Without this, every later command of that pytest worker ran in a fresh Python (about 4 s of
# CPU each), and the server's own tests failed when they came after the cluster's on one worker.
SET_BY_IMPORT = {"RAY_CLIENT_MODE": "0"}


def as_grade_starts(environment: Mapping[str, str]) -> dict[str, str]:
    """The environment a `grade` command has once it starts, in ``environment`` (but for AT_RUN_TIME, and for what
    an import sets as it found it, SET_BY_IMPORT)."""
    started = {
        name: value
        for name, value in environment.items()
        if name not in AT_RUN_TIME and name != RUN_ENV and SET_BY_IMPORT.get(name) != value
    }
    return {**SET_BY_GRADE, **started}


# What every `grade` command's process imports (the rest, per command, it imports itself as a fresh one would).
PRELOAD = (
    "torch",
    "transformers",
    "transformers.modeling_utils",
    "transformers.generation.utils",
    "grader.cli",
    "grader.scale.batch",
    "grader.scale.runner",
    "grader.grading.grader",
    "grader.reports.render",
    "grader.reports.similarity",
)


def grade_process(
    args: Sequence[str],
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    fresh: bool = False,
) -> subprocess.CompletedProcess[str]:
    """What ``subprocess.run([python, "-m", "grader", *args], capture_output=True, text=True, ...)`` gives: run by
    a child of this process's grade server where that is the same, else by a fresh Python."""
    environment = dict(os.environ if env is None else env)
    server = None if fresh or "--ray" in args else _server(environment)
    if server is None:
        return subprocess.run(
            [sys.executable, "-m", "grader", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=environment
        )
    return server.run(list(args), str(cwd if cwd is not None else os.getcwd()), environment, timeout)


class GradeServer:
    """The client of one server process (started with ``env``)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.lock = threading.Lock()
        self.template = StandingTemplate.start()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.grade_server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=self.env,
        )
        self.ready = self._answer(None) == {"ready": True}
        if not self.ready and self.template is not None:
            self.template.close()
            self.template = None

    def _answer(self, timeout: float | None) -> dict[str, Any] | None:
        """The server's next answer, or None if it gave none within ``timeout`` s or ended."""
        stdout: IO[str] = self.process.stdout  # type: ignore[assignment]
        if timeout is not None and not select.select([stdout], [], [], timeout)[0]:
            return None
        line = stdout.readline()
        return json.loads(line) if line else None

    def serves(self, environment: Mapping[str, str]) -> bool:
        """Whether a child of this server runs as a fresh process would in ``environment``."""
        return as_grade_starts(self.env) == as_grade_starts(environment)

    def run(
        self, argv: list[str], cwd: str, environment: Mapping[str, str], timeout: float | None
    ) -> subprocess.CompletedProcess[str]:
        with self.lock, tempfile.TemporaryDirectory(prefix="grade-server-") as streams:
            request = {
                "argv": argv,
                "cwd": cwd,
                "env": dict(environment),
                "stdout": f"{streams}/stdout",
                "stderr": f"{streams}/stderr",
                "template": self.template.offer() if self.template is not None else None,
            }
            stdin: IO[str] = self.process.stdin  # type: ignore[assignment]
            stdin.write(json.dumps(request) + "\n")
            stdin.flush()
            started = self._answer(60)
            if started is None:
                raise RuntimeError("the tests' grade server did not start the command")
            answer = self._answer(timeout)
            if answer is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(started["pid"], signal.SIGKILL)
                self._answer(60)
                raise subprocess.TimeoutExpired([PROGRAM, *argv], timeout or 0)
            command = [sys.executable, "-m", "grader", *argv]
            output, errors = (Path(streams, name).read_text(errors="replace") for name in ("stdout", "stderr"))
            return subprocess.CompletedProcess(command, answer["code"], output, errors)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.process.stdin.close()  # type: ignore[union-attr]
        self.process.wait(30)
        if self.template is not None:
            self.template.close()


def import_key(env: Mapping[str, str], preload: Sequence[str]) -> dict[str, Any]:
    """What a kernel template started with ``env`` imports and the environment it imports it in (with the threads it
    imports with, whatever ``env`` says): two templates with one key are the same."""
    from grader.kernel.templates import IMPORT_THREADS

    return {"env": {**env, **IMPORT_THREADS}, "preload": list(preload)}


class StandingTemplate:
    """A kernel template a pytest worker keeps for the `grade` commands its server runs (see the module's docstring)."""

    def __init__(self, template: Any, key: dict[str, Any]) -> None:
        self.template = template
        self.key = key

    @classmethod
    def start(cls) -> StandingTemplate | None:
        """The template a default run of the tests' environment would start, as it starts it (None where that run
        would launch its kernels)."""
        from grader.grading.course import Course
        from grader.grading.kernels import kernel_environment, sandbox_policy
        from grader.grading.settings import GradingSettings
        from grader.kernel.supply import why_launched
        from grader.kernel.templates import PRELOAD, start_template, zoo_viewed_env
        from grader.zoo import ModelZoo

        settings = GradingSettings()
        zoo = ModelZoo()
        sandbox = sandbox_policy(Course(ROOT), zoo, settings)
        if why_launched(sandbox, settings.fork_kernels) is not None:
            return None
        env = kernel_environment(zoo, settings)
        return cls(start_template(env, sandbox), import_key(zoo_viewed_env(env, sandbox), PRELOAD))

    def offer(self) -> dict[str, Any]:
        """What a command needs to fork from this template: its address and its key."""
        return {"socket": self.template.address.socket, "pid": self.template.address.pid, "key": self.key}

    def close(self) -> None:
        self.template.close()


_SERVERS: dict[int, GradeServer | None] = {}
# The tests' own environment, as collection found it: a server starts with it, never with a command's (a kit's
# PYTHONPATH would otherwise be the server's, and its children run the repository's grader in its place: `python
# -m` puts the server's folder before PYTHONPATH).
TESTS_ENV = dict(os.environ)


def _server(environment: Mapping[str, str]) -> GradeServer | None:
    """This process's server, if it serves commands run in ``environment`` (the tests' own, but for AT_RUN_TIME)."""
    if os.getpid() not in _SERVERS:
        server = GradeServer(TESTS_ENV)
        _SERVERS[os.getpid()] = server if server.ready else None
        atexit.register(stop_servers)
    server = _SERVERS[os.getpid()]
    return server if server is not None and server.serves(environment) else None


def stop_servers() -> None:
    server = _SERVERS.pop(os.getpid(), None)
    if server is not None:
        server.close()


# ---------------------------------------------------------------- the server process


def _serve() -> None:
    from grader.quiet import quiet_library_defaults
    from grader.scale.runner import share_cpus

    answers = os.fdopen(os.dup(1), "w")  # the answers' own pipe: whatever an import prints goes to stderr
    os.dup2(2, 1)
    quiet_library_defaults()  # what grader.cli.main does first, before any library is imported
    share_cpus()
    for module in PRELOAD:
        __import__(module)
    gc.freeze()
    # No Python thread may run here: a child would hold its locks. (Importing torch starts one idle native thread, as
    # in the fork server `grade` forks its own workers from; see grader.scale.runner._worker_context.)
    if threading.active_count() != 1:
        answers.write(json.dumps({"ready": False, "threads": [thread.name for thread in threading.enumerate()]}) + "\n")
        answers.flush()
        return
    answers.write(json.dumps({"ready": True}) + "\n")
    answers.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            answers.close()
            _command(request)  # raises SystemExit: the child ends as `python -m grader` does
        answers.write(json.dumps({"pid": pid}) + "\n")
        answers.flush()
        _, status = os.waitpid(pid, 0)
        answers.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n")
        answers.flush()


def _command(request: Mapping[str, Any]) -> None:
    """In the forked child: become ``python -m grader ARGV`` in ``cwd`` with its streams in files."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = sys.__stdin__ = open(0, closefd=False)  # noqa: SIM115 (the process's own streams)
    sys.stdout = sys.__stdout__ = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = sys.__stderr__ = open(2, "w", errors="backslashreplace", closefd=False, buffering=1)  # noqa: SIM115
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.path[0] = request["cwd"]  # `python -m` puts the working folder first
    sys.argv = [str(ROOT / "grader" / "__main__.py"), *request["argv"]]
    if request.get("template") is not None:
        _fork_from_standing(request["template"])
    from grader.cli import main

    main(args=request["argv"], prog_name=PROGRAM)  # standalone: exits with the command's code
    raise SystemExit(0)


def _fork_from_standing(offer: Mapping[str, Any]) -> None:
    """In the command's process: where the run would start a template the same as the standing one, it forks from
    that one instead (a run's main process for its workers, a grader working alone for itself)."""
    import grader.grading.kernels
    import grader.kernel.supply
    from grader.kernel import templates

    own = templates.start_template
    standing = templates.TemplateAddress(offer["socket"], offer["pid"])

    def start_template(
        env: Mapping[str, str], sandbox: Any, preload: tuple[str, ...] = templates.PRELOAD
    ) -> templates.TemplateClient:
        if import_key(templates.zoo_viewed_env(env, sandbox), preload) == offer["key"]:
            return templates.SharedTemplate(standing)  # closing it leaves it to the pytest worker
        return own(env, sandbox, preload)

    grader.grading.kernels.start_template = start_template  # type: ignore[assignment]
    grader.kernel.supply.start_template = start_template  # type: ignore[assignment]


if __name__ == "__main__":
    _serve()
