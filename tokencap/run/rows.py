"""One scan-table row per rollout, made from a build result (docs/contract.md#scan-table), without pyarrow.

Workers import only this module (and the build), so they start light; `table` turns rows
into Arrow batches in the coordinating process. A rollout that could not be loaded is a
row like any other (``reason_load_error``, ``error``): a scan never drops a rollout,
because a silent gap in a run's table reads as "fine".
"""

from __future__ import annotations

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
from ..loading.rollouts import from_output_items
from ..records import CONTEXT_LENGTH_EXCEEDED, TokenCaptureSnapshot
from ..rollout import MASK_REASON_ORDER, RolloutResult
from .diagnosed import NOT_BUILT, DiagnosisFacts

LINK_NOTES = (
    PARENT_UNRESOLVED, PARENT_DIGEST_MISMATCH, PARENT_MISSING_RECOVERED, PARENT_MISSING,
    MISSING_RESOLUTION, DUPLICATE_CONFLICT, DELTA_UNRECONSTRUCTABLE, ENTRY_DIGEST_MISMATCH,
)
"""The parent-link notes of docs/contract.md#builder-parents and #builder-dedupe to #builder-materialize, in
the table's column order."""

REASON_COLUMNS = tuple(f"reason_{r}" for r in MASK_REASON_ORDER)
LINK_COLUMNS = tuple(f"link_{n}" for n in LINK_NOTES)

Row = tuple
"""One row: a tuple in the table's column order (tuples pickle small and cheaply between workers)."""


def row_of(result: RolloutResult, snapshot: TokenCaptureSnapshot, source: str, source_bytes: int,
           source_mtime: float,
           facts: tuple[float | None, int | None, int | None, str | None] = (None, None, None, None),
           diagnosis: DiagnosisFacts = NOT_BUILT) -> Row:
    """The table row of one built rollout; ``facts`` are what its rollout record says
    (reward, task index, rollout index, a note: `RecordFacts`), docs/contract.md#scan-rollout-records;
    ``diagnosis`` the values after them (`diagnosed.diagnosis_facts`, #scan-diagnosis-columns), computed
    from the finished build and never read by any column before them."""
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
        m["error"], [*snapshot.source_notes, *([facts[3]] if facts[3] else [])], int(source_bytes),
        float(source_mtime), facts[0], facts[1], facts[2],
        diagnosis.breaks, list(diagnosis.break_causes), diagnosis.first_break_call, diagnosis.delivered_mask_sample,
        diagnosis.delivered_by, tokens_from(snapshot), contiguous(result, snapshot),
    )


def tokens_from(snapshot: TokenCaptureSnapshot) -> str:
    """Where a rollout's tokens came from (docs/contract.md#scan-token-source): ``output_items`` for a rollout read from
    a rollout record's output items (docs/contract.md#token-rollouts), else ``capture``."""
    return "output_items" if from_output_items(snapshot) else "capture"


def contiguous(result: RolloutResult, snapshot: TokenCaptureSnapshot) -> bool | None:
    """For a rollout read from output items, whether every call's link verified: each
    token-bearing item's prompt starts with every token before it, NeMo RL's check before
    training (docs/contract.md#scan-token-source); None for a capture, and for a rollout that was not built."""
    if not from_output_items(snapshot) or result.build is None:
        return None
    m = result.metrics
    return not m["parent_link_failures"] and m["unresolved_parent_calls"] == 0 and m["roots"] == 1
