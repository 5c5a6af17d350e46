"""Sources of the perplexity notebooks: the starter, the solution, and sample mistakes.

``scripts/build_notebooks.py`` writes ``starter.ipynb`` and ``solution.ipynb`` here and the
sample submissions under ``submissions/perplexity/``. The exercise is seed 003
(shared/seeds/003_ddd57d2351110af5.txt): batched, no-grad, token-weighted loss, perplexity as
exp of the global loss, and a generation timing block.
"""

from __future__ import annotations

ASSIGNMENT = "perplexity"

TITLE = """# Exercise 2: Perplexity — batched, no-grad, token-weighted

Load a causal language model and its tokenizer, evaluate the model's **token-level average loss** on a small corpus in
batches with gradients off, turn it into **perplexity**, and time one generation.

What a good run shows: a load confirmation (model id, device, dtype), an evaluation summary (average loss and
perplexity) and a latency report for a reference prompt.

Useful documentation:
- Auto classes: https://huggingface.co/docs/transformers/en/model_doc/auto
- Perplexity of fixed-length models: https://huggingface.co/docs/transformers/en/perplexity
- `torch.inference_mode`: https://pytorch.org/docs/stable/generated/torch.inference_mode.html
- `torch.cuda.synchronize`: https://pytorch.org/docs/stable/generated/torch.cuda.synchronize.html"""

IMPORTS = """import math
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

MODEL_ID = "gpt2"
PRECISION = "float16"  # used on a GPU; the CPU always runs float32
BATCH_SIZE = 4
PROMPT = "The capital of France is"
EVAL_TEXTS = [
    "The capital of France is Paris. Paris is a large city on the river Seine.",
    "Once upon a time, in a land far, far away, there lived a young princess who loved to read books.",
    "To be or not to be, that is the question.",
    "The quick brown fox jumps over the lazy dog.",
    "A language model predicts the next token from the tokens that came before it.",
    "Purple elephants negotiate quietly.",
    "Quantization stores the weights of a model with fewer bits, so the model needs less memory.",
    "Seven umbrellas dance.",
    "Perplexity is the exponential of the average loss per token.",
]"""

LOADER_MD = """## 1. Load the model and tokenizer

Load both from the **same** model id, on CUDA if available (else the CPU), in eval mode. On the CPU use float32
whatever precision was asked for. GPT-2 has no padding token: reuse its end-of-text token."""

LOADER_STARTER = '''def load_model_and_tokenizer(model_id: str, precision: str = "float32"
                             ) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Same id for both; eval mode; CUDA if available else CPU; on CPU float32 whatever was asked."""
    # TODO: pick the device: CUDA if available, else the CPU
    # TODO: resolve the dtype from `precision` ("float32", "float16"); on the CPU always torch.float32
    # TODO: load the tokenizer and the model from the same model_id; give the tokenizer a pad token
    # TODO: move the model to the device and put it in eval mode
    raise NotImplementedError("load_model_and_tokenizer")'''

LOADER_SOLUTION = '''def load_model_and_tokenizer(model_id: str, precision: str = "float32"
                             ) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Same id for both; eval mode; CUDA if available else CPU; on CPU float32 whatever was asked."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    dtype = dtypes.get(precision.lower(), torch.float32) if device == "cuda" else torch.float32
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype).to(device)
    model.eval()
    return tokenizer, model'''

LOAD_RUN = """tokenizer, model = load_model_and_tokenizer(MODEL_ID, PRECISION)
print(f"Loaded {MODEL_ID} on {model.device} ({str(model.dtype).replace('torch.', '')})")"""

EVALUATE_MD = """## 2. Batched, no-grad, token-weighted loss

For each batch, pass `labels` so the model computes the cross-entropy of every predicted token (it shifts the labels
itself). Padding must never count: set the labels of padding positions to -100. The loss the model returns is the
mean over *that batch's* predicted tokens, so weight it by how many tokens the batch predicted, add up, and divide by
the total at the end: the **global token-weighted average**. Perplexity is `exp` of that global loss."""

EVALUATE_STARTER = '''def evaluate_loss(model, tokenizer, texts: list[str], batch_size: int = 4) -> dict:
    """Batched evaluation with gradients off. Returns loss (global token-weighted mean
    cross-entropy over all predicted tokens), perplexity (= exp(loss)) and tokens (how many
    tokens were predicted). Padding never counts."""
    total_loss, total_tokens = 0.0, 0
    # TODO: turn gradients off for the whole loop (torch.no_grad() or torch.inference_mode())
    for start in range(0, len(texts), batch_size):
        batch_texts = texts[start:start + batch_size]
        # TODO: tokenize the batch with padding and move it to the model's device
        # TODO: labels = input_ids with padding positions set to -100
        # TODO: run the model with the labels; its loss is the mean over this batch's predicted tokens
        # TODO: add loss * (number of predicted tokens in this batch) to total_loss, and that number to total_tokens
        #       (the first token of each text is not predicted: count labels[:, 1:] != -100)
    # TODO: the global token-weighted loss, then perplexity = exp(loss)
    raise NotImplementedError("evaluate_loss")'''

EVALUATE_SOLUTION = '''def evaluate_loss(model, tokenizer, texts: list[str], batch_size: int = 4) -> dict:
    """Batched evaluation with gradients off. Returns loss (global token-weighted mean
    cross-entropy over all predicted tokens), perplexity (= exp(loss)) and tokens (how many
    tokens were predicted). Padding never counts."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    total_loss, total_tokens = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch_texts = texts[start:start + batch_size]
            batch = tokenizer(batch_texts, return_tensors="pt", padding=True).to(model.device)
            labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
            out = model(**batch, labels=labels)
            predicted = int((labels[:, 1:] != -100).sum())
            total_loss += out.loss.item() * predicted
            total_tokens += predicted
    loss = total_loss / total_tokens
    return {"loss": loss, "perplexity": math.exp(loss), "tokens": total_tokens}'''

EVALUATE_RUN = """evaluation = evaluate_loss(model, tokenizer, EVAL_TEXTS, BATCH_SIZE)
print(f"Average loss    : {evaluation['loss']:.4f} (over {evaluation['tokens']} predicted tokens)")
print(f"Final perplexity: {evaluation['perplexity']:.2f}")"""

TIMING_MD = """## 3. Generation timing

Time one `generate` call on a reference prompt. On a GPU, synchronise right before starting and right after
finishing the timer. Report latency in seconds and tokens per second, counting the new tokens in the output (the
model may stop early at its end-of-text token)."""

TIMING_STARTER = '''def time_generation(model, tokenizer, prompt: str, max_new_tokens: int = 32) -> dict:
    """latency_s and tokens_per_s for one generate call, synchronised on CUDA."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    # TODO: synchronise on CUDA, start a high-resolution timer
    # TODO: one greedy model.generate call with max_new_tokens
    # TODO: synchronise on CUDA, stop the timer
    # TODO: count the new tokens in the output; return latency_s and tokens_per_s
    raise NotImplementedError("time_generation")'''

TIMING_SOLUTION = '''def time_generation(model, tokenizer, prompt: str, max_new_tokens: int = 32) -> dict:
    """latency_s and tokens_per_s for one generate call, synchronised on CUDA."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                            pad_token_id=tokenizer.eos_token_id)
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    latency = time.perf_counter() - start
    new_tokens = output.shape[1] - inputs["input_ids"].shape[1]
    return {"latency_s": latency, "tokens_per_s": new_tokens / latency, "new_tokens": new_tokens}'''

TIMING_RUN = """timing = time_generation(model, tokenizer, PROMPT, max_new_tokens=32)
print(f"Latency     : {timing['latency_s']:.3f} s")
print(f"Throughput  : {timing['tokens_per_s']:.1f} tokens/s")"""


def _cells(loader: str, evaluate: str, timing: str) -> list[tuple[str, str]]:
    return [
        ("markdown", TITLE),
        ("code", IMPORTS),
        ("markdown", LOADER_MD),
        ("code", loader),
        ("code", LOAD_RUN),
        ("markdown", EVALUATE_MD),
        ("code", evaluate),
        ("code", EVALUATE_RUN),
        ("markdown", TIMING_MD),
        ("code", timing),
        ("code", TIMING_RUN),
    ]


def starter_cells() -> list[tuple[str, str]]:
    """(cell type, source) of the starter notebook, in order."""
    return _cells(LOADER_STARTER, EVALUATE_STARTER, TIMING_STARTER)


def solution_cells() -> list[tuple[str, str]]:
    """(cell type, source) of the solution notebook, in order."""
    return _cells(LOADER_SOLUTION, EVALUATE_SOLUTION, TIMING_SOLUTION)


WEIGHTED = """            total_loss += out.loss.item() * predicted
            total_tokens += predicted"""

# Sample submissions: realistic mistakes, each a list of exact edits of the solution's cells.
SAMPLES: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "mistake-batch-means": (
        "Averages the per-batch mean losses, so a small last batch weighs as much as a full one.",
        [
            ("    total_loss, total_tokens = 0.0, 0\n    with", "    total_loss, total_tokens = 0.0, 0\n    batch_losses = []\n    with"),
            (WEIGHTED, "            batch_losses.append(out.loss.item())\n            total_tokens += predicted"),
            ("    loss = total_loss / total_tokens", "    loss = sum(batch_losses) / len(batch_losses)"),
        ],
    ),
    "mistake-text-means": (
        "Computes each text's mean loss inside the batch and averages the texts, so short texts weigh as much as long ones.",
        [
            (
                "            out = model(**batch, labels=labels)\n",
                "            out = model(**batch)\n"
                "            logits = out.logits[:, :-1].float()\n"
                "            targets = labels[:, 1:]\n"
                "            token_losses = torch.nn.functional.cross_entropy(\n"
                "                logits.transpose(1, 2), targets, ignore_index=-100, reduction='none')\n"
                "            per_text = token_losses.sum(dim=1) / (targets != -100).sum(dim=1)\n",
            ),
            (WEIGHTED, "            total_loss += per_text.sum().item()\n            total_tokens += predicted"),
            ("    loss = total_loss / total_tokens", "    loss = total_loss / len(texts)"),
        ],
    ),
    "mistake-padding-in-loss": (
        "Passes labels=input_ids without masking the padding, so padded positions count in the loss.",
        [("            out = model(**batch, labels=labels)", "            out = model(**batch, labels=batch[\"input_ids\"])")],
    ),
    "mistake-perplexity-of-batches": (
        "Reports the mean of the per-batch perplexities instead of exp of the global loss.",
        [
            ("    total_loss, total_tokens = 0.0, 0\n    with", "    total_loss, total_tokens = 0.0, 0\n    batch_perplexities = []\n    with"),
            (WEIGHTED, WEIGHTED + "\n            batch_perplexities.append(math.exp(out.loss.item()))"),
            (
                '    return {"loss": loss, "perplexity": math.exp(loss), "tokens": total_tokens}',
                '    return {"loss": loss, "perplexity": sum(batch_perplexities) / len(batch_perplexities), "tokens": total_tokens}',
            ),
        ],
    ),
    "mistake-token-count": (
        "Reports the tokenized length of the texts as 'tokens', counting the first token of each text, which is never predicted.",
        [
            (
                '    return {"loss": loss, "perplexity": math.exp(loss), "tokens": total_tokens}',
                '    n_tokens = sum(len(tokenizer(text)["input_ids"]) for text in texts)\n'
                '    return {"loss": loss, "perplexity": math.exp(loss), "tokens": n_tokens}',
            )
        ],
    ),
    "mistake-gradients-on": (
        "Evaluates without torch.no_grad()/inference_mode, so every forward pass builds a graph.",
        [("    with torch.inference_mode():\n        for start", "    if True:\n        for start")],
    ),
    "mistake-one-text-at-a-time": (
        "Ignores batch_size and runs the model on one text at a time.",
        [("        for start in range(0, len(texts), batch_size):\n            batch_texts = texts[start:start + batch_size]",
          "        for start in range(len(texts)):\n            batch_texts = [texts[start]]")],
    ),
    "mistake-tokenizer-gpt2": (
        "Always loads the tokenizer of gpt2, whatever model_id asks for.",
        [("    tokenizer = AutoTokenizer.from_pretrained(model_id)", "    tokenizer = AutoTokenizer.from_pretrained(\"gpt2\")")],
    ),
    # A mistake that only a GPU shows: on a CPU it keeps every point (tests/test_samples_perplexity.py).
    "mistake-no-cuda-sync": (
        "Never calls torch.cuda.synchronize() around the timed generate (a GPU-only mistake).",
        [("    if model.device.type == \"cuda\":\n        torch.cuda.synchronize()\n    start", "    start"),
         ("    if model.device.type == \"cuda\":\n        torch.cuda.synchronize()\n    latency", "    latency")],
    ),
}
