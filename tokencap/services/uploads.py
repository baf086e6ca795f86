"""Files uploaded to the app: kept as bytes, scanned in memory, stored on disk by digest, checked."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from ..export import write_atomically
from ..loading import load_snapshots
from ..loading.problems import FINAL_RESPONSES_HINT
from ..records import TokenCaptureSnapshot
from ..run import DiffTableGiven, ScanTableError, read_scan, table_of_snapshots

Progress = Callable[[int, int], None]

RUN_UPLOAD_TYPES = ("parquet", "json", "jsonl", "zip")
"""What the Run page's uploader takes: a scan table, or rollouts to scan in memory."""


@dataclass(frozen=True)
class Upload:
    """One uploaded file (name and bytes)."""

    name: str
    data: bytes = field(repr=False)

    @property
    def is_table(self) -> bool:
        return self.name.lower().endswith(".parquet")


def uploads_key(uploads: Iterable[Upload]) -> str:
    """A digest of the uploads' names and contents (the cache key of the table made from them)."""
    digest = hashlib.sha256()
    for u in uploads:
        digest.update(u.name.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(hashlib.sha256(u.data).digest())
    return digest.hexdigest()


def _base_name(name: str) -> str:
    for ext in (".jsonl", ".json", ".zip"):
        if name.endswith(ext):
            return name[: -len(ext)]
    return name


class NoCaptureUploaded(ValueError):
    """No uploaded file is a capture: each one's load error, one line a file (never a run of failed rows)."""


def table_of_uploads(uploads: Iterable[Upload], progress: Progress | None = None) -> pa.Table:
    """The run table of uploaded rollout files (JSON, JSONL, zips of a store), scanned in memory.

    A file that cannot be loaded, among files that can, is a row with its error (``load_error``),
    as `scan` makes it: a run table never drops a rollout. When no file can be loaded (an empty
    file, truncated JSON, an image, a rollout-records file) there is no run to show: raises
    `NoCaptureUploaded` with each file's error. Rows are sorted by (source, rollout id).
    """
    loaded: list[tuple[Upload, list[TokenCaptureSnapshot]]] = []
    errors = []
    for u in uploads:
        try:
            snapshots = load_snapshots(u.data, name=u.name)
        except ValueError as exc:  # LoadError / RecordError: the message names file, line, field
            errors.append(" ".join(str(exc).split()))
            snapshots = [TokenCaptureSnapshot.failed(_base_name(u.name), errors[-1])]
        loaded.append((u, snapshots))
    if loaded and len(errors) == len(loaded):
        raise NoCaptureUploaded(upload_problem(errors))
    total = sum(len(s) for _, s in loaded)
    done = 0
    tables = []
    for u, snapshots in loaded:
        def step(n: int, _total: int, base: int = done) -> None:
            if progress:
                progress(base + n, total)

        tables.append(table_of_snapshots(snapshots, u.name, source_bytes=len(u.data), progress=step))
        done += len(snapshots)
    if not tables:
        return table_of_snapshots([], "")
    table = pa.concat_tables(tables)
    return table.sort_by([("source", "ascending"), ("rollout_id", "ascending")])


def upload_problem(errors: list[str]) -> str:
    """What the Run page says when no uploaded file is a capture: each file's error (they name the file,
    the line and what is wrong), one after another, and what the uploader takes; a rollout-records file
    is sent to the Rollout records upload, in the page's words."""
    said = [e.replace(FINAL_RESPONSES_HINT, "upload it under Rollout records in the sidebar, and the run's "
                                         "captures here").rstrip(". ") for e in errors]
    return ("; ".join(said) + ". Open a run: its capture files (snapshot JSON, entries JSONL, a zip of a capture "
            "store) or its scan table (.parquet).")


def table_problem(exc: ScanTableError) -> str:
    """What the Run page says of a ``.parquet`` that is no scan table: the reader's message (the file,
    what is wrong, how to write a scan table); for a diff table, also how to compare two runs here."""
    if isinstance(exc, DiffTableGiven):
        return f"{exc}; or, to compare two runs here, open run A and add run B under Compare with another run"
    return str(exc)


def table_of_parquet(upload: Upload) -> pa.Table:
    """An uploaded scan table, checked (raises `ScanTableError` naming the upload)."""
    return read_scan(upload.data, name=upload.name)



def stored_upload(upload: Upload, directory: str | os.PathLike[str]) -> Path:
    """An uploaded records file as a file on disk (a scan reads records from a path).

    Named by its content's digest, so the same upload is one file and its path a stable
    cache key; written atomically (a reader never sees half a file).
    """
    suffix = ".jsonl" if upload.name.lower().endswith(".jsonl") else ".json"
    target = Path(directory) / f"{hashlib.sha256(upload.data).hexdigest()[:32]}{suffix}"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, lambda handle: handle.write(upload.data))
    return target



def check_upload_for(upload: Upload, rollout_id: str) -> str | None:
    """None when ``upload`` holds ``rollout_id``; else why it cannot open it."""
    if upload.is_table:
        return f"{upload.name} is a table; upload the rollout's own file (JSON, JSONL or a zip of store files)"
    try:
        ids = sorted(s.rollout_id for s in load_snapshots(upload.data, name=upload.name))
    except ValueError as exc:
        return " ".join(str(exc).split())
    if rollout_id in ids:
        return None
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    return f"{upload.name} holds {shown or 'no rollout'}, not {rollout_id}"


