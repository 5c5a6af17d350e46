"""Written answers are read under their own question, however the student laid them out; plot labels are read as a
reader sees them (shared axes, twin axes, figure labels)."""

from __future__ import annotations

import pytest

from grader.checks.common import _own_words, answer_blocks

QUESTIONS = ["Setup", "Trends"]
STARTER = """Describe your setup and the trends you observed:

1.  **Setup:**
    *   TODO: Describe your setup.

2.  **Trends:**
    *   TODO: Give two or three bullet points.
"""
SETUP = "I ran every measurement on the CPU with the gpt2 model in float32 and max_new_tokens of thirty two."
TRENDS = "Latency grew with the prompt length while tokens per second fell, and float16 fell back to float32."

LAYOUTS = {
    "under the titles": STARTER.replace("TODO: Describe your setup.", SETUP).replace(
        "TODO: Give two or three bullet points.", TRENDS
    ),
    "a cell of answers with bold titles": STARTER + f"\n\n### Answers\n\n**1. Setup.** {SETUP}\n\n**2. Trends.**\n- {TRENDS}\n",
    "one cell per answer, numbered": STARTER + f"\n\n**Answer 1 (Setup).** {SETUP}\n\n**Answer 2 (Trends).**\n- {TRENDS}\n",
    "headings": STARTER + f"\n\n#### Setup\n{SETUP}\n\n#### Trends\n{TRENDS}\n",
    "pointers under the titles": STARTER.replace("TODO: Describe your setup.", "See **Answer 1** in the next cell.").replace(
        "TODO: Give two or three bullet points.", "See **Answer 2** in the cell after it."
    )
    + f"\n\n**Answer 1.** {SETUP}\n\n**Answer 2.** {TRENDS}\n",
    "plain labels": STARTER + f"\n\nSetup: {SETUP}\n\nTrends: {TRENDS}\n",
    "a table of answers": STARTER + f"\n\n| Question | Answer |\n|---|---|\n| **Setup** | {SETUP} |\n| Trends | {TRENDS} |\n",
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_each_answer_is_read_under_its_own_question(layout: str) -> None:
    section = LAYOUTS[layout]
    for question, answer in (("Setup", SETUP), ("Trends", TRENDS)):
        blocks = answer_blocks(section, question, QUESTIONS)
        best = max(blocks, key=lambda block: len(_own_words(block, "")))
        assert answer.split(",")[0] in best, (layout, question, blocks)
        other = TRENDS if question == "Setup" else SETUP
        assert other.split(",")[0] not in best, (layout, question)


@pytest.mark.parametrize(
    "own_section",
    [
        f"## My analysis\n\n#### Q1 - Setup\n{SETUP}\n\n#### Q2 - Trends\n{TRENDS}\n",
        f"## Discussion\n\n**1. Setup.** {SETUP}\n\n**2. Trends.** {TRENDS}\n",
    ],
)
def test_answers_under_a_heading_of_the_students_own_after_the_section_are_read(own_section: str) -> None:
    """The starter's questions left as they are (TODO and all), the answers under a heading of the student's own
    after them, at the same level as the section: each answer is found under its own question."""
    import types

    import nbformat

    from grader.checks.common import WrittenAnswerParams, written_answer

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell(f"## 6. Results\n\n{STARTER}"), nbformat.v4.new_markdown_cell(own_section)]
    checks = [types.SimpleNamespace(kind="written_answer", params={"section": "Results", "question": q}) for q in QUESTIONS]
    context = types.SimpleNamespace(notebook=notebook, rubric=types.SimpleNamespace(checks=checks))
    for question, answer, other in (("Setup", SETUP, TRENDS), ("Trends", TRENDS, SETUP)):
        params = WrittenAnswerParams(section="Results", question=question, prompt="Describe it.")
        verdict = written_answer.run(context, params)
        assert verdict.outcome == "manual", verdict.message
        assert answer.split(",")[0] in verdict.answer and other.split(",")[0] not in verdict.answer


def test_axis_labels_are_read_as_a_reader_sees_them() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from grader.kernel import runtime

    figure, (top, bottom) = plt.subplots(2, 1, sharex=True)
    top.plot([1, 2], [3, 4])
    top.set_ylabel("Latency (s)")
    bottom.plot([1, 2], [5, 6])
    bottom.set_ylabel("Tokens per second")
    bottom.set_xlabel("Prompt length (tokens)")
    twin = bottom.twinx()
    twin.set_ylabel("ms per token")
    described = runtime.describe_figure(figure)
    assert [axes["xlabel"] for axes in described["axes"]] == ["Prompt length (tokens)"] * 3
    assert [axes["ylabel"] for axes in described["axes"]] == ["Latency (s)", "Tokens per second", "ms per token"]
    plt.close(figure)

    figure, _ = plt.subplots(1, 2)
    figure.supxlabel("Prompt length (tokens)")
    figure.supylabel("Seconds")
    described = runtime.describe_figure(figure)
    assert {axes["xlabel"] for axes in described["axes"]} == {"Prompt length (tokens)"}
    assert {axes["ylabel"] for axes in described["axes"]} == {"Seconds"}
    plt.close(figure)

    figure = plt.figure()
    left, right = figure.subfigures(1, 2)
    left.subplots().plot([1, 2], [1, 2])
    left.supylabel("Latency (s)")
    right.subplots().plot([1, 2], [1, 2])
    right.supylabel("Tokens/s")
    figure.supxlabel("Prompt tokens")
    described = runtime.describe_figure(figure)
    assert [(axes["xlabel"], axes["ylabel"]) for axes in described["axes"]] == [
        ("Prompt tokens", "Latency (s)"),
        ("Prompt tokens", "Tokens/s"),
    ]
    plt.close(figure)


def test_a_plot_label_must_say_what_the_axis_shows() -> None:
    from course_assignments.latency.checks import _label_problem

    assert _label_problem("Latency (s)", "latency", False) == ""
    assert _label_problem("Latency (ms)", "latency", True) == ""
    assert _label_problem("latency_s", "latency", False) == ""
    assert _label_problem("Time (seconds)", "latency", False) == ""
    # "s" is a word of its own: a sequence length is no latency; a time per token is not the generation's latency.
    assert "does not say it shows latency" in _label_problem("Sequence length", "latency", False)
    assert "time per token" in _label_problem("Time per token (ms)", "latency", True)
    assert "time per token" in _label_problem("ms_per_token", "latency", True)
    assert "first token" in _label_problem("Time to first token (s)", "latency", False)
    assert "generated tokens" in _label_problem("Generated tokens (max_new_tokens)", "prompt length")
    assert _label_problem("Prompt length (tokens)", "prompt length") == ""
    assert _label_problem("input tokens", "prompt length") == ""
    assert _label_problem("prompt length (tokens)\n(max_new_tokens=16, use_cache=True)", "prompt length") == ""
    assert "in milliseconds" in _label_problem("Latency (s)", "latency", True)
    assert "does not say it shows tokens/s" in _label_problem("Latency (s)", "tokens/s")
    assert _label_problem("Throughput (tok/s)", "tokens/s") == ""
    assert _label_problem("Prompt length (tokens)", "prompt length") == ""
