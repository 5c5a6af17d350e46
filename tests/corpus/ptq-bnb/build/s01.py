"""Student 1: follows the starter's hints almost literally."""
from common import *

NAME = "correct-01-by-the-hints.ipynb"

HELPERS_MEM = ("param.nelement() * param.element_size()", "buf.nelement() * buf.element_size()")

GEN = '''    outputs = model.generate(**inputs, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.eos_token_id)
'''
DECODE = '''    generated_text = tokenizer.decode(outputs[0], skip_special_tokens=True)
'''

CONFIGS = '''configurations = [
    ### TODO: Define the baseline configuration (FP16 for GPU or FP32 for CPU)
    {"name": "FP16 (Baseline GPU)" if device.type == "cuda" else "FP32 (Baseline CPU)", "load_args": {"dtype": torch.float16 if device.type == "cuda" else torch.float32}},

    ### TODO: Define the INT8 quantization configuration using bitsandbytes
    {"name": "INT8 (bitsandbytes)", "load_args": {"quantization_config": BitsAndBytesConfig(load_in_8bit=True), "device_map": "auto" if device.type == "cuda" else None}},

    ### TODO: Define the NF4 (4-bit) quantization configuration using bitsandbytes
    {"name": "NF4 (bitsandbytes)", "load_args": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4"), "device_map": "auto" if device.type == "cuda" else None}},

    ### TODO: Define the FP4 (4-bit) quantization configuration
    {"name": "FP4 (bitsandbytes)", "load_args": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="fp4"), "device_map": "auto" if device.type == "cuda" else None}},
    ]
'''

LOAD = '''        ### TODO: Load the model using AutoModelForCausalLM.from_pretrained()
        current_load_args = config['load_args']
        if "device_map" in current_load_args and current_load_args["device_map"] is None:
            # CPU run: no device_map. bitsandbytes models are already placed on the CPU and
            # refuse .to(), so only move the plain (non-quantized) baseline.
            current_load_args = {k: v for k, v in current_load_args.items() if k != "device_map"}
        model = AutoModelForCausalLM.from_pretrained(MODEL_NAME, **current_load_args)
        if "quantization_config" not in current_load_args and "device_map" not in current_load_args:
            model.to(device)
'''

MEM = '''        memory_mb = get_model_memory_footprint(model)
'''

LOOP = '''            ### TODO: Implement the timing loop (NUM_TIMING_RUNS)
            if i == 0:
                for run in range(NUM_TIMING_RUNS):
                    text, latency = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)
                    prompt_specific_latencies.append(latency)
                    if run == 0:
                        current_generated_text = text
                avg_latencies_for_config.append(sum(prompt_specific_latencies) / len(prompt_specific_latencies))
            else:
                current_generated_text, _ = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)
            generated_outputs_for_prompts[f"Prompt {i+1} Output"] = current_generated_text
'''

ANSWERS = [
    "    *   **Answer**: The FP32 baseline is the largest at about 4.19 MB. INT8 brings it down to about 2.72 MB (-35%), and both 4-bit variants (NF4 and FP4) land at about 2.53 MB (-40% vs FP32). NF4 and FP4 are exactly the same size because both store 4 bits per weight plus one scale per block. The savings look smaller than 4x/8x because roughly 2 MB of the total are buffers (the boolean causal-mask `attn.bias` of each layer), which are not quantized, and because the embeddings and LayerNorms stay in FP16. Counting only parameters, the weights go from ~2.19 MB (FP32) to ~0.72 MB (INT8) to ~0.53 MB (4-bit).",
    "    *   **Answer**: No. On my CPU run the FP32 baseline was the fastest and all three bitsandbytes configurations were slower, INT8 the slowest (on re-runs the 4-bit ones sometimes came close to FP32, but INT8 was always clearly slower). The quantized weights have to be dequantized (or run through bitsandbytes' int8/4-bit kernels) at every matmul, and for such a small model the matmuls are tiny, so that extra work and the Python/kernel-launch overhead dominate. Quantization mainly saves memory; it only speeds things up when generation is memory-bandwidth bound (big models on a GPU), and even then INT8 with outlier handling is often slower than FP16.",
    "    *   **Answer**: I did not see a significant drop in quality; the changes are small and start at the end of the outputs. With greedy decoding, prompt 3 (\"To be or not to be...\") gives exactly the same text in all four configurations. For prompt 1, FP32, INT8 and FP4 are identical (\"Paris. Paris is a large city on the river Seine...\") and only NF4 changes the last tokens (\"far awo, the\" instead of \"far, far a\"). For prompt 2, NF4 matches FP32, while INT8 (\"upon awo loved to reading. The\") and FP4 (\"upon awn an an an awooo\") go a different way after ~25 tokens. The outputs are already repetitive and incoherent in FP32 at that point (\"far, far, far\"), so this comes from the tiny stand-in model and greedy decoding, not from the quantization. If I had to choose, the first differences show up at 4 bits, and FP4 looked a bit worse than NF4.",
    "    *   **Answer**: INT8 saves about a third of the memory and 4-bit saves the most (NF4 and FP4 are the same size), both with only small changes late in the generated text, but on the CPU every quantized model was slower than FP32. If memory is not a problem and speed matters (CPU, small model), the FP32/FP16 baseline is best. If memory is tight, NF4 gives the best balance since it keeps the quality close to the baseline at the smallest size. INT8 is a safe middle option when you want to stay closest to the original outputs.",
]


def build():
    nb = load_starter()
    h = src(nb, 6)
    h = h.replace("sum([___ for param in model.parameters()])", f"sum([{HELPERS_MEM[0]} for param in model.parameters()])")
    h = h.replace("sum([___ for buf in model.buffers()])", f"sum([{HELPERS_MEM[1]} for buf in model.buffers()])")
    h = sub1(h, "    outputs = None # TODO: write generation logic\n", GEN)
    h = sub1(h, "    generated_text = None # TODO: extract generated text from output. HINT: use the tokenizer \n", DECODE)
    nb.cells[6].source = h
    m = src(nb, 8)
    m = replace_block(m, CFG_START, CFG_END, CONFIGS)
    m = replace_block(m, LOAD_START, LOAD_END, LOAD)
    m = sub1(m, MEM_OLD, MEM)
    m = replace_block(m, LOOP_START, LOOP_END, LOOP)
    nb.cells[8].source = m
    nb.cells[9].source = fill_analysis(src(nb, 9), ANSWERS)
    return nb


if __name__ == "__main__":
    print(write(build(), NAME))
