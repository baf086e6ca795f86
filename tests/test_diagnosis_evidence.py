"""Harness evidence (docs/contract.md#evidence), what Gym delivered (#delivered) and the records loader's evidence."""

from __future__ import annotations

import json

import pytest
from diagnosis_cases import Case
from helpers_diagnosis import compaction, observations, ref

from tokencap import load_final_responses
from tokencap.diagnosis import delivered_by, delivered_mask_sample, parse_evidence, trained_in_doubt


def compaction_case() -> Case:
    """a, a2, then s (the summariser's request) and b (the compacted context: a new context)."""
    case = Case()
    case.brk(case.s + case.fresh(6), call_id="s", resolution="resolved", claimed="a2")  # linked: not a break
    case.brk(case.opening + case.fresh(30))
    return case


def test_a_compaction_after_the_call_replaces_its_cause_and_keeps_the_token_cause():
    case = compaction_case()
    b = case.only(evidence=observations(compaction(ref("b"), [ref("s")])))
    assert (b.cause, b.token_cause) == ("compaction", "new_context")
    assert {"kind": "compaction_after", "call_id": "b", "trigger": "tokens", "tokens_before": 4000,
            "tokens_after": 300, "observed_at": 12.5} in b.evidence
    assert b.hint.startswith("The harness compacted")


def test_the_summariser_call_is_a_compaction_summary():
    case = Case()
    case.brk(case.opening + case.fresh(30), call_id="b")
    b = case.only(evidence=observations(compaction(None, [ref("b")])))
    assert (b.cause, b.token_cause) == ("compaction_summary", "new_context")
    assert [e["kind"] for e in b.evidence] == ["compaction_call"]


def test_the_first_call_of_a_sub_agent_is_a_subagent_break_and_the_next_is_not():
    case = Case()
    case.brk(case.fresh(25), call_id="b")
    case.brk(case.fresh(25), call_id="b2")
    inv = {"kind": "agent_invocation", "invocation_id": "inv-2", "parent_invocation_id": "inv-1",
           "spawned_by_tool_call_id": "t9", "model_calls": [ref("b2"), ref("b")]}
    found = {x.call_id: x for x in case.breaks(evidence=observations(inv))}
    assert (found["b"].cause, found["b"].token_cause) == ("subagent", "new_context")
    assert found["b2"].cause == "new_context"
    assert {"kind": "invocation", "call_id": "b", "invocation_id": "inv-2", "parent_invocation_id": "inv-1",
            "spawned_by_tool_call_id": "t9"} in found["b"].evidence


def test_a_top_level_invocation_changes_no_cause():
    case = Case()
    case.brk(case.fresh(25), call_id="b")
    inv = {"kind": "agent_invocation", "invocation_id": "inv-1", "model_calls": [ref("b")]}
    assert case.only(evidence=observations(inv)).cause == "new_context"


def test_an_invocation_in_both_sources_counts_once():
    case = Case()
    case.brk(case.fresh(25), call_id="b")
    inv = {"kind": "agent_invocation", "invocation_id": "inv-2", "parent_invocation_id": "inv-1",
           "model_calls": [ref("b")]}
    record = observations(inv, ng_trajectory={"schema": "1.0", "invocations": [
        {"invocation_id": "inv-2", "parent_invocation_id": "inv-1", "model_calls": [ref("b")]}], "model_calls": [],
        "tool_calls": [], "turns": [], "gaps": []})
    b = case.only(evidence=record)
    assert [e["kind"] for e in b.evidence] == ["invocation"] and b.cause == "subagent"


def test_trajectory_model_calls_join_their_invocation():
    case = Case()
    case.brk(case.fresh(25), call_id="b")
    record = {"ng_trajectory": {"schema": "1.0", "invocations": [
        {"invocation_id": "inv-2", "parent_invocation_id": "inv-1"}],
        "model_calls": [{**ref("b"), "invocation_id": "inv-2"}]}}
    assert case.only(evidence=record).cause == "subagent"


def test_a_response_id_joins_through_the_capture_list_when_exactly_one_call_has_it():
    case = compaction_case()
    capture = {"calls": [{"model_call_id": "b", "response_id": "resp-b"}, {"model_call_id": "a", "response_id": "r-a"},
                         {"response_id": "resp-b"}]}  # an entry without a call id joins nothing
    b = case.only(evidence=observations(compaction(ref(response_id="resp-b")), ng_model_call_capture=capture))
    assert b.cause == "compaction" and not any("join" in n for n in b.notes)


@pytest.mark.parametrize("capture", [
    {"calls": [{"model_call_id": "b", "response_id": "resp-b"}, {"model_call_id": "a2", "response_id": "resp-b"}]},
    {"calls": [{"model_call_id": "a", "response_id": "other"}]},
    None,
], ids=["ambiguous", "missing", "no-capture-list"])
def test_a_response_id_that_is_not_unique_or_unknown_never_joins(capture):
    case = compaction_case()
    record = observations(compaction(ref(response_id="resp-b")))
    if capture is not None:
        record["ng_model_call_capture"] = capture
    b = case.only(evidence=record)
    assert b.cause == "new_context"
    assert any("1 model-call reference in the harness evidence joins no captured call" in n for n in b.notes)


def test_a_reference_to_an_uncaptured_call_is_counted_not_guessed():
    case = compaction_case()
    b = case.only(evidence=observations(compaction(ref("not-captured"), [ref("s"), ref("nope")])))
    assert b.cause == "new_context"
    assert any("2 model-call references" in n for n in b.notes)


def test_evidence_never_replaces_a_record_fault():
    case = Case()
    bad = case.c.call("x", "a2", generation=case.fresh(2))
    bad["digest"] = "0" * 64
    (x,) = case.breaks(evidence=observations(compaction(ref("x"), [ref("x")])))
    assert (x.call_id, x.cause, x.token_cause) == ("x", "record_fault", "record_fault")


def test_tool_call_timings_ride_along():
    case = Case()
    case.c.records[1]["output_items"] = [{"type": "function_call", "name": "search", "arguments": "{}",
                                          "call_id": "t1"}]
    case.brk(case.opening + case.g1 + case.x + case.g2 + case.fresh(3))
    tool = {"kind": "tool_call", "tool_call_id": "t1", "tool_name": "search", "status": "ok", "duration_ms": 812.5}
    b = case.only(evidence=observations(tool, {"kind": "sandbox", "anything": 1}))
    assert b.cause == "link_intact"
    assert {"kind": "tool_calls", "call_id": "a2", "calls": [{"tool_call_id": "t1", "tool_name": "search",
                                                              "status": "ok", "duration_ms": 812.5}]} in b.evidence


@pytest.mark.parametrize("record, field", [
    ("not an object", "(the record)"),
    ({"ng_agent_observations": ["a list"]}, "ng_agent_observations"),
    ({"ng_agent_observations": {"records": "nope"}}, "ng_agent_observations.records"),
    (observations({"kind": "telepathy"}), "ng_agent_observations.records[0].kind"),
    (observations({"no": "kind"}), "ng_agent_observations.records[0].kind"),
    (observations(7), "ng_agent_observations.records[0]"),
    (observations(compaction(ref("b"), tokens_before="many")), "ng_agent_observations.records[0].tokens_before"),
    (observations(compaction(ref("b"), tokens_after=True)), "ng_agent_observations.records[0].tokens_after"),
    (observations(compaction("b")), "ng_agent_observations.records[0].after_model_call"),
    (observations(compaction(ref("b"), model_calls={})), "ng_agent_observations.records[0].model_calls"),
    (observations({"kind": "agent_invocation", "invocation_id": 5}),
     "ng_agent_observations.records[0].invocation_id"),
    (observations({"kind": "tool_call", "tool_call_id": "t", "duration_ms": "slow"}),
     "ng_agent_observations.records[0].duration_ms"),
    ({"ng_trajectory": {"schema": "2.0"}}, "ng_trajectory.schema"),
    ({"ng_trajectory": {"schema": "1.0", "invocations": [{"invocation_id": None}]}},
     "ng_trajectory.invocations[0].invocation_id"),
    ({"ng_model_call_capture": {"calls": [{"model_call_id": 3, "response_id": "r"}]}},
     "ng_model_call_capture.calls[0].model_call_id"),
    ({"ng_model_call_capture": []}, "ng_model_call_capture"),
])
def test_malformed_evidence_is_left_out_with_a_note_naming_rollout_and_field(record, field):
    case = compaction_case()
    b = case.only(evidence=record)
    assert b.cause == "new_context"
    assert any(n.startswith(f"rollout case: harness evidence {field} ") and n.endswith("; left out")
               for n in b.notes), b.notes


def test_one_bad_record_leaves_the_good_ones_in_use():
    case = compaction_case()
    b = case.only(evidence=observations({"kind": "telepathy"}, compaction(ref("b"))))
    assert b.cause == "compaction" and len([n for n in b.notes if "telepathy" in n]) == 1


def test_notes_are_capped():
    evidence = parse_evidence(observations(*[{"kind": "bad"}] * 50), rollout_id="r", call_ids={"a"})
    assert len(evidence.notes) == 21 and evidence.notes[-1] == "rollout r: 30 more problems in the harness evidence"


def test_diagnosis_does_not_change_the_evidence_it_reads():
    case = compaction_case()
    record = observations(compaction(ref("b"), [ref("s")]))
    before = json.dumps(record, sort_keys=True)
    b = case.only(evidence=record)
    b.to_dict()["evidence"][0]["trigger"] = "changed"
    assert json.dumps(record, sort_keys=True) == before and b.evidence[0]["trigger"] == "tokens"


# --------------------------------------------------------------------------- what Gym delivered


@pytest.mark.parametrize("record, mask, by", [
    ({"mask_sample": False, "_ng_token_capture": {"calls": 3}}, False, "token_capture"),
    ({"mask_sample": True, "_ng_token_capture": {}}, True, "token_capture"),
    ({"mask_sample": True}, True, "agent"),
    ({"_ng_token_capture": {"calls": 1}}, None, "token_capture"),
    ({"mask_sample": "yes", "_ng_token_capture": "not an object"}, None, None),
    ({}, None, None),
    (None, None, None),
    ("a string", None, None),
])
def test_what_gym_delivered(record, mask, by):
    assert delivered_mask_sample(record) is mask
    assert delivered_by(record) == by


def test_trained_in_doubt_is_delivered_trainable_and_masked_by_tokencap():
    assert trained_in_doubt({"mask_sample": False}, True) is True
    assert trained_in_doubt({"mask_sample": False}, False) is False
    assert trained_in_doubt({"mask_sample": True}, True) is False
    assert trained_in_doubt(None, True) is False


# --------------------------------------------------------------------------- the records loader


def test_the_records_loader_hands_over_the_evidence_fields_parsed():
    evidence = observations(compaction(ref("b")), ng_trajectory={"schema": "1.0"},
                            ng_model_call_capture={"calls": []}, mask_sample=False, _ng_token_capture={"n": 1})
    lines = [json.dumps({"rollout_id": "r1", "response": {"output": []}, "reward": 1.0, **evidence}),
             json.dumps({"rollout_id": "r2", "response": {"output": []}, "other": {"big": [1] * 10}})]
    finals = load_final_responses("\n".join(lines).encode())
    assert finals.evidence_for("r1", single_rollout=False) == evidence
    assert finals.evidence_for("r2", single_rollout=False) == {}
    assert finals.evidence_for("r3", single_rollout=True) is None


def test_an_unnamed_record_s_evidence_applies_to_a_single_rollout_only():
    finals = load_final_responses(json.dumps({"response": {"output": []}, "mask_sample": True}).encode())
    assert finals.evidence_for("any", single_rollout=True) == {"mask_sample": True}
    assert finals.evidence_for("any", single_rollout=False) is None


def test_malformed_evidence_never_fails_the_records_loader():
    # Wrong shapes of every evidence field load as before (only JSON syntax is the file's).
    record = {"rollout_id": "r1", "response": {"output": []}, "ng_agent_observations": "garbage",
              "ng_trajectory": [1, 2], "ng_model_call_capture": 5, "mask_sample": "no", "_ng_token_capture": []}
    finals = load_final_responses(json.dumps(record).encode())
    got = finals.evidence_for("r1", single_rollout=False)
    assert got == {k: record[k] for k in ("ng_agent_observations", "ng_trajectory", "ng_model_call_capture",
                                          "mask_sample", "_ng_token_capture")}
    case = compaction_case()
    b = case.only(evidence=got)
    assert b.cause == "new_context" and len(b.notes) == 3


def test_an_unreadable_field_is_a_note_from_the_loader(monkeypatch):
    from tokencap.loading import final_responses as module

    finals = load_final_responses(json.dumps({"rollout_id": "r1", "response": {"output": []},
                                              "ng_trajectory": {"schema": "1.0"}}).encode(), name="rec.jsonl")

    def deep(_raw):
        raise RecursionError("maximum recursion depth exceeded")
    monkeypatch.setattr(module, "_decode_any", deep)
    got = finals.evidence_for("r1", single_rollout=False)
    assert list(got) == ["_tokencap_notes"]
    assert got["_tokencap_notes"][0].startswith("rec.jsonl, line 1: field 'ng_trajectory' cannot be read")
    case = compaction_case()
    assert any(n.startswith("rec.jsonl, line 1") for n in case.only(evidence=got).notes)
