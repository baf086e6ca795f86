"""The call tree's marks and what each means: node categories, rings, links (one palette, `style`).

The figure draws them, the page's legend lists them (`legend_frame`), and the tree's model
names each node's category and rings by these keys.
"""

from __future__ import annotations

import pandas as pd

from .. import style

# Node categories: (legend label, colour, symbol, size factor). The first that applies wins.
NODE_STYLES: dict[str, tuple[str, str, str, float]] = {
    "terminal": ("terminal call (end of the delivered chain)", style.MAIN, "star", 1.7),
    "main": ("main chain (delivered)", style.MAIN, "circle", 1.0),
    "branch": ("branch", style.BRANCH, "circle", 1.0),
    "quarantined": ("quarantined retry", style.QUARANTINED, "circle", 1.0),
    "after_terminal": ("after the terminal call (not delivered)", style.AFTER_TERMINAL, "circle", 1.0),
    "chained": ("chained call", style.OTHER, "circle", 1.0),
    "empty": ("empty generation (not chained)", style.EMPTY, "circle-open", 1.0),
    "excluded": ("excluded record (corrupt digest or broken delta)", style.EXCLUDED, "x", 1.1),
    "refusal_ended": ("engine refusal that ended the chain", style.REFUSAL, "hexagon", 1.2),
    "refusal": ("engine refusal (does not end the chain)", style.REFUSAL, "hexagon-open", 1.2),
    "ghost": ("claimed parent, never captured", style.GHOST, "square-open", 1.0),
    "announced": ("announced by the store, never captured (capture incomplete)", style.REFUSAL, "square-x-open",
                  1.2),
}

# Overlay marks drawn around a node: (legend label, colour, symbol, size factor, line width).
OVERLAY_STYLES: dict[str, tuple[str, str, str, float, float]] = {
    "boundary": ("unresolved boundary (fragment root)", style.BOUNDARY, "diamond-open", 2.0, 2.5),
    "recovered": ("recovered link (parent re-found by prefix)", style.RECOVERED, "circle-open", 1.9, 2.5),
    "conflict": ("conflicting duplicate copies", style.EXCLUDED, "square-open", 1.9, 2.5),
    "final_answer": ("the harness's final answer (attributed)", style.FINAL_ANSWER, "star-open", 2.6, 2.0),
    "answer_candidate": ("matches the final answer, ambiguously", style.FINAL_ANSWER, "star-triangle-up-open", 2.6,
                         2.0),
    "break": ("a break in the lineage (its cause beside the call)", style.BREAK, "triangle-down-open", 2.2, 2.0),
    "compaction": ("context compaction (its summary, or the first call after it)", style.COMPACTION, "hourglass-open",
                   2.0, 1.5),
    "selected": ("selected", style.SELECTED, "circle-open", 2.4, 3.0),
}

RING_FLAGS = ("boundary", "recovered", "conflict", "final_answer", "answer_candidate", "break", "compaction")
"""The rings a node can carry, drawn in this order (the selection last)."""

# Edge categories: (legend label, colour, dash, width).
EDGE_STYLES: dict[str, tuple[str, str, str, float]] = {
    "verified": ("verified link", style.EDGE_VERIFIED, "solid", 1.6),
    "recovered": ("recovered link", style.EDGE_RECOVERED, "dot", 2.2),
    "digest_mismatch": ("claimed link rejected: digest mismatch", style.EDGE_REJECTED, "dash", 1.8),
    "missing_parent": ("claimed link rejected: parent missing", style.EDGE_REJECTED, "dot", 1.8),
    "missing_resolution": ("claimed link not trusted: no resolution recorded", style.EDGE_REJECTED, "dashdot", 1.8),
    "claimed": ("claimed parent of a call left out of chaining", style.EDGE_NOT_CHAINED, "dot", 1.3),
    "refusal": ("refused request continuing this call", style.EDGE_REFUSAL, "longdash", 1.2),
}


def legend_frame() -> pd.DataFrame:
    """Every mark the tree can draw and what it means (the page shows it under the figure)."""
    rows = [("node", label, colour, symbol) for label, colour, symbol, _ in NODE_STYLES.values()]
    rows += [("ring", label, colour, symbol) for label, colour, symbol, _, _ in OVERLAY_STYLES.values()]
    rows += [("edge", label, colour, dash) for label, colour, dash, _ in EDGE_STYLES.values()]
    return pd.DataFrame(rows, columns=["mark", "meaning", "colour", "shape"])
