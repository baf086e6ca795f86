"""Capture-store directories in the upstream file-store layout (docs/contract.md#input-store).

Per rollout ``R`` the store writes ``R.tokens.jsonl`` (records), ``R.tokens.intents``
(one call id per line, written before the call is served), ``R.tokens.state.json``,
``R.tokens.incomplete`` (a marker) and, in this project, ``R.tokens.refusals.jsonl``.

The rules that matter, each with its reason:
- Bytes after the last newline of a store ``.jsonl`` were never acknowledged by the
  writer, whatever they hold, so they are skipped (and noted) rather than parsed.
- An intent with neither an entry nor a refusal means a call was started and never
  captured: the rollout is incomplete, because the trajectory is missing a call.
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

import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ..limits import HELD_AHEAD_BYTES
from ..records import RecordError, TokenCaptureSnapshot, type_name
from .capture_text import load_text, peek_rollout_ids
from .entries_jsonl import build_snapshot, read_jsonl_records
from .files import DirectorySource, FileSource, Skipped, kind_of, printable
from .lines import iter_lines
from .problems import LoadError
from .rollouts import RecordSpan, beside_captures_note, read_rollouts, rollout_at, source_records
from .wire import TOO_DEEP, decode_value

ENTRIES_SUFFIX = ".tokens.jsonl"
REFUSALS_SUFFIX = ".tokens.refusals.jsonl"
INTENTS_SUFFIX = ".tokens.intents"
STATE_SUFFIX = ".tokens.state.json"
INCOMPLETE_SUFFIX = ".tokens.incomplete"
_STORE_SUFFIXES = (REFUSALS_SUFFIX, STATE_SUFFIX, ENTRIES_SUFFIX, INTENTS_SUFFIX, INCOMPLETE_SUFFIX)

_LISTED = 10  # names shown in a note before "and N more"


@dataclass
class _StoreRollout:
    rollout_id: str
    files: dict[str, str] = field(default_factory=dict)  # suffix -> file name


def store_file(name: str) -> tuple[str, str] | None:
    """(rollout id, store suffix) when ``name`` is one of a store rollout's files, else None."""
    for suffix in _STORE_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], suffix
    return None


_SIBLING_WORDS = {
    REFUSALS_SUFFIX: "engine-refusals file (the rollout's refused requests, not its calls)",
    INTENTS_SUFFIX: "intents file (one call id a line, written before each call)",
    STATE_SUFFIX: "state file (the store's snapshot id, version and incomplete flag)",
    INCOMPLETE_SUFFIX: "incomplete marker",
}
COMPLETENESS_SUFFIXES = (INTENTS_SUFFIX, STATE_SUFFIX, INCOMPLETE_SUFFIX)
"""The store files that can say a rollout's capture is incomplete."""


def sibling_alone_message(label: str, rollout_id: str, suffix: str) -> str:
    """Why a store file other than the records file cannot be a source on its own."""
    return (f"{label}: this is the {_SIBLING_WORDS[suffix]} of capture-store rollout {rollout_id!r}; alone it "
            f"holds no calls to build. Give the store directory (or a zip of it), or {rollout_id}{ENTRIES_SUFFIX} "
            "(read with the rollout's other store files)")


def store_siblings(directory: str | os.PathLike[str], rollout_id: str
                   ) -> tuple[list[tuple[str, os.stat_result]], list[Skipped]]:
    """The store files of ``rollout_id`` in ``directory`` -- one ``lstat`` per possible name,
    no listing -- as the directory load sees them: regular files (with their stat), and
    the others (links, pipes, unexaminable) as `Skipped`, which fail the rollout there."""
    found: list[tuple[str, os.stat_result]] = []
    skipped: list[Skipped] = []
    for suffix in _STORE_SUFFIXES:
        name = rollout_id + suffix
        try:
            st = os.lstat(os.path.join(directory, name))
        except FileNotFoundError:
            continue
        except OSError as exc:
            skipped.append(Skipped(name, f"it cannot be examined ({exc.strerror or exc})"))
            continue
        if stat.S_ISREG(st.st_mode):
            found.append((name, st))
        else:
            skipped.append(Skipped(name, f"it is {kind_of(st.st_mode)}, not a regular file"))
    return found, skipped


def store_rollout_source(directory: Path, rollout_id: str) -> DirectorySource:
    """One store rollout's files in ``directory``, read exactly as loading the whole directory
    reads them (same label, same skipped entries): the source for one store file given alone."""
    found, skipped = store_siblings(directory, rollout_id)
    return DirectorySource.of_names(directory, [name for name, _ in found], printable(str(directory)), skipped)


def _classify(names: Iterable[str]) -> tuple[dict[str, _StoreRollout], list[str]]:
    rollouts: dict[str, _StoreRollout] = {}
    loose: list[str] = []
    for name in names:
        if name.endswith(".lock"):
            continue  # writer's lock files carry no records
        found = store_file(name)
        if found is not None:
            rid, suffix = found
            rollouts.setdefault(rid, _StoreRollout(rid)).files[suffix] = name
        elif name.endswith((".json", ".jsonl")):
            loose.append(name)
    return rollouts, loose


def _listing(items: list[str]) -> str:
    shown = ", ".join(items[:_LISTED])
    return shown + (f" and {len(items) - _LISTED} more" if len(items) > _LISTED else "")


def _skip_note(label: str, skipped: list[Skipped]) -> str:
    return (f"{label}: skipped {len(skipped)} entr{'y' if len(skipped) == 1 else 'ies'} that tokencap does not "
            f"read: {_listing([f'{s.shown} ({s.reason})' for s in skipped])}")


def _read_state(source: FileSource, name: str) -> dict:
    try:
        state = decode_value(source.read(name))
    except RecursionError:
        raise LoadError(f"{name}: {TOO_DEEP}") from None
    except msgspec.DecodeError as exc:
        raise LoadError(f"{name}: not valid JSON ({exc})") from None
    except msgspec.ValidationError as exc:
        raise LoadError(f"{name}: a value cannot be read ({exc})") from None
    if not isinstance(state, dict):
        raise LoadError(f"{name}: the state file must hold a JSON object, got {type_name(state)}")
    for key, kind, words in (("snapshot_id", str, "a string"), ("version", int, "an integer"),
                             ("incomplete", bool, "true or false")):
        value = state.get(key)
        if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            raise LoadError(f"{name}: field {key!r} must be {words}, got {type_name(value)}")
        if kind is int and isinstance(value, int) and not -(1 << 63) <= value < 1 << 63:
            raise LoadError(f"{name}: field {key!r} must fit in 64 bits")
    return state


def _read_intents(source: FileSource, name: str) -> list[str]:
    intents = []
    for _line, text in iter_lines(source.read(name)):
        try:
            call_id = bytes(text).decode("utf-8").strip()
        except UnicodeDecodeError:
            raise LoadError(f"{name}: not UTF-8 text (expected one call id per line)") from None
        if call_id:
            intents.append(call_id)
    return intents


def _load_store_rollout(source: FileSource, rollout: _StoreRollout) -> TokenCaptureSnapshot:
    rid, files = rollout.rollout_id, rollout.files
    notes: list[str] = []
    incomplete = False
    state: dict = {}
    if STATE_SUFFIX in files:
        name = files[STATE_SUFFIX]
        state = _read_state(source, name)
        if state.get("incomplete") is True:
            incomplete = True
            notes.append(f"{name}: the store marked this rollout incomplete")
    if INCOMPLETE_SUFFIX in files:
        incomplete = True
        notes.append(f"{files[INCOMPLETE_SUFFIX]}: incomplete marker present (a call failed to capture)")

    entry_raws: list = []
    refusal_raws: list = []
    for suffix, is_refusal in ((ENTRIES_SUFFIX, False), (REFUSALS_SUFFIX, True)):
        if suffix not in files:
            continue
        name = files[suffix]
        records = read_jsonl_records(source.lines(name, notes), name, refusals_only=is_refusal)
        strangers = [r for r in records.order if r != rid]
        if strangers:
            raise LoadError(f"{name}: records name rollout {strangers[0]!r}, but this file belongs to rollout {rid!r}")
        if records.order:
            entry_raws += records.entries[rid]
            refusal_raws += records.refusals[rid]

    where = files.get(ENTRIES_SUFFIX) or files.get(REFUSALS_SUFFIX) or rid
    snapshot_id, version = state.get("snapshot_id") or "", state.get("version") or 0
    if entry_raws or refusal_raws:
        snapshot = build_snapshot(rid, entry_raws, refusal_raws, where, snapshot_id=snapshot_id, version=version)
    else:
        snapshot = TokenCaptureSnapshot(rollout_id=rid, snapshot_id=snapshot_id, version=version)

    if INTENTS_SUFFIX in files:
        name = files[INTENTS_SUFFIX]
        intents = _read_intents(source, name)
        seen = {e.model_call_id for e in snapshot.entries} | {r.model_call_id for r in snapshot.engine_refusals}
        dangling = sorted({i for i in intents if i not in seen})
        if dangling:
            incomplete = True
            notes.append(f"{name}: {len(dangling)} dangling intent(s) with no captured entry or refusal "
                         f"(the call was started but never captured): {_listing(dangling)}")
    if source.packed and not any(suffix in files for suffix in COMPLETENESS_SUFFIXES):
        incomplete = True
        notes.append(_without_siblings_note(source, where, rid))
    return TokenCaptureSnapshot(
        rollout_id=rid, entries=snapshot.entries, engine_refusals=snapshot.engine_refusals,
        snapshot_id=snapshot.snapshot_id, version=snapshot.version, incomplete=incomplete, source_notes=notes,
    )


WITHOUT_SIBLINGS = "was read without the other capture-store files"
"""The words of the note on a rollout whose store siblings could not be read (the app finds it by them)."""


def _without_siblings_note(source: FileSource, name: str, rid: str) -> str:
    """Why a rollout of a zip or of bytes with a store name is masked though nothing says a call
    failed: the files that would say so may have been left behind (DESIGN.md, "A store file is
    never read without its siblings")."""
    siblings = f"its {INTENTS_SUFFIX}, {STATE_SUFFIX}, {INCOMPLETE_SUFFIX}"
    unknown = "Whether a call failed to capture cannot be known: masked as capture_incomplete"
    if os.path.basename(source.label) == name:  # the file's bytes on their own (an upload)
        return (f"{name} {WITHOUT_SIBLINGS} of rollout {rid!r} ({siblings}). {unknown}. Give the store "
                "directory, or a zip of it")
    return (f"{source.label}: {name} {WITHOUT_SIBLINGS} of rollout {rid!r}: the zip holds none of {siblings} (the "
            f"store writes the first two for every rollout, so they were left out when zipping). {unknown}, though "
            "the same files in a directory read as complete. Open the store directory, or zip it with those files")


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
    rollouts: dict[str, _StoreRollout]
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
        failed[rid] = (f"{source.label}: {_listing([f'{n} was not read ({reasons[n]})' for n in names])}; a rollout "
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
        return _load_store_rollout(source, plan.rollouts[rid])
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
