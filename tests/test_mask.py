"""The kernel runtime's attention mask for padded batches is transformers' own, made without torch.vmap.

The runtime puts it in place of ``transformers.masking_utils.sdpa_mask`` in every kernel (a padded batch
of the tiny model otherwise decodes 2.8 times slower than one prompt, all of it in building the mask):
these tests compare it with transformers' function on every kind of call generate makes, and a padded
greedy generate with it against one without it.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from transformers import masking_utils

from grader.kernel.runtime import _unvectorized_sdpa_mask
from grader.zoo import ModelZoo

ORIGINAL = masking_utils.sdpa_mask_recent_torch
FAST = _unvectorized_sdpa_mask(ORIGINAL)


def padding(batch: int, length: int, pads: list[int], side: str, dtype: torch.dtype) -> torch.Tensor:
    """A 2-D attention mask with ``pads[i]`` padded positions on ``side`` of row ``i``."""
    mask = torch.ones(batch, length, dtype=dtype)
    for row, pad in enumerate(pads):
        if pad:
            mask[row, :pad] = 0 if side == "left" else 1
            if side == "right":
                mask[row, length - pad :] = 0
    return mask


CASES = [
    # (batch, prompt length, pads per row, side)
    (1, 7, [0], "left"),
    (2, 9, [0, 4], "left"),
    (3, 12, [5, 0, 11], "left"),
    (2, 9, [0, 3], "right"),
    (4, 6, [0, 0, 0, 0], "left"),
]


@pytest.mark.parametrize(("batch", "length", "pads", "side"), CASES)
@pytest.mark.parametrize("attention_dtype", [torch.bool, torch.long])
def test_the_mask_equals_transformers_at_every_decoding_step(
    batch: int, length: int, pads: list[int], side: str, attention_dtype: torch.dtype
) -> None:
    new_tokens = 4
    for step, skip in itertools.product(range(new_tokens + 1), (True, False)):
        # Step 0 is the prompt (q = kv = length); each later step one query over the cache so far.
        kv_length = length + step
        cache_position = torch.arange(length) if step == 0 else torch.tensor([kv_length - 1])
        attention_mask = padding(batch, kv_length, pads, side, attention_dtype)
        arguments = {
            "batch_size": batch,
            "cache_position": cache_position,
            "kv_length": kv_length,
            "attention_mask": attention_mask.bool() if attention_dtype == torch.bool else attention_mask,
            "allow_is_causal_skip": skip,
            "dtype": torch.float32,
            "config": None,
        }
        expected, found = ORIGINAL(**arguments), FAST(**arguments)
        if expected is None:
            assert found is None
            continue
        assert found is not None and found.dtype == expected.dtype and found.shape == expected.shape
        assert torch.equal(found, expected), (step, skip)


def test_without_an_attention_mask_and_with_an_offset() -> None:
    for kv_offset, skip in itertools.product((0, 3), (True, False)):
        arguments = {"batch_size": 2, "cache_position": torch.arange(3, 8), "kv_length": 8, "kv_offset": kv_offset}
        expected = ORIGINAL(**arguments, allow_is_causal_skip=skip)
        found = FAST(**arguments, allow_is_causal_skip=skip)
        assert (found is None) == (expected is None)
        if expected is not None:
            assert torch.equal(found, expected)


def test_other_masks_go_to_transformers() -> None:
    window = masking_utils.and_masks(masking_utils.causal_mask_function, masking_utils.sliding_window_overlay(3))
    arguments = {"batch_size": 2, "cache_position": torch.arange(6), "kv_length": 6, "allow_is_causal_skip": False}
    for extra in ({"mask_function": window}, {"local_size": 2}):
        expected = ORIGINAL(**arguments, **extra)
        assert expected is not None and torch.equal(FAST(**arguments, **extra), expected)
    assert not torch.equal(FAST(**arguments, mask_function=window), FAST(**arguments))  # the window was applied


def test_a_padded_batch_generates_the_same_tokens(zoo: ModelZoo, monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(zoo.snapshot("gpt2")))
    tokenizer.pad_token, tokenizer.padding_side = tokenizer.eos_token, "left"
    model = AutoModelForCausalLM.from_pretrained(str(zoo.snapshot("gpt2"))).eval()
    batch = tokenizer(
        ["a short prompt", "a much longer prompt about the tokens of a model", "hi"], return_tensors="pt", padding=True
    )
    settings = {"max_new_tokens": 12, "do_sample": False, "pad_token_id": tokenizer.pad_token_id}
    outputs = {}
    for name, function in (("transformers", ORIGINAL), ("runtime", FAST)):
        monkeypatch.setitem(masking_utils.ALL_MASK_ATTENTION_FUNCTIONS._global_mapping, "sdpa", function)
        for use_cache in (True, False):
            with torch.no_grad():
                outputs[name, use_cache] = model.generate(**batch, **settings, use_cache=use_cache)
    for use_cache in (True, False):
        assert torch.equal(outputs["runtime", use_cache], outputs["transformers", use_cache])
