"""Loading snapshots from every input format the upstream tools write (SPEC 3).

`load_snapshots` is the one entry point: a path (snapshot JSON, entries JSONL, a
capture-store directory, or a zip of one) or the bytes of such a file.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from ..records import RecordError, TokenCaptureSnapshot
from .final_responses import FinalResponses, load_final_responses
from .store import FileSource, load_store
from .text import LoadError, load_text

ZIP_MAGIC = b"PK\x03\x04"

__all__ = ["FinalResponses", "LoadError", "load_final_responses", "load_snapshots"]


def load_snapshots(source: str | os.PathLike[str] | bytes | bytearray | memoryview, *,
                   name: str | None = None) -> list[TokenCaptureSnapshot]:
    """Load every rollout in ``source``.

    A single file or bytes raises `LoadError` (a `ValueError`) naming the file, line,
    call, field and problem. In a directory or zip, a bad rollout comes back as a
    snapshot with `load_error` set and `incomplete` true, and the others still load.
    ``name`` labels bytes in error messages (an uploaded file's name, say).
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _load_bytes(bytes(source) if not isinstance(source, bytes) else source, name)
    path = Path(source)
    label = name or str(path)
    if path.is_dir():
        return load_store(FileSource.from_directory(path))
    try:
        data = _read(path)
    except FileNotFoundError:
        raise LoadError(f"{label}: no such file or directory") from None
    except OSError as exc:
        raise LoadError(f"{label}: cannot be read ({exc.strerror or exc})") from None
    return _load_bytes(data, label)


_MMAP_THRESHOLD = 8 << 20


def _read(path: Path) -> bytes | mmap.mmap:
    """The file's bytes; a big file is memory-mapped instead of copied (the parsers read
    buffers, and every token array they produce is its own copy, so nothing outlives it)."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < _MMAP_THRESHOLD:
            return handle.read()
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


def _load_bytes(data: bytes | mmap.mmap, name: str | None) -> list[TokenCaptureSnapshot]:
    if data[:4] == ZIP_MAGIC:
        return load_store(FileSource.from_zip(bytes(data) if isinstance(data, mmap.mmap) else data,
                                              name or "zip archive"))
    try:
        return load_text(data, name)
    except RecordError as exc:  # defensive: every path should already say where
        raise LoadError(str(exc.located(name)) if name else str(exc)) from None
    except RecursionError:
        raise LoadError(f"{name or 'input'}: JSON nested too deeply to read (a hostile or corrupt file?)") from None
