"""Sources of the ptq-bnb notebooks: the starter, the solution, and sample mistakes.

``scripts/build_notebooks.py`` writes ``starter.ipynb`` and ``solution.ipynb`` here and the
sample submissions under ``submissions/ptq-bnb/``. The starter is the seed's
(shared/seeds/004_fa9e5da3af9d2202.txt) with its TODOs intact, updated to today's libraries:
``dtype=`` instead of the deprecated ``torch_dtype=``, ``BitsAndBytesConfig`` instead of the
removed bare ``load_in_8bit=True``, and no CPU filter (bitsandbytes runs INT8/NF4/FP4 on the
CPU since 0.45, with ``accelerate`` installed).
"""

from __future__ import annotations

from grader.authoring import questions_section

ASSIGNMENT = "ptq-bnb"

TITLE = """# Lesson 3, Exercise 1: Post-Training Quantization - Beyond Memory: Speed and Quality Trade-offs

**Goal:**
The primary goal of this exercise is to move beyond simply observing memory reduction from quantization and to comprehensively evaluate its impact. You will quantify and analyze the trade-offs between model memory footprint, inference speed (latency), and the subjective quality of generated text when applying different levels of Post-Training Quantization (PTQ) to a GPT-2 model."""

SETUP_MD = "## 1. Installation & Setup"
SETUP = """# !pip install transformers torch bitsandbytes pandas accelerate
# !accelerate config default # Run this if you haven't before"""

IMPORTS_MD = "## 2. Imports and Configuration"
IMPORTS = """import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig
import time
import pandas as pd

MODEL_NAME = "gpt2" # Standard GPT-2
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a land far, far away,",
    "To be or not to be, that is the"
]
MAX_NEW_TOKENS = 50
NUM_TIMING_RUNS = 3 # Number of times to run generation for averaging latency

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
print(f"Using device: {device}")"""

HELPERS_MD = "## 3. Helper Functions"
HELPERS_STARTER = """def get_model_memory_footprint(model):
    \"\"\"Gets model memory footprint in MB.\"\"\"
    mem_params = sum([___ for param in model.parameters()]) # TODO: extract memory size for each parameter. Ref: https://discuss.pytorch.org/t/finding-model-size/130275
    mem_bufs = sum([___ for buf in model.buffers()]) # TODO: extract memory size for each buffer. Ref: https://discuss.pytorch.org/t/finding-model-size/130275
    mem = mem_params + mem_bufs # in bytes
    return mem / 1024**2 # convert to MB

def generate_text_and_time(model, tokenizer, prompt, max_new_tokens):
    \"\"\"Generates text and returns the generated text and latency.\"\"\"
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    
    start_time = time.perf_counter() # Use perf_counter for more precise timing
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure previous CUDA ops are done
        
    outputs = None # TODO: write generation logic
    
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure generation is done
    end_time = time.perf_counter()
    
    generated_text = None # TODO: extract generated text from output. HINT: use the tokenizer 
    latency = end_time - start_time
    return generated_text, latency"""

HELPERS_SOLUTION = """def get_model_memory_footprint(model):
    \"\"\"Gets model memory footprint in MB.\"\"\"
    mem_params = sum([param.nelement() * param.element_size() for param in model.parameters()])
    mem_bufs = sum([buf.nelement() * buf.element_size() for buf in model.buffers()])
    mem = mem_params + mem_bufs # in bytes
    return mem / 1024**2 # convert to MB

def generate_text_and_time(model, tokenizer, prompt, max_new_tokens):
    \"\"\"Generates text and returns the generated text and latency.\"\"\"
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    
    start_time = time.perf_counter() # Use perf_counter for more precise timing
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure previous CUDA ops are done
        
    outputs = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.eos_token_id)
    
    if model.device.type == 'cuda':
        torch.cuda.synchronize() # Ensure generation is done
    end_time = time.perf_counter()
    
    generated_text = tokenizer.decode(outputs[0], skip_special_tokens=True)
    latency = end_time - start_time
    return generated_text, latency"""

EXPERIMENT_MD = "## 4. Main Experiment Logic"
EXPERIMENT_HEAD = """results_list = [] # Use a different name to avoid conflict if re-running cells

tokenizer = AutoTokenizer.from_pretrained(MODEL_NAME)
if tokenizer.pad_token is None:
    tokenizer.pad_token = tokenizer.eos_token
"""

CONFIGURATIONS_STARTER = """
# Define precision configurations to test
configurations = [
    ### TODO: Define the baseline configuration (FP16 for GPU or FP32 for CPU)
    # Example: {"name": "FP16 (Baseline GPU)" if device.type == "cuda" else "FP32 (Baseline CPU)", "load_args": {"dtype": torch.float16 if device.type == "cuda" else torch.float32}},
    
    ### TODO: Define the INT8 quantization configuration using bitsandbytes
    # Example: {"name": "INT8 (bitsandbytes)", "load_args": {"quantization_config": BitsAndBytesConfig(load_in_8bit=True), "device_map": "auto" if device.type == "cuda" else None}},
    
    ### TODO: Define the NF4 (4-bit) quantization configuration using bitsandbytes
    
    ### TODO: Define the FP4 (4-bit) quantization configuration
    ]

# bitsandbytes (>= 0.45, with accelerate installed) runs INT8, NF4 and FP4 on the CPU too,
# so keep all four configurations whatever the device.
"""

CONFIGURATIONS_SOLUTION = """
# Define precision configurations to test
compute_dtype = torch.float16 if device.type == "cuda" else torch.float32
device_map = "auto" if device.type == "cuda" else None
configurations = [
    {"name": "FP16 (Baseline GPU)" if device.type == "cuda" else "FP32 (Baseline CPU)",
     "load_args": {"dtype": torch.float16 if device.type == "cuda" else torch.float32}},
    {"name": "INT8 (bitsandbytes)",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_8bit=True), "device_map": device_map}},
    {"name": "NF4 (bitsandbytes)",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                             bnb_4bit_compute_dtype=compute_dtype),
                   "device_map": device_map}},
    {"name": "FP4 (bitsandbytes)",
     "load_args": {"quantization_config": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="fp4",
                                                             bnb_4bit_compute_dtype=compute_dtype),
                   "device_map": device_map}},
]

# bitsandbytes (>= 0.45, with accelerate installed) runs INT8, NF4 and FP4 on the CPU too,
# so keep all four configurations whatever the device.
"""

LOOP_START = """
print(f"\\n--- Starting Experiment for Model: {MODEL_NAME} ---")

for config in configurations:
    print(f"\\nLoading model with configuration: {config['name']}")
    model = None # Ensure model is reset
    try:
"""

LOAD_STARTER = """        ### TODO: Load the model using AutoModelForCausalLM.from_pretrained()
        # Use the load_args from the current 'config'.
        # Handle device placement correctly (model.to(device) if not using device_map - e.g. in CPU usecase).
        # Example for handling device_map on CPU (though bitsandbytes won't quantize):
        # current_load_args = config['load_args']
        # if "device_map" in current_load_args and device.type == "cpu":
        #    current_load_args = {k: v for k, v in current_load_args.items() if k != "device_map"}
        #    model = AutoModelForCausalLM.from_pretrained(MODEL_NAME, **current_load_args)
        #    model.to(device)
        pass # Replace with model loading logic on GPU using bitsandbytes. Hint: for this we can directly pass 
             # the config['load_args'] to the from_pretrained method.

        if model is None: # Check if model loading was skipped/failed in TODO
            print(f"Skipping {config['name']} due to model loading not implemented in TODO.")
            continue

        ### TODO: Get the model memory footprint using get_model_memory_footprint
        memory_mb = None # Placeholder
        print(f"Memory Footprint: {memory_mb:.2f} MB")

        avg_latencies_for_config = []
        generated_outputs_for_prompts = {}

        for i, prompt_text in enumerate(PROMPTS):
            print(f"  Processing prompt: '{prompt_text[:30]}...' ")
            prompt_specific_latencies = []
            current_generated_text = "N/A"
            
            ### TODO: Implement the timing loop (NUM_TIMING_RUNS)
            # Only perform multiple timing runs for the first prompt to establish 'Avg Latency (s)'
            # For other prompts, generate text once for quality assessment.
            # Store the first generation's text in 'current_generated_text'.
            # Accumulate latencies for the first prompt in 'prompt_specific_latencies'. Use generate_text_and_time function.
            # Collect the generated text for each prompt in generated_outputs_for_prompts
"""

LOAD_SOLUTION = """        load_args = config["load_args"]
        model = AutoModelForCausalLM.from_pretrained(MODEL_NAME, **load_args)
        if "quantization_config" not in load_args:
            model.to(device) # bitsandbytes models are placed by from_pretrained
        model.eval()

        if model is None: # Check if model loading was skipped/failed in TODO
            print(f"Skipping {config['name']} due to model loading not implemented in TODO.")
            continue

        memory_mb = get_model_memory_footprint(model)
        print(f"Memory Footprint: {memory_mb:.2f} MB")

        avg_latencies_for_config = []
        generated_outputs_for_prompts = {}

        for i, prompt_text in enumerate(PROMPTS):
            print(f"  Processing prompt: '{prompt_text[:30]}...' ")
            prompt_specific_latencies = []
            current_generated_text = "N/A"
            
            runs = NUM_TIMING_RUNS if i == 0 else 1
            for run in range(runs):
                generated_text, latency = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)
                if run == 0:
                    current_generated_text = generated_text
                if i == 0:
                    prompt_specific_latencies.append(latency)
            if i == 0:
                avg_latencies_for_config.append(sum(prompt_specific_latencies) / len(prompt_specific_latencies))
            generated_outputs_for_prompts[f"Prompt {i+1} Output"] = current_generated_text
"""

LOOP_END = """
        overall_avg_latency_for_config = sum(avg_latencies_for_config) / len(avg_latencies_for_config) if avg_latencies_for_config else float('nan')

        results_list.append({
            "Float Precision": config["name"],
            "Memory (MB)": memory_mb,
            "Avg Latency (s)": overall_avg_latency_for_config, # Based on first prompt's timing
            **generated_outputs_for_prompts
        })
        
        del model # Free up memory
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    except Exception as e:
        print(f"Could not run configuration {config['name']}. Error: {e}")
        results_list.append({
            "Float Precision": config["name"],
            "Memory (MB)": "Error",
            "Avg Latency (s)": "Error",
            **{f"Prompt {i+1} Output": "Error" for i in range(len(PROMPTS))}
        })

# --- Display Results ---
df_results = pd.DataFrame(results_list)
print("\\n\\n--- Experiment Results Summary ---")
print(df_results.to_string())"""

ANALYSIS_INTRO = """## 5. Analysis and Discussion

Based on the 'Experiment Results Summary' table printed above, analyze your findings:
"""

# (title, the starter's placeholder, the solution's answer)
QUESTIONS = [
    (
        "Memory Scaling",
        "Describe how the model's memory footprint scaled as you reduced precision. Quantify the reductions.",
        "The footprint fell from 8.01 MB in FP32 to 4.63 MB with INT8 (-42%) and 4.44 MB with NF4 or FP4 (-45%). "
        "Only the linear (Conv1D) weights of the transformer blocks are quantized: INT8 stores one byte per weight instead "
        "of four, and NF4/FP4 pack two weights per byte. The embeddings are kept in 16-bit and the 2 MB of attention-mask "
        "buffers are untouched, so the whole model shrinks far less than the 4x and 8x the bit widths suggest.",
    ),
    (
        "Latency Changes",
        "Analyze the changes in generation latency. Did latency always decrease with lower precision, or were there other "
        "factors at play? Explain potential reasons.",
        "Latency did not decrease: on the CPU the INT8 model was several times slower than FP32, and NF4/FP4 slower too "
        "(how much varies from run to run on a shared machine), because bitsandbytes dequantizes the weights back to floating point at every step and its CPU kernels are not "
        "tuned for this. For a model this small, Python overhead in generate dominates anyway; lower precision pays off in "
        "speed only when memory bandwidth is the bottleneck, with large models on a GPU.",
    ),
    (
        "Output Quality Degradation",
        "Based on your subjective review of the outputs for each prompt and precision, at what point (if any) did you start "
        "to observe significant degradation in the output quality (e.g., coherence, relevance, repetitiveness)? Provide examples.",
        "Under greedy decoding all four precisions produced the same continuation for as long as the model had memorised "
        "text, e.g. 'The capital of France is Paris. Paris is a large city on the river Seine.' They diverged only afterwards: "
        "for the fairy-tale prompt INT8 and FP4 wandered off differently from FP32, and FP4 was the most repetitive "
        "('an an an awooo'), while NF4 stayed closest to FP32.",
    ),
    (
        "Key Trade-offs",
        "Conclude with a summary of the key trade-offs you observed between memory savings, inference speed, and text quality "
        "when applying different quantization levels to GPT-2. Which configuration seemed to offer the best balance for which "
        "scenario?",
        "Quantization bought memory at the cost of speed here, with little loss of quality. NF4 is the best balance when "
        "memory is the constraint (smallest model, quality closest to the baseline); INT8 is a conservative choice on GPUs "
        "with int8 kernels; the FP32/FP16 baseline stays the fastest wherever the model already fits.",
    ),
]


ANALYSIS_STARTER = questions_section(ANALYSIS_INTRO, QUESTIONS, answers=False)
ANALYSIS_SOLUTION = questions_section(ANALYSIS_INTRO, QUESTIONS, answers=True)


def _cells(helpers: str, configurations: str, load: str, analysis_section: str) -> list[tuple[str, str]]:
    return [
        ("markdown", TITLE),
        ("markdown", SETUP_MD),
        ("code", SETUP),
        ("markdown", IMPORTS_MD),
        ("code", IMPORTS),
        ("markdown", HELPERS_MD),
        ("code", helpers),
        ("markdown", EXPERIMENT_MD),
        ("code", EXPERIMENT_HEAD + configurations + LOOP_START + load + LOOP_END),
        ("markdown", analysis_section),
    ]


def starter_cells() -> list[tuple[str, str]]:
    """(cell type, source) of the starter notebook, in order."""
    return _cells(HELPERS_STARTER, CONFIGURATIONS_STARTER, LOAD_STARTER, ANALYSIS_STARTER)


def solution_cells() -> list[tuple[str, str]]:
    """(cell type, source) of the solution notebook, in order."""
    return _cells(HELPERS_SOLUTION, CONFIGURATIONS_SOLUTION, LOAD_SOLUTION, ANALYSIS_SOLUTION)


# Sample submissions: realistic mistakes students make with this exercise, each a list of
# (text in the solution, replacement) edits applied to the solution's cells.
SAMPLES: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "mistake-memory-bytes": (
        "get_model_memory_footprint forgets to convert bytes to MB.",
        [("    return mem / 1024**2 # convert to MB", "    return mem # bytes")],
    ),
    "mistake-memory-no-buffers": (
        "get_model_memory_footprint leaves out the buffers.",
        [
            (
                "    mem_bufs = sum([buf.nelement() * buf.element_size() for buf in model.buffers()])",
                "    mem_bufs = 0 # buffers are not weights, so they do not count",
            )
        ],
    ),
    "mistake-return-order": (
        "generate_text_and_time returns (latency, text), and the loop unpacks it that way.",
        [
            ("    return generated_text, latency", "    return latency, generated_text"),
            (
                "                generated_text, latency = generate_text_and_time(",
                "                latency, generated_text = generate_text_and_time(",
            ),
        ],
    ),
    "mistake-decodes-prompt": (
        "generate_text_and_time decodes the tokenized prompt instead of the generate output.",
        [
            (
                "    generated_text = tokenizer.decode(outputs[0], skip_special_tokens=True)",
                "    generated_text = tokenizer.decode(inputs[\"input_ids\"][0], skip_special_tokens=True)",
            )
        ],
    ),
    "mistake-nf4-quant-type": (
        "The NF4 configuration forgets bnb_4bit_quant_type, so it loads the default FP4.",
        [
            (
                'BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",',
                "BitsAndBytesConfig(load_in_4bit=True,",
            )
        ],
    ),
    "mistake-latency-sum": (
        "The experiment loop sums the timed runs instead of averaging them.",
        [
            (
                "avg_latencies_for_config.append(sum(prompt_specific_latencies) / len(prompt_specific_latencies))",
                "avg_latencies_for_config.append(sum(prompt_specific_latencies))",
            )
        ],
    ),
    "mistake-analysis-todo": (
        "The code is complete but the written analysis still reads TODO.",
        [(ANALYSIS_SOLUTION, ANALYSIS_STARTER)],
    ),
    # Mistakes that only a GPU shows: on a CPU they keep every point (tests/test_samples_ptq_bnb.py).
    "mistake-generate-no-sync": (
        "Never calls torch.cuda.synchronize() around the timed generate (a GPU-only mistake).",
        [("    if model.device.type == 'cuda':\n        torch.cuda.synchronize() # Ensure previous CUDA ops are done\n", ""),
         ("    if model.device.type == 'cuda':\n        torch.cuda.synchronize() # Ensure generation is done\n", "")],
    ),
    "mistake-bnb-on-cpu": (
        "Loads the bitsandbytes configurations on the CPU even where CUDA is there (a GPU-only mistake).",
        [('device_map = "auto" if device.type == "cuda" else None', 'device_map = "cpu"  # bitsandbytes runs on the CPU too')],
    ),
}
