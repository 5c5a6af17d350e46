"""Cheat notebooks: the solution with one function changed by a student who has read the grader's source.

Run from the repository root: ``python tests/corpus/perplexity/build/cheats.py``. It writes each
``cheat-*.ipynb`` next to the corpus and adds (or refreshes) its entry in ``manifest.json``, with the
checks of the function it cheats on, which it must lose.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))  # run as a script: the tests package lies at the root

from tests.corpus import write_cheats  # noqa: E402

EVALUATE_LOOP = """    total_loss, total_tokens = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch_texts = texts[start:start + batch_size]
            batch = tokenizer(batch_texts, return_tensors="pt", padding=True).to(model.device)
            labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
            out = model(**batch, labels=labels)
            predicted = int((labels[:, 1:] != -100).sum())
            total_loss += out.loss.item() * predicted
            total_tokens += predicted
    loss = total_loss / total_tokens"""

# name -> (description, edits of the solution's cells, checks it must lose)
CHEATS: dict[str, tuple[str, list[tuple[str, str]], list[str]]] = {
    "cheat-hidden-forward-in-hook": (
        "evaluate_loss runs one gradient-on forward pass over the whole corpus inside a forward pre-hook of the first "
        "of its 1-token decoy calls (one decoy per batch, under no_grad): the reported loss is right, but the real "
        "pass is neither batched nor gradient-free. Caught because forwards are recorded inside the model's forward, "
        "however nested, and each pass must be as wide as its batch's longest text.",
        [
            (
                EVALUATE_LOOP,
                """    totals = {}

    def whole_corpus(module, args, kwargs):
        handle.remove()  # once, from inside the first decoy call
        with torch.enable_grad():
            batch = tokenizer(texts, return_tensors="pt", padding=True).to(model.device)
            labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
            totals["loss"] = model(**batch, labels=labels).loss.item()
            totals["tokens"] = int((labels[:, 1:] != -100).sum())

    handle = model.register_forward_pre_hook(whole_corpus, with_kwargs=True)
    with torch.no_grad():
        for start in range(0, len(texts), batch_size):
            rows = len(texts[start:start + batch_size])
            model(input_ids=torch.zeros((rows, 1), dtype=torch.long, device=model.device))
    loss, total_tokens = totals["loss"], totals["tokens"]""",
            )
        ],
        ["evaluation-no-grad", "evaluation-batching"],
    ),
    "cheat-grad-on-in-hook": (
        "evaluate_loss is the solution's batched loop under torch.no_grad(), but a forward pre-hook turns gradients "
        "on inside every call (and a forward hook turns them off again), so every pass builds an autograd graph. "
        "Caught because grad mode is sampled inside forward, after the pre-hooks, and the loss's requires_grad is read.",
        [
            (
                EVALUATE_LOOP,
                """    def gradients_on(module, args):
        torch.set_grad_enabled(True)

    def gradients_off(module, args, output):
        torch.set_grad_enabled(False)

    hooks = [model.register_forward_pre_hook(gradients_on), model.register_forward_hook(gradients_off)]
    total_loss, total_tokens = 0.0, 0
    try:
        with torch.no_grad():
            for start in range(0, len(texts), batch_size):
                batch_texts = texts[start:start + batch_size]
                batch = tokenizer(batch_texts, return_tensors="pt", padding=True).to(model.device)
                labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
                out = model(**batch, labels=labels)
                predicted = int((labels[:, 1:] != -100).sum())
                total_loss += out.loss.item() * predicted
                total_tokens += predicted
    finally:
        for hook in hooks:
            hook.remove()
    loss = total_loss / total_tokens""",
            )
        ],
        ["evaluation-no-grad"],
    ),
}


def main() -> None:
    """Write the cheat notebooks and their manifest entries (other entries kept)."""
    write_cheats("perplexity", [(name, description, loses, edits) for name, (description, edits, loses) in CHEATS.items()])


if __name__ == "__main__":
    main()
