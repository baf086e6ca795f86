"""The Run page's table: each column's width (pixels, fixed) and its header's tooltip, and the small script
that titles a truncated cell with its whole text.

Every column has a width of its own: a column without one is sized by the browser from the rows it
draws first, so the same table drawn again (on the way back from a rollout, scrolled to its row) had
other widths. The widths put the columns a reader triages by -- rollout, verdict, mask reasons, why
lineage broke, calls -- on the first screen at 1280 px beside the sidebar (`FIRST_SCREEN`), and add up
to more than the grid's width there, so the grid never stretches them.

The grid is a canvas: it shows a header's ``help`` on hover, but nothing for a cell cut at its column's
edge. `cell_titles_settings` (numbers and column names only: no data from a run) set up the page
script (tokencap/app/assets/cell_titles.js) that puts a hovered cell's text in the grid's ``title``
(the browser's tooltip) when the text is wider than its column; the text is read from the grid's own
accessibility table, and set as an attribute, never as HTML. No Streamlit here.
"""

from __future__ import annotations

import json

from .data import TABLE_COLUMNS

WIDTHS = {
    "rollout_id": 214,
    "verdict": 86,
    "reasons": 196,
    "causes": 150,
    "n_calls": 62,
    "delivered_fraction": 104,
    "link_failures": 96,
    "engine_refusals": 82,
    "status": 130,
    "chains": 70,
    "quarantined_calls": 96,
    "generated_tokens_delivered": 96,
    "source": 260,
    "error": 420,
}
"""Frame column -> its width in the table (px)."""

HELP = {
    "rollout_id": "the rollout's id; select the row to open it on the Rollout page",
    "verdict": "trainable: every generated token can be trained on; masked: the rollout is dropped from training",
    "reasons": "why the rollout is masked (each mask reason); hover a cut cell for all of them",
    "causes": "why the token lineage broke, as the diagnosis finds it (hover a cut cell for every cause)",
    "n_calls": "model calls in the rollout",
    "delivered_fraction": "share of the rollout's calls on the delivered chain",
    "link_failures": "parent links rejected, missing or unprovable",
    "engine_refusals": "engine refusals",
    "status": "the final response's status",
    "chains": "chains of calls (more than one: the rollout branched)",
    "quarantined_calls": "calls quarantined (off every chain the trainer sees)",
    "generated_tokens_delivered": "generated tokens delivered",
    "source": "the rollout's file, relative to the run",
    "error": "why the rollout could not be loaded or built",
}
"""Frame column -> its header's tooltip."""

TEXT = ("rollout_id", "verdict", "reasons", "causes", "status", "source", "error")
"""The text columns: a cell cut at its column's edge gets its whole text as a tooltip."""
PINNED = ("rollout_id",)
"""Columns that stay in view when the table is scrolled right."""
FIRST_SCREEN = ("rollout_id", "verdict", "reasons", "causes", "n_calls")
"""The columns a reader triages by, on the first screen at 1280 px."""
GRID_WIDTH_1280 = 928
"""The table's width (px) at 1280 px beside the sidebar (`tokencap/app/assets/run_page.css`'s margins)."""
CELL_PADDING = 8
"""The grid's horizontal padding in a cell, each side (px)."""
ROW_MARKER = ((10_000, 48), (1_000, 44), (100, 36), (0, 32))
"""The width (px) of the grid's checkbox column, by row count: more than N rows, W px (the grid's own rule)."""


def marker_width(rows: int) -> int:
    """The width of the grid's checkbox column for a table of ``rows`` rows."""
    return next(w for n, w in ROW_MARKER if rows > n)


def header_help(header: str) -> str:
    """The tooltip of a table header (the header as the page shows it)."""
    by_header = {v: k for k, v in TABLE_COLUMNS.items()}
    return HELP[by_header[header]]


def first_screen_right(rows: int) -> int:
    """Where (px from the grid's left) the last of `FIRST_SCREEN`'s columns ends."""
    order = list(TABLE_COLUMNS)
    last = max(order.index(c) for c in FIRST_SCREEN)
    return marker_width(rows) + sum(WIDTHS[c] for c in order[:last + 1])


def cell_titles_settings() -> str:
    """The settings (JSON: ``COLUMNS``, ``MARKERS``, ``PAD``) of the page script that titles a hovered,
    truncated text cell of the Run table with its whole text (tokencap/app/assets/cell_titles.js).

    Columns are found from `WIDTHS` in `TABLE_COLUMNS`'s order (the pinned ones first, then the others
    shifted by the grid's horizontal scroll), rows from the grid's 35 px rows and vertical scroll; the
    text from the grid's accessibility table (``#glide-cell-COLUMN-ROW``), measured in the grid's font.
    Installed once per page (a rerun draws the same element again)."""
    order = list(TABLE_COLUMNS)
    columns = [{"w": WIDTHS[c], "text": c in TEXT, "pinned": c in PINNED} for c in order]
    if [c for c in order if c in PINNED] != order[:len(PINNED)]:
        raise ValueError("pinned columns must come first")
    return json.dumps({"COLUMNS": columns, "MARKERS": [list(m) for m in ROW_MARKER], "PAD": CELL_PADDING})


__all__ = ["FIRST_SCREEN", "GRID_WIDTH_1280", "HELP", "PINNED", "TEXT", "WIDTHS", "cell_titles_settings",
           "first_screen_right", "header_help", "marker_width"]
