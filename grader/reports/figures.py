"""The figures an executed notebook displayed, kept for the feedback pages."""

from __future__ import annotations

from typing import Any

from grader.reports.results import Figure

MAX_FIGURES = 24
MAX_FIGURE_BYTES = 3 * 1024 * 1024


def displayed_figures(notebook: Any) -> list[Figure]:
    """The images the executed notebook displayed (PNG and SVG), in order, within limits."""
    figures: list[Figure] = []
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = output.get("data", {})
            for mime in ("image/png", "image/svg+xml"):
                if mime in data and len(figures) < MAX_FIGURES:
                    payload = data[mime]
                    text = "".join(payload) if isinstance(payload, list) else str(payload)
                    if len(text) <= MAX_FIGURE_BYTES:
                        figures.append(Figure(index, mime, text.replace("\n", "") if mime == "image/png" else text))
                    break
    return figures
