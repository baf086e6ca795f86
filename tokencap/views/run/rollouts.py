"""Rollouts whose output items carry token ids (docs/contract.md#token-rollouts) on the Run page.

Such a file is a run by itself: `opens_as_run` says the app opens a file of several records on
the Run page (one record opens on the Rollout page, like any single rollout). The scan table's
``tokens_from`` and ``contiguous`` columns (docs/contract.md#scan-token-source) become the frame's ``contiguity``:
# whether
every token-bearing item's prompt starts with every token before it, the check NeMo RL makes
before a training step. The page shows it in tiles, a filter and a table column, only for a run
that holds such rollouts. No Streamlit here.
"""

from __future__ import annotations

import functools
import itertools
import mmap
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...loading.capture_text import is_text
from ...loading.lines import line_spans
from ...loading.problems import SNIFF_BYTES
from ...loading.rollouts import is_rollouts_text

CONTIGUITY = ("contiguous", "not_contiguous", "capture")
"""A rollout's state in the frame's ``contiguity`` column: read from output items and contiguous, or not;
``capture`` for a rollout from a token capture (the column is null there)."""
CONTIGUITY_LABELS = {"contiguous": "contiguous", "not_contiguous": "not contiguous", "capture": "from a capture"}
CONTIGUITY_TEXT = {
    "contiguous": "every item's prompt starts with every token before it: NeMo RL trains on it",
    "not_contiguous": "an item's prompt does not continue the tokens before it: NeMo RL would stop the training "
                      "step on it (\"Non-contiguous messages found\")",
    "capture": "read from a token capture, not from output items: NeMo RL's contiguity check does not apply",
}
FILTERS = ("contiguous", "not_contiguous")
"""The values the Run page's contiguity filter takes."""


# --------------------------------------------------------------------------- opening a file


def opens_as_run(path: str | os.PathLike[str]) -> bool:
    """Whether ``tokencap app PATH`` opens PATH on the Run page: a directory, a scan table (``.parquet``), or
    a rollouts file (docs/contract.md#token-rollouts) of more than one record. Any other file -- a snapshot, entries,
    # a store file,
    a rollouts file of one record -- opens on the Rollout page. A path that cannot be read opens the Run page,
    which says why."""
    p = Path(path)
    if not p.is_file() or p.name.lower().endswith(".parquet"):
        return True
    try:
        st = p.stat()
    except OSError:
        return True
    return rollout_records(str(p.resolve()), st.st_size, st.st_mtime_ns) > 1


@functools.lru_cache(maxsize=32)
def rollout_records(path: str, size: int, mtime_ns: int) -> int:
    """How many records a rollouts file holds, counted up to 2 (0 when it is no rollouts file). Cached per
    file version: the app asks on every rerun. Only the first line (or the one object) is decoded."""
    if size == 0:
        return 0
    try:
        with open(path, "rb") as handle:
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return 0
    try:
        return records_in(data)
    finally:
        data.close()


def records_in(data: Any) -> int:
    """How many records a rollouts text holds (bytes, or a mapped file), counted up to 2; 0 when it is
    no rollouts text (a capture's, a zip, anything else). Only the first line (or the one object) is
    decoded."""
    if not (is_text(data[:SNIFF_BYTES]) and is_rollouts_text(data)):
        return 0
    spans = list(itertools.islice(line_spans(data), 2))
    if len(spans) == 2 and not bytes(data[spans[0][1]:spans[0][2]]).rstrip().endswith(b"}"):
        return 1  # one object spread over lines (a pretty-printed record)
    return len(spans)


def run_uploads(uploads: Iterable[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """The uploaded files that are runs by themselves: rollouts files of several records (the Rollout page
    offers to open them on the Run page, as `tokencap app FILE` does)."""
    return [(name, data) for name, data in uploads if records_in(data) > 1]


# --------------------------------------------------------------------------- the frame's column


def contiguity_codes(table: pa.Table) -> np.ndarray:
    """Per row, its `CONTIGUITY` index: from ``tokens_from`` and ``contiguous`` (docs/contract.md#scan-token-source);
    ``capture``
    where the table has no such columns (written before them) or the row came from a capture."""
    n = table.num_rows
    codes = np.full(n, CONTIGUITY.index("capture"), dtype=np.int64)
    if "tokens_from" not in table.column_names or "contiguous" not in table.column_names:
        return codes
    items = np.asarray(pc.equal(table.column("tokens_from"), "output_items").fill_null(False), dtype=bool)
    joined = np.asarray(pc.equal(table.column("contiguous"), True).fill_null(False), dtype=bool)
    codes[items & joined] = CONTIGUITY.index("contiguous")
    codes[items & ~joined] = CONTIGUITY.index("not_contiguous")
    return codes


def contiguity_column(table: pa.Table) -> pd.Categorical:
    return pd.Categorical.from_codes(contiguity_codes(table), categories=list(CONTIGUITY))


def has_items(frame: pd.DataFrame) -> bool:
    """Whether the run holds rollouts read from output items (the page then shows contiguity)."""
    return "contiguity" in frame and bool((frame["contiguity"].cat.codes != CONTIGUITY.index("capture")).any())


def counts(frame: pd.DataFrame) -> tuple[int, int]:
    """(contiguous, not contiguous) rollouts of the whole run."""
    codes = frame["contiguity"].cat.codes.to_numpy() if "contiguity" in frame else np.zeros(0, dtype=np.int64)
    return int((codes == 0).sum()), int((codes == 1).sum())


def filter_mask(frame: pd.DataFrame, value: str) -> np.ndarray:
    """The rows in contiguity state ``value`` (`FILTERS`)."""
    return frame["contiguity"].cat.codes.to_numpy() == CONTIGUITY.index(value)


def filter_words(value: str) -> str:
    return f"NeMo RL contiguity: {CONTIGUITY_LABELS[value]}"


TABLE_HEADER = "contiguous"
"""The table's column of it (shown only for a run holding such rollouts)."""


def table_values(frame: pd.DataFrame, rows: np.ndarray) -> pd.Series:
    """The table column's values of the rows shown: yes, no, or blank for a capture's rollout."""
    shown = frame["contiguity"].cat.codes.to_numpy()[rows]
    words = np.array(["yes", "no", ""], dtype=object)[shown]
    return pd.Series(words, index=frame.index[rows], dtype=pd.ArrowDtype(pa.string()))


__all__ = ["CONTIGUITY", "CONTIGUITY_LABELS", "CONTIGUITY_TEXT", "FILTERS", "TABLE_HEADER", "contiguity_codes",
           "contiguity_column", "counts", "filter_mask", "filter_words", "has_items", "opens_as_run",
           "records_in", "rollout_records", "run_uploads", "table_values"]
