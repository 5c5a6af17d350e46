"""The kernel protocol: what the grader asks the runtime in the kernel, and what comes back.

Both sides name these types. ``grader/kernel/runtime/`` is run in the kernel from its source text, with
nothing of the grader imported, so it names them for mypy only (under ``TYPE_CHECKING``, its dict literals
annotated with them: a key missing or misspelt there is a mypy error); the grader builds its requests with
them (grader/kernel/harness.py) and validates every answer against them when it arrives (a pydantic ``TypeAdapter``
over these TypedDicts), so a field renamed on one side is a type error on the other, and an answer the runtime
cannot have sent is named as such, never read as ``None``.

Only the standard library's typing, through ``typing_extensions`` (its backport: pydantic validates a
``TypedDict`` on Python 3.11 only from there; the kernel never imports this module).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Required

from typing_extensions import TypedDict

# ---------------------------------------------------------------- argument recipes (how the kernel builds an argument)


class ModelSpec(TypedDict, total=False):
    """A model the kernel and the grader's reference side both load: ``hub_id`` with a quantization, dtype and device
    (``"auto"`` picks), or ``hub_id`` with the from_pretrained arguments a notebook value holds (``load_args_path``)."""

    hub_id: Required[str]
    quantization: str
    dtype: str
    device: str
    load_args_path: list[str | int]


class OnnxModelSpec(TypedDict):
    """An ONNX Runtime causal LM the kernel loads with Optimum from ``path/file_name``."""

    path: str
    file_name: str


class TokenizerSpec(TypedDict):
    """``AutoTokenizer.from_pretrained(hub_id)``, set up as the starter's loader is told to."""

    hub_id: str
    pad_token: Literal["none", "eos"]
    padding_side: Literal["default", "left", "right"]


LiteralRecipe = TypedDict("LiteralRecipe", {"$lit": Any})
ModelRecipe = TypedDict("ModelRecipe", {"$model": ModelSpec})
OnnxModelRecipe = TypedDict("OnnxModelRecipe", {"$onnx_model": OnnxModelSpec})
TokenizerRecipe = TypedDict("TokenizerRecipe", {"$tokenizer": TokenizerSpec})
PathRecipe = TypedDict("PathRecipe", {"$path": list[Any]})
HandleRecipe = TypedDict("HandleRecipe", {"$handle": str})
MappingRecipe = TypedDict("MappingRecipe", {"$dict": "dict[str, Recipe]"})


class ItemSpec(TypedDict):
    """An item of a value built from a recipe (the model inside a kept ``(tokenizer, model)`` tuple)."""

    of: Recipe
    index: int | str


ItemRecipe = TypedDict("ItemRecipe", {"$item": ItemSpec})
CopyRecipe = TypedDict("CopyRecipe", {"$copy": "Recipe"})  # a deep copy: what one call changes no other sees
Recipe = (
    LiteralRecipe
    | ModelRecipe
    | OnnxModelRecipe
    | TokenizerRecipe
    | PathRecipe
    | HandleRecipe
    | MappingRecipe
    | ItemRecipe
    | CopyRecipe
)

# ---------------------------------------------------------------- requests (grader -> kernel)


class _Request(TypedDict):
    channel: NotRequired[str]  # the MIME type the answer is published on (added as the request is sent)


class InstallRequest(_Request):
    op: Literal["install"]
    settings: dict[str, Any]


class CallRequest(_Request):
    """Call the student's ``function`` with arguments built from recipes, recording what it runs."""

    op: Literal["call"]
    function: str
    args: list[Recipe]
    kwargs: dict[str, Recipe]
    keep_as: str | None
    paced: bool
    pace_s: float
    figures: bool
    watch: list[str]
    cuda: bool  # CUDA said to be available while the call runs, on a machine without it (a resolver that asks sees it)


class DescribeRequest(_Request):
    op: Literal["describe"]
    path: list[Any]


class InspectRequest(_Request):
    op: Literal["inspect"]
    names: list[str]


class LoadModelRequest(_Request):
    op: Literal["load_model"]
    spec: ModelSpec
    handle: str


class GenerateRequest(_Request):
    op: Literal["generate"]
    handle: str
    item: int | None
    tokenizer: TokenizerSpec
    prompt: str
    max_new_tokens: int


class OnnxGraphRequest(_Request):
    op: Literal["onnx_graph"]
    handle: str
    item: int | None


class ReleaseRequest(_Request):
    op: Literal["release"]
    handles: NotRequired[list[str]]


class EventsRequest(_Request):
    op: Literal["events"]


class EnvironmentRequest(_Request):
    op: Literal["environment"]


Request = (
    InstallRequest
    | CallRequest
    | DescribeRequest
    | InspectRequest
    | LoadModelRequest
    | GenerateRequest
    | OnnxGraphRequest
    | ReleaseRequest
    | EventsRequest
    | EnvironmentRequest
)

# ---------------------------------------------------------------- events (recorded by the instrumentation)
#
# Every field of an event is always there (None where it does not apply or is not known yet): the runtime's dict
# literals must name them all (mypy), the grader's validation requires them all, and the judges read them as
# ``event["field"]``, which mypy checks (``event.get("field")`` it does not: a misspelt key there is no error).

# A setting as generate will use it: an int or bool, None when unset, or the repr of anything else.
Setting = bool | int | str | None
# A tensor's shape: its sizes, where one is symbolic (a forward pass traced by an ONNX export) the type's name.
Shape = list[int | str]


class GenerateEvent(TypedDict):
    """One outermost ``model.generate`` call."""

    type: Literal["generate"]
    model_id: int
    model_serial: int
    model_quantization: str | None
    model_type: str
    model_device: str
    model_dtype: str
    model_training: bool
    grad_enabled: bool
    autocast: str | None  # the dtype autocast ran the model's operations in on its device (None: autocast off)
    thread: int  # the native id of the thread that ran it
    kwargs: dict[str, Any]  # the keywords generate was given (brief descriptions), not the inputs
    positional_args: int
    input_shape: Shape | None
    input_device: str | None
    input_ids: list[int] | None  # the first row, up to the runtime's cap
    padding_side: str | None
    rows: list[list[int]] | None  # each row's ids without its padding, while they fit the caps
    forward_calls: int
    max_new_tokens: Setting
    use_cache: Setting
    num_beams: Setting  # beam search's beams as generate uses them (1: greedy or sampling)
    custom_processors: int  # logits processors and stopping criteria the call added (passed, or set in its generation config)
    processors_s: float  # seconds its logits processors and stopping criteria took, generate's own included
    # Work the call hung on generate's steps besides processors: its streamer and the forward hooks on its model's
    # modules (and global ones), and sleeps on its thread; how many, and the seconds they took (the hooks' and the
    # streamer's CPU time, the sleeps' clock time: none of it generate's own).
    model_size: NotRequired[int | None]  # the parameter tensors the model held as the call began
    model_code: NotRequired[list[str]]  # what in its model's code was not the library's as it ran (GPT2MLP.forward)
    added_items: NotRequired[int]
    added_s: NotRequired[float]
    slept_s: NotRequired[float]  # of added_s, the seconds it slept (time.sleep on its thread)
    torch_threads: NotRequired[int | None]  # torch.get_num_threads() as it began
    attention: NotRequired[str | None]  # the model config's attention implementation (eager, sdpa, ...)
    decoding: NotRequired[str | None]  # the decoding loop that ran (_sample, _beam_search, _assisted_decoding)
    new_tokens_limit: int | None
    instrumentation_replaced: list[str]  # what held the instrumented attributes' places while it ran (empty: none)
    decoding_loops: int  # the decoding loops of generate that ran inside it
    start: float  # by the runtime's clock (seconds since it was installed); 0.0 until it starts, or ends
    end: float
    duration_s: float
    error: str | None  # what it raised
    output_shape: Shape | None
    output_ids: list[int] | None  # the first row of its output, up to the cap
    new_tokens: list[int] | None  # per row, up to the first end-of-text token
    cut_short: bool  # it stopped before its limit with a row that reached no end-of-text (max_time, a stopping criterion)
    # Where the grader serves the pauses, the number of the pause the event holds (the grader fills in paced_s, the
    # length it served: grader/kernel/evidence.py); where the kernel sleeps its pacing itself, the length it slept.
    pause: int | None
    paced_s: float | None
    # Filled in by the grader (never the kernel's): seconds its thread waited on a run queue around it in the call
    # (grader/kernel/evidence.py with_queue_waits).
    queued_s: NotRequired[float]


class TokenizeEvent(TypedDict):
    """One outermost tokenizer call the student's code made during a paced call."""

    type: Literal["tokenize"]
    thread: int
    start: float
    end: float
    pause: int | None
    paced_s: float | None


class SynchronizeEvent(TypedDict):
    """One wait for the GPU (``torch.cuda.synchronize``, a stream's or a CUDA event's ``synchronize``), or a CUDA
    event recorded (``via`` ``Event.record``: the GPU stamps it in stream order, so a timer of CUDA events needs no
    wait before it starts)."""

    type: Literal["synchronize"]
    via: Literal["torch.cuda.synchronize", "Stream.synchronize", "Event.synchronize", "Event.record"]
    thread: int
    start: float
    end: float
    error: str | None


class ForwardEvent(TypedDict):
    """One outermost forward pass outside generate."""

    type: Literal["forward"]
    thread: int
    model_id: int
    model_serial: int
    model_type: str
    start: float
    grad_enabled: bool
    inference_mode: bool
    model_training: bool
    model_device: str
    input_shape: Shape | None
    input_device: str | None
    row_tokens: list[int] | None  # tokens each row covers (its attention mask's ones)
    rows: list[list[int]] | None  # each row's ids without its padding (where a mask says what is padding)
    has_labels: bool
    has_attention_mask: bool
    nested: bool
    part_of: int | None  # the serial of a model the call was given that holds this one (``model.transformer`` run alone)
    end: float  # 0.0 until the pass returns (it is recorded as it starts)
    error: str | None
    output_requires_grad: bool | None


class RunTokens(TypedDict):
    """What a session run's inputs and outputs say (None where they say nothing): its batch, and for the grader's own
    sessions the loss its logits give."""

    input_shape: Shape | None
    row_tokens: list[int] | None
    nll_sums: dict[str, float] | None  # by selection: "pairs", "targets", "all"
    nll_counts: dict[str, int] | None


class OnnxRunEvent(RunTokens):
    """One ``InferenceSession.run`` (or ``run_with_iobinding``)."""

    type: Literal["onnx_run"]
    thread: int
    session_serial: int
    grader_session: bool  # a session the grader built in this kernel: its runs also record the loss of its logits
    iobinding: bool
    start: float
    end: float


class FigureAxes(TypedDict):
    title: str
    xlabel: str
    ylabel: str
    series: list[dict[str, Any]]


class FigureEvent(TypedDict):
    """A figure drawn, shown or left open during a call that watched figures."""

    type: Literal["figure"]
    figure_id: int
    suptitle: str
    axes: list[FigureAxes]


class BypassEvent(TypedDict):
    """A decoding loop of generate that ran outside the instrumented generate."""

    type: Literal["bypass"]
    method: str
    time: float


class ReturnedEvent(TypedDict):
    """What a watched notebook function returned, with the arguments it was given."""

    type: Literal["returned"]
    function: str
    start: float  # when it was called (its arguments read)
    time: float  # when it returned
    arguments: list[list[Any]]  # [name, description] pairs
    value: Any  # a description (grader/kernel/values.py decodes it)
    slept_s: NotRequired[float]  # seconds its thread slept (time.sleep) during the call, outside generate calls
    sleeps: NotRequired[list[list[float]]]  # when it slept: [start, end] pairs on the clock of start and time


class ModelEvent(TypedDict):
    """A model that ran (a generate call or a forward pass), described the first time it ran in the scope (the call,
    or the notebook's cells): which weights it holds, its dtype, device and quantization."""

    type: Literal["model"]
    serial: int
    model_type: str
    dtype: str
    device: str
    quantization: str | None
    fingerprint: dict[str, Any] | None


class TokenizerEvent(TypedDict):
    """A tokenizer loaded with ``from_pretrained``, by the serial the runtime gives the object it returned and the id or
    folder it was loaded from, recorded as it loads (a tokenizer's ``name_or_path`` can be set to anything later)."""

    type: Literal["tokenizer"]
    serial: int
    source: str


class ArgumentsEvent(TypedDict):
    """The models a call was given, by serial (as a string), each named by where it was passed ("argument 1"),
    recorded as the call begins."""

    type: Literal["arguments"]
    models: dict[str, str]


Event = (
    GenerateEvent
    | TokenizeEvent
    | SynchronizeEvent
    | ForwardEvent
    | OnnxRunEvent
    | FigureEvent
    | BypassEvent
    | ReturnedEvent
    | ModelEvent
    | TokenizerEvent
    | ArgumentsEvent
)

# ---------------------------------------------------------------- answers (kernel -> grader)

AnswerStatus = Literal["returned", "raised", "missing", "signature", "internal"]


class ExceptionAnswer(TypedDict):
    type: str
    module: str
    bases: NotRequired[list[str]]
    message: str
    traceback: str


class ModelSeen(TypedDict):
    """A model a call was given or ran: what it is, and which of the call's arguments it was (None: none of them,
    a model the function found elsewhere or loaded itself)."""

    serial: int
    argument: str | None
    type: str
    dtype: str
    device: str
    quantization: str | None
    fingerprint: dict[str, Any] | None  # config sizes and input-embedding values (which weights it holds)


class NameInfo(TypedDict, total=False):
    defined: Required[bool]
    callable: bool
    type: str
    signature: str | None


class Answer(TypedDict, total=False):
    """The one answer to any request; which fields it carries depends on the request and its outcome."""

    status: Required[AnswerStatus]
    value: Any  # a description (grader/kernel/values.py decodes it)
    exception: ExceptionAnswer
    message: str
    interrupted: bool  # the call was stopped by the grader's interrupt (a timeout)
    duration_s: float
    start: float
    end: float
    stdout: str
    stderr: str
    events: list[Event]
    events_dropped: int
    models: list[ModelSeen]  # call: the models it was given or ran
    environment: dict[str, Any]  # install, environment
    names: dict[str, NameInfo]  # inspect
    graph: dict[str, Any]  # onnx_graph
