"""The kernel protocol (grader/kernel/protocol.py): answers and events validated when they arrive, and a field
renamed on one side a type error on the other. Made-up answers here; the real runtime's answers are validated in
every test that runs a kernel (a field the runtime sends that the protocol does not allow fails them all)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from grader.kernel.harness import _outcome_from_answer, validated_answer
from tests.events import GENERATE

ROOT = Path(__file__).resolve().parents[1]


def generate_event(**changes: object) -> dict[str, object]:
    return {**GENERATE, "start": 1.0, "end": 1.5, "duration_s": 0.5, "new_tokens": [4], **changes}


def test_a_well_formed_answer_is_read_with_its_events_typed() -> None:
    answer = {
        "status": "returned",
        "value": {"kind": "float", "value": 0.5},
        "duration_s": 0.6,
        "events": [
            generate_event(max_new_tokens=4),
            {"type": "tokenize", "thread": 1, "start": 0.9, "end": 1.0, "pause": 1, "paced_s": None},
        ],
        "events_dropped": 0,
        "stdout": "",
    }
    typed, wrong = validated_answer(answer)
    assert typed is not None and wrong == ""
    outcome = _outcome_from_answer(typed, 0.7)
    assert outcome.status == "returned" and outcome.value == 0.5
    assert [event["type"] for event in outcome.events] == ["generate", "tokenize"]
    assert outcome.generate_events()[0]["max_new_tokens"] == 4


def test_unknown_fields_are_dropped_and_non_finite_floats_read_back() -> None:
    # The runtime sends a non-finite float as its repr (strict JSON has no NaN): read back as a float.
    typed, _ = validated_answer({"status": "returned", "events": [generate_event(start="nan", invented="x")]})
    assert typed is not None
    (event,) = typed["events"]
    assert "invented" not in event and event["start"] != event["start"]


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        ({"status": "returned", "events": [generate_event(model_serial="one")]}, "event 1 (a generate event): model_serial"),
        (
            {"status": "returned", "events": [{"type": "generate", "start": 1.0}]},
            "event 1 (a generate event): model_id: Field required",
        ),
        ({"status": "returned", "events": [generate_event(), {"type": "teleport"}]}, "event 2, of an unknown type ('teleport')"),
        ({"status": "returned", "events": ["generate"]}, "event 1, of an unknown type (None)"),
        ({"status": "returned", "events": {"type": "generate"}}, "events that are dict, not a list"),
        ({"status": "done"}, "status: Input should be"),
        ({"status": "returned", "duration_s": "fast"}, "duration_s: Input should be a valid number"),
        ({"status": "raised", "exception": {"type": "ValueError"}}, "exception.module: Field required"),
        (["returned"], "an answer that is list, not an object"),
    ],
)
def test_an_answer_the_runtime_cannot_have_sent_is_named(answer: object, named: str) -> None:
    typed, wrong = validated_answer(answer)
    assert typed is None
    assert wrong.startswith(named), wrong


def test_a_misspelt_protocol_field_is_a_type_error(tmp_path: Path) -> None:
    """Read with a key the protocol does not have (as a judge reading a field the runtime renamed would), and built
    without one it requires (as the runtime recording an event would): mypy names both. (Judges read events as
    ``event["field"]``: mypy lets ``event.get("misspelt")`` through, so the protocol's events carry every field.)"""
    source = tmp_path / "misspelt.py"
    source.write_text(
        "from grader.kernel.protocol import GenerateEvent, TokenizeEvent\n"
        "def limit(event: GenerateEvent) -> object:\n"
        "    return event['max_new_token']\n"
        "event: TokenizeEvent = {'type': 'tokenize', 'begin': 0.0}\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--no-incremental", str(source)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 1, result.stdout
    assert 'TypedDict "GenerateEvent" has no key "max_new_token"' in result.stdout
    assert 'Missing keys ("thread", "start", "end", "pause", "paced_s") for TypedDict "TokenizeEvent"' in result.stdout
    assert 'Extra key "begin" for TypedDict "TokenizeEvent"' in result.stdout


def test_a_forward_pass_traced_by_an_onnx_export_has_symbolic_sizes() -> None:
    """Optimum's export traces the model's forward: the runtime records the pass, its shape's sizes symbolic (sent as
    their type's name). Seen in the quantization corpus when the protocol first allowed only ints."""
    traced = {
        "type": "forward",
        "thread": 1,
        "model_id": 1,
        "model_serial": 2,
        "model_type": "transformers.models.gpt2.modeling_gpt2.GPT2LMHeadModel",
        "start": 0.1,
        "grad_enabled": False,
        "inference_mode": False,
        "model_training": False,
        "model_device": "cpu",
        "input_shape": ["SymInt", "SymInt"],
        "input_device": "cpu",
        "row_tokens": None,
        "rows": None,
        "has_labels": False,
        "has_attention_mask": True,
        "nested": False,
        "part_of": None,
        "end": 0.2,
        "error": None,
        "output_requires_grad": False,
    }
    typed, wrong = validated_answer({"status": "returned", "events": [traced]})
    assert typed is not None, wrong
