"""Student 6: GenerationConfig objects, explicit cuda sync helper, token count as output.numel - input.numel,
avx2 dynamic quantization of MatMul only, temporary export folder, nll_loss on log_softmax, table from dict orient=index."""
NAME = "correct-06-generation-config.ipynb"
DESC = "Passes a GenerationConfig per call, quantizes only MatMul nodes with avx2 dynamic INT8 from a temporary export folder, log_softmax + nll_loss(sum, ignore_index) perplexity, table from DataFrame.from_dict(orient='index'), keeps the starter's TODO comments."

APPEND = {1: """
import tempfile
from transformers import GenerationConfig
"""}

CELLS = {}
CELLS[3] = '''
def load_model_and_tokenizer(model_id: str) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Tokenizer and model from the same id; model in eval mode on CUDA if available, else the CPU."""
    # TODO: load the tokenizer and the model from model_id; give the tokenizer a pad token
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_id)
    # TODO: move the model to the device and put it in eval mode
    device = torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")
    model = model.to(device).eval()
    return tokenizer, model
'''

CELLS[5] = '''
def sync_if_cuda(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_generation(model, tokenizer, prompts: list[str], max_new_tokens: int = 32,
                       use_cache: bool = True) -> dict:
    """One untimed warm-up generate, then one timed generate of the batch of prompts.
    Returns latency_s, new_tokens (all sequences), tokens_per_s, ms_per_token."""
    # TODO: tokenize the prompts as one padded batch; move it to the model's device
    device = model.device
    encoded = tokenizer(prompts, padding="longest", return_tensors="pt")
    input_ids = encoded["input_ids"].to(device)
    attention_mask = encoded["attention_mask"].to(device)
    gen_cfg = GenerationConfig(max_new_tokens=max_new_tokens, use_cache=use_cache, do_sample=False,
                               pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    warm_cfg = GenerationConfig(max_new_tokens=2, use_cache=use_cache, do_sample=False,
                                pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    with torch.no_grad():
        # TODO: one brief warm-up generate, not timed
        model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=warm_cfg)
        # TODO: synchronise on CUDA, time one generate with max_new_tokens and use_cache, synchronise on CUDA
        sync_if_cuda(device)
        tic = time.perf_counter()
        output_ids = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=gen_cfg)
        sync_if_cuda(device)
        toc = time.perf_counter()
    # TODO: count the new tokens of every sequence; return latency_s, new_tokens, tokens_per_s, ms_per_token
    latency_s = toc - tic
    new_tokens = output_ids.numel() - input_ids.numel()
    return {"latency_s": latency_s, "new_tokens": new_tokens, "tokens_per_s": new_tokens / latency_s,
            "ms_per_token": latency_s * 1000 / new_tokens, "prompt_tokens": int(attention_mask.sum())}
'''

CELLS[7] = '''
def run_static_ptq_optimum(model_id: str, save_dir: str) -> tuple[object, str]:
    """Export to ONNX, quantize to INT8 with ONNX Runtime, load it: (quantized model, info string)."""
    # TODO: export the model with ORTModelForCausalLM.from_pretrained(model_id, export=True)
    with tempfile.TemporaryDirectory() as export_dir:
        ORTModelForCausalLM.from_pretrained(model_id, export=True).save_pretrained(export_dir)
        # TODO: quantize it with ORTQuantizer and an AutoQuantizationConfig into save_dir
        quantizer = ORTQuantizer.from_pretrained(export_dir)
        config = AutoQuantizationConfig.avx2(is_static=False, per_channel=False, operators_to_quantize=["MatMul"])
        quantizer.quantize(quantization_config=config, save_dir=save_dir)
    # TODO: load the quantized file; return it with an info string naming the backend and the precision
    qmodel = ORTModelForCausalLM.from_pretrained(save_dir, file_name="model_quantized.onnx")
    return qmodel, "ONNX Runtime (Optimum ORTQuantizer), INT8 dynamic quantization of MatMul weights, avx2 preset"
'''

CELLS[9] = '''
def ablate_cache_and_padding(model, tokenizer, prompts: list[str], max_new_tokens: int = 32
                             ) -> dict[str, dict]:
    """Metrics for every use_cache x padding side, keyed like "use_cache=True,padding=left"."""
    results = {}
    keep_side = tokenizer.padding_side
    for use_cache in (True, False):
        for side in ("left", "right"):
            # TODO: pad on `side`, measure with this use_cache and the same max_new_tokens
            tokenizer.padding_side = side
            metrics = measure_generation(model, tokenizer, prompts, max_new_tokens=max_new_tokens, use_cache=use_cache)
            metrics["padding_side_used"] = side
            results[f"use_cache={use_cache},padding={side}"] = metrics
    tokenizer.padding_side = keep_side
    return results
'''

CELLS[11] = '''
def measure_batched(model, tokenizer, prompts: list[str], batch_sizes: list[int],
                    max_new_tokens: int = 32) -> pandas.DataFrame:
    """One row per batch size: batch_size, latency_s, tokens_per_s, latency_per_sample_s."""
    rows = []
    for batch_size in batch_sizes:
        # TODO: a batch of batch_size prompts; measure it; tokens_per_s over every sequence
        selected = [prompts[idx % len(prompts)] for idx in range(batch_size)]
        m = measure_generation(model, tokenizer, selected, max_new_tokens=max_new_tokens)
        rows.append({"batch_size": batch_size, "latency_s": m["latency_s"], "tokens_per_s": m["tokens_per_s"],
                     "latency_per_sample_s": m["latency_s"] / batch_size, "ms_per_token": m["ms_per_token"]})
    return pandas.DataFrame(rows).set_index("batch_size", drop=False)
'''

CELLS[13] = '''
def compare_ppplx(models: dict[str, object], tokenizer, texts: list[str]) -> dict[str, dict]:
    """{label: {"loss": token-weighted mean cross-entropy, "ppx": exp(loss)}} for every model."""
    results = {}
    old_side, tokenizer.padding_side = tokenizer.padding_side, "right"
    for label, model in models.items():
        # TODO: in batches of PPX_BATCH_SIZE, no gradients: logits = model(**batch).logits
        # TODO: sum the cross-entropy of every predicted token (padding masked), count the tokens
        # TODO: loss = total / tokens; ppx = exp(loss)
        summed, n_tok = 0.0, 0
        for first in range(0, len(texts), PPX_BATCH_SIZE):
            batch = tokenizer(texts[first:first + PPX_BATCH_SIZE], padding=True, return_tensors="pt")
            batch = batch.to(model.device)
            with torch.no_grad():
                logits = model(**batch).logits
            targets = batch["input_ids"].clone()
            targets[batch["attention_mask"] == 0] = -100
            logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
            summed += torch.nn.functional.nll_loss(logp.flatten(0, 1), targets[:, 1:].flatten(),
                                                   ignore_index=-100, reduction="sum").item()
            n_tok += int((targets[:, 1:] != -100).sum())
        loss = summed / n_tok
        results[label] = {"loss": loss, "ppx": math.exp(loss)}
    tokenizer.padding_side = old_side
    return results
'''

CELLS[15] = '''
def build_results_table(results: dict) -> pandas.DataFrame:
    """One row per scenario: scenario, latency_s, tokens_per_s, ms_per_token, ppx."""
    # TODO: a row for the baseline and the quantized model (with their ppx), each ablation setting, each batch size
    metrics = ["latency_s", "tokens_per_s", "ms_per_token"]
    by_scenario = {}
    for name in ("baseline", "quantized"):
        by_scenario[name] = {**{k: results[name][k] for k in metrics}, "ppx": results["perplexity"][name]["ppx"]}
    for setting, m in results["ablation"].items():
        by_scenario[setting] = {k: m[k] for k in metrics}
    for bs, row in results["batching"].iterrows():
        by_scenario[f"batch_size={bs}"] = {k: row[k] for k in metrics}
    table = pandas.DataFrame.from_dict(by_scenario, orient="index")
    table.index.name = "scenario"
    return table.reset_index()
'''

CELLS[17] = '''
def probe_edge_prompts(model, tokenizer, max_new_tokens: int = 32) -> dict[str, dict]:
    """Metrics for a very short, a very long, a multi-line and a repetitive prompt."""
    # TODO: build the four prompts; measure each with the same max_new_tokens
    long_prompt = (
        "Making good bread at home is mostly a matter of patience. You start by mixing flour, water, salt and a "
        "little yeast until there is no dry flour left in the bowl. Then you leave the dough to rest for half an "
        "hour, which lets the flour absorb the water and makes the dough easier to knead. Kneading develops the "
        "gluten, the network of proteins that traps the gas produced by the yeast. After ten minutes of kneading "
        "the dough should feel smooth and spring back when you press it with a finger. Put it in a lightly oiled "
        "bowl, cover it, and let it rise somewhere warm until it has doubled in size, which can take anywhere from "
        "one to three hours depending on the temperature of your kitchen. Shape it gently into a loaf, let it rise "
        "again, and bake it in a very hot oven with a tray of water underneath to create steam. The steam keeps "
        "the crust soft for the first few minutes so that the loaf can expand before the crust sets and browns."
    )
    prompts = {
        "very short": "Hi",
        "very long": long_prompt,
        "multi-line": "Title: Weekly report\\nAuthor: Sam\\n\\nSummary:\\nThis week we",
        "repetitive": "again and " * 50,
    }
    return {name: measure_generation(model, tokenizer, [p], max_new_tokens=max_new_tokens) for name, p in prompts.items()}
'''

CELLS[19] = '''
def run_quantization_exercise(model_id: str = "gpt2", batch_sizes: tuple[int, ...] = (1, 4),
                              max_new_tokens: int = 32) -> tuple[pandas.DataFrame, list[str]]:
    """Baseline -> PTQ -> ablation -> batching -> perplexity -> edge prompts -> table and 3-5 takeaways."""
    # TODO: load; print "Loaded: <model_id> | device=<device> | dtype=<dtype>"; measure the baseline on PROMPTS
    tokenizer, model = load_model_and_tokenizer(model_id)
    print(f"Loaded: {model_id} | device={model.device} | dtype={model.dtype}")
    baseline = measure_generation(model, tokenizer, PROMPTS, max_new_tokens)
    print("Baseline:", baseline)
    # TODO: quantize with run_static_ptq_optimum(model_id, QUANTIZED_DIR) and measure the quantized model
    qmodel, qinfo = run_static_ptq_optimum(model_id, QUANTIZED_DIR)
    quantized = measure_generation(qmodel, tokenizer, PROMPTS, max_new_tokens)
    print("Quantized:", qinfo, quantized)
    # TODO: ablation, batching with batch_sizes, perplexity of both models on PPX_TEXTS, edge prompts
    ablation = ablate_cache_and_padding(model, tokenizer, PROMPTS, max_new_tokens)
    print(pandas.DataFrame(ablation).T)
    batching = measure_batched(model, tokenizer, PROMPTS, list(batch_sizes), max_new_tokens)
    print(batching)
    perplexity = compare_ppplx({"baseline": model, "quantized": qmodel}, tokenizer, PPX_TEXTS)
    print("Perplexity:", perplexity)
    edges = probe_edge_prompts(model, tokenizer, max_new_tokens)
    print(pandas.DataFrame(edges).T)
    # TODO: build, print and return the results table and 3 to 5 takeaways
    table = build_results_table({"baseline": baseline, "quantized": quantized, "ablation": ablation,
                                 "batching": batching, "perplexity": perplexity})
    print(table)
    on = ablation["use_cache=True,padding=left"]["ms_per_token"]
    off = ablation["use_cache=False,padding=left"]["ms_per_token"]
    takeaways = [
        f"Post-training INT8 quantization (ONNX Runtime): {baseline['ms_per_token']:.2f} -> {quantized['ms_per_token']:.2f} ms/token "
        f"on {model.device.type}, perplexity {perplexity['baseline']['ppx']:.3f} -> {perplexity['quantized']['ppx']:.3f}.",
        f"KV cache on: {on:.2f} ms/token, off: {off:.2f} ms/token (left padding). The cache saves recomputing the prefix, "
        "so its benefit grows with the sequence length; our sequences are too short for a large gap.",
        f"Batching {max(batch_sizes)} prompts: {batching['tokens_per_s'].iloc[-1]:.0f} tok/s in total vs "
        f"{batching['tokens_per_s'].iloc[0]:.0f} tok/s for {min(batch_sizes)}; good for throughput, not for a single user's latency.",
        f"Prefill matters: the long prompt ({edges['very long']['prompt_tokens']} tokens) ran at "
        f"{edges['very long']['tokens_per_s']:.0f} tok/s against {edges['very short']['tokens_per_s']:.0f} for 'Hi'.",
    ]
    for t in takeaways:
        print("-", t)
    return table, takeaways
'''
