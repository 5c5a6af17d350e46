"""Cheats on perplexity's generating function (issue 14): python tests/corpus/perplexity/build/cheats_generate.py

Each cheat is the solution with one function changed by a student who has read the grader's source;
the manifest entry names the checks it must lose. Run from the repository root; it rewrites the
notebooks and their manifest entries (other entries are kept).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))  # run as a script: the tests package lies at the root

from tests.corpus import write_cheats  # noqa: E402

# (name, description, checks it must lose, [(old, new)] edits of the solution's cells)
CHEATS: list[tuple[str, str, list[str], list[tuple[str, str]]]] = [
    (
        "cheat-timing-ignores-arguments",
        "time_generation always times PROMPT with 32 new tokens, whatever prompt and max_new_tokens it is given "
        "(its latency and rate are those of that call).",
        ["timing"],
        [
            (
                '    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)\n    if model.device.type',
                '    inputs = tokenizer(PROMPT, return_tensors="pt").to(model.device)\n    if model.device.type',
            ),
            (
                "output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,",
                "output = model.generate(**inputs, max_new_tokens=32, do_sample=False,",
            ),
        ],
    ),
]


def main() -> None:
    """Write the cheat notebooks and their manifest entries (other entries kept)."""
    write_cheats("perplexity", CHEATS)


if __name__ == "__main__":
    main()
