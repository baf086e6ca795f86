"""Finding the rollouts of a run without loading them (the scan's first pass).

A run is a capture-store directory, a tree of them, a tree of snapshot / JSONL files, or
one JSONL holding many rollouts. Discovery turns it into `RolloutUnit`s -- small,
picklable descriptions of where one rollout's bytes are -- so workers (local processes or
Ray tasks) load and build each rollout on their own, and no token array ever outlives the
rollout it belongs to.

Rules, each with its reason:
- Units are ordered by ``(source, rollout_id)``: the table's order must not depend on the
  file system's listing order, the engine or the worker count.
- A big JSONL is indexed (the byte span and line number of every line, grouped by the
  line's ``rollout_id``), never held whole: a run log can be larger than memory.
- A JSONL line that is not a JSON object with a string ``rollout_id`` cannot be given to
  any rollout, so every rollout of that file might be missing a record: the file fails as
  a whole (one row, named after the file, as docs/contract.md#input does for a file in a directory).
- Size and modification time are read here (one ``stat`` per file) and recorded in the
  table, so a later ``--since`` scan can reuse the rows of files that did not change.
"""

from __future__ import annotations

import mmap
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

from ..loading.capture_text import is_text
from ..loading.files import kind_of, printable
from ..loading.problems import FINAL_RESPONSES_HINT, SNIFF_BYTES, binary_problem, looks_like_rollout_record
from ..loading.raw_records import decode_raw_object
from ..loading.rollouts import beside_captures_note, index_rollouts, is_rollouts_text, is_source, no_token_ids_message
from ..loading.store import base_name
from ..loading.store_files import ENTRIES_SUFFIX, sibling_alone_message, store_file, store_siblings
from .errors import DiscoveryError

Keep = Callable[[str, int, float], bool]
"""Whether a unit (its source label, size and mtime) is read again; False reuses what an
earlier scan found for it."""

STORE_LABEL = ".tokens.*"
"""How a store rollout's ``source`` reads: ``sub/dir/R.tokens.*`` (every file of prefix R)."""


@dataclass(frozen=True, slots=True)
class RolloutUnit:
    """Where one rollout (or one file's rollouts) lives; cheap to pickle to a worker.

    kind: ``"store"`` (files ``names`` of one store prefix in ``directory``), ``"jsonl"``
    (one rollout's lines of a big JSONL: ``spans`` holds offset, length and line number per
    line), ``"rollouts"`` (one record of a rollouts file, docs/contract.md#token-rollouts: ``spans`` holds its offset,
    length and line number), ``"file"`` (a snapshot JSON, small JSONL or zip loaded whole; may hold several
    rollouts) or ``"failed"`` (discovery already knows it cannot load: ``error``).
    """

    source: str
    kind: str
    directory: str
    names: tuple[str, ...]
    rollout_id: str | None = None
    spans: bytes = b""
    size: int = 0
    mtime: float = 0.0
    error: str | None = None
    skipped: tuple[tuple[str, str], ...] = ()  # (name, reason): this store prefix's entries that are not read
    note: str | None = None  # a ``rollouts`` unit's source note (a repeated rollout id renamed)

    @property
    def sort_key(self) -> tuple[str, str]:
        return (self.source, self.rollout_id or "")

    @property
    def paths(self) -> list[str]:
        return [os.path.join(self.directory, n) for n in self.names]


class _IdOnly(msgspec.Struct):
    rollout_id: object = None


_decode_id = msgspec.json.Decoder(_IdOnly).decode


def index_jsonl(path: str, source: str, size: int, mtime: float, *, alone: bool = False) -> list[RolloutUnit]:
    """One unit per rollout of a JSONL file, each with the spans of its lines.

    A file of rollout records (the harness's final responses) is one failed unit in a
    directory; given ``alone`` as the run, it is a `DiscoveryError` (it is no run at all).
    """
    directory, name = os.path.split(path)
    shown = printable(name)
    if size == 0:
        return [RolloutUnit(source, "file", directory, (name,), size=size, mtime=mtime)]
    with open(path, "rb") as handle:
        data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        problem = binary_problem(data[:SNIFF_BYTES])
        if problem is not None:  # refused before a line index of gigabytes is made
            return [_failed_file(source, directory, name, size, mtime, f"{shown}: {problem}")]
        raw = np.frombuffer(data, dtype=np.uint8)
        ends = np.flatnonzero(raw == 0x0A)
        if not ends.size or ends[-1] != len(raw) - 1:
            ends = np.append(ends, len(raw))  # a last line without a final newline is an ordinary line
        starts = np.concatenate(([0], ends[:-1] + 1))
        del raw
        keep = np.flatnonzero(ends > starts)  # empty lines cost nothing more than this
        ids: dict[str, int] = {}
        owner = np.empty(keep.size, dtype=np.int64)
        used = np.ones(keep.size, dtype=bool)
        for k, i in enumerate(keep.tolist()):
            chunk = data[int(starts[i]):int(ends[i])]
            if not chunk.strip():
                used[k] = False
                continue
            if not ids and _is_rollout_record(chunk):
                # The harness's rollout records, not captured calls: one row saying so, not
                # a masked "rollout" per record that would swell the run's masked count.
                problem = f"line {i + 1}: a rollout record or Responses object, not a captured call; " \
                          f"{FINAL_RESPONSES_HINT}"
                if alone:
                    raise DiscoveryError(f"{printable(path)}, {problem}")
                return [_failed_file(source, directory, name, size, mtime, f"{shown}, {problem}")]
            try:
                rid = _decode_id(chunk).rollout_id
            except msgspec.MsgspecError as exc:
                problem = "expected one JSON object per line" if isinstance(exc, msgspec.ValidationError) \
                    else f"not valid JSON ({exc})"
                return [_failed_file(source, directory, name, size, mtime, f"{shown}, line {i + 1}: {problem}")]
            if not isinstance(rid, str):
                return [_failed_file(source, directory, name, size, mtime,
                                     f"{shown}, line {i + 1}: field 'rollout_id' is missing or not a string")]
            owner[k] = ids.setdefault(rid, len(ids))
    finally:
        data.close()
    if not ids:
        return [RolloutUnit(source, "file", directory, (name,), size=size, mtime=mtime)]
    keep, owner = keep[used], owner[used]
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(len(ids) + 1))
    table = np.stack((starts[keep], ends[keep] - starts[keep], keep + 1), axis=1).astype(np.int64)
    units = []
    for rid, n in ids.items():
        lines = table[order[bounds[n]:bounds[n + 1]]]
        units.append(RolloutUnit(source, "jsonl", directory, (name,), rid, lines.tobytes(), size, mtime))
    return units


def rollouts_file(path: str, source: str, size: int, mtime: float, *, alone: bool = False
                  ) -> list[RolloutUnit] | None:
    """One unit per record when ``path`` is a rollouts file (docs/contract.md#token-rollouts) whose records carry token
    ids; None when it is no rollouts file. A rollouts file without token ids is one failed
    unit saying so (a `DiscoveryError` given ``alone``: it is no run at all)."""
    if size == 0:
        return None
    directory, name = os.path.split(path)
    shown = printable(name)
    with open(path, "rb") as handle:
        data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        if not (is_text(data[:SNIFF_BYTES]) and is_rollouts_text(data)):
            return None
        records = index_rollouts(data, shown)
    finally:
        data.close()
    if not is_source(records):
        if alone:
            raise DiscoveryError(no_token_ids_message(printable(path), records))
        return [_failed_file(source, directory, name, size, mtime, no_token_ids_message(shown, records))]
    return [RolloutUnit(source, "rollouts", directory, (name,), r.rollout_id,
                        np.array([[r.start, r.end - r.start, r.line]], dtype=np.int64).tobytes(), size, mtime,
                        note=r.note) for r in records]


def _is_rollout_record(chunk: bytes) -> bool:
    try:
        return looks_like_rollout_record(decode_raw_object(chunk))
    except (msgspec.MsgspecError, RecursionError):
        return False  # the line's own problem is named by the rollout id read below


def _failed_file(source: str, directory: str, name: str, size: int, mtime: float, error: str) -> RolloutUnit:
    name = printable(name)
    base = base_name(name)
    return RolloutUnit(source, "failed", directory, (name,), base, size=size, mtime=mtime, error=error)


def spans_of(unit: RolloutUnit) -> np.ndarray:
    """The (offset, length, line number) rows of a ``jsonl`` unit."""
    return np.frombuffer(unit.spans, dtype=np.int64).reshape(-1, 3)


def _units_in_directory(directory: str, rel: str, names: list[tuple[str, int, float]],
                        keep: Keep, not_read: dict[str, list[tuple[str, str]]],
                        notes: list[str] | None = None) -> Iterator[RolloutUnit]:
    """The units of one directory's regular files (name, size, mtime). ``not_read`` holds,
    per store prefix, its entries that are not regular files: that rollout then fails to
    load, as it does in `tokencap build` (a skipped marker or intents file could hide an
    incomplete capture). Rollouts files (docs/contract.md#token-rollouts) beside captures are left out, with a note
    in ``notes``, as the loader does."""
    stores: dict[str, list[tuple[str, int, float]]] = {prefix: [] for prefix in not_read}
    captures = bool(not_read)
    rollouts: dict[str, list[RolloutUnit]] = {}
    for name, size, mtime in names:
        if name.endswith(".lock") or name.startswith("."):
            continue  # a writer's lock files and hidden files carry no records
        found = store_file(name)
        if found is not None:
            stores.setdefault(found[0], []).append((name, size, mtime))
            captures = True
        elif name.endswith((".json", ".jsonl")):
            source = f"{rel}{printable(name)}"
            if not keep(source, size, mtime):
                yield RolloutUnit(source, "reused", directory, (name,), size=size, mtime=mtime)
                continue
            records = rollouts_file(os.path.join(directory, name), source, size, mtime)
            if records is not None and records[0].kind == "rollouts":
                rollouts[source] = records
                continue
            captures = captures or records is None
            if records is not None:
                yield from records
            elif name.endswith(".jsonl"):
                yield from index_jsonl(os.path.join(directory, name), source, size, mtime)
            else:
                yield RolloutUnit(source, "file", directory, (name,), size=size, mtime=mtime)
    if rollouts and captures:
        if notes is not None:
            notes.append(beside_captures_note(rel.rstrip("/") or printable(directory), sorted(rollouts)))
    else:
        for units in rollouts.values():
            yield from units
    for prefix, files in stores.items():
        label = printable(prefix)
        source = f"{rel}{label}{STORE_LABEL}"
        size = sum(f[1] for f in files)
        mtime = max((f[2] for f in files), default=0.0)
        kind = "store" if keep(source, size, mtime) else "reused"
        names_ = tuple(sorted(f[0] for f in files))
        if label != prefix:
            # A store prefix is the rollout id, and record ids are JSON text (UTF-8): a name
            # that is not UTF-8 cannot belong to any rollout the records name.
            yield RolloutUnit(source, "failed", directory, names_, label, size=size, mtime=mtime,
                              error=f"{rel}{label}{STORE_LABEL}: the file name is not valid UTF-8, so it cannot "
                                    "name a rollout; rename the files to the rollout id")
            continue
        yield RolloutUnit(source, kind, directory, names_, prefix, size=size, mtime=mtime,
                          skipped=tuple(sorted(not_read.get(prefix, ()))))


def discover(source: str | os.PathLike[str], keep: Keep = lambda source, size, mtime: True,
             skipped: list[str] | None = None, notes: list[str] | None = None) -> list[RolloutUnit]:
    """Every rollout unit under ``source``, sorted by ``(source, rollout_id)``.

    ``keep(source, size, mtime)`` returning False marks a file or store prefix as
    ``reused`` (its rows come from an earlier table); it is then neither indexed nor loaded.
    Entries that are not regular files (symlinks, pipes, devices) are never read; their
    relative paths are appended to ``skipped`` so the caller can say so. What else the run
    leaves out (rollouts files beside captures, docs/contract.md#token-rollouts-format) is said in ``notes``.
    """
    skipped = skipped if skipped is not None else []
    root = Path(source)
    try:
        st = root.stat()
    except FileNotFoundError:
        raise DiscoveryError(f"{source}: no such file or directory") from None
    except OSError as exc:
        raise DiscoveryError(f"{source}: cannot be read ({exc.strerror or exc})") from None
    units: list[RolloutUnit]
    if root.is_dir():
        units = []
        for directory, subdirs, files in os.walk(root, onerror=_raise_walk_error):
            rel = os.path.relpath(directory, root)
            rel = "" if rel == "." else printable(rel.replace(os.sep, "/")) + "/"
            skipped.extend(f"{rel}{printable(d)}/" for d in subdirs
                           if os.path.islink(os.path.join(directory, d)))  # os.walk never follows these
            subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
            entries = []
            not_read: dict[str, list[tuple[str, str]]] = {}
            for name in files:
                path = os.path.join(directory, name)
                try:
                    fst = os.lstat(path)
                except OSError as exc:
                    reason = f"it cannot be examined ({exc.strerror or exc})"
                else:
                    if stat.S_ISREG(fst.st_mode):
                        entries.append((name, fst.st_size, fst.st_mtime))
                        continue
                    # Symlinks could leave the run (or loop); pipes and devices block or never end.
                    reason = f"it is {kind_of(fst.st_mode)}, not a regular file"
                skipped.append(f"{rel}{printable(name)}")
                found = store_file(name)
                if found is not None and printable(found[0]) == found[0]:
                    not_read.setdefault(found[0], []).append((name, reason))
            units.extend(_units_in_directory(directory, rel, entries, keep, not_read, notes))
    elif stat.S_ISREG(st.st_mode):
        directory, name = os.path.split(os.path.abspath(root))
        label = printable(name)
        found = store_file(name)
        real_directory, real_name = os.path.split(os.path.realpath(root))
        if found is not None and found[1] != ENTRIES_SUFFIX:
            raise DiscoveryError(sibling_alone_message(label, found[0], found[1]))
        if found is not None and store_file(real_name) == found:
            units = list(_lone_store_file(real_directory, found[0], keep))
        elif found is not None:
            # A link under a store name to another file: loaded as that file's bytes, which
            # the loader masks (its store siblings cannot be known).
            units = [RolloutUnit(label, "file", directory, (name,), size=st.st_size, mtime=st.st_mtime)]
        elif not keep(label, st.st_size, st.st_mtime):
            units = [RolloutUnit(label, "reused", directory, (name,), size=st.st_size, mtime=st.st_mtime)]
        elif name.endswith((".json", ".jsonl")) and \
                (records := rollouts_file(str(root), label, st.st_size, st.st_mtime, alone=True)) is not None:
            units = records
        elif name.endswith(".jsonl"):
            units = index_jsonl(str(root), label, st.st_size, st.st_mtime, alone=True)
        else:
            units = [RolloutUnit(label, "file", directory, (name,), size=st.st_size, mtime=st.st_mtime)]
    else:
        raise DiscoveryError(f"{source}: not a regular file or directory (a pipe or device is never read)")
    units.sort(key=lambda u: u.sort_key)
    return units


def _lone_store_file(directory: str, rollout_id: str, keep: Keep) -> Iterator[RolloutUnit]:
    """A store records file given alone: its rollout, with every store sibling beside it,
    exactly as scanning the directory finds it (never its records alone, which would hide
    an incomplete marker, intents or refusals)."""
    files, skipped = store_siblings(directory, rollout_id)
    not_read = {rollout_id: [(s.name, s.reason) for s in skipped]} if skipped else {}
    entries = [(n, st.st_size, st.st_mtime) for n, st in files]
    return _units_in_directory(directory, "", entries, keep, not_read)


def _raise_walk_error(exc: OSError) -> None:
    raise DiscoveryError(f"{exc.filename}: cannot be listed ({exc.strerror or exc})")
