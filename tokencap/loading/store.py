"""Capture-store directories in the upstream file-store layout (docs/contract.md#input-store).

Besides each rollout's store files (`store_files`), a directory may hold loose snapshot JSON
and entries JSONL files and rollouts files whose output items carry token ids. The rules
that matter, each with its reason:
- One bad rollout must not hide the others: its error comes back on its own snapshot.
- An entry that is not read (a symbolic link, a FIFO, a subdirectory, a name that is not
  UTF-8; see `tokencap.loading.files`) is never dropped silently. When it is one of
  rollout R's own store files, R fails to load: a skipped marker, intents or records
  file could hide an incomplete capture, so R must not look complete. Anything else
  skipped is named in every snapshot's ``source_notes``.

A directory or a zip is read through a `FileSource`, so a zip of a store is read the same
way without ever extracting it to disk. Rollouts come out lazily, in rollout-id order:
only one rollout's records are built at a time (a loose JSON/JSONL file is loaded whole
when the first of its rollouts is due, its other rollouts kept until theirs are). A file
is due first under its base name, where it is reported if it fails: its rollouts are held
until they are due while what is held so ahead fits `HELD_AHEAD_BYTES`, and past it they
are dropped and the file is loaded again when they are due.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..limits import HELD_AHEAD_BYTES
from ..record_errors import RecordError
from ..records import TokenCaptureSnapshot
from .capture_text import load_text, peek_rollout_ids
from .files import FileSource, Skipped
from .problems import LoadError
from .rollouts import RecordSpan, beside_captures_note, read_rollouts, rollout_at, source_records
from .store_files import StoreRollout, listing, load_store_rollout, store_file


def _classify(names: Iterable[str]) -> tuple[dict[str, StoreRollout], list[str]]:
    rollouts: dict[str, StoreRollout] = {}
    loose: list[str] = []
    for name in names:
        if name.endswith(".lock"):
            continue  # writer's lock files carry no records
        found = store_file(name)
        if found is not None:
            rid, suffix = found
            rollouts.setdefault(rid, StoreRollout(rid)).files[suffix] = name
        elif name.endswith((".json", ".jsonl")):
            loose.append(name)
    return rollouts, loose


def _skip_note(label: str, skipped: list[Skipped]) -> str:
    return (f"{label}: skipped {len(skipped)} entr{'y' if len(skipped) == 1 else 'ies'} that tokencap does not "
            f"read: {listing([f'{s.shown} ({s.reason})' for s in skipped])}")


def error_message(exc: BaseException, name: str | None = None) -> str:
    """Our own errors already say where; anything else gets its type and the file."""
    if isinstance(exc, (LoadError, RecordError)):
        return str(exc)
    prefix = f"{name}: " if name else ""
    return f"{prefix}{type(exc).__name__}: {exc}"


def base_name(name: str) -> str:
    """A loose file's name without ``.json``/``.jsonl``: the rollout id a failed file is reported under."""
    for ext in (".jsonl", ".json"):
        if name.endswith(ext):
            return name[: -len(ext)]
    return name


@dataclass
class _Loose:
    """A loose JSON/JSONL file: the rollout ids it may yield, and (once loaded) what it did yield."""

    name: str
    candidates: set[str]
    loaded: dict[str, TokenCaptureSnapshot] | None = None
    peeked: frozenset[str] = frozenset()  # the ids a successful load can yield (the base name is not one)
    ahead: dict[str, int] = field(default_factory=dict)  # held-ahead rollout -> its estimated bytes


HELD_ENTRY_BYTES = 2304
"""What one held record costs beyond its arrays' buffers (measured with tracemalloc on 12-call
and 3-call snapshots: 2.1-2.3 KB of Python objects -- the record, its array views, its strings,
its output items). An estimate for the budget, not a measure."""


def held_bytes(snap: TokenCaptureSnapshot) -> int:
    """The estimated memory of a loaded rollout: its records' array buffers (a lane shared by
    many calls counted once) and `HELD_ENTRY_BYTES` a record."""
    buffers: dict[int, int] = {}
    for entry in snap.entries:
        for arr in (entry.prompt_token_ids, entry.generation_token_ids, entry.generation_log_probs):
            owner = arr
            while isinstance(owner.base, np.ndarray):
                owner = owner.base
            buffers[id(owner)] = owner.nbytes
    return sum(buffers.values()) + HELD_ENTRY_BYTES * (len(snap.entries) + len(snap.engine_refusals))


def _load_loose(source: FileSource, name: str) -> dict[str, TokenCaptureSnapshot]:
    try:
        data = source.read(name)
        snapshots = read_rollouts(data, name) or load_text(data, name)
        return {snap.rollout_id: snap for snap in snapshots}
    except Exception as exc:  # noqa: BLE001 -- one bad file must not hide the others
        base = base_name(name)
        return {base: TokenCaptureSnapshot.failed(base, error_message(exc, name))}


def _examine(source: FileSource, name: str) -> tuple[set[str], list[RecordSpan] | None]:
    """(the rollout ids a loose file may yield, its records when it is a token-bearing
    rollouts file (docs/contract.md#token-rollouts), else None), from one read of it."""
    try:
        data = source.read(name)
        records = source_records(data, name)
        return (set(), records) if records is not None else (peek_rollout_ids(data), None)
    except Exception:  # noqa: BLE001 -- unreadable: it will fail to load, under its base name
        return set(), None


@dataclass
class _Plan:
    """What a store holds, worked out before any record is built."""

    ids: list[str]
    rollouts: dict[str, StoreRollout]
    failed: dict[str, str]
    failed_notes: dict[str, list[str]]
    loose_by_id: dict[str, list[_Loose]]
    shared_notes: list[str]
    held_ahead: int = 0  # estimated bytes of the rollouts loaded ahead of their turn, still held
    records_by_id: dict[str, list[tuple[str, RecordSpan]]] = field(default_factory=dict)
    """Rollout id -> the rollouts files (docs/contract.md#token-rollouts) and records it is read from."""
    open_file: tuple[str, Any] | None = None  # the rollouts file whose bytes were read last


def iter_store(source: FileSource, rollout_id: str | None = None) -> Iterator[TokenCaptureSnapshot]:
    """Every rollout of a capture store, in rollout-id order, built one at a time.

    A bad rollout comes back with `load_error` set. ``rollout_id`` limits the work to that
    rollout. Raises `LoadError` now (not on iteration) when the source holds nothing
    loadable. Closes ``source`` when the iteration ends.
    """
    try:
        plan = _plan(source)
    except BaseException:
        source.close()
        raise
    return _iterate(source, plan, rollout_id)


def _plan(source: FileSource) -> _Plan:
    rollouts, loose_names = _classify(source.names)
    # What was not read: a rollout's own store file fails that rollout; a loose JSON name
    # fails under its base name, as a loose file that cannot be read does; the rest is a
    # note on every snapshot.
    attributable = [s for s in source.skipped if s.attributable]
    skipped_rollouts, skipped_loose = _classify(s.name for s in attributable)
    claimed = {name for r in skipped_rollouts.values() for name in r.files.values()} | set(skipped_loose)
    general = [s for s in source.skipped if not (s.attributable and s.name in claimed)]
    shared_notes = [_skip_note(source.label, general)] if general else []
    reasons = {s.name: s.reason for s in attributable}
    failed: dict[str, str] = {}
    failed_notes: dict[str, list[str]] = {}
    for rid, rollout in skipped_rollouts.items():
        failed_notes[rid] = [f"{n}: not read ({reasons[n]})" for n in sorted(rollout.files.values())]
        names = sorted(rollout.files.values())
        failed[rid] = (f"{source.label}: {listing([f'{n} was not read ({reasons[n]})' for n in names])}; a rollout "
                       "is loaded only when all its store files are regular files (a skipped marker, intents or "
                       "records file could hide an incomplete capture)")
    for name in skipped_loose:
        failed.setdefault(base_name(name), f"{name}: was not read ({reasons[name]})")
        failed_notes.setdefault(base_name(name), []).append(f"{name}: not read ({reasons[name]})")

    loose_by_id: dict[str, list[_Loose]] = {}
    rollouts_files: dict[str, list[RecordSpan]] = {}
    for name in loose_names:
        peeked, records = _examine(source, name)
        if records is not None:
            rollouts_files[name] = records
            continue
        item = _Loose(name, peeked | {base_name(name)}, peeked=frozenset(peeked))
        for rid in item.candidates:
            loose_by_id.setdefault(rid, []).append(item)
    records_by_id: dict[str, list[tuple[str, RecordSpan]]] = {}
    if rollouts_files and (rollouts or failed or loose_by_id):
        shared_notes.append(beside_captures_note(source.label, sorted(rollouts_files)))
    else:
        for name, records in rollouts_files.items():
            for record in records:
                records_by_id.setdefault(record.rollout_id, []).append((name, record))
    ids = sorted(set(rollouts) | set(failed) | set(loose_by_id) | set(records_by_id))
    if not ids:
        detail = f" ({shared_notes[0].split(': ', 1)[1]})" if shared_notes else ""
        raise LoadError(f"{source.label}: no capture-store files and no .json/.jsonl files found{detail}")
    return _Plan(ids, rollouts, failed, failed_notes, loose_by_id, shared_notes, records_by_id=records_by_id)


def _iterate(source: FileSource, plan: _Plan, wanted: str | None) -> Iterator[TokenCaptureSnapshot]:
    try:
        for rid in plan.ids:
            if wanted is not None and rid != wanted:
                continue
            snap = _one_rollout(source, plan, rid)
            if snap is not None:
                yield _with_notes(snap, plan.shared_notes) if plan.shared_notes else snap
            del snap  # not held while the next rollout loads
        # Defensive: the peek promises a superset of each file's rollout ids, so nothing is
        # left here; if it ever were, it comes out late rather than being dropped.
        leftovers = {id(item): item.loaded for items in plan.loose_by_id.values() for item in items if item.loaded}
        for loaded in leftovers.values():
            for rid, snap in sorted(loaded.items()):
                if wanted is None or rid == wanted:
                    yield _with_notes(snap, plan.shared_notes) if plan.shared_notes else snap
    finally:
        source.close()


def _one_rollout(source: FileSource, plan: _Plan, rid: str) -> TokenCaptureSnapshot | None:
    origins: list[str] = []
    found: list[TokenCaptureSnapshot | None] = []
    if rid in plan.rollouts or rid in plan.failed:
        origins.append(f"{rid}.tokens.*")
        found.append(None)  # built below, only when it is the one source
    for item in plan.loose_by_id.get(rid, ()):
        # Loaded when its first candidate id is due: every rollout it yields comes at or after it.
        if item.loaded is None:
            loaded = _load_loose(source, item.name)
            if rid in item.peeked or rid in loaded:
                item.loaded = loaded
            else:
                # ``rid`` is only the file's base name, due because a failed load is reported
                # under it, and the file loaded: its rollouts are due later. Held until then
                # (so the file is read and decoded once) while all that is held so fits the
                # budget; past it they are dropped and loaded again when the first is due, since
                # holding them all would hold every loose file of a zip whose member names sort
                # before the rollout ids they hold.
                ahead = {key: held_bytes(snap) for key, snap in loaded.items()}
                if plan.held_ahead + sum(ahead.values()) <= HELD_AHEAD_BYTES:
                    item.loaded, item.ahead = loaded, ahead
                    plan.held_ahead += sum(ahead.values())
            del loaded
            if item.loaded is None:
                continue
        snap = item.loaded.pop(rid, None)
        plan.held_ahead -= item.ahead.pop(rid, 0)
        if snap is not None:
            origins.append(item.name)
            found.append(snap)
    for name, record in plan.records_by_id.get(rid, ()):
        origins.append(name)
        found.append(_record_rollout(source, plan, name, record))
    if not found:
        return None
    if len(found) > 1:
        return TokenCaptureSnapshot.failed(
            rid, f"{source.label}: rollout {rid!r} comes from several sources ({', '.join(origins)}); keep one of them")
    if found[0] is not None:
        return found[0]
    if rid in plan.failed:
        return TokenCaptureSnapshot.failed(rid, plan.failed[rid], plan.failed_notes.get(rid, ()))
    try:
        return load_store_rollout(source, plan.rollouts[rid])
    except Exception as exc:  # noqa: BLE001 -- one bad rollout must not hide the others
        return TokenCaptureSnapshot.failed(rid, error_message(exc))


def _record_rollout(source: FileSource, plan: _Plan, name: str, record: RecordSpan) -> TokenCaptureSnapshot:
    """One record's rollout of a rollouts file (its bytes read once while its records are due)."""
    if plan.open_file is None or plan.open_file[0] != name:
        plan.open_file = None
        try:
            plan.open_file = (name, source.read(name))
        except Exception as exc:  # noqa: BLE001 -- one bad rollout must not hide the others
            return TokenCaptureSnapshot.failed(record.rollout_id, error_message(exc, name))
    data = plan.open_file[1]
    return rollout_at(data[record.start:record.end], record, name)


def _with_notes(snap: TokenCaptureSnapshot, notes: list[str]) -> TokenCaptureSnapshot:
    return TokenCaptureSnapshot(
        rollout_id=snap.rollout_id, snapshot_id=snap.snapshot_id, version=snap.version, incomplete=snap.incomplete,
        entries=snap.entries, engine_refusals=snap.engine_refusals, source_notes=[*snap.source_notes, *notes],
        load_error=snap.load_error, record=snap.record)


def load_store(source: FileSource) -> list[TokenCaptureSnapshot]:
    """Every rollout of a capture-store directory; a bad one comes back with `load_error` set."""
    return list(iter_store(source))


def load_store_file(source: FileSource, shown: Mapping[str, str]) -> list[TokenCaptureSnapshot]:
    """The rollout of one store file given on its own: ``R.tokens.jsonl`` read with its
    siblings (``source`` holds exactly that rollout's files), or its bytes alone.

    Loaded as its directory loads it (same files, skips, notes, verdict), except that a
    rollout that cannot be loaded raises `LoadError`, as any single file does (docs/contract.md#input-errors):
    the person named this file, so the command stops with the file, line, call and field
    instead of building a masked sample from nothing. ``shown`` maps a store file's name
    to the name the error gives it (the path as given, for a records file on disk).
    """
    snapshots = load_store(source)
    for snap in snapshots:
        if snap.load_error is not None:
            raise LoadError(_named(snap.load_error, shown))
    return snapshots


def _named(message: str, shown: Mapping[str, str]) -> str:
    """``message`` with the store file it starts with (``NAME: ...``, ``NAME, line 3: ...``) named as shown."""
    for name, display in shown.items():
        if message.startswith(name) and message[len(name):len(name) + 1] in (":", ","):
            return display + message[len(name):]
    return message

