"""Cheats on ptq-bnb's generating function (issue 14): python tests/corpus/ptq-bnb/build/cheats_generate.py

Each cheat is the solution with one function changed by a student who has read the grader's source;
the manifest entry names the checks it must lose. Run from the repository root; it rewrites the
notebooks and their manifest entries (other entries are kept).
"""

from __future__ import annotations

import json
from pathlib import Path

from grader.authoring import load_notebook_sources, make_notebook, with_edits, write_notebook

ROOT = Path(__file__).resolve().parents[4]
ASSIGNMENT = "ptq-bnb"
HERE = ROOT / "tests" / "corpus" / ASSIGNMENT

# (name, description, checks it must lose, [(old, new)] edits of the solution's cells)
CHEATS: list[tuple[str, str, list[str], list[tuple[str, str]]]] = [
    (
        "cheat-generate-ignores-arguments",
        "generate_text_and_time always generates PROMPTS[0] with MAX_NEW_TOKENS, whatever prompt and max_new_tokens "
        "it is given (its text and latency are those of that call).",
        ["generate-latency", "generate-output"],
        [
            (
                "    inputs = tokenizer(prompt, return_tensors=\"pt\").to(model.device)",
                "    inputs = tokenizer(PROMPTS[0], return_tensors=\"pt\").to(model.device)",
            ),
            (
                "outputs = model.generate(**inputs, max_new_tokens=max_new_tokens,",
                "outputs = model.generate(**inputs, max_new_tokens=MAX_NEW_TOKENS,",
            ),
        ],
    ),
]


def main() -> None:
    """Write each cheat notebook and its manifest entry."""
    sources = load_notebook_sources(ROOT / "reference" / ASSIGNMENT)
    manifest_path = HERE / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    for name, description, loses, edits in CHEATS:
        cells = with_edits(sources.solution_cells(), edits)
        write_notebook(HERE / f"{name}.ipynb", make_notebook(ASSIGNMENT, cells))
        manifest[f"{name}.ipynb"] = {"kind": "cheat", "description": description, "loses": sorted(loses)}
    manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
