"""docs/contract.md#command-line to #attribution: `tokencap build|inspect --final-responses FILE`."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import Conv, jsonl_bytes, snapshot_dict

from tokencap.cli import main

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def title_conv(rollout_id: str = "r1") -> Conv:
    conv = Conv(rollout_id)
    conv.root("call-1")
    conv.child("call-2", "call-1")
    conv.child("call-3", "call-2")  # a title request after the final answer call-2
    return conv


def final_for(conv: Conv, call_id: str, rollout_id: str | None = None) -> dict:
    response = {"object": "response", "output": [
        {"type": "message", "role": "assistant", "content": [],
         "prompt_token_ids": conv.prompt[call_id], "generation_token_ids": conv.gen[call_id]}]}
    return response if rollout_id is None else {"rollout_id": rollout_id, "reward": 1, "response": response}


def test_build_anchors_on_the_attributed_call(tmp_path: Path, capsys) -> None:
    conv = title_conv()
    src = tmp_path / "snap.json"
    src.write_text(json.dumps(snapshot_dict(conv.records)))
    finals = tmp_path / "finals.json"
    finals.write_text(json.dumps(final_for(conv, "call-2", "r1")))
    code, out, err = run_cli(capsys, "build", str(src), "--final-responses", str(finals))
    assert code == 0, err
    obj = json.loads(out)
    assert obj["mask_sample"] is False
    assert obj["metrics"]["terminal_attribution"] == {"outcome": "attributed", "method": "tokens",
                                                      "call_id": "call-2", "candidates": ["call-2"]}
    assert obj["metrics"]["after_terminal_calls"] == 1
    tokens = [i for i in obj["rebuilt_response"]["output"] if "generation_token_ids" in i]
    assert tokens[-1]["generation_token_ids"] == conv.gen["call-2"]
    # Without the file the title call is the last step.
    code, out, _ = run_cli(capsys, "build", str(src))
    assert json.loads(out)["metrics"]["terminal_attribution"] is None
    assert [i for i in json.loads(out)["rebuilt_response"]["output"]][-1]["generation_token_ids"] == conv.gen["call-3"]


def test_rollouts_the_file_does_not_name_build_as_before_and_unknown_ones_are_a_note(tmp_path: Path,
                                                                                       capsys) -> None:
    a, b = title_conv("roll-a"), title_conv("roll-b")
    src = tmp_path / "two.jsonl"
    src.write_bytes(jsonl_bytes(a.records + b.records))
    finals = tmp_path / "finals.jsonl"
    finals.write_bytes(jsonl_bytes([final_for(a, "call-2", "roll-a"), final_for(a, "call-1", "elsewhere")]))
    code, out, err = run_cli(capsys, "build", str(src), "--final-responses", str(finals))
    assert code == 0
    rows = {r["rollout_id"]: r for r in map(json.loads, out.splitlines())}
    assert rows["roll-a"]["metrics"]["terminal_attribution"]["call_id"] == "call-2"
    assert rows["roll-b"]["metrics"]["terminal_attribution"] is None
    assert rows["roll-b"]["metrics"]["after_terminal_calls"] == 0
    assert "note" in err and "elsewhere" in err and "error" not in err


def test_an_unnamed_response_needs_a_single_rollout_source(tmp_path: Path, capsys) -> None:
    a, b = title_conv("roll-a"), title_conv("roll-b")
    finals = tmp_path / "bare.json"
    finals.write_text(json.dumps(final_for(a, "call-2")))
    one = tmp_path / "one.json"
    one.write_text(json.dumps(snapshot_dict(a.records)))
    code, out, err = run_cli(capsys, "build", str(one), "--final-responses", str(finals))
    assert json.loads(out)["metrics"]["terminal_attribution"]["outcome"] == "attributed" and not err
    two = tmp_path / "two.jsonl"
    two.write_bytes(jsonl_bytes(a.records + b.records))
    code, out, err = run_cli(capsys, "build", str(two), "--rollout", "roll-a", "--final-responses", str(finals))
    assert code == 0
    assert json.loads(out)["metrics"]["terminal_attribution"] is None
    assert "single rollout" in err


def test_an_explicit_terminal_id_wins(tmp_path: Path, capsys) -> None:
    conv = title_conv()
    src = tmp_path / "snap.json"
    src.write_text(json.dumps(snapshot_dict(conv.records)))
    finals = tmp_path / "finals.json"
    finals.write_text(json.dumps(final_for(conv, "call-2", "r1")))
    code, out, _ = run_cli(capsys, "build", str(src), "--final-responses", str(finals), "--terminal-call-id", "call-1")
    metric = json.loads(out)["metrics"]["terminal_attribution"]
    assert metric == {"outcome": "given", "method": None, "call_id": "call-1", "candidates": []}


def test_a_malformed_file_exits_2_naming_file_line_and_field_and_writes_nothing(tmp_path: Path, capsys) -> None:
    conv = title_conv()
    src = tmp_path / "snap.json"
    src.write_text(json.dumps(snapshot_dict(conv.records)))
    finals = tmp_path / "finals.jsonl"
    finals.write_bytes(jsonl_bytes([final_for(conv, "call-2", "r1"),
                                    {"rollout_id": "r2", "response": {"output": [{"generation_token_ids": [-4]}]}}]))
    out_path = tmp_path / "out.json"
    code, out, err = run_cli(capsys, "build", str(src), "--final-responses", str(finals), "-o", str(out_path))
    assert code == 2 and out == ""
    assert err == (f"tokencap: error: {finals}, line 2: field 'response.output[0].generation_token_ids': token id at "
                   "position 0 is -4; ids must be integers in [0, 2^64) (booleans, floats and strings are not token "
                   "ids)\n")
    assert not out_path.exists()
    code, _, err = run_cli(capsys, "inspect", str(src), "--final-responses", str(tmp_path / "missing.json"))
    assert code == 2 and err == f"tokencap: error: {tmp_path / 'missing.json'}: no such file or directory\n"


def test_inspect_prints_outcome_method_and_candidates(capsys) -> None:
    name = "attributed_twins_finish_disagree"
    code, out, err = run_cli(capsys, "inspect", str(SAMPLES / f"{name}.json"), "--final-responses",
                             str(SAMPLES / "final_responses" / f"{name}.json"))
    assert code == 0, err
    section = out.split("terminal attribution (from the harness's final response)")[1].split("\n\n")[0]
    assert "outcome: attributed -> call-0003" in section
    assert "method: by tokens" in section
    assert "candidates: call-0003, call-0004" in section
    assert "moved to its token-identical twin call-0004" in section
    assert "not delivered, sent after the final answer: call-0005" in section
    assert "withheld" in section
    assert "<- terminal call" in out


def test_inspect_says_why_an_ambiguous_answer_masks(capsys) -> None:
    name = "ambiguous_final_answer"
    code, out, _ = run_cli(capsys, "inspect", str(SAMPLES / f"{name}.json"), "--final-responses",
                           str(SAMPLES / "final_responses" / f"{name}.json"))
    assert code == 0
    assert "MASKED" in out and "terminal_call_not_delivered" in out
    assert "outcome: ambiguous" in out and "method: by content" in out and "candidates: call-0003, call-0005" in out
    assert "nothing is chosen" in out


def test_inspect_without_the_flag_prints_no_attribution(capsys) -> None:
    code, out, _ = run_cli(capsys, "inspect", str(SAMPLES / "title_call_after_final_answer.json"))
    assert code == 0 and "terminal attribution" not in out
