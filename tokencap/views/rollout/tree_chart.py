"""The call tree drawn as Vega-Lite: one row per node in call order, lanes as columns, each label beside its node.

Every position is computed here in pixels and handed to Vega-Lite unscaled (``scale: null``),
so what can collide is decided here and not by the browser: a row is `ROW_PX` high and holds
one node, a lane is `LANE_PX` wide, labels are monospace `LABEL_FONT` px and start right of
their node's widest ring (or right of the last lane whose link crosses the row). The chart's
width and height follow from that, and the page draws it at its own width. Lane names sit in
the top margin, stacked on up to `HEADER_LINES` lines when they would touch; the legend is
drawn in the right margin from the same marks.

Why not plotly: the tree is the first thing every opened rollout draws, and plotly's bundle
(4.8 MB) costs a fresh browser tab about a second to evaluate before its first plot. A row
clicked on the Run page while that bundle loaded waited for it (1.1-1.4 s). Vega-Lite is
already loaded for the Run page's charts, so the first rollout opened draws at once.

A long rollout is drawn as a window of rows (``window``: an inclusive range of call-order
positions) below a clickable overview of every node (`tree_overview`). Every node and ring
carries its node key; a click selects it by that key (`..vega.PICK`). Text is SVG text and
tooltips are escaped by vega-tooltip, so a call id is never read as HTML. No Streamlit here.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from .. import style, vega
from .tree_marks import EDGE_STYLES, NODE_STYLES, OVERLAY_STYLES, RING_FLAGS
from .tree_model import TreeModel, short_labels

CANVAS_ROWS = 1000
"""Above this many rows the tree is drawn on a canvas (one SVG element per mark would be slow)."""

ROW_PX = 22
"""One row per node: a label box (about 14 px) and the widest ring (about 26 px) never reach the next row's label."""
LANE_PX = 26
NODE_SIZE = 9
"""A node's diameter in pixels (Vega-Lite's point ``size`` is its area: the square of this)."""
LABEL_FONT = 11
LABEL_FAMILY = "DejaVu Sans Mono, Menlo, Consolas, ui-monospace, monospace"
CHAR_EM = 0.66
"""Width budgeted per label character, in em (monospace fonts draw 0.60)."""
LABEL_CHARS = 22
"""Ids longer than this lose their shared prefix, then their middle (`short_labels`)."""
HEADER_LINES = 3
HEADER_PX = 16
LEFT_PX = 8
LEGEND_ROW_PX = 19
LEGEND_TITLE_PX = 22
LEGEND_GAP_PX = 8
LEGEND_SYMBOL_PX = 12

LABEL_CLEARANCE = max(ring[3] for ring in OVERLAY_STYLES.values())
"""Labels keep clear of the widest mark a node can carry (the rings drawn over it)."""

LABEL_ROWS = 200
"""Call ids are written beside the nodes when at most this many rows are shown."""

NODES, CALL_IDS, LANE_NAMES, SHADING = "nodes", "call_ids", "lane_names", "row_shading"
LINKS, LEGEND = "links_", "legend_"
"""The ``name`` of the tree's layers, what a test (or a reader of the spec) looks for: the clickable nodes and
rings, the labels beside them, the lane names in the top margin, the shading; the links of each kind
(`LINKS` + the kind) and the legend's parts (`LEGEND` + the part). Vega names its data and marks after them,
so each is a plain identifier and no two layers share one."""
TREE_DESCRIPTION = "call tree"
"""The chart's ``description``: what a test (or a screen reader) reads to tell it from the overview
(`tree_overview.OVERVIEW_DESCRIPTION`)."""

# Symbols Vega lacks, as SVG paths in its unit square ([-1, 1] each way).
_STAR = "M0,-1L0.235,-0.324L0.951,-0.309L0.380,0.124L0.588,0.809L0,0.400L-0.588,0.809L-0.380,0.124" \
        "L-0.951,-0.309L-0.235,-0.324Z"
_HEXAGON = "M0,-1L0.866,-0.5L0.866,0.5L0,1L-0.866,0.5L-0.866,-0.5Z"
_X = "M-0.8,-0.8L0.8,0.8M-0.8,0.8L0.8,-0.8"
_SQUARE_X = "M-1,-1L1,-1L1,1L-1,1ZM-1,-1L1,1M-1,1L1,-1"
_HOURGLASS = "M-0.9,-1L0.9,-1L-0.9,1L0.9,1Z"
_STAR_TRIANGLE = "M0,-1L0.35,0.2L1,0.8L0,0.45L-1,0.8L-0.35,0.2Z"
SHAPES = {
    "circle": "circle", "square": "square", "diamond": "diamond", "triangle-down": "triangle-down",
    "triangle-up": "triangle-up", "star": _STAR, "hexagon": _HEXAGON, "x": _X, "square-x": _SQUARE_X,
    "hourglass": _HOURGLASS, "star-triangle-up": _STAR_TRIANGLE,
}
"""`tree_marks`' symbol names (an ``-open`` suffix draws the outline only) as Vega shapes."""

DASHES = {"solid": None, "dot": [2, 3], "dash": [6, 4], "dashdot": [6, 3, 2, 3], "longdash": [10, 4]}
"""`tree_marks`' link dashes as SVG dash arrays (None: solid)."""


def shape_of(symbol: str) -> tuple[str, bool]:
    """(Vega shape, filled) of a `tree_marks` symbol."""
    base = symbol[:-5] if symbol.endswith("-open") else symbol
    return SHAPES[base], not symbol.endswith("-open") and base != "x"


def _text_px(text: str, font: float = LABEL_FONT) -> float:
    return len(text) * CHAR_EM * font


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
        width = _text_px(text)
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


def _point_layer(data: list[dict[str, Any]], *, pick: bool, name: str) -> dict[str, Any]:
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


def _text_layer(data: list[dict[str, Any]], name: str, **mark: Any) -> dict[str, Any]:
    return {"name": name, "data": {"values": data},
            "mark": {"type": "text", "align": "left", "baseline": "middle", "font": LABEL_FAMILY,
                     "fontSize": LABEL_FONT, "aria": False, **mark},
            "encoding": {"x": {"field": "px", "type": "quantitative", "scale": None},
                         "y": {"field": "py", "type": "quantitative", "scale": None},
                         "text": {"field": "text", "type": "nominal"}}}


def _rule_layer(data: list[dict[str, Any]], colour: str, dash: str, width: float, name: str) -> dict[str, Any]:
    """Straight segments from (``px``, ``py``) to (``px2``, ``py2``): one SVG path each, no group per link."""
    mark: dict[str, Any] = {"type": "rule", "color": colour, "strokeWidth": width, "aria": False}
    if DASHES[dash] is not None:
        mark["strokeDash"] = DASHES[dash]
    return {"name": name, "data": {"values": data}, "mark": mark,
            "encoding": {"x": {"field": "px", "type": "quantitative", "scale": None},
                         "y": {"field": "py", "type": "quantitative", "scale": None},
                         "x2": {"field": "px2"}, "y2": {"field": "py2"}}}


def _segments(xs: np.ndarray, ys: np.ndarray) -> list[dict[str, Any]]:
    """The segments of polylines (one per row of ``xs``/``ys``), each with its link's index; none of length 0."""
    out = []
    for e in range(xs.shape[0]):
        for s in range(xs.shape[1] - 1):
            x0, y0, x1, y1 = (round(float(v), 2) for v in (xs[e, s], ys[e, s], xs[e, s + 1], ys[e, s + 1]))
            if (x0, y0) != (x1, y1):
                out.append({"edge": e, "px": x0, "py": y0, "px2": x1, "py2": y1})
    return out


def _point(px: float, py: float, symbol: str, colour: str, size: float, width: float, rim: str | None,
           what: str, key: str = "", tip: str = "") -> dict[str, Any]:
    """A node or ring at (``px``, ``py``): ``what`` is its legend label, ``size`` its diameter."""
    shape, filled = shape_of(symbol)
    return {"px": round(float(px), 2), "py": round(float(py), 2), "shape": shape, "size": round(size * size, 2),
            "fill": colour if filled else "transparent", "stroke": (rim or colour) if filled else colour,
            "sw": width if not filled or rim else 0, "what": what, "key": key, "tip": tip}


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
    lo, hi = _rows(model, window)
    visible = range(lo - 1, hi) if len(model) else range(0)
    n_rows = len(visible)
    with_labels = labels if labels is not None else n_rows <= LABEL_ROWS
    if with_labels:
        row_px, size = float(ROW_PX), float(NODE_SIZE)
    else:  # a whole long tree: rows shrink to fit
        row_px = min(float(ROW_PX), max(2.0, (height or 1600) / max(n_rows, 1)))
        size = min(float(NODE_SIZE), max(3.0, row_px * 0.9))
    dense = n_rows > 120
    nodes = model.nodes
    shown = {nodes[i].key for i in visible}

    # Geometry first: the labels' extent decides the width, the lane names the top margin.
    lanes_seen = [nodes[i].lane for i in visible] or [0]
    label_lanes = [nodes[i].label_lane for i in visible] or [0]
    x0 = -0.75
    right = max(max(lanes_seen) + 0.75, max(label_lanes) + 0.5)
    texts: list[str] = []
    headers: list[tuple[int, str, int]] = []
    offset = label_offset(size)
    # A node with several rings keeps the first centred; the others stand as badges before its label,
    # which moves right past them (concentric, a diamond, a triangle and an hourglass read as one blob).
    badges = [ring_badges(nodes[i].flags) if with_labels else [] for i in visible]
    badge_px = size * BADGE_FACTOR + BADGE_GAP
    shift = [len(b) * badge_px + (BADGE_GAP if b else 0) for b in badges]
    if with_labels and n_rows:
        texts = node_labels(model, lo, hi)
        ends = [(ll - x0) * LANE_PX + offset + sh + _text_px(t) + 8
                for ll, t, sh in zip(label_lanes, texts, shift, strict=False)]
        right = max(right, max(ends) / LANE_PX + x0)
        headers = _stack_headers(lane_headers(model, lo, hi), x0)
        for lane, text, _ in headers:
            right = max(right, lane - 0.4 + (_text_px(text) + 8) / LANE_PX)
    lines = 1 + max((line for _, _, line in headers), default=-1)
    top = 8 + HEADER_PX * lines
    plot_w = (right - x0) * LANE_PX
    plot_h = (hi - lo + 1.2) * row_px
    f = _Frame(x0, lo, top, row_px)
    plot_right = LEFT_PX + plot_w

    layers: list[dict[str, Any]] = []
    legend_items: list[tuple[str, str, dict[str, Any]]] = []  # (group, label, how its symbol is drawn)

    if with_labels and n_rows <= 80:
        # Every other row shaded, one rect each, under everything else.
        rows = np.arange(lo + 1, hi + 1, 2, dtype=float)
        if rows.size:
            shade = [{"x": LEFT_PX, "x2": round(plot_right, 2), "y": round(float(f.y(r - 0.5)), 2),
                      "y2": round(float(f.y(r + 0.5)), 2)} for r in rows]
            layers.append({"name": SHADING, "data": {"values": shade},
                           "mark": {"type": "rect", "color": "#f8fafc", "aria": False},
                           "encoding": {"x": {"field": "x", "type": "quantitative", "scale": None},
                                        "x2": {"field": "x2"},
                                        "y": {"field": "y", "type": "quantitative", "scale": None},
                                        "y2": {"field": "y2"}}})

    # Links, one layer per kind: down the parent's lane to half a row below it, across to the child's
    # lane, down to the child (a lane's line never passes a node of another run).
    table = model.edge_table()
    reach = (table["parent_row"] <= hi) & (table["child_row"] >= lo)
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
        # A link reaching past the plot is cut at its edge (plotly clipped it; SVG would draw it out of the view).
        ys = np.clip(ys, top, top + plot_h)
        layers.append(_rule_layer(_segments(xs, ys), colour, dash, width, LINKS + kind))
        legend_items.append(("links", label, {"line": (colour, dash, width)}))

    # Nodes, then the rings over them (the selection last), in one clickable layer.
    points: list[dict[str, Any]] = []
    by_cat: dict[str, list[int]] = defaultdict(list)
    for i in visible:
        by_cat[nodes[i].category].append(i)
    for cat, (label, colour, symbol, factor) in NODE_STYLES.items():
        idx = by_cat.get(cat)
        if not idx:
            continue
        # A thin white rim separates neighbouring nodes; when nodes crowd, the rims would paint over the fills.
        rim = None if dense else "#ffffff"
        width = 2.0 if symbol.endswith("-open") or symbol == "x" else 1.0
        for i in idx:
            n = nodes[i]
            points.append(_point(f.x(n.lane), f.y(n.order), symbol, colour, size * factor, width, rim, label, n.key,
                                 n.hover))
        legend_items.append(("calls", label, {"point": (symbol, colour, factor, width)}))
    rings = [(flag, [i for i in visible if flag in nodes[i].flags]) for flag in RING_FLAGS]
    if selected is not None and selected in shown:
        rings.append(("selected", [model.index[selected]]))
    badged = {i: set(b) for i, b in zip(visible, badges, strict=False) if b}
    for v, (i, flags) in enumerate(zip(visible, badges, strict=False)):
        n = nodes[i]
        for j, flag in enumerate(flags):
            label, colour, symbol, _, _ = OVERLAY_STYLES[flag]
            at = f.x(label_lanes[v]) + offset + (j + 0.5) * badge_px
            points.append(_point(at, f.y(n.order), symbol, colour, size * BADGE_FACTOR, 1.6, None, label, n.key,
                                 n.hover))
    for flag, idx in rings:
        if not idx:
            continue
        label, colour, symbol, factor, width = OVERLAY_STYLES[flag]
        for i in idx:
            if flag in badged.get(i, ()):
                continue
            n = nodes[i]
            points.append(_point(f.x(n.lane), f.y(n.order), symbol, colour, size * factor, width, None, label,
                                 n.key, n.hover))
        legend_items.append(("marks", label, {"point": (symbol, colour, factor, width)}))
    if points:
        layers.append(_point_layer(points, pick=True, name=NODES))

    # Labels beside their nodes, and the lane names in the top margin.
    if texts:
        lx = f.x(np.array(label_lanes, dtype=float)) + offset + np.array(shift, dtype=float)
        ly = f.y(np.arange(lo, hi + 1, dtype=float))
        layers.append(_text_layer([{"px": round(float(x), 2), "py": round(float(y), 2), "text": t}
                                   for x, y, t in zip(lx, ly, texts, strict=False)], CALL_IDS, color="#1e293b"))
    if headers:
        layers.append(_text_layer([{"px": round(float(f.x(lane - 0.4)), 2), "py": top - 2 - HEADER_PX * line,
                                    "text": text} for lane, text, line in headers],
                                  LANE_NAMES, color="#334155", baseline="bottom"))

    legend_w = legend_h = 0.0
    if legend and legend_items:
        legend_layers, legend_w, legend_h = _legend(legend_items, plot_right + 12, top, size)
        layers.extend(legend_layers)
    width = plot_right + (legend_w + 16 if legend_w else 8)
    height_px = max(top + plot_h, top + legend_h) + 8
    spec = {
        "$schema": vega.SCHEMA,
        "description": TREE_DESCRIPTION,
        "width": int(round(width)),
        "height": int(round(height_px)),
        "autosize": {"type": "none"},
        "padding": 0,
        "background": "transparent",
        "config": {"view": {"stroke": None}, "font": style.FONT},
        "usermeta": {**(CANVAS if n_rows > CANVAS_ROWS else vega.RENDERER),
                     "geometry": {"plot": [LEFT_PX, top, round(plot_right, 2), round(top + plot_h, 2)],
                                  "rows": [lo, hi], "row_px": row_px, "label_font": LABEL_FONT,
                                  "char_em": CHAR_EM}},
        "layer": layers or [{"mark": "point", "data": {"values": []}}],
    }
    return spec


CANVAS = {"embedOptions": {"renderer": "canvas"}}


def _legend(items: list[tuple[str, str, dict[str, Any]]], left: float, top: float,
            size: float) -> tuple[list[dict[str, Any]], float, float]:
    """The legend's layers (drawn, not clickable) at (``left``, ``top``), and its width and height."""
    titles: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    symbols: list[dict[str, Any]] = []
    lines: list[tuple[float, str, str, float]] = []
    y = top + 4
    group = None
    longest = 0
    for name, label, how in items:
        if name != group:
            if group is not None:
                y += LEGEND_GAP_PX
            titles.append({"px": left, "py": y + LEGEND_TITLE_PX / 2, "text": name})
            y += LEGEND_TITLE_PX
            group = name
            longest = max(longest, len(name))
        cy = y + LEGEND_ROW_PX / 2
        if "line" in how:
            colour, dash, width = how["line"]
            lines.append((cy, colour, dash, width))
        else:
            symbol, colour, factor, width = how["point"]
            symbols.append(_point(left + LEGEND_SYMBOL_PX / 2, cy, symbol, colour,
                                  min(size * factor, LEGEND_SYMBOL_PX + 2), width, None, label))
        texts.append({"px": left + LEGEND_SYMBOL_PX + 8, "py": cy, "text": label})
        longest = max(longest, len(label) + 3)
        y += LEGEND_ROW_PX
    layers: list[dict[str, Any]] = []
    for i, (cy, colour, dash, width) in enumerate(lines):
        data = [{"edge": 0, "px": left, "py": cy, "px2": left + LEGEND_SYMBOL_PX + 2, "py2": cy}]
        layers.append(_rule_layer(data, colour, dash, width, f"{LEGEND}link_{i}"))
    if symbols:
        points = _point_layer(symbols, pick=False, name=LEGEND + "symbols")
        points["encoding"].pop("tooltip")
        points["encoding"].pop("description")
        points["mark"]["aria"] = False
        layers.append(points)
    layers.append(_text_layer(titles, LEGEND + "titles", color="#334155", fontWeight="bold", font=style.FONT,
                              fontSize=11))
    layers.append(_text_layer(texts, LEGEND + "texts", color="#334155", font=style.FONT, fontSize=11))
    width = LEGEND_SYMBOL_PX + 8 + CHAR_EM * 11 * max(longest - 3, 1) + 8
    return layers, width, y - top + 4
