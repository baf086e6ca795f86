"""Which rollout of run A pairs with which of run B (docs/contract.md#diff, the join).

A diff reads the columns it needs of each scan table (`checked_table`: record columns null
when a table predates them; a diff table given in a scan table's place is refused), chooses
its join (`choose_join`: by ``rollout_id``, or by (``task_index``, ``rollout_index``) when
asked or when the rollout ids share nothing and both tables carry the indices) and pairs
the rows (`row_pairs`: one pair per joined key, an outer join). A key on two rows of one
table is an error, never a guess at which row pairs with which; under a task join, a row
without indices is on its own side.

Vectorised: Arrow's hash join on the key columns, no Python per row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .errors import DiffError
from .rows import REASON_COLUMNS
from .table import RECORD_COLUMNS, SCHEMA, is_diff_table, with_record_columns

Join = Literal["auto", "id", "task"]
JOINS: tuple[str, ...] = ("auto", "id", "task")

_NEEDED = ("rollout_id", "source", "mask_sample", "mask_reasons", *REASON_COLUMNS, "status", "incomplete_reason",
           "delivered_fraction", *RECORD_COLUMNS, "terminal_attribution", "break_causes", "contiguous")
"""The scan table's columns a diff reads, in the order `checked_table` gives them."""
_OPTIONAL = ("incomplete_reason", *RECORD_COLUMNS, "terminal_attribution", "break_causes", "contiguous")
"""Read as null when a table lacks them (a table written without the record columns of
docs/contract.md#scan-rollout-records, a frame without them)."""
_INDEX_KEY = ("task_index", "rollout_index")


@dataclass(frozen=True)
class JoinChoice:
    """Which join a diff used, and why, in plain words."""

    by: Literal["id", "task"]
    why: str
    unkeyed_a: int = 0
    """Rows of A without a task or rollout index (task join only): on their own side."""
    unkeyed_b: int = 0

    @property
    def key(self) -> tuple[str, ...]:
        """The key columns of the scan tables."""
        return ("rollout_id",) if self.by == "id" else _INDEX_KEY

    @property
    def label(self) -> str:
        return "by rollout id" if self.by == "id" else "by task and rollout index"


def empty_sides(rollouts_a: int, rollouts_b: int) -> list[str]:
    """"A", "B", both or neither: the runs without a rollout."""
    return [side for side, n in (("A", rollouts_a), ("B", rollouts_b)) if not n]


# --------------------------------------------------------------------------- inputs


def checked_table(table: pa.Table | pd.DataFrame, label: str) -> pa.Table:
    """The columns a diff reads (`_NEEDED`), with the scan table's types; record columns null when absent."""
    if isinstance(table, pd.DataFrame):
        present = [c for c in _NEEDED if c in table.columns]
        try:
            table = pa.Table.from_pandas(table[present], preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
            raise DiffError(f"{label}: cannot be read as a scan table ({exc})") from None
    elif isinstance(table, pa.Table):
        table = with_record_columns(table)
    else:
        raise DiffError(f"{label}: expected a scan table (pyarrow Table or pandas DataFrame), "
                        f"got {type(table).__name__}")
    if is_diff_table(table.column_names):
        raise DiffError(f"{label}: is a diff table (one row per joined rollout), not a scan table; a diff compares "
                        "two scan tables")
    columns = []
    for name in _NEEDED:
        want = SCHEMA.field(name).type
        if name not in table.column_names:
            if name in _OPTIONAL:
                columns.append(pa.nulls(table.num_rows, want))
                continue
            raise DiffError(f"{label}: not a tokencap scan table (no column {name!r}); make one with tokencap scan")
        column = table.column(name)
        if pa.types.is_dictionary(column.type):  # a categorical from the Run page's frame
            column = column.cast(column.type.value_type)
        try:
            columns.append(column.cast(want))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            raise DiffError(f"{label}: column {name!r} is {column.type}, expected {want}; "
                            "not a tokencap scan table") from None
    return pa.Table.from_arrays(columns, names=list(_NEEDED))


def _has_indices(table: pa.Table) -> np.ndarray:
    """Rows that carry both a task and a rollout index."""
    return np.asarray(pc.and_(pc.is_valid(table.column("task_index")),
                              pc.is_valid(table.column("rollout_index")))).astype(bool)


def no_task_key(name: str) -> DiffError:
    """The error for a run ``name`` that cannot be joined by task: none of its rollouts carries both indices.
    `tokencap diff --join task` raises it before scanning a run directory whose rollout records carry none."""
    return DiffError(f"{name}: no rollout carries a task and a rollout index, so it cannot be joined by task; "
                     "scan the run with --final-responses of rollout records that carry _ng_task_index and "
                     "_ng_rollout_index, or join by rollout id")


def can_join_by_task(table: pa.Table | pd.DataFrame, name: str = "A") -> bool:
    """Whether some rollout of the scan table carries a task and a rollout index (`DiffError` when it is
    no scan table): what a task join needs of each side."""
    return bool(_has_indices(checked_table(table, name)).any())


def choose_join(a: pa.Table, b: pa.Table, join: Join = "auto", names: tuple[str, str] = ("A", "B")) -> JoinChoice:
    """The join rule of docs/contract.md#diff, for two checked tables."""
    if join not in JOINS:
        raise DiffError(f"join must be one of {', '.join(JOINS)}, got {join!r}")
    keyed_a, keyed_b = _has_indices(a), _has_indices(b)
    if join == "id":
        return JoinChoice("id", "asked for (--join id)")
    if join == "task":
        for table_name, keyed in zip(names, (keyed_a, keyed_b), strict=True):
            if not keyed.any():
                raise no_task_key(table_name)
        return JoinChoice("task", "asked for (--join task)", int((~keyed_a).sum()), int((~keyed_b).sum()))
    empty = empty_sides(a.num_rows, b.num_rows)
    if empty:  # nothing can pair: not a question of ids or indices
        return JoinChoice("id", f"run{'s' if len(empty) == 2 else ''} {' and '.join(empty)} "
                          f"ha{'ve' if len(empty) == 2 else 's'} no rollouts")
    shared = int(pc.sum(pc.is_in(a.column("rollout_id"), value_set=pc.unique(b.column("rollout_id")))).as_py() or 0)
    if shared:
        return JoinChoice("id", f"{shared:,} rollout id{'s are' if shared != 1 else ' is'} in both runs")
    if a.num_rows and b.num_rows and keyed_a.any() and keyed_b.any():
        return JoinChoice("task", "the rollout ids of the two runs share nothing, and both carry task and "
                          "rollout indices", int((~keyed_a).sum()), int((~keyed_b).sum()))
    lacking = [n for n, k, t in zip(names, (keyed_a, keyed_b), (a, b), strict=True) if t.num_rows and not k.any()]
    why = "the rollout ids share nothing" + (
        f", and {' and '.join(lacking)} carr{'ies' if len(lacking) == 1 else 'y'} no task and rollout indices "
        "(scan with --final-responses to get them)" if lacking else "")
    return JoinChoice("id", why)


def _no_duplicates(table: pa.Table, rows: np.ndarray, key: tuple[str, ...], label: str) -> None:
    keyed = table.take(pa.array(rows)).select(list(key))
    if key == ("rollout_id",) and pc.count_distinct(keyed.column(0), mode="all").as_py() == keyed.num_rows:
        return  # the common case, without grouping
    counts = keyed.group_by(list(key)).aggregate([([], "count_all")])
    if counts.num_rows == keyed.num_rows:
        return
    dup = counts.filter(pc.greater(counts.column("count_all"), 1)).slice(0, 1).to_pylist()[0]
    n = dup.pop("count_all")
    shown = f"rollout id {dup['rollout_id']!r}" if key == ("rollout_id",) else \
        f"task_index {dup['task_index']}, rollout_index {dup['rollout_index']}"
    raise DiffError(f"{label}: {shown} is on {n} rows; a diff pairs one row per key "
                    + ("(the same rollout scanned from two sources?)" if key == ("rollout_id",)
                       else "(a re-run attempt with the same indices? join by rollout id with --join id)"))


# --------------------------------------------------------------------------- the join


def row_pairs(a: pa.Table, b: pa.Table, choice: JoinChoice, names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """Row numbers of A and B per diff row (-1 on the side that lacks it), in the diff's order."""
    key = list(choice.key)
    rows_a = np.flatnonzero(_has_indices(a)) if choice.by == "task" else np.arange(a.num_rows)
    rows_b = np.flatnonzero(_has_indices(b)) if choice.by == "task" else np.arange(b.num_rows)
    _no_duplicates(a, rows_a, choice.key, names[0])
    _no_duplicates(b, rows_b, choice.key, names[1])
    left = a.take(pa.array(rows_a)).select(key).append_column("_a", pa.array(rows_a, pa.int64()))
    right = b.take(pa.array(rows_b)).select(key).append_column("_b", pa.array(rows_b, pa.int64()))
    joined = left.join(right, keys=key, join_type="full outer", coalesce_keys=True)
    ia = joined.column("_a").fill_null(-1).to_numpy()
    ib = joined.column("_b").fill_null(-1).to_numpy()
    side = np.where(ia < 0, 2, np.where(ib < 0, 1, 0))
    joined = joined.append_column("_side", pa.array(side))
    order = pc.sort_indices(joined, sort_keys=[("_side", "ascending"), *((k, "ascending") for k in key)]).to_numpy()
    ia, ib, side = ia[order], ib[order], side[order]
    if choice.by == "task":  # rows without indices: on their own side, after the keyed ones, by rollout id
        extra_a = _by_rollout_id(a, np.flatnonzero(~_has_indices(a)))
        extra_b = _by_rollout_id(b, np.flatnonzero(~_has_indices(b)))
        ia = np.concatenate([ia, extra_a, np.full(extra_b.size, -1)])
        ib = np.concatenate([ib, np.full(extra_a.size, -1), extra_b])
        side = np.concatenate([side, np.ones(extra_a.size, np.int64), np.full(extra_b.size, 2)])
        order = np.argsort(side, kind="stable")
        ia, ib = ia[order], ib[order]
    return ia.astype(np.int64), ib.astype(np.int64)


def _by_rollout_id(table: pa.Table, rows: np.ndarray) -> np.ndarray:
    ids = table.column("rollout_id").take(pa.array(rows, pa.int64()))
    return rows[pc.sort_indices(ids).to_numpy()].astype(np.int64)


__all__ = ["JOINS", "Join", "JoinChoice", "can_join_by_task", "checked_table", "choose_join",
           "empty_sides", "no_task_key", "row_pairs"]
