"""My own sanity checks of a notebook's functions (not the course grader): exec its code cells up to the sweeps."""
import os, glob, sys, io, contextlib
hub = glob.glob(os.path.expanduser("~/.cache/llm-inference-grader/zoo/*/hub"))[0]
os.environ.update(HF_HUB_CACHE=hub, HUGGINGFACE_HUB_CACHE=hub, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                  OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", MPLBACKEND="Agg")
import nbformat, torch
import transformers
transformers.logging.set_verbosity_error()

def check(path):
    nb = nbformat.read(path, 4)
    ns = {}
    codes = [c.source for c in nb.cells if c.cell_type == "code"]
    # run imports + all function definitions, skipping the starter's calls except the loader call
    for src in codes:
        if src.lstrip().startswith(("for requested", "baseline", "length_sweep", "precision_sweep", "no_cache",
                                    "SHORT_PROMPT", "pandas.DataFrame(precision", "prec_df", "# quick check")):
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            exec(src, ns)
    out = []
    rp = ns["resolve_precision"]
    for req, dev in [("float32", "cpu"), ("Float16", "cpu"), ("FLOAT32", "cpu"), ("float16", "cuda"), ("fLoAt16", "cuda")]:
        try:
            out.append(f"{req}/{dev} -> {rp(req, dev)}")
        except Exception as e:
            out.append(f"{req}/{dev} -> {type(e).__name__}: {e}")
    for bad in ["bfloat16", "fp16", "float64"]:
        try:
            rp(bad, "cpu"); out.append(f"{bad}: NO ERROR")
        except ValueError as e:
            out.append(f"{bad}: ValueError ok ({e})")
    load = ns["load_model_and_tokenizer"]
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            t, m, mid, lab = load(["no-such/model-xyz", "gpt2"], "float32")
            out.append(f"fallback load -> {mid} {lab} {m.dtype} training={m.training}")
        except Exception as e:
            out.append(f"fallback load FAILED {type(e).__name__}: {e}")
        try:
            load(["no-such/a", "no-such/b"], "float32"); out.append("none-load: NO ERROR")
        except Exception as e:
            msg = str(e); out.append(f"none-load: {type(e).__name__} lists both={'no-such/a' in msg and 'no-such/b' in msg}")
    bp = ns["build_prompt"]
    tok, model = ns["tokenizer"], ns["model"]
    for target in [1, 16, 64, 160]:
        p = bp(tok, "The quick brown fox jumps over the lazy dog.", target)
        n = len(tok(p)["input_ids"])
        out.append(f"build {target}: {n} tokens ok={n >= target}")
    # early stop simulation
    orig = model.generate
    calls = []
    def fake_generate(*a, **k):
        calls.append(1)
        res = orig(*a, **k)
        seqs = res.sequences if hasattr(res, "sequences") else res
        inp = k.get("input_ids")
        if inp is None:
            inp = a[0] if a else None
        n_in = inp.shape[-1]
        cut = seqs[:, : n_in + 5]
        if hasattr(res, "sequences"):
            res.sequences = cut
            return res
        return cut
    model.generate = fake_generate
    with contextlib.redirect_stdout(io.StringIO()):
        r = ns["measure_generation"](model, tok, "Hello world", max_new_tokens=32, use_cache=True)
    model.generate = orig
    out.append(f"early stop: new_tokens={r['new_tokens']} (expect 5), generate calls={len(calls)}, "
               f"tps_ok={abs(r['tokens_per_s'] - r['new_tokens'] / r['latency_s']) < 1e-6 * r['tokens_per_s'] + 1e-9}")
    return out

for p in sys.argv[1:]:
    print("####", os.path.basename(p))
    try:
        for line in check(p):
            print("   ", line)
    except Exception as e:
        import traceback; traceback.print_exc()
