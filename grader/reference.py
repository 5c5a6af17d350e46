"""The reference side: reference implementations and models, in the grader's own process.

Expected values are computed here, never in the student's kernel. Models are loaded from the
zoo's local files (or the real hub when an instructor asks for it) with the same loading code
the kernel runtime uses, so the reference and the student see the same model.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

from grader.errors import CourseError
from grader.kernel import runtime
from grader.quiet import quiet_libraries
from grader.zoo import ModelZoo


def load_reference_module(path: Path, name: str) -> ModuleType:
    """Import a reference implementation from its file, under a private module name."""
    if not path.is_file():
        raise CourseError(f"the reference implementation {path} is missing")
    spec = importlib.util.spec_from_file_location(f"llm_grader_reference_{name.replace('-', '_')}", path)
    if spec is None or spec.loader is None:
        raise CourseError(f"cannot import the reference implementation {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise CourseError(f"the reference implementation {path} failed to import: {type(error).__name__}: {error}") from error
    return module


class ReferenceModels:
    """Models and tokenizers for the reference side, loaded once per run and shared."""

    def __init__(self, zoo: ModelZoo | None) -> None:
        self.zoo = zoo  # None: the real Hugging Face hub
        self._cache: dict[str, Any] = {}
        self._keys: dict[int, str] = {}  # id of a cached model or tokenizer -> its cache key

    def describe(self, value: Any) -> str | None:
        """The key of a model or tokenizer this object handed out (None for anything else)."""
        return self._keys.get(id(value))

    def source(self, hub_id: str) -> str:
        """Where ``from_pretrained`` reads ``hub_id`` from: the zoo's folder, or the hub."""
        return str(self.zoo.snapshot(hub_id)) if self.zoo is not None else hub_id

    def model(self, spec: dict[str, Any]) -> Any:
        """The model a spec describes (``hub_id``, ``quantization``, ``dtype``, ``device``)."""
        key = "model:" + repr(sorted(spec.items()))
        if key not in self._cache:
            with quiet_libraries():
                self._cache[key] = runtime.load_model({**spec, "hub_id": self.source(spec["hub_id"])})
            self._keys[id(self._cache[key])] = key
        return self._cache[key]

    def tokenizer(self, hub_id: str) -> Any:
        """The tokenizer of ``hub_id``."""
        key = f"tokenizer:{hub_id}"
        if key not in self._cache:
            from transformers import AutoTokenizer

            with quiet_libraries():
                self._cache[key] = AutoTokenizer.from_pretrained(self.source(hub_id))
            self._keys[id(self._cache[key])] = key
        return self._cache[key]
