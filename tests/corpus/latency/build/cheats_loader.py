"""A cheat on latency's loader: the reference solution with load_model_and_tokenizer replaced by one that
always loads gpt2's weights and writes the asked id into the config's name (what the same-id check used to read).

usage (from the repository root): .venv/bin/python tests/corpus/latency/build/cheats_loader.py
Writes tests/corpus/latency/cheat-loader-*.ipynb and adds their entries to manifest.json (other entries kept).
"""

from __future__ import annotations

import json
from pathlib import Path

from grader.authoring import load_notebook_sources, make_notebook, with_edits, write_notebook

ROOT = Path(__file__).resolve().parents[4]
CORPUS = ROOT / "tests" / "corpus" / "latency"
SOURCES = load_notebook_sources(ROOT / "reference" / "latency")

# name -> (description, checks it must lose, edits to the solution's cells)
CHEATS: dict[str, tuple[str, list[str], list[tuple[str, str]]]] = {
    "cheat-loader-renamed-gpt2": (
        "load_model_and_tokenizer tries each candidate's tokenizer but always loads gpt2's weights, and sets "
        "model.config._name_or_path (and model.name_or_path) to the candidate: the fall-through and same-id checks know "
        "the model by its config sizes and embedding values, not by that name.",
        ["loader-fallthrough", "loader-same-id"],
        [
            (
                "            model = AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype).to(device)\n",
                "            model = AutoModelForCausalLM.from_pretrained(\"gpt2\", dtype=dtype).to(device)\n"
                "            model.config._name_or_path = model_id  # what a grader reading names sees\n"
                "            model.name_or_path = model_id\n",
            )
        ],
    ),
}


def main() -> None:
    """Write the cheat notebooks and their manifest entries."""
    manifest_path = CORPUS / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    for name, (description, loses, edits) in CHEATS.items():
        cells = with_edits(SOURCES.solution_cells(), edits)
        write_notebook(CORPUS / f"{name}.ipynb", make_notebook("latency", cells))
        manifest[f"{name}.ipynb"] = {"kind": "cheat", "description": description, "loses": loses}
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
