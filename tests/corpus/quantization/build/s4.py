"""Student 4: encode each prompt then tokenizer.pad, time.time, @torch.no_grad() decorators, arm64 INT8 config,
CrossEntropyLoss(reduction='sum') with -100 labels, DataFrame.from_records table with a group column, df.plot(ax=...)."""
NAME = "correct-04-encode-pad-time.ipynb"
DESC = "tokenizer.encode + tokenizer.pad batching, time.time timer, @torch.no_grad() decorators, arm64 dynamic INT8 config loaded via pathlib, summed CrossEntropyLoss with -100 labels, df.plot(ax=...) figure."

APPEND = {1: """
from pathlib import Path
import matplotlib.pyplot as plt
"""}

INSERTS = [(20, "code", '''
# quick visual check of the summary table
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
results_table.plot(x="scenario", y="tokens_per_s", kind="bar", ax=axes[0], legend=False, title="tokens / s")
results_table.plot(x="scenario", y="ms_per_token", kind="bar", ax=axes[1], legend=False, color="tab:orange",
                   title="ms / token")
for ax in axes:
    ax.tick_params(axis="x", labelrotation=75)
plt.tight_layout()
plt.show()
print(len(takeaways), "takeaways")
''')]

CELLS = {}
CELLS[3] = '''
def load_model_and_tokenizer(model_id: str) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Tokenizer and model from the same id; model in eval mode on CUDA if available, else the CPU."""
    tokenizer = AutoTokenizer.from_pretrained(model_id, padding_side="left")
    tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_id, torch_dtype=torch.float32)
    if torch.cuda.is_available():
        model = model.cuda()
    return tokenizer, model.eval()
'''

CELLS[5] = '''
def encode_batch(tokenizer, texts, device):
    encoded = [tokenizer.encode(t) for t in texts]             # tokenizing happens outside the timer
    batch = tokenizer.pad({"input_ids": encoded}, padding=True, return_tensors="pt")
    return {k: v.to(device) for k, v in batch.items()}


@torch.no_grad()
def measure_generation(model, tokenizer, prompts: list[str], max_new_tokens: int = 32,
                       use_cache: bool = True) -> dict:
    """One untimed warm-up generate, then one timed generate of the batch of prompts.
    Returns latency_s, new_tokens (all sequences), tokens_per_s, ms_per_token."""
    batch = encode_batch(tokenizer, prompts, model.device)
    cuda = torch.cuda.is_available() and model.device.type == "cuda"
    model.generate(**batch, max_new_tokens=2, use_cache=use_cache, pad_token_id=tokenizer.pad_token_id)
    if cuda:
        torch.cuda.synchronize()
    start = time.time()
    out = model.generate(**batch, max_new_tokens=max_new_tokens, use_cache=use_cache,
                         pad_token_id=tokenizer.pad_token_id, do_sample=False)
    if cuda:
        torch.cuda.synchronize()
    latency = time.time() - start
    new_tokens = out.numel() - batch["input_ids"].numel()
    return {"latency_s": latency, "new_tokens": new_tokens,
            "tokens_per_s": new_tokens / latency, "ms_per_token": latency / new_tokens * 1e3}
'''

CELLS[7] = '''
def run_static_ptq_optimum(model_id: str, save_dir: str) -> tuple[object, str]:
    """Export to ONNX, quantize to INT8 with ONNX Runtime, load it: (quantized model, info string)."""
    save_path = Path(save_dir)
    ort_fp32 = ORTModelForCausalLM.from_pretrained(model_id, export=True, use_cache=True)
    qconfig = AutoQuantizationConfig.arm64(is_static=False, per_channel=False)
    ORTQuantizer.from_pretrained(ort_fp32).quantize(quantization_config=qconfig, save_dir=save_path)
    onnx_files = sorted(p.name for p in save_path.glob("*quantized*.onnx"))
    ort_int8 = ORTModelForCausalLM.from_pretrained(save_path, file_name=onnx_files[0])
    return ort_int8, f"onnxruntime / {onnx_files[0]} / dynamic int8 (u8 activations, s8 weights, arm64 preset)"
'''

CELLS[9] = '''
def ablate_cache_and_padding(model, tokenizer, prompts: list[str], max_new_tokens: int = 32
                             ) -> dict[str, dict]:
    """Metrics for every use_cache x padding side, keyed like "use_cache=True,padding=left"."""
    results = {}
    default_side = tokenizer.padding_side
    for use_cache in (True, False):
        for side in ("left", "right"):
            tokenizer.padding_side = side
            results["use_cache=%s,padding=%s" % (use_cache, side)] = measure_generation(
                model, tokenizer, prompts, max_new_tokens=max_new_tokens, use_cache=use_cache)
    tokenizer.padding_side = default_side
    return results
'''

CELLS[11] = '''
def measure_batched(model, tokenizer, prompts: list[str], batch_sizes: list[int],
                    max_new_tokens: int = 32) -> pandas.DataFrame:
    """One row per batch size: batch_size, latency_s, tokens_per_s, latency_per_sample_s."""
    rows = []
    for batch_size in batch_sizes:
        group = []
        while len(group) < batch_size:
            group.extend(prompts)
        group = group[:batch_size]
        r = measure_generation(model, tokenizer, group, max_new_tokens=max_new_tokens)
        rows.append((batch_size, r["latency_s"], r["tokens_per_s"], r["latency_s"] / batch_size, r["ms_per_token"]))
    return pandas.DataFrame(rows, columns=["batch_size", "latency_s", "tokens_per_s", "latency_per_sample_s",
                                           "ms_per_token"])
'''

CELLS[13] = '''
@torch.no_grad()
def compare_ppplx(models: dict[str, object], tokenizer, texts: list[str]) -> dict[str, dict]:
    """{label: {"loss": token-weighted mean cross-entropy, "ppx": exp(loss)}} for every model."""
    results = {}
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100, reduction="sum")
    side = tokenizer.padding_side
    tokenizer.padding_side = "right"
    for label, model in models.items():
        total, count = 0.0, 0
        for b in range(0, len(texts), PPX_BATCH_SIZE):
            batch = encode_batch(tokenizer, texts[b:b + PPX_BATCH_SIZE], model.device)
            logits = model(**batch).logits
            labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
            logits, labels = logits[:, :-1].contiguous(), labels[:, 1:].contiguous()
            total += loss_fn(logits.view(-1, logits.shape[-1]).float(), labels.view(-1)).item()
            count += (labels != -100).sum().item()
        results[label] = {"loss": total / count, "ppx": math.exp(total / count)}
    tokenizer.padding_side = side
    return results
'''

CELLS[15] = '''
def build_results_table(results: dict) -> pandas.DataFrame:
    """One row per scenario: scenario, latency_s, tokens_per_s, ms_per_token, ppx."""
    records = []
    for name in ("baseline", "quantized"):
        records.append(dict(group="model", scenario=name, ppx=results["ppx"][name]["ppx"],
                            **{k: results[name][k] for k in ("latency_s", "tokens_per_s", "ms_per_token")}))
    for setting, m in results["ablation"].items():
        records.append(dict(group="ablation", scenario=setting, latency_s=m["latency_s"],
                            tokens_per_s=m["tokens_per_s"], ms_per_token=m["ms_per_token"]))
    for rec in results["batched"].to_dict(orient="records"):
        records.append(dict(group="batching", scenario=f"batch_size={rec['batch_size']}", latency_s=rec["latency_s"],
                            tokens_per_s=rec["tokens_per_s"], ms_per_token=rec["ms_per_token"]))
    table = pandas.DataFrame.from_records(records)
    return table[["scenario", "latency_s", "tokens_per_s", "ms_per_token", "ppx", "group"]]
'''

CELLS[17] = '''
EDGE_PROMPTS = {
    "very short": "Hello world",
    "very long": (
        "Dear hiring committee, I am writing to apply for the position of junior data analyst that was advertised "
        "on your website last week. I recently finished a degree in statistics, where I spent most of my final "
        "year working on a project about bus delays in my city. I collected a year of arrival times from the public "
        "transport feed, cleaned the data, and built a simple model that predicted delays from the time of day, the "
        "weather and the number of passengers. The model was not perfect, but it helped the local council decide "
        "which routes needed extra buses during the winter months. Along the way I learned how much of the work in "
        "data analysis is about asking the right questions and explaining the answers clearly to people who do "
        "not read code. I enjoy that part of the job very much. In my spare time I volunteer at a food bank, where I "
        "built a small spreadsheet that tracks donations and reminds volunteers when food is close to its expiry date. "
        "I would be glad to bring the same care and curiosity to your team, and I would welcome the chance to talk "
        "about how I could help. Thank you for your time and consideration."
    ),
    "multi-line": "Meeting notes\\n1. Budget approved\\n2. Launch moved to May\\n3. Next steps:",
    "repetitive": "no " * 100,
}


def probe_edge_prompts(model, tokenizer, max_new_tokens: int = 32) -> dict[str, dict]:
    """Metrics for a very short, a very long, a multi-line and a repetitive prompt."""
    report = {}
    for kind, prompt in EDGE_PROMPTS.items():
        report[kind] = measure_generation(model, tokenizer, [prompt], max_new_tokens)
        report[kind]["prompt_tokens"] = len(tokenizer.encode(prompt))
    return report
'''

CELLS[19] = '''
def run_quantization_exercise(model_id: str = "gpt2", batch_sizes: tuple[int, ...] = (1, 4),
                              max_new_tokens: int = 32) -> tuple[pandas.DataFrame, list[str]]:
    """Baseline -> PTQ -> ablation -> batching -> perplexity -> edge prompts -> table and 3-5 takeaways."""
    tokenizer, model = load_model_and_tokenizer(model_id)
    print("Loaded: %s | device=%s | dtype=%s" % (model_id, model.device, model.dtype))

    print("--- baseline (PyTorch fp32)")
    baseline = measure_generation(model, tokenizer, PROMPTS, max_new_tokens)
    print(baseline)

    print("--- quantized (ONNX Runtime int8)")
    q_model, q_info = run_static_ptq_optimum(model_id, QUANTIZED_DIR)
    print(q_info)
    quantized = measure_generation(q_model, tokenizer, PROMPTS, max_new_tokens)
    print(quantized)

    print("--- cache / padding ablation")
    ablation = ablate_cache_and_padding(model, tokenizer, PROMPTS, max_new_tokens)
    print(pandas.DataFrame.from_dict(ablation, orient="index"))

    print("--- batching")
    batched = measure_batched(model, tokenizer, PROMPTS, list(batch_sizes), max_new_tokens)
    print(batched)

    print("--- perplexity")
    ppx = compare_ppplx({"baseline": model, "quantized": q_model}, tokenizer, PPX_TEXTS)
    print(ppx)

    print("--- edge prompts")
    edge = probe_edge_prompts(model, tokenizer, max_new_tokens)
    print(pandas.DataFrame.from_dict(edge, orient="index"))

    table = build_results_table({"baseline": baseline, "quantized": quantized, "ablation": ablation,
                                 "batched": batched, "ppx": ppx})
    print("--- results table")
    print(table)

    takeaways = [
        "Quantization: the ONNX Runtime INT8 model ran at %.1f tok/s vs %.1f tok/s for PyTorch FP32, with perplexity "
        "%.3f vs %.3f, i.e. essentially no quality loss." % (quantized["tokens_per_s"], baseline["tokens_per_s"],
                                                            ppx["quantized"]["ppx"], ppx["baseline"]["ppx"]),
        "KV cache: keep use_cache=True for decoding; off, the model re-reads the whole prefix at every step "
        "(here %.1f vs %.1f tok/s with left padding, a small gap because the prompts and outputs are short)."
        % (ablation["use_cache=True,padding=left"]["tokens_per_s"], ablation["use_cache=False,padding=left"]["tokens_per_s"]),
        "Batching: the largest batch reached %.1f tok/s overall against %.1f tok/s for one sequence, but each request "
        "still waits for the whole batch; long prompts (%d tokens) pay a visible prefill cost."
        % (batched["tokens_per_s"].iloc[-1], batched["tokens_per_s"].iloc[0], edge["very long"]["prompt_tokens"]),
    ]
    print("--- takeaways")
    for i, t in enumerate(takeaways, 1):
        print(f"{i}. {t}")
    return table, takeaways
'''
