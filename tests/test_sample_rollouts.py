"""The NeMo Gym rollouts sample (``sample_data/rollouts/``) is what its generator declares.

``qwen3_rollouts.jsonl`` holds 36 rollout records with token ids on their output items
(docs/contract.md#token-rollouts), in Qwen3's vocabulary (``sample_data/qwen3/``). ``expected.json.txt`` declares, per
rollout, whether it is contiguous, whether it is masked, its status, the items whose prompt
does not continue the call before, and its first break's call, cause (with the Qwen3
tokenizer and, where it differs, without one), reasoning flag and, for a re-encoded word, the
text both sides decode to. These are written by hand
in ``scripts/make_sample_rollouts.py`` from how each scenario's harness rendered its prompts,
never by running tokencap.

Two kinds of checks:
- on the file alone (no tokencap): NeMo RL's contiguity rule on each line gives the declared
  verdict, the records look as NeMo Gym writes them, and the generator is deterministic;
- through the public API: ``load_snapshots``, ``build_rollout`` with the record's response as
  the final response, and ``diagnose`` give the declared verdicts and breaks.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA = REPO_ROOT / "sample_data" / "rollouts"
SOURCE = DATA / "qwen3_rollouts.jsonl"
TOKENIZER = REPO_ROOT / "sample_data" / "qwen3" / "tokenizer.json"
GENERATOR = REPO_ROOT / "scripts" / "make_sample_rollouts.py"
EXPECTED: dict = json.loads((DATA / "expected.json.txt").read_text(encoding="utf-8"))["rollouts"]
IDS = sorted(EXPECTED)
VOCAB = 151669  # Qwen3's BPE ranks and named specials


def rollout_id(record: dict) -> str:
    return f"task{record['_ng_task_index']}-rollout{record['_ng_rollout_index']}"


@cache
def records() -> dict[str, dict]:
    lines = SOURCE.read_text(encoding="utf-8").splitlines()
    return {rollout_id(json.loads(line)): json.loads(line) for line in lines}


def token_items(record: dict) -> list[tuple[str, dict]]:
    return [(f"item-{i:04d}", item) for i, item in enumerate(record["response"]["output"])
            if item.get("generation_token_ids")]


def nemo_rl_first_failure(record: dict) -> str | None:
    """NeMo RL's check: each token-bearing item's prompt starts with every token before it."""
    seen: list[int] = []
    for name, item in token_items(record):
        prompt = item.get("prompt_token_ids") or []
        if prompt[:len(seen)] != seen:
            return name
        seen = prompt + item["generation_token_ids"]
    return None


def pairwise_breaks(record: dict) -> list[str]:
    """docs/contract.md#token-rollouts-calls: call k links when its prompt starts with call k-1's prompt + generation."""
    out, before = [], None
    for name, item in token_items(record):
        prompt = item.get("prompt_token_ids") or []
        if before is not None and prompt[:len(before)] != before:
            out.append(name)
        before = prompt + item["generation_token_ids"]
    return out


# ---------------------------------------------------------------- the file alone


def test_every_line_is_declared_and_the_file_stays_small():
    assert sorted(records()) == IDS
    assert len(IDS) == len(SOURCE.read_text(encoding="utf-8").splitlines()) == 36
    assert SOURCE.stat().st_size < 15_000_000


@pytest.mark.parametrize("rid", IDS)
def test_nemo_rl_contiguity_gives_the_declared_verdict(rid):
    record, exp = records()[rid], EXPECTED[rid]
    first = nemo_rl_first_failure(record)
    assert (first is None) is exp["contiguous"]
    assert exp["mask_sample"] is (not exp["contiguous"])
    assert pairwise_breaks(record) == exp["non_contiguous_items"]
    if first is not None:
        assert first == exp["first_break"]["call_id"] == exp["non_contiguous_items"][0]


@pytest.mark.parametrize("rid", IDS)
def test_records_are_shaped_as_nemo_gym_writes_them(rid):
    record = records()[rid]
    response = record["response"]
    assert {"responses_create_params", "response", "reward", "_ng_task_index", "_ng_rollout_index"} <= set(record)
    assert response["object"] == "response" and response["model"] == "Qwen/Qwen3-8B"
    assert response["status"] == EXPECTED[rid]["status"]
    reason = (response.get("incomplete_details") or {}).get("reason")
    assert reason == EXPECTED[rid]["incomplete_reason"]
    output = response["output"]
    assert {item["type"] for item in output} <= {"reasoning", "message", "function_call", "function_call_output"}
    for index, item in enumerate(output):
        if not item.get("generation_token_ids"):
            assert not ({"prompt_token_ids", "generation_log_probs"} & set(item))
            continue
        # the item that ends a call: the next item is a tool result, a user turn or a new reasoning
        if index + 1 < len(output):
            nxt = output[index + 1]
            assert nxt["type"] in ("function_call_output", "reasoning") or nxt.get("role") == "user"
        ids = item["generation_token_ids"] + (item.get("prompt_token_ids") or [])
        assert all(type(i) is int and 0 <= i < VOCAB for i in ids)
        probs = item["generation_log_probs"]
        assert len(probs) == len(item["generation_token_ids"])
        assert all(math.isfinite(p) and p <= 0 for p in probs)
    calls = {item["call_id"] for item in output if item["type"] == "function_call"}
    assert {item["call_id"] for item in output if item["type"] == "function_call_output"} <= calls


def test_the_sample_shows_every_cause_the_issue_names():
    firsts = [exp["first_break"] for exp in EXPECTED.values() if "first_break" in exp]
    causes = {first["cause"] for first in firsts}
    assert {"generation_dropped", "history_reordered", "tokens_replaced", "retokenized", "prompt_missing",
            "history_dropped"} <= causes
    assert any(first["reasoning"] for first in firsts)
    trainable = [exp for exp in EXPECTED.values() if exp["contiguous"]]
    assert len(trainable) >= 5
    assert any(exp["incomplete_reason"] == "max_output_tokens" for exp in trainable)


def test_the_generator_is_deterministic(tmp_path):
    done = subprocess.run([sys.executable, str(GENERATOR), str(tmp_path)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    for name in ("qwen3_rollouts.jsonl", "expected.json.txt"):
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), (
            f"regenerating changed {name}; run `python scripts/make_sample_rollouts.py` and commit")


# ---------------------------------------------------------------- through the public API


@cache
def snapshots() -> dict:
    from tokencap import load_snapshots

    return {snapshot.rollout_id: snapshot for snapshot in load_snapshots(SOURCE)}


@cache
def tokenizer():
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(TOKENIZER))


@cache
def built(rid: str):
    from tokencap import build_rollout

    return build_rollout(snapshots()[rid], final_response=records()[rid]["response"])


def test_the_file_loads_as_one_rollout_per_record():
    assert sorted(snapshots()) == IDS


@pytest.mark.parametrize("rid", IDS)
def test_the_build_gives_the_declared_verdict(rid):
    result, exp = built(rid), EXPECTED[rid]
    assert result.mask_sample is exp["mask_sample"], result.mask_reasons
    assert result.metrics["status"] == exp["status"]
    assert result.metrics["incomplete_reason"] == exp["incomplete_reason"]


@pytest.mark.parametrize("rid", IDS)
def test_the_diagnosis_gives_the_declared_breaks(rid, tmp_path, monkeypatch):
    from tokencap import diagnose

    # an empty Hugging Face cache: without a tokenizer nothing may decode (docs/contract.md#tokenizers)
    for name in ("HF_HUB_CACHE", "HF_HOME"):
        monkeypatch.setenv(name, str(tmp_path))
    exp = EXPECTED[rid]
    breaks = diagnose(built(rid), tokenizer=tokenizer(), evidence=records()[rid])
    assert [b.call_id for b in breaks] == exp["non_contiguous_items"]
    if not breaks:
        return
    first, declared = breaks[0], exp["first_break"]
    names = [name for name, _ in token_items(records()[rid])]
    assert first.predecessor == names[names.index(first.call_id) - 1] and first.relation == "claimed"
    assert (first.cause, first.token_cause, first.reasoning) == (declared["cause"], declared["cause"],
                                                                 declared["reasoning"])
    if "decoded_text" in declared:  # decoded in Qwen3's vocabulary, both sides read the same (docs/contract.md#decoded-text)
        assert (first.parent_text, first.prompt_text, first.same_text) == (declared["decoded_text"],) * 2 + (True,)
    bare = diagnose(built(rid), evidence=records()[rid])[0]
    assert bare.cause == declared.get("cause_without_tokenizer", declared["cause"])
    assert bare.parent_text is None and bare.same_text is None
