"""What a graded call did, compared with what the reference implementation does on the same inputs.

A student's call and the reference's (run by the grader, grader/grading/tracing.py) are both recorded as generate
calls and forward passes with the models they ran. :class:`Behaviour` reads either record the same way: each
generate call as a :class:`Generation` (which model ran it, which token ids went in, the effective limit of new
tokens, the cache, the padding, the dtype and device) and each forward pass as a :class:`Pass`.

They are compared as multisets: order, threads, repetitions (a best-of-three timer, a warm-up) and helper calls are
free. What the reference does must be there (:func:`unmatched_generations`, :func:`judge_passes`), and nothing it
would never do (another model, gradients on) may be (:func:`stray_generations`). A function that ignores one of its
arguments then does what the reference does for another argument, and is caught whatever the argument, without a
check written for that argument.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from grader.checks.timing import contains_run, event_rows, match, max_matching
from grader.kernel.protocol import ForwardEvent, GenerateEvent, ModelSeen

# How a model that is none of the call's arguments is named: the hub id its weights are (an "own" model, one the
# function loaded itself, as the reference does where it is given ids), or none.
ANOTHER = "another model"


def model_labels(models: Iterable[ModelSeen], identify: Callable[[Mapping[str, Any] | None], str | None]) -> dict[int, str]:
    """Each model's label, by serial: where it was passed (``argument 1``), else ``own <hub id>`` for a model whose
    weights are a hub id's, else :data:`ANOTHER`. ``identify`` names the hub id a fingerprint is (or None)."""
    labels = {}
    for seen in models:
        if seen["argument"]:
            labels[seen["serial"]] = str(seen["argument"])
        else:
            hub_id = identify(seen["fingerprint"])
            labels[seen["serial"]] = f"own {hub_id}" if hub_id else ANOTHER
    return labels


def label_text(label: str) -> str:
    """How a model label reads in feedback."""
    if label.startswith("argument ") or label.startswith("keyword "):
        return f"the model passed as {label}"
    if label.startswith("own "):
        return f"a {label.removeprefix('own ')} model it loaded"
    return "a model that is none of its arguments"


@dataclass(frozen=True)
class Generation:
    """One generate call, as judges compare them."""

    model: str  # see model_labels
    serial: int
    size: int | None  # the parameter tensors its model held (None: not recorded)
    code: tuple[str, ...]  # what of its model's code was not the library's as it ran (GPT2MLP.forward replaced)
    rows: tuple[tuple[int, ...], ...] | None  # each row's ids without padding (None: not readable)
    width: int  # the batch's width, padding included
    limit: int | None  # the effective limit of new tokens (max_new_tokens, else max_length less the prompt)
    use_cache: bool | None
    beams: int  # beam search's beams (1: greedy or sampling; a setting not readable counts as 1)
    assisted: bool  # it decoded with an assistant (a draft model, prompt lookup): other work per token than greedy's
    passes: int  # the forward passes of its model that generate itself ran (greedy search: one per new token)
    padding: str | None  # the side padded ("left", "right"), None where no row is padded
    dtype: str  # what the model computed in: autocast's dtype where it was on, else the model's
    device: str
    input_device: str | None
    new_tokens: tuple[int, ...] | None  # each row's new tokens, up to its end-of-text
    cut_short: bool  # stopped before its limit with a row short of an end-of-text (max_time, a stopping criterion)
    error: str | None
    event: GenerateEvent = field(compare=False, repr=False)
    adds_work: bool = False  # its logits processors and stopping criteria took a share of it (see :func:`adds_work`)
    prefilled: bool = False  # given a cache of the prompt (past_key_values) made before it: its prefill was not its own

    @classmethod
    def of(cls, event: GenerateEvent, labels: Mapping[int, str]) -> Generation:
        """A recorded generate call, its model named by ``labels``."""
        rows = event_rows(event)
        limit = event["new_tokens_limit"]
        if not isinstance(limit, int) or isinstance(limit, bool):
            limit = event["max_new_tokens"] if isinstance(event["max_new_tokens"], int) else None
        use_cache = event["use_cache"]
        counts = event["new_tokens"]
        shape = event["input_shape"] or []
        return cls(
            model=labels.get(event["model_serial"], ANOTHER),
            serial=event["model_serial"],
            size=size if isinstance(size := event.get("model_size"), int) and not isinstance(size, bool) else None,
            code=tuple(str(name) for name in event.get("model_code") or ()),
            rows=tuple(tuple(row) for row in rows) if rows is not None else None,
            width=int(shape[-1]) if shape and isinstance(shape[-1], int) else 0,
            limit=limit if isinstance(limit, int) and not isinstance(limit, bool) else None,
            use_cache=use_cache if isinstance(use_cache, bool) else (True if use_cache is None else None),
            beams=beams if isinstance(beams := event.get("num_beams"), int) and not isinstance(beams, bool) and beams > 0 else 1,
            assisted=event.get("decoding") == "_assisted_decoding",
            passes=passes if isinstance(passes := event.get("forward_calls"), int) and not isinstance(passes, bool) else 0,
            padding=event["padding_side"],
            dtype=str(event["autocast"] or event["model_dtype"]),
            device=str(event["model_device"]).split(":")[0],
            input_device=str(event["input_device"]).split(":")[0] if event["input_device"] else None,
            new_tokens=tuple(int(count) for count in counts) if isinstance(counts, list) else None,
            cut_short=bool(event["cut_short"]),
            error=event["error"],
            event=event,
            adds_work=adds_work(event),
            prefilled=_prefilled(event),
        )

    @property
    def padded_wide(self) -> bool:
        """Whether its batch is padded far past its longest prompt (more padding than that prompt, and more than 16
        positions): attention over masked positions is work the prompts do not need (a multiple of 8 is not wide)."""
        if not self.rows or not self.width:
            return False
        longest = max(len(row) for row in self.rows)
        return self.width - longest > max(16, longest)

    @property
    def more_passes(self) -> bool:
        """Whether it ran more forward passes than one per new token (classifier-free guidance runs the model twice a
        step; a streamer or processor that runs it again adds one): other work per token than greedy search's."""
        return bool(self.new_tokens) and self.passes > max(self.new_tokens or (0,)) + 1

    @property
    def produced(self) -> bool:
        """Whether it returned and generated at least one token."""
        return self.error is None and bool(self.new_tokens) and any(count > 0 for count in self.new_tokens or ())


# The share of a generate call its logits processors and stopping criteria may take where the call added some:
# generate's own (a limit, an end-of-text test) take a tenth to a quarter of a step of the tiny models on a quiet
# machine and, on one loaded far past its cores, up to half (their thread pool waits to be scheduled: seen, 0.98 s of a
# 2.2 s call), so a call that added none is never charged; a step clock of the student's costs next to nothing, one
# that sleeps, or blocks a hundred word pairs, takes most of the call.
ADDED_SHARE, ADDED_ABS_S = 0.4, 0.005
# The share its streamer and forward hooks may take: their time is theirs alone (generate has none of its own), so a
# smaller share tells; a streamer decoding each token, a hook reading a clock, take a few percent.
HOOKS_SHARE = 0.2


def _slept(event: GenerateEvent) -> float:
    """Seconds a generate call's own thread slept inside it (a hook, a streamer, a processor calling time.sleep):
    generate never sleeps, so however small a share of the call on a loaded machine, it is time added to it."""
    return float(event.get("slept_s") or 0.0)


def sleeps_in(event: GenerateEvent) -> bool:
    """Whether something a generate call ran slept inside it for longer than the noise allowance (ADDED_ABS_S)."""
    return _slept(event) > ADDED_ABS_S


def hooks_add_work(event: GenerateEvent) -> bool:
    """Whether the streamer and forward hooks hung on a generate call took more than their share of it, or something
    it ran slept."""
    if sleeps_in(event):
        return True
    hooked = float(event.get("added_s") or 0.0)
    return bool(event.get("added_items")) and hooked > max(HOOKS_SHARE * float(event["duration_s"] or 0.0), ADDED_ABS_S)


def adds_work(event: GenerateEvent, hooks: bool = True) -> bool:
    """Whether a generate call added logits processors or stopping criteria (passed, or built by generate from a
    setting such as bad_words_ids) and its processors and stopping criteria took a large share of it; or (``hooks``)
    hung a streamer or forward hooks on it that took a share of it, or slept. Without ``hooks``: the processors alone
    (a caller judged apart from hooks its model carried before the call)."""
    duration = float(event["duration_s"] or 0.0)
    if hooks and hooks_add_work(event):
        return True
    if not event.get("custom_processors"):
        return False
    spent = float(event.get("processors_s") or 0.0)
    return spent > max(ADDED_SHARE * duration, ADDED_ABS_S)


def added_work_text(event: GenerateEvent, hooks: bool = True) -> str:
    """What a generate that :func:`adds_work` added (with ``hooks``, as there), in words, with the seconds it took."""
    duration = float(event["duration_s"] or 0.0)
    if hooks and sleeps_in(event):
        return (
            f"with a hook, streamer or logits processor that slept or waited {_slept(event):.3g} s of its {duration:.3g} s "
            "(a sleep, or a wait that ran out its timeout, inside generate: time added to its steps)"
        )
    if hooks and hooks_add_work(event):
        hooked = float(event.get("added_s") or 0.0)
        return f"with a streamer or forward hooks that took {hooked:.3g} s of its {duration:.3g} s (work hung on every step)"
    return (
        f"with logits processors or stopping criteria that took {float(event.get('processors_s') or 0.0):.3g} s of its "
        f"{duration:.3g} s (work added to every step: a processor of its own, or one a setting such as bad_words_ids builds)"
    )


def _prefilled(event: GenerateEvent) -> bool:
    """Whether a generate call was given a cache that already held positions (an empty one, a static cache made for
    speed, is its own to fill)."""
    cache = event["kwargs"].get("past_key_values") if isinstance(event["kwargs"], dict) else None
    if cache is None:
        return False
    return not isinstance(cache, dict) or cache.get("filled") != 0


@dataclass(frozen=True)
class Pass:
    """One forward pass outside generate, as judges compare them."""

    model: str
    rows: tuple[tuple[int, ...], ...] | None
    size: int  # rows in the batch
    width: int
    grad: bool  # gradients were on (sampled inside forward), or its loss or logits carry a graph
    training: bool
    device: str
    input_device: str | None
    error: str | None
    event: ForwardEvent = field(compare=False, repr=False)

    @classmethod
    def of(cls, event: ForwardEvent, labels: Mapping[int, str]) -> Pass:
        """A recorded forward pass, its model named by ``labels``."""
        rows = event["rows"]
        shape = event["input_shape"] or []
        return cls(
            model=labels.get(event["part_of"] or event["model_serial"], ANOTHER),
            rows=tuple(tuple(row) for row in rows) if isinstance(rows, list) else None,
            size=int(shape[0]) if shape and isinstance(shape[0], int) else 0,
            width=int(shape[1]) if len(shape) > 1 and isinstance(shape[1], int) else 0,
            grad=event["grad_enabled"] is not False or event["output_requires_grad"] is True,
            training=event["model_training"] is not False,
            device=str(event["model_device"]).split(":")[0],
            input_device=str(event["input_device"]).split(":")[0] if event["input_device"] else None,
            error=event["error"],
            event=event,
        )


@dataclass(frozen=True)
class Behaviour:
    """What one call did: its generate calls and forward passes, in order."""

    generations: tuple[Generation, ...]
    passes: tuple[Pass, ...]

    @classmethod
    def of(
        cls,
        events: Iterable[Any],
        models: Iterable[ModelSeen],
        identify: Callable[[Mapping[str, Any] | None], str | None],
    ) -> Behaviour:
        """A call's record (a kernel's answer, or the reference's trace), its models named as :func:`model_labels` says."""
        labels = model_labels(models, identify)
        generations = tuple(Generation.of(event, labels) for event in events if event["type"] == "generate")
        # A pass run inside another model's pass (from its hook) is a pass of its own; a model's own parts (GPT2Model
        # inside GPT2LMHeadModel) are not recorded apart.
        passes = tuple(Pass.of(event, labels) for event in events if event["type"] == "forward")
        return cls(generations, passes)

    def required(self) -> list[Generation]:
        """The generate calls that count (the reference's): each but those run again at once on the same model and
        prompt (a warm-up before its timed call)."""
        kept = []
        calls = self.generations
        for index, call in enumerate(calls):
            following = calls[index + 1] if index + 1 < len(calls) else None
            if following is not None and following.serial == call.serial and following.rows == call.rows:
                continue
            kept.append(call)
        return kept


# The aspects of a generate call compared, with how each reads in feedback.
ASPECTS = ("model", "rows", "limit", "use_cache", "beams", "padding", "dtype", "device", "inputs", "added")


def _rows_fit(found: Sequence[Sequence[int]] | None, wanted: Sequence[Sequence[int]] | None, fits: RowFit) -> bool:
    """Whether a call's rows are the wanted ones, one each, in any order (see :class:`RowFit`)."""
    if found is None or wanted is None:
        return found is None and wanted is None
    if len(found) != len(wanted):
        return False
    options = [[index for index, row in enumerate(wanted) if fits(list(candidate), list(row))] for candidate in found]
    return max_matching(options) == len(found)


RowFit = Callable[[list[int], list[int]], bool]


def exact_row(found: list[int], wanted: list[int]) -> bool:
    """The same ids."""
    return found == wanted


def around_allowed(wanted: Sequence[int]) -> int:
    """How many tokens besides padding a row may hold around the wanted ones: special tokens or a short template, not
    another text (a long preamble is other work, timed as the prompt's)."""
    return max(16, len(wanted))


def carrying(reference_tokenizer: Any) -> RowFit:
    """A row fits wanted ids when it holds them as one run (special tokens, a template or padding around them
    allowed, up to :func:`around_allowed` tokens besides the padding), or when its text holds theirs (a template may
    tokenize the edges differently)."""

    eos = getattr(reference_tokenizer, "eos_token_id", None)
    padding = {token for token in (eos, getattr(reference_tokenizer, "pad_token_id", None)) if token is not None}

    def fits(found: list[int], wanted: list[int]) -> bool:
        if found == wanted:
            return True
        if eos is not None and found and found[-1] == eos and (not wanted or wanted[-1] != eos):
            return False  # an end-of-text after the prompt: the model starts a new document, not its continuation
        start, end = 0, len(found)
        while start < end and found[start] in padding:
            start += 1
        while end > start and found[end - 1] in padding:
            end -= 1
        if end - start - len(wanted) > around_allowed(wanted):
            return False
        if contains_run(found, wanted):
            return True
        text = str(reference_tokenizer.decode(wanted, skip_special_tokens=True)).strip()
        return bool(text) and text in str(reference_tokenizer.decode(found, skip_special_tokens=True))

    return fits


def differences(found: Generation, wanted: Generation, fits: RowFit, aspects: Sequence[str] = ASPECTS) -> list[str]:
    """The aspects in which a generate call differs from the wanted one."""
    differ = []
    for aspect in aspects:
        resized = found.size is not None and wanted.size is not None and found.size != wanted.size
        recoded = bool(found.code) and found.code != wanted.code
        if aspect == "model" and (found.model != wanted.model or resized or recoded):
            differ.append("model")
        elif aspect == "rows" and not _rows_fit(found.rows, wanted.rows, fits):
            differ.append("rows")
        elif aspect == "limit" and (found.limit != wanted.limit or (found.cut_short and not wanted.cut_short)):
            differ.append("limit")
        elif aspect == "use_cache" and found.use_cache != wanted.use_cache:
            differ.append("use_cache")
        elif aspect == "beams" and (
            found.beams != wanted.beams or found.assisted != wanted.assisted or found.more_passes != wanted.more_passes
        ):
            differ.append("beams")
        elif aspect == "padding" and (
            (wanted.padding is not None and found.padding != wanted.padding)
            or (found.padding == "right" and wanted.padding != "right")  # it generates after its padding
        ):
            differ.append("padding")
        elif aspect == "width" and found.padded_wide and not wanted.padded_wide:
            differ.append("width")
        elif aspect == "dtype" and found.dtype != wanted.dtype:
            differ.append("dtype")
        elif aspect == "device" and found.device != wanted.device:
            differ.append("device")
        elif aspect == "inputs" and found.input_device is not None and found.input_device != found.device:
            differ.append("inputs")
        elif aspect == "added" and ((found.adds_work and not wanted.adds_work) or (found.prefilled and not wanted.prefilled)):
            differ.append("added")
    return differ


@dataclass(frozen=True)
class Unmatched:
    """A generate call the reference makes that the student's call does not: the closest one it made instead (None
    when it made none) and how that one differs."""

    wanted: Generation
    closest: Generation | None
    differ: tuple[str, ...]


def matching(found: Sequence[Generation], wanted: Generation, fits: RowFit, aspects: Sequence[str] = ASPECTS) -> list[Generation]:
    """The student's generate calls that do what ``wanted`` does (and returned)."""
    return [call for call in found if call.error is None and not differences(call, wanted, fits, aspects)]


def unmatched_generations(
    student: Behaviour, reference: Behaviour, fits: RowFit, aspects: Sequence[str] = ASPECTS
) -> list[Unmatched]:
    """The reference's generate calls (:meth:`Behaviour.required`) that the student's call does not make: see
    :func:`unmatched_of`."""
    return unmatched_of(student, reference.required(), fits, aspects)


def unmatched_of(
    student: Behaviour, wanted: Sequence[Generation], fits: RowFit, aspects: Sequence[str] = ASPECTS
) -> list[Unmatched]:
    """The ``wanted`` generate calls the student's call does not make, as a multiset (two alike need two), each with
    the closest call it made instead. (A reference's :meth:`Behaviour.required` takes calls of the same rows one
    after another as a warm-up and its timed call; a caller that wants calls of the same rows several times, as an
    ablation's four settings, passes them itself.)"""
    found = [call for call in student.generations if call.error is None]
    options = [[index for index, call in enumerate(found) if not differences(call, need, fits, aspects)] for need in wanted]
    paired = match(options)
    matched, used = set(paired.values()), set(paired)
    # The closest is looked for among the calls no wanted one matched (a warm-up is no candidate once the timed
    # call matched); of those equally close, the last (the timed call comes after its warm-up).
    spare = [position for position in range(len(found)) if position not in used] or list(range(len(found)))
    missing = []
    for need, call in enumerate(wanted):
        if need in matched:
            continue
        scored = sorted(
            ((differences(found[position], call, fits, aspects), position) for position in spare),
            key=lambda pair: (len(pair[0]), -pair[1]),
        )
        closest = scored[0] if scored else None
        missing.append(Unmatched(call, found[closest[1]] if closest else None, tuple(closest[0]) if closest else ()))
    return missing


def stray_generations(student: Behaviour, reference: Behaviour) -> list[Generation]:
    """The student's generate calls on a model the reference never runs (another model than those it was given)."""
    allowed = {call.model for call in reference.generations} | {call.model for call in reference.passes}
    return [call for call in student.generations if call.model not in allowed]


def describe_generation(call: Generation, decode: Callable[[Sequence[int]], str] | None = None, show_rows: bool = True) -> str:
    """A generate call in words: its model, rows, limit, cache, padding and dtype."""
    parts = [label_text(call.model)]
    if call.code:
        parts[0] += f" running the notebook's {', '.join(call.code)}"
    if show_rows and call.rows is not None:
        if decode is not None and len(call.rows) == 1:
            text = decode(call.rows[0])
            parts.append(f"the prompt {text[:60]!r}{'...' if len(text) > 60 else ''} ({len(call.rows[0])} tokens)")
        else:
            parts.append(f"{len(call.rows)} row(s) of {', '.join(str(len(row)) for row in call.rows[:8])} tokens")
    parts.append(f"a limit of {call.limit} new tokens" if call.limit is not None else "no readable limit of new tokens")
    parts.append(f"use_cache={call.use_cache}")
    if call.beams != 1:
        parts.append(f"num_beams={call.beams}")
    if call.padding:
        parts.append(f"{call.padding} padding")
    parts.append(call.dtype.removeprefix("torch."))
    return ", ".join(parts)


DIFFERENCE_TEXT = {
    "model": "another model (or the model given with parts taken out: fewer parameters; or with code of the notebook's "
    "in place of the model's own, such as a module class's forward replaced)",
    "rows": "other token ids",
    "limit": "another limit of new tokens (or it stopped short of it: max_time, a stopping criterion)",
    "use_cache": "another use_cache",
    "beams": "another decoding (beams, an assistant such as prompt lookup, or more forward passes than one per token such "
    "as classifier-free guidance's: other work per token than greedy search)",
    "padding": "another padding side",
    "width": "a batch padded far past its longest prompt (work on masked positions)",
    "dtype": "another dtype",
    "device": "another device",
    "inputs": "inputs on another device than the model",
    "added": "work added to or taken from its steps: logits processors, stopping criteria, a streamer or forward hooks "
    "that took a share of it, or a cache of the prompt filled before it (past_key_values)",
}


def unmatched_sentence(missing: Unmatched, decode: Callable[[Sequence[int]], str] | None = None, hidden: bool = False) -> str:
    """One sentence: what the reference generates, and what the student's closest call did instead."""
    wanted = describe_generation(missing.wanted, decode, show_rows=not hidden)
    if missing.closest is None:
        return f"The reference makes a generate call on {wanted}; your function made none that returned."
    found = describe_generation(missing.closest, decode, show_rows=not hidden)
    differ = ", ".join(DIFFERENCE_TEXT[aspect] for aspect in missing.differ)
    return f"The reference makes a generate call on {wanted}; your function's closest one ran {found} ({differ})."


# ---------------------------------------------------------------------------------------------- forward passes


@dataclass(frozen=True)
class PassJudgement:
    """What is wrong with a call's forward passes against the reference's, in sentences (empty: nothing)."""

    problems: tuple[str, ...]
    found: str


def judge_passes(student: Behaviour, reference: Behaviour, batch_size: int | None, aspects: Sequence[str]) -> PassJudgement:
    """The student's forward passes against the reference's, as multisets of batches.

    ``aspects``: ``"model"`` (every pass on a model the reference runs), ``"grad"`` (no pass with gradients on where
    the reference has none), ``"training"`` (eval mode), ``"inputs"`` (inputs on the model's device), ``"batches"``
    (every text the reference runs covered, in as many distinct batches as the reference makes, each at most
    ``batch_size`` texts and as wide as its longest: any order or grouping, repetitions free).
    """
    problems: list[str] = []
    passes = [call for call in student.passes if call.error is None]
    wanted = list(reference.passes)
    found = f"{len(passes)} forward pass(es) of {[call.size for call in passes]} texts"
    if not passes:
        return PassJudgement(("it ran no forward pass of a model",), "no forward pass")
    if "model" in aspects:
        allowed = {call.model for call in wanted}
        others = sorted({call.model for call in passes if call.model not in allowed})
        if others:
            problems.append(
                f"{sum(1 for call in passes if call.model in others)} of its {len(passes)} forward passes ran "
                f"{' and '.join(label_text(label) for label in others)}, not {' or '.join(label_text(label) for label in sorted(allowed))}"
            )
    if "grad" in aspects and not any(call.grad for call in wanted):
        with_grad = sum(1 for call in passes if call.grad)
        if student.generations and not reference.generations:
            problems.append(
                f"it called model.generate {len(student.generations)} time(s), whose passes cannot be seen to run without "
                "gradients: compute the loss with the model's forward passes, inside torch.no_grad()"
            )
        if with_grad:
            problems.append(
                f"{with_grad} of {len(passes)} forward passes of the grader's call ran with gradients on (each call starts "
                "with them on, as a fresh kernel has them: a torch.set_grad_enabled(False) in another cell does not "
                "reach it): wrap the loop in torch.no_grad() or torch.inference_mode() inside the function"
            )
    if "training" in aspects:
        training = sum(1 for call in passes if call.training)
        if training:
            problems.append(f"{training} forward passes ran in training mode: keep the model in eval mode")
    if "inputs" in aspects:
        elsewhere = [call for call in passes if call.input_device is not None and call.input_device != call.device]
        if elsewhere:
            problems.append(
                f"inputs were on {elsewhere[0].input_device} but the model on {elsewhere[0].device}: move the batch with "
                ".to(model.device)"
            )
    if "batches" in aspects:
        if student.generations and not reference.generations:
            problems.append(
                f"it called model.generate {len(student.generations)} time(s): the loss comes from forward passes of the "
                "batches alone"
            )
        problem = _batching(passes, wanted, batch_size)
        if problem:
            problems.append(problem)
    return PassJudgement(tuple(problems), found)


def padded_row(found: Sequence[int], wanted: Sequence[int]) -> bool:
    """Whether a forward pass's row is a text: its ids, or its ids with padding (one repeated id) on either side where
    the pass gave no attention mask to take the padding out."""
    found, wanted = list(found), list(wanted)
    if found == wanted:
        return True
    extra = len(found) - len(wanted)
    if extra <= 0 or not wanted:
        return False
    if found[: len(wanted)] == wanted and len(set(found[len(wanted) :])) == 1:
        return True
    return found[extra:] == wanted and len(set(found[:extra])) == 1


def _batching(passes: Sequence[Pass], wanted: Sequence[Pass], batch_size: int | None) -> str:
    """What is wrong with how the passes batch the reference's texts ("" when nothing): every text run (a text given
    twice may be run once, weighted: the loss is the same), none in more batches than the reference runs it, in no
    more batches than the reference makes, each at most ``batch_size`` texts and no wider than its texts need."""
    texts = [row for call in wanted for row in (call.rows or ())]
    given = Counter(tuple(text) for text in texts)
    distinct = list(given)
    batches: list[tuple[tuple[int, ...], ...]] = []
    widths: dict[tuple[tuple[int, ...], ...], int] = {}
    for call in passes:
        if call.rows is None:
            return "a forward pass's token ids could not be read: pass input_ids (and an attention_mask) to the model"
        if call.rows not in batches:
            batches.append(call.rows)  # a batch run again (a second pass for the logits) is the same batch
        widths[call.rows] = max(widths.get(call.rows, 0), call.width)
    rows = [(number, row) for number, batch in enumerate(batches) for row in batch]
    # Each text once first, then its further copies: a matching extended this way keeps every text it covered.
    slots = distinct + [text for text in distinct for _ in range(given[text] - 1)]
    owner = match([[index for index, (_, row) in enumerate(rows) if padded_row(row, text)] for text in slots])
    covered = {slots[slot] for slot in owner.values()}
    uncovered = len(distinct) - len(covered)
    if uncovered:
        return f"{uncovered} of the {len(distinct)} texts were never run whole through the model (every token of every text)"
    again = sum(1 for index, (_, row) in enumerate(rows) if index not in owner and any(padded_row(row, t) for t in distinct))
    if again:
        return f"{again} text(s) were run in more than one batch: run each text once"
    used = sorted({rows[index][0] for index in owner})
    sizes = [len(batches[number]) for number in used]
    if batch_size is not None and any(size > batch_size for size in sizes):
        return f"it ran batches of {sizes} texts with batch_size={batch_size}: at most batch_size texts per forward pass"
    if len(used) > len(wanted):
        how = "one text at a time" if all(size == 1 for size in sizes) else f"in {len(used)} batches of {sizes} texts"
        return (
            f"it ran the {len(texts)} texts {how}, where batches of batch_size={batch_size} make {len(wanted)} forward "
            "passes: tokenize each batch of texts together with padding and run the model once per batch"
        )
    # Padding to a multiple (of 8, of 64) is fine, and so is padding to the corpus's longest text (the corpus tokenized
    # once, padded, and sliced into batches: the loss is the same); padding every batch to the model's 1,024 positions
    # is not.
    corpus = max((len(text) for text in texts), default=0)
    wide = [
        (widths[batches[number]], longest)
        for number in used
        for longest in [max((len(row) for row in batches[number]), default=0)]
        if widths[batches[number]] > max(2 * longest, corpus) + 64
    ]
    if wide:
        return (
            f"a batch of texts of at most {wide[0][1]} tokens was padded to {wide[0][0]} positions: pad each batch to its "
            "longest text (padding=True), not to a fixed length"
        )
    return ""
