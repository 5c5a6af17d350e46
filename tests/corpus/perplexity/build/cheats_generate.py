"""Cheats on perplexity's generating function (issue 14): python tests/corpus/perplexity/build/cheats_generate.py

Each cheat is the solution with one function changed by a student who has read the grader's source;
the manifest entry names the checks it must lose. Run from the repository root; it rewrites the
notebooks and their manifest entries (other entries are kept).
"""

from __future__ import annotations

import json
from pathlib import Path

from grader.authoring import load_notebook_sources, make_notebook, with_edits, write_notebook

ROOT = Path(__file__).resolve().parents[4]
ASSIGNMENT = "perplexity"
HERE = ROOT / "tests" / "corpus" / ASSIGNMENT

# (name, description, checks it must lose, [(old, new)] edits of the solution's cells)
CHEATS: list[tuple[str, str, list[str], list[tuple[str, str]]]] = [
    (
        "cheat-timing-ignores-arguments",
        "time_generation always times PROMPT with 32 new tokens, whatever prompt and max_new_tokens it is given "
        "(its latency and rate are those of that call).",
        ["timing"],
        [
            (
                "    inputs = tokenizer(prompt, return_tensors=\"pt\").to(model.device)\n    if model.device.type",
                "    inputs = tokenizer(PROMPT, return_tensors=\"pt\").to(model.device)\n    if model.device.type",
            ),
            (
                "output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,",
                "output = model.generate(**inputs, max_new_tokens=32, do_sample=False,",
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
