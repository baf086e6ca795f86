"""Loading snapshots from every input format the upstream tools write (docs/contract.md#input).

`load_snapshots` is the one entry point: a path (snapshot JSON, entries JSONL, a
capture-store directory, or a zip of one) or the bytes of such a file. `iter_snapshots`
is the same, lazily: a directory or zip gives its rollouts one at a time, so a store of
thousands of rollouts costs the memory of one. What the loader refuses, and the limits it
enforces, are in `tokencap.loading.files` and `tokencap.limits`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from ..record_errors import RecordError
from ..records import TokenCaptureSnapshot
from .capture_text import load_text
from .files import (
    Buffer,
    DirectorySource,
    MemorySource,
    kind_of,
    open_regular,
    pread,
    printable,
    read_descriptor,
    zip_source,
)
from .final_responses import FinalResponses, load_final_responses
from .problems import LoadError
from .raw_records import TOO_DEEP
from .rollouts import read_rollouts
from .store import iter_store, load_store_file
from .store_files import ENTRIES_SUFFIX, sibling_alone_message, store_file, store_rollout_source

ZIP_MAGIC = b"PK\x03\x04"
EMPTY_ZIP_MAGIC = b"PK\x05\x06"  # a zip with no member starts with its end-of-directory record

__all__ = ["FinalResponses", "LoadError", "final_responses_beside_rollouts", "iter_snapshots", "load_final_responses",
           "load_snapshots", "records_for", "responses_for"]

Source = str | os.PathLike[str] | bytes | bytearray | memoryview


def load_snapshots(source: Source, *, name: str | None = None) -> list[TokenCaptureSnapshot]:
    """Load every rollout in ``source``.

    A single file or bytes raises `LoadError` (a `ValueError`) naming the file, line,
    call, field and problem. In a directory or zip, a bad rollout comes back as a
    snapshot with `load_error` set and `incomplete` true, and the others still load.
    ``name`` labels bytes in error messages (an uploaded file's name, say).
    """
    return list(iter_snapshots(source, name=name))


def iter_snapshots(source: Source, *, name: str | None = None,
                   rollout_id: str | None = None) -> Iterator[TokenCaptureSnapshot]:
    """`load_snapshots`, one rollout at a time (only ``rollout_id``'s, when given).

    Everything that concerns the source as a whole -- it does not exist, is not a regular
    file or directory, is not a readable zip, exceeds a limit, holds nothing loadable --
    raises `LoadError` here, before the first snapshot. A single file is loaded (or
    fails) as a whole first; a directory or zip then yields its rollouts in rollout-id
    order, each with its own `load_error` when it is bad, and never raises.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        snapshots = _from_buffer(source, name, None, rollout_id)
    else:
        snapshots = _from_path(Path(source), name, rollout_id)
    if isinstance(snapshots, list):
        return iter([s for s in snapshots if rollout_id is None or s.rollout_id == rollout_id])
    return snapshots


def records_for(snapshot: TokenCaptureSnapshot, finals: FinalResponses | None) -> FinalResponses | None:
    """The rollout records that apply to ``snapshot``: its own record when it was read from
    one (docs/contract.md#token-rollouts), else ``finals`` (``--final-responses``). Both is a `LoadError`: a rollouts
    file is its own records, and nothing says which of two records to believe."""
    if snapshot.record is None:
        return finals
    if finals is not None:
        raise LoadError(final_responses_beside_rollouts(finals.name))
    return snapshot.record


def responses_for(snapshot: TokenCaptureSnapshot, finals: FinalResponses | None, *, single_rollout: bool,
                  evidence: bool = False) -> tuple[dict | None, dict | None]:
    """(the final response, the record's harness evidence when ``evidence``) that apply to
    ``snapshot``: from its own record (docs/contract.md#token-rollouts) or from ``finals`` (`records_for`, which
    raises when both are given)."""
    records = records_for(snapshot, finals)
    if records is None:
        return None, None
    return (records.for_rollout(snapshot.rollout_id, single_rollout=single_rollout),
            records.evidence_for(snapshot.rollout_id, single_rollout=single_rollout) if evidence else None)


def final_responses_beside_rollouts(name: str) -> str:
    """Why ``--final-responses`` cannot be given with a rollouts source (docs/contract.md#token-rollouts-format)."""
    return (f"{name}: --final-responses given with a source of rollout records whose output items carry token ids; "
            "such a file is its own records (its final responses, rewards and evidence): drop --final-responses")


def _from_path(path: Path, name: str | None, rollout_id: str | None) -> Iterator[TokenCaptureSnapshot] | list:
    label = name or printable(str(path))
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise LoadError(f"{label}: no such file or directory") from None
    except OSError as exc:
        raise LoadError(f"{label}: cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        return iter_store(DirectorySource(path), rollout_id)
    if not stat.S_ISREG(mode):
        # Refused before opening: a FIFO would block, /dev/zero would never end.
        raise LoadError(f"{label}: is {kind_of(mode)}, not a regular file; tokencap reads regular files "
                        "(snapshot JSON, entries JSONL, a zip) and capture-store directories")
    lone = _lone_store_file(path, label)
    if lone is not None:
        return lone
    fd = open_regular(path, label)
    try:
        magic = pread(fd, len(ZIP_MAGIC), 0)
        data = None if magic in (ZIP_MAGIC, EMPTY_ZIP_MAGIC) else read_descriptor(fd)
    except OSError as exc:
        raise LoadError(f"{label}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    return _from_buffer(data, label, path, rollout_id)


def _lone_store_file(path: Path, label: str) -> list[TokenCaptureSnapshot] | None:
    """The store rollout a records file ``R.tokens.jsonl`` belongs to, read from its directory
    with every sibling exactly as loading the directory would; None for any other file.
    Errors raise as for any single file, naming the path as given (`load_store_file`).

    Read alone, the records file would hide the siblings that say a capture is incomplete
    (``R.tokens.incomplete``, ``.intents``, ``.state.json``) or that a refusal ended it. A
    path given through a symbolic link is followed to the real store; when the link's
    target is not that rollout's records file, the bytes are read as an upload (masked).
    """
    found = store_file(path.name)
    if found is None:
        return None
    rollout_id, suffix = found
    if suffix != ENTRIES_SUFFIX:
        raise LoadError(sibling_alone_message(label, rollout_id, suffix))
    if printable(rollout_id) != rollout_id:
        raise LoadError(f"{label}: the file name is not valid UTF-8, so it cannot name a rollout; rename the "
                        "store's files to the rollout id")
    linked = path.is_symlink()
    real = Path(os.path.realpath(path)) if linked else path
    if store_file(real.name) != found:
        return None
    source = store_rollout_source(real.parent, rollout_id)
    siblings = real.parent if linked else Path(label).parent
    shown = {name: printable(str(siblings / name)) for name in source.names}
    shown[path.name] = label
    return load_store_file(source, shown)


ZIP, STORE_FILE, TEXT = "zip", "store file", "text"
"""The formats a file's bytes can be (`detect`), each read by one reader."""


def detect(data: Buffer | None, name: str | None) -> str:
    """The format of a file's bytes (``None``: a zip on disk, not read into memory), decided
    once: a zip, a capture-store file given without its directory, or text (a rollouts file,
    a snapshot JSON or entries JSONL, told apart by `read_rollouts` and `load_text`). Raises
    `LoadError` for bytes named ``.zip`` that are not one."""
    if data is None or data[:4] in (ZIP_MAGIC, EMPTY_ZIP_MAGIC):
        return ZIP
    if (name or "").lower().endswith(".zip"):
        # Said as what it is, not as JSON that fails on line 1 (a download cut short, an HTML error page).
        raise LoadError(f"{name}: named .zip but not a zip archive (it does not start with a zip's first bytes); "
                        "give a zip of a capture-store directory, or the directory itself")
    if store_file(os.path.basename(name or "")) is not None:
        return STORE_FILE
    return TEXT


def _store_bytes(data: Buffer, name: str) -> list[TokenCaptureSnapshot]:
    """A store file's bytes without its directory (an upload): its siblings cannot be read."""
    base = os.path.basename(name)
    rollout, suffix = store_file(base) or ("", "")
    if suffix != ENTRIES_SUFFIX:
        raise LoadError(sibling_alone_message(name, rollout, suffix))
    return load_store_file(MemorySource(name, base, data), {base: name})


def _from_buffer(data: Buffer | None, name: str | None, path: Path | None,
                 rollout_id: str | None) -> Iterator[TokenCaptureSnapshot] | list:
    kind = detect(data, name)
    if kind == ZIP or data is None:  # detect calls no bytes a zip on disk
        return iter_store(zip_source(data, path, name or "zip archive"), rollout_id)
    if kind == STORE_FILE:
        return _store_bytes(data, name or "")
    rollouts = read_rollouts(data, name, rollout_id)
    if rollouts is not None:
        return rollouts
    try:
        return load_text(data, name)
    except RecordError as exc:  # defensive: every path should already say where
        raise LoadError(str(exc.located(name)) if name else str(exc)) from None
    except RecursionError:  # defensive: the decoders' own depth errors are caught where they happen
        raise LoadError(f"{name or 'input'}: {TOO_DEEP}") from None
