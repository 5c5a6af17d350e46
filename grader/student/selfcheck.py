"""``grade check``: a student runs the public checks on their own notebook, offline.

It is the instructor's grading path with the hidden checks left out: the notebook runs in a
fresh kernel on the tiny models, each public check calls the student's functions, and the
verdicts are shown as a terminal table and as the student's feedback page. The public checks'
inputs are drawn from a fixed seed, the same one ``grade build-student-kit`` records the
reference side's values with, so a kit replays them without the reference implementation.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Group
from rich.markup import escape
from rich.style import Style
from rich.table import Table
from rich.text import Text

from grader.discover.notebook import identify_assignment, read_notebook
from grader.errors import UsageError
from grader.grading.course import Course
from grader.grading.grader import Grader
from grader.grading.settings import GradingSettings
from grader.reports.results import SubmissionResult
from grader.zoo import ModelZoo

SELF_CHECK_SEED = 0  # public checks only: their inputs are public, and a kit's recorded values depend on them
SELF_CHECK_ID = "self-check"
OUTCOME_STYLES = {
    "passed": "[green]passed[/]",
    "failed": "[red]failed[/]",
    "error": "[red]error[/]",
    "manual": "[blue]by hand[/]",
    "skipped": "[yellow]skipped[/]",
}


def self_check_settings(targets: Sequence[str] = (), record_reference: bool = False) -> GradingSettings:
    """How a self-check grades: public checks, fixed seed, no kernel kept warm."""
    return GradingSettings(
        seed=SELF_CHECK_SEED,
        warm_kernels=False,
        public_only=True,
        targets=tuple(targets),
        record_reference=record_reference,
        # The student's own code on the student's own machine (macOS and Windows included): no
        # sandbox, which needs Linux namespaces, and no warning about one.
        sandbox=False,
    )


def run_self_check(
    notebook: Path, course: Course, zoo: ModelZoo, assignment: str | None = None, targets: Sequence[str] = ()
) -> SubmissionResult:
    """The public checks' result for one notebook (never raises for a bad notebook)."""
    if targets:
        name = assignment or _assignment_of(notebook, course)
        if name is not None:
            known = sorted({check.target for check in course.assignment(name).rubric.checks if check.visibility == "public"})
            unknown = [target for target in targets if target not in known]
            if unknown:
                raise UsageError(f"no public check grades {', '.join(unknown)}; the public checks grade: {', '.join(known)}")
    with Grader(course, zoo, self_check_settings(targets)) as grader:
        return grader.grade(notebook, SELF_CHECK_ID, assignment)


def _assignment_of(notebook: Path, course: Course) -> str | None:
    try:
        candidates = [(item.name, [*item.rubric.identify.functions, *item.rubric.identify.variables]) for item in course.all()]
        return identify_assignment(read_notebook(notebook), candidates).assignment
    except Exception:  # an unreadable notebook gets its message from the grading itself
        return None


def passed(result: SubmissionResult) -> bool:
    """Whether nothing the self-check could judge went wrong (the exit status of ``grade check``)."""
    return result.error is None and all(check.outcome not in ("failed", "error") for check in result.checks)


def report(result: SubmissionResult, html_path: Path | None) -> Group:
    """What ``grade check`` prints: one row per public check, then the notes and the score."""
    if result.error:
        return Group(Text.from_markup(f"[bold red]Your notebook could not be checked:[/] {escape(result.error)}"))
    table = Table(title=f"Self-check of {result.source} ({result.assignment})", title_justify="left", show_lines=True)
    table.add_column("Check", overflow="fold")
    table.add_column("Points", justify="right", no_wrap=True)
    table.add_column("Result", no_wrap=True)
    table.add_column("Why, and what to read", overflow="fold")
    links: list[str] = []  # printed below the table, whole: a link folded in a cell can be neither clicked nor copied
    for check in result.checks:
        if check.outcome == "manual" or (check.graded_by == "instructor" and check.outcome != "failed"):
            points = f"{check.points:g} by hand"
        elif check.outcome == "skipped":
            points = f"({check.points:g})"
        else:
            points = f"{check.score:g} / {check.points:g}"
        why = escape(check.message)
        if check.outcome in ("failed", "error"):
            if check.hint:
                why += f"\n[bold]Hint:[/] {escape(check.hint)}"
            if check.docs:
                numbers = []
                for link in check.docs:
                    if link not in links:
                        links.append(link)
                    numbers.append(f"\\[{links.index(link) + 1}]")
                why += "\n[dim]Read:[/] " + " ".join(numbers) + " (below)"
        table.add_row(escape(check.name), points, OUTCOME_STYLES[check.outcome], why)
    lines: list[Table | Text] = [table]
    for number, link in enumerate(links, 1):
        lines.append(Text.assemble(f"[{number}] ", (link, Style(link=link)), no_wrap=True, overflow="ignore"))
    for problem in result.cell_problems:
        where = f"Cell {problem.cell_index + 1}" if problem.cell_index >= 0 else "Notebook"
        lines.append(Text.from_markup(f"[red]{where}:[/] {escape(problem.message)}"))
    lines += [Text.from_markup(f"[yellow]note:[/] {escape(warning)}") for warning in result.warnings]
    lines += [Text(note) for note in result.notes]
    verdict = "[green]all public checks pass[/]" if passed(result) else "[red]some public checks fail[/]"
    lines.append(Text.from_markup(f"[bold]Public checks: {result.score:g} / {result.max_score:g} points[/], {verdict}."))
    if html_path is not None:
        lines.append(Text(f"The same, as a page: {html_path}"))
    return Group(*lines)
