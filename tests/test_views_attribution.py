"""`tokencap.views.rollout.attribution` and the attribution marks of the tree (no Streamlit)."""

from __future__ import annotations

import json
from pathlib import Path

from tokencap import load_final_responses, load_snapshots
from tokencap.services import rollout_sources as src
from tokencap.views.model import RolloutView
from tokencap.views.rollout import attribution as av
from tokencap.views.rollout import export as ev
from tokencap.views.rollout import tree as tv

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"
FINALS = SAMPLES / "final_responses"


def view(name: str, anchor: str | None = None, with_finals: bool = True) -> RolloutView:
    snapshot = load_snapshots(SAMPLES / name)[0]
    final = None
    if with_finals:
        finals = load_final_responses(next(FINALS.glob(name.rsplit(".", 1)[0] + ".*")))
        final = finals.for_rollout(snapshot.rollout_id, single_rollout=True)
    return RolloutView(snapshot, anchor=anchor, final_response=final)


BARE = json.dumps({"object": "response", "output": []}).encode()


def test_an_upload_beats_the_bundled_file() -> None:
    bundled = FINALS / "title_call_after_final_answer.json"
    choice = av.final_responses_choice(("mine.json", BARE), bundled)
    assert choice.label == "mine.json" and not choice.bundled and choice.finals is not None
    choice = av.final_responses_choice(None, bundled)
    assert choice.bundled and choice.label == "sample_data/final_responses/title_call_after_final_answer.json"
    assert choice.finals.rollout_ids == ["title-call-after-final"]
    assert av.final_responses_choice(None, None) == av.FinalResponsesChoice()


def test_a_bad_upload_is_an_error_and_applies_to_nothing() -> None:
    choice = av.final_responses_choice(("bad.json", b'{"response": 3}'), None)
    assert choice.finals is None and choice.key is None
    assert choice.error.startswith("bad.json, line 1: field 'response'")
    assert choice.response_for("any", 1) == (None, None)


def test_response_for_follows_the_single_rollout_rule_and_keys_the_cache() -> None:
    choice = av.final_responses_choice(("bare.json", BARE), None)
    response, key = choice.response_for("r1", 1)
    assert response is not None and key.endswith(":1")
    assert choice.response_for("r1", 2) == (None, None)
    other = av.final_responses_choice(("bare2.json", BARE), None)
    assert other.response_for("r1", 1)[1] != key  # another name, another cache entry


def test_with_notes_names_rollouts_that_are_not_loaded() -> None:
    choice = av.with_notes(av.final_responses_choice(None, FINALS / "final_retry_attributed_by_tokens.jsonl"),
                           ["final-retry-by-tokens"])
    assert len(choice.notes) == 1 and "final-retry-by-tokens-other" in choice.notes[0]


def test_scenarios_know_their_bundled_final_responses() -> None:
    by_name = {s.name: s for s in src.sample_scenarios(SAMPLES)}
    assert "final_responses" not in by_name
    assert by_name["title_call_after_final_answer.json"].final_responses == \
        FINALS / "title_call_after_final_answer.json"
    assert by_name["subagent_branch.json"].final_responses is None


def test_attribution_view_of_each_outcome() -> None:
    assert av.attribution_view(view("title_call_after_final_answer.json", with_finals=False)) is None
    a = av.attribution_view(view("attributed_twins_finish_disagree.json"))
    assert a.outcome == "attributed" and a.tone == "success"
    assert "call-0004" in a.headline and "call-0005" in a.summary and "withheld" in a.summary
    assert list(a.candidates["call"]) == ["call-0003", "call-0004"]
    assert list(a.candidates["role"]) == ["attributed (the anchor moved to its twin)",
                                          "anchored: the delivered chain ends here"]
    assert list(a.candidates["finish_reason"]) == ["length", "stop"]
    a = av.attribution_view(view("ambiguous_final_answer.json"))
    assert (a.outcome, a.tone) == ("ambiguous", "error") and a.method.startswith("by content")
    a = av.attribution_view(view("unattributed_final_answer.json"))
    assert (a.outcome, a.tone, len(a.candidates)) == ("unattributed", "error", 0)
    a = av.attribution_view(view("title_call_after_final_answer.json", anchor="call-0002"))
    assert a.outcome == "given" and a.tone == "info" and "call-0002" in a.headline
    assert list(a.candidates["call"]) == ["call-0004"]


def test_attribution_to_a_call_that_cannot_be_delivered_is_an_error() -> None:
    from helpers import Conv

    from tokencap import TokenCaptureSnapshot

    conv = Conv()
    conv.root("call-1")
    conv.child("call-2", "call-1")
    conv.retry("call-3", "call-2")
    conv.child("call-4", "call-3")
    final = {"object": "response", "output": [{"type": "message", "role": "assistant", "content": [],
                                               "prompt_token_ids": conv.prompt["call-2"],
                                               "generation_token_ids": conv.gen["call-2"]}]}
    v = RolloutView(TokenCaptureSnapshot(rollout_id="r1", entries=conv.entries()), final_response=final)
    a = av.attribution_view(v)
    assert a.tone == "error" and "quarantined" in a.headline


def test_export_texts() -> None:
    base = view("title_call_after_final_answer.json")
    assert av.none_anchor_label(base.result) == "(none) — anchored on the harness's final answer (call-0004)"
    assert av.anchor_summary(base.result, base.result, None).startswith(
        "Anchored on the harness's final answer: call-0004, matched by tokens")
    manual = view("title_call_after_final_answer.json", anchor="call-0005")
    assert "overrides the harness's final answer (call-0004)" in av.anchor_summary(base.result, manual.result,
                                                                                  "call-0005")
    masked = view("ambiguous_final_answer.json")
    assert av.none_anchor_label(masked.result) == "(none) — the harness's final answer is ambiguous: no anchor"
    assert "masked" in av.anchor_summary(masked.result, masked.result, None)
    plain = view("title_call_after_final_answer.json", with_finals=False)
    assert av.none_anchor_label(plain.result) == "(none) — deliver the default chain"
    assert av.anchor_summary(plain.result, plain.result, None).startswith("No anchor")
    assert ev.cli_command("s.json", "r", None, False, "f.jsonl") == \
        "python -m tokencap build s.json --final-responses f.jsonl -o result.json"


def test_the_tree_marks_the_final_answer_and_ambiguous_candidates() -> None:
    flags = {n.ident: n.flags for n in tv.tree_of(view("attributed_twins_finish_disagree.json")).nodes}
    assert {c for c, f in flags.items() if "final_answer" in f} == {"call-0003", "call-0004"}
    model = tv.tree_of(view("ambiguous_final_answer.json"))
    assert {n.ident for n in model.nodes if "answer_candidate" in n.flags} == {"call-0003", "call-0005"}
    assert "ambiguous" in model.node("call:call-0003").hover
    assert "matches the final answer, ambiguously" in model.label("call:call-0003")
    rings = [d["key"] for layer in tv.tree_chart(model)["layer"] if layer.get("name") == "nodes"
             for d in layer["data"]["values"] if d["what"] == "matches the final answer, ambiguously"]
    assert sorted(rings) == ["call:call-0003", "call:call-0005"]
    plain = tv.tree_of(view("title_call_after_final_answer.json", with_finals=False))
    assert not any({"final_answer", "answer_candidate"} & n.flags for n in plain.nodes)
    assert len(tv.legend_frame()) == len(tv.NODE_STYLES) + len(tv.OVERLAY_STYLES) + len(tv.EDGE_STYLES)
