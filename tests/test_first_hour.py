"""What a new user meets in the first hour: every message says what the input is and what to do.

Each test here is a case found by trying the commands on the bundled samples, on an
upstream store and on files a person might give by mistake, where tokencap misled.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from helpers import Conv, jsonl_bytes, snapshot_dict

from tokencap import build_rollout, load_snapshots
from tokencap.cli import main
from tokencap.loading import LoadError

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"
UPSTREAM = Path(__file__).resolve().parent / "data" / "upstream_store"


def one_snapshot_json() -> bytes:
    conv = Conv("r1")
    conv.root("c1")
    return json.dumps(snapshot_dict(conv.records)).encode()


def error_line(capsys) -> str:
    (line,) = capsys.readouterr().err.strip().splitlines()
    return line


def test_a_call_without_a_finish_reason_is_not_reported_as_finish_reason_none(capsys) -> None:
    # The upstream writer records no finish_reason; "finish reason None ... applies" read as a bug.
    assert main(["inspect", str(UPSTREAM), "--rollout", "task3-rollout0-attempt0"]) == 0
    out = capsys.readouterr().out
    assert "None" not in out
    assert "'call-3' recorded no finish reason, so it cannot mark the response incomplete" in out
    (snap,) = load_snapshots(SAMPLES / "length_stop.json")
    assert build_rollout(snap).finish_reason_verdict.summary.startswith("finish reason 'length' of ")


def test_a_utf8_byte_order_mark_is_named_not_reported_as_invalid_json(tmp_path: Path, capsys) -> None:
    path = tmp_path / "saved_on_windows.json"
    path.write_bytes(b"\xef\xbb\xbf" + one_snapshot_json())
    assert main(["build", str(path)]) == 2
    assert error_line(capsys) == (f"tokencap: error: {path}, line 1: starts with a UTF-8 byte-order mark (BOM), "
                                  "which JSON text may not hold; save the file as UTF-8 without a BOM")
    conv = Conv("r1")
    conv.root("c1")
    with pytest.raises(LoadError, match=r"^x\.jsonl, line 1: starts with a UTF-8 byte-order mark"):
        load_snapshots(b"\xef\xbb\xbf" + jsonl_bytes(conv.records), name="x.jsonl")


def test_utf16_text_is_named_as_such(tmp_path: Path, capsys) -> None:
    path = tmp_path / "utf16.json"
    path.write_bytes(one_snapshot_json().decode().encode("utf-16"))
    assert main(["build", str(path)]) == 2
    assert error_line(capsys) == (f"tokencap: error: {path}: UTF-16 text (it starts with a UTF-16 byte-order "
                                  "mark), not UTF-8 JSON; save it as UTF-8")


@pytest.mark.parametrize("content", [b"<html>404 Not Found</html>\n", b"not a zip", bytes(range(1, 9)) * 4])
def test_a_file_named_zip_that_is_not_a_zip_is_said_so(content: bytes, tmp_path: Path, capsys) -> None:
    path = tmp_path / "capture.zip"
    path.write_bytes(content)
    assert main(["build", str(path)]) == 2
    assert error_line(capsys) == (f"tokencap: error: {path}: named .zip but not a zip archive (it does not start "
                                  "with a zip's first bytes); give a zip of a capture-store directory, or the "
                                  "directory itself")
    with pytest.raises(LoadError, match="named .zip but not a zip archive"):
        load_snapshots(content, name="upload.ZIP")


def test_an_empty_zip_is_read_as_a_zip(tmp_path: Path, capsys) -> None:
    path = tmp_path / "empty.bin"
    zipfile.ZipFile(path, "w").close()
    assert main(["build", str(path)]) == 2
    assert error_line(capsys) == f"tokencap: error: {path}: no capture-store files and no .json/.jsonl files found"


@pytest.mark.parametrize(("command", "name", "said"), [
    ("scan", "table.json", True), ("scan", "table.parquet", False),
    ("export", "lines.parquet", True), ("export", "lines.jsonl", False)])
def test_scan_and_export_say_their_format_when_the_output_name_suggests_another(
        command: str, name: str, said: bool, tmp_path: Path, capsys) -> None:
    out = tmp_path / name
    assert main([command, str(SAMPLES / "capture_store"), "-o", str(out), "--workers", "1"]) == 0
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"tokencap: {command}")
    written = "a parquet table" if command == "scan" else "JSON lines"
    assert (f"-> {out} (written as {written}, whatever the file's name says)" in last) is said
    assert last.endswith(str(out)) is not said


@pytest.mark.parametrize(("name", "said"), [("diff.json", True), ("diff.parquet", False)])
def test_diff_says_its_format_when_the_output_name_suggests_another(name: str, said: bool, tmp_path: Path,
                                                                    capsys) -> None:
    table, out = tmp_path / "run.parquet", tmp_path / name
    assert main(["scan", str(SAMPLES / "capture_store"), "-o", str(table), "--workers", "1"]) == 0
    assert main(["diff", str(table), str(table), "-o", str(out)]) == 0
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("tokencap: 2 joined rollouts ->")
    assert (f"-> {out} (written as a parquet table, whatever the file's name says)" in last) is said
    assert last.endswith(str(out)) is not said


def refusal_of_a_table(command: str, table: Path, tmp_path: Path, capsys) -> str:
    """The error line of ``command`` given ``table`` as its run (nothing written)."""
    capsys.readouterr()
    out = tmp_path / "out"
    assert main([command, str(table), "-o", str(out), "--workers", "1"]) == 2
    assert not out.exists()
    return error_line(capsys)


@pytest.mark.parametrize("command", ["scan", "export"])
@pytest.mark.parametrize("name", ["run.parquet", "renamed.json"])
def test_a_scan_table_given_to_scan_or_export_is_refused_not_one_masked_row(
        command: str, name: str, tmp_path: Path, capsys) -> None:
    table = tmp_path / name
    assert main(["scan", str(SAMPLES / "capture_store"), "-o", str(table), "--workers", "1"]) == 0
    assert refusal_of_a_table(command, table, tmp_path, capsys) == (
        f"tokencap: error: {table}: is a scan table (parquet), not a run to {command}; open it with "
        f"`tokencap app {table}`, compare it with `tokencap diff`, or give the run it was scanned from")


@pytest.mark.parametrize("command", ["scan", "export"])
def test_a_diff_table_given_to_scan_or_export_is_named_as_one(command: str, tmp_path: Path, capsys) -> None:
    # Was: "is a scan table (parquet) ... open it with `tokencap app`, compare it with `tokencap diff`",
    # both of which refuse a diff table.
    table, diff = tmp_path / "run.parquet", tmp_path / "d.parquet"
    assert main(["scan", str(SAMPLES / "capture_store"), "-o", str(table), "--workers", "1"]) == 0
    assert main(["diff", str(table), str(table), "-o", str(diff)]) == 0
    assert refusal_of_a_table(command, diff, tmp_path, capsys) == (
        f"tokencap: error: {diff}: is a diff table (what `tokencap diff -o` writes, one row per joined rollout), "
        f"not a run to {command}; give one of the runs it compares")


RECORDS = SAMPLES / "rollout_records" / "run.jsonl"


@pytest.mark.parametrize("command", ["scan", "export"])
def test_rollout_records_given_as_the_run_are_refused_not_a_masked_row_per_record(
        command: str, tmp_path: Path, capsys) -> None:
    # Was: 292 "rollouts", every one masked load_error, exit 0.
    out = tmp_path / "out"
    assert main([command, str(RECORDS), "-o", str(out), "--workers", "1"]) == 2
    assert error_line(capsys) == (
        f"tokencap: error: {RECORDS}, line 1: a rollout record or Responses object, not a captured call: its records "
        "say their tokens were delivered through token capture ('_ng_token_capture'), so that capture is the source; "
        "the harness's final responses go to --final-responses (or the app's final-responses upload); SOURCE is the "
        "capture of the model calls")
    assert not out.exists()


def test_diff_of_rollout_records_given_as_a_run_names_the_side(tmp_path: Path, capsys) -> None:
    # Was: "236 fixed", exit 0, from a "run" of 292 unloadable records.
    assert main(["diff", str(RECORDS), str(SAMPLES / "run"), "--workers", "1"]) == 2
    line = error_line(capsys)
    assert line.startswith(f"tokencap: error: {RECORDS}, line 1: a rollout record or Responses object")
    assert line.endswith("(run A)")


def test_rollout_records_inside_a_run_directory_are_one_row_saying_what_they_are(tmp_path: Path) -> None:
    import pandas as pd

    run = tmp_path / "run"
    run.mkdir()
    for path in (SAMPLES / "run").glob("task0003-rollout2-attempt0.tokens.*"):
        (run / path.name).write_bytes(path.read_bytes())
    (run / "records.jsonl").write_bytes(RECORDS.read_bytes())
    table = tmp_path / "t.parquet"
    assert main(["scan", str(run), "-o", str(table), "--workers", "1"]) == 0
    rows = pd.read_parquet(table).set_index("rollout_id")
    assert sorted(rows.index) == ["records", "task0003-rollout2-attempt0"]
    assert rows.loc["records", "reason_load_error"]
    assert "not a captured call" in rows.loc["records", "error"]
    assert "--final-responses" in rows.loc["records", "error"]
    assert not rows.loc["task0003-rollout2-attempt0", "mask_sample"]
