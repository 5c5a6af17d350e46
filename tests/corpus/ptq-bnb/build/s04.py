"""Student 4: dtype.itemsize, one untimed warm-up generation per configuration, statistics.mean,
extra result columns (individual runs and std), short lowercase config names."""
from common import *

NAME = "correct-04-warmup-extra-columns.ipynb"

CELL4 = src(load_starter(), 4) + '''
import statistics
'''

CELL6 = '''def get_model_memory_footprint(model):
    """Gets model memory footprint in MB."""
    mem_params = sum([param.numel() * param.dtype.itemsize for param in model.parameters()])
    mem_bufs = sum([buf.numel() * buf.dtype.itemsize for buf in model.buffers()])
    mem = mem_params + mem_bufs # in bytes
    return mem / 1024**2 # convert to MB

def generate_text_and_time(model, tokenizer, prompt, max_new_tokens):
    """Generates text and returns the generated text and latency."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    
    start_time = time.perf_counter() # Use perf_counter for more precise timing
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure previous CUDA ops are done
        
    outputs = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=tokenizer.eos_token_id)
    
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure generation is done
    end_time = time.perf_counter()
    
    generated_text = tokenizer.decode(outputs[0], skip_special_tokens=True)
    latency = end_time - start_time
    return generated_text, latency
'''

CONFIGS = '''on_gpu = device.type == "cuda"
bnb_device_map = "auto" if on_gpu else None

configurations = [
    {"name": "fp16 baseline" if on_gpu else "fp32 baseline",
     "load_args": {"dtype": torch.float16 if on_gpu else torch.float32}},
    {"name": "int8 (bitsandbytes LLM.int8)",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_8bit=True), "device_map": bnb_device_map}},
    {"name": "nf4 (bitsandbytes 4-bit)",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4"),
                   "device_map": bnb_device_map}},
    {"name": "fp4 (bitsandbytes 4-bit)",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="fp4"),
                   "device_map": bnb_device_map}},
    ]
'''

LOAD = '''        load_args = config["load_args"]
        if load_args.get("device_map") is None:
            load_args = {k: v for k, v in load_args.items() if k != "device_map"}
        model = AutoModelForCausalLM.from_pretrained(MODEL_NAME, **load_args)
        if "quantization_config" not in load_args:
            model.to(device)
'''

MEM = '''        memory_mb = get_model_memory_footprint(model)
'''

LOOP = '''            if i == 0:
                # one untimed warm-up generation so that one-off setup costs (first kernel calls,
                # allocator, bnb dequant buffers) don't land in the first timed run
                generate_text_and_time(model, tokenizer, prompt_text, 5)
                for run in range(NUM_TIMING_RUNS):
                    text_run, t_run = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)
                    prompt_specific_latencies.append(t_run)
                    if run == 0:
                        current_generated_text = text_run
                avg_latencies_for_config.append(statistics.mean(prompt_specific_latencies))
                timing_runs = [round(t, 4) for t in prompt_specific_latencies]
                timing_std = statistics.stdev(prompt_specific_latencies) if len(prompt_specific_latencies) > 1 else 0.0
            else:
                current_generated_text, _ = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)
            generated_outputs_for_prompts[f"Prompt {i+1} Output"] = current_generated_text
'''

MAIN_SUBS = [(
    '''            "Avg Latency (s)": overall_avg_latency_for_config, # Based on first prompt's timing
''',
    '''            "Avg Latency (s)": overall_avg_latency_for_config, # Based on first prompt's timing
            "Latency runs (s)": timing_runs,
            "Latency std (s)": timing_std,
''')]

EXTRA = '''# compact view without the long generated texts
print(df_results[["Float Precision", "Memory (MB)", "Avg Latency (s)", "Latency std (s)"]].to_string(index=False))
baseline_mem = df_results.loc[0, "Memory (MB)"]
for _, row in df_results.iterrows():
    print(f"{row['Float Precision']:<30} {row['Memory (MB)'] / baseline_mem:6.1%} of baseline memory")
'''

ANSWERS = [
    "    *   fp32 baseline 4.19 MB, int8 2.72 MB (64.9% of baseline), nf4 2.53 MB (60.4%), fp4 2.53 MB (60.4%). The two 4-bit formats are the same size, they only differ in which 16 values a 4-bit code represents. The reductions are smaller than 32->8->4 bits suggests because roughly 2 MB is the causal-mask buffer (`attn.bias`, bool, 1024x1024 per layer) which stays as it is, and the embeddings/LayerNorms are kept in fp16 rather than quantized. For the real GPT-2 (124M params) the weights dominate and the savings would be much closer to the bit ratio.",
    "    *   Latency did not simply go down with precision. With a warm-up run before timing, int8 was clearly the slowest (about 1.5-2x the fp32 time). nf4 and fp4 ended up close to the fp32 baseline: depending on the run they were a little faster or a little slower, and the std column shows run-to-run noise of the same size as the gap (shared CPU, 3 runs). Without the warm-up the 4-bit models looked slower, so part of their cost is one-off setup on the first call. Reasons: bitsandbytes has to dequantize weights (4-bit -> compute dtype) or run the int8 matmul plus the fp16 outlier path at every layer and every new token. On a CPU with a tiny model that extra work is about as big as what is saved by reading fewer bytes. Generating 50 tokens here is also mostly per-step Python/dispatch overhead, which quantization doesn't change. Quantization gives a clear speed-up only when decoding is memory-bandwidth bound (big model, GPU, fused kernels); LLM.int8() is known to be slower than fp16 even there.",
    "    *   Outputs were mostly the same (greedy decoding, so they can be compared word for word). Prompt 3 was identical across all four. Prompt 1: int8 and fp4 identical to fp32, nf4 differs only in the last few tokens (\"... far awo, the\"). Prompt 2: nf4 identical to fp32, int8 ends with \"upon awo loved to reading. The\" and fp4 with \"upon awn an an an awooo\" (more repetitive). The differences only show up after the model has already started repeating itself in fp32, so I did not see significant degradation at any level; fp4 showed the most repetition.",
    "    *   Memory: quantization saved 35-40%. Speed: no gain on CPU; int8 was clearly slower, 4-bit roughly on par with fp32. Quality: basically unchanged. Best balance: fp32 when memory isn't a constraint and you run on CPU; nf4 when you need the smallest model (its outputs stayed closest to fp32 among the 4-bit options); int8 as a middle ground for memory, but it was the slowest here, so on CPU I'd skip it.",
]


def build():
    return assemble(CELL6, CONFIGS, LOAD, MEM, LOOP, ANSWERS, cell4=CELL4, main_subs=MAIN_SUBS,
                    extra_cells={8: [code(EXTRA)]})


if __name__ == "__main__":
    print(write(build(), NAME))
