"""Render results as HTML: each student's feedback, and the class dashboard.

Rendering reads results and nothing else. Templates are Jinja2 with autoescaping on, so text
from a notebook (messages, answers, tracebacks) can never become markup. The dashboard's charts
are drawn with matplotlib's object API (never pyplot, so no global figure or backend state is
touched) and embedded as PNG data URIs: the pages stay self-contained.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import io
import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from grader.facts import PROTECTION_NAMES, PROTECTIONS, WARNING_PREFIX, CellProblem
from grader.reports.results import CheckResult, Figure, SubmissionResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure as ChartFigure

    from grader.reports.similarity import SimilarPair

View = Literal["student", "instructor"]
OUTCOME_LABELS = {"passed": "passed", "failed": "failed", "error": "error", "manual": "graded by hand", "skipped": "skipped"}
CLAIM_LABELS = {"agrees": "agrees", "contradicts": "contradicts", "unmatched": "not found", "not-checked": "not checked"}
PROBLEM_LABELS = {"error": "error", "timeout": "timed out", "not-run": "not run", "kernel-died": "kernel died"}
FEEDBACK_FILES = {"student": "feedback.html", "instructor": "feedback-instructor.html"}
TOP_FAILURES = 10  # failure messages the dashboard lists per assignment
SLOWEST_SHOWN = 3
MIN_TIMES_CHARTED = 3  # below this, the timing numbers say all a histogram would
CHART_SCALE = 2  # PNG pixels per CSS pixel, so charts stay sharp on high-density screens
CHART_COLORS = {"ok": "#1a7f37", "bad": "#cf222e", "accent": "#0969da", "muted": "#57606a", "line": "#d0d7de"}


def _points(value: float) -> str:
    return f"{value:g}"


def _pts(value: float) -> str:
    return f"{value:g} pt{'' if value == 1 else 's'}"


def _percent(value: float) -> str:
    """A percentage, rounded to a whole number ('67%')."""
    return f"{value:.0f}%"


def _share(value: float) -> str:
    """A fraction (0 to 1) as a percentage, rounded to a whole number (0.75 -> '75%')."""
    return _percent(100 * value)


def _seconds(value: float) -> str:
    """A duration as a person reads it: '4.2 s', '56 s', '3.1 min'."""
    if value >= 120:
        return f"{value / 60:.1f} min"
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


def _data_uri(figure: Figure) -> str:
    """A data URI for an image; SVG is base64-encoded so it can only ever be an image."""
    if figure.mime == "image/svg+xml":
        return "data:image/svg+xml;base64," + base64.b64encode(figure.data.encode("utf-8")).decode("ascii")
    payload = "".join(figure.data.split())
    try:
        base64.b64decode(payload, validate=True)
    except ValueError:
        return ""
    return "data:image/png;base64," + payload


def problems_summary(problems: Sequence[CellProblem]) -> str:
    """One line about a notebook's cell problems ('2 cell errors, 1 timeout')."""
    counts = {kind: sum(1 for problem in problems if problem.kind == kind) for kind in ("error", "timeout")}
    parts = [f"{count} cell {kind}{'s' if count > 1 else ''}" for kind, count in counts.items() if count]
    if any(problem.kind == "kernel-died" for problem in problems):
        parts.append("kernel died")
    return ", ".join(parts)


def feedback_link(result: SubmissionResult) -> str:
    """The instructor feedback page of a result, relative to the output folder."""
    return f"{result.submission_id}/{FEEDBACK_FILES['instructor']}"


@functools.cache
def _environment() -> Environment:
    """The templates' one environment: it compiles each template once per process (compiling the feedback page's
    took 50 ms of the run's main process for every page it wrote, two per submission)."""
    environment = Environment(
        loader=PackageLoader("grader.reports", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["points"] = _points
    environment.filters["pts"] = _pts
    environment.filters["percent"] = _percent
    environment.filters["share"] = _share
    environment.filters["seconds"] = _seconds
    environment.filters["data_uri"] = _data_uri
    environment.filters["problems_summary"] = problems_summary
    environment.filters["feedback_link"] = feedback_link
    return environment


def render_feedback(result: SubmissionResult, view: View, self_check: bool = False, published: bool = False) -> str:
    """One submission's feedback page; the student view leaves hidden checks out until grades are ``published``
    (then it shows their verdicts, explanations and hints too; never the hidden inputs' seed, which only the
    instructor's view shows).

    ``self_check``: a student's own run of the public checks (its notes, such as how many hidden
    checks the instructor will run, are shown to the student).
    """
    checks = result.visible_checks(view, published)
    hidden = [check for check in result.checks if check not in checks]
    shown = [check for check in checks if check.automatic]
    return (
        _environment()
        .get_template("feedback.html.j2")
        .render(
            result=result,
            view=view,
            self_check=self_check,
            published=published,
            checks=checks,
            hidden_count=len(hidden),
            hidden_points=sum(check.points for check in hidden),
            shown_score=sum(check.score for check in shown),
            shown_max=sum(check.points for check in shown),
            outcome_labels=OUTCOME_LABELS,
            problem_labels=PROBLEM_LABELS,
            claim_labels=CLAIM_LABELS,
        )
    )


@dataclass(frozen=True)
class PassRate:
    """How one check went across the class."""

    check_id: str
    name: str
    points: float
    passed: int = 0
    failed: int = 0
    error: int = 0
    other: int = 0
    by_hand: bool = False  # an instructor grades it: the grader only pre-screens the answer

    @property
    def graded(self) -> int:
        """Submissions the grader judged on this check (manual and skipped ones left out)."""
        return self.passed + self.failed + self.error

    @property
    def rate(self) -> float | None:
        """Percentage of judged submissions that passed; None for checks graded by hand or never judged."""
        # A written answer never 'passes' here (a real one waits for the instructor), so a rate
        # would only count the answers that failed pre-screening.
        if self.by_hand or not self.graded:
            return None
        return 100 * self.passed / self.graded


@dataclass(frozen=True)
class ManualItem:
    """A written answer waiting for the instructor."""

    result: SubmissionResult
    check: CheckResult


@dataclass(frozen=True)
class Chart:
    """A chart as a PNG data URI, with the text that stands in for it and its size in CSS pixels."""

    src: str
    alt: str
    width: int
    height: int


@dataclass(frozen=True)
class ScoreStats:
    """Automatic scores of the graded submissions, as percentages of their maximum."""

    count: int
    mean: float
    median: float
    minimum: float
    maximum: float
    max_score: float | None  # the maximum in points, when every submission shares it

    def points(self, percent: float) -> str:
        """A percentage as points out of the shared maximum ('7.5 / 10'), or '' when maxima differ."""
        if self.max_score is None:
            return ""
        return f"{percent * self.max_score / 100:.3g} / {self.max_score:g}"


@dataclass(frozen=True)
class FailureGroup:
    """Failed or errored checks whose messages read the same once numbers are set aside."""

    key: str  # the message with every number replaced by '#'
    example: str  # the first message seen, as written
    count: int  # the submissions that got it (once each, however many of their checks did)
    checks: tuple[tuple[str, int], ...]  # (check id, occurrences), most frequent first


@dataclass(frozen=True)
class TimingStats:
    """How long grading took per submission."""

    total_s: float
    mean_s: float
    median_s: float
    slowest: tuple[SubmissionResult, ...]


@dataclass(frozen=True)
class Group:
    """The results of one assignment (or the ungradeable ones), and what the dashboard shows of them."""

    name: str | None
    title: str
    results: list[SubmissionResult]
    pass_rates: list[PassRate] = field(default_factory=list)
    manual: list[ManualItem] = field(default_factory=list)
    scores: ScoreStats | None = None
    score_chart: Chart | None = None
    pass_chart: Chart | None = None
    failures: tuple[FailureGroup, ...] = ()
    timing: TimingStats | None = None
    time_chart: Chart | None = None

    @property
    def anchor(self) -> str:
        """The id of the group's section on the page."""
        return f"assignment-{self.name}" if self.name else "not-recognised"


# A number that starts a word (not the 8 of 'int8' or the 16 of 'fp16'), or a hex address.
_NUMBER = re.compile(r"(?<![\w.])(?:0x[0-9a-fA-F]+|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")


def failure_key(message: str) -> str:
    """A message with its numbers replaced by '#' and whitespace collapsed, so measured variants group."""
    return " ".join(_NUMBER.sub("#", message).split())


def common_failures(results: Sequence[SubmissionResult], limit: int = TOP_FAILURES) -> tuple[FailureGroup, ...]:
    """The messages of failed and errored checks that the most submissions got, most first (ties: first seen first):
    one untouched starter failing every check with one message counts once."""
    examples: dict[str, str] = {}
    counts: Counter[str] = Counter()
    checks: dict[str, Counter[str]] = {}
    for result in results:
        keys: dict[str, None] = {}  # in order of appearance: ties list the first seen first
        for check in result.checks:
            if check.outcome not in ("failed", "error"):
                continue
            key = failure_key(check.message)
            examples.setdefault(key, check.message)
            keys[key] = None
            checks.setdefault(key, Counter())[check.check_id] += 1
        counts.update(list(keys))
    # Counter.most_common keeps insertion order among equal counts: ties list the first seen first.
    return tuple(
        FailureGroup(key, examples[key], count, tuple(checks[key].most_common())) for key, count in counts.most_common(limit)
    )


def _score_stats(graded: Sequence[SubmissionResult]) -> ScoreStats | None:
    """Mean, median and range of the graded submissions' automatic scores, or None when none was graded."""
    percents = [100 * result.score / result.max_score for result in graded]
    if not percents:
        return None
    maxima = {result.max_score for result in graded}
    return ScoreStats(
        count=len(percents),
        mean=statistics.fmean(percents),
        median=statistics.median(percents),
        minimum=min(percents),
        maximum=max(percents),
        max_score=maxima.pop() if len(maxima) == 1 else None,
    )


def _timing_stats(results: Sequence[SubmissionResult]) -> TimingStats | None:
    """Total, mean and median grading time, and the slowest submissions."""
    if not results:
        return None
    durations = [result.duration_s for result in results]
    slowest = sorted(results, key=lambda result: result.duration_s, reverse=True)[:SLOWEST_SHOWN]
    return TimingStats(sum(durations), statistics.fmean(durations), statistics.median(durations), tuple(slowest))


def _new_chart(width_in: float, height_in: float) -> ChartFigure:
    """A figure outside pyplot: no global state, and no backend is selected for the whole process."""
    # Imported here, not at the top: matplotlib costs about 0.4 s to import and only the
    # dashboard draws.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as ChartFigure

    figure = ChartFigure(figsize=(width_in, height_in), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)  # attaches itself: saving never depends on the backend pyplot would pick
    return figure


def _style_axes(axes: Axes) -> None:
    """The page's muted look: no top or right frame, grey ticks, small labels."""
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    for side in ("left", "bottom"):
        axes.spines[side].set_color(CHART_COLORS["muted"])
    axes.tick_params(colors=CHART_COLORS["muted"], labelsize=9, labelcolor="#1f2328")


def _finish_chart(figure: ChartFigure, alt: str) -> Chart:
    """The figure as a PNG data URI at twice its CSS size, with its alt text."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100 * CHART_SCALE, metadata={"Software": None})
    width_in, height_in = figure.get_size_inches()
    src = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
    return Chart(src=src, alt=alt, width=round(width_in * 100), height=round(height_in * 100))


def _histogram(
    values: Sequence[float], bins: int | list[int], span: tuple[float, float], height: float, color: str, xlabel: str, alt: str
) -> Chart:
    """A histogram of submissions over ``span`` (integer counts on the y axis), as a chart."""
    from matplotlib.ticker import MaxNLocator

    figure = _new_chart(6.8, height)
    axes = figure.add_subplot()
    axes.hist(values, bins=bins, range=span, color=color, edgecolor="white")
    axes.set_xlim(*span)
    if isinstance(bins, list):
        axes.set_xticks(bins)
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel(xlabel, fontsize=9)
    axes.set_ylabel("Submissions", fontsize=9)
    _style_axes(axes)
    return _finish_chart(figure, alt)


def score_histogram(graded: Sequence[SubmissionResult], title: str) -> Chart | None:
    """A histogram of automatic scores in 10-point bins of the percentage of the maximum."""
    percents = [100 * result.score / result.max_score for result in graded]
    if not percents:
        return None
    alt = (
        f"Histogram of the automatic scores of {len(percents)} graded submission{'s' if len(percents) != 1 else ''}"
        f" of {title}: mean {statistics.fmean(percents):.0f}%, lowest {min(percents):.0f}%, highest {max(percents):.0f}%."
    )
    bins = list(range(0, 101, 10))
    return _histogram(percents, bins, (0, 100), 2.4, CHART_COLORS["accent"], "Automatic score (% of the maximum)", alt)


def pass_rate_chart(rates: Sequence[PassRate]) -> Chart | None:
    """Horizontal bars of each automatically judged check's pass rate, in rubric order from the top."""
    judged = [(row.check_id, row.rate) for row in rates if row.rate is not None]
    if not judged:
        return None
    from matplotlib.ticker import PercentFormatter

    figure = _new_chart(6.8, 0.6 + 0.26 * len(judged))
    axes = figure.add_subplot()
    labels = [check_id for check_id, _ in judged]
    values = [rate for _, rate in judged]
    colors = [CHART_COLORS["ok"] if rate >= 50 else CHART_COLORS["bad"] for rate in values]
    positions = list(range(len(judged)))
    axes.barh(positions, [100] * len(judged), color=CHART_COLORS["line"], height=0.7)
    axes.barh(positions, values, color=colors, height=0.7)
    axes.set_yticks(positions, labels)
    axes.invert_yaxis()
    axes.set_xlim(0, 100)
    axes.xaxis.set_major_formatter(PercentFormatter())
    axes.set_xlabel("Passed (% of submissions the grader judged)", fontsize=9)
    _style_axes(axes)
    alt = "Pass rate per check: " + "; ".join(f"{check_id} {rate:.0f}%" for check_id, rate in judged) + "."
    return _finish_chart(figure, alt)


def time_histogram(results: Sequence[SubmissionResult]) -> Chart | None:
    """A histogram of the grading time per submission, from zero; None for fewer than three submissions."""
    durations = [result.duration_s for result in results]
    if len(durations) < MIN_TIMES_CHARTED:
        return None
    alt = (
        f"Histogram of grading time per submission: {len(durations)} submission{'s' if len(durations) != 1 else ''},"
        f" mean {statistics.fmean(durations):.1f} s, slowest {max(durations):.1f} s."
    )
    span = (0.0, max(max(durations), 1.0))
    return _histogram(durations, 12, span, 2.0, CHART_COLORS["muted"], "Grading time per submission (s)", alt)


def _pass_rates(members: Sequence[SubmissionResult]) -> list[PassRate]:
    """Each check's outcome counts across the submissions, in the order checks first appear."""
    rates: dict[str, dict[str, Any]] = {}
    for result in members:
        for check in result.checks:
            row = rates.setdefault(
                check.check_id,
                {"name": check.name, "points": check.points, "passed": 0, "failed": 0, "error": 0, "other": 0, "by_hand": False},
            )
            row["by_hand"] = row["by_hand"] or check.graded_by == "instructor"
            row[check.outcome if check.outcome in ("passed", "failed", "error") else "other"] += 1
    return [PassRate(check_id, **row) for check_id, row in rates.items()]


def _group(name: str | None, members: list[SubmissionResult]) -> Group:
    """One assignment's section of the dashboard: its table, statistics, charts and queues."""
    title = next((result.title for result in members if result.title), None) or (name or "Not recognised")
    graded = [result for result in members if not result.error and result.max_score > 0]
    pass_rates = _pass_rates(members)
    return Group(
        name=name,
        title=title,
        results=members,
        pass_rates=pass_rates,
        manual=[ManualItem(result, check) for result in members for check in result.checks if check.pending],
        scores=_score_stats(graded),
        score_chart=score_histogram(graded, title),
        pass_chart=pass_rate_chart(pass_rates),
        failures=common_failures(members),
        timing=_timing_stats(members),
        time_chart=time_histogram(members),
    )


def _groups(results: Sequence[SubmissionResult]) -> list[Group]:
    """The results by assignment, in name order, the unrecognised ones last."""
    by_assignment: dict[str | None, list[SubmissionResult]] = {}
    for result in results:
        by_assignment.setdefault(result.assignment, []).append(result)
    return [_group(name, by_assignment[name]) for name in sorted(by_assignment, key=lambda key: (key is None, key or ""))]


@dataclass(frozen=True)
class SimilarityReport:
    """One assignment's similar pairs (grader/reports/similarity.py), for the class's similarity page."""

    assignment: str
    compared: int
    threshold: float
    pairs: tuple[SimilarPair, ...]
    unfilled: tuple[str, ...]
    problem: str = ""  # why the assignment's notebooks could not be compared, if they could not


def render_similarity(reports: Sequence[SimilarityReport]) -> str:
    """The class's similarity page: per assignment, the ranked pairs and their matching code side by side."""
    return _environment().get_template("similarity.html.j2").render(reports=reports)


def _protections(results: Sequence[SubmissionResult]) -> list[tuple[str, str, tuple[str, ...], int]]:
    """The rows of the protections table the results were graded under: (how, whole/partial/none, protections,
    submissions), strongest first."""
    counts = Counter(result.sandbox_mode for result in results if result.sandbox_mode in PROTECTIONS)
    return [(*PROTECTIONS[mode], counts[mode]) for mode in PROTECTIONS if counts[mode]]


def render_summary(
    results: Sequence[SubmissionResult], notices: Sequence[str] = (), similarity: Sequence[SimilarityReport] = ()
) -> str:
    """The class dashboard: notices, then per assignment scores, checks, common failures, answers to grade, timing
    (and, where the similarity page was written, how many pairs of each assignment it shows)."""
    return (
        _environment()
        .get_template("summary.html.j2")
        .render(
            results=results,
            notices=[notice for notice in notices if not notice.startswith(WARNING_PREFIX)],
            sandbox_warnings=[notice.removeprefix(WARNING_PREFIX) for notice in notices if notice.startswith(WARNING_PREFIX)],
            protections=_protections(results),
            protection_names=PROTECTION_NAMES,
            similarity={report.assignment: report for report in similarity},
            claim_labels=CLAIM_LABELS,
            groups=_groups(results),
            not_graded=sum(1 for result in results if result.error),
            pending_answers=sum(1 for result in results for check in result.checks if check.pending),
            tampered=[result for result in results if result.tampered],
            generated_at=dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        )
    )
