"""Declared return shapes (grader/checks/shapes.py): the "should return" verdict each gives, on made-up values."""

from __future__ import annotations

import math
from typing import Any

import pytest

from grader.checks.base import StopCheck, expect_shape, shape_verdict
from grader.checks.shapes import ANY, FRAME, MODEL, STRING, TOKENIZER, instance, items, keyed_by, keys, numeric
from grader.kernel.values import Frame, Model, Tokenizer

TOKENIZER_VALUE = object.__new__(Tokenizer)  # instances of the decoded types, their fields unread here
MODEL_VALUE = object.__new__(Model)
FRAME_VALUE = object.__new__(Frame)


def message(value: Any, shape: Any, call: str = "f(x)") -> str:
    verdict = shape_verdict(value, shape, call)
    assert verdict is not None and verdict.outcome == "failed"
    return verdict.message


def test_values_of_the_declared_shape_pass_through() -> None:
    loaded = items(TOKENIZER, MODEL, names="(tokenizer, model)")
    assert expect_shape((TOKENIZER_VALUE, MODEL_VALUE), loaded, "load") == (TOKENIZER_VALUE, MODEL_VALUE)
    assert expect_shape({"latency_s": 1.0, "extra": 2}, keys("latency_s"), "m") == {"latency_s": 1.0, "extra": 2}
    assert expect_shape(3, numeric(), "m") == 3
    assert expect_shape({"a": 1, "b": 2}, keyed_by("label", 2), "m") == {"a": 1, "b": 2}
    assert expect_shape(object, ANY, "m") is object


def test_a_wrong_shape_says_what_was_declared_and_what_came_back() -> None:
    loaded = items(TOKENIZER, MODEL, names="(tokenizer, model)")
    assert message("gpt2", loaded, "load_model") == "load_model should return (tokenizer, model), but it returned a str ('gpt2')."
    assert message((TOKENIZER_VALUE,), loaded) == "f(x) should return (tokenizer, model), but it returned a tuple of 1 item."
    assert message((TOKENIZER_VALUE, "gpt2"), loaded) == (
        "f(x) should return (tokenizer, model), but it returned a tuple of 2 items whose item 2 is a str ('gpt2'), not a model."
    )


def test_a_dict_missing_a_key_names_it_and_lists_what_it_has() -> None:
    with pytest.raises(StopCheck) as stop:
        expect_shape({"latency_s": 0.5}, keys("latency_s", "tokens_per_s"), "measure(...)")
    verdict = stop.value.verdict
    assert (
        verdict.message == "measure(...) should return a dict with 'latency_s' and 'tokens_per_s', but it has no 'tokens_per_s'."
    )
    assert verdict.expected == "{'latency_s': ..., 'tokens_per_s': ...}"
    assert verdict.found == "keys ['latency_s']"
    assert message([0.5], keys("loss", text="a dict with 'loss' and 'tokens'")) == (
        "f(x) should return a dict with 'loss' and 'tokens', but it returned a list of 1 item."
    )


@pytest.mark.parametrize("value", [True, math.nan, "3", None])
def test_a_number_is_a_finite_int_or_float_not_a_bool(value: Any) -> None:
    assert shape_verdict(value, numeric("a number of MB", "a float (MB)"), "footprint") is not None


def test_instances_and_dicts_by_key() -> None:
    assert shape_verdict(FRAME_VALUE, FRAME, "sweep") is None
    assert message({"a": 1}, FRAME, "sweep") == "sweep should return a pandas DataFrame, but it returned a dict with 1 key."
    assert shape_verdict(1, instance(int, "an int"), "f") is None
    assert shape_verdict(True, instance(int, "an int"), "f") is not None
    assert message(b"x", STRING, "build_prompt(...)").startswith("build_prompt(...) should return a string, but it returned")
    assert message({"a": 1}, keyed_by("edge kind", 4), "probe") == "probe should return a dict keyed by edge kind, but it has 1."
