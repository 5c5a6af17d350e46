"""The operations the grader asks for, and how each answer is published.

A part of the grader's runtime (see :mod:`grader.kernel.runtime`): in the kernel the parts are one module."""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import math
import sys
import traceback
import types
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # for mypy only: in the kernel the parts are one module, which imports nothing of the grader
    from grader.kernel.protocol import (
        Answer,
        CallRequest,
        DescribeRequest,
        EventsRequest,
        ExceptionAnswer,
        GenerateRequest,
        InspectRequest,
        InstallRequest,
        LoadModelRequest,
        ModelSeen,
        NameInfo,
        Recipe,
        ReleaseRequest,
        ReturnedEvent,
        TokenizerSpec,
    )
    from grader.kernel.runtime.base import MAX_ARGUMENT, MAX_CAPTURE, MAX_STRING, _dumps, _perf_counter
    from grader.kernel.runtime.figures import _watch_figures
    from grader.kernel.runtime.install import INSTALLED, _publisher, environment, install
    from grader.kernel.runtime.instrument import (
        MODEL_SERIALS,
        RECORDER,
        _wraps,
        drain_events,
        model_serial,
        quantization_label,
    )
    from grader.kernel.runtime.models import load_model
    from grader.kernel.runtime.values import (
        GRADER_SESSIONS,
        _is_ort_model,
        _is_pretrained_model,
        _type_name,
        describe,
        describe_model,
        describe_onnx_model,
        forward_hooks,
        instrument_onnxruntime,
        model_fingerprint,
        op_onnx_graph,
    )


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
            value = vars(value)[step] if isinstance(value, types.SimpleNamespace) else value[step]
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
    if tag == "$item":
        return _build(payload["of"])[payload["index"]]
    if tag == "$copy":
        import copy

        return copy.deepcopy(_build(payload))
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
        # What it is an instance of (a ``class PrecisionError(ValueError)`` is a ValueError).
        "bases": [klass.__name__ for klass in type(error).__mro__[1:] if klass is not object][:16],
        "message": str(error)[:2000],
        "traceback": "".join(traceback.format_list(frames)) + f"{type(error).__name__}: {error}"[:4000],
    }


@contextlib.contextmanager
def _cuda_said_available() -> Iterator[None]:
    """While a call runs on a machine without CUDA, CUDA is said to be there: ``torch.cuda.is_available()`` answers True
    and ``torch.cuda.device_count()`` 1, however a function asks (put back after)."""
    import torch

    available, count = torch.cuda.is_available, torch.cuda.device_count
    if available():
        yield
        return
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    try:
        yield
    finally:
        torch.cuda.is_available, torch.cuda.device_count = available, count


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
    _reset_global_state()
    RECORDER.call = []
    RECORDER.call_models = {}
    RECORDER.call_dropped = 0
    RECORDER.record(
        {"type": "arguments", "models": {str(serial): label for serial, label in model_arguments(args, kwargs).items()}}
    )
    RECORDER.arguments = [model for _, model in _given_models(args, kwargs)]
    RECORDER.paced = request["paced"]
    RECORDER.pace_s = request["pace_s"]
    RECORDER.pauses = 0
    RECORDER.paced_prompts = set()
    result: Answer = {"status": "returned"}
    watching = _watch_figures() if request["figures"] else contextlib.nullcontext()
    cuda = _cuda_said_available() if request.get("cuda") else contextlib.nullcontext()
    with _capture() as captured, watching, cuda, _watch_functions(namespace, request["watch"]):
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
            "models": models_seen(RECORDER.call_models, model_arguments(args, kwargs)),
        }
    )
    RECORDER.call = None
    RECORDER.call_models = {}
    RECORDER.arguments = []
    RECORDER.paced = False
    RECORDER.pace_s = 0.0
    return result


def _reset_global_state() -> None:
    """What a graded call may depend on, as a fresh kernel has it: gradients on, float32 by default, seeded random
    numbers. A notebook's setup cell (``torch.set_grad_enabled(False)``) must not do a function's work for it."""
    import random

    import torch

    torch.set_grad_enabled(True)
    torch.set_default_dtype(torch.float32)
    torch.manual_seed(0)
    random.seed(0)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        with contextlib.suppress(Exception):
            numpy.random.seed(0)


def _is_model(value: Any) -> bool:
    """A model a graded function may run: a transformers model, or an Optimum ONNX Runtime one."""
    return _is_pretrained_model(value) or _is_ort_model(value)


def model_arguments(args: list[Any], kwargs: dict[str, Any]) -> dict[int, str]:
    """The models a call was given, by serial: each named by where it was passed (``argument 1``, ``keyword model``,
    ``argument 1['int8']`` for one inside a dict or list), which the grader's reference side names alike whatever
    the function calls its parameters."""
    found: dict[int, str] = {}
    for label, model in _given_models(args, kwargs):
        found.setdefault(model_serial(model), label)
    return found


def _given_models(args: list[Any], kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    """The models among a call's arguments (or inside a dict or list it was given), each with where it was passed."""
    named: dict[str, Any] = {f"argument {index + 1}": value for index, value in enumerate(args)}
    named |= {f"keyword {name}": value for name, value in kwargs.items()}
    given = []
    for name, value in named.items():
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
        for key, item in [(None, value), *items]:
            if _is_model(item):
                given.append((name if key is None else f"{name}[{key!r}]", item))
    return given


def seen_model(model: Any) -> ModelSeen:
    """What a model a call ran is: its serial, class, dtype, device, quantization and weights (its fingerprint)."""
    entry: ModelSeen = {
        "serial": model_serial(model),
        "argument": None,
        "type": _type_name(model),
        "dtype": str(getattr(model, "dtype", "unknown")),
        "device": str(getattr(model, "device", "unknown")),
        "quantization": quantization_label(model),
        "fingerprint": None,
    }
    with contextlib.suppress(Exception):
        entry["fingerprint"] = model_fingerprint(model) if _is_pretrained_model(model) else None
    return entry


def models_seen(ran: dict[int, ModelSeen], arguments: dict[int, str]) -> list[ModelSeen]:
    """Every model the call ran (described as it ran: a model loaded and dropped inside the call is gone by its end)
    or was given, with the argument that held it."""
    seen = dict(ran)
    for model, serial in list(MODEL_SERIALS.items()):
        if serial in arguments and serial not in seen:
            seen[serial] = seen_model(model)
    return [{**entry, "argument": arguments.get(serial)} for serial, entry in sorted(seen.items())]


def _signature(function: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):
        return None


def _object_entry(value: Any) -> dict[str, Any]:
    """An object as a watched argument names it: its type, and the serial of a model."""
    entry: dict[str, Any] = {"kind": "object", "type": _type_name(value)}
    if _is_model(value):
        entry["serial"] = model_serial(value)
        entry["hooks"] = forward_hooks(value)  # the forward hooks it carries as it is given (the caller's, not the call's)
    if _is_ort_model(value):
        with contextlib.suppress(Exception):  # the ONNX file its session runs: a model reloaded from one file is that model
            entry["path"] = describe_onnx_model(value)["path"]
    return entry


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

    def small(item: Any, limit: int = MAX_ARGUMENT) -> bool:
        return item is None or isinstance(item, (bool, int, float)) or (isinstance(item, str) and len(item) <= limit)

    def prompts(value: Any) -> bool:
        """A list of prompts (a very long one among them: a thousand tokens of text) is kept; a corpus of texts is not
        (events must stay small)."""
        if not isinstance(value, (list, tuple)) or len(value) > 64:
            return False
        if all(map(small, value)):
            return True
        return (
            all(small(item, MAX_STRING) for item in value)
            and sum(len(item or "") for item in value if isinstance(item, str)) <= 4 * MAX_STRING
        )

    described: list[list[Any]] = []
    for name, value in list(arguments.items())[:16]:
        try:
            if small(value, MAX_STRING) or prompts(value):
                described.append([str(name), describe(value)])
                continue
            entry = _object_entry(value)  # a model's serial: which model it was (the one its generate calls name)
            if isinstance(value, (str, list, tuple, dict)):
                entry["length"] = len(value)
            if isinstance(value, dict) and len(value) <= 16:  # models by label (compare_ppplx's): which model each is
                entry["entries"] = [[str(key)[:MAX_ARGUMENT], _object_entry(item)] for key, item in value.items()]
            side = getattr(value, "padding_side", None)
            if isinstance(side, str):
                entry["padding_side"] = side[:20]
            described.append([str(name), entry])
        except Exception as error:  # a hostile argument must not break the student's call
            described.append([str(name), {"kind": "undescribable", "type": _type_name(value), "error": repr(error)[:300]}])
    return described


def _watched(name: str, original: Callable[..., Any], scope: str) -> Callable[..., Any]:
    """``original`` recording what it returns, with the arguments it was given, as a ``returned`` event: during a
    graded call (``scope`` "call"), or while the notebook's cells run ("notebook": a graded call watches on its own)."""
    signature = _signature(original)  # read once, not at each of its calls

    @_wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if (RECORDER.call is None) != (scope == "notebook"):
            return original(*args, **kwargs)
        arguments = _arguments(signature, args, kwargs)
        start, slept = RECORDER.now(), RECORDER.slept
        value = original(*args, **kwargs)
        event: ReturnedEvent = {
            "type": "returned",
            "function": name,
            "start": start,
            "time": RECORDER.now(),
            "arguments": arguments,
            "value": None,
            "slept_s": RECORDER.slept - slept,
            "sleeps": RECORDER.sleeps_since(start),
        }
        try:
            event["value"] = describe(value)
        except Exception as error:  # describing hostile objects must not break the student's call
            event["value"] = {"kind": "undescribable", "type": _type_name(value), "error": repr(error)[:300]}
        RECORDER.record(event)
        return value

    wrapper.__llm_grader_watched__ = original  # type: ignore[attr-defined]
    return wrapper


# Notebook functions watched while the cells run, by name: (the function the notebook defined, its watcher).
NOTEBOOK_WATCHED: dict[str, tuple[Any, Any]] = {}


def watch_definition(name: str) -> Callable[[Any], Any]:
    """A decorator the runtime puts on each watched notebook function's ``def`` (see :func:`watch_notebook`): the
    function as defined, watched from its definition on (its calls in the very cell that defines it included)."""

    def decorate(function: Any) -> Any:
        if not callable(function) or function is NOTEBOOK_WATCHED.get(name, (None, None))[1]:
            return function
        watcher = _watched(name, function, "notebook")
        NOTEBOOK_WATCHED[name] = (function, watcher)
        return watcher

    return decorate


def _watching_definitions(names: list[str]) -> Any:
    """An IPython AST transformer that decorates each cell's top-level ``def`` of a watched name with
    :func:`watch_definition` (reached through ``sys.modules``: the notebook's namespace is left alone)."""
    import ast

    module = __name__

    class WatchDefinitions(ast.NodeTransformer):
        def visit_Module(self, node: ast.Module) -> ast.Module:
            # A def published under a watched name by an alias in the cell (generate_text_and_time = _helper) is
            # watched as that name from its definition on: the cell's own calls of the helper included.
            aliases = {
                statement.value.id: target.id
                for statement in node.body
                if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Name)
                for target in statement.targets
                if isinstance(target, ast.Name) and target.id in names
            }
            for statement in node.body:
                # A watched name bound to what an expression makes (a factory, functools.partial, a lambda) is
                # watched from that statement on, its calls later in the cell included.
                target = statement.targets[0] if isinstance(statement, ast.Assign) and len(statement.targets) == 1 else None
                if isinstance(statement, ast.AnnAssign) and statement.value is not None:
                    target = statement.target
                value = getattr(statement, "value", None)
                if isinstance(target, ast.Name) and target.id in names and value is not None and not isinstance(value, ast.Name):
                    wrapper = ast.parse(
                        f"__import__('sys').modules[{module!r}].watch_definition({target.id!r})(None)", mode="eval"
                    ).body
                    assert isinstance(wrapper, ast.Call)
                    wrapper.args = [value]
                    assert isinstance(statement, (ast.Assign, ast.AnnAssign))
                    statement.value = ast.copy_location(wrapper, value)
                    ast.fix_missing_locations(statement)
                if not isinstance(statement, ast.FunctionDef):
                    continue
                watched = statement.name if statement.name in names else aliases.get(statement.name)
                if watched:
                    decorator = ast.parse(
                        f"__import__('sys').modules[{module!r}].watch_definition({watched!r})", mode="eval"
                    ).body
                    ast.copy_location(decorator, statement)
                    statement.decorator_list.insert(0, decorator)  # outermost: the function as the notebook made it
            return node

    return WatchDefinitions()


def watch_notebook(names: list[str]) -> None:
    """Watch each named notebook function, so that what the notebook's own calls of it gave is recorded (notebook
    events): decorated where the cell defines it (a call in that very cell included), and, after each cell, put in
    place of a function defined another way (an assignment, an exec)."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None or not names:
        return
    with contextlib.suppress(Exception):  # an IPython without AST transformers: after each cell alone
        shell.ast_transformers.append(_watching_definitions(names))

    def after_cell(*_: Any) -> None:
        namespace = shell.user_ns
        for name in names:
            current = namespace.get(name)
            if not callable(current) or current is NOTEBOOK_WATCHED.get(name, (None, None))[1]:
                continue
            watcher = _watched(name, current, "notebook")
            NOTEBOOK_WATCHED[name] = (current, watcher)
            # Every name the notebook holds the function under (an alias it calls it by) gets the watcher.
            for other in [key for key, value in namespace.items() if value is current and not key.startswith("_i")]:
                namespace[other] = watcher
            namespace[name] = watcher

    shell.events.register("post_run_cell", after_cell)


@contextlib.contextmanager
def _watch_functions(namespace: dict[str, Any], names: list[str]) -> Iterator[None]:
    """While a call runs, record what each named notebook function returns, as ``returned`` events, with the
    arguments it was given."""
    originals = {name: namespace[name] for name in names if callable(namespace.get(name))}

    def watched(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        return _watched(name, original, "call")

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
    drain_events()  # the records streamed before the answer that carries them
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
