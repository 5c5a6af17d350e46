"""Mistake notebooks: each is one of the correct students' notebooks with exactly one known mistake."""
import importlib, json, sys
from common import *

MISTAKES = []  # (filename, base student module, mistake id, description, [(old, new), ...])


def M(name, base, mistake, desc, subs):
    MISTAKES.append((name, base, mistake, desc, subs))


# ---------- mistake-memory-bytes ----------
M("mistake-memory-bytes--kib-divide-once.ipynb", "s05", "mistake-memory-bytes",
  "Student 5's notebook but the footprint is divided by 1024 only once (KiB labelled as MB).",
  [("    return mem / 1024**2 # convert to MB\n", "    return mem / 1024 # convert to MB\n")])
M("mistake-memory-bytes--raw-bytes-returned.ipynb", "s08", "mistake-memory-bytes",
  "Student 8's notebook but get_model_memory_footprint returns float(mem), the raw byte count, with no conversion.",
  [("    mem = mem_params + mem_bufs # in bytes\n    return mem / 1024**2 # convert to MB\n",
    "    mem = mem_params + mem_bufs # in bytes\n    return float(mem)\n")])

# ---------- mistake-memory-no-buffers ----------
M("mistake-memory-no-buffers--hf-footprint-no-buffers.ipynb", "s07", "mistake-memory-no-buffers",
  "Student 7's notebook but the footprint uses model.get_memory_footprint(return_buffers=False), so buffers are left out.",
  [("""    mem_params = sum([param.nelement() * param.element_size() for param in model.parameters()]) # bytes per param tensor
    mem_bufs = sum([buf.nelement() * buf.element_size() for buf in model.buffers()]) # bytes per buffer tensor
    mem = mem_params + mem_bufs # in bytes
""", """    # transformers already knows how big the model is
    mem = model.get_memory_footprint(return_buffers=False) # in bytes
""")])
M("mistake-memory-no-buffers--param-loop-only.ipynb", "s04", "mistake-memory-no-buffers",
  "Student 4's notebook but the footprint is a += loop over model.parameters() only; buffers are never counted.",
  [("""    mem_params = sum([param.numel() * param.dtype.itemsize for param in model.parameters()])
    mem_bufs = sum([buf.numel() * buf.dtype.itemsize for buf in model.buffers()])
    mem = mem_params + mem_bufs # in bytes
""", """    mem = 0
    for name, param in model.named_parameters():
        mem += param.numel() * param.dtype.itemsize  # bytes of this weight tensor
""")])
M("mistake-memory-no-buffers--bufs-computed-not-added.ipynb", "s08", "mistake-memory-no-buffers",
  "Student 8's notebook but mem_bufs is computed and then not added: mem = mem_params.",
  [("    mem = mem_params + mem_bufs # in bytes\n", "    mem = mem_params # in bytes (buffers aren't weights)\n")])

# ---------- mistake-return-order ----------
M("mistake-return-order--listcomp-swapped.ipynb", "s07", "mistake-return-order",
  "Student 7's notebook but generate_text_and_time returns (latency, generated_text) and the list-comprehension timing loop indexes it that way.",
  [("    return generated_text, latency\n", "    return latency, generated_text\n"),
   ("                current_generated_text = runs[0][0]                      # text of the first generation\n                prompt_specific_latencies = [lat for _, lat in runs]\n",
    "                current_generated_text = runs[0][1]                      # text of the first generation\n                prompt_specific_latencies = [lat for lat, _ in runs]\n"),
   ("                current_generated_text, _ = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)\n",
    "                _, current_generated_text = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)\n")])
M("mistake-return-order--returns-dict.ipynb", "s06", "mistake-return-order",
  "Student 6's notebook but generate_text_and_time returns a dict {'latency': ..., 'generated_text': ...} (latency first) and the loop reads it by key.",
  [("    return generated_text, latency\n", "    return {\"latency\": latency, \"generated_text\": generated_text}\n"),
   ("                    out_text, secs = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)\n",
    "                    res = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)\n                    out_text, secs = res[\"generated_text\"], res[\"latency\"]\n"),
   ("                current_generated_text = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)[0]\n",
    "                current_generated_text = generate_text_and_time(model, tokenizer, prompt_text, MAX_NEW_TOKENS)[\"generated_text\"]\n")])

# ---------- mistake-decodes-prompt ----------
M("mistake-decodes-prompt--batch-decode-input-ids.ipynb", "s02", "mistake-decodes-prompt",
  "Student 2's notebook but the text comes from tokenizer.batch_decode(inputs['input_ids']), i.e. the prompt, not the generate output.",
  [("    generated_text = tokenizer.batch_decode(outputs, skip_special_tokens=True)[0]\n",
    "    generated_text = tokenizer.batch_decode(inputs['input_ids'], skip_special_tokens=True)[0]\n")])
M("mistake-decodes-prompt--output-prompt-slice.ipynb", "s06", "mistake-decodes-prompt",
  "Student 6's notebook but the slice is inverted: outputs[0, :prompt_len] decodes the prompt part of the output, never the new tokens.",
  [("    generated_text = tokenizer.decode(outputs[0, prompt_len:], skip_special_tokens=True)\n",
    "    generated_text = tokenizer.decode(outputs[0, :prompt_len], skip_special_tokens=True)\n")])

# ---------- mistake-nf4-quant-type ----------
M("mistake-nf4-quant-type--omitted-with-compute-dtype.ipynb", "s03", "mistake-nf4-quant-type",
  "Student 3's notebook but the NF4 config sets load_in_4bit and bnb_4bit_compute_dtype without bnb_4bit_quant_type, so it is the default FP4.",
  [("""BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                                bnb_4bit_compute_dtype=torch.float32)""",
    """BitsAndBytesConfig(load_in_4bit=True,
                                                                bnb_4bit_compute_dtype=torch.float32)""")])
M("mistake-nf4-quant-type--copy-paste-fp4.ipynb", "s07", "mistake-nf4-quant-type",
  "Student 7's notebook but the NF4 entry was copy-pasted with bnb_4bit_quant_type='fp4'.",
  [("""                                                             bnb_4bit_quant_type="nf4",""",
    """                                                             bnb_4bit_quant_type='fp4',""")])
M("mistake-nf4-quant-type--helper-ignores-mode.ipynb", "s02", "mistake-nf4-quant-type",
  "Student 2's notebook but the config helper never passes bnb_4bit_quant_type (only double quant differs), so 'NF4' loads the default FP4.",
  [("""            bnb_4bit_quant_type=mode,
""", "")])

# ---------- mistake-latency-sum ----------
M("mistake-latency-sum--fsum.ipynb", "s04", "mistake-latency-sum",
  "Student 4's notebook but the per-config latency is math.fsum of the timed runs instead of their mean.",
  [("avg_latencies_for_config.append(statistics.mean(prompt_specific_latencies))",
    "avg_latencies_for_config.append(math.fsum(prompt_specific_latencies))"),
   ("import statistics\n", "import statistics\nimport math\n")])
M("mistake-latency-sum--plus-equals-total.ipynb", "s08", "mistake-latency-sum",
  "Student 8's notebook but the runs are accumulated with a += loop and the total is stored as the average.",
  [("""            if i == 0:
                avg_latencies_for_config.append(sum(prompt_specific_latencies) / len(prompt_specific_latencies))
""", """            if i == 0:
                first_prompt_time = 0.0
                for seconds in prompt_specific_latencies:
                    first_prompt_time += seconds
                avg_latencies_for_config.append(first_prompt_time)
""")])

# ---------- mistake-analysis-todo ----------
M("mistake-analysis-todo--todo-with-words.ipynb", "s03", "mistake-analysis-todo",
  "Student 3's notebook but the analysis keeps every **TODO** question with a few words tacked on.",
  [])  # handled in build(): analysis cell rewritten
M("mistake-analysis-todo--question-repeated.ipynb", "s05", "mistake-analysis-todo",
  "Student 5's notebook but each 'Answer:' just repeats the question's placeholder text.",
  [])
M("mistake-analysis-todo--empty-answer-cell.ipynb", "s02", "mistake-analysis-todo",
  "Student 2's notebook: TODO questions left in place and the added answers cell only says it will be filled in later.",
  [])

STARTER_Q = src(load_starter(), ANALYSIS_IDX)


def analysis_todo(nb, name):
    if name.endswith("todo-with-words.ipynb"):
        tails = [" Memory went down.", " It changed.", " Not much.", " Quantization is a trade-off."]
        lines, k = STARTER_Q.split("\n"), 0
        for j, ln in enumerate(lines):
            if "**TODO**" in ln:
                lines[j] = ln + tails[k]
                k += 1
        text = "\n".join(lines)
    elif name.endswith("question-repeated.ipynb"):
        lines = STARTER_Q.split("\n")
        for j, ln in enumerate(lines):
            if "**TODO**" in ln:
                lines[j] = ln.replace("**TODO**:", "**Answer:**")
        text = "\n".join(lines)
    else:
        idx = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("### My answers")]
        assert len(idx) == 1
        nb.cells[idx[0]].source = "### My answers\n\n(will fill these in once the experiment has finished running)\n"
        return nb
    idx = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("## 5. Analysis")]
    assert len(idx) == 1
    nb.cells[idx[0]].source = text
    return nb


def build_one(name, base, mistake, subs):
    mod = importlib.import_module(base)
    nb = mod.build()
    for old, new in subs:
        hits = [c for c in nb.cells if old in c.source]
        assert len(hits) == 1, (name, old[:60], len(hits))
        assert hits[0].source.count(old) == 1, (name, old[:60])
        hits[0].source = hits[0].source.replace(old, new)
    if mistake == "mistake-analysis-todo":
        nb = analysis_todo(nb, name)
    return nb


def manifest_entries():
    return {name: {"kind": "mistake", "mistake": mistake, "description": desc}
            for name, base, mistake, desc, subs in MISTAKES}


if __name__ == "__main__":
    only = sys.argv[1:]
    for name, base, mistake, desc, subs in MISTAKES:
        if only and name not in only:
            continue
        print(write(build_one(name, base, mistake, subs), name))
