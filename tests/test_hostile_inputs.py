"""Hostile and broken input: no tracebacks, bounded cost, no silent drops, clean interrupts.

Two layers. A fixed hostile corpus: one test per defect a fuzz campaign found, each
named by the behaviour it checks and reproducing the input that broke. And a
hypothesis strategy that mutates valid inputs of every format (snapshot JSON, JSONL, a
store directory, a zip of one) structurally and with hostile values; every input must
either load -- and then build and export without an exception -- or fail with one
deterministic `LoadError` naming where, never a traceback.
"""

from __future__ import annotations

import gc
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import weakref
import zipfile
from pathlib import Path

import pytest
from helpers import Conv, jsonl_bytes, snapshot_dict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sigint import default_sigint, sigint_handler

import tokencap.loading.files as files_module
from tokencap import build_rollout, load_snapshots
from tokencap.cli import main
from tokencap.export import results_bytes, write_atomically
from tokencap.interrupts import Run, Terminated, critical, handling_interrupts
from tokencap.limits import MAX_CARRIED_DEPTH
from tokencap.loading import LoadError, iter_snapshots
from tokencap.loading.lines import iter_lines, iter_stream_lines
from tokencap.record_errors import RecordError
from tokencap.records import TokenEntry

ROOT = Path(__file__).resolve().parent.parent
ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


# --------------------------------------------------------------------------- helpers


def two_calls(rollout_id: str = "r1", **fields) -> list[dict]:
    conv = Conv(rollout_id)
    conv.root("call-1", **fields)
    conv.child("call-2", "call-1")
    return conv.records


def zip_of(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def store_dir(root: Path, rollouts: dict[str, list[dict]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rid, records in rollouts.items():
        (root / f"{rid}.tokens.jsonl").write_bytes(jsonl_bytes(records))
    return root


def load_error(source, **kw) -> str:
    with pytest.raises(LoadError) as info:
        load_snapshots(source, **kw)
    message = str(info.value)
    assert not ADDRESS.search(message), message
    return message


def exported(snapshots) -> list[dict]:
    """Build and export every snapshot the way `tokencap build` does; the parsed output."""
    results = [build_rollout(s) for s in snapshots]
    text = results_bytes(results, jsonl=True)
    return [json.loads(line) for line in text.splitlines()]


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    _, err = capsys.readouterr()
    if code == 2:
        assert err.strip() and "\n" not in err.strip(), err
        assert "Traceback" not in err
    return code, err


def with_line(records: list[dict], index: int, **fields) -> list[dict]:
    out = [dict(r) for r in records]
    out[index].update(fields)
    return out


def nested(depth: int):
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


_DEEP = re.compile(rb'"@@deep(\d+)@@"')


def deep_marker(depth: int) -> str:
    """Stands for ``nested(depth)`` in a record; `dumps` writes the brackets (json.dumps cannot)."""
    return f"@@deep{depth}@@"


def dumps(value) -> bytes:
    text = json.dumps(value, allow_nan=False).encode("utf-8", "surrogatepass")
    return _DEEP.sub(lambda m: b"[" * int(m.group(1)) + b"]" * int(m.group(1)), text)


# =========================================================================== 1, 2: zip structure


def _zip_needing_version(version: int) -> bytes:
    data = bytearray(zip_of({"r1.tokens.jsonl": jsonl_bytes(two_calls())}))
    at = data.index(b"PK\x01\x02")
    data[at + 6: at + 8] = version.to_bytes(2, "little")  # "version needed to extract"
    return bytes(data)


@pytest.mark.parametrize("command", ["build", "inspect"])
def test_zip_needing_a_newer_zip_version_is_one_line_exit_2(command: str, tmp_path: Path, capsys) -> None:
    data = _zip_needing_version(99)
    assert "not a readable zip" in load_error(data, name="new.zip")
    path = tmp_path / "new.zip"
    path.write_bytes(data)
    out = tmp_path / "out.json"
    code, err = run_cli(capsys, command, str(path), *(["-o", str(out)] if command == "build" else []))
    assert code == 2 and "new.zip" in err and "version" in err
    assert not out.exists()


def test_zip_member_with_an_empty_name_is_skipped_and_noted() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr(zipfile.ZipInfo(""), b"garbage")
        zf.writestr("r1.tokens.jsonl", jsonl_bytes(two_calls()))
    (snap,) = load_snapshots(buffer.getvalue(), name="store.zip")
    assert snap.load_error is None and len(snap.entries) == 2
    assert any("empty name" in note for note in snap.source_notes), snap.source_notes


def test_zip_member_that_cannot_be_inflated_is_an_error_of_its_rollout() -> None:
    data = bytearray(zip_of({"bad.tokens.jsonl": jsonl_bytes(two_calls("bad")) * 20,
                             "good.tokens.jsonl": jsonl_bytes(two_calls("good"))}))
    start = data.index(b"bad.tokens.jsonl") + len("bad.tokens.jsonl") + 8
    data[start: start + 40] = b"\xff" * 40  # corrupt the deflate stream
    snaps = {s.rollout_id: s for s in load_snapshots(bytes(data), name="c.zip")}
    assert snaps["good"].load_error is None
    assert "c.zip" in snaps["bad"].load_error and "cannot be read" in snaps["bad"].load_error


def test_zip_member_longer_than_its_header_says_is_never_read_past_it() -> None:
    data = bytearray(zip_of({"r1.tokens.jsonl": jsonl_bytes(two_calls())}, zipfile.ZIP_STORED))
    central = data.index(b"PK\x01\x02")
    size = int.from_bytes(data[central + 24: central + 28], "little")
    data[central + 24: central + 28] = (size // 2).to_bytes(4, "little")  # uncompressed size
    (snap,) = load_snapshots(bytes(data), name="lie.zip")
    assert snap.load_error is not None and "lie.zip" in snap.load_error


# =========================================================================== 3, 4: carried values


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, 10**30])
@pytest.mark.parametrize("field", ["output_items", "routed_experts", "vendor_field"])
def test_carried_integer_beyond_64_bits_is_a_load_error_naming_the_field(field: str, value: int,
                                                                           tmp_path: Path) -> None:
    payload = {"output_items": [{"type": "message", "n": value}], "routed_experts": [[1, value]],
               "vendor_field": {"a": [value]}}[field]
    records = with_line(two_calls(), 1, **{field: payload})
    message = load_error(jsonl_bytes(records), name="big.jsonl")
    assert "big.jsonl" in message and "line 2" in message and field in message and "64-bit" in message
    # In a store it is that rollout's error; the others load, and the export never fails.
    store = store_dir(tmp_path / "store", {"bad": with_line(two_calls("bad"), 1, **{field: payload}),
                                           "good": two_calls("good")})
    snaps = {s.rollout_id: s for s in load_snapshots(store)}
    assert field in snaps["bad"].load_error and snaps["good"].load_error is None
    assert [row["rollout_id"] for row in exported(snaps.values())] == ["bad", "good"]


def test_carried_integers_at_the_64_bit_bounds_round_trip_exactly() -> None:
    items = [{"type": "message", "role": "assistant", "content": [], "low": -(2**63), "high": 2**64 - 1}]
    records = with_line(two_calls(), 1, output_items=items, token_item_index=0, routed_experts=[[2**64 - 1]])
    (row,) = exported(load_snapshots(jsonl_bytes(records)))
    last = row["rebuilt_response"]["output"][-1]
    assert last["low"] == -(2**63) and last["high"] == 2**64 - 1 and last["routed_experts"] == [[2**64 - 1]]


def test_api_records_get_the_same_rule() -> None:
    base = two_calls()[0]
    with pytest.raises(RecordError, match="64-bit"):
        TokenEntry.from_dict({**base, "extra_thing": [1, 2**70]})
    with pytest.raises(RecordError, match="cannot carry"):
        TokenEntry.from_dict({**base, "extra_thing": {1, 2}})


@pytest.mark.parametrize("depth", [MAX_CARRIED_DEPTH + 1, 254, 300, 700, 999, 5000])
def test_nesting_past_the_limit_is_a_load_error_not_a_masked_sample(depth: int) -> None:
    records = with_line(two_calls(), 0, output_items=[{"type": "message", "x": deep_marker(depth)}],
                        token_item_index=0)
    for data in (b"\n".join(dumps(r) for r in records), dumps(snapshot_dict(records))):
        message = load_error(data, name="deep.json")
        assert "deep.json" in message and "nest" in message and str(MAX_CARRIED_DEPTH) in message


def test_nesting_at_the_limit_is_carried_and_exported() -> None:
    # The output item is level 1 of output_items; "x" holds the rest.
    value = nested(MAX_CARRIED_DEPTH - 2)
    records = with_line(two_calls(), 1, output_items=[{"type": "message", "x": value}], token_item_index=0)
    (row,) = exported(load_snapshots(jsonl_bytes(records)))
    assert row["mask_reasons"] == [] and row["rebuilt_response"]["output"][-1]["x"] == value


def test_deep_refusal_fields_and_state_files_follow_the_same_rule(tmp_path: Path) -> None:
    store = store_dir(tmp_path / "s", {"r1": two_calls()})
    (store / "r1.tokens.state.json").write_text("[" * 3000 + "]" * 3000)
    (snap,) = load_snapshots(store)
    assert "nest" in snap.load_error and not ADDRESS.search(snap.load_error)


# =========================================================================== 5, 6: names and permissions


def test_store_file_name_that_is_not_utf8_is_skipped_noted_and_exported(tmp_path: Path) -> None:
    store = store_dir(tmp_path / "s", {"good": two_calls("good")})
    bad_name = os.fsdecode(b"\xff\xfe.tokens.jsonl")
    (store / bad_name).write_bytes(jsonl_bytes(two_calls("x")))
    (snap,) = load_snapshots(store)
    assert snap.rollout_id == "good" and len(snap.entries) == 2
    assert any("not valid UTF-8" in n and "\\xff\\xfe.tokens.jsonl" in n for n in snap.source_notes)
    rows = exported([snap])
    assert rows[0]["rollout_id"] == "good"
    json.dumps(list(snap.source_notes)).encode("utf-8")  # notes are writable text


def test_store_of_only_undecodable_names_is_a_load_error(tmp_path: Path) -> None:
    store = tmp_path / "s"
    store.mkdir()
    (store / os.fsdecode(b"\xff.tokens.jsonl")).write_bytes(jsonl_bytes(two_calls()))
    message = load_error(store)
    assert "UTF-8" in message
    message.encode("utf-8")


def test_unlistable_directory_raises_the_load_error(tmp_path: Path, monkeypatch) -> None:
    store = store_dir(tmp_path / "s", {"r1": two_calls()})

    def refuse(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(files_module.os, "scandir", refuse)
    assert "cannot be listed" in load_error(store)
    assert "Permission denied" in load_error(str(store))


def test_unreadable_store_file_is_an_error_of_its_rollout(tmp_path: Path, monkeypatch) -> None:
    store = store_dir(tmp_path / "s", {"a": two_calls("a"), "b": two_calls("b")})
    real_open = files_module.os.open

    def deny(path, flags, *args):
        if str(path).endswith("a.tokens.jsonl"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args)

    monkeypatch.setattr(files_module.os, "open", deny)
    snaps = {s.rollout_id: s for s in load_snapshots(store)}
    assert "a.tokens.jsonl" in snaps["a"].load_error and "Permission denied" in snaps["a"].load_error
    assert snaps["b"].load_error is None


# =========================================================================== 7: deterministic messages


@pytest.mark.parametrize(("field", "value", "kind"), [
    ("rollout_id", True, "a boolean"), ("snapshot_id", False, "a boolean"), ("version", True, "a boolean"),
    ("incomplete", 1, "an integer"), ("source_notes", {"a": 1}, "an object"), ("rollout_id", [1], "a list"),
])
def test_wrong_type_messages_name_the_type_and_are_the_same_every_run(field, value, kind, tmp_path) -> None:
    doc = json.dumps({"rollout_id": "r1", "entries": [], field: value}).encode()
    first, second = load_error(doc, name="t.json"), load_error(doc, name="t.json")
    assert first == second and kind in first and field in first
    # In a store, the message lands in metrics.error: same bytes from run to run.
    store = tmp_path / "s"
    store.mkdir()
    (store / "t.json").write_bytes(doc)
    runs = [results_bytes([build_rollout(s) for s in load_snapshots(store)], jsonl=True) for _ in range(2)]
    assert runs[0] == runs[1] and kind.encode() in runs[0]


def test_record_error_texts_never_show_object_addresses() -> None:
    base = two_calls()[0]
    for bad in ({"parent_resolution": object()}, {"prompt_token_ids": [object()]},
                {"generation_log_probs": [object()]}):
        with pytest.raises(RecordError) as info:
            TokenEntry.from_dict({**base, **bad})
        assert not ADDRESS.search(str(info.value)), str(info.value)


# =========================================================================== 8: skipped entries


def test_symlinks_fifos_and_subdirectories_are_named_in_source_notes(tmp_path: Path) -> None:
    store = store_dir(tmp_path / "s", {"good": two_calls("good")})
    outside = store_dir(tmp_path / "elsewhere", {"linked": two_calls("linked")})
    (store / "linked.tokens.jsonl").symlink_to(outside / "linked.tokens.jsonl")
    os.mkfifo(store / "pipe.tokens.intents")
    (store / "older-runs").mkdir()
    (store / "notes.json").symlink_to(outside / "linked.tokens.jsonl")
    snaps = {s.rollout_id: s for s in load_snapshots(store)}
    assert set(snaps) == {"good", "linked", "pipe", "notes"}
    assert snaps["good"].load_error is None
    # A rollout whose own store file was not read fails: it must not look complete.
    assert "linked.tokens.jsonl" in snaps["linked"].load_error and "symbolic link" in snaps["linked"].load_error
    assert snaps["linked"].source_notes[0] == "linked.tokens.jsonl: not read (it is a symbolic link, not a regular file)"
    assert "FIFO" in snaps["pipe"].load_error
    assert "notes.json" in snaps["notes"].load_error
    for snap in snaps.values():
        assert any("older-runs" in n and "directory" in n for n in snap.source_notes), snap.source_notes


def test_a_store_made_of_symlinks_loads_as_failed_rollouts_not_nothing(tmp_path: Path) -> None:
    real = store_dir(tmp_path / "real", {"a": two_calls("a"), "b": two_calls("b")})
    links = tmp_path / "links"
    links.mkdir()
    for p in real.iterdir():
        (links / p.name).symlink_to(p)
    snaps = load_snapshots(links)
    assert [s.rollout_id for s in snaps] == ["a", "b"]
    assert all("symbolic link" in s.load_error for s in snaps)
    assert [row["mask_reasons"] for row in exported(snaps)] == [["load_error", "capture_incomplete"]] * 2


def test_a_symlinked_intents_file_fails_its_rollout(tmp_path: Path) -> None:
    store = store_dir(tmp_path / "s", {"r1": two_calls()})
    (tmp_path / "intents").write_text("call-1\ncall-2\ncall-3\n")
    (store / "r1.tokens.intents").symlink_to(tmp_path / "intents")
    (snap,) = load_snapshots(store)
    assert snap.load_error is not None and "r1.tokens.intents" in snap.load_error


def test_a_directory_holding_only_subdirectories_says_so(tmp_path: Path) -> None:
    top = tmp_path / "top"
    store_dir(top / "store-1", {"r1": two_calls()})
    message = load_error(top)
    assert "store-1" in message and "directory" in message


def test_hidden_zip_members_are_noted() -> None:
    data = zip_of({"r1.tokens.jsonl": jsonl_bytes(two_calls()), "__MACOSX/._r1.tokens.jsonl": b"\0\1"})
    (snap,) = load_snapshots(data)
    assert snap.load_error is None and any("._r1.tokens.jsonl" in n for n in snap.source_notes)


# =========================================================================== 9: zip bombs and limits


def test_zip_bomb_is_refused_from_its_directory_before_anything_is_inflated(monkeypatch) -> None:
    bomb = zip_of({"r1.tokens.jsonl": jsonl_bytes(two_calls()), "bomb.tokens.jsonl": b"\0" * (24 << 20)})
    assert len(bomb) < 200_000

    def never(*args, **kwargs):
        raise AssertionError("a member was inflated")

    monkeypatch.setattr(zipfile.ZipFile, "open", never)
    message = load_error(bomb, name="bomb.zip")
    assert "bomb.zip" in message and "expand" in message and "100 times" in message


def test_total_expansion_cap_applies_whatever_the_ratio(monkeypatch) -> None:
    monkeypatch.setattr(files_module, "MAX_ZIP_EXPANDED_BYTES", 1000)
    data = zip_of({"r1.tokens.jsonl": jsonl_bytes(two_calls()) * 3}, zipfile.ZIP_STORED)
    assert "expand" in load_error(data, name="big.zip")


def test_member_count_limit(monkeypatch) -> None:
    monkeypatch.setattr(files_module, "MAX_ZIP_MEMBERS", 3)
    data = zip_of({f"r{i}.tokens.jsonl": jsonl_bytes(two_calls(f"r{i}")) for i in range(4)})
    assert "at most 3" in load_error(data, name="many.zip")


def test_zip_members_are_streamed_line_by_line_like_the_directory(tmp_path: Path) -> None:
    body = b"\n\n  \r\n".join(jsonl_bytes([r]) for r in two_calls()) + b"\n" * 5000 + b'{"torn'
    files = {"r1.tokens.jsonl": body, "r1.tokens.intents": b"call-1\n\n\ncall-2\n"}
    store = tmp_path / "s"
    store.mkdir()
    for name, data in files.items():
        (store / name).write_bytes(data)
    from_dir, from_zip = load_snapshots(store)[0], load_snapshots(zip_of(files))[0]
    assert [e.to_dict() for e in from_dir.entries] == [e.to_dict() for e in from_zip.entries]
    assert list(from_dir.source_notes) == list(from_zip.source_notes)
    assert any("torn" in n and "6 bytes" in n for n in from_zip.source_notes)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([b"\n", b" ", b"\r\n", b"{}", b'{"a":1}', b"x", b"\t", b"\n\n\n"]), max_size=40),
       st.lists(st.integers(1, 9), min_size=1, max_size=8))
def test_streamed_lines_equal_the_lines_of_the_whole_text(pieces: list[bytes], cuts: list[int]) -> None:
    text = b"".join(pieces)
    chunks, pos, i = [], 0, 0
    while pos < len(text):
        chunks.append(text[pos: pos + cuts[i % len(cuts)]])
        pos += cuts[i % len(cuts)]
        i += 1
    torn: list[int] = []
    streamed = [(n, bytes(t).strip()) for n, t in iter_stream_lines(chunks, torn.append)]
    cut = text.rfind(b"\n") + 1
    whole = [(n, bytes(t).strip()) for n, t in iter_lines(text[:cut])]
    assert streamed == whole
    assert sum(torn) == len(text) - cut


# =========================================================================== 10: blank-line floods


def _python_steps(fn) -> int:
    """Python line events inside tokencap's loading code while ``fn`` runs (no timing)."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if "tokencap" in frame.f_code.co_filename and "loading" in frame.f_code.co_filename:
            if event == "line":
                count += 1
            return tracer
        return None

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


@pytest.mark.parametrize("blank", [b"\n", b"\r\n", b" \t\n"])
def test_blank_lines_cost_no_python_step_each(blank: bytes) -> None:
    first, second = (jsonl_bytes([r]) for r in two_calls())

    def steps(n: int) -> int:
        data = first + blank * n + second
        return _python_steps(lambda: list(iter_lines(data)))

    assert steps(10) == steps(100_000)
    lines = list(iter_lines(first + blank * 1000 + second))
    assert [n for n, _ in lines] == [1, 1002]


def test_streamed_blank_lines_cost_no_python_step_each() -> None:
    first, second = (jsonl_bytes([r]) for r in two_calls())

    def steps(n: int) -> int:
        chunks = [first + b"\n" * n, second]
        return _python_steps(lambda: list(iter_stream_lines(chunks, lambda _: None)))

    assert steps(10) == steps(100_000)


def test_big_blank_flood_file_loads_with_the_right_line_numbers(tmp_path: Path) -> None:
    first, second = (jsonl_bytes([r]) for r in two_calls())
    path = tmp_path / "flood.jsonl"
    path.write_bytes(first + b"\n" * (9 << 20) + second.replace(b'"schema_version": 5', b'"schema_version": 99'))
    message = load_error(path)
    assert f"line {(9 << 20) + 2}" in message


# =========================================================================== 11: many small files


def test_a_store_yields_one_rollout_at_a_time(tmp_path: Path) -> None:
    store = tmp_path / "s"
    store.mkdir()
    for i in range(12):
        (store / f"r{i:02d}.json").write_text(json.dumps(snapshot_dict(two_calls(f"r{i:02d}"))))
    (store / "z.tokens.jsonl").write_bytes(jsonl_bytes(two_calls("z")))
    alive: weakref.WeakSet = weakref.WeakSet()
    seen = []
    for snap in iter_snapshots(store):
        gc.collect()
        assert len(alive) == 0, "an earlier rollout is still held"
        alive.add(snap)
        seen.append(snap.rollout_id)
        del snap
    assert seen == [f"r{i:02d}" for i in range(12)] + ["z"]


def _renamed_members() -> dict[str, bytes]:
    """"f{i}.json" holds rollout "r{i}" (issue 13.18), so every member's name sorts before every
    rollout id; "g.json" fails, so it is reported under its name, before the rollouts."""
    members = {f"f{i}.json": json.dumps(snapshot_dict(two_calls(f"r{i}"))).encode() for i in range(8)}
    members["g.json"] = json.dumps({"rollout_id": "r9", "entries": [{"rollout_id": "r9", "model_call_id": 5}]}).encode()
    return members


def _tracking_loads(monkeypatch) -> tuple[weakref.WeakSet, list[str]]:
    """Spies on the loose-file load: the rollouts it returned (alive while held) and the names loaded."""
    import tokencap.loading.store as store_module

    loaded: weakref.WeakSet = weakref.WeakSet()
    names: list[str] = []
    real = store_module.load_text

    def tracking(data, name=None):
        names.append(name)
        snaps = real(data, name)
        loaded.update(snaps)
        return snaps

    monkeypatch.setattr(store_module, "load_text", tracking)
    return loaded, names


_RENAMED_ORDER = [("g", True)] + [(f"r{i}", False) for i in range(8)]


def test_loose_members_not_named_by_their_rollout_are_loaded_once_within_the_budget(monkeypatch) -> None:
    # Issue 19.20: each member is loaded when its name is due (it would fail there); what it
    # loads is kept until its rollout is due, rather than loaded a second time then.
    loaded, names = _tracking_loads(monkeypatch)
    seen = [(snap.rollout_id, snap.load_error is not None) for snap in iter_snapshots(zip_of(_renamed_members()))]
    assert seen == _RENAMED_ORDER
    assert sorted(names) == sorted(_renamed_members()), "a member was loaded more than once"


def test_loose_members_loaded_ahead_past_the_budget_are_not_held(monkeypatch) -> None:
    # Past HELD_AHEAD_BYTES, what a good member loads when its name is due is dropped and
    # loaded again when its rollout is: memory stays flat in the number of members.
    import tokencap.loading.store as store_module

    one = store_module.held_bytes(load_snapshots(zip_of({"f0.json": _renamed_members()["f0.json"]}))[0])
    monkeypatch.setattr(store_module, "HELD_AHEAD_BYTES", 2 * one)  # room for two members' rollouts
    loaded, names = _tracking_loads(monkeypatch)
    seen = []
    for snap in iter_snapshots(zip_of(_renamed_members())):
        gc.collect()
        ahead = {s.rollout_id for s in loaded} - {snap.rollout_id}
        assert len(ahead) <= 2, f"rollouts loaded ahead of their turn are held past the budget: {sorted(ahead)}"
        seen.append((snap.rollout_id, snap.load_error is not None))
        del snap
    assert seen == _RENAMED_ORDER
    # f0 and f1 are held from their first load; f2..f7 are loaded again when their rollouts are due.
    assert sorted(names) == sorted([*_renamed_members(), *(f"f{i}.json" for i in range(2, 8))])
    monkeypatch.undo()
    unbudgeted = _outcome(_renamed_members())
    monkeypatch.setattr(store_module, "HELD_AHEAD_BYTES", 0)
    assert _outcome(_renamed_members()) == unbudgeted, "the budget changed what is loaded"


def _outcome(members: dict[str, bytes]) -> list:
    return [(s.rollout_id, s.load_error, [e.model_call_id for e in s.entries]) for s in iter_snapshots(zip_of(members))]


def test_build_writes_each_rollout_before_building_the_next(tmp_path: Path, monkeypatch, capsys) -> None:
    import tokencap.cli.build as cli_build

    store = store_dir(tmp_path / "s", {f"r{i}": two_calls(f"r{i}") for i in range(6)})
    built: list[weakref.ref] = []
    real = cli_build.build_rollout

    def tracking(snapshot, **kw):
        gc.collect()
        assert all(ref() is None for ref in built), "an earlier result is still held"
        result = real(snapshot, **kw)
        built.append(weakref.ref(result))
        return result

    monkeypatch.setattr(cli_build, "build_rollout", tracking)
    out = tmp_path / "out.jsonl"
    assert main(["build", str(store), "-o", str(out)]) == 0
    assert [json.loads(line)["rollout_id"] for line in out.read_text().splitlines()] == [f"r{i}" for i in range(6)]


def test_loose_file_with_several_rollouts_still_sorts_and_detects_duplicates(tmp_path: Path) -> None:
    store = store_dir(tmp_path / "s", {"b": two_calls("b")})
    (store / "mixed.jsonl").write_bytes(jsonl_bytes(two_calls("a") + two_calls("b") + two_calls("c")))
    (store / "d.json").write_text("{not json")
    snaps = load_snapshots(store)
    assert [s.rollout_id for s in snaps] == ["a", "b", "c", "d"]
    assert "several sources" in snaps[1].load_error and snaps[0].load_error is None
    assert snaps[3].load_error is not None and "d.json" in snaps[3].load_error


def test_one_rollout_of_a_store_is_loaded_alone(tmp_path: Path, monkeypatch) -> None:
    store = store_dir(tmp_path / "s", {"a": two_calls("a"), "b": two_calls("b")})
    (store / "b.tokens.jsonl").write_text("not json\n")
    snaps = list(iter_snapshots(store, rollout_id="a"))
    assert [s.rollout_id for s in snaps] == ["a"] and snaps[0].load_error is None


# =========================================================================== 12: special files


def test_fifo_as_source_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "tokencap", "build", str(fifo)], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and "FIFO" in proc.stderr and "Traceback" not in proc.stderr
    assert "FIFO" in load_error(fifo)


def test_character_device_as_source_is_refused() -> None:
    assert "character device" in load_error("/dev/zero")


def _supports_holes(directory: Path) -> bool:
    probe = directory / "probe"
    with open(probe, "wb") as handle:
        handle.truncate(64 << 20)
    fd = os.open(probe, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_DATA) >= 0  # type: ignore[attr-defined]
    except OSError:
        return True  # ENXIO: no data at all, the file is one hole
    finally:
        os.close(fd)
        probe.unlink()


def test_huge_sparse_torn_tail_is_found_from_the_end_without_reading_it(tmp_path: Path, monkeypatch) -> None:
    store = store_dir(tmp_path / "s", {"r1": two_calls()})
    path = store / "r1.tokens.jsonl"
    acknowledged = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(3 << 30)  # 3 GiB: a hole after the records
    read = []
    real = files_module.pread
    monkeypatch.setattr(files_module, "pread", lambda fd, n, off: read.append(n) or real(fd, n, off))
    (snap,) = load_snapshots(store)
    assert len(snap.entries) == 2
    assert any("torn" in n and f"{(3 << 30) - acknowledged} bytes" in n for n in snap.source_notes)
    if hasattr(os, "SEEK_DATA") and _supports_holes(tmp_path):
        assert sum(read) < 8 << 20, f"read {sum(read)} bytes"


def test_fifo_inside_a_store_never_blocks(tmp_path: Path) -> None:
    store = store_dir(tmp_path / "s", {"r1": two_calls()})
    os.mkfifo(store / "stray.json")
    snaps = {s.rollout_id: s for s in load_snapshots(store)}
    assert snaps["r1"].load_error is None and "FIFO" in snaps["stray"].load_error


# =========================================================================== 13, 14: interrupts


CHILD = textwrap.dedent("""
    import os, signal, sys, time
    import tokencap.cli as cli
    import tokencap.export as export

    mode, source, out = sys.argv[1:4]
    if mode == "block":  # write the first rollout, say so, then wait to be interrupted
        real = export.write_summary
        def slow(handle, result):
            real(handle, result)
            handle.flush()
            print("ready", flush=True)
            time.sleep(120)
        export.write_summary = slow
    elif mode == "late-sigint":  # Ctrl-C right after the rename
        real_replace = os.replace
        def replace(a, b):
            real_replace(a, b)
            os.kill(os.getpid(), signal.SIGINT)
        export.os.replace = replace
    sys.exit(cli.main(["build", source, "-o", out]))
""")


def _child(tmp_path: Path, mode: str, source: Path, out: Path) -> subprocess.Popen:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return subprocess.Popen([sys.executable, str(script), mode, str(source), str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            preexec_fn=default_sigint)


def _parts(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.") and p.name.endswith(".part"))


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_sigint_remove_the_part_file(signum: int, code: int, tmp_path: Path) -> None:
    _interrupt_a_build(tmp_path, signum, code)


def test_sigint_reaches_the_child_when_the_tests_run_with_sigint_ignored(tmp_path: Path) -> None:
    # As under `nohup`, a background job `&` or `bash -c 'trap "" INT; pytest ...'`: the
    # child would inherit the ignored SIGINT and never stop.
    with sigint_handler(signal.SIG_IGN):
        _interrupt_a_build(tmp_path, signal.SIGINT, 130)


def _interrupt_a_build(tmp_path: Path, signum: int, code: int) -> None:
    store = store_dir(tmp_path / "s", {"a": two_calls("a"), "b": two_calls("b")})
    out = tmp_path / "out.jsonl"
    proc = _child(tmp_path, "block", store, out)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        assert len(_parts(out)) == 1
        proc.send_signal(signum)
        assert proc.wait(timeout=60) == code
    finally:
        proc.kill()
        proc.wait()
    assert "Traceback" not in proc.stderr.read()
    assert not out.exists() and _parts(out) == []


def test_part_file_of_a_killed_run_is_removed_by_the_next_run(tmp_path: Path) -> None:
    store = store_dir(tmp_path / "s", {"a": two_calls("a"), "b": two_calls("b")})
    out = tmp_path / "out.jsonl"
    proc = _child(tmp_path, "block", store, out)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.kill()  # SIGKILL: nothing can clean up
        proc.wait(timeout=60)
    finally:
        proc.kill()
    stale = _parts(out)
    assert len(stale) == 1
    not_ours = tmp_path / f".{out.name}.x.part"
    not_ours.write_text("another tool's file: a different pattern")
    assert main(["build", str(store), "-o", str(out)]) == 0
    assert _parts(out) == [not_ours.name] and len(out.read_text().splitlines()) == 2


def test_a_live_writers_part_file_is_left_alone(tmp_path: Path) -> None:
    store = store_dir(tmp_path / "s", {"a": two_calls("a"), "b": two_calls("b")})
    out = tmp_path / "out.jsonl"
    proc = _child(tmp_path, "block", store, out)
    try:
        assert proc.stdout.readline().strip() == "ready"
        live = _parts(out)
        write_atomically(out, lambda handle: handle.write(b"other\n"))
        assert out.read_bytes() == b"other\n"
        assert _parts(out) == live
    finally:
        proc.kill()
        proc.wait()


def test_sigint_after_the_rename_is_a_success(tmp_path: Path) -> None:
    store = store_dir(tmp_path / "s", {"a": two_calls("a")})
    out = tmp_path / "out.json"
    proc = _child(tmp_path, "late-sigint", store, out)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out.read_text())["rollout_id"] == "a" and _parts(out) == []


def test_critical_section_delays_an_interrupt_and_never_loses_it() -> None:
    events = []
    # SIGINT as Python turns it into Ctrl-C, also when the test run inherited it ignored.
    with sigint_handler(signal.default_int_handler):
        with pytest.raises(KeyboardInterrupt):
            with critical():
                os.kill(os.getpid(), signal.SIGINT)
                events.append("finished the critical step")
    assert events == ["finished the critical step"]


def test_critical_section_keeps_an_ignored_sigint_ignored() -> None:
    with sigint_handler(signal.SIG_IGN):
        with critical():
            os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # held, then delivered to "ignore"


def test_handling_interrupts_turns_sigterm_into_terminated_and_restores_the_handler(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    run = Run()
    with pytest.raises(Terminated):
        with handling_interrupts(run):
            write_atomically(tmp_path / "done.txt", lambda h: h.write(b"ok"))
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pause() if hasattr(signal, "pause") else None
    assert run.committed == [str(tmp_path / "done.txt")]
    assert signal.getsignal(signal.SIGTERM) == before


def test_sigterm_as_the_part_file_is_created_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    # The signal lands while the part file's open() runs: Python calls the handler as the
    # call returns, before write_atomically has the part file's name to remove it by.
    import tokencap.export as export

    real_open = os.open
    opened: list[str] = []

    def open_then_signal(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        if flags & os.O_CREAT and str(path).endswith(".part"):
            opened.append(str(path))
            os.kill(os.getpid(), signal.SIGTERM)
        return fd

    monkeypatch.setattr(export.os, "open", open_then_signal)
    out = tmp_path / "o.json"
    written = []
    with pytest.raises(Terminated):
        with handling_interrupts():
            write_atomically(out, lambda handle: written.append(handle.write(b"{}")))
    assert len(opened) == 1 and not written  # the part was made; the write never started
    assert sorted(tmp_path.iterdir()) == []  # no output, no part file


def test_write_atomically_failure_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "o.json"

    def boom(handle):
        handle.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        write_atomically(out, boom)
    assert not out.exists() and _parts(out) == []


# =========================================================================== the fuzz strategy


HOSTILE_VALUES = st.one_of(
    st.sampled_from([None, True, False, "", "x" * 300, 0, -1, 2**63, 2**64 - 1, 2**64, -(2**63) - 1, 10**40,
                     1e308, -0.0, 1.5, [], {}, [[]], {"": {}}, "\u2028", "\x00", "\ud83d\ude00"]),
    st.integers(min_value=40, max_value=1200).map(deep_marker),
    st.integers(),
    st.text(max_size=8),
    st.lists(st.integers(-(2**70), 2**70), max_size=4),
)

FIELDS = ("schema_version", "rollout_id", "model_call_id", "prompt_token_ids", "generation_token_ids",
          "generation_log_probs", "output_items", "token_item_index", "routed_experts", "parent_resolution",
          "parent_call_id", "cum_len", "digest", "prompt_is_delta", "created_at", "finish_reason", "vendor")


@st.composite
def mutated_records(draw) -> list[dict]:
    records = [json.loads(json.dumps(r)) for r in two_calls("fz")]
    for _ in range(draw(st.integers(0, 3))):
        record = records[draw(st.integers(0, len(records) - 1))]
        field = draw(st.sampled_from(FIELDS))
        action = draw(st.sampled_from(["set", "delete", "set-in-list"]))
        if action == "delete":
            record.pop(field, None)
        elif action == "set-in-list" and isinstance(record.get(field), list) and record[field]:
            record[field][draw(st.integers(0, len(record[field]) - 1))] = draw(HOSTILE_VALUES)
        else:
            record[field] = draw(HOSTILE_VALUES)
    return records


@st.composite
def mutated_text(draw) -> bytes:
    records = draw(mutated_records())
    try:
        if draw(st.booleans()):
            data = dumps(snapshot_dict(records, **draw(st.dictionaries(
                st.sampled_from(["rollout_id", "snapshot_id", "version", "incomplete", "source_notes",
                                 "engine_refusals"]), HOSTILE_VALUES, max_size=2))))
        else:
            data = b"\n".join(dumps(r) for r in records) + b"\n"
    except (ValueError, RecursionError):
        data = b"{}"
    edit = draw(st.sampled_from(["none", "truncate", "flip", "blank-flood", "insert"]))
    if edit == "truncate" and data:
        data = data[: draw(st.integers(0, len(data)))]
    elif edit == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
    elif edit == "blank-flood":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\n", b"\r\n", b" "])) * draw(st.integers(1, 5000)) + data[at:]
    elif edit == "insert":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(max_size=12)) + data[at:]
    return data


def _check_outcome(load) -> None:
    """Loads twice: identical outcome (or identical error), and a load builds and exports."""
    outcomes = []
    for _ in range(2):
        try:
            snapshots = load()
        except LoadError as exc:
            message = str(exc)
            assert message and not ADDRESS.search(message), message
            message.encode("utf-8")
            outcomes.append(("error", message))
            continue
        rows = exported(snapshots)  # never raises: masked, not crashed
        for row in rows:
            error = row["metrics"]["error"]
            assert error is None or not ADDRESS.search(error), error
        outcomes.append(("rows", json.dumps(rows, sort_keys=True)))
    assert outcomes[0] == outcomes[1]


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.data_too_large])


@FUZZ
@given(mutated_text())
def test_fuzz_snapshot_and_jsonl_texts(data: bytes) -> None:
    _check_outcome(lambda: load_snapshots(data, name="fuzz.jsonl"))


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(["fz.tokens.jsonl", "fz.tokens.intents", "fz.tokens.state.json",
                                           "fz.tokens.refusals.jsonl", "fz.tokens.incomplete", "loose.json",
                                           "other.jsonl", "fz.tokens.lock", "x"]),
                          mutated_text()), min_size=1, max_size=4, unique_by=lambda t: t[0]),
       st.booleans())
def test_fuzz_store_directories_and_zips(members: list[tuple[str, bytes]], as_zip: bool) -> None:
    if as_zip:
        data = zip_of(dict(members))
        _check_outcome(lambda: load_snapshots(data, name="fuzz.zip"))
        return
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in members:
            (Path(tmp) / name).write_bytes(data)
        _check_outcome(lambda: load_snapshots(tmp))


@FUZZ
@given(st.binary(max_size=400), st.integers(0, 3))
def test_fuzz_zip_bytes(garbage: bytes, where: int) -> None:
    base = zip_of({"fz.tokens.jsonl": jsonl_bytes(two_calls("fz")), "fz.tokens.intents": b"call-1\n"})
    at = len(base) * where // 4
    data = base[:at] + garbage + base[at + len(garbage):]
    _check_outcome(lambda: load_snapshots(data, name="fuzz.zip"))


def test_the_apps_sources_never_open_a_fifo(tmp_path: Path) -> None:
    from tokencap.services import rollout_sources as src

    store = store_dir(tmp_path / "s", {"r1": two_calls()})
    os.mkfifo(store / "r1.tokens.intents")
    loaded = src.load_source(src.source_from_path(store))  # hashing must not block on the FIFO
    assert loaded.ok and "FIFO" in loaded.snapshots[0].load_error
    with pytest.raises(ValueError, match="FIFO"):
        src.source_from_path(store / "r1.tokens.intents")
