"""Two runs on the Run page: "did my fix work?".

`compare_runs` calls `tokencap.run.diff.diff_tables` (docs/contract.md#diff: the join, the change of
every joined rollout, the summary) and lays its rows over the two runs' frames:

* each frame gains a ``change`` column (`data.CHANGES`), so the page's filters -- the
  change filter included -- are the ordinary `data.filter_masks` of each run;
* ``rows`` holds, per joined rollout, its row in A and in B (-1 on the side without it);
  a joined rollout is shown when its A row or its B row passes every filter;
* `paired_bars`, `change_bars` and `compare_metrics` give the charts (A and B side by side,
  same keys) and the tiles (both figures and the change).

All vectorised; no Streamlit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...run.diff import DiffSummary, JoinChoice, diff_tables
from .bars import Bars, chart_bars
from .categories import CALLS_BINS, calls_label, keys_in_words
from .filters import CHANGE_LABELS, CHANGE_TEXT, CHANGES, RunFilter, passing
from .summary import Metric, has_delivery, run_metrics


@dataclass(frozen=True, eq=False)
class Comparison:
    """Run A (the page's run) against run B (the one it is compared with)."""

    name_a: str
    name_b: str
    a: pd.DataFrame  # run A's frame with a ``change`` column
    b: pd.DataFrame
    rows: pd.DataFrame  # one row per joined rollout: ``row_a``, ``row_b`` (-1: absent), ``change`` (categorical)
    join: JoinChoice
    summary: DiffSummary

    @property
    def join_words(self) -> str:
        return f"Rollouts are paired {self.join.label}: {self.join.why}"


def _row_keys(table: pa.Table, frame_rows: int) -> pd.Index:
    keys = pc.binary_join_element_wise(table.column("source").fill_null(""), table.column("rollout_id"), "\0")
    assert len(keys) == frame_rows
    return pd.Index(keys.to_pandas())


def _rows_of(diff: pa.Table, side: str, index: pd.Index) -> np.ndarray:
    """The run's row of each diff row (-1 where the diff has no such side)."""
    keys = pc.binary_join_element_wise(diff.column(f"source_{side}").fill_null(""),
                                       diff.column(f"rollout_id_{side}"), "\0")
    present = diff.column(f"rollout_id_{side}").is_valid().to_numpy(zero_copy_only=False)
    unique = index[~index.duplicated(keep="first")]
    found = unique.get_indexer(keys.fill_null("").to_pandas())
    positions = np.flatnonzero(~index.duplicated(keep="first"))
    rows = np.where(found >= 0, positions[np.maximum(found, 0)], -1)
    return np.where(present, rows, -1).astype(np.int64)


def _change_column(n: int, rows: np.ndarray, codes: np.ndarray, absent: str) -> pd.Categorical:
    out = np.full(n, CHANGES.index(absent), dtype=np.int64)
    have = rows >= 0
    out[rows[have]] = codes[have]
    return pd.Categorical.from_codes(out, categories=list(CHANGES))


def compare_runs(table_a: pa.Table, frame_a: pd.DataFrame, table_b: pa.Table, frame_b: pd.DataFrame,
                 names: tuple[str, str] = ("A", "B"), join: str = "auto") -> Comparison:
    """Run A against run B. Raises `tokencap.run.DiffError` (one line) when they cannot be compared."""
    diff = diff_tables(table_a, table_b, join=join, names=names)  # type: ignore[arg-type]
    arrow = diff.arrow
    codes = pd.Categorical(arrow.column("change").to_pandas(), categories=list(CHANGES)).codes.astype(np.int64)
    row_a = _rows_of(arrow, "a", _row_keys(table_a, len(frame_a)))
    row_b = _rows_of(arrow, "b", _row_keys(table_b, len(frame_b)))
    rows = pd.DataFrame({"row_a": row_a, "row_b": row_b,
                         "change": pd.Categorical.from_codes(codes, categories=list(CHANGES))})
    a = frame_a.assign(change=_change_column(len(frame_a), row_a, codes, "only_a"))
    b = frame_b.assign(change=_change_column(len(frame_b), row_b, codes, "only_b"))
    return Comparison(names[0], names[1], a, b, rows, diff.join, diff.summary)


def passing_rows(cmp: Comparison, keep_a: np.ndarray, keep_b: np.ndarray) -> np.ndarray:
    """Joined rollouts whose A row or B row passes the filters (positions in ``cmp.rows``)."""
    ra, rb = cmp.rows["row_a"].to_numpy(), cmp.rows["row_b"].to_numpy()
    ok = np.zeros(len(ra), dtype=bool)
    ok[ra >= 0] |= keep_a[ra[ra >= 0]]
    ok[rb >= 0] |= keep_b[rb[rb >= 0]]
    return np.flatnonzero(ok)


def sorted_pairs(cmp: Comparison, positions: np.ndarray, flt: RunFilter) -> np.ndarray:
    """``positions`` in the filter's sort order (by A's value, B's where A has none); ties keep the diff's order."""
    if not flt.sort or not len(positions):
        return positions
    ra = cmp.rows["row_a"].to_numpy()[positions]
    rb = cmp.rows["row_b"].to_numpy()[positions]
    va = cmp.a[flt.sort].iloc[np.maximum(ra, 0)].reset_index(drop=True) if len(cmp.a) else None
    vb = cmp.b[flt.sort].iloc[np.maximum(rb, 0)].reset_index(drop=True) if len(cmp.b) else None
    if va is None:
        if vb is None:  # neither run has a row: nothing to sort by
            return positions
        values = vb
    elif vb is None:
        values = va.where(pd.Series(ra >= 0))
    else:
        values = va.where(pd.Series(ra >= 0), vb)  # A's value, B's where A has no row
    order = values.reset_index(drop=True).sort_values(ascending=not flt.descending, kind="stable",
                                                      na_position="last").index.to_numpy()
    return positions[order]


COMPARE_COLUMNS = ("rollout A", "rollout B", "change", "verdict A", "verdict B", "mask reasons A", "mask reasons B",
                   "status A", "status B", "calls A", "calls B", "delivered A", "delivered B", "reward A", "reward B",
                   "source A", "source B")
"""The comparison table's columns, in order."""


def _side(frame: pd.DataFrame, rows: np.ndarray, column: str, null: object) -> pd.Series:
    if not len(frame):
        return pd.Series([null] * len(rows))
    values = frame[column].iloc[np.maximum(rows, 0)].reset_index(drop=True)
    if column == "reasons":  # mask reasons in words, as on one run's table
        values = keys_in_words(values)
    if isinstance(values.dtype, pd.CategoricalDtype) or values.dtype == object or isinstance(values.dtype,
                                                                                             pd.ArrowDtype):
        values = values.astype(object)
    return values.where(pd.Series(rows >= 0), null)


def compare_table_frame(cmp: Comparison, positions: np.ndarray) -> pd.DataFrame:
    """The joined rollouts shown, in order, A's and B's facts side by side; the index is the position."""
    ra = cmp.rows["row_a"].to_numpy()[positions]
    rb = cmp.rows["row_b"].to_numpy()[positions]
    out: dict[str, object] = {}
    for label, column, null in (("rollout", "rollout_id", None), ("verdict", "verdict", None),
                                ("mask reasons", "reasons", None), ("status", "status", None),
                                ("calls", "n_calls", np.nan), ("delivered", "delivered_fraction", np.nan),
                                ("reward", "reward", np.nan), ("source", "source", None)):
        out[f"{label} A"] = _side(cmp.a, ra, column, null)
        out[f"{label} B"] = _side(cmp.b, rb, column, null)
    out["change"] = cmp.rows["change"].iloc[positions].map(CHANGE_LABELS).astype(object).reset_index(drop=True)
    frame = pd.DataFrame(out)[list(COMPARE_COLUMNS)]
    frame.index = pd.Index(positions, name="pair")
    return frame


def paired_bars(cmp: Comparison, masks_a: Mapping[str, np.ndarray],
                masks_b: Mapping[str, np.ndarray]) -> list[tuple[Bars, Bars]]:
    """Every chart of run A with the same chart of run B (same keys: calls bins up to the larger run's)."""
    bars_a, bars_b = chart_bars(cmp.a, masks_a), chart_bars(cmp.b, masks_b)
    out = []
    for a, b in zip(bars_a, bars_b, strict=True):
        if a.keys != b.keys:  # calls: each run's bins end at its own largest
            n = max(len(a.keys), len(b.keys))
            a, b = (_padded(x, n) for x in (a, b))
        out.append((a, b))
    return out


def _padded(bars: Bars, n: int) -> Bars:
    keys = CALLS_BINS[:n]
    pad = n - len(bars.keys)
    return Bars(bars.dimension, bars.title, keys, tuple(calls_label(k) for k in keys), bars.counts + (0,) * pad,
                bars.total, hover=tuple(f"{calls_label(k)} model call{'s' if k != '1' else ''}" for k in keys),
                extra=bars.extra + (0,) * pad if bars.extra else ())


def change_bars(cmp: Comparison, masks_a: Mapping[str, np.ndarray], masks_b: Mapping[str, np.ndarray]) -> Bars:
    """Joined rollouts per change, over those passing every filter but the change filter."""
    positions = passing_rows(cmp, passing(cmp.a, masks_a, skip="change"), passing(cmp.b, masks_b, skip="change"))
    codes = cmp.rows["change"].cat.codes.to_numpy()[positions]
    counts = np.bincount(codes, minlength=len(CHANGES))[: len(CHANGES)] if len(codes) else \
        np.zeros(len(CHANGES), dtype=np.int64)
    return Bars("change", f"Change from {cmp.name_a} to {cmp.name_b}", CHANGES,
                tuple(CHANGE_LABELS[c] for c in CHANGES), tuple(int(c) for c in counts), len(positions),
                hover=tuple(CHANGE_TEXT[c] for c in CHANGES))


def compare_metrics(cmp: Comparison) -> list[Metric]:
    """The headline numbers of both runs (whole tables), each with the change from A to B.

    A tile of A is paired with B's tile of the same label, never by position: a run read from output
    items has contiguity tiles a capture's run has not. A tile only one run has reads "absent" on the
    other side (it is not a count of 0), in the order of the run that has it."""
    delivery = has_delivery(cmp.a) or has_delivery(cmp.b)  # the same tiles on both sides
    of_a = {m.label: m for m in run_metrics(cmp.a, delivery)}
    of_b = {m.label: m for m in run_metrics(cmp.b, delivery)}
    out = []
    for label in _tile_order(list(of_a), list(of_b)):
        ma, mb = of_a.get(label), of_b.get(label)
        if ma is None or mb is None:
            out.append(_one_sided_tile(cmp, ma, mb))
            continue
        a, b = (int(m.value.replace(",", "")) for m in (ma, mb))
        if label != "rollouts":
            pp = 100.0 * ((b / len(cmp.b) if len(cmp.b) else 0.0) - (a / len(cmp.a) if len(cmp.a) else 0.0))
            share = f"{b - a:+,} ({pp:+.1f} pp of the run)"
        else:
            share = f"{b - a:+,}"
        out.append(Metric(label, f"{a:,} → {b:,}", f"{cmp.name_a} → {cmp.name_b}" + (
            f"; {ma.help}" if ma.help else ""), share))
    changes = cmp.summary.changes
    out.append(Metric("fixed · broke", f"{changes.get('fixed', 0):,} · {changes.get('broke', 0):,}",
                      "fixed: masked in A, trainable in B; broke: the reverse",
                      f"{changes.get('reasons_changed', 0):,} masked for other reasons"))
    return out


ABSENT = "absent"
"""A tile's figure on the side of a run that has no such tile."""


def _tile_order(labels_a: list[str], labels_b: list[str]) -> list[str]:
    """A's tiles in A's order, each tile only B has placed after the tile it follows in B."""
    order = list(labels_a)
    for i, label in enumerate(labels_b):
        if label not in order:
            after = labels_b[i - 1] if i else None
            order.insert(order.index(after) + 1 if after in order else len(order), label)
    return order


def _one_sided_tile(cmp: Comparison, ma: Metric | None, mb: Metric | None) -> Metric:
    """A tile one run has and the other has not: its figure, and "absent" for the other run."""
    shown = ma if ma is not None else mb
    assert shown is not None
    missing = cmp.name_b if ma is not None else cmp.name_a
    value = f"{ma.value} → {ABSENT}" if ma is not None else f"{ABSENT} → {shown.value}"
    help_text = f"{cmp.name_a} → {cmp.name_b}; {missing} has no such tile" + (f"; {shown.help}" if shown.help else "")
    return Metric(shown.label, value, help_text, f"{ABSENT} from {missing}")


__all__ = ["COMPARE_COLUMNS", "Comparison", "change_bars", "compare_metrics", "compare_runs",
           "compare_table_frame", "paired_bars", "passing_rows", "sorted_pairs"]
