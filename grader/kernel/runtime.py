"""The grader's runtime inside the student's kernel.

This file is sent as source text into the notebook's kernel and run as a private module
(never imported from the user namespace). It instruments the model API, runs the operations
the grader asks for (call a student function, describe a notebook variable, load a model) and
publishes each answer as plain JSON on the channel named in the request. It imports only the
standard library at module level, so the grader's own process can also import it and share
:func:`load_model` with the reference side.

Nothing here decides a grade: it reports what happened, and the grader judges.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import itertools
import json
import math
import os
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # for mypy only: in the kernel this module imports nothing of the grader
    from grader.kernel.protocol import (
        Answer,
        CallRequest,
        DescribeRequest,
        Event,
        EventsRequest,
        ExceptionAnswer,
        FigureAxes,
        FigureEvent,
        ForwardEvent,
        GenerateEvent,
        GenerateRequest,
        InspectRequest,
        InstallRequest,
        LoadModelRequest,
        ModelSpec,
        NameInfo,
        OnnxGraphRequest,
        OnnxRunEvent,
        Recipe,
        ReleaseRequest,
        ReturnedEvent,
        RunTokens,
        Setting,
        SynchronizeEvent,
        TokenizeEvent,
        TokenizerSpec,
    )

# The functions the runtime relies on, taken when it is loaded (before any notebook cell runs):
# a notebook that replaces time.perf_counter, time.sleep or json.dumps changes its own timings,
# not the instrumentation's clock, pacing or answers.
_perf_counter = time.perf_counter
_sleep = time.sleep
_dumps = json.dumps
_write = os.write
_read = os.read
_getpid = os.getpid

MAX_ITEMS = 200  # items of a list, dict or DataFrame described before truncating
MAX_STRING = 20_000  # characters of a string kept
MAX_DEPTH = 6
MAX_EVENTS = 5_000  # instrumentation events kept per scope
MAX_IDS = 2_048  # token IDs kept per generate call
MAX_ROWS = 64  # rows of a generate call's batch whose ids are kept (each up to MAX_IDS)
MAX_ROW_IDS = 4 * MAX_IDS  # ids kept over all the rows of one generate call
MAX_CAPTURE = 20_000  # characters of stdout/stderr kept per call
MAX_ARGUMENT = 4_096  # characters of a string argument of a watched function kept (longer ones: only their length)


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
        if bitsandbytes and weight.dtype == torch.int8:
            counts["int8"] += 1
        elif bitsandbytes and weight.dtype == torch.uint8:
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
    import os

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
        finally:
            event["end"] = RECORDER.now()
            RECORDER.record(event)
        if isinstance(feed, dict):
            with contextlib.suppress(Exception):  # what a run's inputs and outputs say is evidence, not a requirement
                event.update(_run_tokens(self, feed, outputs, event["grader_session"] and RECORDER.call is not None))
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


# --------------------------------------------------------------------------------------
# Loading models from a JSON spec (shared with the grader's reference side)
# --------------------------------------------------------------------------------------

QUANTIZATIONS = ("none", "int8", "nf4", "fp4")


def pick_device(requested: str = "auto") -> str:
    """``"cuda"`` if asked for (or ``"auto"``) and available, else ``"cpu"``."""
    import torch

    if requested == "cpu":
        return "cpu"
    if requested == "cuda" or torch.cuda.is_available():
        return "cuda" if torch.cuda.is_available() else "cpu"
    return "cpu"


def load_kwargs(spec: ModelSpec) -> dict[str, Any]:
    """``from_pretrained`` keyword arguments for a model spec (hub_id, quantization, dtype, device)."""
    import torch

    quantization = spec.get("quantization", "none")
    device = pick_device(spec.get("device", "auto"))
    dtype_name = spec.get("dtype", "auto")
    if dtype_name == "auto":
        dtype_name = "float16" if device == "cuda" else "float32"
    kwargs: dict[str, Any] = {}
    if quantization == "none" or spec.get("dtype", "auto") != "auto":
        kwargs["dtype"] = getattr(torch, dtype_name)  # for bitsandbytes: the layers it leaves unquantized
    if quantization != "none":
        from transformers import BitsAndBytesConfig

        if quantization == "int8":
            config = BitsAndBytesConfig(load_in_8bit=True)
        elif quantization in ("nf4", "fp4"):
            config = BitsAndBytesConfig(
                load_in_4bit=True, bnb_4bit_quant_type=quantization, bnb_4bit_compute_dtype=getattr(torch, dtype_name)
            )
        else:
            raise ValueError(f"unknown quantization {quantization!r}; expected one of {QUANTIZATIONS}")
        kwargs["quantization_config"] = config
        kwargs["device_map"] = {"": device}
    return kwargs


def load_model(spec: ModelSpec) -> Any:
    """Load the model a spec describes, in eval mode, on its device."""
    from transformers import AutoModelForCausalLM

    kwargs = load_kwargs(spec)
    model = AutoModelForCausalLM.from_pretrained(spec["hub_id"], **kwargs)
    if spec.get("quantization", "none") == "none":
        model.to(pick_device(spec.get("device", "auto")))  # type: ignore[arg-type]  # transformers wraps .to()
    return model.eval()


# --------------------------------------------------------------------------------------
# Instrumentation
# --------------------------------------------------------------------------------------


def _wraps(original: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``functools.wraps`` without ``__wrapped__``: the uninstrumented original is not one attribute away
    (``inspect.unwrap``, ``model.generate.__wrapped__``); a wrapper keeps it in its closure only."""

    def decorate(wrapper: Callable[..., Any]) -> Callable[..., Any]:
        functools.update_wrapper(wrapper, original)
        vars(wrapper).pop("__wrapped__", None)
        # What inspect.signature found through __wrapped__ (Optimum's ONNX export reads forward's parameters).
        with contextlib.suppress(TypeError, ValueError):
            wrapper.__signature__ = inspect.signature(original)  # type: ignore[attr-defined]
        return wrapper

    return decorate


class Recorder:
    """Where instrumentation events go: the current call's list, or the notebook's."""

    def __init__(self) -> None:
        self.notebook: list[Event] = []
        self.notebook_dropped = 0
        self.call: list[Event] | None = None
        self.call_dropped = 0
        self.generate_depth = 0
        self.forward_depth = 0
        self.forward_stack: list[Any] = []  # the models whose forward is running, innermost last
        self.current_generate: GenerateEvent | None = None
        self.tokenizer_depth = 0
        self.clock_origin = _perf_counter()
        # Pacing (asked per call): pause the first generate of each new prompt, and every tokenizer
        # call, so that a timer around a warm-up or a tokenization shows. The grader serves each pause
        # (see _pause): the kernel does not know how long it lasts. pace_s is the length slept here
        # instead where the grader has no channel to this kernel (not POSIX).
        self.paced = False
        self.pace_s = 0.0
        self.pauses = 0  # pauses asked during the current call, the last one's number
        self.paced_prompts: set[tuple[Any, ...]] = set()

    def now(self) -> float:
        """Seconds since the runtime was installed (the clock of every event)."""
        return _perf_counter() - self.clock_origin

    def record(self, event: Event) -> None:
        """Keep ``event`` in the active scope, up to :data:`MAX_EVENTS`."""
        if self.call is not None:
            if len(self.call) < MAX_EVENTS:
                self.call.append(event)
            else:
                self.call_dropped += 1
        elif len(self.notebook) < MAX_EVENTS:
            self.notebook.append(event)
        else:
            self.notebook_dropped += 1


RECORDER = Recorder()
# A serial number per model object: id() is reused once a model is deleted, a serial is not.
MODEL_SERIALS: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
SERIAL_COUNTER = itertools.count(1)


def model_serial(model: Any) -> int:
    """The serial number of ``model`` (assigned the first time it is seen)."""
    try:
        if model not in MODEL_SERIALS:
            MODEL_SERIALS[model] = next(SERIAL_COUNTER)
        return MODEL_SERIALS[model]
    except TypeError:  # not weak-referenceable or not hashable
        return 0


QUANTIZATION_LABELS: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()


def quantization_label(model: Any) -> str | None:
    """``"int8"``, ``"nf4"``, ``"fp4"`` for a bitsandbytes model (``"partial"`` if some layers were skipped), else None.

    Read from the layers that loaded (see :func:`linear_layers`), not from ``is_loaded_in_8bit`` and
    the config: a model whose every layer was skipped is a float model. Worked out once per model.
    """
    try:
        if model in QUANTIZATION_LABELS:
            return QUANTIZATION_LABELS[model]
    except TypeError:  # not weak-referenceable or not hashable
        pass
    try:
        layers = linear_layers(model)
    except Exception:  # not a torch model
        return None
    label: str | None = None
    if layers["int8"] and not layers["4bit"] and not layers["float"]:
        label = "int8"
    elif layers["4bit"] and not layers["int8"] and not layers["float"]:
        label = layers["quant_types"][0] if len(layers["quant_types"]) == 1 else "4bit"
    elif layers["int8"] or layers["4bit"]:
        label = "partial"  # some linear layers skipped
    with contextlib.suppress(TypeError):
        QUANTIZATION_LABELS[model] = label
    return label


def _first_tensor(args: tuple[Any, ...], kwargs: dict[str, Any], *names: str) -> Any:
    import torch

    for name in names:
        value = kwargs.get(name)
        if isinstance(value, torch.Tensor):
            return value
    for value in args:
        if isinstance(value, torch.Tensor):
            return value
    return None


def _brief(value: Any) -> Any:
    """A short JSON description of a keyword argument passed to generate."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    module = type(value).__module__ or ""
    if module.startswith("torch") and hasattr(value, "shape"):
        return {"tensor": list(value.shape), "dtype": str(value.dtype), "device": str(value.device)}
    if type(value).__name__ == "GenerationConfig":
        return {"generation_config": {k: _brief(v) for k, v in value.to_diff_dict().items()}}
    return {"type": _type_name(value)}


def _padding_side(attention_mask: Any) -> str | None:
    """``"left"``/``"right"`` when some row of the mask is padded on that side, else None."""
    if attention_mask is None or attention_mask.dim() != 2 or bool(attention_mask.all()):
        return None
    if bool((attention_mask[:, 0] == 0).any()):
        return "left"
    if bool((attention_mask[:, -1] == 0).any()):
        return "right"
    return None


def _sequences(output: Any) -> Any:
    import torch

    if isinstance(output, torch.Tensor):
        return output
    return getattr(output, "sequences", None)


def _new_token_counts(sequences: Any, prompt_length: int, eos_ids: list[int]) -> list[int]:
    """Per row, tokens generated up to and including the first EOS (padding after it excluded)."""
    counts = []
    for row in sequences[:, prompt_length:].tolist():
        count = len(row)
        for position, token in enumerate(row):
            if token in eos_ids:
                count = position + 1
                break
        counts.append(count)
    return counts


def _eos_ids(model: Any, kwargs: dict[str, Any]) -> list[int]:
    config = kwargs.get("generation_config") or getattr(model, "generation_config", None)
    eos = kwargs.get("eos_token_id", getattr(config, "eos_token_id", None))
    if eos is None:
        return []
    return [int(e) for e in eos] if isinstance(eos, (list, tuple)) else [int(eos)]


# The pause FIFOs (request, reply), opened at install from the paths the grader gave; () without them. Only the
# kernel's own process asks (a process it forked records into a copy of the recorder the grader never reads).
PAUSES: tuple[int, ...] = ()
PAUSES_PID = 0
# One pause asked at a time: the grader releases pauses in the order asked, with one byte each on one FIFO, so two
# threads waiting at once could each take the other's release.
PAUSE_LOCK = threading.Lock()


def _pause(event: GenerateEvent | TokenizeEvent) -> None:
    """Hold the kernel for a pacing pause, inside ``event``.

    The grader serves the pause: the runtime writes the pause's number on the request FIFO and waits for the
    grader's byte on the reply FIFO; the grader draws the length and records when it held the kernel, and
    fills in the event's ``paced_s`` itself (grader/kernel/evidence.py). Nothing here knows the length. Without the
    FIFOs (not POSIX), the runtime sleeps the ``pace_s`` the request gave and records it.
    """
    if not PAUSES or _getpid() != PAUSES_PID:
        _sleep(RECORDER.pace_s)
        event["paced_s"] = RECORDER.pace_s
        return
    with PAUSE_LOCK:
        RECORDER.pauses += 1
        event["pause"] = RECORDER.pauses
        _write(PAUSES[0], b"%d\n" % RECORDER.pauses)
        if not _read(PAUSES[1], 1):
            raise RuntimeError("the grader's pacing channel closed")


def _instrumented_generate(original: Callable[..., Any]) -> Callable[..., Any]:
    @_wraps(original)
    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        if RECORDER.generate_depth:
            return original(self, *args, **kwargs)
        import torch

        inputs = _first_tensor(args, kwargs, "input_ids", "inputs")
        attention_mask = kwargs.get("attention_mask")
        event: GenerateEvent = {
            "type": "generate",
            "model_id": id(self),
            "model_serial": model_serial(self),
            "model_quantization": quantization_label(self),
            "model_type": _type_name(self),
            "model_device": str(getattr(self, "device", "unknown")),
            "model_dtype": str(getattr(self, "dtype", "unknown")),
            "model_training": bool(getattr(self, "training", False)),
            "grad_enabled": torch.is_grad_enabled(),
            "kwargs": {k: _brief(v) for k, v in kwargs.items() if k not in ("input_ids", "inputs")},
            "positional_args": len(args),
            "input_shape": list(inputs.shape) if inputs is not None else None,
            "input_device": str(inputs.device) if inputs is not None else None,
            "input_ids": inputs[0].tolist()[:MAX_IDS] if inputs is not None and inputs.dim() == 2 else None,
            "padding_side": _padding_side(attention_mask) if isinstance(attention_mask, torch.Tensor) else None,
            "rows": _unpadded_rows(inputs, attention_mask),
            "forward_calls": 0,
            "max_new_tokens": _effective_setting(self, kwargs, "max_new_tokens"),
            "use_cache": _effective_setting(self, kwargs, "use_cache"),
            "new_tokens_limit": _new_tokens_limit(self, kwargs, inputs),
            "instrumentation_replaced": _replaced_now()[:8],
            "decoding_loops": 0,
            "start": 0.0,
            "end": 0.0,
            "duration_s": 0.0,
            "error": None,
            "output_shape": None,
            "output_ids": None,
            "new_tokens": None,
            "pause": None,
            "paced_s": None,
        }
        RECORDER.generate_depth += 1
        outer = RECORDER.current_generate
        RECORDER.current_generate = event
        event["start"] = RECORDER.now()
        try:
            output = original(self, *args, **kwargs)
            # Paced once per prompt, model and device, and only once a generate really produced
            # tokens: a "warm-up" that raised, generated nothing, or ran another model or device
            # leaves the pacing to the timed call, where a timer shows it.
            if RECORDER.paced and RECORDER.call is not None and _generated_tokens(output, inputs):
                prompt = (
                    event["model_serial"],
                    event["model_device"],
                    *(inputs.flatten().tolist()[:MAX_IDS] if inputs is not None else ()),
                )
                if prompt not in RECORDER.paced_prompts:
                    RECORDER.paced_prompts.add(prompt)
                    _pause(event)
        except BaseException as error:
            event["error"] = f"{type(error).__name__}: {error}"[:500]
            raise
        finally:
            event["end"] = RECORDER.now()
            event["duration_s"] = event["end"] - event["start"]
            RECORDER.generate_depth -= 1
            RECORDER.current_generate = outer
            RECORDER.record(event)
        sequences = _sequences(output)
        if sequences is not None and inputs is not None and sequences.dim() == 2:
            prompt_length = inputs.shape[-1]
            event["output_shape"] = list(sequences.shape)
            event["output_ids"] = sequences[0].tolist()[:MAX_IDS]
            event["new_tokens"] = _new_token_counts(sequences, prompt_length, _eos_ids(self, kwargs))
        return output

    generate.__llm_grader_instrumented__ = True  # type: ignore[attr-defined]
    return generate


def _unpadded_rows(inputs: Any, attention_mask: Any) -> list[list[int]] | None:
    """Each row's ids without its padding (the attention mask's zeros), while they fit the caps.

    Rows past MAX_ROWS or MAX_ROW_IDS in all are left out (a judge compares only complete lists).
    """
    import torch

    if not isinstance(inputs, torch.Tensor) or inputs.dim() != 2:
        return None
    masked = isinstance(attention_mask, torch.Tensor) and tuple(attention_mask.shape) == tuple(inputs.shape)
    rows: list[list[int]] = []
    kept = 0
    for index in range(min(int(inputs.shape[0]), MAX_ROWS)):
        row = inputs[index]
        if masked:
            row = row[attention_mask[index].to(torch.bool)]
        ids = row.tolist()[:MAX_IDS]
        kept += len(ids)
        if kept > MAX_ROW_IDS:
            break
        rows.append(ids)
    return rows


def _new_tokens_limit(model: Any, kwargs: dict[str, Any], inputs: Any) -> int | None:
    """How many new tokens generate may produce, as transformers decides it.

    max_new_tokens (keyword, else the generation config) wins; else max_length (keyword, else the
    config) less the prompt's length. None when neither is a plain int.
    """
    config = kwargs.get("generation_config") or getattr(model, "generation_config", None)
    limit = kwargs["max_new_tokens"] if "max_new_tokens" in kwargs else getattr(config, "max_new_tokens", None)
    if isinstance(limit, int) and not isinstance(limit, bool):
        return limit
    length = kwargs["max_length"] if "max_length" in kwargs else getattr(config, "max_length", None)
    if isinstance(length, int) and not isinstance(length, bool) and inputs is not None and hasattr(inputs, "shape"):
        return length - int(inputs.shape[-1])
    return None


def _generated_tokens(output: Any, inputs: Any) -> bool:
    """Whether a generate call's output is longer than its prompt (it generated at least one token)."""
    sequences = _sequences(output)
    if sequences is None or not hasattr(sequences, "shape") or len(sequences.shape) != 2:
        return False
    prompt_length = int(inputs.shape[-1]) if inputs is not None and hasattr(inputs, "shape") else 0
    return int(sequences.shape[-1]) > prompt_length


def _effective_setting(model: Any, kwargs: dict[str, Any], name: str) -> Setting:
    """A setting (max_new_tokens, use_cache) as generate will use it: keyword, else generation config."""
    config = kwargs.get("generation_config") or getattr(model, "generation_config", None)
    value = kwargs[name] if name in kwargs else getattr(config, name, None)
    return value if value is None or isinstance(value, (bool, int)) else repr(value)[:50]


# Not convert_tokens_to_ids: tokenizer.eos_token_id / pad_token_id call it, and passing those to
# generate inside the timer is right.
TOKENIZER_ENTRY_POINTS = (
    "__call__",
    "encode",
    "encode_plus",
    "batch_encode_plus",
    "_encode_plus",
    "_batch_encode_plus",
    "tokenize",
    "pad",
    "apply_chat_template",
)


def _instrumented_tokenizer_call(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a tokenizer entry point: while a call is paced, record and slow each outermost use."""

    @_wraps(original)
    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        # Not inside generate either (stop strings decode there): only a tokenizer call the student's code makes.
        if not RECORDER.paced or RECORDER.call is None or RECORDER.tokenizer_depth or RECORDER.generate_depth:
            return original(self, *args, **kwargs)
        RECORDER.tokenizer_depth += 1
        event: TokenizeEvent = {"type": "tokenize", "start": RECORDER.now(), "end": 0.0, "pause": None, "paced_s": None}
        try:
            _pause(event)
            return original(self, *args, **kwargs)
        finally:
            RECORDER.tokenizer_depth -= 1
            event["end"] = RECORDER.now()
            RECORDER.record(event)

    return __call__


def _instrumented_synchronize(original: Callable[..., Any]) -> Callable[..., Any]:
    @_wraps(original)
    def synchronize(*args: Any, **kwargs: Any) -> Any:
        event: SynchronizeEvent = {"type": "synchronize", "start": RECORDER.now(), "end": 0.0, "error": None}
        try:
            return original(*args, **kwargs)
        except BaseException as error:
            event["error"] = f"{type(error).__name__}: {error}"[:300]
            raise
        finally:
            event["end"] = RECORDER.now()
            RECORDER.record(event)

    return synchronize


def _instrumenting_forward(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a ``PreTrainedModel`` method every model passes through (``__call__``, and ``post_init`` at the end of
    every model's ``__init__``): make sure the model's class ``forward`` is instrumented, then run the method."""

    @_wraps(original)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        _instrument_forward_of(type(self))
        return original(self, *args, **kwargs)

    return method


def _instrument_forward_of(cls: type) -> None:
    """Replace the ``forward`` a model class uses (where its MRO defines it) by a recording one, once."""
    for klass in cls.__mro__:
        forward = vars(klass).get("forward")
        if forward is None:
            continue
        if not getattr(forward, "__llm_grader_instrumented__", False) and callable(forward):
            with contextlib.suppress(AttributeError, TypeError):  # a class that refuses new attributes
                _replace(klass, "forward", _instrumented_forward(forward))
        return


def _instrumented_forward(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a model class's ``forward``: record every forward pass however it is reached.

    Recorded at the level of ``forward``, so a pass run from a module hook, from another model's
    hook or by calling ``model.forward`` directly is seen; gradient mode is sampled inside it
    (after every forward pre-hook ran) and the outputs' ``requires_grad`` read before any forward
    hook could detach them. A model run by the forward of a model that holds it as a submodule
    (GPT2Model inside GPT2LMHeadModel) is part of that pass, not a pass of its own.
    """

    @_wraps(original)
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        stack = RECORDER.forward_stack
        if stack and not any(model is self for model in stack) and _holds(stack[-1], self):
            return original(self, *args, **kwargs)
        event: ForwardEvent | None = None
        if RECORDER.current_generate is not None:
            if not stack:
                RECORDER.current_generate["forward_calls"] += 1
        else:
            event = _forward_event(self, args, kwargs)
            RECORDER.record(event)
        stack.append(self)
        RECORDER.forward_depth = len(stack)
        try:
            output = original(self, *args, **kwargs)
        except BaseException as error:
            if event is not None:
                event["error"] = f"{type(error).__name__}: {error}"[:300]
            raise
        finally:
            stack.pop()
            RECORDER.forward_depth = len(stack)
            if event is not None:
                event["end"] = RECORDER.now()
        if event is not None:
            event["output_requires_grad"] = _output_requires_grad(output)
        return output

    forward.__llm_grader_instrumented__ = True  # type: ignore[attr-defined]
    return forward


def _holds(parent: Any, child: Any) -> bool:
    """Whether ``child`` is a submodule of ``parent`` (its own part, not another model)."""
    try:
        return any(module is child for module in parent.modules())
    except Exception:  # a module whose children cannot be listed
        return False


def _output_requires_grad(output: Any) -> bool | None:
    """Whether a forward's loss or logits (or its first tensor) carry an autograd graph."""
    import torch

    tensors = []
    for name in ("loss", "logits", "last_hidden_state"):
        with contextlib.suppress(Exception):
            value = output[name] if isinstance(output, dict) else getattr(output, name, None)
            if isinstance(value, torch.Tensor):
                tensors.append(value)
    if not tensors and isinstance(output, (tuple, list)):
        tensors = [value for value in output[:2] if isinstance(value, torch.Tensor)]
    if isinstance(output, torch.Tensor):
        tensors = [output]
    if not tensors:
        return None
    return any(bool(tensor.requires_grad) for tensor in tensors)


def _row_tokens(inputs: Any, attention_mask: Any) -> list[int] | None:
    """Tokens each row of a forward's batch covers: its attention mask's ones, else the batch's width."""
    import torch

    if inputs is None or inputs.dim() < 2:
        return None
    rows, width = int(inputs.shape[0]), int(inputs.shape[1])
    if isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 2 and tuple(attention_mask.shape) == (rows, width):
        return [int(count) for count in attention_mask.sum(dim=1).tolist()[:MAX_IDS]]
    return [width] * min(rows, MAX_IDS)


def _forward_event(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ForwardEvent:
    import torch

    inputs = _first_tensor(args, kwargs, "input_ids", "inputs_embeds")
    labels = kwargs.get("labels")
    attention_mask = kwargs.get("attention_mask")
    return {
        "type": "forward",
        "model_id": id(model),
        "model_serial": model_serial(model),
        "model_type": _type_name(model),
        "start": RECORDER.now(),
        "grad_enabled": torch.is_grad_enabled(),
        "inference_mode": torch.is_inference_mode_enabled(),
        "model_training": bool(model.training),
        "model_device": str(getattr(model, "device", "unknown")),
        "input_shape": list(inputs.shape) if inputs is not None else None,
        "input_device": str(inputs.device) if inputs is not None else None,
        "row_tokens": _row_tokens(inputs, attention_mask),
        "has_labels": labels is not None,
        "has_attention_mask": attention_mask is not None,
        "nested": bool(RECORDER.forward_stack),
        "end": 0.0,
        "error": None,
        "output_requires_grad": None,
    }


# --------------------------------------------------------------------------------------
# Figures: what a call plotted (read from matplotlib's objects, not from pixels)
# --------------------------------------------------------------------------------------


def _floats(values: Any) -> list[float | None] | None:
    """Numbers of a plotted series (None where not finite); None if it is not numeric."""
    import numpy

    try:
        array = numpy.asarray(values, dtype=float).ravel()[:MAX_ITEMS]
    except (TypeError, ValueError):
        return None
    return [float(v) if math.isfinite(v) else None for v in array.tolist()]


def describe_figure(figure: Any) -> FigureEvent:
    """Each axes of a figure: labels, title, and the data of its lines, scatters and bars."""
    axes: list[FigureAxes] = []
    for ax in figure.get_axes()[:20]:
        series: list[dict[str, Any]] = []
        for line in ax.get_lines():
            series.append({"kind": "line", "x": _floats(line.get_xdata()), "y": _floats(line.get_ydata())})
        for collection in ax.collections:
            offsets = collection.get_offsets() if hasattr(collection, "get_offsets") else None
            if offsets is not None and len(offsets):
                series.append({"kind": "scatter", "x": _floats(offsets[:, 0]), "y": _floats(offsets[:, 1])})
        for container in getattr(ax, "containers", []):
            patches = [p for p in container if hasattr(p, "get_height")]
            if patches:
                series.append(
                    {
                        "kind": "bar",
                        "x": _floats([p.get_x() + p.get_width() / 2 for p in patches]),
                        "y": _floats([p.get_height() for p in patches]),
                    }
                )
        axes.append(
            {
                "title": str(ax.get_title())[:200],
                "xlabel": str(ax.get_xlabel())[:200],
                "ylabel": str(ax.get_ylabel())[:200],
                "series": series[:20],
            }
        )
    suptitle = getattr(figure, "_suptitle", None)
    return {
        "type": "figure",
        "figure_id": id(figure),
        "suptitle": str(suptitle.get_text())[:200] if suptitle is not None else "",
        "axes": axes,
    }


def _instrumented_draw(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``Figure.draw``: a figure shown or saved during a call is described as it is drawn."""

    @_wraps(original)
    def draw(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        if RECORDER.call is not None and FIGURES["watching"]:
            with contextlib.suppress(Exception):
                FIGURES["drawn"][id(self)] = describe_figure(self)
        return result

    return draw


FIGURES: dict[str, Any] = {"watching": False, "drawn": {}, "patched": False}


def _open_figures() -> list[Any]:
    if "matplotlib.pyplot" not in sys.modules:
        return []
    from matplotlib._pylab_helpers import Gcf

    return [manager.canvas.figure for manager in Gcf.get_all_fig_managers()]


@contextlib.contextmanager
def _watch_figures() -> Iterator[None]:
    """Record every figure a call draws, shows, saves or leaves open, as a ``figure`` event."""
    import matplotlib.figure

    if not FIGURES["patched"]:
        matplotlib.figure.Figure.draw = _instrumented_draw(matplotlib.figure.Figure.draw)  # type: ignore[method-assign]
        FIGURES["patched"] = True
    before = {id(figure) for figure in _open_figures()}
    FIGURES["watching"], FIGURES["drawn"] = True, {}
    try:
        yield
    finally:
        FIGURES["watching"] = False
        described = dict(FIGURES["drawn"])
        for figure in _open_figures():
            if id(figure) not in before:
                with contextlib.suppress(Exception):
                    described[id(figure)] = describe_figure(figure)
        for description in described.values():
            RECORDER.record(description)


INSTALLED: dict[str, Any] = {}
# Every attribute the runtime replaced, as (owner, name, wrapper): the grader's integrity probe (integrity.py)
# reads each one after every call and compares it with what it read right after installing, and every
# generate checks they are all still in place while it runs.
INSTRUMENTED: list[tuple[Any, str, Callable[..., Any]]] = []
# The decoding loops generate runs (GenerationMixin's, by name): run outside the instrumented generate, they
# show a generate called around the instrumentation (through the original the wrapper holds).
DECODING_LOOPS = ("_sample", "_beam_search", "_assisted_decoding")


def _replace(owner: Any, name: str, wrapper: Callable[..., Any]) -> None:
    """Put an instrumented ``wrapper`` in place of ``owner.name``, and remember where."""
    setattr(owner, name, wrapper)
    INSTRUMENTED.append((owner, name, wrapper))


def _replaced_now() -> list[str]:
    """The instrumented attributes that something else holds at this moment (empty while all are in place)."""
    return [
        f"{getattr(owner, '__qualname__', getattr(owner, '__name__', '?'))}.{name}"
        for owner, name, wrapper in INSTRUMENTED
        if vars(owner).get(name) is not wrapper
    ]


def _instrumented_loop(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a decoding loop of generate: count it on the generate event it runs in (every generate that makes tokens
    runs one), or record a ``bypass`` when it runs outside the instrumented generate."""

    @_wraps(original)
    def loop(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not RECORDER.generate_depth:
            RECORDER.record({"type": "bypass", "method": getattr(original, "__name__", "?"), "time": RECORDER.now()})
        elif RECORDER.current_generate is not None:
            RECORDER.current_generate["decoding_loops"] += 1
        return original(self, *args, **kwargs)

    return loop


MASK_KEYWORDS = {"dtype", "config", "allow_torch_fix"}  # what the mask interface passes that the causal mask ignores


def _unvectorized_sdpa_mask(original: Callable[..., Any]) -> Callable[..., Any]:
    """transformers' ``sdpa_mask`` with the causal-and-padding mask of a batch (the one GPT-2's generate builds at
    every decoding step of a padded batch) made by broadcasting rather than ``torch.vmap``: the same boolean tensor
    (tests/test_mask.py compares them), in a fraction of the time. On a tiny model the vmap'd mask costs more than
    the model: without this, a padded batch decodes 2.8 times slower than one prompt, which no real model shows.
    Any other mask (sliding windows, packed sequences, a local size, another mask function) goes to ``original``."""
    from transformers import masking_utils

    causal = masking_utils.causal_mask_function
    prepare_padding_mask = masking_utils.prepare_padding_mask
    ignore_mask = masking_utils._ignore_causal_mask_sdpa

    @_wraps(original)
    def sdpa_mask(
        batch_size: int,
        cache_position: Any,
        kv_length: int,
        kv_offset: int = 0,
        mask_function: Callable[..., Any] = causal,
        attention_mask: Any = None,
        local_size: int | None = None,
        allow_is_causal_skip: bool = True,
        **kwargs: Any,
    ) -> Any:
        if mask_function is not causal or local_size is not None or set(kwargs) - MASK_KEYWORDS:
            return original(
                batch_size=batch_size,
                cache_position=cache_position,
                kv_length=kv_length,
                kv_offset=kv_offset,
                mask_function=mask_function,
                attention_mask=attention_mask,
                local_size=local_size,
                allow_is_causal_skip=allow_is_causal_skip,
                **kwargs,
            )
        import torch

        padding_mask = prepare_padding_mask(attention_mask, kv_length, kv_offset, _slice=False)
        if allow_is_causal_skip and ignore_mask(padding_mask, cache_position.shape[0], kv_length, kv_offset, local_size):
            return None
        kv_index = torch.arange(kv_length, device=cache_position.device) + kv_offset
        mask = (kv_index[None, :] <= cache_position[:, None])[None, None]  # (1, 1, q, kv): causal_mask_function
        if padding_mask is not None:
            return mask & padding_mask[:, kv_index][:, None, None, :]  # padding_mask_function (its dtype as vmap gives it)
        return mask.expand(batch_size, 1, -1, -1).contiguous()

    return sdpa_mask


def _speed_up_masks() -> None:
    """Put :func:`_unvectorized_sdpa_mask` in place of the vmap'd ``sdpa_mask`` (where this transformers has it): for
    every model's sdpa attention, and for eager attention and Optimum's export, which read the module's name."""
    try:
        from transformers import masking_utils
    except ImportError:
        return
    recent: Callable[..., Any] | None = getattr(masking_utils, "sdpa_mask_recent_torch", None)
    interface = getattr(masking_utils, "ALL_MASK_ATTENTION_FUNCTIONS", None)
    if recent is None or interface is None or id(getattr(masking_utils, "sdpa_mask", None)) != id(recent):
        return  # another transformers (or torch older than 2.6): its own mask stays
    fast = _unvectorized_sdpa_mask(recent)
    masking_utils.sdpa_mask = fast
    with contextlib.suppress(Exception):
        interface.register("sdpa", fast)


def _publisher() -> Callable[..., Any]:
    from IPython.display import publish_display_data

    return publish_display_data


def install(settings: dict[str, Any]) -> dict[str, Any]:
    """Instrument generate, forward and cuda.synchronize; start recording the notebook."""
    if INSTALLED:
        return environment()
    import torch
    import transformers
    from transformers.generation.utils import GenerationMixin

    INSTALLED["settings"] = settings
    INSTALLED["publish"] = _publisher()  # before the notebook could replace it
    global PAUSES, PAUSES_PID
    if settings.get("pauses"):
        request, reply = settings["pauses"]
        PAUSES = (os.open(request, os.O_WRONLY | os.O_CLOEXEC), os.open(reply, os.O_RDONLY | os.O_CLOEXEC))
        PAUSES_PID = _getpid()
    _replace(GenerationMixin, "generate", _instrumented_generate(GenerationMixin.generate))
    for name in DECODING_LOOPS:
        if name in vars(GenerationMixin):
            _replace(GenerationMixin, name, _instrumented_loop(vars(GenerationMixin)[name]))
    _replace(torch.cuda, "synchronize", _instrumented_synchronize(torch.cuda.synchronize))
    _replace(transformers.PreTrainedModel, "__call__", _instrumenting_forward(torch.nn.Module.__call__))
    _replace(transformers.PreTrainedModel, "post_init", _instrumenting_forward(transformers.PreTrainedModel.post_init))
    # Every entry point that turns text into ids (and pad, which builds a batch), on the base class and
    # on the classes that override them: however a timer surrounds tokenizing, it is paced once.
    tokenizer_classes = [
        transformers.PreTrainedTokenizerBase,
        transformers.PreTrainedTokenizerFast,
        transformers.PreTrainedTokenizer,
    ]
    for cls in tokenizer_classes:
        for name in TOKENIZER_ENTRY_POINTS:
            if name in vars(cls):
                _replace(cls, name, _instrumented_tokenizer_call(vars(cls)[name]))
    _speed_up_masks()
    INSTALLED["transformers"] = transformers.__version__
    return environment()


def environment() -> dict[str, Any]:
    """What the kernel runs on: versions and devices."""
    import platform

    import torch

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": INSTALLED.get("transformers"),
        "cuda_available": bool(torch.cuda.is_available()),
        "cuda_devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        if torch.cuda.is_available()
        else [],
    }
    return info


# --------------------------------------------------------------------------------------
# Operations the grader asks for
# --------------------------------------------------------------------------------------

HANDLES: dict[str, Any] = {}


def _user_namespace() -> dict[str, Any]:
    from IPython import get_ipython

    shell = get_ipython()
    return shell.user_ns if shell is not None else {}


class Missing(LookupError):
    """A name or path the grader asked for does not exist in the notebook."""


def _resolve_path(path: list[Any]) -> Any:
    namespace = _user_namespace()
    if not path or path[0] not in namespace:
        raise Missing(f"the notebook defines no variable named {path[0] if path else '?'!r}")
    value = namespace[path[0]]
    for step in path[1:]:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError) as error:
            raise Missing(f"{_path_text(path)}: no item {step!r} ({type(error).__name__})") from None
    return value


def _path_text(path: list[Any]) -> str:
    return str(path[0]) + "".join(f"[{step!r}]" for step in path[1:])


def _build(recipe: Recipe) -> Any:
    """Turn an argument recipe from the grader into a live object in this kernel."""
    if not isinstance(recipe, dict) or len(recipe) != 1:
        raise ValueError(f"malformed argument recipe: {recipe!r}")
    ((tag, payload),) = cast("dict[str, Any]", recipe).items()
    if tag == "$lit":
        return payload
    if tag == "$path":
        return _resolve_path(payload)
    if tag == "$handle":
        return HANDLES[payload]
    if tag == "$model":
        key = "model:" + _dumps(payload, sort_keys=True)
        if key not in HANDLES:
            HANDLES[key] = load_model(payload)
        return HANDLES[key]
    if tag == "$dict":
        return {key: _build(value) for key, value in payload.items()}
    if tag == "$onnx_model":
        key = f"onnx_model:{payload}"
        if key not in HANDLES:
            from optimum.onnxruntime import ORTModelForCausalLM

            instrument_onnxruntime()
            with _capture():
                HANDLES[key] = ORTModelForCausalLM.from_pretrained(payload["path"], file_name=payload["file_name"])
            GRADER_SESSIONS.add(model_serial(HANDLES[key].session))
        return HANDLES[key]
    if tag == "$tokenizer":
        return _tokenizer(payload)
    raise ValueError(f"unknown argument recipe {tag!r}")


def _tokenizer(spec: TokenizerSpec) -> Any:
    """A fresh copy of the hub ID's tokenizer, with the pad token and padding side the spec asks for."""
    import copy

    key = f"tokenizer:{spec['hub_id']}"
    if key not in HANDLES:
        from transformers import AutoTokenizer

        HANDLES[key] = AutoTokenizer.from_pretrained(spec["hub_id"])
    fresh = copy.deepcopy(HANDLES[key])
    if spec["pad_token"] == "eos" and fresh.pad_token is None:
        fresh.pad_token = fresh.eos_token
    if spec["padding_side"] in ("left", "right"):
        fresh.padding_side = spec["padding_side"]
    return fresh


@contextlib.contextmanager
def _capture() -> Iterator[dict[str, str]]:
    """Capture what a call prints, keeping at most :data:`MAX_CAPTURE` characters."""
    stdout, stderr = io.StringIO(), io.StringIO()
    captured: dict[str, str] = {}
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            yield captured
        finally:
            captured["stdout"] = stdout.getvalue()[:MAX_CAPTURE]
            captured["stderr"] = stderr.getvalue()[:MAX_CAPTURE]


def _exception(error: BaseException, skip_frames: int = 0) -> ExceptionAnswer:
    frames = traceback.extract_tb(error.__traceback__)[skip_frames:]
    return {
        "type": type(error).__name__,
        "module": type(error).__module__,
        "message": str(error)[:2000],
        "traceback": "".join(traceback.format_list(frames)) + f"{type(error).__name__}: {error}"[:4000],
    }


def op_call(request: CallRequest) -> Answer:
    """Call a student function with arguments built from recipes; report what happened."""
    name = request["function"]
    namespace = _user_namespace()
    function = namespace.get(name)
    if function is None:
        return {"status": "missing", "message": f"the notebook defines no function named {name!r}"}
    if not callable(function):
        return {"status": "missing", "message": f"{name!r} is a {type(function).__name__}, not a function"}
    try:
        args = [_build(recipe) for recipe in request["args"]]
        kwargs = {key: _build(recipe) for key, recipe in request["kwargs"].items()}
    except Missing as error:
        return {"status": "missing", "message": str(error)}
    try:
        inspect.signature(function).bind(*args, **kwargs)
    except TypeError as error:
        signature = _signature_text(function)
        return {"status": "signature", "message": f"{name}{signature} cannot be called this way: {error}"}
    except ValueError:
        pass  # builtins without a signature: just call them
    RECORDER.call = []
    RECORDER.call_dropped = 0
    RECORDER.paced = request["paced"]
    RECORDER.pace_s = request["pace_s"]
    RECORDER.pauses = 0
    RECORDER.paced_prompts = set()
    result: Answer = {"status": "returned"}
    watching = _watch_figures() if request["figures"] else contextlib.nullcontext()
    with _capture() as captured, watching, _watch_functions(namespace, request["watch"]):
        started = _perf_counter()
        start_clock = RECORDER.now()
        try:
            value = function(*args, **kwargs)
        except BaseException as error:  # the student's code may raise anything, even SystemExit
            result = {"status": "raised", "exception": _exception(error, skip_frames=1)}
            if isinstance(error, KeyboardInterrupt):
                result["interrupted"] = True
        else:
            try:
                result["value"] = describe(value)
            except Exception as error:  # describing hostile objects must not lose the call
                result["value"] = {"kind": "undescribable", "type": _type_name(value), "error": repr(error)[:300]}
            if request["keep_as"]:
                HANDLES[request["keep_as"]] = value
        finally:
            duration = _perf_counter() - started
    result.update(
        {
            "duration_s": duration,
            "start": start_clock,
            "end": start_clock + duration,
            "stdout": captured.get("stdout", ""),
            "stderr": captured.get("stderr", ""),
            "events": RECORDER.call,
            "events_dropped": RECORDER.call_dropped,
        }
    )
    RECORDER.call = None
    RECORDER.paced = False
    RECORDER.pace_s = 0.0
    return result


def _signature(function: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):
        return None


def _arguments(signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[list[Any]]:
    """What a watched function (of this ``signature``) was given, as [parameter name, description] in the signature's
    order (defaults applied), read as the call begins: plain values and lists of them described, any other object by
    its type and, where it has one, its ``padding_side`` (a tokenizer's, which the function's callers set before
    calling it)."""
    arguments = {f"{index}": value for index, value in enumerate(args)} | kwargs  # by position, unless it binds
    with contextlib.suppress(TypeError, ValueError):
        if signature is not None:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = {}
            for name, value in bound.arguments.items():  # *args and **kwargs flattened: each given value by itself
                kind = signature.parameters[name].kind
                if kind is inspect.Parameter.VAR_POSITIONAL:
                    arguments.update({f"{name}[{index}]": item for index, item in enumerate(value)})
                elif kind is inspect.Parameter.VAR_KEYWORD:
                    arguments.update(value)
                else:
                    arguments[name] = value

    def small(item: Any) -> bool:
        return item is None or isinstance(item, (bool, int, float)) or (isinstance(item, str) and len(item) <= MAX_ARGUMENT)

    described: list[list[Any]] = []
    for name, value in list(arguments.items())[:16]:
        try:
            # A list of prompts is kept; a corpus of texts is not (events must stay small).
            if small(value) or (isinstance(value, (list, tuple)) and len(value) <= 64 and all(map(small, value))):
                described.append([str(name), describe(value)])
                continue
            entry: dict[str, Any] = {"kind": "object", "type": _type_name(value)}
            if isinstance(value, (str, list, tuple, dict)):
                entry["length"] = len(value)
            side = getattr(value, "padding_side", None)
            if isinstance(side, str):
                entry["padding_side"] = side[:20]
            described.append([str(name), entry])
        except Exception as error:  # a hostile argument must not break the student's call
            described.append([str(name), {"kind": "undescribable", "type": _type_name(value), "error": repr(error)[:300]}])
    return described


@contextlib.contextmanager
def _watch_functions(namespace: dict[str, Any], names: list[str]) -> Iterator[None]:
    """While a call runs, record what each named notebook function returns, as ``returned`` events, with the
    arguments it was given."""
    originals = {name: namespace[name] for name in names if callable(namespace.get(name))}

    def watched(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        signature = _signature(original)  # read once per call watched, not at each of its calls

        @_wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            arguments = _arguments(signature, args, kwargs)
            value = original(*args, **kwargs)
            event: ReturnedEvent = {
                "type": "returned",
                "function": name,
                "time": RECORDER.now(),
                "arguments": arguments,
                "value": None,
            }
            try:
                event["value"] = describe(value)
            except Exception as error:  # describing hostile objects must not break the student's call
                event["value"] = {"kind": "undescribable", "type": _type_name(value), "error": repr(error)[:300]}
            RECORDER.record(event)
            return value

        return wrapper

    for name, original in originals.items():
        namespace[name] = watched(name, original)
    try:
        yield
    finally:
        for name, original in originals.items():
            if namespace.get(name) is not original:
                namespace[name] = original


def _signature_text(function: Any) -> str:
    try:
        return str(inspect.signature(function))
    except (TypeError, ValueError):
        return "(...)"


def op_describe(request: DescribeRequest) -> Answer:
    """Describe a notebook value found by a path such as ``["configurations", 0, "name"]``."""
    try:
        value = _resolve_path(request["path"])
    except Missing as error:
        return {"status": "missing", "message": str(error)}
    return {"status": "returned", "value": describe(value)}


def op_inspect(request: InspectRequest) -> Answer:
    """For each name: whether the notebook defines it, what it is, and its signature."""
    namespace = _user_namespace()
    names: dict[str, NameInfo] = {}
    for name in request["names"]:
        if name not in namespace:
            names[name] = {"defined": False}
            continue
        value = namespace[name]
        names[name] = {
            "defined": True,
            "callable": callable(value),
            "type": _type_name(value),
            "signature": _signature_text(value) if callable(value) else None,
        }
    return {"status": "returned", "names": names}


def op_load_model(request: LoadModelRequest) -> Answer:
    """Load a model (from a spec, or with load arguments the notebook defines) and describe it."""
    spec = request["spec"]
    started = _perf_counter()
    try:
        if "load_args_path" in spec:
            load_args = _resolve_path(spec["load_args_path"])
            if not isinstance(load_args, dict):
                return {
                    "status": "raised",
                    "exception": {
                        "type": "TypeError",
                        "module": "builtins",
                        "message": f"{_path_text(spec['load_args_path'])} is a {type(load_args).__name__}, not a dict of from_pretrained arguments",
                        "traceback": "",
                    },
                }
            from transformers import AutoModelForCausalLM

            with _capture():
                model = AutoModelForCausalLM.from_pretrained(spec["hub_id"], **load_args)
            model.eval()
        else:
            with _capture():
                model = load_model(spec)
    except Missing as error:
        return {"status": "missing", "message": str(error)}
    except Exception as error:
        return {"status": "raised", "exception": _exception(error)}
    HANDLES[request["handle"]] = model
    return {"status": "returned", "value": describe_model(model), "duration_s": _perf_counter() - started}


def op_generate(request: GenerateRequest) -> Answer:
    """Greedy-generate from a loaded model to show that it really produces text."""
    model = HANDLES[request["handle"]]
    if request["item"] is not None:  # a model kept inside a returned tuple, such as (model, info)
        model = model[request["item"]]
    tokenizer = _build({"$tokenizer": request["tokenizer"]})
    if _is_ort_model(model):
        instrument_onnxruntime()  # so that the answer says whether its ONNX Runtime session ran
    RECORDER.call = []
    try:
        inputs = tokenizer(request["prompt"], return_tensors="pt").to(model.device)
        with _capture():
            output = model.generate(**inputs, max_new_tokens=request["max_new_tokens"], do_sample=False)
        text = tokenizer.decode(output[0][inputs["input_ids"].shape[-1] :], skip_special_tokens=True)
    except Exception as error:
        RECORDER.call = None
        return {"status": "raised", "exception": _exception(error)}
    events, RECORDER.call = RECORDER.call, None
    return {"status": "returned", "value": describe(text), "events": events}


def op_release(request: ReleaseRequest) -> Answer:
    """Forget loaded objects so their memory can be freed."""
    for handle in request.get("handles", list(HANDLES)):
        HANDLES.pop(handle, None)
    import gc

    gc.collect()
    return {"status": "returned"}


def op_events(request: EventsRequest) -> Answer:
    """The instrumentation events recorded while the notebook's cells ran."""
    return {
        "status": "returned",
        "events": RECORDER.notebook,
        "events_dropped": RECORDER.notebook_dropped,
    }


def op_install(request: InstallRequest) -> Answer:
    """Instrument the kernel; answer with its environment."""
    return {"status": "returned", "environment": install(request["settings"])}


def op_environment(request: Any) -> Answer:
    """Versions and devices of this kernel."""
    return {"status": "returned", "environment": environment()}


OPERATIONS: dict[str, Callable[[Any], Answer]] = {
    "install": op_install,
    "call": op_call,
    "describe": op_describe,
    "inspect": op_inspect,
    "load_model": op_load_model,
    "generate": op_generate,
    "release": op_release,
    "events": op_events,
    "environment": op_environment,
    "onnx_graph": op_onnx_graph,
}


def run(request_text: str) -> None:
    """Run one operation and publish its JSON answer on the request's channel."""
    request = json.loads(request_text)
    try:
        answer = OPERATIONS[request["op"]](request)
    except BaseException as error:  # an answer must always come back, whatever went wrong
        answer = {"status": "internal", "exception": _exception(error)}
    publish_display_data = INSTALLED.get("publish") or _publisher()
    try:
        payload = _dumps(answer, allow_nan=False, default=_type_name)
    except ValueError:
        payload = _dumps(_without_nan(answer), allow_nan=False, default=_type_name)
    publish_display_data({request["channel"]: payload})


def _without_nan(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _without_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nan(v) for v in value]
    return value
