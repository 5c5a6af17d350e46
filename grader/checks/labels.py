"""Reading what a student's label means, where the starter fixes no wording.

A results table's ``scenario`` column may read ``use_cache=False,padding=left``, ``KV cache
disabled, left padding``, ``no cache / left`` or ``batch of 4``: a careful human reads them all
the same way, and so does :func:`read_scenario`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NEGATION = re.compile(r"(?<![\w])(?:false|off|disabled?|no|none|without|w/o|0|✗|❌|not)(?![\w])")
# "not quantized", "non-quantized", "w/o quantization": the model the others are compared with, not a quantized one.
# "not quantized", "non-quantised", "before quantization", "pre-quantization" (either spelling).
_NOT_QUANTIZED = r"(?:\bnot|\bnon|\bno|\bwithout|\bw\s*,\s*o|\bbefore|\bpre)[\s_-]*quanti[sz]\w*"
_CACHE = re.compile(r"(?:kv[\s_-]*)?cache|use[\s_-]*cache")
_BATCH = (
    re.compile(r"\b(?:batch(?:[\s_-]*size)?|bsz|bs|b)\s*(?:=|:|of|x|×)?\s*(\d+)\b"),
    # "batch of size 4", "batch (n=4)", "batch (size 4)"
    re.compile(r"\bbatch(?:ed)?\s*(?:of\s+size|,\s*(?:n|size|bs)\s*[=:]?)\s*(\d+)\b"),  # parentheses read as commas
    re.compile(r"\b(\d+)\s*[-_ ]?(?:prompts?|samples?|sequences?|seqs)\b"),
    re.compile(r"\b(\d+)[\s_-]*(?:way|wide|prompt)[\s_-]*batch"),  # "4-way batch", "4-prompt batch"
    re.compile(r"\bbatch(?:ed)?[\s_-]*(?:x|×)?\s*(\d+)\b"),
    # "batch (1)", "batched [4]", "batch_size (4)": the number alone in brackets, read as commas
    re.compile(r"\bbatch(?:ed|es)?(?:[\s_-]*size)?\s*,\s*(\d+)\s*,"),
    re.compile(r"\b(?:x|×)\s*(\d+)\s+batch"),  # "x4 batch"
)


@dataclass(frozen=True)
class Scenario:
    """What one label of a results table says it measured (None: the label does not say)."""

    baseline: bool = False
    quantized: bool = False
    use_cache: bool | None = None
    padding: str | None = None
    batch_size: int | None = None
    extra: bool = False  # a row beside the comparison: an edge prompt's, the unquantized ONNX model's ("onnx_fp32")


def _words(label: str) -> str:
    text = re.sub(r"\bw/o\b", "without", label.casefold())  # before "/" separates clauses
    return " " + re.sub(r"[,;|/()\[\]{}+]", " , ", text) + " "


def _cache_setting(text: str) -> bool | None:
    """use_cache as the label states it: negated (no cache, cache off, KV cache disabled) or not."""
    for clause in text.split(","):
        match = _CACHE.search(clause)
        if not match:
            continue
        if re.search(r"no[\s_-]?(?:kv[\s_-]*)?cache|\b(?:un|non)[\s_-]?cached?\b|cache[\s_-]?less", clause):
            return False
        return not _NEGATION.search(clause.replace("=", " = "))
    return None


def read_scenario(label: object) -> Scenario:
    """The scenario a label names: baseline, quantized, a cache/padding setting, a batch size."""
    text = _words(str(label))
    padding = None
    if re.search(r"\bleft\b", text):
        padding = "left"
    elif re.search(r"\bright\b", text):
        padding = "right"
    batch_size = None
    for pattern in _BATCH:
        match = pattern.search(text)
        if match:
            batch_size = int(match.group(1))
            break
    spaced = text.replace("_", " ")  # "onnx_fp32", "int8_dynamic": words joined by underscores
    plain = re.sub(_NOT_QUANTIZED, " ", spaced)
    float_named = bool(re.search(r"\bfp32\b|float32|pytorch|full[\s_-]*precision", spaced))
    onnx = bool(re.search(r"\bonnx(?:runtime)?\b|\bort\b", plain))  # "ONNX", "onnxruntime", "ORT" (ONNX Runtime's own short name)
    # "int8", "QInt8" / "QUInt8" (ONNX Runtime's type names), "8-bit"
    said_quantized = bool(re.search(r"(?<!un)quanti[sz]|\bq?u?int[\s_-]?8\b|\bptq\b|8[\s-]?bit", plain))
    # An edge prompt's row ("baseline: edge very_long") and the unquantized ONNX model's ("ONNX FP32 (reference)") are
    # rows beside the two the comparison is about: neither the baseline nor the quantized model.
    extra = bool(re.search(r"\bedge\b|very[\s_-]?(?:short|long)\b|multi[\s_-]?line|\brepetitive\b", text)) or (
        onnx and float_named and not said_quantized
    )
    quantized = (said_quantized or onnx) and not extra
    named_baseline = bool(re.search(r"baseline|original|unquanti[sz]ed|" + _NOT_QUANTIZED, text))
    # "fp32" or "PyTorch" name the baseline unless the label is a quantized model's ("int8 weights, fp32 activations").
    return Scenario(
        baseline=(named_baseline or (float_named and not quantized)) and not extra,
        quantized=quantized,
        use_cache=_cache_setting(text),
        padding=padding,
        batch_size=batch_size,
        extra=extra,
    )


def missing_scenarios(labels: list[object], batch_sizes: list[int], settings: tuple[tuple[bool, str], ...]) -> list[str]:
    """Which scenarios no label names: baseline, quantized, each cache/padding setting, each batch size."""
    read = [read_scenario(label) for label in labels]
    wanted: dict[str, bool] = {
        "baseline": any(s.baseline for s in read),
        "quantized": any(s.quantized for s in read),
        **{
            f"use_cache={use_cache},padding={side}": any(s.use_cache is use_cache and s.padding == side for s in read)
            for use_cache, side in settings
        },
        **{f"batch_size={size}": any(s.batch_size == size for s in read) for size in batch_sizes},
    }
    return [name for name, present in wanted.items() if not present]
