"""How fast a class is graded: the grader against running the same notebooks bare.

    .venv/bin/python benchmarks/throughput.py [-n 20] [--workers N] [--assignment latency] [--ray]

Makes N copies of the sample submissions (each with one different byte, so nothing is reused)
and prints, in one run:

- bare: nbclient executing the same notebooks one after another, with nothing else (the baseline);
- `grade --workers 1`;
- `grade --workers N` (default: the CPUs), with the launch mode of its kernels (forked from a
  pre-imported template, or launched);
- `grade --workers N --one-at-a-time`: each worker checks a submission before it runs the next notebook (by default
  the next notebook runs while up to two earlier ones are checked, see grader/scale/overlap.py), to compare;
- `grade --workers N` with every kernel launched afresh (`GRADER_LAUNCH_KERNELS=1`), to compare;
- the median time from taking a submission to sending its first cell to the kernel, forked vs launched;
- an unchanged regrade of the same folder (everything reused from the gradebook);
- with ``--ray``: `grade --ray local --workers N`, the same notebooks on a Ray cluster of this machine alone (started
  by the run), against the local workers: what Ray's actors, its scheduling and sending each notebook cost per
  submission (needs the ``[ray]`` extra);
- peak memory of each worker (the worker, the kernels it checks and runs, and the warm next one), and of what its
  workers share;
- and the ratios the targets are stated in (README, "Performance").

Figures are wall-clock seconds on this machine at this moment: run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat
import psutil
from nbclient import NotebookClient

if TYPE_CHECKING:
    from grader.reports.results import SubmissionResult

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's grader (the one its `grade` runs use), not another installed copy


def make_copies(assignment: str, count: int, folder: Path) -> list[Path]:
    """``count`` notebooks cycling through the assignment's samples, each with a distinct byte."""
    samples = sorted((ROOT / "submissions" / assignment).glob("*.ipynb"))
    paths = []
    for index in range(count):
        notebook = json.loads(samples[index % len(samples)].read_text())
        notebook["metadata"]["benchmark_copy"] = index  # one different byte: nothing is reused
        path = folder / f"{samples[index % len(samples)].stem}-{index:03d}.ipynb"
        path.write_text(json.dumps(notebook))
        paths.append(path)
    return paths


def bare_execution(paths: list[Path], env: dict[str, str]) -> float:
    """Seconds for nbclient to run every notebook, one after another, in fresh kernels."""
    started = time.perf_counter()
    for path in paths:
        notebook = nbformat.read(path, as_version=4)
        workdir = Path(tempfile.mkdtemp(prefix="bench-bare-"))
        try:
            NotebookClient(notebook, timeout=600, kernel_name="python3", allow_errors=True).execute(cwd=str(workdir), env=env)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return time.perf_counter() - started


class WorkerMemory:
    """Peak memory of each worker of a run: the worker process, what it started (a kernel's client, a launched kernel)
    and the kernels forked for it from the run's kernel template (known by their own user, which the worker's client
    names), summed at each sample; and the peak of what the workers share (the main process, the template, the fork
    server), apart.

    Two sums per worker: RSS, which counts the pages of shared libraries (libtorch is mapped by the worker and each of
    its kernels) once per process, and PSS, which shares them out between the processes mapping them: the memory the
    worker really adds. The target is judged on PSS.
    """

    def __init__(self, pid: int, workers: int) -> None:
        self.pid = pid
        self.workers = workers
        self.peaks: dict[int, int] = {}
        self.rss_peaks: dict[int, int] = {}
        self.shared_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.5):  # reading smaps costs CPU: not too often
            try:
                self._sample()
            except psutil.Error:
                continue

    def _sample(self) -> None:
        root = psutil.Process(self.pid)
        processes = [root, *root.children(recursive=True)]
        commands = {process.pid: " ".join(process.cmdline()) for process in processes}
        # A worker: a child of the run's fork server (several workers), or the run's main process (one).
        servers = {process.pid for process in processes if process.ppid() == root.pid and "forkserver" in commands[process.pid]}
        workers = [process for process in processes if process.ppid() in servers] if self.workers > 1 else [root]
        counted: set[int] = set()
        for worker in workers:
            tree = [worker] if worker is root else [worker, *worker.children(recursive=True)]
            uids = {int(uid) for process in tree for uid in re.findall(r'"uid": (\d+)', commands.get(process.pid, ""))}
            kernels = [process for process in processes if process.uids().real in uids and process not in tree]
            watchers = [psutil.Process(kernel.ppid()) for kernel in kernels if kernel.ppid() in commands]
            members = {process.pid: process for process in [*tree, *kernels, *watchers]}
            if worker is root:  # one worker: the run's own process is the worker, its template is its own
                members.update({process.pid: process for process in processes})
            counted.update(members)
            pss = sum(process.memory_full_info().pss for process in members.values())
            rss = sum(process.memory_info().rss for process in members.values())
            self.peaks[worker.pid] = max(self.peaks.get(worker.pid, 0), pss)
            self.rss_peaks[worker.pid] = max(self.rss_peaks.get(worker.pid, 0), rss)
        shared = sum(process.memory_full_info().pss for process in processes if process.pid not in counted)
        self.shared_peak = max(self.shared_peak, shared)


def timed_grade(
    folder: Path, out: Path, workers: int, env: dict[str, str] | None = None, options: tuple[str, ...] = ()
) -> tuple[float, WorkerMemory]:
    """Seconds for `grade` on the folder, and the peak memory of each of its workers."""
    command = [sys.executable, "-m", "grader", str(folder), "--out", str(out), "--workers", str(workers), "--seed", "1", "-q"]
    command += options
    started = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}
    )
    with WorkerMemory(process.pid, workers) as memory:
        _, stderr = process.communicate()
    elapsed = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"grade failed ({process.returncode}):\n{stderr[-2000:]}")
    return elapsed, memory


def graded_results(out: Path) -> list[SubmissionResult]:
    """The run's results, as its gradebook holds them."""
    from grader.scale.batch import GRADEBOOK_NAME
    from grader.scale.gradebook import Gradebook

    with Gradebook(out / GRADEBOOK_NAME) as gradebook:
        return gradebook.results()


def launch_modes(results: list[SubmissionResult]) -> str:
    """How the run's kernels were started (forked from a template, or launched): the run's own notice."""
    from grader.kernel.sandbox import sandbox_notices

    return next((notice for notice in sandbox_notices(results) if notice.startswith("Kernels: ")), "no note")


def first_cell_median(results: list[SubmissionResult]) -> float:
    """The median of the run's seconds from taking a submission to sending its first cell to the kernel."""
    measured = [result.first_cell_s for result in results if result.first_cell_s is not None]
    if not measured:
        raise SystemExit("no result of the run says when its first cell ran")
    return statistics.median(measured)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=20, help="submissions to grade (default 20)")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)), help="workers of the parallel run")
    parser.add_argument("--assignment", default="latency", help="whose sample submissions to copy (default latency)")
    parser.add_argument("--ray", action="store_true", help="also grade on a Ray cluster of this machine (grade --ray local)")
    args = parser.parse_args()

    from grader.zoo import ModelZoo

    zoo = ModelZoo()
    zoo.ensure_built()
    env = {**os.environ, **zoo.kernel_env(), "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    with tempfile.TemporaryDirectory(prefix="bench-") as scratch:
        folder = Path(scratch) / "class"
        folder.mkdir()
        paths = make_copies(args.assignment, args.n, folder)
        print(f"{args.n} copies of submissions/{args.assignment}/ samples; {len(os.sched_getaffinity(0))} CPUs")
        bare = bare_execution(paths, env)
        print(f"bare nbclient, one after another : {bare:7.1f} s  ({bare / args.n:.2f} s per notebook)")
        one, _ = timed_grade(folder, Path(scratch) / "one", 1)
        print(f"grade --workers 1                : {one:7.1f} s  ({one / args.n:.2f} s per notebook)")
        many, memory = timed_grade(folder, Path(scratch) / "many", args.workers)
        print(f"grade --workers {args.workers:<2}               : {many:7.1f} s  ({many / args.n:.2f} s per notebook)")
        forked = graded_results(Path(scratch) / "many")
        print(f"  {launch_modes(forked)}")
        one_at_a_time, _ = timed_grade(folder, Path(scratch) / "one-at-a-time", args.workers, options=("--one-at-a-time",))
        print(
            f"grade --workers {args.workers:<2} --one-at-a-time: {one_at_a_time:7.1f} s  ({one_at_a_time / args.n:.2f} s per notebook)"
        )
        launched, _ = timed_grade(folder, Path(scratch) / "launched", args.workers, {"GRADER_LAUNCH_KERNELS": "1"})
        print(f"grade --workers {args.workers:<2}, launched     : {launched:7.1f} s  ({launched / args.n:.2f} s per notebook)")
        launched_results = graded_results(Path(scratch) / "launched")
        print(f"  {launch_modes(launched_results)}")
        first_forked, first_launched = first_cell_median(forked), first_cell_median(launched_results)
        print(f"taken to first cell (median)     : {first_forked:7.2f} s forked, {first_launched:.2f} s launched")
        again, _ = timed_grade(folder, Path(scratch) / "many", args.workers)
        print(f"unchanged regrade                : {again:7.1f} s")
        on_ray = None
        if args.ray:
            on_ray, _ = timed_grade(folder, Path(scratch) / "ray", args.workers, options=("--ray", "local"))
            print(f"grade --ray local --workers {args.workers:<2}   : {on_ray:7.1f} s  ({on_ray / args.n:.2f} s per notebook)")
        worker_peaks = sorted(memory.peaks.values(), reverse=True)
        print(
            "peak memory per worker           : "
            + ", ".join(
                f"{memory.peaks[pid] / 1024**3:.2f} GiB PSS ({memory.rss_peaks[pid] / 1024**3:.2f} GiB RSS)"
                for pid in sorted(memory.peaks, key=memory.peaks.__getitem__, reverse=True)
            )
            + f"; shared by them (main process, kernel template, fork server): {memory.shared_peak / 1024**3:.2f} GiB PSS"
        )
        print()
        print(f"grade --workers {args.workers} / bare          : {many / bare:.2f}   (target <= 0.35)")
        # (The scaling issue's >= 1.6x was set for workers that checked one submission at a time; one worker now fills
        # much of a second CPU itself, so a second worker adds less: see README, Performance.)
        print(f"workers {args.workers} vs 1, speed-up          : {one / many:.2f}x")
        print(f"overlapped vs one at a time      : {one_at_a_time / many:.2f}x faster")
        print(f"forked vs launched kernels       : {launched / many:.2f}x faster")
        print(f"taken to first cell, forked      : {first_forked:.2f} s median (target <= 0.3 s)")
        print(f"unchanged regrade                : {again:.2f} s (target < 2 s)")
        print(f"largest worker (PSS)             : {max(worker_peaks, default=0) / 1024**3:.2f} GiB (target <= 1 GiB)")
        if on_ray is not None:
            print(f"Ray on this machine vs local     : {on_ray / many:.2f}x, {(on_ray - many) / args.n:+.2f} s per submission")


if __name__ == "__main__":
    main()
