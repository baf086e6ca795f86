"""Every bundled sample's diagnosis (docs/contract.md#diagnosis) is the one its generator declares.

``sample_data/expected.json`` declares, per scenario and rollout, its breaks (call, kind,
cause, token cause, predecessor and relation, reasoning flag), written by
``scripts/make_sample_data.py`` from how the faulty harness rendered each prompt, never by
running the diagnosis. A scenario with a rollout record (``final_responses/``) declares its
breaks for a build with that record's final response and with the record as harness
evidence, and separately for a build without it. The bundled tokenizer refines only
``retokenized`` (``tokens_replaced`` without it); everything else is the same either way.
The sample run's declared causes and delivery are checked in ``test_sample_run.py``.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_DIR = REPO_ROOT / "sample_data"
TOKENIZER = SAMPLE_DIR / "tokenizer.json"
EXPECTED: dict = json.loads((SAMPLE_DIR / "expected.json").read_text(encoding="utf-8"))
CASES = [(name, rid) for name, sample in EXPECTED.items() for rid in sample["rollouts"]]
FIELDS = ("call_id", "kind", "cause", "token_cause", "predecessor", "relation", "reasoning")


@cache
def _tokenizer():
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(TOKENIZER))


@cache
def _snapshots(name: str) -> dict:
    from tokencap import load_snapshots

    return {s.rollout_id: s for s in load_snapshots(SAMPLE_DIR / name)}


@cache
def _records(name: str):
    from tokencap import load_final_responses

    path = EXPECTED[name].get("final_responses")
    return load_final_responses(SAMPLE_DIR / path) if path else None


def _build(name: str, rollout_id: str, *, with_records: bool):
    from tokencap import build_rollout

    records = _records(name) if with_records else None
    single = len(_snapshots(name)) == 1
    response = records.for_rollout(rollout_id, single_rollout=single) if records else None
    evidence = records.evidence_for(rollout_id, single_rollout=single) if records else None
    return build_rollout(_snapshots(name)[rollout_id], final_response=response), evidence


def _got(result, evidence, tokenizer) -> list[dict]:
    from tokencap import diagnose

    return [{k: b.to_dict()[k] for k in FIELDS} for b in diagnose(result, tokenizer=tokenizer, evidence=evidence)]


def _want(declared: list[dict], *, tokenizer: bool) -> list[dict]:
    out = []
    for b in declared:
        row = {k: b[k] for k in FIELDS}
        if not tokenizer and "cause_without_tokenizer" in b:
            row["cause"] = row["token_cause"] = b["cause_without_tokenizer"]
        out.append(row)
    return out


def test_the_tokenizer_is_bundled_and_decodes_the_samples() -> None:
    from tokencap import load_snapshots

    tok = _tokenizer()
    assert tok.get_vocab_size() <= 4000
    for special in ("<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"):
        assert tok.token_to_id(special) is not None, special
    entry = load_snapshots(SAMPLE_DIR / "clean_multiturn_tools.json")[0].entries[0]
    text = tok.decode(list(entry.prompt_token_ids), skip_special_tokens=False)
    assert text.startswith("<|im_start|>system\nYou are a coding agent") and text.endswith("<|im_start|>assistant\n")
    answer = tok.decode(list(entry.generation_token_ids), skip_special_tokens=False)
    assert answer.endswith("</tool_call><|im_end|>") and '"name": ' in answer


def test_every_scenario_declares_its_breaks() -> None:
    for name, rid in CASES:
        assert "breaks" in EXPECTED[name]["rollouts"][rid], (name, rid)
    causes = {b["cause"] for name, rid in CASES for b in EXPECTED[name]["rollouts"][rid]["breaks"]}
    harness_causes = {"compaction", "compaction_summary", "subagent", "generation_dropped", "retokenized",
                      "tokens_replaced", "tokens_inserted", "history_dropped", "history_replaced", "opening_changed",
                      "seam", "new_context", "branch", "link_intact", "record_fault"}
    assert causes == harness_causes, sorted(harness_causes - causes)


@pytest.mark.parametrize("tokenizer", [True, False], ids=["tokenizer", "no-tokenizer"])
@pytest.mark.parametrize(("name", "rollout_id"), CASES, ids=[f"{n}::{r}" for n, r in CASES])
def test_sample_diagnoses_to_its_declared_breaks(name: str, rollout_id: str, tokenizer: bool) -> None:
    exp = EXPECTED[name]["rollouts"][rollout_id]
    result, evidence = _build(name, rollout_id, with_records=True)
    got = _got(result, evidence, _tokenizer() if tokenizer else None)
    assert got == _want(exp["breaks"], tokenizer=tokenizer), f"{name} / {rollout_id}: {EXPECTED[name]['why']}"


@pytest.mark.parametrize(("name", "rollout_id"),
                         [(n, r) for n, r in CASES if "breaks_without_final_responses" in EXPECTED[n]["rollouts"][r]])
def test_sample_without_its_rollout_record_diagnoses_from_the_tokens_alone(name: str, rollout_id: str) -> None:
    exp = EXPECTED[name]["rollouts"][rollout_id]
    result, _ = _build(name, rollout_id, with_records=False)
    assert _got(result, None, _tokenizer()) == _want(exp["breaks_without_final_responses"], tokenizer=True)


def test_the_retokenized_scenario_decodes_both_sides_to_the_same_text() -> None:
    from tokencap import diagnose

    result, _ = _build("retokenized_history.json", "retokenized-history", with_records=False)
    (brk,) = diagnose(result, tokenizer=_tokenizer())
    d = brk.to_dict()
    assert d["same_text"] is True and d["parent_text"] == d["prompt_text"] and "failing" in d["parent_text"]


def test_the_reasoning_scenario_drops_exactly_the_predecessors_reasoning() -> None:
    from tokencap import diagnose

    result, _ = _build("reasoning_stripped_by_template.json", "reasoning-stripped", with_records=False)
    for brk in diagnose(result, tokenizer=_tokenizer()):
        d = brk.to_dict()
        assert d["parent_text"].startswith("<think>\n") and d["parent_text"].endswith("</think>\n\n")
        assert d["prompt_text"] == ""
