"""Inputs for the diagnosis tests: tiny tokenizers, a rollout with one break, records files, harness
evidence, and the CLI called in-process.

Not a test module: test modules import from here, never from each other.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import entry_dict, snapshot_dict

from tokencap.cli import main
from tokencap.views.model import RolloutView

X, Y, XY = 1, 2, 3  # token ids: "x", "y" and the one token "x y" (same text, other ids)


def tokenizer_file(path: Path) -> Path:
    """A tiny word-level tokenizer.json: ids 0..199 are "w0".."w199", 1 is "x", 2 "y", 3 the token "x y"."""
    from tokenizers import Tokenizer, models

    vocab = {f"w{i}": i for i in range(200)}
    for word, i in (("x", X), ("y", Y), ("x y", XY)):
        del vocab[f"w{i}"]
        vocab[word] = i
    Tokenizer(models.WordLevel(vocab, unk_token="w0")).save(str(path))
    return path


def word_tokenizer_json() -> bytes:
    """A word-level tokenizer.json of 50,000 words "w1".."w49999" (skips without the tokenizers package)."""
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {"[UNK]": 0, **{f"w{i}": i for i in range(1, 50_000)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece()
    return tok.to_str().encode()


def broken_rollout(rollout_id: str, *, replaced: bool = True) -> dict:
    """call-0001 generated "x y"; call-0002 claims it as parent but its prompt carries the one token
    "x y" in its place (a boundary: parent_digest_mismatch, cause tokens_replaced; retokenized with
    `tokenizer_file`). ``replaced=False``: a clean two-call chain."""
    tail = list(range(20, 30))
    root = entry_dict("call-0001", [10, 11, 12, 13, 14], [X, Y, *tail], rollout_id=rollout_id, created_at=1.0)
    carried = [XY, *tail] if replaced else [X, Y, *tail]
    child = entry_dict("call-0002", [10, 11, 12, 13, 14, *carried, 30, 31, 32, 33, 34, 35, 36, 37, 38], [40, 41],
                       rollout_id=rollout_id, resolution="resolved", parent="call-0001", created_at=2.0)
    return snapshot_dict([root, child], rollout_id=rollout_id)


def records_file(path: Path, run_ids: list[str], extra: dict[str, dict] | None = None) -> Path:
    """A rollout records file: one record per id of ``run_ids`` (reward 1.0, a one-message response),
    updated with ``extra[id]``."""
    lines = []
    for rid in run_ids:
        record = {"rollout_id": rid, "reward": 1.0,
                  "response": {"object": "response", "output": [
                      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}]}}
        record.update((extra or {}).get(rid, {}))
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return path


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """`tokencap ARGV` in-process: (exit code, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def view_of(snapshot: dict, evidence: dict | None = None) -> RolloutView:
    """The view of a snapshot's first rollout, with the harness ``evidence``."""
    from tokencap import load_snapshots

    return RolloutView(load_snapshots(json.dumps(snapshot).encode())[0], evidence=evidence)


# --------------------------------------------------------------------------- harness evidence


def observations(*records, **extra):
    return {"ng_agent_observations": {"source": "harness", "records": list(records), "gaps": []}, **extra}


def ref(call_id=None, response_id=None):
    out = {"model_ref": "policy"}
    if call_id is not None:
        out["model_call_id"] = call_id
    if response_id is not None:
        out["response_id"] = response_id
    return out


def compaction(after, calls=(), **fields):
    return {"kind": "context_compaction", "after_model_call": after, "model_calls": list(calls), "trigger": "tokens",
            "tokens_before": 4000, "tokens_after": 300, "observed_at": 12.5, **fields}


def compaction_and_subagent() -> RolloutView:
    """a -> a2 -> s (the compaction's summary request); b the compacted context (a new root); sa1 -> sa2 a
    sub-agent's invocation (a new root too), with the harness's evidence of both."""
    from diagnosis_cases import Case

    case = Case()
    case.brk(case.s + case.fresh(6), call_id="s", resolution="resolved", claimed="a2")
    case.brk(case.opening + case.fresh(30), call_id="b", resolution="root")
    case.brk(case.fresh(25), call_id="sa1", resolution="root")
    case.c.call("sa2", "sa1")
    evidence = observations(
        compaction(ref("b"), [ref("s")]),
        {"kind": "agent_invocation", "invocation_id": "inv-2", "parent_invocation_id": "inv-1",
         "spawned_by_tool_call_id": "t9", "model_calls": [ref("sa1"), ref("sa2")]})
    return RolloutView(case.c.snapshot(), evidence=evidence)
