"""Declared return shapes: what a student function should return, said once, and the "should return" verdict it gives.

A check declares the shape of the value it judges (``returns=`` of :meth:`CheckContext.returned`, or
:func:`expect_shape`); a value of another shape stops the check with one sentence built from the declaration:
"measure_generation(...) should return a dict with 'latency_s' and 'tokens_per_s', but it has no 'tokens_per_s'."
The checks' own judgements then read a value they know the shape of.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from grader.kernel.values import Frame, Model, Tokenizer, is_number, kind_of


@dataclass(frozen=True)
class Shape:
    """A shape a returned value must have: ``text`` in the sentence, ``expected`` in the verdict's expected field, and
    ``fault`` saying what about a value does not fit (None when it fits)."""

    text: str
    expected: str
    fault: Callable[[Any], str | None]

    def fits(self, value: Any) -> bool:
        return self.fault(value) is None


def instance(types: type | tuple[type, ...], text: str, expected: str | None = None) -> Shape:
    """An instance of ``types`` (a bool is not an int here)."""
    wanted = types if isinstance(types, tuple) else (types,)

    def fault(value: Any) -> str | None:
        if isinstance(value, wanted) and not (isinstance(value, bool) and bool not in wanted):
            return None
        return f"it returned {kind_of(value)}"

    return Shape(text, expected or text, fault)


def numeric(text: str = "a number", expected: str = "a float") -> Shape:
    """A finite int or float."""
    return Shape(text, expected, lambda value: None if is_number(value) else f"it returned {kind_of(value)}")


def items(*shapes: Shape, names: str) -> Shape:
    """A tuple (or list) of exactly these items, each of its shape; ``names`` as the notebook's docstring says it,
    e.g. ``"(tokenizer, model)"``."""

    def fault(value: Any) -> str | None:
        if not isinstance(value, (tuple, list)) or len(value) != len(shapes):
            return f"it returned {kind_of(value)}"
        wrong = next((index for index, (item, shape) in enumerate(zip(value, shapes, strict=True)) if not shape.fits(item)), None)
        if wrong is None:
            return None
        return f"it returned {kind_of(value)} whose item {wrong + 1} is {kind_of(value[wrong])}, not {shapes[wrong].text}"

    return Shape(names, f"a tuple {names}", fault)


def keys(*names: str, text: str | None = None) -> Shape:
    """A dict holding (at least) these keys; a missing one is named."""

    def fault(value: Any) -> str | None:
        if not isinstance(value, dict):
            return f"it returned {kind_of(value)}"
        missing = [name for name in names if name not in value]
        return f"it has no {', '.join(repr(name) for name in missing)}" if missing else None

    listed = ", ".join(repr(name) for name in names[:-1]) + (f" and {names[-1]!r}" if len(names) > 1 else repr(names[0]))
    return Shape(text or f"a dict with {listed}", "{" + ", ".join(f"'{name}': ..." for name in names) + "}", fault)


ANY = Shape("anything", "anything", lambda value: None)
FRAME = instance(Frame, "a pandas DataFrame")
STRING = instance(str, "a string")
TOKENIZER = instance(Tokenizer, "a tokenizer")
MODEL = instance(Model, "a model")


def keyed_by(what: str, at_least: int = 0) -> Shape:
    """A dict whose keys are ``what`` (the check itself judges which), with at least ``at_least`` entries."""

    def fault(value: Any) -> str | None:
        if not isinstance(value, dict):
            return f"it returned {kind_of(value)}"
        return f"it has {len(value)}" if len(value) < at_least else None

    return Shape(f"a dict keyed by {what}", f"a dict of {at_least} entries" if at_least else "a dict", fault)


def shape_problem(value: Any, shape: Shape, call: str) -> tuple[str, str, str] | None:
    """(message, expected, found) of a value that does not fit ``shape``; None when it fits."""
    fault = shape.fault(value)
    if fault is None:
        return None
    found = f"keys {sorted(map(str, value))}" if isinstance(value, dict) and fault.startswith("it has no") else kind_of(value)
    return f"{call} should return {shape.text}, but {fault}.", shape.expected, found
