"""Student 3: tensor.nbytes, `with torch.inference_mode():`, descriptive config labels, a bar-chart
cell with df.plot(ax=...), keeps the starter's TODO comments above the code."""
from common import *

NAME = "correct-03-nbytes-inference-mode-plot.ipynb"

CELL6 = '''def get_model_memory_footprint(model):
    """Gets model memory footprint in MB."""
    mem_params = sum([param.nbytes for param in model.parameters()]) # TODO: extract memory size for each parameter. Ref: https://discuss.pytorch.org/t/finding-model-size/130275
    mem_bufs = sum([buf.nbytes for buf in model.buffers()]) # TODO: extract memory size for each buffer. Ref: https://discuss.pytorch.org/t/finding-model-size/130275
    mem = mem_params + mem_bufs # in bytes
    return mem / 1024**2 # convert to MB

def generate_text_and_time(model, tokenizer, prompt, max_new_tokens):
    """Generates text and returns the generated text and latency."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    
    start_time = time.perf_counter() # Use perf_counter for more precise timing
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure previous CUDA ops are done
        
    with torch.inference_mode():
        outputs = model.generate(**inputs, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.eos_token_id)
    
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure generation is done
    end_time = time.perf_counter()
    
    generated_text = tokenizer.decode(outputs[0], skip_special_tokens=True) # prompt + continuation
    latency = end_time - start_time
    return generated_text, latency
'''

CONFIGS = '''configurations = [
    ### TODO: Define the baseline configuration (FP16 for GPU or FP32 for CPU)
    {
        "name": "Baseline FP16, no quantization" if device.type == "cuda" else "Baseline FP32, no quantization",
        "load_args": {"dtype": torch.float16 if device.type == "cuda" else torch.float32},
    },
    ### TODO: Define the INT8 quantization configuration using bitsandbytes
    {
        "name": "8-bit LLM.int8() via bitsandbytes",
        "load_args": {"quantization_config": BitsAndBytesConfig(load_in_8bit=True),
                      "device_map": "auto" if device.type == "cuda" else None},
    },
    ### TODO: Define the NF4 (4-bit) quantization configuration using bitsandbytes
    {
        "name": "4-bit NormalFloat (NF4) via bitsandbytes",
        "load_args": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                                bnb_4bit_compute_dtype=torch.float32),
                      "device_map": "auto" if device.type == "cuda" else None},
    },
    ### TODO: Define the FP4 (4-bit) quantization configuration
    {
        "name": "4-bit float (FP4) via bitsandbytes",
        "load_args": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="fp4",
                                                                bnb_4bit_compute_dtype=torch.float32),
                      "device_map": "auto" if device.type == "cuda" else None},
    },
    ]
'''

LOAD = '''        ### TODO: Load the model using AutoModelForCausalLM.from_pretrained()
        # Use the load_args from the current 'config'.
        current_load_args = {k: v for k, v in config["load_args"].items() if v is not None}
        model = AutoModelForCausalLM.from_pretrained(MODEL_NAME, **current_load_args)
        quantized = "quantization_config" in current_load_args
        if not quantized and "device_map" not in current_load_args:
            model.to(device)   # plain model: move it; bnb models are placed at load time
'''

MEM = '''        ### (memory footprint in MB: parameters + buffers)
        memory_mb = get_model_memory_footprint(model)
'''

LOOP = '''            ### TODO: Implement the timing loop (NUM_TIMING_RUNS)
            # Only perform multiple timing runs for the first prompt to establish 'Avg Latency (s)'
            # For other prompts, generate text once for quality assessment.
            n_runs = NUM_TIMING_RUNS if i == 0 else 1
            for run in range(n_runs):
                text, latency = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)
                if run == 0:
                    current_generated_text = text  # first generation's text
                if i == 0:
                    prompt_specific_latencies.append(latency)
            if prompt_specific_latencies:
                avg_latencies_for_config.append(sum(prompt_specific_latencies) / len(prompt_specific_latencies))
            # Collect the generated text for each prompt in generated_outputs_for_prompts
            generated_outputs_for_prompts[f"Prompt {i+1} Output"] = current_generated_text
'''

PLOT = '''import matplotlib.pyplot as plt

plot_df = df_results[pd.to_numeric(df_results["Memory (MB)"], errors="coerce").notna()].copy()
plot_df = plot_df.set_index("Float Precision")[["Memory (MB)", "Avg Latency (s)"]].astype(float)

fig, axes = plt.subplots(1, 2, figsize=(12, 4))
plot_df["Memory (MB)"].plot(kind="bar", ax=axes[0], color="tab:blue", title="Model memory footprint")
axes[0].set_ylabel("MB")
plot_df["Avg Latency (s)"].plot(kind="bar", ax=axes[1], color="tab:orange",
                                title=f"Avg latency, {MAX_NEW_TOKENS} new tokens, prompt 1")
axes[1].set_ylabel("seconds")
for ax in axes:
    ax.tick_params(axis="x", labelrotation=20)
plt.tight_layout()
plt.show()
'''

ANSWERS = [
    "    *   Memory went 4.19 MB (FP32 baseline) -> 2.72 MB (INT8) -> 2.53 MB (NF4) and 2.53 MB (FP4). In relative terms INT8 saves ~35% and 4-bit ~40% of the baseline, and 4-bit is only ~7% smaller than INT8. The reduction is much less than the ideal 4x/8x because the footprint includes the buffers: each block keeps a 1024x1024 boolean causal mask (`attn.bias`, 1 MB per layer, ~2 MB total), which is not quantized, so it is now half of the quantized models. Also the embeddings (`wte`, `wpe`) and LayerNorm weights are not quantized but only cast to FP16. Looking at parameters alone, the quantized models are 3-4x smaller than FP32.",
    "    *   Latency got worse, not better: the FP32 baseline had the lowest average latency and all three bitsandbytes models were slower on the CPU (INT8 the slowest in my run, the 4-bit ones in between and on some re-runs almost level with FP32). This is expected for a tiny model on a CPU: generation isn't limited by memory traffic, so smaller weights don't help, while bitsandbytes adds work on every forward pass (dequantizing 4-bit blocks back to FP32 compute dtype, the int8 matmul with outlier handling for LLM.int8()). Also there is per-call overhead in the bnb layers, and the CPU is shared, so the numbers are a bit noisy with only 3 runs. On a GPU with a large model the 4-bit kernels could be faster because decoding there is memory-bandwidth bound.",
    "    *   Only small differences, all toward the end of the 50 new tokens. Prompt 3 was identical for every precision. On prompt 1 only NF4 changed the ending (\"far, far, far awo, the\" vs \"far, far, far, far, far a\"). On prompt 2 INT8 switched to \"upon awo loved to reading. The\" and FP4 to \"upon awn an an an awooo\", while NF4 kept the baseline text. I would not call it significant degradation: the quantized and FP32 outputs start identical and the FP32 continuation is itself incoherent and repetitive at that point. The first visible changes appear with INT8 and 4-bit alike, slightly more with FP4.",
    "    *   Lower precision = less memory, but here it also meant higher latency and small changes in the text. For a small model on a CPU the FP32 baseline is the best choice (fastest, reference quality, memory is not an issue). For memory-constrained deployment (large model on a small GPU) NF4 gives the biggest saving with the least quality change in my results, so it is the best balance; INT8 is the safest if you want something closer to the original at a moderate saving; FP4 has the same size as NF4 but no advantage, so I would prefer NF4.",
]


def build():
    return assemble(CELL6, CONFIGS, LOAD, MEM, LOOP, ANSWERS,
                    extra_cells={8: [md("### Plot: memory and latency per configuration"), code(PLOT)]})


if __name__ == "__main__":
    print(write(build(), NAME))
