"""Scanning rollouts read from output items (docs/contract.md#scan-token-source, #token-rollouts): one row per record on every engine,
``tokens_from`` and ``contiguous``, the record's own facts, the directory rule in discovery,
and the refusals (--final-responses beside such a source, a records file without token ids)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import Conv, jsonl_bytes
from rollouts_data import jsonl, rollout_record, turns_of

from tokencap.cli import main
from tokencap.run import scan_table
from tokencap.run.discover import discover
from tokencap.run.errors import DiscoveryError
from tokencap.run.scanning import read_scan, scan
from tokencap.run.table import TOKENS_COLUMNS


def records() -> list[dict]:
    """Four rollouts: contiguous, cut at its third call, agent-masked with a reward, and a
    record with no token-bearing item."""
    empty = rollout_record(turns_of(1), rollout_id="d-empty")
    empty["response"]["output"][0]["generation_token_ids"] = []
    return [rollout_record(turns_of(3), rollout_id="b-cut", cuts=[2]),
            rollout_record(turns_of(3), rollout_id="a-good", reward=1.0, _ng_task_index=3, _ng_rollout_index=1),
            rollout_record(turns_of(2), rollout_id="c-agent", mask_sample=True, reward=0.0),
            empty]


def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "sub").mkdir(parents=True)
    (run / "sub" / "rollouts.jsonl").write_bytes(jsonl(records()))
    return run


def by_id(table) -> dict[str, dict]:
    return {row["rollout_id"]: row for row in table.to_pylist()}


def test_a_rollouts_file_scans_to_one_row_per_record_with_its_own_facts(tmp_path: Path) -> None:
    table = scan_table(run_dir(tmp_path), workers=1)
    assert table.column("rollout_id").to_pylist() == ["a-good", "b-cut", "c-agent", "d-empty"]  # sorted
    rows = by_id(table)
    assert {r["source"] for r in rows.values()} == {"sub/rollouts.jsonl"}
    assert {r["tokens_from"] for r in rows.values()} == {"output_items"}
    good, cut, agent, empty = rows["a-good"], rows["b-cut"], rows["c-agent"], rows["d-empty"]
    assert (good["mask_sample"], good["contiguous"], good["reward"], good["task_index"], good["rollout_index"]) == (
        False, True, 1.0, 3, 1)
    assert good["terminal_attribution"] == "attributed" and good["terminal_call_id"] == "item-0004"
    assert good["snapshot_id"] == "resp_1"
    assert (cut["mask_sample"], cut["contiguous"], cut["reason_unresolved_parent_calls"]) == (True, False, True)
    assert (agent["delivered_mask_sample"], agent["delivered_by"], agent["reward"]) == (True, "agent", 0.0)
    assert empty["reason_load_error"] and empty["contiguous"] is None and empty["tokens_from"] == "output_items"
    assert "no output item carries generation_token_ids" in empty["error"]


def test_a_capture_row_says_capture_and_no_contiguity(tmp_path: Path) -> None:
    conv = Conv("cap")
    conv.root("c1")
    conv.child("c2", "c1")
    (tmp_path / "cap.tokens.jsonl").write_bytes(jsonl_bytes(conv.records))
    (row,) = scan_table(tmp_path, workers=1).to_pylist()
    assert (row["tokens_from"], row["contiguous"]) == ("capture", None)


def test_a_single_rollouts_file_given_as_the_run(tmp_path: Path) -> None:
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(jsonl(records()[:2]))
    units = discover(path)
    assert [(u.kind, u.rollout_id) for u in units] == [("rollouts", "a-good"), ("rollouts", "b-cut")]
    assert set(by_id(scan_table(path, workers=2))) == {"a-good", "b-cut"}


def test_repeated_rollout_ids_keep_their_note_in_the_table(tmp_path: Path) -> None:
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(jsonl([rollout_record(turns_of(1), rollout_id="same") for _ in range(2)]))
    rows = by_id(scan_table(path, workers=1))
    assert set(rows) == {"same", "same#2"}
    assert any("already read from line 1" in n for n in rows["same#2"]["source_notes"])


def test_discovery_leaves_rollouts_files_beside_captures_out_with_a_note(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    conv = Conv("cap")
    conv.root("c1")
    (run / "sub" / "cap.tokens.jsonl").write_bytes(jsonl_bytes(conv.records))
    out = tmp_path / "t.parquet"
    summary = scan(run, out, workers=1)
    assert read_scan(out).column("rollout_id").to_pylist() == ["cap"]
    (note,) = [n for n in summary.notes if "rollouts.jsonl" in n]
    assert note.startswith("sub: not loaded, as the directory also holds captures") and "--final-responses" in note


def test_final_responses_beside_a_rollouts_source_is_refused(tmp_path: Path, capsys) -> None:
    run = run_dir(tmp_path)
    given = run / "sub" / "rollouts.jsonl"
    with pytest.raises(DiscoveryError, match="--final-responses given with a source of rollout records"):
        scan_table(run, workers=1, final_responses=str(given))
    out = tmp_path / "t.parquet"
    assert main(["scan", str(run), "-o", str(out), "--final-responses", str(given), "--workers", "1"]) == 2
    assert "is its own records" in capsys.readouterr().err and not out.exists()
    assert main(["build", str(given), "--final-responses", str(given)]) == 2
    assert "drop --final-responses" in capsys.readouterr().err


def test_a_records_file_without_token_ids_given_as_the_run_is_refused(tmp_path: Path) -> None:
    record = rollout_record(turns_of(1))
    del record["response"]["output"][0]["generation_token_ids"]
    path = tmp_path / "records.json"
    path.write_text(json.dumps(record, indent=2))
    with pytest.raises(DiscoveryError, match="holds rollouts without token ids.*--final-responses"):
        discover(path)


def test_a_table_written_before_the_tokens_columns_opens_with_them_null(tmp_path: Path) -> None:
    out = tmp_path / "new.parquet"
    scan(run_dir(tmp_path), out, workers=1)
    old = tmp_path / "old.parquet"
    pq.write_table(pq.read_table(out).drop_columns(list(TOKENS_COLUMNS)), old)
    table = read_scan(old)
    assert table.column("tokens_from").null_count == table.column("contiguous").null_count == table.num_rows
    assert table.drop_columns(list(TOKENS_COLUMNS)).equals(read_scan(out).drop_columns(list(TOKENS_COLUMNS)))


def test_export_of_a_rollouts_file_writes_what_build_writes(tmp_path: Path, capsys) -> None:
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(jsonl(records()[:2]))
    out = tmp_path / "export.jsonl"
    assert main(["export", str(path), "-o", str(out), "--workers", "1"]) == 0
    capsys.readouterr()
    assert main(["build", str(path)]) == 0
    built = sorted(capsys.readouterr().out.splitlines())
    assert sorted(out.read_text().splitlines()) == built




def test_every_engine_gives_the_same_rows(tmp_path: Path, local_ray) -> None:
    run = run_dir(tmp_path)
    one = scan_table(run, workers=1)
    assert scan_table(run, workers=2).equals(one)
    assert scan_table(run, workers=2, engine="ray").equals(one)
    assert one.column("contiguous").to_pylist() == [True, False, True, None]


def test_diff_carries_contiguity_through(tmp_path: Path) -> None:
    from tokencap.run.diff import diff_tables

    before = scan_table(run_dir(tmp_path), workers=1)
    fixed = records()
    fixed[0] = rollout_record(turns_of(3), rollout_id="b-cut")  # the cut repaired
    after_dir = tmp_path / "after"
    after_dir.mkdir()
    (after_dir / "rollouts.jsonl").write_bytes(jsonl(fixed))
    rows = {r["rollout_id_a"]: r for r in diff_tables(before, scan_table(after_dir, workers=1)).arrow.to_pylist()}
    assert (rows["b-cut"]["contiguous_a"], rows["b-cut"]["contiguous_b"], rows["b-cut"]["change"]) == (
        False, True, "fixed")
    assert rows["d-empty"]["contiguous_a"] is None
    old = before.drop_columns(list(TOKENS_COLUMNS))  # a table without the token-source columns of docs/contract.md#scan-token-source
    assert diff_tables(old, before).arrow.column("contiguous_a").null_count == before.num_rows


def test_an_upload_read_as_a_run_has_the_rows_a_scan_writes(tmp_path: Path) -> None:
    from tokencap import load_snapshots
    from tokencap.run.scanning import table_of_snapshots

    run = run_dir(tmp_path)
    path = run / "sub" / "rollouts.jsonl"
    scanned = scan_table(path, workers=1)
    uploaded = table_of_snapshots(load_snapshots(path.read_bytes(), name="rollouts.jsonl"), "rollouts.jsonl",
                                  source_bytes=path.stat().st_size)
    notes = ["source_notes", "source_mtime"]  # a note names the file as given; an upload has no mtime
    assert uploaded.drop_columns(notes).equals(scanned.drop_columns(notes))
    assert uploaded.column("reward").to_pylist() == [1.0, None, 0.0, None]
