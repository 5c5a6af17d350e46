"""The reference side: reference implementations and models, in the grader's own process.

Expected values are computed here, never in the student's kernel. Models are loaded from the
zoo's local files (or the real hub when an instructor asks for it) with the same loading code
the kernel runtime uses, so the reference and the student see the same model.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import symtable
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from grader import scratch
from grader.discover.notebook import python_source, read_notebook
from grader.errors import CourseError
from grader.kernel import runtime
from grader.kernel.protocol import ModelSpec
from grader.quiet import quiet_libraries
from grader.zoo import ModelZoo


def load_reference_module(path: Path, name: str) -> ModuleType:
    """Import a reference implementation from its file, under a private module name: a ``reference.py``, or the
    definitions of a solution notebook (:func:`solution_definitions`)."""
    if not path.is_file():
        raise CourseError(f"the reference implementation {path} is missing")
    if path.suffix == ".ipynb":
        return _solution_module(path, name)[0]
    spec = importlib.util.spec_from_file_location(_module_name(name), path)
    if spec is None or spec.loader is None:
        raise CourseError(f"cannot import the reference implementation {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise CourseError(f"the reference implementation {path} failed to import: {type(error).__name__}: {error}") from error
    return module


def _is_definition(node: ast.stmt) -> bool:
    """An import, a function or class, or a name bound to a value computed without calling anything (a constant)."""
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        return not any(isinstance(part, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom)) for part in ast.walk(node.value))
    return False


def _module_name(name: str) -> str:
    return f"llm_grader_reference_{name.replace('-', '_')}"


def solution_definitions(path: Path) -> str:
    """The definitions of a solution notebook, as one module's source: the reference implementation the solution is
    (what :func:`load_reference_module` loads from it, written out: the Gradescope zip ships it as ``reference.py``)."""
    kept = _solution_module(path, path.parent.name)[1]
    header = f'"""The definitions of {path.name} (its imports, functions, classes and constants): the reference side."""'
    return "\n\n".join([header, *kept]) + "\n"


def _solution_module(path: Path, name: str) -> tuple[ModuleType, list[str]]:
    """The definitions of a solution notebook as a module, and their sources in the notebook's order.

    The solution is written once, as the notebook students are graded against; the grader's reference side is its
    imports, functions, classes and constants, in the notebook's order. What the notebook runs (loading models,
    experiments, prints) is left out, and so is a constant that needs what the notebook computes when it runs (its
    device, say): each definition is run once, into the module, and one that fails for a name it cannot see is not
    kept.
    """
    notebook = read_notebook(path)
    kept: list[str] = []
    used: list[tuple[int, str, set[str]]] = []  # (cell, definition, the global names its code reads)
    module = ModuleType(_module_name(name))
    module.__file__ = str(path)
    namespace = module.__dict__
    for number, cell in enumerate(notebook.cells, 1):
        if cell.cell_type != "code":
            continue
        source = python_source(cell.source)
        try:
            tree = ast.parse(source)
        except SyntaxError as error:
            raise CourseError(f"{path} cell {number} is not valid Python: {error}") from error
        for node in tree.body:
            segment = ast.get_source_segment(source, node, padded=True) if _is_definition(node) else None
            if segment is None:
                continue
            segment = textwrap.dedent(segment)
            try:
                with quiet_libraries():
                    exec(compile(segment, f"{path} (cell {number})", "exec"), namespace)
            except NameError:
                continue  # it needs what the notebook computes when it runs: not a definition
            except Exception as error:
                raise CourseError(f"{path} cell {number}: {type(error).__name__}: {error}") from error
            kept.append(segment)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                used.append((number, node.name, _global_names(segment)))
    for number, name, names in used:
        # A function that reads a global the notebook computes when it runs (a device, a loaded model) would fail only
        # when a check calls it: said now, to the instructor, with what to do.
        missing = sorted(names - set(namespace) - set(dir(builtins)))
        if missing:
            raise CourseError(
                f"{path} cell {number}: {name} reads {', '.join(missing)}, which the notebook sets by running code; the "
                "reference side holds only the solution's definitions (imports, functions, classes, constants): compute "
                "it inside the function, or set it to a constant"
            )
    return module, kept


def _global_names(source: str) -> set[str]:
    """The global names the functions (and methods) in ``source`` read."""
    names: set[str] = set()
    pending = list(symtable.symtable(source, "<solution>", "exec").get_children())
    while pending:
        table = pending.pop()
        if isinstance(table, symtable.Function):
            names.update(table.get_globals())
        pending.extend(table.get_children())
    return names


class ReferenceModels:
    """Models and tokenizers for the reference side, loaded once per run and thread.

    A grader checks submissions in threads of their own while the next notebook runs (grader.scale.overlap), and each
    of those threads gets its own models and tokenizers: the reference side may set a tokenizer's padding side for a
    while (the loss checks compute both), and a fast tokenizer used by two threads at once fails ("Already
    borrowed"). What is the same for every thread is kept once: the token prices, the folders built from a model.
    """

    def __init__(self, zoo: ModelZoo | None) -> None:
        self.zoo = zoo  # None: the real Hugging Face hub
        self._cache: dict[str, Any] = {}  # shared by the threads: prices, built folders
        self._local = threading.local()  # each thread's models and tokenizers (``loaded``)
        self._lock = threading.RLock()
        self._keys: dict[int, str] = {}  # id of a cached model or tokenizer (any thread's) -> its cache key
        self._held: list[Any] = []  # every one of them, as long as this object lives: an id is never reused meanwhile
        self._copies: dict[int, str] = {}  # id of a tokenizer copy (tokenizer_as) -> its hub id
        self._copy_objects: list[Any] = []  # the latest copies, held while their ids name them

    def _loaded(self) -> dict[str, Any]:
        """This thread's models and tokenizers, by key."""
        loaded: dict[str, Any] | None = getattr(self._local, "loaded", None)
        if loaded is None:
            loaded = self._local.loaded = {}
        return loaded

    def describe(self, value: Any) -> str | None:
        """The key of a model or tokenizer this object handed out, or of a copy of such a tokenizer (None for anything
        else)."""
        key = self._keys.get(id(value))
        if key is None and id(value) in self._copies:
            hub_id = self._copies[id(value)]
            key = f"tokenizer:{hub_id}:pad={value.pad_token is not None}:side={value.padding_side}"
        return key

    def tokenizer_as(self, hub_id: str, pad_token: str, padding_side: str) -> Any:
        """A fresh copy of ``hub_id``'s tokenizer, set up as a starter's contract says (``pad_token`` "eos" or "none",
        ``padding_side`` "left", "right" or "default"): what a reference function is handed, which it may change."""
        import copy

        tokenizer = copy.deepcopy(self.tokenizer(hub_id))
        if pad_token == "eos" and tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        if padding_side in ("left", "right"):
            tokenizer.padding_side = padding_side
        with self._lock:
            self._copies[id(tokenizer)] = hub_id
            # Only the latest copies are known (an id is reused once its copy is gone): enough for the call in hand.
            self._copy_objects.append(tokenizer)
            if len(self._copy_objects) > 64:
                dropped = self._copy_objects.pop(0)
                self._copies.pop(id(dropped), None)
        return tokenizer

    def serves(self, hub_id: str) -> bool:
        """Whether ``hub_id`` is a model this side can load (any with the real hub; the zoo's own otherwise)."""
        if self.zoo is None:
            return True
        try:
            self.zoo.model_for(hub_id)
        except Exception:  # not one of the zoo's ids
            return False
        return True

    def source(self, hub_id: str) -> str:
        """Where ``from_pretrained`` reads ``hub_id`` from: the zoo's folder, or the hub."""
        return str(self.zoo.snapshot(hub_id)) if self.zoo is not None else hub_id

    def model(self, spec: ModelSpec) -> Any:
        """The model a spec describes (``hub_id``, ``quantization``, ``dtype``, ``device``)."""
        key = "model:" + repr(sorted(spec.items()))
        loaded = self._loaded()
        if key not in loaded:
            with self._lock, quiet_libraries():
                loaded[key] = runtime.load_model({**spec, "hub_id": self.source(spec["hub_id"])})
                self._keys[id(loaded[key])] = key
                self._held.append(loaded[key])
        return loaded[key]

    def tokenizer(self, hub_id: str) -> Any:
        """The tokenizer of ``hub_id``."""
        key = f"tokenizer:{hub_id}"
        loaded = self._loaded()
        if key not in loaded:
            from transformers import AutoTokenizer

            with self._lock, quiet_libraries():
                loaded[key] = AutoTokenizer.from_pretrained(self.source(hub_id))
                self._keys[id(loaded[key])] = key
                self._held.append(loaded[key])
        return loaded[key]

    def lowest_token_price(self, again: bool = False) -> float | None:
        """The lowest price per token among the zoo's models (what any tiny model's generate costs at least);
        None with real models, whose set the grader does not know. ``again``: see ``token_price``."""
        if self.zoo is None:
            return None
        from grader.zoo import TINY_MODELS

        prices = [price for spec in TINY_MODELS if (price := self.token_price(spec.name, again=again))]
        return min(prices) if prices else None

    def token_price(self, hub_id: str, tokens: int = 16, again: bool = False) -> float | None:
        """CPU seconds per generated token of ``hub_id`` on this machine's CPU, in this process (cached; None if it
        cannot be measured): a greedy generate of ``tokens`` tokens at batch size one from a short prompt, timed by
        this thread's CPU clock. The cheapest generate there is; what a kernel's generate claims is checked against
        it (grader/kernel/evidence.py).

        A busy machine can still make it dearer, though no run is ever cheaper than the model allows: seen in CI on
        a shared virtual machine, 4.1 ms a token, against 1.2 ms for an honest call later in the same run (and
        1.5 ms measured on a quiet machine). So ``again`` measures once more and keeps the lower price: the grader
        asks before it rules that a call was faster than its price allows."""
        with self._lock:
            key = f"price:{hub_id}"
            if key not in self._cache or (again and self._cache[key] is not None):
                earlier: float | None = self._cache.get(key)
                import time

                import torch

                try:
                    model = self.model({"hub_id": hub_id, "quantization": "none", "dtype": "float32", "device": "cpu"})
                    inputs = self.tokenizer(hub_id)("Once upon a time", return_tensors="pt")
                    settings = {"max_new_tokens": tokens, "min_new_tokens": tokens, "do_sample": False, "pad_token_id": 0}
                    threads = torch.get_num_threads()
                    # One thread: with more, the measuring thread can spin at OpenMP's barriers on a busy machine, and
                    # its CPU time then overstates the price many times over.
                    torch.set_num_threads(1)
                    try:
                        with quiet_libraries(), torch.no_grad():
                            model.generate(**inputs, **{**settings, "max_new_tokens": 2, "min_new_tokens": 2})  # warm-up
                            costs = []
                            for _ in range(3):  # the least of three: a preempted or throttled run only ever costs more
                                started = time.thread_time()
                                model.generate(**inputs, **settings)
                                costs.append((time.thread_time() - started) / tokens)
                    finally:
                        torch.set_num_threads(threads)
                    self._cache[key] = min(costs if earlier is None else [*costs, earlier])
                except Exception:  # a model that cannot generate here: no price (or the earlier one), the other evidence holds
                    self._cache[key] = earlier
            price: float | None = self._cache[key]
            return price

    def built(self, key: str, build: Callable[[Path], None]) -> Path:
        """A folder of files that ``build`` writes, built once per run and kept until this object goes (a temporary
        folder): for what the grader derives from a model and hands every kernel the same, such as a quantized copy."""
        key = f"built:{key}"
        with self._lock:
            if key not in self._cache:
                folder = scratch.temporary_directory("built")
                build(Path(folder.name) / "files")
                self._cache[key] = folder
            return Path(self._cache[key].name) / "files"
