"""The call tree of the Rollout page: one row per call in call order, lanes as columns.

The page part's one door (the page imports only this module): the tree of a view
(`tree_model`: its nodes; `tree_marks`: what each mark means; `tree_layout`: rows, runs, lanes), its
charts as Vega-Lite (`tree_chart`: the tree, or a long rollout's window of rows; `tree_overview`: every
node of a long rollout as a dot), its table and id search (`tree_table`), and here the window of rows a
long rollout shows, how it follows the selection, search, and the captions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .. import vega
from ..formatting import fmt_int, md_escape
from ..model import CALL, GHOST, REFUSAL
from .tree_chart import CANVAS_ROWS, LABEL_ROWS, TREE_DESCRIPTION, tree_chart
from .tree_layout import Run, TreeNode
from .tree_marks import EDGE_STYLES, NODE_STYLES, OVERLAY_STYLES, RING_FLAGS, legend_frame
from .tree_model import TreeModel, build_tree, short_labels, terminal_call, tree_of
from .tree_overview import OVERVIEW_DESCRIPTION, ZOOM, overview_chart, overview_hover
from .tree_table import nodes_frame, search

__all__ = [
    "CALL", "CANVAS_ROWS", "DETAIL_SPAN", "EDGE_STYLES", "GHOST", "LABEL_ROWS", "NODE_STYLES", "OVERLAY_STYLES",
    "OVERVIEW_ABOVE", "OVERVIEW_DESCRIPTION", "REFUSAL", "RING_FLAGS", "Run", "TREE_DESCRIPTION", "TreeModel",
    "TreeNode", "Window", "ZOOM", "build_tree", "clamp_window", "follow_selection", "keep_in_window",
    "key_from_selection",
    "legend_frame", "needs_overview", "nodes_frame", "overview_chart", "overview_hover", "search", "search_caption",
    "short_labels", "terminal_call", "tree_caption", "tree_chart", "tree_of", "window_around", "window_from_selection",
]

Window = tuple[int, int]
"""An inclusive range of rows (1-based positions in call order) shown in the zoomed view."""

DETAIL_SPAN = 29
"""Rows the zoomed view shows by default, less one: 30 rows, about 660 px."""

OVERVIEW_ABOVE = 40
"""Trees with more rows than this get an overview strip above a zoomed window of rows."""


def needs_overview(model: TreeModel) -> bool:
    """Whether the tree has too many rows to draw whole on a screen or two."""
    return len(model) > OVERVIEW_ABOVE


def clamp_window(model: TreeModel, window: Window) -> Window:
    """``window`` moved and cut to lie within the tree's rows, never empty."""
    last = max(model.max_order, 1)
    a, b = int(min(window)), int(max(window))
    span = min(b - a, last - 1)
    a = max(1, min(a, last - span))
    return a, a + span


def window_around(model: TreeModel, key: str | None, span: int = DETAIL_SPAN) -> Window:
    """A window of ``span + 1`` rows centred on node ``key`` (on the first row without one)."""
    node = model.node(key) if key is not None else None
    centre = node.order if node is not None else 1
    return clamp_window(model, (centre - span // 2, centre - span // 2 + span))


def keep_in_window(model: TreeModel, key: str | None, window: Window | None) -> Window:
    """The window to show with ``key`` selected: unchanged when the node is in it (the reader's zoom
    is kept), else one of the same height centred on the node."""
    if window is None:
        return window_around(model, key)
    window = clamp_window(model, window)
    node = model.node(key) if key is not None else None
    if node is None or window[0] <= node.order <= window[1]:
        return window
    return window_around(model, key, window[1] - window[0])


def follow_selection(model: TreeModel, selected: str | None, window: Window | None,
                     followed: str | None) -> Window:
    """The zoomed window for this run. It moves only when the selection changed since the window last
    followed it (``followed``), and then only as far as needed to show it: the reader's own choice of
    rows (slider, box) stays put while they look around it."""
    if window is None or selected != followed:
        return keep_in_window(model, selected, window)
    return clamp_window(model, window)


def window_from_selection(model: TreeModel, selection: Any) -> Window | None:
    """The rows a drag across the overview covers (its x is call order, `ZOOM`), or None when the event is
    not a drag."""
    zoom = selection.get(ZOOM) if isinstance(selection, Mapping) else None
    xs = zoom.get("order") if isinstance(zoom, Mapping) else None
    if not isinstance(xs, (list, tuple)) or len(xs) < 2:
        return None
    try:
        a, b = sorted(float(v) for v in xs[:2])
    except (TypeError, ValueError):
        return None
    first = math.ceil(a)
    return clamp_window(model, (first, max(math.floor(b), first)))


def key_from_selection(selection: Any) -> str | None:
    """The node key a click on the tree or its overview selected (Streamlit's ``event.selection`` of a
    chart declaring `..vega.PICK`), or None when nothing is selected."""
    for point in vega.picked(selection):
        key = point.get("key")
        if isinstance(key, str) and ":" in key:
            return key
    return None


def tree_caption(model: TreeModel, window: tuple[int, int] | None) -> str:
    """What the Call tree tab says above the tree: its size, and with an overview (``window``: the
    rows zoomed into) how to move around it."""
    lanes = f"{model.lanes} lane{'s' if model.lanes != 1 else ''}"
    if window is None:
        return (f"{fmt_int(len(model))} nodes in {lanes}, one row per node in call order. Click a node to "
                "inspect it; hover it for its link, tokens and finish.")
    return (f"{fmt_int(len(model))} nodes in {lanes}. Overview (every node, in call order from left to "
            "right): click a dot to go there, or drag across calls to zoom into them. Below: calls "
            f"{window[0]:,}–{window[1]:,} in call order (the slider under them picks others); click a node to "
            "inspect it.")


DETAIL_HELP = ("Its parent link and proof, why its lineage breaks there, its retry group and twins, and its record. "
               "A click on a node, a culprit in the banner, the picker or the search shows a call's detail too.")


def detail_button_label(model: TreeModel, key: str) -> str:
    """The button that shows the selected call's detail, while no call of the rollout was picked
    (Markdown: the call's id escaped)."""
    node = model.node(key)
    return f"Show the detail of {md_escape(node.ident if node is not None else key)}"


def search_caption(query: str, count: int) -> str:
    """What a search for a call id found (Markdown: the query escaped)."""
    shown = md_escape(query)
    if not count:
        return f"No call id contains “{shown}”."
    if count > 1:
        return f"{count} matches for “{shown}”; showing the first (exact, then prefix, then substring)."
    return f"Found “{shown}”."
