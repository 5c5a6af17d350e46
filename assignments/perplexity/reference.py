"""Reference implementation of the perplexity exercise (batched, no-grad, token-weighted).

The grader imports this file in its own process and computes expected values with it, on the
same model and tokenizer the student's functions receive. The solution notebook holds the same code.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def load_model_and_tokenizer(model_id: str, precision: str = "float32") -> tuple[Any, Any]:
    """Same id for both; eval mode; CUDA if available else CPU; on CPU float32 whatever was asked."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = DTYPES.get(precision.lower(), torch.float32) if device == "cuda" else torch.float32
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype).to(device)
    model.eval()
    return tokenizer, model


def evaluate_loss(model: Any, tokenizer: Any, texts: list[str], batch_size: int = 4) -> dict[str, Any]:
    """Global token-weighted mean cross-entropy over every predicted token; padding never counts."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    total_loss, total_tokens = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(texts[start : start + batch_size], return_tensors="pt", padding=True).to(model.device)
            labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
            loss = model(**batch, labels=labels).loss
            predicted = int((labels[:, 1:] != -100).sum())  # the first token of each text is not predicted
            total_loss += loss.item() * predicted
            total_tokens += predicted
    loss = total_loss / total_tokens
    return {"loss": loss, "perplexity": math.exp(loss), "tokens": total_tokens}


def time_generation(model: Any, tokenizer: Any, prompt: str, max_new_tokens: int = 32) -> dict[str, Any]:
    """Latency and throughput of one greedy generate call, synchronised on CUDA."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.eos_token_id)
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    latency = time.perf_counter() - start
    new_tokens = output.shape[1] - inputs["input_ids"].shape[1]
    return {"latency_s": latency, "tokens_per_s": new_tokens / latency, "new_tokens": new_tokens}
