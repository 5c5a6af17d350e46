"""Check kinds any assignment can use."""

from __future__ import annotations

import re

from pydantic import Field

from grader.checks.base import CheckContext, Params, Verdict, check_kind
from grader.notebook import markdown_section

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


def answer_block(section_text: str, question: str) -> str | None:
    """The text under ``question``'s title up to the next question title (None if absent)."""
    lines = section_text.splitlines()
    start: int | None = None
    block: list[str] = []
    for line in lines:
        match = QUESTION_TITLE.match(line)
        if match:
            title = (match.group("numbered") or match.group("bold") or match.group("heading") or "").strip()
            if title.strip(" :").casefold() == "todo":
                match = None
        if match:
            if start is not None:
                break
            if question.casefold() in title.casefold():
                start = len(block)
                remainder = line[match.end() :]
                block.append(remainder)
                continue
        if start is not None:
            block.append(line)
    return "\n".join(block) if start is not None else None


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
    block = answer_block(HTML_COMMENT.sub("", section), params.question)
    if block is None:
        return Verdict.failed(
            f"No answer to '{params.question}' was found under '{params.section}': keep the question titles from the starter and write your answer below each.",
            expected=f"an answer under '{params.question}'",
            found="no such question title",
        )
    text = block.strip()
    if re.search(r"\bTODO\b", text):
        return Verdict.failed(
            f"The answer to '{params.question}' still reads TODO: replace the placeholder with your own analysis.",
            expected="your written analysis",
            found="the starter's TODO placeholder",
        )
    answer = _normalise(text)
    if params.prompt:
        answer = answer.replace(_normalise(params.prompt), " ").strip()
    words = answer.split()
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
