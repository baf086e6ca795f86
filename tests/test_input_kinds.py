"""Input that is not a capture says what it is (issue 13, points 10 and 19).

Valid JSON that is not a snapshot (an object without `entries`, an array, a scalar, a
rollout record, a parquet scan table) is named as what it is and what was expected,
instead of "line 1: not valid JSON". Binary input (NUL-led, a sparse file) is refused from
its first bytes in every entry point -- a file, uploaded bytes, a zip member, a store file,
run discovery -- without reading the rest; a torn tail stays skipped whatever it holds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import Conv, jsonl_bytes, snapshot_dict, zip_bytes

import tokencap.loading.lines as lines_module
from tokencap import load_snapshots
from tokencap.cli import main
from tokencap.loading import LoadError
from tokencap.loading.problems import SNIFF_BYTES
from tokencap.run import scan_table
from tokencap.run.discover import discover

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_data"
EXPECTED = "expected a snapshot (a JSON object with 'entries'), entries JSONL (one record a line)"


def records(rollout_id: str = "r1") -> list[dict]:
    conv = Conv(rollout_id)
    conv.root("c1")
    conv.child("c2", "c1")
    return conv.records


def load_error(data: bytes, name: str = "in.json") -> str:
    with pytest.raises(LoadError) as caught:
        load_snapshots(data, name=name)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(name)
    return message


# --------------------------------------------------------------------------- point 10


def test_the_samples_description_file_is_called_an_object_without_entries(capsys) -> None:
    assert main(["build", str(SAMPLES / "expected.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "not valid JSON" not in err and "truncated" not in err
    assert "a JSON object without 'entries'" in err and EXPECTED in err and "expected.json" in err
    assert err.count("\n") == 0


@pytest.mark.parametrize(("text", "kind"), [
    (b"[1, 2, 3]", "a JSON array"), (b"[\n  {\"entries\": []}\n]\n", "a JSON array"), (b"42", "a JSON number"),
    (b"-1.5e3\n", "a JSON number"), (b'"entries"', "a JSON string"), (b"true", "a JSON boolean"),
    (b"null\n", "JSON null"),
])
def test_json_that_is_not_an_object_says_what_it_is(text: bytes, kind: str) -> None:
    message = load_error(text)
    assert f"{kind}, not a snapshot" in message and EXPECTED in message


def test_a_pretty_printed_object_without_entries_lists_its_keys() -> None:
    message = load_error(json.dumps({"rollout_id": "r1", "calls": []}, indent=2).encode())
    assert "a JSON object without 'entries' (its keys: 'rollout_id', 'calls')" in message


def test_a_one_line_record_is_still_entries_jsonl() -> None:
    (snap,) = load_snapshots(jsonl_bytes(records()[:1]), name="one.jsonl")
    assert len(snap.entries) == 1
    message = load_error(b'{"model_call_id": "c1"}\n', "one.jsonl")
    assert "line 1" in message and "rollout_id" in message  # a record's own error, as before


def test_a_snapshot_still_loads_pretty_printed() -> None:
    data = json.dumps(snapshot_dict(records()), indent=2).encode()
    (snap,) = load_snapshots(data, name="snap.json")
    assert len(snap.entries) == 2


def test_final_responses_given_as_source_are_sent_to_the_final_responses_option(capsys) -> None:
    name = "ambiguous_final_answer.json"  # no output item carries token ids
    assert main(["build", str(SAMPLES / "final_responses" / name)]) == 2
    err = capsys.readouterr().err
    assert "rollout record or" in err and "--final-responses" in err and name in err


def test_records_whose_items_carry_token_ids_given_as_source_load_as_rollouts(capsys) -> None:
    # Unlike the file above, this one loads: its calls are read from the items' token ids
    # (docs/contract.md#token-rollouts).
    assert main(["build", str(SAMPLES / "final_responses" / "final_retry_attributed_by_tokens.jsonl")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["rollout_id"] for line in lines] == ["final-retry-by-tokens",
                                                                  "final-retry-by-tokens-other"]


def test_a_rollout_record_line_among_entries_is_named_with_its_line() -> None:
    line = json.dumps({"rollout_id": "r1", "reward": 1.0, "response": {"object": "response", "output": []}})
    message = load_error(jsonl_bytes(records()) + line.encode() + b"\n", "mixed.jsonl")
    assert "mixed.jsonl, line 3: a rollout record" in message


def test_a_scan_table_given_to_build_says_to_open_it_in_the_app(tmp_path: Path, capsys) -> None:
    table = tmp_path / "result.parquet"
    assert main(["scan", str(SAMPLES / "capture_store"), "-o", str(table), "--workers", "1"]) == 0
    capsys.readouterr()
    assert main(["build", str(table)]) == 2
    err = capsys.readouterr().err
    assert "a parquet file (a scan table" in err and "tokencap app" in err
    assert "binary" not in err


def test_a_file_in_a_directory_that_is_not_a_snapshot_fails_under_its_name(tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_text(json.dumps({"about": "this run"}, indent=1))
    (tmp_path / "r1.jsonl").write_bytes(jsonl_bytes(records()))
    snaps = {s.rollout_id: s for s in load_snapshots(tmp_path)}
    assert snaps["r1"].load_error is None
    assert "a JSON object without 'entries'" in snaps["notes"].load_error


# --------------------------------------------------------------------------- point 19


def test_a_sparse_file_is_refused_from_its_first_bytes(tmp_path: Path, monkeypatch, capsys) -> None:
    path = tmp_path / "hole.jsonl"
    with open(path, "wb") as out:
        out.truncate(64 << 20)  # sparse: no blocks on disk
    scanned: list[int] = []
    real_count = lines_module._count_newlines

    def counting(view, start, end):
        scanned.append(end - start)
        return real_count(view, start, end)

    monkeypatch.setattr(lines_module, "_count_newlines", counting)
    assert main(["build", str(path)]) == 2
    err = capsys.readouterr().err
    assert "hole.jsonl: binary data (a NUL byte at byte 0)" in err and "not JSON" in err
    assert scanned == []  # no line was looked for


@pytest.mark.parametrize("head", [b"\0\0\0\n", b"\x89PNG\r\n\x1a\n", b"\xfe{\0\"\0", b"{\"a\": \x01}\n"])
def test_binary_bytes_are_refused_with_their_first_bad_byte(head: bytes) -> None:
    message = load_error(head + b"x" * 100, "upload.jsonl")
    assert "binary data" in message and "not JSON text" in message


def test_utf16_bytes_are_refused_as_utf16() -> None:
    message = load_error(b"\xff\xfe{\0\"\0" + b"x" * 100, "upload.jsonl")
    assert message == "upload.jsonl: UTF-16 text (it starts with a UTF-16 byte-order mark), not UTF-8 JSON; save it as UTF-8"


def test_binary_data_past_the_first_kilobyte_is_a_line_error_as_before() -> None:
    data = jsonl_bytes(records()) * 20 + b"\0\n"
    assert len(data) > SNIFF_BYTES
    assert "not valid JSON" in load_error(data, "late.jsonl")


def test_a_binary_zip_member_fails_its_rollout_and_the_others_load() -> None:
    data = zip_bytes({"good.tokens.jsonl": jsonl_bytes(records("good")), "good.tokens.intents": b"c1\nc2\n",
                   "bad.tokens.jsonl": b"\0" * 5000 + b"\n", "bad.tokens.intents": b"",
                   "loose.json": b"\0\0{}"})
    snaps = {s.rollout_id: s for s in load_snapshots(data, name="run.zip")}
    assert snaps["good"].load_error is None and not snaps["good"].incomplete
    assert "member 'bad.tokens.jsonl': binary data (a NUL byte at byte 0)" in snaps["bad"].load_error
    assert "loose.json: binary data" in snaps["loose"].load_error


def test_a_torn_tail_of_zeros_is_skipped_not_refused(tmp_path: Path) -> None:
    body = jsonl_bytes(records())
    tail = b"\0" * 300  # a writer that died after preallocating: never acknowledged
    (tmp_path / "r1.tokens.jsonl").write_bytes(body + tail)
    (tmp_path / "r1.tokens.intents").write_bytes(b"c1\nc2\n")
    zipped = zip_bytes({"r1.tokens.jsonl": body + tail, "r1.tokens.intents": b"c1\nc2\n"})
    for snap in (*load_snapshots(tmp_path), *load_snapshots(zipped, name="r.zip")):
        assert snap.load_error is None and len(snap.entries) == 2
        assert any("torn" in note and "300 bytes" in note for note in snap.source_notes)
    only_zeros = zip_bytes({"r1.tokens.jsonl": tail, "r1.tokens.intents": b""})
    (snap,) = load_snapshots(only_zeros, name="z.zip")
    assert snap.load_error is None and any("torn" in note for note in snap.source_notes)


def test_a_binary_store_file_in_a_directory_fails_its_rollout(tmp_path: Path) -> None:
    with open(tmp_path / "bad.tokens.jsonl", "wb") as out:
        out.seek(32 << 20)
        out.write(b"\n")  # one acknowledged "line" of 32 MiB of zeros
    (tmp_path / "good.tokens.jsonl").write_bytes(jsonl_bytes(records("good")))
    snaps = {s.rollout_id: s for s in load_snapshots(tmp_path)}
    assert snaps["good"].load_error is None
    assert "bad.tokens.jsonl: binary data (a NUL byte at byte 0)" in snaps["bad"].load_error


def test_run_discovery_refuses_a_binary_jsonl_without_indexing_it(tmp_path: Path) -> None:
    with open(tmp_path / "hole.jsonl", "wb") as out:
        out.truncate(16 << 20)
    (tmp_path / "r1.jsonl").write_bytes(jsonl_bytes(records()))
    units = {u.source: u for u in discover(tmp_path)}
    assert units["hole.jsonl"].kind == "failed" and "binary data" in units["hole.jsonl"].error
    rows = scan_table(tmp_path, workers=1).to_pylist()
    by_source = {r["source"]: r for r in rows}
    assert by_source["r1.jsonl"]["error"] is None
    assert "hole.jsonl: binary data" in by_source["hole.jsonl"]["error"]


def test_a_binary_final_responses_file_is_refused_from_its_first_bytes(tmp_path: Path, capsys) -> None:
    finals = tmp_path / "finals.jsonl"
    with open(finals, "wb") as out:
        out.truncate(64 << 20)
    assert main(["build", str(SAMPLES / "clean_multiturn_tools.json"), "--final-responses", str(finals)]) == 2
    err = capsys.readouterr().err
    assert "finals.jsonl: binary data (a NUL byte at byte 0)" in err and "expected final responses" in err
