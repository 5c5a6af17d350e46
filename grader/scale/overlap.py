"""A grader's submissions one after another, overlapped: the next notebook runs while earlier ones are checked.

A submission's checks spend much of their time waiting on its kernel: the pauses of timed calls (a paced call sleeps a
quarter of a second at each tokenizer call and warm-up, and a call that reads too long is tried up to three times),
answers to come back. Measured on the latency samples (20 notebooks, 2 workers on 2 CPUs, 2026-11-27), the CPUs were
idle 40 % of a run that checked each submission before running the next notebook, and the checks took three times as
long as the notebooks. So a worker checks up to ``checking`` submissions at once, each in a thread of its own, while
the next notebook runs in its own kernel: with the default of two, a worker holds four kernels at most (two checked,
one running, the warm next one). In two benchmark runs, two workers took 31.1 s and 29.8 s against 40.5 s and 41.5 s
one at a time (benchmarks/throughput.py, README "Performance"); with one check at a time (one thread), the longer
checks still left the CPUs idle (about 43 s).

What a submission is graded with does not change: its kernel, its seed-derived hidden inputs, its checks, its result
(the same verdicts, measured on the samples); only what else shares the CPUs while its timed calls run, which the
timing checks are made to bear (they judge a call by what the instrumentation measured of that very call, and try a
reading that is too long again). ``checking=0`` (the command line's ``--one-at-a-time``) checks each submission before
the next one's notebook starts.

Kernels are started only from the thread that calls :meth:`Overlapped.grade`, the one that runs the notebooks (a
launched kernel's launcher is told to die with the thread that started it: a thread that ended would take the kernel
with it); each kernel's messages go through an event loop of its own (``KernelSession.run``), so a submission's checks
can go on in another thread than the one its notebook ran in.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from grader.scale.runner import Task, graded, start_task

if TYPE_CHECKING:
    from grader.grading.grader import Started
    from grader.reports.results import SubmissionResult

Deliver = Callable[["Task", "SubmissionResult"], None]


class Overlapped:
    """Grades tasks with one grader, handing each result to ``deliver`` (from a checks thread) the moment it is ready:
    up to ``checking`` submissions are checked at once while the next notebook runs (0: each is checked here, before
    the next notebook starts). A context manager, whose exit waits for the last checks (or, leaving on an exception,
    stops them: a submission whose checks were cut short gets no result, as if the run had stopped before it)."""

    def __init__(self, grader: Any, deliver: Deliver, node: str, checking: int) -> None:
        self.grader = grader
        self.deliver = deliver
        self.node = node
        self.checking = checking
        self._checks = ThreadPoolExecutor(max_workers=checking, thread_name_prefix="grader-checks") if checking else None
        self._pending: dict[Future[None], Started] = {}
        self._stopping = threading.Event()

    def grade(self, task: Task, more_to_come: bool, path: Path | None = None) -> None:
        """Run ``task``'s notebook (``path``: where it is here, default its own path), then have it checked: in a
        checks thread once one is free (the earlier submissions' checks run meanwhile), or here."""
        started = start_task(self.grader, task, more_to_come, path)
        if self._checks is None:
            self._finish(task, started)
            return
        try:
            self._wait(self.checking - 1)
        except BaseException:
            started.abandon()
            raise
        self._pending[self._checks.submit(self._finish, task, started)] = started

    def check(self) -> None:
        """Forget the submissions whose checks have ended, raising what a checks thread raised (a result that could not
        be delivered even as an internal error: the caller should stop, as it would have in that thread)."""
        for future in [future for future in self._pending if future.done()]:
            del self._pending[future]
            future.result()

    def _wait(self, at_most: int) -> None:
        """Wait until at most ``at_most`` submissions are being checked."""
        self.check()
        while len(self._pending) > at_most:
            concurrent.futures.wait(self._pending, return_when=concurrent.futures.FIRST_COMPLETED)
            self.check()

    def _finish(self, task: Task, started: Started) -> None:
        result = started.finish()
        if self._stopping.is_set():
            return
        try:
            self.deliver(task, graded(task, result, self.node))
        except Exception as error:  # (a result that cannot be sent) the submission is still told of
            self.deliver(
                task, task.failed(f"its result could not be sent ({type(error).__name__}: {error})", internal_error=True)
            )

    def __enter__(self) -> Overlapped:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if exc_type is not None:
                self._stopping.set()
                for started in self._pending.values():
                    started.stop_kernel()  # its checks end soon, and their result is not delivered
            self._wait(0)
        finally:
            if self._checks is not None:
                self._checks.shutdown(wait=True)
