"""The call tree's overview: every node of a long rollout as a small dot, call order left to right.

A rollout with more rows than a screen shows is drawn as a window of rows (`tree_chart`) under this
strip of every node (lanes top to bottom), the window outlined. A click on a dot selects its node by
its key (`..vega.PICK`); a drag across calls picks the rows to zoom into (`ZOOM`). No Streamlit here.
"""

from __future__ import annotations

from typing import Any

from .. import vega
from ..formatting import one_line
from ..model import CALL
from .tree_marks import NODE_STYLES
from .tree_model import TreeModel

OVERVIEW_DESCRIPTION = "call tree overview"
"""The chart's ``description``: what a test (or a screen reader) reads to tell it from the tree
(`tree_chart.TREE_DESCRIPTION`)."""

OVERVIEW_DOT = 5
"""A dot's diameter in pixels."""
ZOOM = "zoom"
"""The overview's interval selection: the calls (in call order) a drag covered."""


def overview_chart(model: TreeModel, window: tuple[int, int]) -> dict[str, Any]:
    """Every node as a small dot, call order left to right and lanes top to bottom, the zoomed rows
    outlined (they always hold the selected call, which the zoomed view rings). The spec depends on the
    window alone: a click that keeps the window sends the same chart, which the browser keeps as drawn.
    Click a dot to go there, or drag across calls to zoom into them (`ZOOM`). Hovering a dot names its
    call (or refusal, or missing parent) and its place in call order, never the internal key."""
    dots: list[dict[str, Any]] = []
    for n in model.nodes:
        _, colour, symbol, _ = NODE_STYLES[n.category]
        dots.append({"order": n.order, "lane": -n.lane, "key": n.key, "tip": overview_hover(model, n.key),
                     "fill": colour if not symbol.open else "transparent", "stroke": colour})
    lanes = max(model.lanes, 1)
    a, b = window
    x = {"field": "order", "type": "quantitative", "title": "call order",
         "scale": {"domain": [0, len(model) + 1], "nice": False, "zero": False},
         "axis": {"format": ",d", "tickMinStep": 1, "grid": False, "labelFontSize": 10, "titleFontSize": 10}}
    y = {"field": "lane", "type": "quantitative", "axis": None,
         "scale": {"domain": [-(lanes - 1) - 0.8, 0.8], "nice": False, "zero": False}}
    frame = {"data": {"values": [{"order": a - 0.5, "order2": b + 0.5}]},
             "mark": {"type": "rect", "color": "rgba(220,38,38,0.07)", "stroke": "#dc2626", "strokeWidth": 1.5,
                      "aria": False},
             "encoding": {"x": {**x, "field": "order"}, "x2": {"field": "order2"}}}
    points = {"data": {"values": dots},
              "params": [vega.pick_param(("key",)),
                         # A drag across calls: the rows to zoom into (Streamlit sends it once the pointer is up).
                         {"name": ZOOM, "select": {"type": "interval", "encodings": ["x"]}}],
              "mark": {"type": "point", "shape": "circle", "size": OVERVIEW_DOT ** 2 * 1.6, "opacity": 1,
                       "strokeWidth": 1, "cursor": "pointer"},
              "encoding": {"x": x, "y": y,
                           "fill": {"field": "fill", "type": "nominal", "scale": None},
                           "stroke": {"field": "stroke", "type": "nominal", "scale": None},
                           "tooltip": {"field": "tip", "type": "nominal"},
                           "description": {"field": "key", "type": "nominal"}}}
    spec = vega.chart([frame, points], heading=None, height=int(min(80, 24 + 10 * lanes)),
                      description=OVERVIEW_DESCRIPTION)
    return spec


def overview_hover(model: TreeModel, key: str) -> str:
    """What hovering an overview dot says: the call id (or the refusal / missing parent) and its place in call order."""
    node = model.nodes[model.index[key]]
    what = node.ident if node.kind == CALL else f"{node.kind} {node.ident}"
    return f"{one_line(what, 80)} · #{node.order:,}"
