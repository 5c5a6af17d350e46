"""Write /work/corpus/latency/manifest.json from the correct and mistake specs."""
import json
import os
import sys

sys.path.insert(0, "/work/corpus/latency/build")
from correct import SPECS  # noqa: E402
from mistakes import M  # noqa: E402

CORRECT = {
    "correct-01-plain-perfcounter":
        "By-the-book solution: strip+lower precision, perf_counter inside torch.inference_mode, 4-token warm-up, "
        "list of dicts, one figure with two labelled subplots, answers replace the TODO lines.",
    "correct-02-ns-timer-decorator":
        "perf_counter_ns inside a @torch.no_grad() timing helper, tokenizer.encode with a hand-built attention mask, "
        "eval() set again inside the functions, two separate df.plot(ax=...) figures, extra keys, answers in a new "
        "markdown cell below the untouched TODO question.",
    "correct-03-helpers-monotonic":
        "casefold + dict lookup for the precision, small helpers (_sync, _count_new_tokens, _try_load), "
        "time.monotonic, return_dict_in_generate (.sequences), prompt tokens from attention_mask.sum(), "
        "dict-of-lists table, pyplot state-machine plots.",
    "correct-04-cache-comparison":
        "Warm-up with exactly the same settings as the timed call, new tokens via out[0, n:].numel(), "
        "df.plot(xlabel=, ylabel=), plus an extra sweep with use_cache=False labelled 'KV cache disabled'.",
    "correct-05-trials-own-prompts":
        "if/elif precision resolver, GenerationConfig objects for warm-up and timed call, plus an extra cell "
        "timing 'Hello world' and a ~540-token natural paragraph over 5 trials with error bars; answers in a new "
        "markdown cell.",
    "correct-06-match-encode-plus":
        "match statement with a guard for the CPU fallback, tokenizer.encode_plus outside the timer, a generation "
        "kwargs dict, from_records table, two stacked subplots sharing x, gc between precisions.",
    "correct-07-batch-call-inference-mode":
        "Upper-case normalisation, batch tokenizer([prompt]) call, @torch.inference_mode() decorator, pad token set "
        "once in the loader, scatter+line plots, extra requested/model_id keys shown in an extra table cell.",
    "correct-08-estimate-builder-barchart":
        "for/else loader, estimate-then-adjust prompt builder (smallest repetition count), eval() again in "
        "measure, 8-token warm-up, extra builder check cell and bar chart of the precision sweep; answers in a new "
        "markdown cell.",
}

manifest = {}
for name in SPECS:
    manifest[f"{name}.ipynb"] = {"kind": "correct", "description": CORRECT[name]}
for name, (_spec, mid, desc) in M.items():
    manifest[f"{name}.ipynb"] = {"kind": "mistake", "mistake": mid, "description": desc}
for f in manifest:
    assert os.path.exists(f"/work/corpus/latency/{f}"), f
with open("/work/corpus/latency/manifest.json", "w") as fh:
    json.dump(manifest, fh, indent=2)
print(len(manifest), "entries")
