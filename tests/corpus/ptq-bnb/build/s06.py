"""Student 6: decodes only the newly generated tokens (continuation), @torch.inference_mode() as a
decorator, copy.deepcopy of load_args, extra side-by-side comparison cell per prompt."""
from common import *

NAME = "correct-06-continuation-only-deepcopy.ipynb"

CELL4 = src(load_starter(), 4).replace("import time\n", "import time\nimport copy\n")

CELL6 = '''def get_model_memory_footprint(model):
    """Gets model memory footprint in MB."""
    mem_params = sum([p.nelement() * p.element_size() for p in model.parameters()])
    mem_bufs = sum([b.nelement() * b.element_size() for b in model.buffers()])
    mem = mem_params + mem_bufs # in bytes
    return mem / 1024**2 # convert to MB

@torch.inference_mode()
def generate_text_and_time(model, tokenizer, prompt, max_new_tokens):
    """Generates text and returns the generated text (the continuation only) and latency."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    prompt_len = inputs["input_ids"].shape[-1]
    
    start_time = time.perf_counter() # Use perf_counter for more precise timing
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure previous CUDA ops are done
        
    outputs = model.generate(**inputs, max_new_tokens=max_new_tokens, num_beams=1, do_sample=False,
                             pad_token_id=tokenizer.pad_token_id)
    
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure generation is done
    end_time = time.perf_counter()
    
    # keep only what the model wrote: generate() returns prompt + new tokens
    generated_text = tokenizer.decode(outputs[0, prompt_len:], skip_special_tokens=True)
    latency = end_time - start_time
    return generated_text, latency
'''

CONFIGS = '''_dm = "auto" if device.type == "cuda" else None
configurations = [
    {"name": "Full precision baseline (FP16 on GPU)" if device.type == "cuda" else "Full precision baseline (FP32 on CPU)",
     "load_args": {"dtype": torch.float16 if device.type == "cuda" else torch.float32}},
    {"name": "bnb INT8",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_8bit=True), "device_map": _dm}},
    {"name": "bnb 4-bit NF4",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                             bnb_4bit_use_double_quant=True),
                   "device_map": _dm}},
    {"name": "bnb 4-bit FP4",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="fp4"),
                   "device_map": _dm}},
    ]
'''

LOAD = '''        kwargs = copy.deepcopy(config["load_args"])
        if kwargs.get("device_map", "missing") is None:
            del kwargs["device_map"]
        model = AutoModelForCausalLM.from_pretrained(MODEL_NAME, **kwargs)
        if "quantization_config" not in kwargs and "device_map" not in kwargs:
            model.to(device)
'''

MEM = '''        memory_mb = get_model_memory_footprint(model)
'''

LOOP = '''            if i == 0:
                for k in range(NUM_TIMING_RUNS):
                    out_text, secs = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)
                    prompt_specific_latencies.append(secs)
                    if k == 0:
                        current_generated_text = out_text
                avg_latencies_for_config.append(sum(prompt_specific_latencies) / len(prompt_specific_latencies))
            else:
                current_generated_text = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)[0]
            generated_outputs_for_prompts[f"Prompt {i+1} Output"] = current_generated_text
'''

COMPARE = '''# side-by-side view of the continuations, one prompt at a time, for the quality review
for i, prompt_text in enumerate(PROMPTS):
    print(f"\\n=== Prompt {i+1}: {prompt_text!r}")
    for _, row in df_results.iterrows():
        print(f"  [{row['Float Precision']}] {row[f'Prompt {i+1} Output']!r}")
'''

ANSWERS = [
    "    *   The full-precision model takes 4.19 MB, INT8 2.72 MB and both 4-bit versions 2.53 MB, i.e. reductions of about 35% (INT8) and 40% (NF4, FP4; NF4 here even with double quantization, which makes no visible difference at this size). The reductions are much smaller than the bit-width ratio (32 -> 8 -> 4) because about 2 MB of the footprint is buffers (the `attn.bias` causal masks), which are not quantized, and the embeddings and LayerNorms are kept in half precision instead of being quantized. Only the Linear (Conv1D) weights go to 8 or 4 bits.",
    "    *   It didn't decrease. On the CPU the FP32 baseline was fastest and every bitsandbytes model was slower, INT8 by the largest margin (the 4-bit ones are close to FP32 in some runs, so their gap is partly noise). Quantized layers in bitsandbytes have to unpack/dequantize the weights (4-bit) or quantize activations and run the mixed int8/fp16 outlier matmul (LLM.int8()) at every step, and there are no tuned CPU kernels behind it here. With a model this small the actual matmuls cost almost nothing, so the overhead is what we measure. Other factors: Python overhead of `generate`, noise from a shared CPU, the first call of a configuration being slower.",
    "    *   Looking at the continuations side by side (cell above): prompt 3 continues identically (\"question. The quick brown fox jumps over the lazy dog...\") in all four. Prompt 1: only NF4 differs at the very end (\"far awo, the\"). Prompt 2: INT8 (\"upon awo loved to reading. The\") and FP4 (\"upon awn an an an awooo\") branch off from the baseline after about 20 tokens, NF4 doesn't. So there's no point where quality clearly breaks down. The deviations are late, and the baseline is already repetitive (\"far, far, far\") and incoherent there. FP4's \"an an an\" is the most repetitive output I got.",
    "    *   Memory vs. speed vs. quality: the quantized models use 35-40% less memory, run slower on CPU, and produce almost the same text. Scenario 1, small model on CPU with enough RAM: FP32 baseline (fastest, reference quality). Scenario 2, memory-limited deployment: NF4, smallest footprint and closest to the baseline of the 4-bit options. INT8 sits in between on memory but was the slowest. FP4 has NF4's size with slightly worse outputs, so I'd not pick it.",
]


def build():
    return assemble(CELL6, CONFIGS, LOAD, MEM, LOOP, ANSWERS, cell4=CELL4,
                    extra_cells={8: [code(COMPARE)]})


if __name__ == "__main__":
    print(write(build(), NAME))
