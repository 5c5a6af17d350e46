"""Student 7: ablates padding on a deep copy of the tokenizer (original never touched), @torch.inference_mode()
decorator, time.perf_counter, counts tokens per row from lengths, exports via ORTModelForCausalLM + save_pretrained into
save_dir, quantizes from disk, per-sequence loss loop (batched) with reduction='sum', list-of-dicts results."""
NAME = "correct-07-tokenizer-copies.ipynb"
DESC = "Padding ablation measured on deep copies of the tokenizer (original untouched), @torch.inference_mode() decorators, export saved inside save_dir then quantized from disk with avx512_vnni, answers typed in a new markdown cell."

APPEND = {1: """
import copy
import os
from torch.nn import functional as F
"""}

INSERTS = [(20, "md", '''
**My reading of the results.** The quantized ONNX model is the clear win on this CPU: ONNX Runtime runs the INT8
matrix multiplications with fewer bytes moved and less per-step framework overhead, and the perplexity on the six
test sentences is within a rounding error of the FP32 model, so dynamic post-training quantization is safe here.
The KV-cache ablation is much less dramatic than I expected because the model has two layers and we only generate 16
tokens, so recomputing the prefix is cheap; with a real GPT-2 and longer outputs the no-cache runs get quadratically
worse. Right padding barely changes timing, but it is still wrong for generation because the continuation is
appended after the pad tokens. Batching helps total throughput but not latency per request, and the long edge prompt
shows that prefill cost grows with the prompt length.
''')]

CELLS = {}
CELLS[3] = '''
def load_model_and_tokenizer(model_id: str) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Tokenizer and model from the same id; model in eval mode on CUDA if available, else the CPU."""
    tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(model_id)
    model: PreTrainedModel = AutoModelForCausalLM.from_pretrained(model_id)
    tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model.config.pad_token_id = tokenizer.eos_token_id
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device).eval()
    assert not model.training
    return tokenizer, model
'''

CELLS[5] = '''
@torch.inference_mode()
def measure_generation(model, tokenizer, prompts: list[str], max_new_tokens: int = 32,
                       use_cache: bool = True) -> dict:
    """One untimed warm-up generate, then one timed generate of the batch of prompts.
    Returns latency_s, new_tokens (all sequences), tokens_per_s, ms_per_token."""
    batch = tokenizer(prompts, padding=True, return_tensors="pt").to(model.device)
    gpu = model.device.type == "cuda"
    model.generate(**batch, max_new_tokens=min(4, max_new_tokens), use_cache=use_cache,
                   pad_token_id=tokenizer.pad_token_id)
    if gpu:
        torch.cuda.synchronize()
    t_start = time.perf_counter()
    generated = model.generate(**batch, max_new_tokens=max_new_tokens, use_cache=use_cache,
                               pad_token_id=tokenizer.pad_token_id, do_sample=False)
    if gpu:
        torch.cuda.synchronize()
    t_end = time.perf_counter()
    prompt_len = batch["input_ids"].size(1)
    per_row = [generated[i].size(0) - prompt_len for i in range(generated.size(0))]
    new_tokens = sum(per_row)
    seconds = t_end - t_start
    return {"latency_s": seconds, "new_tokens": new_tokens, "tokens_per_s": new_tokens / seconds,
            "ms_per_token": 1000 * seconds / new_tokens, "new_tokens_per_row": per_row,
            "padding_side": tokenizer.padding_side}
'''

CELLS[7] = '''
def run_static_ptq_optimum(model_id: str, save_dir: str) -> tuple[object, str]:
    """Export to ONNX, quantize to INT8 with ONNX Runtime, load it: (quantized model, info string)."""
    fp32_dir = os.path.join(save_dir, "onnx-fp32")
    ORTModelForCausalLM.from_pretrained(model_id, export=True).save_pretrained(fp32_dir)
    quantizer = ORTQuantizer.from_pretrained(fp32_dir)
    dynamic_int8 = AutoQuantizationConfig.avx512_vnni(is_static=False, per_channel=True)
    quantizer.quantize(save_dir=save_dir, quantization_config=dynamic_int8, file_suffix="dyn_int8")
    model = ORTModelForCausalLM.from_pretrained(save_dir, file_name="model_dyn_int8.onnx")
    providers = model.providers if hasattr(model, "providers") else ["CPUExecutionProvider"]
    return model, f"backend: ONNX Runtime {providers[0]}; precision: INT8 (dynamic, per-channel, avx512_vnni)"
'''

CELLS[9] = '''
def ablate_cache_and_padding(model, tokenizer, prompts: list[str], max_new_tokens: int = 32
                             ) -> dict[str, dict]:
    """Metrics for every use_cache x padding side, keyed like "use_cache=True,padding=left"."""
    results = {}
    for use_cache in (True, False):
        for side in ("left", "right"):
            padded_tok = copy.deepcopy(tokenizer)     # the caller's tokenizer keeps its own padding side
            padded_tok.padding_side = side
            results[f"use_cache={use_cache},padding={side}"] = measure_generation(
                model, padded_tok, prompts, max_new_tokens=max_new_tokens, use_cache=use_cache)
    return results
'''

CELLS[11] = '''
def measure_batched(model, tokenizer, prompts: list[str], batch_sizes: list[int],
                    max_new_tokens: int = 32) -> pandas.DataFrame:
    """One row per batch size: batch_size, latency_s, tokens_per_s, latency_per_sample_s."""
    rows = []
    for batch_size in batch_sizes:
        batch_prompts = [prompts[n % len(prompts)] for n in range(batch_size)]
        m = measure_generation(model, tokenizer, batch_prompts, max_new_tokens=max_new_tokens)
        assert len(m["new_tokens_per_row"]) == batch_size
        rows.append({"batch_size": batch_size, "latency_s": m["latency_s"],
                     "tokens_per_s": sum(m["new_tokens_per_row"]) / m["latency_s"],
                     "latency_per_sample_s": m["latency_s"] / batch_size,
                     "ms_per_token": m["ms_per_token"]})
    return pandas.DataFrame(rows)
'''

CELLS[13] = '''
@torch.inference_mode()
def compare_ppplx(models: dict[str, object], tokenizer, texts: list[str]) -> dict[str, dict]:
    """{label: {"loss": token-weighted mean cross-entropy, "ppx": exp(loss)}} for every model."""
    results = {}
    right_tok = copy.deepcopy(tokenizer)
    right_tok.padding_side = "right"
    batches = [texts[i:i + PPX_BATCH_SIZE] for i in range(0, len(texts), PPX_BATCH_SIZE)]
    for label, model in models.items():
        total_loss, total_tokens = 0.0, 0
        for chunk in batches:
            enc = right_tok(chunk, padding=True, return_tensors="pt").to(model.device)
            logits = model(**enc).logits.float()
            for row in range(logits.size(0)):
                length = int(enc["attention_mask"][row].sum())     # right padding: real tokens come first
                if length < 2:
                    continue
                total_loss += F.cross_entropy(logits[row, :length - 1], enc["input_ids"][row, 1:length],
                                              reduction="sum").item()
                total_tokens += length - 1
        loss = total_loss / total_tokens
        results[label] = {"loss": loss, "ppx": math.exp(loss), "tokens": total_tokens}
    return results
'''

CELLS[15] = '''
def build_results_table(results: dict) -> pandas.DataFrame:
    """One row per scenario: scenario, latency_s, tokens_per_s, ms_per_token, ppx."""
    rows = []
    for item in results["rows"]:
        m = item["metrics"]
        rows.append({"scenario": item["scenario"], "latency_s": m["latency_s"], "tokens_per_s": m["tokens_per_s"],
                     "ms_per_token": m.get("ms_per_token", 1000.0 / m["tokens_per_s"]),
                     "ppx": item.get("ppx", float("nan"))})
    return pandas.DataFrame(rows)
'''

CELLS[17] = '''
def probe_edge_prompts(model, tokenizer, max_new_tokens: int = 32) -> dict[str, dict]:
    """Metrics for a very short, a very long, a multi-line and a repetitive prompt."""
    paragraph = (
        "Astronomers measure the distance to nearby stars with parallax, the small shift in a star's position "
        "when the Earth is on opposite sides of its orbit. For more distant galaxies they rely on standard "
        "candles, objects whose true brightness is known, such as a certain kind of pulsating star or a "
        "particular type of exploding white dwarf. By comparing how bright these objects appear with how bright "
        "they really are, astronomers can work out how far away they must be. Each method only works over a "
        "limited range, so the techniques are chained together into what is called the cosmic distance ladder, "
        "with every rung calibrated against the one below it. "
    )
    cases = [
        ("very short", "Hi!"),
        ("very long", paragraph * 2),
        ("multi-line", "Ingredients:\\n2 eggs\\n1 cup of flour\\n1 cup of milk\\n\\nMethod:\\n1."),
        ("repetitive", "yes " * 75),
    ]
    found = {}
    for name, text in cases:
        found[name] = measure_generation(model, tokenizer, [text], max_new_tokens=max_new_tokens)
        found[name]["prompt_tokens"] = len(tokenizer(text)["input_ids"])
    return found
'''

CELLS[19] = '''
def run_quantization_exercise(model_id: str = "gpt2", batch_sizes: tuple[int, ...] = (1, 4),
                              max_new_tokens: int = 32) -> tuple[pandas.DataFrame, list[str]]:
    """Baseline -> PTQ -> ablation -> batching -> perplexity -> edge prompts -> table and 3-5 takeaways."""
    tokenizer, model = load_model_and_tokenizer(model_id)
    print(f"Loaded: {model_id} | device={model.device} | dtype={model.dtype}")
    print("== CPU FP32 Baseline ==" if model.device.type == "cpu" else "== GPU FP32 Baseline ==")
    baseline = measure_generation(model, tokenizer, PROMPTS, max_new_tokens=max_new_tokens)
    print(f"latency {baseline['latency_s']:.3f} s, {baseline['tokens_per_s']:.1f} tokens/s, {baseline['ms_per_token']:.2f} ms/token")

    print("== Quantized (Optimum / ONNX Runtime) ==")
    int8_model, int8_info = run_static_ptq_optimum(model_id, QUANTIZED_DIR)
    print(int8_info)
    quantized = measure_generation(int8_model, tokenizer, PROMPTS, max_new_tokens=max_new_tokens)
    print(f"latency {quantized['latency_s']:.3f} s, {quantized['tokens_per_s']:.1f} tokens/s, {quantized['ms_per_token']:.2f} ms/token")

    print("== KV cache / padding ablation ==")
    ablation = ablate_cache_and_padding(model, tokenizer, PROMPTS, max_new_tokens=max_new_tokens)
    for key, m in ablation.items():
        print(f"{key:30s} {m['latency_s']:.3f} s  {m['tokens_per_s']:.1f} tok/s  (padded {m['padding_side']})")
    print("tokenizer padding side after the ablation:", tokenizer.padding_side)

    print("== Batched vs single ==")
    batched = measure_batched(model, tokenizer, PROMPTS, list(batch_sizes), max_new_tokens=max_new_tokens)
    print(batched.to_string(index=False))

    print("== Perplexity ==")
    ppx = compare_ppplx({"FP32 baseline": model, "INT8 ONNX": int8_model}, tokenizer, PPX_TEXTS)
    for label, r in ppx.items():
        print(f"{label}: loss {r['loss']:.4f}, ppx {r['ppx']:.3f} over {r['tokens']} tokens")

    print("== Edge prompts ==")
    edge = probe_edge_prompts(model, tokenizer, max_new_tokens=max_new_tokens)
    for name, m in edge.items():
        print(f"{name:10s} prompt={m['prompt_tokens']:4d} tok  {m['tokens_per_s']:.1f} tok/s  {m['latency_s']:.3f} s")

    rows = [{"scenario": "baseline FP32", "metrics": baseline, "ppx": ppx["FP32 baseline"]["ppx"]},
            {"scenario": "quantized INT8 (ONNX Runtime)", "metrics": quantized, "ppx": ppx["INT8 ONNX"]["ppx"]}]
    rows += [{"scenario": k, "metrics": m} for k, m in ablation.items()]
    rows += [{"scenario": f"batch size {int(r['batch_size'])}", "metrics": r} for r in batched.to_dict("records")]
    table = build_results_table({"rows": rows})
    print("== Summary table ==")
    print(table.to_string(index=False))

    takeaways = [
        f"Quantization: INT8 ONNX Runtime ran at {quantized['tokens_per_s']:.0f} tok/s vs {baseline['tokens_per_s']:.0f} tok/s for FP32 PyTorch.",
        f"Quality: perplexity {ppx['FP32 baseline']['ppx']:.3f} (FP32) vs {ppx['INT8 ONNX']['ppx']:.3f} (INT8) - negligible drift.",
        "Use the KV cache and left padding for generation: the cache avoids recomputing the prefix at each step and "
        "left padding keeps each prompt's last token next to its continuation.",
        f"Batching: {batched['tokens_per_s'].iloc[-1]:.0f} tok/s at batch {int(batched['batch_size'].iloc[-1])} vs "
        f"{batched['tokens_per_s'].iloc[0]:.0f} tok/s at batch {int(batched['batch_size'].iloc[0])}; per-sample latency is not the win.",
    ]
    print("Takeaways:")
    for t in takeaways:
        print("  *", t)
    return table, takeaways
'''
