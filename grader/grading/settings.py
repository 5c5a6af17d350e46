"""How a run grades (its settings): shared by the grader, the run's kernels and its workers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GradingSettings:
    """How a run grades: which models, which seed for hidden inputs."""

    real_models: bool = False
    seed: int | None = None  # None: a fresh random seed per run (recorded in each result)
    keep_workdirs: bool = False
    warm_kernels: bool = True  # launch the next submission's kernel while one is graded
    fork_kernels: bool = True  # fork kernels from a pre-imported template where the sandbox allows it
    checking: int = 2  # submissions a worker checks at once while its next notebook runs (0: none; grader.scale.overlap)
    kernel_threads: int | None = None  # torch/OpenMP threads per kernel (None: the library's default)
    hidden_paths: tuple[str, ...] = ()  # hidden from kernels besides the course's files: output, submissions
    public_only: bool = False  # a student's self-check: hidden checks are counted, not run
    targets: tuple[str, ...] = ()  # run only the checks of these functions or variables (empty: all)
    record_reference: bool = False  # keep the reference side's results (for a student kit)
    sandbox: bool = True  # isolate kernels (a student's self-check runs their own code as them, on any OS)
    # Asked by name to grade without the sandbox (`grade --no-sandbox`, GRADER_NO_SANDBOX=1): no trial, every result
    # says so. Otherwise a sandbox that cannot start stops the run, unless ``sandbox_required`` is off (Gradescope's
    # per-submission container, which may lack the capability: it grades unsandboxed and says so in the result).
    no_sandbox: bool = False
    sandbox_required: bool = True
