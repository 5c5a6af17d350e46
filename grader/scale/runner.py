"""Grade many submissions: in this process, or in parallel worker processes.

Each worker is a process with its own :class:`~grader.grading.grader.Grader` (reference models loaded
once) that keeps one kernel warm for its next submission and runs its next notebook while it checks earlier ones
(:mod:`grader.scale.overlap`). Workers take tasks from a shared
queue and send each result back as JSON as soon as it is graded; this process alone writes
files and the gradebook, one result at a time, so a run killed at any point keeps every result
already reported. Hidden inputs derive from the run's seed and the submission id, never from
the worker, so one worker and many give the same results.
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import multiprocessing
import os
import queue
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.grading.grader import INTERNAL_ERROR
from grader.grading.kernels import OPENMP_WAIT_POLICY, SharedKernels
from grader.grading.settings import GradingSettings
from grader.reports.results import SubmissionResult, result_from_json, result_to_json

# A worker and its kernels (two being checked, one running its notebook, the warm next one), with the tiny models:
# about 0.8 GiB of PSS at its peak on the latency samples (benchmarks/throughput.py), with room to spare.
WORKER_MEMORY_BYTES = 1536 * 1024**2
# What every worker imports (seconds of CPU each): a fork server imports it once and forks each worker from
# itself, where there is one (POSIX); elsewhere each worker is a fresh interpreter that imports it again.
WORKER_PRELOAD = [
    "grader.scale.worker_server",
    "torch",
    "transformers",
    "transformers.generation.utils",
    "transformers.modeling_utils",
    "grader.checks",
]


@dataclass(frozen=True)
class Task:
    """One submission to grade."""

    index: int
    submission_id: str
    path: str
    assignment: str | None = None
    student: str | None = None

    def failed(self, why: str, internal_error: bool = False) -> SubmissionResult:
        """This submission's result when it could not be graded (an internal error's the next run grades again)."""
        if internal_error:
            why = f"{INTERNAL_ERROR}: {why}; the next run grades it again"
        return SubmissionResult.without_results(
            self.submission_id, self.path, why, self.assignment, internal_error=internal_error, student=self.student
        )


@dataclass(frozen=True)
class RunConfig:
    """What a worker needs to build its grader (plain values: it crosses a process boundary)."""

    course_root: str
    cache_dir: str | None
    settings: GradingSettings
    shared: SharedKernels | None = None  # the run's sandbox and kernel template, for its workers


def share_cpus() -> None:
    """Have this process's OpenMP threads (torch's, MKL's) sleep when idle, unless the instructor set otherwise;
    before torch is imported (OpenMP reads it once). Kernels get the same setting in their environment."""
    os.environ.setdefault("OMP_WAIT_POLICY", OPENMP_WAIT_POLICY)


def available_cpus() -> int:
    """CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def default_workers(submissions: int, cpus: int | None = None, available_bytes: int | None = None) -> int:
    """As many workers as CPUs, memory and submissions allow (at least one)."""
    cpus = cpus or available_cpus()
    if available_bytes is None:
        import psutil

        available_bytes = int(psutil.virtual_memory().available)
    by_memory = max(1, available_bytes // WORKER_MEMORY_BYTES)
    return max(1, min(cpus, by_memory, submissions))


def kernel_threads(workers: int, cpus: int | None = None) -> int:
    """Threads for each kernel's torch, so that workers do not oversubscribe the CPUs."""
    return max(1, (cpus or available_cpus()) // max(1, workers))


def _course_and_zoo(config: RunConfig) -> tuple[Any, Any]:
    from grader.grading.course import Course
    from grader.zoo import ModelZoo

    zoo = None if config.settings.real_models else ModelZoo(Path(config.cache_dir) if config.cache_dir else None)
    if zoo is not None:
        zoo.ensure_built()
    return Course(Path(config.course_root)), zoo


def build_grader(config: RunConfig) -> Any:
    """A grader for ``config``'s course, zoo and settings (a context manager: closing it stops its kernels)."""
    from grader.grading.grader import Grader

    return Grader(*_course_and_zoo(config), config.settings, config.shared)


def grade_tasks(
    tasks: Sequence[Task], config: RunConfig, workers: int, ray: str | None = None, course: Any = None
) -> Iterator[SubmissionResult]:
    """Results of every task, in the order they finish: here, in ``workers`` local processes, or on the Ray cluster at
    ``ray`` (``workers`` then caps its actors, 0: no cap; ``course``: the run's course, to place each task)."""
    if not tasks:
        return
    if ray is not None:
        from grader.scale.cluster import grade_on_ray

        yield from grade_on_ray(tasks, config, ray, course, workers or None)
    elif workers <= 1:
        yield from _grade_here(tasks, config)
    else:
        yield from _grade_in_workers(tasks, config, workers)


def grade_task(grader: Any, task: Task, more_to_come: bool, node: str, path: Path | None = None) -> SubmissionResult:
    """One task's result, saying which ``node`` graded it; ``path``: where its notebook is here (default: the
    task's own path)."""
    return graded(task, start_task(grader, task, more_to_come, path).finish(), node)


def start_task(grader: Any, task: Task, more_to_come: bool, path: Path | None = None) -> Any:
    """Run one task's notebook (``path``: where it is here, default the task's own path): a
    :class:`~grader.grading.grader.Started`, whose ``finish()`` checks it."""
    return grader.start(path or Path(task.path), task.submission_id, task.assignment, task.student, more_to_come)


def graded(task: Task, result: SubmissionResult, node: str) -> SubmissionResult:
    """A task's result as a run reports it: its source as the task names it, and the ``node`` that graded it."""
    return dataclasses.replace(result, source=task.path, node=node)


def _grade_here(tasks: Sequence[Task], config: RunConfig) -> Iterator[SubmissionResult]:
    from grader.scale.overlap import Overlapped

    if config.settings.kernel_threads:
        import torch

        torch.set_num_threads(config.settings.kernel_threads)
    done: collections.deque[SubmissionResult] = collections.deque()  # filled by the checks' thread
    try:
        with (
            build_grader(config) as grader,
            Overlapped(
                grader, lambda task, result: done.append(result), socket.gethostname(), config.settings.checking
            ) as overlapped,
        ):
            for position, task in enumerate(tasks):
                overlapped.grade(task, position < len(tasks) - 1)
                while done:
                    yield done.popleft()
    except GeneratorExit:
        raise
    except BaseException:
        while done:  # checked before the run stopped (interrupted while the next notebook ran): kept
            yield done.popleft()
        raise
    while done:
        yield done.popleft()


def _worker(config: RunConfig, tasks: Any, results: Any, remaining: Any) -> None:
    """A worker process: grade tasks until the queue says stop or this run's main process is gone; each result is
    sent the moment its checks end (from the checks' thread, while the next notebook runs)."""
    die_with_parent()
    freeze_imports()
    import torch

    from grader.quiet import quiet_libraries
    from grader.scale.overlap import Overlapped

    if config.settings.kernel_threads:
        torch.set_num_threads(config.settings.kernel_threads)
    parent = multiprocessing.parent_process()
    pid = os.getpid()

    def deliver(task: Task, result: SubmissionResult) -> None:
        results.put(("done", pid, task.index, result_to_json(result)))

    with (
        quiet_libraries(),
        build_grader(config) as grader,
        Overlapped(grader, deliver, socket.gethostname(), config.settings.checking) as overlapped,
    ):
        while True:
            try:
                task = tasks.get(timeout=1.0)
            except queue.Empty:
                if parent is not None and not parent.is_alive():
                    return  # the run was killed: stop rather than grade for nobody
                overlapped.check()  # a result that could not be sent: this worker ends, and the run says so
                continue
            if task is None:
                return
            with remaining.get_lock():
                remaining.value -= 1
                more = remaining.value > 0
            results.put(("started", pid, task.index, None))
            overlapped.grade(task, more)


def freeze_imports() -> None:
    """Leave what this process has imported (torch, transformers: the fork server's preloads) out of every later
    garbage collection: it lives as long as the process, and walking it again costs a tenth of a second of CPU at
    each full collection."""
    gc.freeze()


def die_with_parent() -> None:
    """Have the operating system kill this process the moment its parent dies, however it ends (``kill -9``
    included): a worker's parent is the run's main process or the fork server (which dies with the main process,
    see :mod:`grader.scale.worker_server`); a worker waiting on a queue or a kernel would not notice. Its kernels'
    launchers then see their grader gone and kill them (see the launcher). Linux only (``prctl``)."""
    if sys.platform.startswith("linux"):
        from grader.kernel.launcher import die_with_parent as die_with_launcher_parent

        die_with_launcher_parent()


def _grade_in_workers(tasks: Sequence[Task], config: RunConfig, workers: int) -> Iterator[SubmissionResult]:
    from grader.grading.kernels import shared_kernels

    with shared_kernels(*_course_and_zoo(config), config.settings) as shared:
        yield from _grade_in_processes(tasks, dataclasses.replace(config, shared=shared), workers)


def _grade_in_processes(tasks: Sequence[Task], config: RunConfig, workers: int) -> Iterator[SubmissionResult]:
    context = _worker_context()
    task_queue = context.Queue()
    result_queue = context.Queue()
    remaining = context.Value("i", len(tasks))
    for task in tasks:
        task_queue.put(task)
    by_index = {task.index: task for task in tasks}
    processes: dict[int, Any] = {}

    def start_worker() -> None:
        process = context.Process(target=_worker, args=(config, task_queue, result_queue, remaining), daemon=True)
        process.start()
        processes[int(process.pid or 0)] = process

    for _ in range(min(workers, len(tasks))):
        start_worker()
    in_flight: dict[int, set[int]] = {}  # worker pid -> its tasks' indices (being checked, or running)
    done: set[int] = set()
    try:
        while len(done) < len(tasks):
            try:
                kind, pid, index, payload = result_queue.get(timeout=1.0)
            except queue.Empty:
                for pid, process in list(processes.items()):
                    if not process.is_alive():
                        del processes[pid]
                        for lost in sorted(in_flight.pop(pid, set()) - done):
                            done.add(lost)
                            yield _worker_died(by_index[lost], process.exitcode)
                        if len(done) + sum(map(len, in_flight.values())) < len(tasks):
                            start_worker()
                continue
            if kind == "started":
                in_flight.setdefault(pid, set()).add(index)
            elif index not in done:
                in_flight.get(pid, set()).discard(index)
                done.add(index)
                yield result_from_json(payload)
    finally:
        for _ in processes:
            task_queue.put(None)
        deadline = time.monotonic() + 30
        for process in processes.values():
            process.join(timeout=max(0.1, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()


def _worker_context() -> Any:
    """Where workers come from: on Linux, forked from a fork server that imported WORKER_PRELOAD (and started no
    thread), which dies with this process (grader.scale.worker_server, ``prctl``); elsewhere spawned afresh (macOS has a
    fork server too, but no ``prctl`` to tie it to the run, and forking after torch's import is unsafe there).
    Never forked from this process, whose threads and locks a child would copy."""
    if not sys.platform.startswith("linux") or "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(WORKER_PRELOAD)
    return context


def _worker_died(task: Task, exitcode: int | None) -> SubmissionResult:
    how = f"was killed by signal {-exitcode}" if exitcode is not None and exitcode < 0 else f"exited ({exitcode})"
    return task.failed(f"the worker process grading this submission {how}, perhaps out of memory", internal_error=True)
