"""Write /work/corpus/ptq-bnb/manifest.json."""
import importlib, json
from mistakes import manifest_entries

CORRECT = {
    "s01": "Follows the starter's hints literally: example configs, nelement()*element_size(), full-text decode, plain timing loop; replaces the TODO bullets with answers.",
    "s02": "Separate helper cell building the bnb configs (NF4 with double quant and float32 compute dtype), @torch.no_grad() decorators, batch_decode, per-run prints; answers typed in a NEW markdown cell below the untouched TODO questions.",
    "s03": "Uses tensor.nbytes, `with torch.inference_mode():`, descriptive config labels, keeps the starter's TODO comments in code, adds a df.plot(ax=...) bar-chart cell of memory and latency.",
    "s04": "Uses dtype.itemsize, an untimed warm-up generation before the timed runs, statistics.mean, extra result columns (individual runs, std) and a percent-of-baseline cell.",
    "s05": "Appends each timed run of prompt 1 to avg_latencies_for_config (the starter's mean then averages the runs), times with perf_counter_ns converted to seconds, passes input_ids/attention_mask explicitly.",
    "s06": "Decodes only the newly generated tokens (continuation), @torch.inference_mode() decorator, copy.deepcopy of load_args, extra side-by-side comparison cell per prompt.",
    "s07": "Device-aware baseline/compute-dtype constants, checks is_loaded_in_8bit/4bit before .to(), timing runs gathered in a list comprehension, short bullet-style answers.",
    "s08": "Type hints and docstrings, _tensor_bytes and load_model helpers in an extra cell, prints a parameter/buffer breakdown, long written answers.",
}

manifest = {}
for mod_name, desc in CORRECT.items():
    mod = importlib.import_module(mod_name)
    manifest[mod.NAME] = {"kind": "correct", "description": desc}
manifest.update(manifest_entries())
with open("/work/corpus/ptq-bnb/manifest.json", "w") as f:
    json.dump(manifest, f, indent=2)
print(len(manifest), "entries")
