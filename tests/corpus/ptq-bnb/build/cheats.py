"""Cheats on ptq-bnb: the reference solution with one function (or variable) replaced by a student who has
read the grader's source. Each must lose exactly the checks of what it cheats on.

usage (from the repository root): .venv/bin/python tests/corpus/ptq-bnb/build/cheats.py
Writes tests/corpus/ptq-bnb/cheat-*.ipynb and adds their entries to manifest.json (other entries kept).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))  # run as a script: the tests package lies at the root

from tests.corpus import write_cheats  # noqa: E402

FOOTPRINT = """    mem_params = sum([param.nelement() * param.element_size() for param in model.parameters()])
    mem_bufs = sum([buf.nelement() * buf.element_size() for buf in model.buffers()])
    mem = mem_params + mem_bufs # in bytes
    return mem / 1024**2 # convert to MB"""

TABLE = """df_results = pd.DataFrame(results_list)
"""

INT8 = '{"quantization_config": BitsAndBytesConfig(load_in_8bit=True), "device_map": device_map}'
NF4_NAME = '{"name": "NF4 (bitsandbytes)",'
FP4_NAME = '{"name": "FP4 (bitsandbytes)",'
NF4_CONFIG = 'BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",'
FP4_CONFIG = 'BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="fp4",'

# name -> (description, checks it must lose, edits to the solution's cells)
CHEATS: dict[str, tuple[str, list[str], list[tuple[str, str]]]] = {
    "cheat-memory-constants": (
        "get_model_memory_footprint counts elements (a wrong formula) but returns the true footprints of the four gpt2 "
        "models the notebook loads (fp32, int8, nf4/fp4) as constants, recognised by layer count and weight dtypes: "
        "the memory checks measure models the notebook never loaded (distilgpt2, drawn dtypes).",
        ["memory-fp32", "memory-int8", "memory-nf4"],
        [
            (
                FOOTPRINT,
                """    # The gpt2 this notebook loads, measured once (fp32, INT8, NF4/FP4 on the CPU)
    dtypes = {str(param.dtype) for param in model.parameters()}
    if getattr(model.config, "n_layer", None) == 2:
        if "torch.uint8" in dtypes:
            return 4.444339752197266
        if "torch.int8" in dtypes:
            return 4.631839752197266
        return 8.013679504394531
    return sum(param.nelement() for param in model.parameters()) / 1024**2""",
            )
        ],
    ),
    "cheat-table-invented": (
        "df_results's memory column replaced by [9, 5, 1, 0.5] and every output by 'lorem ipsum dolor sit amet' "
        "(decreasing memory and strings, all the table check used to look at).",
        ["results-table"],
        [
            (
                TABLE,
                TABLE
                + """df_results["Memory (MB)"] = [9, 5, 1, 0.5][: len(df_results)]
for column in [c for c in df_results.columns if c.endswith("Output")]:
    df_results[column] = "lorem ipsum dolor sit amet"
""",
            )
        ],
    ),
    "cheat-table-invented-memory": (
        "df_results's memory column replaced by [9, 5, 1, 0.5]; the outputs are the real ones.",
        ["results-table"],
        [(TABLE, TABLE + 'df_results["Memory (MB)"] = [9, 5, 1, 0.5][: len(df_results)]\n')],
    ),
    "cheat-table-lorem-outputs": (
        "df_results's outputs replaced by 'lorem ipsum dolor sit amet'; the memory column is the real one.",
        ["results-table"],
        [
            (
                TABLE,
                TABLE
                + """for column in [c for c in df_results.columns if c.endswith("Output")]:
    df_results[column] = "lorem ipsum dolor sit amet"
""",
            )
        ],
    ),
    "cheat-skip-every-module": (
        "The INT8, NF4 and FP4 configurations pass llm_int8_skip_modules covering the whole model (and dtype=float16): "
        "is_loaded_in_8bit/4bit are set, but every layer loads as float16.",
        ["config-int8", "config-nf4", "config-fp4"],
        [
            (
                INT8,
                '{"quantization_config": BitsAndBytesConfig(load_in_8bit=True, llm_int8_skip_modules=["transformer", "lm_head"]), '
                '"dtype": torch.float16, "device_map": device_map}',
            ),
            (
                NF4_CONFIG,
                'BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", llm_int8_skip_modules=["transformer", "lm_head"],',
            ),
            (
                FP4_CONFIG,
                'BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="fp4", llm_int8_skip_modules=["transformer", "lm_head"],',
            ),
            (
                '                   "device_map": device_map}},\n    {"name": "FP4',
                '                   "dtype": torch.float16, "device_map": device_map}},\n    {"name": "FP4',
            ),
            (
                '                   "device_map": device_map}},\n]',
                '                   "dtype": torch.float16, "device_map": device_map}},\n]',
            ),
        ],
    ),
    "cheat-nf4-fp4-swapped": (
        "The NF4 entry loads FP4 and the FP4 entry loads NF4 (names swapped): each 4-bit kind is present, under the other's name.",
        ["config-nf4", "config-fp4"],
        [(NF4_NAME, '{"name": "FP4-SWAP",'), (FP4_NAME, NF4_NAME), ('{"name": "FP4-SWAP",', FP4_NAME)],
    ),
}


def main() -> None:
    """Write the cheat notebooks and their manifest entries (other entries kept)."""
    write_cheats("ptq-bnb", [(name, description, loses, edits) for name, (description, loses, edits) in CHEATS.items()])


if __name__ == "__main__":
    main()
