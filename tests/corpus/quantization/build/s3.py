"""Student 3: defensive, re-applies tokenizer/model state inside every function, time.monotonic,
export -> save_pretrained -> ORTQuantizer from a folder (avx512), CrossEntropyLoss(reduction='none') * mask,
pandas.concat table, a matplotlib figure and a written discussion in a new markdown cell."""
NAME = "correct-03-defensive-monotonic.ipynb"
DESC = "Re-applies pad token / eval state inside every function, times with time.monotonic, exports via save_pretrained then quantizes the folder (avx512), masked CrossEntropyLoss(reduction='none'), adds a plot and a written discussion cell."

APPEND = {1: """
import os
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
"""}

INSERTS = [
    (20, "code", '''
fig, ax = plt.subplots(figsize=(8, 3.5))
results_table.set_index("scenario")["tokens_per_s"].plot(kind="barh", ax=ax, color="tab:blue")
ax.set_xlabel("generated tokens per second (higher is better)")
ax.set_title(f"{MODEL_ID}: throughput per scenario, max_new_tokens={MAX_NEW_TOKENS}")
fig.tight_layout()
fig.savefig("quantization_throughput.png")
print(results_table.round(3).to_string(index=False))
'''),
    (20, "md", '''
### Discussion

The numbers above come from a two-layer stand-in GPT-2 on a shared CPU, so absolute timings jump around between
runs by tens of percent. Still, the shape is what I expected. In my runs the ONNX Runtime INT8 model was faster than the
FP32 PyTorch model because the matrix multiplications run on 8-bit weights and ONNX Runtime has less Python overhead
per step, while its perplexity is practically identical, so dynamic quantization cost us almost nothing in quality.
The KV cache matters less here than it would on a real model: with only 16 new tokens and short prompts, recomputing
the prefix is cheap, so the cache on/off gap is small and sometimes buried in noise. Right padding is the wrong choice
for generation with a decoder-only model because the new tokens are appended after the pad tokens; it hardly changes
the speed but it does change the text. Batching four prompts gives more tokens per second in total, but every request
in the batch waits for the whole batch, so per-request latency does not improve. Finally, the very long prompt has the
lowest throughput because its prefill dominates the run.
'''),
]

CELLS = {}
CELLS[3] = '''
def load_model_and_tokenizer(model_id: str) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Tokenizer and model from the same id; model in eval mode on CUDA if available, else the CPU."""
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    model = AutoModelForCausalLM.from_pretrained(model_id)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = model.to(device)
    model.eval()
    return tokenizer, model
'''

CELLS[5] = '''
def _maybe_sync(model):
    if getattr(model, "device", torch.device("cpu")).type == "cuda":
        torch.cuda.synchronize()


def measure_generation(model, tokenizer, prompts: list[str], max_new_tokens: int = 32,
                       use_cache: bool = True) -> dict:
    """One untimed warm-up generate, then one timed generate of the batch of prompts.
    Returns latency_s, new_tokens (all sequences), tokens_per_s, ms_per_token."""
    # make sure the state is right even if someone calls this on a fresh tokenizer / model
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if hasattr(model, "eval"):
        model.eval()
    inputs = tokenizer(prompts, padding=True, return_tensors="pt")
    inputs = {name: tensor.to(model.device) for name, tensor in inputs.items()}
    settings = {"use_cache": use_cache, "do_sample": False, "pad_token_id": tokenizer.pad_token_id}

    with torch.inference_mode():
        _ = model.generate(**inputs, max_new_tokens=3, **settings)
        _maybe_sync(model)
        began = time.monotonic()
        sequences = model.generate(**inputs, max_new_tokens=max_new_tokens, **settings)
        _maybe_sync(model)
        elapsed = time.monotonic() - began

    prompt_width = inputs["input_ids"].shape[-1]
    new_tokens = sum(len(row) - prompt_width for row in sequences)
    return {"latency_s": elapsed, "new_tokens": int(new_tokens),
            "tokens_per_s": new_tokens / elapsed, "ms_per_token": elapsed / new_tokens * 1000}
'''

CELLS[7] = '''
def run_static_ptq_optimum(model_id: str, save_dir: str) -> tuple[object, str]:
    """Export to ONNX, quantize to INT8 with ONNX Runtime, load it: (quantized model, info string)."""
    export_dir = os.path.join(save_dir, "fp32-export")
    fp32_onnx = ORTModelForCausalLM.from_pretrained(model_id, export=True)
    fp32_onnx.save_pretrained(export_dir)
    quantizer = ORTQuantizer.from_pretrained(export_dir, file_name="model.onnx")
    dqconfig = AutoQuantizationConfig.avx512(is_static=False, per_channel=False)
    quantizer.quantize(save_dir=save_dir, quantization_config=dqconfig)
    int8_path = os.path.join(save_dir, "model_quantized.onnx")
    assert os.path.exists(int8_path), int8_path
    model = ORTModelForCausalLM.from_pretrained(save_dir, file_name="model_quantized.onnx")
    size_mb = os.path.getsize(int8_path) / 2**20
    fp32_mb = os.path.getsize(os.path.join(export_dir, "model.onnx")) / 2**20
    info = (f"ONNX Runtime dynamic quantization -> INT8 weights (avx512 config); "
            f"{fp32_mb:.2f} MB fp32 ONNX -> {size_mb:.2f} MB int8 ONNX")
    return model, info
'''

CELLS[9] = '''
def ablate_cache_and_padding(model, tokenizer, prompts: list[str], max_new_tokens: int = 32
                             ) -> dict[str, dict]:
    """Metrics for every use_cache x padding side, keyed like "use_cache=True,padding=left"."""
    results = {}
    previous = tokenizer.padding_side
    for use_cache in (True, False):
        for side in ("left", "right"):
            tokenizer.padding_side = side
            try:
                results[f"use_cache={use_cache},padding={side}"] = measure_generation(
                    model, tokenizer, prompts, max_new_tokens=max_new_tokens, use_cache=use_cache)
            finally:
                tokenizer.padding_side = previous
    return results
'''

CELLS[11] = '''
def measure_batched(model, tokenizer, prompts: list[str], batch_sizes: list[int],
                    max_new_tokens: int = 32) -> pandas.DataFrame:
    """One row per batch size: batch_size, latency_s, tokens_per_s, latency_per_sample_s."""
    rows = []
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    for batch_size in batch_sizes:
        repeats = -(-batch_size // len(prompts))          # ceil division
        batch = (prompts * repeats)[:batch_size]
        stats = measure_generation(model, tokenizer, batch, max_new_tokens=max_new_tokens, use_cache=True)
        rows.append({"batch_size": batch_size, "latency_s": stats["latency_s"],
                     "tokens_per_s": stats["tokens_per_s"],
                     "latency_per_sample_s": stats["latency_s"] / batch_size,
                     "ms_per_token": stats["ms_per_token"], "new_tokens": stats["new_tokens"]})
    return pandas.DataFrame(rows)
'''

CELLS[13] = '''
def compare_ppplx(models: dict[str, object], tokenizer, texts: list[str]) -> dict[str, dict]:
    """{label: {"loss": token-weighted mean cross-entropy, "ppx": exp(loss)}} for every model."""
    results = {}
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    restore_side = tokenizer.padding_side
    tokenizer.padding_side = "right"
    ce = torch.nn.CrossEntropyLoss(reduction="none")
    try:
        for label, model in models.items():
            loss_sum = torch.tensor(0.0, dtype=torch.float64)
            token_count = 0
            for offset in range(0, len(texts), PPX_BATCH_SIZE):
                chunk = texts[offset:offset + PPX_BATCH_SIZE]
                enc = tokenizer(chunk, padding=True, return_tensors="pt")
                enc = {k: v.to(model.device) for k, v in enc.items()}
                with torch.inference_mode():
                    logits = model(**enc).logits.float()
                pred = logits[:, :-1, :]
                gold = enc["input_ids"][:, 1:]
                keep = enc["attention_mask"][:, 1:].to(pred.dtype)
                per_token = ce(pred.transpose(1, 2), gold)        # (batch, seq-1)
                loss_sum += (per_token * keep).sum().double().cpu()
                token_count += int(keep.sum().item())
            mean_loss = (loss_sum / token_count).item()
            results[label] = {"loss": mean_loss, "ppx": math.exp(mean_loss), "n_tokens": token_count}
    finally:
        tokenizer.padding_side = restore_side
    return results
'''

CELLS[15] = '''
def build_results_table(results: dict) -> pandas.DataFrame:
    """One row per scenario: scenario, latency_s, tokens_per_s, ms_per_token, ppx."""
    wanted = ["latency_s", "tokens_per_s", "ms_per_token"]
    parts = []
    core = pandas.DataFrame({name: {k: results[name][k] for k in wanted} for name in ("baseline", "quantized")}).T
    core["ppx"] = [results["ppx"][name]["ppx"] for name in core.index]
    parts.append(core)
    parts.append(pandas.DataFrame(results["ablation"]).T[wanted])
    batched = results["batched"].copy()
    batched.index = [f"batched, batch_size={b}" for b in batched["batch_size"]]
    parts.append(batched[wanted])
    table = pandas.concat(parts).astype(float)
    table.index.name = "scenario"
    return table.reset_index()[["scenario", "latency_s", "tokens_per_s", "ms_per_token", "ppx"]]
'''

CELLS[17] = '''
def probe_edge_prompts(model, tokenizer, max_new_tokens: int = 32) -> dict[str, dict]:
    """Metrics for a very short, a very long, a multi-line and a repetitive prompt."""
    very_long = (
        "Our town library started as a single shelf in the back of the post office. A retired teacher "
        "donated her collection of novels, and neighbours began to borrow them on the honour system, "
        "writing their names in a notebook that hung from a string. Within a few years the shelf had become "
        "a room, and the room had become too small. The council agreed to rent the old bakery on the main "
        "street, and volunteers spent a whole summer sanding floors, painting walls and building shelves "
        "from donated timber. Children came after school to do their homework at the long tables, farmers "
        "came to read the newspapers on market day, and a knitting group met every Thursday evening in the "
        "corner by the window. Today the library lends laptops as well as books, runs a weekly class for "
        "people who want to learn to code, and keeps a seed bank in an old card catalogue, so that gardeners "
        "can borrow a packet of tomato seeds in spring and return a packet of their own in autumn. The "
        "notebook on the string is still there, framed on the wall beside the front desk."
    )
    prompts = {
        "very short": "Why?",
        "very long": very_long,
        "multi-line": "def add(a, b):\\n    return a + b\\n\\n\\ndef multiply(a, b):\\n",
        "repetitive": "I think that " * 30,
    }
    out = {}
    for label, prompt in prompts.items():
        m = measure_generation(model, tokenizer, [prompt], max_new_tokens=max_new_tokens)
        m["prompt_tokens"] = len(tokenizer.encode(prompt))
        out[label] = m
    return out
'''

CELLS[19] = '''
def run_quantization_exercise(model_id: str = "gpt2", batch_sizes: tuple[int, ...] = (1, 4),
                              max_new_tokens: int = 32) -> tuple[pandas.DataFrame, list[str]]:
    """Baseline -> PTQ -> ablation -> batching -> perplexity -> edge prompts -> table and 3-5 takeaways."""
    tokenizer, model = load_model_and_tokenizer(model_id)
    print(f"Loaded: {model_id} | device={model.device} | dtype={model.dtype}")

    base = measure_generation(model, tokenizer, PROMPTS, max_new_tokens=max_new_tokens)
    print(f"[baseline] latency {base['latency_s']:.3f} s | {base['tokens_per_s']:.1f} tok/s | "
          f"{base['ms_per_token']:.2f} ms/token | {base['new_tokens']} new tokens")

    qmodel, info = run_static_ptq_optimum(model_id, QUANTIZED_DIR)
    print(f"[ptq] {info}")
    quant = measure_generation(qmodel, tokenizer, PROMPTS, max_new_tokens=max_new_tokens)
    print(f"[quantized] latency {quant['latency_s']:.3f} s | {quant['tokens_per_s']:.1f} tok/s | "
          f"{quant['ms_per_token']:.2f} ms/token")

    ablation = ablate_cache_and_padding(model, tokenizer, PROMPTS, max_new_tokens=max_new_tokens)
    print("[ablation]")
    for setting, m in ablation.items():
        print(f"   {setting:32s} {m['latency_s']:.3f} s  {m['tokens_per_s']:7.1f} tok/s  {m['ms_per_token']:.2f} ms/tok")

    batched = measure_batched(model, tokenizer, PROMPTS, list(batch_sizes), max_new_tokens=max_new_tokens)
    print("[batching]\\n" + batched.round(4).to_string(index=False))

    ppx = compare_ppplx({"baseline": model, "quantized": qmodel}, tokenizer, PPX_TEXTS)
    print("[perplexity] " + ", ".join(f"{k}: loss {v['loss']:.4f}, ppx {v['ppx']:.3f}" for k, v in ppx.items()))

    edge = probe_edge_prompts(model, tokenizer, max_new_tokens=max_new_tokens)
    print("[edge prompts]")
    for label, m in edge.items():
        print(f"   {label:11s} {m['prompt_tokens']:4d} prompt tokens  {m['tokens_per_s']:7.1f} tok/s  {m['latency_s']:.3f} s")

    table = build_results_table({"baseline": base, "quantized": quant, "ablation": ablation,
                                 "batched": batched, "ppx": ppx})
    print(table.to_string(index=False))

    ratio = quant["tokens_per_s"] / base["tokens_per_s"]
    takeaways = [
        f"Dynamic INT8 quantization with ONNX Runtime gave {ratio:.2f}x the FP32 throughput on {model.device.type}; "
        "PTQ is mostly a CPU optimisation.",
        f"Perplexity barely moved ({ppx['baseline']['ppx']:.3f} -> {ppx['quantized']['ppx']:.3f}), so the speed-up did not cost quality.",
        "KV cache and padding: with a cache each step only attends from one new token; without it the whole prefix is "
        "recomputed, and right padding puts pad tokens between the prompt and its continuation.",
        f"Batching: {batched['tokens_per_s'].max():.1f} tok/s at best over all sequences, but the per-sample latency is the batch latency shared out.",
        f"The long prompt ({edge['very long']['prompt_tokens']} tokens) is dominated by prefill and gave "
        f"{edge['very long']['tokens_per_s']:.1f} tok/s vs {edge['very short']['tokens_per_s']:.1f} tok/s for the short one.",
    ]
    print("Takeaways:")
    for t in takeaways:
        print(" -", t)
    return table, takeaways
'''
