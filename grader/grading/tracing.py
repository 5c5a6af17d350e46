"""What the reference implementation does, recorded on the grader's side as the kernel records a student's function.

A check judges a student's call by comparing what it did (which model it ran, which token ids went into which
generate call or forward pass, with which limit, cache, padding, dtype, gradients) with what the reference
implementation does on the same inputs. The reference runs here, in the grader's own process, under :func:`traced`:
its generate calls and forward passes are recorded with the runtime's own record builders
(``runtime.new_generate_event``, ``runtime.forward_event``), and its models described as the runtime describes a
call's (``runtime.models_seen``), so that both sides are read by one normaliser (grader/checks/behaviour.py).

The recording hooks are installed once per process on transformers' classes and record only in a thread that is
tracing: the reference side runs in several threads at once (grader/scale/overlap.py), and the grader's other uses of
its models (the price of a token, the expected losses) pass straight through. Kernels never run in this process, so
nothing here reaches a student's notebook.
"""

from __future__ import annotations

import contextlib
import functools
import io
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from grader.kernel import runtime
from grader.quiet import quiet_libraries

_LOCAL = threading.local()
_LOCK = threading.Lock()
_INSTALLED: list[bool] = []


class _Tracer:
    """What one traced call recorded (in the thread that runs it)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.models: dict[int, Any] = {}  # each model it ran, described as it ran (see runtime.seen_model)
        self.generating = 0
        self.forwarding = 0
        self.origin = time.perf_counter()

    def now(self) -> float:
        return time.perf_counter() - self.origin

    def remember(self, model: Any) -> None:
        serial = runtime.model_serial(model)
        if serial not in self.models:
            self.models[serial] = runtime.seen_model(model)


def _active() -> _Tracer | None:
    tracer: _Tracer | None = getattr(_LOCAL, "tracer", None)
    return tracer


def _traced_generate(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        tracer = _active()
        if tracer is None or tracer.generating:
            return original(self, *args, **kwargs)
        inputs = runtime.first_tensor(args, kwargs, "input_ids", "inputs")
        event = runtime.new_generate_event(self, args, kwargs, inputs)
        tracer.remember(self)
        tracer.generating += 1
        event["start"] = tracer.now()
        try:
            output = original(self, *args, **kwargs)
            runtime.record_output(event, output, inputs, self, kwargs)
            event["decoding_loops"] = 1
            return output
        except BaseException as error:
            event["error"] = f"{type(error).__name__}: {error}"[:500]
            raise
        finally:
            event["end"] = tracer.now()
            event["duration_s"] = event["end"] - event["start"]
            tracer.generating -= 1
            tracer.events.append(dict(event))

    return generate


def _traced_call(original: Callable[..., Any]) -> Callable[..., Any]:
    """``PreTrainedModel.__call__``: record the outermost forward pass outside generate."""

    @functools.wraps(original)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        tracer = _active()
        if tracer is None or tracer.generating or tracer.forwarding:
            return original(self, *args, **kwargs)
        event = runtime.forward_event(self, args, kwargs)
        tracer.remember(self)
        event["start"] = tracer.now()
        tracer.forwarding += 1
        try:
            output = original(self, *args, **kwargs)
            event["output_requires_grad"] = runtime.output_requires_grad(output)
            return output
        except BaseException as error:
            event["error"] = f"{type(error).__name__}: {error}"[:300]
            raise
        finally:
            event["end"] = tracer.now()
            tracer.forwarding -= 1
            tracer.events.append(dict(event))

    return call


def _install() -> None:
    """Put the recording hooks on transformers' classes, once per process."""
    with _LOCK:
        if _INSTALLED:
            return
        import transformers
        from transformers.generation.utils import GenerationMixin

        # The causal-and-padding mask by broadcasting, as in the kernels (on the tiny models the vmap'd mask costs more
        # than the model: the reference's generate calls would cost the grader several times the student's).
        runtime.speed_up_masks()
        # The reference's calls are small (a batch of a few prompts on a tiny model): one thread each, beside the kernels
        # that hold the CPUs meanwhile (with more, this process's threads wait on each other at every operator).
        import torch

        torch.set_num_threads(1)
        GenerationMixin.generate = _traced_generate(GenerationMixin.generate)  # type: ignore[method-assign]
        transformers.PreTrainedModel.__call__ = _traced_call(transformers.PreTrainedModel.__call__)  # type: ignore[method-assign]
        # Loading a model switches process-wide state for a while (accelerate's empty-weights init, the meta device):
        # two threads loading at once (a reference function that loads its own model, beside another thread's
        # reference models) leave one with weights that were never loaded. One load at a time, in this process.
        original = transformers.PreTrainedModel.from_pretrained.__func__
        transformers.PreTrainedModel.from_pretrained = classmethod(_one_at_a_time(original))  # type: ignore[method-assign]
        _INSTALLED.append(True)


_LOADING = threading.RLock()


def _one_at_a_time(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def from_pretrained(cls: Any, *args: Any, **kwargs: Any) -> Any:
        with _LOADING:
            return original(cls, *args, **kwargs)

    return from_pretrained


def traced(function: Callable[..., Any], *args: Any) -> dict[str, Any]:
    """Run ``function(*args)`` here and record what it did: ``{"events": [...], "models": [...]}``, the events and
    models of a kernel's call answer (grader/kernel/protocol.py), for the reference side (JSON, so a student kit can
    replay it). What the function returns is not kept: checks ask the reference for values apart."""
    _install()
    tracer = _Tracer()
    outer = _active()
    _LOCAL.tracer = tracer
    figures = _open_figures()
    try:
        with quiet_libraries(), contextlib.redirect_stdout(io.StringIO()):
            function(*args)
    finally:
        _LOCAL.tracer = outer
        _close_figures_since(figures)
    arguments = runtime.model_arguments(list(args), {})
    return {"events": tracer.events, "models": runtime.models_seen(tracer.models, arguments)}


def _open_figures() -> set[int]:
    """The numbers of pyplot's open figures (none where pyplot was never imported)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    return set(pyplot.get_fignums()) if pyplot is not None else set()


def _close_figures_since(before: set[int]) -> None:
    """Close the figures a traced call opened (the reference's plots are not kept in the grader's memory)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        for number in set(pyplot.get_fignums()) - before:
            pyplot.close(number)
