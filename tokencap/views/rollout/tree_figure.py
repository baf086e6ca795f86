"""The call tree drawn: one row per node in call order, lanes as columns, each label beside its node.

Every size is fixed in pixels, so what can collide is decided here and not by the browser:
a row is `ROW_PX` high and holds one node, a lane is `LANE_PX` wide, labels are monospace
`LABEL_FONT` px and start right of their node's ring (or right of the last lane whose link
crosses the row). The figure's width and height are computed from that (the page draws it
at its own width), so no label can run into another, onto a node or out of the plot.
Lane names sit in the top margin, stacked on up to `HEADER_LINES` lines when they would touch.

A long rollout is drawn as a window of rows (``window``: an inclusive range of call-order
positions) below a clickable overview of every node (`overview_figure`: call order left
to right, lanes top to bottom). One trace per mark (node category, ring, edge category),
never one per node; WebGL (`Scattergl`) above `WEBGL_THRESHOLD` nodes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from .. import style
from ..figures import as_figure, trace
from ..model import CALL
from ..text import html_text
from .tree_marks import EDGE_STYLES, NODE_STYLES, OVERLAY_STYLES, RING_FLAGS
from .tree_model import TreeModel, short_labels

WEBGL_THRESHOLD = 1000

ROW_PX = 22
"""One row per node: a label box (about 14 px) and the widest ring (about 26 px) never reach the next row's label."""
LANE_PX = 26
NODE_SIZE = 9
LABEL_FONT = 11
LABEL_FAMILY = "DejaVu Sans Mono, Menlo, Consolas, ui-monospace, monospace"
CHAR_EM = 0.66
"""Width budgeted per label character, in em (monospace fonts draw 0.60)."""
LABEL_CHARS = 22
"""Ids longer than this lose their shared prefix, then their middle (`short_labels`)."""
HEADER_LINES = 3
HEADER_PX = 16
LEGEND_CHAR_PX = 6.6

LABEL_CLEARANCE = max(ring[3] for ring in OVERLAY_STYLES.values())
"""Labels keep clear of the widest mark a node can carry (the rings drawn over it)."""

LABEL_ROWS = 200
"""Call ids are written beside the nodes when at most this many rows are shown."""


def _clearance_size(size: float) -> float:
    return size * LABEL_CLEARANCE + 4


def label_offset(size: float = NODE_SIZE) -> float:
    """Pixels from a node's centre to where its label starts: plotly sets a trace's text off by
    ``marker.size / 1.6 + 1``, and the label's invisible marker is as wide as the widest ring."""
    return _clearance_size(size) / 1.6 + 1


def _label_clearance(size: float) -> dict[str, Any]:
    """An invisible marker as wide as a node's widest ring: plotly sets a trace's text off by its
    marker's radius, so a label never sits on a node, its ring or the selection."""
    return {"size": _clearance_size(size), "color": "rgba(0,0,0,0)", "line": {"width": 0}}


def _text_px(text: str, font: float = LABEL_FONT) -> float:
    return len(text) * CHAR_EM * font


def _rows(model: TreeModel, window: tuple[int, int] | None) -> tuple[int, int]:
    """The first and last row shown (1-based call-order positions)."""
    if window is None:
        return 1, max(len(model), 1)
    return max(1, window[0]), min(len(model), window[1])


def node_labels(model: TreeModel, lo: int, hi: int) -> list[str]:
    """The labels of rows ``lo``..``hi``: the (shortened) id, then the node's note (the lane it opens, ...)."""
    nodes = model.nodes[lo - 1:hi]
    texts = short_labels([n.ident for n in nodes], LABEL_CHARS)
    return [t + (f" · {n.note}" if n.note else "") for t, n in zip(texts, nodes)]


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


def _legend_size(traces: list[dict[str, Any]]) -> tuple[float, float]:
    shown = [t for t in traces if t.get("showlegend") is not False]
    titles = [t["legendgrouptitle"]["text"] for t in shown if t.get("legendgrouptitle")]
    longest = max([len(t.get("name") or "") for t in shown] + [len(t) for t in titles] + [0])
    width = 56 + LEGEND_CHAR_PX * longest
    groups = len({t.get("legendgroup") for t in shown})
    height = 20 + 21 * len(shown) + 34 * groups
    return width, height


def tree_figure(model: TreeModel, selected: str | None = None, *, webgl: bool | None = None,
                height: int | None = None, window: tuple[int, int] | None = None, labels: bool | None = None,
                legend: bool = True) -> go.Figure:
    """The plotly figure of a laid-out tree; every point carries its node key as ``customdata``.

    With ``window`` (an inclusive range of call-order rows) only those rows are drawn, with
    every link that reaches into them, on a y axis fixed to the window: the zoomed detail of a
    long rollout. ``labels`` writes each call's (shortened) id beside it; by default when at
    most `LABEL_ROWS` rows are shown. ``height`` only caps a figure drawn without labels.
    """
    lo, hi = _rows(model, window)
    visible = range(lo - 1, hi) if len(model) else range(0)
    n_rows = len(visible)
    with_labels = labels if labels is not None else n_rows <= LABEL_ROWS
    use_gl = webgl if webgl is not None else n_rows > WEBGL_THRESHOLD
    trace_type = "scattergl" if use_gl else "scatter"
    if with_labels:
        row_px, size = float(ROW_PX), float(NODE_SIZE)
    else:  # a whole long tree: rows shrink to fit
        row_px = min(float(ROW_PX), max(2.0, (height or 1600) / max(n_rows, 1)))
        size = min(float(NODE_SIZE), max(3.0, row_px * 0.9))
    dense = n_rows > 120
    nodes = model.nodes
    shown = {nodes[i].key for i in visible}
    traces: list[dict[str, Any]] = []

    # Edges, one trace per category: down the parent's lane to half a row below it, across to
    # the child's lane, down to the child (a lane's line never passes a node of another run).
    table = model.edge_table()
    reach = (table["parent_row"] <= hi) & (table["child_row"] >= lo)
    first_edge = True
    for code, (kind, (label, colour, dash, width)) in enumerate(EDGE_STYLES.items()):
        pick = reach & (table["kind"] == code)
        if not pick.any():
            continue
        a, b = table["parent_lane"][pick], table["child_lane"][pick]
        rp, rc = table["parent_row"][pick], table["child_row"][pick]
        bend = np.where(table["straight"][pick], rp, rp + 0.5)
        turn = np.where(table["straight"][pick], rc, rp + 0.5)
        gap = np.full(a.size, np.nan)
        xs = np.column_stack((a, a, b, b, gap)).ravel()
        ys = np.column_stack((rp, bend, turn, rc, gap)).ravel()
        traces.append(trace(trace_type, x=xs, y=ys, mode="lines", name=label, legendgroup="edges",
                             legendgrouptitle={"text": "links"} if first_edge else None,
                             line={"color": colour, "dash": dash, "width": width},
                             hoverinfo="skip", connectgaps=False))
        first_edge = False

    # Nodes, one trace per category.
    by_cat: dict[str, list[int]] = defaultdict(list)
    for i in visible:
        by_cat[nodes[i].category].append(i)
    first_node_trace = True
    for cat, (label, colour, symbol, factor) in NODE_STYLES.items():
        idx = by_cat.get(cat)
        if not idx:
            continue
        open_symbol = symbol.endswith("-open") or symbol == "x"
        # A thin white rim separates neighbouring nodes; when nodes crowd the rims would
        # paint over the fills, so dense trees get none.
        rim = {"color": colour, "width": 2} if open_symbol else \
            ({"color": "#ffffff", "width": 1} if not dense else {"color": colour, "width": 0})
        traces.append(trace(
            trace_type, x=_lanes(model, idx), y=_orders(model, idx), mode="markers", name=label, legendgroup="calls",
            legendgrouptitle={"text": "calls"} if first_node_trace else None,
            marker={"symbol": symbol, "color": colour, "size": size * factor, "line": rim},
            customdata=np.array([nodes[i].key for i in idx], dtype=object).reshape(-1, 1),
            hovertext=[nodes[i].hover for i in idx],
            hovertemplate="%{hovertext}<extra></extra>",
        ))
        first_node_trace = False

    # Overlay rings (boundary, recovered, conflict, final answer) and the selection.
    first_ring = True
    rings = [(flag, [i for i in visible if flag in nodes[i].flags])
             for flag in RING_FLAGS]
    if selected is not None and selected in shown:
        rings.append(("selected", [model.index[selected]]))
    for flag, idx in rings:
        if not idx:
            continue
        label, colour, symbol, factor, width = OVERLAY_STYLES[flag]
        traces.append(trace(
            trace_type, x=_lanes(model, idx), y=_orders(model, idx), mode="markers", name=label, legendgroup="marks",
            legendgrouptitle={"text": "marks"} if first_ring else None,
            marker={"symbol": symbol, "color": colour, "size": size * factor, "line": {"color": colour, "width": width}},
            customdata=np.array([nodes[i].key for i in idx], dtype=object).reshape(-1, 1),
            hovertext=[nodes[i].hover for i in idx],
            hovertemplate="%{hovertext}<extra></extra>",
        ))
        first_ring = False

    # Geometry: lanes and rows in pixels, the labels' extent decides the width.
    lanes_seen = [nodes[i].lane for i in visible] or [0]
    label_lanes = [nodes[i].label_lane for i in visible] or [0]
    x0 = -0.75
    right = max(max(lanes_seen) + 0.75, max(label_lanes) + 0.5)
    texts: list[str] = []
    headers: list[tuple[int, str, int]] = []
    if with_labels and n_rows:
        texts = node_labels(model, lo, hi)
        offset = label_offset(size)
        ends = [(ll - x0) * LANE_PX + offset + _text_px(t) + 8 for ll, t in zip(label_lanes, texts)]
        right = max(right, max(ends) / LANE_PX + x0)
        headers = _stack_headers(lane_headers(model, lo, hi), x0)
        for lane, text, _ in headers:
            right = max(right, lane - 0.4 + (_text_px(text) + 8) / LANE_PX)
        traces.append(trace(
            trace_type, x=np.array(label_lanes, dtype=float), y=_orders(model, list(visible)), mode="markers+text",
            text=[html_text(t) for t in texts], marker=_label_clearance(size), textposition="middle right",
            textfont={"size": LABEL_FONT, "family": LABEL_FAMILY, "color": "#1e293b"}, hoverinfo="skip",
            showlegend=False, name="call ids"))
    plot_w = (right - x0) * LANE_PX
    plot_h = (hi - lo + 1.2) * row_px
    lines = 1 + max((line for _, _, line in headers), default=-1)
    top = 8 + HEADER_PX * lines
    legend_w, legend_h = _legend_size(traces) if legend else (0.0, 0.0)
    margin_r = legend_w + 16 if legend else 8
    bottom = max(8.0, legend_h - plot_h + 8) if legend else 8.0
    annotations = [{"x": lane - 0.4, "y": 1, "xref": "x", "yref": "paper", "xanchor": "left", "yanchor": "bottom",
                    "yshift": 2 + HEADER_PX * line, "text": html_text(text), "showarrow": False,
                    "font": {"size": LABEL_FONT, "family": LABEL_FAMILY, "color": "#334155"}}
                   for lane, text, line in headers]
    if with_labels and n_rows <= 80:
        # Every other row shaded, as one filled trace under the others (a shape each would be laid out and
        # drawn one by one, on the server's validation and in the browser): a rectangle per row, gaps between.
        rows = np.arange(lo + 1, hi + 1, 2, dtype=float)
        if rows.size:
            xs = np.tile([x0, right, right, x0, x0, np.nan], rows.size)
            ys = (rows[:, None] + np.array([-0.5, -0.5, 0.5, 0.5, -0.5, np.nan])).ravel()
            traces.insert(0, trace("scatter", x=xs, y=ys, mode="none", fill="toself", fillcolor="#f8fafc",
                                    hoverinfo="skip", showlegend=False, name="row shading"))
    layout = dict(
        **style.BASE_LAYOUT,
        width=int(round(8 + plot_w + margin_r)),
        height=int(round(top + plot_h + bottom)),
        margin={"l": 8, "r": margin_r, "t": top, "b": bottom, "pad": 0, "autoexpand": False},
        showlegend=legend,
        legend={"orientation": "v", "x": 1 + 12 / plot_w, "xanchor": "left", "y": 1, "yanchor": "top",
                "font": {"size": 11}, "itemsizing": "constant", "groupclick": "toggleitem",
                "maxheight": max(legend_h, 40),
                "tracegroupgap": 8, "bgcolor": "rgba(255,255,255,0.85)"},
        hovermode="closest",
        clickmode="event+select",
        dragmode="zoom",
        xaxis={"visible": False, "range": [x0, right], "fixedrange": True, "zeroline": False, "showgrid": False},
        yaxis={"visible": False, "range": [hi + 0.6, lo - 0.6], "zeroline": False, "showgrid": False},
        # Plotly keeps a reader's own zoom across reruns while this stays the same: the
        # selection changing does not reset it, moving the window does.
        uirevision=f"tree:{lo}:{hi}",
    )
    if annotations:
        layout["annotations"] = annotations
    return as_figure({"data": traces, "layout": layout})


def _lanes(model: TreeModel, idx: Sequence[int]) -> np.ndarray:
    return np.fromiter((model.nodes[i].lane for i in idx), dtype=float, count=len(idx))


def _orders(model: TreeModel, idx: Sequence[int]) -> np.ndarray:
    return np.asarray(idx, dtype=float) + 1  # nodes are kept in call order: index i is row i + 1


# --------------------------------------------------------------------------- the overview


def overview_figure(model: TreeModel, window: tuple[int, int]) -> go.Figure:
    """Every node as a small dot, call order left to right and lanes top to bottom, the zoomed rows
    outlined (they always hold the selected call, which the zoomed view rings). The figure depends on
    the window alone: a click that keeps the window sends the same figure, which the browser keeps
    as drawn (Streamlit re-plots a chart only when its figure changes). Click a dot to go there; with the box tool (`OVERVIEW_CONFIG`'s one button) drag across
    calls to zoom into them. A click selects only while no drag mode is on: in plotly's select mode a
    click is not a selection event for Streamlit. Hovering a dot names its call (or refusal, or missing
    parent) and its place in call order, never the internal key."""
    traces: list[Any] = []
    by_cat: dict[str, list[int]] = defaultdict(list)
    for i, n in enumerate(model.nodes):
        by_cat[n.category].append(i)
    for cat, (label, colour, symbol, _) in NODE_STYLES.items():
        idx = by_cat.get(cat)
        if not idx:
            continue
        traces.append(trace("scattergl", x=_orders(model, idx), y=-_lanes(model, idx), mode="markers", name=label,
                             showlegend=False,
                             marker={"color": colour, "size": 5, "symbol": "circle" if "open" not in symbol
                                     else "circle-open"},
                             customdata=np.array([model.nodes[i].key for i in idx], dtype=object).reshape(-1, 1),
                             hovertext=[overview_hover(model, model.nodes[i].key) for i in idx],
                             hovertemplate="%{hovertext}<extra></extra>"))
    lanes = max(model.lanes, 1)
    a, b = window
    layout = dict(
        **style.BASE_LAYOUT,
        height=int(min(120, 56 + 10 * lanes)),
        margin={"l": 10, "r": 10, "t": 6, "b": 24},
        shapes=[{"type": "rect", "xref": "x", "yref": "paper", "x0": a - 0.5, "x1": b + 0.5, "y0": 0, "y1": 1,
                 "line": {"color": "#dc2626", "width": 1.5}, "fillcolor": "rgba(220,38,38,0.07)"}],
        hovermode="closest", clickmode="event+select", dragmode=False, selectdirection="h",
        xaxis={"range": [0, len(model) + 1], "showgrid": False, "zeroline": False, "fixedrange": True,
               "tickformat": ",d"},
        yaxis={"visible": False, "range": [-(lanes - 1) - 0.8, 0.8], "fixedrange": True},
        uirevision="overview",
    )
    return as_figure({"data": traces, "layout": layout})


OVERVIEW_CONFIG = {"displaylogo": False, "scrollZoom": False, "modeBarButtons": [["select2d"]]}
"""The overview's plotly config: one toolbar button, the box tool (a click on a dot needs no drag mode)."""


def overview_hover(model: TreeModel, key: str) -> str:
    """What hovering an overview dot says: the call id (or the refusal / missing parent) and its place in call order."""
    node = model.nodes[model.index[key]]
    what = node.ident if node.kind == CALL else f"{node.kind} {node.ident}"
    return f"{html_text(what, 80)} · #{node.order:,}"
