"""The tables a notebook's saved outputs show: what the student saw when they wrote their answers.

A written answer quotes the numbers of the student's own run, on their machine and with the real models; the grader's
re-run (the tiny models, another machine, another load) produces other numbers, and an answer held against those
would be "contradicted" by a run the student never saw. So the claims checker reads the submitted notebook's outputs:
a DataFrame's HTML (``display(table)``, a cell ending in ``table``) and tables printed as text
(``print(table)``, ``table.to_string()``), parsed into :class:`~grader.kernel.values.Frame` values.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator, Sequence
from html.parser import HTMLParser
from typing import Any

from grader.kernel.values import Frame

# A number as a table prints it: "1,234.5", "-0.25", "1.2e-03", "nan" is not one.
NUMBER = re.compile(r"^[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?$")


def shown_tables(notebook: Any, variables: Sequence[str] = ()) -> list[Frame]:
    """Every table the notebook's saved outputs show (HTML tables, and text tables a header line starts), from the
    cells that name one of ``variables`` where any of those shows one, else from every cell."""
    named: list[Frame] = []
    every: list[Frame] = []
    for cell in getattr(notebook, "cells", None) or []:
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell.get("source") or "")
        tables = [table for output in _joined_streams(cell.get("outputs") or []) for table in _output_tables(output)]
        every.extend(tables)
        if any(re.search(rf"\b{re.escape(variable)}\b", source) for variable in variables):
            named.extend(tables)
    return named or every


def has_outputs(notebook: Any) -> bool:
    """Whether any code cell of the notebook holds a saved output."""
    return any(cell.get("cell_type") == "code" and cell.get("outputs") for cell in getattr(notebook, "cells", None) or [])


def _joined_streams(outputs: Sequence[Any]) -> list[Any]:
    """The outputs with each run of stream outputs to one stream joined into one (a print reaches the notebook in
    pieces, split wherever the kernel flushed)."""
    joined: list[Any] = []
    for output in outputs:
        previous = joined[-1] if joined else None
        if (
            output.get("output_type") == "stream"
            and previous is not None
            and previous.get("output_type") == "stream"
            and previous.get("name") == output.get("name")
        ):
            joined[-1] = {**previous, "text": _text(previous.get("text")) + _text(output.get("text"))}
        else:
            joined.append(output)
    return joined


def _output_tables(output: Any) -> Iterator[Frame]:
    kind = output.get("output_type")
    if kind == "stream":
        yield from _text_tables(_text(output.get("text")))
    elif kind in ("execute_result", "display_data"):
        data = output.get("data") or {}
        html = _html_tables(_text(data.get("text/html"))) if "text/html" in data else []
        if html:
            yield from html
        elif "text/plain" in data:
            yield from _text_tables(_text(data.get("text/plain")))


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


class _TableParser(HTMLParser):
    """The cells of each <table>: rows of (text, is a header cell)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[tuple[str, bool]]]] = []
        self._cell: list[str] | None = None
        self._header = False
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "table":
            self._depth += 1
            if self._depth == 1:
                self.tables.append([])
        elif self._depth == 1 and tag == "tr":
            self.tables[-1].append([])
        elif self._depth == 1 and tag in ("td", "th") and self.tables[-1]:
            self._cell, self._header = [], tag == "th"

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._depth = max(0, self._depth - 1)
        elif tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append((" ".join("".join(self._cell).split()), self._header))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _html_tables(html: str) -> list[Frame]:
    """The tables of an HTML output (a DataFrame's or a Styler's): the first row of header cells names the columns,
    a body row's leading header cell is its index (dropped)."""
    parser = _TableParser()
    with contextlib.suppress(Exception):  # a broken page shows no table
        parser.feed(html)
        parser.close()
    frames = []
    for rows in parser.tables:
        rows = [row for row in rows if row]
        if len(rows) < 2:
            continue
        header = [text for text, _ in rows[0]]
        body = []
        for row in rows[1:]:
            if all(is_header for _, is_header in row):
                continue  # a second header row (the index's name)
            cells = [text for text, _ in row]
            if len(cells) == len(header) and header[0] == "" and row[0][1]:
                cells, columns = cells[1:], header[1:]  # the index
            elif len(cells) == len(header) + 1 and row[0][1]:
                cells, columns = cells[1:], header
            else:
                columns = header
            if len(cells) == len(columns):
                body.append((columns, cells))
        frame = _frame(body)
        if frame is not None:
            frames.append(frame)
    return frames


def _text_tables(text: str) -> list[Frame]:
    """Tables printed as text (pandas' ``to_string``, a column-aligned print): a header line, then lines holding
    more numbers than it does (a header may hold one: "Prompt 1 Output"), read as fixed-width columns."""
    import pandas

    lines = text.splitlines()
    frames = []
    index = 0
    while index + 1 < len(lines):
        header, numbers = lines[index], _numbers_in(lines[index + 1])
        aligned = len(header) == len(lines[index + 1]) >= 10  # to_string pads every line to the table's width
        starts_next = index + 2 < len(lines) and len(lines[index + 1]) == len(lines[index + 2]) >= 10
        if len(header.split()) < 2 or not numbers or (not aligned and (starts_next or numbers <= _numbers_in(header))):
            index += 1
            continue
        end = index + 1
        if aligned:
            while end < len(lines) and len(lines[end]) == len(header):
                end += 1
        else:
            while end < len(lines) and lines[end].strip() and _numbers_in(lines[end]) >= max(1, numbers - 1):
                end += 1
        with contextlib.suppress(Exception):  # not a table after all
            table = pandas.read_fwf(io.StringIO("\n".join(lines[index:end])), dtype=str, keep_default_na=False)
            columns, rows = _merged_headers(
                [str(column) for column in table.columns],
                [[str(value) for value in row] for row in table.itertuples(index=False, name=None)],
            )
            body = [(columns, row) for row in rows]
            frame = _frame(body, drop_unnamed=True)
            if frame is not None:
                frames.append(frame)
        index = end
    return frames


def _merged_headers(columns: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """A header split where its words outrun the values below ("Avg" over nothing, "Latency (s)" over the numbers):
    a column empty in every row gives its name to the column after it (or before, at the end)."""
    empty = [position for position in range(len(columns)) if all(not row[position].strip() for row in rows)]
    if not empty or len(empty) == len(columns):
        return columns, rows
    names = list(columns)
    for position in empty:
        name = "" if names[position].startswith("Unnamed:") else names[position]
        after = next((other for other in range(position + 1, len(columns)) if other not in empty), None)
        before = next((other for other in range(position - 1, -1, -1) if other not in empty), None)
        if name and after is not None:
            names[after] = f"{name} {names[after]}"
        elif name and before is not None:
            names[before] = f"{names[before]} {name}"
    keep = [position for position in range(len(columns)) if position not in empty]
    return [names[position] for position in keep], [[row[position] for position in keep] for row in rows]


def _numbers_in(line: str) -> int:
    return sum(1 for token in line.split() if _number(token) is not None)


def _frame(body: Sequence[tuple[Sequence[str], Sequence[str]]], drop_unnamed: bool = False) -> Frame | None:
    """A Frame of the rows that share the first row's columns, numbers read as floats (None: no such rows)."""
    if not body:
        return None
    columns = list(body[0][0])
    rows = [list(cells) for named, cells in body if list(named) == columns]
    keep = [
        position
        for position, name in enumerate(columns)
        if not (drop_unnamed and name.startswith("Unnamed:") and all(_number(row[position]) is not None for row in rows))
    ]
    columns = [columns[position] for position in keep]
    values = [tuple(_value(row[position]) for position in keep) for row in rows]
    if not columns or not values:
        return None
    dtypes = tuple("float64" if all(isinstance(row[i], float) for row in values) else "object" for i in range(len(columns)))
    return Frame(tuple(columns), dtypes, tuple(values), len(values))


def _number(text: str) -> float | None:
    token = text.strip()
    if not token or not NUMBER.match(token) or not any(ch.isdigit() for ch in token):
        return None
    try:
        return float(token.replace(",", ""))
    except ValueError:
        return None


def _value(text: str) -> Any:
    number = _number(text)
    return number if number is not None else text
