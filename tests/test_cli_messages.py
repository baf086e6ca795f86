"""Messages that misled (issue 37, item 17): each one line, saying what is actually wrong."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tokencap.cli import main

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"
CAPTURE = SAMPLES / "clean_multiturn_tools.json"
RECORDS = SAMPLES / "rollout_records" / "run.jsonl"
NAN_FIX = "JSON has no NaN or Infinity: write null, or a finite number, there"


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tokencap: error: "), err
    return err.rstrip("\n").removeprefix("tokencap: error: ")


# --------------------------------------------------------------------------- a directory for a file


@pytest.mark.parametrize("command", ["scan", "export", "app"])
def test_final_responses_given_a_directory_says_so(command: str, no_server, tmp_path: Path, capsys) -> None:
    args = [str(SAMPLES / "run")] + ([] if command == "app" else ["-o", str(tmp_path / "out")])
    assert main([command, *args, "--final-responses", str(SAMPLES)]) == 2
    assert _error(capsys) == (f"{SAMPLES}: is a directory; --final-responses takes a rollout records file "
                              "(JSON or JSONL)")


def test_since_given_a_directory_says_so(tmp_path: Path, capsys) -> None:
    assert main(["scan", str(SAMPLES / "run"), "-o", str(tmp_path / "r.parquet"), "--since", str(SAMPLES)]) == 2
    assert _error(capsys) == (f"{SAMPLES}: is a directory; --since takes the scan table (.parquet) of an earlier "
                              "`tokencap scan`")


# --------------------------------------------------------------------------- the app without its extra


def test_the_app_without_streamlit_says_to_install_the_app_extra(monkeypatch, no_server, capsys) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "streamlit" else real(name, *a))
    assert main(["app"]) == 2
    assert _error(capsys) == ('the app needs Streamlit, which is not installed; install the app extra: pip install '
                              '"tokencap-rl[app]" (in a checkout: pip install -e ".[app]")')


# --------------------------------------------------------------------------- standard output


def _tokencap(*args: str, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "tokencap", *args], env=env, timeout=300, **kwargs)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["build", str(CAPTURE)], ["export", str(SAMPLES / "run"), "-o", "-"]])
def test_a_full_standard_output_is_blamed_on_standard_output(args: list[str]) -> None:
    with open("/dev/full", "wb") as full:
        proc = _tokencap(*args, stdout=full, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        "tokencap: error: standard output: cannot write the result (No space left on device); write it to a file "
        "with -o FILE on a disk with room")
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr


def test_export_to_a_reader_that_stops_early_ends_quietly_but_not_with_success() -> None:
    """`tokencap export RUN -o - | head`: 141 (128 + SIGPIPE), as a filter killed by the closed pipe, no traceback."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "tokencap", "export", str(SAMPLES / "run"), "-o", "-"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(100)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141, err
    assert "error" not in err and "Traceback" not in err and "Exception ignored" not in err


# --------------------------------------------------------------------------- NaN and Infinity


def test_nan_in_a_snapshot_is_named_with_its_line_and_byte(tmp_path: Path, capsys) -> None:
    text = CAPTURE.read_text()
    at = text.index('"created_at":') + len('"created_at":')
    end = at + len(text[at:].split(",", 1)[0])
    bad = tmp_path / "nan.json"
    bad.write_text(text[:at] + "NaN" + text[end:])
    assert main(["build", str(bad)]) == 2
    assert _error(capsys) == f"{bad}: NaN at line {text[:at].count(chr(10)) + 1}, byte {at} is not JSON ({NAN_FIX})"


def test_infinity_in_entries_jsonl_is_named_with_its_line_and_byte(tmp_path: Path, capsys) -> None:
    entries = json.loads(CAPTURE.read_text())["entries"]
    entries[1]["generation_log_probs"][0] = float("-inf")
    bad = tmp_path / "entries.jsonl"
    lines = [json.dumps(e) for e in entries]
    bad.write_text("\n".join(lines) + "\n")
    assert main(["build", str(bad)]) == 2
    byte = lines[1].index("-Infinity")
    assert _error(capsys) == f"{bad}, line 2: -Infinity at byte {byte} of the line is not JSON ({NAN_FIX})"


def test_nan_in_rollout_records_is_named(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "records.jsonl"
    line = '{"rollout_id": "r", "reward": NaN, "response": {"object": "response", "output": []}}'
    bad.write_text(line + "\n")
    assert main(["build", str(CAPTURE), "--final-responses", str(bad)]) == 2
    assert _error(capsys) == f"{bad}: NaN at line 1, byte {line.index('NaN')} is not JSON ({NAN_FIX})"


# --------------------------------------------------------------------------- the wrong kind of file


def test_a_parquet_given_as_final_responses_is_named_a_parquet(tmp_path: Path, capsys) -> None:
    table = tmp_path / "run.parquet"
    assert main(["scan", str(SAMPLES / "capture_store"), "-o", str(table), "--workers", "1"]) == 0
    capsys.readouterr()
    assert main(["build", str(CAPTURE), "--final-responses", str(table)]) == 2
    assert _error(capsys) == (f"{table}: a parquet file (a scan table, as `tokencap scan` writes it?), not rollout "
                              "records; --final-responses takes the harness's rollout records as JSONL (one JSON "
                              "object a line, with rollout_id and response)")


BUILD_RESULT = ("a `tokencap build` result (rollout_id, mask_sample, mask_reasons, metrics, rebuilt_response), "
                "not a capture; give the captured calls it was built from as SOURCE")


def test_a_build_result_given_as_source_is_named_a_build_result(tmp_path: Path, capsys) -> None:
    built = tmp_path / "built.json"
    assert main(["build", str(CAPTURE), "-o", str(built)]) == 0
    assert main(["build", str(built)]) == 2
    assert _error(capsys) == f"{built}, line 1: {BUILD_RESULT}"
    pretty = tmp_path / "pretty.json"  # one object over many lines
    pretty.write_text(json.dumps(json.loads(built.read_text()), indent=2))
    assert main(["inspect", str(pretty)]) == 2
    assert _error(capsys) == f"{pretty}: {BUILD_RESULT}"
    exported = tmp_path / "trajectories.jsonl"
    assert main(["export", str(SAMPLES / "capture_store"), "-o", str(exported), "--workers", "1"]) == 0
    capsys.readouterr()
    assert main(["build", str(exported)]) == 2
    assert _error(capsys) == f"{exported}, line 1: {BUILD_RESULT}"


# --------------------------------------------------------------------------- the --since note


def test_the_since_note_gives_the_actual_reason(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "run", run)
    old = tmp_path / "old.parquet"
    assert main(["scan", str(run), "-o", str(old), "--workers", "1"]) == 0
    capsys.readouterr()
    new = tmp_path / "new.parquet"
    assert main(["scan", str(run), "-o", str(new), "--since", str(old), "--final-responses", str(RECORDS),
                 "--workers", "1"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("tokencap: note:")]
    assert notes == [f"tokencap: note: {old} is not reused (it was scanned without --final-responses, this scan "
                     "has it); every rollout was built again"]
