"""Records as raw JSON text: each field's text, and the exact decode of one field.

A record arrives as a mapping from field name to the field's raw JSON text (msgspec's
``Raw``: a zero-copy slice of the input). A loader splits an object into its fields'
texts once and decodes a field only when it needs its value; a field that cannot be read
is a RecordError naming the call and the field.
"""

from __future__ import annotations

import mmap
from collections.abc import Mapping
from typing import Any

import msgspec

from ..limits import MAX_CARRIED_DEPTH
from ..record_errors import RecordError

BLANKS = b" \t\r\n"
"""The bytes JSON allows between tokens."""

RawRecord = Mapping[str, msgspec.Raw]

Buffer = bytes | bytearray | memoryview | mmap.mmap
"""What a loader reads text from: a small file's bytes, a big one's memory map, or a view."""

TOO_DEEP = f"JSON nested too deeply to read (a carried field may nest at most {MAX_CARRIED_DEPTH} levels)"
"""The message for JSON so deep the decoder itself gives up (hundreds of levels): the same
rule as a carried field's depth limit, said the same way wherever it is hit."""

_decode_raw_object = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_decode_any = msgspec.json.Decoder().decode


def decode_raw_object(text: Buffer) -> dict[str, msgspec.Raw]:
    """Split one JSON object into its fields' raw texts (raises msgspec errors)."""
    return _decode_raw_object(text)


def decode_value(raw: msgspec.Raw | Buffer) -> Any:
    """The value of one JSON text (raises msgspec errors)."""
    return _decode_any(raw)


def decode_field(record: RawRecord, name: str) -> Any:
    """One field's value; an undecodable one (a number out of range, invalid UTF-8) is a
    RecordError naming the call and the field."""
    try:
        return _decode_any(record[name])
    except (msgspec.MsgspecError, RecursionError) as exc:
        call_id = None
        if name != "model_call_id" and "model_call_id" in record:
            try:
                value = _decode_any(record["model_call_id"])
                call_id = value if isinstance(value, str) else None
            except msgspec.MsgspecError:
                pass
        if isinstance(exc, RecursionError):
            raise RecordError(TOO_DEEP, call_id=call_id, field=name) from None
        problem = str(exc).split(" - at ")[0]
        raise RecordError(f"the value cannot be read: {problem}", call_id=call_id, field=name) from None


def skip_blank(data: Buffer, pos: int) -> int:
    """The position of the first byte at or after ``pos`` that is not JSON blank space."""
    n = len(data)
    while pos < n and data[pos] in BLANKS:
        pos += 1
    return pos
