"""A scan table written to disk, read back (docs/contract.md#scan-table): checked against the schema
(`read_scan`), and told whether this tokencap, with these rollout records and this tokenizer, wrote it
(`read_current_scan`; `read_previous` for ``--since``, which reuses its rows of unchanged sources).

A table carries what it was written with in its parquet metadata (`metadata`): the code, the rollout
records' digest and the tokenizer's; a table whose metadata differs from this scan's is never reused,
and the note says why in words.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .errors import DiffTableGiven, ScanTableError
from .table import COLUMNS, SCHEMA, column_differences, is_diff_table, type_differences, with_record_columns

META_KEY = b"tokencap"


def _file_digest(path: str | os.PathLike[str] | None) -> str:
    if not path:
        return ""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def metadata(final_responses_path: str | None, tokenizer: str | None = None) -> dict[bytes, bytes]:
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


@dataclass
class Previous:
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


def is_current(meta: dict, final_responses_path: str | None, tokenizer: str | None = None) -> bool:
    """Whether a table's metadata says this tokencap (`code_identity`) wrote it, with these final responses
    and this tokenizer (each can change a row)."""
    return meta == orjson.loads(metadata(final_responses_path, tokenizer)[META_KEY])


def _why_not_current(meta: dict, final_responses_path: str | None, tokenizer: str | None) -> list[str]:
    """What differs between a table's metadata and this scan's, in words: only the actual reasons."""
    now = orjson.loads(metadata(final_responses_path, tokenizer)[META_KEY])
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
        table, meta = read_table(path)
    except ScanTableError:
        return None
    return table if is_current(meta, final_responses, tokenizer) else None


def read_previous(path: str, final_responses_path: str | None, notes: list[str],
                   tokenizer: str | None = None) -> Previous | None:
    table, meta = read_table(path)
    if not is_current(meta, final_responses_path, tokenizer):
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
    return Previous(table, spans)


def read_scan(path: str | os.PathLike[str] | bytes, *, name: str | None = None) -> pa.Table:
    """A scan table written by `scan` (a path, or the bytes of an upload), checked against the schema.

    ``name`` labels bytes in the error message (an uploaded file's name).
    """
    return read_table(path, name)[0]


_WRITE_ONE = "write one with `tokencap scan RUN -o TABLE.parquet`"


def read_table(path: str | os.PathLike[str] | bytes, name: str | None = None) -> tuple[pa.Table, dict]:
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


__all__ = ["META_KEY", "Previous", "is_current", "metadata", "read_current_scan", "read_previous", "read_scan",
           "read_table"]
