"""A capture-store file given on its own is never built without its siblings (issue 13.1).

`R.tokens.jsonl` alone holds the calls, but not what says the capture is incomplete
(`R.tokens.incomplete`, dangling `R.tokens.intents`, `R.tokens.state.json`) nor the
engine refusals (`R.tokens.refusals.jsonl`). A path is read with its siblings, exactly as
its directory is; bytes with no directory (an upload, a zip holding the records file only)
are masked `capture_incomplete` with a note saying what to give instead. Every entry point:
`load_snapshots` (path, bytes), zips, the commands, run discovery and the app's sources.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import Conv, jsonl_bytes, zip_bytes

from tokencap import build_rollout, load_snapshots
from tokencap.cli import main
from tokencap.loading import LoadError
from tokencap.loading.files import DirectorySource
from tokencap.run import scan_table
from tokencap.run.discover import discover
from tokencap.run.errors import DiscoveryError
from tokencap.services import rollout_sources as src
from tokencap.views.model import RolloutView
from tokencap.views.rollout.culprits import reason_lines

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "sample_data" / "run"
UPSTREAM = Path(__file__).resolve().parent / "data" / "upstream_store"
INCOMPLETE = "task0017-rollout3-attempt0"  # has R.tokens.incomplete
COMPLETE = "task0003-rollout2-attempt0"  # trainable, with intents and state
REFUSED = "task0056-rollout1-attempt0"  # has R.tokens.refusals.jsonl


def store_ids(directory: Path) -> list[str]:
    return sorted({name.split(".tokens.")[0] for name in os.listdir(directory) if ".tokens." in name})


def build_bytes(tmp_path: Path, name: str, *argv: str) -> bytes:
    out = tmp_path / name
    assert main(["build", *argv, "-o", str(out)]) == 0
    return out.read_bytes()


@pytest.mark.parametrize("directory", [RUN, UPSTREAM], ids=["sample_run", "upstream_store"])
def test_a_records_file_builds_exactly_as_its_rollout_in_the_directory(directory: Path, tmp_path: Path) -> None:
    ids = store_ids(directory)
    assert len(ids) >= 2
    failed = {s.rollout_id: s.load_error for s in load_snapshots(directory) if s.load_error}
    for rid in ids:
        path = directory / f"{rid}.tokens.jsonl"
        if rid in failed:  # a single file's error (docs/contract.md#input-errors): exit 2, the directory's message, the path
            assert main(["build", str(path), "-o", str(tmp_path / "never.json")]) == 2
            assert not (tmp_path / "never.json").exists()
            with pytest.raises(LoadError) as caught:
                load_snapshots(path)
            assert str(caught.value) == f"{directory}/{failed[rid]}", rid
            continue
        alone = build_bytes(tmp_path, "alone.json", str(path))
        in_directory = build_bytes(tmp_path, "dir.json", str(directory), "--rollout", rid)
        assert alone == in_directory, rid
    assert len(failed) < len(ids)


def test_the_reported_cases_keep_their_verdicts_when_the_file_is_given_alone() -> None:
    (snap,) = load_snapshots(RUN / f"{INCOMPLETE}.tokens.jsonl")
    assert snap.incomplete and build_rollout(snap).mask_reasons[:1] == ["capture_incomplete"]
    (snap,) = load_snapshots(RUN / f"{REFUSED}.tokens.jsonl")
    assert len(snap.engine_refusals) >= 1
    (snap,) = load_snapshots(UPSTREAM / "task4-rollout1-attempt0.tokens.jsonl")
    assert snap.incomplete and len(snap.entries) == 2
    assert any("torn" in n for n in snap.source_notes) and any("dangling" in n for n in snap.source_notes)


def test_an_incomplete_marker_beside_a_hand_made_records_file_is_read(tmp_path: Path) -> None:
    conv = Conv("r1")
    conv.root("c1")
    (tmp_path / "r1.tokens.jsonl").write_bytes(jsonl_bytes(conv.records))
    (snap,) = load_snapshots(tmp_path / "r1.tokens.jsonl")
    assert not snap.incomplete  # the store wrote nothing else: nothing says it is incomplete
    (tmp_path / "r1.tokens.incomplete").write_bytes(b"")
    (snap,) = load_snapshots(tmp_path / "r1.tokens.jsonl")
    assert snap.incomplete


def test_a_records_file_reached_through_a_symbolic_link_reads_the_real_store(tmp_path: Path) -> None:
    link = tmp_path / f"{INCOMPLETE}.tokens.jsonl"
    link.symlink_to(RUN / f"{INCOMPLETE}.tokens.jsonl")
    (snap,) = load_snapshots(link)
    assert snap.incomplete and snap.load_error is None


def test_a_link_to_another_file_under_a_store_name_is_masked(tmp_path: Path) -> None:
    conv = Conv("r1")
    conv.root("c1")
    (tmp_path / "plain.jsonl").write_bytes(jsonl_bytes(conv.records))
    (tmp_path / "r1.tokens.jsonl").symlink_to(tmp_path / "plain.jsonl")
    (snap,) = load_snapshots(tmp_path / "r1.tokens.jsonl")
    assert snap.incomplete and "Give the store directory, or a zip of it" in snap.source_notes[-1]


def test_a_sibling_that_is_not_a_regular_file_stops_the_lone_file_with_the_directory_message(tmp_path: Path) -> None:
    for name in (f"{INCOMPLETE}.tokens.jsonl", f"{INCOMPLETE}.tokens.intents"):
        shutil.copy(RUN / name, tmp_path / name)
    os.mkfifo(tmp_path / f"{INCOMPLETE}.tokens.incomplete")
    (whole,) = load_snapshots(tmp_path)
    with pytest.raises(LoadError) as caught:
        load_snapshots(tmp_path / f"{INCOMPLETE}.tokens.jsonl")
    assert whole.load_error is not None and str(caught.value) == whole.load_error
    assert "FIFO" in whole.load_error


def test_an_unreadable_sibling_stops_the_lone_file_and_masks_the_rollout_in_the_directory(tmp_path: Path, monkeypatch) -> None:
    for name in os.listdir(RUN):
        if name.startswith(INCOMPLETE):
            shutil.copy(RUN / name, tmp_path / name)
    real_read = DirectorySource.read

    def read(self, name: str):
        if name.endswith(".tokens.intents"):
            raise LoadError(f"{name}: cannot be read (Permission denied)")
        return real_read(self, name)

    monkeypatch.setattr(DirectorySource, "read", read)
    with pytest.raises(LoadError, match="Permission denied") as caught:
        load_snapshots(tmp_path / f"{INCOMPLETE}.tokens.jsonl")
    assert str(caught.value).startswith(f"{tmp_path / INCOMPLETE}.tokens.intents: ")
    (snap,) = load_snapshots(tmp_path)  # the directory: that rollout is masked, nothing raised
    assert "Permission denied" in snap.load_error and build_rollout(snap).mask_sample


@pytest.mark.parametrize("rid", [INCOMPLETE, REFUSED, "task0003-rollout0-attempt0"])
def test_records_bytes_without_their_directory_are_masked_with_a_note(rid: str) -> None:
    data = (RUN / f"{rid}.tokens.jsonl").read_bytes()
    (snap,) = load_snapshots(data, name=f"{rid}.tokens.jsonl")
    result = build_rollout(snap)
    assert snap.incomplete and "capture_incomplete" in result.mask_reasons
    note = snap.source_notes[-1]
    assert note.startswith(f"{rid}.tokens.jsonl was read without") and note.endswith("store directory, or a zip of it")


def test_an_upload_named_with_a_path_is_judged_by_its_base_name() -> None:
    data = (RUN / f"{INCOMPLETE}.tokens.jsonl").read_bytes()
    (snap,) = load_snapshots(data, name=f"some/dir/{INCOMPLETE}.tokens.jsonl")
    assert snap.incomplete


def test_a_torn_tail_of_uploaded_records_is_skipped_as_in_a_store() -> None:
    conv = Conv("r1")
    conv.root("c1")
    (snap,) = load_snapshots(jsonl_bytes(conv.records) + b'{"rollout_id": "r1", "mod', name="r1.tokens.jsonl")
    assert len(snap.entries) == 1 and any("torn" in n for n in snap.source_notes)


def test_a_zip_holding_only_the_records_file_is_masked() -> None:
    data = zip_bytes({f"run/{INCOMPLETE}.tokens.jsonl": (RUN / f"{INCOMPLETE}.tokens.jsonl").read_bytes()})
    (snap,) = load_snapshots(data, name="one.zip")
    assert snap.incomplete and build_rollout(snap).mask_reasons[:1] == ["capture_incomplete"]
    assert snap.source_notes[-1].startswith(f"one.zip: {INCOMPLETE}.tokens.jsonl was read without")


def test_a_zip_of_the_whole_store_builds_as_the_directory(tmp_path: Path) -> None:
    rid = "task0003-rollout0-attempt0"
    members = {name: (RUN / name).read_bytes() for name in os.listdir(RUN) if name.startswith(rid)}
    (tmp_path / "r.zip").write_bytes(zip_bytes(members))
    assert build_bytes(tmp_path, "zip.json", str(tmp_path / "r.zip")) == \
        build_bytes(tmp_path, "dir.json", str(RUN), "--rollout", rid)


@pytest.mark.parametrize("suffix", [".tokens.intents", ".tokens.state.json", ".tokens.refusals.jsonl",
                                    ".tokens.incomplete"])
def test_a_sibling_given_alone_says_what_it_is_and_what_to_give(suffix: str, tmp_path: Path, capsys) -> None:
    rid = INCOMPLETE if suffix == ".tokens.incomplete" else REFUSED
    path = RUN / f"{rid}{suffix}"
    for source in (path, path.read_bytes()):
        with pytest.raises(LoadError) as caught:
            load_snapshots(source, name=path.name if isinstance(source, bytes) else None)
        message = str(caught.value)
        assert f"capture-store rollout {rid!r}" in message and "store directory" in message
        assert f"{rid}.tokens.jsonl" in message and "\n" not in message
    assert main(["build", str(path)]) == 2
    assert "store directory" in capsys.readouterr().err
    with pytest.raises(DiscoveryError, match="store directory"):
        discover(path)


def test_discovery_of_a_records_file_finds_its_store_rollout() -> None:
    (unit,) = discover(RUN / f"{REFUSED}.tokens.jsonl")
    (whole,) = [u for u in discover(RUN) if u.rollout_id == REFUSED]
    assert unit == whole
    assert f"{REFUSED}.tokens.refusals.jsonl" in unit.names


def test_discovery_follows_a_link_to_the_real_store_and_masks_a_link_to_another_file(tmp_path: Path) -> None:
    link = tmp_path / f"{INCOMPLETE}.tokens.jsonl"
    link.symlink_to(RUN / f"{INCOMPLETE}.tokens.jsonl")
    (unit,) = discover(link)
    assert unit.kind == "store" and f"{INCOMPLETE}.tokens.incomplete" in unit.names
    conv = Conv("r1")
    conv.root("c1")
    (tmp_path / "plain.jsonl").write_bytes(jsonl_bytes(conv.records))
    (tmp_path / "r1.tokens.jsonl").symlink_to(tmp_path / "plain.jsonl")
    rows = scan_table(tmp_path / "r1.tokens.jsonl", workers=1).to_pylist()
    assert [r["reason_capture_incomplete"] for r in rows] == [True]


@pytest.mark.parametrize("command", ["scan", "export"])
def test_scan_and_export_of_a_records_file_match_the_directory(command: str, tmp_path: Path) -> None:
    ext = "parquet" if command == "scan" else "jsonl"
    alone, whole = tmp_path / f"alone.{ext}", tmp_path / f"whole.{ext}"
    assert main([command, str(RUN / f"{INCOMPLETE}.tokens.jsonl"), "-o", str(alone), "--workers", "1"]) == 0
    assert main([command, str(RUN), "-o", str(whole), "--workers", "1"]) == 0
    if command == "export":
        (line,) = [ln for ln in whole.read_text().splitlines() if json.loads(ln)["rollout_id"] == INCOMPLETE]
        assert alone.read_text() == line + "\n"
        assert json.loads(line)["mask_reasons"][:1] == ["capture_incomplete"]
    else:
        row = pq.read_table(alone).to_pylist()
        rows = [r for r in pq.read_table(whole).to_pylist() if r["rollout_id"] == INCOMPLETE]
        assert row == rows and row[0]["reason_capture_incomplete"]


def test_inspect_of_a_records_file_shows_the_incomplete_capture(capsys) -> None:
    assert main(["inspect", str(RUN / f"{INCOMPLETE}.tokens.jsonl")]) == 0
    assert "capture_incomplete" in capsys.readouterr().out


def test_the_app_opens_a_records_file_with_its_siblings(tmp_path: Path) -> None:
    for name in os.listdir(RUN):
        if name.startswith(INCOMPLETE):
            shutil.copy(RUN / name, tmp_path / name)
    path = tmp_path / f"{INCOMPLETE}.tokens.jsonl"
    before = src.path_signature(path)
    source = src.source_from_path(path)
    loaded = src.load_source(source)
    assert loaded.ok and loaded.snapshots[0].incomplete
    (tmp_path / f"{INCOMPLETE}.tokens.incomplete").unlink()
    assert src.path_signature(path) != before  # a sibling changed: the app hashes the source again
    assert src.source_from_path(path).key != source.key
    assert not src.load_source(src.source_from_path(path)).snapshots[0].incomplete


def test_an_uploaded_records_file_is_masked_in_the_app() -> None:
    data = (RUN / f"{INCOMPLETE}.tokens.jsonl").read_bytes()
    loaded = src.load_source(src.source_from_bytes(f"{INCOMPLETE}.tokens.jsonl", data))
    assert loaded.ok and loaded.snapshots[0].incomplete
    assert "Give the store directory" in loaded.snapshots[0].source_notes[-1]


def test_the_rollout_page_says_why_an_uploaded_records_file_is_incomplete() -> None:
    data = (RUN / f"{REFUSED}.tokens.jsonl").read_bytes()
    (snap,) = load_snapshots(data, name=f"{REFUSED}.tokens.jsonl")
    (line,) = [ln for ln in reason_lines(RolloutView(snap)) if ln.code == "capture_incomplete"]
    (culprit,) = line.culprits
    assert "without the rollout's other store files" in culprit.text and "zip of it that holds those files" in culprit.text
    # Nothing says a call failed here: the banner's words and the reason's text must not claim it did.
    assert line.words == "a call may be missing from the capture"
    assert "or the store files that would say so are missing" in line.explanation


# --- a bad record in a lone store file is the error of a single file (docs/contract.md#input-errors) ---

BAD_FIELD = "field 'generation_log_probs'"


def bad_store(tmp_path: Path) -> tuple[Path, str]:
    """A copy of a store rollout (with a second, good rollout beside it) whose call-0002 has
    one log-probability too few."""
    rid = "task0003-rollout0-attempt0"
    store = tmp_path / "store"
    store.mkdir()
    for name in os.listdir(RUN):
        if name.startswith((rid, REFUSED)):
            shutil.copy(RUN / name, store / name)
    path = store / f"{rid}.tokens.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])
    assert record["model_call_id"] == "call-0002"
    record["generation_log_probs"] = record["generation_log_probs"][:-1]
    lines[1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    return path, rid


def test_load_snapshots_of_a_lone_records_file_with_a_bad_record_raises_naming_path_line_call_field(
        tmp_path: Path) -> None:
    path, _ = bad_store(tmp_path)
    with pytest.raises(LoadError) as caught:
        load_snapshots(path)
    message = str(caught.value)
    assert message.startswith(f"{path}, line 2: call 'call-0002': {BAD_FIELD}: ")
    assert "\n" not in message


def test_uploaded_bytes_of_a_store_file_with_a_bad_record_raise_naming_the_upload(tmp_path: Path) -> None:
    path, rid = bad_store(tmp_path)
    with pytest.raises(LoadError) as caught:
        load_snapshots(path.read_bytes(), name=f"uploads/{path.name}")
    assert str(caught.value).startswith(f"uploads/{path.name}, line 2: call 'call-0002': {BAD_FIELD}")


def test_a_bad_sibling_of_a_lone_records_file_raises_naming_the_sibling(tmp_path: Path) -> None:
    path, rid = bad_store(tmp_path)
    path.write_bytes((RUN / path.name).read_bytes())  # good records: the state file is what is bad
    (path.parent / f"{rid}.tokens.state.json").write_text('{"version": "two"}')
    with pytest.raises(LoadError) as caught:
        load_snapshots(path)
    assert str(caught.value).startswith(f"{path.parent / rid}.tokens.state.json: field 'version' must be an integer")


@pytest.mark.parametrize("command", ["build", "inspect"])
def test_build_and_inspect_of_a_lone_records_file_with_a_bad_record_exit_2_writing_nothing(
        command: str, tmp_path: Path, capsys) -> None:
    path, _ = bad_store(tmp_path)
    out = tmp_path / "out.json"
    argv = [command, str(path)] + (["-o", str(out)] if command == "build" else [])
    assert main(argv) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"tokencap: error: {path}, line 2: call 'call-0002': {BAD_FIELD}")
    assert captured.out == "" and not out.exists()


def test_the_directory_of_a_bad_records_file_still_builds_and_scans_its_other_rollouts(tmp_path: Path) -> None:
    path, rid = bad_store(tmp_path)
    snaps = {s.rollout_id: s for s in load_snapshots(path.parent)}
    assert f"line 2: call 'call-0002': {BAD_FIELD}" in snaps[rid].load_error
    assert snaps[REFUSED].load_error is None
    rows = {r["rollout_id"]: r for r in scan_table(path.parent, workers=1).to_pylist()}
    assert rows[rid]["reason_load_error"] and rows[REFUSED]["error"] is None
    assert main(["build", str(path.parent), "-o", str(tmp_path / "all.jsonl")]) == 0


def test_the_app_shows_the_error_of_a_lone_records_file_and_of_its_upload(tmp_path: Path) -> None:
    path, _ = bad_store(tmp_path)
    for source in (src.source_from_path(path), src.source_from_bytes(path.name, path.read_bytes())):
        loaded = src.load_source(source)
        assert not loaded.ok and not loaded.snapshots
        assert f"line 2: call 'call-0002': {BAD_FIELD}" in loaded.error


# --- a zip holding a rollout's records but none of its completeness files (decided: masked) ---


def records_only_store(tmp_path: Path) -> Path:
    """A store directory where one rollout has all its files and one has its records only."""
    store = tmp_path / "store"
    store.mkdir()
    for name in os.listdir(RUN):
        if name.startswith(REFUSED) or name == f"{INCOMPLETE}.tokens.jsonl":
            shutil.copy(RUN / name, store / name)
    return store


def test_a_records_only_rollout_is_complete_in_a_directory_and_masked_in_a_zip_of_it(tmp_path: Path) -> None:
    store = records_only_store(tmp_path)
    data = zip_bytes({name: (store / name).read_bytes() for name in os.listdir(store)})
    in_directory = {s.rollout_id: s for s in load_snapshots(store)}
    in_zip = {s.rollout_id: s for s in load_snapshots(data, name="store.zip")}
    assert not in_directory[INCOMPLETE].incomplete  # docs/contract.md#input-store: nothing in the directory says incomplete
    assert in_zip[INCOMPLETE].incomplete  # the zip may have left the files that say so behind
    (note,) = in_zip[INCOMPLETE].source_notes
    assert note.startswith(f"store.zip: {INCOMPLETE}.tokens.jsonl was read without the other capture-store files")
    assert "left out when zipping" in note and "in a directory read as complete" in note
    assert note.endswith("Open the store directory, or zip it with those files")
    # A rollout zipped with its files is read as in the directory.
    zipped, listed = in_zip[REFUSED], in_directory[REFUSED]
    assert (zipped.incomplete, zipped.source_notes) == (listed.incomplete, listed.source_notes)
    assert json.dumps(build_rollout(zipped).summary()) == json.dumps(build_rollout(listed).summary())


def test_every_command_says_why_a_zipped_records_file_is_masked(tmp_path: Path, capsys) -> None:
    store = records_only_store(tmp_path)
    (store / f"{REFUSED}.tokens.jsonl").unlink()
    for name in os.listdir(store):
        if name.startswith(REFUSED):
            (store / name).unlink()
    archive = tmp_path / "one.zip"
    archive.write_bytes(zip_bytes({f"run/{INCOMPLETE}.tokens.jsonl": (store / f"{INCOMPLETE}.tokens.jsonl").read_bytes()}))
    assert main(["build", str(archive), "-o", str(tmp_path / "b.json")]) == 0
    assert json.loads((tmp_path / "b.json").read_text())["mask_reasons"][:1] == ["capture_incomplete"]
    err = capsys.readouterr().err
    assert f"tokencap: note: {archive}: {INCOMPLETE}.tokens.jsonl was read without" in err
    assert main(["inspect", str(archive)]) == 0
    out = capsys.readouterr().out
    assert "store files that would say so are missing" in out and "left out when zipping" in out
    assert main(["scan", str(archive), "-o", str(tmp_path / "s.parquet"), "--workers", "1"]) == 0
    (row,) = pq.read_table(tmp_path / "s.parquet").to_pylist()
    assert row["reason_capture_incomplete"] and "left out when zipping" in row["source_notes"][-1]
    loaded = src.load_source(src.source_from_bytes("one.zip", archive.read_bytes()))
    assert loaded.snapshots[0].incomplete and "left out when zipping" in loaded.snapshots[0].source_notes[-1]
    assert main(["build", str(store)]) == 0
    assert "note:" not in capsys.readouterr().err  # the directory: nothing left behind, nothing to say


def test_inspect_lists_the_source_notes_of_each_rollout(capsys) -> None:
    assert main(["inspect", str(UPSTREAM), "--rollout", "task4-rollout1-attempt0"]) == 0
    out = capsys.readouterr().out
    source = out.split("\nsource\n", 1)[1].split("\ncalls ", 1)[0].splitlines()
    assert any("torn" in line for line in source) and any("dangling intent" in line for line in source)


def test_the_app_rehashes_a_linked_records_file_when_its_targets_siblings_change(tmp_path: Path) -> None:
    """A link to a records file loads the target's store: its signature and key follow the target's
    siblings (an intent with no record appended there), so the page never keeps a stale build."""
    store, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    store.mkdir()
    elsewhere.mkdir()
    for name in os.listdir(RUN):
        if name.startswith(COMPLETE):
            shutil.copy(RUN / name, store / name)
    link = elsewhere / f"{COMPLETE}.tokens.jsonl"
    link.symlink_to(store / f"{COMPLETE}.tokens.jsonl")
    before, source = src.path_signature(link), src.source_from_path(link)
    assert not src.load_source(source).snapshots[0].incomplete
    with open(store / f"{COMPLETE}.tokens.intents", "a") as handle:
        handle.write("call-9999\n")
    assert src.path_signature(link) != before
    again = src.source_from_path(link)
    assert again.key != source.key
    assert src.load_source(again).snapshots[0].incomplete
