"""Cheat notebooks: the solution with one function changed by a student who has read the grader's source.

Run from the repository root: ``python tests/corpus/quantization/build/cheats.py``. It writes each
``cheat-*.ipynb`` next to the corpus and adds (or refreshes) its entry in ``manifest.json``, with the
checks of the function it cheats on, which it must lose.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))  # run as a script: the tests package lies at the root

from tests.corpus import write_cheats  # noqa: E402

PTQ_BODY = """    exported = ORTModelForCausalLM.from_pretrained(model_id, export=True)
    quantizer = ORTQuantizer.from_pretrained(exported)
    config = AutoQuantizationConfig.avx2(is_static=False, per_channel=False)
    quantizer.quantize(save_dir=save_dir, quantization_config=config)
    quantized = ORTModelForCausalLM.from_pretrained(save_dir, file_name="model_quantized.onnx")
    return quantized,"""

PPX_LOOP_HEAD = """    for label, model in models.items():
        total_loss, total_tokens = 0.0, 0
"""

# name -> (description, edits of the solution's cells, checks it must lose)
CHEATS: dict[str, tuple[str, list[tuple[str, str]], list[str]]] = {
    "cheat-dangling-quantize-node": (
        "run_static_ptq_optimum exports the float model and adds one Constant -> DynamicQuantizeLinear node that "
        "feeds nothing, saved as model_quantized.onnx: an integer operator is in the file, but every matrix product "
        "that computes the logits is float and no weight is int8. Caught because the graph the live session runs "
        "is read in the kernel and only integer products on the path to the outputs, with int8 weights, count.",
        [
            (
                PTQ_BODY,
                """    import os

    import onnx
    from onnx import TensorProto, helper

    exported = ORTModelForCausalLM.from_pretrained(model_id, export=True)
    exported.save_pretrained(save_dir)
    graph = onnx.load(os.path.join(save_dir, "model.onnx"))
    graph.graph.node.append(helper.make_node(
        "Constant", [], ["calibration_probe"], value=helper.make_tensor("probe", TensorProto.FLOAT, [2], [0.0, 1.0])))
    graph.graph.node.append(helper.make_node(
        "DynamicQuantizeLinear", ["calibration_probe"], ["probe_q", "probe_scale", "probe_zero_point"]))
    onnx.save(graph, os.path.join(save_dir, "model_quantized.onnx"))
    quantized = ORTModelForCausalLM.from_pretrained(save_dir, file_name="model_quantized.onnx")
    return quantized,""",
            )
        ],
        ["ptq-quantized"],
    ),
    "cheat-fake-ort-class": (
        "run_static_ptq_optimum returns the PyTorch baseline wrapped in a class whose __module__ says "
        "optimum.onnxruntime, with session=None and .path naming a one-node ONNX file (DynamicQuantizeLinear) it "
        "writes: it generates text, as the baseline does. Caught because ONNX models are recognised by isinstance "
        "of Optimum's ORTModel in the kernel and their graph is read from the live session, never from a path.",
        [
            (
                PTQ_BODY,
                """    import os

    import onnx
    from onnx import TensorProto, helper

    class QuantizedModel:
        def __init__(self, model, path):
            self.model, self.session, self.path = model, None, path

        def __getattr__(self, name):
            return getattr(self.model, name)

        def __call__(self, *args, **kwargs):
            return self.model(*args, **kwargs)

    QuantizedModel.__module__ = "optimum.onnxruntime"
    os.makedirs(save_dir, exist_ok=True)
    path = os.path.join(save_dir, "model_quantized.onnx")
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zero_point"])
    graph = helper.make_graph(
        [node], "int8", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [2])])
    onnx.save(helper.make_model(graph), path)
    baseline = AutoModelForCausalLM.from_pretrained(model_id).eval()
    quantized = QuantizedModel(baseline, path)
    return quantized,""",
            )
        ],
        ["ptq-quantized", "ptq-generates"],
    ),
    "cheat-ort-subclass-runs-baseline": (
        "run_static_ptq_optimum really quantizes, but loads the result as a subclass of ORTModelForCausalLM whose "
        "forward runs the PyTorch baseline: the object is an ORTModel holding a quantized session that never runs. "
        "Caught because running the model must run its own session (a probe in the kernel for the graph, the "
        "recorded session runs of the generation).",
        [
            (
                PTQ_BODY,
                """    from transformers.modeling_outputs import CausalLMOutputWithPast

    baseline = AutoModelForCausalLM.from_pretrained(model_id).eval()

    class FastInt8(ORTModelForCausalLM):
        def forward(self, input_ids, attention_mask=None, past_key_values=None, position_ids=None, use_cache=None,
                    **kwargs):
            return CausalLMOutputWithPast(logits=baseline(input_ids=input_ids, attention_mask=attention_mask,
                                                          use_cache=False).logits)

    FastInt8.__module__ = "optimum.onnxruntime"  # as Optimum's own classes say
    exported = ORTModelForCausalLM.from_pretrained(model_id, export=True)
    quantizer = ORTQuantizer.from_pretrained(exported)
    config = AutoQuantizationConfig.avx2(is_static=False, per_channel=False)
    quantizer.quantize(save_dir=save_dir, quantization_config=config)
    quantized = FastInt8.from_pretrained(save_dir, file_name="model_quantized.onnx", use_cache=False)
    return quantized,""",
            )
        ],
        ["ptq-quantized", "ptq-generates"],
    ),
    "cheat-copy-ppx-after-decoy-run": (
        "compare_ppplx runs every model other than the first once, on the first token of the first text (so its "
        "ONNX Runtime session is seen to run), then copies the first model's loss and perplexity to it. Caught "
        "because the INT8 model's session runs must cover every token of the texts.",
        [
            (
                PPX_LOOP_HEAD,
                """    for label, model in models.items():
        if results:  # INT8 barely moves the loss: one quick call, then reuse the first model's numbers
            first = tokenizer(texts[:1], return_tensors="pt")["input_ids"][:, :1]
            model(input_ids=first, attention_mask=torch.ones_like(first))
            results[label] = dict(next(iter(results.values())))
            continue
        total_loss, total_tokens = 0.0, 0
""",
            )
        ],
        ["ppx-quantized"],
    ),
    "cheat-copy-baseline-ppx": (
        "compare_ppplx evaluates only the first model and copies its loss and perplexity to every other label "
        "(the INT8 model drifts by well under the 5 % the check allows). Caught because the INT8 model's loss must "
        "come from runs of its own ONNX Runtime session covering every text.",
        [
            (
                PPX_LOOP_HEAD,
                """    for label, model in models.items():
        if results:  # INT8 barely moves the loss: reuse the first model's numbers
            results[label] = dict(next(iter(results.values())))
            continue
        total_loss, total_tokens = 0.0, 0
""",
            )
        ],
        ["ppx-quantized"],
    ),
}


def main() -> None:
    """Write the cheat notebooks and their manifest entries (other entries kept)."""
    write_cheats("quantization", [(name, description, loses, edits) for name, (description, edits, loses) in CHEATS.items()])


if __name__ == "__main__":
    main()
