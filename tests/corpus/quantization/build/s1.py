"""Student 1: plain and by-the-book. tokenizer(...) padding, perf_counter, shape-based token count,
avx512_vnni dynamic INT8, -100 labels + F.cross_entropy(reduction='sum'), list-of-dicts table."""
NAME = "correct-01-by-the-book.ipynb"
DESC = "Straightforward solution: state set once in the loader, tokenizer padding, perf_counter, avx512_vnni dynamic INT8, masked -100 labels with F.cross_entropy(sum), list-of-dicts table."

APPEND = {1: """
import torch.nn.functional as F
"""}

CELLS = {}
CELLS[3] = '''
def load_model_and_tokenizer(model_id: str) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Tokenizer and model from the same id; model in eval mode on CUDA if available, else the CPU."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_id)
    model.config.pad_token_id = tokenizer.pad_token_id
    model.to(device)
    model.eval()
    return tokenizer, model
'''

CELLS[5] = '''
def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def measure_generation(model, tokenizer, prompts: list[str], max_new_tokens: int = 32,
                       use_cache: bool = True) -> dict:
    """One untimed warm-up generate, then one timed generate of the batch of prompts.
    Returns latency_s, new_tokens (all sequences), tokens_per_s, ms_per_token."""
    batch = tokenizer(prompts, return_tensors="pt", padding=True).to(model.device)
    gen_kwargs = dict(do_sample=False, use_cache=use_cache, pad_token_id=tokenizer.pad_token_id)
    with torch.no_grad():
        model.generate(**batch, max_new_tokens=2, **gen_kwargs)  # warm-up, not timed
        _sync(model.device)
        start = time.perf_counter()
        output = model.generate(**batch, max_new_tokens=max_new_tokens, **gen_kwargs)
        _sync(model.device)
        latency_s = time.perf_counter() - start
    prompt_len = batch["input_ids"].shape[1]
    new_tokens = int((output.shape[1] - prompt_len) * output.shape[0])
    return {
        "latency_s": latency_s,
        "new_tokens": new_tokens,
        "tokens_per_s": new_tokens / latency_s,
        "ms_per_token": 1000.0 * latency_s / new_tokens,
    }
'''

CELLS[7] = '''
def run_static_ptq_optimum(model_id: str, save_dir: str) -> tuple[object, str]:
    """Export to ONNX, quantize to INT8 with ONNX Runtime, load it: (quantized model, info string)."""
    onnx_model = ORTModelForCausalLM.from_pretrained(model_id, export=True)
    quantizer = ORTQuantizer.from_pretrained(onnx_model)
    qconfig = AutoQuantizationConfig.avx512_vnni(is_static=False, per_channel=False)
    quantizer.quantize(save_dir=save_dir, quantization_config=qconfig)
    quantized_model = ORTModelForCausalLM.from_pretrained(save_dir, file_name="model_quantized.onnx")
    info = f"backend=ONNX Runtime (CPUExecutionProvider) | precision=INT8 dynamic, per-tensor (avx512_vnni) | file={save_dir}/model_quantized.onnx"
    return quantized_model, info
'''

CELLS[9] = '''
def ablate_cache_and_padding(model, tokenizer, prompts: list[str], max_new_tokens: int = 32
                             ) -> dict[str, dict]:
    """Metrics for every use_cache x padding side, keyed like "use_cache=True,padding=left"."""
    results = {}
    original_side = tokenizer.padding_side
    try:
        for use_cache in (True, False):
            for side in ("left", "right"):
                tokenizer.padding_side = side
                results[f"use_cache={use_cache},padding={side}"] = measure_generation(
                    model, tokenizer, prompts, max_new_tokens=max_new_tokens, use_cache=use_cache)
    finally:
        tokenizer.padding_side = original_side
    return results
'''

CELLS[11] = '''
def measure_batched(model, tokenizer, prompts: list[str], batch_sizes: list[int],
                    max_new_tokens: int = 32) -> pandas.DataFrame:
    """One row per batch size: batch_size, latency_s, tokens_per_s, latency_per_sample_s."""
    rows = []
    for batch_size in batch_sizes:
        batch_prompts = [prompts[i % len(prompts)] for i in range(batch_size)]
        m = measure_generation(model, tokenizer, batch_prompts, max_new_tokens=max_new_tokens)
        rows.append({
            "batch_size": batch_size,
            "latency_s": m["latency_s"],
            "tokens_per_s": m["tokens_per_s"],
            "latency_per_sample_s": m["latency_s"] / batch_size,
            "ms_per_token": m["ms_per_token"],
            "new_tokens": m["new_tokens"],
        })
    return pandas.DataFrame(rows)
'''

CELLS[13] = '''
def compare_ppplx(models: dict[str, object], tokenizer, texts: list[str]) -> dict[str, dict]:
    """{label: {"loss": token-weighted mean cross-entropy, "ppx": exp(loss)}} for every model."""
    results = {}
    original_side = tokenizer.padding_side
    tokenizer.padding_side = "right"
    try:
        for label, model in models.items():
            total_nll, total_tokens = 0.0, 0
            for start in range(0, len(texts), PPX_BATCH_SIZE):
                batch = tokenizer(texts[start:start + PPX_BATCH_SIZE], return_tensors="pt",
                                  padding=True).to(model.device)
                with torch.no_grad():
                    logits = model(**batch).logits
                shift_logits = logits[:, :-1, :].float()
                labels = batch["input_ids"][:, 1:].clone()
                labels[batch["attention_mask"][:, 1:] == 0] = -100
                total_nll += F.cross_entropy(shift_logits.reshape(-1, shift_logits.size(-1)),
                                             labels.reshape(-1), ignore_index=-100,
                                             reduction="sum").item()
                total_tokens += int((labels != -100).sum())
            loss = total_nll / total_tokens
            results[label] = {"loss": loss, "ppx": math.exp(loss), "tokens": total_tokens}
    finally:
        tokenizer.padding_side = original_side
    return results
'''

CELLS[15] = '''
def build_results_table(results: dict) -> pandas.DataFrame:
    """One row per scenario: scenario, latency_s, tokens_per_s, ms_per_token, ppx."""
    nan = float("nan")
    ppx = results.get("ppx", {})
    rows = []
    for name in ("baseline", "quantized"):
        m = results[name]
        rows.append({"scenario": name, "latency_s": m["latency_s"], "tokens_per_s": m["tokens_per_s"],
                     "ms_per_token": m["ms_per_token"], "ppx": ppx.get(name, {}).get("ppx", nan)})
    for key, m in results["ablation"].items():
        rows.append({"scenario": key, "latency_s": m["latency_s"], "tokens_per_s": m["tokens_per_s"],
                     "ms_per_token": m["ms_per_token"], "ppx": nan})
    for row in results["batched"].to_dict("records"):
        rows.append({"scenario": f"batch_size={int(row['batch_size'])}", "latency_s": row["latency_s"],
                     "tokens_per_s": row["tokens_per_s"], "ms_per_token": row["ms_per_token"], "ppx": nan})
    return pandas.DataFrame(rows, columns=["scenario", "latency_s", "tokens_per_s", "ms_per_token", "ppx"])
'''

CELLS[17] = '''
LONG_PROMPT = (
    "The history of the printing press is often told as the story of a single inventor, but the real change "
    "came from many small improvements that spread across Europe over several decades. Paper became cheaper "
    "as mills learned to process linen rags more efficiently. Metal workers, who already knew how to cast "
    "coins and seals, adapted their skills to make movable type that could be reused for many pages. Ink "
    "makers experimented with oil based recipes that would stick to metal instead of running off it. "
    "Merchants saw an opportunity to sell books to a growing class of readers in the towns, and "
    "universities wanted identical copies of texts so that students and teachers could refer to the same "
    "page. Within fifty years there were printers in most large cities, and the number of books in "
    "circulation had grown enormously. Some scholars worried that cheap books would spread errors as quickly "
    "as they spread knowledge, and they were partly right, because a mistake in the type was copied into "
    "every sheet of a print run. Others argued that printed editions could be corrected and reissued, which "
    "was far easier than fixing thousands of handwritten manuscripts one by one. Over time, printers began "
    "to add page numbers, indexes and title pages, features that we now take for granted but that made "
    "books much easier to search and to cite. In the end, the press changed not only how ideas travelled "
    "but also how people expected knowledge to be organised, checked and shared with strangers."
)


def probe_edge_prompts(model, tokenizer, max_new_tokens: int = 32) -> dict[str, dict]:
    """Metrics for a very short, a very long, a multi-line and a repetitive prompt."""
    edge_prompts = {
        "very_short": "Hello",
        "very_long": LONG_PROMPT,
        "multi_line": "Shopping list:\\n- two loaves of bread\\n- a dozen eggs\\n- fresh basil\\nDon't forget",
        "repetitive": "buffalo " * 40,
    }
    results = {}
    for name, prompt in edge_prompts.items():
        metrics = measure_generation(model, tokenizer, [prompt], max_new_tokens=max_new_tokens)
        metrics["prompt_tokens"] = len(tokenizer(prompt)["input_ids"])
        results[name] = metrics
    return results
'''

CELLS[19] = '''
def run_quantization_exercise(model_id: str = "gpt2", batch_sizes: tuple[int, ...] = (1, 4),
                              max_new_tokens: int = 32) -> tuple[pandas.DataFrame, list[str]]:
    """Baseline -> PTQ -> ablation -> batching -> perplexity -> edge prompts -> table and 3-5 takeaways."""
    tokenizer, model = load_model_and_tokenizer(model_id)
    print(f"Loaded: {model_id} | device={model.device} | dtype={model.dtype}")

    print(f"\\n== [1] {model.device.type.upper()} FP32 Baseline ==")
    baseline = measure_generation(model, tokenizer, PROMPTS, max_new_tokens)
    print(baseline)

    print("\\n== [2] Post-training quantization ==")
    quantized_model, info = run_static_ptq_optimum(model_id, QUANTIZED_DIR)
    print(info)
    sample = tokenizer(["The capital of France is"], return_tensors="pt")
    print("quantized sample:", tokenizer.decode(quantized_model.generate(**sample, max_new_tokens=8,
          pad_token_id=tokenizer.pad_token_id)[0], skip_special_tokens=True))
    quantized = measure_generation(quantized_model, tokenizer, PROMPTS, max_new_tokens)
    print(quantized)

    print("\\n== [3] KV cache x padding ablation ==")
    ablation = ablate_cache_and_padding(model, tokenizer, PROMPTS, max_new_tokens)
    for key, m in ablation.items():
        print(f"{key}: {m['latency_s']:.4f} s, {m['tokens_per_s']:.1f} tok/s, {m['ms_per_token']:.2f} ms/token")

    print("\\n== [4] Batched vs single-sample ==")
    batched = measure_batched(model, tokenizer, PROMPTS, list(batch_sizes), max_new_tokens)
    print(batched.to_string(index=False))

    print("\\n== [5] Perplexity ==")
    ppx = compare_ppplx({"baseline": model, "quantized": quantized_model}, tokenizer, PPX_TEXTS)
    for label, r in ppx.items():
        print(f"{label}: loss={r['loss']:.4f} ppx={r['ppx']:.2f}")

    print("\\n== [6] Edge prompts ==")
    edge = probe_edge_prompts(model, tokenizer, max_new_tokens)
    for name, m in edge.items():
        print(f"{name} ({m['prompt_tokens']} prompt tokens): {m['tokens_per_s']:.1f} tok/s, {m['latency_s']:.4f} s")

    table = build_results_table({"baseline": baseline, "quantized": quantized, "ablation": ablation,
                                 "batched": batched, "ppx": ppx})
    print("\\n== [7] Summary table ==")
    print(table.to_string(index=False))

    speedup = quantized["tokens_per_s"] / baseline["tokens_per_s"]
    cache_gain = (ablation["use_cache=True,padding=left"]["tokens_per_s"]
                  / ablation["use_cache=False,padding=left"]["tokens_per_s"])
    tput = dict(zip(batched["batch_size"], batched["tokens_per_s"]))
    slowest = min(edge, key=lambda k: edge[k]["tokens_per_s"])
    drift = ppx["quantized"]["ppx"] - ppx["baseline"]["ppx"]
    takeaways = [
        f"ONNX Runtime INT8 quantization ran at {speedup:.2f}x the baseline throughput "
        f"({quantized['tokens_per_s']:.1f} vs {baseline['tokens_per_s']:.1f} tok/s) on {model.device.type}.",
        f"With left padding the KV cache ran at {cache_gain:.2f}x the tokens/s of no cache; without a cache every step re-encodes the whole prefix, "
        "so the gap grows with longer prompts and more new tokens (on this tiny model and 16 tokens it is small and noisy).",
        f"Batching took total throughput from {tput[min(tput)]:.1f} tok/s (batch {min(tput)}) to "
        f"{tput[max(tput)]:.1f} tok/s (batch {max(tput)}), and the whole batch waits for its slowest row, so per-request latency is not what improves.",
        f"Perplexity moved by {drift:+.3f} after quantization ({ppx['baseline']['ppx']:.2f} -> {ppx['quantized']['ppx']:.2f}), so the INT8 weights cost little or no quality here.",
        f"The slowest edge case was '{slowest}': a long prefill dominates when the prompt is long.",
    ]
    print("\\nTakeaways:")
    for t in takeaways:
        print("-", t)
    return table, takeaways
'''
