"""Snapshot JSON (docs/contract.md#input-snapshot-json): one JSON object whose ``entries`` are a rollout's records.

A snapshot whose entries all hold exactly `TokenEntry`'s fields with their types is read by
the typed decode (`typed_snapshot`), a big one from its skeleton without its token arrays
(`skeleton`); any other is decoded to raw field texts (`decode_snapshot`), which the exact
record decode then judges. Either way `snapshot_from_wire` checks the top-level fields and
names the entry, field and problem of anything wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..record_errors import RecordError, shown, type_name
from ..records import EngineRefusalRecord, TokenCaptureSnapshot
from .problems import LoadError, where_of
from .raw_records import TOO_DEEP, Buffer, RawRecord, decode_value
from .skeleton import cut_token_arrays, restore_token_arrays
from .typed_lines import WireEntry, WireLine, typed_line
from .wire import RecordDecoder


class _SnapshotTop(msgspec.Struct, kw_only=True):
    """A snapshot JSON's top-level fields besides ``entries``, as raw texts that `snapshot_from_wire` judges."""

    rollout_id: Raw | UnsetType = UNSET
    snapshot_id: Raw | UnsetType = UNSET
    version: Raw | UnsetType = UNSET
    incomplete: Raw | UnsetType = UNSET
    engine_refusals: Raw | UnsetType = UNSET
    source_notes: Raw | UnsetType = UNSET
    load_error: Raw | UnsetType = UNSET


class _SnapshotWire(_SnapshotTop, kw_only=True):
    """Top level of a snapshot JSON; entries stay as raw field texts for the fast path."""

    entries: list[dict[str, Raw]] | UnsetType = UNSET


decode_snapshot = msgspec.json.Decoder(_SnapshotWire).decode
"""A snapshot JSON's top level, its entries as raw field texts (`msgspec.ValidationError` when it is no object)."""


class _TypedSnapshotWire(_SnapshotTop, kw_only=True):
    """`_SnapshotWire` whose entries are read by the typed decode (`WireEntry`), in the same C call."""

    entries: list[WireEntry]


_decode_typed_snapshot = msgspec.json.Decoder(_TypedSnapshotWire).decode


def typed_snapshot(data: Buffer, *, cut: bool = True) -> tuple[_TypedSnapshotWire, list[WireLine]] | None:
    """A snapshot JSON whose every entry the typed decode read: its top level and its entries
    as `WireLine`s (built by `TokenEntry.from_proven`), or None when the exact decode must
    read the text.

    Only a text whose entries all hold exactly `TokenEntry`'s fields with their table's
    types gets here; anything else (an unknown field, a wrong type, no ``entries``, not one
    JSON object) is None, and `load_text` reads it the exact way, which names the problem.
    The top-level fields stay raw texts, judged by `snapshot_from_wire` as before. A big
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


def snapshot_from_wire(wire: _SnapshotWire | _TypedSnapshotWire, raws: Sequence[RawRecord | WireLine],
                       name: str | None) -> TokenCaptureSnapshot:
    """The snapshot of a decoded top level whose entries are ``raws`` (raw records, or the
    typed decode's lines)."""
    where = where_of(name)
    decoder = RecordDecoder()
    try:
        entries = decoder.entries(raws)
    except RecordError as exc:
        index = exc.record_index
        raise LoadError(str(exc.located(where_of(name, f"entry {index}" if index is not None else None)))) from None
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
                raise LoadError(str(exc.located(where_of(name, f"engine refusal {i}")))) from None
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


__all__ = ["decode_snapshot", "snapshot_from_wire", "typed_snapshot"]
