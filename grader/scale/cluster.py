"""Grade on a Ray cluster: the same workers as on one machine, as Ray actors on many.

Each actor (:class:`GraderWorker`) holds a :class:`~grader.grading.grader.Grader`, exactly as a local worker does:
reference models loaded once, its own sandbox and kernel template, one kernel kept warm. The work carries its data:
a notebook's bytes go out with its task and its result comes back as JSON; the course's ``assignments/`` reach
every node through Ray's ``runtime_env`` (a ``working_dir``, uploaded once and cached per node); each node builds
the tiny model zoo once in its own cache. Only this process (the head) writes files and the gradebook, so resume,
incremental regrade and ``kill -9`` safety are those of a local run.

Scheduling: a submission whose assignment has ``device: cuda`` checks goes to an actor holding one whole GPU
(``num_gpus=1``: its timings are its own) on a GPU node; the rest go to actors on nodes without a GPU (on GPU nodes
only when the cluster has no other). A cluster without GPUs grades the CUDA checks as skipped, as one machine does.

Faults: an actor lost with its node (or killed) is replaced, and the submissions it held are graded again by
another, up to :data:`MAX_ATTEMPTS` times; a student's own crash never reaches this far (the grader turns it into a
result), so nothing is retried for it. A submission whose grading outlives its limit (its rubric's time limits, see
:func:`submission_limit_s`) has its actor stopped and gets an internal-error result, which the next run grades
again. Each submission is reported once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import socket
import tempfile
import time
from collections import Counter, deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.errors import UsageError
from grader.grading.course import ASSIGNMENTS_DIR, Course
from grader.grading.rubric import Limits
from grader.reports.results import SubmissionResult, result_from_json, result_to_json
from grader.scale.runner import WORKER_MEMORY_BYTES, RunConfig, Task, grade_task

RAY_INSTALL = "pip install -e '.[ray]'"
MAX_ATTEMPTS = 3  # times one submission is handed out when the nodes grading it are lost
START_LIMIT_S = 900.0  # an actor not ready by then (no node can place it, or it hangs starting) is given up
CLOSE_LIMIT_S = 30.0  # an actor told to stop has this long to close its grader before it is killed
LIMIT_MARGIN_S = 120.0  # on top of a rubric's own limits: the grader's own work around the notebook


@dataclass(frozen=True)
class Node:
    """A Ray node as the head plans for it."""

    node_id: str
    cpus: float
    gpus: float
    memory: float  # bytes Ray may give its tasks


@dataclass(frozen=True)
class Slot:
    """An actor to start: on which node, whether it holds a GPU, and its kernels' torch threads."""

    node_id: str | None  # None: wherever Ray finds room (a replacement when no node of its kind is left)
    gpu: bool
    threads: int


def alive_nodes(ray_nodes: Sequence[Mapping[str, Any]]) -> list[Node]:
    """The nodes of ``ray.nodes()`` that are alive."""
    return [
        Node(
            str(item["NodeID"]),
            float(item["Resources"].get("CPU", 0)),
            float(item["Resources"].get("GPU", 0)),
            float(item["Resources"].get("memory", 0)),
        )
        for item in ray_nodes
        if item.get("Alive")
    ]


def plan_slots(nodes: Sequence[Node], cpu_tasks: int, gpu_tasks: int, workers: int | None = None) -> list[Slot]:
    """The actors a run starts: one per GPU for the GPU work, then one per CPU (as memory allows) of the nodes without
    a GPU for the rest (of every node when none is without), never more than there is work, nor than ``workers``
    allows (though each kind of work with submissions gets one). Each actor's kernels get the CPUs of its node shared
    among the node's actors."""
    gpu_nodes = [node for node in nodes if node.gpus >= 1]
    cpu_nodes = [node for node in nodes if node.gpus < 1 and node.cpus >= 1] or [node for node in nodes if node.cpus >= 1]
    if not gpu_nodes:
        cpu_tasks, gpu_tasks = cpu_tasks + gpu_tasks, 0
    kinds = (cpu_tasks > 0) + (gpu_tasks > 0)
    cap = max(workers, kinds) if workers is not None else cpu_tasks + gpu_tasks
    placed: list[tuple[Node, bool]] = []
    gpu_slots = [(node, True) for node in gpu_nodes for _ in range(int(node.gpus))]
    placed += gpu_slots[: min(gpu_tasks, cap - (cpu_tasks > 0))]
    per_node = {node.node_id: max(1, min(int(node.cpus), int(node.memory // WORKER_MEMORY_BYTES) or 1)) for node in cpu_nodes}
    used = Counter(node.node_id for node, _ in placed)
    cpu_slots = []
    for round_ in range(max(per_node.values(), default=0)):  # spread over the nodes first
        for node in cpu_nodes:
            if round_ < per_node[node.node_id] - used[node.node_id] * (node.gpus >= 1):
                cpu_slots.append((node, False))
    placed += cpu_slots[: max(0, min(cpu_tasks, cap - len(placed)))]
    on_node = Counter(node.node_id for node, _ in placed)
    return [Slot(node.node_id, gpu, max(1, int(node.cpus) // on_node[node.node_id])) for node, gpu in placed]


def replacement_node(nodes: Sequence[Node], slot: Slot, actors: Mapping[str, int]) -> str | None:
    """Where to start an actor in place of one lost with ``slot``: its node if still alive, else the alive node of
    its kind (with a GPU for GPU work; without one for the rest, unless every node has one) holding the fewest of
    ``actors`` (node -> actors of the run); None: none is left, Ray places it if it can."""
    if any(node.node_id == slot.node_id for node in nodes):
        return slot.node_id
    kind = [node for node in nodes if (node.gpus >= 1) == slot.gpu]
    if not kind and not slot.gpu:
        kind = list(nodes)
    return min(kind, key=lambda node: actors.get(node.node_id, 0)).node_id if kind else None


def submission_limit_s(limits: Limits, checks: int) -> float:
    """How long one submission may take to grade, wherever it runs: its kernel's start, its cells, a call per check
    at the most each may take, and a margin for the grader's own work."""
    return limits.startup_timeout_s + limits.notebook_timeout_s + limits.call_timeout_s * max(1, checks) + LIMIT_MARGIN_S


class GraderWorker:
    """A Ray actor grading one submission at a time, like a local worker (made remote by :func:`grade_on_ray`)."""

    def __init__(self, config: RunConfig, threads: int) -> None:
        from grader import scratch
        from grader.quiet import quiet_libraries, quiet_library_defaults
        from grader.scale.runner import build_grader, share_cpus

        quiet_library_defaults()
        share_cpus()
        scratch.start_run()  # this node's folders of the run, swept by its next run if this one is killed
        import torch

        torch.set_num_threads(threads)
        course_root = Path.cwd()  # the runtime_env's working_dir: this node's copy of the course
        if not (course_root / ASSIGNMENTS_DIR).is_dir():
            raise UsageError(
                f"this Ray worker's working folder {course_root} holds no {ASSIGNMENTS_DIR}/: the course did not reach it"
            )
        self.inbox = scratch.mkdtemp("inbox")  # the notebooks sent here; hidden from kernels like every folder of /tmp
        settings = dataclasses.replace(
            config.settings, kernel_threads=threads, hidden_paths=(*config.settings.hidden_paths, str(self.inbox))
        )
        here = dataclasses.replace(config, course_root=str(course_root), cache_dir=None, settings=settings, shared=None)
        self._quiet = quiet_libraries()
        self._quiet.__enter__()
        self.grader = build_grader(here)
        import ray

        node_id = ray.get_runtime_context().get_node_id()
        self.node = f"{socket.gethostname()}/{node_id[:8]}"
        self.zoo_key = self.grader.zoo.key if self.grader.zoo is not None else ""

    def ready(self) -> dict[str, str]:
        """Where this actor runs and which zoo it built (answered once it can grade)."""
        return {"node": self.node, "zoo": self.zoo_key, "pid": str(os.getpid())}

    def close(self) -> None:
        """Stop this actor's kernels and template (before Ray stops the actor)."""
        self.grader.close()
        self._quiet.__exit__(None, None, None)
        shutil.rmtree(self.inbox, ignore_errors=True)

    def grade(self, task: Task, notebook: bytes, more_to_come: bool) -> str:
        """Grade a notebook sent with its task; its result as JSON."""
        folder = Path(tempfile.mkdtemp(dir=self.inbox))
        try:
            path = folder / (Path(task.path).name or "submission.ipynb")
            path.write_bytes(notebook)
            return result_to_json(grade_task(self.grader, task, more_to_come, self.node, path))
        finally:
            shutil.rmtree(folder, ignore_errors=True)


@dataclass
class _Attempt:
    task: Task
    gpu: bool
    limit_s: float
    tries: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass
class _Actor:
    handle: Any
    slot: Slot
    ready_ref: Any
    started: float
    node: str = ""


def grade_on_ray(
    tasks: Sequence[Task], config: RunConfig, address: str, course: Course, workers: int | None = None
) -> Iterator[SubmissionResult]:
    """Results of every task graded on the Ray cluster at ``address`` ("auto": the one this machine is part of;
    "local": a cluster of this machine alone, started for the run), in the order they finish."""
    if not tasks:
        return
    ray = _import_ray()
    if ray.is_initialized():  # the course reaches the nodes with the job's runtime_env, set when connecting
        raise UsageError("grading on Ray connects to the cluster itself: call ray.shutdown() first")
    with _staged_course(course.root) as staged:
        try:
            ray.init(
                address=None if address == "local" else address,
                runtime_env={"working_dir": str(staged)},
                logging_level=logging.WARNING,
                log_to_driver=False,
                include_dashboard=False if address == "local" else None,
            )
        except ConnectionError as error:
            raise UsageError(
                f"no Ray cluster at {address!r} ({error}); start one with `ray start --head`, or pass --ray local"
            ) from error
        except ValueError as error:  # a malformed address, or ray:// without Ray Client's packages
            raise UsageError(f"cannot connect to the Ray cluster at {address!r}: {error}") from error
    try:
        yield from _Dispatcher(ray, tasks, config, course, workers).run()
    finally:
        ray.shutdown()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as error:
        raise UsageError(f"grading on a Ray cluster needs Ray: {RAY_INSTALL}") from error
    return ray


@contextlib.contextmanager
def _staged_course(root: Path) -> Iterator[Path]:
    """A folder holding only the course's ``assignments/`` (what the nodes need of it), for the runtime_env."""
    from grader import scratch

    with scratch.temporary_directory("course") as folder:
        shutil.copytree(
            root / ASSIGNMENTS_DIR, Path(folder) / ASSIGNMENTS_DIR, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
        yield Path(folder)


class _Dispatcher:
    """Hands tasks to actors one at a time each, replaces lost actors, and reports each submission once."""

    def __init__(self, ray: Any, tasks: Sequence[Task], config: RunConfig, course: Course, workers: int | None) -> None:
        self.ray = ray
        self.config = config
        self.remote_class = ray.remote(GraderWorker)
        self.queues: dict[bool, deque[_Attempt]] = {False: deque(), True: deque()}
        nodes = alive_nodes(ray.nodes())
        has_gpu = any(node.gpus >= 1 for node in nodes)
        for task in tasks:
            assignment = course.assignment_of(Path(task.path), task.assignment)
            gpu = has_gpu and assignment is not None and any(check.device == "cuda" for check in assignment.rubric.checks)
            limits = assignment.rubric.limits if assignment is not None else Limits()
            checks = len(assignment.rubric.checks) if assignment is not None else 1
            self.queues[gpu].append(_Attempt(task, gpu, submission_limit_s(limits, checks)))
        self.slots = plan_slots(nodes, len(self.queues[False]), len(self.queues[True]), workers)
        self.starting: dict[Any, _Actor] = {}  # ready ref -> actor
        self.idle: dict[bool, list[_Actor]] = {False: [], True: []}
        self.running: dict[Any, tuple[_Actor, _Attempt, float]] = {}  # result ref -> actor, attempt, when sent
        from grader.zoo import ModelZoo

        self.zoo_key = "" if config.settings.real_models else ModelZoo().key  # what the gradebook is keyed by

    def _start(self, slot: Slot) -> None:
        options: dict[str, Any] = {
            "num_cpus": 1,
            "num_gpus": 1 if slot.gpu else 0,
            "max_restarts": 0,  # a lost actor is replaced by the head, which knows what it held
        }
        if slot.node_id is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(slot.node_id, soft=False)
        handle = self.remote_class.options(**options).remote(self.config, slot.threads)
        actor = _Actor(handle, slot, handle.ready.remote(), time.monotonic())
        self.starting[actor.ready_ref] = actor

    def _replace(self, actor: _Actor) -> None:
        """Start another actor for the work ``actor`` was to do, if any is left: on its node if still alive, else on
        another node of its kind (see :func:`replacement_node`)."""
        gpu = actor.slot.gpu
        if not self.queues[gpu] and not any(attempt.gpu == gpu for _, attempt, _ in self.running.values()):
            return
        actors = Counter(other.slot.node_id for other in [*self._actors(False), *self._actors(True)] if other.slot.node_id)
        node_id = replacement_node(alive_nodes(self.ray.nodes()), actor.slot, actors)
        self._start(dataclasses.replace(actor.slot, node_id=node_id))

    def run(self) -> Iterator[SubmissionResult]:
        for slot in self.slots:
            self._start(slot)
        try:
            while self.queues[False] or self.queues[True] or self.running:
                yield from self._dispatch()
                self._release_finished_kinds()
                refs = [*self.starting, *self.running]
                ready, _ = self.ray.wait(refs, num_returns=1, timeout=1.0) if refs else ([], [])
                for ref in ready:
                    if ref in self.starting:
                        self._started(self.starting.pop(ref), ref)
                    else:
                        yield from self._finished(ref)
                yield from self._overdue()
                yield from self._stalled()
        finally:
            self._release([*self.idle[False], *self.idle[True], *self.starting.values()])

    def _release_finished_kinds(self) -> None:
        """Stop the actors of a kind of work that is all done (the GPU ones once no GPU work is left), so that their
        resources go back to the cluster."""
        for gpu in (False, True):
            if not self.queues[gpu] and not any(attempt.gpu == gpu for _, attempt, _ in self.running.values()):
                starting = [ref for ref, actor in self.starting.items() if actor.slot.gpu == gpu]
                self._release([*self.idle[gpu], *(self.starting.pop(ref) for ref in starting)])
                self.idle[gpu].clear()

    def _release(self, actors: Sequence[_Actor]) -> None:
        """Stop actors: each closes its grader (its kernels and template) first, for a little while at most."""
        if not actors:
            return
        closing = [actor.handle.close.remote() for actor in actors]
        self.ray.wait(closing, num_returns=len(closing), timeout=CLOSE_LIMIT_S)
        for actor in actors:
            self.ray.kill(actor.handle, no_restart=True)

    def _dispatch(self) -> Iterator[SubmissionResult]:
        for gpu, queue in self.queues.items():
            while queue and self.idle[gpu]:
                attempt = queue.popleft()
                try:
                    notebook = Path(attempt.task.path).read_bytes()  # sent with the task: the nodes share no disk
                except OSError as error:
                    yield attempt.task.failed(f"could not read the notebook: {error}")
                    continue
                actor = self.idle[gpu].pop()
                attempt.tries += 1
                ref = actor.handle.grade.remote(attempt.task, notebook, bool(queue))
                self.running[ref] = (actor, attempt, time.monotonic())

    def _started(self, actor: _Actor, ref: Any) -> None:
        try:
            info = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as error:
            if error.actor_init_failed:
                raise UsageError(f"a Ray worker could not start a grader: {_first_line(error)}") from error
            self._replace(actor)  # its node was lost before it was ready
            return
        if info["zoo"] != self.zoo_key:  # the tiny models depend on the versions installed: they must be this one's
            raise UsageError(
                f"the Ray node {info['node']} built the tiny model zoo {info['zoo'] or '(none)'}, not this machine's "
                f"{self.zoo_key or '(none)'}: install the same grader, torch and transformers on every node"
            )
        actor.node = info["node"]
        self.idle[actor.slot.gpu].append(actor)

    def _finished(self, ref: Any) -> Iterator[SubmissionResult]:
        actor, attempt, _ = self.running.pop(ref)
        try:
            payload = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as error:
            attempt.errors.append(f"{actor.node or 'a node'}: {_first_line(error)}")
            self._replace(actor)
            if attempt.tries < MAX_ATTEMPTS:
                self.queues[attempt.gpu].appendleft(attempt)  # graded again, by another actor
            else:
                yield _lost(
                    attempt,
                    f"the Ray nodes grading this submission were lost {attempt.tries} times ({'; '.join(attempt.errors)})",
                )
            return
        except self.ray.exceptions.RayError as error:  # the grader failed outside grade()'s own handling
            self.idle[actor.slot.gpu].append(actor)
            yield _lost(attempt, f"its Ray worker on {actor.node} failed ({_first_line(error)})")
            return
        self.idle[actor.slot.gpu].append(actor)
        result = result_from_json(payload)
        if attempt.tries > 1:  # said in its results.json: which nodes were lost while grading it
            result = dataclasses.replace(
                result, provenance={**result.provenance, "attempts": attempt.tries, "lost": attempt.errors}
            )
        yield result

    def _overdue(self) -> Iterator[SubmissionResult]:
        now = time.monotonic()
        for ref, (actor, attempt, sent) in list(self.running.items()):
            if now - sent > attempt.limit_s:
                del self.running[ref]
                self.ray.kill(actor.handle, no_restart=True)
                self._replace(actor)
                yield _lost(
                    attempt,
                    f"grading it took longer than {attempt.limit_s:.0f} s (the limit for one submission) on {actor.node}; its worker was stopped",
                )
        for ref, actor in list(self.starting.items()):
            if now - actor.started > START_LIMIT_S:
                del self.starting[ref]
                self.ray.kill(actor.handle, no_restart=True)

    def _stalled(self) -> Iterator[SubmissionResult]:
        """Work left that no actor can take (every node able to was lost, and no replacement could start): reported
        rather than waited on forever."""
        for gpu, queue in self.queues.items():
            if queue and not self._actors(gpu):
                while queue:
                    yield _lost(queue.popleft(), "no Ray node could take it (the nodes able to grade it were lost)")

    def _actors(self, gpu: bool) -> list[_Actor]:
        """The actors of a kind that are starting, idle or grading."""
        running = [actor for actor, _, _ in self.running.values()]
        return [actor for actor in [*self.starting.values(), *self.idle[gpu], *running] if actor.slot.gpu == gpu]


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _lost(attempt: _Attempt, why: str) -> SubmissionResult:
    return attempt.task.failed(why, internal_error=True)
