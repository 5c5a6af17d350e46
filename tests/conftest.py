"""Shared fixtures: the course, the tiny model zoo, a grader, and mistake notebooks.

Every test that grades executes real notebooks in real kernels on the tiny model; nothing
here mocks nbclient, the kernel or the model.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from grader.authoring import Cells, load_notebook_sources, make_notebook, with_edits, write_notebook
from grader.grading.course import Course
from grader.grading.grader import Grader
from grader.grading.settings import GradingSettings
from grader.kernel.harness import Harness
from grader.kernel.session import KernelSession
from grader.reports.results import CheckResult, SubmissionResult
from grader.scale.runner import share_cpus
from grader.zoo import ModelZoo

share_cpus()  # as `grade` does, before anything imports torch: the tests' kernels and graders share 2 CPUs

ROOT = Path(__file__).resolve().parent.parent
SEED = 20261123

# Import every assignment's check modules as course_assignments.<name>.checks (and .hidden_checks),
# so that the judging tests can import their functions.
Course(ROOT).all()

# The modules that take longest (seconds of one xdist worker, 2 CPUs, 2026-11-27), started first: with
# `--dist loadfile` a module runs whole on one worker, and xdist would otherwise start those with the most tests
# first, leaving long modules of few tests (a kit's, the gradebook's) to finish alone at the end.
LONGEST_FIRST = (
    "test_samples_quantization",  # 311 s: one `grade` run over the samples and corpus
    "test_samples_latency",  # 188 s
    "test_samples_ptq_bnb",  # 142 s
    "test_cluster",  # 110 s: a Ray cluster of three nodes, a node and the head killed
    "test_student_kits",  # 103 s
    "test_student_kit",  # 90 s
    "test_gradebook",  # 79 s
    "test_samples_perplexity",  # 72 s
    "test_sandbox",  # 63 s
    "test_gradescope",  # 63 s
    "test_template",  # 60 s
    "test_hostile",  # 56 s
    "test_course_assignment",  # 47 s
    "test_checks_quantization",  # 46 s
    "test_zoo",  # 37 s
    "test_self_check",  # 35 s
    "test_checks_ptq_bnb",  # 34 s
)


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: keep the order below
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest modules first (see LONGEST_FIRST), the others in their usual order."""
    rank = {name: position for position, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))


def kernel_env(zoo: ModelZoo) -> dict[str, str]:
    """A test kernel's environment: the zoo served offline, and one torch thread, as `grade` gives each kernel when two
    workers share two CPUs (the suite's two xdist workers run two kernels at once). With the library's default, each
    kernel's intra-op threads wait at every operator's barrier for a sibling thread the other kernel has
    descheduled: the main thread sleeps through most of a generate, which the evidence's timeline reads as work
    the kernel never did (grader/kernel/evidence.py)."""
    return {**os.environ, **zoo.kernel_env(), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@contextlib.contextmanager
def installed_kernel(workdir: Path, zoo: ModelZoo, cells: list[str], call_timeout_s: float = 60) -> Iterator[Harness]:
    """A real kernel with the grader's runtime installed before any cell (as in grading), after running ``cells``."""
    with KernelSession(workdir, kernel_env(zoo)) as session:
        harness = Harness(session, call_timeout_s=call_timeout_s)
        assert harness.install().ok
        assert session.cells.run(make_notebook(None, [("code", cell) for cell in cells]), 120, 300).problems == ()
        yield harness


@pytest.fixture(scope="session")
def root() -> Path:
    """The repository, which is also the course folder."""
    return ROOT


@pytest.fixture(scope="session")
def zoo() -> ModelZoo:
    """The tiny model zoo, built once per machine (in $GRADER_CACHE_DIR or ~/.cache)."""
    built = ModelZoo()
    built.ensure_built()
    return built


@pytest.fixture(scope="session")
def course() -> Course:
    """The course in this repository."""
    return Course(ROOT)


@pytest.fixture(scope="session")
def grader(course: Course, zoo: ModelZoo) -> Iterator[Grader]:
    """A grader with a fixed hidden-input seed (closed at the end, with the kernel it keeps warm)."""
    grader = Grader(course, zoo, GradingSettings(seed=SEED, kernel_threads=1))  # tests run two at a time on 2 CPUs
    yield grader
    grader.close()


@pytest.fixture(scope="session")
def ptq_sources():
    """The ptq-bnb notebook sources (starter, solution, sample edits)."""
    return load_notebook_sources(ROOT / "assignments" / "ptq-bnb")


@pytest.fixture
def notebook_from(tmp_path: Path) -> Callable[..., Path]:
    """Write a ptq-bnb notebook from cells (optionally edited) and return its path."""

    def write(name: str, cells: Cells, edits: list[tuple[str, str]] | None = None, assignment: str | None = "ptq-bnb") -> Path:
        path = tmp_path / f"{name}.ipynb"
        write_notebook(path, make_notebook(assignment, with_edits(cells, edits or [])))
        return path

    return write


def grade_bundles(
    grader: Grader, assignment: str, bundles: dict[str, list[tuple[str, str]]], folder: Path
) -> dict[str, SubmissionResult]:
    """Grade the assignment's solution with each bundle of exact edits; every one must be gradable."""
    solution = load_notebook_sources(ROOT / "assignments" / assignment).solution_cells()
    graded = {}
    for name, edits in bundles.items():
        path = folder / f"{name}.ipynb"
        write_notebook(path, make_notebook(assignment, with_edits(solution, edits)))
        graded[name] = grader.grade(path, name)
        assert graded[name].error is None, graded[name].error
    return graded


def outcome(graded: dict[str, SubmissionResult], bundle: str, check_id: str) -> tuple[str, str]:
    """(outcome, message) of one check of one graded bundle."""
    result = check(graded[bundle], check_id)
    return result.outcome, result.message


def check(result: SubmissionResult, check_id: str) -> CheckResult:
    """One check's result, by id."""
    for item in result.checks:
        if item.check_id == check_id:
            return item
    raise KeyError(f"{check_id} not in {[c.check_id for c in result.checks]}")


def lost(result: SubmissionResult) -> set[str]:
    """Ids of automatic checks that did not award all their points."""
    return {c.check_id for c in result.checks if c.automatic and c.score < c.points}
