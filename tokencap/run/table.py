"""The run scan table (SPEC 11): one row per rollout, fixed columns, fixed types.

The column list is the contract a dashboard or a notebook reads, so it is declared once
here as an Arrow schema and every row is made by `row_of` from a build result. A rollout
that could not be loaded is a row like any other (``reason_load_error``, ``error``): a
scan never drops a rollout, because a silent gap in a run's table reads as "fine".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from ..builder import (
    DELTA_UNRECONSTRUCTABLE,
    DUPLICATE_CONFLICT,
    ENTRY_DIGEST_MISMATCH,
    MISSING_RESOLUTION,
    PARENT_DIGEST_MISMATCH,
    PARENT_MISSING,
    PARENT_MISSING_RECOVERED,
    PARENT_UNRESOLVED,
)
from ..records import CONTEXT_LENGTH_EXCEEDED, TokenCaptureSnapshot
from ..rollout import MASK_REASON_ORDER, RolloutResult

LINK_NOTES = (
    PARENT_UNRESOLVED, PARENT_DIGEST_MISMATCH, PARENT_MISSING_RECOVERED, PARENT_MISSING,
    MISSING_RESOLUTION, DUPLICATE_CONFLICT, DELTA_UNRECONSTRUCTABLE, ENTRY_DIGEST_MISMATCH,
)
"""The parent-link notes of SPEC 4.5 and 4.1-4.2, in the table's column order."""

REASON_COLUMNS = tuple(f"reason_{r}" for r in MASK_REASON_ORDER)
LINK_COLUMNS = tuple(f"link_{n}" for n in LINK_NOTES)

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
       ("error", _STR), ("source_notes", _STRS), ("source_bytes", _INT), ("source_mtime", _FLOAT)]
)
"""Every column of the scan table, in order (SPEC 11)."""

COLUMNS: tuple[str, ...] = tuple(SCHEMA.names)

Row = tuple
"""One row: a tuple in `COLUMNS` order (tuples pickle small and cheaply between workers)."""


def row_of(result: RolloutResult, snapshot: TokenCaptureSnapshot, source: str, source_bytes: int,
           source_mtime: float) -> Row:
    """The table row of one built rollout."""
    m = result.metrics
    reasons = set(result.mask_reasons)
    links = m.get("parent_link_failures") or {}
    build = result.build
    terminal = build.notes.terminal_call_id if build is not None else result.terminal_call_id
    attribution = m.get("terminal_attribution")
    return (
        result.rollout_id, source, snapshot.snapshot_id, bool(result.mask_sample), list(result.mask_reasons),
        *(r in reasons for r in MASK_REASON_ORDER),
        m["status"], m["incomplete_reason"], m["n_calls"], m["chains"], m["roots"], m["quarantined_calls"],
        float(m["quarantined_fraction"]), float(m["delivered_fraction"]),
        m["generated_tokens_captured"], m["generated_tokens_delivered"],
        *(int(links.get(n, 0)) for n in LINK_NOTES),
        m["unresolved_parent_calls"], m["empty_generation_calls"], m["after_terminal_calls"],
        m["engine_refusals"],
        sum(1 for r in snapshot.engine_refusals if r.code == CONTEXT_LENGTH_EXCEEDED),
        any(v.ended_chain for v in result.refusal_verdicts),
        bool(m["capture_incomplete"]), terminal,
        attribution.get("outcome") if isinstance(attribution, dict) else None,
        m["error"], list(snapshot.source_notes), int(source_bytes), float(source_mtime),
    )


def to_batch(rows: Sequence[Row]) -> pa.RecordBatch:
    """Rows (tuples in column order) as one Arrow record batch of `SCHEMA`."""
    columns = list(zip(*rows)) if rows else [()] * len(COLUMNS)
    return pa.RecordBatch.from_arrays(
        [pa.array(col, type=f.type) for col, f in zip(columns, SCHEMA)], schema=SCHEMA)


def to_table(rows: Iterable[Row]) -> pa.Table:
    return pa.Table.from_batches([to_batch(list(rows))], schema=SCHEMA)


def rows_of(table: pa.Table) -> list[dict[str, Any]]:
    """A table's rows as dicts (tests, small tables)."""
    return table.to_pylist()
