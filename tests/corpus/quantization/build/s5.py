"""Student 5: helper context managers (Timer, padding_side), counts new tokens up to the first end-of-text
per row, avx512_vnni per-channel with file_suffix='int8', masked-selection cross-entropy, plt.plot figure."""
NAME = "correct-05-context-managers.ipynb"
DESC = "Uses a perf_counter Timer and a padding_side context manager, counts each row's new tokens up to its first end-of-text, avx512_vnni per-channel INT8 saved as model_int8.onnx, cross-entropy on mask-selected logits."

INSERTS = [(1, "code", '''
from contextlib import contextmanager
import torch.nn.functional as F
import matplotlib.pyplot as plt


class Timer:
    """High-resolution wall-clock timer that synchronises CUDA around the block when needed."""

    def __init__(self, device):
        self.cuda = torch.device(device).type == "cuda"
        self.seconds = None

    def __enter__(self):
        if self.cuda:
            torch.cuda.synchronize()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            torch.cuda.synchronize()
        self.seconds = time.perf_counter() - self._t0
        return False


@contextmanager
def padding_side(tokenizer, side: str):
    """Temporarily pad on `side`, then put the tokenizer back the way it was."""
    before = tokenizer.padding_side
    tokenizer.padding_side = side
    try:
        yield tokenizer
    finally:
        tokenizer.padding_side = before
'''), (20, "code", '''
plt.figure(figsize=(7, 3))
plt.plot(results_table["scenario"], results_table["ms_per_token"], marker="o")
plt.xticks(rotation=70)
plt.ylabel("ms per generated token")
plt.title("Latency per token by scenario (lower is better)")
plt.tight_layout()
''')]

CELLS = {}
CELLS[3] = '''
def load_model_and_tokenizer(model_id: str) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Tokenizer and model from the same id; model in eval mode on CUDA if available, else the CPU."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    tokenizer.add_special_tokens({"pad_token": tokenizer.eos_token})   # reuse <|endoftext|> as padding
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_id).to(device)
    model.eval()
    return tokenizer, model
'''

CELLS[5] = '''
def count_new_tokens(sequences: torch.Tensor, prompt_len: int, eos_id: int) -> int:
    """New tokens per row, up to and including the first end-of-text (what comes after it is padding)."""
    gen = sequences[:, prompt_len:]
    total = 0
    for row in gen:
        hits = (row == eos_id).nonzero()
        total += int(hits[0, 0]) + 1 if len(hits) else row.numel()
    return total


def measure_generation(model, tokenizer, prompts: list[str], max_new_tokens: int = 32,
                       use_cache: bool = True) -> dict:
    """One untimed warm-up generate, then one timed generate of the batch of prompts.
    Returns latency_s, new_tokens (all sequences), tokens_per_s, ms_per_token."""
    enc = tokenizer(prompts, return_tensors="pt", padding=True, return_attention_mask=True).to(model.device)
    kw = dict(max_new_tokens=max_new_tokens, use_cache=use_cache, do_sample=False,
              pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    with torch.no_grad():
        model.generate(**enc, **{**kw, "max_new_tokens": 1})      # warm-up
        with Timer(model.device) as t:
            seqs = model.generate(**enc, **kw)
    n_new = count_new_tokens(seqs, enc["input_ids"].shape[1], tokenizer.eos_token_id)
    return {"latency_s": t.seconds, "new_tokens": n_new, "tokens_per_s": n_new / t.seconds,
            "ms_per_token": 1e3 * t.seconds / n_new}
'''

CELLS[7] = '''
def run_static_ptq_optimum(model_id: str, save_dir: str) -> tuple[object, str]:
    """Export to ONNX, quantize to INT8 with ONNX Runtime, load it: (quantized model, info string)."""
    exported = ORTModelForCausalLM.from_pretrained(model_id, export=True)
    qcfg = AutoQuantizationConfig.avx512_vnni(is_static=False, per_channel=True)
    quantizer = ORTQuantizer.from_pretrained(exported)
    quantizer.quantize(quantization_config=qcfg, save_dir=save_dir, file_suffix="int8")
    model = ORTModelForCausalLM.from_pretrained(save_dir, file_name="model_int8.onnx")
    mode = "static" if qcfg.is_static else "dynamic"
    return model, f"Optimum + ONNX Runtime {mode} quantization, weights {qcfg.weights_dtype.name}, per-channel, avx512_vnni"
'''

CELLS[9] = '''
def ablate_cache_and_padding(model, tokenizer, prompts: list[str], max_new_tokens: int = 32
                             ) -> dict[str, dict]:
    """Metrics for every use_cache x padding side, keyed like "use_cache=True,padding=left"."""
    results = {}
    for use_cache in (True, False):
        for side in ("left", "right"):
            with padding_side(tokenizer, side):
                results[f"use_cache={use_cache},padding={side}"] = measure_generation(
                    model, tokenizer, prompts, max_new_tokens, use_cache)
    return results
'''

CELLS[11] = '''
def measure_batched(model, tokenizer, prompts: list[str], batch_sizes: list[int],
                    max_new_tokens: int = 32) -> pandas.DataFrame:
    """One row per batch size: batch_size, latency_s, tokens_per_s, latency_per_sample_s."""
    rows = []
    for batch_size in batch_sizes:
        batch = [prompts[j % len(prompts)] for j in range(batch_size)]
        m = measure_generation(model, tokenizer, batch, max_new_tokens)
        rows.append({"batch_size": batch_size, "latency_s": m["latency_s"], "tokens_per_s": m["tokens_per_s"],
                     "latency_per_sample_s": m["latency_s"] / batch_size, "ms_per_token": m["ms_per_token"],
                     "sequences": batch_size, "new_tokens": m["new_tokens"]})
    return pandas.DataFrame(rows)
'''

CELLS[13] = '''
def compare_ppplx(models: dict[str, object], tokenizer, texts: list[str]) -> dict[str, dict]:
    """{label: {"loss": token-weighted mean cross-entropy, "ppx": exp(loss)}} for every model."""
    results = {}
    for label, model in models.items():
        nll, n = 0.0, 0
        with padding_side(tokenizer, "right"), torch.no_grad():
            for k in range(0, len(texts), PPX_BATCH_SIZE):
                enc = tokenizer(texts[k:k + PPX_BATCH_SIZE], padding=True, return_tensors="pt").to(model.device)
                logits = model(**enc).logits
                valid = enc["attention_mask"][:, 1:].bool()            # predicted positions that are real tokens
                pred = logits[:, :-1][valid].float()                   # (n_valid, vocab)
                gold = enc["input_ids"][:, 1:][valid]                  # (n_valid,)
                nll += F.cross_entropy(pred, gold, reduction="sum").item()
                n += gold.numel()
        results[label] = {"loss": nll / n, "ppx": math.exp(nll / n), "predicted_tokens": n}
    return results
'''

CELLS[15] = '''
def build_results_table(results: dict) -> pandas.DataFrame:
    """One row per scenario: scenario, latency_s, tokens_per_s, ms_per_token, ppx."""
    def row(scenario, m, ppx=None):
        return {"scenario": scenario, "latency_s": float(m["latency_s"]), "tokens_per_s": float(m["tokens_per_s"]),
                "ms_per_token": float(m["ms_per_token"]), "ppx": ppx}

    rows = [row("baseline", results["baseline"], results["ppx"]["baseline"]["ppx"]),
            row("quantized", results["quantized"], results["ppx"]["quantized"]["ppx"])]
    rows += [row(f"KV cache {'on' if 'True' in key else 'off'}, {key.split('padding=')[1]} padding", m)
             for key, m in results["ablation"].items()]
    rows += [row(f"batched x{int(r.batch_size)}", r._asdict()) for r in results["batched"].itertuples()]
    return pandas.DataFrame(rows).astype({"ppx": float})
'''

CELLS[17] = '''
def probe_edge_prompts(model, tokenizer, max_new_tokens: int = 32) -> dict[str, dict]:
    """Metrics for a very short, a very long, a multi-line and a repetitive prompt."""
    sentences = [
        "The weather service issued a warning for heavy rain across the northern valleys this weekend.",
        "Farmers were advised to move livestock to higher ground and to check the drainage around their barns.",
        "Schools in three districts announced that they would close early on Friday afternoon.",
        "The river authority opened the overflow gates at the dam to lower the level of the reservoir.",
        "Volunteers filled sandbags outside the fire station from early morning until late at night.",
        "Train services between the coast and the capital were reduced to one every two hours.",
        "Residents near the old bridge were told to prepare a bag with medicine, documents and warm clothes.",
        "The mayor thanked the emergency teams and asked people not to drive through flooded roads.",
        "Forecasters expect the rain to ease by Monday, although rivers may stay high for several days.",
        "Updates will be posted every hour on the council website and read out on local radio.",
    ]
    edge = {
        "very_short": "Yes",
        "very_long": " ".join(sentences),
        "multi_line": "Q: What is the boiling point of water?\\nA: 100 degrees Celsius.\\nQ: And the freezing point?\\nA:",
        "repetitive": "1 2 3 " * 40,
    }
    return {name: {**measure_generation(model, tokenizer, [text], max_new_tokens),
                   "prompt_tokens": len(tokenizer(text).input_ids)}
            for name, text in edge.items()}
'''

CELLS[19] = '''
def run_quantization_exercise(model_id: str = "gpt2", batch_sizes: tuple[int, ...] = (1, 4),
                              max_new_tokens: int = 32) -> tuple[pandas.DataFrame, list[str]]:
    """Baseline -> PTQ -> ablation -> batching -> perplexity -> edge prompts -> table and 3-5 takeaways."""
    tokenizer, model = load_model_and_tokenizer(model_id)
    print(f"Loaded: {model_id} | device={model.device} | dtype={model.dtype}")
    fmt = lambda m: f"{m['latency_s']*1e3:8.1f} ms | {m['tokens_per_s']:7.1f} tok/s | {m['ms_per_token']:6.2f} ms/tok"

    baseline = measure_generation(model, tokenizer, PROMPTS, max_new_tokens)
    print("Baseline (FP32 PyTorch):   ", fmt(baseline))
    qmodel, info = run_static_ptq_optimum(model_id, QUANTIZED_DIR)
    quantized = measure_generation(qmodel, tokenizer, PROMPTS, max_new_tokens)
    print("Quantized (INT8 ONNX RT):  ", fmt(quantized), "|", info)

    ablation = ablate_cache_and_padding(model, tokenizer, PROMPTS, max_new_tokens)
    for key, m in ablation.items():
        print(f"Ablation {key:31s}", fmt(m))

    batched = measure_batched(model, tokenizer, PROMPTS, list(batch_sizes), max_new_tokens)
    print(batched.to_string(index=False))

    ppx = compare_ppplx({"baseline": model, "quantized": qmodel}, tokenizer, PPX_TEXTS)
    for label, r in ppx.items():
        print(f"Perplexity {label:10s} loss={r['loss']:.4f}  ppx={r['ppx']:.3f}  ({r['predicted_tokens']} tokens)")

    edge = probe_edge_prompts(model, tokenizer, max_new_tokens)
    for name, m in edge.items():
        print(f"Edge {name:11s} ({m['prompt_tokens']:4d} prompt tokens)", fmt(m))

    table = build_results_table({"baseline": baseline, "quantized": quantized, "ablation": ablation,
                                 "batched": batched, "ppx": ppx})
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))

    best_batch = batched.loc[batched["tokens_per_s"].idxmax()]
    takeaways = [
        f"INT8 (ONNX Runtime) vs FP32 (PyTorch): {quantized['tokens_per_s']:.0f} vs {baseline['tokens_per_s']:.0f} tok/s on CPU.",
        f"Quality: perplexity {ppx['baseline']['ppx']:.3f} -> {ppx['quantized']['ppx']:.3f}; INT8 dynamic quantization is close to lossless here.",
        "Keep the KV cache on and pad on the left for generation; right padding makes the model continue after pad tokens.",
        f"Highest total throughput at batch size {int(best_batch['batch_size'])} ({best_batch['tokens_per_s']:.0f} tok/s); "
        "per-request latency does not improve with batching.",
        f"Long prompts cost prefill time: {edge['very_long']['prompt_tokens']} prompt tokens -> {edge['very_long']['tokens_per_s']:.0f} tok/s.",
    ]
    print("\\n".join("* " + t for t in takeaways))
    return table, takeaways
'''
