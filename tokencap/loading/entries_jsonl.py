"""Entries JSONL (docs/contract.md#input-entries-jsonl): one record a line, grouped by rollout.

A line that holds a token entry whose small fields the typed decode proves (`decode_entry_line`)
takes that path; any other line is decoded to raw field texts and judged exactly. A line that
is no capture record (a rollout record, a `tokencap build` result, not JSON) is refused with
its file and line. A capture store's records files are read the same way, line by line.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterable
from dataclasses import dataclass, field

import msgspec
from msgspec import Raw

from ..record_errors import RecordError
from ..records import TokenCaptureSnapshot
from .lines import iter_lines
from .problems import (
    BUILD_RESULT,
    FINAL_RESPONSES_HINT,
    UTF8_BOM,
    LoadError,
    looks_like_build_result,
    looks_like_rollout_record,
    not_json,
    where_of,
)
from .raw_records import TOO_DEEP, Buffer, decode_field, decode_raw_object
from .typed_lines import WireLine, decode_entry_line
from .wire import RecordDecoder


@dataclass
class JsonlRecords:
    """The records of one JSONL text, grouped by rollout, with their line numbers."""

    entries: dict[str, list[tuple[int, dict[str, Raw] | WireLine]]] = field(default_factory=dict)
    refusals: dict[str, list[tuple[int, dict[str, Raw]]]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)

    def add(self, rollout_id: str, line: int, raw: dict[str, Raw] | WireLine) -> None:
        """A token entry's record (raw, or the typed decode's line)."""
        self._meet(rollout_id)
        self.entries[rollout_id].append((line, raw))

    def add_refusal(self, rollout_id: str, line: int, raw: dict[str, Raw]) -> None:
        self._meet(rollout_id)
        self.refusals[rollout_id].append((line, raw))

    def _meet(self, rollout_id: str) -> None:
        if rollout_id not in self.entries:
            self.entries[rollout_id] = []
            self.refusals[rollout_id] = []
            self.order.append(rollout_id)


def read_jsonl_records(data: Buffer | Iterable[tuple[int, Buffer]], where: str,
                       *, refusals_only: bool = False) -> JsonlRecords:
    """Group the records of a JSONL text (a buffer, or its numbered non-blank lines) by rollout."""
    out = JsonlRecords()
    lines = iter_lines(data) if isinstance(data, (bytes, bytearray, memoryview, mmap.mmap)) else data
    for line, chunk in lines:
        if not refusals_only:
            typed = decode_entry_line(chunk)
            if typed is not None:  # a token entry whose small fields are proved; else read exactly
                out.add(typed.wire.rollout_id, line, typed)
                continue
        try:
            raw = decode_raw_object(chunk)
        except RecursionError:
            raise LoadError(f"{where}, line {line}: {TOO_DEEP}") from None
        except msgspec.ValidationError:
            raise LoadError(f"{where}, line {line}: expected one JSON object per line") from None
        except msgspec.DecodeError as exc:
            if bytes(chunk[:3]) == UTF8_BOM:
                raise LoadError(f"{where}, line {line}: starts with a UTF-8 byte-order mark (BOM), which JSON text "
                                "may not hold; save the file as UTF-8 without a BOM") from None
            raise LoadError(f"{where}, line {line}: {not_json(exc, chunk)}") from None
        if looks_like_rollout_record(raw):
            raise LoadError(f"{where}, line {line}: a rollout record or Responses object, not a captured call; "
                            f"{FINAL_RESPONSES_HINT}")
        if looks_like_build_result(raw):
            raise LoadError(f"{where}, line {line}: {BUILD_RESULT}")
        try:
            record_type = decode_field(raw, "record_type") if "record_type" in raw else None
            rollout = decode_field(raw, "rollout_id") if "rollout_id" in raw else None
            call = decode_field(raw, "model_call_id") if "model_call_id" in raw else None
        except RecordError as exc:
            raise LoadError(str(exc.located(f"{where}, line {line}"))) from None
        call_part = f"call {call!r}: " if isinstance(call, str) else ""
        if not isinstance(rollout, str):
            raise LoadError(f"{where}, line {line}: {call_part}field 'rollout_id' is missing or not a string")
        if refusals_only or record_type == "engine_refusal":
            out.add_refusal(rollout, line, raw)
        else:
            out.add(rollout, line, raw)
    return out


def snapshots_from_records(records: JsonlRecords, where: str) -> list[TokenCaptureSnapshot]:
    return [build_snapshot(rid, records.entries[rid], records.refusals[rid], where) for rid in records.order]


def build_snapshot(rollout_id: str, entry_raws: list[tuple[int, dict[str, Raw] | WireLine]],
                   refusal_raws: list[tuple[int, dict[str, Raw]]], where: str, **fields) -> TokenCaptureSnapshot:
    """Decode one rollout's raw records; errors name the file and line of the bad record."""
    decoder = RecordDecoder()
    try:
        entries = decoder.entries([raw for _, raw in entry_raws])
    except RecordError as exc:
        index = exc.record_index
        line = entry_raws[index][0] if index is not None else None
        raise LoadError(str(exc.located(f"{where}, line {line}" if line else where))) from None
    refusals = []
    for line, raw in refusal_raws:
        try:
            refusals.append(decoder.refusal(raw))
        except RecordError as exc:
            raise LoadError(str(exc.located(f"{where}, line {line}"))) from None
    return TokenCaptureSnapshot(rollout_id=rollout_id, entries=entries, engine_refusals=refusals, **fields)


def load_jsonl(data: Buffer, name: str | None = None) -> list[TokenCaptureSnapshot]:
    where = where_of(name)
    records = read_jsonl_records(data, where)
    if not records.order:
        raise LoadError(f"{where}: no records found")
    return snapshots_from_records(records, where)


__all__ = ["JsonlRecords", "build_snapshot", "load_jsonl", "read_jsonl_records", "snapshots_from_records"]
