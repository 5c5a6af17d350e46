"""Student 7: GPU-aware compute dtype variable, checks model.is_loaded_in_8bit / is_loaded_in_4bit
before .to(), timing via a list comprehension of runs, short bullet-style answers."""
from common import *

NAME = "correct-07-gpu-aware-listcomp-timing.ipynb"

CELL6 = '''def get_model_memory_footprint(model):
    """Gets model memory footprint in MB."""
    mem_params = sum([param.nelement() * param.element_size() for param in model.parameters()]) # bytes per param tensor
    mem_bufs = sum([buf.nelement() * buf.element_size() for buf in model.buffers()]) # bytes per buffer tensor
    mem = mem_params + mem_bufs # in bytes
    return mem / 1024**2 # convert to MB

def generate_text_and_time(model, tokenizer, prompt, max_new_tokens):
    """Generates text and returns the generated text and latency."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    
    start_time = time.perf_counter() # Use perf_counter for more precise timing
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure previous CUDA ops are done
        
    with torch.no_grad():
        outputs = model.generate(**inputs, max_new_tokens=max_new_tokens,
                                 pad_token_id=tokenizer.eos_token_id, do_sample=False)
    
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure generation is done
    end_time = time.perf_counter()
    
    generated_text = tokenizer.decode(outputs[0], skip_special_tokens=True)
    latency = end_time - start_time
    return generated_text, latency
'''

CONFIGS = '''IS_GPU = device.type == "cuda"
BASE_DTYPE = torch.float16 if IS_GPU else torch.float32      # baseline precision
COMPUTE_DTYPE = torch.float16 if IS_GPU else torch.float32   # dtype bnb dequantizes 4-bit weights to
DEVICE_MAP = "auto" if IS_GPU else None

configurations = [
    {"name": f"{'FP16' if IS_GPU else 'FP32'} baseline ({device.type})",
     "load_args": {"dtype": BASE_DTYPE}},
    {"name": "INT8 - bitsandbytes",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_8bit=True), "device_map": DEVICE_MAP}},
    {"name": "NF4 - bitsandbytes",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True,
                                                             bnb_4bit_quant_type="nf4",
                                                             bnb_4bit_compute_dtype=COMPUTE_DTYPE),
                   "device_map": DEVICE_MAP}},
    {"name": "FP4 - bitsandbytes",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True,
                                                             bnb_4bit_quant_type="fp4",
                                                             bnb_4bit_compute_dtype=COMPUTE_DTYPE),
                   "device_map": DEVICE_MAP}},
    ]
for c in configurations:
    print(" -", c["name"], {k: (type(v).__name__ if k == "quantization_config" else v) for k, v in c["load_args"].items()})
'''

LOAD = '''        args = {k: v for k, v in config["load_args"].items() if not (k == "device_map" and v is None)}
        model = AutoModelForCausalLM.from_pretrained(MODEL_NAME, **args)
        already_placed = (getattr(model, "is_loaded_in_8bit", False)
                          or getattr(model, "is_loaded_in_4bit", False)
                          or "device_map" in args)
        if not already_placed:
            model.to(device)
        model.eval()
'''

MEM = '''        memory_mb = get_model_memory_footprint(model)
'''

LOOP = '''            if i == 0:
                runs = [generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)
                        for _ in range(NUM_TIMING_RUNS)]
                current_generated_text = runs[0][0]                      # text of the first generation
                prompt_specific_latencies = [lat for _, lat in runs]
                avg_latencies_for_config.append(sum(prompt_specific_latencies) / len(prompt_specific_latencies))
            else:
                current_generated_text, _ = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)
            generated_outputs_for_prompts[f"Prompt {i+1} Output"] = current_generated_text
'''

ANSWERS = [
    "    *   4.19 MB (FP32) → 2.72 MB (INT8, −35%) → 2.53 MB (NF4, −40%) = 2.53 MB (FP4, −40%). Less than the ideal 4×/8× because ~2 MB are non-quantized buffers (causal mask) and embeddings/LayerNorm stay FP16; only the linear layers are quantized.",
    "    *   No. FP32 was fastest on CPU; INT8 slowest; NF4/FP4 in between, sometimes ≈ FP32. Causes: on-the-fly dequantization / int8 outlier decomposition overhead in bitsandbytes, no memory-bandwidth bottleneck for a tiny model on CPU, Python and dispatch overhead per generated token, noisy shared CPU. Speed-ups from quantization are expected only for memory-bound decoding of large models on GPU.",
    "    *   No significant degradation at any level (greedy decoding). Prompt 3 identical everywhere. Prompt 1: NF4 changes the tail (\"far awo, the\"). Prompt 2: INT8 → \"upon awo loved to reading. The\", FP4 → \"upon awn an an an awooo\". All changes appear late, after the baseline itself has become repetitive.",
    "    *   Memory ↓ 35–40%, latency ↑ on CPU, quality ≈ unchanged. CPU / small model: FP32. Tight memory: NF4 (smallest, closest to baseline among 4-bit). INT8: moderate saving, most expensive in time here. FP4: no advantage over NF4.",
]


def build():
    return assemble(CELL6, CONFIGS, LOAD, MEM, LOOP, ANSWERS)


if __name__ == "__main__":
    print(write(build(), NAME))
