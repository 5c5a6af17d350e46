"""Instrumentation: the records of every generate, forward pass, tokenizer call and synchronize.

A part of the grader's runtime (see :mod:`grader.kernel.runtime`): in the kernel the parts are one module."""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import itertools
import math
import os
import queue
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for mypy only: in the kernel the parts are one module, which imports nothing of the grader
    from grader.kernel.protocol import (
        Event,
        ForwardEvent,
        GenerateEvent,
        ModelSeen,
        Setting,
        SynchronizeEvent,
        TokenizeEvent,
        TokenizerEvent,
    )
    from grader.kernel.runtime.base import (
        MAX_CHOICES,
        MAX_EVENTS,
        MAX_IDS,
        MAX_ROW_IDS,
        MAX_ROWS,
        MAX_SLEEPS,
        _dumps,
        _getpid,
        _perf_counter,
        _read,
        _sleep,
        _thread_time,
        _write,
    )
    from grader.kernel.runtime.install import INSTRUMENTED, _replace, _replaced_now
    from grader.kernel.runtime.operations import _without_nan, seen_model
    from grader.kernel.runtime.values import _type_name, linear_layers


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
        self.call_models: dict[int, ModelSeen] = {}  # the models the current call ran, as they were when it ran them
        self.notebook_models: dict[int, ModelSeen] = {}  # the models the notebook's cells ran
        self.call_dropped = 0
        self.arguments: list[Any] = []  # the models the current call was given (a part of one run alone is that model)
        # Where each thread is (inside a generate, a forward pass, a tokenizer call): a generate run in a worker thread
        # (a thread pool, a streamer) is recorded like one on the main thread, and two threads do not nest.
        self.threads = threading.local()
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

    def _state(self) -> Any:
        """This thread's place in the instrumentation (created at its first use)."""
        state = self.threads
        if not hasattr(state, "generate_depth"):
            state.generate_depth = 0
            state.tokenizer_depth = 0
            state.forward_stack = []  # the models whose forward is running, innermost last
            state.current_generate = None
            state.choices = None  # the greedy choice of each forward pass of the current generate (see note_choice)
            state.slept = 0.0  # seconds this thread slept outside generate calls (see _note_slept)
            state.sleeps = collections.deque(maxlen=MAX_SLEEPS)  # when it slept: (start, end) on the runtime's clock
        return state

    @property
    def slept(self) -> float:
        """Seconds this thread has slept outside generate calls (see :func:`_note_slept`)."""
        return float(self._state().slept)

    @slept.setter
    def slept(self, value: float) -> None:
        self._state().slept = value

    def sleeps_since(self, start: float) -> list[list[float]]:
        """When this thread slept (see :func:`_note_slept`) outside generate calls since ``start`` (the runtime's
        clock), as [start, end] pairs: the last :data:`MAX_SLEEPS` of them."""
        return [[began, ended] for began, ended in self._state().sleeps if began >= start]

    def note_sleep(self, began: float, ended: float) -> None:
        """Count a sleep of this thread outside generate calls (``_perf_counter`` times)."""
        state = self._state()
        state.slept += ended - began
        state.sleeps.append((began - self.clock_origin, ended - self.clock_origin))

    @property
    def generate_depth(self) -> int:
        """How deep this thread is in instrumented generate calls."""
        return int(self._state().generate_depth)

    @generate_depth.setter
    def generate_depth(self, value: int) -> None:
        self._state().generate_depth = value

    @property
    def tokenizer_depth(self) -> int:
        """How deep this thread is in instrumented tokenizer calls."""
        return int(self._state().tokenizer_depth)

    @tokenizer_depth.setter
    def tokenizer_depth(self, value: int) -> None:
        self._state().tokenizer_depth = value

    @property
    def forward_stack(self) -> list[Any]:
        """The models whose forward this thread is running, innermost last."""
        stack: list[Any] = self._state().forward_stack
        return stack

    @property
    def current_generate(self) -> GenerateEvent | None:
        """The event of the generate call this thread is running (None outside one)."""
        event: GenerateEvent | None = self._state().current_generate
        return event

    @current_generate.setter
    def current_generate(self, event: GenerateEvent | None) -> None:
        self._state().current_generate = event

    @property
    def choices(self) -> list[Any] | None:
        """The tokens the model itself picked (its logits' greedy choice) at each forward pass of the current
        generate, one tensor of rows per pass (None outside one)."""
        choices: list[Any] | None = self._state().choices
        return choices

    @choices.setter
    def choices(self, choices: list[Any] | None) -> None:
        self._state().choices = choices

    def remember(self, model: Any) -> None:
        """Describe a model the first time it runs in the current scope (a call, or the notebook's cells), as a
        ``model`` event (see ``seen_model``); and again each time it runs as something else than it was (its layers
        or weights swapped for another model's after its first run: the grader sees the serial change kind)."""
        seen = self.call_models if self.call is not None else self.notebook_models
        serial = model_serial(model)
        with contextlib.suppress(Exception):  # a model that cannot be described is named by its serial alone
            entry = seen_model(model)
            before = seen.get(serial)
            if before is not None and (before["quantization"], before["fingerprint"]) == (
                entry["quantization"],
                entry["fingerprint"],
            ):
                return
            seen[serial] = entry
            self.record(
                {
                    "type": "model",
                    "serial": serial,
                    "model_type": entry["type"],
                    "dtype": entry["dtype"],
                    "device": entry["device"],
                    "quantization": entry["quantization"],
                    "fingerprint": entry["fingerprint"],
                }
            )

    def record(self, event: Event) -> None:
        """Keep ``event`` (complete) in the active scope, up to :data:`MAX_EVENTS`, and stream it to the grader."""
        if self.call is not None:
            if len(self.call) < MAX_EVENTS:
                self.call.append(event)
                _stream("call", event)
            else:
                self.call_dropped += 1
        elif len(self.notebook) < MAX_EVENTS:
            self.notebook.append(event)
            _stream("notebook", event)
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


def forward_runner(model: Any) -> Any:
    """The module whose forward a call of ``model`` runs: ``model`` itself, or another module whose bound forward was
    set on ``model`` (``model.forward = other.forward``: a quantized model that computes with a float twin), found
    through the wrappers a forward is commonly given (``functools.partial``, as accelerate's hooks set it, and
    ``functools.wraps``, as ``torch.compile`` does)."""
    import torch

    seen = 0
    current = vars(model).get("forward") if hasattr(model, "__dict__") else None
    while current is not None and seen < 8:
        seen += 1
        owner = getattr(current, "__self__", None)
        if isinstance(owner, torch.nn.Module):
            return model if owner is model else owner
        if isinstance(current, functools.partial):
            if any(argument is model for argument in current.args):
                return model
            current = current.func
        else:
            current = getattr(current, "__wrapped__", None)
    return model


def _parameter_count(model: Any) -> int | None:
    """How many parameter tensors a model holds as it runs (a model whose blocks were taken out for a call holds fewer;
    one whose embeddings were resized for an added [PAD] token holds as many)."""
    try:
        return sum(1 for _ in model.parameters())
    except Exception:
        return None


class SeenCode:
    """What a class or a module held when first seen: its routines by name, how many names it held (a cheap test that
    none was added since), and whether the notebook made it (a class of the notebook's)."""

    __slots__ = ("by_notebook", "routines", "size")

    def __init__(self, namespace: Any, by_notebook: bool = False) -> None:
        self.routines = _routines(namespace)
        self.size = len(namespace)
        self.by_notebook = by_notebook


# Each module class as it was made, and each module a model computes with as first seen: a class whose forward the
# notebook replaces (or a module function, or a registered attention function) runs other work than the model's.
CLASS_CODE: weakref.WeakKeyDictionary[type, SeenCode] = weakref.WeakKeyDictionary()
MODULE_CODE: dict[str, SeenCode] = {}
LIBRARY_MODULES = ("torch", "torch.nn.functional")  # changed only where the notebook's own code replaces a function
COMPUTING_MODULES = ("transformers.integrations.sdpa_attention", "transformers.masking_utils", "transformers.modeling_utils")
REGISTRIES: dict[str, dict[str, Any]] = {}  # the attention and mask registries' entries as the runtime installed
LIBRARY_ROOTS: list[str] = []  # the folders library code comes from (sys.path as the runtime installed, less the cwd)
_FOREIGN_FILES: dict[str, bool] = {}
_CODE_WATCH: dict[int, list[tuple[Any, ...]]] = {}  # id(generate event) -> what its model's code was as it began
# Watched at every step of a generate (a change made from a streamer or a hook between steps): the methods that run
# a module, and the functions of the modules its classes come from.
STEP_NAMES = ("forward", "__call__", "_call_impl", "_wrapped_call_impl")
MAX_CODE_CHANGES = 8


def _routines(namespace: Any) -> dict[str, Any]:
    """A class's or module's routines (functions, class and static methods, properties, partials), by name."""
    return {name: value for name, value in namespace.items() if _is_routine(value)}


def _is_routine(value: Any) -> bool:
    kinds = (classmethod, staticmethod, property, functools.partial, functools.partialmethod)
    return inspect.isroutine(value) or isinstance(value, kinds)


def library_roots() -> list[str]:
    """The folders library code lives in: the import path as the runtime installed (not the notebook's folder)."""
    if not LIBRARY_ROOTS:
        import sys
        import sysconfig

        here = os.path.realpath(os.getcwd())
        paths = sysconfig.get_paths()
        candidates = [*sys.path, *(paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib") if name in paths)]
        roots = {os.path.realpath(path) for path in candidates if isinstance(path, str) and path and os.path.isdir(path)}
        LIBRARY_ROOTS.extend(sorted(root for root in roots if root not in (here, os.sep)) or [os.sep + "\\0"])
    return LIBRARY_ROOTS


def foreign_file(filename: str) -> bool:
    """Whether code compiled from ``filename`` is the notebook's (a cell, an exec'd string, a file in its folder)
    rather than a library's."""
    known = _FOREIGN_FILES.get(filename)
    if known is None:
        real = os.path.realpath(filename) if os.path.isabs(filename) else filename
        here = os.path.realpath(os.getcwd())
        inside = lambda root: real == root or real.startswith(root.rstrip(os.sep) + os.sep)  # noqa: E731
        known = _FOREIGN_FILES[filename] = inside(here) or not any(inside(root) for root in library_roots())
    return known


def _code_file(value: Any) -> str | None:
    """The file the function behind ``value`` (a method, a class or static method, a partial) was compiled from."""
    for _ in range(8):
        if isinstance(value, (classmethod, staticmethod)) or inspect.ismethod(value):
            value = value.__func__
        elif isinstance(value, (functools.partial, functools.partialmethod)):
            value = value.func
        elif isinstance(value, property):
            value = value.fget
        else:
            break
    return value.__code__.co_filename if inspect.isfunction(value) else None


def foreign_code(value: Any) -> bool:
    filename = _code_file(value)
    return filename is not None and foreign_file(filename)


def remember_module(name: str) -> SeenCode | None:
    """Module ``name`` as first seen (None where it is not loaded)."""
    import sys

    seen = MODULE_CODE.get(name)
    if seen is None and (module := sys.modules.get(name)) is not None:
        seen = MODULE_CODE[name] = SeenCode(vars(module))
    return seen


def remember_class(cls: type, depth: int = 1) -> None:
    """Snapshot a module class's routines as it is made (and its module's functions, as first seen); made by the
    notebook where the statement (or ``type()`` call) that made it runs the notebook's code (``depth`` frames above
    this one, less ``__init_subclass__`` ones)."""
    import sys

    frame: Any = sys._getframe(depth)
    while frame is not None and frame.f_code.co_name == "__init_subclass__":
        frame = frame.f_back
    by_notebook = frame is not None and foreign_file(frame.f_code.co_filename)
    CLASS_CODE[cls] = SeenCode(vars(cls), by_notebook)
    if not by_notebook:
        remember_module(cls.__module__)


def _remembering_subclasses(cls: Any, **kwargs: Any) -> None:
    """``torch.nn.Module.__init_subclass__``: every module class made after the runtime installed is remembered."""
    import torch

    super(torch.nn.Module, cls).__init_subclass__(**kwargs)
    remember_class(cls, depth=2)


def _registries() -> dict[str, dict[str, Any]]:
    """transformers' attention and mask registries (the functions a model's attention calls, by implementation)."""
    import sys

    found: dict[str, dict[str, Any]] = {}
    places = (
        ("transformers.modeling_utils", "ALL_ATTENTION_FUNCTIONS"),
        ("transformers.masking_utils", "ALL_MASK_ATTENTION_FUNCTIONS"),
    )
    for module, name in places:
        registry = getattr(sys.modules.get(module), name, None)
        mapping = getattr(registry, "_global_mapping", None)
        if isinstance(mapping, dict):
            local = getattr(registry, "_local_mapping", None)
            found[name] = {**mapping, **(local if isinstance(local, dict) else {})}
    return found


def remember_module_classes() -> None:
    """Snapshot the module classes made before the runtime installed (torch's, and transformers' loaded so far), the
    functions of torch's and transformers' computing modules and the attention registries; and remember every
    module class made after."""
    import torch

    pending: list[type] = [torch.nn.Module]
    while pending:
        cls = pending.pop()
        for klass in (cls, *cls.__mro__):
            if klass is not object and klass not in CLASS_CODE:
                CLASS_CODE[klass] = SeenCode(vars(klass))
        subclasses: list[type] = type.__subclasses__(cls)
        pending.extend(sub for sub in subclasses if sub not in CLASS_CODE)
    for name in (*LIBRARY_MODULES, *COMPUTING_MODULES):
        remember_module(name)
    for name, mapping in _registries().items():
        REGISTRIES.setdefault(name, dict(mapping))
    _replace(torch.nn.Module, "__init_subclass__", classmethod(_remembering_subclasses))


def _changed_routine(owner: Any, name: str, now: Any, was: Any, own: set[tuple[int, str, int]]) -> bool:
    """Whether ``owner.name`` is no longer the routine first seen: the runtime's own wrappers and a library's wrapper
    of the original (``__wrapped__``) are the original."""
    if now is was or (id(owner), name, id(now)) in own:
        return False
    if now is not None and foreign_code(now):
        return True
    wrapped = now
    for _ in range(8):
        wrapped = getattr(wrapped, "__wrapped__", None) if inspect.isfunction(wrapped) else None
        if wrapped is None:
            return True
        if wrapped is was:
            return False
    return True


def _namespace_changes(owner: Any, label: str, seen: SeenCode, own: set[tuple[int, str, int]], strict: bool) -> list[str]:
    """The routines of ``owner`` (a class or a module) that are not what ``seen`` holds: replaced (``strict``: by
    anything but a wrapper of the original; else only by the notebook's code), or added by the notebook. A routine
    a library added since joins what was seen (as transformers adds ``smart_apply`` to every module)."""
    namespace = vars(owner)
    routines = seen.routines
    if len(namespace) == seen.size and all(namespace.get(name) is value for name, value in routines.items()):
        return []
    changes = []
    for name, was in routines.items():
        now = namespace.get(name)
        if now is was:
            continue
        if strict:
            changed = _changed_routine(owner, name, now, was, own)
        else:
            changed = now is not None and (id(owner), name, id(now)) not in own and foreign_code(now)
        if changed:
            changes.append(f"{label}.{name}")
    if len(namespace) != seen.size:
        added = [(name, value) for name, value in list(namespace.items()) if name not in routines and _is_routine(value)]
        foreign = [name for name, value in added if foreign_code(value) and (id(owner), name, id(value)) not in own]
        changes.extend(f"{label}.{name}" for name in foreign)
        if not foreign:
            routines.update(added)
            seen.size = len(namespace)
    return changes


def model_code(model: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
    """What in the code ``model`` computes with is not the library's: the routines of its modules' classes (and their
    bases) replaced since each class was made, classes the notebook made that override a library class's routine,
    a forward set on one of its submodules that is the notebook's code or another module's, the functions of the
    modules its classes come from and of transformers' attention, the attention functions registered, and torch's
    functions replaced by the notebook's. With what to watch at each step while a call runs (see
    :func:`code_changed`)."""
    import sys

    changes: list[str] = []
    watch: list[tuple[Any, ...]] = []
    try:
        import torch

        modules = list(model.named_modules())
    except Exception:
        return changes, watch
    own = {(id(owner), name, id(wrapper)) for owner, name, wrapper in INSTRUMENTED}
    classes: dict[type, SeenCode] = {}
    for path, module in modules:
        if module is not model and hasattr(module, "__dict__"):
            attributes = vars(module)
            forward = attributes.get("forward")
            watch.append((attributes, "forward", forward))
            if forward is not None:
                owner = getattr(forward, "__self__", module)
                if foreign_code(forward) or (isinstance(owner, torch.nn.Module) and owner is not module):
                    changes.append(f"{path}.forward (set on the module)")
        for cls in type(module).__mro__:
            if cls is not object and cls not in classes:
                seen = classes[cls] = CLASS_CODE.get(cls) or CLASS_CODE.setdefault(cls, SeenCode(vars(cls)))
                attributes = vars(cls)
                watch.append((attributes, len(attributes)))
                watch.extend((attributes, name, seen.routines[name]) for name in STEP_NAMES if name in seen.routines)
    for cls, seen in classes.items():
        if not seen.by_notebook:
            changes.extend(_namespace_changes(cls, cls.__name__, seen, own, strict=True))
            continue
        library = {
            name
            for base in cls.__mro__[1:]
            if base not in (object, torch.nn.Module) and not classes.get(base, seen).by_notebook
            for name in classes[base].routines
        }
        overridden = sorted(name for name in seen.routines if name in library)
        if overridden:
            changes.append(f"{cls.__name__}.{overridden[0]} (a class the notebook made)")
    homes = {cls.__module__ for cls, seen in classes.items() if not seen.by_notebook} - {"builtins"}
    for name in sorted(homes | set(COMPUTING_MODULES) | set(LIBRARY_MODULES)):
        module = sys.modules.get(name)
        seen_module = remember_module(name)
        if module is None or seen_module is None:
            continue
        changes.extend(_namespace_changes(module, name.rsplit(".", 1)[-1], seen_module, own, strict=name not in LIBRARY_MODULES))
        if name in homes and name not in LIBRARY_MODULES:
            watch.extend((vars(module), function, value) for function, value in seen_module.routines.items())
    for registry, mapping in _registries().items():
        before = REGISTRIES.setdefault(registry, dict(mapping))
        for key, now in mapping.items():
            was = before.get(key)
            if now is not was and (was is not None or foreign_code(now)):
                changes.append(f"{registry}[{key!r}]")
    return sorted(set(changes))[:MAX_CODE_CHANGES], watch


def code_changed(watch: list[tuple[Any, ...]]) -> bool:
    """Whether anything ``watch`` (from :func:`model_code`) holds is no longer as it was."""
    for item in watch:
        if len(item) == 2:
            if len(item[0]) != item[1]:
                return True
        elif item[0].get(item[1]) is not item[2]:
            return True
    return False


def _note_model_code(event: GenerateEvent, model: Any) -> None:
    """Add what is not the library's code in ``model`` now to ``event``'s ``model_code``."""
    changes, watch = model_code(model)
    _CODE_WATCH[id(event)] = watch
    if changes:
        event["model_code"] = sorted({*(event.get("model_code") or []), *changes})[:MAX_CODE_CHANGES]


def _watch_model_code(event: GenerateEvent, model: Any) -> None:
    """At each step of a generate: where the model's code changed since the last look, note it."""
    watch = _CODE_WATCH.get(id(event))
    if watch is not None and code_changed(watch):
        _note_model_code(event, model)


def quantization_label(model: Any) -> str | None:
    """``"int8"``, ``"nf4"``, ``"fp4"`` for a bitsandbytes model (``"partial"`` if some layers were skipped), else None.

    Read from the layers that loaded (see :func:`linear_layers`), not from ``is_loaded_in_8bit`` and
    the config: a model whose every layer was skipped is a float model. Worked out each time (a model's layers can be
    swapped for another's after it first ran).
    """
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
    return label


def first_tensor(args: tuple[Any, ...], kwargs: dict[str, Any], *names: str) -> Any:
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
    if hasattr(value, "get_seq_length"):  # a cache (past_key_values): how many positions it already holds
        with contextlib.suppress(Exception):
            return {"type": _type_name(value), "filled": int(value.get_seq_length())}
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
    """The end-of-text ids generate stops at: the keyword, else the config it was given, else the model's (generate
    fills a given config's unset end-of-text from the model's)."""
    eos = kwargs.get("eos_token_id")
    for config in (kwargs.get("generation_config"), getattr(model, "generation_config", None)):
        if eos is None:
            eos = getattr(config, "eos_token_id", None)
    if eos is None:
        return []
    return [int(e) for e in eos] if isinstance(eos, (list, tuple)) else [int(eos)]


# The FIFO each record is written to as it is made (``[scope, event]``, one JSON line), opened at install from the path
# the grader gave; () without one. Only the kernel's own process writes (a process it forked has its own records).
EVENTS: tuple[int, ...] = ()
EVENTS_PID = 0
EVENTS_LOCK = threading.Lock()  # the writer thread started once
EVENT_QUEUE: queue.Queue[bytes] | None = None


def open_events(path: str) -> None:
    """Open the event stream's FIFO at the path the grader gave (at install)."""
    global EVENTS, EVENTS_PID
    EVENTS = (os.open(path, os.O_WRONLY | os.O_CLOEXEC),)
    EVENTS_PID = _getpid()


def _stream(scope: str, event: Event) -> None:
    """Write a record to the grader as it is made: editing it in the kernel afterwards changes nothing the grader holds."""
    if not EVENTS or _getpid() != EVENTS_PID:
        return
    try:
        line = _dumps([scope, event], allow_nan=False, default=_type_name)
    except ValueError:
        line = _dumps([scope, _without_nan(event)], allow_nan=False, default=_type_name)
    # Serialised now (what leaves is the record as it is at this moment), written by a thread of the runtime: a
    # grader busy elsewhere delays the writing, never the student's generate (whose timer would read the wait).
    _event_writer().put((line + "\n").encode())


def _event_writer() -> queue.Queue[bytes]:
    """The queue of serialised records the runtime's writer thread sends to the grader (started at first use)."""
    global EVENT_QUEUE
    with EVENTS_LOCK:
        if EVENT_QUEUE is None:
            EVENT_QUEUE = queue.Queue()
            threading.Thread(target=_write_events, args=(EVENT_QUEUE,), name="llm-grader-events", daemon=True).start()
        return EVENT_QUEUE


def _write_events(lines: queue.Queue[bytes]) -> None:
    """Write each serialised record to the event FIFO, in order."""
    while True:
        data = lines.get()
        try:
            while data:
                try:
                    written = _write(EVENTS[0], data)
                except InterruptedError:
                    continue
                except OSError:
                    break  # the grader is gone: nothing to tell it
                data = data[written:]
        finally:
            lines.task_done()


def drain_events() -> None:
    """Wait until every record made so far has been written (before an answer: it carries the same records)."""
    if EVENT_QUEUE is not None and EVENTS and _getpid() == EVENTS_PID:
        EVENT_QUEUE.join()


# The pause FIFOs (request, reply), opened at install from the paths the grader gave; () without them. Only the
# kernel's own process asks (a process it forked records into a copy of the recorder the grader never reads).
PAUSES: tuple[int, ...] = ()
PAUSES_PID = 0
# One pause asked at a time: the grader releases pauses in the order asked, with one byte each on one FIFO, so two
# threads waiting at once could each take the other's release.
PAUSE_LOCK = threading.Lock()


def open_pauses(request: str, reply: str) -> None:
    """Open the pause FIFOs at the paths the grader gave (at install: in this process only, see :func:`_pause`)."""
    global PAUSES, PAUSES_PID
    PAUSES = (os.open(request, os.O_WRONLY | os.O_CLOEXEC), os.open(reply, os.O_RDONLY | os.O_CLOEXEC))
    PAUSES_PID = _getpid()


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


def new_generate_event(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], inputs: Any) -> GenerateEvent:
    """The record of a generate call about to run (its times and output filled in as it runs): the grader's own
    reference side records its generate calls with this too, so both are described alike."""
    import torch

    attention_mask = kwargs.get("attention_mask")
    runner = forward_runner(model)  # what computes: a forward borrowed from another model is that model's
    return {
        "type": "generate",
        "model_id": id(model),
        "model_serial": model_serial(model),
        "model_quantization": quantization_label(runner),
        "model_type": _type_name(model),
        "model_device": str(getattr(model, "device", "unknown")),
        "model_dtype": str(getattr(runner, "dtype", "unknown")),
        "model_size": _parameter_count(runner),
        "model_code": [],
        "model_training": bool(getattr(model, "training", False)),
        "grad_enabled": torch.is_grad_enabled(),
        "autocast": _autocast(str(getattr(model, "device", "cpu"))),
        "thread": threading.get_native_id(),
        "kwargs": {k: _brief(v) for k, v in kwargs.items() if k not in ("input_ids", "inputs")},
        "positional_args": len(args),
        "input_shape": list(inputs.shape) if inputs is not None else None,
        "input_device": str(inputs.device) if inputs is not None else None,
        "input_ids": inputs[0].tolist()[:MAX_IDS] if inputs is not None and inputs.dim() == 2 else None,
        "padding_side": _padding_side(attention_mask) if isinstance(attention_mask, torch.Tensor) else None,
        "rows": _unpadded_rows(inputs, attention_mask),
        "forward_calls": 0,
        "max_new_tokens": _effective_setting(model, kwargs, "max_new_tokens"),
        "use_cache": _effective_setting(model, kwargs, "use_cache"),
        "num_beams": _effective_setting(model, kwargs, "num_beams"),
        "custom_processors": _custom_processors(model, kwargs),
        "new_tokens_limit": _new_tokens_limit(model, kwargs, inputs),
        "instrumentation_replaced": _replaced_now()[:8],
        "decoding_loops": 0,
        "processors_s": 0.0,
        "added_items": 0,
        "added_s": 0.0,
        "slept_s": 0.0,
        "torch_threads": _torch_threads(),
        "attention": _attention(model),
        "decoding": None,
        "start": 0.0,
        "end": 0.0,
        "duration_s": 0.0,
        "error": None,
        "output_shape": None,
        "output_ids": None,
        "new_tokens": None,
        "cut_short": False,
        "pause": None,
        "paced_s": None,
    }


def _torch_threads() -> int | None:
    """The threads torch computes on as a generate begins (fewer for one model than another slows it alone)."""
    import torch

    try:
        return int(torch.get_num_threads())
    except Exception:
        return None


def _attention(model: Any) -> str | None:
    """The attention implementation the model's config selects (eager, sdpa, flash_attention_2), if it says."""
    try:
        value = getattr(getattr(model, "config", None), "_attn_implementation", None)
    except Exception:
        return None
    return value[:40] if isinstance(value, str) else None


def _instrumented_generate(original: Callable[..., Any]) -> Callable[..., Any]:
    @_wraps(original)
    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        if RECORDER.generate_depth:
            return original(self, *args, **kwargs)
        inputs = first_tensor(args, kwargs, "input_ids", "inputs")
        # generate(inputs, generation_config, ...): a config passed by position is read as the keyword is.
        settings = {"generation_config": args[1], **kwargs} if len(args) >= 2 and hasattr(args[1], "max_new_tokens") else kwargs
        event = new_generate_event(self, args, settings, inputs)
        runner = forward_runner(self)
        _note_model_code(event, runner)
        RECORDER.remember(self)
        RECORDER.generate_depth += 1
        outer, outer_choices = RECORDER.current_generate, RECORDER.choices
        RECORDER.current_generate, RECORDER.choices = event, []
        event["start"] = RECORDER.now()
        try:
            with _timing_added_work(self, kwargs, event):
                output = original(self, *args, **kwargs)
            # Filled in before the event is recorded: a record is complete when it leaves the instrumentation.
            # A sampled token is not the greedy choice: only a greedy search's end is held to the model's own choice.
            sampled = _effective_setting(self, settings, "do_sample") is True
            record_output(event, output, inputs, self, settings, None if sampled else RECORDER.choices)
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
            _watch_model_code(event, runner)
            _CODE_WATCH.pop(id(event), None)
            RECORDER.generate_depth -= 1
            RECORDER.current_generate, RECORDER.choices = outer, outer_choices
            RECORDER.record(event)
        return output

    generate.__llm_grader_instrumented__ = True  # type: ignore[attr-defined]
    return generate


def _timed_item(item: Callable[..., Any], event: GenerateEvent) -> Callable[..., Any]:
    """``item`` (a hook, a streamer's method) adding the processor time it takes to ``event``'s ``added_s``: its
    thread's CPU time, not the clock's (a streamer whose reader is another thread waits for the interpreter lock on a
    loaded machine; that wait is no work). Its sleeps are counted by :func:`_counting_sleep`."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        began = _thread_time()
        try:
            return item(*args, **kwargs)
        finally:
            event["added_s"] += _thread_time() - began

    return timed


def _note_slept(began: float) -> None:
    """Count the wait since ``began`` (``_perf_counter`` time) as a sleep of this thread: inside the generate this
    thread runs, time added to that generate's ``added_s`` and ``slept_s`` (an added item); outside one, the thread's
    ``RECORDER.slept`` (a watched function's call records what it slept)."""
    event = RECORDER.current_generate
    ended = _perf_counter()
    if event is None or event.get("thread") != threading.get_native_id():
        RECORDER.note_sleep(began, ended)
        return
    slept = ended - began
    event["added_s"] = float(event.get("added_s") or 0.0) + slept
    event["slept_s"] = float(event.get("slept_s") or 0.0) + slept
    event["added_items"] = int(event.get("added_items") or 0) + 1


def _counting_sleep(original: Callable[[Any], None]) -> Callable[[Any], None]:
    """``time.sleep`` that counts what it slept (see :func:`_note_slept`): generate never sleeps, so a sleep inside it
    (a hook, a streamer, a logits processor) is work the notebook added. Sleeps on other threads (a reader polling for
    the worker) are theirs."""

    @_wraps(original)
    def sleep(seconds: float) -> None:
        began = _perf_counter()
        try:
            return original(seconds)
        finally:
            _note_slept(began)

    return sleep


def _counting_timed_out_wait(original: Callable[..., bool]) -> Callable[..., bool]:
    """``threading.Condition.wait`` (under ``Event.wait``, ``Queue.get``, ``Future.result``) that counts a wait which
    ran out its timeout as a sleep (see :func:`_note_slept`): ``threading.Event().wait(0.05)`` pads a timer as
    ``time.sleep(0.05)`` does. A wait that was notified (a flush of the kernel's output, a worker's result) is not."""

    @_wraps(original)
    def wait(self: Any, timeout: float | None = None) -> bool:
        began = _perf_counter()
        notified = original(self, timeout)
        if timeout is not None and not notified:
            _note_slept(began)
        return notified

    return wait


def _counting_timed_out_select(original: Callable[..., Any]) -> Callable[..., Any]:
    """``select.select`` that counts a call which ran out its timeout with nothing ready as a sleep (see
    :func:`_note_slept`): ``select.select([], [], [], 0.05)`` is a sleep by another name."""

    @_wraps(original)
    def select(rlist: Any, wlist: Any, xlist: Any, timeout: float | None = None) -> Any:
        began = _perf_counter()
        ready = original(rlist, wlist, xlist, timeout)
        if timeout is not None and not any(ready):
            _note_slept(began)
        return ready

    return select


@contextlib.contextmanager
def _timing_added_work(model: Any, kwargs: dict[str, Any], event: GenerateEvent) -> Iterator[None]:
    """While a generate runs, time the work the notebook hung on its steps besides logits processors: the streamer's
    ``put`` and ``end``, and the forward hooks (pre and post) on the model's modules and the global ones. Each is
    put back as it was after the call. A model loads with no hooks; none of these is generate's own."""
    restore: list[Callable[[], None]] = []
    try:
        with contextlib.suppress(Exception):
            import torch

            owners = [*model.modules(), None]
            for module in owners:
                for name in ("_forward_hooks", "_forward_pre_hooks"):
                    hooks = (
                        getattr(module, name, None)
                        if module is not None
                        else getattr(torch.nn.modules.module, f"_global{name}", None)
                    )
                    if not isinstance(hooks, dict) or not hooks:
                        continue
                    saved = dict(hooks)
                    for key, hook in saved.items():
                        hooks[key] = _timed_item(hook, event)
                    event["added_items"] += len(saved)
                    restore.append(functools.partial(_put_back_hooks, hooks, saved))
        streamer = kwargs.get("streamer")
        if streamer is not None:
            event["added_items"] += 1
            for name in ("put", "end"):
                with contextlib.suppress(Exception):
                    own = vars(streamer).get(name, _MISSING) if hasattr(streamer, "__dict__") else _MISSING
                    setattr(streamer, name, _timed_item(getattr(streamer, name), event))
                    restore.append(
                        functools.partial(delattr, streamer, name)
                        if own is _MISSING
                        else functools.partial(setattr, streamer, name, own)
                    )
        yield
    finally:
        for undo in reversed(restore):
            with contextlib.suppress(Exception):
                undo()


_MISSING = object()


def _put_back_hooks(hooks: dict[Any, Any], saved: dict[Any, Any]) -> None:
    """Put each hook ``saved`` holds back where it still is (a hook removed meanwhile stays removed)."""
    hooks.update({key: saved[key] for key in saved if key in hooks})


def record_output(
    event: GenerateEvent, output: Any, inputs: Any, model: Any, kwargs: dict[str, Any], choices: list[Any] | None = None
) -> None:
    """What a generate call returned: its sequences' shape, the first row, each row's new tokens, and whether it
    stopped short of its limit other than at an end-of-text the model itself chose (``choices``: see note_choice)."""
    with contextlib.suppress(Exception):  # an output the grader cannot read is recorded as none
        sequences = _sequences(output)
        if sequences is not None and inputs is not None and sequences.dim() == 2:
            event["output_shape"] = list(sequences.shape)
            event["output_ids"] = sequences[0].tolist()[:MAX_IDS]
            eos_ids = _eos_ids(model, kwargs)
            event["new_tokens"] = _new_token_counts(sequences, inputs.shape[-1], eos_ids)
            generated = int(sequences.shape[1]) - int(inputs.shape[-1])
            limit = event["new_tokens_limit"]
            event["cut_short"] = (
                isinstance(limit, int)
                and generated < limit
                and _stopped_early(sequences[:, inputs.shape[-1] :], eos_ids, _eos_ids(model, {}) or eos_ids, choices)
            )


def _stopped_early(new: Any, eos_ids: list[int], own_eos: list[int], choices: list[Any] | None) -> bool:
    """Whether some row of a generate that ended before its limit (``new``: its new tokens) was stopped rather than
    ended: it reached no end-of-text (max_time, a stopping criterion); or it stopped at an end-of-text the call added
    (a full stop passed as ``eos_token_id``); or at the model's end-of-text where the model's own greedy choice at that
    step was another token (a logits processor or a length penalty forcing the end). The last is read only where each
    step ran one forward pass of these rows (a greedy search, not beams, sampling or an assistant model)."""
    import torch

    rows = new.tolist()
    picked = None
    if choices and len(choices) == new.shape[1] and all(choice.shape == choices[0].shape for choice in choices):
        stacked = torch.stack([choice.to("cpu") for choice in choices])
        picked = stacked.T.tolist() if stacked.shape[1] == new.shape[0] else None
    for index, row in enumerate(rows):
        stop = next((position for position, token in enumerate(row) if token in eos_ids or token in own_eos), None)
        if stop is None or row[stop] not in own_eos:
            return True
        if picked is not None and picked[index][stop] != row[stop]:
            return True
    return False


def note_choice(output: Any) -> None:
    """Keep the token a generate's forward pass would pick by itself (the greedy choice of its last position's
    logits, before any logits processor) for record_output; left on the device, read once the generate returned."""
    import torch

    choices = RECORDER.choices
    if choices is None or len(choices) >= MAX_CHOICES:
        return
    with contextlib.suppress(Exception):  # what cannot be read is not kept: the student's generate goes on
        logits = getattr(output, "logits", None)
        if logits is None and isinstance(output, (tuple, list)) and output:
            logits = output[0]
        if isinstance(logits, torch.Tensor) and logits.dim() == 3:
            choices.append(logits[:, -1, :].argmax(-1))


def _autocast(device: str) -> str | None:
    """The dtype autocast runs a model's operations in on ``device`` (its type: ``cuda``, ``cpu``), None when it is off."""
    import torch

    kind = device.split(":")[0]
    try:
        if torch.is_autocast_enabled(kind):
            return str(torch.get_autocast_dtype(kind))
    except (TypeError, RuntimeError, AttributeError):  # an older torch, or a device type autocast does not know
        return None
    return None


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


# Settings from which generate builds a logits processor or stopping criterion of its own, with the value that builds
# none. Not min_length/min_new_tokens (forcing a length is a common way to time a fixed number of tokens) nor the
# sampling warpers (greedy calls ignore them).
ADDED_WORK_SETTINGS: dict[str, Any] = {
    "bad_words_ids": None,
    "sequence_bias": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "force_words_ids": None,
    "constraints": None,
    "exponential_decay_length_penalty": None,
    "stop_strings": None,
}


def _custom_processors(model: Any, kwargs: dict[str, Any]) -> int:
    """How many logits processors and stopping criteria a generate call added to greedy decoding: passed itself (a
    prefix function counts one), or built by generate from a setting (a keyword, or the model's generation config:
    ``bad_words_ids`` set on ``model.generation_config`` adds work to every step of every call)."""
    count = 0
    for name in ("logits_processor", "stopping_criteria"):
        with contextlib.suppress(TypeError):
            count += len(kwargs.get(name) or ())
    config = kwargs.get("generation_config") or getattr(model, "generation_config", None)
    for name, neutral in ADDED_WORK_SETTINGS.items():
        value = kwargs[name] if name in kwargs else getattr(config, name, neutral)
        with contextlib.suppress(Exception):
            count += not (value is None or value == neutral or (isinstance(value, (list, tuple, dict)) and not value))
    return count + (kwargs.get("prefix_allowed_tokens_fn") is not None)


def _effective_setting(model: Any, kwargs: dict[str, Any], name: str) -> Setting:
    """A setting (max_new_tokens, use_cache, num_beams) as generate will use it: keyword, else generation config."""
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
        event: TokenizeEvent = {
            "type": "tokenize",
            "thread": threading.get_native_id(),
            "start": RECORDER.now(),
            "end": 0.0,
            "pause": None,
            "paced_s": None,
        }
        try:
            _pause(event)
            return original(self, *args, **kwargs)
        finally:
            RECORDER.tokenizer_depth -= 1
            event["end"] = RECORDER.now()
            RECORDER.record(event)

    return __call__


def _instrumented_tokenizer_load(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a tokenizer class's ``from_pretrained`` (the function inside the classmethod): record each tokenizer it
    returns, by serial, with the id or folder it was asked for, as it loads (see ``TokenizerEvent``)."""

    @_wraps(original)
    def from_pretrained(cls: Any, pretrained_model_name_or_path: Any, *args: Any, **kwargs: Any) -> Any:
        tokenizer = original(cls, pretrained_model_name_or_path, *args, **kwargs)
        with contextlib.suppress(Exception):  # a source that cannot be named is not recorded
            source = os.fspath(pretrained_model_name_or_path)
            event: TokenizerEvent = {
                "type": "tokenizer",
                "serial": model_serial(tokenizer),
                "source": source if isinstance(source, str) else os.fsdecode(source),
            }
            RECORDER.record(event)
        return tokenizer

    return from_pretrained


def _instrumented_synchronize(original: Callable[..., Any], via: str = "torch.cuda.synchronize") -> Callable[..., Any]:
    """Wrap a wait for the GPU, or ``torch.cuda.Event.record`` (``via`` says which): record each call."""

    @_wraps(original)
    def synchronize(*args: Any, **kwargs: Any) -> Any:
        event: SynchronizeEvent = {
            "type": "synchronize",
            "via": via,  # type: ignore[typeddict-item]  # one of the protocol's names, given by install
            "thread": threading.get_native_id(),
            "start": RECORDER.now(),
            "end": 0.0,
            "error": None,
        }
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
                _watch_model_code(RECORDER.current_generate, self)
        else:
            event = forward_event(self, args, kwargs)
            RECORDER.remember(self)
        stack.append(self)
        watch = _watch_grad(event) if event is not None else None
        try:
            output = original(self, *args, **kwargs)
            if event is not None:
                event["output_requires_grad"] = output_requires_grad(output)
            elif not stack[:-1]:
                note_choice(output)
        except BaseException as error:
            if event is not None:
                event["error"] = f"{type(error).__name__}: {error}"[:300]
            raise
        finally:
            stack.pop()
            for handle in watch or ():
                handle.remove()
            if event is not None:
                # Recorded once complete (a record leaves the instrumentation as it is made).
                event["end"] = RECORDER.now()
                RECORDER.record(event)
        return output

    forward.__llm_grader_instrumented__ = True  # type: ignore[attr-defined]
    return forward


def _watch_grad(event: ForwardEvent) -> list[Any]:
    """While a recorded pass runs, every module it runs (its layers, its head) says whether gradients are on as it
    starts and as it ends: a pass whose grad mode is switched on inside it (from a layer's hook) ran with gradients."""
    import torch

    thread = event["thread"]

    def sample(*_: Any) -> None:
        if not event["grad_enabled"] and torch.is_grad_enabled() and threading.get_native_id() == thread:
            event["grad_enabled"] = True

    try:
        return [
            torch.nn.modules.module.register_module_forward_pre_hook(sample),
            torch.nn.modules.module.register_module_forward_hook(sample),
        ]
    except Exception:  # a torch without global module hooks: the pass's own sample alone
        return []


def _holds(parent: Any, child: Any) -> bool:
    """Whether ``child`` is a submodule of ``parent`` (its own part, not another model)."""
    try:
        return any(module is child for module in parent.modules())
    except Exception:  # a module whose children cannot be listed
        return False


def output_requires_grad(output: Any) -> bool | None:
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


def forward_event(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ForwardEvent:
    import torch

    inputs = first_tensor(args, kwargs, "input_ids", "inputs_embeds")
    labels = kwargs.get("labels")
    attention_mask = kwargs.get("attention_mask")
    return {
        "type": "forward",
        "thread": threading.get_native_id(),
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
        "rows": _unpadded_rows(inputs, attention_mask),
        "has_labels": labels is not None,
        "has_attention_mask": attention_mask is not None,
        "nested": bool(RECORDER.forward_stack),
        "part_of": next(
            (model_serial(given) for given in RECORDER.arguments if given is not model and _holds(given, model)), None
        ),
        "end": 0.0,
        "error": None,
        "output_requires_grad": None,
    }
