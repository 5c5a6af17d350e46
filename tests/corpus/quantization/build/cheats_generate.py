"""Cheats on quantization's generating functions (issue 14): python tests/corpus/quantization/build/cheats_generate.py

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

FABRICATED_CONTROLLER = '''def run_quantization_exercise(model_id: str = "gpt2", batch_sizes: tuple[int, ...] = (1, 4),
                              max_new_tokens: int = 32) -> tuple[pandas.DataFrame, list[str]]:
    """Builds the table from made-up results: nothing is loaded, measured or quantized."""
    def made_up(latency):
        return {"latency_s": latency, "new_tokens": max_new_tokens, "tokens_per_s": max_new_tokens / latency,
                "ms_per_token": 1000 * latency / max_new_tokens}

    settings = [f"use_cache={c},padding={s}" for c in (True, False) for s in ("left", "right")]
    results = {
        "model_id": model_id, "device": "cpu", "dtype": "float32",
        "baseline": made_up(0.5), "quantized": made_up(0.25),
        "ablation": {setting: made_up(0.5 + 0.1 * i) for i, setting in enumerate(settings)},
        "batching": pandas.DataFrame([{"batch_size": b, "latency_s": 0.5 * b, "tokens_per_s": 2 * max_new_tokens,
                                       "latency_per_sample_s": 0.5} for b in batch_sizes]),
        "perplexity": {"baseline": {"loss": 2.0, "ppx": 7.39}, "quantized": {"loss": 2.01, "ppx": 7.46}},
        "edge": {},
    }
    table = build_results_table(results)
    print(table.to_string(index=False))
    takeaways = [
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
        "Sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.",
        "Ut enim ad minim veniam, quis nostrud exercitation ullamco.",
    ]
    return table, takeaways'''

# (name, description, checks it must lose, [(old, new)] edits of the solution's cells)
CHEATS: list[tuple[str, str, list[str], list[tuple[str, str]]]] = [
    (
        "cheat-measure-ignores-prompts",
        "measure_generation always measures [PROMPTS[0]], whatever prompts it is given (its latency and counts are "
        "those of that call). The functions built on it (ablation, batching, edge prompts) then generate a single "
        "unpadded row too: that is charged to measure_generation alone (they are judged by the arguments they gave it, "
        "which are right).",
        ["measure-latency", "measure-tokens"],
        [
            (
                'inputs = tokenizer(list(prompts), return_tensors="pt", padding=True).to(model.device)',
                'inputs = tokenizer([PROMPTS[0]], return_tensors="pt", padding=True).to(model.device)',
            )
        ],
    ),
    (
        "cheat-batched-latency-invented",
        "measure_batched reports latency_s = 1.0 for every batch size, with tokens_per_s = new tokens / 1.0 so that "
        "rate x latency still equals the token count.",
        ["batching-throughput"],
        [
            (
                '            "latency_s": metrics["latency_s"],\n'
                '            "tokens_per_s": metrics["tokens_per_s"],\n'
                '            "latency_per_sample_s": metrics["latency_s"] / batch_size,',
                '            "latency_s": 1.0,\n'
                '            "tokens_per_s": metrics["new_tokens"] / 1.0,\n'
                '            "latency_per_sample_s": 1.0 / batch_size,',
            )
        ],
    ),
    (
        "cheat-edge-metrics-constant",
        "probe_edge_prompts runs the four generates but returns 1.0 for every metric of every prompt.",
        ["edge-prompts"],
        [
            (
                "    return {kind: measure_generation(model, tokenizer, [prompt], max_new_tokens=max_new_tokens)\n"
                "            for kind, prompt in edge_prompts.items()}",
                "    for prompt in edge_prompts.values():\n"
                "        measure_generation(model, tokenizer, [prompt], max_new_tokens=max_new_tokens)\n"
                '    return {kind: {"latency_s": 1.0, "new_tokens": max_new_tokens, "tokens_per_s": 1.0, "ms_per_token": 1.0}\n'
                "            for kind in edge_prompts}",
            )
        ],
    ),
]


def controller_cheat(solution: str) -> tuple[str, str, list[str], list[tuple[str, str]]]:
    """The controller that does no work and returns a table built from made-up results, with filler takeaways."""
    return (
        "cheat-controller-fabricated",
        "run_quantization_exercise loads, measures and quantizes nothing: it passes made-up results to "
        "build_results_table (so the builder is called) and returns that table with three lorem ipsum takeaways.",
        ["results-table", "takeaways"],
        [(solution, FABRICATED_CONTROLLER)],
    )


def controller_rows_cheat() -> tuple[str, str, list[str], list[tuple[str, str]]]:
    """The controller that runs everything but reports the baseline's metrics under every cache/padding setting."""
    return (
        "cheat-controller-ablation-rows-from-baseline",
        "run_quantization_exercise runs the whole experiment, but hands build_results_table the baseline's metrics "
        "under every cache/padding setting (every latency in the table is one the run measured, not its own scenario's).",
        ["results-table"],
        [
            (
                '"ablation": ablation, "batching": batching,',
                '"ablation": {setting: baseline for setting in ablation}, "batching": batching,',
            )
        ],
    )


def main() -> None:
    """Write the cheat notebooks and their manifest entries (other entries kept)."""
    write_cheats("quantization", CHEATS)


if __name__ == "__main__":
    main()
