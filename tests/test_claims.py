"""Written claims vs the notebook's own numbers (grader/checks/claims.py): pure logic, no kernels.

The corpus is a set of answers written the way students write them after the quantization lab, checked against one
results table; each case lists every claim the checker must find, its verdict and, for a contradiction, the notebook's
own number that the message must name.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from grader.checks.claims import Claim, ClaimVerdict, Fact, check_claims, extract_claims

MIB = 1024**2

# The quantization lab's results table (memory in bytes: the course's MB is 1024**2 bytes).
FACTS = [
    Fact("FP32", "memory", 8.01 * MIB, "bytes"),
    Fact("INT8", "memory", 4.63 * MIB, "bytes"),
    Fact("NF4", "memory", 4.44 * MIB, "bytes"),
    Fact("FP4", "memory", 4.44 * MIB, "bytes"),
    Fact("FP32", "latency", 0.052, "s"),
    Fact("INT8", "latency", 0.094, "s"),
    Fact("NF4", "latency", 0.071, "s"),
    Fact("FP4", "latency", 0.069, "s"),
    Fact("FP32", "perplexity", 21.3, ""),
    Fact("INT8", "perplexity", 21.5, ""),
    Fact("NF4", "perplexity", 23.9, ""),
    Fact("FP4", "perplexity", 25.2, ""),
    Fact("FP32", "tokens_per_s", 385, "tokens/s"),
    Fact("INT8", "tokens_per_s", 213, "tokens/s"),
]


@dataclass(frozen=True)
class Expected:
    """A claim the checker must find: its text, its verdict, and text its message must hold (the notebook's number for
    a contradiction, the rows it was compared with for an agreement)."""

    text: str
    verdict: str
    says: str = ""


@dataclass(frozen=True)
class Case:
    name: str
    answer: str
    claims: tuple[Expected, ...]


def agrees(text: str, says: str = "") -> Expected:
    return Expected(text, "agrees", says)


def contradicts(text: str, says: str) -> Expected:
    return Expected(text, "contradicts", says)


def unmatched(text: str, says: str = "") -> Expected:
    return Expected(text, "unmatched", says)


CORPUS = [
    Case(
        "exact numbers, and savings against the baseline",
        "The memory footprint dropped a lot when I reduced the precision. The FP32 model takes 8.01 MB, INT8 takes 4.63 MB, "
        "and both NF4 and FP4 take 4.44 MB. So INT8 saves about 42% and the 4-bit formats save about 45% compared to the FP32 "
        "baseline. The reduction is smaller than I expected because the embeddings are not quantized.",
        (
            agrees("8.01 MB", "FP32 memory"),
            agrees("4.63 MB", "INT8 memory"),
            agrees("4.44 MB", "NF4 memory"),
            agrees("about 42%", "INT8 vs FP32 memory: 42% less"),
            agrees("about 45%", "NF4 vs FP32 memory: 45% less"),
        ),
    ),
    Case(
        "rounded numbers and fraction words",
        "Going from FP32 to INT8 shrank the model from about 8 MB to about 4.6 MB. NF4 uses roughly half the memory of FP32. "
        "Overall the savings were a bit over 40% for every quantized model.",
        (
            agrees("about 8 MB", "FP32 memory"),
            agrees("about 4.6 MB", "INT8 memory"),
            agrees("roughly half", "NF4 vs FP32 memory"),
            agrees("a bit over 40%", "vs FP32 memory"),
        ),
    ),
    Case(
        "ratio and percentage of the same comparison",
        "INT8 was clearly slower than FP32: 0.094 s versus 0.052 s per generation, i.e. 1.8x slower or about 80% more time. "
        "In throughput terms INT8 dropped from 385 to 213 tokens/s, which is a 45% drop.",
        (
            agrees("0.094 s", "INT8 latency"),
            agrees("0.052 s", "FP32 latency"),
            agrees("1.8x slower", "INT8 vs FP32 latency"),
            agrees("about 80% more", "INT8 vs FP32 latency: 81% more"),
            agrees("385", "FP32 throughput: 385 tokens/s"),
            agrees("213 tokens/s", "INT8 throughput"),
            agrees("45% drop", "INT8 vs FP32 throughput"),
        ),
    ),
    Case(
        "milliseconds against a table in seconds",
        "Latency per generate call was 52 ms for FP32 and 94 ms for INT8. The 4-bit models were in between: NF4 took 71 ms "
        "and FP4 69 ms. The differences are large compared to the run-to-run noise I saw.",
        (
            agrees("52 ms", "FP32 latency: 52 ms"),
            agrees("94 ms", "INT8 latency: 94 ms"),
            agrees("71 ms", "NF4 latency"),
            agrees("69 ms", "FP4 latency"),
        ),
    ),
    Case(
        "MiB and decimal MB",
        "Using get_memory_footprint I measured 8.01 MiB for FP32 and 4.63 MiB for INT8. In decimal megabytes that is 8.4 MB "
        "and 4.85 MB. NF4 came in at 4.2 MiB.",
        (
            agrees("8.01 MiB", "FP32 memory: 8.01 MiB"),
            agrees("4.63 MiB", "INT8 memory: 4.63 MiB"),
            agrees("8.4 MB", "FP32 memory"),
            agrees("4.85 MB", "INT8 memory"),
            contradicts("4.2 MiB", "4.44 MiB"),
        ),
    ),
    Case(
        "swapped rows",
        "INT8 brought the memory down to 4.44 MB, and NF4 went even lower to 4.63 MB. So NF4 is the smallest model and the "
        "obvious choice when memory is tight.",
        (
            contradicts("4.44 MB", "your table shows 4.63 MB (4.44 MB is NF4's memory)"),
            contradicts("4.63 MB", "your table shows 4.44 MB (4.63 MB is INT8's memory)"),
        ),
    ),
    Case(
        "invented numbers",
        "After the warm-up, generation throughput rose to about 500 tokens/s. The FP16 run reached 300 tokens/s, but I did "
        "not include it in the table.",
        (
            unmatched("about 500 tokens/s", "No number in your results matches 'about 500 tokens/s'"),
            unmatched("300 tokens/s", "no throughput for FP16"),
        ),
    ),
    Case(
        "contradicting percentages",
        "Quantization to INT8 reduced the memory by 60% compared to FP32, and NF4 reduced it by 75%. That is a huge saving "
        "for edge devices.",
        (
            contradicts("60%", "Your answer says 60% less for INT8 vs FP32 memory; your table shows 42% less"),
            contradicts("75%", "your table shows 45% less"),
        ),
    ),
    Case(
        "x faster and x slower, both ways round",
        "FP32 was 1.8x faster than INT8. Put the other way round, INT8 is 1.8 times slower than FP32, while NF4 is about "
        "1.4x slower than FP32. I had hoped INT8 was 45% faster than FP32, but it was not. FP4 was 2x faster than NF4.",
        (
            agrees("1.8x faster", "FP32 vs INT8 latency"),
            agrees("1.8 times slower", "INT8 vs FP32 latency"),
            agrees("about 1.4x slower", "NF4 vs FP32 latency"),
            contradicts("45% faster", "your table shows 81% slower"),
            contradicts("2x faster", "your table shows 1.0x faster"),
        ),
    ),
    Case(
        "no numbers at all",
        "Quantization reduced the memory footprint but made generation slower on the CPU. NF4 kept the quality closest to "
        "the baseline, while FP4 became more repetitive and sometimes looped on the same phrase.",
        (),
    ),
    Case(
        "precision names, list numbering, settings and code are not claims",
        "1. I compared FP32, INT8, NF4 and FP4 (bitsandbytes 8-bit and 4-bit) with max_new_tokens=20 and a batch size of 1.\n"
        "2. The float16 variant was skipped because the CPU has no fp16 kernels, and bfloat16 was not tried.\n"
        "3. All runs used GPT-2 in 2024 with `torch.manual_seed(42)` and 3 prompts of 20 tokens each.",
        (),
    ),
    Case(
        "perplexity, with an arrow and a bound",
        "Perplexity barely changed with INT8 (21.3 → 21.5, under 1% worse), but the 4-bit formats hurt more: NF4 reached "
        "23.9 and FP4 25.2, which is about 18% higher than the FP32 baseline.",
        (
            agrees("21.3", "FP32 perplexity"),
            agrees("21.5", "INT8 perplexity"),
            agrees("under 1% worse", "INT8 vs FP32 perplexity"),
            agrees("23.9", "NF4 perplexity"),
            agrees("25.2", "FP4 perplexity"),
            agrees("about 18% higher", "FP4 vs FP32 perplexity"),
        ),
    ),
    Case(
        "a perplexity that is not in the table",
        "NF4 has a perplexity of 22.1, only slightly above FP32's 21.3. I think NF4 is therefore the best choice overall.",
        (
            contradicts("22.1", "your table shows 23.9"),
            agrees("21.3", "FP32 perplexity"),
        ),
    ),
    Case(
        "differences rather than ratios",
        "Switching to INT8 saved 3.4 MB of memory but added about 40 ms of latency per generation. NF4 saved even more "
        "memory, which matters more on small devices.",
        (
            agrees("3.4 MB", "INT8 vs FP32 memory: 3.38 MB less"),
            agrees("about 40 ms", "INT8 vs FP32 latency: 42 ms"),
        ),
    ),
    Case(
        "a fraction word that is wrong",
        "NF4 uses roughly a third of the FP32 memory. This is because each weight is stored in 4 bits instead of 32.",
        (contradicts("roughly a third", "your table shows 0.55x"),),
    ),
    Case(
        "throughput ratio with a reference after 'versus'",
        "Surprisingly there was no speedup from quantization: FP32 ran at 385 tokens/s versus 213 tokens/s for INT8, so FP32 "
        "has a 1.8x higher throughput.",
        (
            agrees("385 tokens/s", "FP32 throughput"),
            agrees("213 tokens/s", "INT8 throughput"),
            agrees("1.8x higher", "FP32 vs INT8 throughput"),
        ),
    ),
    Case(
        "settings next to results, and a percentage in the next sentence",
        "With max_new_tokens=50 and 3 prompts, FP32 averaged 0.052 s per prompt while INT8 needed 0.094 s. That is 81% more "
        "latency.",
        (
            agrees("0.052 s", "FP32 latency"),
            agrees("0.094 s", "INT8 latency"),
            agrees("81% more", "INT8 vs FP32 latency"),
        ),
    ),
    Case(
        "a markdown bullet list with arrows, signs and parentheses",
        "- **Memory:** FP32 8.01 MB → INT8 4.63 MB (−42%) → NF4 4.44 MB (−45%)\n"
        "- **Latency:** 0.052 s (FP32) vs 0.094 s (INT8), so INT8 is ~1.8× slower\n"
        "- **Perplexity:** 21.3 (FP32), 21.5 (INT8), 23.9 (NF4), 25.2 (FP4)",
        (
            agrees("8.01 MB", "FP32 memory"),
            agrees("4.63 MB", "INT8 memory"),
            agrees("−42%", "INT8 vs FP32 memory: 42% less"),
            agrees("4.44 MB", "NF4 memory"),
            agrees("−45%", "NF4 vs FP32 memory: 45% less"),
            agrees("0.052 s", "FP32 latency"),
            agrees("0.094 s", "INT8 latency"),
            agrees("~1.8× slower", "INT8 vs FP32 latency"),
            agrees("21.3", "FP32 perplexity"),
            agrees("21.5", "INT8 perplexity"),
            agrees("23.9", "NF4 perplexity"),
            agrees("25.2", "FP4 perplexity"),
        ),
    ),
    Case(
        "twice and half as words",
        "INT8 needed almost twice as long as FP32 to generate the same 20 tokens, and its throughput was roughly half. NF4 "
        "was about twice as slow as FP32 too.",
        (
            agrees("almost twice as long", "INT8 vs FP32 latency"),
            agrees("roughly half", "INT8 vs FP32 throughput"),
            contradicts("about twice as slow", "your table shows 1.4x as slow"),
        ),
    ),
    Case(
        "hypotheses are not claims",
        "In theory INT8 should be 4x smaller than FP32, but in practice the model only shrank by about 42%. On a GPU, 4-bit "
        "weights would give an 8x reduction.",
        (agrees("about 42%", "INT8 vs FP32 memory: 42% less"),),
    ),
    Case(
        "a wrong rate and a wrong percentage in one sentence",
        "INT8 generated 300 tokens per second, only 22% fewer than FP32's 385. So the slowdown is small.",
        (
            contradicts("300 tokens per second", "your table shows 213 tokens/s"),
            contradicts("only 22% fewer", "your table shows 45% fewer"),
        ),
    ),
    Case(
        "respectively",
        "Relative to FP32, INT8, NF4 and FP4 reduced memory by 42%, 45% and 45% respectively. Their perplexities were 21.5, "
        "23.9 and 25.2, and FP32, INT8 and NF4 took 52, 94 and 71 ms respectively.",
        (
            agrees("42%", "INT8 vs FP32 memory"),
            agrees("45%", "NF4 vs FP32 memory"),
            agrees("45%", "FP4 vs FP32 memory"),
            agrees("21.5", "INT8 perplexity"),
            agrees("23.9", "NF4 perplexity"),
            agrees("25.2", "FP4 perplexity"),
            agrees("52", "FP32 latency: 52 ms"),
            agrees("94", "INT8 latency: 94 ms"),
            agrees("71 ms", "NF4 latency"),
        ),
    ),
    Case(
        "two 4-bit formats compared with each other",
        "NF4 and FP4 use exactly the same memory (4.44 MB each), but FP4 is slightly faster at 69 ms vs 71 ms for NF4.",
        (
            agrees("4.44 MB", "NF4 memory"),
            agrees("69 ms", "FP4 latency"),
            agrees("71 ms", "NF4 latency"),
        ),
    ),
    Case(
        "code in backticks",
        "I measured memory with `model.get_memory_footprint() / 1024**2` and got 4.63 MB for INT8. With "
        '`bnb_4bit_quant_type="nf4"` the footprint was 4.4 MB.',
        (
            agrees("4.63 MB", "INT8 memory"),
            agrees("4.4 MB", "NF4 memory"),
        ),
    ),
    Case(
        "the wrong direction",
        "Quantization made INT8 about 40% faster than FP32 and its perplexity 5% lower. The 8-bit model is better in every way.",
        (
            contradicts("about 40% faster", "your table shows 81% slower"),
            contradicts("5% lower", "your table shows 0.94% higher"),
        ),
    ),
    Case(
        "an elided verb, and each percentage against its own reference",
        "In relative terms INT8 saves ~42% and 4-bit ~45% of the baseline, and 4-bit is only ~4% smaller than INT8. So INT8 "
        "is about 58% of the baseline and the 4-bit models about 55%.",
        (
            agrees("~42%", "INT8 vs FP32 memory: 42% less"),
            agrees("~45%", "NF4 vs FP32 memory: 45% less"),
            agrees("only ~4% smaller", "NF4 vs INT8 memory"),
            agrees("about 58%", "INT8 vs FP32 memory: 58% of FP32"),
            agrees("about 55%", "NF4 vs FP32 memory: 55% of FP32"),
        ),
    ),
    Case(
        "parts of the model, denials and bit widths",
        "The savings are not 4x or 8x, because only the linear weights are quantized. For INT8 the weights alone shrink to "
        "about 1.5 MB while the buffers stay at about 2 MB. Going from 8 to 4 bits saved only another ~0.19 MB.",
        (
            unmatched("about 1.5 MB", "it is about the weights"),
            unmatched("about 2 MB"),
            agrees("~0.19 MB", "NF4 vs INT8 memory: 0.19 MB less"),
        ),
    ),
    Case(
        "a unit declared once, and shares in parentheses",
        "Memory (MB): FP32 = 8.01, INT8 = 4.63, NF4 = 4.44. Relative to the baseline: int8 4.63 MB (57.8% of baseline), nf4 "
        "4.44 MB (55.4%).",
        (
            agrees("8.01", "FP32 memory: 8.01 MB"),
            agrees("4.63", "INT8 memory"),
            agrees("4.44", "NF4 memory"),
            agrees("4.63 MB", "INT8 memory"),
            agrees("57.8%", "INT8 vs FP32 memory: 57.8% of FP32"),
            agrees("4.44 MB", "NF4 memory"),
            agrees("55.4%", "NF4 vs FP32 memory"),
        ),
    ),
    Case(
        "fractions of a saving",
        "INT8 saves about a third of the memory, and the 4-bit formats save almost half.",
        (
            contradicts("about a third", "your table shows 42% less"),
            agrees("almost half", "NF4 vs FP32 memory: 45% less"),
        ),
    ),
    Case(
        "percent of, and a ratio of the baseline",
        "The 4-bit NF4 model needs 4.44 MiB, about 55% of the FP32 footprint, and FP32 needs 1.8x the memory of NF4.",
        (
            agrees("4.44 MiB", "NF4 memory"),
            agrees("about 55%", "NF4 vs FP32 memory: 55% of FP32"),
            agrees("1.8x", "FP32 vs NF4 memory"),
        ),
    ),
]


def _verdicts(answer: str) -> list[ClaimVerdict]:
    return check_claims(answer, FACTS)


@pytest.mark.parametrize("case", CORPUS, ids=[case.name for case in CORPUS])
def test_corpus(case: Case) -> None:
    verdicts = _verdicts(case.answer)
    found = [(v.claim.text, v.verdict) for v in verdicts]
    assert found == [(e.text, e.verdict) for e in case.claims], "\n".join(v.message for v in verdicts)
    for verdict, expected in zip(verdicts, case.claims, strict=True):
        assert expected.says in verdict.message, verdict.message
        assert verdict.claim.text == case.answer[verdict.claim.start : verdict.claim.end]
        if verdict.verdict == "contradicts":
            assert verdict.actual is not None and verdict.actual in verdict.message
        if verdict.verdict == "unmatched":
            assert verdict.actual is None


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 20
    assert {e.verdict for case in CORPUS for e in case.claims} == {"agrees", "contradicts", "unmatched"}


def test_wrong_row_names_the_row_with_that_value() -> None:
    (verdict,) = _verdicts("My INT8 model used 4.44 MB of memory.")
    assert verdict.verdict == "contradicts"
    assert verdict.actual == "4.63 MB"
    assert "4.44 MB is NF4's memory" in verdict.message
    assert verdict.labels == ("INT8",)
    assert verdict.metric == "memory"


def test_a_number_no_row_has_is_a_plain_contradiction() -> None:
    (verdict,) = _verdicts("INT8 memory is 2.72 MB.")
    assert verdict.verdict == "contradicts"
    assert verdict.message == "Your answer says 2.72 MB for INT8 memory; your table shows 4.63 MB."


def test_contradiction_reports_the_number_in_the_claims_own_unit() -> None:
    (verdict,) = _verdicts("FP32 took 80 ms per generation.")
    assert (verdict.verdict, verdict.actual) == ("contradicts", "52 ms")
    (verdict,) = _verdicts("FP32 took 0.08 s per generation.")
    assert (verdict.verdict, verdict.actual) == ("contradicts", "0.052 s")
    (verdict,) = _verdicts("FP32 needs 8.9 MiB.")
    assert (verdict.verdict, verdict.actual) == ("contradicts", "8.01 MiB")


def test_rounding_and_tolerance() -> None:
    facts = [Fact("baseline", "memory", 4.19 * MIB, "bytes"), Fact("INT8", "memory", 2.72 * MIB, "bytes")]
    verdicts = check_claims("Memory went from 4.2 MB to 2.7 MB (35% less).", facts)
    assert [(v.claim.text, v.verdict) for v in verdicts] == [("4.2 MB", "agrees"), ("2.7 MB", "agrees"), ("35% less", "agrees")]
    assert verdicts[2].labels == ("INT8", "baseline")
    verdicts = check_claims("Memory went from 4.19 MB to 2.72 MB (50% less).", facts)
    assert [v.verdict for v in verdicts] == ["agrees", "agrees", "contradicts"]
    assert "your table shows 35% less" in verdicts[2].message
    # A rounded latency agrees; one that only rounds to the same first decimal does not.
    facts = [Fact("FP32", "latency", 0.094, "s")]
    assert [v.verdict for v in check_claims("FP32 took 0.1 s.", facts)] == ["agrees"]
    assert [v.verdict for v in check_claims("FP32 took 0.1 s.", [Fact("FP32", "latency", 0.052, "s")])] == ["contradicts"]
    # Approximate words widen the tolerance.
    assert [v.verdict for v in check_claims("FP32 took 0.085 s.", facts)] == ["contradicts"]
    assert [v.verdict for v in check_claims("FP32 took roughly 0.085 s.", facts)] == ["agrees"]


def test_bounds() -> None:
    assert [v.verdict for v in _verdicts("INT8 cut memory by more than 40%.")] == ["agrees"]
    assert [v.verdict for v in _verdicts("INT8 cut memory by more than 50%.")] == ["contradicts"]
    assert [v.verdict for v in _verdicts("INT8 perplexity rose by less than 1%.")] == ["agrees"]


def test_settings_labels_and_cache() -> None:
    facts = [
        Fact("prompt length 16", "latency", 0.21, "s"),
        Fact("prompt length 128", "latency", 0.35, "s"),
        Fact("prompt length 512", "latency", 1.12, "s"),
        Fact("prompt length 16", "tokens_per_s", 152, "tokens/s"),
        Fact("prompt length 512", "tokens_per_s", 28.6, "tokens/s"),
        Fact("use_cache=True", "latency", 0.35, "s"),
        Fact("use_cache=False", "latency", 2.9, "s"),
        Fact("batch size 1", "tokens_per_s", 91, "tokens/s"),
        Fact("batch size 8", "tokens_per_s", 610, "tokens/s"),
    ]
    answer = (
        "Latency grew from 0.21 s with the 16-token prompt to 1.12 s for a prompt of 512 tokens, so roughly 5x slower. "
        "Throughput fell from 152 to 29 tokens/s as the prompt length went from 16 to 512. "
        "Without the KV cache, generation took 2.9 s instead of 0.35 s, about 8x slower. "
        "Turning the cache off made it 10 times slower. "
        "With a batch of 8 prompts we reached 610 tokens/s, 6.7 times more than with batch size 1."
    )
    verdicts = check_claims(answer, facts)
    assert [(v.claim.text, v.verdict, v.labels) for v in verdicts] == [
        ("0.21 s", "agrees", ("prompt length 16",)),
        ("1.12 s", "agrees", ("prompt length 512",)),
        ("roughly 5x slower", "agrees", ("prompt length 512", "prompt length 16")),
        ("152", "agrees", ("prompt length 16",)),
        ("29 tokens/s", "agrees", ("prompt length 512",)),
        ("2.9 s", "agrees", ("use_cache=False",)),
        ("0.35 s", "agrees", ("prompt length 128",)),
        ("about 8x slower", "agrees", ("use_cache=False", "use_cache=True")),
        ("10 times slower", "contradicts", ("use_cache=False", "use_cache=True")),
        ("610 tokens/s", "agrees", ("batch size 8",)),
        ("6.7 times more", "agrees", ("batch size 8", "batch size 1")),
    ]
    assert "your table shows 8.3x slower" in verdicts[8].message


def test_no_facts_for_the_metric() -> None:
    (verdict,) = check_claims("INT8 took 94 ms.", [Fact("INT8", "memory", 4.63 * MIB, "bytes")])
    assert verdict.verdict == "unmatched"
    assert "no latency" in verdict.message
    assert check_claims("", FACTS) == []


# --- extract_claims alone ------------------------------------------------------------------------------------------------


def _only(text: str) -> Claim:
    (claim,) = extract_claims(text)
    assert claim.text == text[claim.start : claim.end]
    return claim


@pytest.mark.parametrize(
    ("text", "claim_text", "kind", "value", "unit"),
    [
        ("It is 4.2 MB.", "4.2 MB", "absolute", 4.2 * MIB, "bytes"),
        ("It is 4.2 MiB.", "4.2 MiB", "absolute", 4.2 * MIB, "bytes"),
        ("It is 2 KiB.", "2 KiB", "absolute", 2048, "bytes"),
        ("It is 1.5 GB.", "1.5 GB", "absolute", 1.5 * 1024**3, "bytes"),
        ("It is 4,404,019 bytes.", "4,404,019 bytes", "absolute", 4404019, "bytes"),
        ("It took 52 ms.", "52 ms", "absolute", 0.052, "s"),
        ("It took 0.052s.", "0.052s", "absolute", 0.052, "s"),
        ("It took 52 milliseconds.", "52 milliseconds", "absolute", 0.052, "s"),
        ("It took 120 µs.", "120 µs", "absolute", 120e-6, "s"),
        ("It took 3 minutes.", "3 minutes", "absolute", 180, "s"),
        ("It took 12 ms/token.", "12 ms/token", "absolute", 0.012, "s/token"),
        ("It ran at 385 tokens/s.", "385 tokens/s", "absolute", 385, "tokens/s"),
        ("It ran at 385 tok/s.", "385 tok/s", "absolute", 385, "tokens/s"),
        ("It ran at 385 tokens per second.", "385 tokens per second", "absolute", 385, "tokens/s"),
        ("Its perplexity was 21.3.", "21.3", "absolute", 21.3, ""),
        ("It was 1.8x slower.", "1.8x slower", "ratio", 1.8, "x"),
        ("It was 1.8× slower.", "1.8× slower", "ratio", 1.8, "x"),
        ("It was 1.8 times slower.", "1.8 times slower", "ratio", 1.8, "x"),
        ("It used 35% less memory.", "35% less", "percent", 35, "%"),
        ("It used 35 percent less memory.", "35 percent less", "percent", 35, "%"),
    ],
)
def test_extract_units(text: str, claim_text: str, kind: str, value: float, unit: str) -> None:
    claim = _only(text)
    assert (claim.text, claim.kind, claim.unit) == (claim_text, kind, unit)
    assert claim.value == pytest.approx(value)


@pytest.mark.parametrize(
    ("text", "value", "direction", "approximate"),
    [
        ("INT8 used 35% less memory.", 35, "down", False),
        ("Memory was reduced by 35%.", 35, "down", False),
        ("A 35% reduction in memory.", 35, "down", False),
        ("Memory: -35%.", 35, "down", False),
        ("Perplexity went up by 2%.", 2, "up", False),
        ("Perplexity increased by roughly 2%.", 2, "up", True),
        ("INT8 was 35% faster.", 35, "faster", False),
        ("NF4 needs 55% of the FP32 memory.", 55, "of", False),
        ("INT8 was 1.8x slower.", 1.8, "slower", False),
        ("INT8 was 1.8x faster.", 1.8, "faster", False),
        ("NF4 is 2x smaller than FP32.", 2, "down", False),
        ("FP32 needs 1.8x the memory of NF4.", 1.8, "of", False),
        ("INT8 gave a 1.8x speedup.", 1.8, "faster", False),
        ("NF4 was about twice as slow.", 2, "slower", True),
        ("FP32 was twice as fast as INT8.", 2, "faster", True),
        ("NF4 uses half the memory.", 0.5, "of", True),
        ("NF4 uses roughly a third of the memory.", 1 / 3, "of", True),
        ("NF4 uses a quarter of the memory.", 0.25, "of", True),
        ("INT8 latency is three times as high.", 3, "up", True),
        ("Latency roughly doubled with INT8.", 2, "of", True),
        ("Memory was halved with NF4.", 0.5, "of", True),
        ("INT8 is ~1.8x slower.", 1.8, "slower", True),
        ("It is nearly 40% smaller.", 40, "down", True),
        ("It is around 40% smaller.", 40, "down", True),
        ("It is almost 40% smaller.", 40, "down", True),
    ],
)
def test_extract_directions(text: str, value: float, direction: str, approximate: bool) -> None:
    claim = _only(text)
    assert claim.kind in ("percent", "ratio")
    assert claim.value == pytest.approx(value)
    assert (claim.direction, claim.approximate) == (direction, approximate)


@pytest.mark.parametrize(
    ("text", "ratio"),
    [
        ("NF4 is 2x smaller than FP32.", 0.5),
        ("INT8 used 35% less memory.", 0.65),
        ("Perplexity went up by 2%.", 1.02),
        ("NF4 needs 55% of the FP32 memory.", 0.55),
        ("NF4 uses half the memory.", 0.5),
        ("FP32 needs 1.8x the memory of NF4.", 1.8),
        ("INT8 was 1.8x slower.", None),
        ("It took 52 ms.", None),
    ],
)
def test_implied_ratio(text: str, ratio: float | None) -> None:
    implied = _only(text).implied_ratio
    assert implied == (pytest.approx(ratio) if ratio is not None else None)


def test_extract_fraction_by_is_a_percentage() -> None:
    claim = _only("Memory was reduced by a third with INT8.")
    assert (claim.kind, claim.direction, claim.approximate) == ("percent", "down", True)
    assert claim.value == pytest.approx(100 / 3)


def test_extract_bounds_and_differences() -> None:
    claim = _only("INT8 cut memory by more than 40%.")
    assert (claim.text, claim.bound, claim.approximate) == ("more than 40%", "min", False)
    claim = _only("INT8 perplexity rose by less than 1%.")
    assert claim.bound == "max"
    claim = _only("It is a bit over 40% smaller.")
    assert (claim.bound, claim.approximate) == (None, True)
    claim = _only("Switching to INT8 saved 3.4 MB.")
    assert (claim.kind, claim.direction) == ("difference", "down")
    claim = _only("INT8 was 42 ms slower than FP32.")
    assert (claim.text, claim.kind, claim.direction) == ("42 ms slower", "difference", "slower")


def test_extract_marks_parts_of_the_model() -> None:
    claim = _only("The parameters alone shrink to about 1.5 MB.")
    assert claim.part == "parameters"
    assert _only("The total footprint (parameters + buffers) is 4.19 MB.").part == ""


def test_extract_leaves_out_denials() -> None:
    assert [c.text for c in extract_claims("It is not 2x, 3x or 4x faster, only 1.8x faster.")] == ["only 1.8x faster"]
    assert extract_claims("The reduction is far from 4x.") == []


def test_extract_lists_share_their_unit() -> None:
    claims = extract_claims("FP32, INT8 and NF4 used 8.01, 4.63 and 4.44 MB respectively.")
    assert [(c.text, c.unit, c.inherited_unit) for c in claims] == [
        ("8.01", "bytes", True),
        ("4.63", "bytes", True),
        ("4.44 MB", "bytes", False),
    ]
    assert claims[0].value == pytest.approx(8.01 * MIB)
    claims = extract_claims("Latency grew from 0.05 to 0.31 s.")
    assert [(c.text, c.value) for c in claims] == [("0.05", 0.05), ("0.31 s", 0.31)]


def test_extract_keeps_span_and_sentence() -> None:
    text = "Intro sentence.\n\nINT8 took 94 ms. FP32 took 52 ms."
    claims = extract_claims(text)
    assert [c.text for c in claims] == ["94 ms", "52 ms"]
    assert claims[1].sentence == "FP32 took 52 ms."
    assert text[claims[1].sentence_start :].startswith("FP32 took")
    assert text[claims[0].start : claims[0].end] == "94 ms"


@pytest.mark.parametrize(
    "text",
    [
        "1. Memory scaling\n2. Latency\n3) Quality",
        "Question 3 asks about the 2 prompts; see Figure 2 and Table 1.",
        "I compared FP32, INT8, NF4 and FP4, plus float16 and bfloat16.",
        "The 4-bit and 8-bit models, and the 16-bit embeddings.",
        "I used max_new_tokens=20, batch_size = 4 and a batch size of 4.",
        "I ran `model.generate(max_new_tokens=20)` and `print(f'{mem:.2f} MB')`.",
        "```python\nmemory_mb = mem / 1024**2  # 4.63 MB\n```",
        "GPT-2 has 124M parameters and 12 layers; in 2024 the lab used Python 3.11.",
        "I generated 20 tokens for 3 prompts and repeated each run 5 times and took the median.",
        "Its perplexity was computed over 50 sentences with a stride of 512.",
        "In theory INT8 should be 4x smaller, and NF4 would be 8x smaller.",
        "Each weight takes 4 bytes per parameter in FP32 and 1 byte per weight in INT8.",
        "Half precision was not supported, and double precision is too slow.",
    ],
)
def test_extract_leaves_out_non_claims(text: str) -> None:
    assert extract_claims(text) == []


def test_a_fold_claim_is_read_as_its_number_word() -> None:
    """ "twofold" and "threefold" are 2x and 3x (a "threefold" once raised KeyError and cost an honest answer its check)."""
    (twofold,) = check_claims("The INT8 run was roughly twofold slower than FP32.", FACTS)
    assert twofold.verdict == "agrees" and "1.8x slower" in twofold.message
    (threefold,) = check_claims("INT8 took threefold the latency of FP32.", FACTS)
    assert threefold.verdict == "contradicts" and "1.8x" in threefold.message


def test_honest_answers_from_outsiders_are_never_contradicted() -> None:
    """Round 17's writers quoted their own saved table (FP32 8.01 MB / 0.44 s, INT8 4.63 MB / 0.36 s, NF4 and FP4
    4.44 MB): readings that put a number on the wrong row, metric or reference, or a number about something else,
    are unmatched at worst (precision first), while a plain wrong number beside its row still contradicts."""
    facts = [
        Fact("FP32 (Baseline CPU)", "memory", 8.01 * 1024**2, "bytes"),
        Fact("FP32 (Baseline CPU)", "latency", 0.4404, "s"),
        Fact("INT8 (bitsandbytes)", "memory", 4.63 * 1024**2, "bytes"),
        Fact("INT8 (bitsandbytes)", "latency", 0.3642, "s"),
        Fact("NF4 (bitsandbytes)", "memory", 4.44 * 1024**2, "bytes"),
        Fact("NF4 (bitsandbytes)", "latency", 1.0447, "s"),
        Fact("FP4 (bitsandbytes)", "memory", 4.44 * 1024**2, "bytes"),
        Fact("FP4 (bitsandbytes)", "latency", 0.3657, "s"),
    ]
    honest = [
        "In my run the FP32 baseline measured 8.01 MB, INT8 4.63 MB and both 4-bit variants 4.44 MB. That is a 42 % cut "
        "for INT8 (1.73x smaller) and 45 % for NF4/FP4 (1.80x smaller); going from 8-bit to 4-bit only saved another "
        "0.19 MB.",
        "The baseline (FP32, CPU) took 8.01 MB; INT8 4.63 MB (-3.38 MB, -42 %), NF4 and FP4 4.44 MB each (-3.57 MB, -45 %).",
        "Quantization bought ~42-45 % memory with no visible quality loss, while latency relative to the baseline was "
        "0.8x for INT8, i.e. no dependable speed gain on a CPU.",
        "Relative to the baseline that is 57.8 % of the size for INT8 and 55.5 % for both 4-bit formats, i.e. savings of "
        "42 % and 45 %. The gap between 8-bit and 4-bit is small (0.19 MB) because only the block linear layers (1.5 MB "
        "at FP32) are quantized.",
        "The timings moved a lot between runs (an earlier run gave about 0.03 s for FP32 and 0.07 s for INT8).",
    ]
    for answer in honest:
        verdicts = check_claims(answer, facts)
        assert verdicts and all(v.verdict != "contradicts" for v in verdicts), [v.message for v in verdicts]
    (wrong,) = check_claims("My INT8 model used 6.2 MB of memory.", facts)
    assert wrong.verdict == "contradicts" and wrong.actual == "4.63 MB"
