"""The run scan table (docs/contract.md#scan-table): one row per rollout, fixed columns, fixed types.

The column list is the contract a dashboard or a notebook reads, so it is declared once
here as an Arrow schema; rows are made by `tokencap.run.rows.row_of` from build results.
The diff table's schema (docs/contract.md#diff, `DIFF_SCHEMA`) is here too: reading a scan
table tells a diff table given in its place by its columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from .rows import LINK_COLUMNS, REASON_COLUMNS, Row

_STR, _INT, _FLOAT, _BOOL = pa.string(), pa.int64(), pa.float64(), pa.bool_()
_STRS = pa.list_(pa.string())

SCHEMA = pa.schema(
    [("rollout_id", _STR), ("source", _STR), ("snapshot_id", _STR), ("mask_sample", _BOOL),
     ("mask_reasons", _STRS)]
    + [(c, _BOOL) for c in REASON_COLUMNS]
    + [("status", _STR), ("incomplete_reason", _STR), ("n_calls", _INT), ("chains", _INT), ("roots", _INT),
       ("quarantined_calls", _INT), ("quarantined_fraction", _FLOAT), ("delivered_fraction", _FLOAT),
       ("generated_tokens_captured", _INT), ("generated_tokens_delivered", _INT)]
    + [(c, _INT) for c in LINK_COLUMNS]
    + [("unresolved_parent_calls", _INT), ("empty_generation_calls", _INT), ("after_terminal_calls", _INT),
       ("engine_refusals", _INT), ("context_refusals", _INT), ("refusal_ended_chain", _BOOL),
       ("capture_incomplete", _BOOL), ("terminal_call_id", _STR), ("terminal_attribution", _STR),
       ("error", _STR), ("source_notes", _STRS), ("source_bytes", _INT), ("source_mtime", _FLOAT),
       ("reward", _FLOAT), ("task_index", _INT), ("rollout_index", _INT),
       ("breaks", _INT), ("break_causes", _STRS), ("first_break_call", _STR), ("delivered_mask_sample", _BOOL),
       ("delivered_by", _STR), ("tokens_from", _STR), ("contiguous", _BOOL)]
)
"""Every column of the scan table, in order (docs/contract.md#scan-table, #scan-rollout-records,
#scan-diagnosis-columns, #scan-token-source)."""

COLUMNS: tuple[str, ...] = tuple(SCHEMA.names)


def _names(names: Sequence[str], shown: int = 10) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def column_differences(names: Sequence[str]) -> str:
    """How a table's column names differ from a scan table's, in words (missing, extra, order)."""
    have = set(names)
    if not have & set(COLUMNS):
        return f"it has none of the scan table's columns; its own: {_names(list(dict.fromkeys(names)))}"
    missing = [c for c in COLUMNS if c not in have]
    extra = [c for c in dict.fromkeys(names) if c not in set(COLUMNS)]
    parts = []
    if missing:
        parts.append(f"missing column{'s' if len(missing) > 1 else ''}: {_names(missing)}")
    if extra:
        parts.append(f"extra column{'s' if len(extra) > 1 else ''}: {_names(extra)}")
    repeated = [c for c in dict.fromkeys(names) if list(names).count(c) > 1]
    if repeated:
        parts.append(f"repeated column{'s' if len(repeated) > 1 else ''}: {_names(repeated)}")
    if not parts:
        # nothing missing, extra or repeated: the names are COLUMNS in another order
        first = next(i for i, (a, b) in enumerate(zip(names, COLUMNS, strict=True)) if a != b)
        parts.append(f"the columns are in another order: column {first + 1} is {names[first]}, "
                     f"expected {COLUMNS[first]}")
    return "; ".join(parts)


def type_differences(table: pa.Table) -> str:
    """Which columns of a table with the scan table's names do not convert to their scan-table type."""
    wrong = []
    for name, column in zip(table.column_names, table.columns, strict=True):
        expected = SCHEMA.field(name).type
        try:
            column.cast(expected)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            wrong.append(f"{name} is {column.type}, expected {expected}")
    return "; ".join(wrong) or "a column's values do not convert to the scan table's types"


RECORD_COLUMNS: tuple[str, ...] = ("reward", "task_index", "rollout_index")
"""Facts from rollout records (docs/contract.md#scan-rollout-records): added after the first tables were written, so a
table without them is read with them null (`with_record_columns`)."""

DIAGNOSIS_COLUMNS: tuple[str, ...] = ("breaks", "break_causes", "first_break_call", "delivered_mask_sample",
                                      "delivered_by")
"""Why lineage broke and what Gym delivered (docs/contract.md#scan-diagnosis-columns): added after the record
columns, so a table without them is read with them null (``break_causes`` empty; `with_record_columns`)."""


TOKENS_COLUMNS: tuple[str, ...] = ("tokens_from", "contiguous")
"""Where the tokens came from (docs/contract.md#scan-token-source): added after the diagnosis columns, so a
table without them is read with them null (`with_record_columns`)."""


def _later_columns(table: pa.Table) -> tuple[str, ...] | None:
    """The columns a table written before them lacks (its columns are exactly an earlier
    generation's), or None when it is not such a table."""
    names = tuple(table.schema.names)
    for added in (TOKENS_COLUMNS, (*DIAGNOSIS_COLUMNS, *TOKENS_COLUMNS),
                  (*RECORD_COLUMNS, *DIAGNOSIS_COLUMNS, *TOKENS_COLUMNS)):
        if names == COLUMNS[: -len(added)]:
            return added
    return None


def with_record_columns(table: pa.Table) -> pa.Table:
    """``table`` with the record (docs/contract.md#scan-rollout-records), diagnosis (#scan-diagnosis-columns) and
    tokens (#scan-token-source) columns appended when it was written before them (as nulls;
    ``break_causes`` as empty lists); any other table is returned unchanged."""
    added = _later_columns(table)
    if added is None:
        return table
    n = table.num_rows
    for name in added:
        field = SCHEMA.field(name)
        column = pa.array([[]] * n, field.type) if name == "break_causes" else pa.nulls(n, field.type)
        table = table.append_column(field, column)
    return table


def to_batch(rows: Sequence[Row]) -> pa.RecordBatch:
    """Rows (tuples in column order) as one Arrow record batch of `SCHEMA`."""
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(COLUMNS)  # every row holds every column
    return pa.RecordBatch.from_arrays(
        [pa.array(col, type=f.type) for col, f in zip(columns, SCHEMA, strict=True)], schema=SCHEMA)


def rows_of(table: pa.Table) -> list[dict[str, Any]]:
    """A table's rows as dicts (tests, small tables)."""
    return table.to_pylist()


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


STATUSES: tuple[str, ...] = ("completed", "max_output_tokens", "content_filter", "incomplete", "no response")
"""A row's status as a person reads it: ``status``, an incomplete one named by its ``incomplete_reason``
when that is the output-token limit or the content filter, and "no response" when none was built (a
null status). The Run page's status chart and filter and `tokencap diff`'s status shares use these."""


def status_codes(status: Any, incomplete_reason: Any) -> Any:
    """Per row, the index in `STATUSES` of its status (``status`` and ``incomplete_reason``: the
    table's columns, Arrow or anything numpy reads). Vectorised: no Python per row. A status that
    is already one of `STATUSES` (a frame the Run page made) keeps it; any other is "incomplete"."""
    import numpy as np
    import pandas as pd

    def values(column: Any) -> np.ndarray:
        if isinstance(column, (pa.Array, pa.ChunkedArray)):
            return np.asarray(column.to_numpy(zero_copy_only=False), dtype=object)
        return np.asarray(column, dtype=object)

    status, reason = values(status), values(incomplete_reason)
    codes = np.full(len(status), STATUSES.index("incomplete"), dtype=np.int64)
    for i, name in enumerate(STATUSES):
        codes[status == name] = i
    codes[pd.isna(status)] = STATUSES.index("no response")
    incomplete = status == "incomplete"
    for name in ("max_output_tokens", "content_filter"):
        codes[incomplete & (reason == name)] = STATUSES.index(name)
    return codes
