"""`tokencap inspect` prints each break (docs/contract.md#diagnosis); `build` is unchanged by it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from diagnosis_cases import Case, tiny_tokenizer
from helpers_diagnosis import run_cli
from synth_snapshots import Capture

from tokencap import build_rollout, load_snapshots
from tokencap.cli import main
from tokencap.export import write_summary


def breaks_section(out: str) -> str:
    return out[out.index("breaks (why the lineage is not one proven chain)"):]


@pytest.fixture(scope="module")
def tokenizer_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tiny_tokenizer(path)
    return path


def reasoning_capture(tokenizer) -> Capture:
    """call-2's prompt leaves out call-1's reasoning; call-3 is a fresh context."""
    enc = lambda text: tokenizer.encode(text).ids  # noqa: E731
    c = Capture("think", seed=1)
    opening = enc("<|im_start|>the model reads the question<|im_end|>")
    think, answer = enc("<think>the model thinks about the answer</think>"), enc("hello world, this is the answer")
    c.call("call-1", prompt=opening, generation=think + answer, finish_reason="stop")
    c.call("call-2", prompt=opening + answer + enc("<|im_end|>the tool returned three results"), generation=enc("ok"),
           resolution="unresolved")
    c.call("call-3", prompt=enc("a small corpus for a tiny tokenizer"), generation=enc("yes"), resolution="unresolved")
    return c


def test_inspect_prints_each_break_with_texts_cause_hint_and_evidence(tmp_path, capsys, tokenizer_path):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    capture = reasoning_capture(tokenizer)
    opening = len(tokenizer.encode("<|im_start|>the model reads the question<|im_end|>").ids)
    think = len(tokenizer.encode("<think>the model thinks about the answer</think>").ids)
    src = tmp_path / "think.json"
    src.write_bytes(capture.json_bytes())
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"rollout_id": "think", "response": {"output": []}, "ng_agent_observations": {
        "records": [{"kind": "agent_invocation", "invocation_id": "sub", "parent_invocation_id": "top",
                     "model_calls": [{"model_call_id": "call-3"}]}, {"kind": "mystery"}]}}) + "\n")
    code, out, err = run_cli(capsys, "inspect", str(src), "--tokenizer", str(tokenizer_path), "--final-responses",
                             str(records))
    assert code == 0, err
    text = breaks_section(out)
    assert "  call-2: boundary (parent_unresolved)" in text
    assert "    predecessor: call-1 (nearest: the earlier call sharing the longest prefix with its prompt)" in text
    assert f"agree {opening} of " in text and "predecessor tokens; prompt" in text
    assert (f"divergence 1: predecessor [{opening}:{opening + think}) ({think} tokens) -> prompt "
            f"[{opening}:{opening}) (0 tokens): generation_dropped") in text
    assert '      predecessor text: "<think>the model thinks about the answer</think>"' in text
    assert '      prompt text:      ""' in text
    assert "    cause: generation_dropped (its reasoning)" in text
    assert "    hint: Tokens the model generated earlier are missing" in text
    assert "  call-3: boundary (parent_unresolved)" in text
    assert "    cause: subagent; the tokens alone say new_context" in text
    assert "    evidence: call-3 ran in invocation sub, a sub-agent of top" in text
    assert "note: rollout think: harness evidence ng_agent_observations.records[1].kind is 'mystery'" in text


def test_inspect_without_a_tokenizer_prints_positions_only(tmp_path, capsys):
    case = Case()
    case.brk(case.opening + case.g1 + case.fresh(6) + case.g2)
    src = tmp_path / "case.json"
    src.write_bytes(case.c.json_bytes())
    code, out, _ = run_cli(capsys, "inspect", str(src))
    text = breaks_section(out)
    assert code == 0 and "divergence 1: predecessor [30:35) (5 tokens) -> prompt [30:36) (6 tokens): tokens_replaced" \
        in text
    assert "text:" not in text and "cause: tokens_replaced" in text


def test_inspect_of_one_proven_chain_says_there_is_no_break(tmp_path, capsys):
    src = tmp_path / "case.json"
    src.write_bytes(Case().c.json_bytes())
    code, out, _ = run_cli(capsys, "inspect", str(src))
    assert code == 0 and breaks_section(out).splitlines()[1] == "  none: the rollout is one proven chain"


@pytest.mark.parametrize("bad", ["missing.json", "not-json.json", "."])
def test_a_bad_tokenizer_path_is_one_line_and_exit_2(tmp_path, capsys, bad):
    (tmp_path / "not-json.json").write_text("{ nope")
    src = tmp_path / "case.json"
    src.write_bytes(Case().c.json_bytes())
    code, out, err = run_cli(capsys, "inspect", str(src), "--tokenizer", str(tmp_path / bad))
    assert code == 2 and out == ""
    path = tmp_path / bad
    hint = ("give a tokenizer.json file, a directory holding one (a Hugging Face model directory), or a model name "
            "Org/Name found in the local Hugging Face cache")
    if bad == "missing.json":
        assert err == f"tokencap: error: {path}: no such file or directory; {hint}\n"
    elif bad == ".":
        assert err == f"tokencap: error: {path.resolve()}: a directory without a tokenizer.json; {hint}\n"
    else:  # the rest of the line is the tokenizers library's own words
        assert err.startswith(f"tokencap: error: {path}: not a tokenizer.json the tokenizers library can read (")
        assert err.count("\n") == 1, err


def test_build_writes_the_same_bytes_with_evidence_and_has_no_tokenizer_option(tmp_path, capsys):
    case = Case()
    case.brk(case.opening + case.fresh(30))
    src = tmp_path / "case.json"
    src.write_bytes(case.c.json_bytes())
    expected = io.BytesIO()
    write_summary(expected, build_rollout(load_snapshots(src)[0]))
    plain, with_evidence = tmp_path / "plain.jsonl", tmp_path / "evidence.jsonl"
    plain.write_text(json.dumps({"rollout_id": "case", "response": {"output": []}, "reward": 1.0}) + "\n")
    record = {"rollout_id": "case", "response": {"output": []}, "reward": 1.0, "mask_sample": False,
              "_ng_token_capture": {},
              "ng_agent_observations": {"records": [{"kind": "context_compaction",
                                                     "after_model_call": {"model_call_id": "b"}}]}}
    with_evidence.write_text(json.dumps(record) + "\n")
    code, out_none, _ = run_cli(capsys, "build", str(src))
    assert code == 0
    assert out_none.encode() == expected.getvalue() + b"\n"
    outputs = []
    for records in (plain, with_evidence):  # the same response; only the evidence fields differ
        code, out, _ = run_cli(capsys, "build", str(src), "--final-responses", str(records))
        assert code == 0
        outputs.append(out)
    assert outputs[0] == outputs[1]
    with pytest.raises(SystemExit) as exit_info:
        main(["build", str(src), "--tokenizer", "x.json"])
    assert exit_info.value.code == 2
