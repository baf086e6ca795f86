"""A capture's text, snapshot JSON or entries JSONL: which of them it is, and loading it.

Detection follows the contract (docs/contract.md#input-snapshot-json, #input-entries-jsonl):
a text that parses as one JSON object with an `entries` key is a snapshot (`snapshot_json`);
any other text is JSONL (`entries_jsonl`). A text that is neither -- a parquet file, binary
data, blank, one JSON value that is not a snapshot -- is a `LoadError` that says what it is
(`problems`).
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..records import TokenCaptureSnapshot
from .entries_jsonl import load_jsonl
from .lines import is_blank, iter_lines, spans_lines
from .problems import LoadError, binary_problem, json_problem, non_finite_problem, not_a_snapshot, where_of
from .raw_records import TOO_DEEP, Buffer, decode_value
from .skeleton import may_cut
from .snapshot_json import decode_snapshot, snapshot_from_wire, typed_snapshot

PARQUET_MAGIC = b"PAR1"


class _PeekRecord(msgspec.Struct):
    """A record as `peek_rollout_ids` reads it: its rollout id only (every other field is
    skipped, and skipping checks the JSON exactly as a `Raw` field does)."""

    rollout_id: Raw | UnsetType = UNSET


class _PeekSnapshot(msgspec.Struct):
    """A snapshot's top level as `peek_rollout_ids` reads it: it decodes exactly the texts that
    `snapshot_json.decode_snapshot` does (``entries``, when present, a list of objects), keeping
    only the rollout ids."""

    entries: list[_PeekRecord] | UnsetType = UNSET
    rollout_id: Raw | UnsetType = UNSET
    engine_refusals: Raw | UnsetType = UNSET


_peek_snapshot = msgspec.json.Decoder(_PeekSnapshot).decode
_peek_record = msgspec.json.Decoder(_PeekRecord).decode


def is_text(data: Buffer) -> bool:
    """Whether ``data`` can be JSON text at all: not a parquet file, not binary, not blank
    (`load_text` says which of them it is)."""
    return bytes(data[:len(PARQUET_MAGIC)]) != PARQUET_MAGIC and binary_problem(data) is None and not is_blank(data)


def load_text(data: Buffer, name: str | None = None) -> list[TokenCaptureSnapshot]:
    """Load one snapshot JSON or entries JSONL text. Raises LoadError with a precise message."""
    if bytes(data[:len(PARQUET_MAGIC)]) == PARQUET_MAGIC:
        raise LoadError(f"{where_of(name)}: a parquet file (a scan table, as `tokencap scan` writes it), not captured "
                        "calls; open it with `tokencap app FILE` (or upload it on the app's Run page), and give "
                        "the run it was scanned from as SOURCE")
    problem = binary_problem(data)
    if problem is not None:
        raise LoadError(f"{where_of(name)}: {problem}")
    if is_blank(data):
        raise LoadError(f"{where_of(name)}: the input is empty; expected a snapshot JSON object or JSON lines")
    typed = typed_snapshot(data)
    if typed is not None:
        try:
            return [snapshot_from_wire(*typed, name)]
        except LoadError:
            if not may_cut(data):
                raise
        # A big text fails as the whole text does: a token array's broken JSON, which the
        # skeleton left for the array parser to find, is said where the decode finds it.
        typed = typed_snapshot(data, cut=False)
        if typed is not None:
            return [snapshot_from_wire(*typed, name)]
    whole_value = True  # the text is one JSON value (not necessarily an object)
    try:
        wire = decode_snapshot(data)
    except RecursionError:
        raise LoadError(f"{where_of(name)}: {TOO_DEEP}") from None
    except msgspec.ValidationError as exc:
        if "$.entries" in str(exc):
            raise LoadError(f"{where_of(name)}: snapshot JSON: {json_problem(exc, data)}; 'entries' must be a list "
                            "of token-entry objects") from None
        wire = None  # not an object
    except msgspec.DecodeError as exc:
        problem = non_finite_problem(exc, data)
        if problem is not None:  # not a reason to read it line by line: say where the NaN is
            raise LoadError(f"{where_of(name)}: {problem}") from None
        wire, whole_value = None, False  # several values or not JSON as a whole: read it line by line
    if wire is not None and wire.entries is not UNSET:
        return [snapshot_from_wire(wire, wire.entries, name)]
    if whole_value and (wire is None or spans_lines(data)):
        # One JSON value that is not a snapshot, and not a one-line JSONL record either:
        # say what it is rather than report its first line as broken JSON.
        raise LoadError(f"{where_of(name)}: {not_a_snapshot(data)}")
    return load_jsonl(data, name)


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


__all__ = ["PARQUET_MAGIC", "is_text", "load_text", "peek_rollout_ids"]
