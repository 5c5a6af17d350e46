"""Grading on a Ray cluster (`grade --ray`): a real cluster of three nodes on this machine, one declaring a GPU.

One scenario, run once for the module: a class of sample notebooks is graded on the cluster, where a node is killed
while it grades and the run's own process (the head) is killed later and started again. The tests then read what it
left: the scores a local run gives the same notebooks (pinned by the samples' own tests, which grade them locally
with the same seed), the GPU work on the GPU node only, every submission graded once, the lost
one graded again elsewhere, and nothing finished graded twice. The planning and reporting logic has fast tests
with made-up nodes and results.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import nbformat
import pytest

from grader.errors import UsageError
from grader.grading.rubric import Limits
from grader.reports.results import SubmissionResult
from grader.scale.batch import spread_notice
from grader.scale.cluster import Node, Slot, _Actor, _Dispatcher, plan_slots, replacement_node, submission_limit_s
from grader.scale.runner import WORKER_MEMORY_BYTES
from tests.contract import SEED, assert_loses_exactly, results, run_grade
from tests.test_samples_latency import MISTAKES as LATENCY_MISTAKES
from tests.test_samples_quantization import MISTAKES as QUANTIZATION_MISTAKES

GIB = 1024**3
# Graded as the class: the latency ones have CUDA checks (GPU work); the quantization ones have none (CPU work). The
# slow ones sleep in a cell, so that the CPU workers are busy when a node is killed, then look for Ray.
SAMPLES = {
    "lat-solution": "latency/solution.ipynb",
    "lat-no-warmup": "latency/mistake-no-warmup.ipynb",
    "q-solution": "quantization/solution.ipynb",
    "q-padding": "quantization/mistake-padding-never-set.ipynb",
}
SLOW = ("q-slow-1", "q-slow-2")  # copies of q-solution
CRASH = "q-crash"  # a copy of q-solution whose first cell ends its own kernel: the student's crash, not the node's
GPU_WORK = ("lat-solution", "lat-no-warmup")
# What a local run gives each, as test_samples_latency and test_samples_quantization check it: the checks it loses
# (a solution none), and words of their messages.
LOCAL: dict[str, tuple[set[str], str]] = {
    "lat-solution": (set(), ""),
    "lat-no-warmup": LATENCY_MISTAKES["mistake-no-warmup"],
    "q-solution": (set(), ""),
    "q-padding": QUANTIZATION_MISTAKES["mistake-padding-never-set"],
    **{name: (set(), "") for name in SLOW},
}
SLEEP_S = 6


# ---------------------------------------------------------------- planning (no cluster)


def test_gpu_work_gets_one_actor_per_gpu_on_gpu_nodes_and_cpu_work_the_other_nodes() -> None:
    nodes = [Node("cpu-a", 4, 0, 64 * GIB), Node("cpu-b", 2, 0, 64 * GIB), Node("gpu", 8, 2, 64 * GIB)]
    slots = plan_slots(nodes, cpu_tasks=100, gpu_tasks=100)
    assert sorted(slot.node_id for slot in slots if slot.gpu) == ["gpu", "gpu"]
    assert sorted(slot.node_id for slot in slots if not slot.gpu) == ["cpu-a"] * 4 + ["cpu-b"] * 2
    assert {slot.threads for slot in slots if slot.node_id == "gpu"} == {4}  # the node's 8 CPUs for its 2 actors
    assert {slot.threads for slot in slots if slot.node_id == "cpu-a"} == {1}


def test_no_more_actors_than_work_memory_or_workers_allow() -> None:
    nodes = [Node("cpu", 16, 0, 2 * WORKER_MEMORY_BYTES), Node("gpu", 4, 1, 64 * GIB)]
    assert [(slot.node_id, slot.gpu) for slot in plan_slots(nodes, cpu_tasks=1, gpu_tasks=0)] == [("cpu", False)]
    assert len(plan_slots(nodes, cpu_tasks=50, gpu_tasks=0)) == 2  # memory for two workers
    assert len(plan_slots(nodes, cpu_tasks=50, gpu_tasks=50)) == 3
    # --workers 1 with both kinds of work: each kind still gets its worker
    assert sorted(slot.gpu for slot in plan_slots(nodes, cpu_tasks=5, gpu_tasks=5, workers=1)) == [False, True]


def test_without_a_gpu_node_all_work_goes_to_cpu_actors() -> None:
    slots = plan_slots([Node("a", 2, 0, 64 * GIB), Node("b", 2, 0, 64 * GIB)], cpu_tasks=1, gpu_tasks=5)
    assert len(slots) == 4 and not any(slot.gpu for slot in slots)


def test_a_cluster_of_gpu_nodes_only_grades_its_cpu_work_there_too() -> None:
    slots = plan_slots([Node("gpu", 4, 1, 64 * GIB)], cpu_tasks=3, gpu_tasks=3)
    assert sorted(slot.gpu for slot in slots) == [False, False, False, True]
    assert {slot.node_id for slot in slots} == {"gpu"}


def test_a_lost_actor_is_replaced_on_a_node_of_its_kind() -> None:
    nodes = [Node("cpu-a", 4, 0, 64 * GIB), Node("cpu-b", 2, 0, 64 * GIB), Node("gpu", 8, 1, 64 * GIB)]
    assert replacement_node(nodes, Slot("cpu-a", False, 1), {}) == "cpu-a"  # its node is still alive
    # Its node was lost: CPU work goes to the CPU node with fewest actors, never to the GPU node (whose CPUs free up
    # once its GPU work is done), GPU work to a GPU node.
    assert replacement_node(nodes, Slot("lost", False, 1), {"cpu-a": 3, "cpu-b": 1, "gpu": 0}) == "cpu-b"
    assert replacement_node(nodes, Slot("lost", True, 4), {"gpu": 1}) == "gpu"
    assert replacement_node(nodes[:2], Slot("lost", True, 4), {}) is None  # no GPU node left: Ray decides (or not)
    assert replacement_node(nodes[2:], Slot("lost", False, 1), {}) == "gpu"  # only GPU nodes left: CPU work there


def test_a_node_that_built_another_zoo_stops_the_run_naming_it() -> None:
    class Ray:  # answers an actor's ready() with what that node built
        exceptions = SimpleNamespace(RayActorError=RuntimeError)

        def __init__(self, zoo: str) -> None:
            self.zoo = zoo

        def get(self, ref: object) -> dict[str, str]:
            return {"node": "gpu-7/1a2b3c4d", "zoo": self.zoo, "pid": "1"}

    def started(head_zoo: str, node_zoo: str) -> list[object]:
        dispatcher = _Dispatcher.__new__(_Dispatcher)  # (its planning needs a cluster; this is the check alone)
        dispatcher.ray, dispatcher.zoo_key, dispatcher.idle = Ray(node_zoo), head_zoo, {False: [], True: []}
        dispatcher._started(_Actor(None, Slot("n", False, 1), None, 0.0), None)
        return dispatcher.idle[False]

    assert len(started("a1b2", "a1b2")) == 1
    with pytest.raises(UsageError, match=r"the Ray node gpu-7/1a2b3c4d built the tiny model zoo ffff, not this machine's a1b2"):
        started("a1b2", "ffff")


def test_the_limit_for_one_submission_covers_its_rubric_limits() -> None:
    limits = Limits(notebook_timeout_s=100, startup_timeout_s=10, call_timeout_s=5)
    assert submission_limit_s(limits, 4) > 100 + 10 + 4 * 5
    assert submission_limit_s(limits, 40) > submission_limit_s(limits, 4)


def test_the_summary_says_how_the_run_was_spread() -> None:
    def graded(node: str, cuda: bool) -> SubmissionResult:
        environment = {"cuda_available": cuda, "cuda_devices": ["NVIDIA H100"] if cuda else []}
        return SubmissionResult("x", "x.ipynb", "latency", node=node, environment=environment)

    line = spread_notice([graded("a/1", False), graded("a/1", False), graded("b/2", True)], "auto")
    assert line is not None
    assert "2 machines" in line and "'auto'" in line
    assert "a/1: 2 on cpu" in line and "b/2: 1 on cuda (NVIDIA H100)" in line
    assert spread_notice([graded("a/1", False)]) is None  # one machine, no cluster: nothing to say
    assert spread_notice([graded("a/1", False)], "local") is not None


def test_an_address_that_reaches_no_cluster_is_a_clear_usage_error(tmp_path: Path, root: Path) -> None:
    completed = run_grade(
        str(root / "submissions" / SAMPLES["q-solution"]), "--ray", "nowhere::1", "--out", str(tmp_path), cwd=root, check=False
    )
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert "cannot connect to the Ray cluster at 'nowhere::1'" in completed.stderr
    assert "Traceback" not in completed.stderr and not (tmp_path / "solution").exists()


# ---------------------------------------------------------------- a real cluster


@dataclass
class Scenario:
    ray: Path
    gpu_node: str
    rows_at_head_kill: set[str]
    resumed: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory, root: Path) -> Iterator[Scenario]:
    from ray.cluster_utils import Cluster

    base = tmp_path_factory.mktemp("cluster")
    class_folder = _class(base / "class", root)

    store = {"object_store_memory": 128 * 1024**2}  # (notebooks and results are small: not 30 % of memory per node)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False, **store})
    try:
        cpu_node = cluster.add_node(num_cpus=1, **store)
        gpu_node = cluster.add_node(num_cpus=1, num_gpus=1, **store)  # declared: scheduling is checked without a GPU
        cluster.wait_for_nodes()
        _slow_copies(class_folder, root, cluster.address)
        out = base / "ray"
        command = [sys.executable, "-m", "grader", str(class_folder), "--ray", cluster.address, "--out", str(out)]
        command += ["--seed", str(SEED), "-q"]
        process = subprocess.Popen(
            command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        try:
            _wait_for(out, process, lambda rows: len(rows) >= 1)
            cluster.remove_node(cpu_node, allow_graceful=False)  # its worker is busy: the queue holds slow notebooks
            # The head is killed once the lost submission was graded again elsewhere, with work still left.
            rows = _wait_for(out, process, lambda rows: any("attempts" in row for row in rows.values()) and len(rows) >= 3)
            assert process.poll() is None, "the run finished before its head could be killed"
            os.killpg(process.pid, signal.SIGKILL)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        resumed = run_grade(str(class_folder), "--ray", cluster.address, "--out", str(out), cwd=root)
        yield Scenario(out, gpu_node.node_id[:8], set(rows), resumed)
    finally:
        cluster.shutdown()


def _class(folder: Path, root: Path) -> Path:
    folder.mkdir(parents=True)
    for name, sample in SAMPLES.items():
        shutil.copy(root / "submissions" / sample, folder / f"{name}.ipynb")
    crash = nbformat.read(root / "submissions" / SAMPLES["q-solution"], as_version=4)
    crash.cells.insert(0, nbformat.v4.new_code_cell("import os\nos._exit(3)"))
    nbformat.write(crash, folder / f"{CRASH}.ipynb")
    return folder


def _slow_copies(folder: Path, root: Path, address: str) -> None:
    """The slow copies of the solution: their last cell sleeps, then looks for the Ray cluster grading it (its
    session files, its environment, its control store's port) and fails if it sees any."""
    host, port = address.rsplit(":", 1)
    probe = f"""import glob, os, socket, time
time.sleep({SLEEP_S})
seen = [name for name in os.environ if name.startswith("RAY")] + glob.glob("/tmp/ray*")
try:
    socket.create_connection(({host!r}, {port}), timeout=2).close()
    seen.append("the GCS port")
except OSError:
    pass
assert not seen, f"this kernel sees Ray: {{seen}}"
"""
    slow = nbformat.read(root / "submissions" / SAMPLES["q-solution"], as_version=4)
    slow.cells.append(nbformat.v4.new_code_cell(probe))
    for name in SLOW:
        nbformat.write(slow, folder / f"{name}.ipynb")


def _wait_for(out: Path, process: subprocess.Popen[bytes], done: Any, timeout: float = 600) -> dict[str, str]:
    """The gradebook's rows (submission id -> stored result) once ``done(rows)`` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "the run ended before the test could act"
        rows = _rows(out)
        if done(rows):
            return rows
        time.sleep(0.2)
    raise AssertionError(f"waited {timeout} s; the gradebook holds {sorted(_rows(out))}")


def _rows(out: Path) -> dict[str, str]:
    if not (out / "gradebook.sqlite").exists():
        return {}
    with contextlib.suppress(sqlite3.OperationalError), sqlite3.connect(out / "gradebook.sqlite") as book:
        return dict(book.execute("SELECT submission_id, result_json FROM submissions").fetchall())
    return {}


@pytest.mark.timeout(1200)
def test_a_cluster_gives_the_scores_of_a_local_run(scenario: Scenario) -> None:
    for name, (losses, words) in LOCAL.items():  # (the slow copies of the solution get its full marks)
        assert_loses_exactly(scenario.ray, name, losses, words)
    assert results(scenario.ray, "q-padding").score < results(scenario.ray, "q-solution").score


@pytest.mark.timeout(1200)
def test_gpu_work_is_graded_on_the_gpu_node_only(scenario: Scenario) -> None:
    for name in [*SAMPLES, *SLOW, CRASH]:
        node = results(scenario.ray, name).extra_data["node"]
        assert node.endswith(scenario.gpu_node) == (name in GPU_WORK), (name, node)
        assert results(scenario.ray, name).extra_data["device"] == "cpu"  # (the declared GPU has no CUDA behind it)
    summary = (scenario.ray / "summary.html").read_text()
    assert "Graded on " in summary and f"{scenario.gpu_node}: 2 on cpu" in summary


@pytest.mark.timeout(1200)
def test_a_node_killed_mid_run_loses_nothing_and_doubles_nothing(scenario: Scenario) -> None:
    rows = _rows(scenario.ray)
    assert sorted(rows) == sorted([*SAMPLES, *SLOW, CRASH])  # one row each (the gradebook's key)
    stored = [json.loads(row) for row in rows.values()]
    assert not any(result["internal_error"] for result in stored)
    lost = [result for result in stored if result["provenance"].get("attempts")]
    assert len(lost) >= 1
    for result in lost:  # graded again by a worker on another node, and said so in its results.json
        assert result["provenance"]["attempts"] == 2 and result["provenance"]["lost"]
        assert results(scenario.ray, result["submission_id"]).extra_data["attempts"] == 2


@pytest.mark.timeout(1200)
def test_a_head_started_again_grades_only_what_was_not_finished(scenario: Scenario) -> None:
    finished = len(scenario.rows_at_head_kill)
    assert f"{finished} unchanged submission" in scenario.resumed.stderr
    left = len(SAMPLES) + len(SLOW) + 1 - finished
    assert f"{left} graded" in scenario.resumed.stderr


@pytest.mark.timeout(1200)
def test_a_kernel_on_a_node_sees_nothing_of_ray(scenario: Scenario) -> None:
    for name in SLOW:  # their last cell fails if the kernel sees Ray's files, environment or control port
        assert results(scenario.ray, name).extra_data["cell_problems"] == [], name


@pytest.mark.timeout(1200)
def test_a_students_crash_is_a_result_not_a_lost_node(scenario: Scenario) -> None:
    crashed = results(scenario.ray, CRASH)  # graded once, where it was sent: Ray retries lost nodes only
    assert "attempts" not in crashed.extra_data and not crashed.extra_data["internal_error"]
    assert crashed.extra_data["cell_problems"][0]["kind"] == "kernel-died"  # (the cells after it: not run)
    assert crashed.score < results(scenario.ray, "q-solution").score
