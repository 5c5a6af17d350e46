"""Each latency check fails a named mistake; bundles of independent mistakes are graded once each.

The samples under submissions/latency cover one mistake each (tests/test_samples_latency.py);
these bundles cover the other checks, and show that a function's mistake is charged once, in its
own check, and that legitimate variations (time.time instead of perf_counter) pass.
"""

from __future__ import annotations

import re

import pytest

from grader.grading.grader import Grader
from grader.reports.results import SubmissionResult
from tests.conftest import grade_bundles, lost, outcome

BUNDLES: dict[str, list[tuple[str, str]]] = {
    # resolve_precision accepts anything; the tokenizer is always gpt2's; a hard-coded latency;
    # build_prompt counts words instead of tokens.
    "anything-gpt2tokenizer-hardcoded-words": [
        (
            "    if name not in accepted:\n        raise ValueError(f\"Unsupported precision {precision!r}: use one of {', '.join(accepted)}.\")\n",
            "",
        ),
        ("    return accepted[name], name", "    return accepted.get(name, torch.float32), name"),
        (
            "            tokenizer = AutoTokenizer.from_pretrained(model_id)",
            '            tokenizer = AutoTokenizer.from_pretrained("gpt2")',
        ),
        ("        latency = time.perf_counter() - start\n", "        latency = 0.0001  # measured on my laptop\n"),
        (
            '    prompt = base_text\n    while len(tokenizer(prompt)["input_ids"]) < target_tokens:\n        prompt += " " + base_text\n    return prompt',
            "    repeats = -(-target_tokens // len(base_text.split()))  # one token per word\n"
            '    return " ".join([base_text] * repeats)',
        ),
    ],
    # use_cache never reaches generate; time.time instead of perf_counter (fine); the sweep reports
    # the target length instead of the measured prompt's.
    "nocache-timetime-targetlength": [
        ('    settings = {"do_sample": False, "use_cache": use_cache, ', '    settings = {"do_sample": False, '),
        ("        start = time.perf_counter()\n        output", "        start = time.time()\n        output"),
        ("        latency = time.perf_counter() - start", "        latency = time.time() - start"),
        (
            '        rows.append({"prompt_tokens": len(tokenizer(prompt)["input_ids"]), **metrics})',
            '        rows.append({"prompt_tokens": length, **metrics})',
        ),
    ],
    # The sweeps forget max_new_tokens; the loader takes the dtype from the request, not from
    # resolve_precision; the error names only the last id.
    "sweeps-default-tokens-dtype-lastid": [
        (
            "        metrics = measure_generation(model, tokenizer, prompt, max_new_tokens=max_new_tokens, use_cache=use_cache)",
            "        metrics = measure_generation(model, tokenizer, prompt, use_cache=use_cache)",
        ),
        (
            "        results[label] = measure_generation(model, tokenizer, prompt, max_new_tokens=max_new_tokens)",
            "        results[label] = measure_generation(model, tokenizer, prompt)",
        ),
        (
            "            model = AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype).to(device)",
            "            model = AutoModelForCausalLM.from_pretrained(model_id, dtype=getattr(torch, precision.lower())).to(device)",
        ),
        (
            "    raise RuntimeError(f\"None of the candidate models could be loaded; tried: {', '.join(failures)}\")",
            '    raise RuntimeError(f"Could not load {model_id}")',
        ),
    ],
}

EXPECTED_LOSSES = {
    "anything-gpt2tokenizer-hardcoded-words": {
        "precision-invalid",
        "loader-same-id",
        "measure-latency",
        "build-prompt-public",
        "build-prompt",
    },
    "nocache-timetime-targetlength": {"measure-settings", "sweep-rows"},
    "sweeps-default-tokens-dtype-lastid": {"sweep-settings", "precision-sweep-settings", "loader-model", "loader-none-loads"},
}


@pytest.fixture(scope="module")
def bundles(grader: Grader, tmp_path_factory: pytest.TempPathFactory) -> dict[str, SubmissionResult]:
    """Grade every bundle once for this module."""
    return grade_bundles(grader, "latency", BUNDLES, tmp_path_factory.mktemp("bundles"))


@pytest.mark.parametrize("bundle", sorted(BUNDLES))
def test_each_bundle_loses_exactly_its_mistakes(bundles, bundle: str) -> None:
    found = lost(bundles[bundle])
    assert found == EXPECTED_LOSSES[bundle], {
        id_: outcome(bundles, bundle, id_)[1][:400] for id_ in found ^ EXPECTED_LOSSES[bundle]
    }


def test_invalid_precisions_must_raise(bundles) -> None:
    result, message = outcome(bundles, "anything-gpt2tokenizer-hardcoded-words", "precision-invalid")
    assert result == "failed" and "instead of raising ValueError" in message


def test_tokenizer_must_come_from_the_returned_id(bundles) -> None:
    result, message = outcome(bundles, "anything-gpt2tokenizer-hardcoded-words", "loader-same-id")
    assert result == "failed" and "do not both come from the returned id" in message
    assert outcome(bundles, "anything-gpt2tokenizer-hardcoded-words", "loader-fallthrough")[0] == "passed"


def test_a_hard_coded_latency_fails_but_its_rates_are_not_charged_again(bundles) -> None:
    result, message = outcome(bundles, "anything-gpt2tokenizer-hardcoded-words", "measure-latency")
    assert result == "failed" and "(or the value is not measured)" in message
    assert outcome(bundles, "anything-gpt2tokenizer-hardcoded-words", "measure-new-tokens")[0] == "passed"


def test_counting_words_overshoots_the_target(bundles) -> None:
    result, message = outcome(bundles, "anything-gpt2tokenizer-hardcoded-words", "build-prompt")
    assert result == "failed" and "more than one repetition past the target" in message


def test_use_cache_must_reach_generate_and_is_charged_once(bundles) -> None:
    result, message = outcome(bundles, "nocache-timetime-targetlength", "measure-settings")
    assert result == "failed" and "use_cache=True, float32 (another use_cache)" in message, message
    result, message = outcome(bundles, "nocache-timetime-targetlength", "sweep-settings")
    assert result == "passed" and "measure_generation itself drops use_cache" in message


def test_time_time_is_as_good_as_perf_counter(bundles) -> None:
    assert outcome(bundles, "nocache-timetime-targetlength", "measure-latency")[0] == "passed"


def test_prompt_tokens_must_be_the_measured_length(bundles) -> None:
    result, message = outcome(bundles, "nocache-timetime-targetlength", "sweep-rows")
    # The target length is reported, where the prompt measured is longer.
    found = re.search(r"reports prompt_tokens (\d+), but the prompt for that target has (\d+) tokens", message)
    assert result == "failed" and found and found[1] != found[2], message
    assert outcome(bundles, "nocache-timetime-targetlength", "sweep-plots")[0] == "passed"


def test_sweeps_must_pass_max_new_tokens(bundles) -> None:
    result, message = outcome(bundles, "sweeps-default-tokens-dtype-lastid", "sweep-settings")
    assert result == "failed" and "a limit of 32 new tokens" in message and "(another limit of new tokens" in message, message
    result, message = outcome(bundles, "sweeps-default-tokens-dtype-lastid", "precision-sweep-settings")
    assert result == "failed" and "a limit of 32 new tokens" in message, message


def test_loader_must_use_the_resolved_dtype(bundles) -> None:
    result, message = outcome(bundles, "sweeps-default-tokens-dtype-lastid", "loader-model")
    assert result == "failed" and "the model is in float16, but resolve_precision('float16', 'cpu') gives float32" in message
    assert outcome(bundles, "sweeps-default-tokens-dtype-lastid", "precision-sweep-keys")[0] == "passed"


def test_the_error_must_list_every_id(bundles) -> None:
    result, message = outcome(bundles, "sweeps-default-tokens-dtype-lastid", "loader-none-loads")
    assert result == "failed" and "does not name course-staff/no-such-model-" in message


def test_an_axis_label_in_mathtext_is_read_as_it_renders() -> None:
    """ "Decoded tokens s$^{-1}$" renders as tokens per second; "$\\mathrm{latency}$ (s)" as a latency in seconds."""
    from course_assignments.latency.checks import _label_problem

    assert _label_problem("Decoded tokens s$^{-1}$", "tokens/s") == ""
    assert _label_problem(r"$\mathrm{Latency}$ (s)", "latency") == ""
    assert _label_problem(r"$\mathrm{tokens}$", "tokens/s") != ""  # a count, not a rate


def test_a_sweep_row_may_summarise_the_last_runs_of_its_prompt() -> None:
    from course_assignments.latency.checks import _row_readings

    runs = [
        {"latency_s": lat, "tokens_per_s": 10 / lat, "ms_per_token": 100 * lat, "new_tokens": 10}
        for lat in (0.5, 0.2, 0.22, 0.24)
    ]
    last_three = (0.22, (50 + 10 / 0.22 + 10 / 0.24) / 3, 22.0)
    assert any(all(abs(a - b) < 1e-9 for a, b in zip(triple, last_three, strict=True)) for triple, _ in _row_readings(runs))
    # Not the slowest run's latency beside the fastest run's rate.
    assert not any(abs(t[0] - 0.5) < 1e-9 and abs(t[1] - 50) < 1e-9 for t, _ in _row_readings(runs))


def test_precisions_timed_in_turn_on_one_model_may_each_average_their_own_trials() -> None:
    from course_assignments.latency.checks import _consecutive_summaries

    def run(lat: float) -> dict[str, float]:
        return {"latency_s": lat, "tokens_per_s": 8 / lat, "ms_per_token": 125 * lat, "new_tokens": 8}

    returned = [run(lat) for lat in (0.3, 0.31, 0.29, 0.2, 0.21, 0.19)]

    def mean(runs: list[dict[str, float]]) -> dict[str, float]:
        return {name: sum(r[name] for r in runs) / len(runs) for name in runs[0]}

    assert _consecutive_summaries([mean(returned[:3]), mean(returned[3:])], returned)
    # One precision's entry summarising runs the other's also took is not its own measurement.
    assert not _consecutive_summaries([mean(returned[:3]), mean(returned[:3])], returned)
