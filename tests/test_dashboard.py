"""The class dashboard (summary.html) and the feedback pages, as an instructor sees them in a browser.

The browser tests open the rendered pages in Debian's headless Chromium, driven by Playwright
(no `playwright install`: the system browser is used). They fail, saying how to install it, when
Chromium is missing; set GRADER_SKIP_BROWSER=1 to skip them instead. Full-page screenshots go
to $GRADER_SCREENSHOT_DIR, or to a `screenshots` folder in pytest's base temporary directory.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import os
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest

from grader.facts import CellProblem
from grader.reports.render import FEEDBACK_FILES, common_failures, failure_key, render_feedback, render_summary
from grader.reports.results import CheckResult, Figure, SubmissionResult

CHROMIUM = Path(os.environ.get("GRADER_CHROMIUM", "/usr/bin/chromium"))
INSTALL_HINT = (
    "apt-get update && apt-get install -y --no-install-recommends chromium  (Debian/Ubuntu, as root), "
    "and scripts/install test for Playwright; "
    "or set GRADER_SKIP_BROWSER=1 to skip the browser tests"
)
NOTICES = (
    "Student 1234 has 2 notebooks for ptq-bnb; both were graded.",
    "12 unchanged submissions were not regraded.",
)
SCREEN_HEIGHT = 900  # CSS pixels of a laptop's browser window
TIMING_FAILURE = "generate_text_and_time reported {} s, but its generate call took 0.052 s: the timer surrounds other work."


def check(check_id: str, outcome: str, message: str = "", points: float = 2, **fields: Any) -> CheckResult:
    """A check result as the grader would produce it."""
    full = outcome == "passed"
    return CheckResult(
        check_id=check_id,
        name=f"{check_id.replace('-', ' ').capitalize()}",
        target="f",
        kind="k",
        visibility=fields.pop("visibility", "public"),
        device=fields.pop("device", "any"),
        points=points,
        score=fields.pop("score", points if full else 0),
        outcome=outcome,  # type: ignore[arg-type]
        message=message or f"{check_id} {outcome}.",
        **fields,
    )


def png_figure() -> str:
    """A real PNG, base64, as a notebook's display data would carry it."""
    from matplotlib.figure import Figure as ChartFigure

    figure = ChartFigure(figsize=(3, 2))
    axes = figure.add_subplot()
    axes.plot([1, 2, 4, 8], [0.1, 0.2, 0.35, 0.7])
    axes.set_xlabel("prompt length")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def ptq(submission: str, student: str | None, timing: str, duration_s: float, **fields: Any) -> SubmissionResult:
    """A ptq-bnb submission: memory passes, timing as given, INT8 errors or passes, an essay, a CUDA check."""
    timing_check = (
        check("timing", "passed", "The latency matches the generate call.")
        if timing == "passed"
        else check("timing", "failed", TIMING_FAILURE.format(timing), expected="0.052 s", found=f"{timing} s")
    )
    return SubmissionResult(
        submission_id=f"ptq-bnb/{submission}",
        source=f"ptq-bnb/{submission}.ipynb",
        assignment="ptq-bnb",
        title="Post-training quantization: memory, speed and quality (bitsandbytes)",
        student=student,
        checks=(
            check("memory-fp32", "passed", "4.19 MB, as expected."),
            timing_check,
            fields.pop("int8", check("memory-int8", "passed", visibility="hidden", data={"bytes": 2720000})),
            check("timing-cuda-sync", "skipped", "Needs a CUDA device; this grader has none.", device="cuda"),
            fields.pop(
                "essay",
                check(
                    "analysis",
                    "manual",
                    "Queued for the instructor.",
                    points=4,
                    graded_by="instructor",
                    answer="INT8 halves memory but is slower on CPU.",
                ),
            ),
        ),
        duration_s=duration_s,
        provenance={"grader_version": "0.1.0", "seed": 7, "models": ["gpt2"]},
        environment={"python": "3.11.7", "torch": "2.13.0", "cuda_available": False},
        **fields,
    )


def class_results() -> list[SubmissionResult]:
    """A class: three assignments' worth of submissions, one unreadable and one unrecognised."""
    int8_error = check(
        "memory-int8",
        "error",
        "get_model_memory_footprint raised ValueError: Tensor at 0x7f3a12 has no element_size.",
        visibility="hidden",
        details=("Traceback (most recent call last):\n  ...\nValueError: no element_size",),
    )
    return [
        ptq("alice", "1234", "passed", 41.2, figures=(Figure(6, "image/png", png_figure()),)),
        ptq(
            "bob",
            "2345",
            "0.283",
            55.9,
            int8=int8_error,
            cell_problems=(
                CellProblem(3, "error", "NameError: name 'model' is not defined", "Traceback...\nNameError", "model.eval()"),
            ),
        ),
        ptq(
            "carol",
            None,
            "0.291",
            38.0,
            essay=check("analysis", "failed", "The answer still reads TODO.", points=4, graded_by="instructor"),
        ),
        ptq("dave", "1234", "1.5", 47.3),
        SubmissionResult.without_results(
            "ptq-bnb/erin", "ptq-bnb/erin.ipynb", "The file is not valid JSON (line 1, column 1).", "ptq-bnb", student="3456"
        ),
        SubmissionResult(
            submission_id="perplexity/frank",
            source="perplexity/frank.ipynb",
            assignment="perplexity",
            title="Perplexity of a causal language model",
            student="4567",
            checks=(
                check("loss", "failed", "The loss is the mean of per-batch losses: 3.41 instead of 3.12."),
                check("perplexity", "passed"),
            ),
            duration_s=22.5,
        ),
        SubmissionResult(
            submission_id="perplexity/grace",
            source="perplexity/grace.ipynb",
            assignment="perplexity",
            title="Perplexity of a causal language model",
            checks=(
                check("loss", "failed", "The loss is the mean of per-batch losses: 3.52 instead of 3.12."),
                check("perplexity", "failed", "Perplexity is not exp of the loss: 21.0 instead of 22.6.", score=0.5),
            ),
            duration_s=19.1,
        ),
        SubmissionResult.without_results("mystery", "mystery.ipynb", "No assignment defines these functions: foo, bar."),
    ]


# The failure-message grouping, without a browser.


def test_numbers_are_set_aside_but_names_with_digits_are_kept() -> None:
    assert failure_key("took 0.283 s, expected  < 1e-3 s") == "took # s, expected < # s"
    assert failure_key("took 0.291 s, expected < 2.5e-3 s") == "took # s, expected < # s"
    assert failure_key("Tensor at 0x7f3a12 is -3 cells away") == "Tensor at # is # cells away"
    assert failure_key("INT8 via int8 and fp16 on cuda:0") == "INT8 via int8 and fp16 on cuda:#"
    assert failure_key("the int8 model") != failure_key("the nf4 model")


def test_failures_differing_only_in_numbers_are_counted_together_with_the_first_as_example() -> None:
    failures = common_failures(class_results())
    top = failures[0]
    assert (top.count, top.example, top.checks) == (3, TIMING_FAILURE.format("0.283"), (("timing", 3),))
    per_batch = next(failure for failure in failures if "per-batch" in failure.example)
    assert (per_batch.count, per_batch.checks) == (2, (("loss", 2),))
    assert "3.41" in per_batch.example  # the first one seen, as written


def test_only_failed_and_errored_checks_are_counted() -> None:
    messages = [failure.example for failure in common_failures(class_results())]
    assert any("0x7f3a12" in message for message in messages)  # an error counts
    assert "The answer still reads TODO." in messages  # an instructor check that failed pre-screening counts too
    assert not any(
        word in message for message in messages for word in ("Needs a CUDA", "Queued", "as expected", "not valid JSON")
    )


def test_one_message_in_several_checks_names_each_check_most_frequent_first() -> None:
    results = [
        SubmissionResult(
            submission_id=f"s{index}",
            source="s.ipynb",
            assignment="a",
            checks=(check("first", "error", "f is not defined."), check("second", "error", "f is not defined.")),
        )
        for index in range(2)
    ] + [
        SubmissionResult(
            submission_id="s3", source="s.ipynb", assignment="a", checks=(check("second", "error", "f is not defined."),)
        )
    ]
    (failure,) = common_failures(results)
    # Counted once per submission that got it (three), each check as often as it said it.
    assert (failure.count, failure.checks) == (3, (("second", 3), ("first", 2)))


def test_only_the_most_common_failures_are_kept_ties_in_order_of_appearance() -> None:
    checks = tuple(check(f"c{index}", "failed", f"Mistake {chr(65 + index)}.") for index in range(12))
    results = [
        SubmissionResult(submission_id="one", source="one.ipynb", assignment="a", checks=checks),
        SubmissionResult(submission_id="two", source="two.ipynb", assignment="a", checks=checks[5:6]),
    ]
    failures = common_failures(results)
    assert len(failures) == 10
    assert [failure.example for failure in failures[:3]] == ["Mistake F.", "Mistake A.", "Mistake B."]
    assert common_failures(results, limit=3)[-1].example == "Mistake B."


def test_the_summary_still_renders_without_notices_and_escapes_them() -> None:
    page = render_summary(class_results())
    assert "Notices" not in page and "Written answers to grade by hand" in page
    page = render_summary(class_results(), notices=["<b>bold</b> claim"])
    assert "&lt;b&gt;bold&lt;/b&gt; claim" in page and "<b>bold" not in page


def test_drawing_the_charts_leaves_pyplot_and_the_backend_alone() -> None:
    import matplotlib
    import matplotlib.pyplot as plt

    backend, figures = matplotlib.get_backend(), plt.get_fignums()
    render_summary(class_results())
    assert (matplotlib.get_backend(), plt.get_fignums()) == (backend, figures)


def test_pages_are_well_formed_html_with_unique_ids(tmp_path: Path) -> None:
    for name, page in write_pages(tmp_path, class_results()).items():
        WellFormed(name).check(page.read_text())


# The pages in a real browser.


class WellFormed(HTMLParser):
    """Checks that every element a page opens is closed in order and that ids are unique."""

    VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name, self.open, self.ids = name, [], set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key == "id":
                assert value not in self.ids, f"{self.name}: id {value!r} is used twice"
                self.ids.add(value)
            if tag == "img" and key == "alt":
                assert value, f"{self.name}: an image has an empty alt text"
        if tag == "img":
            assert "alt" in dict(attrs), f"{self.name}: an image has no alt text"
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, f"{self.name}: </{tag}> closes <{self.open[-1] if self.open else None}>"
        self.open.pop()

    def check(self, page: str) -> None:
        """Parse a whole page; fail on the first misnested tag or anything left open."""
        assert page.startswith("<!DOCTYPE html>"), f"{self.name}: no doctype"
        self.feed(page)
        self.close()
        assert not self.open, f"{self.name}: left open: {self.open}"


def write_pages(out_dir: Path, results: list[SubmissionResult]) -> dict[str, Path]:
    """Write the pages as `grade` lays them out; return the dashboard and bob's two feedback pages."""
    for result in results:
        for view, file_name in FEEDBACK_FILES.items():
            page = out_dir / result.submission_id / file_name
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(render_feedback(result, view), encoding="utf-8")  # type: ignore[arg-type]
    summary = out_dir / "summary.html"
    summary.write_text(render_summary(results, notices=NOTICES), encoding="utf-8")
    bob = out_dir / "ptq-bnb" / "bob"
    return {
        "summary": summary,
        "feedback": bob / FEEDBACK_FILES["student"],
        "feedback-instructor": bob / FEEDBACK_FILES["instructor"],
    }


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: $GRADER_SCREENSHOT_DIR, or pytest's base temp (kept after the run)."""
    chosen = os.environ.get("GRADER_SCREENSHOT_DIR")
    folder = Path(chosen) if chosen else tmp_path_factory.getbasetemp() / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder.resolve()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Debian's headless Chromium, driven by Playwright; a clear failure when it is missing."""
    if os.environ.get("GRADER_SKIP_BROWSER") == "1":
        pytest.skip("GRADER_SKIP_BROWSER=1: browser tests skipped")
    if not CHROMIUM.exists():
        pytest.fail(f"Chromium is not installed at {CHROMIUM}. Install it: {INSTALL_HINT}", pytrace=False)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(f"Playwright for Python is not installed. Install it: {INSTALL_HINT}", pytrace=False)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The dashboard and one student's two feedback pages, written as `grade` writes them."""
    return write_pages(tmp_path_factory.mktemp("graded"), class_results())


class Visit:
    """A page opened in the browser, with everything that went wrong while it loaded."""

    def __init__(self, browser: Any, path: Path, width: int = 1280) -> None:
        self.context = browser.new_context(viewport={"width": width, "height": SCREEN_HEIGHT}, offline=True)
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda message: message.type == "error" and self.problems.append(f"console: {message.text}"))
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on("requestfailed", lambda request: self.problems.append(f"request failed: {request.url} {request.failure}"))
        self.page.on("request", lambda request: self.requests.append(request.url))
        response = self.page.goto(path.as_uri(), wait_until="load")
        assert response is None or response.ok, f"{path} did not load"

    def check_loaded_cleanly(self) -> None:
        """No console or page errors, nothing fetched but the page itself, and every image decoded."""
        images = self.page.evaluate(
            "Array.from(document.images, image => ({alt: image.alt, complete: image.complete, width: image.naturalWidth}))"
        )
        assert not self.problems, self.problems
        assert all(url.startswith(("file:", "data:")) for url in self.requests), self.requests
        broken = [image["alt"] for image in images if not (image["complete"] and image["width"] > 0)]
        assert not broken, f"images that did not load: {broken}"
        assert all(image["alt"] for image in images)
        self.images = images

    def check_links_resolve(self) -> None:
        """Every link to another file on disk points at a file that exists."""
        hrefs = self.page.evaluate("Array.from(document.links, link => link.href)")
        local = [Path(unquote(urlparse(href).path)) for href in hrefs if href.startswith("file:")]
        missing = sorted({str(path) for path in local if not path.is_file()})
        assert local and not missing, missing

    def screenshot(self, folder: Path, name: str, record_property: Any) -> Path:
        """Save a full-page screenshot and say where it is."""
        path = folder / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        record_property(f"screenshot-{name}", str(path))
        print(f"screenshot of {name}: {path}")
        return path

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def visit(browser: Any) -> Iterator[Any]:
    """Open pages in fresh browser contexts, closed after the test."""
    opened: list[Visit] = []

    def open_page(path: Path, width: int = 1280) -> Visit:
        opened.append(Visit(browser, path, width))
        return opened[-1]

    yield open_page
    for page in opened:
        page.close()


def test_dashboard_shows_every_section_in_chromium(
    visit: Any, pages: dict[str, Path], screenshot_dir: Path, record_property: Any
) -> None:
    from playwright.sync_api import expect

    opened = visit(pages["summary"])
    page = opened.page
    opened.check_loaded_cleanly()
    opened.check_links_resolve()
    shot = opened.screenshot(screenshot_dir, "summary", record_property)
    assert shot.stat().st_size > 10_000

    expect(page.get_by_role("heading", name="Grading summary", exact=True)).to_be_visible()
    notices = page.get_by_role("region", name="Notices")
    for notice in NOTICES:
        expect(notices.get_by_text(notice)).to_be_visible()
    ptq_section = page.locator("#assignment-ptq-bnb")
    for heading in (
        "Score distribution",
        "Checks across the class",
        "Most common failure messages",
        "Written answers to grade by hand",
        "Grading time",
    ):
        expect(ptq_section.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    for section in ("#assignment-perplexity", "#not-recognised"):
        expect(page.locator(f"{section} h2")).to_be_visible()

    # Scores: 4 graded of 5 (erin's notebook is unreadable), each with its charts described.
    expect(ptq_section.locator("dl.stats").first).to_contain_text("4 of 5")
    expect(ptq_section.get_by_role("img", name="Histogram of the automatic scores of 4 graded submissions")).to_be_visible()
    expect(ptq_section.get_by_role("img", name="Pass rate per check: memory-fp32 100%; timing 25%")).to_be_visible()
    expect(ptq_section.get_by_role("img", name="Histogram of grading time per submission")).to_be_visible()
    # Scores and pass rates for ptq-bnb and perplexity; timing only for ptq-bnb (2 perplexity submissions
    # are too few for a histogram); nothing to chart for the unrecognised notebook.
    assert len(opened.images) == 5

    # Pass rates: timing passed once in four judged submissions; written answers have none.
    expect(page.locator("#assignment-ptq-bnb-check-timing td").last).to_have_text("25%")
    expect(page.locator("#assignment-ptq-bnb-check-analysis td").last).to_have_text("by hand")

    # The three timing variants are counted as one message, the first as its example.
    first_failure = ptq_section.locator("table.failures tbody tr").first
    expect(first_failure.locator("td").first).to_have_text("3")
    expect(first_failure).to_contain_text("reported 0.283 s")

    # Links to each feedback page, and the student ids.
    expect(page.locator('a[href="ptq-bnb/bob/feedback-instructor.html"]').first).to_be_visible()
    bob_row = ptq_section.locator("tbody tr", has=page.locator('a[href="ptq-bnb/bob/feedback-instructor.html"]'))
    expect(bob_row).to_contain_text("2345")
    expect(ptq_section.locator("tbody tr", has=page.get_by_text("ptq-bnb/erin", exact=True))).to_contain_text("Not graded")

    # The slowest submissions link to their feedback.
    expect(ptq_section.locator("dl.stats").last).to_contain_text("ptq-bnb/bob 56 s")


def test_student_feedback_shows_public_checks_problems_and_figures_in_chromium(
    visit: Any, pages: dict[str, Path], screenshot_dir: Path, record_property: Any
) -> None:
    from playwright.sync_api import expect

    opened = visit(pages["feedback"])
    page = opened.page
    opened.check_loaded_cleanly()
    opened.screenshot(screenshot_dir, "feedback", record_property)

    for heading in ("Checks", "Problems while your notebook ran"):
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    expect(page.locator("#check-timing")).to_contain_text("reported 0.283 s")
    expect(page.locator("#check-memory-int8")).to_have_count(0)
    expect(page.get_by_text("1 more check (2 points) was graded with hidden inputs")).to_be_visible()


def test_instructor_feedback_shows_hidden_checks_and_figures_in_chromium(
    visit: Any, pages: dict[str, Path], screenshot_dir: Path, record_property: Any
) -> None:
    from playwright.sync_api import expect

    opened = visit(pages["feedback-instructor"])
    page = opened.page
    opened.check_loaded_cleanly()
    opened.screenshot(screenshot_dir, "feedback-instructor", record_property)

    expect(page.get_by_text("instructor view")).to_be_visible()
    expect(page.locator("#check-memory-int8")).to_contain_text("0x7f3a12")
    alice = visit(pages["summary"].parent / "ptq-bnb" / "alice" / FEEDBACK_FILES["instructor"])
    alice.check_loaded_cleanly()
    expect(alice.page.get_by_role("heading", name="Your figures")).to_be_visible()
    expect(alice.page.get_by_role("img", name="Figure from cell 7")).to_be_visible()
    assert alice.images[0]["width"] == 300
    alice.screenshot(screenshot_dir, "feedback-instructor-with-figure", record_property)


# A class the size of the sample corpus, read at 1300 px.

ESSAY = (
    "INT8 halves the memory of the linear layers, but on a CPU every matmul dequantizes first, so generation "
    "is slower; NF4 shrinks memory further at a small cost in perplexity, which matters less than latency here. "
) * 3


def sized_class(per_assignment: int = 10) -> list[SubmissionResult]:
    """Forty submissions over four assignments, with the sample corpus's long names, ten checks and two essays each."""
    names = [
        "solution",
        "starter",
        "mistake-exported-not-quantized",
        "mistake-warmup-inside-the-timer",
        "mistake-padding-in-loss",
    ]
    results = []
    for assignment in ("latency", "perplexity", "ptq-bnb", "quantization"):
        for index in range(per_assignment):
            checks = [
                dataclasses.replace(
                    check(f"{assignment}-check-{number}", "passed" if (index + number) % 3 else "failed", points=2),
                    # As long as the rubrics' names: "evaluate_loss: token-weighted loss on the notebook's texts".
                    name=f"function_{number}: what check {number} of {assignment} looks at, in words",
                )
                for number in range(10)
            ]
            checks += [
                check(f"essay-{number}", "manual", "Queued.", points=3, graded_by="instructor", answer=ESSAY)
                for number in range(2)
            ]
            results.append(
                SubmissionResult(
                    submission_id=f"{assignment}/{names[index % len(names)]}-{index}",
                    source=f"{assignment}/{names[index % len(names)]}-{index}.ipynb",
                    assignment=assignment,
                    title=f"The {assignment} assignment",
                    student=f"{1000 + index}",
                    checks=tuple(checks),
                    duration_s=20.0 + index,
                )
            )
    return results


def test_the_summary_of_a_whole_class_reads_well_at_1300_px(
    visit: Any, tmp_path: Path, screenshot_dir: Path, record_property: Any
) -> None:
    from playwright.sync_api import expect

    summary = write_pages(tmp_path, sized_class())["summary"]
    opened = visit(summary, width=1300)
    page = opened.page
    opened.check_loaded_cleanly()
    opened.screenshot(screenshot_dir, "summary-class-1300", record_property)
    for assignment in ("latency", "perplexity", "ptq-bnb", "quantization"):
        section = page.locator(f"#assignment-{assignment}")
        # The scores table, the distribution and the pass rates fit in two screens; the whole
        # assignment in three (every written answer inline made the 40 samples' page ~24,500 px).
        box = section.bounding_box()
        overview = section.locator(".overview").bounding_box()
        assert overview["y"] + overview["height"] - box["y"] <= 2 * SCREEN_HEIGHT, (assignment, overview, box)
        assert box["height"] <= 3 * SCREEN_HEIGHT, (assignment, box)
        # No submission id is broken over lines.
        lines = section.locator("tbody tr td:first-child a").evaluate_all(
            "links => links.map(link => link.getClientRects().length)"
        )
        assert lines and set(lines) == {1}, lines
        # The written answers are collapsed, each one expandable.
        answers = section.locator("details.answers")
        assert answers.get_attribute("open") is None and answers.bounding_box()["height"] < 60
        assert section.locator("details.answer").count() == 20
    answer = page.locator("#assignment-latency-answer-1")
    page.locator("#assignment-latency details.answers > summary").click()
    expect(answer).to_be_visible()
    expect(answer.locator("blockquote")).to_be_hidden()  # one line each until opened
    answer.locator("summary").click()
    expect(answer.locator("blockquote")).to_contain_text("INT8 halves the memory")


def test_feedback_reads_well_at_1300_px(visit: Any, pages: dict[str, Path], screenshot_dir: Path, record_property: Any) -> None:
    opened = visit(pages["feedback"], width=1300)
    opened.check_loaded_cleanly()
    opened.screenshot(screenshot_dir, "feedback-1300", record_property)
    width = opened.page.evaluate("document.documentElement.scrollWidth")
    assert width <= 1300  # nothing overflows sideways


def test_the_numbers_a_written_answer_states_are_shown_against_the_notebooks_in_chromium(
    visit: Any, tmp_path: Path, screenshot_dir: Path, record_property: Any
) -> None:
    """The claims checker's verdicts beside a written answer: on the student's page ("your answer says 60% less
    memory; your table shows 42% less") and in the instructor's queue of answers to grade."""
    from playwright.sync_api import expect

    from grader.checks.claims import Fact
    from grader.checks.common import claim_records

    answer = "Memory fell from 8.01 MB in FP32 to 4.63 MB with INT8, about 60% less, and NF4 needs only 3.9 MB."
    facts = [
        Fact("FP32", "memory", 8.01e6, "bytes"),
        Fact("INT8", "memory", 4.63e6, "bytes"),
        Fact("NF4", "memory", 4.44e6, "bytes"),
    ]
    claims = claim_records(answer, facts)
    assert [claim["verdict"] for claim in claims] == ["agrees", "agrees", "contradicts", "contradicts"]
    essay = check("analysis", "manual", "Goes to your instructor.", points=2, graded_by="instructor", answer=answer)
    essay = dataclasses.replace(essay, data={"claims": claims})
    pages = write_pages(tmp_path, [ptq("bob", "2345", "passed", 40.0, essay=essay)])
    opened = visit(pages["feedback"])
    opened.check_loaded_cleanly()
    opened.screenshot(screenshot_dir, "feedback-claims", record_property)
    claims_list = opened.page.locator("#check-analysis .claims")
    expect(claims_list).to_be_visible()
    expect(claims_list.locator("li.claim.contradicts")).to_have_count(2)
    expect(claims_list).to_contain_text("42% less")  # the notebook's own number, where the answer says 60%
    expect(claims_list.locator("li.claim.agrees")).to_have_count(2)
    summary = visit(pages["summary"])
    summary.check_loaded_cleanly()
    queue = summary.page.locator("details.answers")
    expect(queue).to_contain_text("2 numbers contradicted")  # on the answer's one line, in the queue (collapsed)
    queue.locator("summary").first.click()
    expect(queue.get_by_text("2 numbers contradicted")).to_be_visible()
