"""The call tree's marks and what each means: node categories, rings, links (one palette, `style`).

The figure draws them, the page's legend lists them (`legend_frame`), and the tree's model
names each node's category and rings by these keys. A node or ring is drawn as a `Symbol` (a
shape, filled or open), a link with a dash; `tree_layers` turns both into what Vega-Lite draws.
"""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd

from .. import style

SHAPE_WORDS = {
    "circle": "circle", "square": "square", "diamond": "diamond", "triangle-down": "downward triangle",
    "star": "star", "three-point-star": "three-pointed star", "hexagon": "hexagon", "hourglass": "hourglass",
    "diagonal-cross": "diagonal cross", "crossed-square": "crossed square",
}
"""Every shape a node or ring is drawn with, in the legend table's words. The first four are Vega-Lite's
own shapes; `tree_layers` draws the others as paths. A diagonal cross is two strokes, never filled."""


class Symbol(NamedTuple):
    """How a node or ring is drawn: a shape (a key of `SHAPE_WORDS`), filled or open."""

    shape: str
    open: bool = False
    """Only the outline is drawn: a ring lets its node show through; an open node is hollow."""

    def words(self) -> str:
        """The symbol as the legend table names it ("open hexagon")."""
        return ("open " if self.open else "") + SHAPE_WORDS[self.shape]


DASH_WORDS = ("solid", "dotted", "dashed", "dash-dotted", "long-dashed")
"""Every dash a link is drawn with, by its name (`tree_layers` has each one's pattern)."""

# Node categories: (legend label, colour, symbol, size factor). The first that applies wins.
NODE_STYLES: dict[str, tuple[str, str, Symbol, float]] = {
    "terminal": ("terminal call (end of the delivered chain)", style.MAIN, Symbol("star"), 1.7),
    "main": ("main chain (delivered)", style.MAIN, Symbol("circle"), 1.0),
    "branch": ("branch", style.BRANCH, Symbol("circle"), 1.0),
    "quarantined": ("quarantined retry", style.QUARANTINED, Symbol("circle"), 1.0),
    "after_terminal": ("after the terminal call (not delivered)", style.AFTER_TERMINAL, Symbol("circle"), 1.0),
    "chained": ("chained call", style.OTHER, Symbol("circle"), 1.0),
    "empty": ("empty generation (not chained)", style.EMPTY, Symbol("circle", open=True), 1.0),
    "excluded": ("excluded record (corrupt digest or broken delta)", style.EXCLUDED, Symbol("diagonal-cross"), 1.1),
    "refusal_ended": ("engine refusal that ended the chain", style.REFUSAL, Symbol("hexagon"), 1.2),
    "refusal": ("engine refusal (does not end the chain)", style.REFUSAL, Symbol("hexagon", open=True), 1.2),
    "ghost": ("claimed parent, never captured", style.GHOST, Symbol("square", open=True), 1.0),
    "announced": ("announced by the store, never captured (capture incomplete)", style.REFUSAL,
                  Symbol("crossed-square", open=True), 1.2),
}

# Overlay marks drawn around a node: (legend label, colour, symbol, size factor, line width).
OVERLAY_STYLES: dict[str, tuple[str, str, Symbol, float, float]] = {
    "boundary": ("unresolved boundary (fragment root)", style.BOUNDARY, Symbol("diamond", open=True), 2.0, 2.5),
    "recovered": ("recovered link (parent re-found by prefix)", style.RECOVERED, Symbol("circle", open=True), 1.9,
                  2.5),
    "conflict": ("conflicting duplicate copies", style.EXCLUDED, Symbol("square", open=True), 1.9, 2.5),
    "final_answer": ("the harness's final answer (attributed)", style.FINAL_ANSWER, Symbol("star", open=True), 2.6,
                     2.0),
    "answer_candidate": ("matches the final answer, ambiguously", style.FINAL_ANSWER,
                         Symbol("three-point-star", open=True), 2.6, 2.0),
    "break": ("a break in the lineage (its cause beside the call)", style.BREAK, Symbol("triangle-down", open=True),
              2.2, 2.0),
    "compaction": ("context compaction (its summary, or the first call after it)", style.COMPACTION,
                   Symbol("hourglass", open=True), 2.0, 1.5),
    "selected": ("selected", style.SELECTED, Symbol("circle", open=True), 2.4, 3.0),
}

RING_FLAGS = ("boundary", "recovered", "conflict", "final_answer", "answer_candidate", "break", "compaction")
"""The rings a node can carry, drawn in this order (the selection last)."""

# Edge categories: (legend label, colour, dash (one of `DASH_WORDS`), width).
EDGE_STYLES: dict[str, tuple[str, str, str, float]] = {
    "verified": ("verified link", style.EDGE_VERIFIED, "solid", 1.6),
    "recovered": ("recovered link", style.EDGE_RECOVERED, "dotted", 2.2),
    "digest_mismatch": ("claimed link rejected: digest mismatch", style.EDGE_REJECTED, "dashed", 1.8),
    "missing_parent": ("claimed link rejected: parent missing", style.EDGE_REJECTED, "dotted", 1.8),
    "missing_resolution": ("claimed link not trusted: no resolution recorded", style.EDGE_REJECTED, "dash-dotted",
                           1.8),
    "claimed": ("claimed parent of a call left out of chaining", style.EDGE_NOT_CHAINED, "dotted", 1.3),
    "refusal": ("refused request continuing this call", style.EDGE_REFUSAL, "long-dashed", 1.2),
}


def legend_frame() -> pd.DataFrame:
    """Every mark the tree can draw and what it means (the page shows it under the figure), its shape in words."""
    rows = [("node", label, colour, symbol.words()) for label, colour, symbol, _ in NODE_STYLES.values()]
    rows += [("ring", label, colour, symbol.words()) for label, colour, symbol, _, _ in OVERLAY_STYLES.values()]
    rows += [("edge", label, colour, f"{dash} line") for label, colour, dash, _ in EDGE_STYLES.values()]
    return pd.DataFrame(rows, columns=["mark", "meaning", "colour", "shape"])
