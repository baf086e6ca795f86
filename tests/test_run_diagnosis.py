"""docs/contract.md#scan-diagnosis-columns: the scan table's diagnosis and delivery columns, on every engine, with --since and --tokenizer."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers_diagnosis import broken_rollout, records_file, tokenizer_file

from tokencap.cli import main
from tokencap.diagnosis import CAUSES
from tokencap.run import COLUMNS, read_current_scan, read_scan, scan, scan_table
from tokencap.run.diagnosed import DiagnosisFacts, diagnosis_facts
from tokencap.run.table import DIAGNOSIS_COLUMNS, RECORD_COLUMNS, TOKENS_COLUMNS

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"
EARLIER = [c for c in COLUMNS if c not in DIAGNOSIS_COLUMNS + TOKENS_COLUMNS]



def make_run(tmp_path: Path, n: int = 6) -> Path:
    """``n`` rollouts in snapshot files; every third is broken."""
    run = tmp_path / "run"
    run.mkdir()
    for i in range(n):
        rid = f"r{i:02d}"
        (run / f"{rid}.json").write_text(json.dumps(broken_rollout(rid, replaced=i % 3 == 0)))
    return run


def ids(n: int = 6) -> list[str]:
    return [f"r{i:02d}" for i in range(n)]


# --------------------------------------------------------------------------- the columns


def test_columns_follow_rollout_index_in_spec_order():
    assert COLUMNS[COLUMNS.index("rollout_index") + 1:-len(TOKENS_COLUMNS)] == DIAGNOSIS_COLUMNS == (
        "breaks", "break_causes", "first_break_call", "delivered_mask_sample", "delivered_by")


def test_a_broken_rollout_has_its_break_cause_and_first_call(tmp_path):
    run = make_run(tmp_path)
    table = {r["rollout_id"]: r for r in scan_table(run, workers=1).to_pylist()}
    assert table["r00"]["breaks"] == 1
    assert table["r00"]["break_causes"] == ["tokens_replaced"]
    assert table["r00"]["first_break_call"] == "call-0002"
    assert table["r01"]["breaks"] == 0 and table["r01"]["break_causes"] == [] and table["r01"]["first_break_call"] is None
    assert all(r["delivered_mask_sample"] is None and r["delivered_by"] is None for r in table.values())


def test_the_tokenizer_refines_the_cause_and_never_an_earlier_column(tmp_path):
    run = make_run(tmp_path)
    tok = tokenizer_file(tmp_path / "tokenizer.json")
    plain = scan_table(run, workers=1)
    refined = scan_table(run, workers=1, tokenizer=str(tok))
    row = next(r for r in refined.to_pylist() if r["rollout_id"] == "r00")
    assert row["break_causes"] == ["retokenized"]
    assert refined.select(EARLIER).equals(plain.select(EARLIER))


def test_delivered_values_come_from_the_records(tmp_path):
    run = make_run(tmp_path)
    records = records_file(tmp_path / "records.jsonl", ids(), {
        "r00": {"mask_sample": False, "_ng_token_capture": {"calls": 2}},  # Gym trained on a broken rollout
        "r01": {"mask_sample": True},  # the harness masked it on its own (a timeout)
        "r02": {"mask_sample": "yes"},  # not a bool: no delivered value
    })
    table = {r["rollout_id"]: r for r in scan_table(run, workers=1, final_responses=str(records)).to_pylist()}
    assert (table["r00"]["delivered_mask_sample"], table["r00"]["delivered_by"]) == (False, "token_capture")
    assert (table["r01"]["delivered_mask_sample"], table["r01"]["delivered_by"]) == (True, "agent")
    assert (table["r02"]["delivered_mask_sample"], table["r02"]["delivered_by"]) == (None, None)
    assert table["r00"]["mask_sample"] is True  # tokencap's verdict is its own


def test_evidence_replaces_the_cause_and_nothing_before_it(tmp_path):
    run = make_run(tmp_path)
    compaction = {"ng_agent_observations": {"source": "agent", "gaps": [], "records": [
        {"kind": "context_compaction", "after_model_call": {"model_call_id": "call-0002"}, "trigger": "tokens",
         "tokens_before": 9, "tokens_after": 4}]}}
    records = records_file(tmp_path / "records.jsonl", ids(), {"r00": compaction})
    bare = records_file(tmp_path / "bare.jsonl", ids())
    with_evidence = scan_table(run, workers=1, final_responses=str(records))
    without = scan_table(run, workers=1, final_responses=str(bare))
    row = next(r for r in with_evidence.to_pylist() if r["rollout_id"] == "r00")
    assert row["break_causes"] == ["compaction"]
    assert with_evidence.select(EARLIER).equals(without.select(EARLIER))


@pytest.mark.parametrize("evidence", [
    {"ng_agent_observations": "not an object"},
    {"ng_agent_observations": {"records": [{"kind": "alien"}, 3, None]}},
    {"ng_trajectory": {"schema": "1.0", "invocations": "x", "model_calls": [{"model_call_id": 7}]}},
    {"ng_model_call_capture": {"calls": [{"response_id": ["a"]}]}},
    {"mask_sample": None, "_ng_token_capture": [1, 2]},
    {"ng_trajectory": [[[[[]]]]] * 3},
])
def test_malformed_evidence_never_fails_a_scan(tmp_path, evidence):
    run = make_run(tmp_path)
    records = records_file(tmp_path / "records.jsonl", ids(), {rid: evidence for rid in ids()})
    bare = records_file(tmp_path / "bare.jsonl", ids())
    table = scan_table(run, workers=1, final_responses=str(records))
    assert table.select(EARLIER).equals(scan_table(run, workers=1, final_responses=str(bare)).select(EARLIER))
    assert table.column("breaks").to_pylist() == [1, 0, 0, 1, 0, 0]
    assert all(set(c) <= set(CAUSES) for c in table.column("break_causes").to_pylist())


def test_undecodable_ids_never_fail_a_scan(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    snap = broken_rollout("big-ids")
    for entry in snap["entries"]:  # ids far outside the tokenizer's 200 (and beyond u32)
        entry["prompt_token_ids"] = [t + 5_000_000_000 for t in entry["prompt_token_ids"]]
        entry["generation_token_ids"] = [t + 5_000_000_000 for t in entry["generation_token_ids"]]
        entry.pop("digest"), entry.pop("cum_len")
    (run / "big.json").write_text(json.dumps(snap))
    tok = tokenizer_file(tmp_path / "tokenizer.json")
    plain = scan_table(run, workers=1)
    table = scan_table(run, workers=1, tokenizer=str(tok))
    assert table.select(EARLIER).equals(plain.select(EARLIER))
    assert table.column("breaks").to_pylist() == plain.column("breaks").to_pylist()


def test_a_diagnosis_that_raises_leaves_breaks_null_and_the_row_whole(monkeypatch):
    from tokencap import build_rollout, load_snapshots
    from tokencap.run import diagnosed

    snapshot = load_snapshots(json.dumps(broken_rollout("r")).encode())[0]
    result = build_rollout(snapshot, project=False)
    assert diagnosis_facts(result) == DiagnosisFacts(1, ["tokens_replaced"], "call-0002", None, None)

    def boom(*args, **kwargs):
        raise RuntimeError("a bug in the diagnosis")

    monkeypatch.setattr(diagnosed, "diagnose", boom)
    assert diagnosis_facts(result, {"mask_sample": True}) == DiagnosisFacts(None, [], None, True, "agent")


def test_every_engine_and_worker_count_gives_the_same_columns(tmp_path, local_ray):
    run = make_run(tmp_path, n=9)
    tok = tokenizer_file(tmp_path / "tokenizer.json")
    records = records_file(tmp_path / "records.jsonl", ids(9), {"r03": {"mask_sample": False,
                                                                       "_ng_token_capture": {}}})
    kwargs = {"final_responses": str(records), "tokenizer": str(tok)}
    one = scan_table(run, workers=1, **kwargs)
    assert scan_table(run, workers=2, **kwargs).equals(one)
    assert scan_table(run, workers=2, engine="ray", **kwargs).equals(one)
    assert one.column("break_causes").to_pylist()[0] == ["retokenized"]
    assert one.column("delivered_by").to_pylist()[3] == "token_capture"


# --------------------------------------------------------------------------- reuse and old tables


def test_since_is_not_reused_when_only_the_evidence_changed(tmp_path):
    run = make_run(tmp_path)
    records = records_file(tmp_path / "records.jsonl", ids())
    first = tmp_path / "first.parquet"
    scan(run, first, workers=1, final_responses=str(records))
    assert scan(run, tmp_path / "same.parquet", workers=1, final_responses=str(records),
                since=str(first)).reused == 6
    records_file(records, ids(), {"r00": {"mask_sample": False, "_ng_token_capture": {}}})  # evidence only
    again = tmp_path / "again.parquet"
    summary = scan(run, again, workers=1, final_responses=str(records), since=str(first))
    assert summary.reused == 0
    assert read_scan(again).column("delivered_by").to_pylist()[0] == "token_capture"


def test_the_tokenizer_is_part_of_the_reuse_identity(tmp_path):
    run = make_run(tmp_path)
    tok = tokenizer_file(tmp_path / "tokenizer.json")
    first = tmp_path / "first.parquet"
    scan(run, first, workers=1)
    assert read_current_scan(first) is not None
    assert read_current_scan(first, tokenizer=str(tok)) is None
    summary = scan(run, tmp_path / "again.parquet", workers=1, since=str(first), tokenizer=str(tok))
    assert summary.reused == 0
    assert any("it was scanned without --tokenizer, this scan has it" in n for n in summary.notes), summary.notes
    assert read_scan(tmp_path / "again.parquet").column("break_causes").to_pylist()[0] == ["retokenized"]
    with_tok = tmp_path / "with.parquet"
    scan(run, with_tok, workers=1, tokenizer=str(tok))
    assert read_current_scan(with_tok, tokenizer=str(tok)) is not None
    assert scan(run, tmp_path / "reused.parquet", workers=1, since=str(with_tok), tokenizer=str(tok)).reused == 6


def test_a_table_written_before_the_diagnosis_columns_opens_with_them_null(tmp_path):
    run = make_run(tmp_path)
    out = tmp_path / "new.parquet"
    scan(run, out, workers=1)
    old = tmp_path / "old.parquet"
    pq.write_table(pq.read_table(out).drop_columns([*DIAGNOSIS_COLUMNS, *TOKENS_COLUMNS]), old)
    table = read_scan(old)
    assert table.schema.names == list(COLUMNS)
    assert table.column("breaks").null_count == table.num_rows
    assert table.column("break_causes").to_pylist() == [[]] * table.num_rows
    assert table.select(EARLIER).equals(read_scan(out).select(EARLIER))
    older = tmp_path / "older.parquet"  # before the record columns too
    pq.write_table(pq.read_table(out).drop_columns([*RECORD_COLUMNS, *DIAGNOSIS_COLUMNS, *TOKENS_COLUMNS]), older)
    assert read_scan(older).column("first_break_call").null_count == table.num_rows
    assert scan(run, tmp_path / "again.parquet", workers=1, since=str(old)).reused == 0  # never reused
    from tokencap.views.run.frame import run_frame

    assert len(run_frame(read_scan(old))) == 6


# --------------------------------------------------------------------------- the command line


def test_scan_with_a_bad_tokenizer_is_a_one_line_exit_2(tmp_path, capsys):
    run = make_run(tmp_path)
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    unreadable = f"tokencap: error: --tokenizer: {bad}: not a tokenizer.json the tokenizers library can read ("
    missing = tmp_path / "missing.json"
    expected = {  # a message ending in "(" goes on with the tokenizers library's own words
        str(bad): unreadable,
        str(missing): (f"tokencap: error: --tokenizer: {missing}: no such file or directory; give a tokenizer.json "
                       "file, a directory holding one (a Hugging Face model directory), or a model name Org/Name "
                       "found in the local Hugging Face cache\n"),
        str(tmp_path): unreadable,  # the directory's tokenizer.json is the unreadable one
    }
    for path, message in expected.items():
        out = tmp_path / "out.parquet"
        assert main(["scan", str(run), "-o", str(out), "--tokenizer", path]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and (err.startswith(message) if message.endswith("(") else err == message), err
        assert not out.exists()
    assert main(["diff", str(run), str(run), "--tokenizer", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(unreadable)
    # The app's tokenizer is checked before its port: whether 8501 is free changes nothing.
    assert main(["app", str(run), "--tokenizer", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(unreadable)


def test_sample_file_through_the_cli_scan_table(tmp_path):
    """End to end: a bundled sample through `tokencap scan` (a subprocess, as a person runs it)."""
    run = tmp_path / "run"
    run.mkdir()
    for name in ("compaction_new_root.json", "unresolved_continuation.json", "clean_multiturn_tools.json"):
        shutil.copy(SAMPLES / name, run / name)
    out = tmp_path / "table.parquet"
    proc = subprocess.run([sys.executable, "-m", "tokencap", "scan", str(run), "-o", str(out), "--workers", "1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = {r["rollout_id"]: r for r in read_scan(out).to_pylist()}
    assert rows["clean-multiturn-tools"]["breaks"] == 0
    assert rows["compaction-new-root"]["breaks"] == 1
    assert rows["compaction-new-root"]["break_causes"] == ["new_context"]
    assert rows["compaction-new-root"]["first_break_call"] == "call-0004"
    assert rows["unresolved-continuation"]["break_causes"] == ["link_intact"]
    assert rows["unresolved-continuation"]["first_break_call"] == "call-0003"


def test_the_app_s_child_scan_and_its_cache_take_the_tokenizer(tmp_path):
    """The Run page scans a big run in `tokencap.run.child` (and `tokencap app` beside the server, in
    `prescan`): both pass the app's tokenizer on, and its scan cache keeps tables of another tokenizer apart."""
    from tokencap.run.child import ChildScan
    from tokencap.services.scan_cache import cached_scan_path, fingerprint, scan_directory

    run = make_run(tmp_path)
    tok = tokenizer_file(tmp_path / "tokenizer.json")
    child = ChildScan(run, tmp_path / "out.parquet", tokenizer=tok)
    assert child.arguments()[-2:] == ["--tokenizer", str(tok.resolve())]
    fp = fingerprint(run)
    plain, refined = cached_scan_path(fp, tmp_path, None), cached_scan_path(fp, tmp_path, None, str(tok))
    assert plain != refined
    done = subprocess.run([sys.executable, "-m", "tokencap.run.child", str(run), str(tmp_path / "child.parquet"),
                           "--tokenizer", str(tok)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    causes = {c for row in read_scan(tmp_path / "child.parquet").column("break_causes").to_pylist() for c in row}
    assert causes == {"retokenized"}
    table = scan_directory(run, fp, tokenizer=str(tok), cache_dir=tmp_path / "cache")
    assert {c for row in table.column("break_causes").to_pylist() for c in row} == {"retokenized"}
