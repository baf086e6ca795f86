"""Comparing two runs (docs/contract.md#diff): which rollouts a change fixed, which it broke.

`diff_tables(a, b)` joins two scan tables and returns a `RunDiff`:

- ``arrow`` / ``table``: one row per joined key (an outer join), the columns of docs/contract.md#diff
  in order, sorted by ``side`` then the join key;
- ``join``: which join was used and why (`JoinChoice`);
- ``summary``: the counts and shares a person reads first (`DiffSummary`), as data.

The join is by ``rollout_id``, or by (``task_index``, ``rollout_index``) when asked
(``join="task"``) or when the rollout ids share nothing and both tables carry the indices
(``join="auto"``: two runs of the same tasks under fresh rollout ids). A key on two rows
of one table is an error, never a guess at which row pairs with which. Under a task join,
a row without indices cannot be paired with anything: it is on its own side.

Everything is vectorised (pyarrow and numpy; no Python per row): two 100,000-row tables
diff in well under a second (README, Performance).

Its parts live beside it: `pairing` (the columns read, the join chosen, the rows paired) and
`diff_summary` (`DiffSummary` and the lines `tokencap diff` prints); this module builds the
table and the counts, and gives every public name of a diff (``tokencap.run.diff.NAME``).

No Streamlit and nothing from ``tokencap.views``: the Run page calls this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..diagnosis import CAUSES
from ..rollout import MASK_REASON_ORDER
from .diff_summary import DiffSummary, summary_text
from .errors import DiffError
from .pairing import JOINS, Join, JoinChoice, can_join_by_task, checked_table, choose_join, no_task_key, row_pairs
from .rows import REASON_COLUMNS
from .table import DIFF_SCHEMA, STATUSES, status_codes

SIDES: tuple[str, ...] = ("both", "only_a", "only_b")
CHANGES: tuple[str, ...] = ("fixed", "broke", "reasons_changed", "same", "only_a", "only_b")
"""Every value of the ``change`` column (docs/contract.md#diff), in the order a summary lists them."""

NO_STATUS = STATUSES[-1]
"""How a null ``status`` (no response was built) is named in the summary's status shares."""

_STR = pa.string()


@dataclass
class RunDiff:
    """Two runs compared: the docs/contract.md#diff table, the join used, and the summary."""

    arrow: pa.Table
    """The diff table as Arrow (`DIFF_SCHEMA`): what ``-o DIFF.parquet`` writes."""
    join: JoinChoice
    summary: DiffSummary

    @cached_property
    def table(self) -> pd.DataFrame:
        """The diff table as a pandas frame (a list cell is a numpy array of str; null is None or NaN)."""
        return self.arrow.to_pandas()


# --------------------------------------------------------------------------- the columns


def _take(column: pa.ChunkedArray, rows: np.ndarray) -> pa.Array:
    """``column[rows]``, null where ``rows`` is -1."""
    return column.take(pa.array(np.where(rows < 0, 0, rows), mask=rows < 0)).combine_chunks() \
        if len(column) else pa.nulls(rows.size, column.type)


def _masked(table: pa.Table, rows: np.ndarray | None = None) -> np.ndarray:
    """Per row (of ``rows``; False where -1): masked, or without a verdict (null), which is never trainable."""
    trainable = pc.equal(table.column("mask_sample"), False).fill_null(False)
    masked = ~np.asarray(trainable.to_numpy(zero_copy_only=False), dtype=bool)
    if rows is None:
        return masked
    out = np.zeros(rows.size, dtype=bool)
    out[rows >= 0] = masked[rows[rows >= 0]]
    return out


def _reason_matrix(table: pa.Table, rows: np.ndarray) -> np.ndarray:
    """(rows, reasons) booleans from the ``reason_*`` columns; False where ``rows`` is -1."""
    out = np.zeros((rows.size, len(REASON_COLUMNS)), dtype=bool)
    have = rows >= 0
    for j, name in enumerate(REASON_COLUMNS):
        column = table.column(name).fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
        out[have, j] = column[rows[have]]
    return out


def _reason_lists(matrix: np.ndarray, valid: np.ndarray) -> pa.Array:
    """Each row's reasons (the order of docs/contract.md#rollout) as a list; null where not ``valid``."""
    matrix = matrix & valid[:, None]
    offsets = np.concatenate([[0], np.cumsum(matrix.sum(axis=1))]).astype(np.int32)
    _, columns = np.nonzero(matrix)  # row-major: each row's reasons in column (docs/contract.md#rollout) order
    values = pa.DictionaryArray.from_arrays(pa.array(columns.astype(np.int32)),
                                            pa.array(MASK_REASON_ORDER, _STR)).cast(_STR)
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.array(~valid))


def _with_records(table: pa.Table) -> bool:
    """Scanned with rollout records: some rollout got a terminal attribution or a reward from them."""
    return any(table.column(name).null_count < table.num_rows for name in ("terminal_attribution", "reward"))


def _status_counts(table: pa.Table) -> np.ndarray:
    """Rollouts per status of `STATUSES` (the Run page's split)."""
    codes = status_codes(table.column("status"), table.column("incomplete_reason"))
    return np.bincount(codes, minlength=len(STATUSES))


def _value_counts(column: pa.ChunkedArray) -> dict[str, int]:
    return {row["values"]: row["counts"] for row in pc.value_counts(column).to_pylist()}


def _cause_counts(a: pa.Table, b: pa.Table) -> dict[str, tuple[int, int]]:
    """Rollouts of A and of B per break cause (a rollout counts once per cause it has), every cause in order."""
    def counts(table: pa.Table) -> dict[str, int]:
        # Each row's causes are distinct (docs/contract.md#scan-diagnosis-columns).
        flat = pc.list_flatten(table.column("break_causes"))
        return _value_counts(flat) if len(flat) else {}

    ca, cb = counts(a), counts(b)
    return {c: (ca.get(c, 0), cb.get(c, 0)) for c in CAUSES}


def diff_tables(a: pa.Table | pd.DataFrame, b: pa.Table | pd.DataFrame, join: Join = "auto", *,
                names: tuple[str, str] = ("A", "B")) -> RunDiff:
    """Compare scan table ``a`` (before) with ``b`` (after), docs/contract.md#diff.

    ``names`` label the tables in errors (file names, say). Raises `DiffError` with one
    line when they cannot be compared.
    """
    ta, tb = checked_table(a, names[0]), checked_table(b, names[1])
    choice = choose_join(ta, tb, join, names)
    ia, ib = row_pairs(ta, tb, choice, names)
    both = (ia >= 0) & (ib >= 0)
    side = np.where(both, "both", np.where(ia >= 0, "only_a", "only_b")).astype(object)
    ra, rb = _reason_matrix(ta, ia), _reason_matrix(tb, ib)
    gained, lost = rb & ~ra, ra & ~rb
    masked_a, masked_b = _masked(ta, ia), _masked(tb, ib)
    fixed = both & masked_a & ~masked_b
    broke = both & ~masked_a & masked_b
    moved = both & ~fixed & ~broke & (gained.any(axis=1) | lost.any(axis=1))
    change = np.select([fixed, broke, moved, both], ["fixed", "broke", "reasons_changed", "same"],
                       default=side).astype(object)

    columns = {
        "rollout_id_a": _take(ta.column("rollout_id"), ia), "rollout_id_b": _take(tb.column("rollout_id"), ib),
        "side": pa.array(side, _STR),
        "mask_sample_a": _take(ta.column("mask_sample"), ia), "mask_sample_b": _take(tb.column("mask_sample"), ib),
        "mask_reasons_a": _take(ta.column("mask_reasons"), ia), "mask_reasons_b": _take(tb.column("mask_reasons"), ib),
        "reasons_gained": _reason_lists(gained, both), "reasons_lost": _reason_lists(lost, both),
        "change": pa.array(change, _STR),
        "status_a": _take(ta.column("status"), ia), "status_b": _take(tb.column("status"), ib),
        "delivered_fraction_a": _take(ta.column("delivered_fraction"), ia),
        "delivered_fraction_b": _take(tb.column("delivered_fraction"), ib),
        "reward_a": _take(ta.column("reward"), ia), "reward_b": _take(tb.column("reward"), ib),
        "source_a": _take(ta.column("source"), ia), "source_b": _take(tb.column("source"), ib),
        "break_causes_a": _take(ta.column("break_causes"), ia), "break_causes_b": _take(tb.column("break_causes"), ib),
        "contiguous_a": _take(ta.column("contiguous"), ia), "contiguous_b": _take(tb.column("contiguous"), ib),
    }
    arrow = pa.Table.from_arrays([columns[f.name].cast(f.type) for f in DIFF_SCHEMA], schema=DIFF_SCHEMA)

    n_a, n_b = ta.num_rows, tb.num_rows
    reason_a = _reason_matrix(ta, np.arange(n_a)).sum(axis=0).tolist()
    reason_b = _reason_matrix(tb, np.arange(n_b)).sum(axis=0).tolist()
    status_a, status_b = _status_counts(ta), _status_counts(tb)
    statuses = {k: (int(status_a[i]), int(status_b[i])) for i, k in enumerate(STATUSES) if status_a[i] or status_b[i]}
    counted = {"fixed": int(fixed.sum()), "broke": int(broke.sum()), "reasons_changed": int(moved.sum()),
               "same": int((both & ~fixed & ~broke & ~moved).sum())}
    counted["only_a"], counted["only_b"] = int(((ia >= 0) & (ib < 0)).sum()), int((ia < 0).sum())
    summary = DiffSummary(
        rollouts_a=n_a, rollouts_b=n_b, both=int(both.sum()), only_a=counted["only_a"], only_b=counted["only_b"],
        trainable_a=n_a - int(_masked(ta).sum()), trainable_b=n_b - int(_masked(tb).sum()),
        # one count per REASON_COLUMNS entry, which is one per MASK_REASON_ORDER entry
        reason_counts={r: (int(a), int(b)) for r, a, b in zip(MASK_REASON_ORDER, reason_a, reason_b, strict=True)},
        status_counts=statuses,
        changes={c: counted.get(c, 0) for c in CHANGES}, records=(_with_records(ta), _with_records(tb)),
        cause_counts=_cause_counts(ta, tb))
    return RunDiff(arrow=arrow, join=choice, summary=summary)


__all__ = ["CHANGES", "DIFF_SCHEMA", "JOINS", "NO_STATUS", "SIDES", "DiffError", "DiffSummary", "Join",
           "JoinChoice", "RunDiff", "can_join_by_task", "choose_join", "diff_tables", "no_task_key", "summary_text"]
