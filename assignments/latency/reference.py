"""Reference implementation of the latency exercise (seed 000): latency vs prompt length and precision.

The grader imports this file in its own process and computes expected values with it, on the
same tiny model the student's functions receive. The solution notebook holds the same code.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

PRECISIONS = {"float32": torch.float32, "float16": torch.float16}


def resolve_precision(precision: str, device: str) -> tuple[torch.dtype, str]:
    """'float32' / 'float16' in any capitalisation -> (dtype, label); float16 on the CPU falls back to float32."""
    name = str(precision).strip().lower()
    if name not in PRECISIONS:
        raise ValueError(f"Unsupported precision {precision!r}: use one of {', '.join(PRECISIONS)}.")
    if name == "float16" and device == "cpu":
        return torch.float32, "float32 (float16 requested; CPU fallback)"
    return PRECISIONS[name], name


def load_model_and_tokenizer(candidates: list[str], precision: str = "float32") -> tuple[Any, Any, str, str]:
    """Try candidates in order; the first that loads wins: (tokenizer, model, model_id, dtype_label)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype, label = resolve_precision(precision, device)
    failures = []
    for model_id in candidates:
        try:
            tokenizer = AutoTokenizer.from_pretrained(model_id)
            model = AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype).to(device)
        except Exception as error:  # any failure moves on to the next candidate
            failures.append(f"{model_id} ({type(error).__name__})")
            continue
        model.eval()
        return tokenizer, model, model_id, label
    raise RuntimeError(f"None of the candidate models could be loaded; tried: {', '.join(failures)}")


def measure_generation(
    model: Any, tokenizer: Any, prompt: str, max_new_tokens: int = 32, use_cache: bool = True
) -> dict[str, Any]:
    """One untimed warm-up generate, then one timed generate, synchronised on CUDA."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    settings = {"do_sample": False, "use_cache": use_cache, "pad_token_id": tokenizer.eos_token_id}
    with torch.inference_mode():
        model.generate(**inputs, max_new_tokens=4, **settings)  # warm-up, not timed
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        output = model.generate(**inputs, max_new_tokens=max_new_tokens, **settings)
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        latency = time.perf_counter() - start
    new_tokens = int(output.shape[1] - inputs["input_ids"].shape[1])
    return {
        "latency_s": latency,
        "new_tokens": new_tokens,
        "tokens_per_s": new_tokens / latency,
        "ms_per_token": 1000 * latency / max(new_tokens, 1),
    }


def build_prompt(tokenizer: Any, base_text: str, target_tokens: int) -> str:
    """Repeat base_text until the tokenized prompt has at least target_tokens tokens."""
    prompt = base_text
    while len(tokenizer(prompt)["input_ids"]) < target_tokens:
        prompt += " " + base_text
    return prompt


def sweep_prompt_lengths(
    model: Any, tokenizer: Any, base_text: str, lengths: list[int], max_new_tokens: int = 32, use_cache: bool = True
) -> Any:
    """One row per length (prompt_tokens, latency_s, tokens_per_s, ms_per_token) and the two plots."""
    import matplotlib.pyplot as plt
    import pandas as pd

    rows = []
    for length in lengths:
        prompt = build_prompt(tokenizer, base_text, length)
        metrics = measure_generation(model, tokenizer, prompt, max_new_tokens=max_new_tokens, use_cache=use_cache)
        rows.append({"prompt_tokens": len(tokenizer(prompt)["input_ids"]), **metrics})
    frame = pd.DataFrame(rows)
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(frame["prompt_tokens"], frame["latency_s"], marker="o")
    left.set(xlabel="Prompt length (tokens)", ylabel="Latency (s)", title="Latency vs prompt length")
    right.plot(frame["prompt_tokens"], frame["tokens_per_s"], marker="o")
    right.set(xlabel="Prompt length (tokens)", ylabel="Tokens per second", title="Throughput vs prompt length")
    figure.tight_layout()
    plt.show()
    return frame


def sweep_precisions(candidates: list[str], precisions: list[str], prompt: str, max_new_tokens: int = 32) -> dict[str, dict]:
    """Metrics of measure_generation keyed by dtype label, same prompt and settings for each."""
    results = {}
    for precision in precisions:
        tokenizer, model, _, label = load_model_and_tokenizer(candidates, precision)
        results[label] = measure_generation(model, tokenizer, prompt, max_new_tokens=max_new_tokens)
        del model
    return results
