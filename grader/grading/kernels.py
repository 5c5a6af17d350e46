"""A run's kernels: their environment, how they are isolated and limited (the sandbox policy, probed once), what
they see of this machine, and the kernel template a run's workers share."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grader as grader_package
from grader.errors import GraderError
from grader.grading.course import Course
from grader.grading.rubric import Limits
from grader.grading.settings import GradingSettings
from grader.kernel.sandbox import KernelView, SandboxPolicy, kernel_env, kernel_view, probe_isolation
from grader.kernel.supply import why_launched
from grader.kernel.templates import TemplateAddress, start_template
from grader.student.notebook_check import GRADING_KERNEL_ENV
from grader.zoo import ModelZoo

# OpenMP's idle threads (torch's, MKL's) sleep rather than spin, in kernels and in the grader (grader.scale.runner.share_cpus):
# a grader shares its CPUs with other workers' kernels, and a spinning thread takes a CPU from them. Measured on 2 CPUs
# with one other busy process, a greedy generate step of the tiny GPT-2 on 2 threads: 9.4 ms of CPU (7.4 ms of wall
# time) spinning, 2.1 ms (2.1 ms) sleeping. An instructor's own OMP_WAIT_POLICY is kept.
OPENMP_WAIT_POLICY = "PASSIVE"


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
    if settings.sandbox and os.environ.get("PYTHONPATH"):
        # Packages installed with `pip install --target` (ipykernel among them): the kernel runs this Python and needs
        # them; the launcher keeps only the entries the kernel can see (launcher.keep_visible_import_path). Not for a
        # self-check, whose kernel runs unsandboxed on the student's own Python.
        extra["PYTHONPATH"] = os.environ["PYTHONPATH"]
    if zoo is None:  # real models: the kernel may need the grader's Hugging Face settings
        extra.update({name: value for name, value in os.environ.items() if name.startswith(("HF_", "TRANSFORMERS_"))})
    return kernel_env(os.environ, extra)


def sandbox_policy(course: Course, zoo: ModelZoo | None, settings: GradingSettings) -> SandboxPolicy:
    """How a run's kernels are isolated (probed on this machine) and limited."""
    zoo_dir = str(zoo.cache_dir) if zoo is not None else None
    view = kernel_view_for(course.root, settings.hidden_paths)
    limits = all_limits(course)
    return SandboxPolicy(
        isolation=probe_isolation(zoo_dir, view, asked_none=settings.no_sandbox, required=settings.sandbox_required),
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
