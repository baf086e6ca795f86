"""Snapshot JSON and entries JSONL (SPEC 3.1, 3.2).

Detection follows the contract: a text that parses as one JSON object with an `entries`
key is a snapshot; any other text is JSONL. Errors are `LoadError`s whose message says
which file, which line (JSONL) or entry (snapshot), which call and field, and what is
wrong -- the things a user needs to find and fix the record.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..records import EngineRefusalRecord, RecordError, TokenCaptureSnapshot, TokenEntry
from .wire import RecordDecoder, decode_field, decode_raw_object, decode_value


class LoadError(ValueError):
    """Input that cannot be loaded; the message names file, line, record and problem."""


class _SnapshotWire(msgspec.Struct):
    """Top level of a snapshot JSON; entries stay as raw field texts for the fast path."""

    entries: list[dict[str, Raw]] | UnsetType = UNSET
    rollout_id: Raw | UnsetType = UNSET
    snapshot_id: Raw | UnsetType = UNSET
    version: Raw | UnsetType = UNSET
    incomplete: Raw | UnsetType = UNSET
    engine_refusals: Raw | UnsetType = UNSET
    source_notes: Raw | UnsetType = UNSET
    load_error: Raw | UnsetType = UNSET


_decode_snapshot = msgspec.json.Decoder(_SnapshotWire).decode


def _where(name: str | None, detail: str | None = None) -> str:
    parts = [p for p in (name, detail) if p]
    return ", ".join(parts) if parts else "input"


def _line_of(data: bytes | memoryview, byte_offset: int) -> int:
    return bytes(memoryview(data)[:byte_offset]).count(b"\n") + 1


def _json_problem(exc: msgspec.MsgspecError, data: bytes | memoryview) -> str:
    """msgspec's message with the byte offset turned into a line number."""
    text = str(exc)
    marker = "(byte "
    if marker in text:
        try:
            offset = int(text.rsplit(marker, 1)[1].rstrip(")"))
        except ValueError:
            return text
        return f"{text.rsplit(marker, 1)[0].rstrip()} (line {_line_of(data, offset)}, byte {offset})"
    return text


_NON_BLANK = re.compile(rb"[^ \t\r\n]")


def is_blank(data: bytes | memoryview) -> bool:
    """True for empty or whitespace-only input (stops at the first real byte)."""
    return _NON_BLANK.search(data) is None


def load_text(data: bytes | memoryview, name: str | None = None) -> list[TokenCaptureSnapshot]:
    """Load one snapshot JSON or entries JSONL text. Raises LoadError with a precise message."""
    if is_blank(data):
        raise LoadError(f"{_where(name)}: the input is empty; expected a snapshot JSON object or JSON lines")
    try:
        wire = _decode_snapshot(data)
    except msgspec.ValidationError as exc:
        if "$.entries" in str(exc):
            raise LoadError(f"{_where(name)}: snapshot JSON: {_json_problem(exc, data)}; 'entries' must be a list "
                            "of token-entry objects") from None
        wire = None  # not an object: JSONL (which reports its own line errors)
    except msgspec.DecodeError:
        wire = None  # several values or not JSON as a whole: read it line by line
    if wire is not None and wire.entries is not UNSET:
        return [_snapshot_from_wire(wire, name)]
    return load_jsonl(data, name)


def _decode_optional(raw: Raw | UnsetType, default, kind: type | tuple, label: str, where: str):
    if raw is UNSET:
        return default
    try:
        value = decode_value(raw)
    except msgspec.MsgspecError as exc:
        raise LoadError(f"{where}: snapshot field {label!r} cannot be read: {str(exc).split(' - at ')[0]}") from None
    if value is None and default is None:
        return None
    if isinstance(value, bool) and kind is not bool:
        value = object()  # booleans are not ints or strings here
    if not isinstance(value, kind):
        raise LoadError(f"{where}: snapshot field {label!r} has the wrong type ({value!r})")
    return value


def _snapshot_from_wire(wire: _SnapshotWire, name: str | None) -> TokenCaptureSnapshot:
    where = _where(name)
    decoder = RecordDecoder()
    raws = wire.entries
    try:
        entries = decoder.entries(raws)  # type: ignore[arg-type]
    except RecordError as exc:
        index = getattr(exc, "record_index", None)
        raise LoadError(str(exc.located(_where(name, f"entry {index}" if index is not None else None)))) from None
    refusals: list[EngineRefusalRecord] = []
    if wire.engine_refusals is not UNSET:
        items = _decode_optional(wire.engine_refusals, None, list, "engine_refusals", where)
        if items is None:
            items = []
        if not isinstance(items, list):
            raise LoadError(f"{where}: snapshot field 'engine_refusals' must be a list of objects")
        for i, item in enumerate(items):
            try:
                refusals.append(EngineRefusalRecord.from_dict(item))
            except RecordError as exc:
                raise LoadError(str(exc.located(_where(name, f"engine refusal {i}")))) from None
    rollout_id = _decode_optional(wire.rollout_id, None, str, "rollout_id", where)
    ids = {e.rollout_id for e in entries} | {r.rollout_id for r in refusals}
    if rollout_id is None:
        if not entries:
            raise LoadError(f"{where}: a snapshot needs a 'rollout_id' or at least one entry to take it from")
        if len(ids) > 1:
            raise LoadError(f"{where}: entries belong to several rollouts ({', '.join(sorted(ids))}); a snapshot "
                            "holds one rollout -- split it, or use entries JSONL, which groups by rollout_id")
        rollout_id = next(iter(ids))
    else:
        strangers = sorted(ids - {rollout_id})
        if strangers:
            raise LoadError(f"{where}: the snapshot is for rollout {rollout_id!r} but records name "
                            f"{', '.join(map(repr, strangers))}")
    notes = _decode_optional(wire.source_notes, [], list, "source_notes", where)
    if not all(isinstance(n, str) for n in notes):
        raise LoadError(f"{where}: snapshot field 'source_notes' must be a list of strings")
    return TokenCaptureSnapshot(
        rollout_id=rollout_id,
        entries=entries,
        engine_refusals=refusals,
        snapshot_id=_decode_optional(wire.snapshot_id, "", str, "snapshot_id", where),
        version=_decode_optional(wire.version, 0, int, "version", where),
        incomplete=_decode_optional(wire.incomplete, False, bool, "incomplete", where),
        source_notes=notes,
        load_error=_decode_optional(wire.load_error, None, str, "load_error", where),
    )



# --------------------------------------------------------------------------- JSONL


@dataclass
class JsonlRecords:
    """The records of one JSONL text, grouped by rollout, with their line numbers."""

    entries: dict[str, list[tuple[int, dict[str, Raw]]]] = field(default_factory=dict)
    refusals: dict[str, list[tuple[int, dict[str, Raw]]]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)

    def add(self, rollout_id: str, line: int, raw: dict[str, Raw], is_refusal: bool) -> None:
        if rollout_id not in self.entries:
            self.entries[rollout_id] = []
            self.refusals[rollout_id] = []
            self.order.append(rollout_id)
        (self.refusals if is_refusal else self.entries)[rollout_id].append((line, raw))


def iter_lines(data: bytes | memoryview) -> Iterator[tuple[int, memoryview]]:
    """Non-blank lines as zero-copy views, with 1-based line numbers."""
    view = memoryview(data)
    raw = view.tobytes() if isinstance(data, memoryview) else data  # bytes and mmap both have find()
    pos, line, n = 0, 1, len(raw)
    while pos < n:
        end = raw.find(b"\n", pos)
        if end == -1:
            end = n
        chunk = view[pos:end]
        if raw[pos:end].strip():
            yield line, chunk
        pos, line = end + 1, line + 1


def read_jsonl_records(data: bytes | memoryview, where: str, *, refusals_only: bool = False) -> JsonlRecords:
    return read_jsonl_lines(iter_lines(data), where, refusals_only=refusals_only)


def read_jsonl_lines(lines: Iterable[tuple[int, bytes | memoryview]], where: str, *,
                     refusals_only: bool = False) -> JsonlRecords:
    """Group (line number, line text) pairs by rollout; a run scan feeds one rollout's lines of a big file."""
    out = JsonlRecords()
    for line, chunk in lines:
        try:
            raw = decode_raw_object(chunk)
        except msgspec.ValidationError:
            raise LoadError(f"{where}, line {line}: expected one JSON object per line") from None
        except msgspec.DecodeError as exc:
            raise LoadError(f"{where}, line {line}: not valid JSON ({exc})") from None
        try:
            record_type = decode_field(raw, "record_type") if "record_type" in raw else None
            rollout = decode_field(raw, "rollout_id") if "rollout_id" in raw else None
            call = decode_field(raw, "model_call_id") if "model_call_id" in raw else None
        except RecordError as exc:
            raise LoadError(str(exc.located(f"{where}, line {line}"))) from None
        call_part = f"call {call!r}: " if isinstance(call, str) else ""
        if not isinstance(rollout, str):
            raise LoadError(f"{where}, line {line}: {call_part}field 'rollout_id' is missing or not a string")
        out.add(rollout, line, raw, refusals_only or record_type == "engine_refusal")
    return out


def snapshots_from_records(records: JsonlRecords, where: str) -> list[TokenCaptureSnapshot]:
    return [build_snapshot(rid, records.entries[rid], records.refusals[rid], where) for rid in records.order]


def build_snapshot(rollout_id: str, entry_raws: list[tuple[int, dict[str, Raw]]],
                   refusal_raws: list[tuple[int, dict[str, Raw]]], where: str, **fields) -> TokenCaptureSnapshot:
    """Decode one rollout's raw records; errors name the file and line of the bad record."""
    decoder = RecordDecoder()
    try:
        entries = decoder.entries([raw for _, raw in entry_raws])
    except RecordError as exc:
        index = getattr(exc, "record_index", None)
        line = entry_raws[index][0] if index is not None else None
        raise LoadError(str(exc.located(f"{where}, line {line}" if line else where))) from None
    refusals = []
    for line, raw in refusal_raws:
        try:
            refusals.append(decoder.refusal(raw))
        except RecordError as exc:
            raise LoadError(str(exc.located(f"{where}, line {line}"))) from None
    return TokenCaptureSnapshot(rollout_id=rollout_id, entries=entries, engine_refusals=refusals, **fields)



def load_jsonl(data: bytes | memoryview, name: str | None = None) -> list[TokenCaptureSnapshot]:
    where = _where(name)
    records = read_jsonl_records(data, where)
    if not records.order:
        raise LoadError(f"{where}: no records found")
    return snapshots_from_records(records, where)


__all__ = ["LoadError", "load_text", "load_jsonl", "read_jsonl_records", "build_snapshot", "iter_lines",
           "TokenEntry"]
