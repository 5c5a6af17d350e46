"""Describing values as plain JSON: what a student's function returned, a model, an ONNX Runtime model's graph.

A part of the grader's runtime (see :mod:`grader.kernel.runtime`): in the kernel the parts are one module."""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for mypy only: in the kernel the parts are one module, which imports nothing of the grader
    from grader.kernel.protocol import (
        Answer,
        OnnxGraphRequest,
        OnnxRunEvent,
        RunTokens,
    )
    from grader.kernel.runtime.base import MAX_DEPTH, MAX_IDS, MAX_ITEMS, MAX_STRING
    from grader.kernel.runtime.install import INSTALLED, _replace
    from grader.kernel.runtime.instrument import RECORDER, _wraps, model_serial
    from grader.kernel.runtime.operations import HANDLES, _capture


# --------------------------------------------------------------------------------------
# Describing values as plain JSON
# --------------------------------------------------------------------------------------


def describe(value: Any, depth: int = 0) -> Any:
    """A JSON-safe description of ``value``: every node is a dict with a ``kind``."""
    if depth > MAX_DEPTH:
        return {"kind": "truncated", "type": _type_name(value)}
    if value is None or isinstance(value, bool):
        return {"kind": "none" if value is None else "bool", "value": value}
    if isinstance(value, int):
        return {"kind": "int", "value": value if abs(value) < 2**53 else str(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"kind": "float", "value": value}
        return {"kind": "float", "value": None, "special": repr(value)}
    if isinstance(value, str):
        return {"kind": "str", "value": value[:MAX_STRING], "length": len(value)}
    module = type(value).__module__ or ""
    if module.startswith("numpy") and hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return describe(value.item(), depth)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        return {
            "kind": "tuple" if isinstance(value, tuple) else ("set" if isinstance(value, (set, frozenset)) else "list"),
            "items": [describe(item, depth + 1) for item in items[:MAX_ITEMS]],
            "length": len(items),
        }
    if isinstance(value, dict):
        entries = list(value.items())
        return {
            "kind": "dict",
            "items": [[describe(k, depth + 1), describe(v, depth + 1)] for k, v in entries[:MAX_ITEMS]],
            "length": len(entries),
        }
    if module.startswith("torch"):
        return _describe_torch(value, depth)
    if module.startswith("pandas") and type(value).__name__ == "DataFrame":
        return _describe_frame(value, depth)
    if module.startswith("pandas") and type(value).__name__ == "Series":
        return {
            "kind": "series",
            "name": describe(value.name, depth + 1),
            "items": [describe(item, depth + 1) for item in list(value.tolist())[:MAX_ITEMS]],
            "length": len(value),
        }
    if _is_pretrained_model(value):
        return describe_model(value)
    if _is_tokenizer(value):
        return {
            "kind": "tokenizer",
            "type": _type_name(value),
            "name_or_path": str(getattr(value, "name_or_path", "")),
            "pad_token": getattr(value, "pad_token", None),
            "padding_side": getattr(value, "padding_side", None),
            "vocab_size": len(value),
        }
    if _is_ort_model(value):
        return describe_onnx_model(value)
    if module.startswith("numpy") and hasattr(value, "shape"):
        return {"kind": "array", "type": _type_name(value), "shape": list(value.shape), "dtype": str(value.dtype)}
    if hasattr(value, "to_dict") and type(value).__name__.endswith("Config"):
        try:
            return {"kind": "config", "type": _type_name(value), "fields": describe(value.to_dict(), depth + 1)}
        except Exception:  # a config whose to_dict fails is described by its repr below
            pass
    if callable(value):
        return {"kind": "callable", "type": _type_name(value), "name": getattr(value, "__name__", None)}
    return {"kind": "object", "type": _type_name(value), "repr": _safe_repr(value)}


def _type_name(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)[:500]
    except Exception as error:  # a student's __repr__ may raise anything
        return f"<unrepresentable: {type(error).__name__}>"


def _describe_torch(value: Any, depth: int) -> Any:
    import torch

    if isinstance(value, torch.dtype):
        return {"kind": "dtype", "value": str(value)}
    if isinstance(value, torch.device):
        return {"kind": "device", "value": str(value)}
    if isinstance(value, torch.Tensor):
        if value.dim() == 0 and not value.dtype.is_complex:
            # A scalar tensor is a number (what .item() gives): a loss returned as a 0-d tensor is the loss.
            return describe(value.item(), depth)
        described: dict[str, Any] = {
            "kind": "tensor",
            "shape": list(value.shape),
            "dtype": str(value.dtype),
            "device": str(value.device),
        }
        if value.numel() <= 64:
            described["values"] = [describe(item) for item in value.detach().cpu().flatten().tolist()]
        return described
    if isinstance(value, torch.nn.Module):
        return {"kind": "module", "type": _type_name(value), "training": value.training}
    return {"kind": "object", "type": _type_name(value), "repr": _safe_repr(value)}


def _describe_frame(frame: Any, depth: int) -> Any:
    rows = frame.head(MAX_ITEMS)
    return {
        "kind": "dataframe",
        "columns": [describe(column, depth + 1) for column in frame.columns],
        "dtypes": [str(dtype) for dtype in frame.dtypes],
        "rows": [[describe(cell, depth + 2) for cell in row] for row in rows.itertuples(index=False, name=None)],
        "length": len(frame),
    }


def _is_pretrained_model(value: Any) -> bool:
    transformers = sys.modules.get("transformers")
    if transformers is None:
        return False
    return isinstance(value, transformers.PreTrainedModel)


def _is_tokenizer(value: Any) -> bool:
    transformers = sys.modules.get("transformers")
    return transformers is not None and isinstance(value, transformers.PreTrainedTokenizerBase)


def describe_model(model: Any) -> dict[str, Any]:
    """What a loaded model is: class, device, dtype, quantization, bytes of weights and buffers."""
    parameters = list(model.parameters())
    buffers = list(model.buffers())
    quantization = getattr(model.config, "quantization_config", None)
    if quantization is not None and hasattr(quantization, "to_dict"):
        quantization = quantization.to_dict()
    linear_types = sorted(
        {type(module).__name__ for name, module in model.named_modules() if name.endswith(("c_attn", "c_fc", "q_proj"))}
    )
    return {
        "kind": "model",
        "type": _type_name(model),
        "name_or_path": str(getattr(model.config, "_name_or_path", "")),
        "device": str(getattr(model, "device", "unknown")),
        "dtype": str(getattr(model, "dtype", "unknown")),
        "training": bool(model.training),
        "loaded_in_8bit": bool(getattr(model, "is_loaded_in_8bit", False)),
        "loaded_in_4bit": bool(getattr(model, "is_loaded_in_4bit", False)),
        "quantization_config": describe(quantization) if quantization is not None else None,
        "linear_types": linear_types,
        "parameter_bytes": sum(p.nelement() * p.element_size() for p in parameters),
        "parameter_elements": sum(p.nelement() for p in parameters),
        "buffer_bytes": sum(b.nelement() * b.element_size() for b in buffers),
        "buffer_elements": sum(b.nelement() for b in buffers),
        "parameter_dtypes": sorted({str(p.dtype) for p in parameters}),
        "layers": linear_layers(model),
        "fingerprint": model_fingerprint(model),
    }


# Config fields that fix a causal LM's shape (GPT-2's names and the common ones).
SHAPE_FIELDS = ("model_type", "vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "hidden_size", "num_hidden_layers")
FINGERPRINT_VALUES = 16  # values of the input embedding kept: two models trained apart differ in every one


def linear_layers(model: Any) -> dict[str, Any]:
    """How the model's linear layers (the output head aside) really store their weights.

    Counts bitsandbytes INT8 layers whose weight holds int8 data, 4-bit layers whose weight holds
    packed uint8 data (with their quant types), and every other linear layer: what loaded, whatever
    ``is_loaded_in_8bit``/``is_loaded_in_4bit`` or the config say.
    """
    import torch

    try:
        head = model.get_output_embeddings()
    except Exception:  # a model without an output head: count every layer
        head = None
    counts = {"int8": 0, "4bit": 0, "float": 0}
    quant_types: set[str] = set()
    for _, module in model.named_modules():
        weight = getattr(module, "weight", None)
        if module is head or not isinstance(weight, torch.Tensor):
            continue
        bitsandbytes = type(module).__module__.startswith("bitsandbytes")
        # A 4-bit weight is packed into whatever its quant storage is (uint8 by default; bnb_4bit_quant_storage can make
        # it bfloat16, float16 or float32): it is known by its type and its quantization state, not by its dtype.
        packed = type(weight).__name__ == "Params4bit" and getattr(weight, "quant_state", None) is not None
        if bitsandbytes and weight.dtype == torch.int8:
            counts["int8"] += 1
        elif bitsandbytes and (weight.dtype == torch.uint8 or packed):
            counts["4bit"] += 1
            state = getattr(weight, "quant_state", None)
            quant_types.add(str(getattr(weight, "quant_type", None) or getattr(state, "quant_type", None)))
        elif isinstance(module, torch.nn.Linear) or type(module).__name__ == "Conv1D":
            counts["float"] += 1
    return {**counts, "quant_types": sorted(quant_types)}


def model_fingerprint(model: Any) -> dict[str, Any]:
    """Which weights a model holds: its config's sizes and the first values of its input embedding."""
    config = getattr(model, "config", None)
    sizes = {name: getattr(config, name) for name in SHAPE_FIELDS if isinstance(getattr(config, name, None), (int, str))}
    try:
        # Values spread over the whole embedding (not only its first row): patching a few of them onto
        # another model does not make it this one.
        flat = model.get_input_embeddings().weight.detach().flatten()
        step = max(1, flat.numel() // FINGERPRINT_VALUES)
        values = [float(value) for value in flat[::step][:FINGERPRINT_VALUES].float().cpu().tolist()]
    except Exception:  # no embedding to read: the sizes alone
        values = []
    return {"sizes": sizes, "embedding": values}


def _ort_model_class() -> Any:
    """Optimum's ``ORTModel`` class, if the kernel imported Optimum's ONNX Runtime models (else None)."""
    for name in ("optimum.onnxruntime.modeling", "optimum.onnxruntime.modeling_ort", "optimum.onnxruntime"):
        cls = getattr(sys.modules.get(name), "ORTModel", None)
        if isinstance(cls, type):
            return cls
    return None


def _is_ort_model(value: Any) -> bool:
    """Whether ``value`` really is an Optimum ONNX Runtime model (by type, not by its module's name)."""
    cls = _ort_model_class()
    return cls is not None and isinstance(value, cls)


def _live_session(model: Any) -> Any:
    """The ``onnxruntime.InferenceSession`` an ORT model holds, or None when it holds none."""
    onnxruntime = sys.modules.get("onnxruntime")
    session = getattr(model, "session", None)
    if onnxruntime is None or not isinstance(session, onnxruntime.InferenceSession):
        return None
    return session


def describe_onnx_model(model: Any) -> dict[str, Any]:
    """An ONNX Runtime model (Optimum's ORTModel...): its class, the ONNX file its session runs, its providers."""
    session = _live_session(model)
    path = getattr(session, "_model_path", None) if session is not None else None
    try:
        providers = [str(provider) for provider in session.get_providers()] if session is not None else []
    except Exception:  # a broken session is still described
        providers = []
    return {
        "kind": "onnx_model",
        "type": _type_name(model),
        "path": str(path) if isinstance(path, (str, bytes)) or hasattr(path, "__fspath__") else "",
        "providers": providers,
        "name_or_path": str(getattr(getattr(model, "config", None), "_name_or_path", "")),
    }


MAX_ONNX_FILE = 4 * 1024**3  # the largest ONNX file whose graph is read (weights in external data are not read)
# Matrix products that run on integers (dynamic and static QOperator formats, weight-only 4/8-bit).
INTEGER_MATMULS = frozenset(
    {"MatMulInteger", "QLinearMatMul", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QGemm", "QAttention", "MatMulNBits"}
)
INT8_TYPES = (2, 3)  # onnx.TensorProto.UINT8, INT8
FLOAT_TYPES = (1, 10, 11, 16)  # FLOAT, FLOAT16, DOUBLE, BFLOAT16


def graph_summary(graph_model: Any) -> dict[str, Any]:
    """What an ONNX graph computes, in counts: integer matrix products and int8 weights on the path to its outputs.

    A node is on the main path when one of the graph's outputs depends on it. A MatMul or Gemm fed
    by a DequantizeLinear of an 8-bit initializer (the QDQ format) counts as an integer product,
    since ONNX Runtime fuses it into one; a MatMul or Gemm with a float initializer as weight is a
    float product.
    """
    operators: dict[str, int] = {}
    int8_total = 0
    integer_main = 0
    float_weight_main = 0
    int8_main: set[str] = set()
    nodes_total = 0
    graphs = [graph_model.graph]
    while graphs:
        graph = graphs.pop()
        initializers = {initializer.name: initializer.data_type for initializer in graph.initializer}
        int8_total += sum(1 for data_type in initializers.values() if data_type in INT8_TYPES)
        producers = {output: node for node in graph.node for output in node.output if output}
        main: set[int] = set()
        pending = [output.name for output in graph.output]
        seen: set[str] = set()
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            node = producers.get(name)
            if node is not None and id(node) not in main:
                main.add(id(node))
                pending.extend(node.input)
        for node in graph.node:
            nodes_total += 1
            operators[node.op_type] = operators.get(node.op_type, 0) + 1
            graphs.extend(attribute.g for attribute in node.attribute if attribute.HasField("g"))
            on_main = id(node) in main
            if not on_main:
                continue
            int8_main.update(name for name in node.input if initializers.get(name) in INT8_TYPES)
            if node.op_type in INTEGER_MATMULS:
                integer_main += 1
            elif node.op_type in ("MatMul", "Gemm"):
                dequantized = [
                    producers[name]
                    for name in node.input
                    if name in producers
                    and producers[name].op_type == "DequantizeLinear"
                    and initializers.get(producers[name].input[0]) in INT8_TYPES
                ]
                if dequantized:
                    integer_main += 1
                    int8_main.update(producer.input[0] for producer in dequantized)
                elif any(initializers.get(name) in FLOAT_TYPES for name in node.input):
                    float_weight_main += 1
    common = sorted(operators.items(), key=lambda item: (-item[1], item[0]))[:12]
    return {
        "nodes": nodes_total,
        "operators": dict(common),
        "integer_ops": {op: count for op, count in operators.items() if op in INTEGER_MATMULS or "Quantize" in op},
        "integer_matmuls_main": integer_main,
        "float_weight_matmuls_main": float_weight_main,
        "int8_initializers": int8_total,
        "int8_initializers_main": len(int8_main),
    }


def _session_graph(session: Any) -> tuple[Any, str]:
    """The ONNX graph a live session was created from (read here, in the kernel), and where from."""

    import onnx

    model_bytes = getattr(session, "_model_bytes", None)
    if isinstance(model_bytes, bytes):
        if len(model_bytes) > MAX_ONNX_FILE:
            raise ValueError(f"the session's model is {len(model_bytes)} bytes, more than the grader reads")
        return onnx.load_from_string(model_bytes), "bytes"
    path = getattr(session, "_model_path", None)
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError("the session names no model file")
    if os.path.getsize(path) > MAX_ONNX_FILE:
        raise ValueError("the session's model file is larger than the grader reads")
    return onnx.load(os.fspath(path), load_external_data=False), os.path.basename(os.fspath(path))


def op_onnx_graph(request: OnnxGraphRequest) -> Answer:
    """The graph a kept ONNX Runtime model's live session runs, summarised; and whether running the model runs it."""
    model = HANDLES[request["handle"]]
    if request.get("item") is not None:
        model = model[request["item"]]
    if not _is_ort_model(model):
        return {"status": "returned", "graph": {"problem": f"it is a {_type_name(model)}, not an Optimum ORTModel"}}
    session = _live_session(model)
    if session is None:
        return {
            "status": "returned",
            "graph": {
                "problem": f"its session is a {_type_name(getattr(model, 'session', None))}, not an onnxruntime.InferenceSession"
            },
        }
    try:
        graph_model, source = _session_graph(session)
        summary = graph_summary(graph_model)
    except Exception as error:
        return {"status": "returned", "graph": {"problem": f"the graph of its session cannot be read ({type(error).__name__})"}}
    summary["source"] = source
    summary["probe"] = _probe_session(model, session)
    return {"status": "returned", "graph": summary}


def _probe_session(model: Any, session: Any) -> dict[str, Any]:
    """Run the model on a few tokens and say whether that ran its own session (and how many sessions ran)."""
    import torch

    instrument_onnxruntime()
    outer, RECORDER.call = RECORDER.call, []
    try:
        ids = torch.tensor([[1, 2, 3, 4]], dtype=torch.long)
        with _capture(), torch.inference_mode():
            model(input_ids=ids, attention_mask=torch.ones_like(ids))
        error = None
    except Exception as raised:
        error = f"{type(raised).__name__}: {raised}"[:300]
    runs, RECORDER.call = [event for event in RECORDER.call if event.get("type") == "onnx_run"], outer
    serial = model_serial(session)
    return {
        "error": error,
        "runs": len(runs),
        "own_session_runs": sum(1 for event in runs if event.get("session_serial") == serial),
    }


# Sessions of the ONNX models the grader itself built in this kernel (by serial): their runs also record
# the loss their logits give, so that a loss reported for them can be checked against the calls that ran.
GRADER_SESSIONS: set[int] = set()


def instrument_onnxruntime() -> None:
    """Record every ``InferenceSession.run`` as an ``onnx_run`` event (once; only when onnxruntime is used)."""
    if INSTALLED.get("onnxruntime"):
        return
    import onnxruntime

    cls = onnxruntime.InferenceSession
    _replace(cls, "run", _instrumented_session_run(cls.run))
    _replace(cls, "run_with_iobinding", _instrumented_session_run(cls.run_with_iobinding, iobinding=True))
    INSTALLED["onnxruntime"] = onnxruntime.__version__


def _instrumented_session_run(original: Callable[..., Any], iobinding: bool = False) -> Callable[..., Any]:
    @_wraps(original)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        serial = model_serial(self)
        event: OnnxRunEvent = {
            "type": "onnx_run",
            "thread": threading.get_native_id(),
            "session_serial": serial,
            "grader_session": serial in GRADER_SESSIONS,
            "iobinding": iobinding,
            "start": 0.0,
            "end": 0.0,
            "input_shape": None,
            "row_tokens": None,
            "nll_sums": None,
            "nll_counts": None,
        }
        feed = (args[1] if len(args) > 1 else kwargs.get("input_feed")) if not iobinding else None
        event["start"] = RECORDER.now()
        try:
            outputs = original(self, *args, **kwargs)
            event["end"] = RECORDER.now()
            if isinstance(feed, dict):
                with contextlib.suppress(Exception):  # what a run's inputs and outputs say is evidence, not a requirement
                    event.update(_run_tokens(self, feed, outputs, event["grader_session"] and RECORDER.call is not None))
        finally:
            if not event["end"]:
                event["end"] = RECORDER.now()
            RECORDER.record(event)
        return outputs

    return run


def _run_tokens(session: Any, feed: dict[str, Any], outputs: Any, with_loss: bool) -> RunTokens:
    """A session run's batch (rows and tokens each covers) and, for the grader's sessions, the loss its logits give."""
    import numpy

    ids = numpy.asarray(feed.get("input_ids"))
    if ids.ndim != 2:
        return {"input_shape": None, "row_tokens": None, "nll_sums": None, "nll_counts": None}
    mask = feed.get("attention_mask")
    mask = numpy.asarray(mask) if mask is not None else numpy.ones_like(ids)
    if mask.shape != ids.shape:  # with a cache, the mask also covers past tokens
        mask = numpy.ones_like(ids)
    facts: RunTokens = {
        "input_shape": list(ids.shape),
        "row_tokens": [int(v) for v in mask.sum(axis=1).tolist()[:MAX_IDS]],
        "nll_sums": None,
        "nll_counts": None,
    }
    names = [output.name for output in session.get_outputs()]
    if not with_loss or "logits" not in names or ids.shape[1] < 2:
        return facts
    logits = numpy.asarray(outputs[names.index("logits")])
    sums = {"pairs": 0.0, "targets": 0.0, "all": 0.0}
    counts = {"pairs": 0, "targets": 0, "all": 0}
    for row in range(ids.shape[0]):  # row by row: bounded memory on a large vocabulary
        scores = logits[row, :-1].astype(numpy.float64)
        peak = scores.max(axis=-1, keepdims=True)
        log_norm = peak[:, 0] + numpy.log(numpy.exp(scores - peak).sum(axis=-1))
        nll = log_norm - scores[numpy.arange(scores.shape[0]), ids[row, 1:]]
        selections = {
            "pairs": (mask[row, 1:] == 1) & (mask[row, :-1] == 1),
            "targets": mask[row, 1:] == 1,
            "all": numpy.ones_like(mask[row, 1:], dtype=bool),
        }
        for name, selected in selections.items():
            sums[name] += float(nll[selected].sum())
            counts[name] += int(selected.sum())
    facts["nll_sums"] = sums
    facts["nll_counts"] = counts
    return facts
