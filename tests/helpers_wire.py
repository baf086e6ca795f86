"""Entry lines and snapshot texts for the typed-decode tests: a small conversation, the mutations
hypothesis draws of its fields, and what a caller can see of what was loaded (to compare two loads).

Not a test module: test modules import from here, never from each other.
"""

from __future__ import annotations

import json
from typing import Any

from helpers import Conv
from hypothesis import strategies as st

from tokencap.records import PROVEN_FIELDS, TokenEntry, canonical_json

RAW = "\x00raw\x00"  # a placeholder replaced by a raw JSON text after json.dumps


def conversation(delta: bool) -> list[dict[str, Any]]:
    conv = Conv("r1")
    conv.root("call-1", output_items=[{"type": "message", "role": "assistant", "content": [{"text": "hi"}]}],
              token_item_index=0, finish_reason="stop", model="policy")
    conv.child("call-2", "call-1", delta=delta)
    conv.child("call-3", "call-2", delta=delta, routed_experts=[[1, 2], [3, 4], [5, 6]])
    conv.retry("call-4", "call-3")
    return conv.records


def entry_line(record: dict[str, Any], raw: str | None = None) -> bytes:
    text = json.dumps(record)
    if raw is not None:
        text = text.replace(json.dumps(RAW), raw)
    return text.encode()


def entry_fingerprint(entry: TokenEntry) -> tuple:
    """Everything about an entry a caller can see: its canonical JSON, every field's type,
    and the token arrays' dtype, class and writability."""
    arrays = tuple((type(a).__name__, a.dtype.str, a.flags.writeable, a.ndim)
                   for a in (entry.prompt_token_ids, entry.generation_token_ids, entry.generation_log_probs))
    types = tuple(type(getattr(entry, name)).__name__ for name in PROVEN_FIELDS)
    return canonical_json(entry), types, arrays, entry.extra


# Values that probe every type and range rule of docs/contract.md#token-entry and the carried-field limits.
EDGE_VALUES = [
    None, True, False, 0, 1, -1, 3, 5, 6, 7, 2, 0.0, -0.0, 1.5, 1e308, "", "x", "root", "resolved", "unresolved",
    "call-1", "call-2", "r1", "r2", [], [1, 2], [{}], [{"a": 1}], {}, {"a": [1, {"b": None}]}, [None], ["x"],
    (1 << 63) - 1, 1 << 63, -(1 << 63), -(1 << 63) - 1, (1 << 64) - 1, 1 << 64, 10 ** 30, 1e300,
]


RAW_TEXTS = [
    "1e400", "-1e400", "[1, [2]]", "[1.5]", "[-1]", "[18446744073709551615]", "[18446744073709551616]",
    "[true]", "[\"1\"]", "[]", "[ 1 , 2 ]", "[-0.5, 1e400]", "[-0.5, -1.5, -2.5]", "[1, 2, 3, 4]",
    "\"\\ud800\"", "[[[[[[1]]]]]]", "[" * 63 + "1" + "]" * 63, "[" * 64 + "1" + "]" * 64,
    "[" * 65 + "1" + "]" * 65, "[{\"k\": 12345678901234567890123}]", "[{\"k\": -9223372036854775809}]",
    "[{\"k\": \"1234567890123456789012\"}]", "[{\"a\": 1, \"a\": 2}]", "{\"type\": \"x\"}",
    "[" * 300 + "]" * 300, "123456789012345678901234567890", "5.0",
]


FIELDS = list(PROVEN_FIELDS) + ["record_type", "an_unknown_field"]


@st.composite
def entry_mutations(draw: st.DrawFn) -> tuple[int, str, str, Any]:
    """(record index, field, kind, value): set a field to a value or a raw text, or drop it."""
    index = draw(st.integers(0, 3))
    name = draw(st.sampled_from(FIELDS))
    kind = draw(st.sampled_from(["value", "raw", "drop"]))
    if kind == "value":
        return index, name, kind, draw(st.sampled_from(EDGE_VALUES))
    if kind == "raw":
        return index, name, kind, draw(st.sampled_from(RAW_TEXTS))
    return index, name, kind, None


def mutated_text(records: list[dict[str, Any]], mutations: list[tuple[int, str, str, Any]]) -> bytes:
    records = [dict(r) for r in records]
    raws: dict[int, str] = {}
    for index, name, kind, value in mutations:
        record = records[index]
        if kind == "drop":
            record.pop(name, None)
        elif kind == "value":
            record[name] = value
        else:
            # One raw text per record (the placeholder is one string); a second replaces it.
            for key, held in list(record.items()):
                if held == RAW:
                    record[key] = None
            record[name] = RAW
            raws[index] = value
    return b"\n".join(entry_line(r, raws.get(i)) for i, r in enumerate(records)) + b"\n"


TOP_FIELDS = ["rollout_id", "snapshot_id", "version", "incomplete", "engine_refusals", "source_notes",
               "load_error", "entries", "an_unknown_field"]


TOP_VALUES = [None, True, 0, 3, -1, 1 << 63, "", "r1", "r2", "snap-1", [], ["a note"], [1], {}, "x",
               [{"schema_version": 1, "rollout_id": "r1", "model_call_id": "refused", "recorded_at": 9.0,
                 "parent_resolution": "resolved", "parent_call_id": "call-3",
                 "code": "context_length_exceeded"}],
               [{"rollout_id": "r1"}], [None], [{"model_call_id": "x"}]]


def snapshots_seen(snapshots: list) -> list[tuple]:
    """Everything a caller can see of loaded snapshots: their fields, entries and refusals."""
    return [(s.rollout_id, s.snapshot_id, s.version, s.incomplete, s.source_notes, s.load_error,
             [entry_fingerprint(e) for e in s.entries], [r.to_dict() for r in s.engine_refusals]) for s in snapshots]


def snapshot_text(records: list[dict[str, Any]], mutations: list, top: list[tuple[str, str, Any]],
                   pretty: bool) -> bytes:
    lines = mutated_text(records, mutations).splitlines()
    entries = "[" + ", ".join(line.decode() for line in lines) + "]"
    snapshot: dict[str, Any] = {"rollout_id": "r1", "entries": RAW}
    for name, kind, value in top:
        if kind == "drop":
            snapshot.pop(name, None)
        elif name != "entries" or kind == "value":
            snapshot[name] = value
    text = json.dumps(snapshot, indent=2 if pretty else None)
    if "entries" in snapshot and snapshot["entries"] == RAW:
        text = text.replace(json.dumps(RAW), entries)
    return text.encode()


@st.composite
def top_mutations(draw: st.DrawFn) -> tuple[str, str, Any]:
    name = draw(st.sampled_from(TOP_FIELDS))
    kind = draw(st.sampled_from(["value", "drop"]))
    return name, kind, draw(st.sampled_from(TOP_VALUES)) if kind == "value" else None

