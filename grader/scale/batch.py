"""A class's run: skip what is unchanged, grade the rest (in parallel), store each result at once.

The gradebook (``OUT/gradebook.sqlite``) decides what a run may skip: a submission whose
notebook, assignment files, grader version and model settings are unchanged keeps its stored
result (``--force`` regrades everything). Every result is written (its files, then its
gradebook row) as soon as it arrives, so a run killed at any point and started again grades
only what is left.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import secrets
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from grader import __version__
from grader.digest import file_sha256
from grader.discover.submissions import Found
from grader.errors import GraderError
from grader.grading.course import RUBRIC_FILE, Course
from grader.grading.kernels import kernel_view_for
from grader.grading.settings import GradingSettings
from grader.kernel.sandbox import sandbox_notices
from grader.reports.output import SIMILARITY_FILE, write_class_reports, write_submission
from grader.reports.render import FEEDBACK_FILES
from grader.reports.results import SubmissionResult, result_to_json
from grader.scale.gradebook import Fingerprint, Gradebook
from grader.scale.runner import RunConfig, Task, default_workers, grade_tasks, kernel_threads

GRADEBOOK_NAME = "gradebook.sqlite"
# The gradebook's note that grades were published (its value: when): every student's page then shows the hidden
# checks, and pages written later (a regrade) too.
PUBLISHED_KEY = "published"
REPORT_EVERY_S = 30.0  # how often the class reports are refreshed during a run (charts cost CPU) ...
REPORT_SHARE = 0.05  # ... and less often where drawing them would take more than this share of the run


@dataclass(frozen=True)
class BatchOptions:
    """How a class is graded (the command line's options)."""

    out_dir: Path
    assignment: str | None = None
    real_models: bool = False
    zoo_key: str = ""
    cache_dir: Path | None = None
    seed: int | None = None
    keep_workdirs: bool = False
    workers: int | None = None  # None: from the CPUs and memory
    force: bool = False
    warm_kernels: bool = True
    overlap: bool = True  # check one submission while the next one's notebook runs (grader.scale.overlap)
    ray: str | None = None  # grade on this Ray cluster ("auto", "local", "ray://HEAD:10001") instead of local workers
    no_sandbox: bool = False  # asked by name to grade without the sandbox (--no-sandbox, GRADER_NO_SANDBOX=1)


@dataclass
class BatchOutcome:
    """What a run did: every submission's result (stored or new), in discovery order."""

    results: list[SubmissionResult]
    graded: int = 0
    reused: int = 0
    workers: int = 1
    notices: list[str] = field(default_factory=list)


def fingerprints(course: Course, settings_key: str) -> Callable[[str | None], Fingerprint | None]:
    """The current fingerprint of an assignment (None: the course no longer has it)."""
    cache: dict[str | None, Fingerprint | None] = {}

    def of(name: str | None) -> Fingerprint | None:
        if name not in cache:
            digest = hashlib.sha256()
            if name is None:  # ungradeable: depends on every rubric (identification)
                paths = [course.folder(other) / RUBRIC_FILE for other in course.names()]
            elif name in course.names():
                assignment = course.assignment(name)
                paths = assignment.source_files()
            else:
                cache[name] = None
                return None
            for path in paths:
                digest.update(path.name.encode() + b"\0" + (file_sha256(path) or "missing").encode() + b"\0")
            cache[name] = Fingerprint(digest.hexdigest(), __version__, settings_key)
        return cache[name]

    return of


def grade_batch(
    found: Sequence[Found],
    course: Course,
    options: BatchOptions,
    on_result: Callable[[SubmissionResult, bool], None] = lambda result, reused: None,
    notices: Sequence[str] = (),
) -> BatchOutcome:
    """Grade (or reuse) every found submission; ``on_result(result, reused)`` is told of each."""
    out_dir = options.out_dir
    settings_key = ("real-models" if options.real_models else f"tiny-zoo:{options.zoo_key}") + (
        f"|seed={options.seed}" if options.seed is not None else ""
    )
    fingerprint_of = fingerprints(course, settings_key)
    results: dict[str, SubmissionResult] = {}
    tasks: list[Task] = []
    outcome = BatchOutcome(results=[], notices=list(notices))
    names = {item.submission_id: item.name for item in found if item.name}
    late = {item.submission_id for item in found if item.late}
    with Gradebook(out_dir / GRADEBOOK_NAME) as gradebook:
        published = gradebook.meta(PUBLISHED_KEY) is not None
        for index, item in enumerate(found):
            stored = None
            if not options.force:
                stored = gradebook.unchanged(item.submission_id, file_sha256(item.path), fingerprint_of)
                if stored is not None and options.assignment is not None and stored.assignment != options.assignment:
                    stored = None
            if stored is not None:
                stored = replace(stored, late=item.submission_id in late)  # as this download marks it
                if not all((out_dir / item.submission_id / name).exists() for name in ("results.json", *FEEDBACK_FILES.values())):
                    write_submission(stored, out_dir, published)  # the files went missing: rewrite, no need to regrade
                results[item.submission_id] = stored
                outcome.reused += 1
                on_result(stored, True)
            else:
                tasks.append(Task(index, item.submission_id, str(item.path), options.assignment, item.student))
        if outcome.reused:  # said in the terminal; the reports show the class, not this run
            outcome.notices.append(
                f"{outcome.reused} unchanged submission{'s were' if outcome.reused != 1 else ' was'} not graded again "
                "(same notebook, rubric, reference and grader); pass --force to regrade."
            )
        workers = options.workers or default_workers(len(tasks))
        outcome.workers = workers
        seed = options.seed if options.seed is not None else secrets.randbits(32)
        settings = GradingSettings(
            real_models=options.real_models,
            seed=seed,
            keep_workdirs=options.keep_workdirs,
            warm_kernels=options.warm_kernels,
            checking=GradingSettings.checking if options.overlap else 0,
            fork_kernels=not os.environ.get("GRADER_LAUNCH_KERNELS"),
            kernel_threads=kernel_threads(workers),
            hidden_paths=_hidden_from_kernels(found, out_dir),
            no_sandbox=options.no_sandbox,
        )
        if tasks and not options.no_sandbox:
            kernel_view_for(course.root, settings.hidden_paths)  # refuses here, before any worker starts
        config = RunConfig(str(course.root), str(options.cache_dir) if options.cache_dir else None, settings)
        order = [item.submission_id for item in found]

        def ordered() -> list[SubmissionResult]:
            return [results[submission_id] for submission_id in order if submission_id in results]

        next_report = time.monotonic() + REPORT_EVERY_S
        graded_now: set[str] = set()  # the submissions this run graded (the others' results were kept)
        # On Ray, --workers caps the actors; without it the cluster's nodes decide.
        for result in grade_tasks(tasks, config, (options.workers or 0) if options.ray else workers, options.ray, course):
            if result.submission_id in names:  # the name the LMS wrote (Canvas's gradebook import shows it)
                result = replace(result, student_name=names[result.submission_id])
            result = replace(result, late=result.submission_id in late)
            graded_now.add(result.submission_id)
            write_submission(result, out_dir, published)
            gradebook.record(result, fingerprint_of(result.assignment), regrade=result.internal_error)
            results[result.submission_id] = result
            outcome.graded += 1
            on_result(result, False)
            if time.monotonic() > next_report:
                started = time.monotonic()
                so_far = ordered()
                write_class_reports(so_far, out_dir, [*notices, *sandbox_notices(so_far, graded_now)])
                drawing_s = time.monotonic() - started  # grows with the class: keep it a small share of the run
                next_report = time.monotonic() + max(REPORT_EVERY_S, drawing_s / REPORT_SHARE)
        outcome.results = ordered()
        warnings = sandbox_notices(outcome.results, graded_now)
        spread = spread_notice(outcome.results, options.ray)
        warnings += [spread] if spread else []
        outcome.notices += warnings
        # The reports depend only on the results and the discovery's notices: when neither
        # changed since they were written, they are up to date (an unchanged regrade stays fast).
        reports_key = _reports_key(outcome.results, notices)
        reports = [out_dir / "summary.html", out_dir / "grades.csv", out_dir / SIMILARITY_FILE]
        if gradebook.meta("reports_key") != reports_key or not all(path.exists() for path in reports):
            notebooks = {item.submission_id: item.path for item in found}
            starters = _starters(course, {result.assignment for result in outcome.results if result.assignment})
            write_class_reports(outcome.results, out_dir, [*notices, *warnings], notebooks, starters)
            gradebook.set_meta("reports_key", reports_key)
    return outcome


def spread_notice(results: Sequence[SubmissionResult], ray: str | None = None) -> str | None:
    """How the class's grading was spread over machines and devices (said where there were several machines, or the
    run was on a Ray cluster)."""
    by_node: dict[str, Counter[str]] = {}
    for result in results:
        if result.node:
            by_node.setdefault(result.node, Counter())[result.device or "no kernel"] += 1
    if not by_node or (len(by_node) < 2 and ray is None):
        return None
    where = "; ".join(
        f"{node}: " + ", ".join(f"{count} on {device}" for device, count in sorted(devices.items()))
        for node, devices in sorted(by_node.items())
    )
    engine = f" (this run on the Ray cluster {ray!r})" if ray else ""
    machines = f"{len(by_node)} machine{'s' if len(by_node) != 1 else ''}"
    return f"Graded on {machines}{engine}: {where}."


def _hidden_from_kernels(found: Sequence[Found], out_dir: Path) -> tuple[str, ...]:
    """What no kernel may see: the output folder and every submission's folder (all of them:
    kernels see an allow-list, so only those inside it cost a mount)."""
    folders = sorted({str(item.path.parent.resolve()) for item in found})
    return (str(out_dir.resolve()), *folders)


def _reports_key(results: Sequence[SubmissionResult], notices: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for result in results:
        digest.update(result_to_json(result).encode() + b"\0")
    for notice in notices:
        digest.update(notice.encode() + b"\0")
    return digest.hexdigest()


def publish(out_dir: Path, undo: bool = False) -> list[SubmissionResult]:
    """Publish the grades of an output folder: re-render every student's feedback page from the gradebook with the
    hidden checks' verdicts, explanations and hints (never the hidden inputs' seed), as Gradescope shows
    ``after_published`` tests. ``undo`` hides them again. Returns the results whose pages were written.

    Raises FileNotFoundError when the folder holds no gradebook (nothing was graded there)."""
    path = out_dir / GRADEBOOK_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{out_dir} holds no {GRADEBOOK_NAME}: grade the submissions into it first")
    with Gradebook(path) as gradebook:
        if undo:
            gradebook.delete_meta(PUBLISHED_KEY)
        else:
            gradebook.set_meta(PUBLISHED_KEY, dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
        results = gradebook.results()
    for result in results:
        write_submission(result, out_dir, published=not undo)
    return results


def _starters(course: Course, names: set[str]) -> dict[str, Path]:
    """Each assignment's starter notebook (what the similarity report leaves out), for those the course still loads."""
    starters = {}
    for name in sorted(names):
        with contextlib.suppress(GraderError):
            starters[name] = course.assignment(name).starter
    return starters
