"""Mistake notebooks: each is one of the correct notebooks with exactly one of the course's known mistakes."""
import sys

sys.path.insert(0, "/work/corpus/latency/build")
from common import RESOLVE, LOADER, MEASURE, BUILD, SWEEP_LEN, SWEEP_PREC, build, edit  # noqa: E402
from correct import SPECS as C  # noqa: E402

M = {}  # name -> (spec, mistake id, description)


def chain(spec, *edits):
    for idx, old, new in edits:
        spec = edit(spec, idx, old, new)
    return spec


# ---------------------------------------------------------------- mistake-precision-case
M["mistake-precision-case--dict-lookup"] = (chain(
    C["correct-04-cache-comparison"],
    (RESOLVE, "    requested = precision.lower()\n", "    requested = precision\n"),
    (RESOLVE, '    supported = {"float32": torch.float32, "float16": torch.float16}\n',
     '    supported = {"float32": torch.float32, "FLOAT32": torch.float32,\n'
     '                 "float16": torch.float16, "FLOAT16": torch.float16}\n'),
    (RESOLVE, "(case does not matter)", "(lower or upper case)"),
    (RESOLVE, '    if on_cpu and requested == "float16":\n',
     '    if on_cpu and supported[requested] is torch.float16:\n'),
    (RESOLVE, "    return supported[requested], requested",
     '    return supported[requested], str(supported[requested]).removeprefix("torch.")'),
), "mistake-precision-case",
    "Case-sensitive dict lookup whose keys list only the all-lower and ALL-UPPER spellings, so 'Float16' or "
    "'fLoat32' raise ValueError while the starter's 'FLOAT16' check passes.")

M["mistake-precision-case--upper-only"] = (chain(
    C["correct-01-plain-perfcounter"],
    (RESOLVE, "    name = precision.strip().lower()\n",
     "    name = precision.strip()\n    if name.isupper():  # e.g. 'FLOAT16'\n        name = name.lower()\n"),
), "mistake-precision-case",
    "Lower-cases the precision only when it is entirely upper case, so mixed case such as 'Float16' is rejected.")

# ---------------------------------------------------------------- mistake-no-cpu-fallback
M["mistake-no-cpu-fallback--uppercase-device-guard"] = (chain(
    C["correct-06-match-encode-plus"],
    (RESOLVE, '    case "float16" if device == "cpu":\n', '    case "float16" if device == "CPU":\n'),
), "mistake-no-cpu-fallback",
    "The match guard compares the device with 'CPU' (upper case), which never matches 'cpu', so float16 is "
    "returned on the CPU.")

M["mistake-no-cpu-fallback--label-only"] = (chain(
    C["correct-03-helpers-monotonic"],
    (RESOLVE, '        return torch.float32, "float32 [fallback: float16 not supported on cpu]"\n',
     '        return dtype, "float32 [fallback: float16 not supported on cpu]"\n'),
), "mistake-no-cpu-fallback",
    "On the CPU the label announces a float32 fallback but the returned dtype is still torch.float16 (the model "
    "really runs in half precision).")

# ---------------------------------------------------------------- mistake-raises-too-early
M["mistake-raises-too-early--raise-in-except"] = (chain(
    C["correct-01-plain-perfcounter"],
    (LOADER, '''        print(f"Could not load {model_id!r}: {exc}")
        continue
''', '''        print(f"Could not load {model_id!r}: {exc}")
        raise RuntimeError(f"None of the candidate models could be loaded; tried: {', '.join(tried)}") from exc
'''),
), "mistake-raises-too-early",
    "The except branch re-raises (listing the ids tried so far) instead of continuing, so a failing first "
    "candidate ends the search.")

M["mistake-raises-too-early--try-around-loop"] = (chain(
    C["correct-05-trials-own-prompts"],
    (LOADER, '''    attempted = []
    for i, model_id in enumerate(candidates):
        attempted.append(model_id)
        try:
            tok = AutoTokenizer.from_pretrained(model_id)
            lm = AutoModelForCausalLM.from_pretrained(model_id, torch_dtype=torch_dtype)
        except Exception as e:
            print(f"candidate {i} ({model_id}) did not load: {e}")
            continue
        lm.to(device)
        lm.eval()
        return tok, lm, model_id, dtype_label

    raise RuntimeError("could not load any model, tried: " + ", ".join(attempted))''',
     '''    attempted = []
    try:
        for i, model_id in enumerate(candidates):
            attempted.append(model_id)
            tok = AutoTokenizer.from_pretrained(model_id)
            lm = AutoModelForCausalLM.from_pretrained(model_id, torch_dtype=torch_dtype)
            lm.to(device)
            lm.eval()
            return tok, lm, model_id, dtype_label
    except Exception as e:
        raise RuntimeError("could not load any model, tried: " + ", ".join(attempted)) from e
    raise RuntimeError("no candidates given")'''),
), "mistake-raises-too-early",
    "The try/except wraps the whole candidate loop, so the first failing id jumps straight to the error "
    "and later candidates are never tried.")

# ---------------------------------------------------------------- mistake-no-warmup
M["mistake-no-warmup--zero-token-warmup"] = (chain(
    C["correct-02-ns-timer-decorator"],
    (MEASURE, '''    # untimed warm-up (short)
    model.generate(**inputs, max_new_tokens=min(4, max_new_tokens), **settings)
''', '''    # untimed warm-up: a tiny fraction of the real run (best effort, never fail because of it)
    warmup_tokens = max_new_tokens // 64
    try:
        model.generate(**inputs, max_new_tokens=warmup_tokens, **settings)
    except ValueError:
        pass
'''),
), "mistake-no-warmup",
    "The warm-up asks for max_new_tokens // 64 == 0 tokens, generate raises a ValueError before doing any work "
    "and a try/except swallows it, so the timed call is really the first generate.")

M["mistake-no-warmup--warmup-other-model"] = (chain(
    C["correct-07-batch-call-inference-mode"],
    (MEASURE, '''    # warm-up (untimed)
    model.generate(**batch, max_new_tokens=2, use_cache=use_cache, do_sample=False)
''', '''    # warm-up (untimed) on the smallest candidate, loaded once, so the warm-up itself is cheap
    global _WARMUP_LM
    if _WARMUP_LM is None:
        _WARMUP_LM = AutoModelForCausalLM.from_pretrained(CANDIDATE_MODELS[-1]).eval()
    _WARMUP_LM.to(model.device).generate(**batch, max_new_tokens=2, use_cache=use_cache, do_sample=False,
                                         pad_token_id=tokenizer.eos_token_id)
'''),
    (MEASURE, "def cuda_sync(model) -> None:", "_WARMUP_LM = None\n\n\ndef cuda_sync(model) -> None:"),
), "mistake-no-warmup",
    "The 'warm-up' generate runs on a separately loaded distilgpt2, never on the model being measured, so the "
    "measured model's first generate is the timed one.")

# ---------------------------------------------------------------- mistake-warmup-in-timer
M["mistake-warmup-in-timer--time-time-before-warmup"] = (chain(
    C["correct-08-estimate-builder-barchart"],
    (MEASURE, '''    with torch.no_grad():
        # warm-up: 8 tokens, discarded and not timed
        model.generate(''', '''    with torch.no_grad():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.time()
        # warm-up: 8 tokens, discarded
        model.generate('''),
    (MEASURE, '''        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        output''', '''        output'''),
    (MEASURE, "        stop = time.perf_counter()", "        stop = time.time()"),
), "mistake-warmup-in-timer",
    "Starts a time.time() clock before the 8-token warm-up, so the reported latency is warm-up plus timed "
    "generate.")

M["mistake-warmup-in-timer--two-pass-loop"] = (chain(
    C["correct-03-helpers-monotonic"],
    (MEASURE, '''        model.generate(**enc, **{**kwargs, "max_new_tokens": 2})   # warm-up, not timed
        _sync(model.device)
        t_start = time.monotonic()
        result = model.generate(**enc, **kwargs)
''', '''        _sync(model.device)
        t_start = time.monotonic()
        for _pass in range(2):  # pass 0 is the warm-up, pass 1 is the measured one
            result = model.generate(**enc, **kwargs)
'''),
), "mistake-warmup-in-timer",
    "The warm-up is the first iteration of a two-pass loop that sits inside the timed block, so both generates "
    "are timed.")

# ---------------------------------------------------------------- mistake-timer-includes-tokenizing
M["mistake-timer-includes-tokenizing--encode-plus"] = (chain(
    C["correct-06-match-encode-plus"],
    (MEASURE, '''    with torch.inference_mode():
        _ = model.generate(**encoding, **{**gen_kwargs, "max_new_tokens": 5})  # warm-up (untimed)
        _synchronize()
        tic = time.perf_counter()
        sequences = model.generate(**encoding, **gen_kwargs)''', '''    with torch.inference_mode():
        _ = model.generate(**encoding, **{**gen_kwargs, "max_new_tokens": 5})  # warm-up (untimed)
        _synchronize()
        tic = time.perf_counter()
        encoding = tokenizer.encode_plus(prompt, return_tensors="pt").to(model.device)  # fresh inputs
        sequences = model.generate(**encoding, **gen_kwargs)'''),
), "mistake-timer-includes-tokenizing",
    "Re-encodes the prompt with tokenizer.encode_plus(...).to(device) after perf_counter() starts, so the timed "
    "block holds tokenizing as well as generate.")

M["mistake-timer-includes-tokenizing--helper-batch-encode"] = (chain(
    C["correct-01-plain-perfcounter"],
    (MEASURE, '''    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    prompt_len = inputs["input_ids"].shape[-1]''', '''    inputs = _encode(tokenizer, prompt, model.device)
    prompt_len = inputs["input_ids"].shape[-1]'''),
    (MEASURE, '''        start = time.perf_counter()
        output = model.generate(**inputs, max_new_tokens=max_new_tokens, use_cache=use_cache,''', '''        start = time.perf_counter()
        output = model.generate(**_encode(tokenizer, prompt, model.device),
                                max_new_tokens=max_new_tokens, use_cache=use_cache,'''),
    (MEASURE, "def measure_generation(", '''def _encode(tokenizer, text: str, device) -> dict:
    """Tokenize one prompt as a batch of one and move it to the device."""
    return tokenizer.batch_encode_plus([text], return_tensors="pt").to(device)


def measure_generation('''),
), "mistake-timer-includes-tokenizing",
    "The timed generate gets its inputs from a helper (_encode -> batch_encode_plus) called inside the "
    "perf_counter window, so tokenization is timed.")

M["mistake-timer-includes-tokenizing--encode-in-helper"] = (chain(
    C["correct-02-ns-timer-decorator"],
    (MEASURE, '''def _timed_generate(model, inputs: dict, **gen_kwargs) -> tuple[torch.Tensor, float]:
    """Run one generate between two CUDA syncs (when on a GPU); return (output ids, seconds)."""
    on_gpu = model.device.type == "cuda"
    if on_gpu:
        torch.cuda.synchronize(model.device)
    t0 = time.perf_counter_ns()
    out = model.generate(**inputs, **gen_kwargs)''', '''def _timed_generate(model, tokenizer, prompt: str, **gen_kwargs) -> tuple[torch.Tensor, float]:
    """Run one generate between two CUDA syncs (when on a GPU); return (output ids, seconds)."""
    on_gpu = model.device.type == "cuda"
    if on_gpu:
        torch.cuda.synchronize(model.device)
    t0 = time.perf_counter_ns()
    ids = tokenizer.encode(prompt, return_tensors="pt").to(model.device)
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **gen_kwargs)'''),
    (MEASURE, "_timed_generate(model, inputs, max_new_tokens", "_timed_generate(model, tokenizer, prompt, max_new_tokens"),
), "mistake-timer-includes-tokenizing",
    "The timing helper takes the prompt string and calls tokenizer.encode(...) (and builds the mask) after "
    "perf_counter_ns() starts.")

# ---------------------------------------------------------------- mistake-assumes-max-new-tokens
M["mistake-assumes-max-new-tokens--min-of-lengths"] = (chain(
    C["correct-04-cache-comparison"],
    (MEASURE, "    new_tokens = out[0, input_ids.shape[1]:].numel()\n",
     "    new_tokens = min(max_new_tokens, out.shape[-1])  # generate never exceeds the budget\n"),
), "mistake-assumes-max-new-tokens",
    "new_tokens = min(max_new_tokens, out.shape[-1]) caps the budget by the whole sequence length (prompt "
    "included), so it reports max_new_tokens whenever prompt + output is longer, even if generation stopped early.")

M["mistake-assumes-max-new-tokens--from-generation-config"] = (chain(
    C["correct-05-trials-own-prompts"],
    (MEASURE, '    n_new = generated.shape[1] - batch["input_ids"].shape[1]\n',
     "    n_new = config.max_new_tokens\n"),
), "mistake-assumes-max-new-tokens",
    "Reads the number of new tokens back from the GenerationConfig (config.max_new_tokens) instead of from "
    "the output sequence.")

# ---------------------------------------------------------------- mistake-characters-not-tokens
M["mistake-characters-not-tokens--char-while-loop"] = (chain(
    C["correct-01-plain-perfcounter"],
    (BUILD, '''    prompt = base_text
    while len(tokenizer(prompt)["input_ids"]) < target_tokens:
        prompt = prompt + " " + base_text
    return prompt''', '''    unit = base_text + " "
    prompt = ""
    i = 0
    while len(prompt) < target_tokens:
        prompt += unit[i % len(unit)]
        i += 1
    return prompt.strip()'''),
), "mistake-characters-not-tokens",
    "Appends base_text (plus a space) one character at a time in a while loop until len(prompt) reaches the "
    "target, i.e. counts characters; the tokenizer is never used.")

M["mistake-characters-not-tokens--slice"] = (chain(
    C["correct-07-batch-call-inference-mode"],
    (BUILD, '''    count = 1
    while len(tokenizer([" ".join([base_text] * count)])["input_ids"][0]) < target_tokens:
        count += 1
    return " ".join([base_text] * count)''', '''    repeated = " ".join([base_text] * (target_tokens // len(base_text.split()) + 1))
    return repeated[:target_tokens]'''),
), "mistake-characters-not-tokens",
    "Repeats base_text then slices the string to target_tokens characters, so prompts come out far shorter "
    "than target_tokens tokens.")

# ---------------------------------------------------------------- mistake-unlabelled-plots
M["mistake-unlabelled-plots--df-plot"] = (chain(
    C["correct-02-ns-timer-decorator"],
    (SWEEP_LEN, '''    df.plot(x="prompt_tokens", y="latency_s", marker="o", legend=False, ax=ax1)
    ax1.set_xlabel("Prompt length [tokens]")
    ax1.set_ylabel("End-to-end generate latency [s]")
    ax1.set_title(f"Latency vs prompt length ({setting})")''', '''    df.plot(x="prompt_tokens", y="latency_s", marker="o", legend=False, ax=ax1)
    ax1.set_title(f"Latency vs prompt length ({setting})")'''),
    (SWEEP_LEN, '''    df.plot(x="prompt_tokens", y="tokens_per_s", marker="s", color="green", legend=False, ax=ax2)
    ax2.set_xlabel("Prompt length [tokens]")
    ax2.set_ylabel("Generated tokens per second")
    ax2.set_title(f"Throughput vs prompt length ({setting})")''', '''    df.plot(x="prompt_tokens", y="tokens_per_s", marker="s", color="green", legend=False, ax=ax2)
    ax2.set_title(f"Throughput vs prompt length ({setting})")'''),
), "mistake-unlabelled-plots",
    "Both sweep plots are drawn with df.plot(x=..., y=...) and a title only: no y-axis label at all, and the x "
    "axis shows just pandas' automatic column name 'prompt_tokens'.")

M["mistake-unlabelled-plots--titles-and-legend-only"] = (chain(
    C["correct-08-estimate-builder-barchart"],
    (SWEEP_LEN, '''    ax1.plot(df["prompt_tokens"], df["latency_s"], marker="o", linestyle="--")
    ax1.set_xlabel("Prompt tokens")
    ax1.set_ylabel("Latency [s]")
    ax1.set_title("Latency vs. prompt length")''', '''    ax1.plot(df["prompt_tokens"], df["latency_s"], marker="o", linestyle="--", label="latency [s]")
    ax1.set_title("Latency vs. prompt length")
    ax1.legend()'''),
    (SWEEP_LEN, '''    ax2.plot(df["prompt_tokens"], df["tokens_per_s"], marker="o", linestyle="--", color="tab:red")
    ax2.set_xlabel("Prompt tokens")
    ax2.set_ylabel("Tokens / s")
    ax2.set_title("Throughput vs. prompt length")''', '''    ax2.plot(df["prompt_tokens"], df["tokens_per_s"], marker="o", linestyle="--", color="tab:red",
             label="tokens / s")
    ax2.set_title("Throughput vs. prompt length")
    ax2.legend()'''),
), "mistake-unlabelled-plots",
    "The sweep plots carry titles and legends naming the quantity, but no x or y axis labels.")

# ---------------------------------------------------------------- mistake-keys-by-request
M["mistake-keys-by-request--dict-comprehension"] = (chain(
    C["correct-03-helpers-monotonic"],
    (SWEEP_PREC, '''    results: dict[str, dict] = {}
    for precision in precisions:
        tokenizer_p, model_p, _, label = load_model_and_tokenizer(candidates, precision)
        results[label] = measure_generation(model_p, tokenizer_p, prompt, max_new_tokens=max_new_tokens,
                                            use_cache=USE_CACHE)
    return results''', '''    def run_one(precision: str) -> dict:
        tokenizer_p, model_p, _, label = load_model_and_tokenizer(candidates, precision)
        return {"label": label, **measure_generation(model_p, tokenizer_p, prompt, max_new_tokens=max_new_tokens,
                                                     use_cache=USE_CACHE)}

    results: dict[str, dict] = {precision: run_one(precision) for precision in precisions}
    return results'''),
), "mistake-keys-by-request",
    "A dict comprehension keys the results by the requested string ('float16'), keeping the dtype label only "
    "as a field inside each entry.")

M["mistake-keys-by-request--normalised-request"] = (chain(
    C["correct-07-batch-call-inference-mode"],
    (SWEEP_PREC, '''        metrics.update(requested=precision, model_id=model_id)
        results[label] = metrics''', '''        metrics.update(label=label, model_id=model_id)
        results[precision.lower()] = metrics'''),
    (("ins", 0), '"requested", ', '"label", '),
), "mistake-keys-by-request",
    "Keys each result by the lower-cased requested precision and stores the real dtype label as a column, so "
    "the CPU 'float16' entry actually holds a float32 run.")


if __name__ == "__main__":
    only = sys.argv[1:]
    for name, (spec, mid, desc) in M.items():
        if not only or any(o in name for o in only):
            print(build(name, spec))
