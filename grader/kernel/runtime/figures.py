"""Figures: what a call plotted (read from matplotlib's objects, not from pixels).

A part of the grader's runtime (see :mod:`grader.kernel.runtime`): in the kernel the parts are one module."""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for mypy only: in the kernel the parts are one module, which imports nothing of the grader
    from grader.kernel.protocol import (
        FigureAxes,
        FigureEvent,
    )
    from grader.kernel.runtime.base import MAX_ITEMS
    from grader.kernel.runtime.instrument import RECORDER, _wraps


# --------------------------------------------------------------------------------------
# Figures: what a call plotted (read from matplotlib's objects, not from pixels)
# --------------------------------------------------------------------------------------


def _floats(values: Any) -> list[float | None] | None:
    """Numbers of a plotted series (None where not finite); None if it is not numeric."""
    import numpy

    try:
        array = numpy.asarray(values, dtype=float).ravel()[:MAX_ITEMS]
    except (TypeError, ValueError):
        return None
    return [float(v) if math.isfinite(v) else None for v in array.tolist()]


def _axis_label(figure: Any, ax: Any, axis: str) -> str:
    """The label a reader sees for an axes' x or y axis: its own; else that of an axes sharing the axis with it
    (``sharex=True`` labels only the bottom row; ``twinx`` shares x); else the figure's ``supxlabel``/``supylabel``."""
    own = str(getattr(ax, f"get_{axis}label")()).strip()
    if own:
        return own
    with contextlib.suppress(Exception):
        shared = ax.get_shared_x_axes() if axis == "x" else ax.get_shared_y_axes()
        for sibling in shared.get_siblings(ax):
            label = str(getattr(sibling, f"get_{axis}label")()).strip()
            if label:
                return label
    # The sub-figure the axes is drawn in, then each figure holding it, up to the figure itself.
    holder = getattr(ax, "figure", None) or figure
    for _ in range(8):
        with contextlib.suppress(Exception):
            text = getattr(holder, f"_sup{axis}label", None)
            if text is not None and str(text.get_text()).strip():
                return str(text.get_text()).strip()
        parent = getattr(holder, "_parent", None)
        if parent is None or parent is holder:
            break
        holder = parent
    return ""


def _tick_values(ax: Any) -> dict[float, float]:
    """The x axis's tick positions whose labels are numbers, with the number each label shows ({} where a tick's
    label is not a number, or the labels are the positions themselves)."""
    shown: dict[float, float] = {}
    try:
        for position, label in zip(ax.get_xticks(), ax.get_xticklabels(), strict=False):
            shown[float(position)] = float(str(label.get_text()).strip().replace("\u2212", "-"))
    except Exception:  # a label that is not a number (or no labels drawn yet)
        return {}
    if all(abs(position - value) < 1e-9 for position, value in shown.items()):
        return {}
    return shown


def describe_figure(figure: Any) -> FigureEvent:
    """Each axes of a figure: labels, title, and the data of its lines, scatters and bars."""
    axes: list[FigureAxes] = []
    for ax in figure.get_axes()[:20]:
        series: list[dict[str, Any]] = []
        for line in ax.get_lines():
            series.append({"kind": "line", "x": _floats(line.get_xdata()), "y": _floats(line.get_ydata())})
        for collection in ax.collections:
            offsets = collection.get_offsets() if hasattr(collection, "get_offsets") else None
            if offsets is not None and len(offsets):
                series.append({"kind": "scatter", "x": _floats(offsets[:, 0]), "y": _floats(offsets[:, 1])})
        for container in getattr(ax, "containers", []):
            patches = [p for p in container if hasattr(p, "get_height")]
            if patches:
                series.append(
                    {
                        "kind": "bar",
                        "x": _floats([p.get_x() + p.get_width() / 2 for p in patches]),
                        "y": _floats([p.get_height() for p in patches]),
                    }
                )
        ticks = _tick_values(ax)
        for entry in series:  # a categorical axis (a pandas bar chart) draws at 0..n-1 and shows its values as labels
            positions = entry["x"]
            if ticks and positions and all(p is not None and any(abs(p - t) < 1e-9 for t in ticks) for p in positions):
                entry["x_shown"] = [next(ticks[t] for t in ticks if abs(p - t) < 1e-9) for p in positions]
        axes.append(
            {
                "title": str(ax.get_title())[:200],
                "xlabel": _axis_label(figure, ax, "x")[:200],
                "ylabel": _axis_label(figure, ax, "y")[:200],
                "series": series[:20],
            }
        )
    suptitle = getattr(figure, "_suptitle", None)
    return {
        "type": "figure",
        "figure_id": id(figure),
        "suptitle": str(suptitle.get_text())[:200] if suptitle is not None else "",
        "axes": axes,
    }


def _instrumented_draw(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``Figure.draw``: a figure shown or saved during a call is described as it is drawn."""

    @_wraps(original)
    def draw(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        if RECORDER.call is not None and FIGURES["watching"]:
            with contextlib.suppress(Exception):
                FIGURES["drawn"][id(self)] = describe_figure(self)
        return result

    return draw


FIGURES: dict[str, Any] = {"watching": False, "drawn": {}, "patched": False}


def _open_figures() -> list[Any]:
    if "matplotlib.pyplot" not in sys.modules:
        return []
    from matplotlib._pylab_helpers import Gcf

    return [manager.canvas.figure for manager in Gcf.get_all_fig_managers()]


@contextlib.contextmanager
def _watch_figures() -> Iterator[None]:
    """Record every figure a call draws, shows, saves or leaves open, as a ``figure`` event."""
    import matplotlib.figure

    if not FIGURES["patched"]:
        matplotlib.figure.Figure.draw = _instrumented_draw(matplotlib.figure.Figure.draw)  # type: ignore[method-assign]
        FIGURES["patched"] = True
    before = {id(figure) for figure in _open_figures()}
    FIGURES["watching"], FIGURES["drawn"] = True, {}
    try:
        yield
    finally:
        FIGURES["watching"] = False
        described = dict(FIGURES["drawn"])
        for figure in _open_figures():
            if id(figure) not in before:
                with contextlib.suppress(Exception):
                    described[id(figure)] = describe_figure(figure)
        for description in described.values():
            RECORDER.record(description)
