"""The Vega-Lite layers the call tree is drawn with: points, texts and straight link segments, in pixels.

Every layer hands Vega-Lite its positions, sizes and colours unscaled (``scale: null``): the
chart (`tree_chart`) has already decided where everything goes. A point takes its shape from
`tree_marks`' symbols (Vega's own shapes, or an SVG path for those it lacks), a link its dash.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import vega
from .tree_marks import Symbol

LABEL_FONT = 11
LABEL_FAMILY = "DejaVu Sans Mono, Menlo, Consolas, ui-monospace, monospace"
"""The call labels' font: monospace, so a label's width follows from its length."""
CHAR_EM = 0.66
"""Width budgeted per label character, in em (monospace fonts draw 0.60)."""


def text_px(text: str, font: float = LABEL_FONT) -> float:
    """The width budgeted for ``text`` in pixels, at ``font`` px."""
    return len(text) * CHAR_EM * font


# The shapes Vega-Lite lacks, as SVG paths in its unit square ([-1, 1] each way).
_STAR = "M0,-1L0.235,-0.324L0.951,-0.309L0.380,0.124L0.588,0.809L0,0.400L-0.588,0.809L-0.380,0.124" \
        "L-0.951,-0.309L-0.235,-0.324Z"
SHAPE_PATHS = {
    "star": _STAR,
    "hexagon": "M0,-1L0.866,-0.5L0.866,0.5L0,1L-0.866,0.5L-0.866,-0.5Z",
    "diagonal-cross": "M-0.8,-0.8L0.8,0.8M-0.8,0.8L0.8,-0.8",
    "crossed-square": "M-1,-1L1,-1L1,1L-1,1ZM-1,-1L1,1M-1,1L1,-1",
    "hourglass": "M-0.9,-1L0.9,-1L-0.9,1L0.9,1Z",
    "three-point-star": "M0,-1L0.35,0.2L1,0.8L0,0.45L-1,0.8L-0.35,0.2Z",
}
"""`tree_marks`' shapes that are not Vega-Lite's own (circle, square, diamond, triangle-down), as paths."""
STROKE_SHAPES = frozenset({"diagonal-cross"})
"""Shapes drawn as strokes alone: never filled, whatever their symbol says."""

DASHES: dict[str, list[int] | None] = {"solid": None, "dotted": [2, 3], "dashed": [6, 4], "dash-dotted": [6, 3, 2, 3],
                                       "long-dashed": [10, 4]}
"""`tree_marks`' link dashes (`DASH_WORDS`) as SVG dash arrays (None: solid)."""


def shape_of(symbol: Symbol) -> tuple[str, bool]:
    """(Vega shape, filled) of a `tree_marks` symbol."""
    return SHAPE_PATHS.get(symbol.shape, symbol.shape), not symbol.open and symbol.shape not in STROKE_SHAPES


def point_layer(data: list[dict[str, Any]], *, pick: bool, name: str) -> dict[str, Any]:
    """Nodes and rings: one point mark, each datum's own shape, size, colours (unscaled) and tooltip."""
    layer: dict[str, Any] = {
        "name": name,
        "data": {"values": data},
        "mark": {"type": "point", "opacity": 1, "cursor": "pointer" if pick else "default"},
        "encoding": {
            "x": {"field": "px", "type": "quantitative", "scale": None},
            "y": {"field": "py", "type": "quantitative", "scale": None},
            "shape": {"field": "shape", "type": "nominal", "scale": None},
            "size": {"field": "size", "type": "quantitative", "scale": None},
            "fill": {"field": "fill", "type": "nominal", "scale": None},
            "stroke": {"field": "stroke", "type": "nominal", "scale": None},
            "strokeWidth": {"field": "sw", "type": "quantitative", "scale": None},
            "tooltip": {"field": "tip", "type": "nominal"},
            "description": {"field": "key", "type": "nominal"},
        },
    }
    if pick:
        layer["params"] = [vega.pick_param(("key",))]
    return layer


def text_layer(data: list[dict[str, Any]], name: str, **mark: Any) -> dict[str, Any]:
    """Texts starting at (``px``, ``py``), left-aligned, in the labels' font unless ``mark`` says otherwise."""
    return {"name": name, "data": {"values": data},
            "mark": {"type": "text", "align": "left", "baseline": "middle", "font": LABEL_FAMILY,
                     "fontSize": LABEL_FONT, "aria": False, **mark},
            "encoding": {"x": {"field": "px", "type": "quantitative", "scale": None},
                         "y": {"field": "py", "type": "quantitative", "scale": None},
                         "text": {"field": "text", "type": "nominal"}}}


def rule_layer(data: list[dict[str, Any]], colour: str, dash: str, width: float, name: str) -> dict[str, Any]:
    """Straight segments from (``px``, ``py``) to (``px2``, ``py2``): one SVG path each, no group per link."""
    mark: dict[str, Any] = {"type": "rule", "color": colour, "strokeWidth": width, "aria": False}
    if DASHES[dash] is not None:
        mark["strokeDash"] = DASHES[dash]
    return {"name": name, "data": {"values": data}, "mark": mark,
            "encoding": {"x": {"field": "px", "type": "quantitative", "scale": None},
                         "y": {"field": "py", "type": "quantitative", "scale": None},
                         "x2": {"field": "px2"}, "y2": {"field": "py2"}}}


def link_segments(xs: np.ndarray, ys: np.ndarray) -> list[dict[str, Any]]:
    """The segments of polylines (one per row of ``xs``/``ys``), each with its link's index; none of length 0."""
    out = []
    for e in range(xs.shape[0]):
        for s in range(xs.shape[1] - 1):
            x0, y0, x1, y1 = (round(float(v), 2) for v in (xs[e, s], ys[e, s], xs[e, s + 1], ys[e, s + 1]))
            if (x0, y0) != (x1, y1):
                out.append({"edge": e, "px": x0, "py": y0, "px2": x1, "py2": y1})
    return out


def point_datum(px: float, py: float, symbol: Symbol, colour: str, size: float, width: float, rim: str | None,
           what: str, key: str = "", tip: str = "") -> dict[str, Any]:
    """A node or ring at (``px``, ``py``): ``what`` is its legend label, ``size`` its diameter."""
    shape, filled = shape_of(symbol)
    return {"px": round(float(px), 2), "py": round(float(py), 2), "shape": shape, "size": round(size * size, 2),
            "fill": colour if filled else "transparent", "stroke": (rim or colour) if filled else colour,
            "sw": width if not filled or rim else 0, "what": what, "key": key, "tip": tip}
