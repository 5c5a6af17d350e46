"""Which model a student's code really loaded: judged by its weights, not by what it is called.

``config._name_or_path`` (``name_or_path``) is a string a loader can set to anything; a model's
config sizes and the values of its input embedding are what loaded. The kernel reports them
(``runtime.model_fingerprint``); the grader loads the same hub ID itself and compares.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from grader.checks.base import CheckContext
from grader.kernel import runtime
from grader.kernel.harness import model_spec
from grader.kernel.values import Model

# A model loaded in float16 or bfloat16 rounds its weights to 3 significant digits; two models
# trained apart differ in every value by far more.
REL_TOLERANCE = 1e-2
ABS_TOLERANCE = 1e-3


def fingerprint_difference(found: Mapping[str, Any], expected: Mapping[str, Any]) -> str | None:
    """What makes the model ``found`` describes another than ``expected``'s (None when they are the same)."""
    found_sizes = _mapping(found.get("sizes"))
    expected_sizes = _mapping(expected.get("sizes"))
    differing = [
        f"{name} {found_sizes.get(name)!r} (expected {value!r})"
        for name, value in expected_sizes.items()
        if found_sizes.get(name) != value and not _grown_vocabulary(name, found_sizes.get(name), value)
    ]
    if differing:
        return "its config differs: " + ", ".join(differing)
    found_blocks, expected_blocks = found.get("blocks"), expected.get("blocks")
    if isinstance(found_blocks, int) and isinstance(expected_blocks, int) and found_blocks and found_blocks != expected_blocks:
        return f"it holds {found_blocks} blocks of layers, not {expected_blocks}"
    found_values = _list(found.get("embedding"))
    expected_values = _list(expected.get("embedding"))
    if not expected_values:
        return None  # the reference has no embedding to compare: the sizes agreed
    if len(found_values) != len(expected_values) or not all(
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isclose(value, wanted, rel_tol=REL_TOLERANCE, abs_tol=ABS_TOLERANCE)
        for value, wanted in zip(found_values, expected_values, strict=False)
    ):
        return "its weights differ"
    return None


def _grown_vocabulary(name: str, found: Any, expected: Any) -> bool:
    """Whether a size differs only as a vocabulary does that tokens were added to (a pad token, with the model's
    embeddings resized): the same model, a few rows longer."""
    return name == "vocab_size" and isinstance(found, int) and isinstance(expected, int) and expected < found <= expected + 1024


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def reference_fingerprint(context: CheckContext, hub_id: str) -> dict[str, Any]:
    """The fingerprint of the model the grader itself loads under ``hub_id``."""
    fingerprint: dict[str, Any] = context.once(
        f"fingerprint:{hub_id}", lambda: runtime.model_fingerprint(context.models.model(model_spec(hub_id)))
    )
    return fingerprint


def other_model(context: CheckContext, loaded: Model, hub_id: str) -> str | None:
    """Why ``loaded`` is not the model served under ``hub_id`` (None when its weights are that model's)."""
    return fingerprint_difference(loaded.fingerprint, reference_fingerprint(context, hub_id))


def identify(context: CheckContext, fingerprint: Mapping[str, Any] | None) -> str | None:
    """The hub id (among the rubric's models) whose weights a model's fingerprint shows; None for another model."""
    if not fingerprint:
        return None
    for hub_id in context.rubric.models:
        if fingerprint_difference(fingerprint, reference_fingerprint(context, hub_id)) is None:
            return hub_id
    return None
