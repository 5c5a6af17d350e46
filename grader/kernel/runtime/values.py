"""Describing values as plain JSON: what a student's function returned, a model, an ONNX Runtime model's graph.

A part of the grader's runtime (see :mod:`grader.kernel.runtime`): in the kernel the parts are one module."""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import sys
import threading
import types
import weakref
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
    if isinstance(value, (dict, types.SimpleNamespace)):
        # A namespace is read as the mapping of its attributes (config.name as config["name"]).
        entries = list((value if isinstance(value, dict) else vars(value)).items())
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
            "serial": model_serial(value),
            "files": _tokenizer_files(value),
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
    # A named index (``set_index("prompt_tokens")``) is data a reader sees as a column: described as one.
    names = [name for name in getattr(frame.index, "names", []) if name is not None]
    if names and not any(name in frame.columns for name in names):
        with contextlib.suppress(Exception):
            frame = frame.reset_index()
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


def _tokenizer_files(tokenizer: Any) -> str:
    """Where a tokenizer's vocabulary was read from (its vocab or tokenizer file's path, kept by from_pretrained and by
    a copy of the tokenizer); "" when it says nothing."""
    with contextlib.suppress(Exception):
        kwargs = getattr(tokenizer, "init_kwargs", None) or {}
        for name in ("tokenizer_file", "vocab_file"):
            path = kwargs.get(name)
            if isinstance(path, str) and path:
                return path[:500]
    return ""


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
FINGERPRINT_ROWS = 8192  # the embedding rows they are spread over (the zoo's vocabulary; the start of a larger one)


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
    """Which weights a model holds (its config's sizes and values of its input embedding), and how many forward hooks
    its modules carry (a model loads with none: a hook is work the notebook added to every forward)."""
    config = getattr(model, "config", None)
    sizes = {name: getattr(config, name) for name in SHAPE_FIELDS if isinstance(getattr(config, name, None), (int, str))}
    try:
        # Values spread over the whole embedding (not only its first row): patching a few of them onto
        # another model does not make it this one.
        # From the first FINGERPRINT_ROWS rows: tokens added to the vocabulary (a [PAD] token, resize_token_embeddings)
        # append rows, and the same model still reads the same values.
        flat = model.get_input_embeddings().weight.detach()[:FINGERPRINT_ROWS].flatten()
        step = max(1, flat.numel() // FINGERPRINT_VALUES)
        values = [float(value) for value in flat[::step][:FINGERPRINT_VALUES].float().cpu().tolist()]
    except Exception:  # no embedding to read: the sizes alone
        values = []
    return {"sizes": sizes, "embedding": values, "hooks": forward_hooks(model), "blocks": _blocks(model)}


def _blocks(model: Any) -> int:
    """How many layers the model's longest list of modules holds (its transformer blocks; 0 where none is read): a
    model with blocks removed keeps its config and embeddings, and only this tells it."""
    with contextlib.suppress(Exception):
        return max((len(module) for module in model.modules() if type(module).__name__ == "ModuleList"), default=0)
    return 0


def forward_hooks(model: Any) -> int:
    """How many forward hooks and pre-hooks a model's modules carry (0 where they cannot be read)."""
    with contextlib.suppress(Exception):
        return sum(len(module._forward_hooks) + len(module._forward_pre_hooks) for module in model.modules())
    return 0


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


def _real_path(path: Any) -> str:
    """A file's path with links and the working folder resolved (a model loaded from "onnx-int8/x.onnx" and from its
    absolute path name one file); '' for no path."""
    if not (isinstance(path, str) or hasattr(path, "__fspath__")):
        return ""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError, TypeError):
        return str(path)


def describe_onnx_model(model: Any) -> dict[str, Any]:
    """An ONNX Runtime model (Optimum's ORTModel...): its class and serial, the ONNX file its session was created from
    (as recorded when it was created, where onnxruntime was instrumented by then), its providers and config sizes."""
    with contextlib.suppress(Exception):  # from now on, the sessions a notebook creates are recorded as they are made
        instrument_onnxruntime()
    session = _live_session(model)
    record = SESSION_SOURCES.get(session) if session is not None else None
    path = record.get("path") if record is not None else getattr(session, "_model_path", None) if session is not None else None
    try:
        providers = [str(provider) for provider in session.get_providers()] if session is not None else []
    except Exception:  # a broken session is still described
        providers = []
    config = getattr(model, "config", None)
    sizes = {name: getattr(config, name) for name in SHAPE_FIELDS if isinstance(getattr(config, name, None), (int, str))}
    return {
        "kind": "onnx_model",
        "type": _type_name(model),
        "serial": model_serial(model),
        "path": _real_path(path),
        "providers": providers,
        "name_or_path": str(getattr(config, "_name_or_path", "")),
        "sizes": sizes,
    }


MAX_ONNX_FILE = 4 * 1024**3  # the largest ONNX file whose graph is read (weights in external data are not read)
# Matrix products that run on integers (dynamic and static QOperator formats, weight-only 4/8-bit).
INTEGER_MATMULS = frozenset(
    {"MatMulInteger", "QLinearMatMul", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QGemm", "QAttention", "MatMulNBits"}
)
INT8_TYPES = (2, 3)  # onnx.TensorProto.UINT8, INT8
FLOAT_TYPES = (1, 10, 11, 16)  # FLOAT, FLOAT16, DOUBLE, BFLOAT16
# Operators that hand their first input on unchanged in value (a weight read through them is still that weight).
PASS_THROUGH = frozenset({"Identity", "Cast", "CastLike", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Expand"})


def _graph_constants(graph: Any, outer: dict[str, Any]) -> dict[str, Any]:
    """The constant tensors a graph can read, by name: its initializers, its Constant nodes' values, and the enclosing
    graph's constants (a subgraph reads them by name)."""
    constants = dict(outer)
    constants.update({initializer.name: initializer for initializer in graph.initializer})
    for node in graph.node:
        if node.op_type == "Constant" and node.output:
            for attribute in node.attribute:
                if attribute.name == "value" and attribute.HasField("t"):
                    constants[node.output[0]] = attribute.t
    return constants


def _weight_source(name: str, producers: dict[str, Any], constants: dict[str, Any]) -> tuple[str, Any] | None:
    """Where a product's input comes from, read through pass-through operators (Identity, Cast, Reshape, Transpose,
    ...): ``("float", tensor)`` or ``("int8", tensor)`` for a constant, ``("dequantized", tensor)`` for a
    DequantizeLinear of an 8-bit constant; None for anything computed (an activation)."""
    for _ in range(32):  # a chain of pass-through operators, not a cycle
        if name in constants:
            tensor = constants[name]
            kind = "int8" if tensor.data_type in INT8_TYPES else "float" if tensor.data_type in FLOAT_TYPES else None
            return (kind, tensor) if kind else None
        node = producers.get(name)
        if node is None or not node.input:
            return None
        if node.op_type == "DequantizeLinear":
            source = _weight_source(node.input[0], producers, constants)
            return ("dequantized", source[1]) if source is not None and source[0] == "int8" else None
        if node.op_type not in PASS_THROUGH:
            return None
        name = node.input[0]
    return None


def _all_zero(tensor: Any) -> bool:
    """Whether an 8-bit constant holds only zeros (a product with it computes nothing); False where its values are
    stored outside the graph (external data, not read)."""
    if tensor.data_location == 1:  # onnx.TensorProto.EXTERNAL
        return False
    if tensor.raw_data:
        return not any(tensor.raw_data)
    return not any(tensor.int32_data)


def graph_summary(graph_model: Any) -> dict[str, Any]:
    """What an ONNX graph computes, in counts: integer matrix products and int8 weights on the path to its outputs.

    A node is on the main path when one of the graph's outputs depends on it. Weights are traced through pass-through
    operators (Identity, Cast, Reshape, Transpose, ...) to the constants they read (initializers or Constant nodes). An
    integer product counts where it reads an 8-bit weight that is not all zeros; a MatMul or Gemm fed by a
    DequantizeLinear of an 8-bit weight (the QDQ format) counts as one too, since ONNX Runtime fuses it into one; a
    MatMul or Gemm that reads a float weight is a float product.
    """
    operators: dict[str, int] = {}
    int8_total = 0
    integer_main = 0
    float_weight_main = 0
    int8_main: set[str] = set()
    nodes_total = 0
    graphs: list[tuple[Any, dict[str, Any]]] = [(graph_model.graph, {})]
    while graphs:
        graph, outer = graphs.pop()
        constants = _graph_constants(graph, outer)
        int8_total += sum(1 for name, tensor in constants.items() if name not in outer and tensor.data_type in INT8_TYPES)
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
            graphs.extend((attribute.g, constants) for attribute in node.attribute if attribute.HasField("g"))
            if id(node) not in main:
                continue
            sources = [(name, _weight_source(name, producers, constants)) for name in node.input if name]
            if node.op_type in INTEGER_MATMULS:
                weights = [(name, source[1]) for name, source in sources if source is not None and source[0] == "int8"]
                if any(not _all_zero(tensor) for _, tensor in weights):
                    integer_main += 1
                    int8_main.update(tensor.name or name for name, tensor in weights)
            elif node.op_type in ("MatMul", "Gemm"):
                dequantized = [(name, source[1]) for name, source in sources if source is not None and source[0] == "dequantized"]
                if any(not _all_zero(tensor) for _, tensor in dequantized):
                    integer_main += 1
                    int8_main.update(tensor.name or name for name, tensor in dequantized)
                elif any(source is not None and source[0] == "float" for _, source in sources):
                    float_weight_main += 1
    common = sorted(operators.items(), key=lambda item: (-item[1], item[0]))[:12]
    past = {
        name.split(".")[1] for name in (value.name for value in graph_model.graph.input) if name.startswith("past_key_values.")
    }
    return {
        "nodes": nodes_total,
        "operators": dict(common),
        "integer_ops": {op: count for op, count in operators.items() if op in INTEGER_MATMULS or "Quantize" in op},
        "integer_matmuls_main": integer_main,
        "float_weight_matmuls_main": float_weight_main,
        "int8_initializers": int8_total,
        "int8_initializers_main": len(int8_main),
        "past_layers": len(past),  # the layers whose cache the graph takes (0: exported without a cache)
    }


class SessionFileMismatch(ValueError):
    """The graph a session names (its file, or bytes) is not the one it was created from."""


def _file_digest(path: str) -> str:
    """The SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _creation_record(source: Any) -> dict[str, Any]:
    """What a session is created from: its bytes (kept: a session's ``_model_bytes`` can be replaced afterwards), or
    its file's path, size and digest (a session's ``_model_path`` can be pointed elsewhere afterwards)."""
    if isinstance(source, (bytes, bytearray)):
        return {"bytes": bytes(source), "digest": hashlib.sha256(source).hexdigest()}
    path = os.path.abspath(os.fspath(source))
    size = os.path.getsize(path)
    return {"path": path, "size": size, "digest": _file_digest(path) if size <= MAX_ONNX_FILE else None}


def _session_graph(session: Any) -> tuple[Any, str]:
    """The ONNX graph a live session was created from (read here, in the kernel), and where from: the bytes or file
    recorded when it was created (its file unchanged since), else the bytes or file it names, held against what the
    session itself reports of the graph it runs (its producer, graph name, metadata, inputs and outputs)."""

    import onnx

    record = SESSION_SOURCES.get(session)
    if record is not None and "bytes" in record:
        if len(record["bytes"]) > MAX_ONNX_FILE:
            raise ValueError(f"the session's model is {len(record['bytes'])} bytes, more than the grader reads")
        return onnx.load_from_string(record["bytes"]), "bytes"
    if record is not None:
        path = record["path"]
        if record["digest"] is None or os.path.getsize(path) > MAX_ONNX_FILE:
            raise ValueError("the session's model file is larger than the grader reads")
        if os.path.getsize(path) != record["size"] or _file_digest(path) != record["digest"]:
            raise SessionFileMismatch("the file the session was created from has changed since")
        return onnx.load(path, load_external_data=False), os.path.basename(path)
    model_bytes = getattr(session, "_model_bytes", None)
    if isinstance(model_bytes, bytes):
        if len(model_bytes) > MAX_ONNX_FILE:
            raise ValueError(f"the session's model is {len(model_bytes)} bytes, more than the grader reads")
        graph_model, source = onnx.load_from_string(model_bytes), "bytes"
    else:
        path = getattr(session, "_model_path", None)
        if not isinstance(path, (str, os.PathLike)):
            raise ValueError("the session names no model file")
        if os.path.getsize(path) > MAX_ONNX_FILE:
            raise ValueError("the session's model file is larger than the grader reads")
        graph_model, source = onnx.load(os.fspath(path), load_external_data=False), os.path.basename(os.fspath(path))
    _verify_session_runs(session, graph_model)
    return graph_model, source


def _verify_session_runs(session: Any, graph_model: Any) -> None:
    """Raise :class:`SessionFileMismatch` where what the live session reports of the graph it runs (its native
    session's metadata, inputs and outputs, which Python code cannot rewrite) is not what ``graph_model`` says."""
    native = getattr(session, "_sess", None)
    if native is None:
        return
    try:
        meta = native.model_meta
        ran = {
            "producer": str(meta.producer_name),
            "graph": str(meta.graph_name),
            "description": str(meta.description),
            "metadata": dict(meta.custom_metadata_map),
            "inputs": sorted(str(value.name) for value in native.inputs_meta),
            "outputs": sorted(str(value.name) for value in native.outputs_meta),
        }
    except Exception:  # a native session that reports nothing: nothing to hold the file against
        return
    graph = graph_model.graph
    constants = {initializer.name for initializer in graph.initializer}
    named = {
        "producer": str(graph_model.producer_name),
        "graph": str(graph.name),
        "description": str(graph_model.doc_string),
        "metadata": {prop.key: prop.value for prop in graph_model.metadata_props},
        "inputs": sorted(value.name for value in graph.input if value.name not in constants),
        "outputs": sorted(value.name for value in graph.output),
    }
    differ = [field for field in ran if ran[field] != named[field]]
    if differ:
        raise SessionFileMismatch(f"the graph the session names differs from the one it runs in its {', '.join(differ)}")


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


# What each session was created from (see _creation_record), recorded as it is created once onnxruntime is
# instrumented: the graph a session runs is read from there, not from attributes the notebook can reassign.
SESSION_SOURCES: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def instrument_onnxruntime() -> None:
    """Record what every ``InferenceSession`` is created from, and every ``run`` as an ``onnx_run`` event (once; only
    when onnxruntime is used)."""
    if INSTALLED.get("onnxruntime"):
        return
    import onnxruntime

    cls = onnxruntime.InferenceSession
    _replace(cls, "__init__", _instrumented_session_init(cls.__init__))
    _replace(cls, "run", _instrumented_session_run(cls.run))
    _replace(cls, "run_with_iobinding", _instrumented_session_run(cls.run_with_iobinding, iobinding=True))
    INSTALLED["onnxruntime"] = onnxruntime.__version__


def _instrumented_session_init(original: Callable[..., Any]) -> Callable[..., Any]:
    @_wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        source = args[0] if args else kwargs.get("path_or_bytes")
        with contextlib.suppress(Exception):  # a source that cannot be read is named by the session alone
            SESSION_SOURCES[self] = _creation_record(source)

    return __init__


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
                    # The loss its logits give: during the grader's calls, on the grader's sessions, and on the
                    # notebook's own outside generate (a perplexity evaluation, not a timed decoding step).
                    scored = RECORDER.call is not None and (event["grader_session"] or RECORDER.current_generate is None)
                    event.update(_run_tokens(self, feed, outputs, scored, serial))
        finally:
            if not event["end"]:
                event["end"] = RECORDER.now()
            RECORDER.record(event)
        return outputs

    return run


# Per grader session, the log-probabilities its last run's last position gave each row (for the next token): a run on
# that session's cache (its mask wider than its ids) is scored on its first token with them, so a text evaluated in
# pieces (a first token, then the rest on the cache; or token by token) is scored on every token, as in one run.
LAST_SCORES: dict[int, Any] = {}


def _log_softmax(scores: Any) -> Any:
    import numpy

    scores = scores.astype(numpy.float64)
    peak = scores.max(axis=-1, keepdims=True)
    return scores - (peak + numpy.log(numpy.exp(scores - peak).sum(axis=-1, keepdims=True)))


def _run_tokens(session: Any, feed: dict[str, Any], outputs: Any, with_loss: bool, serial: int = -1) -> RunTokens:
    """A session run's batch (rows and tokens each covers) and, for the grader's sessions, the loss its logits give
    (its own tokens, and its first token from the session's previous run where it runs on that run's cache)."""
    import numpy

    ids = numpy.asarray(feed.get("input_ids"))
    if ids.ndim != 2:
        return {"input_shape": None, "row_tokens": None, "nll_sums": None, "nll_counts": None}
    mask = feed.get("attention_mask")
    whole = numpy.asarray(mask) if mask is not None else numpy.ones_like(ids)
    past = whole.shape[1] - ids.shape[1] if whole.ndim == 2 and whole.shape[0] == ids.shape[0] else -1
    # With a cache, the mask also covers the past tokens: this run's own part is its last columns.
    mask = whole[:, past:] if past >= 0 else numpy.ones_like(ids)
    facts: RunTokens = {
        "input_shape": list(ids.shape),
        "row_tokens": [int(v) for v in mask.sum(axis=1).tolist()[:MAX_IDS]],
        "nll_sums": None,
        "nll_counts": None,
    }
    names = [output.name for output in session.get_outputs()]
    earlier = LAST_SCORES.pop(serial, None)
    if not with_loss or "logits" not in names:
        return facts
    logits = numpy.asarray(outputs[names.index("logits")])
    chained = past > 0 and earlier is not None and earlier.shape[0] == ids.shape[0]
    sums = {"pairs": 0.0, "targets": 0.0, "all": 0.0}
    counts = {"pairs": 0, "targets": 0, "all": 0}
    # A run of one token on no cache predicts none of its tokens (a warm-up, or a text's first piece): zero of each.
    for row in range(ids.shape[0] if ids.shape[1] > 1 or chained else 0):  # row by row: bounded memory
        scores = _log_softmax(logits[row, :-1])
        nll = -scores[numpy.arange(scores.shape[0]), ids[row, 1:]]
        before = mask[row, :-1]
        if chained:  # the first token, predicted by the previous run's last position
            nll = numpy.concatenate([[-earlier[row, ids[row, 0]]], nll])
            before = numpy.concatenate([[whole[row, past - 1]], before])
        targets = mask[row, 1:] if not chained else mask[row]
        selections = {
            "pairs": (targets == 1) & (before == 1),
            "targets": targets == 1,
            "all": numpy.ones_like(targets, dtype=bool),
        }
        for name, selected in selections.items():
            sums[name] += float(nll[selected].sum())
            counts[name] += int(selected.sum())
    LAST_SCORES[serial] = _log_softmax(logits[:, -1])
    facts["nll_sums"] = sums
    facts["nll_counts"] = counts
    return facts
