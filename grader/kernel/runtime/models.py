"""Loading models from a JSON spec (shared with the grader's reference side).

A part of the grader's runtime (see :mod:`grader.kernel.runtime`): in the kernel the parts are one module."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for mypy only: in the kernel the parts are one module, which imports nothing of the grader
    from grader.kernel.protocol import (
        ModelSpec,
    )


# --------------------------------------------------------------------------------------
# Loading models from a JSON spec (shared with the grader's reference side)
# --------------------------------------------------------------------------------------

QUANTIZATIONS = ("none", "int8", "nf4", "fp4")


def pick_device(requested: str = "auto") -> str:
    """``"cuda"`` if asked for (or ``"auto"``) and available, else ``"cpu"``."""
    import torch

    if requested == "cpu":
        return "cpu"
    if requested == "cuda" or torch.cuda.is_available():
        return "cuda" if torch.cuda.is_available() else "cpu"
    return "cpu"


def load_kwargs(spec: ModelSpec) -> dict[str, Any]:
    """``from_pretrained`` keyword arguments for a model spec (hub_id, quantization, dtype, device)."""
    import torch

    quantization = spec.get("quantization", "none")
    device = pick_device(spec.get("device", "auto"))
    dtype_name = spec.get("dtype", "auto")
    if dtype_name == "auto":
        dtype_name = "float16" if device == "cuda" else "float32"
    kwargs: dict[str, Any] = {}
    if quantization == "none" or spec.get("dtype", "auto") != "auto":
        kwargs["dtype"] = getattr(torch, dtype_name)  # for bitsandbytes: the layers it leaves unquantized
    if quantization != "none":
        from transformers import BitsAndBytesConfig

        if quantization == "int8":
            config = BitsAndBytesConfig(load_in_8bit=True)
        elif quantization in ("nf4", "fp4"):
            config = BitsAndBytesConfig(
                load_in_4bit=True, bnb_4bit_quant_type=quantization, bnb_4bit_compute_dtype=getattr(torch, dtype_name)
            )
        else:
            raise ValueError(f"unknown quantization {quantization!r}; expected one of {QUANTIZATIONS}")
        kwargs["quantization_config"] = config
        kwargs["device_map"] = {"": device}
    return kwargs


def load_model(spec: ModelSpec) -> Any:
    """Load the model a spec describes, in eval mode, on its device."""
    from transformers import AutoModelForCausalLM

    kwargs = load_kwargs(spec)
    model = AutoModelForCausalLM.from_pretrained(spec["hub_id"], **kwargs)
    if spec.get("quantization", "none") == "none":
        model.to(pick_device(spec.get("device", "auto")))  # type: ignore[arg-type]  # transformers wraps .to()
    return model.eval()
