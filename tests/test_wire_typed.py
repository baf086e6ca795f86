"""The typed line decode (`loading.typed_lines.decode_entry_line` + `TokenEntry.from_proven`) against
the exact path it shortcuts.

The typed decode reads a token entry line's small fields in one call and builds the entry
without re-checking their types. It may hand a line to the exact path more often than
needed, never less: for any JSONL text, loading with it and loading with every line read
the exact way must give the same snapshots (byte for byte) or the same error message.
"""

from __future__ import annotations

import json
import random
from dataclasses import MISSING
from dataclasses import fields as dataclass_fields
from typing import Any, get_type_hints

import msgspec
import msgspec.inspect
import pytest
from helpers_wire import (
    conversation,
    entry_fingerprint,
    entry_line,
    entry_mutations,
    mutated_text,
    snapshot_text,
    snapshots_seen,
    top_mutations,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokencap.loading import capture_text, entries_jsonl
from tokencap.loading.entries_jsonl import load_jsonl
from tokencap.loading.problems import LoadError
from tokencap.loading.raw_records import decode_raw_object
from tokencap.loading.snapshot_json import typed_snapshot
from tokencap.loading.typed_lines import WireEntry, WireLine, decode_entry_line
from tokencap.loading.wire import RecordDecoder
from tokencap.record_errors import RecordError
from tokencap.records import ParentResolutionStatus, TokenEntry


def _outcome(data: bytes, typed: bool) -> tuple[str, Any]:
    """('ok', every snapshot's canonical bytes and field types) or ('error', the message)."""
    with pytest.MonkeyPatch.context() as patch:
        if not typed:
            patch.setattr(entries_jsonl, "decode_entry_line", lambda _text: None)
        try:
            snapshots = load_jsonl(data, "run.jsonl")
        except LoadError as exc:
            return "error", str(exc)
    return "ok", [(s.rollout_id, [entry_fingerprint(e) for e in s.entries]) for s in snapshots]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(delta=st.booleans(), mutations=st.lists(entry_mutations(), min_size=0, max_size=3))
def test_typed_and_exact_loads_agree_on_every_mutated_text(delta: bool, mutations: list) -> None:
    data = mutated_text(conversation(delta), mutations)
    assert _outcome(data, True) == _outcome(data, False)


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), delta=st.booleans())
def test_typed_and_exact_loads_agree_in_any_line_order_and_spacing(seed: int, delta: bool) -> None:
    rng = random.Random(seed)
    records = conversation(delta)
    rng.shuffle(records)
    lines = []
    for record in records:
        items = list(record.items())
        rng.shuffle(items)
        spaced = rng.random() < 0.5
        lines.append(json.dumps(dict(items), indent=None, separators=(" , ", " : ") if spaced else (",", ":")))
    data = ("\n".join(lines) + "\n").encode()
    typed = _outcome(data, True)
    assert typed[0] == "ok" and typed == _outcome(data, False)


@pytest.mark.parametrize("delta", [False, True])
def test_every_line_of_a_well_formed_store_takes_the_typed_path(delta: bool, monkeypatch) -> None:
    """A real capture's lines never fall back: the shortcut is what a scan runs on."""
    data = mutated_text(conversation(delta), [])
    lines = [line for line in data.splitlines() if line]
    typed = [decode_entry_line(line) for line in lines]
    assert all(isinstance(t, WireLine) for t in typed)

    def refuse(*_args, **_kwargs):
        raise AssertionError("the exact path ran on a well-formed line")

    monkeypatch.setattr(TokenEntry, "from_dict", classmethod(refuse))
    entries = RecordDecoder().entries(typed)  # type: ignore[arg-type]
    assert [e.model_call_id for e in entries] == ["call-1", "call-2", "call-3", "call-4"]


def _nested(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize("field, value, problem", [
    ("schema_version", 7, "schema version 7 is not supported"),
    ("token_item_index", 3, "is 3, but there are 1 output items"),
    ("cum_len", -1, "a sequence length cannot be negative"),
    ("cum_len", 1 << 64, "a sequence length must fit in 64 bits"),
    ("parent_call_id", None, "parent_resolution is 'resolved' but no parent_call_id is given"),
    ("generation_log_probs", [-0.5], "1 log-probabilities for 3 generated tokens"),
    ("output_items", [{"deep": _nested(70)}], "nested deeper than 64 levels"),
    ("routed_experts", [[1 << 64]], "outside the 64-bit range"),
    ("continuation_context_len", -(1 << 63) - 1, "outside the 64-bit range"),
])
def test_a_typed_line_breaking_a_rule_beyond_its_types_gets_the_exact_message(field: str, value: Any,
                                                                              problem: str) -> None:
    record = dict(conversation(False)[1])
    record["token_item_index"] = 0
    record["output_items"] = [{"type": "message"}]
    record[field] = value
    line = entry_line(record)
    typed = decode_entry_line(line)
    assert isinstance(typed, WireLine)  # the types are right: only the rule is broken
    with pytest.raises(RecordError) as fast:
        RecordDecoder().entries([typed])
    with pytest.raises(RecordError) as exact:
        RecordDecoder().entries([decode_raw_object(line)])
    assert str(fast.value) == str(exact.value) and problem in str(fast.value)


def test_a_carried_value_is_checked_when_its_text_cannot_vouch_for_it() -> None:
    """Many brackets or long digit runs make the text inconclusive: the walk decides."""
    record = dict(conversation(False)[0])
    record["output_items"] = [{"type": "message", "content": [{"n": i} for i in range(70)]}]  # 72 brackets
    record["routed_experts"] = [[12345678901234567890]]  # 20 digits, still within 64 bits
    entries = RecordDecoder().entries([decode_entry_line(entry_line(record))])  # type: ignore[list-item]
    assert entries[0].output_items == record["output_items"]
    assert entries[0].routed_experts == [[12345678901234567890]]


def test_lines_the_typed_decode_cannot_read_go_the_exact_way() -> None:
    record = dict(conversation(False)[0])
    for change in ({"an_unknown_field": 1}, {"model": None}, {"created_at": True}, {"output_items": {}}):
        assert decode_entry_line(entry_line({**record, **change})) is None
    assert decode_entry_line(b"[1, 2]") is None and decode_entry_line(b"{") is None
    assert decode_entry_line(entry_line({k: v for k, v in record.items() if k != "generation_token_ids"})) is None
    assert isinstance(decode_entry_line(entry_line(record)), WireLine)
    # msgspec refuses what JSON cannot carry; the exact path says so in its own words.
    assert decode_entry_line(entry_line(record).replace(b'"created_at": 1.0', b'"created_at": 1e400')) is None


def test_the_wire_struct_holds_the_token_entry_table() -> None:
    """`WireEntry` is written out for the type checker; it must stay `TokenEntry`'s table:
    the same names in the same order, the same defaults and the same types, except the
    fields it reads differently on purpose."""
    hints = get_type_hints(TokenEntry)
    table = [spec for spec in dataclass_fields(TokenEntry) if spec.name != "extra"]
    wire = msgspec.inspect.type_info(WireEntry)
    assert isinstance(wire, msgspec.inspect.StructType) and wire.forbid_unknown_fields
    assert [f.name for f in wire.fields] == [spec.name for spec in table]
    raw = {"prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts", "output_items"}
    statuses = msgspec.inspect.LiteralType(tuple(sorted(status.value for status in ParentResolutionStatus)))
    read_otherwise = {
        "created_at": msgspec.inspect.UnionType((msgspec.inspect.IntType(), msgspec.inspect.FloatType())),
        "parent_resolution": msgspec.inspect.UnionType((statuses, msgspec.inspect.NoneType())),
    }
    for spec, got in zip(table, wire.fields, strict=True):
        if spec.name in raw:
            assert got.type == msgspec.inspect.RawType(), spec.name
        elif spec.name in read_otherwise:
            assert got.type == read_otherwise[spec.name], spec.name
        else:
            assert got.type == msgspec.inspect.type_info(hints[spec.name]), spec.name
        if spec.name in ("routed_experts", "output_items"):
            empty = msgspec.json.encode(spec.default_factory() if spec.default is MISSING else spec.default)
            assert bytes(got.default) == empty, spec.name  # the raw text of the table's default
        elif spec.default is MISSING:
            assert got.required, spec.name
        else:
            assert got.default == spec.default and type(got.default) is type(spec.default), spec.name


def test_log_probs_whose_float_sum_overflows_load_as_the_exact_path_loads_them() -> None:
    """The short-array finiteness test sums; a sum past the float range only sends the
    record the exact way, which accepts finite numbers however large."""
    records = conversation(False)
    records[0] = {**records[0], "generation_log_probs": [1e308, 1e308, 1e308]}
    data = b"\n".join(entry_line(r) for r in records) + b"\n"
    typed = _outcome(data, True)
    assert typed[0] == "ok" and typed == _outcome(data, False)


# --------------------------------------------------------------------------- snapshot JSON
#
# A snapshot JSON's entries are read by the same typed decode, all in one call with the
# snapshot's top level (`snapshot_json.typed_snapshot`); a snapshot whose text it cannot read takes the
# exact path whole. Same rule: the same snapshots, or the same message.


def _snapshot_outcome(data: bytes, typed: bool) -> tuple[str, Any]:
    """('ok', each snapshot's fields with its entries' and refusals' fingerprints) or ('error', the message)."""
    with pytest.MonkeyPatch.context() as patch:
        if not typed:
            patch.setattr(capture_text, "typed_snapshot", lambda _data: None)
        try:
            snapshots = capture_text.load_text(data, "snap.json")
        except LoadError as exc:
            return "error", str(exc)
    return "ok", snapshots_seen(snapshots)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(delta=st.booleans(), mutations=st.lists(entry_mutations(), min_size=0, max_size=3),
       top=st.lists(top_mutations(), min_size=0, max_size=2), pretty=st.booleans())
def test_typed_and_exact_loads_of_a_mutated_snapshot_json_agree(delta: bool, mutations: list, top: list,
                                                               pretty: bool) -> None:
    data = snapshot_text(conversation(delta), mutations, top, pretty)
    assert _snapshot_outcome(data, True) == _snapshot_outcome(data, False)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), delta=st.booleans())
def test_typed_and_exact_loads_of_a_snapshot_json_agree_in_any_entry_order_and_spacing(seed: int,
                                                                                       delta: bool) -> None:
    rng = random.Random(seed)
    records = conversation(delta)
    rng.shuffle(records)
    entries = []
    for record in records:
        items = list(record.items())
        rng.shuffle(items)
        entries.append(dict(items))
    spaced = rng.random() < 0.5
    data = json.dumps({"entries": entries, "snapshot_id": "s", "version": 2},
                      separators=(" , ", " : ") if spaced else (",", ":")).encode()
    typed = _snapshot_outcome(data, True)
    assert typed[0] == "ok" and typed == _snapshot_outcome(data, False)


def _refuse_exact(monkeypatch) -> list[str]:
    """Make the exact path's entry builder fail loudly; returns the calls it was asked for."""
    asked: list[str] = []

    def refuse(cls, data, *args, **kwargs):
        asked.append(data.get("model_call_id"))
        raise AssertionError("the exact path ran on a well-formed snapshot entry")

    monkeypatch.setattr(TokenEntry, "from_dict", classmethod(refuse))
    return asked


@pytest.mark.parametrize("delta", [False, True])
def test_every_entry_of_a_well_formed_snapshot_json_takes_the_typed_path(delta: bool, monkeypatch) -> None:
    data = json.dumps({"rollout_id": "r1", "entries": conversation(delta)}, indent=1).encode()
    asked = _refuse_exact(monkeypatch)
    snapshots = capture_text.load_text(data, "snap.json")
    assert asked == []
    assert [e.model_call_id for e in snapshots[0].entries] == ["call-1", "call-2", "call-3", "call-4"]


def test_snapshots_in_a_zip_and_a_directory_take_the_typed_path(tmp_path, monkeypatch) -> None:
    """The many-small-files case: members `f{i}.json` holding rollout `r{i}`, zipped or not."""
    import io
    import zipfile

    from tokencap.loading import load_snapshots

    files = {}
    for i in range(3):
        conv = conversation(False)
        for record in conv:
            record["rollout_id"] = f"r{i}"
        files[f"f{i}.json"] = json.dumps({"rollout_id": f"r{i}", "entries": conv}).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
            (tmp_path / name).write_bytes(data)
    asked = _refuse_exact(monkeypatch)
    for source in (buffer.getvalue(), tmp_path):
        snapshots = load_snapshots(source)
        assert [(s.rollout_id, s.load_error, len(s.entries)) for s in snapshots] == [
            ("r0", None, 4), ("r1", None, 4), ("r2", None, 4)]
    assert asked == []


def test_a_snapshot_json_the_typed_decode_cannot_read_is_read_the_exact_way(monkeypatch) -> None:
    entries = conversation(False)
    assert typed_snapshot(json.dumps({"entries": entries}).encode()) is not None
    for changed in ({"entries": [{**entries[0], "an_unknown_field": 1}, *entries[1:]]},
                    {"entries": [{**entries[0], "model": None}]},
                    {"entries": [{**entries[0], "output_items": {}}]},
                    {"entries": {}}, {"rollout_id": "r1"}):
        assert typed_snapshot(json.dumps(changed).encode()) is None
    assert typed_snapshot(b"[1]") is None and typed_snapshot(b"{") is None
    # An entry the typed decode cannot read sends the snapshot the exact way, which keeps the unknown field.
    data = json.dumps({"entries": [{**entries[0], "an_unknown_field": 1}]}).encode()
    assert capture_text.load_text(data, "snap.json")[0].entries[0].extra == {"an_unknown_field": 1}
