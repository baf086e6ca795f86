"""A run's scan table (docs/contract.md#scan-table) as one pandas frame, built once per run:
low-cardinality columns become categoricals, so a filter or a count compares small integer codes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...diagnosis import CAUSES
from ...rollout import MASK_REASON_ORDER
from ...run.rows import LINK_NOTES
from ...run.table import STATUSES, status_codes
from . import reward as rw
from . import rollouts as ro
from .categories import (
    CALLS_BINS,
    CAUSE_COLUMNS,
    DELIVERED_BINS,
    DELIVERY,
    LINK_NOT_FAILURES,
    REFUSALS,
    VERDICTS,
    calls_bin_codes,
    delivered_bin_codes,
)

# --------------------------------------------------------------------------- the frame


REASON_COLUMNS = tuple(f"reason_{r}" for r in MASK_REASON_ORDER)
LINK_COLUMNS = tuple(f"link_{n}" for n in LINK_NOTES)


def _categorical(codes: np.ndarray, categories: tuple[str, ...]) -> pd.Categorical:
    return pd.Categorical.from_codes(codes.astype(np.int64), categories=list(categories))


def _np(table: pa.Table, name: str, dtype: Any) -> np.ndarray:
    column = table.column(name)
    if dtype is bool:
        return np.asarray(column.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    return np.asarray(column.fill_null(0).to_numpy(zero_copy_only=False), dtype=dtype)


def _dictionary(table: pa.Table, name: str, null: str = "") -> pd.Categorical:
    encoded = table.column(name).fill_null(null).combine_chunks().dictionary_encode()
    return pd.Categorical.from_codes(encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64),
                                     categories=encoded.dictionary.to_pylist())


def _strings(table: pa.Table, name: str) -> pd.api.extensions.ExtensionArray:
    return pd.array(table.column(name).combine_chunks(), dtype=pd.ArrowDtype(pa.string()))


def _nullable(table: pa.Table, name: str, dtype: Any) -> Any:
    """A nullable column of docs/contract.md#scan-rollout-records (rollout records): all null when the table predates
    it."""
    n = table.num_rows
    if name not in table.column_names:
        return np.full(n, np.nan) if dtype is np.float64 else pd.array([pd.NA] * n, dtype=dtype)
    column = table.column(name).combine_chunks()
    if dtype is np.float64:
        return np.asarray(column.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    return pd.array(column.cast(pa.int64()).to_pandas(types_mapper=pd.ArrowDtype).astype("Int64"), dtype="Int64")


def reason_text(mask: Sequence[int]) -> str:
    """The mask reasons flagged in ``mask`` (one flag per `MASK_REASON_ORDER` entry), comma-separated."""
    return ", ".join(r for r, on in zip(MASK_REASON_ORDER, mask, strict=True) if on)


def run_frame(table: pa.Table) -> pd.DataFrame:
    """The scan table as the page's frame: index 0..n-1 (the table's row), derived columns added."""
    n = table.num_rows
    out: dict[str, Any] = {}
    out["rollout_id"] = _strings(table, "rollout_id")
    out["source"] = _dictionary(table, "source")
    masked = ~np.asarray(pc.equal(table.column("mask_sample"), False).fill_null(False), dtype=bool)  # null: masked
    out["verdict"] = _categorical(masked.astype(np.int64), VERDICTS)
    bits = np.zeros(n, dtype=np.int64)
    for i, column in enumerate(REASON_COLUMNS):
        values = _np(table, column, bool)
        out[column] = values
        bits |= values.astype(np.int64) << i
    # The reasons of a row in the order of docs/contract.md#rollout, as one category per combination seen
    # (few in practice).
    combos, codes = np.unique(bits, return_inverse=True)
    labels = [reason_text([(int(c) >> i) & 1 for i in range(len(REASON_COLUMNS))]) or "—" for c in combos]
    out["reasons"] = pd.Categorical.from_codes(codes.reshape(-1).astype(np.int64), categories=labels)
    out["status"] = _categorical(status_codes(table.column("status"), table.column("incomplete_reason")), STATUSES)
    for name in ("n_calls", "chains", "roots", "quarantined_calls", "generated_tokens_captured",
                 "generated_tokens_delivered", "unresolved_parent_calls", "empty_generation_calls",
                 "after_terminal_calls", "engine_refusals", "context_refusals", "source_bytes"):
        out[name] = _np(table, name, np.int64)
    out["delivered_fraction"] = _np(table, "delivered_fraction", np.float64)
    out["quarantined_fraction"] = _np(table, "quarantined_fraction", np.float64)
    link_total = np.zeros(n, dtype=np.int64)
    for note, column in zip(LINK_NOTES, LINK_COLUMNS, strict=True):
        values = _np(table, column, np.int64)
        out[column] = values
        if note not in LINK_NOT_FAILURES:
            link_total += values
    out["link_failures"] = link_total
    ended = _np(table, "refusal_ended_chain", bool)
    out["refusal_ended_chain"] = ended
    out["capture_incomplete"] = _np(table, "capture_incomplete", bool)
    refusal = np.zeros(n, dtype=np.int64)
    refusal[out["engine_refusals"] > 0] = REFUSALS.index("other")
    refusal[out["context_refusals"] > 0] = REFUSALS.index("context")
    refusal[ended] = REFUSALS.index("ended")
    out["refusal"] = _categorical(refusal, REFUSALS)
    out["calls_bin"] = _categorical(calls_bin_codes(out["n_calls"]), CALLS_BINS)
    out["delivered_bin"] = _categorical(delivered_bin_codes(out["delivered_fraction"]), DELIVERED_BINS)
    out["reward"] = _nullable(table, "reward", np.float64)
    out["task_index"] = _nullable(table, "task_index", "Int64")
    out["rollout_index"] = _nullable(table, "rollout_index", "Int64")
    out["group"] = _categorical(rw.group_codes(out["task_index"], ~masked, out["reward"]), rw.GROUP_STATES)
    out["error"] = _strings(table, "error")
    out["snapshot_id"] = _strings(table, "snapshot_id")
    out.update(_diagnosis(table, masked))
    out["contiguity"] = ro.contiguity_column(table)
    return pd.DataFrame(out, index=pd.RangeIndex(n, name="row"))


def _cause_bits(table: pa.Table) -> np.ndarray:
    """Per row, bit i set when the row's ``break_causes`` holds `CAUSES`[i] (vectorised; 0 without the column)."""
    n = table.num_rows
    bits = np.zeros(n, dtype=np.int64)
    if "break_causes" not in table.column_names or not n:
        return bits
    column = table.column("break_causes").combine_chunks()
    flat = pc.list_flatten(column)
    if not len(flat):
        return bits
    parents = np.asarray(pc.list_parent_indices(column).to_numpy(zero_copy_only=False), dtype=np.int64)
    codes = pc.index_in(flat, value_set=pa.array(CAUSES)).fill_null(-1).to_numpy(zero_copy_only=False)
    known = codes >= 0  # a cause this version does not know is not counted
    np.bitwise_or.at(bits, parents[known], np.left_shift(1, codes[known].astype(np.int64)))
    return bits


def _diagnosis(table: pa.Table, masked: np.ndarray) -> dict[str, Any]:
    """The frame's columns of docs/contract.md#scan-diagnosis-columns: ``breaks``, one ``cause_*`` bool per cause,
    ``causes`` (the
    combination as one category, like ``reasons``) and ``delivery`` (`DELIVERY`)."""
    n = table.num_rows
    out: dict[str, Any] = {}
    out["breaks"] = _np(table, "breaks", np.int64) if "breaks" in table.column_names else np.zeros(n, np.int64)
    bits = _cause_bits(table)
    for i, column in enumerate(CAUSE_COLUMNS):
        out[column] = (bits >> i) & 1 == 1
    combos, codes = np.unique(bits, return_inverse=True)
    labels = [", ".join(c for i, c in enumerate(CAUSES) if (int(k) >> i) & 1) or "—" for k in combos]
    out["causes"] = pd.Categorical.from_codes(codes.reshape(-1).astype(np.int64), categories=labels)
    delivery = np.full(n, DELIVERY.index("unknown"), dtype=np.int64)
    if "delivered_mask_sample" in table.column_names:
        said = table.column("delivered_mask_sample")
        trainable = np.asarray(pc.equal(said, False).fill_null(False), dtype=bool)
        masked_by_gym = np.asarray(pc.equal(said, True).fill_null(False), dtype=bool)
        agent = np.asarray(pc.equal(table.column("delivered_by"), "agent").fill_null(False), dtype=bool)
        delivery[masked_by_gym] = DELIVERY.index("capture_masked")
        delivery[masked_by_gym & agent] = DELIVERY.index("agent")
        delivery[trainable] = DELIVERY.index("trained")
        delivery[trainable & masked] = DELIVERY.index("in_doubt")
    out["delivery"] = _categorical(delivery, DELIVERY)
    return out
