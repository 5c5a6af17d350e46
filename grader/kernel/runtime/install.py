"""Installing the instrumentation in place of the library's own, and what the kernel runs on.

A part of the grader's runtime (see :mod:`grader.kernel.runtime`): in the kernel the parts are one module."""

from __future__ import annotations

import contextlib
import select
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for mypy only: in the kernel the parts are one module, which imports nothing of the grader
    from grader.kernel.runtime.base import _perf_counter
    from grader.kernel.runtime.instrument import (
        RECORDER,
        TOKENIZER_ENTRY_POINTS,
        _counting_sleep,
        _counting_timed_out_select,
        _counting_timed_out_wait,
        _instrumented_generate,
        _instrumented_synchronize,
        _instrumented_tokenizer_call,
        _instrumented_tokenizer_load,
        _instrumenting_forward,
        _wraps,
        library_roots,
        open_events,
        open_pauses,
        remember_module_classes,
    )
    from grader.kernel.runtime.operations import watch_notebook
    from grader.kernel.runtime.values import instrument_onnxruntime


INSTALLED: dict[str, Any] = {}
# Every attribute the runtime replaced, as (owner, name, wrapper): the grader's integrity probe (integrity.py)
# reads each one after every call and compares it with what it read right after installing, and every
# generate checks they are all still in place while it runs.
INSTRUMENTED: list[tuple[Any, str, Any]] = []  # a wrapper is a function, or a classmethod around one
# The decoding loops generate runs (GenerationMixin's, by name): run outside the instrumented generate, they
# show a generate called around the instrumentation (through the original the wrapper holds).
DECODING_LOOPS = ("_sample", "_beam_search", "_assisted_decoding")


def _replace(owner: Any, name: str, wrapper: Any) -> None:
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
            RECORDER.current_generate["decoding"] = getattr(original, "__name__", None)
        return original(self, *args, **kwargs)

    return loop


def _instrumented_step_work(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap the lists of logits processors and stopping criteria generate runs at every step: the time they take is
    added to the generate event they run in (a processor that sleeps, or blocks many bad words, is work the reference's
    greedy call does not do; a step clock that reads the time is not)."""

    @_wraps(original)
    def step(self: Any, *args: Any, **kwargs: Any) -> Any:
        event = RECORDER.current_generate
        if event is None:
            return original(self, *args, **kwargs)
        began = _perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            event["processors_s"] += _perf_counter() - began

    return step


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


def speed_up_masks() -> None:
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


def _served_from_the_grader(original: Callable[..., Any]) -> Callable[..., Any]:
    """transformers' ``cached_files`` without a ``cache_dir``: the grader serves every model and tokenizer from its own
    cache, so a folder the notebook names (``from_pretrained(..., cache_dir="./hf_cache")``, empty on the grading
    machine) is not where they are."""

    @_wraps(original)
    def cached_files(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("cache_dir", None)
        return original(*args, **kwargs)

    return cached_files


def _publisher() -> Callable[..., Any]:
    from IPython.display import publish_display_data

    return publish_display_data


def install(settings: dict[str, Any]) -> dict[str, Any]:
    """Instrument generate, forward and (where CUDA is available) cuda.synchronize; start recording the notebook."""
    if INSTALLED:
        return environment()
    import torch
    import transformers
    from transformers.generation.utils import GenerationMixin

    INSTALLED["settings"] = settings
    INSTALLED["publish"] = _publisher()  # before the notebook could replace it
    if settings.get("pauses"):
        open_pauses(*settings["pauses"])
    if settings.get("events"):
        open_events(settings["events"])
    watch_notebook([str(name) for name in settings.get("watch", [])])
    if settings.get("onnxruntime"):
        with contextlib.suppress(Exception):  # no onnxruntime in this environment: sessions are described as they say
            instrument_onnxruntime()
    _replace(GenerationMixin, "generate", _instrumented_generate(GenerationMixin.generate))
    for name in DECODING_LOOPS:
        if name in vars(GenerationMixin):
            _replace(GenerationMixin, name, _instrumented_loop(vars(GenerationMixin)[name]))
    from transformers.generation.logits_process import LogitsProcessorList
    from transformers.generation.stopping_criteria import StoppingCriteriaList

    for steps in (LogitsProcessorList, StoppingCriteriaList):
        _replace(steps, "__call__", _instrumented_step_work(vars(steps)["__call__"]))
    # Not watched as the instrumentation is (a notebook may replace time.sleep and only change its own sleeps).
    time.sleep = _counting_sleep(time.sleep)
    # And the waits that are sleeps by other names, where they ran out their timeout (Event().wait(t), select).
    threading.Condition.wait = _counting_timed_out_wait(threading.Condition.wait)  # type: ignore[method-assign]
    select.select = _counting_timed_out_select(select.select)
    if torch.cuda.is_available():  # only judged on CUDA: without it, a notebook may stub it out harmlessly
        # Every way to wait for the GPU, and CUDA events (a timer of events starts in stream order, without a wait).
        _replace(torch.cuda, "synchronize", _instrumented_synchronize(torch.cuda.synchronize))
        for owner, name in ((torch.cuda.Stream, "synchronize"), (torch.cuda.Event, "synchronize"), (torch.cuda.Event, "record")):
            _replace(owner, name, _instrumented_synchronize(vars(owner)[name], f"{owner.__name__}.{name}"))
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
    # Which id each tokenizer is loaded from, recorded as it loads (its name_or_path can be set to anything).
    loader = vars(transformers.PreTrainedTokenizerBase)["from_pretrained"]
    _replace(transformers.PreTrainedTokenizerBase, "from_pretrained", classmethod(_instrumented_tokenizer_load(loader.__func__)))
    speed_up_masks()
    with contextlib.suppress(Exception):  # another transformers: a cache_dir is its own
        from transformers.utils import hub

        _replace(hub, "cached_files", _served_from_the_grader(vars(hub)["cached_files"]))
    library_roots()
    remember_module_classes()
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
