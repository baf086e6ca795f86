"""A link proof and a break proof drawn as one Vega-Lite chart each (`..vega` for the spec basics).

One chart, two parts on one band scale of four rows:

* the strip (top, its position axis above it): both sequences as bars on one position axis,
  coloured by what each stretch is (agreeing, differing, a divergence's kind), a dotted rule
  where they first part (or where the parent's sequence ends, when the link holds);
* the cells (bottom, their axis below): the tokens of the zoomed window, one cell each,
  coloured the same way, its id or (with a tokenizer) its decoded text.

Why not plotly: the proof is redrawn at every call the reader selects and at every Next.
Measured in Chromium, the link proof's plotly chart (two subplots, a heatmap) cost about
0.2 s of Next's 0.5 s; an SVG chart of a few dozen marks costs a fraction of that.

The two parts keep their own x scales (`resolve`): the strip spans whole sequences, the
cells a window of them. Text is SVG text and tooltips are escaped by vega-tooltip, so a
decoded token is never read as HTML. No Streamlit here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import vega
from .linkproof import AGREE, CELL, DIFFER, ONLY_CHILD, BreakProof, LinkProof, cell_labels

CELLS_OF_SPANS = {**CELL, "replaced": "#fde68a", "inserted": "#bfdbfe"}
"""A cell's fill by its state: `.linkproof.CELL`'s, and a break's replaced and inserted tokens."""
SPAN = {"dropped": "#dc2626", "inserted": "#2563eb", "replaced": "#f59e0b"}
SPAN_WORDS = {
    "dropped": "the predecessor's tokens left out of this prompt",
    "inserted": "tokens this prompt has that the predecessor's sequence does not",
    "replaced": "the predecessor's tokens this prompt carries as other tokens",
}
CELL_CHARS = 14
"""A cell shows at most this many characters of its token (the tooltip has it whole, up to `TIP_CHARS`)."""
TIP_CHARS = 60
ROW_CHARS = 40
ROW_PX = 30
"""Each of the chart's four rows (two bars, two rows of cells): the band scale's step, the plot being
``4 * ROW_PX`` high and padded as below (the step is height / (rows - inner + 2 * outer) = ROW_PX)."""
PADDING_INNER = 0.2
PADDING_OUTER = 0.1
STRIP = "strip"
CELLS = "cells"
"""The ``part`` of every datum: which half of the chart draws it (a test reads the parts back by it)."""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cell_text(label: str) -> str:
    """A token's text as a cell shows it: a space as ``␣`` (SVG would swallow it), cut to `CELL_CHARS`."""
    return _cut(label.replace(" ", "␣"), CELL_CHARS)


def pair_spec(rows: tuple[str, str], cell_rows: tuple[str, str], bars: list[dict[str, Any]], length: int, mark: int,
              mark_label: str, cells: list[dict[str, Any]], columns: list[str], cells_title: str,
              column_labels: bool) -> dict[str, Any]:
    """Two sequences' bars (``rows``, over positions 0..``length``, a dotted rule at ``mark``) above their
    tokens' cells (``cell_rows``, one column each): a proof's chart, and the Compare tab's
    (`.sequence_chart`). Every row name differs from the other three (they share one band scale)."""
    order = [*rows, *cell_rows]
    y = {"field": "row", "type": "nominal", "sort": order, "title": None,
         "scale": {"domain": order, "paddingInner": PADDING_INNER, "paddingOuter": PADDING_OUTER},
         "axis": {"labelLimit": 240, "labelFontSize": 11, "ticks": False, "domain": False, "labelPadding": 6}}
    position = {"type": "quantitative", "title": None, "scale": {"domain": [0, length * 1.01 + 1], "nice": False},
                "axis": {"orient": "top", "format": ",d", "grid": False, "tickCount": 8, "labelFontSize": 10}}
    right = mark > 0.6 * max(length, 1)
    strip = {
        "layer": [
            {"data": {"values": bars}, "mark": {"type": "bar", "height": {"band": 1}},
             "encoding": {"y": y, "x": {"field": "start", **position}, "x2": {"field": "end"},
                          "color": {"field": "colour", "type": "nominal", "scale": None, "legend": None},
                          "tooltip": [{"field": "what", "title": "what"}, {"field": "positions", "title": "positions"},
                                      {"field": "detail", "title": "why"}]}},
            {"data": {"values": [{"at": mark, "label": mark_label}]},
             "mark": {"type": "rule", "color": "#111827", "strokeWidth": 2, "strokeDash": [3, 3]},
             # From the top of the plot to the foot of the strip's second row, never across the cells.
             "encoding": {"x": {"field": "at", **position}, "y": {"value": 0},
                          "y2": {"value": ROW_PX * (PADDING_OUTER + 2 - PADDING_INNER / 2)}}},
            {"data": {"values": [{"at": mark, "label": mark_label, "row": rows[0]}]},
             "mark": {"type": "text", "fontSize": 11, "color": "#111827", "baseline": "bottom", "dy": -1,
                      "align": "right" if right else "left", "dx": -4 if right else 4},
             "encoding": {"x": {"field": "at", **position}, "y": {**y, "bandPosition": 0}, "text": {"field": "label"}}},
        ],
    }
    column = {"field": "column", "type": "ordinal", "sort": columns, "title": cells_title,
              "scale": {"domain": columns, "paddingInner": 0.06},
              "axis": {"orient": "bottom", "labels": column_labels, "ticks": False, "domain": False,
                       "labelFontSize": 10, "titleFontSize": 10, "labelAngle": 0, "labelOverlap": True}}
    cell_y = {**y}
    token_cells = {
        "layer": [
            {"data": {"values": cells}, "mark": {"type": "rect", "cornerRadius": 2},
             "encoding": {"x": column, "y": cell_y,
                          "color": {"field": "fill", "type": "nominal", "scale": None, "legend": None},
                          "tooltip": {"field": "tip", "type": "nominal"}}},
            {"data": {"values": cells},
             "mark": {"type": "text", "fontSize": 10, "color": "#111827", "font": "monospace",
                      "limit": {"expr": f"max(12, width / {max(len(columns), 1)} - 4)"}},
             "encoding": {"x": column, "y": cell_y, "text": {"field": "text"},
                          "tooltip": {"field": "tip", "type": "nominal"}}},
        ],
    }
    return vega.chart([strip, token_cells], heading=None, height=ROW_PX * len(order),
                      resolve={"scale": {"x": "independent"}, "axis": {"x": "independent"}})


def row_name(name: str) -> str:
    """A row's name on one line, cut to `ROW_CHARS`."""
    return _cut(" ".join(name.split()), ROW_CHARS)


def link_proof_chart(proof: LinkProof, decode: Callable[[int], str] | None = None) -> dict[str, Any]:
    """The link proof: the parent's cumulative sequence against this call's prompt, and the window's cells."""
    rows = (row_name(f"{proof.relation} {proof.parent}"), row_name(f"this call {proof.child}"))
    cell_rows = (row_name(f"{proof.parent}'s tokens"), row_name(f"{proof.child}'s prompt"))
    n_parent, n_child = proof.parent_len, proof.prompt_len
    overlap = min(n_parent, n_child)
    bars: list[dict[str, Any]] = []

    def bar(r: int, a: int, b: int, what: str, colour: str) -> None:
        bars.append({"part": STRIP, "row": rows[r], "start": a, "end": b, "colour": colour, "what": what,
                     "positions": f"{a:,}–{b - 1:,}", "detail": ""})

    # Over the overlap, green where both hold the same token and red where they differ; past it, the
    # parent's leftover tokens are red (never in the child's prompt), the child's grey (its interstitial).
    for a, b, same in proof.runs:
        for r in (0, 1):
            bar(r, a, b, "agree" if same else "differ", AGREE if same else DIFFER)
    if n_parent > overlap:
        bar(0, overlap, n_parent, "parent only: not in the child's prompt", DIFFER)
    if n_child > overlap:
        bar(1, overlap, n_child, "child's interstitial (after the parent's sequence)", ONLY_CHILD)
    mark = n_parent if proof.holds else proof.agree
    label = f"parent ends at {n_parent:,}" if proof.holds else f"first difference at {proof.agree:,}"

    start, end = proof.window
    columns = [f"{pos:,}" for pos in range(start, end)]
    labels = (cell_labels(proof.parent_tokens, decode), cell_labels(proof.child_tokens, decode))
    cells: list[dict[str, Any]] = []
    for i, pos in enumerate(range(start, end)):
        p = int(proof.parent_tokens[i]) if i < proof.parent_tokens.size else None
        c = int(proof.child_tokens[i]) if i < proof.child_tokens.size else None
        for r, tok in enumerate((p, c)):
            if tok is None:
                state, text, tip = "absent", "—", f"pos {pos:,}: no token (the sequence ended)"
            else:
                # One side ended: the parent's tokens past the child's prompt are a difference, the
                # child's tokens past the parent's sequence are its interstitial.
                state = ("agree" if p == c else "differ") if p is not None and c is not None else \
                    "differ" if c is None else "only_child"
                text = cell_text(labels[r][i])
                tip = f"pos {pos:,} · token {tok}" + (f" · {_cut(labels[r][i], TIP_CHARS)}" if decode else "")
            cells.append({"part": CELLS, "row": cell_rows[r], "column": columns[i], "state": state,
                          "fill": CELLS_OF_SPANS[state], "text": text, "tip": tip})
    return pair_spec(rows, cell_rows, bars, max(n_parent, n_child), mark, label, cells, columns,
                 f"positions {start:,}–{end - 1:,} (zoomed)", column_labels=len(columns) <= 20)


def break_proof_chart(proof: BreakProof, decode: Callable[[int], str] | None = None) -> dict[str, Any]:
    """A break's prompt against its predecessor: green where aligned, each divergence marked (dropped red,
    inserted blue, replaced amber), and the tokens around the first divergence on each side."""
    rows = (row_name(f"predecessor {proof.parent}"), row_name(f"this call {proof.child}"))
    cell_rows = (row_name(f"{proof.parent}'s tokens"), row_name(f"{proof.child}'s prompt"))
    bars: list[dict[str, Any]] = []
    for r, (side, length) in enumerate((("parent", proof.parent_len), ("prompt", proof.prompt_len))):
        marked = sorted((s for s in proof.spans if s.side == side), key=lambda s: s.start)
        cursor = 0
        for s in marked:
            if s.start > cursor:
                bars.append({"part": STRIP, "row": rows[r], "start": cursor, "end": s.start, "colour": AGREE,
                             "what": "aligned", "positions": f"{cursor:,}–{s.start - 1:,}",
                             "detail": "aligned with the other sequence"})
            cursor = max(cursor, s.end)
        if cursor < length:
            bars.append({"part": STRIP, "row": rows[r], "start": cursor, "end": length, "colour": AGREE,
                         "what": "aligned", "positions": f"{cursor:,}–{length - 1:,}",
                         "detail": "aligned with the other sequence"})
        for s in marked:
            bars.append({"part": STRIP, "row": rows[r], "start": s.start, "end": s.end, "colour": SPAN[s.kind],
                         "what": s.kind, "positions": f"{s.start:,}–{s.end - 1:,}",
                         "detail": f"{SPAN_WORDS[s.kind]} ({s.cause})"})
    width = max(proof.parent_window[1] - proof.parent_window[0], proof.prompt_window[1] - proof.prompt_window[0])
    columns = [str(i) for i in range(width)]
    cells: list[dict[str, Any]] = []
    for r, (window, tokens, side) in enumerate(((proof.parent_window, proof.parent_tokens, "parent"),
                                               (proof.prompt_window, proof.prompt_tokens, "prompt"))):
        labels = cell_labels(tokens, decode)
        marked = [s for s in proof.spans if s.side == side]
        for i in range(width):
            pos = window[0] + i
            if i >= tokens.size:
                cells.append({"part": CELLS, "row": cell_rows[r], "column": columns[i], "state": "absent",
                              "fill": CELLS_OF_SPANS["absent"], "text": "—", "tip": f"pos {pos:,}: no token"})
                continue
            span = next((s for s in marked if s.start <= pos < s.end), None)
            state = "agree" if span is None else {"dropped": "differ"}.get(span.kind, span.kind)
            tip = (f"pos {pos:,} · token {int(tokens[i])}" + (f" · {_cut(labels[i], TIP_CHARS)}" if decode else "")
                   + (f" · {span.kind}" if span else ""))
            cells.append({"part": CELLS, "row": cell_rows[r], "column": columns[i], "state": state,
                          "fill": CELLS_OF_SPANS[state], "text": cell_text(labels[i]), "tip": tip})
    return pair_spec(rows, cell_rows, bars, max(proof.parent_len, proof.prompt_len), proof.agree,
                     proof.mark_label(), cells, columns, proof.cells_title(), column_labels=False)


__all__ = ["CELLS", "CELLS_OF_SPANS", "SPAN", "SPAN_WORDS", "STRIP", "break_proof_chart", "cell_text",
           "link_proof_chart", "pair_spec", "row_name"]
