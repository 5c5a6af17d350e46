"""Sources of the latency notebooks: the starter, the solution, and sample mistakes.

``scripts/build_notebooks.py`` writes ``starter.ipynb`` and ``solution.ipynb`` here and the
sample submissions under ``submissions/latency/``. The exercise is seed 000
(shared/seeds/000_fb8d3e0290172186.txt): generation latency and throughput as a function of
prompt length and across numeric precisions.
"""

from __future__ import annotations

from grader.authoring import questions_section

ASSIGNMENT = "latency"

TITLE = """# Exercise 1: Generation latency vs prompt length and precision

Measure text-generation **latency** and **throughput** of a causal language model:
- as a function of **prompt length**;
- across **numeric precisions** (float32 vs float16 where supported).

Plan one untimed warm-up `generate` before each timed one, keep `max_new_tokens` and `use_cache` fixed within a
comparison, and synchronise around the timed block on a GPU.

Useful documentation:
- PyTorch automatic mixed precision (autocast): https://pytorch.org/docs/stable/amp.html#autocast-mode
- PyTorch inference_mode: https://pytorch.org/docs/stable/generated/torch.inference_mode.html
- PyTorch CUDA synchronize: https://pytorch.org/docs/stable/generated/torch.cuda.synchronize.html
- HF Auto classes (tokenizer + causal LM): https://huggingface.co/docs/transformers/en/model_doc/auto
- HF Text generation (generate, GenerationConfig): https://huggingface.co/docs/transformers/en/main_classes/text_generation
- HF Tokenizer summary: https://huggingface.co/docs/transformers/en/tokenizer_summary
- Matplotlib quick start: https://matplotlib.org/stable/users/explain/quick_start.html"""

IMPORTS = """import time

import matplotlib.pyplot as plt
import pandas
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

CANDIDATE_MODELS = ["gpt2", "distilgpt2"]
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
BASE_TEXT = "The quick brown fox jumps over the lazy dog."
PROMPT_LENGTHS = [16, 64, 160]
PRECISIONS = ["float32", "float16"]
MAX_NEW_TOKENS = 32
USE_CACHE = True"""

PRECISION_MD = """## 1. Resolve the requested numeric precision

Accept only `float32` and `float16`, in any capitalisation. On the CPU, a float16 request falls back to float32 and the
label says so clearly. Anything else raises a `ValueError` that tells the user which values are accepted."""

PRECISION_STARTER = '''def resolve_precision(precision: str, device: str) -> tuple[torch.dtype, str]:
    """'float32' / 'float16' in any capitalisation -> (dtype, label). On 'cpu', float16 falls
    back to float32 and the label says so. Anything else raises ValueError naming the accepted values."""
    # TODO: normalise the capitalisation of `precision`
    # TODO: reject anything but float32 and float16 with a ValueError naming the accepted values
    # TODO: on the CPU, float16 falls back to float32, with a label that says so
    # TODO: return (dtype, label)
    raise NotImplementedError("resolve_precision")'''

PRECISION_SOLUTION = '''def resolve_precision(precision: str, device: str) -> tuple[torch.dtype, str]:
    """'float32' / 'float16' in any capitalisation -> (dtype, label). On 'cpu', float16 falls
    back to float32 and the label says so. Anything else raises ValueError naming the accepted values."""
    accepted = {"float32": torch.float32, "float16": torch.float16}
    name = str(precision).strip().lower()
    if name not in accepted:
        raise ValueError(f"Unsupported precision {precision!r}: use one of {', '.join(accepted)}.")
    if name == "float16" and device == "cpu":
        return torch.float32, "float32 (float16 requested; CPU fallback)"
    return accepted[name], name'''

PRECISION_RUN = """for requested in ["float32", "FLOAT16"]:
    print(f"{requested!r} on {DEVICE}: {resolve_precision(requested, DEVICE)}")"""

LOADER_MD = """## 2. Load the model and tokenizer

Detect the device (GPU if available, else CPU) and try the candidate model ids in order: the first that loads wins.
Load the tokenizer and the model from the **same** id, with the resolved dtype, on the device, in eval mode. If no
candidate loads, raise an error that lists every id you tried."""

LOADER_STARTER = '''def load_model_and_tokenizer(candidates: list[str], precision: str = "float32"
                             ) -> tuple[PreTrainedTokenizerBase, PreTrainedModel, str, str]:
    """Try candidates in order; the first that loads wins. Returns (tokenizer, model, model_id,
    dtype_label); model in eval mode on the detected device with the resolved dtype; tokenizer
    and model from the same id. If none loads, raise an error listing every id tried."""
    # TODO: detect the device and resolve the precision with resolve_precision
    # TODO: for each candidate, try to load the tokenizer and the model from that id
    #       (with the resolved dtype, on the device, in eval mode); the first that loads wins
    # TODO: if none loads, raise an error that lists every id tried
    raise NotImplementedError("load_model_and_tokenizer")'''

LOADER_SOLUTION = '''def load_model_and_tokenizer(candidates: list[str], precision: str = "float32"
                             ) -> tuple[PreTrainedTokenizerBase, PreTrainedModel, str, str]:
    """Try candidates in order; the first that loads wins. Returns (tokenizer, model, model_id,
    dtype_label); model in eval mode on the detected device with the resolved dtype; tokenizer
    and model from the same id. If none loads, raise an error listing every id tried."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype, label = resolve_precision(precision, device)
    failures = []
    for model_id in candidates:
        try:
            tokenizer = AutoTokenizer.from_pretrained(model_id)
            model = AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype).to(device)
        except Exception as error:
            failures.append(f"{model_id} ({type(error).__name__})")
            continue
        model.eval()
        return tokenizer, model, model_id, label
    raise RuntimeError(f"None of the candidate models could be loaded; tried: {', '.join(failures)}")'''

LOAD_RUN = """tokenizer, model, model_id, dtype_label = load_model_and_tokenizer(CANDIDATE_MODELS, "float32")
print(f"Loaded {model_id} on {model.device} ({dtype_label})")"""

MEASURE_MD = """## 3. Measure one generation run

Tokenize the prompt and move the inputs to the model's device. Do one brief warm-up `generate` that you do **not**
time, then time one `generate` with a high-resolution timer (synchronise right before starting and right after
finishing on a GPU). Count the new tokens in the output: the model may stop early at its end-of-text token."""

MEASURE_STARTER = '''def measure_generation(model, tokenizer, prompt: str, max_new_tokens: int = 32,
                       use_cache: bool = True) -> dict:
    """One untimed warm-up generate, then one timed generate. Returns latency_s, new_tokens,
    tokens_per_s, ms_per_token. Inputs on the model's device; synchronise around the timed
    block on CUDA."""
    # TODO: tokenize the prompt; move the inputs to the model's device
    # TODO: one brief warm-up generate, not timed
    # TODO: synchronise on CUDA, start a high-resolution timer, generate with max_new_tokens and use_cache,
    #       synchronise on CUDA, stop the timer
    # TODO: count the new tokens in the output; return latency_s, new_tokens, tokens_per_s, ms_per_token
    raise NotImplementedError("measure_generation")'''

MEASURE_SOLUTION = '''def measure_generation(model, tokenizer, prompt: str, max_new_tokens: int = 32,
                       use_cache: bool = True) -> dict:
    """One untimed warm-up generate, then one timed generate. Returns latency_s, new_tokens,
    tokens_per_s, ms_per_token. Inputs on the model's device; synchronise around the timed
    block on CUDA."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    settings = {"do_sample": False, "use_cache": use_cache, "pad_token_id": tokenizer.eos_token_id}
    with torch.inference_mode():
        model.generate(**inputs, max_new_tokens=4, **settings)  # warm-up, not timed
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        output = model.generate(**inputs, max_new_tokens=max_new_tokens, **settings)
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        latency = time.perf_counter() - start
    new_tokens = int(output.shape[1] - inputs["input_ids"].shape[1])
    return {
        "latency_s": latency,
        "new_tokens": new_tokens,
        "tokens_per_s": new_tokens / latency,
        "ms_per_token": 1000 * latency / max(new_tokens, 1),
    }'''

MEASURE_RUN = """baseline = measure_generation(model, tokenizer, BASE_TEXT, max_new_tokens=MAX_NEW_TOKENS, use_cache=USE_CACHE)
print(f"{baseline['new_tokens']} new tokens in {baseline['latency_s']:.3f} s: "
      f"{baseline['tokens_per_s']:.1f} tokens/s, {baseline['ms_per_token']:.2f} ms/token")"""

SWEEP_MD = """## 4. Prompt-length sweep

Build longer prompts by repeating a base text until the tokenized prompt reaches each target length, measure each with
the **same** `max_new_tokens` and `use_cache`, and plot latency vs prompt length and tokens/s vs prompt length (label
the axes)."""

BUILD_STARTER = '''def build_prompt(tokenizer, base_text: str, target_tokens: int) -> str:
    """Repeat base_text until the tokenized prompt has at least target_tokens tokens."""
    # TODO: repeat base_text (separated by spaces) until len(tokenizer(prompt)["input_ids"]) >= target_tokens
    raise NotImplementedError("build_prompt")'''

BUILD_SOLUTION = '''def build_prompt(tokenizer, base_text: str, target_tokens: int) -> str:
    """Repeat base_text until the tokenized prompt has at least target_tokens tokens."""
    prompt = base_text
    while len(tokenizer(prompt)["input_ids"]) < target_tokens:
        prompt += " " + base_text
    return prompt'''

SWEEP_STARTER = '''def sweep_prompt_lengths(model, tokenizer, base_text: str, lengths: list[int],
                         max_new_tokens: int = 32, use_cache: bool = True) -> pandas.DataFrame:
    """One row per length: prompt_tokens, latency_s, tokens_per_s, ms_per_token; and two plots,
    latency vs prompt length and tokens/s vs prompt length."""
    rows = []
    for length in lengths:
        # TODO: build the prompt, count its tokens, measure it with the same max_new_tokens and use_cache
        pass
    # TODO: a DataFrame with one row per length: prompt_tokens, latency_s, tokens_per_s, ms_per_token
    # TODO: plot latency_s vs prompt_tokens and tokens_per_s vs prompt_tokens, with labelled axes
    raise NotImplementedError("sweep_prompt_lengths")'''

SWEEP_SOLUTION = '''def sweep_prompt_lengths(model, tokenizer, base_text: str, lengths: list[int],
                         max_new_tokens: int = 32, use_cache: bool = True) -> pandas.DataFrame:
    """One row per length: prompt_tokens, latency_s, tokens_per_s, ms_per_token; and two plots,
    latency vs prompt length and tokens/s vs prompt length."""
    rows = []
    for length in lengths:
        prompt = build_prompt(tokenizer, base_text, length)
        metrics = measure_generation(model, tokenizer, prompt, max_new_tokens=max_new_tokens, use_cache=use_cache)
        rows.append({"prompt_tokens": len(tokenizer(prompt)["input_ids"]), **metrics})
    frame = pandas.DataFrame(rows)
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(frame["prompt_tokens"], frame["latency_s"], marker="o")
    left.set(xlabel="Prompt length (tokens)", ylabel="Latency (s)", title="Latency vs prompt length")
    right.plot(frame["prompt_tokens"], frame["tokens_per_s"], marker="o")
    right.set(xlabel="Prompt length (tokens)", ylabel="Tokens per second", title="Throughput vs prompt length")
    figure.tight_layout()
    plt.show()
    return frame'''

SWEEP_RUN = """length_sweep = sweep_prompt_lengths(model, tokenizer, BASE_TEXT, PROMPT_LENGTHS,
                                    max_new_tokens=MAX_NEW_TOKENS, use_cache=USE_CACHE)
print(length_sweep.to_string(index=False))"""

PRECISION_SWEEP_MD = """## 5. Precision sweep

For each precision, resolve its dtype and label, load the model in it, and measure with the same prompt and the same
`max_new_tokens`. Key the results by the dtype label. On the CPU a float16 request falls back to float32 by design."""

PRECISION_SWEEP_STARTER = '''def sweep_precisions(candidates: list[str], precisions: list[str], prompt: str,
                     max_new_tokens: int = 32) -> dict[str, dict]:
    """Metrics of measure_generation keyed by dtype label, same prompt and settings for each."""
    results = {}
    for precision in precisions:
        # TODO: load the model in this precision; measure it with the same prompt and max_new_tokens
        # TODO: store the metrics under the dtype label
        pass
    raise NotImplementedError("sweep_precisions")'''

PRECISION_SWEEP_SOLUTION = '''def sweep_precisions(candidates: list[str], precisions: list[str], prompt: str,
                     max_new_tokens: int = 32) -> dict[str, dict]:
    """Metrics of measure_generation keyed by dtype label, same prompt and settings for each."""
    results = {}
    for precision in precisions:
        tokenizer, model, _, label = load_model_and_tokenizer(candidates, precision)
        results[label] = measure_generation(model, tokenizer, prompt, max_new_tokens=max_new_tokens)
        del model
    return results'''

PRECISION_SWEEP_RUN = """precision_sweep = sweep_precisions(CANDIDATE_MODELS, PRECISIONS, BASE_TEXT, max_new_tokens=MAX_NEW_TOKENS)
print(pandas.DataFrame(precision_sweep).T[["latency_s", "tokens_per_s", "ms_per_token"]])"""

RESULTS_INTRO = """## 6. Presenting your results

Describe your setup and the trends you observed:
"""

# (title, the starter's placeholder, the solution's answer)
QUESTIONS = [
    (
        "Setup",
        "Describe your setup in a short paragraph: device, model id, precisions tested, max_new_tokens and use_cache.",
        "CPU only, with gpt2 (the first candidate loaded). Float32 and float16 were requested; on the CPU float16 fell "
        "back to float32, so both runs used float32. Every measurement used greedy decoding, max_new_tokens=32 and "
        "use_cache=True, after one untimed warm-up generate.",
    ),
    (
        "Trends",
        "Give two or three bullet points explaining the trends you observed in the prompt-length and precision sweeps.",
        "Total latency grew with the prompt: the prefill step processes every prompt token, and each new token attends to "
        "a longer context. Tokens per second fell accordingly as the prompt grew. On the CPU the two precision runs were "
        "the same float32 model, so their difference is measurement noise; on a GPU float16 would cut latency.",
    ),
]


def _cells(precision: str, loader: str, measure: str, build: str, sweep: str, precision_sweep: str, answers: bool) -> list[tuple[str, str]]:
    return [
        ("markdown", TITLE),
        ("code", IMPORTS),
        ("markdown", PRECISION_MD),
        ("code", precision),
        ("code", PRECISION_RUN),
        ("markdown", LOADER_MD),
        ("code", loader),
        ("code", LOAD_RUN),
        ("markdown", MEASURE_MD),
        ("code", measure),
        ("code", MEASURE_RUN),
        ("markdown", SWEEP_MD),
        ("code", build),
        ("code", sweep),
        ("code", SWEEP_RUN),
        ("markdown", PRECISION_SWEEP_MD),
        ("code", precision_sweep),
        ("code", PRECISION_SWEEP_RUN),
        ("markdown", questions_section(RESULTS_INTRO, QUESTIONS, answers)),
    ]


def starter_cells() -> list[tuple[str, str]]:
    """(cell type, source) of the starter notebook, in order."""
    return _cells(PRECISION_STARTER, LOADER_STARTER, MEASURE_STARTER, BUILD_STARTER, SWEEP_STARTER, PRECISION_SWEEP_STARTER, False)


def solution_cells() -> list[tuple[str, str]]:
    """(cell type, source) of the solution notebook, in order."""
    return _cells(
        PRECISION_SOLUTION, LOADER_SOLUTION, MEASURE_SOLUTION, BUILD_SOLUTION, SWEEP_SOLUTION, PRECISION_SWEEP_SOLUTION, True
    )


WARM_UP = "        model.generate(**inputs, max_new_tokens=4, **settings)  # warm-up, not timed\n"
SYNC = "        if model.device.type == \"cuda\":\n            torch.cuda.synchronize()\n"
AUTOCAST_SWEEP = '''def sweep_precisions(candidates: list[str], precisions: list[str], prompt: str,
                     max_new_tokens: int = 32) -> dict[str, dict]:
    """Metrics of measure_generation keyed by dtype label, same prompt and settings for each."""
    tokenizer, model, _, _ = load_model_and_tokenizer(candidates, "float32")
    results = {}
    for precision in precisions:
        dtype, label = resolve_precision(precision, model.device.type)
        # float16 by autocast on the float32 model (off on the CPU, where float16 falls back to float32)
        with torch.autocast(device_type=model.device.type, dtype=dtype, enabled=dtype != torch.float32):
            results[label] = measure_generation(model, tokenizer, prompt, max_new_tokens=max_new_tokens)
    return results'''
TIMED = """        start = time.perf_counter()
        output = model.generate(**inputs, max_new_tokens=max_new_tokens, **settings)"""

# Sample submissions: realistic mistakes, each a list of exact edits of the solution's cells.
SAMPLES: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "mistake-precision-case": (
        "Compares the precision string as given, so 'Float16' or 'FLOAT32' is rejected.",
        [('    name = str(precision).strip().lower()\n', '    name = str(precision).strip()\n'),
         ('for requested in ["float32", "FLOAT16"]:', 'for requested in ["float32", "float16"]:')],
    ),
    "mistake-no-cpu-fallback": (
        "Returns float16 on the CPU instead of falling back to float32.",
        [('    if name == "float16" and device == "cpu":\n        return torch.float32, "float32 (float16 requested; CPU fallback)"\n', '')],
    ),
    "mistake-raises-too-early": (
        "Raises as soon as the first candidate fails instead of trying the next one.",
        [("            failures.append(f\"{model_id} ({type(error).__name__})\")\n            continue",
          "            raise RuntimeError(f\"Could not load any of {candidates}\") from error")],
    ),
    "mistake-no-warmup": (
        "Times the very first generate call: no warm-up.",
        [(WARM_UP, "")],
    ),
    "mistake-warmup-in-timer": (
        "Starts the timer before the warm-up, so the warm-up is timed too.",
        [(WARM_UP + "        if model.device.type == \"cuda\":\n            torch.cuda.synchronize()\n        start = time.perf_counter()\n",
          "        if model.device.type == \"cuda\":\n            torch.cuda.synchronize()\n        start = time.perf_counter()\n" + WARM_UP)],
    ),
    "mistake-timer-includes-tokenizing": (
        "Starts the timer before tokenizing the prompt, so the timed block holds more than the generate call.",
        [("    inputs = tokenizer(prompt, return_tensors=\"pt\").to(model.device)\n    settings",
          "    warm_inputs = tokenizer(prompt, return_tensors=\"pt\").to(model.device)\n    settings"),
         ("        model.generate(**inputs, max_new_tokens=4, **settings)", "        model.generate(**warm_inputs, max_new_tokens=4, **settings)"),
         ("        start = time.perf_counter()\n        output",
          "        start = time.perf_counter()\n        inputs = tokenizer(prompt, return_tensors=\"pt\").to(model.device)\n        output")],
    ),
    "mistake-assumes-max-new-tokens": (
        "Counts max_new_tokens as the number of new tokens, although the model can stop early at end-of-text.",
        [("    new_tokens = int(output.shape[1] - inputs[\"input_ids\"].shape[1])", "    new_tokens = max_new_tokens")],
    ),
    "mistake-characters-not-tokens": (
        "Builds the prompt until it has target_tokens characters, not tokens.",
        [('    while len(tokenizer(prompt)["input_ids"]) < target_tokens:', "    while len(prompt) < target_tokens:")],
    ),
    "mistake-unlabelled-plots": (
        "Draws the two sweep plots without axis labels.",
        [('    left.set(xlabel="Prompt length (tokens)", ylabel="Latency (s)", title="Latency vs prompt length")',
          '    left.set(title="Latency")'),
         ('    right.set(xlabel="Prompt length (tokens)", ylabel="Tokens per second", title="Throughput vs prompt length")',
          '    right.set(title="Throughput")')],
    ),
    "mistake-keys-by-request": (
        "Keys the precision sweep by the requested precision instead of the dtype label.",
        [("        tokenizer, model, _, label = load_model_and_tokenizer(candidates, precision)\n        results[label]",
          "        tokenizer, model, _, label = load_model_and_tokenizer(candidates, precision)\n        results[precision]")],
    ),
    # Mistakes that only a GPU shows: on a CPU they keep every point (tests/test_samples_latency.py, CUDA_MISTAKES).
    "mistake-no-cuda-sync": (
        "Never calls torch.cuda.synchronize() around the timed generate, so on a GPU the timer can stop before the GPU "
        "finishes (a GPU-only mistake).",
        [(SYNC + "        start", "        start"), (SYNC + "        latency", "        latency")],
    ),
    "mistake-sync-outside-timer": (
        "Synchronises once before the warm-up and once after the timer stopped: the warm-up's GPU work is timed and "
        "the timed work is not waited for (a GPU-only mistake).",
        [(WARM_UP + SYNC + "        start", SYNC + WARM_UP + "        start"),
         (SYNC + "        latency = time.perf_counter() - start\n", "        latency = time.perf_counter() - start\n" + SYNC)],
    ),
    "mistake-fp16-runs-fp32": (
        "Loads every model in float32 whatever precision was resolved: on a GPU the run labelled float16 is a float32 "
        "one (a GPU-only mistake).",
        [("AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype)", "AutoModelForCausalLM.from_pretrained(model_id)")],
    ),
    "mistake-inputs-on-cpu": (
        "Leaves the tokenized prompt on the CPU: on a GPU the model gets its inputs on another device and generate "
        "raises, so every check that calls its functions loses its points (a GPU-only mistake: full marks on a CPU).",
        [("    inputs = tokenizer(prompt, return_tensors=\"pt\").to(model.device)\n    settings",
          "    inputs = tokenizer(prompt, return_tensors=\"pt\")\n    settings")],
    ),
    # A correct variant: the seed allows autocast instead of a model loaded in float16.
    "correct-autocast": (
        "Correct: loads the model once in float32 and runs the float16 measurement under torch.autocast (the seed "
        "allows either); full marks on both machines.",
        [(PRECISION_SWEEP_SOLUTION, AUTOCAST_SWEEP)],
    ),
}
