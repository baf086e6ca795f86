"""The call tree drawn as Vega-Lite: one row per node in call order, lanes as columns, each label beside its node.

Every position is computed here in pixels and handed to Vega-Lite unscaled (``scale: null``),
so what can collide is decided here and not by the browser: a row is `ROW_PX` high and holds
one node, a lane is `LANE_PX` wide, labels are monospace `LABEL_FONT` px and start right of
their node's widest ring (or right of the last lane whose link crosses the row). The chart's
width and height follow from that, and the page draws it at its own width. Lane names sit in
the top margin, stacked on up to `HEADER_LINES` lines when they would touch; the legend
(`tree_legend`) is drawn in the right margin from the same marks, each layer from `tree_layers`.

Why Vega-Lite: the tree is the first thing every opened rollout draws. Vega-Lite is already
loaded for the Run page's charts, so the first rollout opened draws at once; a bundle of its own
(plotly's) would first have to be evaluated by a fresh tab (docs/performance.md has the figures).

A long rollout is drawn as a window of rows (``window``: an inclusive range of call-order
positions) below a clickable overview of every node (`tree_overview`). Every node and ring
carries its node key; a click selects it by that key (`..vega.PICK`). Text is SVG text and
tooltips are escaped by vega-tooltip, so a call id is never read as HTML. No Streamlit here.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import style, vega
from .tree_layers import (
    CHAR_EM,
    LABEL_FONT,
    link_segments,
    point_datum,
    point_layer,
    rule_layer,
    shape_of,
    text_layer,
    text_px,
)
from .tree_legend import LegendRow, legend_layers_at
from .tree_marks import EDGE_STYLES, NODE_STYLES, OVERLAY_STYLES, RING_FLAGS
from .tree_model import TreeModel, short_labels

CANVAS_ROWS = 1000
"""Above this many rows the tree is drawn on a canvas (one SVG element per mark would be slow)."""
CANVAS = {"embedOptions": {"renderer": "canvas"}}

ROW_PX = 22
"""One row per node: a label box (about 14 px) and the widest ring (about 26 px) never reach the next row's label."""
LANE_PX = 26
NODE_SIZE = 9
"""A node's diameter in pixels (Vega-Lite's point ``size`` is its area: the square of this)."""
LABEL_CHARS = 22
"""Ids longer than this lose their shared prefix, then their middle (`short_labels`)."""
HEADER_LINES = 3
HEADER_PX = 16
LEFT_PX = 8

LABEL_CLEARANCE = max(ring[3] for ring in OVERLAY_STYLES.values())
"""Labels keep clear of the widest mark a node can carry (the rings drawn over it)."""

LABEL_ROWS = 200
"""Call ids are written beside the nodes when at most this many rows are shown."""

NODES, CALL_IDS, LANE_NAMES, SHADING, LINKS = "nodes", "call_ids", "lane_names", "row_shading", "links_"
"""The ``name`` of the tree's layers, what a test (or a reader of the spec) looks for: the clickable nodes and
rings, the labels beside them, the lane names in the top margin, the shading; the links of each kind
(`LINKS` + the kind) and the legend's parts (`tree_legend.LEGEND` + the part). Vega names its data and marks
after them, so each is a plain identifier and no two layers share one."""
TREE_DESCRIPTION = "call tree"
"""The chart's ``description``: what a test (or a screen reader) reads to tell it from the overview
(`tree_overview.OVERVIEW_DESCRIPTION`)."""

BADGE_FACTOR = 1.45
"""A badge's size (a node's second ring and after, before its label), in node diameters."""
BADGE_GAP = 3.0


def ring_badges(flags: Any) -> list[str]:
    """The rings of a node drawn as badges before its label: all but the first it carries (in `RING_FLAGS`'s
    order), which stays around the node."""
    return [flag for flag in RING_FLAGS if flag in flags][1:]


def label_offset(size: float = NODE_SIZE) -> float:
    """Pixels from a node's centre to where its label starts: past the widest ring it can carry."""
    return size * LABEL_CLEARANCE / 2 + 4


def _rows(model: TreeModel, window: tuple[int, int] | None) -> tuple[int, int]:
    """The first and last row shown (1-based call-order positions)."""
    if window is None:
        return 1, max(len(model), 1)
    return max(1, window[0]), min(len(model), window[1])


def node_labels(model: TreeModel, lo: int, hi: int) -> list[str]:
    """The labels of rows ``lo``..``hi``: the (shortened) id, then the node's note (the lane it opens, ...)."""
    nodes = model.nodes[lo - 1:hi]
    texts = short_labels([n.ident for n in nodes], LABEL_CHARS)
    return [t + (f" · {n.note}" if n.note else "") for t, n in zip(texts, nodes, strict=False)]


def lane_headers(model: TreeModel, lo: int, hi: int) -> list[tuple[int, str]]:
    """(lane, name) of the lanes named at the top of rows ``lo``..``hi``: the main chain's, and each chain
    whose run comes down from above the first row (a run that starts in view names itself in its head's label)."""
    out = [(0, "main")] if model.main_lane else []
    for run in model.runs:
        if run.lane == 0 and model.main_lane:
            continue
        if run.start < lo <= run.end and model.nodes[model.index[run.head]].note:
            out.append((run.lane, run.name))
    return sorted(set(out))


def _stack_headers(headers: list[tuple[int, str]], x0: float) -> list[tuple[int, str, int]]:
    """(lane, text, line) for headers placed left to right, each on the lowest line it does not touch."""
    ends = [-1e9] * HEADER_LINES
    out = []
    for lane, text in headers:
        start = (lane - 0.4 - x0) * LANE_PX
        width = text_px(text)
        line = next((i for i, end in enumerate(ends) if end + 10 < start), None)
        if line is None:
            continue  # no room: the head of the lane's run names it in its label
        ends[line] = start + width
        out.append((lane, text, line))
    return out


class _Frame:
    """Lanes and rows to pixels: lane ``x0`` at the plot's left edge, row ``lo - 0.6`` at its top."""

    def __init__(self, x0: float, lo: int, top: float, row_px: float) -> None:
        self.x0, self.lo, self.top, self.row_px = x0, lo, top, row_px

    def x(self, lane: Any) -> Any:
        return LEFT_PX + (np.asarray(lane, dtype=float) - self.x0) * LANE_PX

    def y(self, row: Any) -> Any:
        return self.top + (np.asarray(row, dtype=float) - (self.lo - 0.6)) * self.row_px


X0 = -0.75
"""The lane at the plot's left edge: lane 0's nodes sit three quarters of a lane in."""
CROWDED_ROWS = 120
"""Above this many rows shown, nodes lose the white rim that separates neighbours (it would paint over them)."""
SHADED_ROWS = 80
"""Every other row is shaded when a labelled tree shows at most this many."""


@dataclass
class _Plot:
    """One drawing of the tree: the rows shown, how big a row and a node are, and where labels and lane names go."""

    model: TreeModel
    lo: int
    hi: int
    visible: range
    """The indices in ``model.nodes`` of the rows shown."""
    with_labels: bool
    row_px: float
    size: float
    """A node's diameter in pixels."""
    label_lanes: list[int]
    offset: float
    """Pixels from a node's centre to its label (`label_offset`)."""
    badges: list[list[str]]
    """Each shown row's rings drawn as badges before its label (`ring_badges`; none without labels)."""
    badge_px: float
    shift: list[float]
    """How far each shown row's label moves right, past its badges."""
    texts: list[str]
    """The labels of the rows shown; none without labels."""
    headers: list[tuple[int, str, int]]
    """(lane, name, line) of the lane names in the top margin (`_stack_headers`)."""
    top: int
    plot_h: float
    plot_right: float
    frame: _Frame


def tree_chart(model: TreeModel, selected: str | None = None, *, height: int | None = None,
               window: tuple[int, int] | None = None, labels: bool | None = None,
               legend: bool = True) -> dict[str, Any]:
    """The Vega-Lite spec of a laid-out tree; every node and ring carries its node key (``key``).

    With ``window`` (an inclusive range of call-order rows) only those rows are drawn, with every
    link that reaches into them: the zoomed detail of a long rollout. ``labels`` writes each
    call's (shortened) id beside it; by default when at most `LABEL_ROWS` rows are shown.
    ``height`` only caps a tree drawn without labels. The spec's ``usermeta.geometry`` says
    where the plot and the legend are (for tests and the page).
    """
    plot = _plot(model, window, height, labels)  # 1. the rows, their scale, the labels' extent
    links, link_rows = _links(plot)  # 2. the links, one layer per kind
    nodes, node_rows = _node_points(plot)  # 3. the nodes, then the rings over them
    rings, ring_rows = _ring_points(plot, selected)
    points = nodes + _badge_points(plot) + rings
    layers = _shading(plot) + links  # 4. the layers, bottom up: shading, links, points, labels
    if points:
        layers.append(point_layer(points, pick=True, name=NODES))
    layers += _label_layers(plot)
    legend_rows = link_rows + node_rows + ring_rows  # 5. the legend, in the right margin
    legend_w = legend_h = 0.0
    if legend and legend_rows:
        legend_layers, legend_w, legend_h = legend_layers_at(legend_rows, plot.plot_right + 12, plot.top, plot.size)
        layers.extend(legend_layers)
    return _spec(plot, layers, legend_w, legend_h)  # 6. the chart around them


def _scale(n_rows: int, with_labels: bool, height: int | None) -> tuple[float, float]:
    """(row height, node diameter) in pixels: full size with labels; a whole long tree's rows shrink to fit."""
    if with_labels:
        return float(ROW_PX), float(NODE_SIZE)
    row_px = min(float(ROW_PX), max(2.0, (height or 1600) / max(n_rows, 1)))
    return row_px, min(float(NODE_SIZE), max(3.0, row_px * 0.9))


def _plot(model: TreeModel, window: tuple[int, int] | None, height: int | None, labels: bool | None) -> _Plot:
    """Step 1. The rows shown and their scale; then the labels and lane names, whose extent decides the plot's
    width and top margin."""
    lo, hi = _rows(model, window)
    visible = range(lo - 1, hi) if len(model) else range(0)
    with_labels = labels if labels is not None else len(visible) <= LABEL_ROWS
    row_px, size = _scale(len(visible), with_labels, height)
    nodes = model.nodes
    label_lanes = [nodes[i].label_lane for i in visible] or [0]
    offset = label_offset(size)
    # A node with several rings keeps the first centred; the others stand as badges before its label,
    # which moves right past them (concentric, a diamond, a triangle and an hourglass read as one blob).
    badges = [ring_badges(nodes[i].flags) if with_labels else [] for i in visible]
    badge_px = size * BADGE_FACTOR + BADGE_GAP
    shift = [len(b) * badge_px + (BADGE_GAP if b else 0) for b in badges]
    labelled = with_labels and len(visible) > 0
    texts = node_labels(model, lo, hi) if labelled else []
    headers = _stack_headers(lane_headers(model, lo, hi), X0) if labelled else []
    right = _right_edge(model, visible, label_lanes, offset, shift, texts, headers)
    top = 8 + HEADER_PX * (1 + max((line for _, _, line in headers), default=-1))
    return _Plot(model, lo, hi, visible, with_labels, row_px, size, label_lanes, offset, badges, badge_px, shift,
                 texts, headers, top, plot_h=(hi - lo + 1.2) * row_px, plot_right=LEFT_PX + (right - X0) * LANE_PX,
                 frame=_Frame(X0, lo, top, row_px))


def _right_edge(model: TreeModel, visible: range, label_lanes: list[int], offset: float, shift: list[float],
                texts: list[str], headers: list[tuple[int, str, int]]) -> float:
    """The plot's right edge, in lanes: past every lane shown and every label and lane name written."""
    lanes_seen = [model.nodes[i].lane for i in visible] or [0]
    right = max(max(lanes_seen) + 0.75, max(label_lanes) + 0.5)
    if texts:
        ends = [(ll - X0) * LANE_PX + offset + sh + text_px(t) + 8
                for ll, t, sh in zip(label_lanes, texts, shift, strict=False)]
        right = max(right, max(ends) / LANE_PX + X0)
    for lane, text, _ in headers:
        right = max(right, lane - 0.4 + (text_px(text) + 8) / LANE_PX)
    return right


def _links(plot: _Plot) -> tuple[list[dict[str, Any]], list[LegendRow]]:
    """Step 2. The links reaching into the rows shown, one layer per kind (and a legend row each): down the
    parent's lane to half a row below it, across to the child's lane, down to the child (a lane's line never
    passes a node of another run). A claim beside the link the build made is drawn straight."""
    f = plot.frame
    table = plot.model.edge_table()
    reach = (table["parent_row"] <= plot.hi) & (table["child_row"] >= plot.lo)
    layers: list[dict[str, Any]] = []
    rows: list[LegendRow] = []
    for code, (kind, (label, colour, dash, width)) in enumerate(EDGE_STYLES.items()):
        pick = reach & (table["kind"] == code)
        if not pick.any():
            continue
        a, b = f.x(table["parent_lane"][pick]), f.x(table["child_lane"][pick])
        rp, rc = table["parent_row"][pick], table["child_row"][pick]
        bend = f.y(np.where(table["straight"][pick], rp, rp + 0.5))
        turn = f.y(np.where(table["straight"][pick], rc, rp + 0.5))
        ys = np.column_stack((f.y(rp), bend, turn, f.y(rc)))
        xs = np.column_stack((a, a, b, b))
        # A link reaching past the plot is cut at its edge (SVG would draw it out of the view).
        ys = np.clip(ys, plot.top, plot.top + plot.plot_h)
        layers.append(rule_layer(link_segments(xs, ys), colour, dash, width, LINKS + kind))
        rows.append(("links", label, {"line": (colour, dash, width)}))
    return layers, rows


def _node_points(plot: _Plot) -> tuple[list[dict[str, Any]], list[LegendRow]]:
    """Step 3. The nodes shown, category by category (`NODE_STYLES`' order), and a legend row per category."""
    nodes = plot.model.nodes
    by_cat: dict[str, list[int]] = defaultdict(list)
    for i in plot.visible:
        by_cat[nodes[i].category].append(i)
    # A thin white rim separates neighbouring nodes; when nodes crowd, the rims would paint over the fills.
    rim = None if len(plot.visible) > CROWDED_ROWS else "#ffffff"
    points: list[dict[str, Any]] = []
    rows: list[LegendRow] = []
    for cat, (label, colour, symbol, factor) in NODE_STYLES.items():
        idx = by_cat.get(cat)
        if not idx:
            continue
        width = 1.0 if shape_of(symbol)[1] else 2.0  # an open or stroked node's outline is its whole mark
        for i in idx:
            n = nodes[i]
            points.append(point_datum(plot.frame.x(n.lane), plot.frame.y(n.order), symbol, colour,
                                      plot.size * factor, width, rim, label, n.key, n.hover))
        rows.append(("calls", label, {"point": (symbol, colour, factor, width)}))
    return points, rows


def _badge_points(plot: _Plot) -> list[dict[str, Any]]:
    """Step 3. A node's rings after its first, as badges in a row before its label."""
    points: list[dict[str, Any]] = []
    for v, (i, flags) in enumerate(zip(plot.visible, plot.badges, strict=False)):
        n = plot.model.nodes[i]
        for j, flag in enumerate(flags):
            label, colour, symbol, _, _ = OVERLAY_STYLES[flag]
            at = plot.frame.x(plot.label_lanes[v]) + plot.offset + (j + 0.5) * plot.badge_px
            points.append(point_datum(at, plot.frame.y(n.order), symbol, colour, plot.size * BADGE_FACTOR, 1.6,
                                      None, label, n.key, n.hover))
    return points


def _ring_points(plot: _Plot, selected: str | None) -> tuple[list[dict[str, Any]], list[LegendRow]]:
    """Step 3. The rings around the nodes shown, ring by ring (`RING_FLAGS`' order, the selection last), but
    those drawn as badges; a legend row per ring carried."""
    model, nodes = plot.model, plot.model.nodes
    rings = [(flag, [i for i in plot.visible if flag in nodes[i].flags]) for flag in RING_FLAGS]
    if selected is not None and selected in {nodes[i].key for i in plot.visible}:
        rings.append(("selected", [model.index[selected]]))
    badged = {i: set(b) for i, b in zip(plot.visible, plot.badges, strict=False) if b}
    points: list[dict[str, Any]] = []
    rows: list[LegendRow] = []
    for flag, idx in rings:
        if not idx:
            continue
        label, colour, symbol, factor, width = OVERLAY_STYLES[flag]
        for i in idx:
            if flag in badged.get(i, ()):
                continue
            n = nodes[i]
            points.append(point_datum(plot.frame.x(n.lane), plot.frame.y(n.order), symbol, colour,
                                      plot.size * factor, width, None, label, n.key, n.hover))
        rows.append(("marks", label, {"point": (symbol, colour, factor, width)}))
    return points, rows


def _shading(plot: _Plot) -> list[dict[str, Any]]:
    """Step 4. Every other row of a short labelled tree shaded, one rect each, under everything else."""
    if not plot.with_labels or len(plot.visible) > SHADED_ROWS:
        return []
    rows = np.arange(plot.lo + 1, plot.hi + 1, 2, dtype=float)
    if not rows.size:
        return []
    f = plot.frame
    shade = [{"x": LEFT_PX, "x2": round(plot.plot_right, 2), "y": round(float(f.y(r - 0.5)), 2),
              "y2": round(float(f.y(r + 0.5)), 2)} for r in rows]
    return [{"name": SHADING, "data": {"values": shade},
             "mark": {"type": "rect", "color": "#f8fafc", "aria": False},
             "encoding": {"x": {"field": "x", "type": "quantitative", "scale": None},
                          "x2": {"field": "x2"},
                          "y": {"field": "y", "type": "quantitative", "scale": None},
                          "y2": {"field": "y2"}}}]


def _label_layers(plot: _Plot) -> list[dict[str, Any]]:
    """Step 4. The labels beside their nodes, and the lane names in the top margin."""
    f = plot.frame
    layers: list[dict[str, Any]] = []
    if plot.texts:
        lx = f.x(np.array(plot.label_lanes, dtype=float)) + plot.offset + np.array(plot.shift, dtype=float)
        ly = f.y(np.arange(plot.lo, plot.hi + 1, dtype=float))
        layers.append(text_layer([{"px": round(float(x), 2), "py": round(float(y), 2), "text": t}
                                  for x, y, t in zip(lx, ly, plot.texts, strict=False)], CALL_IDS, color="#1e293b"))
    if plot.headers:
        layers.append(text_layer([{"px": round(float(f.x(lane - 0.4)), 2), "py": plot.top - 2 - HEADER_PX * line,
                                   "text": text} for lane, text, line in plot.headers],
                                 LANE_NAMES, color="#334155", baseline="bottom"))
    return layers


def _spec(plot: _Plot, layers: list[dict[str, Any]], legend_w: float, legend_h: float) -> dict[str, Any]:
    """Step 6. The chart: sized to the plot and the legend beside it, drawn unscaled, its geometry in
    ``usermeta`` (on a canvas above `CANVAS_ROWS` rows)."""
    top, plot_h = plot.top, plot.plot_h
    width = plot.plot_right + (legend_w + 16 if legend_w else 8)
    height_px = max(top + plot_h, top + legend_h) + 8
    return {
        "$schema": vega.SCHEMA,
        "description": TREE_DESCRIPTION,
        "width": int(round(width)),
        "height": int(round(height_px)),
        "autosize": {"type": "none"},
        "padding": 0,
        "background": "transparent",
        "config": {"view": {"stroke": None}, "font": style.FONT},
        "usermeta": {**(CANVAS if len(plot.visible) > CANVAS_ROWS else vega.RENDERER),
                     "geometry": {"plot": [LEFT_PX, top, round(plot.plot_right, 2), round(top + plot_h, 2)],
                                  "rows": [plot.lo, plot.hi], "row_px": plot.row_px, "label_font": LABEL_FONT,
                                  "char_em": CHAR_EM}},
        "layer": layers or [{"mark": "point", "data": {"values": []}}],
    }
