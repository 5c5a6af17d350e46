"""Grade one submission: execute it, call its functions, judge them under the rubric.

Data flows one way: the notebook is read and recognised, run in a fresh kernel with the
runtime installed first, then each rubric check runs (asking the kernel for values and
comparing them with the reference in this process), and the verdicts become a
:class:`~grader.reports.results.SubmissionResult`. Every submission gets a result, whatever happens.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import random
import secrets
import shutil
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grader as grader_package
from grader import __version__
from grader.checks import CheckContext, CheckKind, StopCheck, Verdict
from grader.checks.base import tampered_verdict
from grader.discover.notebook import Identification, identify_assignment, read_notebook
from grader.errors import GraderError, KernelError
from grader.grading.course import Assignment, Course
from grader.grading.reference import ReferenceModels
from grader.grading.replay import NotRecorded, ReferenceFunctions, ReferenceSide
from grader.grading.rubric import CheckSpec, Limits
from grader.kernel.harness import Harness
from grader.kernel.sandbox import (
    KERNEL_START_PREFIX,
    KernelView,
    SandboxPolicy,
    kernel_env,
    kernel_start_text,
    kernel_view,
    probe_isolation,
)
from grader.kernel.session import ExecutionRecord, KernelSupply, TemplateAddress, populate_workdir, start_template, why_launched
from grader.reports.results import CheckResult, Figure, SubmissionResult
from grader.student.notebook_check import GRADING_KERNEL_ENV
from grader.zoo import ModelZoo

INTERNAL_ERROR = "internal grader error"  # how such a result reads; its internal_error field makes the next run regrade it
MAX_FIGURES = 24
MAX_FIGURE_BYTES = 3 * 1024 * 1024


# OpenMP's idle threads (torch's, MKL's) sleep rather than spin, in kernels and in the grader (grader.scale.runner.share_cpus):
# a grader shares its CPUs with other workers' kernels, and a spinning thread takes a CPU from them. Measured on 2 CPUs
# with one other busy process, a greedy generate step of the tiny GPT-2 on 2 threads: 9.4 ms of CPU (7.4 ms of wall
# time) spinning, 2.1 ms (2.1 ms) sleeping. An instructor's own OMP_WAIT_POLICY is kept.
OPENMP_WAIT_POLICY = "PASSIVE"


@dataclass(frozen=True)
class GradingSettings:
    """How a run grades: which models, which seed for hidden inputs."""

    real_models: bool = False
    seed: int | None = None  # None: a fresh random seed per run (recorded in each result)
    keep_workdirs: bool = False
    warm_kernels: bool = True  # launch the next submission's kernel while one is graded
    fork_kernels: bool = True  # fork kernels from a pre-imported template where the sandbox allows it
    kernel_threads: int | None = None  # torch/OpenMP threads per kernel (None: the library's default)
    hidden_paths: tuple[str, ...] = ()  # hidden from kernels besides the course's files: output, submissions
    public_only: bool = False  # a student's self-check: hidden checks are counted, not run
    targets: tuple[str, ...] = ()  # run only the checks of these functions or variables (empty: all)
    record_reference: bool = False  # keep the reference side's results (for a student kit)
    sandbox: bool = True  # isolate kernels (a student's self-check runs their own code as them, on any OS)


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

    # ---------------------------------------------------------------- identification

    def identify(self, notebook: Any) -> Identification:
        """The assignment a notebook belongs to (metadata first, then the names it defines)."""
        candidates = [
            (assignment.name, [*assignment.rubric.identify.functions, *assignment.rubric.identify.variables])
            for assignment in self.course.all()
        ]
        return identify_assignment(notebook, candidates)

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
        started = time.monotonic()
        try:
            result = self._grade(path, submission_id, assignment_name, started, more_to_come)
        except KernelError as error:
            result = SubmissionResult.without_results(
                submission_id,
                str(path),
                f"{INTERNAL_ERROR}: {error.show()}",
                assignment_name,
                internal_error=True,
                duration_s=time.monotonic() - started,
                provenance=self._provenance(path, None),
            )
        except GraderError as error:
            result = SubmissionResult.without_results(
                submission_id,
                str(path),
                error.show(),
                assignment_name,
                duration_s=time.monotonic() - started,
                provenance=self._provenance(path, None),
            )
        except Exception as error:  # a grader bug must still give this submission a result
            message = f"{INTERNAL_ERROR} ({type(error).__name__}: {error}); please report it with this notebook"
            result = SubmissionResult.without_results(
                submission_id,
                str(path),
                message,
                assignment_name,
                internal_error=True,
                traceback=traceback.format_exc(),
                duration_s=time.monotonic() - started,
                provenance=self._provenance(path, None),
            )
        return dataclasses.replace(result, student=student) if student is not None else result

    def _grade(
        self, path: Path, submission_id: str, assignment_name: str | None, started: float, more_to_come: bool
    ) -> SubmissionResult:
        notebook = read_notebook(path, max_bytes=self._max_notebook_bytes(assignment_name))
        notes = []
        if assignment_name is None:
            identification = self.identify(notebook)
            assignment_name = identification.assignment
            notes.append(f"Graded as {assignment_name!r}: {identification.how}.")
        notes.append(self.sandbox.isolation.summary if self.sandbox is not None else UNSANDBOXED_NOTE)
        assignment = self.course.assignment(assignment_name)
        reference = self._reference(assignment)
        notes += self._self_check_notes(assignment, reference)
        sandbox_warning = self.sandbox.isolation.shortfall if self.sandbox is not None else ""
        if self.zoo is not None:
            self.zoo.verify(assignment.rubric.models)
        limits = assignment.rubric.limits
        session = self.kernels.take(warm_next=more_to_come)
        kernel_start = ""
        if self.sandbox is not None:
            kernel_start = kernel_start_text(session.mode, self.kernels.why_launched)
            notes.append(f"{KERNEL_START_PREFIX}{kernel_start}")
        session.startup_timeout = limits.startup_timeout_s
        session.limit_memory(limits.memory_mib * 1024**2)
        workdir = session.workdir
        execution: ExecutionRecord | None = None
        try:
            populate_workdir(workdir, path, assignment.given_files(), owner=session.owner)
            with session:
                harness = Harness(
                    session,
                    call_timeout_s=limits.call_timeout_s,
                    token_price=self.models.token_price,
                    lowest_token_price=self.models.lowest_token_price,
                )
                installed = harness.install()
                kernel_problem = None
                if not installed.ok:
                    kernel_problem = (
                        f"The grader could not prepare your notebook's kernel: {installed.message or installed.exception}."
                    )
                execution = session.run_notebook(
                    notebook, limits.cell_timeout_s, limits.notebook_timeout_s, limits.max_output_kib * 1024
                )
                if not session.alive:
                    kernel_problem = f"The checks could not call your code: {session.dead_reason or 'the kernel stopped'}."
                checks = self._run_checks(
                    assignment,
                    notebook,
                    execution,
                    harness if kernel_problem is None else None,
                    reference,
                    harness.environment,
                    submission_id,
                    kernel_problem,
                )
                environment = dict(harness.environment)
        finally:
            session.close()  # already closed unless populating the working folder failed
            if not self.settings.keep_workdirs:
                shutil.rmtree(workdir, ignore_errors=True)
        return SubmissionResult(
            submission_id=submission_id,
            source=str(path),
            assignment=assignment.name,
            title=assignment.rubric.title,
            checks=tuple(checks),
            cell_problems=execution.problems if execution is not None else (),
            figures=tuple(_figures(notebook)),
            notes=tuple(notes),
            warnings=tuple(self._kit_warnings(reference)),
            sandbox_warning=sandbox_warning,
            kernel_start=kernel_start,
            duration_s=time.monotonic() - started,
            environment=environment,
            provenance=self._provenance(path, assignment),
        )

    def _self_check_notes(self, assignment: Assignment, reference: ReferenceSide) -> list[str]:
        """What a student's self-check does not cover, and whether its recorded values fit this machine."""
        notes = []
        if self.settings.public_only:
            hidden = assignment.rubric.hidden_summary()
            if hidden.checks:
                notes.append(
                    f"This self-check runs the public checks only: your instructor will also run {hidden.checks} hidden "
                    f"check{'s' if hidden.checks != 1 else ''} worth {_points(hidden.points)}, with inputs drawn at grading time."
                )
        if self.settings.targets:
            notes.append(f"Only the checks of {', '.join(self.settings.targets)} were run.")
        return notes

    def _kit_warnings(self, reference: ReferenceSide) -> list[str]:
        """Whether a student kit's recorded values were recorded on other tiny models than this machine builds."""
        recording = reference.recording
        if reference.replaying and recording is not None and self.zoo is not None and recording.zoo != self.zoo.key:
            versions = ", ".join(f"{name} {version}" for name, version in sorted(recording.versions.items()))
            return [
                f"Warning: the expected values of this kit were recorded on tiny models built with {versions or 'other versions'} "
                f"(zoo {recording.zoo}), but this machine builds different ones (zoo {self.zoo.key}); values compared with "
                "the reference may be off. Install the versions in the kit's constraints.txt."
            ]
        return []

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
    ) -> list[CheckResult]:
        memo: dict[str, Any] = {}
        results = []
        functions = ReferenceFunctions(reference)
        for check in self._checks_to_run(assignment):
            kind = assignment.kinds[check.kind]
            context = CheckContext(
                rubric=assignment.rubric,
                check=check,
                notebook=notebook,
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
            results.append(_check_result(check, kind, verdict, time.monotonic() - started))
        if harness is not None:
            harness.release()
            results = [_withheld_if_tampered(result, harness.tampered) for result in results]
        return results

    def _verdict(self, kind: CheckKind, context: CheckContext, params: Any, environment: Mapping[str, Any]) -> Verdict:
        check = context.check
        on_cuda = bool(environment.get("cuda_available"))
        if check.device == "cuda" and not on_cuda:
            return Verdict.skipped(
                f"This check needs a CUDA GPU, and the grading machine has none: {_points_not_graded(check.points)}."
            )
        if check.device == "cpu" and on_cuda:
            return Verdict.skipped(
                f"This check grades CPU-only behaviour and the grading machine has a GPU: {_points_not_graded(check.points)}."
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

    def _max_notebook_bytes(self, assignment_name: str | None) -> int:
        """The size limit for a notebook: its assignment's, or the largest any assignment allows."""
        if assignment_name is not None:
            with contextlib.suppress(GraderError):
                return self.course.assignment(assignment_name).rubric.limits.max_notebook_mib * 1024**2
        return max(limits.max_notebook_mib for limits in all_limits(self.course)) * 1024**2

    def _provenance(self, path: Path, assignment: Assignment | None) -> dict[str, Any]:
        provenance: dict[str, Any] = {
            "grader_version": __version__,
            "seed": self.seed,
            "models": "real" if self.zoo is None else "tiny-zoo",
        }
        with contextlib.suppress(OSError):
            provenance["notebook_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        if assignment is not None:
            provenance["rubric_sha256"] = hashlib.sha256(assignment.rubric_path.read_bytes()).hexdigest()
        if self.zoo is not None:
            provenance["zoo"] = self.zoo.key
        return provenance


def all_limits(course: Course) -> list[Limits]:
    """The limits of every assignment of the course that has a readable rubric."""
    limits = []
    for name in course.names():
        with contextlib.suppress(GraderError):
            limits.append(course.assignment(name).rubric.limits)
    return limits or [Limits()]


def kernel_environment(zoo: ModelZoo | None, settings: GradingSettings) -> dict[str, str]:
    """The kernels' environment: an allow-list of the grader's, plus what a kernel needs."""
    extra = dict(zoo.kernel_env()) if zoo is not None else {}
    extra["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    extra["PYTHONUNBUFFERED"] = "1"
    extra[GRADING_KERNEL_ENV] = "1"
    if settings.kernel_threads:
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            extra[name] = str(settings.kernel_threads)
    extra["OMP_WAIT_POLICY"] = os.environ.get("OMP_WAIT_POLICY", OPENMP_WAIT_POLICY)
    if zoo is None:  # real models: the kernel may need the grader's Hugging Face settings
        extra.update({name: value for name, value in os.environ.items() if name.startswith(("HF_", "TRANSFORMERS_"))})
    return kernel_env(os.environ, extra)


def sandbox_policy(course: Course, zoo: ModelZoo | None, settings: GradingSettings) -> SandboxPolicy:
    """How a run's kernels are isolated (probed on this machine) and limited."""
    zoo_dir = str(zoo.cache_dir) if zoo is not None else None
    view = kernel_view_for(course.root, settings.hidden_paths)
    limits = all_limits(course)
    return SandboxPolicy(
        isolation=probe_isolation(zoo_dir, view),
        visible=view.visible,
        masks=view.masks,
        zoo_dir=zoo_dir,
        memory_bytes=max(item.memory_mib for item in limits) * 1024**2,
        max_processes=max(item.max_processes for item in limits),
        max_file_bytes=max(item.max_file_mib for item in limits) * 1024**2,
    )


@dataclass(frozen=True)
class SharedKernels:
    """What a run's workers share, set up once by its main process: the sandbox (probed once) and the kernel
    template every worker forks its kernels from (None: each worker launches its kernels, see ``why_launched``)."""

    sandbox: SandboxPolicy | None
    template: TemplateAddress | None


@contextlib.contextmanager
def shared_kernels(course: Course, zoo: ModelZoo | None, settings: GradingSettings) -> Iterator[SharedKernels]:
    """The sandbox and, where kernels are forked, one kernel template for all of a run's workers (one template
    instead of one per worker: each costs about 4 s of CPU to import torch and transformers); stopped on exit."""
    sandbox = sandbox_policy(course, zoo, settings) if settings.sandbox else None
    template = None
    if sandbox is not None and why_launched(sandbox, settings.fork_kernels) is None:
        template = start_template(kernel_environment(zoo, settings), sandbox)
    try:
        yield SharedKernels(sandbox, template.address if template is not None else None)
    finally:
        if template is not None:
            template.close()


def kernel_view_for(course_root: Path, hidden_paths: tuple[str, ...] = ()) -> KernelView:
    """What a kernel of this course sees: nothing of the course, the grader's source, the run's
    output and submissions (``hidden_paths``), the grader's home or working folder.

    Raises :class:`~grader.kernel.sandbox.SandboxError` when one of them cannot be hidden.
    """
    package = Path(grader_package.__file__).resolve().parent
    checkout = [package.parent] if (package.parent / "pyproject.toml").exists() else []
    strict = [course_root, *checkout, *(Path(path) for path in hidden_paths)]
    soft = [Path.home(), Path.cwd()]
    return kernel_view(strict, [path for path in soft if path != Path("/")], package=package)


def _points_not_graded(points: float) -> str:
    return f"its {_points(points)} {'is' if points == 1 else 'are'} not graded here"


def _points(points: float) -> str:
    return f"{points:g} point{'' if points == 1 else 's'}"


def _check_result(check: CheckSpec, kind: CheckKind, verdict: Verdict, duration_s: float) -> CheckResult:
    if verdict.outcome in ("passed", "failed"):
        fraction = verdict.fraction if verdict.fraction is not None else (1.0 if verdict.outcome == "passed" else 0.0)
    else:
        fraction = 0.0
    return CheckResult(
        check_id=check.id,
        name=check.name,
        target=check.target,
        kind=check.kind,
        visibility=check.visibility,
        device=check.device,
        points=check.points,
        score=round(check.points * max(0.0, min(1.0, fraction)), 4),
        outcome=verdict.outcome,
        message=verdict.message,
        graded_by=kind.graded_by,
        expected=verdict.expected,
        found=verdict.found,
        details=verdict.details,
        hint=check.hint,
        docs=tuple(check.docs),
        answer=verdict.answer,
        data=dict(verdict.data),
        duration_s=duration_s,
        flags=tuple(verdict.flags),
        tampered=verdict.tampered,
    )


def _withheld_if_tampered(result: CheckResult, tampered: Mapping[str, str]) -> CheckResult:
    """A check of a function whose records were tampered with, in any of its calls, awards nothing: failed, flagged."""
    why = tampered.get(result.target)
    if why is None or result.tampered or not result.automatic:
        return result
    verdict = tampered_verdict(result.target, why)
    return dataclasses.replace(
        result,
        outcome=verdict.outcome,
        score=0.0,
        message=verdict.message,
        expected=verdict.expected,
        found=verdict.found,
        tampered=why,
    )


def _figures(notebook: Any) -> list[Figure]:
    """The images the executed notebook displayed (PNG and SVG), in order, within limits."""
    figures: list[Figure] = []
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = output.get("data", {})
            for mime in ("image/png", "image/svg+xml"):
                if mime in data and len(figures) < MAX_FIGURES:
                    payload = data[mime]
                    text = "".join(payload) if isinstance(payload, list) else str(payload)
                    if len(text) <= MAX_FIGURE_BYTES:
                        figures.append(Figure(index, mime, text.replace("\n", "") if mime == "image/png" else text))
                    break
    return figures
