"""Similar submissions: the pairs of one assignment's notebooks whose filled-in code is unusually alike.

:func:`compare_class` (and :func:`similar_pairs`) ranks the pairs of a class's submissions by how much of their own code matches, most similar
first, with the matching regions side by side (:class:`SimilarPair`, :class:`Region`); :func:`filled_in_code` is the
text those regions' line numbers refer to; :func:`unfilled` names the submissions left out for having almost no code.

What is compared (:func:`filled_in_code`): each notebook's code cells in order (``nbformat``), without

- every line the starter notebook already gives: a line equal to one of the starter's code lines once whitespace
  and comments are dropped; a statement equal to one of the starter's once reformatted (tokens compared with strings
  by value, without brackets or trailing commas, so ``ast.unparse`` or black on the starter's lines does not make them
  the student's); and a line of 12 or more characters found in one of the starter's comments (its hints hold code to
  copy, e.g. ptq-bnb's ``# Example: {"name": ...}`` configurations);
- comments, docstrings (and any other bare string statement), IPython magics and shell lines, blank lines.

How it is normalised: Python's ``tokenize`` splits the rest into tokens; every name becomes ``V`` except keywords,
builtins and attribute names (what follows a ``.``: a library's API, which a student cannot rename without changing
what the code does), so renaming variables, parameters and functions changes nothing; strings become ``S`` (their
text is free to change); numbers and operators stay; brackets ``(`` ``)`` and trailing commas go (reformatters add and
drop them); each statement ends with one ``;`` token whatever its layout; whitespace, indentation and line breaks are
not tokens at all. (copydetect's own pygments filter was not used: it also turns attribute names into ``V``, which made
independent solutions look more alike, and it keeps brackets.)

How it is compared: each token is one character of a string that copydetect fingerprints as is
(``CodeFingerprint(..., filter=False)``), so its k-grams are ``k`` tokens long, and ``compare_files`` gives each side's
share of fingerprinted tokens that the other side matches; ``score`` is the larger share (a small notebook copied
whole into a larger one scores high). Fingerprints do not depend on where code is, so moving functions or cells
around does not hide a copy (only the few k-grams spanning a moved block's edges are lost). Two kinds of fingerprint
are not evidence and are dropped before comparing: any k-gram of the starter's own code, and any held by more than
``max(2, common * n)`` of the ``n`` submissions besides the two compared (code the task forces on everyone: the same
API calls in the same order). Regions pair the shared fingerprints that lie on one diagonal (the same offset between
the two sides), longest first, merging neighbours a small edit apart.

Submissions with fewer than ``min_tokens`` (50) tokens of filled-in code, an untouched or barely touched starter, are
skipped, not paired: two empty notebooks are not evidence. :func:`unfilled` lists them for the report to show apart.

The defaults, from measurements (tests/test_similarity.py): k = 12 tokens, window 1, common 0.2, threshold 0.75.
Each assignment's independent correct solutions (tests/corpus/<assignment>/correct-*.ipynb, eight, plus the reference
solution), compared as a class, score at most 0.58 (latency), 0.63 (perplexity), 0.61 (ptq-bnb), 0.44 (quantization);
medians 0.18 to 0.24. The highest are ``correct-01`` (the by-the-book one) against the solution, or against another
that follows the starter's step-by-step hints (ptq-bnb): they share the same statements in the same order, beyond what
the class shares. A disguised copy of each of those 36 notebooks (every name the starter does not bind renamed,
comments and docstrings replaced, functions and cells reordered, ``ast.unparse``'s layout with two-space indents and
blank lines) added to its class ranks first with at least 0.95, 0.94, 0.89, 0.92. 0.75 sits between (margins 0.12
and 0.14). k = 10 to 15 separate about as well (independent max 0.62 to 0.66, copies 0.85 to 0.90); a longer k loses
copies' shorter runs (k = 20: copies from 0.78). Window 1 fingerprints every k-gram, which notebooks this small
afford, and keeps scores reproducible: copydetect hashes k-grams with Python's ``hash``, salted per process, so a
window above 1 picks other fingerprints, and scores, from run to run. Dropping the class's common fingerprints widens
the gap: without it independent pairs reach 0.76 (copies 0.96). A class of two or three has no "common" to learn,
and its independent pairs score higher.

A partial copy (two functions copied into an otherwise independent notebook) scores 0.3 to 0.9, depending on how much
of the notebook those functions are. It usually ranks first in its class, with regions on those functions (not in
ptq-bnb, whose functions are a few lines each), but only a copy of most of a notebook's own code reaches the default
threshold: pass a lower ``threshold`` to review more pairs.
"""

from __future__ import annotations

import ast
import builtins
import io
import itertools
import keyword
import re
import tokenize
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from copydetect import CodeFingerprint, compare_files
from copydetect.utils import get_token_coverage
from nbformat.warnings import MissingIDFieldWarning

DEFAULT_THRESHOLD = 0.75  # score at or above which a pair is reported (module docstring: the measurements)
DEFAULT_K = 12  # tokens in a fingerprinted k-gram: the shortest match that counts
DEFAULT_WINDOW = 1  # winnowing window: every k-gram is a fingerprint (any match of k + window - 1 = 12 tokens is found)
MIN_TOKENS = 50  # a submission with less filled-in code than this is not compared (see unfilled)
DEFAULT_COMMON = 0.2  # a fingerprint held by more than common * n of the n submissions besides two is common to the class
_MIN_OTHERS = 2  # ... or by more than this many, whatever the class's size

_BUILTINS = frozenset(dir(builtins))
_SKIPPED = frozenset({tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER})
# Python 3.12+ splits f-strings (3.14: t-strings) into parts whose names are tokens of their own.
_STRING_STARTS = frozenset(getattr(tokenize, name) for name in ("FSTRING_START", "TSTRING_START") if hasattr(tokenize, name))
_STRING_ENDS = frozenset(getattr(tokenize, name) for name in ("FSTRING_END", "TSTRING_END") if hasattr(tokenize, name))
_MAGIC = re.compile(r"^\s*(%|!)")
_WORD = re.compile(r"\w+|[^\w\s]")
_STRING_PREFIX = re.compile(r"^[A-Za-z]*")
_PARENS = frozenset("()")
_CLOSING = frozenset(")]}")
_MIN_HINT = 12  # the shortest line (characters, without whitespace) dropped for appearing in a starter's comment


@dataclass(frozen=True)
class Region:
    """One stretch of matching code: 1-based, inclusive line ranges in each side's :func:`filled_in_code`, and those lines."""

    a_lines: tuple[int, int]
    b_lines: tuple[int, int]
    a_text: str
    b_text: str


@dataclass(frozen=True)
class SimilarPair:
    """Two submissions whose filled-in code is alike: ``score`` in [0, 1], the larger of ``a_share`` and ``b_share``
    (the share of each side's fingerprinted code that matches the other side), and the matching regions."""

    a: str
    b: str
    score: float
    a_share: float
    b_share: float
    regions: tuple[Region, ...]


@dataclass(frozen=True)
class _Token:
    """One normalised token of filled-in code: its symbol and the 1-based lines of the shown text it spans."""

    symbol: str
    first: int
    last: int


@dataclass(frozen=True)
class _Code:
    """A notebook's filled-in code: the text shown (lines) and its normalised tokens."""

    lines: tuple[str, ...]
    tokens: tuple[_Token, ...]

    @property
    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


def _word_tokens(line: str) -> list[tokenize.TokenInfo]:
    """A line that Python cannot tokenise, split into words (names, numbers) and single other characters."""
    tokens = []
    for m in _WORD.finditer(line):
        word = m.group()
        kind = tokenize.NAME if word[0].isalpha() or word[0] == "_" else tokenize.NUMBER if word[0].isdigit() else tokenize.OP
        tokens.append(tokenize.TokenInfo(kind, word, (1, m.start()), (1, m.end()), line))
    return tokens


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    """Python's tokens of a cell's source; a cell that does not tokenise (a syntax error) is tokenised line by line, and a
    line that still does not, word by word."""
    try:
        return list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        pass
    tokens: list[tokenize.TokenInfo] = []
    for row, line in enumerate(source.splitlines(), start=1):
        indent = len(line) - len(line.lstrip())
        try:
            one = list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
        except (tokenize.TokenError, SyntaxError):
            one = _word_tokens(line.strip())
        for t in one:
            if t.type in (tokenize.NEWLINE, tokenize.ENDMARKER) and t.start[0] > 1:
                continue
            tokens.append(t._replace(start=(row, t.start[1] + indent), end=(row, t.end[1] + indent), line=line))
    return tokens


def _logical_lines(tokens: Sequence[tokenize.TokenInfo]) -> Iterator[list[tokenize.TokenInfo]]:
    """The tokens grouped by logical line (each group ends at a NEWLINE or at the end)."""
    group: list[tokenize.TokenInfo] = []
    for t in tokens:
        group.append(t)
        if t.type == tokenize.NEWLINE:
            yield group
            group = []
    if group:
        yield group


def _code_rows(source: str, tokens: Sequence[tokenize.TokenInfo]) -> list[str]:
    """Each physical line of the source without its comment (0-based list)."""
    rows = source.splitlines()
    for t in tokens:
        if t.type == tokenize.COMMENT and t.start[0] <= len(rows):
            row = rows[t.start[0] - 1]
            rows[t.start[0] - 1] = row[: t.start[1]]
    return [row.rstrip() for row in rows]


def _line_key(line: str) -> str:
    """A line of code (or of a comment) as compared with the starter's: without whitespace, one kind of quote."""
    return "".join(line.split()).replace('"', "'")


def _string_key(text: str) -> str:
    """A string literal by its text, whatever its quotes, prefix, escapes or whitespace (an f-string by its source)."""
    try:
        value = ast.literal_eval(text)
        inner = value if isinstance(value, str) else repr(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        inner = _STRING_PREFIX.sub("", text).strip("'\"")
    return "".join(inner.split()).replace('"', "'")


def _statement_key(tokens: Sequence[tokenize.TokenInfo]) -> str:
    """A logical line as compared with the starter's: its tokens, adjacent strings joined, without brackets or trailing
    commas (a reformatter adds and removes those)."""
    out: list[str] = []
    string = False
    for i, t in enumerate(tokens):
        if t.string in _PARENS or (t.string == "," and i + 1 < len(tokens) and tokens[i + 1].string in _CLOSING):
            continue
        if t.type == tokenize.STRING:
            if string:
                out[-1] += _string_key(t.string)
            else:
                out.append("S" + _string_key(t.string))
            string = True
            continue
        out.append(t.string)
        string = False
    return "\x00".join(out)


def _clean(source: str) -> str:
    """A cell's source with IPython's magics and shell lines blanked (they are not Python)."""
    return "\n".join("" if _MAGIC.match(line) else line for line in source.splitlines()) + "\n"


def _code_cells(path: Path) -> list[str]:
    with warnings.catch_warnings():  # notebooks saved before nbformat 4.5 have no cell ids: not the instructor's concern
        warnings.simplefilter("ignore", MissingIDFieldWarning)
        notebook = nbformat.read(path, as_version=4)
    return [_clean(cell.source) for cell in notebook.cells if cell.cell_type == "code"]


@dataclass(frozen=True)
class _Given:
    """What the starter gives: its code lines, its statements, and its comments (hints that hold code to copy)."""

    lines: frozenset[str]
    statements: frozenset[str]
    hints: tuple[str, ...]

    def covers_line(self, line: str) -> bool:
        key = _line_key(line)
        if not key:
            return False
        return key in self.lines or (len(key) >= _MIN_HINT and any(key in hint for hint in self.hints))


def _significant(group: Sequence[tokenize.TokenInfo]) -> list[tokenize.TokenInfo]:
    return [t for t in group if t.type not in _SKIPPED and t.type != tokenize.NEWLINE]


def _given(starter: Path | None) -> _Given:
    """What the starter gives (nothing without a starter)."""
    lines: set[str] = set()
    statements: set[str] = set()
    hints: list[str] = []
    for source in _code_cells(starter) if starter is not None else []:
        tokens = _tokens(source)
        lines.update(_line_key(row) for row in _code_rows(source, tokens))
        statements.update(_statement_key(_significant(group)) for group in _logical_lines(tokens))
        hints.extend(_line_key(t.string.lstrip("#")) for t in tokens if t.type == tokenize.COMMENT)
    lines.discard("")
    statements.discard("")
    return _Given(frozenset(lines), frozenset(statements), tuple(hints))


def _symbol(t: tokenize.TokenInfo, previous: tokenize.TokenInfo | None) -> str:
    """The normalised form of one token: names that the student chose become ``V``, strings ``S``."""
    if t.type == tokenize.NAME:
        name = t.string
        if keyword.iskeyword(name) or name in _BUILTINS or (previous is not None and previous.string == "."):
            return name
        return "V"
    if t.type == tokenize.STRING:
        return "S"
    if t.type == tokenize.NEWLINE or t.string == ";":
        return ";"
    return t.string.strip()


def _normalise(path: Path, given: _Given) -> _Code:
    """A notebook's filled-in code: code cells in order, without the starter's lines and statements, comments,
    docstrings or blank lines; and its normalised tokens."""
    shown: list[str] = []
    normalised: list[_Token] = []
    for source in _code_cells(path):
        tokens = _tokens(source)
        rows = _code_rows(source, tokens)
        dropped = {row for row, text in enumerate(rows, start=1) if given.covers_line(text)}
        kept: list[tuple[str, int, int]] = []  # symbol, first and last source row
        for group in _logical_lines(tokens):
            significant = _significant(group)
            if all(t.type == tokenize.STRING or t.type in _STRING_STARTS or t.type in _STRING_ENDS for t in significant):
                continue  # a docstring or a bare string (or nothing)
            if _statement_key(significant) in given.statements:
                continue
            depth = 0
            for i, t in enumerate(significant):
                if t.type in _STRING_STARTS:
                    depth += 1
                    if depth == 1 and t.start[0] not in dropped:
                        kept.append(("S", t.start[0], t.start[0]))
                    continue
                if t.type in _STRING_ENDS:
                    depth -= 1
                    if depth == 0 and kept and kept[-1][0] == "S":
                        kept[-1] = ("S", kept[-1][1], t.end[0])
                    continue
                if depth or t.start[0] in dropped or t.string in _PARENS or not t.string.strip():
                    continue
                if t.string == "," and i + 1 < len(significant) and significant[i + 1].string in _CLOSING:
                    continue
                kept.append((_symbol(t, significant[i - 1] if i else None), t.start[0], t.end[0]))
            if kept and kept[-1][0] != ";":
                kept.append((";", kept[-1][2], kept[-1][2]))
        shown_rows = sorted({row for symbol, first, last in kept if symbol != ";" for row in range(first, last + 1)})
        line_of = {row: len(shown) + n for n, row in enumerate(shown_rows, start=1)}
        shown.extend(rows[row - 1] if row <= len(rows) else "" for row in shown_rows)
        normalised.extend(_Token(symbol, line_of[first], line_of[last]) for symbol, first, last in kept)
    return _Code(tuple(shown), tuple(normalised))


def filled_in_code(notebook_path: Path, starter_path: Path | None) -> str:
    """The student's own code: the notebook's code cells in order, without the lines the starter already gives (compared
    without whitespace or comments), comments, docstrings, IPython magics and blank lines. Regions' line numbers count
    lines of this text."""
    return _normalise(notebook_path, _given(starter_path)).text


class _Alphabet:
    """One character per distinct symbol, so that copydetect's k-grams are k tokens long."""

    def __init__(self) -> None:
        self._chars: dict[str, str] = {}

    def encode(self, tokens: Sequence[_Token]) -> str:
        out = []
        for t in tokens:
            char = self._chars.get(t.symbol)
            if char is None:
                code = 0x100 + len(self._chars)
                char = self._chars[t.symbol] = chr(code if code < 0xD800 else code + 0x800)
            out.append(char)
        return "".join(out)


def _fingerprint(name: str, encoded: str, k: int, window: int) -> Any:
    """copydetect's winnowed fingerprints of an encoded token string (already filtered: one character a token)."""
    return CodeFingerprint(f"{name}.py", k, window, filter=False, fp=io.StringIO(encoded))


def _without(fingerprint: Any, boilerplate: set[int], k: int) -> None:
    """Drops the boilerplate fingerprints. (copydetect's own ``boilerplate`` argument also drops a fingerprint that
    merely repeats within the file: np.intersect1d with assume_unique=True on hashes that are not unique.)"""
    fingerprint.hashes = fingerprint.hashes - boilerplate
    fingerprint.hash_idx = {h: idx for h, idx in fingerprint.hash_idx.items() if h not in boilerplate}
    fingerprint.token_coverage = get_token_coverage(fingerprint.hash_idx, k, len(fingerprint.filtered_code))


@dataclass(frozen=True)
class _Run:
    """Matching tokens: ``a[a0:a1]`` matches ``b[b0:b1]``."""

    a0: int
    a1: int
    b0: int
    b1: int

    @property
    def size(self) -> int:
        return self.a1 - self.a0


def _runs(fa: Any, fb: Any, k: int) -> list[_Run]:
    """The matching stretches of two fingerprinted files, paired: shared fingerprints on one diagonal (the same offset
    between a and b) at most k tokens apart form a run; runs are taken longest first where they overlap none taken
    (greedy tiling), then neighbours in both files are merged (a small edit between them)."""
    diagonals: dict[int, list[int]] = {}
    for h in fa.hashes & fb.hashes:
        for i in fa.hash_idx[h]:
            for j in fb.hash_idx[h]:
                diagonals.setdefault(int(i) - int(j), []).append(int(i))
    candidates: list[_Run] = []
    for offset, starts in diagonals.items():
        starts.sort()
        first = previous = starts[0]
        for i in [*starts[1:], None]:
            if i is None or i - previous > k:
                candidates.append(_Run(first, previous + k, first - offset, previous + k - offset))
                if i is not None:
                    first = i
            if i is not None:
                previous = i
    taken: list[_Run] = []
    used_a: set[int] = set()
    used_b: set[int] = set()
    for run in sorted(candidates, key=lambda r: (-r.size, r.a0, r.b0)):
        span_a, span_b = range(run.a0, run.a1), range(run.b0, run.b1)
        if used_a.isdisjoint(span_a) and used_b.isdisjoint(span_b):
            taken.append(run)
            used_a.update(span_a)
            used_b.update(span_b)
    merged: list[_Run] = []
    for run in sorted(taken, key=lambda r: r.a0):
        last = merged[-1] if merged else None
        if last is not None and run.a0 - last.a1 <= k and 0 <= run.b0 - last.b1 <= k:
            merged[-1] = _Run(last.a0, run.a1, last.b0, run.b1)
        else:
            merged.append(run)
    return merged


def _region(a: _Code, b: _Code, run: _Run) -> Region:
    a_lines = (a.tokens[run.a0].first, a.tokens[run.a1 - 1].last)
    b_lines = (b.tokens[run.b0].first, b.tokens[run.b1 - 1].last)
    return Region(
        a_lines,
        b_lines,
        "\n".join(a.lines[a_lines[0] - 1 : a_lines[1]]),
        "\n".join(b.lines[b_lines[0] - 1 : b_lines[1]]),
    )


def compare_class(
    submissions: Mapping[str, Path],
    starter: Path | None,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    k: int = DEFAULT_K,
    window: int = DEFAULT_WINDOW,
    min_tokens: int = MIN_TOKENS,
    common: float = DEFAULT_COMMON,
) -> tuple[list[SimilarPair], list[str]]:
    """The pairs of submissions (id -> notebook) whose filled-in code is alike, most similar first, those whose score
    reaches ``threshold`` only; and the submissions left out, with fewer than ``min_tokens`` (or ``k``) tokens of
    filled-in code (each notebook is read once for both). ``k``: tokens in a fingerprinted k-gram (the shortest match
    that counts); ``window``: winnowing window (any match of ``k + window - 1`` tokens or more is found; above 1,
    scores vary from run to run). Fingerprints that the starter holds, or that more than ``max(2, common * n)`` of the
    ``n`` submissions besides the two compared hold, are not evidence and are dropped; so a pair's score depends on
    its class."""
    given = _given(starter)
    alphabet = _Alphabet()
    codes: dict[str, _Code] = {}
    prints: dict[str, Any] = {}
    left_out: list[str] = []
    for name in sorted(submissions):
        code = _normalise(submissions[name], given)
        if len(code.tokens) < max(min_tokens, k):
            left_out.append(name)
            continue
        codes[name] = code
        prints[name] = _fingerprint(name, alphabet.encode(code.tokens), k, window)
    boilerplate: set[int] = set()
    if starter is not None:
        whole = _normalise(starter, _Given(frozenset(), frozenset(), ()))
        if len(whole.tokens) >= k:
            boilerplate |= _fingerprint("starter", alphabet.encode(whole.tokens), k, 1).hashes
    # Common to the class: held by more than `limit` submissions besides the two that a pair compares.
    counts = Counter(h for fingerprint in prints.values() for h in fingerprint.hashes)
    limit = max(_MIN_OTHERS, common * len(prints))
    boilerplate |= {h for h, n in counts.items() if n - 2 > limit}
    for fingerprint in prints.values():
        _without(fingerprint, boilerplate, k)
    pairs: list[SimilarPair] = []
    for a, b in itertools.combinations(codes, 2):
        if prints[a].hashes.isdisjoint(prints[b].hashes):
            continue
        overlap, (share_a, share_b), _ = compare_files(prints[a], prints[b])
        # Less matching code than a submission must write to be compared at all is no evidence, whatever its share
        # of what is left once the class's common code is set aside (two samples alike on three lines of settings).
        if overlap < max(min_tokens, k):
            continue
        share_a, share_b = min(float(share_a), 1.0), min(float(share_b), 1.0)
        score = max(share_a, share_b)
        if score >= threshold:
            regions = tuple(_region(codes[a], codes[b], run) for run in _runs(prints[a], prints[b], k))
            pairs.append(SimilarPair(a, b, score, share_a, share_b, regions))
    pairs.sort(key=lambda p: (-p.score, p.a, p.b))
    return pairs, left_out


def similar_pairs(submissions: Mapping[str, Path], starter: Path | None, **options: Any) -> list[SimilarPair]:
    """The pairs of :func:`compare_class` (its options, by keyword)."""
    return compare_class(submissions, starter, **options)[0]


def unfilled(submissions: Mapping[str, Path], starter: Path | None, *, min_tokens: int = MIN_TOKENS) -> list[str]:
    """The submissions that :func:`similar_pairs` leaves out: fewer than ``min_tokens`` tokens of filled-in code."""
    return compare_class(submissions, starter, min_tokens=min_tokens)[1]
