"""A cheat on perplexity's loader: the reference solution with load_model_and_tokenizer replaced by one that
always loads gpt2's weights and writes the asked id into the config's name (what the same-id check used to read).

usage (from the repository root): .venv/bin/python tests/corpus/perplexity/build/cheats_loader.py
Writes tests/corpus/perplexity/cheat-loader-*.ipynb and adds their entries to manifest.json (other entries kept).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))  # run as a script: the tests package lies at the root

from tests.corpus import write_cheats  # noqa: E402

# name -> (description, checks it must lose, edits to the solution's cells)
CHEATS: dict[str, tuple[str, list[str], list[tuple[str, str]]]] = {
    "cheat-loader-renamed-gpt2": (
        "load_model_and_tokenizer loads the tokenizer from model_id but always gpt2's weights, and sets "
        "model.config._name_or_path (and model.name_or_path) to model_id: the same-id check identifies the model by "
        "its config sizes and embedding values, not by that name.",
        ["loader-same-id"],
        [
            (
                "    model = AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype).to(device)\n",
                '    model = AutoModelForCausalLM.from_pretrained("gpt2", dtype=dtype).to(device)\n'
                "    model.config._name_or_path = model_id  # what a grader reading names sees\n"
                "    model.name_or_path = model_id\n",
            )
        ],
    ),
}


def main() -> None:
    """Write the cheat notebooks and their manifest entries (other entries kept)."""
    write_cheats("perplexity", [(name, description, loses, edits) for name, (description, loses, edits) in CHEATS.items()])


if __name__ == "__main__":
    main()
