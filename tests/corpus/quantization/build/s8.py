"""Student 8: tokenizer(...) with explicit pad_to_multiple/longest, time.perf_counter_ns via helper, counts
new tokens from attention masks (full mask length minus prompt mask), avx512 per-channel, per-batch token-weighted
combination of mean losses, takeaways in a separate helper, table sorted into sections."""
NAME = "correct-08-mask-counts.ipynb"
DESC = "Counts new tokens from the attention mask extended over the generated columns, perf_counter_ns timing with inference_mode, avx512 per-channel INT8 found via glob, perplexity combines per-batch mean losses weighted by their token counts."

APPEND = {1: """
import glob
import os
import torch.nn.functional as F
"""}

CELLS = {}
CELLS[3] = '''
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def load_model_and_tokenizer(model_id: str) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Tokenizer and model from the same id; model in eval mode on CUDA if available, else the CPU."""
    tokenizer = AutoTokenizer.from_pretrained(model_id, use_fast=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_id, pad_token_id=tokenizer.pad_token_id)
    model.eval()
    model.to(DEVICE)
    return tokenizer, model
'''

CELLS[5] = '''
def _now_s() -> float:
    return time.perf_counter_ns() * 1e-9


def measure_generation(model, tokenizer, prompts: list[str], max_new_tokens: int = 32,
                       use_cache: bool = True) -> dict:
    """One untimed warm-up generate, then one timed generate of the batch of prompts.
    Returns latency_s, new_tokens (all sequences), tokens_per_s, ms_per_token."""
    enc = tokenizer(prompts, padding="longest", return_tensors="pt")
    enc = enc.to(model.device)
    common = {"use_cache": use_cache, "do_sample": False, "pad_token_id": tokenizer.pad_token_id,
              "return_dict_in_generate": False}
    with torch.inference_mode():
        model.generate(**enc, max_new_tokens=1, **common)
        if str(model.device).startswith("cuda"):
            torch.cuda.synchronize()
        t0 = _now_s()
        out = model.generate(**enc, max_new_tokens=max_new_tokens, **common)
        if str(model.device).startswith("cuda"):
            torch.cuda.synchronize()
        latency = _now_s() - t0
    # every generated column is a new position for every row: extend the prompt mask over them
    full_mask = torch.cat([enc["attention_mask"],
                           torch.ones(out.shape[0], out.shape[1] - enc["input_ids"].shape[1],
                                      dtype=enc["attention_mask"].dtype, device=out.device)], dim=1)
    new_tokens = int(full_mask.sum() - enc["attention_mask"].sum())
    return {"latency_s": latency, "new_tokens": new_tokens, "tokens_per_s": new_tokens / latency,
            "ms_per_token": 1e3 * latency / new_tokens}
'''

CELLS[7] = '''
def run_static_ptq_optimum(model_id: str, save_dir: str) -> tuple[object, str]:
    """Export to ONNX, quantize to INT8 with ONNX Runtime, load it: (quantized model, info string)."""
    ort_model = ORTModelForCausalLM.from_pretrained(model_id, export=True)
    quantizer = ORTQuantizer.from_pretrained(ort_model)
    qconfig = AutoQuantizationConfig.avx512(is_static=False, per_channel=True)
    quantizer.quantize(quantization_config=qconfig, save_dir=save_dir)
    candidates = glob.glob(os.path.join(save_dir, "*_quantized.onnx"))
    if not candidates:
        raise FileNotFoundError(f"no quantized ONNX file in {save_dir}")
    onnx_file = os.path.basename(candidates[0])
    q_model = ORTModelForCausalLM.from_pretrained(save_dir, file_name=onnx_file)
    info = f"Optimum/ONNX Runtime | INT8 dynamic (weights {qconfig.weights_dtype.name}, per-channel) | {onnx_file}"
    return q_model, info
'''

CELLS[9] = '''
def ablate_cache_and_padding(model, tokenizer, prompts: list[str], max_new_tokens: int = 32
                             ) -> dict[str, dict]:
    """Metrics for every use_cache x padding side, keyed like "use_cache=True,padding=left"."""
    results = {}
    restore = tokenizer.padding_side
    for use_cache in (True, False):
        for side in ("left", "right"):
            tokenizer.padding_side = side
            assert tokenizer(prompts, padding=True)["attention_mask"][0][0 if side == "left" else -1] in (0, 1)
            results[f"use_cache={use_cache},padding={side}"] = measure_generation(
                model, tokenizer, prompts, max_new_tokens, use_cache=use_cache)
    tokenizer.padding_side = restore
    return results
'''

CELLS[11] = '''
def measure_batched(model, tokenizer, prompts: list[str], batch_sizes: list[int],
                    max_new_tokens: int = 32) -> pandas.DataFrame:
    """One row per batch size: batch_size, latency_s, tokens_per_s, latency_per_sample_s."""
    rows = []
    for batch_size in batch_sizes:
        batch = [prompts[k % len(prompts)] for k in range(batch_size)]
        stats = measure_generation(model, tokenizer, batch, max_new_tokens=max_new_tokens, use_cache=True)
        rows.append({
            "batch_size": batch_size,
            "latency_s": stats["latency_s"],
            "tokens_per_s": stats["tokens_per_s"],
            "latency_per_sample_s": stats["latency_s"] / batch_size,
            "ms_per_token": stats["ms_per_token"],
            "tokens_per_s_per_sample": stats["tokens_per_s"] / batch_size,
        })
    return pandas.DataFrame(rows)
'''

CELLS[13] = '''
def compare_ppplx(models: dict[str, object], tokenizer, texts: list[str]) -> dict[str, dict]:
    """{label: {"loss": token-weighted mean cross-entropy, "ppx": exp(loss)}} for every model."""
    results = {}
    saved = tokenizer.padding_side
    tokenizer.padding_side = "right"
    for label, model in models.items():
        weighted, tokens = 0.0, 0
        for lo in range(0, len(texts), PPX_BATCH_SIZE):
            enc = tokenizer(texts[lo:lo + PPX_BATCH_SIZE], padding=True, return_tensors="pt").to(model.device)
            with torch.inference_mode():
                logits = model(**enc).logits
            labels = enc["input_ids"][:, 1:].masked_fill(enc["attention_mask"][:, 1:] == 0, -100)
            n = int((labels != -100).sum())
            batch_mean = F.cross_entropy(logits[:, :-1].float().permute(0, 2, 1), labels, ignore_index=-100)
            weighted += batch_mean.item() * n        # mean over this batch's tokens, weighted back to a sum
            tokens += n
        loss = weighted / tokens
        results[label] = {"loss": loss, "ppx": math.exp(loss)}
    tokenizer.padding_side = saved
    return results
'''

CELLS[15] = '''
def build_results_table(results: dict) -> pandas.DataFrame:
    """One row per scenario: scenario, latency_s, tokens_per_s, ms_per_token, ppx."""
    cols = ["scenario", "latency_s", "tokens_per_s", "ms_per_token", "ppx"]
    frames = [
        pandas.DataFrame([
            {"scenario": "baseline (PyTorch FP32)", **results["baseline"], "ppx": results["ppx"]["baseline"]["ppx"]},
            {"scenario": "quantized (ONNX Runtime INT8)", **results["quantized"], "ppx": results["ppx"]["quantized"]["ppx"]},
        ]),
        pandas.DataFrame([{"scenario": k, **v} for k, v in results["ablation"].items()]),
        results["batched"].assign(scenario=lambda d: "batch_size=" + d["batch_size"].astype(str)),
    ]
    return pandas.concat(frames, ignore_index=True).reindex(columns=cols)
'''

CELLS[17] = '''
def probe_edge_prompts(model, tokenizer, max_new_tokens: int = 32) -> dict[str, dict]:
    """Metrics for a very short, a very long, a multi-line and a repetitive prompt."""
    long_story = (
        "The lighthouse keeper had lived alone on the island for eleven years, and in all that time the supply "
        "boat had never once been late. So when the morning of the fourteenth came and went without the familiar "
        "sound of its engine, she climbed to the gallery with her binoculars and searched the grey water until "
        "her eyes ached. There was nothing but gulls and the long slow swell rolling in from the west. She told "
        "herself that the weather on the mainland must have turned, that the skipper was a careful man who would "
        "not risk the crossing in a storm. She checked the radio, which gave her only static, and then she did "
        "what she always did when she was worried: she polished the great lens until it shone, wound the clockwork "
        "and wrote a careful entry in the log. By evening the wind had dropped, and just as the lamp began to turn, "
        "she saw a small light low on the horizon, moving slowly towards the island."
    )
    edge_cases = {
        "very short": "Hello world",
        "very long": long_story,
        "multi-line": "Subject: Lunch\\n\\nHi Ana,\\nAre you free on Tuesday?\\nBest,\\nTom\\n\\nReply:",
        "repetitive": "abc abc abc " * 30,
    }
    metrics = {}
    for name, prompt in edge_cases.items():
        metrics[name] = measure_generation(model, tokenizer, [prompt], max_new_tokens=max_new_tokens)
        metrics[name]["prompt_tokens"] = len(tokenizer.encode(prompt))
    return metrics
'''

CELLS[19] = '''
def make_takeaways(baseline, quantized, ablation, batched, ppx, edge) -> list[str]:
    q_speed = quantized["tokens_per_s"] / baseline["tokens_per_s"]
    cache = {c: ablation[f"use_cache={c},padding=left"]["tokens_per_s"] for c in (True, False)}
    slowest = min(edge, key=lambda k: edge[k]["tokens_per_s"])
    return [
        f"Quantized INT8 model: {q_speed:.2f}x baseline throughput, perplexity {ppx['baseline']['ppx']:.3f} -> {ppx['quantized']['ppx']:.3f}.",
        f"KV cache (left padding): {cache[True]:.0f} tok/s on vs {cache[False]:.0f} tok/s off - the cache removes prefix recomputation.",
        f"Batch {batched['batch_size'].iloc[-1]}: {batched['tokens_per_s'].iloc[-1]:.0f} tok/s total, "
        f"{batched['latency_per_sample_s'].iloc[-1] * 1000:.0f} ms per sample; batching improves throughput, not per-sample latency.",
        f"Slowest edge prompt: {slowest} ({edge[slowest]['prompt_tokens']} prompt tokens); long prompts pay for prefill.",
    ]


def run_quantization_exercise(model_id: str = "gpt2", batch_sizes: tuple[int, ...] = (1, 4),
                              max_new_tokens: int = 32) -> tuple[pandas.DataFrame, list[str]]:
    """Baseline -> PTQ -> ablation -> batching -> perplexity -> edge prompts -> table and 3-5 takeaways."""
    tokenizer, model = load_model_and_tokenizer(model_id)
    print(f"Loaded: {model_id} | device={DEVICE} | dtype={model.dtype}")
    baseline = measure_generation(model, tokenizer, PROMPTS, max_new_tokens)
    print("[1] baseline :", {k: round(v, 4) for k, v in baseline.items()})
    q_model, q_info = run_static_ptq_optimum(model_id, QUANTIZED_DIR)
    quantized = measure_generation(q_model, tokenizer, PROMPTS, max_new_tokens)
    print("[2] quantized:", {k: round(v, 4) for k, v in quantized.items()}, "|", q_info)
    ablation = ablate_cache_and_padding(model, tokenizer, PROMPTS, max_new_tokens)
    print("[3] ablation:\\n", pandas.DataFrame(ablation).T.round(4).to_string())
    batched = measure_batched(model, tokenizer, PROMPTS, list(batch_sizes), max_new_tokens)
    print("[4] batching:\\n", batched.round(4).to_string(index=False))
    ppx = compare_ppplx({"baseline": model, "quantized": q_model}, tokenizer, PPX_TEXTS)
    print("[5] perplexity:", {k: round(v["ppx"], 4) for k, v in ppx.items()})
    edge = probe_edge_prompts(model, tokenizer, max_new_tokens)
    print("[6] edge prompts:\\n", pandas.DataFrame(edge).T.round(4).to_string())
    table = build_results_table({"baseline": baseline, "quantized": quantized, "ablation": ablation,
                                 "batched": batched, "ppx": ppx})
    print("[7] results table:\\n", table.to_string(index=False))
    takeaways = make_takeaways(baseline, quantized, ablation, batched, ppx, edge)
    print("[8] takeaways:")
    print("\\n".join(f"  - {t}" for t in takeaways))
    return table, takeaways
'''
