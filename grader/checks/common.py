"""Check kinds any assignment can use."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from grader.checks.base import CheckContext, Params, Verdict, check_kind
from grader.notebook import markdown_section, section_cells

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


def answer_blocks(section_text: str, question: str) -> list[str]:
    """The text under each title naming ``question``, up to the next question title (a question may be answered again below)."""
    blocks: list[list[str]] = []
    inside = False
    for line in section_text.splitlines():
        title = _title(line)
        if title is not None:
            inside = question.casefold() in title.casefold()
            if inside:
                blocks.append([line[QUESTION_TITLE.match(line).end() :]])  # type: ignore[union-attr]
            continue
        if inside:
            blocks[-1].append(line)
    return ["\n".join(block) for block in blocks]


def answer_block(section_text: str, question: str) -> str | None:
    """The text under ``question``'s first title up to the next question title (None if absent)."""
    blocks = answer_blocks(section_text, question)
    return blocks[0] if blocks else None


def _without_placeholder(text: str) -> str:
    """``text`` without the lines that still hold the starter's TODO placeholder."""
    return "\n".join(line for line in text.splitlines() if not re.search(r"\bTODO\b", line))


def _own_words(text: str, prompt: str) -> list[str]:
    """The words of an answer, the starter's prompt text (copied back) removed."""
    answer = _normalise(text)
    if prompt:
        answer = answer.replace(_normalise(prompt), " ").strip()
    return answer.split()


def loose_cells(notebook: Any, heading: str) -> list[str]:
    """Markdown cells of a section after its first that hold no TODO: answers written in cells of their own."""
    return [cell for cell in section_cells(notebook, heading)[1:] if not re.search(r"\bTODO\b", cell)]


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
    blocks = answer_blocks(section, params.question)
    if not blocks:
        return Verdict.failed(
            f"No answer to '{params.question}' was found under '{params.section}': keep the question titles from the starter and write your answer below each.",
            expected=f"an answer under '{params.question}'",
            found="no such question title",
        )
    # The first block under a title naming the question with words of the student's own (a TODO line left
    # in place above an answer is not the answer).
    answered = [text for text in (_without_placeholder(block).strip() for block in blocks) if _own_words(text, params.prompt)]
    text = answered[0] if answered else ""
    if not text:
        # The answer may sit in a cell of its own below the questions (the TODO lines left in place):
        # cells of the section with no TODO are read as the answer when they are long enough for
        # every question the section asks.
        loose = "\n\n".join(loose_cells(context.notebook, params.section)).strip()
        questions = sum(1 for line in section.splitlines() if _title(line) and not line.lstrip().startswith("#"))
        if len(_own_words(loose, params.prompt)) >= params.min_words * max(questions, 1):
            text = loose
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
    return Verdict.manual(
        f"Your answer to '{params.question}' ({len(words)} words) goes to your instructor, who grades it by hand.",
        answer=LIST_MARKER.sub("", text),
    )
