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

No Streamlit and nothing from ``tokencap.views``: the Run page calls this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..diagnosis import CAUSES
from ..rollout import MASK_REASON_ORDER
from .errors import DiffError
from .rows import REASON_COLUMNS
from .table import RECORD_COLUMNS, SCHEMA, STATUSES, status_codes, with_record_columns

Join = Literal["auto", "id", "task"]
JOINS: tuple[str, ...] = ("auto", "id", "task")

SIDES: tuple[str, ...] = ("both", "only_a", "only_b")
CHANGES: tuple[str, ...] = ("fixed", "broke", "reasons_changed", "same", "only_a", "only_b")
"""Every value of the ``change`` column (docs/contract.md#diff), in the order a summary lists them."""

NO_STATUS = STATUSES[-1]
"""How a null ``status`` (no response was built) is named in the summary's status shares."""

_STR, _BOOL, _FLOAT, _STRS = pa.string(), pa.bool_(), pa.float64(), pa.list_(pa.string())

DIFF_SCHEMA = pa.schema([
    ("rollout_id_a", _STR), ("rollout_id_b", _STR), ("side", _STR), ("mask_sample_a", _BOOL),
    ("mask_sample_b", _BOOL), ("mask_reasons_a", _STRS), ("mask_reasons_b", _STRS), ("reasons_gained", _STRS),
    ("reasons_lost", _STRS), ("change", _STR), ("status_a", _STR), ("status_b", _STR),
    ("delivered_fraction_a", _FLOAT), ("delivered_fraction_b", _FLOAT), ("reward_a", _FLOAT), ("reward_b", _FLOAT),
    ("source_a", _STR), ("source_b", _STR), ("break_causes_a", _STRS), ("break_causes_b", _STRS),
    ("contiguous_a", _BOOL), ("contiguous_b", _BOOL),
])
"""The diff table's columns, in order (docs/contract.md#diff; the causes of #scan-diagnosis-columns after
them, then the contiguity of #scan-token-source:
null on a side whose rollout is a capture's or absent)."""


def is_diff_table(names: list[str]) -> bool:
    """Whether columns ``names`` are a diff table's, this one's or one written before the contiguity columns."""
    return names in (DIFF_SCHEMA.names, DIFF_SCHEMA.names[:-2])

_NEEDED = ("rollout_id", "source", "mask_sample", "mask_reasons", *REASON_COLUMNS, "status", "incomplete_reason",
           "delivered_fraction", *RECORD_COLUMNS, "terminal_attribution", "break_causes", "contiguous")
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


@dataclass(frozen=True)
class DiffSummary:
    """What `tokencap diff` prints, as data.

    Shares are over each whole table (a fraction from 0 to 1; 0 for an empty table);
    ``change_pp`` is B's share minus A's, in percentage points.
    """

    rollouts_a: int
    rollouts_b: int
    both: int
    only_a: int
    only_b: int
    trainable_a: int
    trainable_b: int
    reason_counts: dict[str, tuple[int, int]]
    """Mask reason (the order of docs/contract.md#rollout) -> (rollouts of A, rollouts of B) masked with it."""
    status_counts: dict[str, tuple[int, int]]
    """Status as the Run page splits it (`tokencap.run.table.STATUSES`: an incomplete one by its reason, a
    null one `NO_STATUS`) -> (rollouts of A, rollouts of B); only statuses some rollout has."""
    changes: dict[str, int] = field(default_factory=dict)
    """Rows of the diff per ``change`` value, every value of `CHANGES` in that order."""
    cause_counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Break cause (the order of docs/contract.md#causes) -> (rollouts of A, rollouts of B) with a break of that
    cause."""
    records: tuple[bool, bool] = (False, False)
    """Whether A / B was scanned with rollout records (any rollout with a terminal attribution or a reward)."""

    @property
    def records_note(self) -> str | None:
        """When only one run had rollout records: verdicts that rest on them differ for that reason alone."""
        if self.records[0] == self.records[1]:
            return None
        having, lacking = ("A", "B") if self.records[0] else ("B", "A")
        return (f"only {having} was scanned with rollout records: verdicts that rest on them (a final answer "
                f"matching no call, retries the final answer settles) can differ for that reason alone, not "
                f"because of a change in the run; scan {lacking} with its rollout records too, or neither")

    @property
    def unpaired_note(self) -> str | None:
        """When both runs have rollouts but none could be paired: every change then reads only_a / only_b."""
        if self.both or not (self.rollouts_a and self.rollouts_b):
            return None
        return ("no rollout of A could be paired with one of B, so nothing here compares a rollout with "
                "itself; if the runs hold the same tasks, scan both with their rollout records (task and "
                "rollout index) and join by task (--join task)")

    @property
    def empty_note(self) -> str | None:
        """When run A or run B has no rollouts: nothing is compared, whichever side it is."""
        empty = _empty_sides(self.rollouts_a, self.rollouts_b)
        if not empty:
            return None
        if len(empty) == 2:
            return "runs A and B have no rollouts (empty scan tables): there is nothing to compare"
        other = "B" if empty == ["A"] else "A"
        return (f"run {empty[0]} has no rollouts (an empty scan table), so nothing is compared: every rollout "
                f"of run {other} is only in {other}")

    @property
    def notes(self) -> list[str]:
        """What a reader must know before trusting the comparison (an empty run, one-sided records, nothing
        paired)."""
        return [n for n in (self.empty_note, self.unpaired_note, self.records_note) if n]

    @property
    def trainable_share_a(self) -> float:
        return _share(self.trainable_a, self.rollouts_a)

    @property
    def trainable_share_b(self) -> float:
        return _share(self.trainable_b, self.rollouts_b)

    @property
    def trainable_change_pp(self) -> float:
        return 100.0 * (self.trainable_share_b - self.trainable_share_a)

    def shares(self, counts: dict[str, tuple[int, int]]) -> list[tuple[str, int, int, float, float, float]]:
        """(key, count_a, count_b, share_a, share_b, change_pp) per key of ``counts``."""
        out = []
        for key, (a, b) in counts.items():
            share_a, share_b = _share(a, self.rollouts_a), _share(b, self.rollouts_b)
            out.append((key, a, b, share_a, share_b, 100.0 * (share_b - share_a)))
        return out

    @property
    def reasons(self) -> pd.DataFrame:
        """One row per mask reason (the order of docs/contract.md#rollout, index ``reason``): ``count_a``, ``count_b``,
        ``share_a``, ``share_b``, ``change_pp``."""
        return self._frame(self.reason_counts, "reason")

    @property
    def causes(self) -> pd.DataFrame:
        """One row per break cause (the order of docs/contract.md#causes, index ``cause``), the same columns as
        `reasons`."""
        return self._frame(self.cause_counts, "cause")

    @property
    def statuses(self) -> pd.DataFrame:
        """One row per status (index ``status``), the same columns as `reasons`."""
        return self._frame(self.status_counts, "status")

    def _frame(self, counts: dict[str, tuple[int, int]], name: str) -> pd.DataFrame:
        rows = self.shares(counts)
        frame = pd.DataFrame([r[1:] for r in rows], columns=["count_a", "count_b", "share_a", "share_b", "change_pp"],
                             index=pd.Index([r[0] for r in rows], name=name))
        return frame.astype({"count_a": "int64", "count_b": "int64", "share_a": "float64", "share_b": "float64",
                             "change_pp": "float64"})


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


def _share(count: int, total: int) -> float:
    return count / total if total else 0.0


def _empty_sides(rollouts_a: int, rollouts_b: int) -> list[str]:
    """"A", "B", both or neither: the runs without a rollout."""
    return [side for side, n in (("A", rollouts_a), ("B", rollouts_b)) if not n]


# --------------------------------------------------------------------------- inputs


def _checked(table: pa.Table | pd.DataFrame, label: str) -> pa.Table:
    """The columns a diff reads, with the scan table's types; record columns null when absent."""
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
    empty = _empty_sides(a.num_rows, b.num_rows)
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


def _pairs(a: pa.Table, b: pa.Table, choice: JoinChoice, names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
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


def no_task_key(name: str) -> DiffError:
    """The error for a run ``name`` that cannot be joined by task: none of its rollouts carries both indices.
    `tokencap diff --join task` raises it before scanning a run directory whose rollout records carry none."""
    return DiffError(f"{name}: no rollout carries a task and a rollout index, so it cannot be joined by task; "
                     "scan the run with --final-responses of rollout records that carry _ng_task_index and "
                     "_ng_rollout_index, or join by rollout id")


def can_join_by_task(table: pa.Table | pd.DataFrame, name: str = "A") -> bool:
    """Whether some rollout of the scan table carries a task and a rollout index (`DiffError` when it is
    no scan table): what a task join needs of each side."""
    return bool(_has_indices(_checked(table, name)).any())


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
    ta, tb = _checked(a, names[0]), _checked(b, names[1])
    choice = choose_join(ta, tb, join, names)
    ia, ib = _pairs(ta, tb, choice, names)
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


# --------------------------------------------------------------------------- the printed summary


def _pct(share: float) -> str:
    return f"{100.0 * share:.1f}%"


def _pp(change: float) -> str:
    return f"{change:+.1f} pp"


def _printed_change(share_a: float, share_b: float) -> str:
    """B's share minus A's as printed: the difference of the two figures printed beside it (each rounded to
    0.1%), so the line adds up -- never the rounded exact difference, which can be 0.1 pp off them."""
    return _pp(float(_pct(share_b)[:-1]) - float(_pct(share_a)[:-1]))


def summary_text(diff: RunDiff, name_a: str = "A", name_b: str = "B",
                 tables: tuple[bool, bool] = (False, False)) -> str:
    """The summary `tokencap diff` prints: plain lines, A before B, changes in percentage points (the
    difference of the printed shares). ``tables``: whether A / B was given as a scan table, which takes no
    rollout records (a note then says to rescan its run with them)."""
    s, j = diff.summary, diff.join
    lines = [f"A: {name_a} ({_rollouts(s.rollouts_a)})", f"B: {name_b} ({_rollouts(s.rollouts_b)})",
             f"joined {j.label}: {j.why}"]
    if j.unkeyed_a or j.unkeyed_b:
        lines.append(f"  without task and rollout index (on their own side): {j.unkeyed_a:,} in A, "
                     f"{j.unkeyed_b:,} in B")
    lines += [f"rollouts: {s.both:,} in both, {s.only_a:,} only in A, {s.only_b:,} only in B",
              f"trainable: {_pct(s.trainable_share_a)} of A ({s.trainable_a:,}), {_pct(s.trainable_share_b)} of B "
              f"({s.trainable_b:,}), {_printed_change(s.trainable_share_a, s.trainable_share_b)}",
              f"verdicts of rollouts in both: {s.changes['fixed']:,} fixed (masked in A, trainable in B), "
              f"{s.changes['broke']:,} broke (trainable in A, masked in B), {s.changes['reasons_changed']:,} "
              f"reasons_changed (masked in both, for other reasons), {s.changes['same']:,} same"]
    first, second = "mask reasons (share of rollouts)", "status (share of rollouts)"
    causes = {k: v for k, v in s.cause_counts.items() if v != (0, 0)}
    # The labels' column is as wide as its widest line, so A, B and change head their values.
    width = max(len(first), len(second), *(2 + len(k) for k in (*s.reason_counts, *s.status_counts, *causes)))
    lines.append(f"{first:<{width}}  {'A':>7}  {'B':>7}  {'change':>10}")
    sections = [(None, s.reason_counts), (second, s.status_counts)]
    if causes:
        sections.append(("why lineage broke: rollouts with a break of each cause (share of rollouts)", causes))
    for title, counts in sections:
        if title:
            lines.append(title)
        for key, _, _, share_a, share_b, _ in s.shares(counts):
            lines.append(f"{'  ' + key:<{width}}  {_pct(share_a):>7}  {_pct(share_b):>7}  "
                         f"{_printed_change(share_a, share_b):>10}")
    for note in (s.empty_note, s.unpaired_note):
        if note:
            lines.append(f"note: {note}")
    if s.records_note:
        lacking = 1 if s.records[0] else 0
        side = "AB"[lacking]
        how = (f"a scan table takes no records: rescan {side}'s run with `tokencap scan RUN -o TABLE "
               f"--final-responses RECORDS`, or give the run directory with --final-responses-{side.lower()}"
               if tables[lacking] else f"--final-responses-{side.lower()}")
        lines.append(f"note: {s.records_note} ({how})")
    return "\n".join(lines) + "\n"


def _rollouts(n: int) -> str:
    return f"{n:,} rollout{'' if n == 1 else 's'}"


__all__ = ["CHANGES", "DIFF_SCHEMA", "JOINS", "NO_STATUS", "SIDES", "DiffError", "DiffSummary", "Join",
           "JoinChoice", "RunDiff", "can_join_by_task", "choose_join", "diff_tables", "no_task_key", "summary_text"]
