"""Grade one submission: execute it, call its functions, judge them under the rubric.

Data flows one way: the notebook is read and recognised, run in a fresh kernel with the
runtime installed first, then each rubric check runs (asking the kernel for values and
comparing them with the reference in this process), and the verdicts become a
:class:`~grader.reports.results.SubmissionResult`. Every submission gets a result, whatever happens.
"""

from __future__ import annotations

import copy
import dataclasses
import random
import secrets
import shutil
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from grader.checks import CheckContext, CheckKind, StopCheck, Verdict
from grader.discover.notebook import read_notebook
from grader.errors import GraderError, KernelError
from grader.grading.course import Assignment, Course
from grader.grading.kernels import SharedKernels, kernel_environment, sandbox_policy
from grader.grading.provenance import provenance
from grader.grading.reference import ReferenceModels
from grader.grading.replay import NotRecorded, ReferenceFunctions, ReferenceSide, recorded_elsewhere
from grader.grading.rubric import CheckSpec
from grader.grading.scoring import check_result, points_not_graded, points_text, withheld_if_tampered
from grader.grading.settings import GradingSettings
from grader.kernel.cells import ExecutionRecord
from grader.kernel.harness import Harness
from grader.kernel.sandbox import (
    KERNEL_START_PREFIX,
    kernel_start_text,
)
from grader.kernel.session import KernelSession
from grader.kernel.supply import KernelSupply
from grader.kernel.workdir import populate_workdir
from grader.reports.figures import displayed_figures
from grader.reports.results import CheckResult, SubmissionResult
from grader.zoo import ModelZoo

INTERNAL_ERROR = "internal grader error"  # how such a result reads; its internal_error field makes the next run regrade it


T = TypeVar("T")

UNSANDBOXED_NOTE = "Your notebook ran as an ordinary program on this computer, as it does in Jupyter."


class Grader:
    """Grades submissions of a course; one instance per run (reference models are shared)."""

    def __init__(
        self, course: Course, zoo: ModelZoo | None, settings: GradingSettings, shared: SharedKernels | None = None
    ) -> None:
        """``shared``: the sandbox and kernel template of the run this grader is a worker of (default: its own)."""
        self.course = course
        self.zoo = zoo
        self.settings = settings
        self.seed = settings.seed if settings.seed is not None else secrets.randbits(32)
        self.models = ReferenceModels(zoo)
        self._references: dict[str, ReferenceSide] = {}
        if shared is not None:
            self.sandbox = shared.sandbox
        else:
            self.sandbox = sandbox_policy(course, zoo, settings) if settings.sandbox else None
        self.kernels = KernelSupply(
            kernel_environment(zoo, settings),
            warm=settings.warm_kernels,
            sandbox=self.sandbox,
            fork=settings.fork_kernels,
            shared=shared.template if shared is not None else None,
        )

    def close(self) -> None:
        """Stop the kernel kept warm for a next submission."""
        self.kernels.close()

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- grading

    def grade(
        self,
        path: Path,
        submission_id: str,
        assignment_name: str | None = None,
        student: str | None = None,
        more_to_come: bool = False,
    ) -> SubmissionResult:
        """Grade the notebook at ``path``; never raises for a bad submission.

        ``more_to_come`` says another submission follows, so a kernel is warmed up for it.
        """
        return self.start(path, submission_id, assignment_name, student, more_to_come).finish()

    def start(
        self,
        path: Path,
        submission_id: str,
        assignment_name: str | None = None,
        student: str | None = None,
        more_to_come: bool = False,
    ) -> Started:
        """Run the notebook at ``path`` in a kernel of its own; its checks run when :meth:`Started.finish` is called,
        which another thread may do while this one starts the next submission (see :mod:`grader.scale.overlap`).
        Never raises for a bad submission (its result is then ready at once)."""
        started = time.monotonic()
        ran = self._guarded(
            lambda: self._run_notebook(path, submission_id, assignment_name, started, more_to_come),
            path,
            assignment_name,
            submission_id,
            started,
        )
        return Started(self, ran, student)

    def _guarded(
        self, work: Callable[[], T], path: Path, assignment_name: str | None, submission_id: str, started: float
    ) -> T | SubmissionResult:
        """What ``work`` returns, or this submission's result saying why it could not be graded."""
        try:
            return work()
        except KernelError as error:
            return SubmissionResult.without_results(
                submission_id,
                str(path),
                f"{INTERNAL_ERROR}: {error.show()}",
                assignment_name,
                internal_error=True,
                duration_s=time.monotonic() - started,
                provenance=provenance(path, None, self.seed, self.zoo),
            )
        except GraderError as error:
            return SubmissionResult.without_results(
                submission_id,
                str(path),
                error.show(),
                assignment_name,
                duration_s=time.monotonic() - started,
                provenance=provenance(path, None, self.seed, self.zoo),
            )
        except Exception as error:  # a grader bug must still give this submission a result
            message = f"{INTERNAL_ERROR} ({type(error).__name__}: {error}); please report it with this notebook"
            return SubmissionResult.without_results(
                submission_id,
                str(path),
                message,
                assignment_name,
                internal_error=True,
                traceback=traceback.format_exc(),
                duration_s=time.monotonic() - started,
                provenance=provenance(path, None, self.seed, self.zoo),
            )

    def _run_notebook(
        self, path: Path, submission_id: str, assignment_name: str | None, started: float, more_to_come: bool
    ) -> NotebookRun:
        notebook = read_notebook(path, max_bytes=self.course.max_notebook_bytes(assignment_name))
        notes = []
        if assignment_name is None:
            identification = self.course.identify(notebook)
            assignment_name = identification.assignment
            notes.append(f"Graded as {assignment_name!r}: {identification.how}.")
        notes.append(self.sandbox.isolation.summary if self.sandbox is not None else UNSANDBOXED_NOTE)
        assignment = self.course.assignment(assignment_name)
        self.kernels.start_launching()  # a launched kernel boots while the reference side loads (seconds, once)
        reference = self._reference(assignment)
        notes += self._self_check_notes(assignment, reference)
        if self.zoo is not None:
            self.zoo.verify(assignment.rubric.models)
        limits = assignment.rubric.limits
        session = self.kernels.take()  # the next one is started once this one has run its first cell
        kernel_start = ""
        if self.sandbox is not None:
            kernel_start = kernel_start_text(session.mode, self.kernels.why_launched)
            notes.append(f"{KERNEL_START_PREFIX}{kernel_start}")
        session.startup_timeout = limits.startup_timeout_s
        session.limit_memory(limits.memory_mib * 1024**2)
        run = NotebookRun(path, submission_id, assignment, notebook, reference, session, started, notes, kernel_start)
        run.submitted = copy.deepcopy(notebook)  # its saved outputs: what the student saw (the run replaces them)
        try:
            populate_workdir(session.workdir, path, assignment.given_files(), owner=session.owner)
            session.__enter__()
            run.harness = Harness(
                session,
                call_timeout_s=limits.call_timeout_s,
                token_price=self.models.token_price,
                lowest_token_price=self.models.lowest_token_price,
            )
            installed = run.harness.install(
                {"watch": list(assignment.rubric.watch), "onnxruntime": assignment.rubric.instrument_onnxruntime}
            )
            if not installed.ok:
                run.kernel_problem = (
                    f"The grader could not prepare your notebook's kernel: {installed.message or installed.exception}."
                )
            run.execution = session.cells.run(
                notebook,
                limits.cell_timeout_s,
                limits.notebook_timeout_s,
                limits.max_output_kib * 1024,
                after_first_cell=self.kernels.prepare_next if more_to_come else None,
            )
            if not session.alive:
                run.kernel_problem = f"The checks could not call your code: {session.dead_reason or 'the kernel stopped'}."
        except BaseException:
            self._end(run)
            raise
        return run

    def _check(self, run: NotebookRun) -> SubmissionResult:
        """Run the checks of a notebook that has run (in its kernel, still open), then stop the kernel."""
        try:
            assert run.harness is not None
            checks = self._run_checks(
                run.assignment,
                run.notebook,
                run.execution,
                run.harness if run.kernel_problem is None else None,
                run.reference,
                run.harness.environment,
                run.submission_id,
                run.kernel_problem,
                run.submitted,
            )
            environment = dict(run.harness.environment)
        finally:
            self._end(run)
        execution = run.execution
        return SubmissionResult(
            submission_id=run.submission_id,
            source=str(run.path),
            assignment=run.assignment.name,
            title=run.assignment.rubric.title,
            checks=tuple(checks),
            cell_problems=execution.problems if execution is not None else (),
            figures=tuple(displayed_figures(run.notebook)),
            notes=tuple(run.notes),
            warnings=tuple(recorded_elsewhere(run.reference, self.zoo)),
            sandbox_warning=self.sandbox.isolation.shortfall if self.sandbox is not None else "",
            sandbox_mode=self.sandbox.isolation.mode if self.sandbox is not None else "",
            kernel_start=run.kernel_start,
            duration_s=time.monotonic() - run.started,
            first_cell_s=None if execution is None or execution.first_cell_at is None else execution.first_cell_at - run.started,
            environment=environment,
            provenance=provenance(run.path, run.assignment, self.seed, self.zoo),
        )

    def _end(self, run: NotebookRun) -> None:
        """Stop a submission's kernel and remove its working folder (unless kept)."""
        run.session.close()
        if not self.settings.keep_workdirs:
            shutil.rmtree(run.session.workdir, ignore_errors=True)

    def _self_check_notes(self, assignment: Assignment, reference: ReferenceSide) -> list[str]:
        """What a student's self-check does not cover, and whether its recorded values fit this machine."""
        notes = []
        if self.settings.public_only:
            hidden = assignment.rubric.hidden_summary()
            if hidden.checks:
                notes.append(
                    f"This self-check runs the public checks only: your instructor will also run {hidden.checks} hidden "
                    f"check{'s' if hidden.checks != 1 else ''} worth {points_text(hidden.points)}, with inputs drawn at grading time."
                )
        if self.settings.targets:
            notes.append(f"Only the checks of {', '.join(self.settings.targets)} were run.")
        return notes

    def _run_checks(
        self,
        assignment: Assignment,
        notebook: Any,
        execution: ExecutionRecord | None,
        harness: Harness | None,
        reference: ReferenceSide,
        environment: Mapping[str, Any],
        submission_id: str,
        kernel_problem: str | None,
        submitted: Any = None,
    ) -> list[CheckResult]:
        memo: dict[str, Any] = {}
        results = []
        functions = ReferenceFunctions(reference)
        if harness is not None:
            harness.deadline = time.monotonic() + assignment.rubric.limits.checks_timeout_s
        for check in self._checks_to_run(assignment):
            kind = assignment.kinds[check.kind]
            context = CheckContext(
                rubric=assignment.rubric,
                check=check,
                notebook=notebook,
                submitted=submitted if submitted is not None else notebook,
                execution=execution,
                harness=harness,
                reference=functions,
                models=self.models,
                environment=environment,
                rng=random.Random(f"{self.seed}:{submission_id}:{check.id}"),
                memo=memo,
                kernel_problem=kernel_problem,
                seed_key=f"{self.seed}:{submission_id}",
            )
            started = time.monotonic()
            verdict = self._verdict(kind, context, assignment.params[check.id], environment)
            results.append(check_result(check, kind, verdict, time.monotonic() - started))
        if harness is not None:
            harness.release()
            results = [withheld_if_tampered(result, harness.tampered) for result in results]
        return results

    def _verdict(self, kind: CheckKind, context: CheckContext, params: Any, environment: Mapping[str, Any]) -> Verdict:
        check = context.check
        on_cuda = bool(environment.get("cuda_available"))
        if check.device == "cuda" and not on_cuda:
            return Verdict.skipped(f"This check needs a CUDA GPU, and this machine has none: {points_not_graded(check.points)}.")
        if check.device == "cpu" and on_cuda:
            return Verdict.skipped(
                f"This check grades CPU-only behaviour, and this machine has a GPU: {points_not_graded(check.points)}."
            )
        if kind.needs_kernel and context.harness is None:
            return Verdict.error(
                context.kernel_problem or "The notebook's kernel is not running, so this check could not call your code."
            )
        try:
            return kind.run(context, params)
        except StopCheck as stop:
            return stop.verdict
        except NotRecorded as missing:
            return Verdict.error(
                f"The self-check cannot judge this offline: the student kit holds no expected value for what your code "
                f"returned here ({missing}). Your instructor's grader will judge it; fix the other failed checks first."
            )
        except Exception as error:  # a bug in a check must not cost the other checks their results
            return Verdict.error(
                f"The grader itself failed in this check ({type(error).__name__}: {error}); your instructor has been told.",
                details=(traceback.format_exc(),),
                data={"grader_error": True},
            )

    # ---------------------------------------------------------------- helpers

    def _reference(self, assignment: Assignment) -> ReferenceSide:
        if assignment.name not in self._references:
            self._references[assignment.name] = assignment.reference_side(self.models, record=self.settings.record_reference)
        return self._references[assignment.name]

    def reference_side(self, assignment_name: str) -> ReferenceSide | None:
        """The reference side used for an assignment so far (with ``record_reference``, what it recorded)."""
        return self._references.get(assignment_name)

    def _checks_to_run(self, assignment: Assignment) -> list[CheckSpec]:
        checks = assignment.rubric.checks
        if self.settings.public_only:
            checks = [check for check in checks if check.visibility == "public"]
        if self.settings.targets:
            checks = [check for check in checks if check.target in self.settings.targets]
        return checks


@dataclasses.dataclass
class NotebookRun:
    """A submission whose notebook has run in its kernel (still open), its checks to come."""

    path: Path
    submission_id: str
    assignment: Assignment
    notebook: Any
    reference: ReferenceSide
    session: KernelSession
    started: float
    notes: list[str]
    kernel_start: str
    harness: Harness | None = None
    execution: ExecutionRecord | None = None
    kernel_problem: str | None = None
    submitted: Any = None  # the notebook as submitted, with the outputs the student saw


class Started:
    """A submission taken by :meth:`Grader.start`: its notebook has run, and :meth:`finish` runs its checks and gives
    its result (at once where it could not run). ``finish`` may run in another thread than ``start`` did."""

    def __init__(self, grader: Grader, ran: NotebookRun | SubmissionResult, student: str | None) -> None:
        self._grader = grader
        self._ran = ran
        self._student = student

    def finish(self) -> SubmissionResult:
        """Run the checks and stop the kernel; the submission's result (never raises for a bad submission)."""
        ran = self._ran
        if isinstance(ran, NotebookRun):
            ran = self._grader._guarded(
                lambda: self._grader._check(ran), ran.path, ran.assignment.name, ran.submission_id, ran.started
            )
            self._ran = ran
        return dataclasses.replace(ran, student=self._student) if self._student is not None else ran

    def abandon(self) -> None:
        """Stop the kernel and give up its checks (a run that stops), from the thread that ran the notebook while no
        other thread runs :meth:`finish`."""
        if isinstance(self._ran, NotebookRun):
            self._grader._end(self._ran)

    def stop_kernel(self) -> None:
        """Kill the kernel's processes, from any thread: a :meth:`finish` running in another thread then ends soon
        (its checks find the kernel gone), and what it gives is not a grade."""
        if isinstance(self._ran, NotebookRun):
            self._ran.session.kill()
