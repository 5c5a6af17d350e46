"""Student 8: type hints and docstrings, a `_tensor_bytes` helper, a `load_model(config)` helper in
its own cell, a parameter/buffer breakdown print, long written answers."""
from common import *

NAME = "correct-08-typed-helpers-breakdown.ipynb"

CELL6 = '''def _tensor_bytes(t: torch.Tensor) -> int:
    """Number of bytes a tensor's elements occupy (elements x bytes per element)."""
    return t.nelement() * t.element_size()

def get_model_memory_footprint(model: torch.nn.Module) -> float:
    """Gets model memory footprint in MB."""
    mem_params = sum([_tensor_bytes(param) for param in model.parameters()]) # weights (quantized or not)
    mem_bufs = sum([_tensor_bytes(buf) for buf in model.buffers()]) # non-trainable state such as masks
    mem = mem_params + mem_bufs # in bytes
    return mem / 1024**2 # convert to MB

def generate_text_and_time(model, tokenizer, prompt: str, max_new_tokens: int) -> tuple[str, float]:
    """Generates text and returns the generated text and latency."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    
    start_time = time.perf_counter() # Use perf_counter for more precise timing
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure previous CUDA ops are done
        
    with torch.no_grad():
        outputs = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id)
    
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure generation is done
    end_time = time.perf_counter()
    
    generated_text: str = tokenizer.decode(outputs[0], skip_special_tokens=True)
    latency: float = end_time - start_time
    return generated_text, latency
'''

HELPER = '''def load_model(config: dict) -> torch.nn.Module:
    """Load MODEL_NAME with a configuration's load_args and put it on `device`.

    bitsandbytes models are placed on their device while loading (and 8-bit ones refuse `.to()`),
    so only the non-quantized baseline is moved explicitly. A `device_map` of None (CPU) is dropped.
    """
    load_args = {k: v for k, v in config["load_args"].items() if k != "device_map" or v is not None}
    m = AutoModelForCausalLM.from_pretrained(MODEL_NAME, **load_args)
    if "quantization_config" not in load_args and "device_map" not in load_args:
        m = m.to(device)
    return m.eval()


def memory_breakdown_mb(model: torch.nn.Module) -> dict:
    """Parameters and buffers separately, in MB (for the discussion)."""
    return {"params": sum(_tensor_bytes(p) for p in model.parameters()) / 1024**2,
            "buffers": sum(_tensor_bytes(b) for b in model.buffers()) / 1024**2}
'''

CONFIGS = '''def _device_map() -> "str | None":
    return "auto" if device.type == "cuda" else None

configurations: list[dict] = [
    ### Baseline configuration (FP16 for GPU or FP32 for CPU)
    {"name": "FP16 (Baseline GPU)" if device.type == "cuda" else "FP32 (Baseline CPU)",
     "load_args": {"dtype": torch.float16 if device.type == "cuda" else torch.float32}},
    ### INT8 quantization using bitsandbytes
    {"name": "INT8 (bitsandbytes, LLM.int8)",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_8bit=True, llm_int8_threshold=6.0),
                   "device_map": _device_map()}},
    ### NF4 (4-bit) quantization using bitsandbytes
    {"name": "NF4 (bitsandbytes, 4-bit NormalFloat)",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4"),
                   "device_map": _device_map()}},
    ### FP4 (4-bit) quantization
    {"name": "FP4 (bitsandbytes, 4-bit float)",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="fp4"),
                   "device_map": _device_map()}},
    ]
'''

LOAD = '''        model = load_model(config)
'''

MEM = '''        memory_mb = get_model_memory_footprint(model)
        parts = memory_breakdown_mb(model)
        print(f"  params: {parts['params']:.2f} MB, buffers: {parts['buffers']:.2f} MB")
'''

LOOP = '''            n_runs = NUM_TIMING_RUNS if i == 0 else 1   # timing runs only for the first prompt
            for run_no in range(n_runs):
                text, seconds = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)
                if run_no == 0:
                    current_generated_text = text
                prompt_specific_latencies.append(seconds)
            if i == 0:
                avg_latencies_for_config.append(sum(prompt_specific_latencies) / len(prompt_specific_latencies))
            generated_outputs_for_prompts[f"Prompt {i+1} Output"] = current_generated_text
'''

ANSWERS = [
    "    *   **Answer.** The total footprint (parameters + buffers) was 4.19 MB for the FP32 baseline, 2.72 MB for INT8 and 2.53 MB for both NF4 and FP4, i.e. INT8 is 35% smaller than the baseline and the 4-bit variants are 40% smaller (and 7% smaller than INT8). The breakdown I printed explains why the reduction is so far from 4x/8x: the buffers are ~2.0 MB in every configuration, because the causal-mask buffer `attn.bias` (a 1x1x1024x1024 bool tensor per layer) is never quantized. The parameters alone shrink from ~2.19 MB (FP32) to ~0.72 MB (INT8, about 3x) and ~0.53 MB (4-bit, about 4x). Even that is less than the bit ratio, because bitsandbytes only quantizes the Linear/Conv1D weights. The token and position embeddings, the biases and the LayerNorm parameters are loaded in FP16, and 4-bit weights also need per-block absmax scales. NF4 and FP4 have identical sizes; they differ only in the code book used for the 16 levels.",
    "    *   **Answer.** Latency did not decrease with lower precision. On CPU the FP32 baseline generated the 50 tokens fastest; the 4-bit models were slower or at best about equal, and INT8 was the slowest of all. So precision is not what limits speed here. Three things are at play. (1) bitsandbytes does extra work at every linear layer: 4-bit weights are unpacked and dequantized to the compute dtype before the matmul, and LLM.int8() quantizes the activations row-wise, multiplies in int8 and handles outlier columns separately in 16-bit. (2) The model is tiny, so the matmuls are cheap and the run time is dominated by fixed per-token overheads (Python in `generate`, kernel dispatch), which quantization can only add to. The memory-bandwidth saving, which is where quantization speeds up large-model decoding on GPUs, doesn't matter here. (3) Measurement noise: only 3 runs on a shared CPU, and the first call after loading includes some one-off setup.",
    "    *   **Answer.** I used greedy decoding so that any difference comes from the weights and not from sampling. I didn't observe significant degradation at any precision. Prompt 3 produced exactly the same output for FP32, INT8, NF4 and FP4. For prompt 1 the only change is NF4's ending (\"...far, far, far awo, the\" instead of \"...far, far, far, far, far a\"). For prompt 2, NF4 matched the baseline, while INT8 (\"A land. upon awo loved to reading. The\") and FP4 (\"A land. upon awn an an an awooo\") diverged after ~20 tokens. All of these changes come after the point where the baseline is already incoherent and repetitive, so they are \"different\" rather than \"worse\". FP4's \"an an an\" is the most repetitive. The first deviations appear at INT8 (prompt 2), so even 8 bits isn't bit-exact. Still, nothing that would make the 4-bit models unusable compared to FP32. With a real GPT-2, I would expect the 4-bit FP4 variant to degrade first.",
    "    *   **Answer.** Lower precision buys memory (-35% INT8, -40% 4-bit here; much more for a real model where weights dominate) but on a CPU it costs latency, and the output quality stays nearly the same, with small late deviations. Best choices: (a) plenty of memory, CPU inference, latency-sensitive: the FP32 baseline. (b) Memory-constrained (e.g. fitting a larger model on a small GPU): NF4, which gives the smallest footprint and kept 2 of 3 prompts identical to the baseline, a better quality/size ratio than FP4 at exactly the same size. (c) INT8 is a reasonable compromise for memory on GPU, but on CPU it was the slowest option, so it wasn't the best at anything in this experiment.",
]


def build():
    return assemble(CELL6, CONFIGS, LOAD, MEM, LOOP, ANSWERS,
                    extra_cells={7: [code(HELPER)]})


if __name__ == "__main__":
    print(write(build(), NAME))
