"""Fast tests of judging what loaded, not what it is called, with made-up model descriptions (no kernel).

Real runs on this CPU reach only some of these branches (a float16 model flagged 8-bit, a partly
quantized one, mixed 4-bit types, a fingerprint off by rounding): each verdict is pinned here.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import nbformat
import pytest
from course_assignments.ptq_bnb.checks import (
    LoadedConfiguration,
    declared_kind,
    event_kind,
    explained_footprints_mb,
    flag_note,
    footprint_mistakes,
    loaded_kind,
    memory_agrees,
    name_agrees,
)
from course_assignments.quantization.checks import judge_takeaways

from grader.checks.common import WrittenAnswerParams, screen_answer, written_answer
from grader.checks.identity import fingerprint_difference
from grader.kernel.values import Model

MB = 1024**2


def described(dtype: str = "torch.float16", eight: bool = False, four: bool = False, **layers: Any) -> Model:
    """A made-up model as the runtime describes it."""
    counts = {"int8": 0, "4bit": 0, "float": 0, "quant_types": []}
    counts.update(layers)
    return Model(
        type="transformers.GPT2LMHeadModel",
        device="cpu",
        dtype=dtype,
        training=False,
        loaded_in_8bit=eight,
        loaded_in_4bit=four,
        parameter_bytes=4 * MB,
        parameter_elements=2 * MB,
        buffer_bytes=MB,
        buffer_elements=MB,
        layers=counts,
    )


@pytest.mark.parametrize(
    ("model", "kind"),
    [
        (described(eight=True, int8=8), "int8"),
        (described(four=True, **{"4bit": 8, "quant_types": ["nf4"]}), "nf4"),
        (described(four=True, **{"4bit": 8, "quant_types": ["fp4"]}), "fp4"),
        (described(four=True, **{"4bit": 8, "quant_types": ["fp4", "nf4"]}), "4bit"),
        # The flags are set, but every module was skipped: a float16 model.
        (described(eight=True, float=8), "fp16"),
        (described(four=True, float=8, quant_types=[]), "fp16"),
        (described(eight=True, int8=2, float=6), "partial"),
        (described("torch.float32", float=8), "fp32"),
        (described("torch.bfloat16"), "bf16"),
        # Flags without layers are not evidence either.
        (described("torch.float16", eight=True, four=True), "fp16"),
    ],
)
def test_a_model_is_what_its_layers_hold_not_what_its_flags_say(model: Model, kind: str) -> None:
    assert loaded_kind(model) == kind


def test_a_skipped_model_says_why_its_flag_is_not_believed() -> None:
    assert "is_loaded_in_8bit is set" in flag_note(described(eight=True, float=8))
    assert "only 2 of its 8 linear layers" in flag_note(described(eight=True, int8=2, float=6))
    assert flag_note(described(eight=True, int8=8)) == ""


@pytest.mark.parametrize(
    ("name", "declared"),
    [
        ("NF4 (bitsandbytes)", "nf4"),
        ("4-bit NormalFloat (NF4) via bitsandbytes", "nf4"),
        ("4-bit float (FP4) via bitsandbytes", "fp4"),
        ("8-bit LLM.int8() via bitsandbytes", "int8"),
        ("FP32 (Baseline CPU)", "baseline"),
        ("Full precision baseline (FP16 on GPU)", "baseline"),
        ("INT8 (vs the FP32 baseline)", "int8"),
        ("NF4 or FP4", None),
        ("config A", None),
    ],
)
def test_a_configuration_name_is_read_by_meaning(name: str, declared: str | None) -> None:
    assert declared_kind(name) == declared


def test_names_must_agree_with_what_loaded() -> None:
    assert name_agrees("NF4 (bitsandbytes)", "nf4")
    assert not name_agrees("NF4 (bitsandbytes)", "fp4")  # swapped entries
    assert not name_agrees("FP4 (bitsandbytes)", "nf4")
    assert not name_agrees("INT8", "fp16")  # every module skipped
    # The starter names the baseline for the device it runs on: the GPU's name on a CPU's float32 row is wrong.
    assert not name_agrees("FP16 (Baseline GPU)", "fp32")
    assert name_agrees("FP32 (Baseline CPU)", "fp32")
    assert name_agrees("Baseline", "fp16")  # a name that states no dtype says none wrong
    assert not name_agrees("Baseline", "int8")
    assert not name_agrees("FP32 baseline", "int8")
    assert name_agrees("config A", "nf4")  # a name that states nothing says nothing wrong


def test_a_described_model_s_footprints_line_up_with_the_memory_check_s_mistakes() -> None:
    """footprint_mistake reads a mistake on the grader's model (a torch module) by its place in
    explained_footprints_mb (the notebook's model, as described): the two lists name the same mistakes in one order."""
    import torch

    module = torch.nn.Linear(1024, 512, bias=False)  # 2 MB of float32 weights ...
    module.register_buffer("mask", torch.zeros(256 * 1024, dtype=torch.float32))  # ... and a 1 MB buffer
    model = dataclasses.replace(
        described(), parameter_bytes=2 * MB, parameter_elements=MB // 2, buffer_bytes=MB, buffer_elements=MB // 4
    )
    mistakes = [value for value, _ in footprint_mistakes(module).values()]
    assert explained_footprints_mb(model) == [3.0, *mistakes]


def test_a_row_reports_the_memory_of_the_model_its_configuration_loads() -> None:
    configuration = LoadedConfiguration(0, "INT8", described(eight=True, int8=8), None, "text", footprints_mb=(4.0, 4.1))
    assert memory_agrees(5.0, configuration, 1e-3)  # the model's bytes: (4 + 1) MB
    # What the student's own function says of it, where it makes that mistake (parameters without buffers) on the
    # grader's model of the same kind too: the memory check charges it there.
    no_buffers = next(index for index, value in enumerate(explained_footprints_mb(configuration.model)) if value == 4.0)
    assert memory_agrees(4.0, configuration, 1e-3, mistake=no_buffers)
    # A function right on the grader's INT8 model (or giving no known value) that says 4 MB of the notebook's own INT8
    # model reports another number only for the notebook's configurations: not believed.
    assert not memory_agrees(4.0, configuration, 1e-3, mistake=0)
    assert not memory_agrees(4.0, configuration, 1e-3)
    # Wrong on the grader's model in a way of its own (4-bit bytes halved twice): its values are its mistake's.
    assert memory_agrees(4.1, configuration, 1e-3, mistake=-1)
    assert not memory_agrees(9.0, configuration, 1e-3)
    assert not memory_agrees(5.01, configuration, 1e-3)


def test_a_generate_call_is_filed_under_the_kind_of_model_that_made_it() -> None:
    assert event_kind({"model_quantization": "nf4", "model_dtype": "torch.float16"}) == "nf4"
    assert event_kind({"model_quantization": None, "model_dtype": "torch.float16"}) == "fp16"
    assert event_kind({"model_quantization": None, "model_dtype": "torch.float32"}) == "fp32"


GPT2 = {"sizes": {"model_type": "gpt2", "n_layer": 2, "n_embd": 128}, "embedding": [0.0123, -0.0456, 0.078, -0.1]}


def test_a_model_is_known_by_its_weights() -> None:
    assert fingerprint_difference(GPT2, GPT2) is None
    rounded = {**GPT2, "embedding": [0.01230621, -0.04559326, 0.07800293, -0.1000366]}  # loaded in float16
    assert fingerprint_difference(rounded, GPT2) is None
    other_layers = {**GPT2, "sizes": {**GPT2["sizes"], "n_layer": 1}}
    assert "n_layer 1" in (fingerprint_difference(other_layers, GPT2) or "")
    same_shape_other_weights = {**GPT2, "embedding": [0.0511, 0.0203, -0.0641, 0.09]}
    assert fingerprint_difference(same_shape_other_weights, GPT2) == "its weights differ"
    assert fingerprint_difference({}, GPT2) is not None  # no evidence is no match


QUESTION = "Memory Scaling. Describe how the model's memory footprint scaled as you reduced precision. Quantify the reductions."


@pytest.mark.parametrize(
    ("answer", "flag"),
    [
        ("Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.", "filler"),
        ("Asdf qwerty blah blah foo baz, xxx tbd todo placeholder.", "filler"),
        ("Zorblax quindle frampton vexiloid grumptious snarfle wibbly plonkish.", "not words"),
        ("Describe how the models memory footprint scaled as you reduced precision and quantify the reductions.", "copies"),
        ("The memory footprint of the model scaled as precision was reduced, with the reductions being quantified.", "rewords"),
        (
            "The model is smaller. The model is smaller. The model is smaller. The model is smaller. The model is smaller.",
            "repeats",
        ),
    ],
)
def test_filler_copied_and_repeated_answers_are_flagged(answer: str, flag: str) -> None:
    assert any(flag in found for found in screen_answer(answer, QUESTION))


def test_a_real_answer_is_not_flagged() -> None:
    answer = (
        "The footprint fell from 8.01 MB in FP32 to 4.63 MB with INT8 (-42%) and 4.44 MB with NF4 or FP4 (-45%). Only the "
        "linear weights are quantized; embeddings and the 2 MB of attention-mask buffers are not, so it shrinks far less "
        "than the bit widths suggest."
    )
    assert screen_answer(answer, QUESTION) == ()


def test_a_flagged_answer_goes_to_the_instructor_with_its_flag() -> None:
    section = (
        "## 5. Analysis and Discussion\n\n1.  **Memory Scaling:** \n    *   Lorem ipsum dolor sit amet, consectetur "
        "adipiscing elit, sed do eiusmod tempor incididunt ut labore."
    )
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(section)])
    params = WrittenAnswerParams(section="Analysis and Discussion", question="Memory Scaling", prompt="Describe the memory.")
    verdict = written_answer.run(types.SimpleNamespace(notebook=notebook, rubric=types.SimpleNamespace(checks=[])), params)
    assert verdict.outcome == "manual"
    assert verdict.flags and "filler" in verdict.flags[0]
    assert "flagged" in verdict.message


def test_filler_takeaways_go_to_the_instructor_flagged() -> None:
    question = "A short takeaway (3-5 bullets) stating the biggest wins and when they apply."
    filler = judge_takeaways(["lorem ipsum dolor sit amet"] * 3, [3, 5], question)
    assert filler.outcome == "manual" and filler.flags
    assert any("filler" in flag for flag in filler.flags)
    repeated = judge_takeaways(["Batching helps a lot on a GPU."] * 3, [3, 5], question)
    assert repeated.outcome == "manual" and repeated.flags
    real = judge_takeaways(
        [
            "INT8 ONNX quantization cut latency by about a third on the CPU with no change in perplexity.",
            "The KV cache matters most for long generations; without it every step recomputes the prefix.",
            "Batching raised throughput nearly linearly up to batch size 4, at some cost in per-request latency.",
        ],
        [3, 5],
        question,
    )
    assert real.outcome == "passed", real.message
    assert judge_takeaways(["too short"], [3, 5], question).outcome == "failed"


def test_a_list_filtered_in_place_is_seen() -> None:
    """The seed's cell that drops the bitsandbytes configurations on a CPU is named in the configuration checks."""
    from course_assignments.ptq_bnb.checks import filters_variable

    seed = 'if device.type == "cpu":\n    configurations = [c for c in configurations if "bitsandbytes" not in c["name"]]\n'
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(seed)])
    assert filters_variable(notebook, "configurations")
    kept = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("configurations = [c for c in base]\n")])
    assert not filters_variable(kept, "configurations")
