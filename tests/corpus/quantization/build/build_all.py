"""Build every notebook of the corpus and the manifest: python build_all.py"""
import importlib
import json
import sys

sys.path.insert(0, "/work/corpus/quantization/build")
from nbbuild import build, OUT_DIR

S = {i: importlib.import_module(f"s{i}") for i in range(1, 9)}
manifest = {}
for i, s in S.items():
    build(s, s.NAME)
    manifest[s.NAME] = {"kind": "correct", "description": s.DESC}

# (mistake id, variant, base student, [(cell, old, new)], description)
MISTAKES = [
    ("mistake-exported-not-quantized", "save-pretrained-export", 1, [(7,
        '''    quantizer = ORTQuantizer.from_pretrained(onnx_model)
    qconfig = AutoQuantizationConfig.avx512_vnni(is_static=False, per_channel=False)
    quantizer.quantize(save_dir=save_dir, quantization_config=qconfig)
    quantized_model = ORTModelForCausalLM.from_pretrained(save_dir, file_name="model_quantized.onnx")''',
        '''    qconfig = AutoQuantizationConfig.avx512_vnni(is_static=False, per_channel=False)
    onnx_model.save_pretrained(save_dir)   # ONNX graph + config written to save_dir
    quantized_model = ORTModelForCausalLM.from_pretrained(save_dir, file_name="model.onnx")''')],
     "Builds an AutoQuantizationConfig but never runs ORTQuantizer: the exported FP32 ONNX model is saved with save_pretrained and reloaded as the 'quantized' model."),
    ("mistake-exported-not-quantized", "loads-fp32-export", 3, [(7,
        'model = ORTModelForCausalLM.from_pretrained(save_dir, file_name="model_quantized.onnx")',
        'model = ORTModelForCausalLM.from_pretrained(export_dir)')],
     "Quantizes to model_quantized.onnx but then loads and returns the FP32 export folder, so the returned model is unquantized."),
    ("mistake-cache-never-toggled", "bool-of-side", 2, [(9,
        'measure_generation(model, tokenizer, prompts, max_new_tokens, use_cache=use_cache)',
        'measure_generation(model, tokenizer, prompts, max_new_tokens, use_cache=bool(side))')],
     "The ablation passes use_cache=bool(side), which is always True, so the 'use_cache=False' rows also run with the cache."),
    ("mistake-cache-never-toggled", "generation-config-default", 8, [(9,
        'measure_generation(\n                model, tokenizer, prompts, max_new_tokens, use_cache=use_cache)',
        'measure_generation(\n                model, tokenizer, prompts, max_new_tokens, use_cache=model.generation_config.use_cache)')],
     "The ablation passes the model's generation_config.use_cache (always True) instead of the loop variable; only the label changes."),
    ("mistake-padding-never-set", "copy-unused", 7, [(9,
        'measure_generation(\n                model, padded_tok, prompts,',
        'measure_generation(\n                model, tokenizer, prompts,')],
     "Sets padding_side on a deep copy of the tokenizer but measures with the original, so every setting pads on the left."),
    ("mistake-padding-never-set", "init-kwargs", 4, [(9,
        '            tokenizer.padding_side = side\n',
        '            tokenizer.init_kwargs["padding_side"] = side\n')],
     "Writes the side into tokenizer.init_kwargs, which an already-built tokenizer ignores, so every batch is padded on the left."),
    ("mistake-batch-first-sequence", "max-new-tokens", 1, [(11,
        '"tokens_per_s": m["tokens_per_s"],',
        '"tokens_per_s": max_new_tokens / m["latency_s"],')],
     "measure_batched reports tokens_per_s as max_new_tokens / latency, i.e. one sequence's tokens, not the batch's."),
    ("mistake-batch-first-sequence", "row-zero", 7, [(11,
        '"tokens_per_s": sum(m["new_tokens_per_row"]) / m["latency_s"],',
        '"tokens_per_s": m["new_tokens_per_row"][0] / m["latency_s"],')],
     "measure_batched divides only row 0's new tokens by the batch latency, so throughput ignores the other sequences."),
    ("mistake-ppx-padding-counted", "labels-clone", 4, [(13,
        'labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)',
        'labels = batch["input_ids"].clone()')],
     "Uses a clone of the padded input ids as labels with ignore_index=-100; padding is the eos id, never -100, so pad positions enter the loss and the count."),
    ("mistake-ppx-padding-counted", "noop-where", 6, [(13,
        'targets[batch["attention_mask"] == 0] = -100',
        'targets = targets.where(targets != -100, tokenizer.pad_token_id)   # keep pads as pad ids')],
     "The 'masking' line is a no-op (where on -100 that never occurs), so padded input ids are the labels and padding counts in the loss."),
    ("mistake-two-takeaways", "slice-middle", 2, [(19,
        '    for line in takeaways:\n',
        '    takeaways = takeaways[1:3]   # the two that matter most\n    for line in takeaways:\n')],
     "Writes five takeaways but keeps takeaways[1:3], so the controller prints and returns only two."),
    ("mistake-two-takeaways", "slice-tail", 8, [(19,
        'takeaways = make_takeaways(baseline, quantized, ablation, batched, ppx, edge)',
        'takeaways = make_takeaways(baseline, quantized, ablation, batched, ppx, edge)[-2:]')],
     "The helper builds four takeaways but the controller slices [-2:], returning only two."),
    ("mistake-edge-no-multiline", "raw-string", 1, [(17,
        '"multi_line": "Shopping list:',
        '"multi_line": r"Shopping list:')],
     "The 'multi_line' edge prompt is a raw string, so it holds literal backslash-n text and is really a single line."),
    ("mistake-edge-no-multiline", "joined-with-spaces", 5, [(17,
        '"multi_line": "Q: What is the boiling point of water?\\nA: 100 degrees Celsius.\\nQ: And the freezing point?\\nA:",',
        '"multi_line": " ".join(["Q: What is the boiling point of water?", "A: 100 degrees Celsius.",\n                                "Q: And the freezing point?", "A:"]),')],
     "The 'multi_line' edge prompt joins its lines with spaces, so it has no newline at all."),
]

for mid, variant, base, repl, desc in MISTAKES:
    name = f"{mid}--{variant}.ipynb"
    build(S[base], name, repl)
    manifest[name] = {"kind": "mistake", "mistake": mid,
                      "description": f"Copy of {S[base].NAME} with one mistake. {desc}"}

with open(f"{OUT_DIR}/manifest.json", "w") as f:
    json.dump(manifest, f, indent=2)
print(len(manifest), "notebooks")
