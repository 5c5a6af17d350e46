"""Fast tests of judging a generate call's inputs against the arguments a function was given (made-up events)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from transformers import GenerationConfig

from grader.checks.timing import carries_prompt, judge_generate_inputs, max_matching
from grader.kernel.runtime import _new_tokens_limit, _stopped_early, _unpadded_rows
from tests.events import generate_event


class WordTokenizer:
    """A made-up tokenizer: one id per word (ids from a fixed vocabulary), 0 is the pad/special token."""

    def __init__(self) -> None:
        self.vocabulary: dict[str, int] = {}

    def ids(self, text: str) -> list[int]:
        return [self.vocabulary.setdefault(word, len(self.vocabulary) + 1) for word in text.split()]

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": self.ids(text)}

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        words = {index: word for word, index in self.vocabulary.items()}
        return " ".join(words.get(i, "<s>") for i in ids if not (skip_special_tokens and i == 0))


def event(rows: list[list[int]], limit: Any = 8, **fields: Any) -> dict[str, Any]:
    """A made-up generate event with these unpadded rows."""
    width = max(len(row) for row in rows)
    made = {"rows": rows, "input_shape": [len(rows), width], "output_shape": [len(rows), width + 8], "new_tokens_limit": limit}
    return generate_event(valid=False, **{**made, **fields})


TOKENIZER = WordTokenizer()
PROMPTS = ["once upon a time", "the cat sat on the mat", "hello"]


def test_the_prompts_passed_in_any_order_pass() -> None:
    rows = [TOKENIZER.ids(PROMPTS[2]), TOKENIZER.ids(PROMPTS[0]), TOKENIZER.ids(PROMPTS[1])]
    assert judge_generate_inputs(TOKENIZER, event(rows), PROMPTS, 8, "f") is None


def test_special_tokens_or_a_template_around_the_prompt_pass() -> None:
    row = [0, *TOKENIZER.ids("user says"), *TOKENIZER.ids(PROMPTS[0]), 0]
    assert carries_prompt(TOKENIZER, row, PROMPTS[0])
    assert judge_generate_inputs(TOKENIZER, event([row]), [PROMPTS[0]], 8, "f") is None


def test_a_fixed_prompt_instead_of_the_argument_fails_and_says_what_ran() -> None:
    verdict = judge_generate_inputs(TOKENIZER, event([TOKENIZER.ids("a fixed global prompt")]), [PROMPTS[1]], 8, "f")
    assert verdict is not None and verdict.outcome == "failed"
    assert "a fixed global prompt" in verdict.message
    assert "cat" not in verdict.message  # the hidden prompt is not shown


def test_a_batch_missing_a_prompt_or_repeating_one_fails() -> None:
    repeated = [TOKENIZER.ids(PROMPTS[0]), TOKENIZER.ids(PROMPTS[0]), TOKENIZER.ids(PROMPTS[1])]
    assert judge_generate_inputs(TOKENIZER, event(repeated), PROMPTS, 8, "f") is not None
    assert judge_generate_inputs(TOKENIZER, event(repeated[1:]), PROMPTS, 8, "f") is not None


@pytest.mark.parametrize(("limit", "wrong"), [(8, False), (50, True), (None, False)])
def test_the_limit_in_force_must_be_max_new_tokens(limit: Any, wrong: bool) -> None:
    verdict = judge_generate_inputs(TOKENIZER, event([TOKENIZER.ids(PROMPTS[2])], limit), [PROMPTS[2]], 8, "f")
    assert (verdict is not None) is wrong


def test_no_readable_ids_fail() -> None:
    assert judge_generate_inputs(TOKENIZER, generate_event(rows=None), [PROMPTS[2]], 8, "f") is not None
    assert judge_generate_inputs(TOKENIZER, generate_event(valid=False, rows=[["x"]]), [PROMPTS[2]], 8, "f") is not None


def test_matching_gives_each_row_a_distinct_prompt() -> None:
    assert max_matching([[0, 1], [0]]) == 2
    assert max_matching([[0], [0]]) == 1


def test_the_runtime_records_each_row_without_its_padding() -> None:
    inputs = torch.tensor([[9, 9, 5, 6], [1, 2, 3, 4]])
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    assert _unpadded_rows(inputs, mask) == [[5, 6], [1, 2, 3, 4]]
    assert _unpadded_rows(inputs, None) == [[9, 9, 5, 6], [1, 2, 3, 4]]


class Model:
    generation_config = GenerationConfig(max_length=20)


@pytest.mark.parametrize(
    ("kwargs", "limit"),
    [
        ({"max_new_tokens": 7}, 7),
        ({"max_length": 12}, 8),  # max_length counts the prompt's 4 tokens
        ({}, 16),  # the model's default max_length of 20
        ({"generation_config": GenerationConfig(max_new_tokens=5)}, 5),
        ({"generation_config": GenerationConfig(max_new_tokens=5), "max_new_tokens": 3}, 3),
    ],
)
def test_the_runtime_records_the_new_token_limit_generate_runs_with(kwargs: dict[str, Any], limit: int) -> None:
    assert _new_tokens_limit(Model(), kwargs, torch.zeros(1, 4, dtype=torch.long)) == limit


def test_an_end_of_text_counts_as_the_end_only_where_the_model_chose_it() -> None:
    """A generate that ended before its limit ended naturally only where each row stopped at the model's own
    end-of-text, picked by the model's own greedy choice (9 is the model's end-of-text, 5 a full stop)."""
    new = torch.tensor([[3, 4, 9], [3, 9, 9]])  # the second row ended first, padded with the end-of-text
    own = [torch.tensor([3, 3]), torch.tensor([4, 9]), torch.tensor([9, 9])]
    assert not _stopped_early(new, [9], [9], own)
    assert not _stopped_early(new, [9], [9], None)  # choices not recorded: the end-of-text is believed
    assert _stopped_early(torch.tensor([[3, 4, 5]]), [9, 5], [9], None)  # a full stop passed as an end-of-text
    assert _stopped_early(torch.tensor([[3, 4]]), [9], [9], None)  # no end-of-text at all (max_time)
    forced = [torch.tensor([3]), torch.tensor([4]), torch.tensor([7])]  # the model would have gone on with 7
    assert _stopped_early(torch.tensor([[3, 4, 9]]), [9], [9], forced)
    beams = [torch.tensor([3, 3, 3, 3])] * 3  # four rows per pass for two sequences: not read
    assert not _stopped_early(new, [9], [9], beams)


def test_a_forward_borrowed_from_another_model_is_what_the_generate_ran() -> None:
    """``model.forward = twin.forward``: the quantized model's generate computes with the float twin; accelerate's
    hooks (a partial of the model itself) and a wrapper of its own forward are still the model."""
    import functools

    from grader.kernel.runtime import forward_runner

    model, twin = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2).double()
    assert forward_runner(model) is model
    model.forward = twin.forward  # type: ignore[method-assign]
    assert forward_runner(model) is twin
    model.forward = functools.wraps(twin.forward)(lambda *args: twin.forward(*args))  # type: ignore[method-assign]
    assert forward_runner(model) is twin
    model.forward = functools.partial(lambda module, x: x, model)  # type: ignore[method-assign]
    assert forward_runner(model) is model
    model.forward = functools.wraps(type(model).forward.__get__(model))(lambda x: x)  # type: ignore[method-assign]
    assert forward_runner(model) is model


def test_the_runtime_names_the_code_of_the_notebook_s_a_model_runs() -> None:
    """A module class's forward replaced (by the notebook's function or by another library routine), a submodule's
    forward set to the notebook's code, a class the notebook made that overrides a library block: each is named, and
    the watch taken as a generate began sees the class change; the library's own code, restored, is nothing."""
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.models.gpt2 import modeling_gpt2

    from grader.kernel.runtime import code_changed, model_code, remember_class

    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=50, n_positions=32))
    assert model_code(model)[0] == []
    original = modeling_gpt2.GPT2MLP.forward
    _, watch = model_code(model)
    try:
        modeling_gpt2.GPT2MLP.forward = lambda self, hidden_states: torch.zeros_like(hidden_states)  # type: ignore[method-assign]
        assert code_changed(watch)
        assert model_code(model)[0] == ["GPT2MLP.forward"]
        modeling_gpt2.GPT2MLP.forward = torch.nn.Identity.forward  # type: ignore[assignment]
        assert model_code(model)[0] == ["GPT2MLP.forward"]
    finally:
        modeling_gpt2.GPT2MLP.forward = original  # type: ignore[method-assign]
    assert model_code(model)[0] == []

    block = model.transformer.h[1]
    block.forward = lambda hidden_states, *args, **kwargs: (hidden_states,)  # type: ignore[method-assign]
    assert model_code(model)[0] == ["transformer.h.1.forward (set on the module)"]
    del block.forward

    class SkippedBlock(modeling_gpt2.GPT2Block):
        def forward(self, hidden_states: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return (hidden_states,)

    remember_class(SkippedBlock)  # as the runtime does for every module class made once it is installed
    block.__class__ = SkippedBlock
    assert model_code(model)[0] == ["SkippedBlock.forward (a class the notebook made)"]
    block.__class__ = modeling_gpt2.GPT2Block

    # The functions its classes' modules hold, the attention functions registered, torch's functions.
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    eager, sdpa, addmm = modeling_gpt2.eager_attention_forward, ALL_ATTENTION_FUNCTIONS["sdpa"], torch.addmm
    try:
        modeling_gpt2.eager_attention_forward = lambda *args, **kwargs: None
        ALL_ATTENTION_FUNCTIONS["sdpa"] = lambda *args, **kwargs: None
        torch.addmm = lambda *args, **kwargs: addmm(*args, **kwargs)
        assert model_code(model)[0] == ["ALL_ATTENTION_FUNCTIONS['sdpa']", "modeling_gpt2.eager_attention_forward", "torch.addmm"]
    finally:
        modeling_gpt2.eager_attention_forward, torch.addmm = eager, addmm
        ALL_ATTENTION_FUNCTIONS["sdpa"] = sdpa
    assert model_code(model)[0] == []

    class Scaled(torch.nn.Module):  # a module of the notebook's own, overriding no library class's routine
        def forward(self, x: Any) -> Any:
            return x

    remember_class(Scaled)
    model.extra = Scaled()
    assert model_code(model)[0] == []


def test_work_added_from_settings_counts_as_processors_of_the_call() -> None:
    from grader.kernel.runtime import _custom_processors

    class Model:
        generation_config = GenerationConfig()

    model = Model()
    assert _custom_processors(model, {}) == 0
    assert _custom_processors(model, {"min_new_tokens": 8, "max_new_tokens": 8}) == 0  # a forced length is no extra work
    assert _custom_processors(model, {"repetition_penalty": 1.3, "logits_processor": [object()]}) == 2
    model.generation_config = GenerationConfig(bad_words_ids=[[1, 2]])
    assert _custom_processors(model, {}) == 1  # set on the model's generation config: every call does the work
