"""Snapshot JSON and entries JSONL (docs/contract.md#input-snapshot-json, #input-entries-jsonl).

Detection follows the contract: a text that parses as one JSON object with an `entries`
key is a snapshot; any other text is JSONL. Errors are `LoadError`s whose message says
which file, which line (JSONL) or entry (snapshot), which call and field, and what is
wrong -- the things a user needs to find and fix the record.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..record_errors import RecordError, shown, type_name
from ..records import EngineRefusalRecord, TokenCaptureSnapshot, TokenEntry
from .raw_records import TOO_DEEP, Buffer, RawRecord, decode_field, decode_raw_object, decode_value
from .skeleton import cut_token_arrays, may_cut, restore_token_arrays
from .typed_lines import WireEntry, WireLine, decode_entry_line, typed_line
from .wire import RecordDecoder


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


class _TypedSnapshotWire(msgspec.Struct):
    """`_SnapshotWire` whose entries are read by the typed decode (`WireEntry`), in the same C call."""

    entries: list[WireEntry]
    rollout_id: Raw | UnsetType = UNSET
    snapshot_id: Raw | UnsetType = UNSET
    version: Raw | UnsetType = UNSET
    incomplete: Raw | UnsetType = UNSET
    engine_refusals: Raw | UnsetType = UNSET
    source_notes: Raw | UnsetType = UNSET
    load_error: Raw | UnsetType = UNSET


_decode_typed_snapshot = msgspec.json.Decoder(_TypedSnapshotWire).decode


class _PeekRecord(msgspec.Struct):
    """A record as `peek_rollout_ids` reads it: its rollout id only (every other field is
    skipped, and skipping checks the JSON exactly as a `Raw` field does)."""

    rollout_id: Raw | UnsetType = UNSET


class _PeekSnapshot(msgspec.Struct):
    """`_SnapshotWire` as `peek_rollout_ids` reads it: it decodes exactly the texts that one
    does (``entries``, when present, a list of objects), keeping only the rollout ids."""

    entries: list[_PeekRecord] | UnsetType = UNSET
    rollout_id: Raw | UnsetType = UNSET
    engine_refusals: Raw | UnsetType = UNSET


_peek_snapshot = msgspec.json.Decoder(_PeekSnapshot).decode
_peek_record = msgspec.json.Decoder(_PeekRecord).decode


def typed_snapshot(data: Buffer, *, cut: bool = True) -> tuple[_TypedSnapshotWire, list[WireLine]] | None:
    """A snapshot JSON whose every entry the typed decode read: its top level and its entries
    as `WireLine`s (built by `TokenEntry.from_proven`), or None when the exact decode must
    read the text.

    Only a text whose entries all hold exactly `TokenEntry`'s fields with their table's
    types gets here; anything else (an unknown field, a wrong type, no ``entries``, not one
    JSON object) is None, and `load_text` reads it the exact way, which names the problem.
    The top-level fields stay raw texts, judged by `_snapshot_from_wire` as before. A big
    text's token arrays are cut out first (``cut``, see `skeleton`).
    """
    try:
        typed = _typed_skeleton(data) if cut else None
        if typed is None:
            typed = _decode_typed_snapshot(data)
        lines = [typed_line(wire) for wire in typed.entries]
    except (msgspec.MsgspecError, RecursionError):
        return None
    return typed, lines


def _typed_skeleton(data: Buffer) -> _TypedSnapshotWire | None:
    """A big text's typed decode, read from its skeleton (`skeleton`), or None when the
    whole text must be decoded instead."""
    cut = cut_token_arrays(data)
    if cut is None:
        return None
    skeleton, cuts = cut
    try:
        typed = _decode_typed_snapshot(skeleton)
    except (msgspec.MsgspecError, RecursionError):
        return None  # the input itself says what is wrong with it
    return typed if restore_token_arrays(skeleton, cuts, typed.entries) else None


def _where(name: str | None, detail: str | None = None) -> str:
    parts = [p for p in (name, detail) if p]
    return ", ".join(parts) if parts else "input"


def _line_of(data: Buffer, byte_offset: int) -> int:
    view = memoryview(data)
    return _count_newlines(view, 0, min(byte_offset, len(view)))[0] + 1


def _json_problem(exc: msgspec.MsgspecError, data: Buffer) -> str:
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


NON_FINITE_FIX = "JSON has no NaN or Infinity: write null, or a finite number, there"


def non_finite_at(exc: msgspec.MsgspecError, data: Buffer) -> tuple[str, int] | None:
    """``(NaN | Infinity | -Infinity, byte offset)`` when ``exc`` (a failed decode of ``data``) stopped at such
    a token -- what Python's `json.dumps` writes for a float that is not finite, and no JSON reader takes."""
    text = str(exc)
    marker = "(byte "
    if "invalid character" not in text or marker not in text:
        return None
    try:
        offset = int(text.rsplit(marker, 1)[1].rstrip(")"))
    except ValueError:
        return None
    for token in ("NaN", "Infinity"):
        if bytes(data[offset:offset + len(token)]) == token.encode():
            if token == "Infinity" and offset > 0 and bytes(data[offset - 1:offset]) == b"-":
                return "-Infinity", offset - 1
            return token, offset
    return None


def non_finite_problem(exc: msgspec.MsgspecError, data: Buffer) -> str | None:
    """Words for a whole text whose decode stopped at a NaN or Infinity (with its line and byte), or None."""
    found = non_finite_at(exc, data)
    if found is None:
        return None
    return f"{found[0]} at line {_line_of(data, found[1])}, byte {found[1]} is not JSON ({NON_FINITE_FIX})"


def not_json(exc: msgspec.MsgspecError, line: Buffer) -> str:
    """Why one line of a JSON-lines text is not JSON: a NaN or Infinity said as such (with its byte in the
    line), anything else as the decoder says it."""
    found = non_finite_at(exc, line)
    if found is not None:
        return f"{found[0]} at byte {found[1]} of the line is not JSON ({NON_FINITE_FIX})"
    return f"not valid JSON ({exc})"


_NON_BLANK = re.compile(rb"[^ \t\r\n]")
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")

SNIFF_BYTES = 1024
"""How much of an input's start is looked at to tell binary data from JSON text."""


CAPTURE_INPUTS = "a snapshot JSON object, entries JSONL (one record a line), a capture-store directory or a zip of one"


UTF8_BOM = b"\xef\xbb\xbf"


def binary_problem(head: Buffer, expected: str = CAPTURE_INPUTS) -> str | None:
    """Why ``head`` (an input's first bytes) cannot start a JSON or JSON-lines text, or None.

    JSON text never holds a raw NUL or other control byte (only tab, newline and carriage
    return, as whitespace), so one in the first bytes means binary data: an image, a
    sparse or preallocated file, UTF-16 text. Said at once, instead of after scanning
    gigabytes for a line end.
    """
    sniff = bytes(head[:SNIFF_BYTES])
    at = control_byte_at(sniff)
    if at < 0:
        return None
    if sniff.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16 text (it starts with a UTF-16 byte-order mark), not UTF-8 JSON; save it as UTF-8"
    what = "a NUL byte" if sniff[at] == 0 else f"the control byte 0x{sniff[at]:02x}"
    return f"binary data ({what} at byte {at}), not JSON text; expected {expected}"


def control_byte_at(head: Buffer) -> int:
    """Offset of the first control byte JSON text cannot hold, within the first `SNIFF_BYTES`; -1 if none."""
    found = _CONTROL.search(bytes(head[:SNIFF_BYTES]))
    return -1 if found is None else found.start()


def is_blank(data: Buffer) -> bool:
    """True for empty or whitespace-only input (stops at the first real byte)."""
    return _NON_BLANK.search(data) is None


def is_text(data: Buffer) -> bool:
    """Whether ``data`` can be JSON text at all: not a parquet file, not binary, not blank
    (`load_text` says which of them it is)."""
    return bytes(data[:len(PARQUET_MAGIC)]) != PARQUET_MAGIC and binary_problem(data) is None and not is_blank(data)


def load_text(data: Buffer, name: str | None = None) -> list[TokenCaptureSnapshot]:
    """Load one snapshot JSON or entries JSONL text. Raises LoadError with a precise message."""
    if bytes(data[:len(PARQUET_MAGIC)]) == PARQUET_MAGIC:
        raise LoadError(f"{_where(name)}: a parquet file (a scan table, as `tokencap scan` writes it), not captured "
                        "calls; open it with `tokencap app FILE` (or upload it on the app's Run page), and give "
                        "the run it was scanned from as SOURCE")
    problem = binary_problem(data)
    if problem is not None:
        raise LoadError(f"{_where(name)}: {problem}")
    if is_blank(data):
        raise LoadError(f"{_where(name)}: the input is empty; expected a snapshot JSON object or JSON lines")
    typed = typed_snapshot(data)
    if typed is not None:
        try:
            return [_snapshot_from_wire(*typed, name)]
        except LoadError:
            if not may_cut(data):
                raise
        # A big text fails as the whole text does: a token array's broken JSON, which the
        # skeleton left for the array parser to find, is said where the decode finds it.
        typed = typed_snapshot(data, cut=False)
        if typed is not None:
            return [_snapshot_from_wire(*typed, name)]
    whole_value = True  # the text is one JSON value (not necessarily an object)
    try:
        wire = _decode_snapshot(data)
    except RecursionError:
        raise LoadError(f"{_where(name)}: {TOO_DEEP}") from None
    except msgspec.ValidationError as exc:
        if "$.entries" in str(exc):
            raise LoadError(f"{_where(name)}: snapshot JSON: {_json_problem(exc, data)}; 'entries' must be a list "
                            "of token-entry objects") from None
        wire = None  # not an object
    except msgspec.DecodeError as exc:
        problem = non_finite_problem(exc, data)
        if problem is not None:  # not a reason to read it line by line: say where the NaN is
            raise LoadError(f"{_where(name)}: {problem}") from None
        wire, whole_value = None, False  # several values or not JSON as a whole: read it line by line
    if wire is not None and wire.entries is not UNSET:
        return [_snapshot_from_wire(wire, wire.entries, name)]
    if whole_value and (wire is None or _spans_lines(data)):
        # One JSON value that is not a snapshot, and not a one-line JSONL record either:
        # say what it is rather than report its first line as broken JSON.
        raise LoadError(f"{_where(name)}: {_not_a_snapshot(data)}")
    return load_jsonl(data, name)


PARQUET_MAGIC = b"PAR1"
_EXPECTED = ("expected a snapshot (a JSON object with 'entries'), entries JSONL (one record a line), or a "
             "capture-store directory")
_FIRST_BYTE_KIND = {ord("["): "a JSON array", ord('"'): "a JSON string", ord("t"): "a JSON boolean",
                    ord("f"): "a JSON boolean", ord("n"): "JSON null"}
_RECORD_KEYS = ("response", "responses_create_params", "reward")
"""Keys of a rollout record (or a bare Responses object's ``object``) that captured calls never have."""

FINAL_RESPONSES_HINT = ("the harness's final responses go to --final-responses (or the app's final-responses "
                        "upload); SOURCE is the capture of the model calls")


def _spans_lines(data: Buffer) -> bool:
    """Whether the text's non-blank content runs over more than one line."""
    start = _NON_BLANK.search(data)
    newline = _NEWLINE.search(data, start.start()) if start is not None else None
    return newline is not None and _NON_BLANK.search(data, newline.end()) is not None


def looks_like_rollout_record(raw: dict[str, Raw]) -> bool:
    """A rollout record or a Responses object, not a captured call."""
    if "model_call_id" in raw or "prompt_token_ids" in raw:
        return False
    if any(key in raw for key in _RECORD_KEYS):
        return True
    try:
        return "object" in raw and decode_value(raw["object"]) == "response"
    except (msgspec.MsgspecError, RecursionError):
        return False


_BUILD_RESULT_KEYS = ("mask_sample", "mask_reasons", "rebuilt_response")

BUILD_RESULT = ("a `tokencap build` result (rollout_id, mask_sample, mask_reasons, metrics, rebuilt_response), "
                "not a capture; give the captured calls it was built from as SOURCE")


def looks_like_build_result(raw: dict[str, Raw]) -> bool:
    """What `tokencap build` (or `export`) wrote for a rollout, not a captured call."""
    return "model_call_id" not in raw and "prompt_token_ids" not in raw and all(k in raw for k in _BUILD_RESULT_KEYS)


def _not_a_snapshot(data: Buffer) -> str:
    """What a one-value, non-blank text that is not a snapshot is, in words."""
    start = _NON_BLANK.search(data)
    assert start is not None  # load_text refused a blank text before
    first = bytes(data[start.start():start.start() + 1])[0]
    if first != ord("{"):
        kind = _FIRST_BYTE_KIND.get(first, "a JSON number")
        return f"{kind}, not a snapshot: {_EXPECTED}"
    try:
        raw = decode_raw_object(data)
    except (msgspec.MsgspecError, RecursionError):
        raw = {}
    if looks_like_rollout_record(raw):
        return f"a JSON object that looks like a rollout record or a Responses object, not captured calls; " \
               f"{FINAL_RESPONSES_HINT}"
    if looks_like_build_result(raw):
        return BUILD_RESULT
    keys = ", ".join(repr(k) for k in list(raw)[:_LISTED_KEYS]) + (", ..." if len(raw) > _LISTED_KEYS else "")
    held = f" (its keys: {keys})" if keys else " (it is empty)"
    return f"a JSON object without 'entries'{held}: {_EXPECTED}"


_LISTED_KEYS = 6


def peek_rollout_ids(data: Buffer) -> set[str]:
    """The rollout ids `load_text` would return for ``data`` if it loads -- without building a record.

    Detection is the same as `load_text`'s; only the ``rollout_id`` fields are read. On
    success `load_text`'s rollout ids are always a subset of these; on input it cannot
    load the answer does not matter (the caller names a failed file by its base name).
    A directory uses this to load its loose files lazily, in rollout order.
    """
    ids: set[str] = set()
    if binary_problem(data) is not None:
        return ids  # load_text refuses it at once

    def add(raw: Raw | UnsetType | None) -> None:
        if raw is not None and raw is not UNSET:
            try:
                value = decode_value(raw)
            except (msgspec.MsgspecError, RecursionError):
                return
            if isinstance(value, str):
                ids.add(value)

    if is_blank(data):
        return ids
    try:
        wire = _peek_snapshot(data)
    except (msgspec.MsgspecError, RecursionError):
        wire = None
    if wire is not None and wire.entries is not UNSET:
        add(wire.rollout_id)
        for record in wire.entries:
            add(record.rollout_id)
        if wire.engine_refusals is not UNSET:
            try:
                refusals = decode_value(wire.engine_refusals)
            except (msgspec.MsgspecError, RecursionError):
                refusals = None
            for item in refusals if isinstance(refusals, list) else ():
                if isinstance(item, dict) and isinstance(item.get("rollout_id"), str):
                    ids.add(item["rollout_id"])
        return ids
    for _line, chunk in iter_lines(data):
        try:
            add(_peek_record(chunk).rollout_id)
        except (msgspec.MsgspecError, RecursionError):
            break  # load_text fails on this line: the file will not load
    return ids


_KIND_WORDS = {str: "a string", int: "an integer", bool: "true or false", list: "a list"}


def _decode_optional(raw: Raw | UnsetType, default: Any, kind: type, label: str, where: str) -> Any:
    if raw is UNSET:
        return default
    try:
        value = decode_value(raw)
    except RecursionError:
        raise LoadError(f"{where}: snapshot field {label!r}: {TOO_DEEP}") from None
    except msgspec.MsgspecError as exc:
        raise LoadError(f"{where}: snapshot field {label!r} cannot be read: {str(exc).split(' - at ')[0]}") from None
    if value is None and default is None:
        return None
    # A boolean is never an int or a string here (Python's bool is an int subclass).
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise LoadError(f"{where}: snapshot field {label!r} must be {_KIND_WORDS[kind]}, got {type_name(value)}")
    if kind is int and isinstance(value, int) and not -(1 << 63) <= value < 1 << 63:
        raise LoadError(f"{where}: snapshot field {label!r} is {shown(value)}; it must fit in 64 bits")
    return value


def _snapshot_from_wire(wire: _SnapshotWire | _TypedSnapshotWire, raws: Sequence[RawRecord | WireLine],
                        name: str | None) -> TokenCaptureSnapshot:
    """The snapshot of a decoded top level whose entries are ``raws`` (raw records, or the
    typed decode's lines)."""
    where = _where(name)
    decoder = RecordDecoder()
    try:
        entries = decoder.entries(raws)
    except RecordError as exc:
        index = exc.record_index
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


_NEWLINE = re.compile(rb"\n")
_BLOCK = 1 << 20


def _count_newlines(view: memoryview, start: int, end: int) -> tuple[int, int]:
    """(newlines in ``view[start:end]``, offset of the last one or -1), a block at a time."""
    count, last = 0, -1
    for lo in range(start, end, _BLOCK):
        block = bytes(view[lo: min(end, lo + _BLOCK)])
        found = block.count(b"\n")
        if found:
            count += found
            last = lo + block.rfind(b"\n")
    return count, last


def iter_lines(data: Buffer, first_line: int = 1
               ) -> Iterator[tuple[int, memoryview]]:
    """Non-blank lines as zero-copy views, with 1-based line numbers.

    Blank stretches are crossed by one regex search and counted with ``bytes.count`` (C
    speed, a block at a time), never by a Python step per line: a flood of blank lines
    costs what reading it costs.
    """
    view = _byte_view(data)
    for line, start, end in line_spans(view, first_line):
        yield line, view[start:end]


def _byte_view(data: Buffer) -> memoryview:
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view


def line_spans(data: Buffer, first_line: int = 1
               ) -> Iterator[tuple[int, int, int]]:
    """`iter_lines` as (line number, start offset, end offset) of each non-blank line."""
    view = _byte_view(data)
    n, pos, line = len(view), 0, first_line
    while pos < n:
        found = _NON_BLANK.search(view, pos)
        if found is None:
            return
        first = found.start()
        start = pos
        if first > pos:  # a blank stretch: count its newlines
            skipped, last = _count_newlines(view, pos, first)
            line += skipped
            if last >= 0:
                start = last + 1
        newline = _NEWLINE.search(view, first)
        end = newline.start() if newline is not None else n
        yield line, start, end
        pos, line = end + 1, line + 1


def iter_stream_lines(chunks: Iterable[bytes], on_torn: Callable[[int], None]) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of a text that arrives in chunks, each line its own bytes object.

    Only complete lines (ended by a newline) are yielded: the bytes after the last newline
    are reported to ``on_torn`` (their count) and dropped -- a store's unacknowledged
    tail. A blank stretch is never held in memory; a line with content is held until its
    newline arrives.
    """
    line = 1
    pending: list[bytes] = []  # the unfinished line, once it has a non-blank byte
    pending_blank = 0  # bytes of the unfinished line that were blank (not kept)
    for chunk in chunks:
        first = chunk.find(b"\n")
        if first < 0:
            if pending or _NON_BLANK.search(chunk):
                pending.append(chunk)
            else:
                pending_blank += len(chunk)
            continue
        head = chunk[:first]
        if pending:
            pending.append(head)
            yield line, b"".join(pending)
        elif _NON_BLANK.search(head):
            yield line, head
        line += 1
        cut = chunk.rfind(b"\n")
        if cut > first:
            body = memoryview(chunk)[first + 1: cut + 1]
            for number, text in iter_lines(body, line):
                yield number, bytes(text)  # its own copy: the chunk is not kept alive
            line += chunk.count(b"\n", first + 1, cut + 1)
        tail = chunk[cut + 1:]
        pending, pending_blank = ([tail], 0) if _NON_BLANK.search(tail) else ([], len(tail))
    torn = pending_blank + sum(len(piece) for piece in pending)
    if torn:
        on_torn(torn)


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
    where = _where(name)
    records = read_jsonl_records(data, where)
    if not records.order:
        raise LoadError(f"{where}: no records found")
    return snapshots_from_records(records, where)


__all__ = [
    "LoadError",
    "TokenEntry",
    "build_snapshot",
    "iter_lines",
    "load_jsonl",
    "load_text",
    "read_jsonl_records",
]
