"""Reference implementation of Lesson 3, Exercise 1 (post-training quantization with bitsandbytes).

The grader imports this file in its own process and computes expected values with it, on the
same models the student's functions receive. The solution notebook holds the same code.
"""

from __future__ import annotations

import time
from typing import Any

import torch


def get_model_memory_footprint(model: torch.nn.Module) -> float:
    """Memory of the model's parameters and buffers, in MB (1024**2 bytes)."""
    mem_params = sum(param.nelement() * param.element_size() for param in model.parameters())
    mem_bufs = sum(buf.nelement() * buf.element_size() for buf in model.buffers())
    return (mem_params + mem_bufs) / 1024**2


def generate_text_and_time(model: Any, tokenizer: Any, prompt: str, max_new_tokens: int) -> tuple[str, float]:
    """Greedy generation of the prompt's continuation; returns (decoded text, latency in seconds)."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    start_time = time.perf_counter()
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    outputs = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.eos_token_id)
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    end_time = time.perf_counter()
    generated_text = tokenizer.decode(outputs[0], skip_special_tokens=True)
    return generated_text, end_time - start_time


def make_configurations(device_type: str) -> list[dict[str, Any]]:
    """The baseline plus INT8, NF4 and FP4 bitsandbytes configurations of the exercise."""
    from transformers import BitsAndBytesConfig

    on_gpu = device_type == "cuda"
    compute_dtype = torch.float16 if on_gpu else torch.float32
    device_map = "auto" if on_gpu else None
    return [
        {
            "name": "FP16 (Baseline GPU)" if on_gpu else "FP32 (Baseline CPU)",
            "load_args": {"dtype": torch.float16 if on_gpu else torch.float32},
        },
        {
            "name": "INT8 (bitsandbytes)",
            "load_args": {"quantization_config": BitsAndBytesConfig(load_in_8bit=True), "device_map": device_map},
        },
        {
            "name": "NF4 (bitsandbytes)",
            "load_args": {
                "quantization_config": BitsAndBytesConfig(
                    load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=compute_dtype
                ),
                "device_map": device_map,
            },
        },
        {
            "name": "FP4 (bitsandbytes)",
            "load_args": {
                "quantization_config": BitsAndBytesConfig(
                    load_in_4bit=True, bnb_4bit_quant_type="fp4", bnb_4bit_compute_dtype=compute_dtype
                ),
                "device_map": device_map,
            },
        },
    ]
