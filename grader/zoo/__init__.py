"""The hermetic model zoo: tiny GPT-2 models served under real hub IDs, offline.

Grading must not need the network, yet students write
``AutoModelForCausalLM.from_pretrained("gpt2")``. The zoo trains a tiny GPT-2 (byte-level
BPE tokenizer and all) on ``corpus.txt`` in a few seconds, deterministically, caches it, and
lays it out as a Hugging Face hub cache. A kernel started with :meth:`ModelZoo.kernel_env`
then resolves ``"gpt2"`` to the tiny model with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

from grader.zoo.build import TINY_MODELS, ModelZoo, TinyModel, default_cache_dir

__all__ = ["TINY_MODELS", "ModelZoo", "TinyModel", "default_cache_dir"]
