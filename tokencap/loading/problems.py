"""What is wrong with an input, in the words a user needs to find and fix it.

`LoadError` carries them: its message says which file, which line (JSONL) or entry
(snapshot), which call and field, and what is wrong. Here too are the words for what an
input is when it is not a capture: binary data, not JSON, a NaN or Infinity, a JSON value
that is not a snapshot, a rollout record, a `tokencap build` result.
"""

from __future__ import annotations

import re

import msgspec
from msgspec import Raw

from .lines import NON_BLANK, line_of
from .raw_records import Buffer, decode_raw_object, decode_value


class LoadError(ValueError):
    """Input that cannot be loaded; the message names file, line, record and problem."""


def where_of(name: str | None, detail: str | None = None) -> str:
    """Where a message puts its problem: the input's name and the ``detail`` (line, entry), else "input"."""
    parts = [p for p in (name, detail) if p]
    return ", ".join(parts) if parts else "input"


def json_problem(exc: msgspec.MsgspecError, data: Buffer) -> str:
    """msgspec's message with the byte offset turned into a line number."""
    text = str(exc)
    marker = "(byte "
    if marker in text:
        try:
            offset = int(text.rsplit(marker, 1)[1].rstrip(")"))
        except ValueError:
            return text
        return f"{text.rsplit(marker, 1)[0].rstrip()} (line {line_of(data, offset)}, byte {offset})"
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
    return f"{found[0]} at line {line_of(data, found[1])}, byte {found[1]} is not JSON ({NON_FINITE_FIX})"


def not_json(exc: msgspec.MsgspecError, line: Buffer) -> str:
    """Why one line of a JSON-lines text is not JSON: a NaN or Infinity said as such (with its byte in the
    line), anything else as the decoder says it."""
    found = non_finite_at(exc, line)
    if found is not None:
        return f"{found[0]} at byte {found[1]} of the line is not JSON ({NON_FINITE_FIX})"
    return f"not valid JSON ({exc})"


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


_EXPECTED = ("expected a snapshot (a JSON object with 'entries'), entries JSONL (one record a line), or a "
             "capture-store directory")
_FIRST_BYTE_KIND = {ord("["): "a JSON array", ord('"'): "a JSON string", ord("t"): "a JSON boolean",
                    ord("f"): "a JSON boolean", ord("n"): "JSON null"}
_RECORD_KEYS = ("response", "responses_create_params", "reward")
"""Keys of a rollout record (or a bare Responses object's ``object``) that captured calls never have."""

FINAL_RESPONSES_HINT = ("the harness's final responses go to --final-responses (or the app's final-responses "
                        "upload); SOURCE is the capture of the model calls")


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


def not_a_snapshot(data: Buffer) -> str:
    """What a one-value, non-blank text that is not a snapshot is, in words."""
    start = NON_BLANK.search(data)
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


__all__ = ["BUILD_RESULT", "FINAL_RESPONSES_HINT", "LoadError", "NON_FINITE_FIX", "SNIFF_BYTES", "binary_problem",
           "control_byte_at", "json_problem", "looks_like_build_result", "looks_like_rollout_record",
           "non_finite_at", "non_finite_problem", "not_a_snapshot", "not_json", "where_of"]
