"""What the grader measures of a kernel from outside while a call runs: its main thread's CPU time, sampled
(:class:`CpuSampler`), and the pacing pauses it serves and logs itself (:class:`PauseServer`)."""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Callable
from pathlib import Path

from grader.kernel.evidence import Pause


class CpuSampler:
    """Samples one thread's CPU time (``/proc/<pid>/task/<tid>/schedstat``, nanoseconds) against the grader's
    monotonic clock (``time.perf_counter``, the clock the kernel's runtime stamps its events with), every
    ``interval_s`` in a thread of the grader, while the ``with`` block runs: evidence from outside the kernel
    of when its main thread really ran. ``samples`` is empty where the file cannot be read (not Linux).
    """

    MAX_SAMPLES = 200_000

    def __init__(self, path: Path | None, interval_s: float = 0.004) -> None:
        self.path = path
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []
        # (grader's clock, seconds the thread ran or waited to run: schedstat's second field is its time runnable on a
        # run queue). A thread starved by a busy machine waits there; one that sleeps (a forgery's pause) does not.
        self.runnable: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._fd: int | None = None  # the file, kept open and read again from its start (cheaper than reopening)

    def _sample(self) -> bool:
        if self._fd is None:
            return False
        try:
            fields = os.pread(self._fd, 128, 0).split()
            running_ns, waiting_ns = int(fields[0]), int(fields[1])
        except (OSError, ValueError, IndexError):
            return False
        moment = time.perf_counter()
        self.samples.append((moment, running_ns / 1e9))
        self.runnable.append((moment, (running_ns + waiting_ns) / 1e9))
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s) and len(self.samples) < self.MAX_SAMPLES:
            if not self._sample():
                return

    def __enter__(self) -> CpuSampler:
        if self.path is not None:
            with contextlib.suppress(OSError):
                self._fd = os.open(self.path, os.O_RDONLY)
        if self._sample():
            self._thread = threading.Thread(target=self._run, name="kernel-cpu-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._sample()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class PauseServer:
    """Serves the pauses the kernel's runtime asks for while one request runs (pacing, see grader/kernel/evidence.py).

    The runtime writes a line (its sequence number) on the request FIFO and blocks reading the reply FIFO; this
    thread of the grader reads the line, waits a length it draws itself (``draw()``), and writes one byte back.
    The kernel never learns the length but by timing its own wait; the grader keeps what it served
    (``pauses``) to judge the call's records against.
    """

    MAX_PAUSES = 5_000
    MAX_LINE = 32

    def __init__(self, fds: tuple[int, int] | None, draw: Callable[[], float]) -> None:
        self.fds = fds
        self.draw = draw
        self.pauses: list[Pause] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pending = b""
        self._wake: tuple[int, int] | None = None  # a pipe that ends the thread's wait at once when the request ends

    def _drain(self) -> None:
        """Drop whatever either FIFO holds from before this request (an interrupted pause, a notebook's writes)."""
        assert self.fds is not None
        for fd in self.fds:
            with contextlib.suppress(BlockingIOError, InterruptedError, OSError):
                while os.read(fd, 65536):
                    pass

    def _run(self) -> None:
        assert self.fds is not None and self._wake is not None
        request, reply = self.fds
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([request, self._wake[0]], [], [])
                if self._wake[0] in ready:
                    return
                chunk = os.read(request, 4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return
            self._pending += chunk
            while b"\n" in self._pending and not self._stop.is_set():
                line, self._pending = self._pending.split(b"\n", 1)
                if len(self.pauses) >= self.MAX_PAUSES:
                    return  # the kernel waits until the request's time limit interrupts it
                seconds = self.draw()
                start = time.perf_counter()
                seq = line[: self.MAX_LINE].decode("ascii", "replace")
                if self._stop.wait(seconds):
                    # The request ended during the pause, which no honest call does (its runtime waits for the
                    # release): logged as held until then, for the evidence to place.
                    self.pauses.append(Pause(seq, start, time.perf_counter(), seconds))
                    return
                end = time.perf_counter()
                with contextlib.suppress(OSError):
                    os.write(reply, b"\n")
                self.pauses.append(Pause(seq, start, end, seconds))
            self._pending = self._pending[-self.MAX_LINE :]

    def __enter__(self) -> PauseServer:
        if self.fds is not None:
            self._drain()
            self._wake = os.pipe()
            self._thread = threading.Thread(target=self._run, name="kernel-pause-server", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._wake is not None:
            os.write(self._wake[1], b"\n")
        if self._thread is not None:
            self._thread.join(timeout=2)
        for fd in self._wake or ():
            os.close(fd)
        self._wake = None
