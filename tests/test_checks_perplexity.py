"""Each perplexity check fails a named mistake, and every mistake lands far outside the tolerance."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from course_assignments.perplexity.checks import LossParams

from grader.checks.loss import LOSS_MISTAKES, hidden_corpus, loss_variants
from grader.grading.grader import Grader
from grader.grading.reference import ReferenceModels
from grader.quiet import quiet_libraries
from grader.reports.results import SubmissionResult
from grader.zoo import ModelZoo
from tests.conftest import grade_bundles, outcome


def test_every_loss_mistake_lands_at_least_ten_tolerances_away(zoo: ModelZoo) -> None:
    params = LossParams(function="evaluate_loss")
    models = ReferenceModels(zoo)
    with quiet_libraries():
        model = models.model({"hub_id": "gpt2", "quantization": "none", "dtype": "float32", "device": "auto"})
        tokenizer = models.tokenizer("gpt2")
        for seed in range(40):
            texts, batch_size = hidden_corpus(random.Random(seed), params)
            assert len(texts) % batch_size, "the last batch must be ragged"
            variants = loss_variants(model, tokenizer, texts, batch_size)
            for names in LOSS_MISTAKES:
                for name in names:
                    distance = abs(variants[name] - variants["loss"]) / variants["loss"]
                    assert distance > 10 * params.rel_tolerance, (seed, name, distance)
            assert variants["tokens: every input token"] - variants["tokens"] == len(texts)


def test_the_reference_matches_loss_variants(zoo: ModelZoo, root: Path) -> None:
    from grader.grading.reference import load_reference_module

    # The solution notebook's own evaluate_loss: the reference side is the solution's definitions.
    reference = load_reference_module(root / "assignments" / "perplexity" / "solution.ipynb", "perplexity")
    models = ReferenceModels(zoo)
    with quiet_libraries():
        model = models.model({"hub_id": "gpt2", "quantization": "none", "dtype": "float32", "device": "auto"})
        tokenizer = models.tokenizer("gpt2")
        texts, batch_size = hidden_corpus(random.Random(7), LossParams(function="evaluate_loss"))
        expected = reference.evaluate_loss(model, tokenizer, texts, batch_size)
        variants = loss_variants(model, tokenizer, texts, batch_size)
    assert math.isclose(expected["loss"], variants["loss"], rel_tol=1e-9)
    assert expected["tokens"] == variants["tokens"] and math.isclose(expected["perplexity"], math.exp(expected["loss"]))


TIMING = """    latency = time.perf_counter() - start
    new_tokens = output.shape[1] - inputs["input_ids"].shape[1]
    return {"latency_s": latency, "tokens_per_s": new_tokens / latency, "new_tokens": new_tokens}"""

BUNDLES: dict[str, list[tuple[str, str]]] = {
    # tokens_per_s assumes max_new_tokens; the CPU gets float16 when asked; 'ppl' instead of 'perplexity'.
    "maxtokens-fp16-pplkey": [
        (TIMING, TIMING.replace("new_tokens / latency", "max_new_tokens / latency")),
        (
            'dtypes.get(precision.lower(), torch.float32) if device == "cuda" else torch.float32',
            "dtypes.get(precision.lower(), torch.float32)",
        ),
        ('"perplexity": math.exp(loss), "tokens"', '"ppl": math.exp(loss), "tokens"'),
    ],
    # The loader returns (model, tokenizer); a warm-up generate inside the timer; left padding.
    "order-warmup-leftpad": [
        ("    return tokenizer, model", "    return model, tokenizer"),
        (
            "tokenizer, model = load_model_and_tokenizer(MODEL_ID, PRECISION)",
            "model, tokenizer = load_model_and_tokenizer(MODEL_ID, PRECISION)",
        ),
        (
            "    start = time.perf_counter()\n    output",
            "    start = time.perf_counter()\n    model.generate(**inputs, max_new_tokens=max_new_tokens)  # warm-up\n    output",
        ),
        (
            "    total_loss, total_tokens = 0.0, 0\n    with",
            '    tokenizer.padding_side = "left"\n    total_loss, total_tokens = 0.0, 0\n    with',
        ),
    ],
    # model.forward called directly (not model(...)): still observed, through the inner GPT2Model call.
    "forward-direct": [
        ("            out = model(**batch, labels=labels)", "            out = model.forward(**batch, labels=labels)")
    ],
}


@pytest.fixture(scope="module")
def bundles(grader: Grader, tmp_path_factory: pytest.TempPathFactory) -> dict[str, SubmissionResult]:
    """Grade every bundle once for this module."""
    return grade_bundles(grader, "perplexity", BUNDLES, tmp_path_factory.mktemp("bundles"))


def test_tokens_per_second_must_count_generated_tokens(bundles) -> None:
    result, message = outcome(bundles, "maxtokens-fp16-pplkey", "timing")
    assert result == "failed" and "assumes all 32 tokens were generated, but the model stopped after" in message


def test_cpu_must_fall_back_to_float32(bundles) -> None:
    result, message = outcome(bundles, "maxtokens-fp16-pplkey", "loader-cpu-float32")
    assert result == "failed" and "loads the model (or some of its parameters) in float16" in message, message
    assert outcome(bundles, "maxtokens-fp16-pplkey", "loader-eval-device")[0] == "passed"


def test_a_missing_key_costs_only_its_check(bundles) -> None:
    result, message = outcome(bundles, "maxtokens-fp16-pplkey", "perplexity-hidden")
    assert result == "failed" and "it has no 'perplexity'" in message
    assert outcome(bundles, "maxtokens-fp16-pplkey", "loss-hidden")[0] == "passed"


def test_loader_return_order_is_named(bundles) -> None:
    result, message = outcome(bundles, "order-warmup-leftpad", "loader-same-id")
    assert result == "failed" and "returns (model, tokenizer)" in message


def test_warm_up_inside_the_timer_fails(bundles) -> None:
    result, message = outcome(bundles, "order-warmup-leftpad", "timing")
    assert result == "failed" and "surrounds 2 generate calls" in message


def test_left_padding_is_named(bundles) -> None:
    result, message = outcome(bundles, "order-warmup-leftpad", "loss-hidden")
    assert result == "failed" and "pads on the left" in message
    result, message = outcome(bundles, "order-warmup-leftpad", "tokens-hidden")
    assert result == "failed" and "pads on the left" in message


def test_calling_forward_directly_is_still_graded(bundles) -> None:
    for check_id in ("evaluation-no-grad", "evaluation-batching", "loss-hidden"):
        assert outcome(bundles, "forward-direct", check_id)[0] == "passed"
