"""Reference implementation of the quantization exercise (seeds 001 and 002).

Baseline vs optimized generation: Optimum + ONNX Runtime dynamic INT8 post-training
quantization, a use_cache x padding ablation, batching, a perplexity comparison, a results
table, edge prompts and a controller. The grader imports this file in its own process and
computes expected values with it, on the same tiny model the student's functions receive. The
solution notebook holds the same code.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

PPX_BATCH_SIZE = 4
QUANTIZED_FILE = "model_quantized.onnx"


def load_model_and_tokenizer(model_id: str) -> tuple[Any, Any]:
    """Tokenizer and model from the same id; eval mode, on CUDA if available; a pad token for batches."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"  # decoder-only generation continues from the last real token
    model = AutoModelForCausalLM.from_pretrained(model_id, dtype=torch.float32).to(device)
    return tokenizer, model.eval()


def measure_generation(
    model: Any, tokenizer: Any, prompts: list[str], max_new_tokens: int = 32, use_cache: bool = True
) -> dict[str, Any]:
    """One untimed warm-up generate, then one timed generate of the whole batch of prompts."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    inputs = tokenizer(list(prompts), return_tensors="pt", padding=True).to(model.device)
    settings = {"do_sample": False, "use_cache": use_cache, "pad_token_id": tokenizer.pad_token_id}
    on_cuda = model.device.type == "cuda"
    with torch.inference_mode():
        model.generate(**inputs, max_new_tokens=4, **settings)  # warm-up, not timed
        if on_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        output = model.generate(**inputs, max_new_tokens=max_new_tokens, **settings)
        if on_cuda:
            torch.cuda.synchronize()
        latency = time.perf_counter() - start
    rows, prompt_length = inputs["input_ids"].shape
    new_tokens = int(rows * (output.shape[1] - prompt_length))  # every sequence's new tokens
    return {
        "latency_s": latency,
        "new_tokens": new_tokens,
        "tokens_per_s": new_tokens / latency,
        "ms_per_token": 1000 * latency / max(new_tokens, 1),
    }


def run_static_ptq_optimum(model_id: str, save_dir: str) -> tuple[Any, str]:
    """Export to ONNX with Optimum, quantize to dynamic INT8 with ONNX Runtime, load the result."""
    from optimum.onnxruntime import ORTModelForCausalLM, ORTQuantizer
    from optimum.onnxruntime.configuration import AutoQuantizationConfig

    exported = ORTModelForCausalLM.from_pretrained(model_id, export=True)
    quantizer = ORTQuantizer.from_pretrained(exported)
    config = AutoQuantizationConfig.avx2(is_static=False, per_channel=False)
    quantizer.quantize(save_dir=save_dir, quantization_config=config)
    quantized = ORTModelForCausalLM.from_pretrained(save_dir, file_name=QUANTIZED_FILE)
    return quantized, "onnxruntime int8 (dynamic PTQ, Optimum ORTQuantizer)"


def ablate_cache_and_padding(
    model: Any, tokenizer: Any, prompts: list[str], max_new_tokens: int = 32
) -> dict[str, dict[str, Any]]:
    """measure_generation for every use_cache in (True, False) x padding side in ("left", "right")."""
    original = tokenizer.padding_side
    results = {}
    try:
        for use_cache in (True, False):
            for side in ("left", "right"):
                tokenizer.padding_side = side
                results[f"use_cache={use_cache},padding={side}"] = measure_generation(
                    model, tokenizer, prompts, max_new_tokens=max_new_tokens, use_cache=use_cache
                )
    finally:
        tokenizer.padding_side = original
    return results


def measure_batched(model: Any, tokenizer: Any, prompts: list[str], batch_sizes: list[int], max_new_tokens: int = 32) -> Any:
    """One row per batch size: batch_size, latency_s, tokens_per_s (all sequences), latency_per_sample_s."""
    import pandas as pd

    rows = []
    for batch_size in batch_sizes:
        batch = [prompts[i % len(prompts)] for i in range(batch_size)]
        metrics = measure_generation(model, tokenizer, batch, max_new_tokens=max_new_tokens)
        rows.append(
            {
                "batch_size": batch_size,
                "latency_s": metrics["latency_s"],
                "tokens_per_s": metrics["tokens_per_s"],
                "latency_per_sample_s": metrics["latency_s"] / batch_size,
            }
        )
    return pd.DataFrame(rows)


def compare_ppplx(models: dict[str, Any], tokenizer: Any, texts: list[str]) -> dict[str, dict[str, float]]:
    """Token-weighted loss and perplexity per model: padding masked, summed over tokens, exp at the end."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    original = tokenizer.padding_side
    tokenizer.padding_side = "right"  # GPT-2's absolute positions: real tokens keep positions 0..n-1
    results = {}
    try:
        for label, model in models.items():
            total_loss, total_tokens = 0.0, 0
            with torch.inference_mode():
                for start in range(0, len(texts), PPX_BATCH_SIZE):
                    batch = tokenizer(texts[start : start + PPX_BATCH_SIZE], return_tensors="pt", padding=True).to(model.device)
                    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
                    logits = model(**batch).logits[:, :-1].float()
                    targets = labels[:, 1:]
                    total_loss += torch.nn.functional.cross_entropy(
                        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100, reduction="sum"
                    ).item()
                    total_tokens += int((targets != -100).sum())
            loss = total_loss / total_tokens
            results[label] = {"loss": loss, "ppx": math.exp(loss)}
    finally:
        tokenizer.padding_side = original
    return results


EDGE_PROMPTS = {
    "very_short": "Hi",
    "very_long": " ".join(["The quick brown fox jumps over the lazy dog."] * 30),
    "multi_line": "Shopping list:\n- eggs\n- milk\n- bread\nRemember:",
    "repetitive": "la " * 40,
}


def probe_edge_prompts(model: Any, tokenizer: Any, max_new_tokens: int = 32) -> dict[str, dict[str, Any]]:
    """measure_generation on a very short, a very long, a multi-line and a repetitive prompt."""
    return {
        kind: measure_generation(model, tokenizer, [prompt], max_new_tokens=max_new_tokens)
        for kind, prompt in EDGE_PROMPTS.items()
    }
