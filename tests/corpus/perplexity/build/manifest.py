"""Write /work/corpus/perplexity/manifest.json from the student and mistake definitions."""
import json

from correct import STUDENTS
from mistakes import MISTAKES

CORRECT_DESCRIPTIONS = {
    "correct-01-model-labels-no-grad":
        "Plain solution: tokenizer padding, labels masked to -100 from the attention mask, the model's labels= "
        "loss weighted by (labels[:, 1:] != -100).sum(), `with torch.no_grad()`, time.perf_counter.",
    "correct-02-manual-ce-sum-inference-mode":
        "Manual F.cross_entropy(reduction='sum', ignore_index=-100) on shifted logits/labels under an "
        "@torch.inference_mode() decorator, torch_dtype= loading, perf_counter_ns, extra keys (batches, texts, ms_per_token).",
    "correct-03-pad-sequence-lengths":
        "No tokenizer padding: pad_sequence for ids (pad id) and labels (-100), attention mask and predicted-token "
        "counts from the lengths (L-1 per text), `with torch.inference_mode()`, time.monotonic, a sample-continuation cell.",
    "correct-04-helpers-mask-counts":
        "Helper functions with type hints (_pick_device, _pick_dtype, _sync), pad token via add_special_tokens(eos), "
        "@torch.no_grad() decorator, token counts as attention_mask.sum(dim=1) - 1 (right padding), extra print cells.",
    "correct-05-per-batch-dataframe":
        "Re-sets eval() and the pad token inside each function, records per-batch rows (list of dicts) shown as a "
        "pandas DataFrame with a bar plot against the global loss, untimed warm-up generate before the timed one.",
    "correct-06-left-padding-position-ids":
        "Left padding (restored in finally) with explicit position_ids from the mask and the first real token of each "
        "row also set to -100, so the loss and 246-token count equal right padding; perf_counter_ns, return_dict_in_generate.",
    "correct-07-encode-pad-float64":
        "tokenizer.encode per text + tokenizer.pad, torch.set_grad_enabled(False), NLL accumulated in a float64 tensor, "
        "state re-set per function, a markdown notes cell explaining the weighting, time.monotonic_ns.",
    "correct-08-log-softmax-gather":
        "NLL by hand with log_softmax + gather and a validity mask from shifted -100 labels, @torch.inference_mode() "
        "decorator, docstring Args, a _timed_generate helper doing the CUDA syncs, latency also in ms.",
}

manifest = {}
for name in STUDENTS:
    manifest[f"{name}.ipynb"] = {"kind": "correct", "description": CORRECT_DESCRIPTIONS[name]}
for name, (base, mistake, desc, spec) in MISTAKES.items():
    manifest[f"{name}.ipynb"] = {"kind": "mistake", "mistake": mistake,
                                 "description": f"{desc} (based on {base}.ipynb)"}

with open("/work/corpus/perplexity/manifest.json", "w") as f:
    json.dump(manifest, f, indent=2)
    f.write("\n")
print(len(manifest), "entries")
