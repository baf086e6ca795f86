"""The per-rollout work of a run: load one unit, build it, turn it into rows or export lines.

These functions run inside worker processes or Ray tasks, so they take and return only
small picklable values (units, rows as tuples, bytes). A rollout's snapshot, build and
token arrays live only while its row or line is made: memory is bounded by the largest
rollout in a shard, never by the size of the run.
"""

from __future__ import annotations

import io
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..export import write_summary
from ..loading import LoadError, load_snapshots, records_for
from ..loading.entries_jsonl import read_jsonl_records, snapshots_from_records
from ..loading.files import DirectorySource, Skipped, printable
from ..loading.final_responses import NO_FACTS, RecordFacts
from ..loading.rollouts import RecordSpan, rollout_at
from ..loading.store import base_name, error_message, load_store
from ..records import TokenCaptureSnapshot
from ..rollout import RolloutResult, build_rollout
from .diagnosed import diagnosis_facts
from .discover import RolloutUnit, spans_of
from .rows import Row, row_of


@dataclass(frozen=True)
class RunOptions:
    """What every rollout of a run is built with (sent once per shard to a worker)."""

    final_responses: Any = None  # a FinalResponses (terminal attribution), or None
    single_rollout: bool = False  # the source holds exactly one rollout (final-response lines without an id apply)
    only_trainable: bool = False  # export: skip masked rollouts
    # A tokenizer.json's path: refines the diagnosis columns (docs/contract.md#scan-diagnosis-columns, #decoded-text).
    tokenizer: str | None = None


def load_unit(unit: RolloutUnit) -> list[TokenCaptureSnapshot]:
    """The snapshots of one unit, sorted by rollout id; a failure is a failed snapshot, never an exception."""
    name = unit.names[0] if unit.names else unit.source
    label = printable(name)
    try:
        if unit.kind == "failed":
            return [TokenCaptureSnapshot.failed(unit.rollout_id or base_name(label), unit.error or "")]
        if unit.kind == "store":
            snapshots = load_store(_unit_source(unit))
        elif unit.kind == "jsonl":
            snapshots = _load_jsonl_rollout(unit, name, label)
        elif unit.kind == "rollouts":
            snapshots = [_load_record(unit, name, label)]
        else:
            snapshots = load_snapshots(os.path.join(unit.directory, name), name=label)
    except Exception as exc:  # noqa: BLE001 -- one bad rollout is a row with its error; the run goes on
        return [TokenCaptureSnapshot.failed(unit.rollout_id or base_name(label), error_message(exc, label))]
    return sorted(snapshots, key=lambda s: s.rollout_id)


def _unit_source(unit: RolloutUnit) -> DirectorySource:
    """One store prefix's files, read like `tokencap build DIR` reads them; labelled by the
    directory's own name, not its absolute path, so the table does not depend on where the
    run happens to be mounted."""
    return DirectorySource.of_names(Path(unit.directory), list(unit.names),
                                    printable(os.path.basename(unit.directory)),
                                    [Skipped(name, reason) for name, reason in unit.skipped])


def _load_jsonl_rollout(unit: RolloutUnit, name: str, label: str) -> list[TokenCaptureSnapshot]:
    """One rollout's lines of an indexed JSONL, with their real line numbers in errors."""
    with open(os.path.join(unit.directory, name), "rb") as handle:
        data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        spans = spans_of(unit)
        if spans.size and int((spans[:, 0] + spans[:, 1]).max()) > len(data):
            raise LoadError(f"{label}: the file shrank while the run was being scanned; scan again")
        lines = ((int(line), data[int(start):int(start + length)]) for start, length, line in spans)
        records = read_jsonl_records(lines, label)
        return snapshots_from_records(records, label)
    finally:
        data.close()


def _load_record(unit: RolloutUnit, name: str, label: str) -> TokenCaptureSnapshot:
    """One record's rollout of a rollouts file (docs/contract.md#token-rollouts), from its span."""
    ((start, length, line),) = spans_of(unit).tolist()
    with open(os.path.join(unit.directory, name), "rb") as handle:
        data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        if start + length > len(data):
            raise LoadError(f"{label}: the file shrank while the run was being scanned; scan again")
        span = RecordSpan(line, start, start + length, unit.rollout_id or "", True, note=unit.note)
        return rollout_at(data[start:start + length], span, label)
    finally:
        data.close()


def build_unit(unit: RolloutUnit, options: RunOptions, *, project: bool = True
               ) -> Iterator[tuple[TokenCaptureSnapshot, RolloutResult, RecordFacts, Any]]:
    """Each rollout of a unit with its build result, its record's facts and its record's
    evidence (`FinalResponses.evidence_for`, None without a record), one at a time
    (``project=False``: no payload, see `build_rollout`). The build never sees the evidence."""
    snapshots = load_unit(unit)
    # A final response without a rollout id applies only when the whole source is one rollout.
    single = options.single_rollout and len(snapshots) == 1
    for snapshot in snapshots:
        yield built(snapshot, options.final_responses, single_rollout=single, project=project)


def built(snapshot: TokenCaptureSnapshot, finals: Any, *, single_rollout: bool, project: bool = True
          ) -> tuple[TokenCaptureSnapshot, RolloutResult, RecordFacts, Any]:
    """One rollout built with the records that apply to it -- its own (docs/contract.md#token-rollouts), else ``finals``
    (a `FinalResponses` or None) -- with its record's facts and evidence. Both records is that
    rollout's error (a rollouts file inside a zip given with --final-responses), never an exception."""
    final, facts, evidence = None, NO_FACTS, None
    try:
        records = records_for(snapshot, finals)
    except LoadError as exc:
        snapshot, records = TokenCaptureSnapshot.failed(snapshot.rollout_id, str(exc)), None
    if records is not None:
        final = records.for_rollout(snapshot.rollout_id, single_rollout=single_rollout)
        facts = records.facts_for(snapshot.rollout_id, single_rollout=single_rollout)
    result = build_rollout(snapshot, final_response=final, project=project)
    if records is not None:
        evidence = records.evidence_for(snapshot.rollout_id, single_rollout=single_rollout)
    return snapshot, result, facts, evidence


def scan_shard(units: list[RolloutUnit], options: RunOptions) -> list[Row]:
    """The table rows of a shard of units, in unit order."""
    rows: list[Row] = []
    for unit in units:
        for snapshot, result, facts, evidence in build_unit(unit, options, project=False):  # a row reads no payload
            rows.append(row_of(result, snapshot, unit.source, unit.size, unit.mtime, facts,
                               diagnosis_facts(result, evidence, options.tokenizer)))
    return rows


def export_shard(units: list[RolloutUnit], options: RunOptions) -> tuple[list[str], int, bytes]:
    """(rollout ids seen, trainable, the JSONL lines to write) for a shard; each line is
    what `tokencap build` writes for that rollout."""
    out = io.BytesIO()
    seen: list[str] = []
    trainable = 0
    for unit in units:
        for snapshot, result, _facts, _evidence in build_unit(unit, options):
            seen.append(snapshot.rollout_id)
            trainable += not result.mask_sample
            if options.only_trainable and result.mask_sample:
                continue
            write_summary(out, result)
            out.write(b"\n")
    return seen, trainable, out.getvalue()
