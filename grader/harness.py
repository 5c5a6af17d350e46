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
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from grader.evidence import Measured, altered_runtime, attribute_pauses, recorded_forgery, scheduled_forgery
from grader.execute import KernelReply, KernelSession
from grader.kernel.runtime import MAX_CAPTURE, MAX_EVENTS, MAX_IDS, MAX_STRING
from grader.values import bounded, decode

RUNTIME_SOURCE = Path(__file__).with_name("kernel") / "runtime.py"
PROBE_SOURCE = Path(__file__).with_name("kernel") / "integrity.py"
# Each pause is the asked pacing times a factor drawn here, pause by pause, so that no notebook can subtract a
# known constant: the grader serves the pauses (the kernel never learns a length but by timing its own wait, and
# one pause's length says nothing of the next). Where it cannot (no FIFOs), one factor per call, slept in the
# kernel. Never below the rubric's: the judges' margins (a timer around tokenizing reads at least that much longer)
# and their explanations (tokenizing, or other work of about that length) were set for it.
PACE_FACTORS = (1.0, 1.3)
# The largest answer parsed: far above what the runtime's own caps let through, far below what
# would cost the grader real memory. A larger one was forged in the kernel.
MAX_ANSWER_CHARS = 16 * 1024**2

# "tampered": the call's records claim what the grader's own measurements rule out (grader/evidence.py).
CallStatus = Literal["returned", "raised", "missing", "signature", "timeout", "dead", "internal", "tampered"]


@dataclass(frozen=True)
class ExceptionInfo:
    """An exception raised in the kernel, as text."""

    type: str
    message: str
    traceback: str = ""

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
    events: tuple[dict[str, Any], ...] = ()
    start: float | None = None
    end: float | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the call returned a value."""
        return self.status == "returned"

    def generate_events(self) -> list[dict[str, Any]]:
        """The instrumented generate calls made during this call, in order."""
        return [event for event in self.events if event.get("type") == "generate"]

    def forward_events(self) -> list[dict[str, Any]]:
        """The instrumented forward passes (outside generate) made during this call."""
        return [event for event in self.events if event.get("type") == "forward"]

    def onnx_run_events(self) -> list[dict[str, Any]]:
        """The ONNX Runtime session runs (``InferenceSession.run``) made during this call."""
        return [event for event in self.events if event.get("type") == "onnx_run"]

    def synchronize_events(self) -> list[dict[str, Any]]:
        """The ``torch.cuda.synchronize`` calls made during this call."""
        return [event for event in self.events if event.get("type") == "synchronize"]

    def returned_events(self, function: str) -> list[dict[str, Any]]:
        """What the watched notebook ``function`` returned each time this call called it."""
        return [event for event in self.events if event.get("type") == "returned" and event.get("function") == function]

    def figure_events(self) -> list[dict[str, Any]]:
        """The figures this call drew, showed or left open (when the call watched figures)."""
        return [event for event in self.events if event.get("type") == "figure"]


# Argument recipes: how the kernel builds each argument of a call.
def literal(value: Any) -> dict[str, Any]:
    """A JSON value passed as is."""
    return {"$lit": value}


def model_spec(hub_id: str, quantization: str = "none", device: str = "auto", dtype: str = "auto") -> dict[str, Any]:
    """The JSON spec the kernel and the grader's reference side both load a model from.

    ``dtype="auto"`` is float16 on CUDA and float32 on the CPU (see ``runtime.load_kwargs``).
    """
    return {"hub_id": hub_id, "quantization": quantization, "dtype": dtype, "device": device}


def model(spec: dict[str, Any]) -> dict[str, Any]:
    """A model loaded in the kernel from a spec (cached there for the session)."""
    return {"$model": spec}


def onnx_model(path: str, file_name: str) -> dict[str, Any]:
    """An ONNX Runtime causal LM loaded in the kernel with Optimum from ``path/file_name`` (cached there)."""
    return {"$onnx_model": {"path": path, "file_name": file_name}}


def mapping(recipes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A dict whose values are built from recipes (for example, models by label)."""
    return {"$dict": recipes}


def tokenizer(hub_id: str, pad_token: str = "none", padding_side: str = "default") -> dict[str, Any]:
    """``AutoTokenizer.from_pretrained(hub_id)`` in the kernel, set up as the starter's loader is told to.

    ``pad_token="eos"`` reuses the end-of-text token as the pad token; ``padding_side`` is set
    unless ``"default"``. Each call gets its own copy, so what one student function changes on
    its tokenizer (a padding side it forgot to restore) never reaches the next call.
    """
    return {"$tokenizer": {"hub_id": hub_id, "pad_token": pad_token, "padding_side": padding_side}}


def notebook_value(*path: Any) -> dict[str, Any]:
    """A value the notebook defines, by name and optional item path."""
    return {"$path": list(path)}


def handle(name: str) -> dict[str, Any]:
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
        self._pacing = random.SystemRandom()

    def install(self, settings: dict[str, Any] | None = None, timeout_s: float = 120.0) -> CallOutcome:
        """Load the runtime into the kernel and instrument it (before the notebook runs)."""
        source = RUNTIME_SOURCE.read_text(encoding="utf-8")
        bootstrap = (
            "(lambda source, name: ("
            "__import__('sys').modules.__setitem__(name, __import__('types').ModuleType(name)), "
            "exec(compile(source, '<llm-grader-runtime>', 'exec'), __import__('sys').modules[name].__dict__)"
            f"))({source!r}, {self.module_name!r})"
        )
        reply = self.session.request(bootstrap, channel="-", timeout_s=timeout_s)
        if reply.status != "ok":
            return self._failed(reply, "loading the grader's runtime into the kernel")
        settings = dict(settings or {})
        if self.session.pause_paths is not None:
            settings["pauses"] = list(self.session.pause_paths)
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
        reply = self.session.request(code, channel=channel, timeout_s=timeout_s)
        if reply.status in ("timeout", "dead"):
            return None  # no answer at all (a kernel still busy, or gone): evidence neither way
        try:
            answer = json.loads(reply.payload) if isinstance(reply.payload, str) else None
        except ValueError:
            answer = None
        entries = answer.get("fingerprint") if isinstance(answer, dict) else None
        # An answer the probe cannot have given (it raised, or something else published): an empty fingerprint.
        return {str(key): str(value) for key, value in entries.items()} if isinstance(entries, dict) else {}

    def _price(self, request: dict[str, Any], again: bool = False) -> float | None:
        """The lowest price per generated token among the models a call passes; for a call that passes none (the
        notebook loads its own), the lowest of any model it could load. None where there is no price. ``again``:
        measured once more, the lower price kept (a price measured on a busy moment overstates it)."""
        recipes = [*request.get("args", []), *dict(request.get("kwargs") or {}).values()]
        hub_ids = {str(recipe["$model"]["hub_id"]) for recipe in recipes if isinstance(recipe, dict) and "$model" in recipe}
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
        args: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
        kwargs: dict[str, dict[str, Any]] | None = None,
        timeout_s: float | None = None,
        keep_as: str | None = None,
        pace_s: float = 0.0,
        figures: bool = False,
        watch: tuple[str, ...] = (),
    ) -> CallOutcome:
        """Call the student's ``function`` with arguments built from recipes.

        ``pace_s`` pauses the first generate of each new prompt, and every tokenizer call, for about
        that many seconds (their events' ``paced_s``), so a timer around a warm-up or a tokenization
        shows in the latency. ``figures`` records what the call plots as ``figure`` events; ``watch``
        names notebook functions whose return values, while the call runs, become ``returned`` events.

        Each pause is ``pace_s`` times a factor the grader draws for it and serves itself (``CallOutcome.pace_s``
        is the asked one; where the session has no pause channel, one factor per call, slept in the kernel); the call's
        records are checked against the grader's own measurements, and a call they rule out comes back
        ``tampered`` (see grader/evidence.py), its function named in :attr:`tampered`. A call ruled out by
        CPU time alone (which a busy machine can starve an honest call of) is made once more, and judged on that.
        """
        request = {
            "op": "call",
            "function": function,
            "args": list(args),
            "kwargs": kwargs or {},
            "keep_as": keep_as,
            "paced": bool(pace_s),
            "pace_s": pace_s,
            "figures": figures,
            "watch": list(watch),
        }
        return self._ask(request, timeout_s)

    def describe(self, *path: Any, timeout_s: float | None = None) -> CallOutcome:
        """A notebook variable (or an item inside it), as a plain value."""
        return self._ask({"op": "describe", "path": list(path)}, timeout_s)

    def inspect(self, names: list[str]) -> dict[str, dict[str, Any]]:
        """Which of ``names`` the notebook defines, with their types and signatures."""
        outcome = self._ask({"op": "inspect", "names": names}, None)
        return dict(outcome.raw.get("names", {})) if outcome.ok else {}

    def load_model(self, spec: dict[str, Any], handle_name: str, timeout_s: float | None = None) -> CallOutcome:
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
        request = {
            "op": "generate",
            "handle": handle_name,
            "item": item,
            "tokenizer": tokenizer_id,
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
        request: dict[str, Any] = {"op": "release"}
        if handles is not None:
            request["handles"] = handles
        self._ask(request, None)

    def notebook_events(self) -> CallOutcome:
        """What the instrumentation recorded while the notebook's cells ran."""
        return self._ask({"op": "events"}, None)

    # ---------------------------------------------------------------- plumbing

    def _ask(self, request: dict[str, Any], timeout_s: float | None, measure_again: bool = True) -> CallOutcome:
        channel = f"application/x-llm-grader-{secrets.token_hex(16)}"
        timeout = timeout_s if timeout_s is not None else self.call_timeout_s
        pace_s = float(request.get("pace_s") or 0.0)
        served = self.session.pause_paths is not None
        sent = {**request, "channel": channel}
        if pace_s:
            # The kernel asks the grader for each pause and is never told its length; where it has no channel to
            # ask on, it sleeps one length drawn for the whole call (see PACE_FACTORS).
            sent["pace_s"] = 0.0 if served else (pace_s := self._pause_length(pace_s)())
        code = f"__import__('sys').modules[{self.module_name!r}].run({json.dumps(sent)!r})"
        if request["op"] not in ("call", "generate"):
            return self._answer(request, self.session.request(code, channel=channel, timeout_s=timeout), timeout)
        cpu_before = self.session.cpu_seconds()
        with self.session.sample_cpu() as sampler, self.session.serve_pauses(self._pause_length(pace_s)) as pauses:
            reply = self.session.request(code, channel=channel, timeout_s=timeout)
        outcome = self._answer(request, reply, timeout)
        if outcome.status not in ("returned", "raised"):
            return outcome
        cpu_after = self.session.cpu_seconds()
        cpu_s = cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None
        evidence = Measured(
            reply.duration_s,
            pace_s,
            cpu_s,
            self._altered(),
            tuple(sampler.samples),
            self._clock_origin(),
            self._price(request),
            pauses=tuple(pauses.pauses) if served else None,
        )
        events, unserved = attribute_pauses(outcome.events, evidence)
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
                return self._ask(request, timeout_s, measure_again=False)
        outcome = replace(outcome, pace_s=pace_s)
        if not why:
            return outcome
        if "function" in request:
            self.tampered.setdefault(str(request["function"]), why)
        return replace(outcome, status="tampered", message=why)

    def _pause_length(self, pace_s: float) -> Callable[[], float]:
        """A pause's length, drawn afresh at each call of the result: ``pace_s`` times a factor in PACE_FACTORS (for
        each pause the grader serves, or once per call where the kernel sleeps its pacing itself)."""
        return lambda: round(pace_s * self._pacing.uniform(*PACE_FACTORS), 4)

    def _answer(self, request: dict[str, Any], reply: KernelReply, timeout: float) -> CallOutcome:
        what = f"the grading request {request['op']!r}" + (f" ({request['function']})" if "function" in request else "")
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
        if not isinstance(answer, dict):
            return CallOutcome("internal", message=f"{what} answered with {type(answer).__name__}", wall_s=reply.duration_s)
        return _outcome_from_answer(answer, reply.duration_s)

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


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _outcome_from_answer(answer: dict[str, Any], wall_s: float) -> CallOutcome:
    status = answer.get("status", "internal")
    if status not in ("returned", "raised", "missing", "signature", "internal"):
        status = "internal"
    exception = None
    if isinstance(answer.get("exception"), dict):
        raw = answer["exception"]
        exception = ExceptionInfo(
            str(raw.get("type", "Error"))[:MAX_STRING],
            str(raw.get("message", ""))[:MAX_STRING],
            str(raw.get("traceback", ""))[:MAX_STRING],
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
        message=str(answer.get("message", ""))[:MAX_STRING],
        duration_s=answer.get("duration_s"),
        wall_s=wall_s,
        stdout=str(answer.get("stdout", ""))[:MAX_CAPTURE],
        stderr=str(answer.get("stderr", ""))[:MAX_CAPTURE],
        events=tuple(bounded(event, MAX_IDS) for event in _items(answer.get("events"))[:MAX_EVENTS] if isinstance(event, dict)),
        start=answer.get("start"),
        end=answer.get("end"),
        raw=answer,
    )
