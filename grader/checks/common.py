"""Check kinds any assignment can use."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from grader.checks.base import CheckContext, Params, Verdict, check_kind
from grader.checks.claims import TIMING_SPREAD, Fact, check_claims, extract_claims
from grader.checks.shown import has_outputs, shown_tables
from grader.discover.notebook import markdown_after, markdown_section, section_cells
from grader.kernel.values import Frame, is_number

# A question title: a numbered item opening in bold ("1.  **Memory Scaling:**"), a whole line in
# bold, or a markdown heading. Bullets are answers, not titles.
QUESTION_TITLE = re.compile(
    r"^\s*\d+[.)]\s+\*\*(?P<numbered>[^*]+)\*\*|^\s*\*\*(?P<bold>[^*]+)\*\*:?\s*$|^\s*#{1,6}\s+(?P<heading>.+)$"
)
HTML_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)  # invisible when the notebook renders
LIST_MARKER = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+", re.MULTILINE)
MARKUP = re.compile(r"[*_`>#]|^\s*[-+]\s+|^\s*\d+[.)]\s+", re.MULTILINE)


class WrittenAnswerParams(Params):
    """Where a written answer lives, and how the starter's placeholder reads."""

    section: str = Field(description="Heading of the notebook section holding the answers.")
    question: str = Field(description="The question's title, as the starter writes it.")
    prompt: str = Field("", description="The starter's placeholder text for this answer (after 'TODO:').")
    min_words: int = Field(8, ge=1, description="Fewer words than this is no answer.")
    results: list[str] = Field(
        [],
        description=(
            "Notebook variables holding results tables (DataFrames) the answer may quote: each number the answer states "
            "is checked against them, as evidence for whoever grades it (not a score)."
        ),
    )


def _words(text: str) -> list[str]:
    return re.findall(r"[\w'’.-]+", MARKUP.sub(" ", text))


def _normalise(text: str) -> str:
    return " ".join(_words(text)).casefold()


def _title(line: str) -> str | None:
    """The question title a line opens (None for an ordinary line or a bold TODO)."""
    match = QUESTION_TITLE.match(line)
    if not match:
        return None
    title = (match.group("numbered") or match.group("bold") or match.group("heading") or "").strip()
    return None if title.strip(" :").casefold() == "todo" else title


# What may precede a title on its line: a blockquote, a list marker, a number ("1.", "Q2:", "Question 3 -").
TITLE_PREFIX = re.compile(r"^\s*(?:>\s*)*(?:[-*+]\s+)?(?:(?:q(?:uestion)?\s*)?\d+\s*[.):\-]?\s+)?", re.IGNORECASE)
LEADING_BOLD = re.compile(r"^(?:\*\*|__)(?P<text>.+?)(?:\*\*|__)")
PLAIN_TITLE = re.compile(r"^(?P<text>[A-Za-z][\w ()/&'-]{0,48}?)\s*[:.]\s")
TITLE_NUMBER = re.compile(r"(?:^|\b(?:q|question|answer)\s*)(?P<number>\d+)\b", re.IGNORECASE)
MAX_TITLE_WORDS = 10


def _anchor(line: str) -> tuple[str, str] | None:
    """(title, the rest of the line) where a line opens with a title: a heading, a leading bold span (after a list
    marker or a number: "1.  **Setup:**", "**Answer 1 (Setup).** text", "- **Trends**"), a short label and a
    colon ("Setup: text"), or the first cell of a table row. None for an ordinary line."""
    heading = re.match(r"^\s*#{1,6}\s+(?P<text>.+?)\s*#*\s*$", line)
    if heading:
        return heading.group("text").strip(" *_"), ""
    if line.lstrip().startswith("|"):
        # A row of a markdown table of answers ("| **Memory Scaling** | answer |"): its first cell the title, the
        # others the answer (a header or separator row names no question).
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        first = _anchor(cells[0])
        named = first[0] if first is not None and not first[1].strip() else cells[0].strip(" *_:.")
        if named and not set(named) <= set("-: ") and len(named.split()) <= MAX_TITLE_WORDS:
            return named, " ".join(cells[1:])
        return None
    prefix = TITLE_PREFIX.match(line)
    rest = line[prefix.end() :] if prefix else line
    number = prefix.group(0).strip() if prefix else ""
    bold = LEADING_BOLD.match(rest)
    if bold:
        title = bold.group("text").strip()
        if len(title.split()) <= MAX_TITLE_WORDS and title.strip(" :.").casefold() != "todo":
            return f"{number} {title}".strip(), rest[bold.end() :]
        return None
    plain = PLAIN_TITLE.match(rest)
    if plain and len(plain.group("text").split()) <= 4:
        return f"{number} {plain.group('text')}".strip(), rest[plain.end() :]
    return None


def _names(title: str, question: str, questions: list[str]) -> bool:
    """Whether a title names ``question``: its words, or its number among the section's ``questions`` when the title
    names no question by its words ("Answer 2", "Q2")."""
    folded = title.casefold()
    if question.casefold() in folded:
        return True
    if any(other.casefold() in folded for other in questions):
        return False
    number = TITLE_NUMBER.search(title)
    return number is not None and question in questions and int(number.group("number")) == questions.index(question) + 1


def answer_blocks(section_text: str, question: str, questions: list[str] | None = None) -> list[str]:
    """The text under each title naming ``question`` in a section, each up to the next title of a question (or the
    next heading): answers typed under the question, in a cell of their own under a title of their own ("**Answer 1
    (Setup).**", "### Trends"), or several in one cell, each under its title. ``questions``: every question the
    section asks, in order (a title naming another one ends a block; "Answer 2" names the second)."""
    questions = questions if questions is not None else [question]
    blocks: list[list[str]] = []
    inside = False
    for line in section_text.splitlines():
        anchor = _anchor(line)
        if anchor is not None:
            title, rest = anchor
            if any(_names(title, asked, questions) for asked in questions):
                inside = _names(title, question, questions)
                if inside:
                    blocks.append([rest])
                continue
            if line.lstrip().startswith("#"):
                inside = False  # another heading: what follows is not this answer
                continue
        if inside:
            blocks[-1].append(line)
    return ["\n".join(block) for block in blocks]


def answer_block(section_text: str, question: str) -> str | None:
    """The text under ``question``'s first title up to the next question title (None if absent)."""
    blocks = answer_blocks(section_text, question)
    return blocks[0] if blocks else None


TODO_MARKER = re.compile(r"[~*_]*\bTODO\b(?:\s*\([^)\n]{0,20}\))?[~*_]*\s*[:\-]?\s*[~*_]*")


def _without_placeholder(text: str) -> str:
    """``text`` without the starter's TODO markers ("**TODO**:", "~~**TODO**~~:", "**TODO (done)**:"): what follows
    one on its line stays (an answer typed on the TODO line, after or instead of the starter's prompt, which
    :func:`_own_words` then removes)."""
    return "\n".join(TODO_MARKER.sub("", line, count=1) for line in text.splitlines())


def _own_words(text: str, prompt: str) -> list[str]:
    """The words of an answer, the starter's prompt text (copied back) removed."""
    answer = _normalise(text)
    if prompt:
        answer = answer.replace(_normalise(prompt), " ").strip()
    return answer.split()


# The words of the classic placeholder text that are not English words too ("in", "do", "non" are
# left out): an answer made of them says nothing.
LOREM_IPSUM = frozenset(
    [
        "lorem", "ipsum", "dolor", "amet", "consectetur", "adipiscing", "elit", "eiusmod", "tempor", "incididunt",
        "ut", "labore", "dolore", "magna", "aliqua", "enim", "minim", "veniam", "quis", "nostrud", "exercitation",
        "ullamco", "laboris", "nisi", "aliquip", "commodo", "consequat", "duis", "aute", "irure", "reprehenderit",
        "voluptate", "velit", "esse", "cillum", "fugiat", "nulla", "pariatur", "excepteur", "sint", "occaecat",
        "cupidatat", "proident", "culpa", "officia", "deserunt", "mollit", "anim", "laborum",
    ]
)  # fmt: skip
PLACEHOLDER_WORDS = frozenset(["asdf", "qwerty", "blah", "foo", "baz", "xxx", "tbd", "todo", "placeholder"])
FILLER_SHARE = 0.3  # of an answer's words from placeholder text: far above what a real answer quotes
UNKNOWN_SHARE = 0.5  # of its words in no English word list (wordfreq): gibberish, not technical terms
COPY_RATIO = 0.75  # difflib similarity to the question's own text above which the answer copies it
REWORD_SHARE = 0.7  # of the answer's content words taken from the question: a reworded question (real ones: 0.3 at most)
COMMON_ZIPF = 6.0  # wordfreq's frequency of English's commonest words, left out of the content words
REPEATED_TRIGRAMS = 0.5  # distinct word trigrams per trigram below which the answer repeats itself
SCREEN_MIN_WORDS = 6


def _content_stems(words: list[str]) -> set[str]:
    """Words of 4 letters or more that are not among English's most common ("with", "have"), cut to their first
    5 letters (a crude stem: "scaled" and "scaling" agree)."""
    from wordfreq import zipf_frequency  # a dependency already (the zoo's tokenizer is trained on its word list)

    return {word[:5] for word in words if len(word) >= 4 and word.isalpha() and zipf_frequency(word, "en") < COMMON_ZIPF}


def _plain_words(text: str) -> list[str]:
    """The words of a text, lower case, without their punctuation or a possessive 's."""
    words = (word.casefold().strip(".'’-").removesuffix("'s").removesuffix("’s") for word in _words(text))
    return [word for word in words if word]


def screen_answer(answer: str, question: str) -> tuple[str, ...]:
    """What an instructor should know about a written answer before grading it: it copies or rewords the
    question, repeats itself, or is filler. Empty for an answer that reads as the student's own.

    Only flags: a flagged answer still goes to the instructor, who decides (the grader cannot judge meaning).
    """
    words = _plain_words(answer)
    if len(words) < SCREEN_MIN_WORDS:
        return ()
    flags: list[str] = []
    letters = [word for word in words if word.isalpha()]
    filler = sum(1 for word in letters if word in LOREM_IPSUM or word in PLACEHOLDER_WORDS)
    if letters and filler / len(letters) >= FILLER_SHARE:
        flags.append("filler text (lorem ipsum or placeholder words)")
    elif letters:
        from wordfreq import zipf_frequency  # a dependency already (the zoo's tokenizer is trained on its word list)

        unknown = sum(1 for word in letters if len(word) >= 3 and zipf_frequency(word, "en") < 1.5)
        if unknown / len(letters) >= UNKNOWN_SHARE:
            flags.append("mostly not words (gibberish)")
    question_text = " ".join(_plain_words(question))
    answer_text = " ".join(words)
    if question_text and difflib.SequenceMatcher(None, answer_text, question_text, autojunk=False).ratio() >= COPY_RATIO:
        flags.append("copies the question")
    else:
        stems = _content_stems(words)
        question_stems = _content_stems(question_text.split())
        if len(stems) >= 3 and question_stems and len(stems & question_stems) / len(stems) >= REWORD_SHARE:
            flags.append("rewords the question (almost every word comes from it)")
    trigrams = list(zip(words, words[1:], words[2:], strict=False))
    if len(trigrams) >= 10 and len(set(trigrams)) / len(trigrams) < REPEATED_TRIGRAMS:
        flags.append("repeats itself")
    return tuple(flags)


def loose_cells(notebook: Any, heading: str) -> list[str]:
    """Markdown cells of a section after its first that hold no TODO: answers written in cells of their own."""
    return [cell for cell in section_cells(notebook, heading)[1:] if not re.search(r"\bTODO\b", cell)]


# ---------------------------------------------------------------- claims in written answers

# What a results table's column holds, read from its name: (words that name the metric, the metric), then the
# unit the name gives, as a factor to the claims checker's base unit (bytes, seconds).
METRIC_WORDS = (
    (("tokens/s", "tokens_per_s", "tok/s", "throughput", "tokens per second"), "tokens_per_s"),
    (("perplexity", "ppl", "ppx"), "perplexity"),
    (("memory", "footprint", "size"), "memory"),
    (("latency", "time", "duration"), "latency"),
)
# "MB" as the course writes it (the seed's get_memory_footprint() / 1024**2): a column so named is shown back in the
# claims' MB, the number the student saw ("8.01 MB", not 7.64); a claim may mean either scale (claims.py).
SIZE_UNITS = (
    ("gib", 1024**3),
    ("gb", 1024**3),
    ("mib", 1024**2),
    ("mb", 1024**2),
    ("kib", 1024.0),
    ("kb", 1024.0),
    ("bytes", 1.0),
)
TIME_UNITS = (("ms", 1e-3), ("µs", 1e-6), ("us", 1e-6), ("(s)", 1.0), ("sec", 1.0), ("_s", 1.0), (" s", 1.0))
BASE_UNITS = {"memory": "bytes", "latency": "s", "tokens_per_s": "tokens/s", "perplexity": ""}


def column_metric(name: str) -> tuple[str, str, float] | None:
    """(metric, base unit, factor to it) that a results table's column holds, read from its name; None for others."""
    lowered = str(name).lower()
    for words, metric in METRIC_WORDS:
        if any(word in lowered for word in words):
            units = SIZE_UNITS if metric == "memory" else TIME_UNITS if metric == "latency" else ()
            factor = next((value for unit, value in units if unit in lowered), 1024**2 if metric == "memory" else 1.0)
            return metric, BASE_UNITS[metric], factor
    return None


def row_facts(label: str, row: Mapping[Any, Any]) -> list[Fact]:
    """The facts of one results row named ``label``: each numeric value whose key says what it holds (memory,
    latency, tokens/s, perplexity), in the claims checker's base units."""
    facts = []
    for column, value in row.items():
        found = column_metric(str(column))
        if found is not None and is_number(value):
            metric, unit, factor = found
            facts.append(Fact(label=label, metric=metric, value=float(value) * factor, unit=unit))
    return facts


def table_facts(table: Any) -> list[Fact]:
    """The numbers of a results table as facts. A DataFrame's rows are named by its first text column, else by its
    first column and value ("prompt tokens 64": a sweep); a dict of dicts (a sweep keyed by precision) by its keys."""
    if isinstance(table, Mapping):
        return [fact for key, row in table.items() if isinstance(row, Mapping) for fact in row_facts(str(key), row)]
    if not isinstance(table, Frame) or not table.columns:
        return []
    texts = [column for column in table.columns if any(isinstance(value, str) for value in table.column(column))]
    facts = []
    for row in table.records():
        if texts:
            label, named = str(row[texts[0]]), texts[0]
        else:
            named = table.columns[0]
            value = row[named]
            label = f"{str(named).replace('_', ' ')} {value:g}" if is_number(value) else str(value)
        facts.extend(row_facts(label, {column: value for column, value in row.items() if column != named}))
    return facts


def shown_facts(context: CheckContext, variables: list[str]) -> tuple[list[Fact], str]:
    """The facts of the results tables the submitted notebook shows in its saved outputs (what the student saw when
    they wrote: grader/checks/shown.py), preferring the cells that name ``variables``; and, where there are none, why
    the answer's numbers are not checked. Never the grader's re-run: its models, machine and load are not the
    student's, and an answer held against it would be contradicted by numbers the student never saw."""
    if not variables:
        return [], ""
    notebook = context.submitted if context.submitted is not None else context.notebook
    if not has_outputs(notebook):
        return [], (
            "not checked: the submitted notebook holds no outputs (saved without running, or cleared), so there are "
            "no numbers of your run to hold the answer against"
        )
    facts = [fact for table in shown_tables(notebook, variables) for fact in table_facts(table)]
    if not facts:
        return [], (
            "not checked: no table of results (memory, latency, tokens/s, perplexity columns) is shown in the submitted "
            "notebook's outputs to hold the answer against"
        )
    return facts, ""


@check_kind("written_answer", WrittenAnswerParams, needs_kernel=False, graded_by="instructor")
def written_answer(context: CheckContext, params: WrittenAnswerParams) -> Verdict:
    """A written answer: placeholder text fails, a real answer goes to the instructor."""
    section = markdown_section(context.notebook, params.section)
    if section is None:
        return Verdict.failed(
            f"The notebook has no '{params.section}' section, so there is no answer to '{params.question}'.",
            expected=f"a markdown section titled '{params.section}'",
            found="no such heading",
        )
    section = HTML_COMMENT.sub("", section)
    questions = [
        str(check.params.get("question"))
        for check in context.rubric.checks
        if check.kind == "written_answer" and check.params.get("section") == params.section
    ]
    blocks = answer_blocks(section, params.question, questions or [params.question])
    if not blocks:
        return Verdict.failed(
            f"No answer to '{params.question}' was found under '{params.section}': keep the question titles from the starter and write your answer below each.",
            expected=f"an answer under '{params.question}'",
            found="no such question title",
        )
    # The longest block under a title naming the question, in words of the student's own (a TODO line left in place
    # above an answer is not the answer; "answered in the cell below" under the starter's title is not either).
    answered = [text for text in (_without_placeholder(block).strip() for block in blocks) if _own_words(text, params.prompt)]
    text = max(answered, key=lambda block: len(_own_words(block, params.prompt))) if answered else ""
    if len(_own_words(text, params.prompt)) < params.min_words:
        # The answer may sit in a cell of its own below the questions, under no title (the TODO lines left in place):
        # cells of the section with no TODO are read as the answer when they are long enough for every question the
        # section asks.
        loose = "\n\n".join(loose_cells(context.notebook, params.section)).strip()
        titles = sum(1 for line in section.splitlines() if _title(line) and not line.lstrip().startswith("#"))
        if len(_own_words(loose, params.prompt)) >= params.min_words * max(titles, 1):
            text = loose
    if len(_own_words(text, params.prompt)) < params.min_words:
        # Or under a heading of the student's own after the section ("## My analysis", "#### Q1 - Memory Scaling"),
        # under the question's own title there.
        later = [
            _without_placeholder(block).strip()
            for block in answer_blocks(
                markdown_after(context.notebook, params.section), params.question, questions or [params.question]
            )
        ]
        later = [block for block in later if len(_own_words(block, params.prompt)) >= params.min_words]
        if later:
            text = max(later, key=lambda block: len(_own_words(block, params.prompt)))
    if not text and any(re.search(r"\bTODO\b", block) for block in blocks):
        return Verdict.failed(
            f"The answer to '{params.question}' still reads TODO: replace the placeholder with your own analysis.",
            expected="your written analysis",
            found="the starter's TODO placeholder",
        )
    words = _own_words(text, params.prompt)
    if len(words) < params.min_words:
        return Verdict.failed(
            f"The answer to '{params.question}' has {len(words)} word{'s' if len(words) != 1 else ''} of your own; write at least {params.min_words}.",
            expected=f"at least {params.min_words} words",
            found=f"{len(words)} words",
            answer=text,
        )
    flags = screen_answer(text, f"{params.question}. {params.prompt}")
    facts, unchecked = shown_facts(context, params.results)
    claims = claim_records(text, facts) if facts else unchecked_records(text, unchecked)
    return Verdict.manual(
        f"Your answer to '{params.question}' ({len(words)} words) goes to your instructor, who grades it by hand"
        + (f", flagged ({'; '.join(flags)})." if flags else "."),
        answer=LIST_MARKER.sub("", text),
        flags=flags,
        data={"claims": claims} if claims else {},
    )


def unchecked_records(text: str, why: str) -> list[dict[str, Any]]:
    """Each number the answer states, marked not checked, and why (nothing to hold it against)."""
    claims = [claim.text for claim in extract_claims(text)] if why else []
    if not claims:
        return []
    return [{"claim": ", ".join(dict.fromkeys(claims)), "verdict": "not-checked", "message": why, "actual": None}]


def claim_records(text: str, facts: list[Fact]) -> list[dict[str, Any]]:
    """Each number the answer states, held against the notebook's own (grader/checks/claims.py): what it says, the
    verdict (agrees, contradicts, unmatched), why, and the notebook's own number where it contradicts."""
    if not facts:
        return []
    return [
        {"claim": verdict.claim.text, "verdict": verdict.verdict, "message": verdict.message, "actual": verdict.actual}
        for verdict in check_claims(text, facts, timing_spread=TIMING_SPREAD)
    ]
