"""Written claims vs the notebook's own numbers.

Students quantify their results in written answers: "memory went from 8.01 MB to 4.63 MB (42% less)", "INT8 was 1.8x
slower", "throughput rose to about 400 tokens/s", "NF4 uses roughly half the FP32 memory". :func:`extract_claims` finds
those quantitative claims in an answer's text, and :func:`check_claims` holds each one against the notebook's own numbers,
given as :class:`Fact` values (one per row and metric of its results table): the claim agrees with them, contradicts them
(the message names the number the notebook produced, in the claim's own unit), or matches none of them.

What counts as a claim:

* an absolute number with a unit: sizes (B, KB, KiB, MB, MiB, GB, GiB: bytes), durations (µs, ms, s, min: seconds),
  durations per token (ms/token), rates (tokens/s, tok/s, tokens per second), and plain numbers in a sentence that names
  a dimensionless metric ("perplexity rose from 21.3 to 25.2");
* a percentage (35%, 35 percent) and its direction ("35% less", "reduced by 35%", "(-35%)", "35% of the FP32 memory");
* a ratio (1.8x, 1.8×, 1.8 times, twice, half, a third, a quarter, doubled, halved) and its direction ("1.8x slower",
  "2x smaller", "half the memory", "twice as fast");
* a difference ("3.4 MB less", "0.04 s slower", "saved 3.4 MB").

A unit written once serves a list ("8.01, 4.63 and 4.44 MB", "Memory (MB): FP32 = 8.01, INT8 = 4.63"), and a
direction serves the claims that leave it out ("NF4 went up by 12% and FP4 by 18%").

Numbers that are not claims about results are left out: list and question numbering, years, the digits of precision
and model names (FP32, INT8, 4-bit, float16, GPT-2), settings ("max_new_tokens=20", "batch size 4"), counts ("20
tokens", "3 runs"), formulas and scores ("32 / latency", "25 / 25"), sizes of hardware or of one weight ("16 GB of
RAM", "4 bytes per weight"), code in backticks, denials ("not 4x", "far from 8x") and numbers in a hypothetical clause
("the 4x the bit widths suggest", "INT8 should be 4x smaller").

Which rows a claim is about comes from the labels its sentence names (case-insensitive and tolerant: "int8", "8-bit",
"the INT8 model"; "fp32", "float32", "full precision", "baseline"; "nf4", "4-bit NF4"; "fp4"), attached to the claim by
the sentence's layout: "INT8 (4.63 MB)", "4.63 MB with INT8", "INT8: 4.63 MB", "from 8.01 MB in FP32 to 4.63 MB",
"FP32, INT8 and NF4 used 8.01, 4.63 and 4.44 MB respectively". A relative claim compares its row with the row marked
by "than", "compared to", "vs", "relative to" or "from" ("from FP32 to INT8", "INT8 vs FP32", "INT8 ... compared to
FP32"), or else with the baseline (the row labelled baseline or FP32, or the first row of the subject's setting:
"batch size 1" for "batch size 8", "use_cache=True" for "use_cache=False").

Tolerance: 5% of the notebook's number, or the claim's own rounding ("0.1 s" for 0.094 s, "40%" for 42%); 15% for
approximate words and number words ("about", "~", "roughly half"). A number that agrees only by the tolerance while
another row has exactly that number ("INT8: 4.44 MB" when NF4 has 4.44 MB and INT8 4.63 MB) contradicts. A claim that
names no row agrees if any row (or pair of rows) bears it out, else it is unmatched; one about a part of the model
("the weights alone shrink to 1.5 MB") is unmatched rather than contradicted when no row bears it out.

Pure logic: no kernels, no I/O, the standard library only.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

ClaimKind = Literal["absolute", "percent", "ratio", "difference"]
Direction = Literal["up", "down", "faster", "slower", "better", "worse", "of"]
Bound = Literal["min", "max"]
VerdictKind = Literal["agrees", "contradicts", "unmatched"]

EXACT_TOLERANCE = 0.05
"""Relative tolerance of a number that looks exact ("4.63 MB", "42%")."""
APPROX_TOLERANCE = 0.15
"""Relative tolerance of a number qualified as approximate ("about", "roughly", "~") and of number words ("half")."""
ROUNDING_LIMIT = 0.35
"""A number that the notebook's number rounds to (0.094 s -> "0.1 s") agrees if it is off by no more than this, relatively."""


@dataclass(frozen=True)
class Fact:
    """One number of the notebook's results: a row (``label``: "INT8", "batch size 4"), a metric ("memory", "latency",
    "tokens_per_s", "perplexity"), its value, and its unit: "bytes", "s", "tokens/s", "s/token" or "" (dimensionless)."""

    label: str
    metric: str
    value: float
    unit: str


@dataclass(frozen=True)
class Claim:
    """One quantitative claim of a written answer.

    ``text`` is the claim as written (``text == answer[start:end]``), with its qualifier and direction word
    ("about 4.6 MB", "42% less", "1.8x slower"). ``value`` is normalised: bytes, seconds, seconds per token, tokens per
    second or a plain number for ``kind`` "absolute" and "difference" (``unit`` "bytes", "s", "s/token", "tokens/s",
    ""); the percentage for "percent" (``unit`` "%": 35.0 for 35%); the factor for "ratio" (``unit`` "x": 1.8, 0.5
    for "half"). ``stated`` is the number as written, in ``unit_text`` ("MB", "ms", "%", "x"); ``scales`` are the
    multipliers from ``unit_text`` to ``unit`` that the claim may mean, the first the likeliest (MB: 1024**2, as the
    course defines it, or 10**6). ``decimals`` is how precisely it was written (-1: a round number of tens; None: a
    number word). ``direction`` is which way a relative claim goes ("down": less, smaller, reduced; "up"; "faster";
    "slower"; "better"; "worse"; "of": "58% of", "half the"), ``direction_word`` the word that says so. ``metric`` is the
    metric named next to the claim ("memory", "latency", "throughput", "per_token", "perplexity", "speed" for a speed
    word that may mean latency or throughput, or another metric's name), or None. ``part`` is the part of the model
    its clause is about ("weights", "buffers", "embeddings"), if any: a number about a part, not in the results table,
    is unmatched rather than contradicted. ``inherited_unit``: the unit was written after a later number ("8.01, 4.63
    and 4.44 MB") or declared ("Memory (MB): ...").
    """

    text: str
    start: int
    end: int
    value: float
    unit: str
    kind: ClaimKind
    stated: float = 0.0
    unit_text: str = ""
    scales: tuple[float, ...] = (1.0,)
    decimals: int | None = 0
    direction: Direction | None = None
    direction_word: str = ""
    approximate: bool = False
    bound: Bound | None = None
    metric: str | None = None
    inherited_unit: bool = False
    part: str = ""
    sentence: str = ""
    sentence_start: int = 0

    @property
    def in_sentence(self) -> tuple[int, int]:
        """Where the claim lies in its sentence (start, end)."""
        return self.start - self.sentence_start, self.end - self.sentence_start

    @property
    def implied_ratio(self) -> float | None:
        """The ratio subject / reference that a relative claim states, where its words fix it: "35% less" -> 0.65,
        "35% more" -> 1.35, "58% of" -> 0.58, "2x smaller" -> 0.5, "1.8x larger" -> 1.8, "half the" -> 0.5. None for
        absolute claims, differences, and speed or quality words, whose ratio depends on the metric ("1.8x faster" is
        latency / 1.8 but throughput x 1.8)."""
        if self.kind == "percent":
            share = self.value / 100
            return {"of": share, "down": 1 - share, "up": 1 + share}.get(str(self.direction))
        if self.kind == "ratio" and self.value > 0:
            return {"of": self.value, "up": self.value, "down": 1 / self.value}.get(str(self.direction))
        return None


@dataclass(frozen=True)
class ClaimVerdict:
    """A claim held against the notebook's facts: ``agrees``, ``contradicts`` (``actual`` is what the notebook produced,
    formatted like the claim: "4.63 MB", "45% less", "1.8x slower") or ``unmatched`` (no fact of its metric, unit and
    rows). ``labels`` are the rows the claim was compared with (subject first, then the reference of a relative claim)
    and ``metric`` the fact metric."""

    claim: Claim
    verdict: VerdictKind
    message: str
    actual: str | None
    labels: tuple[str, ...] = ()
    metric: str | None = None


# --- Text preparation ---------------------------------------------------------------------------------------------------

_CODE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)|`[^`\n]*`|</?[A-Za-z][^>\n]*>|https?://\S+", re.S)
_ABBREVIATIONS = frozenset({"e.g", "i.e", "vs", "approx", "ca", "cf", "fig", "no", "resp", "al", "eq", "ex", "incl"})


def _mask(text: str) -> str:
    """``text`` with code (backticks, fences), HTML tags and URLs blanked out, offsets kept."""
    return _CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def _sentence_spans(masked: str) -> list[tuple[int, int]]:
    """The (start, end) of each sentence: split at . ! ? before white space (not after abbreviations), at blank lines,
    and before list items, headings, quotes and table rows."""
    cuts = {0, len(masked)}
    for m in re.finditer(r"[.!?]+(?=\s)", masked):
        before = re.search(r"([A-Za-z][A-Za-z.]*)$", masked[max(0, m.start() - 12) : m.start()])
        if m.group() == "." and before and before.group(1).lower().rstrip(".") in _ABBREVIATIONS:
            continue
        cuts.add(m.end())
    for m in re.finditer(r"\n[ \t]*(?=\n|[-*+•][ \t]|\d+[.)][ \t]|#|>|\|)", masked):
        cuts.add(m.start())
    for m in re.finditer(r"\|[ \t]*\n", masked):
        cuts.add(m.end())
    spans = []
    ordered = sorted(cuts)
    for start, end in itertools.pairwise(ordered):
        piece = masked[start:end]
        stripped = piece.strip()
        if stripped:
            offset = start + (len(piece) - len(piece.lstrip()))
            spans.append((offset, offset + len(stripped)))
    return spans


_CLAUSE_BREAK = re.compile(r";|,(?=\s)|\s(?:but|while|whereas|although|though|however|yet)\b|\s[—–-]\s|—", re.I)


def _clause_spans(masked: str, start: int, end: int, protected: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The clauses of the sentence ``masked[start:end]``: split at ; , and but/while/whereas/although, except inside
    parentheses and ``protected`` spans (lists of labels or numbers)."""
    cuts = [start]
    depth, counted = 0, start
    for m in _CLAUSE_BREAK.finditer(masked, start, end):
        depth += masked.count("(", counted, m.start()) - masked.count(")", counted, m.start())
        counted = m.start()
        if depth > 0 or any(p0 <= m.start() < p1 for p0, p1 in protected):
            continue  # inside parentheses ("(INT8, about 3x)") or a list
        cuts.append(m.start())
    cuts.append(end)
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]


def _clause_of(clauses: Sequence[tuple[int, int]], position: int) -> tuple[int, int]:
    """The clause holding ``position``."""
    for clause in clauses:
        if clause[0] <= position < clause[1]:
            return clause
    return clauses[-1]


# --- Numbers and units --------------------------------------------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.,/])([-+−]?)(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?!\d)")

_KIB, _MIB, _GIB = 1024.0, 1024.0**2, 1024.0**3


@dataclass(frozen=True)
class _UnitSpec:
    """A unit as written after a number: its pattern, the normalised unit, the multipliers to it, and how to show it."""

    pattern: re.Pattern[str]
    unit: str
    scales: tuple[float, ...]
    display: str


def _spec(pattern: str, unit: str, scales: tuple[float, ...], display: str, flags: int = re.I) -> _UnitSpec:
    """A :class:`_UnitSpec`, its pattern compiled (case-insensitive unless ``flags`` say otherwise)."""
    return _UnitSpec(re.compile(pattern, flags), unit, scales, display)


_UNITS: tuple[_UnitSpec, ...] = (
    _spec(r"\s?(?:ms|msec|milliseconds?)\s?(?:/|per)\s?(?:new\s)?tok(?:en)?s?\b", "s/token", (1e-3,), "ms/token"),
    _spec(r"\s?(?:s|sec|secs|seconds?)\s?(?:/|per)\s?(?:new\s)?tok(?:en)?\b", "s/token", (1.0,), "s/token"),
    _spec(r"\s?(?:new\s+)?(?:tokens?|toks?|tk|t)\s?/\s?(?:s|sec|second)\b", "tokens/s", (1.0,), "tokens/s"),
    _spec(r"\s?(?:new\s+)?(?:tokens?|toks?)\s+(?:per|a|each)\s+(?:s|sec|second)\b", "tokens/s", (1.0,), "tokens/s"),
    _spec(r"\s?tps\b", "tokens/s", (1.0,), "tokens/s"),
    _spec(r"\s?%", "%", (1.0,), "%"),
    _spec(r"\s?per\s?cent\b", "%", (1.0,), "%"),
    _spec(r"\s?(?:[x×]|\$?\\times\$?)(?![A-Za-z0-9])(?!\s*\d)", "x", (1.0,), "x"),
    _spec(r"-?fold\b", "x", (1.0,), "x"),
    _spec(r"\s+times\b", "x", (1.0,), "x"),
    _spec(r"\s?KiB\b", "bytes", (_KIB,), "KiB"),
    _spec(r"\s?MiB\b", "bytes", (_MIB,), "MiB"),
    _spec(r"\s?GiB\b", "bytes", (_GIB,), "GiB"),
    _spec(r"\s?(?:KB|kilobytes?)\b", "bytes", (_KIB, 1e3), "KB"),
    _spec(r"\s?(?:MB|megabytes?)\b", "bytes", (_MIB, 1e6), "MB"),
    _spec(r"\s?(?:GB|gigabytes?)\b", "bytes", (_GIB, 1e9), "GB"),
    _spec(r"\s?bytes?\b", "bytes", (1.0,), "bytes"),
    _spec(r"\s?B\b(?!\s*(?:param|model|-))", "bytes", (1.0,), "B", 0),
    _spec(r"\s?(?:µs|μs|us|microseconds?)\b", "s", (1e-6,), "µs"),
    _spec(r"\s?(?:ms|msec|milliseconds?)\b", "s", (1e-3,), "ms"),
    _spec(r"\s?(?:s|sec|secs|seconds?)\b(?!['’])", "s", (1.0,), "s"),
    _spec(r"\s?(?:min|mins|minutes?)\b", "s", (60.0,), "min"),
)

_COMPARATIVE_AFTER_TIMES = re.compile(
    r"\s+(?:as|more|less|fewer|slower|faster|larger|bigger|smaller|higher|lower|longer|shorter|quicker|greater|the|that|"
    r"what|its|their|[A-Za-z0-9]+['’]s|over|compared|relative)\b",
    re.I,
)
_NOT_A_COMPARISON_AFTER = re.compile(r"\s*(?:[.,;:!?)\]]|$|and\b|in\s+a\s+row|per\b|each\b|to\b|with\b|before\b|for\b)", re.I)

_WORD_NUMBERS: tuple[tuple[str, float, str], ...] = (
    (r"twice", 2.0, "ratio"),
    (r"doubl(?:ed|es|ing)", 2.0, "verb"),
    (r"double(?!\s*-?\s*(?:precision|quant))", 2.0, "ratio"),
    (r"tripl(?:ed|es|ing)", 3.0, "verb"),
    (r"triple", 3.0, "ratio"),
    (r"quadrupl(?:ed|es|ing)", 4.0, "verb"),
    (r"halv(?:ed|es|ing)", 0.5, "verb"),
    (r"(?:one[\s-])?half(?![\s-]*precision)(?![\s-]*(?:float|floats|the\s+precision))", 0.5, "fraction"),
    (r"(?:a|one)[\s-]third", 1 / 3, "fraction"),
    (r"two[\s-]thirds", 2 / 3, "fraction"),
    (r"(?:a|one)[\s-](?:quarter|fourth)", 0.25, "fraction"),
    (r"three[\s-]quarters", 0.75, "fraction"),
    (r"(?:a|one)[\s-]fifth", 0.2, "fraction"),
    (r"(?:a|one)[\s-]tenth", 0.1, "fraction"),
    (r"(?:two|three|four|five|six|seven|eight|nine|ten)\s+times", 0.0, "times"),
    (r"(?:two|three|four|five|ten)fold", 0.0, "fold"),
)
_WORD_VALUES = {
    "two": 2.0,
    "three": 3.0,
    "four": 4.0,
    "five": 5.0,
    "six": 6.0,
    "seven": 7.0,
    "eight": 8.0,
    "nine": 9.0,
    "ten": 10.0,
}
_WORD_VALUE = re.compile("|".join(_WORD_VALUES))  # the number word a "three times" or "threefold" starts with
_WORD_NUMBER = re.compile(r"\b(?:" + "|".join(f"(?P<w{i}>{p})" for i, (p, _, _) in enumerate(_WORD_NUMBERS)) + r")\b", re.I)

_COUNT_FOLLOWERS = frozenset(
    {
        "for", "with", "in", "on", "at", "to", "and", "or", "vs", "versus", "from", "than", "when", "under", "while",
        "whereas", "but", "after", "before", "compared", "respectively", "which", "is", "was", "were", "are", "so", "as",
        "by", "against", "relative", "i", "we", "it", "this", "that", "the", "a", "an", "using", "whilst", "where",
        "though", "although", "meaning", "means", "i.e", "e.g", "if", "per",
    }
)  # fmt: skip
_SETTING_BEFORE = re.compile(
    r"(?:\b(?:batch(?:[\s_-]?size)?|bs|max[\s_]new[\s_]tokens|new\s+tokens|prompt(?:[\s_-]?len(?:gth)?)?|len(?:gth)?|"
    r"seq(?:uence)?(?:[\s_-]?len(?:gth)?)?|context(?:\s+len(?:gth)?)?|seed|top[\s_-]?[kp]|temperature|temp|beams?|"
    r"num[\s_]beams|steps?|epochs?|runs?|layers?|heads?|group[\s_-]?size|block[\s_-]?size|rank|dim(?:ension)?|prompts?|"
    r"question|q|part|section|exercise|task|cell|figure|fig\.?|table|row|column|col|line|page|chapter|version|v|"
    r"python|torch|level|example|sample|trial|item|point|option|case|experiment|iteration|repeat(?:s|ed)?|warm-?ups?|"
    r"stride|window|chunk(?:[\s_-]?size)?|max[\s_-]?length)"
    r"\s*(?:size\s*)?(?:=|:|of|is|was|#|no\.?)?\s*|[=#]\s*)$",
    re.I,
)
_HYPOTHETICAL = re.compile(
    r"\b(?:expect(?:s|ed)?|theor(?:y|etical|etically)|ideal(?:ly)?|would|should|could|might|suggests?|nominal(?:ly)?|"
    r"naive(?:ly)?|predicted|predicts?|in\s+principle|if)\b",
    re.I,
)
_NOT_HYPOTHETICAL = re.compile(r"\b(?:as|than)\s+(?:i\s+|we\s+)?expected\b", re.I)
_HARDWARE_AFTER = re.compile(
    r"\s*(?:of\s+)?(?:system\s+|gpu\s+|unified\s+|total\s+|free\s+)?(?:ram|vram|dram|hbm|gpu|disk|storage|ssd|swap)\b", re.I
)
_PER_WEIGHT_AFTER = re.compile(r"\s*(?:per|/|each|a)\s*(?:weight|param(?:eter)?|value|element|entry)", re.I)

_APPROX_QUALIFIERS = (
    r"about|around|roughly|approximately|approx\.?|nearly|almost|close\s+to|circa|ca\.|some|~|≈|"
    r"just\s+(?:under|over|below|above|shy\s+of)|(?:a\s+(?:bit|little)|slightly)\s+(?:over|under|more\s+than|less\s+than|above|below)|"
    r"on\s+the\s+order\s+of|in\s+the\s+region\s+of"
)
_MIN_QUALIFIERS = r"more\s+than|greater\s+than|over|above|at\s+least|upwards\s+of|well\s+over|(?<![-=])>=?|≥"
_MAX_QUALIFIERS = r"less\s+than|fewer\s+than|under|below|at\s+most|up\s+to|no\s+more\s+than|well\s+under|<=?(?![-=])|≤"
_NEUTRAL_QUALIFIERS = r"only|just|merely|a\s+mere|an?|by|of"
_QUALIFIER_AT_END = re.compile(
    rf"(?:(?<![\w])(?P<approx>{_APPROX_QUALIFIERS})|(?<![\w])(?P<min>{_MIN_QUALIFIERS})|(?<![\w])(?P<max>{_MAX_QUALIFIERS})"
    rf"|(?<![\w])(?P<neutral>{_NEUTRAL_QUALIFIERS}))\s*$",
    re.I,
)


@dataclass
class _Num:
    """A number of the text, its unit once read (None: none), and what was read around it."""

    start: int
    end: int
    stated: float
    decimals: int | None
    sign: str = ""
    unit: str | None = None
    scales: tuple[float, ...] = (1.0,)
    display: str = ""
    unit_end: int = 0
    inherited: bool = False
    word: str = ""  # "ratio", "verb", "fraction", "times", "fold" for a number word


def _parse(number: str) -> tuple[float, int]:
    """A written number's value and its precision (decimals; -1 for a round number of tens)."""
    clean = number.replace(",", "")
    value = float(clean)
    if "." in clean:
        return value, len(clean.split(".", 1)[1])
    digits = clean.lstrip("0")
    return value, (-1 if value >= 20 and digits.endswith("0") else 0)


def _read_unit(masked: str, num: _Num) -> bool:
    """Read the unit after ``num`` (setting its fields); False when the number is not a claim (followed by "-bit", a
    letter that is no unit, or "times" that compares nothing)."""
    rest = masked[num.end : num.end + 60]
    if re.match(
        r"\s?-?\s?bits?\b|\.\d|:\d|['’]?s\b(?=\s+(?:model|era))|\s*/\s*(?:[A-Za-z_(]|\d+\b(?!\s*(?:%|[x×]|[KMG]i?B|ms|s\b)))",
        rest,
        re.I,
    ):
        return False  # "4-bit", "4.57.1", "10:30", "32 / latency", "25 / 25"
    for spec in _UNITS:
        m = spec.pattern.match(rest)
        if not m:
            continue
        if spec.display == "x" and m.group().strip().lower() == "times":
            after = rest[m.end() :]
            if _NOT_A_COMPARISON_AFTER.match(after) or not _COMPARATIVE_AFTER_TIMES.match(after):
                return False
        if spec.unit == "bytes" and (_PER_WEIGHT_AFTER.match(rest[m.end() :]) or _HARDWARE_AFTER.match(rest[m.end() :])):
            return False  # "4 bytes per weight", "16 GB of RAM": not the model's footprint
        if spec.display == "s" and m.group() == "s" and 1900 <= num.stated <= 2100:
            return False  # the 2020s
        num.unit, num.scales, num.display, num.unit_end = spec.unit, spec.scales, spec.display, num.end + m.end()
        return True
    if re.match(r"[A-Za-z]", rest):
        return False
    num.unit_end = num.end
    return True


def _excluded_before(masked: str, start: int, line_start: int) -> bool:
    """Whether the number at ``start`` is numbering or part of a name: list numbering, GPT-2, #3."""
    before = masked[line_start:start]
    after = masked[start : start + 12]
    if re.fullmatch(r"[ \t]*(?:[#>*_]+[ \t]*)*\(?", before) and re.match(r"\d+[.)](?:\s|$)", after):
        return True
    if re.search(r"[A-Za-z][-‐]$", before) or re.search(r"[#]$", before):
        return True
    return bool(re.search(r"\(\s*$", before) and re.match(r"\d{1,2}\)", after))


def _numbers(masked: str) -> list[_Num]:
    """The numbers of ``masked`` that may be claims, with their units (inherited along lists: "8.01, 4.63 and 4.44 MB")."""
    found: list[_Num] = []
    for m in _NUMBER.finditer(masked):
        start = m.start(1) if m.group(1) else m.start(2)
        line_start = masked.rfind("\n", 0, start) + 1
        if _excluded_before(masked, m.start(2), line_start):
            continue
        stated, decimals = _parse(m.group(2))
        num = _Num(start=start, end=m.end(2), stated=stated, decimals=decimals, sign=m.group(1))
        if not _read_unit(masked, num):
            continue
        found.append(num)
    for m in _WORD_NUMBER.finditer(masked):
        kind = next(_WORD_NUMBERS[i][2] for i in range(len(_WORD_NUMBERS)) if m.group(f"w{i}"))
        value = next(_WORD_NUMBERS[i][1] for i in range(len(_WORD_NUMBERS)) if m.group(f"w{i}"))
        if kind in ("times", "fold"):
            value = _WORD_VALUES[_WORD_VALUE.match(m.group().lower()).group()]  # type: ignore[union-attr]
        after = masked[m.end() : m.end() + 40]
        if kind in ("ratio", "times") and (_NOT_A_COMPARISON_AFTER.match(after) and not re.match(r"\s*[.,;)]", after)):
            continue
        if kind == "times" and not _COMPARATIVE_AFTER_TIMES.match(after):
            continue
        if kind == "fraction" and not re.match(r"\s+(?:of|the|as|its|their|that|what)\b|\s*[.,;)]|\s*$", after, re.I):
            before = masked[max(0, m.start() - 30) : m.start()]
            if not re.search(
                r"\b(?:by|in)\s+(?:(?:about|roughly|around|almost|nearly|approximately|over|more\s+than)\s+)?$", before
            ):
                continue
        found.append(
            _Num(start=m.start(), end=m.end(), stated=value, decimals=None, unit="x", display="x", unit_end=m.end(), word=kind)
        )
    found.sort(key=lambda n: n.start)
    _inherit_units(masked, found)
    return found


_DECLARED_UNIT = re.compile(r"[(\[]\s*(?:in\s+)?([A-Za-z/%µ]+)\s*[)\]]")


def _declared_unit(masked: str, start: int, end: int, numbers: Sequence[_Num]) -> None:
    """Give the bare numbers of a sentence the one unit it declares before them: "Memory (MB): FP32 = 8.01, INT8 =
    4.63", "Latency [s]: 0.052 for FP32"."""
    declared = []
    for m in _DECLARED_UNIT.finditer(masked, start, end):
        spec = next(
            (u for u in _UNITS if u.unit not in ("%", "x") and u.display != "B" and u.pattern.fullmatch(m.group(1))), None
        )
        if spec is not None:
            declared.append((m.end(), spec))
    if len({spec.display for _, spec in declared}) != 1:
        return
    after, spec = declared[0]
    for num in numbers:
        before = masked[max(start, num.start - 30) : num.start]
        setting = re.search(r"\w_\w*\s*=\s*$", before) or _SETTING_BEFORE.search(re.sub(r"[A-Za-z0-9]+\s*=\s*$", "", before))
        if num.unit is None and not num.word and num.start > after and not setting:
            num.unit, num.scales, num.display, num.inherited = spec.unit, spec.scales, spec.display, True


_ELLIPSIS = re.compile(r"[^\d;.,]{0,30}?\s*,?\s*\b(?:and|while|whereas|vs\.?|versus)\s+(?:[^\d;.]|\d+[\s-]?bits?\b){0,40}", re.I)
_LIST_SEPARATOR = re.compile(
    r"\s*(?:,\s*(?:and\s+|or\s+)?|and\s+|or\s+|to\s+|→\s*|->\s*|=>\s*|/\s*|[-–]\s*|vs\.?\s+|versus\s+)"
    r"(?:(?:about|roughly|around|approximately|only|just)\s+|~\s*)?",
    re.I,
)


def _inherit_units(masked: str, numbers: list[_Num]) -> None:
    """Give a bare number the unit of the number it is listed with: "8.01, 4.63 and 4.44 MB", "from 0.05 to 0.31 s"."""
    for i in range(len(numbers) - 2, -1, -1):
        num, following = numbers[i], numbers[i + 1]
        if num.unit is not None or following.unit is None or num.word or following.word or following.sign:
            continue
        gap = masked[num.end : following.start]
        if following.unit in ("%", "x") and _direction_after(masked, following.unit_end, following.unit_end + 30, "percent")[0]:
            continue  # "25.2, about 18% higher": a value, then a change
        if _LIST_SEPARATOR.fullmatch(gap) and not re.match(r"\s*,\s*(?:about|roughly|around|approximately|~)", gap):
            num.unit, num.scales, num.display, num.inherited = following.unit, following.scales, following.display, True


# --- Words around a claim -----------------------------------------------------------------------------------------------

_DOWN = frozenset(
    {
        "less", "lower", "lowered", "lowering", "lowers", "smaller", "fewer", "reduction", "reductions", "reduce",
        "reduced", "reduces", "reducing", "decrease", "decreased", "decreases", "decreasing", "drop", "dropped", "drops",
        "dropping", "fell", "fall", "falls", "falling", "decline", "declined", "declines", "cut", "cuts", "cutting",
        "saving", "savings", "save", "saves", "saved", "shrink", "shrinks", "shrank", "shrunk", "shrinking", "shrinkage",
        "lighter", "shorter", "diminished", "smallest",
    }
)  # fmt: skip
_UP = frozenset(
    {
        "more", "higher", "larger", "bigger", "greater", "increase", "increased", "increases", "increasing", "grew",
        "grow", "grows", "growing", "growth", "rose", "rise", "rises", "rising", "raised", "jump", "jumped", "jumps",
        "longer", "heavier", "extra", "added", "climbed", "inflated", "overhead", "gain", "gains", "gained", "boost",
        "boosted",
    }
)  # fmt: skip
_FASTER = frozenset(
    {
        "faster", "quicker", "speedup", "speedups", "speed-up", "speed-ups", "accelerated", "acceleration",
    }
)  # fmt: skip
_SLOWER = frozenset(
    {
        "slower", "slowdown", "slow-down", "slowdowns",
    }
)  # fmt: skip
_BETTER = frozenset(
    {
        "better", "improved", "improvement", "improves", "improving",
    }
)  # fmt: skip
_WORSE = frozenset(
    {
        "worse", "hit", "penalty", "degraded", "degradation", "degrades", "deteriorated", "deterioration", "regressed", "regression",
    }
)  # fmt: skip
_ANTONYMS = {
    "less": "more", "lower": "higher", "smaller": "larger", "fewer": "more", "reduction": "increase", "faster": "slower",
    "quicker": "slower", "speedup": "slowdown", "better": "worse", "improvement": "degradation", "shorter": "longer",
    "lighter": "heavier", "savings": "increase", "saving": "increase", "drop": "rise", "decrease": "increase",
}  # fmt: skip
_ANTONYMS.update({v: k for k, v in list(_ANTONYMS.items()) if v not in _ANTONYMS})
_ANTONYMS.update({"more": "less", "higher": "lower", "larger": "smaller", "bigger": "smaller", "greater": "smaller"})
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|[.,;:!?()]")


def _word_direction(words: Sequence[str], i: int) -> Direction | None:
    """The direction word ``words[i]`` says, reading phrases: "slowed down", "sped up", "went up"."""
    word = words[i].lower()
    following = words[i + 1].lower() if i + 1 < len(words) else ""
    previous = words[i - 1].lower() if i > 0 else ""
    if word in ("slowed", "slows", "slow", "slowing") and following == "down":
        return "slower"
    if word in ("sped", "speeds", "speed", "speeding") and following == "up":
        return "faster"
    if word in ("up", "down"):
        if previous in ("slowed", "slows", "slow", "slowing"):
            return "slower"
        if previous in ("sped", "speeds", "speed", "speeding"):
            return "faster"
        if previous in ("went", "go", "goes", "gone", "going", "is", "was", "were", "are", "been"):
            return "up" if word == "up" else "down"
        return None
    if word in _DOWN:
        return "down"
    if word in _UP:
        return "up"
    if word in _FASTER:
        return "faster"
    if word in _SLOWER:
        return "slower"
    if word in _BETTER:
        return "better"
    if word in _WORSE:
        return "worse"
    return None


_AS_ADJECTIVE = {
    "fast": "faster", "quick": "faster", "quickly": "faster", "slow": "slower", "slowly": "slower", "long": "slower",
    "much": "up", "many": "up", "large": "up", "big": "up", "high": "up", "heavy": "up", "great": "up", "small": "of",
    "little": "of", "low": "of", "few": "of", "light": "of", "short": "of",
}  # fmt: skip


def _direction_after(masked: str, start: int, end: int, kind: str) -> tuple[Direction | None, str, int]:
    """The direction word within three words after a number ("42% less", "1.8x slower", "twice as fast", "58% of"):
    (direction, word, end of the word), or (None, "", start)."""
    words = [(m.group(), m.start(), m.end()) for m in _WORD.finditer(masked, start, end)]
    tokens = [w for w, _, _ in words]
    if not words:
        return None, "", start
    first = tokens[0].lower()
    if first == "as" and len(tokens) > 1 and tokens[1].lower() in _AS_ADJECTIVE:
        direction: Direction = _AS_ADJECTIVE[tokens[1].lower()]  # type: ignore[assignment]
        return direction, f"as {tokens[1]}", start + words[1][2] - start
    if kind == "percent" and first == "of":
        return "of", "", start
    if kind == "ratio" and (first in ("the", "that", "what", "its", "their", "of") or re.match(r".+['’]s$", first)):
        return "of", "", start
    for i, (word, _, word_end) in enumerate(words[:3]):
        if word in ".,;:!?()":
            break
        if word.lower() in ("than", "but", "and", "or", "while", "vs", "versus"):
            break
        direction_found = _word_direction(tokens, i)
        if direction_found is not None:
            return direction_found, word, word_end
    return None, "", start


_CLAIM_UNIT_AFTER = r"\s?(?:%|[x×](?![A-Za-z])|times\b|percent\b|[KMG]i?B\b|ms\b|s\b|sec|tok)"


def _direction_before(masked: str, start: int, end: int) -> tuple[Direction | None, str]:
    """The nearest direction word among the six words before a number, within its clause and after any other number:
    "reduced memory by 42%", "a drop of 42%", "went up by 2%"."""
    numbers = [n for n in _NUMBER.finditer(masked, start, end) if re.match(_CLAIM_UNIT_AFTER, masked[n.end() :], re.I)]
    if numbers:
        # After the previous number, and after the direction word that is its own ("45% less memory for a 12% hit").
        start = numbers[-1].end()
        unit = re.match(r"\s?(?:%|[x×]|\w+)?", masked[start:end])
        _, word, word_end = _direction_after(masked, start + (unit.end() if unit else 0), end, "percent")
        start = word_end if word else start
    segment = masked[start:end]
    tokens = [m.group() for m in _WORD.finditer(segment) if m.group() not in "()"]
    tokens = tokens[-6:]
    for i in range(len(tokens) - 1, -1, -1):
        if tokens[i] in ".,;:!?":
            break
        direction = _word_direction(tokens, i)
        if direction is not None:
            return direction, tokens[i]
    return None, ""


def _qualifier(masked: str, start: int, floor: int) -> tuple[int, bool, Bound | None]:
    """What qualifies the number at ``start`` ("about", "~", "more than", "under"): (start of the qualifier, approximate,
    bound)."""
    approximate = False
    bound: Bound | None = None
    position = start
    qualifier_start = start
    while position > floor:
        m = _QUALIFIER_AT_END.search(masked, max(floor, position - 40), position)
        if not m:
            break
        if m.group("approx"):
            approximate = True
        elif m.group("min") and not approximate and bound is None:
            bound = "min"
        elif m.group("max") and not approximate and bound is None:
            bound = "max"
        elif m.group("neutral") and m.group().strip().lower() in ("by", "of", "a", "an"):
            break
        position = m.start()
        qualifier_start = m.start()
    if approximate:
        bound = None
    return qualifier_start, approximate, bound


_METRIC_WORDS: tuple[tuple[str, str], ...] = (
    ("per_token", r"per[\s-]token|ms\s*/\s*tok(?:en)?|ms_per_token|time\s+per\s+token|inter[\s-]token"),
    (
        "throughput",
        r"throughputs?|tokens?\s*/\s*s(?:ec(?:ond)?)?|tokens?\s+per\s+sec(?:ond)?|tok/s|tps|generation\s+rate|tokens_per_s",
    ),
    (
        "latency",
        r"latenc(?:y|ies)|run[\s-]?times?|durations?|wall[\s-]?clock|generation\s+time|inference\s+time|time|took|takes|"
        r"taking|seconds?|latency_s",
    ),
    ("speed", r"speed|slow|slower|slowest|fast|faster|fastest|quick|quicker|slowdown|slow-down|speed-?ups?|slowed|sped"),
    (
        "memory",
        r"memory|footprint|model\s+size|size|sizes|ram|vram|storage|disk|smaller|larger|bigger|shrunk|shrank|shrinks?|"
        r"lighter|heavier|compressed|compression|megabytes?|bytes",
    ),
    ("perplexity", r"perplexit(?:y|ies)|ppl"),
    ("loss", r"(?:cross[\s-]entropy\s+)?loss|nll"),
)
_DIMENSIONLESS = ("perplexity", "loss")
_WEAK_METRIC_WORDS = frozenset({"took", "takes", "taking", "time"})
_WORD_METRIC = {
    "longer": "latency", "shorter": "latency", "as long": "latency", "as short": "latency", "smaller": "memory",
    "larger": "memory", "bigger": "memory", "lighter": "memory", "heavier": "memory", "shrank": "memory",
    "shrunk": "memory", "shrink": "memory", "shrinks": "memory", "compressed": "memory",
}  # fmt: skip


def _metric_pattern(extra: Iterable[str]) -> list[tuple[str, re.Pattern[str]]]:
    """Regular expressions of the words that name each metric; ``extra`` metrics (from the facts) by their names."""
    patterns = [(name, re.compile(rf"(?<![\w])(?:{words})(?![\w])", re.I)) for name, words in _METRIC_WORDS]
    for name in extra:
        words = r"[\s_-]+".join(re.escape(part) for part in re.split(r"[\s_]+", name) if part)
        patterns.append((name, re.compile(rf"(?<![\w])(?:{words})(?![\w])", re.I)))
    return patterns


def _metric_mentions(
    masked: str, start: int, end: int, patterns: Sequence[tuple[str, re.Pattern[str]]]
) -> list[tuple[str, int, int]]:
    """The metric words in ``masked[start:end]``: (metric, start, end), without those inside a longer one."""
    found = [(name, m.start(), m.end()) for name, pattern in patterns for m in pattern.finditer(masked, start, end)]
    found = [f for f in found if not any(o[1] <= f[1] and f[2] <= o[2] and (o[2] - o[1]) > (f[2] - f[1]) for o in found)]
    return sorted(found, key=lambda f: f[1])


def _nearest_metric(mentions: Sequence[tuple[str, int, int]], start: int, end: int) -> str | None:
    """The metric named nearest to ``[start, end)``."""
    best: tuple[int, str] | None = None
    for name, m_start, m_end in mentions:
        distance = max(m_start - end, start - m_end, 0)
        if best is None or distance < best[0]:
            best = (distance, name)
    return best[1] if best else None


_UNIT_METRIC = {"bytes": "memory", "s": "latency", "s/token": "per_token", "tokens/s": "throughput"}

_PRECISION_WORDS = re.compile(
    r"(?<![\w.])(?:fp[\s-]?(?:32|16|8|4)|bf[\s-]?16|b?float[\s-]?(?:32|16|8)|int[\s-]?[48]|nf[\s-]?4|\d+[\s-]?bits?|"
    r"baseline|quantiz\w+|full[\s-]precision)(?![\w])",
    re.I,
)


# --- Extraction ---------------------------------------------------------------------------------------------------------


def _extract(text: str, masked: str, extra_metrics: Sequence[str]) -> list[Claim]:
    """The claims of ``text`` (``masked`` is it with code blanked out); ``extra_metrics`` are more dimensionless
    metrics whose plain numbers count (the facts' metric names)."""
    patterns = _metric_pattern(extra_metrics)
    dimensionless = set(_DIMENSIONLESS) | set(extra_metrics)
    numbers = _numbers(masked)
    claims: list[Claim] = []
    for s_start, s_end in _sentence_spans(masked):
        in_sentence = [n for n in numbers if s_start <= n.start < s_end]
        if not in_sentence:
            continue
        _declared_unit(masked, s_start, s_end, in_sentence)
        lists = [
            (a.start, b.unit_end)
            for a, b in itertools.pairwise(in_sentence)
            if _LIST_SEPARATOR.fullmatch(masked[a.unit_end : b.start])
        ]
        clauses = _clause_spans(masked, s_start, s_end, lists)
        mentions = _metric_mentions(masked, s_start, s_end, patterns)
        previous: Claim | None = None
        for num in in_sentence:
            claim = _claim(text, masked, num, (s_start, s_end), clauses, mentions, dimensionless)
            if claim is None:
                continue
            gap = masked[previous.end : claim.start] if previous is not None else ""
            if (
                previous is not None
                and claim.kind in ("percent", "ratio")
                and claim.kind == previous.kind
                and (
                    claim.direction is None or (claim.direction == "of" and claim.kind == "percent" and not claim.direction_word)
                )
                and previous.direction is not None
                and (_LIST_SEPARATOR.fullmatch(gap) or _ELLIPSIS.fullmatch(gap))
                and not any(_word_direction(words, i) for words in [_WORD.findall(gap)] for i in range(len(words)))
            ):
                # "reduced memory by 42%, 45% and 45%", "NF4 went up by 12% and FP4 by 18%": one direction for all.
                claim = replace(claim, direction=previous.direction, direction_word=previous.direction_word)
            claims.append(claim)
            previous = claim
    return claims


def _claim(
    text: str,
    masked: str,
    num: _Num,
    sentence: tuple[int, int],
    clauses: Sequence[tuple[int, int]],
    mentions: Sequence[tuple[str, int, int]],
    dimensionless: set[str],
) -> Claim | None:
    """The claim ``num`` makes in its sentence (split into ``clauses``), or None when it makes none (a count, a
    setting, a hypothesis)."""
    clause = _clause_of(clauses, num.start)
    # The clause, cut to a window around the number: the words that matter are near it, and a huge clause (a list of
    # thousands of numbers) must not make every number scan all of it.
    c_start, c_end = max(clause[0], num.start - 300), min(clause[1], num.end + 300)
    clause_text = masked[c_start:c_end]
    colon = masked.rfind(": ", c_start, num.start)
    if _HYPOTHETICAL.search(_NOT_HYPOTHETICAL.sub(" ", masked[colon + 1 if colon >= 0 else c_start : c_end])):
        return None
    in_clause = [m for m in mentions if c_start <= m[1] < c_end]
    metric = _nearest_metric(in_clause, num.start, num.unit_end) or _nearest_metric(mentions, num.start, num.unit_end)
    unit = num.unit
    kind: ClaimKind
    if unit is None:
        if metric not in dimensionless and not any(m[0] in dimensionless for m in in_clause):
            return None
        if 1900 <= num.stated <= 2100 and num.decimals == 0:
            return None
        if _SETTING_BEFORE.search(masked[max(c_start, num.start - 40) : num.start]):
            return None
        rest = re.sub(r"^\s*(?:to|-|–|and|or|,)\s*\d+(?:\.\d+)?", "", masked[num.end : c_end])  # "3 to 5 takeaways"
        following = re.match(r"\s*([A-Za-z][A-Za-z.]*)", rest)
        if following and following.group(1).lower().rstrip(".") not in _COUNT_FOLLOWERS | _DOWN | _UP | _BETTER | _WORSE:
            return None
        metric = metric if metric in dimensionless else next(m[0] for m in in_clause + list(mentions) if m[0] in dimensionless)
        unit = ""
    q_start, approximate, bound = _qualifier(masked, num.start, c_start)
    if re.search(
        r"(?:\b(?:not|never|far\s+from|nowhere\s+near|short\s+of)|n['’]t)\s+(?:(?:quite|really|even|exactly|the|a|an)\s+)?"
        r"(?:[\d.]+\s?(?:[x×%]|times)?\s*(?:,|or|and|nor|/)\s*)*$",
        masked[c_start:q_start],
        re.I,
    ):
        return None  # "the savings are not 4x": a denial, not a result
    if num.word:
        approximate = True  # number words: "twice", "half", "a third", "doubled"
    if unit == "%":
        kind = "percent"
    elif unit == "x":
        kind = "ratio"
    else:
        kind = "absolute"
    direction: Direction | None = None
    word = ""
    end = num.unit_end
    after_direction, after_word, after_end = _direction_after(masked, num.unit_end, c_end, kind)
    before_direction, before_word = _direction_before(masked, c_start, q_start)
    value = num.stated
    if num.word == "verb":
        direction, word = "of", ""
    elif num.word == "fraction" and (
        re.search(r"\bby\s+(?:\w+\s+)?$", masked[max(0, q_start - 20) : q_start])
        or (before_direction in ("up", "down") and re.search(rf"\b{re.escape(before_word)}\s+$", masked[c_start:q_start]))
    ):
        kind, unit = "percent", "%"  # "reduced by a third", "saves a third of the memory": 33% less
        num.display = "%"
        value = num.stated * 100
        direction, word = before_direction, before_word
    elif num.word == "fraction" and re.search(r"\bin\s+$", masked[max(0, q_start - 10) : q_start]):
        direction = "of"  # cut in half
    elif kind in ("percent", "ratio"):
        if num.sign in ("-", "−"):
            direction, word = "down", ""
        elif num.sign == "+":
            direction, word = "up", ""
        elif after_direction == "of" and before_direction in ("up", "down") and kind == "percent":
            direction, word = before_direction, before_word
        elif after_direction is not None:
            direction, word = after_direction, after_word
            end = after_end if after_word else end
        elif before_direction is not None:
            direction, word = before_direction, before_word
        elif num.word in ("fraction", "ratio"):
            direction = "of"
    else:
        if num.sign in ("-", "−"):
            kind, direction = "difference", "down"
        elif num.sign == "+":
            kind, direction = "difference", "up"
        elif after_direction is not None and after_direction != "of":
            kind, direction, word, end = "difference", after_direction, after_word, after_end
        elif re.search(
            r"\b(?:by|sav(?:e|es|ed|ing)|saving\s+of|reduction\s+of|increase\s+of|drop\s+of)\s*$", masked[c_start:q_start], re.I
        ):
            kind, direction, word = "difference", before_direction, before_word
        elif before_word and re.search(
            rf"(?<![\w-]){re.escape(before_word)}\s+(?:(?:an?|another|only|just|an\s+extra|a\s+further|further)\s+)*$",
            masked[c_start:q_start],
            re.I,
        ):
            kind, direction, word = "difference", before_direction, before_word  # "saved 3.4 MB", "added 40 ms"
    if kind in ("percent", "ratio") and metric is None and direction is None and not _PRECISION_WORDS.search(clause_text):
        return None
    if kind in ("absolute", "difference") and unit in _UNIT_METRIC:
        metric = _UNIT_METRIC[unit]
    if num.word in ("fraction", "ratio", "times", "verb") and metric is None and direction in (None, "of"):
        return None
    opening = masked.rfind("(", sentence[0], num.start)
    inside = opening >= 0 and ")" not in masked[opening : num.start]
    about = masked[max(_clause_of(clauses, opening)[0], c_start - 300) if inside else c_start : c_end]
    part = None if re.search(r"\b(?:total|whole|entire|overall|full\s+model)\b", about, re.I) else _PART.search(about)
    scale = num.scales[0]
    normalised = value if kind in ("percent", "ratio") else value * scale
    start = min(q_start, num.start)
    return Claim(
        text=text[start:end],
        start=start,
        end=end,
        value=normalised,
        unit=unit,
        kind=kind,
        stated=value,
        unit_text=num.display if unit else "",
        scales=num.scales,
        decimals=num.decimals,
        direction=direction,
        direction_word=word,
        approximate=approximate,
        bound=bound,
        metric=metric,
        inherited_unit=num.inherited,
        part=part.group().lower() if part else "",
        sentence=text[sentence[0] : sentence[1]],
        sentence_start=sentence[0],
    )


_PART = re.compile(
    r"\b(?:parameters?|params|weights?|weight\s+matri(?:x|ces)|buffers?|embeddings?|(?:causal[\s-])?masks?|"
    r"layer\s*norms?|layernorms?|scales|biases|tensors?|matri(?:x|ces)|per\s+layer|alone)\b",
    re.I,
)


def extract_claims(text: str) -> list[Claim]:
    """Every quantitative claim of a written answer, in order: numbers with a unit, percentages, ratios and differences,
    and plain numbers of a sentence that names a dimensionless metric (perplexity, loss). See the module's docstring for
    what is left out."""
    return _extract(text, _mask(text), ())


# --- Labels -------------------------------------------------------------------------------------------------------------

_PRECISION_KEYS: tuple[tuple[str, str], ...] = (
    ("nf4", r"(?:4[\s-]?bits?[\s-]+)?nf[\s-]?4|normal[\s-]?float[\s-]?4?"),
    ("fp4", r"(?:4[\s-]?bits?[\s-]+)?fp[\s-]?4(?!\d)|float[\s-]?4(?!\d)"),
    ("int4", r"int[\s-]?4(?!\d)"),
    (
        "int8",
        r"int[\s-]?8(?!\d)|8[\s-]?bits?|llm\.int8(?:\(\))?|w8a8|8(?=\s*(?:to|and|or|/|,|vs\.?|->|→)\s*(?:4|16|32)[\s-]?bits?)",
    ),
    ("fp8", r"fp[\s-]?8(?!\d)|float[\s-]?8(?!\d)|e4m3|e5m2"),
    ("bf16", r"bf[\s-]?16|bfloat[\s-]?16"),
    ("fp16", r"fp[\s-]?16|float[\s-]?16|16[\s-]?bits?|half[\s-]precision"),
    (
        "fp32",
        r"fp[\s-]?32|float[\s-]?32|32[\s-]?bits?|full[\s-]precision|single[\s-]precision|32(?=\s*(?:to|and|or|/|,|vs\.?|->|→)\s*(?:4|8|16)[\s-]?bits?)",
    ),
    ("4bit", r"4[\s-]?bits?|4(?=\s*(?:to|and|or|/|,|vs\.?|->|→)\s*(?:8|16|32)[\s-]?bits?)"),
    ("baseline", r"baseline|un-?quantized|non-?quantized|original(?:\s+(?:fp32|float32))?\s+model|unmodified\s+model"),
)
_KEY_PATTERNS = [(key, re.compile(rf"(?<![\w.])(?:{pattern})(?![\w])", re.I)) for key, pattern in _PRECISION_KEYS]
_FOUR_BIT = frozenset({"nf4", "fp4", "int4"})
_STOPWORDS = frozenset({"of", "the", "a", "an", "with", "and", "or", "to", "in", "on", "for", "at", "by", "model"})


def _keys(text: str) -> set[str]:
    """The precision keys a label names: "INT8 (bnb)" -> {"int8"}, "4-bit NF4" -> {"nf4"}."""
    return {key for key, pattern in _KEY_PATTERNS if pattern.search(text)}


@dataclass(frozen=True)
class _Mention:
    """Where a text names rows: its span, the rows (fact labels) it names, and its text."""

    start: int
    end: int
    labels: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class _Group:
    """Mentions joined into one group ("NF4 and FP4"), with the rows they name and whether the group is the reference
    of a comparison."""

    start: int
    end: int
    labels: tuple[str, ...]
    mentions: tuple[_Mention, ...]
    reference_priority: int = 0  # 2: than/compared to/vs/relative to; 1: from/of/over; 0: not a reference


class _Labels:
    """The facts' row labels and how a text names them."""

    def __init__(self, facts: Sequence[Fact]) -> None:
        """Index the facts' labels, in table order, with the precision keys each names."""
        self.labels: list[str] = []
        for fact in facts:
            if fact.label not in self.labels:
                self.labels.append(fact.label)
        self.keys = {label: _keys(label) for label in self.labels}
        self.generic = [label for label in self.labels if not self.keys[label]]

    def resolve(self, keys: set[str]) -> tuple[str, ...]:
        """The labels that a mention of these precision keys names."""
        direct = [label for label in self.labels if self.keys[label] & keys]
        if direct:
            return tuple(direct)
        if "baseline" in keys or "fp32" in keys:
            other = {"fp32"} if "baseline" in keys else {"baseline"}
            return tuple(label for label in self.labels if self.keys[label] & other)
        if "4bit" in keys:
            return tuple(label for label in self.labels if self.keys[label] & _FOUR_BIT)
        return ()

    def baseline(self) -> tuple[str, ...]:
        """The baseline's label: the one labelled baseline, else FP32, else the table's first row."""
        for key in ("baseline", "fp32"):
            found = tuple(label for label in self.labels if key in self.keys[label])
            if found:
                return found[:1]
        return tuple(self.labels[:1])

    def family(self, label: str) -> tuple[str, ...]:
        """The setting a label varies, to find the row it is compared with: "precision" for FP32, INT8, ...;
        ("batch", "size") for "batch size 8"; ("use", "cache") for "use_cache=False"."""
        if self.keys.get(label):
            return ("precision",)
        words = [w.lower() for w in re.findall(r"[A-Za-z]+", label)]
        return tuple(
            w for w in words if w not in _STOPWORDS and w not in ("true", "false", "on", "off", "yes", "no", "with", "without")
        )

    def references_for(self, subjects: Sequence[str], rows: Sequence[str]) -> list[str]:
        """The rows a relative claim about ``subjects`` is compared with when its sentence names none: the baseline of
        the subject's setting (FP32 for a precision, the first row of its batch sizes, use_cache=True for
        use_cache=False), or every other such row when the subject is that baseline."""
        family = self.family(subjects[0]) if subjects else ()
        members = [row for row in rows if self.family(row) == family] if family else []
        if len(members) < 2:
            members = list(rows)
        base = next((b for b in self.baseline() if b in members), members[0] if members else None)
        if base is None:
            return []
        if base in subjects:
            return [row for row in members if row not in subjects]
        return [base]

    def mentions(self, masked: str, start: int, end: int) -> list[_Mention]:
        """The label mentions in ``masked[start:end]``, in order, overlaps resolved (longest first)."""
        found: list[tuple[int, int, set[str], tuple[str, ...]]] = []
        for key, pattern in _KEY_PATTERNS:
            for m in pattern.finditer(masked, start, end):
                found.append((m.start(), m.end(), {key}, ()))
        for label in self.generic:
            for m_start, m_end in _generic_mentions(label, masked, start, end):
                found.append((m_start, m_end, set(), (label,)))
        found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
        kept: list[tuple[int, int, set[str], tuple[str, ...]]] = []
        for item in found:
            if kept and item[0] < kept[-1][1]:
                continue
            kept.append(item)
        merged: list[tuple[int, int, set[str], tuple[str, ...]]] = []
        for item in kept:
            if merged and re.fullmatch(r"[\s()'’s-]*", masked[merged[-1][1] : item[0]]) and _mergeable(merged[-1][2], item[2]):
                last = merged[-1]
                merged[-1] = (last[0], item[1], last[2] | item[2], last[3] + item[3])
            else:
                merged.append(item)
        mentions = []
        for m_start, m_end, keys, generic in merged:
            keys = keys - {"4bit"} if keys & _FOUR_BIT else keys
            labels = generic or self.resolve(keys - {"baseline"} if keys & {"fp32"} and "baseline" in keys else keys)
            if keys & {"fp32"} and "baseline" in keys and not labels:
                labels = self.resolve({"baseline"})
            mentions.append(_Mention(m_start, m_end, labels, masked[m_start:m_end]))
        return mentions


def _mergeable(first: set[str], second: set[str]) -> bool:
    """Whether two adjacent mentions name one row: "FP32 baseline", "4-bit (NF4)", "NF4 (4-bit)"."""
    generic = {"baseline", "4bit"}
    return bool((first & generic) or (second & generic)) and bool(first and second)


def _generic_mentions(label: str, masked: str, start: int, end: int) -> list[tuple[int, int]]:
    """Where a label that names no precision is mentioned: "use_cache=False" ("without the KV cache"), "batch size 4"
    ("a batch of 4"), "prompt length 128" ("the 128-token prompt"), or the label's words in a row."""
    found: list[tuple[int, int]] = []
    lowered = label.lower()
    if "cache" in lowered:
        off = re.search(r"false|off|\bno\b|without|disabled|=\s*0", lowered) is not None
        if off:
            pattern = (
                r"(?:without|no|disabled?|disabling|turned\s+off|turning\s+off)\s+(?:the\s+)?(?:kv[\s-]?)?cach(?:e|ing)|"
                r"(?:kv[\s-]?)?cach(?:e|ing)\s+(?:off|disabled)|use_cache\s*=?\s*false"
            )
        else:
            pattern = (
                r"(?:with|using|enabled?|enabling)\s+(?:the\s+)?(?:kv[\s-]?)?cach(?:e|ing)|(?:kv[\s-]?)?cach(?:e|ing)\s+(?:on|enabled)|"
                r"use_cache\s*=?\s*true"
            )
        found += [(m.start(), m.end()) for m in re.finditer(pattern, masked[:end], re.I) if m.start() >= start]
    tokens = re.findall(r"[A-Za-z]+|\d+(?:\.\d+)?", label)
    if tokens:
        phrase = r"[\s_\-=:()]*".join(re.escape(t) for t in tokens)
        found += [
            (m.start(), m.end()) for m in re.finditer(rf"(?<![\w.]){phrase}(?![\w])", masked[:end], re.I) if m.start() >= start
        ]
    numbers = [t for t in tokens if t[0].isdigit()]
    words = [t.lower() for t in tokens if not t[0].isdigit() and t.lower() not in _STOPWORDS]
    if len(numbers) == 1 and words:
        sentence_tokens = [(m.group(), m.start(), m.end()) for m in re.finditer(r"[A-Za-z]+|\d+(?:\.\d+)?", masked[start:end])]
        for i, (token, t_start, t_end) in enumerate(sentence_tokens):
            if token != numbers[0]:
                continue
            if re.match(
                r"\s?(?:%|x\b|ms\b|s\b|MB\b|GB\b|KB\b|MiB\b|tok(?:en)?s?\s*/|tok(?:en)?s?\s+per\b)",
                masked[start + t_end : start + t_end + 12],
            ):
                continue
            window = sentence_tokens[max(0, i - 5) : i] + sentence_tokens[i + 1 : i + 3]
            if any(_same_word(w[0].lower(), word) for w in window for word in words):
                # The mention is the number, with the label's words right before it ("batch of 8", "batch size 8").
                m_start = t_start
                for token, w_start, _ in reversed(sentence_tokens[max(0, i - 3) : i]):
                    if any(_same_word(token.lower(), word) for word in words):
                        m_start = w_start
                    elif token.lower() not in _STOPWORDS:
                        break
                found.append((start + m_start, start + t_end))
    return found


def _same_word(token: str, word: str) -> bool:
    """Whether ``token`` is a form of ``word``: "batches" of "batch", "prompts" of "prompt", "tokens" of "token"."""
    if len(word) < 4:
        return token == word
    return token.startswith(word[:4]) and len(token) <= len(word) + 3


_REFERENCE_MARKER = r"\b(?:than|compared\s+(?:to|with)|relative\s+to|versus|vs\.?|against|of|over|as|from)\b"
_SINGULAR_VERB = (
    r"(?:['’]s)?\s+(?:(?:model|variant|version|config(?:uration)?)\s+)?(?:only\s+|also\s+|still\s+)?"
    r"(?:is|was|has|does|uses|takes|needs|requires|gets|reaches|runs|shows|gives|achieves|comes|sits|stays|remains|"
    r"becomes|seems|looks|performs|generates|produces|saves|cuts|reduces|increases|drops)\b"
)


_ANY_VERB = (
    r"(?:['’]s)?\s+(?:(?:models?|variants?|versions?|formats?|config(?:uration)?s?)\s+)?(?:only\s+|also\s+|still\s+|both\s+)?"
    r"(?:is|was|are|were|has|have|does|do|uses?|takes?|needs?|requires?|gets?|reach(?:es)?|runs?|shows?|gives?|"
    r"achieves?|comes?|sits?|stays?|remains?|becomes?|seems?|looks?|performs?|generates?|produces?|saves?|cuts?|"
    r"reduces?|increases?|drops?)\b"
)


_NUMBER_NEXT = (
    r"(?:['’]s)?\s+(?:(?:models?|variants?|versions?|formats?|config(?:uration)?s?)\s+)?(?:(?:about|roughly|around|only)\s+)?"
    r"[-+−~]?\s*\d"
)


def _reference_priority(masked: str, start: int, mentions: Sequence[_Mention], sentence_start: int) -> int:
    """Whether the row mentioned at ``start`` is the reference of a comparison: 2 after "than", "compared to", "vs",
    "relative to", "as long as"; 1 after "from", "of", "over" or a ratio ("twice FP32's"); else 0."""
    floor = max((m.end for m in mentions if m.end <= start), default=sentence_start)
    before = masked[max(floor, start - 60) : start]
    if re.search(
        r"\b(?:than|compared\s+(?:to|with)|comparing\s+(?:to|with)|relative\s+to|versus|vs\.?|against|"
        r"with\s+respect\s+to|w\.r\.t\.?)\s+(?:(?:the|a|an|its|our|their)\s+)?(?:[\w.'’~/]+\s+){0,4}$",
        before,
        re.I,
    ):
        return 2
    if re.search(r"\bas\s+\w+\s+as\s+(?:(?:the|a|an)\s+)?$", before, re.I):
        return 2  # "twice as long as FP32"
    if re.search(r"\bfrom\s+(?:[^\s,;:]+\s+){0,4}$", before, re.I) and not re.search(r"\bfrom\b.*\bto\b", before, re.I):
        return 1
    if re.search(
        r"\b(?:of|over)\s+(?:(?:the|a|an)\s+)?$|(?:\d|x|×|twice|half|third|quarter)\s+(?:(?:that\s+of\s+)?the\s+)?$", before, re.I
    ):
        return 1
    return 0


def _groups(mentions: Sequence[_Mention], masked: str, sentence_start: int) -> list[_Group]:
    """Mentions joined by and/or/,/ into groups ("NF4 and FP4", "FP32, INT8 and NF4"), each marked if it is the reference
    of a comparison ("than FP32", "compared to FP32", "from FP32", "of the FP32 memory")."""
    chains: list[tuple[list[_Mention], list[str]]] = []  # mentions, and how each is joined to the one before
    for mention in mentions:
        gap = masked[chains[-1][0][-1].end : mention.start] if chains else ""
        if chains and re.fullmatch(r"\s*(?:,\s*(?:and|or)?|and|or|/|&|\+|as\s+well\s+as)\s*(?:the\s+)?(?:both\s+)?", gap, re.I):
            join = (
                "comma-and"
                if "," in gap and re.search(r"and|or", gap)
                else "comma"
                if "," in gap
                else "tight"
                if re.fullmatch(r"\s*[/&+]\s*", gap)
                else "and"
            )
            chains[-1][0].append(mention)
            chains[-1][1].append(join)
        else:
            chains.append(([mention], []))
    groups: list[list[_Mention]] = []
    for members, joins in chains:
        # Commas join a list ending in and/or ("FP32, INT8 and NF4"), not two clauses ("than FP32, and NF4 ...",
        # "Compared to FP32, INT8 ...").
        loose = [j for j in joins if j != "tight"]
        is_list = not any(j.startswith("comma") for j in loose) or (
            len(loose) >= 2 and all(j == "comma" for j in loose[:-1]) and loose[-1] in ("and", "comma-and")
        )
        # "Relative to FP32, INT8, NF4 and FP4 ...": the reference is the first row only.
        split_first = (
            bool(joins)
            and joins[0].startswith("comma")
            and _reference_priority(masked, members[0].start, mentions, sentence_start) == 2
        )
        groups.append([members[0]])
        for index, (member, join) in enumerate(zip(members[1:], joins, strict=True)):
            if (join.startswith("comma") and not is_list) or (index == 0 and split_first):
                groups.append([member])
            else:
                groups[-1].append(member)
    # "INT8 is 1.7x smaller than FP32 and NF4 is 1.8x smaller": a singular verb after "A and B" makes B a new subject,
    # as does any verb after a reference ("smaller than the baseline and the 4-bit variants are 40% smaller").
    split: list[list[_Mention]] = []
    for members in groups:
        after = masked[members[-1].end : members[-1].end + 40]
        last_join = masked[members[-2].end : members[-1].start] if len(members) > 1 else ""
        is_reference = _reference_priority(masked, members[0].start, mentions, sentence_start) > 0
        verb = _ANY_VERB if is_reference else _SINGULAR_VERB
        number_next = is_reference and re.match(_NUMBER_NEXT, after, re.I)
        if len(members) > 1 and re.search(r"\band\b", last_join) and (re.match(verb, after, re.I) or number_next):
            split += [members[:-1], members[-1:]]
        else:
            split.append(members)
    result = []
    for members in split:
        g_start, g_end = members[0].start, members[-1].end
        labels: list[str] = []
        for member in members:
            labels += [label for label in member.labels if label not in labels]
        priority = _reference_priority(masked, g_start, mentions, sentence_start)
        result.append(_Group(g_start, g_end, tuple(labels), tuple(members), priority))
    return result


# --- Checking -----------------------------------------------------------------------------------------------------------


def _category(fact: Fact) -> str:
    """The metric family of a fact, read from its unit and name: memory, latency, per_token, throughput, perplexity, or
    the metric's own name."""
    unit = fact.unit.strip().lower()
    name = fact.metric.strip().lower()
    if unit in ("bytes", "b"):
        return "memory"
    if unit in ("tokens/s", "tok/s"):
        return "throughput"
    if unit == "s/token" or (unit == "s" and "token" in name):
        return "per_token"
    if unit == "s":
        return "latency"
    if "perplex" in name or name == "ppl":
        return "perplexity"
    if name in ("loss", "nll", "cross_entropy"):
        return "loss"
    return name


def _higher_is_better(category: str) -> bool:
    """Whether more of this metric is better (throughput, accuracy) rather than worse (memory, latency, perplexity)."""
    return category == "throughput" or bool(re.search(r"acc|score|bleu|rouge|f1|rate", category))


def _speed_sense(category: str) -> int:
    """+1 if faster means more of this metric (throughput), -1 if less (latency), 0 if speed does not apply."""
    if category == "throughput":
        return 1
    if category in ("latency", "per_token"):
        return -1
    return 0


def _sense(direction: Direction | None, category: str) -> int | None:
    """Whether the claim says the metric went up (+1), down (-1), or it is a plain "of" ratio (0); None if unsaid or
    meaningless for this metric (faster memory)."""
    if direction is None:
        return None
    if direction == "of":
        return 0
    if direction == "up":
        return 1
    if direction == "down":
        return -1
    if direction in ("faster", "slower"):
        speed = _speed_sense(category)
        if speed == 0:
            return None
        return speed if direction == "faster" else -speed
    better = 1 if _higher_is_better(category) else -1
    return better if direction == "better" else -better


def _claim_forms(claim: Claim, subject: float, reference: float | None, category: str) -> list[float]:
    """What the claim's number is, computed from the notebook's numbers, in the claim's own form: its unit for an
    absolute claim (one per reading of the unit: MB as MiB or as 10**6 bytes); the percentage or factor of a relative
    claim (the first reading first: "35% faster" is latency 35% lower, or speed 35% higher)."""
    if claim.kind == "absolute":
        return [subject / scale for scale in claim.scales]
    if reference is None or reference == 0:
        return []
    if claim.kind == "difference":
        sense = _sense(claim.direction, category)
        diffs = [(subject - reference) / scale for scale in claim.scales]
        if sense is None:
            return [abs(d) for d in diffs]
        return [d * (1 if sense >= 0 else -1) for d in diffs]
    r = subject / reference
    if r <= 0:
        return []
    sense = _sense(claim.direction, category)
    speed = claim.direction in ("faster", "slower")
    if claim.kind == "percent":
        if claim.direction == "of":
            return [100 * r]
        if sense is None:
            # No direction: a change ("differ by 35%") or a share ("nf4 2.53 MB (60.4%)").
            return [100 * abs(r - 1), 100 * r] if claim.direction is None else []
        primary = 100 * (r - 1) if sense > 0 else 100 * (1 - r)
        alternative = 100 * (1 - 1 / r) if sense > 0 else 100 * (1 / r - 1)
        return [primary, alternative] if speed else [primary]
    if claim.direction == "of":
        return [r]
    if sense is None:
        return [max(r, 1 / r)] if claim.direction is None else []
    return [r if sense > 0 else 1 / r]


def _agrees(claim: Claim, actual: float) -> bool:
    """Whether the claim's stated number agrees with ``actual`` (in the claim's form): within the relative tolerance,
    within the claim's rounding, or on the right side of a bound ("more than 40%")."""
    stated = claim.stated
    tolerance = APPROX_TOLERANCE if claim.approximate or claim.decimals is None else EXACT_TOLERANCE
    slack = tolerance * abs(actual) + 1e-12
    if claim.bound == "min":
        return actual >= stated - slack
    if claim.bound == "max":
        return actual <= stated + slack
    if abs(actual - stated) <= slack:
        return True
    if claim.decimals is None:
        return False
    unit = 10.0 if claim.decimals < 0 else 10.0 ** (-claim.decimals)
    difference = abs(actual - stated)
    return difference <= unit / 2 * (1 + 1e-9) and difference <= ROUNDING_LIMIT * abs(actual)


def _format_number(value: float, decimals: int | None, minimum_figures: int = 3) -> str:
    """``value`` with at least the claim's decimals and ``minimum_figures`` significant figures, without trailing zeros
    beyond the claim's decimals."""
    if value == 0 or not math.isfinite(value):
        return "0"
    wanted = max(decimals or 0, minimum_figures - 1 - math.floor(math.log10(abs(value))), 0)
    wanted = min(wanted, 6)
    formatted = f"{value:.{wanted}f}"
    keep = max(decimals or 0, 0)
    if "." in formatted:
        integer, fraction = formatted.split(".")
        fraction = fraction.rstrip("0")
        fraction = fraction + "0" * max(0, keep - len(fraction))
        formatted = integer + ("." + fraction if fraction else "")
    return formatted


def _format_actual(claim: Claim, value: float, category: str, reference: str | None = None) -> str:
    """The notebook's number in the claim's own form: "4.63 MB", "94 ms", "45% less", "1.8x slower", "55% of FP32"."""
    if claim.kind == "absolute":
        number = _format_number(value, claim.decimals)
        return f"{number} {claim.unit_text}".strip()
    word = _direction_label(claim, category)
    if claim.kind == "percent":
        number = _format_number(abs(value), claim.decimals, 2)
        if claim.direction == "of":
            return f"{number}% of {reference}" if reference else f"{number}% of"
        if claim.direction is None or not word:
            return f"{number}%"
        return f"{number}% {word if value >= 0 else _opposite(word, claim, category)}"
    if claim.kind == "difference":
        number = _format_number(abs(value), claim.decimals)
        if not word:
            return f"{number} {claim.unit_text}".strip()
        return f"{number} {claim.unit_text} {word if value >= 0 else _opposite(word, claim, category)}".replace("  ", " ")
    if claim.direction in (None, "of") or not word:
        return f"{_format_number(value, 1, 2)}x"
    if value < 1:
        return f"{_format_number(1 / value, 1, 2)}x {_opposite(word, claim, category)}"
    return f"{_format_number(value, 1, 2)}x {word}"


def _direction_label(claim: Claim, category: str) -> str:
    """The word that says a relative claim's direction in messages: the claim's own comparative ("less", "slower",
    "as slow"), else one for its sense ("more"/"less" of memory, "higher"/"lower" of other metrics)."""
    word = claim.direction_word.lower()
    if word and (word in _ANTONYMS or word.startswith("as ")):
        return word
    sense = _sense(claim.direction, category)
    if sense is None or sense == 0:
        return ""
    if category == "memory":
        return "more" if sense > 0 else "less"
    return "higher" if sense > 0 else "lower"


def _opposite(word: str, claim: Claim, category: str) -> str:
    """The opposite of a direction word: "less" -> "more", "slower" -> "faster", "as slow" -> "as fast"."""
    if word in _ANTONYMS:
        return _ANTONYMS[word]
    if word.startswith("as "):
        return {"faster": "as slow", "slower": "as fast"}.get(str(claim.direction), "the other way")
    sense = _sense(claim.direction, category)
    if category == "memory":
        return "less" if sense and sense > 0 else "more"
    return "lower" if sense and sense > 0 else "higher"


def _describe(claim: Claim, category: str = "") -> str:
    """The claim as quoted in a message: its text, with the unit it inherited from a list ("8.01" -> "8.01 MB") and the
    direction its sentence gave before it ("reduced by 42%" -> "42% less")."""
    text = " ".join(claim.text.split())
    if claim.inherited_unit and claim.unit_text:
        text = f"{text}{claim.unit_text}" if claim.unit_text in ("%", "x") else f"{text} {claim.unit_text}"
    if claim.kind in ("percent", "ratio", "difference") and claim.direction not in (None, "of") and claim.text[:1] not in "-+−":
        word = _direction_label(claim, category)
        own = claim.direction_word.lower()
        if word and word not in text.lower() and not (own and own in text.lower()):
            text = f"{text} {word}"
    return text


_METRIC_NAMES = {
    "memory": "memory",
    "latency": "latency",
    "per_token": "time per token",
    "throughput": "throughput",
    "perplexity": "perplexity",
}


@dataclass(frozen=True)
class _Reading:
    """One way to read a claim against the facts: its metric, its subject row(s) and the row it compares with."""

    category: str
    subjects: tuple[str, ...]
    reference: str | None


@dataclass(frozen=True)
class _Outcome:
    """A claim checked against one subject row of a reading: whether it agrees, the notebook's number in the claim's
    form (the agreeing reading of it, else the first), and all its readings."""

    agrees: bool
    actual: float
    forms: tuple[float, ...]
    reading: _Reading
    subject: str
    metric: str


class _Checker:
    """Holds the facts, indexed by row and metric family, and checks claims against them."""

    def __init__(self, facts: Sequence[Fact], timing_spread: float | None = None) -> None:
        """Index the facts by (label, metric family); ``timing_spread``: how far one run's timings may be from
        another's (None: held exactly)."""
        self.facts = list(facts)
        self.timing_spread = timing_spread
        self.labels = _Labels(self.facts)
        self.by_key: dict[tuple[str, str], Fact] = {}
        self.categories: list[str] = []
        for fact in self.facts:
            category = _category(fact)
            self.by_key.setdefault((fact.label, category), fact)
            if category not in self.categories:
                self.categories.append(category)

    def labels_with(self, category: str) -> list[str]:
        """The rows that have this metric."""
        return [label for label in self.labels.labels if (label, category) in self.by_key]

    def categories_for(self, claim: Claim, hints: Sequence[str]) -> list[str]:
        """The metric families the claim may be about, likeliest first."""
        if claim.kind in ("absolute", "difference"):
            if claim.unit == "":
                wanted = [claim.metric] if claim.metric else [c for c in self.categories if c in _DIMENSIONLESS]
                return [c for c in wanted if c in self.categories]
            if claim.unit == "s" and claim.metric == "per_token":
                return [c for c in ("per_token", "latency") if c in self.categories]
            unit_category = _UNIT_METRIC.get(claim.unit, "")
            return [unit_category] if unit_category in self.categories else []
        speed_only = claim.direction in ("faster", "slower")
        ordered: list[str] = []
        word_hint = _WORD_METRIC.get(claim.direction_word.lower())
        for hint in ([word_hint] if word_hint else []) + ([claim.metric] if claim.metric else []) + list(hints):
            expanded = ["latency", "throughput", "per_token"] if hint == "speed" else [hint]
            for category in expanded:
                if category in self.categories and category not in ordered and (not speed_only or _speed_sense(category)):
                    ordered.append(category)
            if ordered:
                break
        named = bool(word_hint or claim.metric or hints)
        if not ordered and not named:
            ordered = [c for c in self.categories if not speed_only or _speed_sense(c)]
        if not ordered and speed_only:
            ordered = [c for c in self.categories if _speed_sense(c)]
        return ordered

    def evaluate(self, claim: Claim, reading: _Reading) -> list[_Outcome]:
        """The claim checked against each subject row of a reading (one outcome per row that has the metric)."""
        outcomes = []
        for subject in reading.subjects:
            fact = self.by_key.get((subject, reading.category))
            if fact is None:
                continue
            reference: float | None = None
            if claim.kind in ("percent", "ratio", "difference"):
                if reading.reference is None or reading.reference == subject:
                    continue
                ref_fact = self.by_key.get((reading.reference, reading.category))
                if ref_fact is None:
                    continue
                reference = ref_fact.value
            forms = _claim_forms(claim, fact.value, reference, reading.category)
            if not forms:
                continue
            agreeing = [form for form in forms if _agrees(claim, form)]
            chosen = min(agreeing, key=lambda form: abs(form - claim.stated)) if agreeing else forms[0]
            agrees = bool(agreeing)
            outcomes.append(_Outcome(agrees, chosen, tuple(forms), reading, subject, fact.metric))
        return outcomes


@dataclass
class _Placed:
    """A claim of a sentence and the rows it was placed on."""

    claim: Claim
    subjects: tuple[str, ...] | None = None  # None: not placed; (): placed on a mention of a row without facts
    named: bool = False
    mention: str = ""
    reference: tuple[str, ...] | None = None


def check_claims(text: str, facts: Sequence[Fact], timing_spread: float | None = None) -> list[ClaimVerdict]:
    """Every quantitative claim of a written answer (see :func:`extract_claims`), checked against the notebook's facts:
    one verdict per claim, in order. Relative claims (percentages, ratios, differences) are checked against the
    percentage change or ratio between two facts of one metric."""
    checker = _Checker(facts, timing_spread)
    extra = [c for c in checker.categories if c not in _UNIT_METRIC.values() and c not in _DIMENSIONLESS]
    masked = _mask(text)
    claims = _extract(text, masked, extra)
    patterns = _metric_pattern(extra)
    verdicts: list[ClaimVerdict] = []
    previous_groups: list[_Group] = []
    previous_metric: str | None = None
    for s_start, s_end in _sentence_spans(masked):
        mentions = checker.labels.mentions(masked, s_start, s_end)
        in_sentence = [
            c for c in claims if s_start <= c.start < s_end and not any(m.start < c.end and c.start < m.end for m in mentions)
        ]
        metric_words = _metric_mentions(masked, s_start, s_end, patterns)
        if in_sentence:
            groups = _groups(mentions, masked, s_start)
            placed = _place(in_sentence, groups, masked, (s_start, s_end), checker, previous_groups)
            hints = _hints(metric_words, in_sentence, previous_metric)
            for item in placed:
                sentence_hints = [h for h in hints if h]
                nearest = _nearest_metric(metric_words, item.claim.start, item.claim.end)
                if nearest:
                    sentence_hints.insert(0, nearest)
                verdicts.append(_verdict(item, checker, sentence_hints))
        if mentions:
            previous_groups = _groups(mentions, masked, s_start)
        units = [_UNIT_METRIC[c.unit] for c in in_sentence if c.kind == "absolute" and c.unit in _UNIT_METRIC]
        named = [m[0] for m in metric_words if m[0] != "speed" and masked[m[1] : m[2]].lower() not in _WEAK_METRIC_WORDS]
        if units or named:
            previous_metric = (units or named)[-1]
        elif in_sentence and in_sentence[-1].metric:
            previous_metric = in_sentence[-1].metric
    return verdicts


def _hints(metric_words: Sequence[tuple[str, int, int]], claims: Sequence[Claim], previous: str | None) -> list[str]:
    """Metric families a relative claim of the sentence may be about: the metrics the sentence names, those of its
    absolute claims, then the one the previous sentences named."""
    hints = [m[0] for m in metric_words]
    hints += [_UNIT_METRIC[c.unit] for c in claims if c.kind == "absolute" and c.unit in _UNIT_METRIC]
    if previous:
        hints.append(previous)
    return hints


def _place(
    claims: Sequence[Claim],
    groups: Sequence[_Group],
    masked: str,
    sentence: tuple[int, int],
    checker: _Checker,
    previous_groups: Sequence[_Group],
) -> list[_Placed]:
    """Which rows each claim of a sentence is about, read from the sentence's layout (see the module's docstring)."""
    protected = [(g.start, g.end) for g in groups]
    protected += [(a.start, b.end) for a, b in itertools.pairwise(claims) if _LIST_SEPARATOR.fullmatch(masked[a.end : b.start])]
    clauses = _clause_spans(masked, sentence[0], sentence[1], protected)
    placed = [_Placed(c) for c in claims]
    references = [g for g in groups if g.reference_priority]
    reference = max(references, key=lambda g: g.reference_priority) if references else None
    own_reference = {id(item): _reference_of(item.claim, references, masked) for item in placed}
    baseline = checker.labels.baseline()

    def put(item: _Placed, group: _Group, named: bool = True) -> None:
        """Place ``item`` on the rows of ``group``."""
        item.subjects, item.named = group.labels, named
        item.mention = " and ".join(m.text for m in group.mentions)

    def candidates(item: _Placed) -> list[_Group]:
        """The groups a claim may be about: a relative claim's subject is never its reference."""
        relative = item.claim.kind in ("percent", "ratio", "difference")
        return [g for g in groups if not (relative and g is own_reference[id(item)])]

    # Rows listed in the same order as the numbers: "FP32, INT8 and NF4 used 8.01, 4.63 and 4.44 MB (respectively)".
    for kind, unit in sorted({(c.kind, c.unit) for c in claims if c.kind != "difference"}):
        same = [p for p in placed if p.claim.kind == kind and p.claim.unit == unit]
        mentions = [m for g in groups for m in g.mentions if kind == "absolute" or g is not reference]
        if len(same) >= 2 and len(mentions) == len(same):
            all_before = all(m.end <= same[0].claim.start for m in mentions)
            all_after = all(m.start >= same[-1].claim.end for m in mentions)
            one_clause = len({_clause_of(clauses, x) for x in [m.start for m in mentions] + [p.claim.start for p in same]}) == 1
            if (all_before or all_after) and one_clause:
                for item, mention in zip(same, mentions, strict=True):
                    item.subjects, item.named, item.mention = mention.labels, True, mention.text
    # "(INT8) went from 21.3 to 21.5": the first number is the reference's (or the baseline's), the second the row's.
    pairs = _place_from_to(placed, groups, reference, masked, clauses, baseline, put)
    # Strong attachments: "4.63 MB (INT8)", "4.63 MB with INT8", "INT8 (4.63 MB)", "INT8: 4.63 MB", "INT8 took 0.094 s".
    for item in placed:
        if item.subjects is not None:
            continue
        group = _attached(item.claim, candidates(item), masked, sentence)
        if group is not None:
            put(item, group)
    # A claim right after another one is about the same row: "4.63 MB (-42%)", "0.094 s, 1.8x slower", "0.094 s (94 ms)".
    follows: dict[int, int] = {}
    for i in range(1, len(placed)):
        item, prior = placed[i], placed[i - 1]
        gap = masked[prior.claim.end : item.claim.start]
        if (
            item.subjects is None
            and (item.claim.kind != prior.claim.kind or "(" in gap)
            and re.fullmatch(
                r"\s*(?:[(\[,:]|\s[-–—]|—)\s*(?:i\.e\.\s*|or\s+|a\s+|an\s+|so\s+|which\s+is\s+|that\s+is\s+|and\s+|also\s+)?",
                gap,
                re.I,
            )
        ):
            follows[i] = i - 1
    # A number after "instead of", "compared to", "than" is the reference's ("took 2.9 s instead of 0.35 s").
    for i, item in enumerate(placed):
        before = masked[max(sentence[0], item.claim.start - 25) : item.claim.start]
        if (
            item.subjects is None
            and i not in follows
            and item.claim.kind == "absolute"
            and re.search(_COMPARED_BEFORE, before, re.I)
        ):
            follows[i] = -1
            if reference is not None:
                put(item, reference)
    for i, j in list(follows.items()):
        if j >= 0 and follows.get(j) == -1:
            del follows[i]  # "took 2.9 s instead of 0.35 s, 8x slower" is about the 2.9 s row
    # The only row named in the claim's clause, then the nearest row before (or after) the claims.
    for i, item in enumerate(placed):
        if item.subjects is None and i not in follows:
            clause = _clause_of(clauses, item.claim.start)
            in_clause = [g for g in candidates(item) if clause[0] <= g.start < clause[1]]
            if len(in_clause) == 1:
                put(item, in_clause[0])
    claim_clauses = {_clause_of(clauses, c.start) for c in claims}

    def reach(item: _Placed) -> list[_Group]:
        """The groups a claim may be placed on by proximity: a number, only those of its clause or of a clause with no
        numbers ("Their perplexities were 21.5 and 23.9, and FP32 and INT8 took 52 and 94 ms" leaves the first two
        unplaced)."""
        if item.claim.kind != "absolute":
            return list(groups)
        own = _clause_of(clauses, item.claim.start)
        return [g for g in groups if _clause_of(clauses, g.start) == own or _clause_of(clauses, g.start) not in claim_clauses]

    unplaced = [p for i, p in enumerate(placed) if p.subjects is None and i not in follows]
    if unplaced and groups:
        orientations = []
        for backwards in (True, False):
            covered, distance = 0, 0
            for item in unplaced:
                group = _nearest_group(item, reach(item), own_reference[id(item)], backwards, baseline, masked)
                if group is not None:
                    covered += 1
                    distance += item.claim.start - group.end if backwards else group.start - item.claim.end
            orientations.append((covered, -distance, backwards))
        backwards = max(orientations)[2]
        for item in unplaced:
            group = _nearest_group(item, reach(item), own_reference[id(item)], backwards, baseline, masked) or _nearest_group(
                item, reach(item), own_reference[id(item)], not backwards, baseline, masked
            )
            if group is not None:
                put(item, group)
    for i, j in sorted(follows.items()):
        if j in pairs and placed[i].subjects is None and placed[i].claim.kind != "absolute":
            subject, ref = (placed[k] for k in pairs[j])
            if subject.subjects and ref.subjects:
                placed[i].subjects, placed[i].reference, placed[i].named = subject.subjects, ref.subjects, True
                placed[i].mention = subject.mention
                continue
        if j >= 0 and placed[i].subjects is None and placed[j].subjects is not None:
            placed[i].subjects, placed[i].named, placed[i].mention = placed[j].subjects, placed[j].named, placed[j].mention
    # No row in the sentence: the one row the previous sentence named ("INT8 was slow. It took 0.094 s.").
    if not groups and len(previous_groups) == 1 and _ANAPHORA.match(masked, sentence[0]):
        for item in placed:
            if item.subjects is None and (item.claim.kind == "absolute" or not set(previous_groups[0].labels) & set(baseline)):
                put(item, previous_groups[0], named=True)
    # References of relative claims.
    for item in placed:
        if item.claim.kind not in ("percent", "ratio", "difference"):
            continue
        if item.reference is not None:
            continue
        own = own_reference[id(item)]
        if own is not None and (item.subjects is None or set(item.subjects) != set(own.labels)):
            item.reference = own.labels
    # Relative claims of a sentence with no rows: the rows its absolute claims matched ("went from 8.01 MB to 4.63 MB,
    # 42% less").
    _place_by_values(placed, checker)
    return placed


def _reference_of(claim: Claim, references: Sequence[_Group], masked: str) -> _Group | None:
    """The row a relative claim compares with, among the groups marked as references: the one right after it ("40%
    smaller than the baseline", "half the memory of FP32"), else the nearest before it ("Compared to FP32, INT8 is
    1.8x slower"), else the nearest after it ("INT8 saves 35% and NF4 40% of the baseline")."""
    if claim.kind == "absolute":
        return None
    after = [g for g in references if g.start >= claim.end]
    if after:
        gap = masked[claim.end : after[0].start]
        if len(gap) <= 50 and not re.search(r"[\d;]", gap) and re.search(_REFERENCE_MARKER, gap, re.I):
            return after[0]
    before = [g for g in references if g.end <= claim.start]
    if before:
        return before[-1]
    return after[0] if after else None


def _attached(claim: Claim, candidates: Sequence[_Group], masked: str, sentence: tuple[int, int]) -> _Group | None:
    """The row group a claim is plainly attached to, if any: one in parentheses right after it ("4.63 MB (INT8)"), one
    after a preposition ("4.63 MB with INT8", "25.2 for FP4"), or one before it with only linking words between
    ("INT8 (4.63 MB)", "INT8: 4.63 MB", "INT8 took 0.094 s", "FP4 is slightly faster at 69 ms")."""
    paren = re.match(r"\s*\(", masked[claim.end :])
    if paren:
        opening = claim.end + paren.end()
        inside = [g for g in candidates if opening <= g.start]
        if inside and re.fullmatch(r"(?:\s|for|in|with|on|using|at|of|the|an?)*", masked[opening : inside[0].start], re.I):
            return inside[0]
    after = [g for g in candidates if g.start >= claim.end]
    if after and re.fullmatch(_NUMBER_TO_LABEL, masked[claim.end : after[0].start], re.I):
        return after[0]
    opening = masked.rfind("(", sentence[0], claim.start)
    if opening >= 0 and ")" not in masked[opening : claim.start]:
        # "2.72 MB (INT8, −35%)": the row that opens the parentheses.
        first = next((g for g in candidates if g.start > opening), None)
        if (
            first is not None
            and first.end <= claim.start
            and re.fullmatch(r"\s*", masked[opening + 1 : first.start])
            and re.fullmatch(r"\s*[,:;]\s*(?:about\s+|roughly\s+|~\s*)?", masked[first.end : claim.start])
        ):
            return first
    before = [g for g in candidates if g.end <= claim.start]
    if before:
        gap = masked[before[-1].end : claim.start]
        if re.fullmatch(_LABEL_TO_NUMBER, gap, re.I):
            return before[-1]
        words = re.findall(r"[A-Za-z'’]+", gap)
        if (
            len(words) <= 6
            and not re.search(r"[\d,;]|\b(?:from|than|vs|versus|compared|relative|while|whereas|but|and)\b", gap, re.I)
            and re.search(_LINK_AT_END, gap, re.I)
        ):
            return before[-1]
    return None


_ANAPHORA = re.compile(
    r"[\s*_>-]*(?:it|its|it['’]s|this|that|they|their|these|those|which|the\s+(?:same\s+)?(?:model|latter|former|"
    r"quantized\s+model|variant|version|configuration))\b",
    re.I,
)
_COMPARED_BEFORE = r"\b(?:instead\s+of|compared\s+(?:to|with)|versus|vs\.?|than|against|relative\s+to)\s+(?:(?:about|roughly|around|only|just)\s+|~\s*)?$"
_NUMBER_TO_LABEL = (
    r"\s*(?:[A-Za-z]+\s+){0,3}?(?:for|in|with|on|under|using|at|by)\s+(?:(?:the|an?|our|my|both|all|each\s+of)\s+)*"
    r"(?:model\s+)?"
)
_LINK_AT_END = (
    r"(?:\b(?:at|with|of|to|was|is|were|are|took|takes|needs|needed|used|uses|use|had|has|reached|reaches|hit|got|gets|"
    r"gave|gives|achieved|averaged|managed|generated|produced|required|requires|about|only|just|around|roughly|saves?|saved|"
    r"cuts?|reduces?|reduced|costs?|adds?|added|loses?|lost|gains?|gained|drops?|dropped|shrinks?|shrank|"
    r"approximately|nearly|almost|averaging)|[:=(~])\s*$"
)
_LABEL_TO_NUMBER = (
    r"(?:['’]s)?\s*(?:(?:model|models|memory|footprint|latency|perplexity|throughput|ppl|size|generation|version|"
    r"quantization|quantized|variants?|versions?|formats?|config(?:uration)?s?|weights|was|is|were|are|used|uses|use|took|takes|needed|"
    r"needs|"
    r"required|requires|reached|reaches|had|has|gave|gives|got|gets|achieved|achieves|hit|ran|runs|came\s+in|comes\s+in|"
    r"at|with|of|only|just|about|roughly|around|approximately|nearly|almost|a|an|the|then|still|also|on|average|"
    r"[:=(~])\s*){0,5}"
)


def _nearest_group(
    item: _Placed,
    groups: Sequence[_Group],
    reference: _Group | None,
    backwards: bool,
    baseline: Sequence[str],
    masked: str,
) -> _Group | None:
    """The row group nearest before (``backwards``) or after a claim; a relative claim skips the reference's."""
    relative = item.claim.kind in ("percent", "ratio", "difference")
    candidates = [g for g in groups if not (relative and g is reference)]
    if relative and reference is None:
        # With no row marked as the reference, the baseline is it: "INT8 took 94 ms and FP32 52 ms, so it was 80% slower".
        not_baseline = [g for g in candidates if not set(g.labels) <= set(baseline)]
        candidates = not_baseline or candidates
    if backwards:
        before = [g for g in candidates if g.end <= item.claim.start]
        return before[-1] if before else None
    after = [g for g in candidates if g.start >= item.claim.end]
    if after and re.match(r"\s*(?:[,;]|and\b|but\b|while\b|whereas\b|although\b|or\b)", masked[item.claim.end : after[0].start]):
        return None  # "INT8 saves 42% and 4-bit 45%": the row after "and" starts the next clause
    return after[0] if after else None


def _place_from_to(
    placed: list[_Placed],
    groups: Sequence[_Group],
    reference: _Group | None,
    masked: str,
    clauses: Sequence[tuple[int, int]],
    baseline: tuple[str, ...],
    put: Callable[[_Placed, _Group, bool], None],
) -> dict[int, tuple[int, int]]:
    """Place pairs of numbers with no row named between them. "From A to B" (or "A → B"): B on the row the pair is
    about ("INT8 dropped from 385 to 213 tokens/s", "INT8 (21.3 → 21.5)", "from 8 MB to 4.6 MB with INT8"), A on the
    row it is compared with (the reference, else the baseline). "A vs B": A and B on the two rows the clause names, in
    order ("INT8 is as good as full precision (21.5 vs 21.3)"). Returns, by the second number's index, the indexes of
    the pair's subject and reference, for a relative claim that follows the pair ("21.3 → 21.5, +0.9%")."""
    pairs: dict[int, tuple[int, int]] = {}
    for index, (first, second) in enumerate(itertools.pairwise(placed)):
        a, b = first.claim, second.claim
        if a.kind != "absolute" or b.kind != "absolute" or a.unit != b.unit or first.subjects or second.subjects:
            continue
        gap = masked[a.end : b.start]
        if any(a.end <= g.start < b.start for g in groups):
            continue
        if re.fullmatch(r"\s*(?:vs\.?|versus|compared\s+(?:to|with)|against)\s*", gap, re.I):
            # "identical to full precision (21.5 vs 21.3)": the rows in the order the clause names them.
            clause = _clause_of(clauses, a.start)
            in_clause = [g for g in groups if clause[0] <= g.start < clause[1]]
            two = in_clause if len(in_clause) == 2 else list(groups) if len(groups) == 2 else []
            if two and two[0].reference_priority > two[1].reference_priority:
                two.reverse()  # "Compared with the baseline, FP4 ... (25.2 vs 21.3)": FP4's, then the baseline's
            if two:
                put(first, two[0], True)
                put(second, two[1], True)
                pairs[index + 1] = (index, index + 1)
            continue
        arrow = re.fullmatch(r"\s*(?:→|->|=>|⟶)\s*", gap)
        from_to = re.search(r"\bfrom\s+$", masked[max(0, a.start - 20) : a.start], re.I) and re.fullmatch(r"\s+to\s+", gap)
        if not (arrow or from_to):
            continue
        others = [g for g in groups if g is not reference]
        subject = None
        after = [g for g in others if g.start >= b.end]
        if after and (
            re.fullmatch(_NUMBER_TO_LABEL, masked[b.end : after[0].start], re.I)
            or re.fullmatch(r"\s*\(\s*", masked[b.end : after[0].start])
        ):
            subject = after[0]
        before = [g for g in others if g.end <= a.start]
        if subject is None and before:
            between = masked[before[-1].end : a.start]
            if re.fullmatch(r"(?:['’]s)?\s*(?:[A-Za-z]+\s+){0,4}?(?:from\s+)?|\s*\(\s*", between, re.I):
                subject = before[-1]
        if subject is None:
            clause = _clause_of(clauses, b.start)
            in_clause = [g for g in others if clause[0] <= g.start < clause[1]]
            subject = in_clause[0] if len(in_clause) == 1 else None
        if subject is None:
            continue
        if reference is not None and reference is not subject:
            put(first, reference, True)
        elif not set(subject.labels) <= set(baseline):
            first.subjects, first.named = baseline, False
        else:
            continue
        put(second, subject, True)
        pairs[index + 1] = (index + 1, index)
    return pairs


def _place_by_values(placed: list[_Placed], checker: _Checker) -> None:
    """Complete relative claims from the rows of the sentence's absolute claims (those they were placed on, else those
    whose numbers they state): "memory went from 8.01 MB to 4.63 MB (42% less)" compares the row of 4.63 MB with that
    of 8.01 MB; "without the cache it took 2.9 s instead of 0.35 s, 8x slower" compares use_cache=False with the row
    of 0.35 s."""
    rows_of: list[list[str]] = []
    for absolute in (p for p in placed if p.claim.kind == "absolute" and p.claim.unit in _UNIT_METRIC):
        if absolute.subjects:
            rows_of.append(list(absolute.subjects))
            continue
        category = _UNIT_METRIC[absolute.claim.unit]
        matching = []
        for label in checker.labels_with(category):
            forms = _claim_forms(absolute.claim, checker.by_key[(label, category)].value, None, category)
            if any(_agrees(absolute.claim, form) and _rounds_to(absolute.claim, [form]) for form in forms):
                matching.append(label)
        if matching:
            rows_of.append(matching)
    for item in placed:
        if item.claim.kind not in ("percent", "ratio", "difference") or item.reference is not None:
            continue
        if item.subjects is None:
            firsts = list(dict.fromkeys(rows[0] for rows in rows_of))
            if len(firsts) >= 2:
                item.subjects, item.reference, item.named = (firsts[-1],), (firsts[0],), True
            continue
        if not item.subjects:
            continue
        family = checker.labels.family(item.subjects[0])
        for rows in rows_of:
            if set(rows) & set(item.subjects):
                continue
            same = [row for row in rows if checker.labels.family(row) == family]
            item.reference = ((same or rows)[0],)
            break


def _verdict(item: _Placed, checker: _Checker, hints: Sequence[str]) -> ClaimVerdict:
    """The verdict on one placed claim."""
    claim = item.claim
    categories = checker.categories_for(claim, hints)
    if not categories:
        said = _describe(claim)
        what = _METRIC_NAMES.get(claim.metric or "", claim.metric or "such metric")
        return ClaimVerdict(
            claim, "unmatched", f"No number in your results matches '{said}' (your results have no {what}).", None
        )
    said = _describe(claim, categories[0])
    outcomes = [
        (reading, found) for reading in _readings(item, checker, categories) if (found := checker.evaluate(claim, reading))
    ]
    if not outcomes and claim.kind in ("percent", "ratio", "difference"):
        # The rows have none of the metric the sentence suggests: another metric, if the claim bears it out (or, for
        # "faster"/"slower", whichever speed metric they have).
        speed = claim.direction in ("faster", "slower")
        others = [c for c in checker.categories if c not in categories and (not speed or _speed_sense(c))]
        fallback = [(r, f) for r in _readings(item, checker, others) if (f := checker.evaluate(claim, r))]
        outcomes = fallback if speed else [(r, f) for r, f in fallback if all(o.agrees for o in f)]
    if item.subjects == () or (item.subjects is not None and not outcomes):
        rows = item.mention or "the rows you name"
        what = _METRIC_NAMES.get(categories[0], categories[0])
        return ClaimVerdict(
            claim, "unmatched", f"No number in your results matches '{said}': your results have no {what} for {rows}.", None
        )
    if not outcomes:
        return ClaimVerdict(claim, "unmatched", f"No number in your results matches '{said}'.", None)
    if item.subjects is None:
        # No row named: the claim agrees if some row (or pair of rows) bears it out.
        agreeing = [o for _, found in outcomes for o in found if o.agrees]
        if agreeing:
            return _agreement(claim, said, min(agreeing, key=lambda o: abs(o.actual - claim.stated) / max(abs(o.actual), 1e-12)))
        comparable = [(r, f) for r, f in outcomes if 0.1 <= abs(f[0].actual) / max(abs(claim.stated), 1e-12) <= 10]
        if not comparable:
            return ClaimVerdict(claim, "unmatched", f"No number in your results matches '{said}'.", None)
        shown = "; ".join(f"{_where(found[0])}: {_actual(claim, found[0])}" for _, found in comparable[:4])
        return ClaimVerdict(claim, "unmatched", f"No number in your results matches '{said}' (your table shows {shown}).", None)
    strict = _strict_agreement(item, checker, categories) if not item.named else None
    for _, found in outcomes:
        if all(o.agrees for o in found):
            if strict is not None and not any(_rounds_to(claim, o.forms) for o in found):
                return _agreement(claim, said, strict)
            other = None
            precise = not (claim.decimals is None or claim.approximate or claim.bound is not None)
            if item.named and precise and not any(_rounds_to(claim, o.forms) for o in found):
                other = _other_row(claim, checker, found[0], strict=True)
            if other is None:
                return _agreement(claim, said, found[0])
            if not _beside_its_row(item):
                return _ambiguous(claim, said, found[0], other)
            wrong = found[0]
            actual = _format_actual(claim, wrong.forms[0], wrong.reading.category, wrong.reading.reference)
            message = f"Your answer says {said} for {_where(wrong)}; your table shows {actual} ({said} is {other})."
            return _contradiction(item, said, message, actual, wrong, checker)
    if strict is not None:
        return _agreement(claim, said, strict)
    _, found = outcomes[0]
    wrong = next(o for o in found if not o.agrees)
    actual = _actual(claim, wrong)
    message = f"Your answer says {said} for {_where(wrong)}; your table shows {actual}."
    other = _other_row(claim, checker, wrong, strict=True)
    if other and not _beside_its_row(item):
        return _ambiguous(claim, said, wrong, other)
    if other:
        message = message[:-1] + f" ({said} is {other})."
    elif claim.part:
        # "the parameters alone shrink to ~0.72 MB": about a part of the model, which the table does not show.
        return ClaimVerdict(
            claim,
            "unmatched",
            f"No number in your results matches '{said}' (it is about the {claim.part}, not in your table).",
            None,
        )
    return _contradiction(item, said, message, actual, wrong, checker)


_OTHER_RUN = re.compile(
    r"\b(?:earlier|previous|prior|another|other|first|second|last|older|different)\s+(?:run|runs|attempt|execution|machine)\b"
    r"|\bon (?:a|my|another) (?:gpu|laptop|colab)\b|\bin colab\b",
    re.I,
)
_LISTED = re.compile(r"^\s*(?:,|and|or|/|&)\s*(?:about\s+|~\s*)?[-+]?\d")
_LISTED_BEFORE = re.compile(
    r"(?<![A-Za-z\d.])\d+(?:\.\d+)?\s*(?:%|x|×|mb|mib|gb|kb|ms|s)?\s*(?:,|and|or|/|&)\s*(?:about\s+|~\s*)?$", re.I
)
_REFERENCE_WORDS = re.compile(r"\b(?:than|vs\.?|versus|compared|relative|from|over|against)\b", re.I)
FAR_OFF = 3.0
"""An absolute claim further than this factor from its row's number is likely about something else (a part of the
model, a gap between rows, another run): unmatched, not contradicted."""
TIMING_CATEGORIES = frozenset({"latency", "per_token", "throughput", "speed"})
# Words that name a metric family near a relative claim ("INT8 0.155 s (2.31x)" compares latencies, not memory).
_CATEGORY_WORDS = {
    "memory": re.compile(r"memory|footprint|size|small|large|big|shr[iu]nk|compress|\b(?:[kmg]i?b|bytes?)\b", re.I),
    "latency": re.compile(r"latenc|time|took|takes|long|slow|fast|quick|speed|\b(?:m?s|sec(?:onds?)?)\b", re.I),
    "per_token": re.compile(r"per[\s-]token|/\s*token|ms/tok|latenc|slow|fast", re.I),
    "throughput": re.compile(r"tokens?\s*(?:/|per)\s*s|tok/s|throughput|fast|slow|speed|rate", re.I),
    "perplexity": re.compile(r"perplexit|\bppl\b|\bppx\b|quality", re.I),
}
TIMING_SPREAD = 2.0
"""How far apart two runs of one notebook may time the same thing (the grader's own re-runs: 0.57 s and 0.23 s): what
a written answer's timings are held to (grader/checks/common.py)."""


def _contradiction(item: _Placed, said: str, message: str, actual: str, wrong: _Outcome, checker: _Checker) -> ClaimVerdict:
    """A claim the row it was read as about does not bear out: contradicted only where nothing casts doubt on that
    reading (precision first: a wrong "contradicts" accuses a student of an error they did not make)."""
    doubt = _doubt(item, wrong, checker.labels.references_for((wrong.subject,), checker.labels.labels), checker.timing_spread)
    if doubt:
        return ClaimVerdict(
            item.claim,
            "unmatched",
            f"'{said}' does not match {_where(wrong)} ({actual}), but {doubt}: not counted as a contradiction.",
            None,
        )
    return ClaimVerdict(item.claim, "contradicts", message, actual, _rows(wrong), wrong.metric)


def _doubt(item: _Placed, wrong: _Outcome, baseline: Sequence[str], timing_spread: float | None = None) -> str:
    """Why the reading of a claim as about ``wrong``'s row and metric may be wrong ('' where nothing says so).
    ``baseline``: the rows a claim about ``wrong``'s row compares with when its sentence names none."""
    claim = item.claim
    reference = wrong.reading.reference
    if (
        claim.kind in ("percent", "ratio", "difference")
        and reference is not None
        and reference not in baseline
        and not (item.reference is not None and _REFERENCE_WORDS.search(_clause_around(claim)))
    ):
        return f"the sentence does not say it compares with {reference} (rather than {' or '.join(baseline) or 'the baseline'})"
    sentence = claim.sentence
    start, end = claim.in_sentence
    if _OTHER_RUN.search(sentence):
        return "its sentence speaks of another run than the one your notebook shows"
    timed = wrong.reading.category in TIMING_CATEGORIES
    if timing_spread and timed and wrong.forms and claim.stated and wrong.forms[0]:
        # A notebook run again before it is submitted ("Restart & Run All") shows other timings than those its answer
        # quotes: a timing is held to one run only where it is off by more than runs differ (the other way round, or
        # more than ``timing_spread`` times).
        factor = claim.stated / wrong.forms[0]
        if 1 / timing_spread <= factor <= timing_spread:
            return "timings change from one run of the notebook to the next"
    if _LISTED.match(sentence[end:]) or _LISTED_BEFORE.search(sentence[:start]):
        return "it is one of a list of numbers whose rows the sentence does not pair with them one by one"
    if claim.kind in ("absolute", "difference") and wrong.forms and wrong.forms[0]:
        factor = abs(claim.stated / wrong.forms[0]) if claim.stated else 1.0
        if not 1 / FAR_OFF <= factor <= FAR_OFF:
            return "it is far from that number, so it is likely about something else (a part, a gap, another setting)"
    if claim.kind in ("percent", "ratio") and claim.metric is None:
        return "its sentence does not name the metric it compares"
    words = _CATEGORY_WORDS.get(wrong.reading.category)
    if claim.kind in ("percent", "ratio", "difference") and words is not None and not words.search(_clause_around(claim)):
        return f"the words around it do not name {_METRIC_NAMES.get(wrong.reading.category, wrong.reading.category)}"
    # "latency relative to the baseline was 0.8x": no word says which way round.
    inverse = claim.kind == "ratio" and claim.direction in (None, "of") and claim.stated and wrong.actual
    if inverse and abs(1 / claim.stated - wrong.actual) <= APPROX_TOLERANCE * abs(wrong.actual):
        return "its inverse agrees (the ratio may be written the other way round)"
    return ""


def _clause_around(claim: Claim) -> str:
    """The part of the claim's sentence between the semicolons (or colons) around it."""
    start, end = claim.in_sentence
    before = max(claim.sentence.rfind(mark, 0, start) for mark in ";:")
    after = [found for found in (claim.sentence.find(mark, end) for mark in ";:") if found >= 0]
    return claim.sentence[before + 1 : min(after) if after else len(claim.sentence)]


def _beside_its_row(item: _Placed) -> bool:
    """Whether the row the claim was placed on is named beside it in its sentence, with no other number between
    ("INT8 brought the memory down to 4.44 MB"; not "its latency was 0.705 s against 0.030 s for FP32")."""
    claim, sentence = item.claim, item.claim.sentence.lower()
    start, end = claim.in_sentence
    gaps = []
    for mention in {part.strip().lower() for part in item.mention.split(" and ") if part.strip()}:
        for found in re.finditer(re.escape(mention), sentence):
            if found.end() <= start:
                gaps.append(sentence[found.end() : start])
            elif found.start() >= end:
                gaps.append(sentence[end : found.start()])
    return any(not re.search(r"\d", gap) for gap in gaps)


def _ambiguous(claim: Claim, said: str, read_as: _Outcome, other: str) -> ClaimVerdict:
    """A number the table bears out for another row than the one a sentence naming several rows was read to give it:
    unmatched, not contradicted where that row is not named beside the number (precision first: a sentence's rows are
    read by its layout, and "its latency was 0.705 s against 0.030 s for FP32" names FP32 after the number that is
    INT8's). "My INT8 model used 4.44 MB" still contradicts."""
    actual = _format_actual(claim, read_as.forms[0], read_as.reading.category, read_as.reading.reference)
    return ClaimVerdict(
        claim,
        "unmatched",
        f"'{said}' is {other} in your table; the sentence was read as about {_where(read_as)} ({actual}): "
        "not counted as a contradiction, check which row it means.",
        None,
    )


def _strict_agreement(item: _Placed, checker: _Checker, categories: Sequence[str]) -> _Outcome | None:
    """For a claim whose rows were guessed (the baseline, for the first number of "from 8 MB to 4.6 MB with INT8"), the
    outcome of a row whose number rounds to the claim's, if any: the guess may be wrong, the claim need not be."""
    unplaced = _Placed(item.claim, None, False, item.mention, item.reference)
    for reading in _readings(unplaced, checker, categories):
        for outcome in checker.evaluate(item.claim, reading):
            if outcome.agrees and _rounds_to(item.claim, outcome.forms):
                return outcome
    return None


def _readings(item: _Placed, checker: _Checker, categories: Sequence[str]) -> list[_Reading]:
    """The ways to read a placed claim: per metric family, its subject rows (each row when it names none) and, for a
    relative claim, the row it compares with (the named reference, else the baseline, else each other row when the
    subject is the baseline)."""
    claim = item.claim
    relative = claim.kind in ("percent", "ratio", "difference")
    readings: list[_Reading] = []
    for category in categories:
        rows = checker.labels_with(category)
        subject_sets = [item.subjects] if item.subjects is not None else [(row,) for row in rows]
        for subjects in subject_sets:
            if not relative:
                readings.append(_Reading(category, subjects, None))
                continue
            references = list(item.reference) if item.reference is not None else checker.labels.references_for(subjects, rows)
            for reference in references:
                readings.append(_Reading(category, tuple(s for s in subjects if s != reference), reference))
    return readings


def _agreement(claim: Claim, said: str, outcome: _Outcome) -> ClaimVerdict:
    """An agreeing verdict."""
    actual = _actual(claim, outcome)
    return ClaimVerdict(
        claim,
        "agrees",
        f"'{said}' agrees with your results ({_where(outcome)}: {actual}).",
        actual,
        _rows(outcome),
        outcome.metric,
    )


def _actual(claim: Claim, outcome: _Outcome) -> str:
    """The notebook's number of an outcome, formatted like the claim."""
    return _format_actual(claim, outcome.actual, outcome.reading.category, outcome.reading.reference)


def _rounds_to(claim: Claim, forms: Sequence[float]) -> bool:
    """Whether one of the notebook's numbers rounds to the claim's, as precisely as it is written (for number words,
    approximations and bounds: whether it is within the exact tolerance)."""
    if claim.decimals is None or claim.approximate or claim.bound is not None:
        return any(abs(form - claim.stated) <= EXACT_TOLERANCE * abs(form) for form in forms)
    unit = 10.0 if claim.decimals < 0 else 10.0 ** (-claim.decimals)
    return any(abs(form - claim.stated) <= unit / 2 * (1 + 1e-9) for form in forms)


def _where(outcome: _Outcome) -> str:
    """The rows and metric an outcome is about: "INT8 memory", "NF4 vs FP32 memory"."""
    metric = _METRIC_NAMES.get(outcome.reading.category, outcome.metric)
    if outcome.reading.reference is not None:
        return f"{outcome.subject} vs {outcome.reading.reference} {metric}"
    return f"{outcome.subject} {metric}"


def _rows(outcome: _Outcome) -> tuple[str, ...]:
    """The rows of an outcome: its subject, then its reference."""
    rows = (outcome.subject,) if outcome.subject else ()
    return rows + ((outcome.reading.reference,) if outcome.reading.reference else ())


def _other_row(claim: Claim, checker: _Checker, wrong: _Outcome, strict: bool = False) -> str | None:
    """The row whose number the claim states, when it is not the row the claim names: "NF4's memory", "INT8 vs FP32
    memory". ``strict``: only a row whose number rounds to the claim's."""
    category = wrong.reading.category
    metric = _METRIC_NAMES.get(category, wrong.metric)
    for label in checker.labels_with(category):
        if label in (wrong.subject, wrong.reading.reference):
            continue
        reading = _Reading(category, (label,), wrong.reading.reference)
        found = checker.evaluate(claim, reading)
        if any(o.agrees and (not strict or _rounds_to(claim, o.forms)) for o in found):
            if wrong.reading.reference is not None:
                return f"{label} vs {wrong.reading.reference} {metric}"
            return f"{label}'s {metric}"
    return None
