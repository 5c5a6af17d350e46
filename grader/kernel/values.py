"""Plain Python values decoded from the kernel's JSON descriptions.

The kernel runtime describes every value as JSON (see ``grader/kernel/runtime/``). Here those
descriptions become ordinary Python objects (str, float, tuple, dict, ...) or small frozen
records for what cannot cross the boundary (tensors, DataFrames, models, opaque objects). No
description is ever evaluated: a description is data, built only into these types.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from grader.kernel.runtime import MAX_DEPTH, MAX_ITEMS, MAX_STRING

# The runtime's caps, enforced again here: a notebook can lift them inside its kernel, and
# whatever the grader does with a value afterwards (tokenizing a returned prompt, comparing,
# rendering) must stay bounded however the value was made.


@dataclass(frozen=True)
class Opaque:
    """A value the kernel could only describe by its type and repr."""

    kind: str
    type: str
    repr: str = ""

    def __str__(self) -> str:
        return self.repr or f"<{self.type}>"


@dataclass(frozen=True)
class DType:
    """A ``torch.dtype``, by name (``"torch.float32"``)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Tensor:
    """A tensor's shape, dtype, device, and its values when small."""

    shape: tuple[int, ...]
    dtype: str
    device: str
    values: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class Frame:
    """A pandas DataFrame: column names, dtypes and (up to 200) rows of decoded cells."""

    columns: tuple[Any, ...]
    dtypes: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    length: int

    def column(self, name: Any) -> list[Any]:
        """The values of one column."""
        index = self.columns.index(name)
        return [row[index] for row in self.rows]

    def records(self) -> list[dict[Any, Any]]:
        """Rows as dicts keyed by column name."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


@dataclass(frozen=True)
class Model:
    """A loaded model as the kernel saw it."""

    type: str
    device: str
    dtype: str
    training: bool
    loaded_in_8bit: bool
    loaded_in_4bit: bool
    parameter_bytes: int
    parameter_elements: int
    buffer_bytes: int
    buffer_elements: int
    quantization: dict[str, Any] | None = None
    linear_types: tuple[str, ...] = ()
    parameter_dtypes: tuple[str, ...] = ()
    name_or_path: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    # Linear layers by how their weights are stored: "int8", "4bit", "float" counts and "quant_types".
    layers: dict[str, Any] = field(default_factory=dict)
    # Config sizes ("sizes") and first input-embedding values ("embedding"): which weights these are.
    fingerprint: dict[str, Any] = field(default_factory=dict)

    @property
    def quant_type(self) -> str | None:
        """``"nf4"``/``"fp4"`` for a 4-bit model, else None."""
        if not self.loaded_in_4bit or not self.quantization:
            return None
        value = self.quantization.get("bnb_4bit_quant_type")
        return str(value) if value is not None else None


@dataclass(frozen=True)
class OnnxModel:
    """An ONNX Runtime model (Optimum's ORTModel classes): the ONNX file its session runs."""

    type: str
    path: str
    providers: tuple[str, ...] = ()
    name_or_path: str = ""


@dataclass(frozen=True)
class Tokenizer:
    """A tokenizer: its class, where it was loaded from, and its padding settings."""

    type: str
    name_or_path: str
    pad_token: str | None
    padding_side: str | None
    vocab_size: int
    serial: int = 0  # the runtime's serial of the object: its ``tokenizer`` event says what it was loaded from
    files: str = ""  # the path its vocabulary was read from (a copy of a tokenizer keeps it)


def scalar(value: Any) -> Any:
    """A tensor of one number as that number (a loss kept as ``tensor([2.07])``); any other value as it is."""
    if isinstance(value, Tensor) and value.values is not None and len(value.values) == 1 and is_number(value.values[0]):
        return value.values[0]
    return value


def decode(description: Any, depth: int = 0) -> Any:
    """Turn one JSON description from the kernel into a plain Python value (within the
    runtime's caps: strings of :data:`MAX_STRING` characters, :data:`MAX_ITEMS` items, :data:`MAX_DEPTH` levels)."""
    if not isinstance(description, dict) or "kind" not in description or depth > MAX_DEPTH + 1:
        return Opaque("malformed", type(description).__name__, repr(description)[:200])
    description = bounded(description)
    kind = description["kind"]
    if kind in ("none", "bool", "int", "str"):
        value = description.get("value")
        if kind == "int" and isinstance(value, str):
            return int(value[:MAX_INT_DIGITS])
        if kind == "str" and not isinstance(value, str):
            return Opaque("malformed", type(value).__name__, repr(value)[:200])
        return value
    if kind == "float":
        special = description.get("special")
        if special is not None:
            return float(special) if special in ("nan", "inf", "-inf") else math.nan
        return float(description["value"])
    if kind in ("list", "set"):
        return [decode(item, depth + 1) for item in description.get("items", [])]
    if kind == "tuple":
        return tuple(decode(item, depth + 1) for item in description.get("items", []))
    if kind == "dict":
        return {_key(decode(key, depth + 1)): decode(value, depth + 1) for key, value in description.get("items", [])}
    if kind == "dtype":
        return DType(description["value"])
    if kind == "tensor":
        values = description.get("values")
        return Tensor(
            tuple(description["shape"]),
            description["dtype"],
            description["device"],
            tuple(decode(v, depth + 1) for v in values) if values is not None else None,
        )
    if kind == "dataframe":
        return Frame(
            columns=tuple(decode(c, depth + 1) for c in description["columns"]),
            dtypes=tuple(description["dtypes"]),
            rows=tuple(tuple(decode(cell, depth + 1) for cell in row[:MAX_ITEMS]) for row in description["rows"]),
            length=int(description["length"]),
        )
    if kind == "series":
        return [decode(item, depth + 1) for item in description.get("items", [])]
    if kind == "model":
        return decode_model(description)
    if kind == "tokenizer":
        return Tokenizer(
            str(description.get("type", "")),
            str(description.get("name_or_path", "")),
            description.get("pad_token"),
            description.get("padding_side"),
            int(description.get("vocab_size", 0)),
            int(description.get("serial", 0)) if isinstance(description.get("serial"), int) else 0,
            str(description.get("files", ""))[:500],
        )
    if kind == "onnx_model":
        return OnnxModel(
            str(description.get("type", "")),
            str(description.get("path", "")),
            tuple(str(p) for p in description.get("providers", [])),
            str(description.get("name_or_path", "")),
        )
    if kind == "config":
        fields = decode(description.get("fields", {"kind": "dict", "items": []}), depth + 1)
        return ConfigValue(str(description.get("type", "")), fields if isinstance(fields, dict) else {})
    return Opaque(kind, str(description.get("type", kind)), str(description.get("repr", "")))


@dataclass(frozen=True)
class ConfigValue:
    """A configuration object (``BitsAndBytesConfig``, ...) by its type and fields."""

    type: str
    fields: dict[str, Any]

    @property
    def short_type(self) -> str:
        """The class name without its module."""
        return self.type.rsplit(".", 1)[-1]


def decode_model(description: dict[str, Any]) -> Model:
    """A :class:`Model` from the runtime's ``describe_model`` output."""
    quantization = description.get("quantization_config")
    return Model(
        type=description["type"],
        device=description["device"],
        dtype=description["dtype"],
        training=bool(description["training"]),
        loaded_in_8bit=bool(description["loaded_in_8bit"]),
        loaded_in_4bit=bool(description["loaded_in_4bit"]),
        parameter_bytes=int(description["parameter_bytes"]),
        parameter_elements=int(description["parameter_elements"]),
        buffer_bytes=int(description["buffer_bytes"]),
        buffer_elements=int(description["buffer_elements"]),
        quantization=decode(quantization) if quantization is not None else None,
        linear_types=tuple(description.get("linear_types", ())),
        parameter_dtypes=tuple(description.get("parameter_dtypes", ())),
        name_or_path=str(description.get("name_or_path", "")),
        layers=_plain_dict(description.get("layers")),
        fingerprint=_plain_dict(description.get("fingerprint")),
    )


def _plain_dict(value: Any) -> dict[str, Any]:
    """A small JSON object from the runtime kept as is (strings cut, lists bounded); {} if it is not one."""
    if not isinstance(value, dict):
        return {}
    return {str(key): bounded(item) if isinstance(item, dict) else item for key, item in bounded(value).items()}


MAX_INT_DIGITS = 4_000  # Python's own limit on converting a str to an int


def bounded(description: dict[str, Any], max_items: int = MAX_ITEMS) -> dict[str, Any]:
    """``description`` with its strings and lists cut to the runtime's caps (a shallow copy)."""
    cut: dict[str, Any] = {}
    for name, field_value in description.items():
        if isinstance(field_value, str):
            field_value = field_value[:MAX_STRING]
        elif isinstance(field_value, list):
            field_value = field_value[:max_items]
        cut[name] = field_value
    return cut


def _key(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


def kind_of(value: Any) -> str:
    """How a value reads in feedback: 'a str', 'a tuple of 2 items', 'a DataFrame with 4 rows'."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return f"a bool ({value})"
    if isinstance(value, (int, float)):
        return f"a {type(value).__name__} ({value!r})"
    if isinstance(value, str):
        return f"a str ({_clip(value)!r})"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        return f"a dict with {len(value)} key{'s' if len(value) != 1 else ''}"
    if isinstance(value, Frame):
        return f"a DataFrame with {value.length} row{'s' if value.length != 1 else ''}"
    if isinstance(value, Tensor):
        return f"a tensor of shape {list(value.shape)} ({value.dtype})"
    if isinstance(value, DType):
        return f"a dtype ({value.name})"
    if isinstance(value, Model):
        return f"a model ({value.type.rsplit('.', 1)[-1]})"
    if isinstance(value, OnnxModel):
        return f"an ONNX Runtime model ({value.type.rsplit('.', 1)[-1]})"
    if isinstance(value, Tokenizer):
        return f"a tokenizer ({value.type.rsplit('.', 1)[-1]})"
    if isinstance(value, ConfigValue):
        return f"a {value.short_type}"
    if isinstance(value, Opaque):
        return f"a {value.type.rsplit('.', 1)[-1]}"
    return f"a {type(value).__name__}"


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_number(value: Any) -> bool:
    """A real number (int or float, not bool), finite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
