"""What the grader measures of a kernel from outside while a call runs: its threads' CPU time, sampled
(:class:`CpuSampler`), the pacing pauses it serves and logs itself (:class:`PauseServer`), and the runtime's records
as they are made (:class:`EventStream`)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import threading
import time
from collections.abc import Callable

from grader.kernel.evidence import Pause


class CpuSampler:
    """Samples the CPU time of every thread of the kernel's process (``/proc/<pid>/task/<tid>/schedstat``,
    nanoseconds) against the grader's monotonic clock (``time.perf_counter``, the clock the kernel's runtime stamps
    its events with), every ``interval_s`` in a thread of the grader, while the ``with`` block runs: evidence from
    outside the kernel of when each thread really ran. A generate run in a worker thread (a thread pool, a streamer)
    is judged by that thread's samples. ``samples`` (the main thread's) is empty where the files cannot be read.
    """

    MAX_SAMPLES = 200_000
    MAX_THREADS = 256
    RELIST_S = 0.02  # how often the process's threads are listed again (a thread started meanwhile is then sampled)

    def __init__(self, pid: int | None, interval_s: float = 0.004) -> None:
        self.pid = pid
        self.interval_s = interval_s
        # Per thread (its native id): (grader's clock, seconds the thread ran), and (grader's clock, seconds it ran or
        # waited to run: schedstat's second field is its time runnable on a run queue). A thread starved by a busy
        # machine waits there; one that sleeps (a forgery's pause) does not.
        self.threads: dict[int, list[tuple[float, float]]] = {}
        self.threads_runnable: dict[int, list[tuple[float, float]]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._fds: dict[int, int] = {}  # each thread's file (by its id here), kept open and read again from its start
        self._names: dict[int, int] = {}  # each thread's id here -> its id as the kernel sees it (in its PID namespace)
        self._listed = 0.0
        self._count = 0
        # The main thread's id as the kernel sees it (it names its events' threads so): where the kernel runs in a
        # PID namespace of its own, not the id the grader sees.
        self.main: int | None = _namespaced_id(pid, pid) if pid is not None else None

    @property
    def samples(self) -> list[tuple[float, float]]:
        """The main thread's samples (the thread that runs the notebook's code)."""
        return self.threads.get(self.main, []) if self.main is not None else []

    @property
    def runnable(self) -> list[tuple[float, float]]:
        """The main thread's samples of time run or waited to run."""
        return self.threads_runnable.get(self.main, []) if self.main is not None else []

    def _list(self) -> None:
        """Open the schedstat of every thread of the process not yet sampled."""
        assert self.pid is not None
        self._listed = time.perf_counter()
        try:
            tasks = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return
        for task in tasks:
            tid = int(task)
            if tid in self._fds or len(self._fds) >= self.MAX_THREADS:
                continue
            with contextlib.suppress(OSError):
                self._fds[tid] = os.open(f"/proc/{self.pid}/task/{tid}/schedstat", os.O_RDONLY)
                self._names[tid] = _namespaced_id(self.pid, tid)

    def _sample(self) -> bool:
        if self.pid is None:
            return False
        if time.perf_counter() - self._listed >= self.RELIST_S:
            self._list()
        if not self._fds:
            return False
        for tid, fd in list(self._fds.items()):
            try:
                fields = os.pread(fd, 128, 0).split()
                running_ns, waiting_ns = int(fields[0]), int(fields[1])
            except (OSError, ValueError, IndexError):  # the thread ended: its samples stop there
                os.close(fd)
                del self._fds[tid]
                continue
            moment = time.perf_counter()
            name = self._names.get(tid, tid)
            self.threads.setdefault(name, []).append((moment, running_ns / 1e9))
            self.threads_runnable.setdefault(name, []).append((moment, (running_ns + waiting_ns) / 1e9))
            self._count += 1
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s) and self._count < self.MAX_SAMPLES:
            if not self._sample():
                return

    def __enter__(self) -> CpuSampler:
        if self._sample():
            self._thread = threading.Thread(target=self._run, name="kernel-cpu-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._sample()
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = {}


def _namespaced_id(pid: int, tid: int) -> int:
    """A thread's id as its own process sees it (``threading.get_native_id()`` there): the last of the ids its
    ``status`` gives for each PID namespace it is in (the id the grader sees where it shares the grader's)."""
    with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{pid}/task/{tid}/status") as status:
        for line in status:
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    return tid


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


class EventStream:
    """Reads the events the kernel's runtime writes, one JSON line each, as it records them (``[scope, event]``,
    scope ``"call"`` or ``"notebook"``), in a thread of the grader, for as long as the kernel lives.

    A record leaves the kernel when it is made: what the notebook does to the runtime's records afterwards (through
    ``sys.modules`` or a wrapper's ``__globals__``) changes nothing here, and the call's answer must carry the same
    events (grader/kernel/harness.py). A line that is not one the runtime writes (not JSON, not a pair) marks the
    stream as written by something else (:attr:`corrupted`).
    """

    MAX_EVENTS = 200_000  # kept per kernel; beyond, events are read and dropped (counted), so the kernel never blocks
    MAX_LINE = 4 * 1024**2

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.entries: list[tuple[str, dict[str, object]]] = []
        self.dropped = 0
        self.corrupted = ""
        self._pending = b""
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._wake = os.pipe()
        self._thread = threading.Thread(target=self._run, name="kernel-event-stream", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self.fd, self._wake[0]], [], [])
            except (OSError, ValueError):
                return
            if self._wake[0] in ready and self.fd not in ready:
                return
            self._read_available()

    def _read_available(self) -> None:
        """Read what the FIFO holds now, and keep each complete line (one reader at a time: the stream's thread, or
        a caller flushing it, so that chunks are kept in the order they were written)."""
        with self._lock:
            while True:
                try:
                    chunk = os.read(self.fd, 1 << 20)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    return
                if not chunk:
                    return
                *lines, self._pending = (self._pending + chunk).split(b"\n")
                for line in lines:
                    self._keep(line)
                if len(self._pending) > self.MAX_LINE:
                    self.corrupted = self.corrupted or "a line longer than the runtime ever writes"
                    self._pending = b""

    def _keep(self, line: bytes) -> None:
        try:
            entry = json.loads(line, parse_constant=_not_json)
        except ValueError:
            self.corrupted = self.corrupted or "a line that is not JSON"
            return
        if (
            not isinstance(entry, list)
            or len(entry) != 2
            or entry[0] not in ("call", "notebook")
            or not isinstance(entry[1], dict)
        ):
            self.corrupted = self.corrupted or "a line that is not an event the runtime writes"
            return
        if len(self.entries) >= self.MAX_EVENTS:
            self.dropped += 1
            return
        self.entries.append((entry[0], entry[1]))

    def mark(self) -> int:
        """Where the stream is now: :meth:`since` gives what came after."""
        self.flush()
        with self._lock:
            return len(self.entries)

    def flush(self) -> None:
        """Read whatever the kernel has written so far (it writes each event before it answers a request)."""
        self._read_available()

    def since(self, mark: int, scope: str = "call") -> list[dict[str, object]]:
        """The events of ``scope`` streamed after ``mark`` (every event of a call is written before its answer)."""
        self.flush()
        with self._lock:
            return [event for kind, event in self.entries[mark:] if kind == scope]

    def all(self, scope: str) -> list[dict[str, object]]:
        """Every event of ``scope`` streamed so far."""
        return self.since(0, scope)

    def close(self) -> None:
        """Stop reading (the FIFO itself belongs to the session)."""
        self._stop.set()
        with contextlib.suppress(OSError):
            os.write(self._wake[1], b"\n")
        self._thread.join(timeout=2)
        for fd in self._wake:
            with contextlib.suppress(OSError):
                os.close(fd)


def _not_json(name: str) -> object:
    raise ValueError(f"non-standard JSON constant {name}")
