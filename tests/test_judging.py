"""Fast tests of pure judging logic with made-up events and notebooks (no kernel, no model)."""

from __future__ import annotations

import types
from typing import Any

import nbformat
import pytest

from grader.checks.common import WrittenAnswerParams, written_answer
from grader.checks.labels import missing_scenarios, read_scenario
from grader.checks.quantization import SETTINGS
from grader.checks.timing import warmup_before
from grader.evidence import generated_anything


def generate(start: float, end: float, **fields: Any) -> dict[str, Any]:
    """A made-up generate event."""
    event = {"type": "generate", "start": start, "end": end, "duration_s": end - start, "model_serial": 1}
    event.update({"model_device": "cpu", "new_tokens": [4], "input_shape": [1, 5], "output_shape": [1, 9]})
    event.update(fields)
    return event


@pytest.mark.parametrize(
    ("label", "use_cache", "padding"),
    [
        ("use_cache=False,padding=left", False, "left"),
        ("KV cache disabled, left padding", False, "left"),
        ("cache: off", False, None),
        ("no-cache / right", False, "right"),
        ("without KV cache (right pad)", False, "right"),
        ("use_cache=True,padding=right", True, "right"),
        ("with cache, left-padded", True, "left"),
        ("Cache=True|left", True, "left"),
        ("baseline", None, None),
    ],
)
def test_cache_and_padding_are_read_by_meaning(label: str, use_cache: bool | None, padding: str | None) -> None:
    scenario = read_scenario(label)
    assert (scenario.use_cache, scenario.padding) == (use_cache, padding)


@pytest.mark.parametrize(
    ("label", "size"), [("batch_size=4", 4), ("bs=2", 2), ("batch of 3", 3), ("5 prompts", 5), ("batched x8", 8)]
)
def test_batch_sizes_are_read_by_meaning(label: str, size: int) -> None:
    assert read_scenario(label).batch_size == size


def test_a_table_worded_its_own_way_has_every_scenario() -> None:
    labels = [
        "Baseline (PyTorch FP32)",
        "ONNX Runtime INT8",
        "KV cache on, left padding",
        "KV cache on, right padding",
        "KV cache disabled, left padding",
        "KV cache disabled, right padding",
        "batch of 1",
        "batch of 4",
    ]
    assert missing_scenarios(labels, [1, 4], SETTINGS) == []
    assert missing_scenarios(labels[:-1], [1, 4], SETTINGS) == ["batch_size=4"]
    assert missing_scenarios([label for label in labels if "disabled, right" not in label], [1, 4], SETTINGS) == [
        "use_cache=False,padding=right"
    ]


def test_a_warm_up_must_generate_tokens_on_the_same_model_and_device() -> None:
    timed = generate(1.0, 1.1)
    assert warmup_before([generate(0.0, 0.1), timed], timed) is not None
    raised = generate(0.0, 0.01, error="ValueError: max_new_tokens must be greater than 0", new_tokens=None, output_shape=None)
    assert warmup_before([raised, timed], timed) is None
    nothing = generate(0.0, 0.01, new_tokens=[0], output_shape=[1, 5])
    assert warmup_before([nothing, timed], timed) is None
    other_model = generate(0.0, 0.1, model_serial=2)
    assert warmup_before([other_model, timed], timed) is None
    other_device = generate(0.0, 0.1, model_device="cuda:0")
    assert warmup_before([other_device, timed], timed) is None
    after = generate(1.2, 1.3)
    assert warmup_before([timed, after], timed) is None


def test_generated_anything_reads_the_output_width_when_no_counts_were_recorded() -> None:
    assert generated_anything({"input_shape": [2, 5], "output_shape": [2, 7]})
    assert not generated_anything({"input_shape": [2, 5], "output_shape": [2, 5]})


def _notebook(*markdown: str) -> Any:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell(text) for text in markdown]
    return types.SimpleNamespace(notebook=notebook)


QUESTIONS = (
    "## 6. Results\n\n1.  **Setup:**\n    *   **TODO**: Describe your setup.\n\n"
    "2.  **Trends:**\n    *   **TODO**: Give two or three bullet points."
)
SETUP = WrittenAnswerParams(section="Results", question="Setup", prompt="Describe your setup.")
TRENDS = WrittenAnswerParams(section="Results", question="Trends", prompt="Give two or three bullet points.")
ANSWER = (
    "**Setup.** A CPU, gpt2, float32 and float16 (which fell back to float32), 32 new tokens, with the cache on.\n\n"
    "**Trends.** Latency barely grows with the prompt on this tiny model; float16 is the same as float32 on a CPU, "
    "since both run in float32 there."
)


def test_answers_in_a_cell_of_their_own_below_the_todo_questions_are_read() -> None:
    context = _notebook(QUESTIONS, ANSWER)
    assert written_answer.run(context, SETUP).outcome == "manual"
    assert written_answer.run(context, TRENDS).outcome == "manual"


def test_an_answer_typed_under_its_question_below_the_todo_line_is_read() -> None:
    text = QUESTIONS.replace(
        "*   **TODO**: Describe your setup.",
        "*   **TODO**: Describe your setup.\n\n    I ran gpt2 on a CPU in float32 with 32 new tokens.",
    )
    assert written_answer.run(_notebook(text), SETUP).outcome == "manual"


@pytest.mark.parametrize(
    "later",
    [
        "(will fill these in once the experiment has finished running)",
        "",
    ],
)
def test_todo_questions_with_no_real_answer_still_fail(later: str) -> None:
    cells = (QUESTIONS, later) if later else (QUESTIONS,)
    verdict = written_answer.run(_notebook(*cells), SETUP)
    assert verdict.outcome == "failed" and "still reads TODO" in verdict.message


def test_todo_kept_with_a_few_words_added_still_fails() -> None:
    text = QUESTIONS.replace("Describe your setup.", "Describe your setup. CPU, gpt2, float32 and 32 tokens mostly.")
    assert written_answer.run(_notebook(text), SETUP).outcome == "failed"
