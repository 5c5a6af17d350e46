"""Eight independent, correct solutions of the perplexity exercise.

Each student is a dict: fill (cell index -> source), inserts, edit. mistakes.py imports STUDENTS.
"""
from common import build, LOADER, EVAL, TIMING, IMPORTS, LOAD_CALL, EVAL_CALL, TIMING_CALL

STUDENTS = {}

# ---------------------------------------------------------------------------------------------
# 01: the straightforward one: tokenizer padding, labels masked from the attention mask,
#     model's own loss, `with torch.no_grad()`, time.perf_counter
# ---------------------------------------------------------------------------------------------
STUDENTS["correct-01-model-labels-no-grad"] = dict(fill={
LOADER: '''
def load_model_and_tokenizer(model_id: str, precision: str = "float32"
                             ) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Same id for both; eval mode; CUDA if available else CPU; on CPU float32 whatever was asked."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":
        dtype = {"float32": torch.float32, "float16": torch.float16}[precision]
    else:
        dtype = torch.float32  # half precision on the CPU is slow and poorly supported
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype)
    model.to(device)
    model.eval()
    return tokenizer, model
''',
EVAL: '''
def evaluate_loss(model, tokenizer, texts: list[str], batch_size: int = 4) -> dict:
    """Batched evaluation with gradients off. Returns loss (global token-weighted mean
    cross-entropy over all predicted tokens), perplexity (= exp(loss)) and tokens (how many
    tokens were predicted). Padding never counts."""
    total_loss, total_tokens = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(texts), batch_size):
            batch_texts = texts[start:start + batch_size]
            enc = tokenizer(batch_texts, padding=True, return_tensors="pt").to(model.device)
            labels = enc["input_ids"].clone()
            labels[enc["attention_mask"] == 0] = -100
            out = model(**enc, labels=labels)
            n_predicted = int((labels[:, 1:] != -100).sum().item())
            total_loss += out.loss.item() * n_predicted
            total_tokens += n_predicted
    loss = total_loss / total_tokens
    return {"loss": loss, "perplexity": math.exp(loss), "tokens": total_tokens}
''',
TIMING: '''
def time_generation(model, tokenizer, prompt: str, max_new_tokens: int = 32) -> dict:
    """latency_s and tokens_per_s for one generate call, synchronised on CUDA."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                            pad_token_id=tokenizer.pad_token_id)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    latency = time.perf_counter() - start
    new_tokens = output.shape[1] - inputs["input_ids"].shape[1]
    return {"latency_s": latency, "tokens_per_s": new_tokens / latency}
''',
})

# ---------------------------------------------------------------------------------------------
# 02: manual F.cross_entropy(reduction="sum", ignore_index=-100), @torch.inference_mode()
#     decorator, perf_counter_ns, extra keys, a summary print
# ---------------------------------------------------------------------------------------------
STUDENTS["correct-02-manual-ce-sum-inference-mode"] = dict(
edit={IMPORTS: ("import torch\n", "import torch\nimport torch.nn.functional as F\n")},
fill={
LOADER: '''
def load_model_and_tokenizer(model_id: str, precision: str = "float32"
                             ) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Same id for both; eval mode; CUDA if available else CPU; on CPU float32 whatever was asked."""
    use_cuda = torch.cuda.is_available()
    device = "cuda" if use_cuda else "cpu"
    if not use_cuda:
        dtype = torch.float32
    elif precision == "float16":
        dtype = torch.float16
    elif precision == "float32":
        dtype = torch.float32
    else:
        raise ValueError(f"unsupported precision {precision!r}")

    tokenizer = AutoTokenizer.from_pretrained(model_id)
    tokenizer.pad_token = tokenizer.eos_token          # GPT-2 ships without a pad token
    model = AutoModelForCausalLM.from_pretrained(model_id, torch_dtype=dtype).to(device).eval()
    model.config.pad_token_id = tokenizer.pad_token_id
    return tokenizer, model
''',
EVAL: '''
@torch.inference_mode()
def evaluate_loss(model, tokenizer, texts: list[str], batch_size: int = 4) -> dict:
    """Batched evaluation with gradients off. Returns loss (global token-weighted mean
    cross-entropy over all predicted tokens), perplexity (= exp(loss)) and tokens (how many
    tokens were predicted). Padding never counts."""
    total_loss, total_tokens = 0.0, 0
    n_batches = 0
    for start in range(0, len(texts), batch_size):
        batch_texts = texts[start:start + batch_size]
        batch = tokenizer(batch_texts, padding="longest", return_tensors="pt")
        input_ids = batch["input_ids"].to(model.device)
        attention_mask = batch["attention_mask"].to(model.device)
        labels = input_ids.masked_fill(attention_mask == 0, -100)

        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
        # position t predicts token t+1: drop the last logit and the first label
        shift_logits = logits[:, :-1, :].float()
        shift_labels = labels[:, 1:]
        summed = F.cross_entropy(shift_logits.reshape(-1, shift_logits.size(-1)),
                                 shift_labels.reshape(-1), ignore_index=-100, reduction="sum")
        total_loss += summed.item()                       # already a sum over predicted tokens
        total_tokens += int((shift_labels != -100).sum())
        n_batches += 1

    mean_nll = total_loss / total_tokens
    return {"loss": mean_nll, "perplexity": math.exp(mean_nll), "tokens": total_tokens,
            "batches": n_batches, "texts": len(texts)}
''',
TIMING: '''
def time_generation(model, tokenizer, prompt: str, max_new_tokens: int = 32) -> dict:
    """latency_s and tokens_per_s for one generate call, synchronised on CUDA."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    on_gpu = model.device.type == "cuda"
    if on_gpu:
        torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    with torch.inference_mode():
        generated = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                                   pad_token_id=tokenizer.pad_token_id)
    if on_gpu:
        torch.cuda.synchronize()
    t1 = time.perf_counter_ns()
    latency_s = (t1 - t0) / 1e9
    prompt_len = inputs["input_ids"].shape[-1]
    n_new = generated.shape[-1] - prompt_len
    return {"latency_s": latency_s, "tokens_per_s": n_new / latency_s, "new_tokens": n_new,
            "ms_per_token": 1000 * latency_s / max(n_new, 1)}
''',
},
inserts=[(EVAL_CALL, "code", '''
print(f"{evaluation['texts']} texts in {evaluation['batches']} batches of up to {BATCH_SIZE}")
''')],
)

# ---------------------------------------------------------------------------------------------
# 03: no tokenizer padding: pad_sequence by hand, attention mask and token counts from lengths,
#     `with torch.inference_mode()`, time.monotonic
# ---------------------------------------------------------------------------------------------
STUDENTS["correct-03-pad-sequence-lengths"] = dict(
edit={IMPORTS: ("import torch\n", "import torch\nfrom torch.nn.utils.rnn import pad_sequence\n")},
fill={
LOADER: '''
def load_model_and_tokenizer(model_id: str, precision: str = "float32"
                             ) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Same id for both; eval mode; CUDA if available else CPU; on CPU float32 whatever was asked."""
    if torch.cuda.is_available():
        device = torch.device("cuda")
        dtype = getattr(torch, precision)   # "float16" -> torch.float16, "float32" -> torch.float32
    else:
        device = torch.device("cpu")
        dtype = torch.float32
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    tokenizer.pad_token_id = tokenizer.eos_token_id
    model = AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype)
    model = model.to(device).eval()
    return tokenizer, model
''',
EVAL: '''
def evaluate_loss(model, tokenizer, texts: list[str], batch_size: int = 4) -> dict:
    """Batched evaluation with gradients off. Returns loss (global token-weighted mean
    cross-entropy over all predicted tokens), perplexity (= exp(loss)) and tokens (how many
    tokens were predicted). Padding never counts."""
    total_loss, total_tokens = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch_texts = texts[start:start + batch_size]
            # tokenize without padding, then pad the id sequences ourselves (right padding)
            ids = [torch.tensor(x, dtype=torch.long) for x in tokenizer(batch_texts)["input_ids"]]
            lengths = torch.tensor([len(x) for x in ids])
            input_ids = pad_sequence(ids, batch_first=True, padding_value=tokenizer.pad_token_id)
            labels = pad_sequence(ids, batch_first=True, padding_value=-100)
            positions = torch.arange(input_ids.shape[1])
            attention_mask = (positions.unsqueeze(0) < lengths.unsqueeze(1)).long()

            out = model(input_ids=input_ids.to(model.device),
                        attention_mask=attention_mask.to(model.device),
                        labels=labels.to(model.device))
            predicted = int((lengths - 1).sum())       # every text predicts all but its first token
            total_loss += out.loss.item() * predicted
            total_tokens += predicted
    avg = total_loss / total_tokens
    return {"loss": avg, "perplexity": math.exp(avg), "tokens": total_tokens}
''',
TIMING: '''
def time_generation(model, tokenizer, prompt: str, max_new_tokens: int = 32) -> dict:
    """latency_s and tokens_per_s for one generate call, synchronised on CUDA."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    n_prompt = inputs.input_ids.shape[1]
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    tic = time.monotonic()
    out = model.generate(inputs.input_ids, attention_mask=inputs.attention_mask,
                         max_new_tokens=max_new_tokens, do_sample=False,
                         pad_token_id=tokenizer.eos_token_id)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    toc = time.monotonic()
    elapsed = toc - tic
    generated = out[0, n_prompt:]          # may be shorter than max_new_tokens if EOS came early
    return {"latency_s": elapsed, "tokens_per_s": generated.numel() / elapsed}
''',
},
inserts=[(TIMING_CALL, "code", '''
sample = model.generate(**tokenizer(PROMPT, return_tensors="pt").to(model.device), max_new_tokens=16,
                        do_sample=False, pad_token_id=tokenizer.eos_token_id)
print("Sample continuation:", repr(tokenizer.decode(sample[0], skip_special_tokens=True)))
''')],
)

# ---------------------------------------------------------------------------------------------
# 04: helper functions with type hints, @torch.no_grad() decorator, token count from the attention
#     mask (per-row length minus one), extra keys, extra prints
# ---------------------------------------------------------------------------------------------
STUDENTS["correct-04-helpers-mask-counts"] = dict(fill={
LOADER: '''
_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16}


def _pick_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def _pick_dtype(precision: str, device: torch.device) -> torch.dtype:
    if device.type != "cuda":
        return torch.float32            # the CPU always runs float32
    return _DTYPES[precision.lower()]


def load_model_and_tokenizer(model_id: str, precision: str = "float32"
                             ) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Same id for both; eval mode; CUDA if available else CPU; on CPU float32 whatever was asked."""
    device = _pick_device()
    dtype = _pick_dtype(precision, device)
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    if tokenizer.pad_token is None:
        tokenizer.add_special_tokens({"pad_token": tokenizer.eos_token})  # reuse <|endoftext|>, no new id
    model = AutoModelForCausalLM.from_pretrained(model_id, torch_dtype=dtype)
    model.to(device)
    model.eval()
    return tokenizer, model
''',
EVAL: '''
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@torch.no_grad()
def evaluate_loss(model, tokenizer, texts: list[str], batch_size: int = 4) -> dict:
    """Batched evaluation with gradients off. Returns loss (global token-weighted mean
    cross-entropy over all predicted tokens), perplexity (= exp(loss)) and tokens (how many
    tokens were predicted). Padding never counts."""
    total_loss, total_tokens = 0.0, 0
    for start in range(0, len(texts), batch_size):
        batch_texts = texts[start:start + batch_size]
        encoded = tokenizer(batch_texts, padding=True, truncation=True, return_tensors="pt")
        encoded = {k: v.to(model.device) for k, v in encoded.items()}
        mask = encoded["attention_mask"]
        labels = torch.where(mask.bool(), encoded["input_ids"], torch.full_like(mask, -100))

        batch_loss = model(input_ids=encoded["input_ids"], attention_mask=mask, labels=labels).loss

        # each text of length L contributes L - 1 predictions (its first token has no context)
        n_tokens = int((mask.sum(dim=1) - 1).clamp(min=0).sum())
        total_loss += float(batch_loss) * n_tokens
        total_tokens += n_tokens
    loss = total_loss / total_tokens
    return {"loss": loss, "perplexity": math.exp(loss), "tokens": total_tokens,
            "n_texts": len(texts), "batch_size": batch_size}
''',
TIMING: '''
def time_generation(model, tokenizer, prompt: str, max_new_tokens: int = 32) -> dict:
    """latency_s and tokens_per_s for one generate call, synchronised on CUDA."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    _sync(model.device)
    started = time.perf_counter()
    sequences = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                               pad_token_id=tokenizer.pad_token_id)
    _sync(model.device)
    latency_s = time.perf_counter() - started
    new_tokens = sequences.size(1) - inputs["input_ids"].size(1)
    return {"latency_s": latency_s, "tokens_per_s": new_tokens / latency_s,
            "new_tokens": new_tokens, "prompt_tokens": inputs["input_ids"].size(1)}
''',
},
inserts=[(LOAD_CALL, "code", '''
print("padding side:", tokenizer.padding_side, "| pad token:", repr(tokenizer.pad_token),
      "| vocab size:", len(tokenizer))
'''), (TIMING_CALL, "code", '''
print(f"Generated {timing['new_tokens']} new tokens after a {timing['prompt_tokens']}-token prompt")
''')],
)

# ---------------------------------------------------------------------------------------------
# 05: state set again inside each function (eval(), pad token), per-batch records as a list of
#     dicts shown as a DataFrame + bar plot, warm-up before timing
# ---------------------------------------------------------------------------------------------
STUDENTS["correct-05-per-batch-dataframe"] = dict(
edit={IMPORTS: ("import torch\n", "import pandas as pd\nimport matplotlib.pyplot as plt\nimport torch\n")},
fill={
LOADER: '''
def load_model_and_tokenizer(model_id: str, precision: str = "float32"
                             ) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Same id for both; eval mode; CUDA if available else CPU; on CPU float32 whatever was asked."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    requested = torch.float16 if precision == "float16" else torch.float32
    dtype = requested if device == "cuda" else torch.float32
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    model = AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype).to(device)
    tokenizer.pad_token = tokenizer.eos_token
    model.eval()
    return tokenizer, model
''',
EVAL: '''
def evaluate_loss(model, tokenizer, texts: list[str], batch_size: int = 4) -> dict:
    """Batched evaluation with gradients off. Returns loss (global token-weighted mean
    cross-entropy over all predicted tokens), perplexity (= exp(loss)) and tokens (how many
    tokens were predicted). Padding never counts."""
    model.eval()                                   # make sure dropout is off, whoever called us
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    total_loss, total_tokens = 0.0, 0
    records = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch_texts = texts[start:start + batch_size]
            batch = tokenizer(batch_texts, return_tensors="pt", padding=True).to(model.device)
            labels = batch.input_ids.clone()
            labels[batch.attention_mask == 0] = -100
            result = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, labels=labels)
            predicted = (labels[:, 1:] != -100).sum().item()
            total_loss += result.loss.item() * predicted
            total_tokens += predicted
            records.append({"batch": start // batch_size, "texts": len(batch_texts),
                            "predicted_tokens": predicted, "mean_loss": result.loss.item()})
    loss = total_loss / total_tokens
    return {"loss": loss, "perplexity": math.exp(loss), "tokens": total_tokens, "per_batch": records}
''',
TIMING: '''
def time_generation(model, tokenizer, prompt: str, max_new_tokens: int = 32) -> dict:
    """latency_s and tokens_per_s for one generate call, synchronised on CUDA."""
    model.eval()
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    gen_kwargs = dict(max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.eos_token_id)
    model.generate(**inputs, **gen_kwargs)          # warm-up, not timed
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    begin = time.perf_counter()
    output_ids = model.generate(**inputs, **gen_kwargs)
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    latency_s = time.perf_counter() - begin
    new_tokens = int(output_ids.shape[-1] - inputs.input_ids.shape[-1])
    return {"latency_s": latency_s, "tokens_per_s": new_tokens / latency_s, "new_tokens": new_tokens}
''',
},
inserts=[(EVAL_CALL, "code", '''
per_batch = pd.DataFrame(evaluation["per_batch"]).set_index("batch")
print(per_batch.to_string())
# the token-weighted mean recomputed from the table must match the global loss
check = (per_batch.mean_loss * per_batch.predicted_tokens).sum() / per_batch.predicted_tokens.sum()
print(f"recomputed weighted loss: {check:.4f}")

fig, ax = plt.subplots(figsize=(5, 3))
per_batch["mean_loss"].plot.bar(ax=ax, color="tab:blue", label="mean loss of the batch")
ax.axhline(evaluation["loss"], color="tab:red", linestyle="--", label="global token-weighted loss")
ax.set_xlabel("batch index")
ax.set_ylabel("cross-entropy (nats / token)")
ax.legend()
plt.tight_layout()
plt.show()
''')],
)

# ---------------------------------------------------------------------------------------------
# 06: left padding (restored afterwards), explicit position_ids, the first real token of each row
#     also masked out of the labels; counts from labels; perf_counter_ns
# ---------------------------------------------------------------------------------------------
STUDENTS["correct-06-left-padding-position-ids"] = dict(fill={
LOADER: '''
def load_model_and_tokenizer(model_id: str, precision: str = "float32"
                             ) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Same id for both; eval mode; CUDA if available else CPU; on CPU float32 whatever was asked."""
    cuda = torch.cuda.is_available()
    device = torch.device("cuda:0" if cuda else "cpu")
    dtype = torch.float32
    if cuda and precision == "float16":
        dtype = torch.float16
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype, device_map=None)
    model = model.to(device)
    model.eval()
    print(f"[load] {model_id}: device={device}, requested={precision}, using={dtype}")
    return tokenizer, model
''',
EVAL: '''
def evaluate_loss(model, tokenizer, texts: list[str], batch_size: int = 4) -> dict:
    """Batched evaluation with gradients off. Returns loss (global token-weighted mean
    cross-entropy over all predicted tokens), perplexity (= exp(loss)) and tokens (how many
    tokens were predicted). Padding never counts."""
    total_loss, total_tokens = 0.0, 0
    old_side = tokenizer.padding_side
    tokenizer.padding_side = "left"       # I pad on the left, so positions and labels need care
    try:
        with torch.no_grad():
            for start in range(0, len(texts), batch_size):
                batch_texts = texts[start:start + batch_size]
                enc = tokenizer(batch_texts, padding=True, return_tensors="pt")
                input_ids = enc["input_ids"].to(model.device)
                attn = enc["attention_mask"].to(model.device)
                # GPT-2 does not derive positions from the mask: count them from the first real token
                position_ids = (attn.cumsum(dim=1) - 1).clamp(min=0)

                labels = input_ids.masked_fill(attn == 0, -100)
                # with left padding the first real token sits after the pads: it is not predicted
                # from anything real, so it must not be a target either
                first_real = (attn == 0).sum(dim=1)
                labels[torch.arange(labels.size(0), device=labels.device), first_real] = -100

                out = model(input_ids=input_ids, attention_mask=attn, position_ids=position_ids,
                            labels=labels)
                n = int((labels[:, 1:] != -100).sum())
                total_loss += out.loss.item() * n
                total_tokens += n
    finally:
        tokenizer.padding_side = old_side
    loss = total_loss / total_tokens
    return {"loss": loss, "perplexity": math.exp(loss), "tokens": total_tokens}
''',
TIMING: '''
def time_generation(model, tokenizer, prompt: str, max_new_tokens: int = 32) -> dict:
    """latency_s and tokens_per_s for one generate call, synchronised on CUDA."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    is_cuda = model.device.type == "cuda"
    if is_cuda:
        torch.cuda.synchronize()
    t_start = time.perf_counter_ns()
    result = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                            pad_token_id=tokenizer.pad_token_id, return_dict_in_generate=True)
    if is_cuda:
        torch.cuda.synchronize()
    t_end = time.perf_counter_ns()
    latency_s = (t_end - t_start) * 1e-9
    n_new = result.sequences.shape[1] - inputs["input_ids"].shape[1]
    return {"latency_s": latency_s, "tokens_per_s": n_new / latency_s}
''',
})

# ---------------------------------------------------------------------------------------------
# 07: tokenizer.encode per text + tokenizer.pad, torch.set_grad_enabled(False), sums kept as
#     float64 tensors, state re-set in each function, a notes markdown cell, time.monotonic_ns
# ---------------------------------------------------------------------------------------------
STUDENTS["correct-07-encode-pad-float64"] = dict(fill={
LOADER: '''
def load_model_and_tokenizer(model_id: str, precision: str = "float32"
                             ) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Same id for both; eval mode; CUDA if available else CPU; on CPU float32 whatever was asked."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    wanted = {"float16": torch.float16, "float32": torch.float32}.get(precision, torch.float32)
    dtype = wanted if device.type == "cuda" else torch.float32
    tok = AutoTokenizer.from_pretrained(model_id)
    tok.pad_token = tok.eos_token
    lm = AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype)
    lm.eval().to(device)
    return tok, lm
''',
EVAL: '''
def evaluate_loss(model, tokenizer, texts: list[str], batch_size: int = 4) -> dict:
    """Batched evaluation with gradients off. Returns loss (global token-weighted mean
    cross-entropy over all predicted tokens), perplexity (= exp(loss)) and tokens (how many
    tokens were predicted). Padding never counts."""
    model.eval()
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    total_loss, total_tokens = 0.0, 0
    nll_sum = torch.zeros((), dtype=torch.float64)
    with torch.set_grad_enabled(False):
        for start in range(0, len(texts), batch_size):
            batch_texts = texts[start:start + batch_size]
            ids = [tokenizer.encode(t) for t in batch_texts]
            padded = tokenizer.pad({"input_ids": ids}, padding=True, return_tensors="pt")
            input_ids = padded["input_ids"].to(model.device)
            attention_mask = padded["attention_mask"].to(model.device)
            labels = input_ids.clone()
            labels[attention_mask == 0] = -100

            mean_loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
            n_targets = (labels[:, 1:] != -100).sum()
            nll_sum += mean_loss.double().cpu() * n_targets.cpu()
            total_tokens += int(n_targets)
    total_loss = nll_sum.item()
    avg_loss = total_loss / total_tokens
    return {"loss": avg_loss, "perplexity": math.exp(avg_loss), "tokens": total_tokens,
            "total_nll": total_loss}
''',
TIMING: '''
def time_generation(model, tokenizer, prompt: str, max_new_tokens: int = 32) -> dict:
    """latency_s and tokens_per_s for one generate call, synchronised on CUDA."""
    model.eval()
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    prompt_len = inputs["input_ids"].shape[1]
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t0 = time.monotonic_ns()
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=tokenizer.eos_token_id)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    seconds = (time.monotonic_ns() - t0) / 1_000_000_000
    produced = out.shape[1] - prompt_len
    return {"latency_s": seconds, "tokens_per_s": produced / seconds if seconds > 0 else float("inf"),
            "generated_tokens": produced,
            "text": tokenizer.decode(out[0, prompt_len:], skip_special_tokens=True)}
''',
},
inserts=[(EVAL_CALL, "markdown", '''
**My notes.** The model's `loss` is already a mean over the predicted tokens of one batch, and the
batches predict different numbers of tokens (the last batch has a single text, and short texts add
little). So I multiply each batch's mean by its number of targets to get the summed negative
log-likelihood, add the sums up, and divide once by the total number of targets. Averaging the batch
means directly would give the one-text batch as much weight as a full batch. Padding never appears in
the count because those labels are -100, and the first token of every text is not a target.
'''), (TIMING_CALL, "code", '''
print(f"New tokens  : {timing['generated_tokens']}")
print("Continuation:", repr(timing["text"]))
''')],
)

# ---------------------------------------------------------------------------------------------
# 08: log_softmax + gather by hand, validity mask from the shifted labels, @torch.inference_mode()
#     decorator, latency also in ms, a generation helper that does the sync
# ---------------------------------------------------------------------------------------------
STUDENTS["correct-08-log-softmax-gather"] = dict(fill={
LOADER: '''
def load_model_and_tokenizer(model_id: str, precision: str = "float32"
                             ) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """Same id for both; eval mode; CUDA if available else CPU; on CPU float32 whatever was asked.

    Args:
        model_id: Hugging Face repository id, used for BOTH the tokenizer and the weights.
        precision: "float32" or "float16"; only honoured on a GPU.
    """
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    if precision not in ("float32", "float16"):
        raise ValueError(precision)
    dtype = getattr(torch, precision) if device.type == "cuda" else torch.float32

    tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(model_id)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model: PreTrainedModel = AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype)
    model.to(device=device)
    model.eval()
    assert not model.training
    return tokenizer, model
''',
EVAL: '''
@torch.inference_mode()
def evaluate_loss(model, tokenizer, texts: list[str], batch_size: int = 4) -> dict:
    """Batched evaluation with gradients off. Returns loss (global token-weighted mean
    cross-entropy over all predicted tokens), perplexity (= exp(loss)) and tokens (how many
    tokens were predicted). Padding never counts."""
    total_loss, total_tokens = 0.0, 0
    for start in range(0, len(texts), batch_size):
        batch_texts = texts[start:start + batch_size]
        enc = tokenizer(batch_texts, padding=True, return_tensors="pt").to(model.device)
        labels = enc.input_ids.masked_fill(~enc.attention_mask.bool(), -100)

        logits = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask).logits
        log_probs = torch.log_softmax(logits[:, :-1].float(), dim=-1)   # predictions for tokens 1..T-1
        targets = labels[:, 1:]
        valid = targets != -100
        token_logp = log_probs.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        total_loss += -(token_logp * valid).sum().item()
        total_tokens += valid.sum().item()
    loss = total_loss / total_tokens
    return {"loss": loss, "perplexity": math.exp(loss), "tokens": int(total_tokens)}
''',
TIMING: '''
def _timed_generate(model, inputs, **kwargs):
    cuda = model.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    output = model.generate(**inputs, **kwargs)
    if cuda:
        torch.cuda.synchronize()
    return output, time.perf_counter() - t0


def time_generation(model, tokenizer, prompt: str, max_new_tokens: int = 32) -> dict:
    """latency_s and tokens_per_s for one generate call, synchronised on CUDA."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    output, latency_s = _timed_generate(model, inputs, max_new_tokens=max_new_tokens, do_sample=False,
                                        pad_token_id=tokenizer.pad_token_id)
    new_tokens = output[0][inputs["input_ids"].shape[1]:].numel()
    return {"latency_s": latency_s, "latency_ms": 1e3 * latency_s,
            "tokens_per_s": new_tokens / latency_s, "new_tokens": new_tokens}
''',
},
inserts=[(TIMING_CALL, "code", '''
print(f"Latency     : {timing['latency_ms']:.1f} ms for {timing['new_tokens']} new tokens")
''')],
)


if __name__ == "__main__":
    import sys
    only = sys.argv[1:]
    for name, spec in STUDENTS.items():
        if only and not any(o in name for o in only):
            continue
        print(build(name, spec["fill"], spec.get("inserts", ()), spec.get("edit")))
