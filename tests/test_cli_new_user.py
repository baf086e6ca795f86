"""The command line as a new user found it (issue 19, items 11-16): `app` with bad records or a busy
port, `-o -`, the README's scan example against the app's count, `build` on a tree, the diff printout."""

from __future__ import annotations

import json
import re
import shlex
import socket
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import linear_chain, snapshot_dict

from tokencap.cli import main
from tokencap.rollout import MASK_REASON_ORDER
from tokencap.run import SCHEMA

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"


def _one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tokencap: error: "), err
    return err[0]


def _snapshot(tmp_path: Path, rollout_id: str = "a") -> Path:
    path = tmp_path / f"{rollout_id}.json"
    path.write_text(json.dumps(snapshot_dict(linear_chain(2, rollout_id=rollout_id).records)))
    return path


# =========================================================================== 11: app reads its records first


@pytest.mark.parametrize("records", ['{"x": 1}\n', "not json\n", ""])
def test_app_with_bad_rollout_records_fails_as_build_does_before_any_server(records, no_server, tmp_path, capsys):
    source = _snapshot(tmp_path)
    bad = tmp_path / "records.jsonl"
    bad.write_text(records)
    assert main(["build", str(source), "--final-responses", str(bad), "-o", str(tmp_path / "out.json")]) == 2
    built = _one_error(capsys)
    assert main(["app", str(source), "--final-responses", str(bad)]) == 2
    assert _one_error(capsys) == built
    assert main(["app", str(SAMPLES / "run"), "--final-responses", str(bad)]) == 2  # a run, as a file
    assert _one_error(capsys) == built


def test_app_with_good_rollout_records_starts_the_server(monkeypatch, tmp_path, capsys):
    from tokencap.cli import server

    calls: list[list[str]] = []
    monkeypatch.setattr(server, "_serve", lambda cmd, **_: calls.append(cmd) or 0)
    monkeypatch.setattr(server, "_check_port_free", lambda port: None)
    records = SAMPLES / "rollout_records" / "run.jsonl"
    assert main(["app", str(SAMPLES / "run"), "--final-responses", str(records)]) == 0
    (cmd,) = calls
    assert cmd[-2:] == ["--final-responses", str(records)]
    assert capsys.readouterr().err == ""


# =========================================================================== 12: -o - is standard output


def test_build_dash_o_dash_writes_to_standard_output_and_no_file_named_dash(tmp_path, monkeypatch, capsys):
    source = _snapshot(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["build", str(source)]) == 0
    plain = capsys.readouterr().out
    assert main(["build", str(source), "-o", "-"]) == 0
    assert capsys.readouterr().out == plain and json.loads(plain)["rollout_id"] == "a"
    assert not (tmp_path / "-").exists()


def test_export_dash_o_dash_writes_the_lines_to_standard_output_and_no_file_named_dash(tmp_path, monkeypatch,
                                                                                      capsys):
    run = tmp_path / "run"
    run.mkdir()
    for rollout in ("a", "b"):
        _snapshot(run, rollout)
    monkeypatch.chdir(tmp_path)
    assert main(["export", str(run), "-o", "file.jsonl", "--workers", "1"]) == 0
    capsys.readouterr()
    assert main(["export", str(run), "-o", "-", "--workers", "1"]) == 0
    out, err = capsys.readouterr()
    assert out.encode() == (tmp_path / "file.jsonl").read_bytes()
    assert [json.loads(line)["rollout_id"] for line in out.splitlines()] == ["a", "b"]
    assert "exported 2 of 2 rollouts (2 trainable) -> standard output" in err
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("command", ["scan", "diff"])
def test_parquet_writers_refuse_dash_o_dash_in_one_line_and_write_nothing(command, tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    run.mkdir()
    _snapshot(run)
    monkeypatch.chdir(tmp_path)
    args = [command, str(run)] + ([str(run)] if command == "diff" else []) + ["-o", "-", "--workers", "1"]
    assert main(args) == 2
    assert _one_error(capsys) == (f"tokencap: error: -o -: {command} writes a parquet table, which is binary and not "
                                  f"for standard output; give a file name (-o {'run' if command == 'scan' else 'diff'}"
                                  ".parquet)")
    assert capsys.readouterr().out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


# =========================================================================== 13: a busy port


def test_app_on_a_busy_port_says_so_in_one_line_and_suggests_another(no_server, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["app", "--port", str(port)]) == 2
    assert _one_error(capsys) == (f"tokencap: error: port {port} is already in use on localhost (another tokencap "
                                  "app?); stop that one, or choose another port with --port N")


def test_app_on_a_free_port_starts_the_server(monkeypatch):
    from tokencap.cli import server

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    calls: list[list[str]] = []
    monkeypatch.setattr(server, "_serve", lambda cmd, **_: calls.append(cmd) or 0)
    assert main(["app", "--port", str(port)]) == 0
    assert calls and calls[0][calls[0].index("--server.port") + 1] == str(port)


# =========================================================================== 14: the README's scan agrees with the app


def test_the_readme_scans_the_sample_run_as_the_app_does(tmp_path, capsys):
    """The README's `tokencap scan sample_data/run` example counts the trainable rollouts the Run page shows
    for the bundled run (which it scans with the bundled rollout records)."""
    from tokencap.run import scan_table
    from tokencap.services.run_sources import sample_records

    examples = [line.split("#", 1)[0].strip() for line in (REPO / "README.md").read_text().splitlines()
                if line.strip().startswith("tokencap scan sample_data/run ")]
    assert examples, "the README has no `tokencap scan sample_data/run` example"
    for example in examples:
        args = shlex.split(example)[1:]
        args[args.index("-o") + 1] = str(tmp_path / "run.parquet")
        assert main(args) == 0
        said = re.search(r"scanned ([\d,]+) rollouts \(([\d,]+) trainable", capsys.readouterr().err)
        app = scan_table(SAMPLES / "run", workers=1, final_responses=str(sample_records(REPO, SAMPLES / "run")))
        trainable = sum(1 for v in app.column("mask_sample").to_pylist() if not v)
        assert (int(said[1].replace(",", "")), int(said[2].replace(",", ""))) == (app.num_rows, trainable)
        assert pq.read_table(tmp_path / "run.parquet").column("mask_sample").equals(app.column("mask_sample"))


# =========================================================================== 15: build on a tree


@pytest.mark.parametrize("command", ["build", "inspect"])
def test_a_directory_s_subdirectories_are_named_in_a_note_pointing_to_scan(command, tmp_path, capsys):
    top = tmp_path / "top"
    top.mkdir()
    _snapshot(top, "a")
    for name in ("run", "store", ".hidden"):
        (top / name).mkdir()
        _snapshot(top / name, f"in-{name.strip('.')}")
    assert main([command, str(top)]) == 0
    out, err = capsys.readouterr()
    notes = [line for line in err.splitlines() if "subdirector" in line]
    assert len(notes) == 1, err
    assert notes[0].startswith(f"tokencap: note: {top}: 2 subdirectories not read (run, store)")
    assert f"tokencap scan {top} -o" in notes[0] and ".hidden" not in notes[0]
    assert "in-run" not in out  # still not read: the note says what happened, the build is as before


def test_the_bundled_samples_directory_names_its_subdirectories(tmp_path, capsys):
    rollout = json.loads((SAMPLES / "clean_multiturn_tools.json").read_text())["rollout_id"]
    assert main(["build", str(SAMPLES), "--rollout", rollout, "-o", str(tmp_path / "one.json")]) == 0
    err = capsys.readouterr().err
    assert ("7 subdirectories not read (capture_store, final_responses, qwen3, rollout_records, rollouts, run, "
            "run_after_fix)"
            in err)


def test_a_directory_without_subdirectories_has_no_such_note(tmp_path, capsys):
    _snapshot(tmp_path)
    assert main(["build", str(tmp_path / "a.json")]) == 0
    assert main(["build", str(tmp_path)]) == 0
    assert "subdirector" not in capsys.readouterr().err


# =========================================================================== 16: the diff printout


def _row(rollout_id: str, reasons: tuple[str, ...] = (), status: str | None = "completed",
         incomplete_reason: str | None = None, task: int | None = None, index: int | None = None) -> dict:
    out: dict = {}
    for f in SCHEMA:
        out[f.name] = [] if pa.types.is_list(f.type) else (False if pa.types.is_boolean(f.type) else
                                                            (None if pa.types.is_string(f.type) else 0))
    ordered = [r for r in MASK_REASON_ORDER if r in reasons]
    out.update(rollout_id=rollout_id, source=f"{rollout_id}.json", snapshot_id=rollout_id, mask_sample=bool(ordered),
               mask_reasons=ordered, status=status, incomplete_reason=incomplete_reason, delivered_fraction=1.0,
               reward=None, task_index=task, rollout_index=index, source_mtime=0.0)
    for r in MASK_REASON_ORDER:
        out[f"reason_{r}"] = r in ordered
    return out


def _table(*rows: dict) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=SCHEMA)


RUN_A = _table(_row("r1", ("terminal_call_not_delivered",)), _row("r2"),
               _row("r3", status="incomplete", incomplete_reason="max_output_tokens"),
               _row("r4", status="incomplete", incomplete_reason="content_filter"),
               _row("r5", ("load_error",), status=None))
RUN_B = _table(_row("r1"), _row("r2", status="incomplete", incomplete_reason="max_output_tokens"),
               _row("r3", status="incomplete", incomplete_reason="max_output_tokens"),
               _row("r4", status="incomplete", incomplete_reason="other"), _row("r5"))


def test_the_diff_headers_sit_over_their_values():
    from tokencap.run.diff import diff_tables, summary_text

    diff = diff_tables(RUN_A, RUN_B)
    lines = summary_text(diff).splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("mask reasons"))
    ends = {name: header_end for name, header_end in
            ((m.group(), m.end()) for m in re.finditer(r"\bA\b|\bB\b|change", lines[header]))}
    rows = [line for line in lines[header + 1:] if re.search(r"%\s+\S+%\s+[+-]", line)]
    assert len(rows) == len(MASK_REASON_ORDER) + len(diff.summary.status_counts) == 15  # reasons, then statuses
    for line in rows:
        values = list(re.finditer(r"\S+%|[+-]\d+\.\d pp", line))
        assert [v.end() for v in values] == [ends["A"], ends["B"], ends["change"]], (lines[header], line)


def test_the_diff_status_shares_split_incomplete_as_the_run_page_does():
    from tokencap.run.diff import diff_tables, summary_text
    from tokencap.run.table import STATUSES
    from tokencap.views.run.frame import run_frame

    diff = diff_tables(RUN_A, RUN_B)
    page_a = run_frame(RUN_A)["status"].value_counts()
    page_b = run_frame(RUN_B)["status"].value_counts()
    expected = {s: (int(page_a[s]), int(page_b[s])) for s in STATUSES if page_a[s] or page_b[s]}
    assert diff.summary.status_counts == expected
    assert expected == {"completed": (2, 2), "max_output_tokens": (1, 2), "content_filter": (1, 0),
                        "incomplete": (0, 1), "no response": (1, 0)}
    text = summary_text(diff)
    for status in expected:
        assert re.search(rf"^  {re.escape(status)}\s+\d", text, re.M), (status, text)


def test_the_status_split_reads_a_page_frame_like_its_table():
    from tokencap.run.diff import diff_tables

    frame = RUN_A.to_pandas()
    assert diff_tables(frame, RUN_B).summary.status_counts == diff_tables(RUN_A, RUN_B).summary.status_counts


@pytest.fixture
def no_scan(monkeypatch):
    import tokencap.run as run

    def refuse(*args, **kwargs):
        raise AssertionError("a run was scanned")

    monkeypatch.setattr(run, "scan_table", refuse)


def _records(path: Path, rollouts: dict[str, tuple[int | None, int | None]]) -> Path:
    response = {"object": "response", "output": [], "status": "completed"}
    lines = []
    for rollout, (task, index) in rollouts.items():
        record = {"rollout_id": rollout, "response": response}
        if task is not None:
            record["_ng_task_index"] = task
        if index is not None:
            record["_ng_rollout_index"] = index
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return path


def _join_error(name: str) -> str:
    from tokencap.run.diff import no_task_key

    return f"tokencap: error: {no_task_key(name)}"


def test_a_task_join_of_run_directories_without_indices_is_refused_before_any_scan(no_scan, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    _snapshot(run)
    assert main(["diff", str(run), str(run), "--join", "task", "--workers", "1"]) == 2
    assert _one_error(capsys) == _join_error(str(run))
    unkeyed = _records(tmp_path / "unkeyed.jsonl", {"a": (3, None)})  # a task index alone is no key
    keyed = _records(tmp_path / "keyed.jsonl", {"a": (3, 0)})
    assert main(["diff", str(run), str(run), "--join", "task", "--final-responses-a", str(keyed),
                 "--final-responses-b", str(unkeyed)]) == 2
    assert _one_error(capsys) == _join_error(str(run))


def test_a_task_join_of_a_table_without_indices_is_refused_before_the_other_run_is_scanned(no_scan, tmp_path,
                                                                                         capsys):
    run = tmp_path / "run"
    run.mkdir()
    _snapshot(run)
    table = tmp_path / "a.parquet"
    pq.write_table(RUN_A, table)
    keyed = _records(tmp_path / "keyed.jsonl", {"a": (3, 0)})
    assert main(["diff", str(table), str(run), "--join", "task", "--final-responses-b", str(keyed)]) == 2
    assert _one_error(capsys) == _join_error(str(table))
    assert main(["diff", str(run), str(table), "--join", "task", "--final-responses-a", str(keyed)]) == 2
    assert _one_error(capsys) == _join_error(str(table))


def test_a_task_join_that_can_be_still_scans_and_joins(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    _snapshot(run)
    keyed = _records(tmp_path / "keyed.jsonl", {"a": (3, 0)})
    table = tmp_path / "b.parquet"
    pq.write_table(_table(_row("other-id", task=3, index=0)), table)
    assert main(["diff", str(run), str(table), "--join", "task", "--final-responses-a", str(keyed),
                 "--workers", "1"]) == 0
    assert "rollouts: 1 in both, 0 only in A, 0 only in B" in capsys.readouterr().out
