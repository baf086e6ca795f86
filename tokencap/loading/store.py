"""Capture-store directories in the upstream file-store layout (SPEC 3.3).

Per rollout ``R`` the store writes ``R.tokens.jsonl`` (records), ``R.tokens.intents``
(one call id per line, written before the call is served), ``R.tokens.state.json``,
``R.tokens.incomplete`` (a marker) and, in this project, ``R.tokens.refusals.jsonl``.

The rules that matter, each with its reason:
- Bytes after the last newline of a store ``.jsonl`` were never acknowledged by the
  writer, whatever they hold, so they are skipped (and noted) rather than parsed.
- An intent with neither an entry nor a refusal means a call was started and never
  captured: the rollout is incomplete, because the trajectory is missing a call.
- One bad rollout must not hide the others: its error comes back on its own snapshot.

A directory is read through a `FileSource` (name -> bytes), so a zip of a store is read
the same way without ever extracting it to disk (no path escapes, bounded size).
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from ..records import RecordError, TokenCaptureSnapshot
from .text import LoadError, build_snapshot, load_text, read_jsonl_records
from .wire import decode_value

ENTRIES_SUFFIX = ".tokens.jsonl"
REFUSALS_SUFFIX = ".tokens.refusals.jsonl"
INTENTS_SUFFIX = ".tokens.intents"
STATE_SUFFIX = ".tokens.state.json"
INCOMPLETE_SUFFIX = ".tokens.incomplete"
_STORE_SUFFIXES = (REFUSALS_SUFFIX, STATE_SUFFIX, ENTRIES_SUFFIX, INTENTS_SUFFIX, INCOMPLETE_SUFFIX)

MAX_ZIP_MEMBERS = 10_000
MAX_ZIP_UNCOMPRESSED = 4 << 30  # a zip may not expand beyond 4 GiB (zip bombs)


@dataclass
class FileSource:
    """A flat set of named files: a directory on disk or the members of a zip."""

    label: str
    names: list[str]
    read: Callable[[str], bytes]

    @classmethod
    def from_directory(cls, path: Path) -> FileSource:
        names = sorted(p.name for p in path.iterdir() if p.is_file() and not p.is_symlink())
        return cls(str(path), names, lambda name: (path / name).read_bytes())

    @classmethod
    def from_zip(cls, data: bytes, label: str) -> FileSource:
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
            members = [m for m in archive.infolist() if not m.is_dir()]
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise LoadError(f"{label}: not a readable zip archive ({exc})") from None
        if len(members) > MAX_ZIP_MEMBERS:
            raise LoadError(f"{label}: the zip holds {len(members)} files; at most {MAX_ZIP_MEMBERS} are read")
        total = sum(m.file_size for m in members)
        if total > MAX_ZIP_UNCOMPRESSED:
            raise LoadError(f"{label}: the zip would expand to {total} bytes; the limit is {MAX_ZIP_UNCOMPRESSED}")
        by_name: dict[str, zipfile.ZipInfo] = {}
        for member in members:
            # Only base names are used: nothing is extracted, so a member called
            # "../../etc/x" is just a file named "x" here.
            base = member.filename.replace("\\", "/").rsplit("/", 1)[-1]
            if not base or base.startswith("."):
                continue
            if base in by_name:
                raise LoadError(f"{label}: two members are named {base!r}; zip one capture-store directory at a time")
            by_name[base] = member

        def read(name: str) -> bytes:
            member = by_name[name]
            with archive.open(member) as handle:
                # Read one byte past the declared size: a lying header cannot expand further.
                blob = handle.read(member.file_size + 1)
            if len(blob) > member.file_size:
                raise LoadError(f"{label}: member {name!r} is larger than its header says")
            return blob

        return cls(label, sorted(by_name), read)


@dataclass
class _StoreRollout:
    rollout_id: str
    files: dict[str, str] = field(default_factory=dict)  # suffix -> file name


def _classify(names: Iterable[str]) -> tuple[dict[str, _StoreRollout], list[str]]:
    rollouts: dict[str, _StoreRollout] = {}
    loose: list[str] = []
    for name in names:
        if name.endswith(".lock"):
            continue  # writer's lock files carry no records
        for suffix in _STORE_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                rid = name[: -len(suffix)]
                rollouts.setdefault(rid, _StoreRollout(rid)).files[suffix] = name
                break
        else:
            if name.endswith((".json", ".jsonl")):
                loose.append(name)
    return rollouts, loose


def split_torn_tail(data: bytes, name: str, notes: list[str]) -> bytes:
    """The acknowledged part of a store .jsonl: everything up to and including the last newline."""
    cut = data.rfind(b"\n") + 1
    torn = len(data) - cut
    if torn:
        notes.append(f"{name}: skipped a torn final line ({torn} bytes after the last newline were never "
                     "acknowledged by the writer)")
    return data[:cut]


def _load_store_rollout(source: FileSource, rollout: _StoreRollout) -> TokenCaptureSnapshot:
    rid, files = rollout.rollout_id, rollout.files
    notes: list[str] = []
    incomplete = False
    state: dict = {}
    if STATE_SUFFIX in files:
        name = files[STATE_SUFFIX]
        try:
            state = decode_value(source.read(name))
        except msgspec.DecodeError as exc:
            raise LoadError(f"{name}: not valid JSON ({exc})") from None
        if not isinstance(state, dict):
            raise LoadError(f"{name}: the state file must hold a JSON object")
        for key, kind in (("snapshot_id", str), ("version", int), ("incomplete", bool)):
            if key in state and state[key] is not None and (not isinstance(state[key], kind)
                                                             or (kind is int and isinstance(state[key], bool))):
                raise LoadError(f"{name}: field {key!r} has the wrong type ({state[key]!r})")
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
        body = split_torn_tail(source.read(name), name, notes)
        records = read_jsonl_records(body, name, refusals_only=is_refusal)
        strangers = [r for r in records.order if r != rid]
        if strangers:
            raise LoadError(f"{name}: records name rollout {strangers[0]!r}, but this file belongs to rollout {rid!r}")
        if records.order:
            entry_raws += [(name, line, raw) for line, raw in records.entries[rid]]
            refusal_raws += [(name, line, raw) for line, raw in records.refusals[rid]]

    where = files.get(ENTRIES_SUFFIX) or files.get(REFUSALS_SUFFIX) or rid
    snapshot = build_snapshot(
        rid, [(line, raw) for _, line, raw in entry_raws], [(line, raw) for _, line, raw in refusal_raws], where,
        snapshot_id=state.get("snapshot_id") or "", version=state.get("version") or 0,
    ) if (entry_raws or refusal_raws) else TokenCaptureSnapshot(rollout_id=rid, snapshot_id=state.get("snapshot_id") or "",
                                                                  version=state.get("version") or 0)

    if INTENTS_SUFFIX in files:
        name = files[INTENTS_SUFFIX]
        try:
            intents = [ln.strip() for ln in source.read(name).decode("utf-8").splitlines() if ln.strip()]
        except UnicodeDecodeError:
            raise LoadError(f"{name}: not UTF-8 text (expected one call id per line)") from None
        seen = {e.model_call_id for e in snapshot.entries} | {r.model_call_id for r in snapshot.engine_refusals}
        dangling = sorted({i for i in intents if i not in seen})
        if dangling:
            incomplete = True
            notes.append(f"{name}: {len(dangling)} dangling intent(s) with no captured entry or refusal "
                         f"(the call was started but never captured): {', '.join(dangling)}")
    return TokenCaptureSnapshot(
        rollout_id=rid, entries=snapshot.entries, engine_refusals=snapshot.engine_refusals,
        snapshot_id=snapshot.snapshot_id, version=snapshot.version, incomplete=incomplete, source_notes=notes,
    )


def _message(exc: Exception, name: str | None = None) -> str:
    """Our own errors already say where; anything else gets its type and the file."""
    if isinstance(exc, (LoadError, RecordError)):
        return str(exc)
    prefix = f"{name}: " if name else ""
    return f"{prefix}{type(exc).__name__}: {exc}"


def _base_name(name: str) -> str:
    for ext in (".jsonl", ".json"):
        if name.endswith(ext):
            return name[: -len(ext)]
    return name


def load_store(source: FileSource) -> list[TokenCaptureSnapshot]:
    """Every rollout of a capture-store directory; a bad one comes back with `load_error` set."""
    rollouts, loose = _classify(source.names)
    found: dict[str, list[tuple[str, TokenCaptureSnapshot]]] = {}

    def add(origin: str, snap: TokenCaptureSnapshot) -> None:
        found.setdefault(snap.rollout_id, []).append((origin, snap))

    for rid, rollout in sorted(rollouts.items()):
        origin = f"{rid}.tokens.*"
        try:
            add(origin, _load_store_rollout(source, rollout))
        except Exception as exc:  # noqa: BLE001 -- one bad rollout must not hide the others
            add(origin, TokenCaptureSnapshot.failed(rid, _message(exc)))
    for name in loose:
        try:
            for snap in load_text(source.read(name), name):
                add(name, snap)
        except Exception as exc:  # noqa: BLE001
            add(name, TokenCaptureSnapshot.failed(_base_name(name), _message(exc, name)))
    out = []
    for rid in sorted(found):
        sources = found[rid]
        if len(sources) == 1:
            out.append(sources[0][1])
        else:
            origins = ", ".join(origin for origin, _ in sources)
            out.append(TokenCaptureSnapshot.failed(
                rid, f"{source.label}: rollout {rid!r} comes from several sources ({origins}); keep one of them"))
    if not out:
        raise LoadError(f"{source.label}: no capture-store files and no .json/.jsonl files found")
    return out
