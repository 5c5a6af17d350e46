"""Sources of the quantization notebooks: the starter, the solution, and sample mistakes.

``scripts/build_notebooks.py`` writes ``starter.ipynb`` and ``solution.ipynb`` here and the
sample submissions under ``submissions/quantization/``. The exercise is seeds 001 (the starter's
walkthrough) and 002 (the solution's): baseline vs optimized text generation with Optimum + ONNX
Runtime post-training quantization, a use_cache x padding ablation, batching, a perplexity
comparison, a results table, edge prompts and a controller that runs them all.
"""

from __future__ import annotations

ASSIGNMENT = "quantization"

TITLE = """# Exercise 1: Baseline vs optimized generation — quantization, cache, padding, batching

Measure a small causal language model's text generation, make it faster with **post-training quantization**
(Optimum + ONNX Runtime, INT8), ablate the **KV cache** and **padding** choices, compare **batched** and single-sample
throughput, check **quality** with perplexity, and gather everything in one **results table** with 3 to 5 takeaways.

Keep runs short (a tiny model, few tokens), keep `max_new_tokens` and the prompts **constant** within a comparison, and
synchronise around timed blocks on a GPU.

Useful documentation:
- Optimum (overview): https://huggingface.co/docs/optimum/index
- Optimum ONNX Runtime quantization: https://huggingface.co/docs/optimum/onnxruntime/usage_guides/quantization
- HF Text generation: https://huggingface.co/docs/transformers/en/main_classes/text_generation
- KV cache and batching: https://huggingface.co/docs/transformers/en/perf_infer_gpu_one
- Cross-entropy loss: https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html
- CUDA synchronize: https://pytorch.org/docs/stable/generated/torch.cuda.synchronize.html
- Pandas quick start: https://pandas.pydata.org/docs/user_guide/10min.html"""

IMPORTS = """import math
import time

import pandas
import torch
from optimum.onnxruntime import ORTModelForCausalLM, ORTQuantizer
from optimum.onnxruntime.configuration import AutoQuantizationConfig
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

MODEL_ID = "gpt2"
PROMPTS = [
    "The capital of France is",
    "Once upon a time,",
    "A language model predicts the next token from the tokens that came before it, so",
]
BATCH_SIZES = (1, 4)
MAX_NEW_TOKENS = 16
QUANTIZED_DIR = "onnx-int8"
PPX_BATCH_SIZE = 4
PPX_TEXTS = [
    "The capital of France is Paris. Paris is a large city on the river Seine.",
    "Once upon a time, in a land far, far away, there lived a young princess who loved to read books.",
    "To be or not to be, that is the question.",
    "The quick brown fox jumps over the lazy dog.",
    "Quantization stores the weights of a model with fewer bits, so the model needs less memory.",
    "Purple elephants negotiate quietly.",
]"""

LOADER_MD = """## 1. Load the model and tokenizer

Load both from the **same** id, on CUDA if available (else the CPU), in eval mode. GPT-2 has no padding token: reuse
its end-of-text token, and pad on the left for generation."""

LOADER_STARTER = '''def load_model_and_tokenizer(model_id: str) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Tokenizer and model from the same id; model in eval mode on CUDA if available, else the CPU."""
    # TODO: load the tokenizer and the model from model_id; give the tokenizer a pad token
    # TODO: move the model to the device and put it in eval mode
    raise NotImplementedError("load_model_and_tokenizer")'''

LOADER_SOLUTION = '''def load_model_and_tokenizer(model_id: str) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Tokenizer and model from the same id; model in eval mode on CUDA if available, else the CPU."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"  # decoder-only generation continues from the last real token
    model = AutoModelForCausalLM.from_pretrained(model_id, dtype=torch.float32).to(device)
    return tokenizer, model.eval()'''

MEASURE_MD = """## 2. Measure generation

Tokenize the prompts as **one padded batch** and move them to the model's device. Do one brief warm-up `generate` that
you do not time, then time one `generate` with a high-resolution timer (synchronise before and after on a GPU). Count
the new tokens of **every** sequence of the batch."""

MEASURE_STARTER = '''def measure_generation(model, tokenizer, prompts: list[str], max_new_tokens: int = 32,
                       use_cache: bool = True) -> dict:
    """One untimed warm-up generate, then one timed generate of the batch of prompts.
    Returns latency_s, new_tokens (all sequences), tokens_per_s, ms_per_token."""
    # TODO: tokenize the prompts as one padded batch; move it to the model's device
    # TODO: one brief warm-up generate, not timed
    # TODO: synchronise on CUDA, time one generate with max_new_tokens and use_cache, synchronise on CUDA
    # TODO: count the new tokens of every sequence; return latency_s, new_tokens, tokens_per_s, ms_per_token
    raise NotImplementedError("measure_generation")'''

MEASURE_SOLUTION = '''def measure_generation(model, tokenizer, prompts: list[str], max_new_tokens: int = 32,
                       use_cache: bool = True) -> dict:
    """One untimed warm-up generate, then one timed generate of the batch of prompts.
    Returns latency_s, new_tokens (all sequences), tokens_per_s, ms_per_token."""
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
    }'''

PTQ_MD = """## 3. Post-training quantization with Optimum

Export the model to ONNX with Optimum, quantize it to **INT8** with ONNX Runtime (dynamic quantization, or static with
a small calibration set), save it under `save_dir` and load the quantized file. The result must generate text with the
same API as the baseline; the info string names the backend and the precision."""

PTQ_STARTER = '''def run_static_ptq_optimum(model_id: str, save_dir: str) -> tuple[object, str]:
    """Export to ONNX, quantize to INT8 with ONNX Runtime, load it: (quantized model, info string)."""
    # TODO: export the model with ORTModelForCausalLM.from_pretrained(model_id, export=True)
    # TODO: quantize it with ORTQuantizer and an AutoQuantizationConfig into save_dir
    # TODO: load the quantized file; return it with an info string naming the backend and the precision
    raise NotImplementedError("run_static_ptq_optimum")'''

PTQ_SOLUTION = '''def run_static_ptq_optimum(model_id: str, save_dir: str) -> tuple[object, str]:
    """Export to ONNX, quantize to INT8 with ONNX Runtime, load it: (quantized model, info string)."""
    exported = ORTModelForCausalLM.from_pretrained(model_id, export=True)
    quantizer = ORTQuantizer.from_pretrained(exported)
    config = AutoQuantizationConfig.avx2(is_static=False, per_channel=False)
    quantizer.quantize(save_dir=save_dir, quantization_config=config)
    quantized = ORTModelForCausalLM.from_pretrained(save_dir, file_name="model_quantized.onnx")
    return quantized, "onnxruntime int8 (dynamic PTQ, Optimum ORTQuantizer)"'''

ABLATION_MD = """## 4. Ablate the KV cache and padding

Measure every `use_cache` in (True, False) with every padding side in ("left", "right"), with the same prompts and
`max_new_tokens`. Key the results as `"use_cache=True,padding=left"`. Restore the tokenizer's padding side afterwards."""

ABLATION_STARTER = '''def ablate_cache_and_padding(model, tokenizer, prompts: list[str], max_new_tokens: int = 32
                             ) -> dict[str, dict]:
    """Metrics for every use_cache x padding side, keyed like "use_cache=True,padding=left"."""
    results = {}
    for use_cache in (True, False):
        for side in ("left", "right"):
            # TODO: pad on `side`, measure with this use_cache and the same max_new_tokens
            pass
    raise NotImplementedError("ablate_cache_and_padding")'''

ABLATION_SOLUTION = '''def ablate_cache_and_padding(model, tokenizer, prompts: list[str], max_new_tokens: int = 32
                             ) -> dict[str, dict]:
    """Metrics for every use_cache x padding side, keyed like "use_cache=True,padding=left"."""
    results = {}
    original = tokenizer.padding_side
    for use_cache in (True, False):
        for side in ("left", "right"):
            tokenizer.padding_side = side
            results[f"use_cache={use_cache},padding={side}"] = measure_generation(
                model, tokenizer, prompts, max_new_tokens=max_new_tokens, use_cache=use_cache)
    tokenizer.padding_side = original
    return results'''

BATCHED_MD = """## 5. Batched vs single-sample generation

For each batch size, generate `batch_size` prompts together (cycle through the prompts when there are fewer). Report
throughput over **all** sequences and the latency per sample."""

BATCHED_STARTER = '''def measure_batched(model, tokenizer, prompts: list[str], batch_sizes: list[int],
                    max_new_tokens: int = 32) -> pandas.DataFrame:
    """One row per batch size: batch_size, latency_s, tokens_per_s, latency_per_sample_s."""
    rows = []
    for batch_size in batch_sizes:
        # TODO: a batch of batch_size prompts; measure it; tokens_per_s over every sequence
        pass
    raise NotImplementedError("measure_batched")'''

BATCHED_SOLUTION = '''def measure_batched(model, tokenizer, prompts: list[str], batch_sizes: list[int],
                    max_new_tokens: int = 32) -> pandas.DataFrame:
    """One row per batch size: batch_size, latency_s, tokens_per_s, latency_per_sample_s."""
    rows = []
    for batch_size in batch_sizes:
        batch = [prompts[i % len(prompts)] for i in range(batch_size)]
        metrics = measure_generation(model, tokenizer, batch, max_new_tokens=max_new_tokens)
        rows.append({
            "batch_size": batch_size,
            "latency_s": metrics["latency_s"],
            "tokens_per_s": metrics["tokens_per_s"],
            "latency_per_sample_s": metrics["latency_s"] / batch_size,
        })
    return pandas.DataFrame(rows)'''

PPX_MD = """## 6. Perplexity: baseline vs quantized

For each model, evaluate the **token-level** cross-entropy over the corpus in batches with gradients off: pad on the
right, mask padding out of the labels, add up the loss of every predicted token, divide by the number of predicted
tokens, then `ppx = exp(loss)`. The ONNX model returns logits but no loss: compute the loss from the logits for both."""

PPX_STARTER = '''def compare_ppplx(models: dict[str, object], tokenizer, texts: list[str]) -> dict[str, dict]:
    """{label: {"loss": token-weighted mean cross-entropy, "ppx": exp(loss)}} for every model."""
    results = {}
    for label, model in models.items():
        # TODO: in batches of PPX_BATCH_SIZE, no gradients: logits = model(**batch).logits
        # TODO: sum the cross-entropy of every predicted token (padding masked), count the tokens
        # TODO: loss = total / tokens; ppx = exp(loss)
        pass
    raise NotImplementedError("compare_ppplx")'''

PPX_SOLUTION = '''def compare_ppplx(models: dict[str, object], tokenizer, texts: list[str]) -> dict[str, dict]:
    """{label: {"loss": token-weighted mean cross-entropy, "ppx": exp(loss)}} for every model."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    original = tokenizer.padding_side
    tokenizer.padding_side = "right"  # GPT-2's absolute positions: real tokens keep positions 0..n-1
    results = {}
    for label, model in models.items():
        total_loss, total_tokens = 0.0, 0
        with torch.inference_mode():
            for start in range(0, len(texts), PPX_BATCH_SIZE):
                batch = tokenizer(texts[start:start + PPX_BATCH_SIZE], return_tensors="pt", padding=True).to(model.device)
                labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
                logits = model(**batch).logits[:, :-1].float()
                targets = labels[:, 1:]
                total_loss += torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100, reduction="sum").item()
                total_tokens += int((targets != -100).sum())
        loss = total_loss / total_tokens
        results[label] = {"loss": loss, "ppx": math.exp(loss)}
    tokenizer.padding_side = original
    return results'''

TABLE_MD = """## 7. One results table

Gather the scenarios in one table: a `scenario` column (baseline, quantized, every cache/padding setting, every batch
size) and the metrics in their units: `latency_s`, `tokens_per_s`, `ms_per_token`, `ppx` (where measured)."""

TABLE_STARTER = '''def build_results_table(results: dict) -> pandas.DataFrame:
    """One row per scenario: scenario, latency_s, tokens_per_s, ms_per_token, ppx."""
    # TODO: a row for the baseline and the quantized model (with their ppx), each ablation setting, each batch size
    raise NotImplementedError("build_results_table")'''

TABLE_SOLUTION = '''def build_results_table(results: dict) -> pandas.DataFrame:
    """One row per scenario: scenario, latency_s, tokens_per_s, ms_per_token, ppx."""
    def row(scenario, metrics, ppx=float("nan")):
        return {"scenario": scenario, "latency_s": metrics["latency_s"], "tokens_per_s": metrics["tokens_per_s"],
                "ms_per_token": metrics["ms_per_token"], "ppx": ppx}

    rows = [
        row(f"baseline ({results['dtype']})", results["baseline"], results["perplexity"]["baseline"]["ppx"]),
        row("quantized (onnxruntime int8)", results["quantized"], results["perplexity"]["quantized"]["ppx"]),
    ]
    rows += [row(setting, metrics) for setting, metrics in results["ablation"].items()]
    for batch in results["batching"].to_dict("records"):
        rows.append(row(f"batch_size={batch['batch_size']}", {**batch, "ms_per_token": 1000 / batch["tokens_per_s"]}))
    return pandas.DataFrame(rows)'''

EDGE_MD = """## 8. Edge prompts

Probe a **very short**, a **very long**, a **multi-line** and a **repetitive** prompt with the same `max_new_tokens`,
and note where throughput drops (a long prompt's prefill)."""

EDGE_STARTER = '''def probe_edge_prompts(model, tokenizer, max_new_tokens: int = 32) -> dict[str, dict]:
    """Metrics for a very short, a very long, a multi-line and a repetitive prompt."""
    # TODO: build the four prompts; measure each with the same max_new_tokens
    raise NotImplementedError("probe_edge_prompts")'''

EDGE_SOLUTION = '''def probe_edge_prompts(model, tokenizer, max_new_tokens: int = 32) -> dict[str, dict]:
    """Metrics for a very short, a very long, a multi-line and a repetitive prompt."""
    edge_prompts = {
        "very_short": "Hi",
        "very_long": " ".join(["The quick brown fox jumps over the lazy dog."] * 30),
        "multi_line": "Shopping list:\\n- eggs\\n- milk\\n- bread\\nRemember:",
        "repetitive": "la " * 40,
    }
    return {kind: measure_generation(model, tokenizer, [prompt], max_new_tokens=max_new_tokens)
            for kind, prompt in edge_prompts.items()}'''

CONTROLLER_MD = """## 9. Run the whole exercise

Run baseline, PTQ, ablation, batching, perplexity and edge prompts in order, print each block, the results table and
3 to 5 takeaways, and return the table and the takeaways."""

CONTROLLER_STARTER = '''def run_quantization_exercise(model_id: str = "gpt2", batch_sizes: tuple[int, ...] = (1, 4),
                              max_new_tokens: int = 32) -> tuple[pandas.DataFrame, list[str]]:
    """Baseline -> PTQ -> ablation -> batching -> perplexity -> edge prompts -> table and 3-5 takeaways."""
    # TODO: load; print "Loaded: <model_id> | device=<device> | dtype=<dtype>"; measure the baseline on PROMPTS
    # TODO: quantize with run_static_ptq_optimum(model_id, QUANTIZED_DIR) and measure the quantized model
    # TODO: ablation, batching with batch_sizes, perplexity of both models on PPX_TEXTS, edge prompts
    # TODO: build, print and return the results table and 3 to 5 takeaways
    raise NotImplementedError("run_quantization_exercise")'''

CONTROLLER_SOLUTION = '''def run_quantization_exercise(model_id: str = "gpt2", batch_sizes: tuple[int, ...] = (1, 4),
                              max_new_tokens: int = 32) -> tuple[pandas.DataFrame, list[str]]:
    """Baseline -> PTQ -> ablation -> batching -> perplexity -> edge prompts -> table and 3-5 takeaways."""
    tokenizer, model = load_model_and_tokenizer(model_id)
    device, dtype = model.device.type, str(model.dtype).replace("torch.", "")
    print(f"Loaded: {model_id} | device={device} | dtype={dtype}")

    print(f"\\n== {device.upper()} {dtype.upper().replace('FLOAT', 'FP')} Baseline ==")
    baseline = measure_generation(model, tokenizer, PROMPTS, max_new_tokens=max_new_tokens)
    print(f"latency (s): {baseline['latency_s']:.3f} | tokens/s: {baseline['tokens_per_s']:.1f} | "
          f"ms/token: {baseline['ms_per_token']:.2f} | new tokens: {baseline['new_tokens']}")

    quantized_model, info = run_static_ptq_optimum(model_id, QUANTIZED_DIR)
    print(f"\\n== Quantized: {info} ==")
    quantized = measure_generation(quantized_model, tokenizer, PROMPTS, max_new_tokens=max_new_tokens)
    print(f"latency (s): {quantized['latency_s']:.3f} | tokens/s: {quantized['tokens_per_s']:.1f} | "
          f"ms/token: {quantized['ms_per_token']:.2f}")

    print("\\n== Ablation: use_cache x padding ==")
    ablation = ablate_cache_and_padding(model, tokenizer, PROMPTS, max_new_tokens=max_new_tokens)
    for setting, metrics in ablation.items():
        print(f"{setting:<28} latency {metrics['latency_s']:.3f} s | {metrics['tokens_per_s']:.1f} tokens/s")

    print("\\n== Batching ==")
    batching = measure_batched(model, tokenizer, PROMPTS, list(batch_sizes), max_new_tokens=max_new_tokens)
    print(batching.to_string(index=False))

    print("\\n== Perplexity: baseline vs quantized ==")
    perplexity = compare_ppplx({"baseline": model, "quantized": quantized_model}, tokenizer, PPX_TEXTS)
    drift = perplexity["quantized"]["ppx"] / perplexity["baseline"]["ppx"] - 1
    for label, values in perplexity.items():
        print(f"{label:<10} loss {values['loss']:.4f} | ppx {values['ppx']:.3f}")
    print(f"INT8 quality drift: {drift:+.2%} perplexity ({'small' if abs(drift) < 0.05 else 'large: check the quantization'})")

    print("\\n== Edge prompts ==")
    edge = probe_edge_prompts(model, tokenizer, max_new_tokens=max_new_tokens)
    for kind, metrics in edge.items():
        print(f"{kind:<11} latency {metrics['latency_s']:.3f} s | {metrics['tokens_per_s']:.1f} tokens/s")

    results = {"model_id": model_id, "device": device, "dtype": dtype, "baseline": baseline, "quantized": quantized,
               "ablation": ablation, "batching": batching, "perplexity": perplexity, "edge": edge}
    table = build_results_table(results)
    print(f"\\n== [6] Summary table: {model_id} | device={device} | dtype={dtype} | quantized: {info} ==")
    print(table.to_string(index=False))

    cached = ablation["use_cache=True,padding=left"]["tokens_per_s"]
    uncached = ablation["use_cache=False,padding=left"]["tokens_per_s"]
    smallest, largest = batching.iloc[0], batching.iloc[-1]
    takeaways = [
        f"INT8 PTQ (ONNX Runtime) ran at {quantized['tokens_per_s']:.0f} tokens/s vs {baseline['tokens_per_s']:.0f} "
        f"for the {dtype} baseline on {device} ({quantized['tokens_per_s'] / baseline['tokens_per_s']:.2f}x).",
        f"The KV cache gave {cached:.0f} tokens/s vs {uncached:.0f} without it: it saves recomputing the prefix at every decode step.",
        f"Batching {int(largest['batch_size'])} prompts gave {largest['tokens_per_s']:.0f} tokens/s vs "
        f"{smallest['tokens_per_s']:.0f} at batch size {int(smallest['batch_size'])}; latency per sample "
        f"{largest['latency_per_sample_s']:.3f} s vs {smallest['latency_per_sample_s']:.3f} s.",
        f"Perplexity moved from {perplexity['baseline']['ppx']:.2f} to {perplexity['quantized']['ppx']:.2f} "
        f"({drift:+.2%}) after INT8 quantization.",
        f"The very long prompt ran at {edge['very_long']['tokens_per_s']:.0f} tokens/s vs "
        f"{edge['very_short']['tokens_per_s']:.0f} for the very short one: prefill grows with the prompt.",
    ]
    print("\\n== Takeaways ==")
    for takeaway in takeaways:
        print(f"- {takeaway}")
    return table, takeaways'''

RUN = """results_table, takeaways = run_quantization_exercise(MODEL_ID, BATCH_SIZES, MAX_NEW_TOKENS)"""


def _cells(*functions: str) -> list[tuple[str, str]]:
    loader, measure, ptq, ablation, batched, ppx, table, edge, controller = functions
    return [
        ("markdown", TITLE),
        ("code", IMPORTS),
        ("markdown", LOADER_MD),
        ("code", loader),
        ("markdown", MEASURE_MD),
        ("code", measure),
        ("markdown", PTQ_MD),
        ("code", ptq),
        ("markdown", ABLATION_MD),
        ("code", ablation),
        ("markdown", BATCHED_MD),
        ("code", batched),
        ("markdown", PPX_MD),
        ("code", ppx),
        ("markdown", TABLE_MD),
        ("code", table),
        ("markdown", EDGE_MD),
        ("code", edge),
        ("markdown", CONTROLLER_MD),
        ("code", controller),
        ("code", RUN),
    ]


def starter_cells() -> list[tuple[str, str]]:
    """(cell type, source) of the starter notebook, in order."""
    return _cells(
        LOADER_STARTER, MEASURE_STARTER, PTQ_STARTER, ABLATION_STARTER, BATCHED_STARTER, PPX_STARTER, TABLE_STARTER,
        EDGE_STARTER, CONTROLLER_STARTER,
    )


def solution_cells() -> list[tuple[str, str]]:
    """(cell type, source) of the solution notebook, in order."""
    return _cells(
        LOADER_SOLUTION, MEASURE_SOLUTION, PTQ_SOLUTION, ABLATION_SOLUTION, BATCHED_SOLUTION, PPX_SOLUTION, TABLE_SOLUTION,
        EDGE_SOLUTION, CONTROLLER_SOLUTION,
    )


# Sample submissions: realistic mistakes, each a list of exact edits of the solution's cells.
SAMPLES: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "mistake-exported-not-quantized": (
        "Exports the model to ONNX and returns it without quantizing it.",
        [("    quantizer = ORTQuantizer.from_pretrained(exported)\n"
          "    config = AutoQuantizationConfig.avx2(is_static=False, per_channel=False)\n"
          "    quantizer.quantize(save_dir=save_dir, quantization_config=config)\n"
          "    quantized = ORTModelForCausalLM.from_pretrained(save_dir, file_name=\"model_quantized.onnx\")\n",
          "    exported.save_pretrained(save_dir)\n    quantized = exported  # quantization to do\n")],
    ),
    "mistake-cache-never-toggled": (
        "The ablation never passes use_cache on, so every setting runs with the cache.",
        [("                model, tokenizer, prompts, max_new_tokens=max_new_tokens, use_cache=use_cache)",
          "                model, tokenizer, prompts, max_new_tokens=max_new_tokens)")],
    ),
    "mistake-padding-never-set": (
        "The ablation labels padding sides but never sets tokenizer.padding_side, so every batch is padded the same way.",
        [("            tokenizer.padding_side = side\n", "")],
    ),
    "mistake-batch-first-sequence": (
        "measure_batched computes tokens_per_s from one sequence's tokens (max_new_tokens), not the whole batch's.",
        [('            "tokens_per_s": metrics["tokens_per_s"],\n            "latency_per_sample_s"',
          '            "tokens_per_s": max_new_tokens / metrics["latency_s"],\n            "latency_per_sample_s"')],
    ),
    "mistake-ppx-padding-counted": (
        "compare_ppplx uses the padded input ids as labels, so padding positions count in the loss.",
        [('                labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)',
          '                labels = batch["input_ids"]')],
    ),
    "mistake-two-takeaways": (
        "The controller returns only two takeaways.",
        [("    return table, takeaways", "    return table, takeaways[:2]")],
    ),
    "mistake-edge-no-multiline": (
        "The edge prompts have no multi-line prompt: the 'multi_line' one is a single line.",
        [('        "multi_line": "Shopping list:\\n- eggs\\n- milk\\n- bread\\nRemember:",',
          '        "multi_line": "Shopping list: eggs, milk, bread. Remember:",')],
    ),
}
