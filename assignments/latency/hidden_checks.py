"""Hidden check kinds of the ``latency`` assignment: those only its hidden checks use.

The student kit does not ship this module (only ``checks.py``), so neither these kinds' logic nor
their default inputs reach students.
"""

from __future__ import annotations

from pydantic import Field

from grader.checks.base import CheckContext, Params, Verdict, check_kind
from grader.harness import literal
from grader.values import kind_of


class PromptParams(Params):
    """Hidden base texts and targets for build_prompt."""

    model: str = Field("gpt2", description="Hub ID of the tokenizer.")
    function: str = Field("build_prompt", description="The student's function.")
    base_texts: list[str] = Field(min_length=1, description="Hidden base texts; some are drawn.")
    targets: list[int] = Field([60, 300], min_length=2, max_length=2, description="Range [low, high] of target token counts.")
    cases: int = Field(3, ge=1, description="How many (base text, target) cases are drawn.")
    slack: int = Field(2, ge=0, description="Tokens a join may add beyond one repetition of the base text.")


@check_kind("prompt_building", PromptParams)
def prompt_building(context: CheckContext, params: PromptParams) -> Verdict:
    """build_prompt reaches the target token count on hidden texts, without going a repetition past it."""
    reference_tokenizer = context.models.tokenizer(params.model)

    def count(text: str) -> int:
        return len(reference_tokenizer(text)["input_ids"])

    bases = context.rng.sample(params.base_texts, min(params.cases, len(params.base_texts)))
    for base in bases:
        target = context.rng.randint(*params.targets)
        call = f"{params.function}(tokenizer, {base!r}, {target})"
        prompt = context.returned(
            context.call(params.function, context.tokenizer(params.model), literal(base), literal(target)), call
        )
        if not isinstance(prompt, str):
            return Verdict.failed(f"{call} should return a string, but it returned {kind_of(prompt)}.", found=kind_of(prompt))
        tokens = count(prompt)
        if base.strip() not in prompt:
            return Verdict.failed(
                f"{call} returned a prompt that does not contain the base text: repeat base_text itself.",
                expected=f"repetitions of {base!r}",
                found=repr(prompt[:80]),
            )
        if tokens < target:
            why = (
                " It counts characters, not tokens: measure len(tokenizer(prompt)['input_ids'])."
                if len(prompt) >= target
                else " Keep repeating until the tokenized prompt reaches the target."
            )
            return Verdict.failed(
                f"{call} returned a prompt of {tokens} tokens, short of the target {target}.{why}",
                expected=f"at least {target} tokens",
                found=f"{tokens} tokens",
            )
        limit = target + count(base) + params.slack
        if tokens > limit:
            return Verdict.failed(
                f"{call} returned a prompt of {tokens} tokens, more than one repetition past the target {target}: "
                "stop repeating as soon as the tokenized prompt reaches the target (count tokens with the tokenizer, "
                "not words or characters).",
                expected=f"{target} to {limit} tokens",
                found=f"{tokens} tokens",
            )
    return Verdict.passed(f"{params.function} reaches the target token count on {len(bases)} hidden base texts.")
