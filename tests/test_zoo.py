"""The hermetic zoo: deterministic, offline, served under hub IDs, with the traits checks need."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader.errors import ZooError
from grader.grading.reference import ReferenceModels
from grader.zoo import ModelZoo


def test_builds_deterministically(zoo: ModelZoo, tmp_path: Path) -> None:
    fresh = ModelZoo(tmp_path)
    assert fresh.key == zoo.key
    fresh.ensure_built()
    built = json.loads((fresh.root / "complete.json").read_text())
    cached = json.loads((zoo.root / "complete.json").read_text())
    assert built["models"] == cached["models"]


def test_serves_hub_ids_offline_with_the_network_unreachable(zoo: ModelZoo) -> None:
    script = (
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "for hub_id in ['gpt2', 'openai-community/gpt2', 'distilgpt2']:\n"
        "    model = AutoModelForCausalLM.from_pretrained(hub_id)\n"
        "    tokenizer = AutoTokenizer.from_pretrained(hub_id)\n"
        "    print(hub_id, model.config.n_layer, model.config.n_embd, type(tokenizer).__name__)\n"
        "try:\n"
        "    AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3-8B')\n"
        "except OSError:\n"
        "    print('unknown id refused')\n"
    )
    # An unreachable endpoint and proxy: any attempt to use the network would fail loudly.
    env = {
        **os.environ,
        **zoo.kernel_env(),
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
    }
    completed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.splitlines() == [
        "gpt2 2 128 GPT2TokenizerFast",
        "openai-community/gpt2 2 128 GPT2TokenizerFast",
        "distilgpt2 1 128 GPT2TokenizerFast",
        "unknown id refused",
    ]


def test_unknown_hub_ids_are_a_clear_error(zoo: ModelZoo) -> None:
    with pytest.raises(ZooError, match=r"no model for hub ID 'llama'.*serves: gpt2"):
        zoo.verify(["gpt2", "llama"])
    assert zoo.kernel_env()["HF_HUB_OFFLINE"] == "1"


def test_keeps_the_traits_the_checks_rely_on(zoo: ModelZoo) -> None:
    models = ReferenceModels(zoo)
    model = models.model({"hub_id": "gpt2"})
    tokenizer = models.tokenizer("gpt2")
    assert sum(b.numel() for b in model.buffers()) > 0  # GPT-2's causal-mask buffers
    assert model.lm_head.weight is model.transformer.wte.weight  # tied embeddings
    assert tokenizer.eos_token == "<|endoftext|>" and model.config.eos_token_id == tokenizer.eos_token_id

    def footprint(spec: dict) -> int:
        loaded = models.model(spec)
        return sum(t.nelement() * t.element_size() for t in [*loaded.parameters(), *loaded.buffers()])

    fp32, int8, nf4 = (footprint({"hub_id": "gpt2", "quantization": q}) for q in ("none", "int8", "nf4"))
    assert fp32 > int8 * 1.4 and int8 > nf4


def test_is_trained_so_text_differs_in_loss_and_generation_makes_sense(zoo: ModelZoo) -> None:
    models = ReferenceModels(zoo)
    model, tokenizer = models.model({"hub_id": "gpt2"}), models.tokenizer("gpt2")

    def loss(text: str) -> float:
        ids = tokenizer(text, return_tensors="pt").input_ids
        with torch.no_grad():
            return float(model(input_ids=ids, labels=ids).loss)

    assert loss("Zebra quantum violin 42 xylophone; grumpy nebula!") > 20 * loss("The quick brown fox jumps over the lazy dog.")

    def greedy(prompt: str, tokens: int = 12) -> tuple[str, int]:
        inputs = tokenizer(prompt, return_tensors="pt")
        output = model.generate(**inputs, max_new_tokens=tokens, do_sample=False, pad_token_id=tokenizer.eos_token_id)
        new = output[0][inputs.input_ids.shape[1] :]
        return tokenizer.decode(new, skip_special_tokens=True), len(new)

    assert greedy("The capital of France is")[0].startswith(" Paris")
    text, count = greedy("Thank you for reading.", 30)
    assert text.strip() == "The end." and count < 30  # one prompt stops early at EOS


def test_a_price_measured_again_is_never_dearer(zoo: ModelZoo) -> None:
    """The price of a token (what a generate's claimed speed is checked against) measured again keeps the lower
    of the two: a run is made dearer by a busy machine, never cheaper than the model allows."""
    models = ReferenceModels(zoo)
    price = models.token_price("gpt2")
    assert price is not None and 1e-5 < price < 0.05
    models._cache["price:gpt2"] = 100 * price  # as if measured on a busy moment
    assert models.token_price("gpt2") == 100 * price  # cached
    assert models.token_price("gpt2", again=True) < 10 * price
    models._cache["price:gpt2"] = price / 100
    assert models.token_price("gpt2", again=True) == price / 100
    assert models.lowest_token_price(again=True) <= price / 100
