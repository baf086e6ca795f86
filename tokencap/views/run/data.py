"""A run's scan table (docs/contract.md#scan-table) as the Run page reads it: one frame, its filters, its table.

`run_frame` turns the table into a pandas frame once per run: low-cardinality columns
become categoricals (status, verdict, the mask-reason combination, source, and the bins of
the two histograms), so a filter or a count is a comparison of small integer codes.
`RunFilter` is the page's whole filter state, small and immutable, written to and read
from the URL (``run_`` parameters) so a link or a trip to the Rollout page keeps it.
`filter_masks` gives one boolean array per active filter, all vectorised: nothing here
runs Python per row, so a 100,000-row run filters in milliseconds.

Charts cross-filter: each chart counts the rollouts that pass every filter except its
own (`passing(..., skip=dimension)`), so its bars stay clickable and comparable while
the table shows the rollouts that pass them all.

Its parts live beside it: `categories`, `frame` (`run_frame`), `filters` (`RunFilter`, `filter_masks`,
`passing`, `sorted_rows`), `summary` (the tiles) and `bars` (the charts' counts), each imported from its
own module; this module holds the table shown. No Streamlit here, and nothing from the Rollout page's views.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from . import rollouts as ro
from .categories import keys_in_words

# --------------------------------------------------------------------------- the table shown


TABLE_COLUMNS = {
    "rollout_id": "rollout",
    "verdict": "verdict",
    "reasons": "mask reasons",
    "causes": "why lineage broke",
    "n_calls": "calls",
    "delivered_fraction": "delivered",
    "link_failures": "link failures",
    "engine_refusals": "refusals",
    "status": "status",
    "chains": "chains",
    "quarantined_calls": "quarantined",
    "generated_tokens_delivered": "gen. tokens",
    "source": "source",
    "error": "error",
}
"""Frame column -> table header, in the order the table shows them: what a reader triages by first (the
verdict, its reasons and causes, then the counts), so at 1280 px beside the sidebar the grid's first
screen ends on numbers, not on a numeric column's header whose right-aligned values are out of sight."""


_NARROW = {"n_calls": np.int32, "link_failures": np.int32, "engine_refusals": np.int32, "chains": np.int32,
           "quarantined_calls": np.int32, "delivered_fraction": np.float32}
"""Display-only narrowing: the browser receives every shown row, so half-width numbers halve the bytes."""


def table_frame(frame: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """The rows shown, in order, with the table's headers; the index keeps each row's number.

    Built for the browser, which gets every row: small counts go as 32-bit numbers, and a
    source column whose values are (nearly) all different goes as plain strings rather
    than a dictionary as large as the column.
    """
    shown = frame.iloc[rows][list(TABLE_COLUMNS)] if len(rows) else frame.iloc[:0][list(TABLE_COLUMNS)]
    shown = shown.astype(_NARROW)
    shown["reasons"] = keys_in_words(shown["reasons"])  # words in the cells; the filter and exports keep keys
    shown["causes"] = keys_in_words(shown["causes"])
    if ro.has_items(frame):  # rollouts read from output items: NeMo RL's contiguity, last (the columns before it
        shown["contiguity"] = ro.table_values(frame, rows)  # keep the widths the table's cell titles count on)
    if len(shown) and len(frame["source"].cat.categories) > len(frame) // 2:
        shown["source"] = pd.array(shown["source"].astype(str), dtype=pd.ArrowDtype(pa.string()))
    return shown.rename(columns={**TABLE_COLUMNS, "contiguity": ro.TABLE_HEADER})


def row_at(frame: pd.DataFrame, rows: np.ndarray, position: int) -> int | None:
    """The row number behind the ``position``-th row of the table shown (a selection), or None."""
    if 0 <= position < len(rows):
        return int(rows[position])
    return None


__all__ = ["TABLE_COLUMNS", "row_at", "table_frame"]
