"""Scanning and exporting a whole run (docs/contract.md#scan-table).

``scan`` writes the run table (one row per rollout) as parquet; ``export`` writes every
rollout's build result as JSONL, each line byte-identical to what `tokencap build` writes
for that rollout. Both discover the run first (`discover`), cut it into shards, work the
shards on an engine (`engines`) and write results in the discovery order, streaming:
rows are flushed in row groups and lines as their shard comes back, so neither the table
nor the trajectories of a run are ever held whole. Output is atomic (temporary file +
rename): an interrupted or failed run leaves nothing at the output path.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..export import write_atomically
from ..loading import final_responses_beside_rollouts
from ..loading.final_responses import FinalResponses
from ..records import TokenCaptureSnapshot
from .diagnosed import diagnosis_facts, tokenizer_at
from .discover import RolloutUnit, discover
from .engines import default_workers, run_shards
from .errors import DiffTableGiven, DiscoveryError, ScanTableError
from .rows import Row, row_of
from .table import COLUMNS, SCHEMA, column_differences, is_diff_table, to_batch, type_differences, with_record_columns
from .work import RunOptions, built, export_shard, scan_shard

Progress = Callable[[int, int], None]
"""``progress(rollouts_done, rollouts_total)``, called as shards complete."""

META_KEY = b"tokencap"
ROW_GROUP = 50_000
MAX_SHARD_UNITS = 32
MAX_SHARD_BYTES = 64 << 20


@dataclass
class RunSummary:
    """What a scan or export did, for the closing line a person reads."""

    rollouts: int = 0
    trainable: int = 0
    reused: int = 0
    written: int = 0
    notes: list[str] = field(default_factory=list)


def _shards(units: list[RolloutUnit], workers: int) -> list[list[RolloutUnit]]:
    """Consecutive units cut into shards: big enough to amortise a task, small enough to balance."""
    if not units:
        return []
    per_shard = max(1, min(MAX_SHARD_UNITS, math.ceil(len(units) / (16 * max(1, workers)))))
    shards: list[list[RolloutUnit]] = []
    current: list[RolloutUnit] = []
    size = 0
    for unit in units:
        if current and (len(current) >= per_shard or size + unit.size > MAX_SHARD_BYTES):
            shards.append(current)
            current, size = [], 0
        current.append(unit)
        size += unit.size
    shards.append(current)
    return shards


def _file_digest(path: str | os.PathLike[str] | None) -> str:
    if not path:
        return ""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _metadata(final_responses_path: str | None, tokenizer: str | None = None) -> dict[bytes, bytes]:
    """What a table is written with: the code, the rollout records' digest (their evidence and
    delivered values included: any byte of the file changes it) and the tokenizer's digest."""
    from ..identity import code_identity

    meta: dict[str, Any] = {"version": code_identity(), "final_responses_sha256": _file_digest(final_responses_path),
                            "tokenizer_sha256": _file_digest(tokenizer)}
    if tokenizer is None:  # docs/contract.md#tokenizers: the model's own tokenizer, from the local cache
        from ..diagnosis.tokenizer_lookup import cache_fingerprint

        found = cache_fingerprint()
        if found:  # left out when there is none, so tables of a machine without a cache stay current
            meta["tokenizer_cache"] = found
    return {META_KEY: orjson.dumps(meta)}


def check_tokenizer(tokenizer: str | os.PathLike[str] | None) -> str | None:
    """The ``tokenizer.json`` that ``tokenizer`` (a file, a model directory or ``Org/Name`` in the local
    Hugging Face cache, docs/contract.md#tokenizers) names, read once here so a bad one fails before any work starts
    (`tokencap.diagnosis.TokenizerError`, one line); None for none."""
    if tokenizer is None:
        return None
    found = tokenizer_at(os.fspath(tokenizer))
    return str(getattr(found, "path", os.fspath(tokenizer)))  # the tokenizer.json a directory or model name gives


def _load_final_responses(path: str | FinalResponses | None) -> Any:
    """The rollout records at ``path``; records a caller has read already (to blame their errors on
    its own flag, say) are used as they are."""
    if not path:
        return None
    if isinstance(path, FinalResponses):
        return path
    from ..loading import load_final_responses  # terminal attribution (docs/contract.md#attribution)

    return load_final_responses(path)


@dataclass
class _Previous:
    """An earlier table of the same run, indexed by source for ``--since``."""

    table: pa.Table
    spans: dict[str, tuple[int, float, int, int]]  # source -> (bytes, mtime, first row, row count)

    def keep(self, source: str, size: int, mtime: float) -> bool:
        """True when the rollout(s) at ``source`` must be built (new or changed)."""
        old = self.spans.get(source)
        return old is None or old[0] != size or old[1] != mtime

    def rows(self, source: str) -> pa.Table:
        _, _, start, count = self.spans[source]
        return self.table.slice(start, count)


def _is_current(meta: dict, final_responses_path: str | None, tokenizer: str | None = None) -> bool:
    """Whether a table's metadata says this tokencap (`code_identity`) wrote it, with these final responses
    and this tokenizer (each can change a row)."""
    return meta == orjson.loads(_metadata(final_responses_path, tokenizer)[META_KEY])


def _why_not_current(meta: dict, final_responses_path: str | None, tokenizer: str | None) -> list[str]:
    """What differs between a table's metadata and this scan's, in words: only the actual reasons."""
    now = orjson.loads(_metadata(final_responses_path, tokenizer)[META_KEY])
    if not meta:
        return ["it carries no tokencap metadata"]
    reasons = []
    if meta.get("record_columns") is False:
        reasons.append("it was written before the reward and index columns existed")
    if meta.get("version") != now["version"]:
        reasons.append("another tokencap (another version, or an edit to its code) wrote it")
    for key, flag in (("final_responses_sha256", "--final-responses"), ("tokenizer_sha256", "--tokenizer")):
        then, current = meta.get(key), now[key]
        if then == current:
            continue
        if not then:
            reasons.append(f"it was scanned without {flag}, this scan has it")
        elif not current:
            reasons.append(f"it was scanned with {flag}, this scan has none")
        else:
            reasons.append(f"it was scanned with another {flag} file (its bytes differ)")
    if meta.get("tokenizer_cache") != now.get("tokenizer_cache"):
        reasons.append("another tokenizer was found in the local Hugging Face cache for the rollouts' models")
    return reasons or ["its tokencap metadata differs from this scan's"]


def read_current_scan(path: str | os.PathLike[str], final_responses: str | None = None,
                      tokenizer: str | None = None) -> pa.Table | None:
    """The scan table at ``path`` when this tokencap version wrote it with these final
    responses and this tokenizer; None when it was not (or is not a readable scan table)."""
    try:
        table, meta = _read_table(path)
    except ScanTableError:
        return None
    return table if _is_current(meta, final_responses, tokenizer) else None


def _read_previous(path: str, final_responses_path: str | None, notes: list[str],
                   tokenizer: str | None = None) -> _Previous | None:
    table, meta = _read_table(path)
    if not _is_current(meta, final_responses_path, tokenizer):
        why = "; ".join(_why_not_current(meta, final_responses_path, tokenizer))
        notes.append(f"{path} is not reused ({why}); every rollout was built again")
        return None
    sources = table.column("source").to_pylist()
    sizes = table.column("source_bytes").to_pylist()
    mtimes = table.column("source_mtime").to_pylist()
    spans: dict[str, tuple[int, float, int, int]] = {}
    for i, src in enumerate(sources):
        if src in spans:
            size, mtime, start, count = spans[src]
            spans[src] = (size, mtime, start, count + 1)
        else:
            spans[src] = (sizes[i], mtimes[i], i, 1)
    return _Previous(table, spans)


def _plan(source: str | os.PathLike[str], since: str | None, final_responses: str | FinalResponses | None,
          workers: int, summary: RunSummary, tokenizer: str | None = None
          ) -> tuple[list[Any], _Previous | None, int, bool]:
    """The run as an ordered plan of shards (lists of units) and reused sources (str)."""
    previous = None
    if since:
        assert not isinstance(final_responses, FinalResponses)  # scan_batches refuses records read with since
        previous = _read_previous(since, final_responses, summary.notes, tokenizer)
    skipped: list[str] = []
    units = discover(source, keep=previous.keep if previous else (lambda s, b, m: True), skipped=skipped,
                     notes=summary.notes)
    if final_responses and any(unit.kind == "rollouts" for unit in units):
        raise DiscoveryError(final_responses_beside_rollouts(str(getattr(final_responses, "name", final_responses))))
    if skipped:
        shown = ", ".join(skipped[:5]) + (f" and {len(skipped) - 5} more" if len(skipped) > 5 else "")
        summary.notes.append(f"skipped {len(skipped)} entr{'y' if len(skipped) == 1 else 'ies'} that "
                             f"{'is' if len(skipped) == 1 else 'are'} not a regular file or directory "
                             f"(symlinks, pipes, devices are never read): {shown}")
    if not units and since is None:
        # A run with nothing to scan is a mistake, as `tokencap build` says of it, not an empty
        # table (with --since it is a run whose files all went away since the earlier scan).
        raise _nothing_to_scan(source, summary.notes[-1] if skipped else "")
    plan: list[Any] = []
    fresh: list[RolloutUnit] = []
    total = 0

    def flush() -> None:
        plan.extend(_shards(fresh, workers))
        fresh.clear()

    for unit in units:
        if unit.kind == "reused":
            flush()
            plan.append(unit.source)
            count = previous.spans[unit.source][3] if previous else 0
            total += count
            summary.reused += count
        else:
            fresh.append(unit)
            total += 1
    flush()
    single = len(units) == 1 and units[0].kind != "reused"
    return plan, previous, total, single


def _nothing_to_scan(source: str | os.PathLike[str], skipped_note: str) -> DiscoveryError:
    """The error for a run without a rollout: the loader's words (those `tokencap build` prints)
    when it finds nothing either, else what the scan skipped."""
    from ..loading import LoadError, iter_snapshots

    try:
        next(iter(iter_snapshots(source)), None)
    except LoadError as exc:
        return DiscoveryError(str(exc))
    return DiscoveryError(f"{source}: no rollout to scan; {skipped_note or 'nothing in it can be read'}")


def _ordered_results(fn: Callable, plan: list[Any], options: RunOptions, engine: str, workers: int,
                     ray_address: str | None) -> Iterator[tuple[str, Any]]:
    shards = [item for item in plan if not isinstance(item, str)]
    results = run_shards(fn, iter(shards), (options,), engine=engine, workers=workers, ray_address=ray_address)
    try:
        for item in plan:
            if isinstance(item, str):
                yield "reused", item
            else:
                yield "built", next(results)
    finally:
        results.close()


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
    finals = _load_final_responses(final_responses)  # a bad file fails before any work starts
    tokenizer = check_tokenizer(tokenizer)
    plan, previous, total, single = _plan(source, since, final_responses, workers, summary, tokenizer)
    options = RunOptions(final_responses=finals, single_rollout=single, tokenizer=tokenizer)
    done = 0
    if progress:
        progress(0, total)
    buffer: list[Row] = []
    ids: list[str] = []
    for kind, value in _ordered_results(scan_shard, plan, options, engine, workers, ray_address):
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
        writer = pq.ParquetWriter(handle, SCHEMA.with_metadata(_metadata(final_responses, tokenizer)))
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


def read_scan(path: str | os.PathLike[str] | bytes, *, name: str | None = None) -> pa.Table:
    """A scan table written by `scan` (a path, or the bytes of an upload), checked against the schema.

    ``name`` labels bytes in the error message (an uploaded file's name).
    """
    return _read_table(path, name)[0]


_WRITE_ONE = "write one with `tokencap scan RUN -o TABLE.parquet`"


def _read_table(path: str | os.PathLike[str] | bytes, name: str | None = None) -> tuple[pa.Table, dict]:
    """The checked table and the tokencap metadata it was written with."""
    label = name or (path if not isinstance(path, (bytes, bytearray, memoryview)) else "uploaded table")
    try:
        table = pq.read_table(pa.BufferReader(path) if isinstance(path, (bytes, bytearray, memoryview)) else path)
    except Exception as exc:  # noqa: BLE001 -- any unreadable file is one message
        raise ScanTableError(f"{label}: not a readable parquet file ({type(exc).__name__}: {exc}); "
                             f"{_WRITE_ONE}") from None
    meta = orjson.loads((table.schema.metadata or {}).get(META_KEY, b"{}"))
    upgraded = with_record_columns(table)
    if upgraded is not table:
        table = upgraded
        meta = {**meta, "record_columns": False}  # lacks later columns: never equal to a current scan's
    if table.schema.names != list(COLUMNS):
        if is_diff_table(table.schema.names):
            raise DiffTableGiven(f"{label}: is a diff table (what `tokencap diff -o` writes, one row per joined "
                                 f"rollout), not a scan table; {_WRITE_ONE}")
        raise ScanTableError(f"{label}: not a tokencap scan table ({column_differences(table.schema.names)}); "
                             f"{_WRITE_ONE}")
    try:
        table = table.replace_schema_metadata(None).cast(SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        raise ScanTableError(f"{label}: not a tokencap scan table ({type_differences(table)}); {_WRITE_ONE}") from None
    verdicts = table.column("mask_sample")
    if verdicts.null_count:  # a row without a verdict is neither trainable nor masked: never guessed
        first = table.column("rollout_id")[pc.index(pc.is_null(verdicts), True).as_py()].as_py()
        raise ScanTableError(f"{label}: column 'mask_sample' is null on {verdicts.null_count:,} row"
                             f"{'s' if verdicts.null_count != 1 else ''} (first: rollout {first!r}), so their "
                             f"verdicts are unknown; {_WRITE_ONE}")
    return table, meta


def export(source: str | os.PathLike[str], out: str | os.PathLike[str] | BinaryIO, *, only_trainable: bool = False,
           workers: int | None = None, engine: str = "local", ray_address: str | None = None,
           final_responses: str | None = None, progress: Progress | None = None) -> RunSummary:
    """Write every rollout's build result as JSONL, in the scan's order: atomically to the path ``out``,
    or as it comes to ``out`` when that is an open binary handle (standard output, `tokencap export -o -`)."""
    workers = workers or default_workers()
    summary = RunSummary()
    finals = _load_final_responses(final_responses)
    plan, _, total, single = _plan(source, None, final_responses, workers, summary)
    options = RunOptions(final_responses=finals, single_rollout=single, only_trainable=only_trainable)

    def write(handle: BinaryIO) -> None:
        done = 0
        if progress:
            progress(0, total)
        ids: list[str] = []
        for _kind, (seen, trainable, lines) in _ordered_results(export_shard, plan, options, engine, workers,
                                                                 ray_address):
            handle.write(lines)
            summary.trainable += trainable
            summary.written += lines.count(b"\n")
            done += len(seen)
            if options.final_responses is not None:
                ids.extend(seen)
            if progress:
                progress(done, max(total, done))
        summary.rollouts = done
        if options.final_responses is not None:
            summary.notes.extend(options.final_responses.notes(ids))

    if isinstance(out, (str, os.PathLike)):
        write_atomically(out, write)
    else:
        write(out)
    return summary


def relative_source_path(root: str | os.PathLike[str], source: str) -> list[Path]:
    """The files a row's ``source`` names under ``root`` (a store prefix names several)."""
    from ..loading.store import ENTRIES_SUFFIX, store_file
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
