"""Student 2: numel(), @torch.no_grad() decorator, a helper that builds the bnb configs in its own
cell, pad_token_id from the tokenizer, batch_decode, NF4 with double quant + float32 compute dtype.
Types the answers in a NEW markdown cell below the questions (TODO lines left in place)."""
from common import *

NAME = "correct-02-helper-cell-newcell-answers.ipynb"

CELL6 = '''@torch.no_grad()
def get_model_memory_footprint(model):
    """Gets model memory footprint in MB."""
    mem_params = sum([param.numel() * param.element_size() for param in model.parameters()]) # bytes of every parameter tensor
    mem_bufs = sum([buf.numel() * buf.element_size() for buf in model.buffers()]) # bytes of every buffer (e.g. the causal mask)
    mem = mem_params + mem_bufs # in bytes
    return mem / 1024**2 # convert to MB

@torch.no_grad()
def generate_text_and_time(model, tokenizer, prompt, max_new_tokens):
    """Generates text and returns the generated text and latency."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    
    start_time = time.perf_counter() # Use perf_counter for more precise timing
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure previous CUDA ops are done
        
    outputs = model.generate(
        **inputs,
        max_new_tokens=max_new_tokens,
        do_sample=False,                      # greedy: same prompt -> comparable outputs across precisions
        pad_token_id=tokenizer.pad_token_id,  # set to eos in the main cell
    )
    
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure generation is done
    end_time = time.perf_counter()
    
    generated_text = tokenizer.batch_decode(outputs, skip_special_tokens=True)[0]
    latency = end_time - start_time
    return generated_text, latency
'''

HELPER_CELL = '''def bnb_load_args(mode):
    """from_pretrained kwargs for a bitsandbytes mode: 'int8', 'nf4' or 'fp4'."""
    if mode == "int8":
        qcfg = BitsAndBytesConfig(load_in_8bit=True)
    elif mode in ("nf4", "fp4"):
        qcfg = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type=mode,
            bnb_4bit_compute_dtype=torch.float16 if device.type == "cuda" else torch.float32,
            bnb_4bit_use_double_quant=(mode == "nf4"),  # QLoRA-style double quantization for NF4
        )
    else:
        raise ValueError(mode)
    return {"quantization_config": qcfg, "device_map": "auto" if device.type == "cuda" else None}

print(bnb_load_args("nf4")["quantization_config"].bnb_4bit_quant_type)
'''

CONFIGS = '''configurations = [
    {"name": "FP16 (Baseline GPU)" if device.type == "cuda" else "FP32 (Baseline CPU)",
     "load_args": {"dtype": torch.float16 if device.type == "cuda" else torch.float32}},
    {"name": "INT8 (bitsandbytes)", "load_args": bnb_load_args("int8")},
    {"name": "NF4 4-bit (bitsandbytes, double quant)", "load_args": bnb_load_args("nf4")},
    {"name": "FP4 4-bit (bitsandbytes)", "load_args": bnb_load_args("fp4")},
    ]
'''

LOAD = '''        load_args = dict(config["load_args"])
        if load_args.get("device_map") is None:
            load_args.pop("device_map", None)   # CPU: no device_map, place the model ourselves
        model = AutoModelForCausalLM.from_pretrained(MODEL_NAME, **load_args)
        if not getattr(model, "is_quantized", False):
            model = model.to(device)            # bnb models are already placed (and can't be .to()'d in 8-bit)
        model.eval()
'''

MEM = '''        memory_mb = get_model_memory_footprint(model)
'''

LOOP = '''            if i == 0:
                # several timed runs on the first prompt -> 'Avg Latency (s)'
                for run_idx in range(NUM_TIMING_RUNS):
                    text, lat = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)
                    prompt_specific_latencies.append(lat)
                    if run_idx == 0:
                        current_generated_text = text
                avg_latencies_for_config.append(sum(prompt_specific_latencies) / NUM_TIMING_RUNS)
                print(f"    runs: {[round(l, 3) for l in prompt_specific_latencies]} s")
            else:
                # one generation only, for the quality comparison
                current_generated_text, _ = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)
            generated_outputs_for_prompts[f"Prompt {i+1} Output"] = current_generated_text
'''

ANSWERS = """### My answers

**1. Memory scaling.** FP32: 4.19 MB, INT8: 2.72 MB, NF4: 2.53 MB, FP4: 2.53 MB. So INT8 is about 65% of the baseline and the 4-bit models about 60%. That is far from the theoretical 4x (INT8) and 8x (4-bit) because (a) about 2.0 MB of every model is the `attn.bias` causal-mask buffer, which bitsandbytes doesn't touch, (b) only the `Linear`/`Conv1D` weights get quantized, the token/position embeddings and LayerNorms are kept in 16-bit, and (c) 4-bit needs per-block scales (absmax), so NF4 and FP4 cost exactly the same. Double quantization on NF4 shrinks the scales but that doesn't show up at two decimals for a model this small.

**2. Latency.** Latency did *not* go down. FP32 was the fastest on my CPU, and INT8 and the two 4-bit configs were all slower (from ~10% up to ~2x slower, INT8 the worst). Reasons: bitsandbytes dequantizes weights on the fly (or does int8 matmul with outlier decomposition for LLM.int8()), which is extra compute, and this tiny model is not limited by memory bandwidth, so reading fewer bytes gives nothing back. The timings are also only 3 runs on a shared CPU, so they're noisy. On a big model on a GPU the 4-bit versions can be faster because decoding is memory-bound there.

**3. Output quality.** Since I used greedy decoding, outputs are directly comparable. Prompt 3 is identical for all four. Prompt 1 only changes for NF4 at the very end ("...far, far, far awo, the"). Prompt 2 changes for INT8 ("A land. upon awo loved to reading. The") and FP4 ("upon awn an an an awooo") after the sentence about the princess. I wouldn't call that significant degradation: the first ~20 tokens are the same everywhere and the baseline is already babbling after that. Small rounding differences flip one argmax and then the text goes a different way.

**4. Trade-offs.** Quantization bought ~35-40% memory here (far more on a real model where weights dominate), cost latency on CPU, and changed quality only marginally. For CPU inference of a small model, stay with FP32. When the model doesn't fit in memory, NF4 (with double quant) is the best compromise: same size as FP4, and its outputs were closer to the baseline in my run. INT8 is the conservative option if you want a moderate saving.
"""


def build():
    return assemble(CELL6, CONFIGS, LOAD, MEM, LOOP, ANSWERS, answers_mode="newcell",
                    extra_cells={7: [md("Helper that builds the `from_pretrained` arguments for each bitsandbytes mode (used in the configuration list below)."), code(HELPER_CELL)]})


if __name__ == "__main__":
    print(write(build(), NAME))
