"""A worker runs the next notebook while earlier submissions are checked (grader/scale/overlap.py).

The first test grades real latency samples in real kernels with the overlap on, and records when each notebook ran
and when each submission was checked: the windows overlap, no more submissions are checked at once than asked, only
one notebook runs at a time, and every sample keeps exactly the verdicts its mistake earns (those of
test_samples_latency). The others drive the same class with a stand-in grader: what happens to results when a run
stops or a result cannot be sent (pure bookkeeping, no kernel).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from grader.grading.grader import Grader, Started
from grader.grading.settings import GradingSettings
from grader.reports.results import SubmissionResult
from grader.scale import runner
from grader.scale.overlap import Overlapped
from grader.scale.runner import RunConfig, Task
from tests.conftest import lost
from tests.test_samples_latency import MISTAKES

# A slow one first (its call that reads too long is tried again), then notebooks whose checks are quicker.
SAMPLES = ("mistake-timer-includes-tokenizing", "solution", "mistake-no-warmup", "starter", "mistake-precision-case")


@dataclass
class Windows:
    """When each submission's notebook ran (``start``) and when it was checked (``finish``), by the grader's clock."""

    ran: dict[str, tuple[float, float]] = field(default_factory=dict)
    checked: dict[str, tuple[float, float]] = field(default_factory=dict)
    threads: dict[str, set[str]] = field(default_factory=lambda: {"ran": set(), "checked": set()})

    def most_at_once(self, windows: dict[str, tuple[float, float]]) -> int:
        events = sorted([(start, 1) for start, _ in windows.values()] + [(end, -1) for _, end in windows.values()])
        most = current = 0
        for _, change in events:  # an end sorts before a start at the same instant
            current += change
            most = max(most, current)
        return most


@pytest.fixture
def windows(monkeypatch: pytest.MonkeyPatch) -> Windows:
    """Record the grader's two halves (the grader's own methods, wrapped: the kernels and checks are real)."""
    seen = Windows()
    start, finish = Grader.start, Started.finish

    def timed_start(self: Grader, path: Path, submission_id: str, *args: Any, **kwargs: Any) -> Started:
        began = time.monotonic()
        started = start(self, path, submission_id, *args, **kwargs)
        seen.ran[submission_id] = (began, time.monotonic())
        seen.threads["ran"].add(threading.current_thread().name)
        return started

    def timed_finish(self: Started) -> SubmissionResult:
        began = time.monotonic()
        result = finish(self)
        seen.checked[result.submission_id] = (began, time.monotonic())
        seen.threads["checked"].add(threading.current_thread().name)
        return result

    monkeypatch.setattr(Grader, "start", timed_start)
    monkeypatch.setattr(Started, "finish", timed_finish)
    return seen


def test_the_next_notebook_runs_while_earlier_ones_are_checked(grader: Grader, root: Path, windows: Windows) -> None:
    delivered: list[SubmissionResult] = []
    with Overlapped(grader, lambda task, result: delivered.append(result), "here", checking=2) as overlapped:
        for index, name in enumerate(SAMPLES):
            path = root / "submissions" / "latency" / f"{name}.ipynb"
            overlapped.grade(Task(index, name, str(path)), more_to_come=index < len(SAMPLES) - 1)
    assert sorted(result.submission_id for result in delivered) == sorted(SAMPLES)
    assert {result.node for result in delivered} == {"here"}
    # The verdicts are those of the samples graded one at a time (test_samples_latency).
    by_name = {result.submission_id: result for result in delivered}
    assert lost(by_name["solution"]) == set()
    assert by_name["starter"].score == 0
    for name in SAMPLES:
        if name in MISTAKES:
            assert lost(by_name[name]) == MISTAKES[name][0], name
    # Overlapped: a notebook ran while an earlier submission was being checked (the first one's checks alone take
    # seconds: its timer reads too long, and each of its calls is tried three times).
    first_checked = windows.checked[SAMPLES[0]]
    assert windows.ran[SAMPLES[1]][0] < first_checked[1], "the next notebook waited for the first one's checks"
    # Bounded: one notebook at a time, in the calling thread; at most two submissions checked at once, elsewhere.
    assert windows.most_at_once(windows.ran) == 1
    assert windows.most_at_once(windows.checked) == 2
    assert windows.threads["ran"] == {threading.current_thread().name}
    assert threading.current_thread().name not in windows.threads["checked"]


# ----------------------------------------------------------------------------------------- stand-in grader
# What happens to results when a run stops: bookkeeping of the Overlapped class alone, with a grader whose
# "checks" wait until told to end.


@dataclass
class StandInStarted:
    """A submission whose "notebook has run": its checks end when ``release`` is set, or when its kernel is stopped."""

    submission_id: str
    release: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    stopped: bool = False
    abandoned: bool = False

    def finish(self) -> SubmissionResult:
        self.release.wait(30)
        self.finished.set()
        return SubmissionResult(self.submission_id, "", "latency", error="cut short" if self.stopped else None)

    def stop_kernel(self) -> None:
        self.stopped = True
        self.release.set()

    def abandon(self) -> None:
        self.abandoned = True


@dataclass
class StandInGrader:
    """Starts submissions (no kernel); ``interrupt_at`` raises KeyboardInterrupt while that one's notebook runs."""

    interrupt_at: str | None = None
    started: dict[str, StandInStarted] = field(default_factory=dict)

    def start(self, path: Path, submission_id: str, *args: Any) -> StandInStarted:
        if submission_id == self.interrupt_at:
            raise KeyboardInterrupt
        self.started[submission_id] = StandInStarted(submission_id)
        return self.started[submission_id]


def tasks(*names: str) -> list[Task]:
    return [Task(index, name, f"/nowhere/{name}.ipynb") for index, name in enumerate(names)]


def test_a_run_stopped_mid_notebook_keeps_what_was_checked_and_drops_what_was_cut_short() -> None:
    grader = StandInGrader(interrupt_at="c")
    delivered: list[str] = []
    with (
        pytest.raises(KeyboardInterrupt),
        Overlapped(grader, lambda task, result: delivered.append(result.submission_id), "here", 2) as overlapped,
    ):
        overlapped.grade(tasks("a")[0], True)
        overlapped.grade(tasks("a", "b")[1], True)
        grader.started["a"].release.set()  # a's checks end; b's are still running when c's notebook is interrupted
        for _ in range(3000):  # (a loaded machine may take a while to run the checks thread)
            if delivered:
                break
            time.sleep(0.01)
        overlapped.grade(tasks("a", "b", "c")[2], False)
    assert delivered == ["a"]
    assert grader.started["b"].stopped  # its kernel was stopped, and its cut-short checks gave no result


def test_a_result_that_cannot_be_sent_is_sent_as_an_internal_error() -> None:
    grader = StandInGrader()
    sent: list[SubmissionResult] = []

    def deliver(task: Task, result: SubmissionResult) -> None:
        if result.error is None:
            raise ValueError("cannot encode this result")
        sent.append(result)

    with Overlapped(grader, deliver, "here", 2) as overlapped:
        overlapped.grade(tasks("a")[0], False)
        grader.started["a"].release.set()
    (result,) = sent
    assert result.internal_error and "its result could not be sent (ValueError: cannot encode this result)" in str(result.error)


def test_a_checks_thread_that_fails_ends_the_worker_loop() -> None:
    """What even the internal-error result could not be sent: the worker's loop learns it at its next look
    (``check``), and stops, as it would have if the checks had run in its own thread."""
    grader = StandInGrader()

    def deliver(task: Task, result: SubmissionResult) -> None:
        raise BrokenPipeError("the run's main process is gone")

    with pytest.raises(BrokenPipeError), Overlapped(grader, deliver, "here", 2) as overlapped:
        overlapped.grade(tasks("a")[0], False)
        grader.started["a"].release.set()
        for _ in range(300):
            overlapped.check()
            time.sleep(0.01)


def test_one_at_a_time_checks_each_submission_before_the_next_notebook() -> None:
    grader = StandInGrader()
    order: list[str] = []
    original = grader.start

    def start(path: Path, submission_id: str, *args: Any) -> StandInStarted:
        order.append(f"run {submission_id}")
        started = original(path, submission_id, *args)
        started.release.set()
        return started

    grader.start = start  # type: ignore[method-assign]
    with Overlapped(grader, lambda task, result: order.append(f"checked {result.submission_id}"), "here", 0) as overlapped:
        for task in tasks("a", "b"):
            overlapped.grade(task, True)
    assert order == ["run a", "checked a", "run b", "checked b"]


def test_a_run_in_one_process_that_is_interrupted_yields_what_was_checked_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """`grade --workers 1`: results are handed on as the run goes; one whose checks end while the next notebook runs,
    when that notebook is interrupted (Ctrl-C), is still handed on (and written) before the run stops."""
    grader = StandInGrader()

    class Closing:
        def __enter__(self) -> StandInGrader:
            return grader

        def __exit__(self, *exc: object) -> None:
            pass

    original = grader.start

    def start(path: Path, submission_id: str, *args: Any) -> StandInStarted:
        if submission_id == "b":  # a's checks end while b's notebook runs, then b is interrupted
            grader.started["a"].release.set()
            assert grader.started["a"].finished.wait(30)
            time.sleep(0.5)  # (its result is handed on right after)
            raise KeyboardInterrupt
        return original(path, submission_id, *args)

    grader.start = start  # type: ignore[method-assign]
    monkeypatch.setattr(runner, "build_grader", lambda config: Closing())
    config = RunConfig("/nowhere", None, GradingSettings(checking=2))
    handed_on: list[str] = []
    results: Iterator[SubmissionResult] = runner._grade_here(tasks("a", "b", "c"), config)
    with pytest.raises(KeyboardInterrupt):
        for result in results:
            handed_on.append(result.submission_id)
    assert handed_on == ["a"]
