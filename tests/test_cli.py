"""docs/contract.md#command-line: the command line (`python -m tokencap build|inspect`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import Conv, as_refusal_line, jsonl_bytes, linear_chain, refusal_dict, snapshot_dict

from tokencap.cli import main

SUMMARY_KEYS = {"rollout_id", "mask_sample", "mask_reasons", "metrics", "rebuilt_response"}


def write_snapshot(path: Path, conv: Conv, **fields) -> Path:
    path.write_text(json.dumps(snapshot_dict(conv.records, **fields)))
    return path


def clean(tmp_path: Path) -> Path:
    return write_snapshot(tmp_path / "clean.json", linear_chain(3, rollout_id="roll-clean"))


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err: str, message: str, *, then_the_parser_s_words: bool = False) -> None:
    """``err`` is exactly the one line "tokencap: error: MESSAGE"; with ``then_the_parser_s_words``, MESSAGE
    is followed by the JSON parser's own words (whose wording is the parser's, not tokencap's)."""
    assert err.endswith("\n") and "\n" not in err[:-1], f"error spans several lines: {err!r}"
    if then_the_parser_s_words:
        assert err.startswith(f"tokencap: error: {message}"), err
    else:
        assert err == f"tokencap: error: {message}\n"


# =========================================================================== build


def test_build_snapshot_file_prints_one_json_object(tmp_path: Path, capsys) -> None:
    conv = linear_chain(3, rollout_id="roll-clean")
    src = write_snapshot(tmp_path / "clean.json", conv)
    code, out, err = run_cli(capsys, "build", str(src))
    assert code == 0, err
    obj = json.loads(out)
    assert isinstance(obj, dict)
    assert set(obj) == SUMMARY_KEYS
    assert obj["rollout_id"] == "roll-clean"
    assert obj["mask_sample"] is False and obj["mask_reasons"] == []
    assert obj["metrics"]["n_calls"] == 3
    resp = obj["rebuilt_response"]
    assert resp["object"] == "response" and resp["status"] == "completed"
    toks = [i for i in resp["output"] if "generation_token_ids" in i]
    assert [i["prompt_token_ids"] for i in toks] == [conv.prompt[c] for c in sorted(conv.prompt)]
    assert [i["generation_token_ids"] for i in toks] == [conv.gen[c] for c in sorted(conv.gen)]


def test_build_output_keeps_uint64_token_ids_exact(tmp_path: Path, capsys) -> None:
    conv = Conv("roll-big")
    conv.root("call-1", prompt=[0, 2**64 - 1], gen=[2**63 + 1])
    src = write_snapshot(tmp_path / "big.json", conv)
    code, out, _ = run_cli(capsys, "build", str(src))
    assert code == 0
    item = json.loads(out)["rebuilt_response"]["output"][0]
    assert item["prompt_token_ids"] == [0, 2**64 - 1]
    assert item["generation_token_ids"] == [2**63 + 1]


def test_build_multi_rollout_jsonl_writes_jsonl(tmp_path: Path, capsys) -> None:
    a = linear_chain(2, rollout_id="roll-A")
    b = linear_chain(3, rollout_id="roll-B")
    src = tmp_path / "log.jsonl"
    src.write_bytes(jsonl_bytes(a.records + b.records
                                + [as_refusal_line(refusal_dict("call-x", parent="call-0003", rollout_id="roll-B",
                                                                recorded_at=99.0))]))
    code, out, err = run_cli(capsys, "build", str(src))
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 2
    objs = {o["rollout_id"]: o for o in map(json.loads, lines)}
    assert set(objs) == {"roll-A", "roll-B"}
    assert all(set(o) == SUMMARY_KEYS for o in objs.values())
    assert objs["roll-B"]["metrics"]["engine_refusals"] == 1
    assert objs["roll-B"]["rebuilt_response"]["status"] == "incomplete"
    assert objs["roll-A"]["rebuilt_response"]["status"] == "completed"


def test_build_rollout_option_selects_one(tmp_path: Path, capsys) -> None:
    a = linear_chain(2, rollout_id="roll-A")
    b = linear_chain(3, rollout_id="roll-B")
    src = tmp_path / "log.jsonl"
    src.write_bytes(jsonl_bytes(a.records + b.records))
    code, out, _ = run_cli(capsys, "build", str(src), "--rollout", "roll-B")
    assert code == 0
    obj = json.loads(out)
    assert isinstance(obj, dict) and obj["rollout_id"] == "roll-B"
    assert obj["metrics"]["n_calls"] == 3


def test_build_terminal_call_id(tmp_path: Path, capsys) -> None:
    src = write_snapshot(tmp_path / "s.json", linear_chain(4, rollout_id="r"))
    code, out, _ = run_cli(capsys, "build", str(src), "--terminal-call-id", "call-0002")
    assert code == 0
    obj = json.loads(out)
    assert obj["mask_reasons"] == []
    assert obj["metrics"]["after_terminal_calls"] == 2
    assert len(obj["rebuilt_response"]["output"]) == 2
    code, out, _ = run_cli(capsys, "build", str(src), "--terminal-call-id", "call-nope")
    assert code == 0
    assert json.loads(out)["mask_reasons"] == ["terminal_call_not_delivered"]


def test_build_to_output_file(tmp_path: Path, capsys) -> None:
    src = clean(tmp_path)
    dest = tmp_path / "out" / "result.json"
    dest.parent.mkdir()
    code, out, err = run_cli(capsys, "build", str(src), "-o", str(dest))
    assert code == 0, err
    assert out.strip() == ""
    obj = json.loads(dest.read_text())
    assert set(obj) == SUMMARY_KEYS and obj["rollout_id"] == "roll-clean"


def test_masked_build_exits_zero(tmp_path: Path, capsys) -> None:
    conv = Conv("roll-m")
    conv.root("call-r")
    conv.child("call-a1", "call-r")
    conv.retry("call-a2", "call-a1")
    src = write_snapshot(tmp_path / "m.json", conv, incomplete=True)
    code, out, _ = run_cli(capsys, "build", str(src))
    assert code == 0
    obj = json.loads(out)
    assert obj["mask_sample"] is True
    assert obj["mask_reasons"] == ["capture_incomplete", "unresolved_retries"]


def test_directory_with_a_bad_rollout_still_builds(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "GOOD.tokens.jsonl").write_bytes(jsonl_bytes(linear_chain(2, rollout_id="GOOD").records))
    (store / "BAD.tokens.jsonl").write_bytes(b"{not json\n")
    code, out, err = run_cli(capsys, "build", str(store))
    assert code == 0, err
    objs = {o["rollout_id"]: o for o in map(json.loads, out.splitlines())}
    assert objs["GOOD"]["mask_reasons"] == []
    assert objs["BAD"]["mask_reasons"] == ["load_error", "capture_incomplete"]
    assert objs["BAD"]["rebuilt_response"] is None
    assert objs["BAD"]["metrics"]["error"]


# =========================================================================== unreadable input


UNREADABLE = {
    "missing": "{src}: no such file or directory",
    "bad_json": "{src}, line 1: not valid JSON (",
    "empty": "{src}: the input is empty; expected a snapshot JSON object or JSON lines",
    "bad_record": ("{src}: NaN at line 1, byte 613 is not JSON (JSON has no NaN or Infinity: write null, or a finite "
                   "number, there)"),
    "mixed_rollouts": ("{src}: entries belong to several rollouts (a, b); a snapshot holds one rollout -- split it, "
                       "or use entries JSONL, which groups by rollout_id"),
}


@pytest.mark.parametrize("kind", list(UNREADABLE))
def test_unreadable_input_exits_2_with_one_line_and_no_output_file(kind: str, tmp_path: Path, capsys) -> None:
    src = tmp_path / "input.json"
    if kind == "bad_json":
        src.write_text('{"entries": [ {"rollout_id": ')
    elif kind == "empty":
        src.write_text("  \n")
    elif kind == "bad_record":
        conv = linear_chain(2, rollout_id="r")
        conv.records[1]["model_call_id"] = "call\nwith\nnewlines"
        conv.records[1]["generation_log_probs"] = [float("nan")] * 3
        src.write_text(json.dumps(snapshot_dict(conv.records)))
    elif kind == "mixed_rollouts":
        src.write_text(json.dumps(snapshot_dict(linear_chain(1, rollout_id="a").records
                                                + linear_chain(1, rollout_id="b").records)))
    dest = tmp_path / "never.json"
    code, out, err = run_cli(capsys, "build", str(src), "-o", str(dest))
    assert code == 2
    assert_one_line_error(err, UNREADABLE[kind].format(src=src), then_the_parser_s_words=kind == "bad_json")
    assert not dest.exists()
    assert list(tmp_path.glob("never*")) == []
    assert out.strip() == ""


def test_out_of_range_number_exits_2(tmp_path: Path, capsys) -> None:
    conv = linear_chain(2, rollout_id="r")
    text = json.dumps(conv.records[0]) + "\n" + json.dumps(conv.records[1]).replace(
        str(conv.records[1]["generation_log_probs"][0]), "1e400", 1) + "\n"
    assert "1e400" in text
    src = tmp_path / "range.jsonl"
    src.write_text(text)
    dest = tmp_path / "out.json"
    code, _, err = run_cli(capsys, "build", str(src), "-o", str(dest))
    assert code == 2
    assert_one_line_error(err, f"{src}, line 2: call 'call-0002': field 'generation_log_probs': the value cannot be "
                               "read: ", then_the_parser_s_words=True)
    assert not dest.exists()


def test_directory_with_an_out_of_range_number_still_builds_the_others(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "GOOD.tokens.jsonl").write_bytes(jsonl_bytes(linear_chain(2, rollout_id="GOOD").records))
    bad = linear_chain(1, rollout_id="BAD").records[0]
    (store / "BAD.tokens.jsonl").write_text(json.dumps(bad).replace(str(bad["generation_log_probs"][0]), "1e400", 1)
                                            + "\n")
    code, out, _ = run_cli(capsys, "build", str(store))
    assert code == 0
    objs = {o["rollout_id"]: o for o in map(json.loads, out.splitlines())}
    assert objs["GOOD"]["mask_reasons"] == []
    assert objs["BAD"]["mask_reasons"][0] == "load_error"


def test_unreadable_input_leaves_an_existing_output_untouched(tmp_path: Path, capsys) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text("[1, 2]\n")
    dest = tmp_path / "previous.json"
    dest.write_bytes(b"previous result\n")
    code, _, err = run_cli(capsys, "build", str(src), "-o", str(dest))
    assert code == 2
    assert_one_line_error(err, f"{src}: a JSON array, not a snapshot: expected a snapshot (a JSON object with "
                               "'entries'), entries JSONL (one record a line), or a capture-store directory")
    assert dest.read_bytes() == b"previous result\n"


# =========================================================================== inspect


def test_inspect_prints_a_tree(tmp_path: Path, capsys) -> None:
    conv = Conv("roll-i")
    conv.root("call-root")
    conv.child("call-kept", "call-root")
    conv.retry("call-dropped", "call-kept")
    conv.child("call-loose", "call-root", resolution="unresolved")
    src = write_snapshot(tmp_path / "i.json", conv)
    code, out, err = run_cli(capsys, "inspect", str(src))
    assert code == 0, err
    for cid in ("call-root", "call-kept", "call-dropped", "call-loose"):
        assert cid in out, cid
    assert "roll-i" in out
    assert "quarantin" in out.lower()
    dropped_lines = [ln for ln in out.splitlines() if "call-dropped" in ln]
    assert any("quarantin" in ln.lower() for ln in dropped_lines), dropped_lines
    for reason in ("unresolved_retries", "unresolved_parent_calls", "multiple_roots", "multiple_chains"):
        assert reason in out, reason
    assert "parent_unresolved" in out


def test_inspect_unreadable_input_exits_2(tmp_path: Path, capsys) -> None:
    code, out, err = run_cli(capsys, "inspect", str(tmp_path / "nope.json"))
    assert code == 2
    assert_one_line_error(err, f"{tmp_path / 'nope.json'}: no such file or directory")


# =========================================================================== a real process


def test_python_dash_m_tokencap(tmp_path: Path) -> None:
    src = clean(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "tokencap", "build", str(src)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    assert set(obj) == SUMMARY_KEYS and obj["mask_sample"] is False

    dest = tmp_path / "o.json"
    proc = subprocess.run([sys.executable, "-m", "tokencap", "build", str(tmp_path / "missing.json"), "-o",
                           str(dest)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert_one_line_error(proc.stderr, f"{tmp_path / 'missing.json'}: no such file or directory")
    assert not dest.exists()


def test_inspect_directory_with_a_bad_rollout(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "GOOD.tokens.jsonl").write_bytes(jsonl_bytes(linear_chain(2, rollout_id="GOOD").records))
    (store / "BAD.tokens.jsonl").write_bytes(b"{not json\n")
    (store / "BAD.tokens.intents").write_text("call-0001\n")
    code, out, err = run_cli(capsys, "inspect", str(store))
    assert code == 0, err
    assert "GOOD" in out and "BAD" in out
    assert "load_error" in out
    assert "call-0001" in out and "call-0002" in out


def test_a_bad_rollout_in_a_directory_is_reported_on_stderr_and_the_rest_build(tmp_path, capsys) -> None:
    import shutil
    from pathlib import Path as _Path

    store = tmp_path / "store"
    shutil.copytree(_Path(__file__).resolve().parent / "data" / "upstream_store", store)
    (store / "broken.json").write_text('{"entries": [1')
    out = tmp_path / "out.jsonl"
    assert main(["build", str(store), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "warning: rollout 'broken' could not be loaded" in err and "broken.json" in err
    lines = out.read_text().splitlines()
    assert len(lines) == 3


def test_a_reader_that_stops_early_is_not_an_error(tmp_path: Path) -> None:
    """`tokencap build RUN | head` : the closed pipe ends the command quietly, with 141 (128 + SIGPIPE) as any Unix
    filter the closed pipe stops (issue 37.17: exit 0 said the whole output had been read)."""
    src = Path(__file__).resolve().parent.parent / "sample_data" / "run"
    proc = subprocess.Popen([sys.executable, "-m", "tokencap", "build", str(src)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(100)
    proc.stdout.close()  # the reader goes away while far more than a pipe's buffer is still to come
    err = proc.stderr.read().decode()
    assert proc.wait() == 141, err
    assert "error" not in err and "Broken pipe" not in err and "Exception ignored" not in err
