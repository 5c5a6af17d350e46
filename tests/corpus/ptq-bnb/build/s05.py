"""Student 5: every timed run appended to avg_latencies_for_config (overall mean = mean of the runs),
perf_counter_ns converted to seconds, explicit input_ids/attention_mask to generate, element_size()*nelement()."""
from common import *

NAME = "correct-05-runs-into-avg-list-perfcounter-ns.ipynb"

CELL6 = '''def get_model_memory_footprint(model):
    """Gets model memory footprint in MB."""
    mem_params = sum([param.element_size() * param.nelement() for param in model.parameters()])
    mem_bufs = sum([buf.element_size() * buf.nelement() for buf in model.buffers()])
    mem = mem_params + mem_bufs # in bytes
    return mem / 1024**2 # convert to MB

def generate_text_and_time(model, tokenizer, prompt, max_new_tokens):
    """Generates text and returns the generated text and latency (seconds)."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    
    start_ns = time.perf_counter_ns() # integer nanoseconds, no float rounding
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure previous CUDA ops are done
        
    outputs = model.generate(
        input_ids=inputs["input_ids"],
        attention_mask=inputs["attention_mask"],
        max_new_tokens=max_new_tokens,
        pad_token_id=tokenizer.eos_token_id,
    )
    
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure generation is done
    end_ns = time.perf_counter_ns()
    
    generated_text = tokenizer.decode(outputs[0].tolist(), skip_special_tokens=True)
    latency = (end_ns - start_ns) / 1e9  # ns -> s
    return generated_text, latency
'''

CONFIGS = '''configurations = [
    # baseline: full precision on CPU, half precision on GPU
    {"name": "FP16 (Baseline GPU)" if device.type == "cuda" else "FP32 (Baseline CPU)",
     "load_args": {"dtype": torch.float16 if device.type == "cuda" else torch.float32}},
    # 8-bit weights, LLM.int8() matmul
    {"name": "INT8 (bitsandbytes)",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_8bit=True),
                   "device_map": "auto" if device.type == "cuda" else None}},
    # 4-bit NormalFloat
    {"name": "NF4 (bitsandbytes)",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                             bnb_4bit_compute_dtype=torch.float32),
                   "device_map": "auto" if device.type == "cuda" else None}},
    # 4-bit float
    {"name": "FP4 (bitsandbytes)",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="fp4",
                                                             bnb_4bit_compute_dtype=torch.float32),
                   "device_map": "auto" if device.type == "cuda" else None}},
    ]
'''

LOAD = '''        current_load_args = dict(config['load_args'])
        use_device_map = current_load_args.get("device_map") is not None
        if not use_device_map:
            current_load_args.pop("device_map", None)
        model = AutoModelForCausalLM.from_pretrained(MODEL_NAME, **current_load_args)
        is_bnb = current_load_args.get("quantization_config") is not None
        if not use_device_map and not is_bnb:
            model.to(device)
        print(f"  loaded on {model.device}, quantized={is_bnb}")
'''

MEM = '''        memory_mb = get_model_memory_footprint(model)
'''

LOOP = '''            runs_for_this_prompt = NUM_TIMING_RUNS if i == 0 else 1
            for r in range(runs_for_this_prompt):
                gen_text, gen_latency = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)
                if r == 0:
                    current_generated_text = gen_text
                if i == 0:
                    prompt_specific_latencies.append(gen_latency)
            # only the first prompt contributes to 'Avg Latency (s)': each of its runs goes into the
            # list, and the mean over the list below is then the average over NUM_TIMING_RUNS runs
            avg_latencies_for_config.extend(prompt_specific_latencies)
            generated_outputs_for_prompts[f"Prompt {i+1} Output"] = current_generated_text
'''

ANSWERS = [
    "    *   **Answer:** FP32 4.19 MB -> INT8 2.72 MB (1.54x smaller) -> NF4 / FP4 2.53 MB (1.65x smaller). Going from 8 to 4 bits saved only another ~0.19 MB. Reason: the number includes buffers (the 1 MB boolean causal mask per layer, 2 MB total, never quantized), and bitsandbytes only replaces the Linear layers; embeddings and LayerNorms stay in 16-bit. The quantized *weights* scale roughly as expected (about 4x less for INT8 and 8x less for 4-bit on the linear layers, plus some scale overhead).",
    "    *   **Answer:** Latency went up, not down. FP32 had the lowest average latency; INT8 was the slowest, and NF4/FP4 were between the two (close to FP32 on some re-runs, never clearly faster). On CPU there are no fast low-bit kernels for this: the 4-bit weights are unpacked and dequantized every forward pass, and LLM.int8() quantizes activations, does the int8 matmul and handles outliers separately. For a model this small the compute is tiny, so this overhead dominates. The speed benefit of quantization comes from moving fewer bytes, which matters for big models on GPUs, not here.",
    "    *   **Answer:** No clear degradation. With greedy decoding the outputs for prompt 3 are identical at every precision. For prompt 1 NF4 changes only the last 3-4 tokens. For prompt 2, INT8 and FP4 go their own way after \"...who loved to read books. A land. upon aw\" (INT8: \"o loved to reading. The\", FP4: \"n an an an awooo\"). These differences come after the point where the FP32 model is already repeating itself, so quality is low for all of them; I'd say quantization did not introduce a significant drop, the first small deviations are at INT8/FP4.",
    "    *   **Answer:** Quantization: -35 to -40% memory, slower generation on CPU, nearly identical text. Best for CPU and small models: FP32 baseline. Best when memory is the bottleneck: NF4 (smallest, and it matched the baseline on 2 of 3 prompts). INT8 saves less memory and was the slowest in my measurements, so it doesn't win any scenario here, although on a GPU with a large model it is the most accurate of the quantized options.",
]


def build():
    return assemble(CELL6, CONFIGS, LOAD, MEM, LOOP, ANSWERS)


if __name__ == "__main__":
    print(write(build(), NAME))
