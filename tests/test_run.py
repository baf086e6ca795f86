"""docs/contract.md#scan-table: scanning and exporting a whole run (`tokencap.run`, `tokencap scan|export`)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import jsonl_bytes, linear_chain, snapshot_dict
from sigint import default_sigint, sigint_handler

from tokencap import build_rollout, load_snapshots
from tokencap.cli import main
from tokencap.export import results_bytes
from tokencap.interrupts import Terminated
from tokencap.run import COLUMNS, discover, export, read_scan, scan, scan_table
from tokencap.run.engines import run_local
from tokencap.run.table import DIAGNOSIS_COLUMNS, SCHEMA, TOKENS_COLUMNS

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"

# The column list of docs/contract.md#scan-table, written out here independently of the package's declaration.
SPEC_COLUMNS = [
    ("rollout_id", "string"), ("source", "string"), ("snapshot_id", "string"), ("mask_sample", "bool"),
    ("mask_reasons", "list<item: string>"),
    ("reason_load_error", "bool"), ("reason_capture_incomplete", "bool"), ("reason_no_records", "bool"),
    ("reason_build_error", "bool"), ("reason_unresolved_retries", "bool"),
    ("reason_unresolved_parent_calls", "bool"), ("reason_multiple_roots", "bool"),
    ("reason_multiple_chains", "bool"), ("reason_no_generated_tokens", "bool"),
    ("reason_terminal_call_not_delivered", "bool"),
    ("status", "string"), ("incomplete_reason", "string"), ("n_calls", "int64"), ("chains", "int64"),
    ("roots", "int64"), ("quarantined_calls", "int64"), ("quarantined_fraction", "double"),
    ("delivered_fraction", "double"), ("generated_tokens_captured", "int64"), ("generated_tokens_delivered", "int64"),
    ("link_parent_unresolved", "int64"), ("link_parent_digest_mismatch", "int64"),
    ("link_parent_call_id_missing_recovered", "int64"), ("link_parent_call_id_missing", "int64"),
    ("link_missing_resolution", "int64"), ("link_duplicate_call_id_conflict", "int64"),
    ("link_delta_chain_unreconstructable", "int64"), ("link_entry_digest_mismatch", "int64"),
    ("unresolved_parent_calls", "int64"), ("empty_generation_calls", "int64"), ("after_terminal_calls", "int64"),
    ("engine_refusals", "int64"), ("context_refusals", "int64"), ("refusal_ended_chain", "bool"),
    ("capture_incomplete", "bool"), ("terminal_call_id", "string"), ("terminal_attribution", "string"),
    ("error", "string"), ("source_notes", "list<item: string>"), ("source_bytes", "int64"),
    ("source_mtime", "double"), ("reward", "double"), ("task_index", "int64"), ("rollout_index", "int64"),
    ("breaks", "int64"), ("break_causes", "list<item: string>"), ("first_break_call", "string"),
    ("delivered_mask_sample", "bool"), ("delivered_by", "string"), ("tokens_from", "string"), ("contiguous", "bool"),
]


def rows(table: pa.Table) -> list[dict]:
    return table.to_pylist()


def copy_samples(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(SAMPLES, run, ignore=shutil.ignore_patterns("expected.json", "README.md", "run",
                                                               "final_responses", "run_after_fix",
                                                               "rollout_records", "tokenizer.json", "rollouts", "qwen3"))
    return run


# =========================================================================== table


def test_columns_are_spec_11_in_order_with_their_types():
    assert [(f.name, str(f.type)) for f in SCHEMA] == SPEC_COLUMNS
    assert list(COLUMNS) == [name for name, _ in SPEC_COLUMNS]


def test_written_parquet_has_every_column_in_order(tmp_path):
    out = tmp_path / "r.parquet"
    scan(SAMPLES / "capture_store", out, workers=1)
    table = pq.read_table(out)
    # parquet names a list's item "element"; the types are otherwise exactly those of docs/contract.md#scan-table
    assert [(f.name, str(f.type).replace("element:", "item:")) for f in table.schema] == SPEC_COLUMNS
    assert read_scan(out).num_rows == 2


def test_every_row_agrees_with_build_rollout_of_that_rollout(tmp_path):
    run = copy_samples(tmp_path)
    table = rows(scan_table(run, workers=1))
    assert [(r["source"], r["rollout_id"]) for r in table] == sorted((r["source"], r["rollout_id"]) for r in table)
    by_id = {r["rollout_id"]: r for r in table}
    checked = 0
    for path in sorted(run.iterdir()):
        if path.suffix not in (".json", ".jsonl"):
            continue
        for snapshot in load_snapshots(path):
            result = build_rollout(snapshot)
            row = by_id[snapshot.rollout_id]
            assert row["source"] == path.name
            assert row["mask_sample"] == result.mask_sample
            assert row["mask_reasons"] == result.mask_reasons
            for reason in ("unresolved_retries", "multiple_chains", "capture_incomplete", "load_error"):
                assert row[f"reason_{reason}"] == (reason in result.mask_reasons)
            m = result.metrics
            for key in ("status", "incomplete_reason", "n_calls", "chains", "roots", "quarantined_calls",
                        "quarantined_fraction", "delivered_fraction", "generated_tokens_captured",
                        "generated_tokens_delivered", "unresolved_parent_calls", "empty_generation_calls",
                        "after_terminal_calls", "engine_refusals", "error"):
                assert row[key] == m[key], (snapshot.rollout_id, key)
            for note, count in m["parent_link_failures"].items():
                assert row[f"link_{note}"] == count
            assert sum(v for k, v in row.items() if k.startswith("link_")) == sum(m["parent_link_failures"].values())
            assert row["refusal_ended_chain"] == any(v.ended_chain for v in result.refusal_verdicts)
            assert row["source_bytes"] == path.stat().st_size
            assert row["source_mtime"] == path.stat().st_mtime
            checked += 1
    assert checked >= 20


def test_refusal_columns(tmp_path):
    table = {r["rollout_id"]: r for r in rows(scan_table(SAMPLES / "multi_rollout_entries.jsonl", workers=1))}
    ended = table["jsonl-refusal-ended"]
    assert (ended["engine_refusals"], ended["context_refusals"], ended["refusal_ended_chain"]) == (1, 1, True)
    param = table["jsonl-parameter-refusal"]
    assert (param["engine_refusals"], param["context_refusals"], param["refusal_ended_chain"]) == (1, 0, False)
    assert table["jsonl-clean"]["engine_refusals"] == 0


def test_store_rows_name_their_prefix_and_carry_notes_and_sizes():
    table = {r["rollout_id"]: r for r in rows(scan_table(SAMPLES / "capture_store", workers=1))}
    interrupted = table["store-interrupted"]
    assert interrupted["source"] == "store-interrupted.tokens.*"
    assert interrupted["reason_capture_incomplete"] and interrupted["capture_incomplete"]
    assert any("torn" in n for n in interrupted["source_notes"])
    files = list((SAMPLES / "capture_store").glob("store-interrupted.tokens.*"))
    assert interrupted["source_bytes"] == sum(f.stat().st_size for f in files)
    assert interrupted["source_mtime"] == max(f.stat().st_mtime for f in files)


# =========================================================================== discovery and bad input


def test_a_directory_tree_is_scanned_recursively_in_a_fixed_order(tmp_path):
    run = tmp_path / "run"
    (run / "b").mkdir(parents=True)
    (run / "a" / "deep").mkdir(parents=True)
    shutil.copy(SAMPLES / "length_stop.json", run / "b" / "x.json")
    shutil.copy(SAMPLES / "clean_multiturn_tools.json", run / "a" / "deep" / "y.json")
    for name in os.listdir(SAMPLES / "capture_store"):
        shutil.copy(SAMPLES / "capture_store" / name, run / "a" / name)
    table = rows(scan_table(run, workers=1))
    assert [r["source"] for r in table] == [
        "a/deep/y.json", "a/store-complete.tokens.*", "a/store-interrupted.tokens.*", "b/x.json"]


def test_bad_rollouts_are_rows_with_their_error_and_the_scan_goes_on(tmp_path):
    run = copy_samples(tmp_path)
    before = scan_table(run, workers=1).num_rows
    (run / "garbage.json").write_bytes(b"{not json")
    store_file = run / "capture_store" / "store-complete.tokens.jsonl"
    lines = store_file.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[1])
    record["generation_log_probs"] = ["high"]
    lines[1] = json.dumps(record).encode() + b"\n"
    store_file.write_bytes(b"".join(lines))
    table = {r["rollout_id"]: r for r in rows(scan_table(run, workers=2))}
    for rid in ("garbage", "store-complete"):
        row = table[rid]
        assert row["mask_sample"] and row["reason_load_error"] and row["error"], rid
        assert row["n_calls"] == 0 and row["status"] is None
    assert "line 2" in table["store-complete"]["error"]
    assert "garbage.json" in table["garbage"]["error"]
    assert table["clean-multiturn-tools"]["mask_sample"] is False
    assert len(table) == before + 1  # every rollout is still a row, plus the garbage file


def many_rollouts_jsonl(path: Path, n: int) -> list[str]:
    records = []
    ids = [f"task{i:03d}-rollout0" for i in range(n)]
    convs = [linear_chain(2 + i % 3, rollout_id=rid) for i, rid in enumerate(ids)]
    # interleave the rollouts' lines, as a shared log would
    longest = max(len(c.records) for c in convs)
    for k in range(longest):
        for conv in convs:
            if k < len(conv.records):
                records.append(conv.records[k])
    path.write_bytes(jsonl_bytes(records))
    return ids


def test_one_jsonl_of_many_rollouts_is_indexed_per_rollout(tmp_path):
    source = tmp_path / "run.jsonl"
    ids = many_rollouts_jsonl(source, 25)
    units = discover(source)
    assert [u.rollout_id for u in units] == sorted(ids)
    assert all(u.kind == "jsonl" for u in units)
    table = rows(scan_table(source, workers=2))
    assert [r["rollout_id"] for r in table] == sorted(ids)
    expected = {s.rollout_id: build_rollout(s) for s in load_snapshots(source)}
    for row in table:
        assert row["mask_reasons"] == expected[row["rollout_id"]].mask_reasons
        assert row["n_calls"] == expected[row["rollout_id"]].metrics["n_calls"]


def test_a_bad_record_in_a_big_jsonl_fails_its_rollout_and_names_the_real_line(tmp_path):
    source = tmp_path / "run.jsonl"
    many_rollouts_jsonl(source, 6)
    lines = source.read_bytes().splitlines(keepends=True)
    bad = json.loads(lines[8])
    bad["parent_resolution"] = "sideways"
    lines[8] = json.dumps(bad).encode() + b"\n"
    source.write_bytes(b"".join(lines))
    table = {r["rollout_id"]: r for r in rows(scan_table(source, workers=1))}
    broken = table[bad["rollout_id"]]
    assert broken["reason_load_error"] and "line 9" in broken["error"], broken["error"]
    assert sum(r["reason_load_error"] for r in table.values()) == 1


def test_a_line_no_rollout_can_own_fails_the_whole_file(tmp_path):
    # Nobody can tell which rollout lost that record, so none of the file's rollouts is trusted.
    source = tmp_path / "run.jsonl"
    many_rollouts_jsonl(source, 4)
    source.write_bytes(source.read_bytes() + b'{"model_call_id": "call-9"}\n')
    table = rows(scan_table(source, workers=1))
    assert len(table) == 1
    assert table[0]["rollout_id"] == "run" and table[0]["reason_load_error"]
    assert "rollout_id" in table[0]["error"] and "line" in table[0]["error"]


def test_blank_lines_and_a_missing_final_newline_are_fine(tmp_path):
    source = tmp_path / "run.jsonl"
    many_rollouts_jsonl(source, 3)
    text = source.read_bytes().replace(b"\n", b"\n\n  \n").rstrip(b"\n")
    source.write_bytes(text)
    table = rows(scan_table(source, workers=1))
    assert len(table) == 3 and not any(r["reason_load_error"] for r in table)


def test_a_missing_source_is_a_one_line_error(capsys, tmp_path):
    code = main(["scan", str(tmp_path / "nope"), "-o", str(tmp_path / "r.parquet")])
    assert code == 2
    assert "no such file" in capsys.readouterr().err
    assert not (tmp_path / "r.parquet").exists()


def test_an_empty_directory_is_refused_by_scan_and_export_as_by_build(capsys, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["build", str(empty)]) == 2
    refused = capsys.readouterr().err
    assert refused.startswith("tokencap: error: ")
    for command in ("scan", "export"):
        out = tmp_path / f"out.{command}"
        assert main([command, str(empty), "-o", str(out), "--workers", "1"]) == 2
        assert capsys.readouterr().err == refused, command
        assert not out.exists()


def test_a_run_of_only_entries_that_are_never_read_is_refused_naming_them(capsys, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "elsewhere.json").symlink_to(SAMPLES / "length_stop.json")
    out = tmp_path / "r.parquet"
    assert main(["scan", str(run), "-o", str(out), "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tokencap: error: {run}: no rollout to scan; skipped 1 entry") and err.count("\n") == 1
    assert "elsewhere.json" in err and not out.exists()


def test_an_empty_directory_with_since_is_an_empty_table(capsys, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "a.json").write_text(json.dumps(snapshot_dict(linear_chain(2, rollout_id="a").records)))
    first = tmp_path / "first.parquet"
    assert main(["scan", str(run), "-o", str(first), "--workers", "1"]) == 0
    (run / "a.json").unlink()  # every file of the run went away since the first scan
    again = tmp_path / "again.parquet"
    assert main(["scan", str(run), "-o", str(again), "--since", str(first), "--workers", "1"]) == 0
    assert read_scan(again).num_rows == 0


# =========================================================================== engines


def test_every_worker_count_gives_the_same_table(tmp_path):
    run = copy_samples(tmp_path)
    one = scan_table(run, workers=1)
    assert scan_table(run, workers=2).equals(one)
    assert scan_table(run, workers=3).equals(one)


def test_local_engine_keeps_shard_order():
    assert list(run_local(_slow_identity, [3, 1, 2, 0], (), 2)) == [3, 1, 2, 0]


def test_local_workers_never_re_run_a_page_script_that_stands_as_main(tmp_path, monkeypatch):
    # Inside Streamlit (and after an AppTest in this process) __main__ is the page script;
    # multiprocessing would re-run it in every worker it starts, where it raises.
    import types

    page = tmp_path / "page.py"
    page.write_text("raise RuntimeError('a page script ran in a scan worker')\n")
    main = types.ModuleType("__main__")
    main.__file__ = str(page)
    main.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert list(run_local(_slow_identity, [1, 0, 2], (), 2)) == [1, 0, 2]
    assert sys.modules["__main__"] is main


def _slow_identity(x: int) -> int:
    time.sleep(0.05 * x)
    return x


SAMPLE_RUN = SAMPLES / "run"


def test_the_sample_run_scans_to_its_declared_verdicts():
    declared = json.loads((SAMPLE_RUN / "expected.json.txt").read_text())
    table = rows(scan_table(SAMPLE_RUN, workers=2))
    assert len(table) == declared["summary"]["rollouts"]
    assert sum(not r["mask_sample"] for r in table) == declared["summary"]["trainable"]
    for reason, count in declared["summary"]["mask_reasons"].items():
        assert sum(r[f"reason_{reason}"] for r in table) == count, reason
    for row in table:
        want = declared["rollouts"][row["rollout_id"]]
        assert row["source"] == f"{row['rollout_id']}.tokens.*"
        assert (row["mask_sample"], row["mask_reasons"], row["status"], row["incomplete_reason"]) == (
            want["mask_sample"], want["mask_reasons"], want["status"], want["incomplete_reason"]), row["rollout_id"]


def test_ray_engine_on_two_cpus_gives_the_same_table_as_local_on_the_sample_run(local_ray):
    local = scan_table(SAMPLE_RUN, workers=1)
    assert scan_table(SAMPLE_RUN, workers=2).equals(local)
    on_ray = scan_table(SAMPLE_RUN, workers=2, engine="ray")
    assert on_ray.equals(local)
    assert local_ray.is_initialized()  # a Ray the scan joined is left running


def test_ray_engine_fills_the_record_columns_as_local_does(local_ray):
    local = scan_table(SAMPLE_RUN, workers=1, final_responses=str(SAMPLE_RECORDS))
    on_ray = scan_table(SAMPLE_RUN, workers=2, engine="ray", final_responses=str(SAMPLE_RECORDS))
    assert on_ray.equals(local)
    assert on_ray.column("reward").null_count < on_ray.num_rows


# =========================================================================== facts of rollout records (docs/contract.md#scan-rollout-records)

SAMPLE_RECORDS = SAMPLES / "rollout_records" / "run.jsonl"


def _records_by_id(path: Path) -> dict[str, dict]:
    return {r["rollout_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_record_facts_fill_the_same_columns_on_every_worker_count():
    one = scan_table(SAMPLE_RUN, workers=1, final_responses=str(SAMPLE_RECORDS))
    assert scan_table(SAMPLE_RUN, workers=2, final_responses=str(SAMPLE_RECORDS)).equals(one)
    assert scan_table(SAMPLE_RUN, workers=3, final_responses=str(SAMPLE_RECORDS)).equals(one)
    records = _records_by_id(SAMPLE_RECORDS)
    table = rows(one)
    for row in table:
        record = records.get(row["rollout_id"])
        want = (None, None, None) if record is None else (
            record["reward"], record["_ng_task_index"], record["_ng_rollout_index"])
        assert (row["reward"], row["task_index"], row["rollout_index"]) == want, row["rollout_id"]
    assert sum(r["reward"] is not None for r in table) == len(records)
    assert sum(r["reward"] is None for r in table) > 0  # a re-run attempt's first try has no record of its own


def test_record_columns_are_null_without_rollout_records():
    table = scan_table(SAMPLES / "capture_store", workers=1)
    assert [table.column(c).null_count for c in ("reward", "task_index", "rollout_index")] == [2, 2, 2]


def test_a_task_id_name_is_a_source_note_of_its_row(tmp_path):
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"rollout_id": "store-complete", "task_id": "swe-42", "reward": 0.5,
                                   "response": {"object": "response", "output": [
                                       {"type": "message", "role": "assistant",
                                        "content": [{"type": "output_text", "text": "x"}]}]}}) + "\n")
    row = next(r for r in rows(scan_table(SAMPLES / "capture_store", workers=1, final_responses=str(records)))
               if r["rollout_id"] == "store-complete")
    assert row["reward"] == 0.5 and row["task_index"] is None
    assert any("'swe-42'" in note and "not an index" in note for note in row["source_notes"])


def test_since_is_not_reused_when_a_reward_changed(tmp_path):
    records = tmp_path / "records.jsonl"
    shutil.copy(SAMPLE_RECORDS, records)
    first = tmp_path / "first.parquet"
    scan(SAMPLE_RUN, first, workers=1, final_responses=str(records))
    same = scan(SAMPLE_RUN, tmp_path / "same.parquet", workers=1, final_responses=str(records), since=str(first))
    assert same.reused == read_scan(first).num_rows  # nothing changed: every row reused
    lines = records.read_text().splitlines()
    changed = json.loads(lines[0])
    changed["reward"] = 1.0 - changed["reward"]  # only a reward: no capture file changed
    records.write_text("\n".join([json.dumps(changed), *lines[1:]]) + "\n")
    again = tmp_path / "again.parquet"
    summary = scan(SAMPLE_RUN, again, workers=1, final_responses=str(records), since=str(first))
    assert summary.reused == 0 and summary.notes == [
        f"{first} is not reused (it was scanned with another --final-responses file (its bytes differ)); every "
        "rollout was built again"]
    row = next(r for r in rows(read_scan(again)) if r["rollout_id"] == changed["rollout_id"])
    assert row["reward"] == changed["reward"]


def _old_schema(table: pa.Table, path: Path) -> Path:
    """``table`` written without the record columns of docs/contract.md#scan-rollout-records."""
    old = table.drop_columns(["reward", "task_index", "rollout_index", *DIAGNOSIS_COLUMNS, *TOKENS_COLUMNS])
    pq.write_table(old, path)
    return path


def test_a_table_written_before_the_record_columns_still_opens_with_them_null(tmp_path):
    out = tmp_path / "new.parquet"
    scan(SAMPLES / "capture_store", out, workers=1)
    old = _old_schema(pq.read_table(out), tmp_path / "old.parquet")
    assert "reward" not in pq.read_table(old).column_names
    table = read_scan(old)
    assert table.schema.names == list(COLUMNS)
    assert table.column("reward").null_count == table.num_rows == 2
    later = ["reward", "task_index", "rollout_index", *DIAGNOSIS_COLUMNS, *TOKENS_COLUMNS]
    assert table.drop_columns(later).equals(read_scan(out).drop_columns(later))
    assert read_scan(old.read_bytes(), name="old.parquet").equals(table)  # an upload in the app
    from tokencap.views.run.frame import run_frame

    assert len(run_frame(table)) == 2


def test_since_with_a_table_from_before_the_record_columns_builds_again(tmp_path):
    # The same records and the same version as now, but written before the reward columns:
    # reusing its rows would leave the rewards out.
    out = tmp_path / "new.parquet"
    scan(SAMPLE_RUN, out, workers=1, final_responses=str(SAMPLE_RECORDS))
    old = _old_schema(pq.read_table(out), tmp_path / "old.parquet")
    assert pq.read_table(old).schema.metadata == pq.read_table(out).schema.metadata
    again = tmp_path / "again.parquet"
    summary = scan(SAMPLE_RUN, again, workers=1, final_responses=str(SAMPLE_RECORDS), since=str(old))
    assert summary.reused == 0 and any("before the reward" in n for n in summary.notes)
    assert read_scan(again).column("reward").null_count < summary.rollouts


def test_ray_export_equals_local_export(local_ray, tmp_path):
    export(SAMPLE_RUN, tmp_path / "local.jsonl", workers=1)
    export(SAMPLE_RUN, tmp_path / "ray.jsonl", workers=2, engine="ray")
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()


def test_the_cli_starts_a_local_ray_for_the_scan(tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "r.parquet"
    proc = subprocess.run([sys.executable, "-m", "tokencap", "scan", str(SAMPLES / "capture_store"), "-o", str(out),
                           "--engine", "ray", "--workers", "2"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert read_scan(out).equals(scan_table(SAMPLES / "capture_store", workers=1))


def test_ray_engine_without_ray_exits_2_saying_how_to_install(capsys, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    out = tmp_path / "r.parquet"
    code = main(["scan", str(SAMPLES / "capture_store"), "-o", str(out), "--engine", "ray"])
    err = capsys.readouterr().err
    assert code == 2
    assert '.[ray]' in err and "--engine local" in err
    assert not out.exists()


# =========================================================================== interrupts and atomicity


def test_an_interrupted_scan_leaves_no_result(tmp_path):
    out = tmp_path / "r.parquet"

    def interrupt(done, total):
        if done:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        scan(copy_samples(tmp_path), out, workers=2, progress=interrupt)
    assert os.listdir(tmp_path) == ["run"]


def test_ctrl_c_on_the_command_line_exits_130_and_writes_nothing(tmp_path):
    run = tmp_path / "run.jsonl"
    many_rollouts_jsonl(run, 400)
    out = tmp_path / "r.parquet"
    proc = subprocess.Popen([sys.executable, "-m", "tokencap", "scan", str(run), "-o", str(out), "--workers", "2"],
                            stderr=subprocess.PIPE, cwd=tmp_path, preexec_fn=default_sigint)
    # wait until the scan is under way (the progress line shows the total), then interrupt it
    deadline = time.monotonic() + 60
    seen = b""
    while b"/400" not in seen and time.monotonic() < deadline:
        seen += proc.stderr.read1(4096) if hasattr(proc.stderr, "read1") else proc.stderr.read(1)
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the scan finished before the interrupt arrived")
    assert proc.returncode == 130
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["run.jsonl"]
    last = (seen + rest).decode().strip().splitlines()[-1]
    assert last.startswith("scan:") and "/400" in last
    assert last.endswith("interrupted; nothing written"), last


# =========================================================================== --since


def test_since_reuses_unchanged_rollouts_and_equals_a_full_scan(tmp_path):
    run = copy_samples(tmp_path)
    first = tmp_path / "first.parquet"
    scan(run, first, workers=1)
    # a new rollout, a changed rollout, and a changed store rollout
    shutil.copy(SAMPLES / "length_stop.json", run / "zz_new.json")
    changed = run / "subagent_branch.json"
    changed.write_text(json.dumps(snapshot_dict(linear_chain(3, rollout_id="subagent-branch").records)))
    store = run / "capture_store" / "store-interrupted.tokens.incomplete"
    store.write_text("")
    (run / "length_stop.json").unlink()
    again = tmp_path / "again.parquet"
    summary = scan(run, again, workers=2, since=str(first))
    full = tmp_path / "full.parquet"
    scan(run, full, workers=1)
    assert read_scan(again).equals(read_scan(full))
    assert pq.read_table(again).schema.metadata == pq.read_table(full).schema.metadata
    assert summary.reused == read_scan(full).num_rows - 3  # new, changed snapshot, changed store prefix
    by_id = {r["rollout_id"]: r for r in rows(read_scan(again))}
    assert by_id["subagent-branch"]["mask_sample"] is False
    assert by_id["store-interrupted"]["source_bytes"] > 0


def test_since_with_another_table_is_an_error(tmp_path, capsys):
    bogus = tmp_path / "bogus.parquet"
    pq.write_table(pa.table({"x": [1]}), bogus)
    code = main(["scan", str(SAMPLES / "capture_store"), "-o", str(tmp_path / "r.parquet"), "--since", str(bogus)])
    assert code == 2
    assert "not a tokencap scan table" in capsys.readouterr().err


# =========================================================================== export


def test_export_lines_equal_tokencap_build_per_rollout(tmp_path):
    run = copy_samples(tmp_path)
    out = tmp_path / "all.jsonl"
    summary = export(run, out, workers=2)
    lines = out.read_bytes().splitlines(keepends=True)
    table = rows(scan_table(run, workers=1))
    assert [json.loads(line)["rollout_id"] for line in lines] == [r["rollout_id"] for r in table]
    assert summary.rollouts == summary.written == len(table)
    assert summary.trainable == sum(not r["mask_sample"] for r in table)
    for line, row in zip(lines, table):
        if row["reason_load_error"]:
            continue  # a file that failed as a whole has no rollout to build on its own
        where = run / "capture_store" if row["source"].endswith(".tokens.*") else run / row["source"]
        snapshot = next(s for s in load_snapshots(where) if s.rollout_id == row["rollout_id"])
        assert line == results_bytes([build_rollout(snapshot)], jsonl=False), row["rollout_id"]


def test_export_only_trainable_through_the_cli(tmp_path, capsys):
    run = copy_samples(tmp_path)
    out = tmp_path / "train.jsonl"
    assert main(["export", str(run), "-o", str(out), "--only-trainable", "--workers", "2"]) == 0
    written = [json.loads(line) for line in out.read_bytes().splitlines()]
    table = rows(scan_table(run, workers=1))
    assert [w["rollout_id"] for w in written] == [r["rollout_id"] for r in table if not r["mask_sample"]]
    assert all(not w["mask_sample"] for w in written)
    assert "exported" in capsys.readouterr().err


def test_cli_build_of_one_rollout_equals_its_export_line(tmp_path, capsys):
    source = tmp_path / "run.jsonl"
    many_rollouts_jsonl(source, 5)
    out = tmp_path / "all.jsonl"
    assert main(["export", str(source), "-o", str(out), "--workers", "1"]) == 0
    capsys.readouterr()
    for line in out.read_bytes().splitlines(keepends=True):
        rid = json.loads(line)["rollout_id"]
        single = tmp_path / f"{rid}.json"
        assert main(["build", str(source), "--rollout", rid, "-o", str(single)]) == 0
        assert single.read_bytes() == line


# =========================================================================== progress


def test_progress_is_plain_lines_when_stderr_is_not_a_terminal(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tokencap", "scan", str(SAMPLES / "capture_store"), "-o",
                           str(tmp_path / "r.parquet"), "--workers", "1"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("scan:") and "0/2" in lines[0]
    assert any("2/2" in line for line in lines)
    assert lines[-1].startswith("tokencap: scanned 2 rollouts (1 trainable, 1 masked)")


@pytest.mark.parametrize("command", ["scan", "export"])
@pytest.mark.parametrize(("stop", "code", "word"), [(KeyboardInterrupt, 130, "interrupted"),
                                                    (Terminated, 143, "terminated")])
def test_a_stopped_run_ends_its_progress_saying_nothing_was_written(command, stop, code, word, tmp_path,
                                                                     monkeypatch, capsys):
    from tokencap.progress import RunProgress

    follow = RunProgress.__call__

    def stopped_half_way(self, done, total):
        follow(self, done, total)
        if done:
            raise stop()  # Ctrl-C (or SIGTERM) arrives while the run is being worked

    monkeypatch.setattr(RunProgress, "__call__", stopped_half_way)
    run = tmp_path / "run.jsonl"
    many_rollouts_jsonl(run, 40)
    out = tmp_path / "out"
    assert main([command, str(run), "-o", str(out), "--workers", "1"]) == code
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(f"{command}:") and "0/40" in lines[0]
    assert lines[-1].startswith(f"{command}:") and "/40 [" in lines[-1]
    assert lines[-1].endswith(f"] {word}; nothing written")
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl"]


def test_an_interrupt_after_the_table_is_written_says_so_and_succeeds(tmp_path, monkeypatch, capsys):
    import tokencap.export as export_module

    rename = os.replace

    def rename_then_ctrl_c(source, target):
        rename(source, target)
        os.kill(os.getpid(), signal.SIGINT)  # held until the rename is recorded, then raised

    monkeypatch.setattr(export_module.os, "replace", rename_then_ctrl_c)
    out = tmp_path / "r.parquet"
    with sigint_handler(signal.default_int_handler):
        assert main(["scan", str(SAMPLES / "capture_store"), "-o", str(out), "--workers", "1"]) == 0
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"] interrupted after {out} was written")
    assert read_scan(out).num_rows == 2


@pytest.mark.parametrize("interactive", [True, False], ids=["terminal", "plain lines"])
def test_progress_closed_with_an_ending_ends_its_last_line_with_it(interactive):
    import io

    from tokencap.progress import RunProgress

    stream = io.StringIO()
    progress = RunProgress("scan", stream=stream, interactive=interactive)
    progress(0, 400)
    progress(84, 400)
    progress.close("interrupted; nothing written")
    progress.close()  # the clean-up close after it writes nothing more
    last = stream.getvalue().replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("scan:") and "21%" in last and "84/400" in last
    assert last.endswith("] interrupted; nothing written")
    assert stream.getvalue().endswith("interrupted; nothing written\n")


@pytest.mark.parametrize("interactive", [True, False], ids=["terminal", "plain lines"])
def test_progress_stopped_before_it_started_still_says_so(interactive):
    import io

    from tokencap.progress import RunProgress

    stream = io.StringIO()
    RunProgress("export", stream=stream, interactive=interactive).close("interrupted; nothing written")
    assert stream.getvalue().startswith("export:") and stream.getvalue().endswith(" interrupted; nothing written\n")


def test_progress_bar_on_a_terminal_uses_tqdm():
    import io

    from tokencap.progress import RunProgress

    stream = io.StringIO()
    progress = RunProgress("scan", stream=stream, interactive=True)
    progress(0, 10)
    progress(10, 10)
    progress.close()
    text = stream.getvalue()
    assert "10/10" in text and "rollout/s" in text and "\r" in text


# =========================================================================== hostile runs


def test_symlinks_pipes_and_odd_names_are_never_read_and_are_reported(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(SAMPLES / "length_stop.json", run / "ok.json")
    (run / "link.json").symlink_to(SAMPLES / "clean_multiturn_tools.json")
    (run / "linkdir").symlink_to(SAMPLES / "capture_store", target_is_directory=True)
    os.mkfifo(run / "pipe.jsonl")
    bad_name = os.fsdecode(b"bad-\xff")
    shutil.copy(SAMPLES / "length_stop.json", os.path.join(os.fsencode(run), b"bad-\xff.json"))
    for name in os.listdir(SAMPLES / "capture_store"):
        if name.startswith("store-complete"):
            target = name.replace("store-complete", bad_name)
            shutil.copy(SAMPLES / "capture_store" / name, run / target)
    out = tmp_path / "r.parquet"
    assert main(["scan", str(run), "-o", str(out), "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "skipped 3 entries" in err and "link.json" in err and "pipe.jsonl" in err and "linkdir/" in err
    table = {r["source"]: r for r in rows(read_scan(out))}
    assert set(table) == {"ok.json", "bad-\\xff.json", "bad-\\xff.tokens.*"}
    # an odd file name does not matter for a snapshot file: its records name the rollout
    assert (table["bad-\\xff.json"]["rollout_id"], table["bad-\\xff.json"]["mask_sample"]) == ("length-stop", False)
    assert "not valid UTF-8" in table["bad-\\xff.tokens.*"]["error"]


def test_a_pipe_as_source_is_refused_without_reading_it(tmp_path, capsys):
    pipe = tmp_path / "pipe.jsonl"
    os.mkfifo(pipe)
    assert main(["scan", str(pipe), "-o", str(tmp_path / "r.parquet")]) == 2
    assert "not a regular file" in capsys.readouterr().err


# =========================================================================== final responses (docs/contract.md#attribution in a run)


FINALS = SAMPLES / "final_responses"


def test_scan_and_export_anchor_on_the_harness_final_answer(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("title_call_after_final_answer.json", "final_answer_by_content.json", "length_stop.json"):
        shutil.copy(SAMPLES / name, run / name)
    finals = FINALS / "title_call_after_final_answer.json"
    out = tmp_path / "r.parquet"
    assert main(["scan", str(run), "-o", str(out), "--final-responses", str(finals), "--workers", "2"]) == 0
    table = {r["source"]: r for r in rows(read_scan(out))}
    titled = table["title_call_after_final_answer.json"]
    assert titled["terminal_attribution"] == "attributed"
    assert titled["after_terminal_calls"] >= 1 and titled["terminal_call_id"]
    assert table["length_stop.json"]["terminal_attribution"] is None  # not named by the file: built as before
    # a response without a rollout id applies only to a single-rollout source
    assert table["final_answer_by_content.json"]["terminal_attribution"] is None
    capsys.readouterr()
    trajectories = tmp_path / "t.jsonl"
    assert main(["export", str(run), "-o", str(trajectories), "--final-responses", str(finals)]) == 0
    line = next(l for l in trajectories.read_bytes().splitlines(keepends=True)
                if json.loads(l)["rollout_id"] == titled["rollout_id"])
    single = tmp_path / "one.json"
    assert main(["build", str(run / "title_call_after_final_answer.json"), "--final-responses", str(finals),
                 "-o", str(single)]) == 0
    assert single.read_bytes() == line


def test_final_responses_naming_rollouts_not_in_the_run_are_a_note(tmp_path, capsys):
    finals = FINALS / "final_retry_attributed_by_tokens.jsonl"
    out = tmp_path / "r.parquet"
    assert main(["scan", str(SAMPLES / "capture_store"), "-o", str(out), "--final-responses", str(finals)]) == 0
    err = capsys.readouterr().err
    note = next(line for line in err.splitlines() if line.startswith("tokencap: note:"))
    assert "name rollouts not in the source" in note and "final-retry-by-tokens" in note
    assert read_scan(out).num_rows == 2


def test_a_malformed_final_responses_file_fails_before_any_output(tmp_path, capsys):
    bad = tmp_path / "finals.jsonl"
    bad.write_text('{"rollout_id": "x", "response": {"output": 3}}\n')
    out = tmp_path / "r.parquet"
    assert main(["scan", str(SAMPLES / "capture_store"), "-o", str(out), "--final-responses", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "finals.jsonl" in err and "line 1" in err
    assert not out.exists()


def test_since_is_not_reused_across_other_final_responses(tmp_path):
    run = copy_samples(tmp_path)
    first = tmp_path / "first.parquet"
    scan(run, first, workers=1)
    again = tmp_path / "again.parquet"
    summary = scan(run, again, workers=1, since=str(first),
                   final_responses=str(FINALS / "title_call_after_final_answer.json"))
    assert summary.reused == 0 and any(f"{first} is not reused (it was scanned without --final-responses, this scan "
                                       "has it)" in n for n in summary.notes)


def test_a_store_file_that_is_a_symlink_fails_its_rollout_as_build_does(tmp_path):
    # A skipped marker or intents file could hide an incomplete capture: the rollout is not trusted.
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "capture_store", run)
    intents = run / "store-complete.tokens.intents"
    intents.rename(tmp_path / "intents")
    intents.symlink_to(tmp_path / "intents")
    table = {r["rollout_id"]: r for r in rows(scan_table(run, workers=1))}
    assert table["store-complete"]["reason_load_error"]
    assert "store-complete.tokens.intents" in table["store-complete"]["error"]
    assert not table["store-interrupted"]["reason_load_error"]
    built = {s.rollout_id: s for s in load_snapshots(run)}
    # the same words as `tokencap build`, labelled by the directory's name rather than its absolute path
    assert table["store-complete"]["error"].split(": ", 1)[1] == built["store-complete"].load_error.split(": ", 1)[1]


def _die(units, options):
    os._exit(9)  # a worker killed mid-shard (out of memory, a native crash)


def test_a_worker_that_dies_is_one_clear_error_and_no_result(tmp_path, monkeypatch, capsys):
    scan_module = sys.modules["tokencap.run.scanning"]
    monkeypatch.setattr(scan_module, "scan_shard", _die)
    out = tmp_path / "r.parquet"
    code = main(["scan", str(SAMPLES / "capture_store"), "-o", str(out), "--workers", "2"])
    err = capsys.readouterr().err
    assert code == 1 and "worker process died" in err and "--workers 1" in err
    assert "Traceback" not in err
    assert os.listdir(tmp_path) == []


def test_a_scan_never_projects_a_payload(monkeypatch):
    # A row reads the verdict and metrics only: the Responses payload (a deep copy of every
    # delivered output item) is never built, and the table is the one a full build gives.
    import tokencap.rollout as rollout_module
    from tokencap.run import table_of_snapshots

    expected = scan_table(SAMPLE_RUN, workers=1)
    snapshots = load_snapshots(SAMPLES / "multi_rollout_entries.jsonl")
    uploaded = table_of_snapshots(snapshots, "multi_rollout_entries.jsonl")

    def refuse(*_args, **_kwargs):
        raise AssertionError("a scan projected a payload")

    monkeypatch.setattr(rollout_module, "main_chain_payload", refuse)
    assert scan_table(SAMPLE_RUN, workers=1).equals(expected)
    assert table_of_snapshots(snapshots, "multi_rollout_entries.jsonl").equals(uploaded)
    assert not any(uploaded.column("reason_build_error").to_pylist())
