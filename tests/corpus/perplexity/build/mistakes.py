"""Mistake notebooks: each is one of the correct students with exactly one known mistake."""
import copy

from common import build, replace, LOADER, EVAL, TIMING, IMPORTS, LOAD_CALL, EVAL_CALL, TIMING_CALL
from correct import STUDENTS

MISTAKES = {}   # name -> (base student, mistake id, description, spec)


def variant(name, base, mistake, description, eval_edits=(), loader_edits=(), import_edits=(),
            extra_inserts=None, other=None):
    spec = copy.deepcopy(STUDENTS[base])
    for old, new in eval_edits:
        spec["fill"][EVAL] = replace(spec["fill"][EVAL], old, new)
    for old, new in loader_edits:
        spec["fill"][LOADER] = replace(spec["fill"][LOADER], old, new)
    if import_edits:
        edits = spec.setdefault("edit", {})
        cur = edits.get(IMPORTS, [])
        cur = [cur] if isinstance(cur, tuple) else list(cur)
        edits[IMPORTS] = cur + list(import_edits)
    if extra_inserts is not None:
        spec["inserts"] = extra_inserts
    for idx, pairs in (other or {}).items():
        for old, new in pairs:
            spec["fill"][idx] = replace(spec["fill"][idx], old, new)
    MISTAKES[name] = (base, mistake, description, spec)


# ---------------------------------------------------------------- mistake-batch-means
variant("mistake-batch-means--statistics-mean-of-records", "correct-05-per-batch-dataframe",
        "mistake-batch-means",
        "Student 05's per-batch table, but the reported loss is statistics.mean over the batches' mean losses "
        "(the one-text last batch weighs as much as a full batch); token count stays right.",
        import_edits=[("import math\n", "import math\nimport statistics\n")],
        eval_edits=[("    loss = total_loss / total_tokens\n",
                     "    loss = statistics.mean(r[\"mean_loss\"] for r in records)  # average over the batches\n")])

variant("mistake-batch-means--running-average", "correct-03-pad-sequence-lengths",
        "mistake-batch-means",
        "Student 03 (pad_sequence) keeps an incremental running average of the model's per-batch mean "
        "loss (avg += (loss - avg) / k), i.e. an unweighted mean of batch means.",
        eval_edits=[
            ("    total_loss, total_tokens = 0.0, 0\n",
             "    total_loss, total_tokens = 0.0, 0\n    running_avg, n_seen = 0.0, 0\n"),
            ("            total_loss += out.loss.item() * predicted\n",
             "            n_seen += 1\n"
             "            running_avg += (out.loss.item() - running_avg) / n_seen   # streaming mean, no big sums\n"),
            ("    avg = total_loss / total_tokens\n", "    avg = running_avg\n"),
        ])

# ---------------------------------------------------------------- mistake-text-means
variant("mistake-text-means--numpy-mean-per-text", "correct-02-manual-ce-sum-inference-mode",
        "mistake-text-means",
        "Student 02's manual cross-entropy with reduction='none', reshaped per text; each text's mean loss is "
        "appended to a list and the result is np.mean of that list.",
        import_edits=[("import torch\n", "import numpy as np\nimport torch\n")],
        eval_edits=[
            ("    n_batches = 0\n", "    n_batches = 0\n    per_text_losses = []\n"),
            ("""        summed = F.cross_entropy(shift_logits.reshape(-1, shift_logits.size(-1)),
                                 shift_labels.reshape(-1), ignore_index=-100, reduction="sum")
        total_loss += summed.item()                       # already a sum over predicted tokens
""",
             """        per_token = F.cross_entropy(shift_logits.reshape(-1, shift_logits.size(-1)),
                                    shift_labels.reshape(-1), ignore_index=-100, reduction="none")
        per_token = per_token.view(shift_labels.shape)            # (texts, positions)
        valid = (shift_labels != -100).float()
        text_means = (per_token * valid).sum(dim=1) / valid.sum(dim=1)
        per_text_losses.extend(text_means.tolist())
"""),
            ("    mean_nll = total_loss / total_tokens\n", "    mean_nll = float(np.mean(per_text_losses))\n"),
        ])

variant("mistake-text-means--gather-sum-over-texts", "correct-08-log-softmax-gather",
        "mistake-text-means",
        "Student 08's log_softmax/gather, but it sums each row's mean NLL and divides by the number of texts, "
        "so a 4-token text weighs as much as a 25-token one.",
        eval_edits=[
            ("    total_loss, total_tokens = 0.0, 0\n", "    total_loss, total_tokens = 0.0, 0\n    n_texts = 0\n"),
            ("        total_loss += -(token_logp * valid).sum().item()\n",
             "        row_nll = -(token_logp * valid).sum(dim=1) / valid.sum(dim=1)   # mean NLL of each text\n"
             "        total_loss += row_nll.sum().item()\n"
             "        n_texts += row_nll.numel()\n"),
            ("    loss = total_loss / total_tokens\n", "    loss = total_loss / n_texts\n"),
        ])

# ---------------------------------------------------------------- mistake-padding-in-loss
variant("mistake-padding-in-loss--manual-ce-no-ignore-index", "correct-02-manual-ce-sum-inference-mode",
        "mistake-padding-in-loss",
        "Student 02's manual F.cross_entropy(reduction='sum') on labels that are a plain copy of input_ids: "
        "no -100 masking, so pad (<|endoftext|>) positions are summed and counted.",
        eval_edits=[
            ("        labels = input_ids.masked_fill(attention_mask == 0, -100)\n",
             "        labels = input_ids.clone()                         # targets are the inputs themselves\n"),
        ])

variant("mistake-padding-in-loss--labels-are-input-ids", "correct-04-helpers-mask-counts",
        "mistake-padding-in-loss",
        "Student 04 passes labels=encoded['input_ids'] straight to the model; the token count still comes "
        "from the attention mask, but the model's loss averages over padded positions too.",
        eval_edits=[
            ("        labels = torch.where(mask.bool(), encoded[\"input_ids\"], torch.full_like(mask, -100))\n\n", ""),
            ("        batch_loss = model(input_ids=encoded[\"input_ids\"], attention_mask=mask, labels=labels).loss\n",
             "        batch_loss = model(**encoded, labels=encoded[\"input_ids\"]).loss\n"),
        ])

# ---------------------------------------------------------------- mistake-perplexity-of-batches
variant("mistake-perplexity-of-batches--numpy-exp-per-batch", "correct-01-model-labels-no-grad",
        "mistake-perplexity-of-batches",
        "Student 01 with the loss right, but perplexity is np.mean of np.exp(batch loss) collected per batch "
        "instead of exp of the global loss.",
        import_edits=[("import torch\n", "import numpy as np\nimport torch\n")],
        eval_edits=[
            ("    total_loss, total_tokens = 0.0, 0\n",
             "    total_loss, total_tokens = 0.0, 0\n    batch_ppl = []\n"),
            ("            total_tokens += n_predicted\n",
             "            total_tokens += n_predicted\n"
             "            batch_ppl.append(np.exp(out.loss.item()))\n"),
            ('    return {"loss": loss, "perplexity": math.exp(loss), "tokens": total_tokens}\n',
             '    return {"loss": loss, "perplexity": float(np.mean(batch_ppl)), "tokens": total_tokens}\n'),
        ])

variant("mistake-perplexity-of-batches--token-weighted-batch-ppl", "correct-06-left-padding-position-ids",
        "mistake-perplexity-of-batches",
        "Student 06 (left padding, correct loss) reports a token-weighted mean of the per-batch perplexities "
        "exp(batch loss) rather than exp of the global token-weighted loss.",
        eval_edits=[
            ("    total_loss, total_tokens = 0.0, 0\n",
             "    total_loss, total_tokens = 0.0, 0\n    weighted_ppl = 0.0\n"),
            ("                total_tokens += n\n",
             "                total_tokens += n\n"
             "                weighted_ppl += math.exp(out.loss.item()) * n\n"),
            ('    return {"loss": loss, "perplexity": math.exp(loss), "tokens": total_tokens}\n',
             '    perplexity = weighted_ppl / total_tokens      # weighted by tokens, like the loss\n'
             '    return {"loss": loss, "perplexity": perplexity, "tokens": total_tokens}\n'),
        ])

# ---------------------------------------------------------------- mistake-token-count
variant("mistake-token-count--attention-mask-sum", "correct-05-per-batch-dataframe",
        "mistake-token-count",
        "Student 05 counts a batch's tokens as batch.attention_mask.sum() (first token of each text included) "
        "and uses that count both to weight the batch loss and as 'tokens'.",
        eval_edits=[
            ("            predicted = (labels[:, 1:] != -100).sum().item()\n",
             "            predicted = batch.attention_mask.sum().item()      # real (non-pad) tokens\n"),
        ])

variant("mistake-token-count--tokenized-lengths", "correct-03-pad-sequence-lengths",
        "mistake-token-count",
        "Student 03 keeps the loss right but reports 'tokens' as the summed tokenized lengths of the texts "
        "(sum(len(tokenizer.encode(t)))), counting each text's unpredicted first token.",
        eval_edits=[
            ('    return {"loss": avg, "perplexity": math.exp(avg), "tokens": total_tokens}\n',
             '    n_tokens = sum(len(tokenizer.encode(t)) for t in texts)   # size of the evaluated corpus\n'
             '    return {"loss": avg, "perplexity": math.exp(avg), "tokens": n_tokens}\n'),
        ])

# ---------------------------------------------------------------- mistake-gradients-on
variant("mistake-gradients-on--enable-grad", "correct-02-manual-ce-sum-inference-mode",
        "mistake-gradients-on",
        "Student 02 with the evaluation decorated @torch.enable_grad() instead of inference_mode, so every "
        "forward pass records an autograd graph.",
        eval_edits=[("@torch.inference_mode()\ndef evaluate_loss", "@torch.enable_grad()\ndef evaluate_loss")])

variant("mistake-gradients-on--no-decorator", "correct-04-helpers-mask-counts",
        "mistake-gradients-on",
        "Student 04 without the @torch.no_grad() decorator: gradients are simply never turned off "
        "(float(loss) hides it, the numbers are the same).",
        eval_edits=[("@torch.no_grad()\ndef evaluate_loss", "def evaluate_loss")])

# ---------------------------------------------------------------- mistake-one-text-at-a-time
variant("mistake-one-text-at-a-time--inner-loop", "correct-01-model-labels-no-grad",
        "mistake-one-text-at-a-time",
        "Student 01 keeps the batch slicing but loops over the texts of each batch and runs the model on "
        "each text alone (no padding needed), so batch_size only groups the loop.",
        eval_edits=[("""            enc = tokenizer(batch_texts, padding=True, return_tensors="pt").to(model.device)
            labels = enc["input_ids"].clone()
            labels[enc["attention_mask"] == 0] = -100
            out = model(**enc, labels=labels)
            n_predicted = int((labels[:, 1:] != -100).sum().item())
            total_loss += out.loss.item() * n_predicted
            total_tokens += n_predicted
""", """            for text in batch_texts:      # one text per forward pass: no padding to worry about
                enc = tokenizer(text, return_tensors="pt").to(model.device)
                labels = enc["input_ids"].clone()
                out = model(**enc, labels=labels)
                n_predicted = labels.shape[1] - 1
                total_loss += out.loss.item() * n_predicted
                total_tokens += n_predicted
""")])

variant("mistake-one-text-at-a-time--step-of-one", "correct-05-per-batch-dataframe",
        "mistake-one-text-at-a-time",
        "Student 05's loop steps through the texts one by one (range(len(texts)), slice of one), ignoring "
        "batch_size; the per-batch table gets one row per text.",
        eval_edits=[
            ("        for start in range(0, len(texts), batch_size):\n            batch_texts = texts[start:start + batch_size]\n",
             "        for start in range(len(texts)):\n            batch_texts = texts[start:start + 1]\n"),
            ('"batch": start // batch_size', '"batch": start'),
        ])

# ---------------------------------------------------------------- mistake-tokenizer-gpt2
variant("mistake-tokenizer-gpt2--openai-community-constant", "correct-04-helpers-mask-counts",
        "mistake-tokenizer-gpt2",
        "Student 04 loads the tokenizer from a module constant TOKENIZER_ID = 'openai-community/gpt2' "
        "instead of model_id (the weights still come from model_id).",
        loader_edits=[
            ("_DTYPES = {", 'TOKENIZER_ID = "openai-community/gpt2"   # GPT-2 BPE vocabulary\n\n_DTYPES = {'),
            ("    tokenizer = AutoTokenizer.from_pretrained(model_id)\n",
             "    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_ID)\n"),
        ])

variant("mistake-tokenizer-gpt2--gpt2tokenizerfast-class", "correct-08-log-softmax-gather",
        "mistake-tokenizer-gpt2",
        "Student 08 builds the tokenizer with GPT2TokenizerFast.from_pretrained('gpt2') (hard-coded id) and "
        "only the model from model_id.",
        import_edits=[("from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase",
                       "from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2TokenizerFast, PreTrainedModel, PreTrainedTokenizerBase")],
        loader_edits=[
            ("    tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(model_id)\n",
             "    tokenizer: PreTrainedTokenizerBase = GPT2TokenizerFast.from_pretrained(\"gpt2\")  # BPE tokenizer\n"),
        ])

variant("mistake-tokenizer-gpt2--distilgpt2-id", "correct-07-encode-pad-float64",
        "mistake-tokenizer-gpt2",
        "Student 07 loads the tokenizer from the fixed id 'distilgpt2' (same vocabulary family) while the "
        "model comes from model_id.",
        loader_edits=[
            ("    tok = AutoTokenizer.from_pretrained(model_id)\n",
             "    tok = AutoTokenizer.from_pretrained(\"distilgpt2\")   # small and shares GPT-2's vocabulary\n"),
        ])


if __name__ == "__main__":
    import sys
    only = sys.argv[1:]
    for name, (base, mistake, desc, spec) in MISTAKES.items():
        if only and not any(o in name for o in only):
            continue
        print(build(name, spec["fill"], spec.get("inserts", ()), spec.get("edit")))
