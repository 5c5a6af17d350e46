"""The ``grade`` command line."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click
from click_default_group import DefaultGroup
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from grader import __version__, scratch
from grader.errors import GraderError, UsageError
from grader.facts import WARNING_PREFIX
from grader.student import KIT_FILE

if TYPE_CHECKING:
    from grader.reports.results import SubmissionResult
    from grader.scale.batch import BatchOutcome


CONTEXT = {"help_option_names": ["-h", "--help"]}


# What a student cannot do with a kit (no reference implementation, no hidden checks): the instructor's commands.
INSTRUCTOR_COMMANDS = ("run", "gradescope", "build-student-kit", "publish", "list-kinds")
KIT_HELP = """Check your notebook of the LLM inference course against the assignment's public checks.

`grade check NOTEBOOK` (or `grade NOTEBOOK`) runs your notebook and the public checks on it, and
explains each lost point; the instructor grades it again with hidden checks as well.
"""


def in_student_kit() -> bool:
    """Whether this grader runs from a student kit (its copy of the package, beside the kit's KIT_VERSION)."""
    return (Path(__file__).resolve().parent.parent / KIT_FILE).is_file()


class GradeGroup(DefaultGroup):
    """The commands, whose help also lists the default command's options (``grade PATH...`` is ``grade run``). From a
    student kit: ``grade check`` alone (the default), the instructor's commands refused with what to run instead."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = super().list_commands(ctx)
        return [name for name in names if name not in INSTRUCTOR_COMMANDS] if in_student_kit() else names

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if in_student_kit() and cmd_name in INSTRUCTOR_COMMANDS:
            raise click.UsageError(
                f"`grade {cmd_name}` is for instructors, and this is a student kit: "
                "run `grade check YOUR_NOTEBOOK.ipynb` to check your notebook.",
                ctx,
            )
        return super().get_command(ctx, cmd_name)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help(ctx, formatter)
        command = self.commands.get(self.default_cmd_name or "")
        if command is None:
            return
        sub = click.Context(command, info_name=command.name, parent=ctx)
        rows = [row for param in command.get_params(sub) if (row := param.get_help_record(sub)) is not None]
        options, *arguments = command.collect_usage_pieces(sub)
        with formatter.section(f"Options of `grade {command.name}`, the default (`grade {' '.join([*arguments, options])}`)"):
            formatter.write_dl(rows)


@click.group(
    cls=GradeGroup,
    default="check" if in_student_kit() else "run",
    default_if_no_args=False,
    context_settings=CONTEXT,
    help=KIT_HELP if in_student_kit() else None,
)
@click.version_option(__version__, prog_name="grade")
def main() -> None:
    """Grade notebooks of the LLM inference course.

    `grade PATH...` (the same as `grade run PATH...`) grades notebooks, folders of them and LMS
    exports; `grade publish OUT` shows the hidden checks on the students' pages once grades are out;
    `grade gradescope` packages an assignment's autograder for Gradescope; `grade check`
    runs the public checks on a student's own notebook; `grade build-student-kit` packages them.
    """
    from grader.quiet import quiet_library_defaults
    from grader.scale.runner import share_cpus

    quiet_library_defaults()
    share_cpus()
    scratch.start_run()  # before any worker starts: they name their folders after the run


@main.command("run", context_settings=CONTEXT)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-a", "--assignment", metavar="NAME", help="Grade every notebook as this assignment (default: recognise each one).")
@click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("graded"),
    show_default=True,
    help="Folder for results, feedback and the class summary.",
)
@click.option(
    "--course",
    "course_dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Course folder holding assignments/<name>/ (default: this checkout).",
)
@click.option(
    "--real-models",
    is_flag=True,
    help="Grade with the real Hugging Face hub models instead of the built-in tiny ones (needs them downloaded or the network).",
)
@click.option("--seed", type=int, help="Seed for hidden inputs (default: a new random seed per run, recorded in each result).")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the tiny model zoo is built and cached (default: $GRADER_CACHE_DIR or ~/.cache).",
)
@click.option(
    "-j",
    "--workers",
    type=click.IntRange(min=1),
    help="Notebooks graded at once, each in its own worker process (default: from the CPUs and free memory).",
)
@click.option(
    "--ray",
    "ray_address",
    metavar="ADDRESS",
    help="Grade on a Ray cluster instead of local workers: 'auto' (the cluster this machine is part of), "
    "'ray://HEAD:10001', or 'local' (one started for this run); needs the [ray] extra. --workers then caps the "
    "cluster's workers.",
)
@click.option("--force", is_flag=True, help="Regrade every submission, even those the gradebook holds unchanged.")
@click.option(
    "--layout",
    type=click.Choice(["auto", "paths", "per-student", "canvas"]),
    default="auto",
    show_default=True,
    help="How submissions are laid out: notebooks named by path, a folder per student, or Canvas's download naming.",
)
@click.option("--keep-workdirs", is_flag=True, help="Keep each notebook's temporary working folder (for debugging).")
@click.option(
    "--no-sandbox",
    is_flag=True,
    help="Grade without the sandbox: each notebook runs with your user, files and network. Only on a disposable "
    "machine that cannot have one (the run otherwise stops when the sandbox cannot start); every result and the "
    "summary say so. Same as GRADER_NO_SANDBOX=1.",
)
@click.option(
    "--one-at-a-time",
    is_flag=True,
    help="Check each submission before its worker runs the next notebook (default: the next notebook runs while the "
    "last one is checked, which is faster; its cells then share the CPUs with the timed checks).",
)
@click.option(
    "--json",
    "json_out",
    metavar="FILE",
    type=click.Path(allow_dash=True, dir_okay=False, path_type=Path),
    help="Also write the results as JSON to FILE ('-': standard output): when exactly one submission was graded, "
    "its results.json; otherwise an object of results.json documents keyed by submission id.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print only the summary table.")
def run(
    paths: tuple[Path, ...],
    assignment: str | None,
    out_dir: Path,
    course_dir: Path | None,
    real_models: bool,
    seed: int | None,
    cache_dir: Path | None,
    workers: int | None,
    ray_address: str | None,
    force: bool,
    layout: str,
    keep_workdirs: bool,
    no_sandbox: bool,
    one_at_a_time: bool,
    json_out: Path | None,
    quiet: bool,
) -> None:
    """Grade notebooks: a notebook, folders of them, or zips (LMS exports); '-' reads one from stdin.

    Writes, per submission, OUT/<id>/results.json (Gradescope format), feedback.html (what the
    student sees) and feedback-instructor.html; for the class, OUT/summary.html, OUT/grades.csv
    (and OUT/grades-canvas.csv for a Canvas download) and the gradebook OUT/gradebook.sqlite. A
    second run skips unchanged submissions; `grade publish OUT` shows the hidden checks to students.
    """
    console = Console(stderr=True, quiet=quiet)
    try:
        with scratch.temporary_directory("unpacked") as unpacked:
            paths = tuple(_from_stdin(Path(unpacked)) if str(path) == "-" else path for path in paths)
            outcome = _grade(
                paths,
                assignment,
                out_dir,
                course_dir,
                real_models,
                seed,
                cache_dir,
                workers,
                ray_address,
                force,
                layout,
                keep_workdirs,
                Path(unpacked),
                console,
                overlap=not one_at_a_time,
                no_sandbox=no_sandbox,
            )
    except GraderError as error:
        Console(stderr=True).print(f"[bold red]error:[/] {escape(error.show())}", highlight=False, soft_wrap=True)
        sys.exit(error.exit_code)
    for notice in outcome.notices:
        label = "[bold red]warning:[/]" if notice.startswith(WARNING_PREFIX) else "[yellow]note:[/]"
        console.print(f"{label} {escape(notice)}", highlight=False, soft_wrap=True)
    to_stdout = json_out is not None and str(json_out) == "-"
    Console(stderr=to_stdout, width=_report_width(to_stdout)).print(_summary_table(outcome.results, out_dir))
    if json_out is not None:
        from grader.reports.results import gradescope_json

        documents = {result.submission_id: gradescope_json(result) for result in outcome.results}
        payload = next(iter(documents.values())) if len(documents) == 1 else documents
        text = json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
        if to_stdout:
            sys.stdout.write(text)
        else:
            from grader.reports.results import write_atomically

            write_atomically(json_out, text)


def _from_stdin(folder: Path) -> Path:
    """A submission handed over on standard input, saved as a notebook (or a zip, by its first bytes)."""
    data = sys.stdin.buffer.read()
    if not data:
        raise UsageError("'-' reads a submission from standard input, but standard input is empty")
    path = folder / ("stdin.zip" if data[:2] == b"PK" else "stdin.ipynb")
    path.write_bytes(data)
    return path


@main.command("gradescope", context_settings=CONTEXT)
@click.argument("assignment")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--course",
    "course_dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Course folder holding assignments/<name>/ (default: this checkout).",
)
def gradescope(assignment: str, out_dir: Path, course_dir: Path | None) -> None:
    """Write OUT_DIR/autograder-ASSIGNMENT.zip for Gradescope's "Configure Autograder" page.

    The zip holds setup.sh (installs Python, torch for the CPU and this grader, and builds the
    tiny models into the image), run_autograder (grades /autograder/submission into
    /autograder/results/results.json) and the assignment's rubric and reference.
    """
    from grader.grading.course import find_course_root
    from grader.reports.gradescope import build_autograder

    try:
        course_root = find_course_root(course_dir)
        target = build_autograder(Path(__file__).resolve().parent.parent, course_root, assignment, out_dir)
    except GraderError as error:
        Console(stderr=True).print(f"[bold red]error:[/] {escape(error.show())}", highlight=False, soft_wrap=True)
        sys.exit(error.exit_code)
    click.echo(str(target))


# Options of the student-facing commands (check, build-student-kit).
_course_option = click.option(
    "--course",
    "course_dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Course folder or student kit holding assignments/<name>/ (default: this checkout or kit).",
)
_cache_dir_option = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the tiny model zoo is built and cached (default: $GRADER_CACHE_DIR or ~/.cache).",
)


def _exit_with(error: GraderError) -> NoReturn:
    """Print a grader error as one clear line and exit with its status."""
    Console(stderr=True).print(f"[bold red]error:[/] {escape(error.show())}", highlight=False, soft_wrap=True)
    sys.exit(error.exit_code)


@main.command("check", context_settings=CONTEXT)
@click.argument("notebook", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-a", "--assignment", metavar="NAME", help="Check it as this assignment (default: from the notebook's metadata).")
@click.option(
    "--only",
    "targets",
    metavar="FUNCTION",
    multiple=True,
    help="Run only the checks of this function or variable (repeatable).",
)
@click.option("--html", "html_out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the feedback page to FILE.")
@click.option(
    "--json",
    "json_out",
    metavar="FILE",
    type=click.Path(allow_dash=True, dir_okay=False, path_type=Path),
    help="Also write the results (Gradescope's schema) to FILE ('-': standard output).",
)
@_course_option
@_cache_dir_option
def check(
    notebook: Path,
    assignment: str | None,
    targets: tuple[str, ...],
    html_out: Path | None,
    json_out: Path | None,
    course_dir: Path | None,
    cache_dir: Path | None,
) -> None:
    """Check your own notebook with the public checks, offline, before you submit it.

    Prints each public check (points, passed or failed and why, a hint and documentation) and how
    many hidden checks your instructor will also run. Exit status: 0 when every public check
    passes, 1 when one fails or the notebook cannot be checked.
    """
    from grader.grading.course import Course, find_course_root
    from grader.reports.render import render_feedback
    from grader.reports.results import gradescope_json, write_atomically
    from grader.student.selfcheck import passed, report, run_self_check
    from grader.zoo import ModelZoo

    to_stdout = json_out is not None and str(json_out) == "-"
    console = Console(stderr=to_stdout, width=_report_width(to_stdout))
    try:
        course = Course(find_course_root(course_dir))
        zoo = ModelZoo(cache_dir)
        if not (zoo.root / "complete.json").exists():
            Console(stderr=True).print("Building the tiny model zoo (once per machine, about 10 s)…")
        zoo.ensure_built()
        with console.status(f"Running {notebook.name} and its public checks…"):
            result = run_self_check(notebook, course, zoo, assignment, targets)
    except GraderError as error:
        _exit_with(error)
    if html_out is not None:
        write_atomically(html_out, render_feedback(result, "student", self_check=True))
    console.print(report(result, html_out))
    if json_out is not None:
        text = json.dumps(gradescope_json(result), indent=2, ensure_ascii=False) + "\n"
        if to_stdout:
            sys.stdout.write(text)
        else:
            write_atomically(json_out, text)
    sys.exit(0 if passed(result) else 1)


@main.command("build-student-kit", context_settings=CONTEXT)
@click.argument("assignment")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@_course_option
@_cache_dir_option
def build_student_kit(assignment: str, out_dir: Path, course_dir: Path | None, cache_dir: Path | None) -> None:
    """Write OUT_DIR/ASSIGNMENT-kit/ (and .zip) for students: starter, public rubric, self-check.

    The kit holds no reference implementation, solution or hidden check: the public checks'
    expected values are recorded on the tiny models by grading the solution notebook.
    """
    from grader.grading.course import Course, find_course_root
    from grader.student.kit import build_student_kit as build
    from grader.zoo import ModelZoo

    try:
        course = Course(find_course_root(course_dir))
        zoo = ModelZoo(cache_dir)
        zoo.ensure_built()
        with Console(stderr=True).status(f"Recording the public checks' reference values on {assignment}'s solution…"):
            kit = build(Path(__file__).resolve().parent.parent, course, assignment, out_dir, zoo)
    except GraderError as error:
        _exit_with(error)
    for name in kit.unrecordable:
        Console(stderr=True).print(
            f"[yellow]note:[/] {escape(name)} returned a value with no JSON form, so the kit cannot replay it: "
            "its checks will say they cannot judge offline (return numbers, strings, lists or dicts from it).",
            highlight=False,
            soft_wrap=True,
        )
    Console(stderr=True).print(
        f"Next: give students {escape(str(kit.folder))}.zip. Each unzips it and follows its README.md (install once, "
        f"then `grade check {escape(assignment)}.ipynb`); the kit holds no solution, reference code or hidden check.",
        highlight=False,
        soft_wrap=True,
    )
    click.echo(str(kit.folder))


@main.command("publish", context_settings=CONTEXT)
@click.argument("out_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--undo", is_flag=True, help="Hide the hidden checks from the students' pages again.")
def publish_grades(out_dir: Path, undo: bool) -> None:
    """Publish the grades in OUT_DIR: every student's feedback.html shows the hidden checks too.

    Re-renders each page from OUT_DIR/gradebook.sqlite with the hidden checks' verdicts, explanations
    and hints (as Gradescope shows its after_published tests; never the hidden inputs' seed), and
    keeps them shown for pages a later regrade writes. --undo hides them again.
    """
    from grader.scale.batch import publish

    try:
        results = publish(out_dir, undo=undo)
    except FileNotFoundError as error:
        _exit_with(UsageError(str(error)))
    hidden = sum(1 for result in results for check in result.checks if check.visibility == "hidden")
    state = "hidden again" if undo else "shown"
    click.echo(f"{len(results)} feedback pages rewritten in {out_dir}: {hidden} hidden check results {state}.")


@main.command("list-kinds", context_settings=CONTEXT)
@click.argument("assignment", required=False)
@_course_option
def list_kinds(assignment: str | None, course_dir: Path | None) -> None:
    """List the check kinds a rubric can name: the grader's generic ones, and ASSIGNMENT's own.

    Each kind with where it is declared (the grader package, the assignment's checks.py or
    hidden_checks.py), what it judges, and the params it takes.
    """
    from grader.grading.course import HIDDEN_CHECKS, PUBLIC_CHECKS, Course, find_course_root

    try:
        course = Course(find_course_root(course_dir))
        kinds = course.assignment(assignment).kinds if assignment else course.kinds
    except GraderError as error:
        _exit_with(error)
    table = Table(title=f"Check kinds of {assignment}" if assignment else "The grader's generic check kinds")
    for column in ("kind", "declared in", "judges", "params"):
        table.add_column(column)
    for name, kind in sorted(kinds.items()):
        module = getattr(kind.run, "__module__", "")
        where = {".checks": PUBLIC_CHECKS, ".hidden_checks": HIDDEN_CHECKS}.get(module[module.rfind(".") :], "grader")
        table.add_row(name, where, kind.description, ", ".join(kind.params.model_fields))
    Console().print(table)


def _grade(
    paths: Sequence[Path],
    assignment: str | None,
    out_dir: Path,
    course_dir: Path | None,
    real_models: bool,
    seed: int | None,
    cache_dir: Path | None,
    workers: int | None,
    ray_address: str | None,
    force: bool,
    layout: str,
    keep_workdirs: bool,
    unpacked: Path,
    console: Console,
    overlap: bool = True,
    no_sandbox: bool = False,
) -> BatchOutcome:
    # Imported here so that `grade --help` answers without loading torch.
    from grader.discover.submissions import find_submissions
    from grader.grading.course import Course, find_course_root
    from grader.scale.batch import BatchOptions, grade_batch
    from grader.zoo import ModelZoo

    course = Course(find_course_root(course_dir))
    if assignment is not None:
        course.assignment(assignment)
    else:
        course.all()  # a broken rubric stops the run before anything is graded (or created)
    ensure_writable(out_dir)
    discovery = find_submissions(paths, layout=layout, extract_to=unpacked)
    zoo_key = ""
    if not real_models:
        zoo = ModelZoo(cache_dir)
        if not (zoo.root / "complete.json").exists():
            console.print("Building the tiny model zoo (once per machine, about 10 s)…")
        zoo.ensure_built()  # once, here, before any worker starts
        zoo_key = zoo.key
    options = BatchOptions(
        out_dir=out_dir,
        assignment=assignment,
        real_models=real_models,
        zoo_key=zoo_key,
        cache_dir=cache_dir,
        seed=seed,
        keep_workdirs=keep_workdirs,
        workers=workers,
        force=force,
        overlap=overlap,
        ray=ray_address,
        no_sandbox=no_sandbox or bool(os.environ.get("GRADER_NO_SANDBOX")),
    )
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task("Grading", total=len(discovery.found))
        per_node: Counter[str] = Counter()  # on a cluster: how many each node graded

        def advance(result: SubmissionResult, reused: bool) -> None:
            if reused:
                description = f"Unchanged {result.submission_id}"
            else:
                per_node[result.node] += 1
                description = f"Graded {result.submission_id}" + (
                    f" on {result.node} ({_counts(per_node)})" if ray_address else ""
                )
            progress.update(task, description=description)
            progress.advance(task)

        outcome = grade_batch(discovery.found, course, options, advance, discovery.notices)
        spread = f"; per node: {_counts(per_node)}" if ray_address and per_node else ""
        progress.update(task, description=f"Graded ({outcome.graded} graded, {outcome.reused} unchanged{spread})")
    return outcome


def _counts(per_node: Counter[str]) -> str:
    return ", ".join(f"{node or '?'} {count}" for node, count in sorted(per_node.items()))


def _by_hand(result: SubmissionResult) -> str:
    """The points an instructor still has to grade by hand ('3 pts to grade'), never read as points awarded."""
    if not result.manual_max:
        return "–"
    if not result.manual_points:
        return "nothing written"
    return f"{result.manual_points:g} pt{'' if result.manual_points == 1 else 's'} to grade"


def _report_width(stderr: bool) -> int | None:
    """The summary table's width: the terminal's, else (a log, a pipe) $COLUMNS or 160, not Rich's 80."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return None
    try:
        return max(80, int(os.environ.get("COLUMNS", "")))
    except ValueError:
        return 160


def ensure_writable(folder: Path) -> None:
    """Create the output folder if needed and prove this user can write in it, or fail in one line saying who must."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as error:
        user = _current_user()
        if not hasattr(os, "getuid"):
            fix = ""
        elif Path("/.dockerenv").exists() or Path("/run/.containerenv").exists():
            # Docker creates a missing mounted folder owned by root: the host's folder needs the chown.
            fix = f" (in a container: create the host folder mounted here and `chown {os.getuid()}` it before starting)"
        else:
            fix = f" (e.g. `chown {os.getuid()} {folder}`)"
        raise UsageError(
            f"cannot write the output folder {folder} ({error.strerror or error}): it must be writable by {user}{fix}"
        ) from error


def _current_user() -> str:
    """This process's user, as 'uid 1000 (grader)', or its name where there are no uids."""
    import getpass

    try:
        name = getpass.getuser()
    except (KeyError, OSError, ImportError):  # a uid with no name (a container's --user 1234)
        name = ""
    if hasattr(os, "getuid"):
        return f"uid {os.getuid()}" + (f" ({name})" if name else "")
    return name or "this user"


# Files Docker and Podman put in every container they run.
CONTAINER_MARKERS = (Path("/.dockerenv"), Path("/run/.containerenv"))


def shown_out(out_dir: Path, markers: Sequence[Path] = CONTAINER_MARKERS) -> str:
    """Where the results are, as the user reads it: in a container, the folder the user mounted at ``out_dir`` (a
    path inside the container means nothing on the host)."""
    absolute = out_dir if out_dir.is_absolute() else Path.cwd() / out_dir
    if any(marker.exists() for marker in markers):
        return f"{out_dir}/ (in the container: the host folder you mounted at {absolute})"
    return f"{out_dir}/"


def _summary_table(results: Sequence[SubmissionResult], out_dir: Path) -> Table:
    from grader.reports.render import problems_summary

    table = Table(title=f"Results in {shown_out(out_dir)} (summary.html, grades.csv)", title_justify="left")
    # Ids and scores are never broken mid-word; the notes wrap between words.
    table.add_column("Submission", no_wrap=True)
    table.add_column("Assignment", no_wrap=True)
    table.add_column("Score", justify="right", no_wrap=True)
    table.add_column("By hand", justify="right", no_wrap=True)
    table.add_column("Notes", ratio=1)
    for result in results:
        if result.error:
            table.add_row(result.submission_id, result.assignment or "?", "–", "–", f"[red]not graded:[/] {escape(result.error)}")
            continue
        lost = [check.check_id for check in result.checks if check.automatic and check.score < check.points]
        missing_answers = result.manual_max - result.manual_points
        notes = "; ".join(
            filter(
                None,
                [
                    problems_summary(result.cell_problems),
                    ("lost points: " + ", ".join(lost) if len(lost) <= 4 else f"lost points on {len(lost)} checks")
                    if lost
                    else "",
                    f"written answers missing ({missing_answers:g} pts)" if missing_answers else "",
                ],
            )
        )
        table.add_row(
            result.submission_id,
            result.assignment or "?",
            f"{result.score:g} / {result.max_score:g}",
            _by_hand(result),
            notes or "[green]full marks[/]",
        )
    return table
