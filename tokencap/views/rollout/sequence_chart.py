"""The Compare tab's two delivered sequences as one Vega-Lite chart (`.proof_chart.pair_spec` draws it).

* the strip: A's and B's delivered sequences as bars on one position axis, green where they hold
  the same token, red where they differ, grey where only one side goes on; a dotted rule and its
  label where they first differ;
* the cells: the tokens around the first difference, one cell each (its id, or its decoded text
  with a tokenizer), coloured the same way.

Why not plotly: the app is moving off plotly entirely. Its 4.8 MB bundle costs a fresh browser tab
about 1 s before its first chart, and this figure (two subplots, a heatmap) was the only plotly on
the Compare tab. It is the link proof's chart (`.proof_chart`) on two builds instead of two calls:
a few dozen marks, drawn as SVG.

Labels are SVG text and tooltips are escaped by vega-tooltip: a decoded token is never read as HTML.
No Streamlit here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .diff import SequenceDiff
from .linkproof import AGREE, CELL, DIFFER, ONLY_CHILD, cell_labels
from .proof_chart import CELLS, STRIP, TIP_CHARS, cell_text, pair_spec, row_name

DESCRIPTION = "delivered sequences compared"
"""The chart's ``description``: what a test (or a screen reader) reads to find it."""
SAME, DIFFERENT, ONE_SIDE = "same token", "different token", "only this side has it"
BAR = {SAME: AGREE, DIFFERENT: DIFFER, ONE_SIDE: ONLY_CHILD}
"""A bar's colour by what its stretch is: the link proof's colours."""
LABEL_CHARS = 30
"""A cells row names its side in at most this many characters (then " · tokens")."""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _rows(label_a: str, label_b: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """The bars' rows (each side's name) and the cells' rows ("NAME · tokens"): four different names on
    the chart's one band scale, so two sides named alike are told apart by an "A: " and a "B: "."""
    names = [" ".join(label.split()) for label in (label_a, label_b)]
    if _cut(names[0], LABEL_CHARS) == _cut(names[1], LABEL_CHARS) or row_name(names[0]) == row_name(names[1]):
        names = [f"A: {names[0]}", f"B: {names[1]}"]
    cells = [f"{_cut(n, LABEL_CHARS)} · tokens" for n in names]
    return (row_name(names[0]), row_name(names[1])), (cells[0], cells[1])


def sequence_chart(d: SequenceDiff, label_a: str = "A", label_b: str = "B",
                   decode: Callable[[int], str] | None = None) -> dict[str, Any]:
    """Both delivered sequences on one axis and the tokens around their first difference as cells."""
    rows, cell_rows = _rows(label_a, label_b)
    overlap = min(d.len_a, d.len_b)
    lengths = (d.len_a, d.len_b)
    bars: list[dict[str, Any]] = []

    def bar(r: int, a: int, b: int, what: str, detail: str) -> None:
        bars.append({"part": STRIP, "row": rows[r], "start": a, "end": b, "colour": BAR[what], "what": what,
                     "positions": f"{a:,}–{b - 1:,}", "detail": detail})

    for a, b, same in d.runs:
        for r in (0, 1):
            bar(r, a, b, SAME if same else DIFFERENT,
                "both hold the same tokens here" if same else "the two hold different tokens here")
    for r in (0, 1):
        if lengths[r] > overlap:
            bar(r, overlap, lengths[r], ONE_SIDE, f"the other sequence ends at {overlap:,}")
    if d.identical:
        mark, label = d.len_a, f"both end at {d.len_a:,}"
    else:
        mark, label = d.agree, f"first difference at {d.agree:,}"

    start, end = d.window
    columns = [f"{pos:,}" for pos in range(start, end)]
    labels = (cell_labels(d.tokens_a, decode), cell_labels(d.tokens_b, decode))
    cells: list[dict[str, Any]] = []
    for i, pos in enumerate(range(start, end)):
        ta = int(d.tokens_a[i]) if i < d.tokens_a.size else None
        tb = int(d.tokens_b[i]) if i < d.tokens_b.size else None
        for r, tok in enumerate((ta, tb)):
            if tok is None:
                state, text, tip = "absent", "—", f"pos {pos:,}: this sequence ended"
            else:
                state = ("agree" if ta == tb else "differ") if ta is not None and tb is not None else "only_child"
                text = cell_text(labels[r][i])
                tip = f"pos {pos:,} · token {tok}" + (f" · {_cut(labels[r][i], TIP_CHARS)}" if decode else "")
            cells.append({"part": CELLS, "row": cell_rows[r], "column": columns[i], "state": state,
                          "fill": CELL[state], "text": text, "tip": tip})
    spec = pair_spec(rows, cell_rows, bars, max(d.len_a, d.len_b), mark, label, cells, columns,
                     f"positions {start:,}–{end - 1:,} (zoomed)", column_labels=len(columns) <= 20)
    return {**spec, "description": DESCRIPTION}


__all__ = ["BAR", "DESCRIPTION", "DIFFERENT", "ONE_SIDE", "SAME", "sequence_chart"]
