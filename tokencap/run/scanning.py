"""Scanning a whole run (docs/contract.md#scan-table): the run table, one row per rollout.

``scan`` writes the table as parquet; `scan_batches` streams it, `scan_table` holds it in
memory, `table_of_snapshots` makes it of rollouts already loaded. A scan plans the run first
(`planning`: discover it, cut it into shards, work them on an engine) and writes results in
the discovery order, streaming: rows are flushed in row groups as their shard comes back, so
the table of a run is never held whole. Output is atomic (temporary file + rename): an
interrupted or failed scan leaves nothing at the output path.

Its parts live beside it: `planning` (the plan and `RunSummary`), `reading` (a written table
read back: `read_scan`, `read_current_scan`) and `exporting` (`export`, the run's build results
as JSONL, planned the same way); their public names are importable from here too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from ..export import write_atomically
from ..loading.final_responses import FinalResponses
from ..records import TokenCaptureSnapshot
from .diagnosed import diagnosis_facts
from .engines import default_workers
from .exporting import export
from .planning import Progress, RunSummary, check_tokenizer, ordered_results, plan_run, rollout_records
from .reading import metadata, read_current_scan, read_scan
from .rows import Row, row_of
from .table import SCHEMA, to_batch
from .work import RunOptions, built, scan_shard

ROW_GROUP = 50_000


def scan_batches(source: str | os.PathLike[str], *, workers: int | None = None, engine: str = "local",
                 ray_address: str | None = None, final_responses: str | FinalResponses | None = None,
                 since: str | None = None, progress: Progress | None = None,
                 summary: RunSummary | None = None, tokenizer: str | os.PathLike[str] | None = None
                 ) -> Iterator[pa.RecordBatch | pa.Table]:
    """The run table as a stream of record batches (or reused slices), in table order.

    ``final_responses`` is the rollout records' path, or records already read (not with ``since``,
    whose reuse rule compares the file's digest). ``tokenizer`` (a tokenizer.json's path) refines
    the diagnosis columns only (docs/contract.md#scan-diagnosis-columns)."""
    if since and isinstance(final_responses, FinalResponses):
        raise TypeError("since needs the rollout records' path, not records already read")
    workers = workers or default_workers()
    summary = summary if summary is not None else RunSummary()
    finals = rollout_records(final_responses)  # a bad file fails before any work starts
    tokenizer = check_tokenizer(tokenizer)
    plan, previous, total, single = plan_run(source, since, final_responses, workers, summary, tokenizer)
    options = RunOptions(final_responses=finals, single_rollout=single, tokenizer=tokenizer)
    done = 0
    if progress:
        progress(0, total)
    buffer: list[Row] = []
    ids: list[str] = []
    for kind, value in ordered_results(scan_shard, plan, options, engine, workers, ray_address):
        if kind == "reused":
            if buffer:
                yield to_batch(buffer)
                buffer = []
            assert previous is not None  # only an earlier scan's table lets a unit be reused
            rows = previous.rows(value)
            summary.trainable += rows.num_rows - sum(rows.column("mask_sample").to_pylist())
            done += rows.num_rows
            if options.final_responses is not None:
                ids.extend(rows.column("rollout_id").to_pylist())
            yield rows
        else:
            buffer.extend(value)
            if options.final_responses is not None:
                ids.extend(r[0] for r in value)
            summary.trainable += sum(1 for r in value if not r[3])
            done += len(value)
            if len(buffer) >= ROW_GROUP:
                yield to_batch(buffer)
                buffer = []
        if progress:
            progress(done, max(total, done))
    if buffer:
        yield to_batch(buffer)
    summary.rollouts = done
    if options.final_responses is not None:
        summary.notes.extend(options.final_responses.notes(ids))


def scan(source: str | os.PathLike[str], out: str | os.PathLike[str], *, workers: int | None = None,
         engine: str = "local", ray_address: str | None = None, final_responses: str | None = None,
         since: str | None = None, progress: Progress | None = None,
         tokenizer: str | os.PathLike[str] | None = None) -> RunSummary:
    """Write the run table of ``source`` to ``out`` (parquet), atomically."""
    summary = RunSummary()
    tokenizer = check_tokenizer(tokenizer)  # before the output is opened

    def write(handle: BinaryIO) -> None:
        writer = pq.ParquetWriter(handle, SCHEMA.with_metadata(metadata(final_responses, tokenizer)))
        pending: list[pa.Table] = []
        rows = 0

        def flush() -> None:
            nonlocal rows
            if pending:
                writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP)
                pending.clear()
                rows = 0

        try:
            for part in scan_batches(source, workers=workers, engine=engine, ray_address=ray_address,
                                     final_responses=final_responses, since=since, progress=progress,
                                     summary=summary, tokenizer=tokenizer):
                table = part if isinstance(part, pa.Table) else pa.Table.from_batches([part], schema=SCHEMA)
                pending.append(table.replace_schema_metadata(None).cast(SCHEMA))
                rows += table.num_rows
                if rows >= ROW_GROUP:
                    flush()
            flush()
        finally:
            writer.close()

    write_atomically(out, write)
    summary.written = summary.rollouts
    return summary


def scan_table(source: str | os.PathLike[str], **kwargs: Any) -> pa.Table:
    """The whole run table in memory (tests, notebooks, the app on modest runs)."""
    parts = [p if isinstance(p, pa.Table) else pa.Table.from_batches([p], schema=SCHEMA)
             for p in scan_batches(source, **kwargs)]
    if not parts:
        return SCHEMA.empty_table()
    return pa.concat_tables([p.replace_schema_metadata(None).cast(SCHEMA) for p in parts])


def table_of_snapshots(snapshots: Iterable[TokenCaptureSnapshot], source_label: str, *, source_bytes: int = 0,
                       source_mtime: float = 0.0, progress: Progress | None = None,
                       tokenizer: str | os.PathLike[str] | None = None) -> pa.Table:
    """The scan table of rollouts already in memory (an upload read as a run), sorted by rollout id.

    Each snapshot is built as `scan` builds it, and every row's ``source`` is
    ``source_label`` (the uploaded file's name): the rows equal those `scan` writes for
    the same file on disk, bar ``source_mtime``. ``progress(done, total)`` follows the builds.
    """
    ordered = sorted(snapshots, key=lambda s: s.rollout_id)
    if progress:
        progress(0, len(ordered))
    rows: list[Row] = []
    tokenizer = check_tokenizer(tokenizer)
    for n, snapshot in enumerate(ordered, 1):
        # A rollout read from a record's items brings its own record (docs/contract.md#token-rollouts), as a scan's
        # does.
        snapshot, result, facts, evidence = built(snapshot, None, single_rollout=False, project=False)
        rows.append(row_of(result, snapshot, source_label, source_bytes, source_mtime, facts,
                           diagnosis=diagnosis_facts(result, evidence, tokenizer)))
        if progress:
            progress(n, len(ordered))
    return pa.Table.from_batches([to_batch(rows)], schema=SCHEMA)


def relative_source_path(root: str | os.PathLike[str], source: str) -> list[Path]:
    """The files a row's ``source`` names under ``root`` (a store prefix names several)."""
    from ..loading.store_files import ENTRIES_SUFFIX, store_file
    from .discover import STORE_LABEL

    base = Path(root)
    if base.is_file():
        # A store's records file given as the run: its one row is labelled by the rollout's store prefix.
        store = store_file(base.name)
        prefix = source[: -len(STORE_LABEL)] if source.endswith(STORE_LABEL) else None
        return [base] if base.name == source or store == (prefix, ENTRIES_SUFFIX) else []
    if source.endswith(STORE_LABEL):
        prefix = source[: -len(STORE_LABEL)]
        directory = (base / prefix).parent
        stem = Path(prefix).name
        if not directory.is_dir():
            return []
        return sorted(p for p in directory.iterdir() if p.name.startswith(f"{stem}.tokens.") and p.is_file())
    path = base / source
    return [path] if path.is_file() else []


__all__ = ["ROW_GROUP", "Progress", "RunSummary", "check_tokenizer", "export", "read_current_scan", "read_scan",
           "relative_source_path", "scan", "scan_batches", "scan_table", "table_of_snapshots"]
