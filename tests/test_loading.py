"""docs/contract.md#input: the three input formats, detection, capture-store directories and load errors."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from helpers import Conv, as_refusal_line, jsonl_bytes, refusal_dict, snapshot_dict, zip_bytes

from tokencap import build_rollout, load_snapshots

UPSTREAM = Path(__file__).resolve().parent / "data" / "upstream_store"


def _two_call(rollout_id: str = "r1", start: int = 1000) -> Conv:
    conv = Conv(rollout_id, start=start)
    conv.root("call-1")
    conv.child("call-2", "call-1")
    return conv


def _by_id(snaps) -> dict:
    out = {s.rollout_id: s for s in snaps}
    assert len(out) == len(snaps), f"duplicate rollout ids: {[s.rollout_id for s in snaps]}"
    return out


def _ids(snap) -> list[str]:
    return sorted(e.model_call_id for e in snap.entries)


def _load_error(data: bytes, tmp_path: Path | None = None, name: str = "input.jsonl") -> str:
    if tmp_path is None:
        with pytest.raises(ValueError) as info:
            load_snapshots(data)
    else:
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(ValueError) as info:
            load_snapshots(p)
    return str(info.value)


def _names_line(msg: str, n: int) -> bool:
    return re.search(rf"\bline\D{{0,3}}{n}\b", msg, re.IGNORECASE) is not None


# --------------------------------------------------------------------------- snapshot JSON


def test_snapshot_json_with_explicit_rollout_id(tmp_path: Path) -> None:
    conv = _two_call("roll-A")
    p = tmp_path / "snap.json"
    p.write_text(json.dumps(snapshot_dict(conv.records, rollout_id="roll-A", snapshot_id="s-1", version=3)))
    [snap] = load_snapshots(p)
    assert snap.rollout_id == "roll-A"
    assert snap.snapshot_id == "s-1"
    assert snap.version == 3
    assert snap.incomplete is False
    assert list(snap.engine_refusals) == []
    assert list(snap.source_notes) == []
    assert snap.load_error is None
    assert _ids(snap) == ["call-1", "call-2"]
    assert [e.to_dict()["prompt_token_ids"] for e in snap.entries] == [r["prompt_token_ids"] for r in conv.records]


def test_snapshot_json_defaults_and_inferred_rollout_id() -> None:
    conv = _two_call("inferred")
    [snap] = load_snapshots(json.dumps(snapshot_dict(conv.records)).encode())
    assert snap.rollout_id == "inferred"
    assert snap.snapshot_id == ""
    assert snap.version == 0
    assert snap.incomplete is False
    assert list(snap.engine_refusals) == []
    assert snap.load_error is None


def test_snapshot_json_keeps_incomplete_and_refusals() -> None:
    conv = _two_call("r1")
    refusal = refusal_dict("call-3", parent="call-2")
    data = json.dumps(snapshot_dict(conv.records, [refusal], incomplete=True)).encode()
    [snap] = load_snapshots(data)
    assert snap.incomplete is True
    assert [r.model_call_id for r in snap.engine_refusals] == ["call-3"]
    assert snap.engine_refusals[0].to_dict()["code"] == "context_length_exceeded"


def test_snapshot_json_with_rollout_id_and_no_entries_is_an_empty_snapshot() -> None:
    [snap] = load_snapshots(json.dumps({"rollout_id": "lonely", "entries": []}).encode())
    assert snap.rollout_id == "lonely"
    assert list(snap.entries) == []


def test_snapshot_json_mixed_rollouts_is_an_error() -> None:
    a = _two_call("roll-A").records
    b = _two_call("roll-B", start=5000).records
    msg = _load_error(json.dumps(snapshot_dict(a + b)).encode())
    assert msg == ("input: entries belong to several rollouts (roll-A, roll-B); a snapshot holds one rollout -- "
                   "split it, or use entries JSONL, which groups by rollout_id")


def test_snapshot_json_refusal_of_another_rollout_is_an_error() -> None:
    a = _two_call("roll-A").records
    data = json.dumps(snapshot_dict(a, [refusal_dict("call-9", parent="call-2", rollout_id="roll-Z")])).encode()
    assert _load_error(data) == ("input: entries belong to several rollouts (roll-A, roll-Z); a snapshot holds one "
                                 "rollout -- split it, or use entries JSONL, which groups by rollout_id")


def test_snapshot_json_disagreeing_explicit_rollout_id_is_an_error() -> None:
    a = _two_call("roll-A").records
    msg = _load_error(json.dumps(snapshot_dict(a, rollout_id="roll-OTHER")).encode())
    assert msg == "input: the snapshot is for rollout 'roll-OTHER' but records name 'roll-A'"


def test_snapshot_json_with_neither_rollout_id_nor_entries_is_an_error() -> None:
    assert _load_error(json.dumps({"entries": []}).encode()) == (
        "input: a snapshot needs a 'rollout_id' or at least one entry to take it from")


def test_snapshot_json_bad_entry_names_file_call_and_field(tmp_path: Path) -> None:
    conv = _two_call("r1")
    conv.records[1]["generation_token_ids"][1] = -4
    msg = _load_error(json.dumps(snapshot_dict(conv.records), indent=1).encode(), tmp_path, "bad_snap.json")
    assert msg == (f"{tmp_path / 'bad_snap.json'}, entry 1: call 'call-2': field 'generation_token_ids': token id "
                   "at position 1 is -4; ids must be in [0, 2^64)")


def test_snapshot_json_entries_not_a_list_is_an_error() -> None:
    msg = _load_error(json.dumps({"rollout_id": "r1", "entries": {"call-1": {}}}).encode())
    assert msg == ("input: snapshot JSON: Expected `array`, got `object` - at `$.entries`; 'entries' must be a list "
                   "of token-entry objects")


# --------------------------------------------------------------------------- JSONL


def test_jsonl_several_rollouts_and_refusal_lines(tmp_path: Path) -> None:
    a = _two_call("roll-A")
    b = _two_call("roll-B", start=5000)
    lines = [a.records[0], b.records[0], as_refusal_line(refusal_dict("call-9", parent="call-2", rollout_id="roll-A")),
             b.records[1], a.records[1]]
    p = tmp_path / "log.jsonl"
    p.write_bytes(jsonl_bytes(lines))
    snaps = _by_id(load_snapshots(p))
    assert set(snaps) == {"roll-A", "roll-B"}
    assert _ids(snaps["roll-A"]) == ["call-1", "call-2"]
    assert _ids(snaps["roll-B"]) == ["call-1", "call-2"]
    assert [r.model_call_id for r in snaps["roll-A"].engine_refusals] == ["call-9"]
    assert list(snaps["roll-B"].engine_refusals) == []
    assert all(s.load_error is None and s.incomplete is False for s in snaps.values())


def test_jsonl_rollout_with_only_a_refusal_is_still_a_snapshot() -> None:
    a = _two_call("roll-A")
    lines = a.records + [as_refusal_line(refusal_dict("call-x", rollout_id="roll-R"))]
    snaps = _by_id(load_snapshots(jsonl_bytes(lines)))
    assert set(snaps) == {"roll-A", "roll-R"}
    assert list(snaps["roll-R"].entries) == []
    assert len(snaps["roll-R"].engine_refusals) == 1


def test_jsonl_last_line_without_newline_is_ordinary() -> None:
    conv = _two_call()
    [snap] = load_snapshots(jsonl_bytes(conv.records, final_newline=False))
    assert _ids(snap) == ["call-1", "call-2"]
    assert not any("torn" in n for n in snap.source_notes)


def test_jsonl_blank_lines_are_skipped() -> None:
    conv = _two_call()
    first, second = (json.dumps(r).encode() for r in conv.records)
    data = b"\n  \n" + first + b"\n\t\n\r\n" + second + b"\n\n"
    [snap] = load_snapshots(data)
    assert _ids(snap) == ["call-1", "call-2"]


def test_jsonl_crlf_line_endings() -> None:
    conv = _two_call()
    data = b"\r\n".join(json.dumps(r).encode() for r in conv.records) + b"\r\n"
    [snap] = load_snapshots(data)
    assert _ids(snap) == ["call-1", "call-2"]


def test_jsonl_bad_record_names_file_line_call_and_field(tmp_path: Path) -> None:
    conv = _two_call()
    conv.root("call-3")
    conv.records[2]["prompt_token_ids"][0] = "x"
    msg = _load_error(jsonl_bytes(conv.records), tmp_path, "entries.jsonl")
    assert msg == (f"{tmp_path / 'entries.jsonl'}, line 3: call 'call-3': field 'prompt_token_ids': token id at "
                   "position 0 is a string ('x'); ids must be integers in [0, 2^64)")


def test_jsonl_line_number_counts_blank_lines(tmp_path: Path) -> None:
    conv = _two_call()
    conv.records[1]["cum_len"] = -2
    data = json.dumps(conv.records[0]).encode() + b"\n\n\n" + json.dumps(conv.records[1]).encode() + b"\n"
    msg = _load_error(data, tmp_path)
    assert msg == (f"{tmp_path / 'input.jsonl'}, line 4: call 'call-2': field 'cum_len': is -2; a sequence "
                   "length cannot be negative")


def test_jsonl_invalid_json_names_the_line(tmp_path: Path) -> None:
    conv = _two_call()
    data = json.dumps(conv.records[0]).encode() + b"\n{\"model_call_id\": \"call-2\", oops\n"
    msg = _load_error(data, tmp_path, "broken.jsonl")
    # What follows "not valid JSON" is the JSON parser's own account of the fault.
    assert msg.startswith(f"{tmp_path / 'broken.jsonl'}, line 2: not valid JSON (") and "\n" not in msg, msg


def test_jsonl_line_that_is_not_an_object_is_an_error() -> None:
    conv = _two_call()
    data = json.dumps(conv.records[0]).encode() + b"\n[1, 2, 3]\n"
    assert _load_error(data) == "input, line 2: expected one JSON object per line"


def test_jsonl_nan_log_prob_is_an_error() -> None:
    conv = _two_call()
    text = json.dumps(conv.records[1]).replace(str(conv.records[1]["generation_log_probs"][0]), "NaN", 1)
    assert "NaN" in text
    data = json.dumps(conv.records[0]).encode() + b"\n" + text.encode() + b"\n"
    byte = text.encode().index(b"NaN")
    assert _load_error(data) == (f"input, line 2: NaN at byte {byte} of the line is not JSON (JSON has no NaN or "
                                 "Infinity: write null, or a finite number, there)")


def test_jsonl_token_id_beyond_uint64_is_an_error() -> None:
    conv = _two_call()
    conv.records[0]["prompt_token_ids"][0] = 2**64
    msg = _load_error(jsonl_bytes(conv.records))
    assert msg == ("input, line 1: call 'call-1': field 'prompt_token_ids': token id at position 0 is "
                   "18446744073709551616; ids must be in [0, 2^64)")


def test_jsonl_max_uint64_token_id_loads() -> None:
    conv = Conv()
    conv.root("call-1", prompt=[0, 2**64 - 1, 5])
    [snap] = load_snapshots(jsonl_bytes(conv.records))
    assert snap.entries[0].to_dict()["prompt_token_ids"] == [0, 2**64 - 1, 5]


def test_jsonl_missing_required_field_names_field() -> None:
    conv = _two_call()
    del conv.records[1]["generation_log_probs"]
    msg = _load_error(jsonl_bytes(conv.records))
    assert msg == "input, line 2: call 'call-2': token entry is missing the required field 'generation_log_probs'"


def test_jsonl_unknown_fields_survive_loading() -> None:
    conv = _two_call()
    conv.records[0]["x_vendor"] = {"a": [1, 2]}
    [snap] = load_snapshots(jsonl_bytes(conv.records))
    e = next(e for e in snap.entries if e.model_call_id == "call-1")
    assert e.to_dict()["x_vendor"] == {"a": [1, 2]}


# --------------------------------------------------------------------------- detection and empties


def test_detection_is_by_content_not_extension(tmp_path: Path) -> None:
    conv = _two_call("roll-S")
    snap_as_jsonl = tmp_path / "snapshot.jsonl"
    snap_as_jsonl.write_text(json.dumps(snapshot_dict(conv.records, snapshot_id="sid")))
    [s] = load_snapshots(snap_as_jsonl)
    assert s.rollout_id == "roll-S" and s.snapshot_id == "sid" and _ids(s) == ["call-1", "call-2"]

    jsonl_as_json = tmp_path / "entries.json"
    jsonl_as_json.write_bytes(jsonl_bytes(conv.records))
    [s2] = load_snapshots(jsonl_as_json)
    assert s2.rollout_id == "roll-S" and _ids(s2) == ["call-1", "call-2"]


def test_pretty_printed_snapshot_json_is_a_snapshot() -> None:
    conv = _two_call("roll-P")
    [s] = load_snapshots(json.dumps(snapshot_dict(conv.records), indent=2).encode())
    assert s.rollout_id == "roll-P" and _ids(s) == ["call-1", "call-2"]


def test_single_entry_object_on_one_line_is_jsonl() -> None:
    conv = Conv("roll-one")
    conv.root("call-1")
    [s] = load_snapshots(json.dumps(conv.records[0]).encode())
    assert s.rollout_id == "roll-one" and _ids(s) == ["call-1"]


@pytest.mark.parametrize("data", [b"", b"   ", b"\n\n", b" \t\r\n "])
def test_empty_or_whitespace_input_is_an_error(data: bytes, tmp_path: Path) -> None:
    empty = "the input is empty; expected a snapshot JSON object or JSON lines"
    with pytest.raises(ValueError) as info:
        load_snapshots(data)
    assert str(info.value) == f"input: {empty}"
    p = tmp_path / "empty.jsonl"
    p.write_bytes(data)
    with pytest.raises(ValueError) as info:
        load_snapshots(p)
    assert str(info.value) == f"{p}: {empty}"


def test_load_snapshots_accepts_str_path_pathlib_and_bytes(tmp_path: Path) -> None:
    conv = _two_call()
    data = json.dumps(snapshot_dict(conv.records)).encode()
    p = tmp_path / "s.json"
    p.write_bytes(data)
    results = [load_snapshots(str(p)), load_snapshots(p), load_snapshots(data)]
    for snaps in results:
        assert len(snaps) == 1
        assert snaps[0].rollout_id == "r1"
        assert [e.to_dict() for e in snaps[0].entries] == [e.to_dict() for e in results[0][0].entries]


def test_missing_file_is_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as info:
        load_snapshots(tmp_path / "nope.json")
    assert str(info.value) == f"{tmp_path / 'nope.json'}: no such file or directory"


def test_snapshot_is_immutable() -> None:
    [snap] = load_snapshots(json.dumps(snapshot_dict(_two_call().records)).encode())
    with pytest.raises(AttributeError, match="^cannot assign to field 'rollout_id'$"):
        snap.rollout_id = "other"  # type: ignore[misc]


# --------------------------------------------------------------------------- capture-store directories


def _store(tmp_path: Path, rollout_id: str, records: list[dict], *, name: str = "store") -> Path:
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    (d / f"{rollout_id}.tokens.jsonl").write_bytes(jsonl_bytes(records))
    return d


def test_store_basic_rollout(tmp_path: Path) -> None:
    conv = _two_call("R")
    d = _store(tmp_path, "R", conv.records)
    [s] = load_snapshots(d)
    assert s.rollout_id == "R"
    assert _ids(s) == ["call-1", "call-2"]
    assert s.incomplete is False
    assert list(s.source_notes) == []
    assert s.load_error is None
    assert s.snapshot_id == "" and s.version == 0


def test_store_incomplete_marker_file(tmp_path: Path) -> None:
    d = _store(tmp_path, "R", _two_call("R").records)
    (d / "R.tokens.incomplete").write_bytes(b"")
    [s] = load_snapshots(d)
    assert s.incomplete is True
    assert _ids(s) == ["call-1", "call-2"]


def test_store_intents_all_accounted_for(tmp_path: Path) -> None:
    d = _store(tmp_path, "R", _two_call("R").records)
    (d / "R.tokens.intents").write_text("call-1\ncall-2\ncall-3\n")
    (d / "R.tokens.refusals.jsonl").write_bytes(jsonl_bytes([refusal_dict("call-3", parent="call-2", rollout_id="R")]))
    [s] = load_snapshots(d)
    assert s.incomplete is False
    assert not any("call-3" in n for n in s.source_notes)
    assert [r.model_call_id for r in s.engine_refusals] == ["call-3"]


def test_store_dangling_intents_make_it_incomplete_and_are_noted(tmp_path: Path) -> None:
    d = _store(tmp_path, "R", _two_call("R").records)
    (d / "R.tokens.intents").write_text("call-1\ncall-2\ncall-77\ncall-88\n")
    [s] = load_snapshots(d)
    assert s.incomplete is True
    notes = " ".join(s.source_notes)
    assert "call-77" in notes and "call-88" in notes
    assert "call-1\n" not in notes
    assert _ids(s) == ["call-1", "call-2"]


def test_store_state_file(tmp_path: Path) -> None:
    d = _store(tmp_path, "R", _two_call("R").records)
    (d / "R.tokens.state.json").write_text(json.dumps({"snapshot_id": "abc", "version": 9, "incomplete": False,
                                                        "frozen": True}))
    [s] = load_snapshots(d)
    assert (s.snapshot_id, s.version, s.incomplete) == ("abc", 9, False)


def test_store_state_incomplete_true(tmp_path: Path) -> None:
    d = _store(tmp_path, "R", _two_call("R").records)
    (d / "R.tokens.state.json").write_text(json.dumps({"snapshot_id": "abc", "version": 2, "incomplete": True}))
    [s] = load_snapshots(d)
    assert s.incomplete is True


def test_store_refusals_file_needs_no_record_type(tmp_path: Path) -> None:
    d = _store(tmp_path, "R", _two_call("R").records)
    (d / "R.tokens.refusals.jsonl").write_bytes(
        jsonl_bytes([refusal_dict("call-3", parent="call-2", rollout_id="R"),
                     refusal_dict("call-4", rollout_id="R", code=None)]))
    [s] = load_snapshots(d)
    assert sorted(r.model_call_id for r in s.engine_refusals) == ["call-3", "call-4"]
    assert _ids(s) == ["call-1", "call-2"]


def test_store_lock_files_are_ignored(tmp_path: Path) -> None:
    d = _store(tmp_path, "R", _two_call("R").records)
    for name in ("R.tokens.lock", "R.tokens.jsonl.lock", "R.lock", ".R.tokens.lock"):
        (d / name).write_bytes(b"\x00\xffnot json at all{")
    [s] = load_snapshots(d)
    assert s.rollout_id == "R" and s.load_error is None and _ids(s) == ["call-1", "call-2"]


def test_store_torn_tail_is_skipped_and_noted(tmp_path: Path) -> None:
    conv = _two_call("R")
    d = _store(tmp_path, "R", conv.records)
    tail = b'{"schema_version": 5, "rollout_id": "R", "model_call_id": "call-3", "prom'
    with open(d / "R.tokens.jsonl", "ab") as fh:
        fh.write(tail)
    [s] = load_snapshots(d)
    assert s.load_error is None
    assert _ids(s) == ["call-1", "call-2"]
    assert s.incomplete is False, "a torn tail alone does not make a rollout incomplete"
    torn = [n for n in s.source_notes if "torn" in n]
    assert torn, s.source_notes
    assert any("R.tokens.jsonl" in n and str(len(tail)) in n for n in torn), torn


def test_store_torn_tail_is_skipped_even_when_it_is_a_complete_record(tmp_path: Path) -> None:
    conv = _two_call("R")
    conv.child("call-3", "call-2")
    d = tmp_path / "store"
    d.mkdir()
    data = jsonl_bytes(conv.records[:2]) + json.dumps(conv.records[2]).encode()  # valid JSON, no newline
    (d / "R.tokens.jsonl").write_bytes(data)
    [s] = load_snapshots(d)
    assert _ids(s) == ["call-1", "call-2"]
    tail_len = len(json.dumps(conv.records[2]).encode())
    assert any("torn" in n and str(tail_len) in n and "R.tokens.jsonl" in n for n in s.source_notes), s.source_notes


def test_store_torn_tail_of_refusals_file(tmp_path: Path) -> None:
    d = _store(tmp_path, "R", _two_call("R").records)
    good = jsonl_bytes([refusal_dict("call-3", parent="call-2", rollout_id="R")])
    (d / "R.tokens.refusals.jsonl").write_bytes(good + b'{"rollout_id": "R"')
    [s] = load_snapshots(d)
    assert [r.model_call_id for r in s.engine_refusals] == ["call-3"]
    assert any("torn" in n and "R.tokens.refusals.jsonl" in n and "18" in n for n in s.source_notes), s.source_notes


def test_store_record_naming_another_rollout_is_an_error_of_that_rollout(tmp_path: Path) -> None:
    good = _two_call("GOOD")
    bad = _two_call("BAD", start=5000)
    bad.records[1]["rollout_id"] = "SOMEONE-ELSE"
    d = _store(tmp_path, "GOOD", good.records)
    _store(tmp_path, "BAD", bad.records)
    snaps = _by_id(load_snapshots(d))
    assert set(snaps) == {"GOOD", "BAD"}
    assert snaps["GOOD"].load_error is None and _ids(snaps["GOOD"]) == ["call-1", "call-2"]
    assert snaps["BAD"].load_error
    assert list(snaps["BAD"].entries) == []
    assert snaps["BAD"].incomplete is True
    assert "SOMEONE-ELSE" not in snaps


def test_store_bad_rollout_does_not_stop_the_others(tmp_path: Path) -> None:
    good = _two_call("GOOD")
    bad = _two_call("BAD", start=5000)
    bad.records[1]["generation_log_probs"] = [-0.1]
    d = _store(tmp_path, "GOOD", good.records)
    _store(tmp_path, "BAD", bad.records)
    snaps = _by_id(load_snapshots(d))
    assert snaps["GOOD"].load_error is None and _ids(snaps["GOOD"]) == ["call-1", "call-2"]
    err = snaps["BAD"].load_error
    assert err and "BAD.tokens.jsonl" in err and "call-2" in err and "generation_log_probs" in err
    assert _names_line(err, 2), err
    assert list(snaps["BAD"].entries) == [] and list(snaps["BAD"].engine_refusals) == []
    assert snaps["BAD"].incomplete is True


def test_store_bad_state_file_is_an_error_of_that_rollout(tmp_path: Path) -> None:
    d = _store(tmp_path, "R", _two_call("R").records)
    _store(tmp_path, "OK", _two_call("OK", start=7000).records)
    (d / "R.tokens.state.json").write_text("{not json")
    snaps = _by_id(load_snapshots(d))
    assert snaps["R"].load_error and "R.tokens.state.json" in snaps["R"].load_error
    assert snaps["R"].incomplete is True and list(snaps["R"].entries) == []
    assert snaps["OK"].load_error is None


def test_store_loose_files_load_and_bad_one_is_named_by_base_name(tmp_path: Path) -> None:
    d = _store(tmp_path, "R", _two_call("R").records)
    (d / "extra.jsonl").write_bytes(jsonl_bytes(_two_call("LOOSE-L", start=3000).records))
    (d / "snap.json").write_text(json.dumps(snapshot_dict(_two_call("LOOSE-S", start=4000).records)))
    (d / "broken.json").write_text("{ this is not json")
    snaps = _by_id(load_snapshots(d))
    assert {"R", "LOOSE-L", "LOOSE-S"} <= set(snaps)
    assert _ids(snaps["LOOSE-L"]) == ["call-1", "call-2"] and snaps["LOOSE-L"].load_error is None
    assert _ids(snaps["LOOSE-S"]) == ["call-1", "call-2"] and snaps["LOOSE-S"].load_error is None
    broken = [s for rid, s in snaps.items() if rid in ("broken", "broken.json")]
    assert len(broken) == 1, sorted(snaps)
    assert broken[0].load_error and "broken.json" in broken[0].load_error
    assert broken[0].incomplete is True and list(broken[0].entries) == []
    assert len(snaps) == 4


def test_store_one_rollout_from_several_sources_is_an_error_of_that_rollout(tmp_path: Path) -> None:
    d = _store(tmp_path, "R", _two_call("R").records)
    _store(tmp_path, "OK", _two_call("OK", start=7000).records)
    (d / "also_R.jsonl").write_bytes(jsonl_bytes(_two_call("R", start=9000).records))
    snaps = _by_id(load_snapshots(d))
    assert snaps["R"].load_error
    assert snaps["R"].incomplete is True and list(snaps["R"].entries) == []
    assert snaps["OK"].load_error is None and _ids(snaps["OK"]) == ["call-1", "call-2"]


def test_store_two_loose_files_with_one_rollout_is_an_error(tmp_path: Path) -> None:
    d = tmp_path / "store"
    d.mkdir()
    (d / "a.jsonl").write_bytes(jsonl_bytes(_two_call("X").records[:1]))
    (d / "b.jsonl").write_bytes(jsonl_bytes(_two_call("X").records[1:]))
    snaps = _by_id(load_snapshots(d))
    assert snaps["X"].load_error and list(snaps["X"].entries) == []


def test_store_refusals_only_rollout(tmp_path: Path) -> None:
    d = tmp_path / "store"
    d.mkdir()
    (d / "Q.tokens.refusals.jsonl").write_bytes(jsonl_bytes([refusal_dict("call-1", rollout_id="Q")]))
    [s] = load_snapshots(d)
    assert s.rollout_id == "Q" and list(s.entries) == [] and len(s.engine_refusals) == 1


# --------------------------------------------------------------------------- the real upstream store


def test_upstream_store_loads_both_rollouts(tmp_path: Path) -> None:
    d = tmp_path / "up"
    shutil.copytree(UPSTREAM, d)
    snaps = _by_id(load_snapshots(d))
    assert set(snaps) == {"task3-rollout0-attempt0", "task4-rollout1-attempt0"}

    t3 = snaps["task3-rollout0-attempt0"]
    assert t3.load_error is None and t3.incomplete is False
    assert _ids(t3) == ["call-1", "call-2", "call-3"]
    assert t3.snapshot_id == "52dddc9d1e5f40a38dbbcfbbe32e1d0c" and t3.version == 4

    t4 = snaps["task4-rollout1-attempt0"]
    assert t4.load_error is None
    assert _ids(t4) == ["call-1", "call-2"]
    assert t4.incomplete is True
    assert t4.version == 2
    notes = list(t4.source_notes)
    assert any("torn" in n and "task4-rollout1-attempt0.tokens.jsonl" in n and "95" in n for n in notes), notes
    assert any("call-3" in n for n in notes), notes


def test_upstream_task3_builds_one_trainable_chain() -> None:
    snaps = _by_id(load_snapshots(UPSTREAM))
    r = build_rollout(snaps["task3-rollout0-attempt0"])
    assert r["mask_sample"] is False, r["mask_reasons"]
    assert r["mask_reasons"] == []
    build = r["build"]
    assert len(build.chains) == 1 and build.chains[0].chain_id == "main"
    assert [link.entry.model_call_id for link in build.chains[0].links] == ["call-1", "call-2", "call-3"]
    assert r["metrics"]["generated_tokens_delivered"] == 24
    assert r["rebuilt_response"]["status"] == "completed"


def test_upstream_task4_is_masked_incomplete_but_builds() -> None:
    snaps = _by_id(load_snapshots(UPSTREAM))
    r = build_rollout(snaps["task4-rollout1-attempt0"])
    assert r["mask_reasons"] == ["capture_incomplete"]
    assert r["rebuilt_response"] is not None


# --------------------------------------------------------------------------- zip archives


_zip_of = zip_bytes


def _summary(snaps) -> dict:
    return {
        s.rollout_id: (
            [e.to_dict() for e in sorted(s.entries, key=lambda e: e.model_call_id)],
            [r.to_dict() for r in s.engine_refusals],
            s.incomplete, s.snapshot_id, s.version, sorted(s.source_notes), s.load_error,
        )
        for s in snaps
    }


def test_zip_of_capture_store_loads_like_the_directory() -> None:
    files = {p.name: p.read_bytes() for p in UPSTREAM.iterdir()}
    from_zip = load_snapshots(_zip_of(files))
    from_dir = load_snapshots(UPSTREAM)
    assert _summary(from_zip) == _summary(from_dir)


def test_zip_with_a_top_level_folder_loads_like_the_directory() -> None:
    files = {f"upstream_store/{p.name}": p.read_bytes() for p in UPSTREAM.iterdir()}
    assert _summary(load_snapshots(_zip_of(files))) == _summary(load_snapshots(UPSTREAM))


def test_zip_hostile_member_names_are_only_base_names(tmp_path: Path, monkeypatch) -> None:
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    conv = _two_call("evil")
    data = _zip_of({"../../evil.tokens.jsonl": jsonl_bytes(conv.records),
                    "../../evil.tokens.incomplete": b""})
    snaps = _by_id(load_snapshots(data))
    assert set(snaps) == {"evil"}
    assert _ids(snaps["evil"]) == ["call-1", "call-2"]
    assert snaps["evil"].incomplete is True
    assert not (tmp_path / "evil.tokens.jsonl").exists()
    assert not any(tmp_path.rglob("evil.tokens.*"))


# =========================================================================== more formats and edges


def test_snapshot_json_keeps_source_notes() -> None:
    conv = _two_call()
    [s] = load_snapshots(json.dumps(snapshot_dict(conv.records, source_notes=["inferred x"])).encode())
    assert list(s.source_notes) == ["inferred x"]


@pytest.mark.parametrize(("field", "value", "wanted"), [
    ("incomplete", "yes", "true or false, got a string"), ("version", "3", "an integer, got a string"),
    ("snapshot_id", 5, "a string, got an integer"), ("engine_refusals", "none", "a list, got a string")])
def test_snapshot_json_fields_of_the_wrong_type_are_errors(field: str, value, wanted: str, tmp_path: Path) -> None:
    conv = _two_call()
    msg = _load_error(json.dumps(snapshot_dict(conv.records, **{field: value})).encode(), tmp_path, "typed.json")
    assert msg == f"{tmp_path / 'typed.json'}: snapshot field '{field}' must be {wanted}"


def test_jsonl_tricky_texts_do_not_confuse_token_fields() -> None:
    conv = Conv()
    conv.root("call-1", output_items=[{"type": "message", "prompt_token_ids": [9, 9], "content": [
        {"type": "output_text", "text": '"prompt_token_ids": [1, 2], "generation_token_ids": [3]'}]}])
    conv.child("call-2", "call-1")
    recs = []
    for r in conv.records:
        # token arrays last, with odd spacing
        r = dict(r)
        toks = {k: r.pop(k) for k in ("prompt_token_ids", "generation_token_ids", "generation_log_probs")}
        r.update(toks)
        recs.append(r)
    text = "\n".join(json.dumps(r, indent=None, separators=(" , ", " :  ")) for r in recs) + "\n"
    [s] = load_snapshots(text.encode())
    by = {e.model_call_id: e for e in s.entries}
    for cid in ("call-1", "call-2"):
        assert [int(t) for t in by[cid].prompt_token_ids] == conv.prompt[cid]
        assert [int(t) for t in by[cid].generation_token_ids] == conv.gen[cid]
    assert by["call-1"].to_dict()["output_items"] == conv.record("call-1")["output_items"]


def test_jsonl_child_prompt_with_different_number_formatting_than_parent() -> None:
    conv = _two_call()
    line1 = json.dumps(conv.records[0])
    rec2 = dict(conv.records[1])
    body = ", ".join(str(t) for t in rec2.pop("prompt_token_ids"))
    line2 = json.dumps(rec2)[:-1] + ', "prompt_token_ids": [ ' + body + " ]}"
    [s] = load_snapshots((line1 + "\n" + line2 + "\n").encode())
    by = {e.model_call_id: e for e in s.entries}
    assert [int(t) for t in by["call-2"].prompt_token_ids] == conv.prompt["call-2"]


def test_store_refusal_lines_in_the_entries_file(tmp_path: Path) -> None:
    conv = _two_call("R")
    d = _store(tmp_path, "R", conv.records + [as_refusal_line(refusal_dict("call-3", parent="call-2",
                                                                           rollout_id="R"))])
    [s] = load_snapshots(d)
    assert _ids(s) == ["call-1", "call-2"]
    assert [r.model_call_id for r in s.engine_refusals] == ["call-3"]


def test_store_refusal_naming_another_rollout_is_an_error_of_that_rollout(tmp_path: Path) -> None:
    d = _store(tmp_path, "R", _two_call("R").records)
    _store(tmp_path, "OK", _two_call("OK", start=7000).records)
    (d / "R.tokens.refusals.jsonl").write_bytes(jsonl_bytes([refusal_dict("call-3", rollout_id="ELSE")]))
    snaps = _by_id(load_snapshots(d))
    assert snaps["R"].load_error and list(snaps["R"].entries) == [] and snaps["R"].incomplete is True
    assert snaps["OK"].load_error is None


def test_store_rollout_ids_with_dots(tmp_path: Path) -> None:
    rid = "task.v2-rollout0.attempt1"
    d = _store(tmp_path, rid, _two_call(rid).records)
    (d / f"{rid}.tokens.state.json").write_text(json.dumps({"snapshot_id": "s", "version": 1, "incomplete": False}))
    (d / f"{rid}.tokens.intents").write_text("call-1\ncall-2\n")
    [s] = load_snapshots(d)
    assert s.rollout_id == rid and s.load_error is None and s.incomplete is False
    assert _ids(s) == ["call-1", "call-2"] and s.snapshot_id == "s"


def test_store_intents_with_blank_lines_and_no_final_newline(tmp_path: Path) -> None:
    d = _store(tmp_path, "R", _two_call("R").records)
    (d / "R.tokens.intents").write_text("call-1\n\ncall-2")
    [s] = load_snapshots(d)
    assert s.incomplete is False


def test_store_whitespace_tail_is_still_torn(tmp_path: Path) -> None:
    d = _store(tmp_path, "R", _two_call("R").records)
    with open(d / "R.tokens.jsonl", "ab") as fh:
        fh.write(b"   ")
    [s] = load_snapshots(d)
    assert _ids(s) == ["call-1", "call-2"]
    assert any("torn" in n and "3" in n for n in s.source_notes), s.source_notes


def test_zip_with_one_rollout_under_two_folders_is_never_a_silent_pick() -> None:
    conv = _two_call("R")
    data = _zip_of({"a/R.tokens.jsonl": jsonl_bytes(conv.records[:1]),
                    "b/R.tokens.jsonl": jsonl_bytes(conv.records),
                    "OK.tokens.jsonl": jsonl_bytes(_two_call("OK", start=7000).records)})
    # Either the archive is refused as a whole, or R comes back as an error; never a silent pick.
    try:
        snaps = _by_id(load_snapshots(data))
    except ValueError as exc:
        assert "R.tokens.jsonl" in str(exc)
        return
    assert snaps["OK"].load_error is None
    assert snaps["R"].load_error and list(snaps["R"].entries) == []


def test_zip_absolute_member_names_are_base_names() -> None:
    conv = _two_call("abs")
    snaps = _by_id(load_snapshots(_zip_of({"/tmp/abs.tokens.jsonl": jsonl_bytes(conv.records)})))
    assert set(snaps) == {"abs"} and _ids(snaps["abs"]) == ["call-1", "call-2"]


# --------------------------------------------------------------------------- numbers JSON cannot hold exactly


def _line_with(rec: dict, field: str, raw_value: str) -> bytes:
    rec = dict(rec)
    rec.pop(field, None)
    return (json.dumps(rec)[:-1] + f', "{field}": {raw_value}}}').encode()


def test_jsonl_out_of_range_log_prob_names_file_line_call_and_field(tmp_path: Path) -> None:
    conv = _two_call()
    data = json.dumps(conv.records[0]).encode() + b"\n" + _line_with(conv.records[1], "generation_log_probs",
                                                                     "[-0.5, 1e400, -0.1]") + b"\n"
    msg = _load_error(data, tmp_path, "range.jsonl")
    # What follows "cannot be read:" is the JSON decoder's own words.
    assert msg.startswith(f"{tmp_path / 'range.jsonl'}, line 2: call 'call-2': field 'generation_log_probs': "
                          "the value cannot be read: ") and "\n" not in msg, msg


def test_jsonl_out_of_range_created_at_names_file_line_and_call(tmp_path: Path) -> None:
    conv = _two_call()
    data = _line_with(conv.records[0], "created_at", "1e999") + b"\n"
    msg = _load_error(data, tmp_path, "range.jsonl")
    assert msg.startswith(f"{tmp_path / 'range.jsonl'}, line 1: call 'call-1': field 'created_at': the value "
                          "cannot be read: ") and "\n" not in msg, msg


def test_jsonl_huge_integer_created_at_is_a_value_error(tmp_path: Path) -> None:
    conv = _two_call()
    data = _line_with(conv.records[0], "created_at", "1" + "0" * 400) + b"\n"
    msg = _load_error(data, tmp_path, "huge.jsonl")
    assert msg == (f"{tmp_path / 'huge.jsonl'}, line 1: call 'call-1': field 'created_at': is too large to be a "
                   "number of seconds")


def test_jsonl_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    conv = _two_call()
    bad = json.dumps(dict(conv.records[1], model="MODEL")).encode().replace(b'"MODEL"', b'"mo\xffdel"')
    data = json.dumps(conv.records[0]).encode() + b"\n" + bad + b"\n"
    msg = _load_error(data, tmp_path, "utf.jsonl")
    assert msg.startswith(f"{tmp_path / 'utf.jsonl'}, line 2: call 'call-2': field 'model': the value cannot be "
                          "read: ") and "\n" not in msg, msg


@pytest.mark.parametrize("bad", ["logprob_1e400", "unknown_field_1e999", "created_at_huge_int", "invalid_utf8",
                                 "refusal_1e999"])
def test_store_number_or_encoding_error_is_an_error_of_that_rollout(bad: str, tmp_path: Path) -> None:
    good = _two_call("GOOD")
    d = _store(tmp_path, "GOOD", good.records)
    rec = _two_call("BAD", start=5000).records[0]
    name = "BAD.tokens.jsonl"
    if bad == "logprob_1e400":
        line = _line_with(rec, "generation_log_probs", "[1e400, -1, -1]")
    elif bad == "unknown_field_1e999":
        line = _line_with(rec, "x_vendor", "1e999")
    elif bad == "created_at_huge_int":
        line = _line_with(rec, "created_at", "1" + "0" * 400)
    elif bad == "invalid_utf8":
        line = json.dumps(dict(rec, model="MODEL")).encode().replace(b'"MODEL"', b'"mo\xffdel"')
    else:
        name = "BAD.tokens.refusals.jsonl"
        line = _line_with(refusal_dict("call-9", rollout_id="BAD"), "recorded_at", "1e999")
    (d / name).write_bytes(line + b"\n")
    snaps = _by_id(load_snapshots(d))
    assert snaps["GOOD"].load_error is None and _ids(snaps["GOOD"]) == ["call-1", "call-2"]
    assert snaps["BAD"].load_error and name in snaps["BAD"].load_error
    assert snaps["BAD"].incomplete is True and list(snaps["BAD"].entries) == []


def test_loaded_snapshot_contents_cannot_be_changed() -> None:
    [snap] = load_snapshots(json.dumps(snapshot_dict(_two_call().records)).encode())
    immutable = "^a loaded snapshot is immutable; build a new TokenCaptureSnapshot instead$"
    with pytest.raises(TypeError, match=immutable):
        snap.entries.append(snap.entries[0])
    with pytest.raises(TypeError, match=immutable):
        snap.source_notes.append("edited")


def test_loaded_token_arrays_are_read_only() -> None:
    [snap] = load_snapshots(json.dumps(snapshot_dict(_two_call().records)).encode())
    with pytest.raises(ValueError, match="^assignment destination is read-only$"):
        snap.entries[0].prompt_token_ids[0] = 7


# --------------------------------------------------------------------------- big single files


def _big_chain(rollout_id: str) -> Conv:
    conv = Conv(rollout_id)
    conv.root("call-0001", prompt_len=200_000)
    for i in range(2, 8):
        conv.child(f"call-{i:04d}", f"call-{i - 1:04d}")
    return conv


def test_big_jsonl_file_loads_like_its_bytes(tmp_path: Path) -> None:
    conv = _big_chain("big")
    data = jsonl_bytes(conv.records, final_newline=False)
    assert len(data) > 8 << 20  # big enough for the loader's big-file path
    p = tmp_path / "big.jsonl"
    p.write_bytes(data)
    from_path = load_snapshots(p)
    assert _summary(from_path) == _summary(load_snapshots(data))
    [s] = from_path
    assert _ids(s) == [f"call-{i:04d}" for i in range(1, 8)]
    r = build_rollout(s)
    assert r["mask_reasons"] == [] and r["metrics"]["generated_tokens_delivered"] == 21


def test_big_file_errors_name_file_and_line(tmp_path: Path) -> None:
    conv = _big_chain("big")
    conv.records[-1]["generation_token_ids"][0] = -1
    p = tmp_path / "bigbad.jsonl"
    p.write_bytes(jsonl_bytes(conv.records))
    with pytest.raises(ValueError) as info:
        load_snapshots(p)
    msg = str(info.value)
    assert "bigbad.jsonl" in msg and _names_line(msg, 7) and "call-0007" in msg and "generation_token_ids" in msg


def test_big_whitespace_file_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "blank.json"
    p.write_bytes(b" \n" * (5 << 20))
    with pytest.raises(ValueError) as info:
        load_snapshots(p)
    assert str(info.value) == f"{p}: the input is empty; expected a snapshot JSON object or JSON lines"


def test_big_snapshot_json_file(tmp_path: Path) -> None:
    conv = _big_chain("bigsnap")
    p = tmp_path / "big.json"
    p.write_text(json.dumps(snapshot_dict(conv.records, snapshot_id="S", version=2)))
    [s] = load_snapshots(p)
    assert (s.rollout_id, s.snapshot_id, s.version) == ("bigsnap", "S", 2)
    assert _ids(s) == [f"call-{i:04d}" for i in range(1, 8)]


def test_store_rollout_with_only_intents(tmp_path: Path) -> None:
    d = _store(tmp_path, "OK", _two_call("OK").records)
    (d / "LOST.tokens.intents").write_text("call-1\ncall-2\n")
    snaps = _by_id(load_snapshots(d))
    lost = snaps["LOST"]
    assert list(lost.entries) == [] and lost.incomplete is True
    assert any("call-1" in n and "call-2" in n for n in lost.source_notes), lost.source_notes
    r = build_rollout(lost)
    assert r["mask_reasons"] == ["capture_incomplete", "no_records"]


def test_snapshot_json_with_only_refusals_and_no_rollout_id_is_an_error() -> None:
    data = json.dumps({"entries": [], "engine_refusals": [refusal_dict("call-1", rollout_id="r1")]}).encode()
    assert _load_error(data) == "input: a snapshot needs a 'rollout_id' or at least one entry to take it from"


def test_zip_file_on_disk_loads_like_the_directory(tmp_path: Path) -> None:
    p = tmp_path / "store.zip"
    p.write_bytes(_zip_of({q.name: q.read_bytes() for q in UPSTREAM.iterdir()}))
    assert _summary(load_snapshots(p)) == _summary(load_snapshots(UPSTREAM))


def test_absurdly_deep_nesting_is_a_load_error_not_a_crash() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    record = (b'{"rollout_id":"r","model_call_id":"c","prompt_token_ids":[1],"generation_token_ids":[2],'
              b'"generation_log_probs":[-1.0],"parent_resolution":"root","output_items":[{"x":' + deep + b"}]}")
    with pytest.raises(ValueError, match="nested too deeply"):
        load_snapshots(record, name="deep.jsonl")
