"""Student 2: manual padding with pad_sequence (honouring tokenizer.padding_side), perf_counter_ns,
new tokens counted as numel of the generated slice, avx2 per-channel, log_softmax+gather perplexity,
inference_mode, dict-of-lists table."""
NAME = "correct-02-pad-sequence.ipynb"
DESC = "Pads by hand with torch.nn.utils.rnn.pad_sequence on tokenizer.padding_side, times with perf_counter_ns under inference_mode, avx2 per-channel INT8, log_softmax+gather perplexity."

INSERTS = [(1, "code", """
# extra imports for my helpers
from itertools import cycle, islice
from torch.nn.utils.rnn import pad_sequence
""")]

CELLS = {}
CELLS[3] = '''
def load_model_and_tokenizer(model_id: str) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Tokenizer and model from the same id; model in eval mode on CUDA if available, else the CPU."""
    tok = AutoTokenizer.from_pretrained(model_id)
    tok.pad_token = tok.eos_token          # GPT-2 ships without a pad token
    tok.padding_side = "left"              # decoder-only generation wants left padding
    lm = AutoModelForCausalLM.from_pretrained(model_id)
    lm = lm.to("cuda" if torch.cuda.is_available() else "cpu").eval()
    return tok, lm
'''

CELLS[5] = '''
def pad_batch(tokenizer, prompts, device):
    """Encode every prompt, then pad them myself on tokenizer.padding_side."""
    seqs = [torch.tensor(tokenizer.encode(p), dtype=torch.long) for p in prompts]
    side = tokenizer.padding_side
    input_ids = pad_sequence(seqs, batch_first=True, padding_value=tokenizer.pad_token_id, padding_side=side)
    attention_mask = pad_sequence([torch.ones_like(s) for s in seqs], batch_first=True, padding_value=0,
                                  padding_side=side)
    return {"input_ids": input_ids.to(device), "attention_mask": attention_mask.to(device)}


def measure_generation(model, tokenizer, prompts: list[str], max_new_tokens: int = 32,
                       use_cache: bool = True) -> dict:
    """One untimed warm-up generate, then one timed generate of the batch of prompts.
    Returns latency_s, new_tokens (all sequences), tokens_per_s, ms_per_token."""
    enc = pad_batch(tokenizer, prompts, model.device)
    on_gpu = model.device.type == "cuda"
    with torch.inference_mode():
        model.generate(**enc, max_new_tokens=4, use_cache=use_cache, do_sample=False,
                       pad_token_id=tokenizer.pad_token_id)
        if on_gpu:
            torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        out = model.generate(**enc, max_new_tokens=max_new_tokens, use_cache=use_cache, do_sample=False,
                             pad_token_id=tokenizer.pad_token_id)
        if on_gpu:
            torch.cuda.synchronize()
        t1 = time.perf_counter_ns()
    latency_s = (t1 - t0) / 1e9
    generated = out[:, enc["input_ids"].shape[1]:]   # the continuation of every row
    new_tokens = generated.numel()
    return {"latency_s": latency_s, "new_tokens": new_tokens,
            "tokens_per_s": new_tokens / latency_s, "ms_per_token": latency_s * 1e3 / new_tokens,
            "batch_size": len(prompts)}
'''

CELLS[7] = '''
def run_static_ptq_optimum(model_id: str, save_dir: str) -> tuple[object, str]:
    """Export to ONNX, quantize to INT8 with ONNX Runtime, load it: (quantized model, info string)."""
    exported = ORTModelForCausalLM.from_pretrained(model_id, export=True)
    quantizer = ORTQuantizer.from_pretrained(exported)
    config = AutoQuantizationConfig.avx2(is_static=False, per_channel=True)
    out_dir = quantizer.quantize(quantization_config=config, save_dir=save_dir)
    int8_model = ORTModelForCausalLM.from_pretrained(out_dir, file_name="model_quantized.onnx")
    return int8_model, "Optimum ONNX Runtime, dynamic INT8 (avx2, per-channel weights)"
'''

CELLS[9] = '''
def ablate_cache_and_padding(model, tokenizer, prompts: list[str], max_new_tokens: int = 32
                             ) -> dict[str, dict]:
    """Metrics for every use_cache x padding side, keyed like "use_cache=True,padding=left"."""
    results = {}
    saved_side = tokenizer.padding_side
    for use_cache in (True, False):
        for side in ("left", "right"):
            tokenizer.padding_side = side
            key = f"use_cache={use_cache},padding={side}"
            results[key] = measure_generation(model, tokenizer, prompts, max_new_tokens, use_cache=use_cache)
    tokenizer.padding_side = saved_side
    return results
'''

CELLS[11] = '''
def measure_batched(model, tokenizer, prompts: list[str], batch_sizes: list[int],
                    max_new_tokens: int = 32) -> pandas.DataFrame:
    """One row per batch size: batch_size, latency_s, tokens_per_s, latency_per_sample_s."""
    rows = []
    for batch_size in batch_sizes:
        chunk = list(islice(cycle(prompts), batch_size))
        res = measure_generation(model, tokenizer, chunk, max_new_tokens)
        rows.append(dict(batch_size=batch_size, latency_s=res["latency_s"], tokens_per_s=res["tokens_per_s"],
                         latency_per_sample_s=res["latency_s"] / len(chunk), ms_per_token=res["ms_per_token"]))
    return pandas.DataFrame(rows)
'''

CELLS[13] = '''
def compare_ppplx(models: dict[str, object], tokenizer, texts: list[str]) -> dict[str, dict]:
    """{label: {"loss": token-weighted mean cross-entropy, "ppx": exp(loss)}} for every model."""
    results = {}
    side_before = tokenizer.padding_side
    tokenizer.padding_side = "right"
    for label, model in models.items():
        nll_sum = 0.0
        n_predicted = 0
        for i in range(0, len(texts), PPX_BATCH_SIZE):
            enc = pad_batch(tokenizer, texts[i:i + PPX_BATCH_SIZE], model.device)
            with torch.inference_mode():
                logits = model(**enc).logits
            log_probs = torch.log_softmax(logits[:, :-1].float(), dim=-1)
            targets = enc["input_ids"][:, 1:]
            mask = enc["attention_mask"][:, 1:].bool()
            token_lp = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            nll_sum += -token_lp[mask].sum().item()
            n_predicted += int(mask.sum().item())
        loss = nll_sum / n_predicted
        results[label] = {"loss": loss, "ppx": math.exp(loss)}
    tokenizer.padding_side = side_before
    return results
'''

CELLS[15] = '''
def build_results_table(results: dict) -> pandas.DataFrame:
    """One row per scenario: scenario, latency_s, tokens_per_s, ms_per_token, ppx."""
    cols = {"scenario": [], "latency_s": [], "tokens_per_s": [], "ms_per_token": [], "ppx": []}

    def add(name, m, ppx=float("nan")):
        cols["scenario"].append(name)
        cols["latency_s"].append(m["latency_s"])
        cols["tokens_per_s"].append(m["tokens_per_s"])
        cols["ms_per_token"].append(m["ms_per_token"])
        cols["ppx"].append(ppx)

    add("baseline (fp32)", results["baseline"], results["perplexity"]["baseline"]["ppx"])
    add("quantized (onnx int8)", results["quantized"], results["perplexity"]["quantized"]["ppx"])
    for setting, m in results["ablation"].items():
        add(setting, m)
    for _, row in results["batching"].iterrows():
        add(f"batch of {int(row['batch_size'])}", row)
    return pandas.DataFrame(cols)
'''

CELLS[17] = '''
def probe_edge_prompts(model, tokenizer, max_new_tokens: int = 32) -> dict[str, dict]:
    """Metrics for a very short, a very long, a multi-line and a repetitive prompt."""
    long_text = (
        "When engineers talk about the cost of running a language model, they usually separate two phases. "
        "In the first phase, called prefill, the model reads the whole prompt at once and builds a cache of "
        "keys and values for every layer. In the second phase, called decode, it produces one new token at a "
        "time and reuses that cache so that it does not have to look at the full prompt again. A short prompt "
        "makes the prefill almost free, so the decode steps dominate the total time. A very long prompt, such "
        "as a contract, a chapter of a novel or a long chat history, makes the prefill expensive, because "
        "attention over the prompt grows with its length. That is why a service can feel fast for a quick "
        "question and slow when you paste an entire document into the box. Batching several requests together "
        "helps the hardware stay busy, but it also means that the slowest request in the batch sets the pace "
        "for everyone else in it. Good serving systems therefore group requests of similar length, limit the "
        "number of new tokens, and keep an eye on memory, because the cache of a long prompt can be large."
    )
    cases = {
        "very short": "Hi",
        "very long": long_text,
        "multi-line": "Roses are red,\\nviolets are blue,\\nsugar is sweet,\\nand so are",
        "repetitive": " ".join(["ha"] * 80),
    }
    return {name: measure_generation(model, tokenizer, [text], max_new_tokens) for name, text in cases.items()}
'''

CELLS[19] = '''
def run_quantization_exercise(model_id: str = "gpt2", batch_sizes: tuple[int, ...] = (1, 4),
                              max_new_tokens: int = 32) -> tuple[pandas.DataFrame, list[str]]:
    """Baseline -> PTQ -> ablation -> batching -> perplexity -> edge prompts -> table and 3-5 takeaways."""
    tokenizer, model = load_model_and_tokenizer(model_id)
    device = next(model.parameters()).device
    print(f"Loaded: {model_id} | device={device} | dtype={next(model.parameters()).dtype}")

    baseline = measure_generation(model, tokenizer, PROMPTS, max_new_tokens)
    print("baseline:", {k: round(v, 4) for k, v in baseline.items()})

    qmodel, qinfo = run_static_ptq_optimum(model_id, QUANTIZED_DIR)
    print("PTQ:", qinfo)
    quantized = measure_generation(qmodel, tokenizer, PROMPTS, max_new_tokens)
    print("quantized:", {k: round(v, 4) for k, v in quantized.items()})

    ablation = ablate_cache_and_padding(model, tokenizer, PROMPTS, max_new_tokens)
    print("ablation:")
    print(pandas.DataFrame(ablation).T.round(4))

    batching = measure_batched(model, tokenizer, PROMPTS, list(batch_sizes), max_new_tokens)
    print("batching:")
    print(batching.round(4))

    perplexity = compare_ppplx({"baseline": model, "quantized": qmodel}, tokenizer, PPX_TEXTS)
    print("perplexity:", perplexity)

    edges = probe_edge_prompts(model, tokenizer, max_new_tokens)
    print("edge prompts:")
    print(pandas.DataFrame(edges).T.round(4))

    table = build_results_table(dict(baseline=baseline, quantized=quantized, ablation=ablation,
                                     batching=batching, perplexity=perplexity))
    print(table.to_string())

    worst_edge = min(edges, key=lambda k: edges[k]["tokens_per_s"])
    takeaways = [
        f"INT8 ONNX Runtime: {quantized['tokens_per_s']:.0f} tok/s against {baseline['tokens_per_s']:.0f} tok/s "
        f"for the FP32 PyTorch baseline; post-training quantization targets exactly this CPU case.",
        f"Quality held up: perplexity {perplexity['baseline']['ppx']:.3f} (fp32) vs "
        f"{perplexity['quantized']['ppx']:.3f} (int8).",
        f"KV cache: {ablation['use_cache=True,padding=left']['tokens_per_s']:.0f} tok/s with it vs "
        f"{ablation['use_cache=False,padding=left']['tokens_per_s']:.0f} tok/s without (left padding). Without the cache "
        "every step recomputes attention over the whole prefix, which only really hurts with long sequences.",
        f"Batch {batching['batch_size'].iloc[-1]}: {batching['tokens_per_s'].iloc[-1]:.0f} tok/s in total and "
        f"{batching['latency_per_sample_s'].iloc[-1]*1e3:.0f} ms per sample; batch {batching['batch_size'].iloc[0]}: "
        f"{batching['tokens_per_s'].iloc[0]:.0f} tok/s. Batching is a throughput lever, not a latency one.",
        f"Edge prompts: '{worst_edge}' was the slowest, consistent with an expensive prefill.",
    ]
    for line in takeaways:
        print("*", line)
    return table, takeaways
'''
