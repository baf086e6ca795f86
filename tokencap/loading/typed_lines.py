"""Typed lines: a token entry line read in one C call, every small field's type proved.

A JSONL token entry line is first decoded into `WireEntry`, which proves each small field's
type at once, so `TokenEntry.from_proven` builds the entry without checking them again; its
carried fields are walked only when their text cannot vouch for them. Any line the decode
cannot read goes the exact way (`tokencap.loading.wire`), which names what is wrong.
"""

from __future__ import annotations

from typing import Any, Literal, final

import msgspec

from ..limits import CARRIED_INT_MAX, CARRIED_INT_MIN, MAX_CARRIED_DEPTH
from ..record_checks import carried_problem
from .raw_records import Buffer, decode_value


class WireEntry(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A token entry line's fields with the types the contract gives them, read in one C call.

    Decoding a line into this proves every small field's type at once (a bool is never an
    int here, a null only where the table allows it), so the entry is built without checking
    them again (`TokenEntry.from_proven`). It is `TokenEntry`'s table (names, order, defaults,
    so a field left out means what it means there; tests/test_wire_typed.py holds the two
    together), except that the token arrays stay raw text for the typed array parser, an
    integer ``created_at`` stays one (as the exact path reads it), ``parent_resolution`` is
    the status's text, and ``output_items`` and ``routed_experts`` stay raw so their text
    can show cheaply that they need no carried-field walk. Any line this cannot read (an
    unknown field, a wrong type, a missing field) is read the exact way instead, which names
    what is wrong: this is a shortcut, never a judge.
    """

    rollout_id: str
    model_call_id: str
    prompt_token_ids: msgspec.Raw
    generation_token_ids: msgspec.Raw
    generation_log_probs: msgspec.Raw
    schema_version: int = 5
    model: str = ""
    routed_experts: msgspec.Raw = msgspec.Raw(b"null")
    output_items: msgspec.Raw = msgspec.Raw(b"[]")
    token_item_index: int | None = None
    created_at: int | float = 0.0
    parent_resolution: Literal["root", "resolved", "unresolved"] | None = None
    parent_call_id: str | None = None
    parent_resolution_reason: str = ""
    cum_len: int | None = None
    digest: str | None = None
    prompt_is_delta: bool = False
    prefix_requested: bool = False
    prefix_supplied: bool = False
    continuation_fingerprint: Any = ""
    continuation_context_len: Any = 0
    continuation_context_digest: Any = ""
    fingerprint_version: Any = None
    finish_reason: str | None = None


_RAW_FIELDS = frozenset(("prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts",
                         "output_items"))
_SMALL_FIELDS = tuple(name for name in WireEntry.__struct_fields__ if name not in _RAW_FIELDS)
_NULL = msgspec.Raw(b"null")
_decode_wire_entry = msgspec.json.Decoder(WireEntry).decode
_decode_items = msgspec.json.Decoder(list[dict[str, Any]]).decode


@final  # so `type(r) is WireLine` tells a line from a raw record for the type checker too
class WireLine:
    """A token entry line the typed decode read: its fields, and its carried fields' values."""

    __slots__ = ("wire", "output_items", "routed_experts")

    def __init__(self, wire: WireEntry, output_items: list[dict[str, Any]], routed_experts: Any) -> None:
        self.wire = wire
        self.output_items = output_items
        self.routed_experts = routed_experts

    def raw_fields(self) -> dict[str, msgspec.Raw]:
        """The token arrays' texts and the call id, as the exact path reads them from a raw
        record (`decode_field` names the call in its errors)."""
        w = self.wire
        return {"model_call_id": msgspec.Raw(msgspec.json.encode(w.model_call_id)),
                "prompt_token_ids": w.prompt_token_ids, "generation_token_ids": w.generation_token_ids,
                "generation_log_probs": w.generation_log_probs}

    def plain_fields(self) -> dict[str, Any]:
        """Every small field's value: what the exact path decodes from a raw record of this line
        (a field the line left out holds the default, which is what its absence means)."""
        w = self.wire
        data = {name: getattr(w, name) for name in _SMALL_FIELDS}
        data["output_items"] = self.output_items
        data["routed_experts"] = self.routed_experts
        return data


def decode_entry_line(text: Buffer) -> WireLine | None:
    """A token entry line read by the typed decode, or None when the exact path must read it."""
    try:
        return typed_line(_decode_wire_entry(text))
    except (msgspec.MsgspecError, RecursionError):
        return None


def typed_line(wire: WireEntry) -> WireLine:
    """A decoded `WireEntry` with its carried fields' values (raises msgspec errors, or
    RecursionError, when they are not what the exact path would read)."""
    items = _decode_items(wire.output_items)
    experts = None if wire.routed_experts == _NULL else decode_value(wire.routed_experts)
    return WireLine(wire, items, experts)


_DIGITS_AS_NINES = bytes(57 if 48 <= byte <= 57 else 32 for byte in range(256))
_NINETEEN_DIGITS = b"9" * 19


def _text_needs_no_walk(raw: msgspec.Raw) -> bool:
    """Whether a carried field's JSON text surely passes `carried_problem` without the walk:
    at most `MAX_CARRIED_DEPTH` brackets in all bound its nesting, and without a run of 19
    digits every integer in it is within 64 bits (decoded JSON has no other way to fail:
    keys are strings and a non-finite number does not decode). Strings count too, so this
    can only say "walk it" more often than needed."""
    text = bytes(raw)
    return (text.count(b"[") + text.count(b"{") <= MAX_CARRIED_DEPTH
            and _NINETEEN_DIGITS not in text.translate(_DIGITS_AS_NINES))


def carried_values_pass(line: WireLine) -> bool:
    """Whether every carried field of a typed line passes `carried_problem`."""
    w = line.wire
    if not _text_needs_no_walk(w.output_items) and carried_problem(line.output_items, "output_items") is not None:
        return False
    experts = line.routed_experts
    if experts is not None and not _text_needs_no_walk(w.routed_experts) \
            and carried_problem(experts, "routed_experts") is not None:
        return False
    for value in (w.continuation_fingerprint, w.continuation_context_len, w.continuation_context_digest,
                  w.fingerprint_version):
        kind = type(value)
        if kind is str or value is None or kind is bool or kind is float:
            continue  # a decoded float is finite
        if kind is int and CARRIED_INT_MIN <= value <= CARRIED_INT_MAX:
            continue
        if carried_problem(value, "carried") is not None:
            return False
    return True
