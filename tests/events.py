"""Made-up kernel events for the judging unit tests: complete as the runtime records them (grader/kernel/protocol.py),
with the fields a test names changed. Each is validated as the grader validates what arrives from a kernel, so a test
cannot judge an event the runtime could not have sent, unless it asks for one (``valid=False``: a judge's own
robustness to a malformed record)."""

from __future__ import annotations

from typing import Any, cast

from grader.kernel.harness import EVENT_TYPES
from grader.kernel.protocol import Event, GenerateEvent, SynchronizeEvent, TokenizeEvent

GENERATE: dict[str, Any] = {
    "type": "generate",
    "model_id": 140_000_000,
    "model_serial": 1,
    "model_quantization": None,
    "model_type": "transformers.models.gpt2.modeling_gpt2.GPT2LMHeadModel",
    "model_device": "cpu",
    "model_dtype": "torch.float32",
    "model_training": False,
    "grad_enabled": False,
    "autocast": None,
    "thread": 1,
    "kwargs": {},
    "positional_args": 0,
    "input_shape": [1, 5],
    "input_device": "cpu",
    "input_ids": None,
    "padding_side": None,
    "rows": None,
    "forward_calls": 0,
    "max_new_tokens": None,
    "use_cache": None,
    "num_beams": 1,
    "custom_processors": 0,
    "processors_s": 0.0,
    "new_tokens_limit": None,
    "instrumentation_replaced": [],
    "decoding_loops": 1,  # the instrumented generate counts the decoding loop that ran inside it
    "start": 0.0,
    "end": 0.0,
    "duration_s": 0.0,
    "error": None,
    "output_shape": [1, 9],
    "output_ids": None,
    "new_tokens": None,
    "cut_short": False,
    "pause": None,
    "paced_s": None,
}


def _made(base: dict[str, Any], fields: dict[str, Any], valid: bool) -> Any:
    event = {**base, **fields}
    if valid:
        EVENT_TYPES[event["type"]].validate_python(event)
    return event


def generate_event(valid: bool = True, **fields: Any) -> GenerateEvent:
    """A generate call (one row of 5 tokens, 4 new tokens on the CPU unless ``fields`` say otherwise)."""
    if "start" in fields and "duration_s" in fields and "end" not in fields:
        fields["end"] = fields["start"] + fields["duration_s"]
    if "start" in fields and "end" in fields and "duration_s" not in fields:
        fields["duration_s"] = fields["end"] - fields["start"]
    return cast(GenerateEvent, _made(GENERATE, fields, valid))


def tokenize_event(start: float, end: float, **fields: Any) -> TokenizeEvent:
    return cast(
        TokenizeEvent,
        _made({"type": "tokenize", "thread": 1, "start": start, "end": end, "pause": None, "paced_s": None}, fields, True),
    )


def synchronize_event(
    start: float, end: float, error: str | None = None, via: str = "torch.cuda.synchronize"
) -> SynchronizeEvent:
    return cast(
        SynchronizeEvent,
        _made({"type": "synchronize", "via": via, "thread": 1, "start": start, "end": end, "error": error}, {}, True),
    )


def event(kind: str, **fields: Any) -> Event:
    """Any other event, exactly as given (validated)."""
    return cast(Event, _made({"type": kind}, fields, True))
