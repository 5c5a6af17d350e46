"""The grader's side of the kernel harness: ask the runtime for something, get plain values back.

The runtime's source is sent into the kernel as text and run as a private module with an
unguessable name. Every request names a fresh channel (a MIME type with a random token); only a
payload published on that channel, in reply to that request, is read, and it is parsed as strict
JSON. Nothing the kernel sends is unpickled or evaluated.
"""

from __future__ import annotations

import json
import random
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, cast, get_args, get_type_hints

from pydantic import TypeAdapter, ValidationError

from grader.kernel import runtime
from grader.kernel.channel import KernelReply
from grader.kernel.evidence import (
    Measured,
    altered_message,
    altered_runtime,
    attribute_pauses,
    recorded_forgery,
    scheduled_forgery,
    with_queue_waits,
)
from grader.kernel.protocol import (
    Answer,
    CallRequest,
    CopyRecipe,
    Event,
    FigureEvent,
    ForwardEvent,
    GenerateEvent,
    GenerateRequest,
    HandleRecipe,
    ItemRecipe,
    LiteralRecipe,
    MappingRecipe,
    ModelRecipe,
    ModelSeen,
    ModelSpec,
    NameInfo,
    OnnxModelRecipe,
    OnnxRunEvent,
    PathRecipe,
    Recipe,
    Request,
    ReturnedEvent,
    SynchronizeEvent,
    TokenizeEvent,
    TokenizerRecipe,
)
from grader.kernel.runtime import MAX_CAPTURE, MAX_EVENTS, MAX_IDS, MAX_STRING
from grader.kernel.session import KernelSession
from grader.kernel.values import bounded, decode

PROBE_SOURCE = Path(__file__).with_name("integrity.py")
# Each pause is the asked pacing times a factor drawn here, pause by pause, so that no notebook can subtract a
# known constant: the grader serves the pauses (the kernel never learns a length but by timing its own wait, and
# one pause's length says nothing of the next). Where it cannot (no FIFOs), one factor per call, slept in the
# kernel. Never below the rubric's: the judges' margins (a timer around tokenizing reads at least that much longer)
# and their explanations (tokenizing, or other work of about that length) were set for it.
PACE_FACTORS = (1.0, 1.3)
# The largest answer parsed: far above what the runtime's own caps let through, far below what
# would cost the grader real memory. A larger one was forged in the kernel.
MAX_ANSWER_CHARS = 16 * 1024**2

# "tampered": the call's records claim what the grader's own measurements rule out (grader/kernel/evidence.py).
CallStatus = Literal["returned", "raised", "missing", "signature", "timeout", "dead", "internal", "tampered"]


@dataclass(frozen=True)
class ExceptionInfo:
    """An exception raised in the kernel, as text."""

    type: str
    message: str
    traceback: str = ""
    bases: tuple[str, ...] = ()  # the classes it derives from, nearest first (``object`` left out)

    def is_a(self, name: str) -> bool:
        """Whether the exception is a ``name``: of that class or of one derived from it."""
        return self.type == name or name in self.bases

    def __str__(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type


@dataclass(frozen=True)
class CallOutcome:
    """What one request into the kernel gave: a value or an exception, and what was recorded."""

    status: CallStatus
    value: Any = None
    exception: ExceptionInfo | None = None
    message: str = ""
    duration_s: float | None = None  # measured in the kernel around the student's call
    wall_s: float = 0.0  # measured by the grader around the whole request
    pace_s: float = 0.0  # the pacing the grader used for this call (the asked one, varied per call)
    stdout: str = ""
    stderr: str = ""
    events: tuple[Event, ...] = ()
    start: float | None = None
    end: float | None = None
    models: tuple[ModelSeen, ...] = ()  # the models the call was given or ran (grader/kernel/protocol.py)
    raw: Answer = field(default_factory=lambda: Answer(status="internal"))

    @property
    def ok(self) -> bool:
        """Whether the call returned a value."""
        return self.status == "returned"

    def generate_events(self) -> list[GenerateEvent]:
        """The instrumented generate calls made during this call, in order."""
        return [event for event in self.events if event["type"] == "generate"]

    def forward_events(self) -> list[ForwardEvent]:
        """The instrumented forward passes (outside generate) made during this call."""
        return [event for event in self.events if event["type"] == "forward"]

    def onnx_run_events(self) -> list[OnnxRunEvent]:
        """The ONNX Runtime session runs (``InferenceSession.run``) made during this call."""
        return [event for event in self.events if event["type"] == "onnx_run"]

    def tokenize_events(self) -> list[TokenizeEvent]:
        """The tokenizer calls the student's code made during this (paced) call."""
        return [event for event in self.events if event["type"] == "tokenize"]

    def synchronize_events(self) -> list[SynchronizeEvent]:
        """The ``torch.cuda.synchronize`` calls made during this call."""
        return [event for event in self.events if event["type"] == "synchronize"]

    def returned_events(self, function: str) -> list[ReturnedEvent]:
        """What the watched notebook ``function`` returned each time this call called it."""
        return [event for event in self.events if event["type"] == "returned" and event["function"] == function]

    def figure_events(self) -> list[FigureEvent]:
        """The figures this call drew, showed or left open (when the call watched figures)."""
        return [event for event in self.events if event["type"] == "figure"]

    def model(self, serial: int) -> ModelSeen | None:
        """What the model of that serial is (None when the call's answer does not say)."""
        return next((seen for seen in self.models if seen["serial"] == serial), None)


# Argument recipes: how the kernel builds each argument of a call (grader/kernel/protocol.py).
def literal(value: Any) -> LiteralRecipe:
    """A JSON value passed as is."""
    return {"$lit": value}


def model_spec(hub_id: str, quantization: str = "none", device: str = "auto", dtype: str = "auto") -> ModelSpec:
    """The JSON spec the kernel and the grader's reference side both load a model from.

    ``dtype="auto"`` is float16 on CUDA and float32 on the CPU (see ``runtime.load_kwargs``).
    """
    return {"hub_id": hub_id, "quantization": quantization, "dtype": dtype, "device": device}


def model(spec: ModelSpec) -> ModelRecipe:
    """A model loaded in the kernel from a spec (cached there for the session)."""
    return {"$model": spec}


def onnx_model(path: str, file_name: str) -> OnnxModelRecipe:
    """An ONNX Runtime causal LM loaded in the kernel with Optimum from ``path/file_name`` (cached there)."""
    return {"$onnx_model": {"path": path, "file_name": file_name}}


def mapping(recipes: dict[str, Recipe]) -> MappingRecipe:
    """A dict whose values are built from recipes (for example, models by label)."""
    return {"$dict": recipes}


def tokenizer(
    hub_id: str, pad_token: Literal["none", "eos"] = "none", padding_side: Literal["default", "left", "right"] = "default"
) -> TokenizerRecipe:
    """``AutoTokenizer.from_pretrained(hub_id)`` in the kernel, set up as the starter's loader is told to.

    ``pad_token="eos"`` reuses the end-of-text token as the pad token; ``padding_side`` is set
    unless ``"default"``. Each call gets its own copy, so what one student function changes on
    its tokenizer (a padding side it forgot to restore) never reaches the next call.
    """
    return {"$tokenizer": {"hub_id": hub_id, "pad_token": pad_token, "padding_side": padding_side}}


def item(recipe: Recipe, index: int | str) -> ItemRecipe:
    """An item of what ``recipe`` builds (the model in a kept ``(tokenizer, model)``)."""
    return {"$item": {"of": recipe, "index": index}}


def copied(recipe: Recipe) -> CopyRecipe:
    """A deep copy of what ``recipe`` builds: a tokenizer one call may change (its padding side) and no other sees."""
    return {"$copy": recipe}


def notebook_value(*path: Any) -> PathRecipe:
    """A value the notebook defines, by name and optional item path."""
    return {"$path": list(path)}


def handle(name: str) -> HandleRecipe:
    """An object the kernel kept from an earlier request."""
    return {"$handle": name}


class Harness:
    """Requests into one kernel session through the grader's runtime."""

    def __init__(
        self,
        session: KernelSession,
        call_timeout_s: float = 60.0,
        token_price: Callable[..., float | None] | None = None,
        lowest_token_price: Callable[..., float | None] | None = None,
    ) -> None:
        self.session = session
        self.call_timeout_s = call_timeout_s
        # CPU seconds per generated token of a model (by hub id), and the lowest of any model the kernel may load,
        # measured in the grader's process (see evidence.py).
        self.token_price = token_price
        self.lowest_token_price = lowest_token_price
        self.module_name = f"_llm_grader_runtime_{secrets.token_hex(8)}"
        self.environment: dict[str, Any] = {}
        # The runtime's fingerprint read before any cell ran (None until installed, or where no probe answered).
        self.baseline: dict[str, str] | None = None
        # Student functions whose call's records the grader's evidence ruled out, with why (first time only).
        self.tampered: dict[str, str] = {}
        # Student functions that did not return in time, with the time they were given: not called again with as
        # long or less (an infinite loop costs one call timeout, not one per check).
        self.timed_out: dict[str, float] = {}
        # When the submission's checks must be done (time.monotonic(); None: no limit): every call ends by then.
        self.deadline: float | None = None
        self._pacing = random.SystemRandom()

    def install(self, settings: dict[str, Any] | None = None, timeout_s: float = 120.0) -> CallOutcome:
        """Load the runtime into the kernel and instrument it (before the notebook runs)."""
        source = runtime.source()
        bootstrap = (
            "(lambda source, name: ("
            "__import__('sys').modules.__setitem__(name, __import__('types').ModuleType(name)), "
            "exec(compile(source, '<llm-grader-runtime>', 'exec'), __import__('sys').modules[name].__dict__)"
            f"))({source!r}, {self.module_name!r})"
        )
        reply = self.session.channel.request(bootstrap, channel="-", timeout_s=timeout_s)
        if reply.status != "ok":
            return self._failed(reply, "loading the grader's runtime into the kernel")
        settings = dict(settings or {})
        if self.session.pause_paths is not None:
            settings["pauses"] = list(self.session.pause_paths)
        if self.session.events_path is not None:
            settings["events"] = self.session.events_path
        outcome = self._ask({"op": "install", "settings": settings}, timeout_s)
        if outcome.ok:
            self.environment = dict(outcome.raw.get("environment", {}))
            self.baseline = self.fingerprint() or None
        return outcome

    def fingerprint(self, timeout_s: float = 30.0) -> dict[str, str] | None:
        """The runtime's fingerprint, read by a probe sent afresh (grader/kernel/integrity.py); None when the kernel
        did not answer in time, empty when it answered with anything but a fingerprint."""
        channel = f"application/x-llm-grader-{secrets.token_hex(16)}"
        names = {"__name__": "_llm_grader_probe", "MODULE": self.module_name, "CHANNEL": channel}
        source = PROBE_SOURCE.read_text(encoding="utf-8")
        code = f"exec(compile({source!r}, '<llm-grader-probe>', 'exec'), {names!r})"
        reply = self.session.channel.request(code, channel=channel, timeout_s=timeout_s)
        if reply.status in ("timeout", "dead"):
            return None  # no answer at all (a kernel still busy, or gone): evidence neither way
        try:
            answer = json.loads(reply.payload) if isinstance(reply.payload, str) else None
        except ValueError:
            answer = None
        entries = answer.get("fingerprint") if isinstance(answer, dict) else None
        # An answer the probe cannot have given (it raised, or something else published): an empty fingerprint.
        return {str(key): str(value) for key, value in entries.items()} if isinstance(entries, dict) else {}

    def _price(self, request: Request, again: bool = False) -> float | None:
        """The lowest price per generated token among the models a call passes; for a call that passes none (the
        notebook loads its own), the lowest of any model it could load. None where there is no price. ``again``:
        measured once more, the lower price kept (a price measured on a busy moment overstates it)."""
        recipes: list[Recipe] = [*request["args"], *request["kwargs"].values()] if request["op"] == "call" else []
        hub_ids = {cast(ModelRecipe, recipe)["$model"]["hub_id"] for recipe in recipes if "$model" in recipe}
        if not hub_ids:
            return self.lowest_token_price(again=again) if self.lowest_token_price is not None else None
        prices = [
            price
            for hub_id in sorted(hub_ids)
            if self.token_price is not None and (price := self.token_price(hub_id, again=again))
        ]
        return min(prices) if prices else None

    def _clock_origin(self) -> float | None:
        """The runtime's clock origin (its events are stamped in seconds since), as read before any cell ran."""
        try:
            return float((self.baseline or {}).get("recorder.clock_origin", ""))
        except ValueError:
            return None

    def _altered(self) -> tuple[str, ...]:
        """The fingerprint's entries that changed since the runtime was installed (() without a baseline)."""
        if self.baseline is None:
            return ()
        now = self.fingerprint()
        if now is None:
            return ()
        if not now:
            return ("the integrity probe, which gave no fingerprint",)
        return tuple(key for key, value in self.baseline.items() if now.get(key) != value)

    # ---------------------------------------------------------------- operations

    def call(
        self,
        function: str,
        args: list[Recipe] | tuple[Recipe, ...] = (),
        kwargs: dict[str, Recipe] | None = None,
        timeout_s: float | None = None,
        keep_as: str | None = None,
        pace_s: float = 0.0,
        figures: bool = False,
        watch: tuple[str, ...] = (),
        cuda: bool = False,
    ) -> CallOutcome:
        """Call the student's ``function`` with arguments built from recipes.

        ``pace_s`` pauses the first generate of each new prompt, and every tokenizer call, for about
        that many seconds (their events' ``paced_s``), so a timer around a warm-up or a tokenization
        shows in the latency. ``figures`` records what the call plots as ``figure`` events; ``watch``
        names notebook functions whose return values, while the call runs, become ``returned`` events. ``cuda`` has
        ``torch.cuda.is_available()`` answer True while the call runs on a machine without CUDA (a function that asks it
        is judged as on a GPU machine: only for functions that compute nothing on the device).

        Each pause is ``pace_s`` times a factor the grader draws for it and serves itself (``CallOutcome.pace_s``
        is the asked one; where the session has no pause channel, one factor per call, slept in the kernel); the call's
        records are checked against the grader's own measurements, and a call they rule out comes back
        ``tampered`` (see grader/kernel/evidence.py), its function named in :attr:`tampered`. A call ruled out by
        CPU time alone (which a busy machine can starve an honest call of) is made again, up to twice, and judged on the
        last.
        """
        request: CallRequest = {
            "op": "call",
            "function": function,
            "args": list(args),
            "kwargs": kwargs or {},
            "keep_as": keep_as,
            "paced": bool(pace_s),
            "pace_s": pace_s,
            "figures": figures,
            "watch": list(watch),
            "cuda": cuda,
        }
        return self._ask(request, timeout_s)

    def describe(self, *path: Any, timeout_s: float | None = None) -> CallOutcome:
        """A notebook variable (or an item inside it), as a plain value."""
        return self._ask({"op": "describe", "path": list(path)}, timeout_s)

    def inspect(self, names: list[str]) -> dict[str, NameInfo]:
        """Which of ``names`` the notebook defines, with their types and signatures."""
        outcome = self._ask({"op": "inspect", "names": names}, None)
        return dict(outcome.raw.get("names", {})) if outcome.ok else {}

    def load_model(self, spec: ModelSpec, handle_name: str, timeout_s: float | None = None) -> CallOutcome:
        """Load a model in the kernel (from a spec or the notebook's load arguments) and keep it."""
        return self._ask({"op": "load_model", "spec": spec, "handle": handle_name}, timeout_s)

    def generate(
        self,
        handle_name: str,
        tokenizer_id: str,
        prompt: str,
        max_new_tokens: int,
        timeout_s: float | None = None,
        item: int | None = None,
    ) -> CallOutcome:
        """Greedy-generate from a kept model (``item``: the model is that item of the kept value): does it produce text?"""
        request: GenerateRequest = {
            "op": "generate",
            "handle": handle_name,
            "item": item,
            "tokenizer": {"hub_id": tokenizer_id, "pad_token": "none", "padding_side": "default"},
            "prompt": prompt,
            "max_new_tokens": max_new_tokens,
        }
        return self._ask(request, timeout_s)

    def onnx_graph(self, handle_name: str, item: int | None = None, timeout_s: float | None = None) -> CallOutcome:
        """A summary of the ONNX graph a kept ONNX Runtime model's live session runs, read in the kernel.

        The grader never opens the file itself: a path the kernel names is the student's to choose.
        The summary (counts of operators, integer products and 8-bit initializers on the path to the
        outputs, and whether running the model ran that session) is in ``raw["graph"]``.
        """
        return self._ask({"op": "onnx_graph", "handle": handle_name, "item": item}, timeout_s)

    def release(self, handles: list[str] | None = None) -> None:
        """Let the kernel free kept objects."""
        self._ask({"op": "release", "handles": handles} if handles is not None else {"op": "release"}, None)

    def notebook_events(self) -> CallOutcome:
        """What the instrumentation recorded while the notebook's cells ran: as the kernel streamed each record when it
        was made (what the notebook did to its records afterwards changes nothing), where it streams them."""
        outcome = self._ask({"op": "events"}, None)
        stream = self.session.events
        if not outcome.ok or stream is None:
            return outcome
        streamed, wrong = _validated_events(stream.all("notebook"))
        if wrong or stream.corrupted:
            return replace(outcome, status="tampered", message=_stream_message(stream.corrupted or wrong))
        return replace(outcome, events=tuple(streamed))

    # ---------------------------------------------------------------- plumbing

    def _ask(self, request: Request, timeout_s: float | None, measure_again: int = 2) -> CallOutcome:
        channel = f"application/x-llm-grader-{secrets.token_hex(16)}"
        timeout = timeout_s if timeout_s is not None else self.call_timeout_s
        function = request["function"] if request["op"] == "call" else None
        given = self.timed_out.get(function) if function is not None else None
        if given is not None and timeout <= given:
            return CallOutcome(
                "timeout",
                message=f"{function} did not return within {given:.0f} s when it was first called, so it was not called again",
                wall_s=0.0,
            )
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                return CallOutcome(
                    "timeout",
                    message="the submission's checks ran past their total time limit (limits.checks_timeout_s)",
                    wall_s=0.0,
                )
            timeout = min(timeout, left)
        pace_s = request["pace_s"] if request["op"] == "call" else 0.0
        served = self.session.pause_paths is not None
        sent = request.copy()
        sent["channel"] = channel
        if sent["op"] == "call" and pace_s:
            # The kernel asks the grader for each pause and is never told its length; where it has no channel to
            # ask on, it sleeps one length drawn for the whole call (see PACE_FACTORS).
            sent["pace_s"] = 0.0 if served else (pace_s := self._pause_length(pace_s)())
        code = f"__import__('sys').modules[{self.module_name!r}].run({json.dumps(sent)!r})"
        if request["op"] not in ("call", "generate"):
            return self._answer(request, self.session.channel.request(code, channel=channel, timeout_s=timeout), timeout)
        cpu_before = self.session.cpu_seconds()
        stream = self.session.events
        mark = stream.mark() if stream is not None else 0
        with self.session.sample_cpu() as sampler, self.session.channel.serve_pauses(self._pause_length(pace_s)) as pauses:
            reply = self.session.channel.request(code, channel=channel, timeout_s=timeout)
        outcome = self._answer(request, reply, timeout)
        if outcome.status == "timeout" and function is not None:
            self.timed_out[function] = max(timeout, self.timed_out.get(function, 0.0))
        if outcome.status not in ("returned", "raised"):
            return outcome
        if stream is not None:
            # The records as the runtime made them, streamed one by one: the answer must carry the same.
            streamed, wrong = _validated_events(stream.since(mark))
            if not wrong and not stream.corrupted and list(streamed) != list(outcome.events):
                wrong = "the records the call's answer holds are not those the runtime made as it ran (they were edited in the kernel afterwards)"
            if wrong or stream.corrupted:
                why = _stream_message(stream.corrupted or wrong)
                if request["op"] == "call":
                    self.tampered.setdefault(request["function"], why)
                return replace(outcome, status="tampered", message=why)
            outcome = replace(outcome, events=tuple(streamed), models=models_from_events(streamed))
        cpu_after = self.session.cpu_seconds()
        cpu_s = ready_s = None
        if cpu_before is not None and cpu_after is not None:
            cpu_s, ready_s = cpu_after[0] - cpu_before[0], cpu_after[1] - cpu_before[1]
        evidence = Measured(
            reply.duration_s,
            pace_s,
            cpu_s,
            self._altered(),
            tuple(sampler.samples),
            self._clock_origin(),
            self._price(request),
            pauses=tuple(pauses.pauses) if served else None,
            runnable=tuple(sampler.runnable),
            ready_s=ready_s,
            main_thread=sampler.main,
            thread_timelines={tid: tuple(samples) for tid, samples in sampler.threads.items() if tid != sampler.main},
            thread_runnable={tid: tuple(samples) for tid, samples in sampler.threads_runnable.items() if tid != sampler.main},
        )
        events, unserved = attribute_pauses(outcome.events, evidence)
        events = with_queue_waits(events, evidence)
        outcome = replace(outcome, events=events)
        why = altered_runtime(evidence) or unserved or recorded_forgery(outcome.duration_s, outcome.events, evidence)
        if not why:
            why = scheduled_forgery(outcome.events, evidence)
            if why and measure_again:
                # CPU-time evidence alone: an overloaded machine can starve an honest call of CPU (seen once in
                # the full suite, a generate's main thread at 4 % of 0.2 s), or make the grader's price of a token
                # dearer than an honest call's (seen once in CI, 3.3 times). Price again, call again, and rule on
                # that call.
                self._price(request, again=True)
                return self._ask(request, timeout_s, measure_again=measure_again - 1)
        outcome = replace(outcome, pace_s=pace_s)
        if not why:
            return outcome
        if request["op"] == "call":
            self.tampered.setdefault(request["function"], why)
        return replace(outcome, status="tampered", message=why)

    def _pause_length(self, pace_s: float) -> Callable[[], float]:
        """A pause's length, drawn afresh at each call of the result: ``pace_s`` times a factor in PACE_FACTORS (for
        each pause the grader serves, or once per call where the kernel sleeps its pacing itself)."""
        return lambda: round(pace_s * self._pacing.uniform(*PACE_FACTORS), 4)

    def _answer(self, request: Request, reply: KernelReply, timeout: float) -> CallOutcome:
        what = f"the grading request {request['op']!r}" + (f" ({request['function']})" if request["op"] == "call" else "")
        if reply.status == "timeout":
            return CallOutcome(
                "timeout", message=f"{what} did not finish within {timeout:.0f} s and was interrupted", wall_s=reply.duration_s
            )
        if reply.payload is None:
            return self._failed(reply, what)
        if not isinstance(reply.payload, str) or len(reply.payload) > MAX_ANSWER_CHARS:
            size = len(reply.payload) if isinstance(reply.payload, str) else 0
            return CallOutcome(
                "internal",
                message=f"{what} answered with {size / 1024**2:.0f} MB, more than the grader's runtime ever sends: "
                "the grader's runtime in the kernel was tampered with",
                wall_s=reply.duration_s,
            )
        try:
            answer = json.loads(reply.payload, parse_constant=_reject_constant)
        except ValueError as error:
            return CallOutcome("internal", message=f"{what} answered with malformed JSON: {error}", wall_s=reply.duration_s)
        typed, wrong = validated_answer(answer)
        if typed is None:
            # What the integrity probe finds changed is said first, as for every other forgery: it is why.
            why = altered_message(self._altered()) or (
                f"{what} answered with {wrong}, which the grader's runtime never sends: the runtime in the kernel was "
                "tampered with"
            )
            if request["op"] == "call":
                self.tampered.setdefault(request["function"], why)
            return CallOutcome("tampered", message=why, wall_s=reply.duration_s)
        return _outcome_from_answer(typed, reply.duration_s)

    def _failed(self, reply: KernelReply, what: str) -> CallOutcome:
        if reply.status == "dead":
            reason = self.session.dead_reason or reply.error.get("message") or "the kernel stopped"
            return CallOutcome("dead", message=f"{reason} (during {what})", wall_s=reply.duration_s)
        if reply.error:
            exception = ExceptionInfo(
                reply.error.get("ename", "Error"), reply.error.get("evalue", ""), reply.error.get("traceback", "")
            )
            return CallOutcome("internal", exception=exception, message=f"{what} failed: {exception}", wall_s=reply.duration_s)
        return CallOutcome("internal", message=f"{what} gave no answer", wall_s=reply.duration_s)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


# Answers and events are validated against the protocol's types when they arrive (grader/kernel/protocol.py); each
# event by its own type's adapter, so that what is wrong with one is said of that type.
ANSWER = TypeAdapter(Answer)
EVENT_TYPES: dict[str, TypeAdapter[Any]] = {
    get_args(get_type_hints(event_type)["type"])[0]: TypeAdapter(event_type) for event_type in get_args(Event)
}


def validated_answer(answer: Any) -> tuple[Answer | None, str]:
    """``answer`` as the protocol's ``Answer`` (its events each validated as their type; unknown fields dropped, strings
    and lists cut to the runtime's caps), or None and what about it the runtime cannot have sent."""
    if not isinstance(answer, dict):
        return None, f"an answer that is {type(answer).__name__}, not an object"
    events = answer.get("events", [])
    if not isinstance(events, list):
        return None, f"events that are {type(events).__name__}, not a list"
    checked: list[Event] = []
    for number, event in enumerate(events[:MAX_EVENTS], 1):
        kind = event.get("type") if isinstance(event, dict) else None
        adapter = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
        if adapter is None:
            return None, f"event {number}, of an unknown type ({repr(kind)[:40]})"
        try:
            checked.append(adapter.validate_python(bounded(event, MAX_IDS)))
        except ValidationError as error:
            return None, f"event {number} (a {kind} event): {_first_error(error)}"
    try:
        typed = ANSWER.validate_python({**answer, "events": []})
    except ValidationError as error:
        return None, _first_error(error)
    if "events" in answer:
        typed["events"] = checked
    return typed, ""


def models_from_events(events: Sequence[Event]) -> tuple[ModelSeen, ...]:
    """The models a call was given or ran, from its records as they were streamed (``arguments`` and ``model``
    events), not from what its answer says of them."""
    arguments: dict[int, str] = {}
    seen: dict[int, ModelSeen] = {}
    for event in events:
        if event["type"] == "arguments":
            arguments = {int(serial): label for serial, label in event["models"].items() if serial.isdigit()}
        elif event["type"] == "model":
            seen[event["serial"]] = {
                "serial": event["serial"],
                "argument": None,
                "type": event["model_type"],
                "dtype": event["dtype"],
                "device": event["device"],
                "quantization": event["quantization"],
                "fingerprint": event["fingerprint"],
            }
    for serial in arguments:
        seen.setdefault(
            serial,
            {
                "serial": serial,
                "argument": None,
                "type": "",
                "dtype": "",
                "device": "",
                "quantization": None,
                "fingerprint": None,
            },
        )
    return tuple({**entry, "argument": arguments.get(serial)} for serial, entry in sorted(seen.items()))


def _validated_events(events: list[dict[str, Any]]) -> tuple[list[Event], str]:
    """Streamed records validated as the protocol's events (cut to the runtime's caps, as an answer's are), or what
    about one the runtime cannot have written."""
    checked: list[Event] = []
    for number, event in enumerate(events[:MAX_EVENTS], 1):
        kind = event.get("type")
        adapter = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
        if adapter is None:
            return [], f"streamed record {number}, of an unknown type ({repr(kind)[:40]})"
        try:
            checked.append(adapter.validate_python(bounded(event, MAX_IDS)))
        except ValidationError as error:
            return [], f"streamed record {number} (a {kind} event): {_first_error(error)}"
    return checked, ""


def _stream_message(why: str) -> str:
    """Why a call's streamed records are not believed, as a sentence."""
    if why.startswith("the records"):
        return why
    return f"the kernel's stream of records holds {why}, which the grader's runtime never writes: the runtime was tampered with"


def _first_error(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])


def _outcome_from_answer(answer: Answer, wall_s: float) -> CallOutcome:
    status: CallStatus = answer["status"]
    raw_exception = answer.get("exception")
    exception = None
    if raw_exception is not None:
        bases = raw_exception.get("bases")
        exception = ExceptionInfo(
            raw_exception["type"][:MAX_STRING],
            raw_exception["message"][:MAX_STRING],
            raw_exception["traceback"][:MAX_STRING],
            tuple(str(base)[:MAX_STRING] for base in bases[:16]) if isinstance(bases, list) else (),
        )
    value: Any = None
    if "value" in answer:
        value = decode(answer["value"])
    if status == "raised" and answer.get("interrupted"):
        status = "timeout"
    return CallOutcome(
        status=status,
        value=value,
        exception=exception,
        message=answer.get("message", "")[:MAX_STRING],
        duration_s=answer.get("duration_s"),
        wall_s=wall_s,
        stdout=answer.get("stdout", "")[:MAX_CAPTURE],
        stderr=answer.get("stderr", "")[:MAX_CAPTURE],
        events=tuple(answer.get("events", [])),
        start=answer.get("start"),
        end=answer.get("end"),
        models=tuple(answer.get("models", [])),
        raw=answer,
    )
