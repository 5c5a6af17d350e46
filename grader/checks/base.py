"""What a check is, what it receives, and what it gives back.

A check kind is a function ``run(context, params) -> Verdict`` declared with
:func:`check_kind`. Rubric checks name a kind and give it params, validated by the kind's
params model. A check asks the kernel for values through ``context`` (never the other way
round), compares them with the reference computed in the grader's process, and returns a
:class:`Verdict` that says in one sentence what happened, what was expected and what was found.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field

from grader.checks.shapes import ANY, Shape, shape_problem
from grader.facts import GradedBy, Outcome
from grader.kernel.harness import CallOutcome, Harness, model, model_spec, tokenizer
from grader.kernel.protocol import Recipe, TokenizerRecipe
from grader.kernel.values import kind_of

if TYPE_CHECKING:
    from grader.grading.reference import ReferenceModels
    from grader.grading.replay import ReferenceFunctions
    from grader.grading.rubric import CheckSpec, Rubric
    from grader.kernel.cells import ExecutionRecord

T = TypeVar("T")


@dataclass(frozen=True)
class Verdict:
    """A check's judgement: outcome, one-sentence message, expected and found, details."""

    outcome: Outcome
    message: str
    expected: str | None = None
    found: str | None = None
    fraction: float | None = None  # partial credit; None means all (passed) or nothing
    details: tuple[str, ...] = ()
    answer: str | None = None  # a written answer, for manual grading
    flags: tuple[str, ...] = ()  # what the instructor should look at in a written answer (filler, a copied question)
    data: Mapping[str, Any] = field(default_factory=dict)  # instructor-only facts, JSON-safe
    tampered: str | None = None  # why the evidence this verdict rests on was tampered with (grader/kernel/evidence.py)

    @classmethod
    def passed(cls, message: str, **fields: Any) -> Verdict:
        """The check passed."""
        return cls("passed", message, **fields)

    @classmethod
    def failed(cls, message: str, **fields: Any) -> Verdict:
        """The check ran and the submission's behaviour was wrong."""
        return cls("failed", message, **fields)

    @classmethod
    def error(cls, message: str, **fields: Any) -> Verdict:
        """The check could not judge behaviour: missing function, exception, timeout, dead kernel."""
        return cls("error", message, **fields)

    @classmethod
    def manual(cls, message: str, **fields: Any) -> Verdict:
        """An instructor must grade this by hand."""
        return cls("manual", message, **fields)

    @classmethod
    def skipped(cls, message: str, **fields: Any) -> Verdict:
        """The check cannot run here (for example, it needs a GPU)."""
        return cls("skipped", message, **fields)


class StopCheck(Exception):
    """Raised inside a check to end it early with a verdict (a failed call, a wrong type)."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict


class NoParams(BaseModel):
    """A check kind that takes no parameters."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# The description of a Params' ``function``: the student function a check calls. A rubric need not name it: where its
# params do not, it is the check's ``target`` (grader/grading/rubric.py), so it is said once, in the rubric.
TARGET_FUNCTION = "The student's function: the check's target, unless the params name another."


class Params(BaseModel):
    """Base of every check kind's params: strict, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class TargetParams(Params):
    """Params of a check that calls a student function (``function``, filled in from the rubric's target)."""

    function: str = Field(description=TARGET_FUNCTION)


@dataclass(frozen=True)
class CheckKind:
    """A registered kind of check."""

    name: str
    params: type[BaseModel]
    run: Callable[[CheckContext, Any], Verdict]
    needs_kernel: bool
    graded_by: GradedBy
    description: str


def check_kind(
    name: str, params: type[BaseModel] = NoParams, needs_kernel: bool = True, graded_by: GradedBy = "grader"
) -> Callable[[Callable[[CheckContext, Any], Verdict]], CheckKind]:
    """Declare a check kind: in a module of ``CHECK_MODULES``, or in an assignment's ``checks.py`` or ``hidden_checks.py``."""

    def declare(run: Callable[[CheckContext, Any], Verdict]) -> CheckKind:
        description = (run.__doc__ or "").strip().splitlines()[0] if run.__doc__ else name
        return CheckKind(
            name=name, params=params, run=run, needs_kernel=needs_kernel, graded_by=graded_by, description=description
        )

    return declare


@dataclass
class CheckContext:
    """Everything one check may use; built per check, by the grading stage."""

    rubric: Rubric
    check: CheckSpec
    notebook: Any  # the executed notebook (nbformat.NotebookNode); the submitted one if it never ran
    execution: ExecutionRecord | None
    harness: Harness | None
    reference: ReferenceFunctions | None  # the reference implementation's functions, live or replayed
    models: ReferenceModels
    environment: Mapping[str, Any]
    rng: random.Random
    memo: dict[str, Any]  # shared by the checks of one submission; read and written only through once()
    kernel_problem: str | None = None
    seed_key: str = ""  # the run's seed and the submission: hidden inputs derive from it
    submitted: Any = None  # the notebook as submitted, with its saved outputs (what the student saw; None: unknown)

    def once(self, key: str, compute: Callable[[], T]) -> T:
        """``compute()`` once per submission: every check asking for ``key`` gets the first one's value.

        A call into the kernel that several checks judge (one sweep, one loader call) is made once;
        if ``compute`` stops the check (:class:`StopCheck`), nothing is kept and the next check tries again.
        """
        if key not in self.memo:
            self.memo[key] = compute()
        return cast(T, self.memo[key])

    def rng_for(self, name: str) -> random.Random:
        """A random source for hidden inputs that several checks share (same name, same draws)."""
        return random.Random(f"{self.seed_key}:{name}")

    @property
    def timeout_s(self) -> float:
        """Seconds for one call into the kernel for this check."""
        return self.check.timeout_s or self.rubric.limits.call_timeout_s

    @property
    def on_cuda(self) -> bool:
        """Whether the notebook's kernel sees a CUDA device."""
        return bool(self.environment.get("cuda_available"))

    def expected(self, function: Callable[..., Any], *args: Any) -> Any:
        """A ``@reference_side`` function's value on ``args``: computed here, or replayed in a student kit."""
        if self.reference is None:
            return function(*args)
        return self.reference.expected(function, args)

    def tokenizer(self, hub_id: str) -> TokenizerRecipe:
        """The recipe of the tokenizer a student function receives: as the starter's loader returns it."""
        contract = self.rubric.contract.tokenizer
        return tokenizer(hub_id, pad_token=contract.pad_token, padding_side=contract.padding_side)

    def require_harness(self) -> Harness:
        """The harness, or stop with an error saying why the kernel cannot be asked."""
        if self.harness is None:
            raise StopCheck(
                Verdict.error(
                    self.kernel_problem or "The notebook's kernel is not running, so this check could not call your code."
                )
            )
        return self.harness

    def call(
        self,
        function: str,
        *args: Recipe,
        pace_s: float = 0.0,
        figures: bool = False,
        watch: tuple[str, ...] = (),
        cuda: bool = False,
        **kwargs: Recipe,
    ) -> CallOutcome:
        """Call the student's ``function`` in the kernel (arguments are recipes; see :meth:`Harness.call`)."""
        return self.require_harness().call(
            function, list(args), kwargs, timeout_s=self.timeout_s, pace_s=pace_s, figures=figures, watch=watch, cuda=cuda
        )

    def call_with_model(
        self, function: str, hub_id: str, *args: Recipe, device: str = "auto", dtype: str = "float32", **options: Any
    ) -> CallOutcome:
        """Call ``function(model, tokenizer, *args)``: the zoo's ``hub_id`` model and the starter's tokenizer for it."""
        return self.call(
            function, model(model_spec(hub_id, device=device, dtype=dtype)), self.tokenizer(hub_id), *args, **options
        )

    def returned(self, outcome: CallOutcome, what: str, returns: Shape = ANY) -> Any:
        """The value a call returned, of the declared shape ``returns``; or stop the check with a message saying what
        went wrong (the call's failure, or what it should return and what it returned instead)."""
        if not outcome.ok:
            raise StopCheck(failed_call(outcome, what))
        return expect_shape(outcome.value, returns, what)


def first_failure(verdicts: Iterable[Verdict | None]) -> Verdict | None:
    """The first verdict that is not None (judgements return None when all is well), or None."""
    return next((verdict for verdict in verdicts if verdict is not None), None)


def failed_call(outcome: CallOutcome, what: str) -> Verdict:
    """The verdict for a call that did not return: missing, wrong signature, raised, timed out, died."""
    if outcome.status == "missing":
        message = outcome.message or f"The notebook does not define {what}."
        return Verdict.error(_sentence(message), expected=f"{what} defined in the notebook", found="not defined")
    if outcome.status == "signature":
        return Verdict.error(_sentence(outcome.message), expected="the starter's signature", found="a different signature")
    if outcome.status == "raised" and outcome.exception is not None:
        exception = outcome.exception
        details = (exception.traceback,) if exception.traceback else ()
        said = exception.message.strip().rstrip(".")
        placeholder = not said or said in what or any(word in said.casefold() for word in ("todo", "implement", "your code"))
        if exception.is_a("NotImplementedError") and placeholder:  # the starter's placeholder: a function not written yet
            return Verdict.error(
                f"{what} is not written yet: it raises NotImplementedError, as the starter's placeholder does.",
                expected=f"{what} written",
                found="NotImplementedError raised",
                details=details,
            )
        return Verdict.error(f"{what} raised {exception}.", found=f"{exception.type} raised", details=details)
    if outcome.status == "timeout":
        return Verdict.error(f"{what} did not return in time: {outcome.message}.", found="no return (timed out)")
    if outcome.status == "dead":
        return Verdict.error(f"The kernel is not running: {outcome.message}.", found="no kernel")
    if outcome.status == "tampered":
        return tampered_verdict(what, outcome.message)
    detail = outcome.message or (str(outcome.exception) if outcome.exception else "no answer")
    return Verdict.error(f"The grader could not call {what}: {detail}.")


def tampered_verdict(function: str, why: str) -> Verdict:
    """The verdict of a check whose function's call the grader's own evidence contradicts (see grader/kernel/evidence.py)."""
    return Verdict.failed(
        f"The grader's records of {function} were tampered with: {why}. Its checks award no points, and your instructor is told.",
        expected="records the grader's own measurements agree with",
        found="tampered evidence",
        tampered=why,
    )


def expect_shape(value: Any, shape: Shape, call: str) -> Any:
    """``value`` if it has the declared ``shape``; else stop with "<call> should return <shape>, but ..."."""
    verdict = shape_verdict(value, shape, call)
    if verdict is not None:
        raise StopCheck(verdict)
    return value


def shape_verdict(value: Any, shape: Shape, call: str) -> Verdict | None:
    """None if ``value`` has the declared ``shape``; else the failed verdict "<call> should return <shape>, but ..."."""
    problem = shape_problem(value, shape, call)
    if problem is None:
        return None
    message, expected, found = problem
    return Verdict.failed(message, expected=expected, found=found)


def expect_type(value: Any, expected: type | tuple[type, ...], what: str, wanted: str) -> Any:
    """``value`` if it is an instance of ``expected``; else stop with a wrong-type verdict."""
    if isinstance(value, expected) and not (isinstance(value, bool) and bool not in _as_tuple(expected)):
        return value
    raise StopCheck(
        Verdict.failed(f"{what} should be {wanted}, but it is {kind_of(value)}.", expected=wanted, found=kind_of(value))
    )


def number(value: float, unit: str = "") -> str:
    """A number for a feedback sentence: 4 significant digits, thousands separated when large."""
    text = f"{value:.4g}" if abs(value) < 1e5 else f"{value:,.0f}"
    return f"{text} {unit}".strip()


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _sentence(text: str) -> str:
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."
