"""docs/contract.md#attribution: terminal attribution from the harness's final response, sentence by sentence."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from helpers import Conv, linear_chain

from tokencap import (
    TerminalAttribution,
    TokenCaptureSnapshot,
    attribute_terminal,
    build_rollout,
    prefix_merging,
)
from tokencap.attribution import final_turn, item_signature


def msg(text: str, role: str = "assistant", **extra) -> dict:
    return {"type": "message", "role": role, "content": [{"type": "output_text", "text": text}], **extra}


def fcall(name: str, arguments: str = "{}", call_id: str = "fc-1", **extra) -> dict:
    return {"type": "function_call", "name": name, "arguments": arguments, "call_id": call_id, **extra}


def tool_output(text: str = "ok") -> dict:
    return {"type": "function_call_output", "call_id": "fc-1", "output": text}


def response(*items: dict) -> dict:
    return {"object": "response", "output": list(items)}


def token_item(conv: Conv, call_id: str, *, prompt: list[int] | None = None, **extra) -> dict:
    """An output item carrying ``call_id``'s tokens (its full prompt unless ``prompt`` is given)."""
    item = msg(f"answer of {call_id}")
    item["prompt_token_ids"] = list(conv.prompt[call_id]) if prompt is None else prompt
    item["generation_token_ids"] = list(conv.gen[call_id])
    item.update(extra)
    return item


def snap(conv: Conv, rollout_id: str = "r1") -> TokenCaptureSnapshot:
    return TokenCaptureSnapshot(rollout_id=rollout_id, entries=conv.entries())


def attribute(conv: Conv, final: dict) -> TerminalAttribution:
    return attribute_terminal(prefix_merging(conv.entries()), final)


def title_call_conv() -> Conv:
    """call-1 -> call-2 -> call-3 (the final answer) -> call-4 (a title request)."""
    conv = Conv()
    conv.root("call-1", output_items=[fcall("search")])
    conv.child("call-2", "call-1", output_items=[fcall("read")])
    conv.child("call-3", "call-2", output_items=[msg("The answer is 42.")], finish_reason="stop")
    conv.child("call-4", "call-3", output_items=[msg("Title: the answer")], finish_reason="stop")
    return conv


# =========================================================================== the result


def test_the_result_has_the_spec_fields() -> None:
    conv = title_call_conv()
    a = attribute(conv, response(token_item(conv, "call-3")))
    assert isinstance(a, TerminalAttribution)
    assert (a.call_id, a.method, a.outcome, a.candidates, a.finish_reason_resolved) == \
        ("call-3", "tokens", "attributed", ["call-3"], True)
    assert a.metric() == {"outcome": "attributed", "method": "tokens", "call_id": "call-3", "candidates": ["call-3"]}


def test_candidates_are_calls_with_a_non_empty_generation() -> None:
    conv = Conv()
    conv.root("call-1", output_items=[msg("hi")])
    conv.child("call-2", "call-1", gen=[], output_items=[msg("same")])  # empty generation
    conv.child("call-3", "call-1", output_items=[msg("same")])
    a = attribute(conv, response(msg("same")))
    assert a.candidates == ["call-3"] and a.call_id == "call-3"


def test_an_excluded_call_is_no_candidate() -> None:
    conv = linear_chain(3)
    conv.record("call-0003")["digest"] = "00" * 32  # corrupt: excluded from build.entries
    a = attribute(conv, response(token_item(conv, "call-0003")))
    assert a.outcome == "unattributed" and a.candidates == []


def test_a_quarantined_call_is_a_candidate() -> None:
    conv = Conv()
    conv.root("call-1")
    conv.child("call-2", "call-1")
    conv.retry("call-3", "call-2")                 # a retry, quarantined without an anchor
    assert "call-3" in prefix_merging(conv.entries()).quarantined
    a = attribute(conv, response(token_item(conv, "call-3")))
    assert a.outcome == "attributed" and a.call_id == "call-3"


# =========================================================================== 1. by tokens


def test_by_tokens_takes_the_last_item_with_a_non_empty_generation() -> None:
    conv = title_call_conv()
    final = response(token_item(conv, "call-2"), tool_output(), token_item(conv, "call-3"),
                     msg("trailing text, no tokens"), msg("empty tokens", generation_token_ids=[], prompt_token_ids=[1]))
    a = attribute(conv, final)
    assert a.method == "tokens" and a.call_id == "call-3"


def test_by_tokens_matches_the_whole_sequence_wherever_the_split_falls() -> None:
    conv = title_call_conv()
    full = conv.full["call-3"]
    # The harness recorded two generated tokens as part of the prompt: same full sequence.
    item = {"type": "message", "role": "assistant", "content": [], "prompt_token_ids": full[:-1],
            "generation_token_ids": full[-1:]}
    a = attribute(conv, response(item))
    assert a.outcome == "attributed" and a.call_id == "call-3" and a.method == "tokens"


def test_by_tokens_a_shorter_prompt_must_be_a_suffix_of_the_calls_prompt() -> None:
    conv = title_call_conv()
    prompt = conv.prompt["call-3"]
    kept = prompt[-3:]  # the harness kept only the last turn's prompt
    assert attribute(conv, response(token_item(conv, "call-3", prompt=kept))).call_id == "call-3"
    assert attribute(conv, response(token_item(conv, "call-3", prompt=[]))).call_id == "call-3"
    wrong = kept[:-1] + [kept[-1] + 1]
    assert attribute(conv, response(token_item(conv, "call-3", prompt=wrong))).outcome == "unattributed"


def test_by_tokens_a_different_generation_matches_nothing() -> None:
    conv = title_call_conv()
    item = token_item(conv, "call-3")
    item["generation_token_ids"] = item["generation_token_ids"][:-1] + [item["generation_token_ids"][-1] + 1]
    a = attribute(conv, response(item))
    assert (a.outcome, a.method, a.call_id, a.candidates) == ("unattributed", "tokens", None, [])


def test_by_tokens_wins_over_content() -> None:
    conv = title_call_conv()
    # The item's content is call-4's text, but its tokens are call-3's: tokens decide.
    item = token_item(conv, "call-3")
    item["content"] = copy.deepcopy(conv.record("call-4")["output_items"][0]["content"])
    a = attribute(conv, response(item))
    assert a.method == "tokens" and a.call_id == "call-3"


def test_token_ids_may_be_numpy_arrays() -> None:
    conv = title_call_conv()
    item = token_item(conv, "call-3")
    item["prompt_token_ids"] = np.array(item["prompt_token_ids"], dtype=np.int64)
    item["generation_token_ids"] = np.array(item["generation_token_ids"], dtype=np.uint64)
    assert attribute(conv, response(item)).call_id == "call-3"


@pytest.mark.parametrize("bad", [[-1], [1.5], ["7"], [True]])
def test_token_ids_that_are_not_integers_raise_naming_the_element(bad) -> None:
    conv = title_call_conv()
    item = token_item(conv, "call-3")
    item["generation_token_ids"] = list(conv.gen["call-3"]) + bad
    with pytest.raises(ValueError, match=r"position 3"):
        attribute(conv, response(item))


def test_a_final_response_that_is_not_a_mapping_raises() -> None:
    with pytest.raises(ValueError, match="Responses object"):
        attribute(title_call_conv(), ["not", "a", "response"])  # type: ignore[arg-type]


# =========================================================================== 2. by content


def test_final_turn_is_everything_after_the_last_non_assistant_item() -> None:
    items = [msg("q", role="user"), fcall("a"), tool_output(), msg("thinking"), fcall("b"),
             msg("please go on", role="user"), {"type": "reasoning", "summary": []}, msg("done")]
    assert final_turn(items) == items[-2:]
    assert final_turn([msg("x", role="system"), msg("y")]) == [msg("y")]
    assert final_turn([msg("y"), tool_output()]) == []
    assert final_turn([msg("only")]) == [msg("only")]


def test_by_content_matches_the_call_with_the_same_final_turn() -> None:
    conv = title_call_conv()
    final = response(msg("question", role="user"), fcall("search"), tool_output(), fcall("read"), tool_output(),
                     msg("The answer is 42."))
    a = attribute(conv, final)
    assert (a.outcome, a.method, a.call_id, a.candidates) == ("attributed", "content", "call-3", ["call-3"])


def test_message_signature_is_role_and_concatenated_text_parts() -> None:
    conv = Conv()
    conv.root("call-1", output_items=[{"type": "message", "role": "assistant",
                                       "content": [{"type": "output_text", "text": "The answer "},
                                                   {"type": "output_text", "text": "is 42."}]}])
    conv.child("call-2", "call-1", output_items=[msg("something else")])
    joined = {"type": "message", "role": "assistant", "id": "msg_9", "status": "completed",
              "content": [{"type": "output_text", "text": "The answer is 42.", "annotations": []}]}
    assert attribute(conv, response(joined)).call_id == "call-1"


def test_function_call_arguments_compare_as_parsed_json_and_ids_are_ignored() -> None:
    conv = Conv()
    conv.root("call-1", output_items=[msg("submitting"), fcall("submit", '{"b": [1, 2], "a": "x"}', call_id="fc_7")])
    conv.child("call-2", "call-1", output_items=[msg("submitting"), fcall("submit", '{"a": "y", "b": [1, 2]}')])
    final = response(msg("submitting", id="m1"),
                     fcall("submit", json.dumps({"a": "x", "b": [1, 2]}, indent=2), call_id="call_abc", id="fc_x",
                           status="completed"))
    a = attribute(conv, final)
    assert a.call_id == "call-1" and a.method == "content"


def test_function_call_arguments_that_are_not_json_compare_as_text() -> None:
    conv = Conv()
    conv.root("call-1", output_items=[fcall("shell", "ls -la")])
    conv.child("call-2", "call-1", output_items=[fcall("shell", "ls  -la")])
    assert attribute(conv, response(fcall("shell", "ls -la"))).call_id == "call-1"


def test_a_json_true_is_not_the_number_one() -> None:
    conv = Conv()
    conv.root("call-1", output_items=[fcall("f", '{"x": 1}')])
    assert attribute(conv, response(fcall("f", '{"x": true}'))).outcome == "unattributed"
    assert attribute(conv, response(fcall("f", '{"x": 1.0}'))).call_id == "call-1"


def test_reasoning_items_compare_by_summary_text_and_other_types_by_type() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}]}
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    conv = Conv()
    conv.root("call-1", output_items=[reasoning, search, msg("found it")])
    conv.child("call-2", "call-1", output_items=[dict(reasoning, summary=[{"type": "summary_text", "text": "other"}]),
                                                 search, msg("found it")])
    final = response({"type": "reasoning", "id": "rs_other", "summary": [{"type": "summary_text", "text": "plan"}],
                      "encrypted_content": "..."}, {"type": "web_search_call", "id": "ws_2"}, msg("found it"))
    assert attribute(conv, final).call_id == "call-1"
    assert item_signature({"type": "web_search_call", "id": "a"}) == item_signature({"type": "web_search_call"})


def test_content_must_match_every_item_in_order() -> None:
    conv = Conv()
    conv.root("call-1", output_items=[msg("a"), msg("b")])
    assert attribute(conv, response(msg("b"), msg("a"))).outcome == "unattributed"
    assert attribute(conv, response(msg("a"))).outcome == "unattributed"
    assert attribute(conv, response(msg("a"), msg("b"), msg("c"))).outcome == "unattributed"
    assert attribute(conv, response(msg("a"), msg("b"))).call_id == "call-1"


def test_token_fields_are_ignored_by_content() -> None:
    conv = title_call_conv()
    # Empty token arrays: no item carries generated tokens, so content decides.
    final = response(msg("The answer is 42.", prompt_token_ids=[9, 9], generation_token_ids=[]))
    a = attribute(conv, final)
    assert a.method == "content" and a.call_id == "call-3"


@pytest.mark.parametrize("final", [response(), {"object": "response"}, response(msg("done"), tool_output()),
                                   response(msg("next?", role="user"))])
def test_a_final_turn_with_no_items_matches_nothing(final) -> None:
    conv = Conv()
    conv.root("call-1", output_items=[])  # a call without output items has the empty signature too
    a = attribute(conv, final)
    assert (a.outcome, a.method, a.candidates) == ("unattributed", "content", [])


# =========================================================================== 3. outcome


def test_no_candidate_is_unattributed() -> None:
    a = attribute(title_call_conv(), response(msg("never said")))
    assert (a.outcome, a.call_id, a.candidates) == ("unattributed", None, [])


def test_token_identical_candidates_attribute_the_smallest_id() -> None:
    conv = Conv()
    conv.root("call-1")
    conv.child("call-5", "call-1", finish_reason="stop")
    conv.retry("call-3", "call-5", twin=True, finish_reason="stop")
    a = attribute(conv, response(token_item(conv, "call-5")))
    assert (a.outcome, a.call_id, a.candidates, a.finish_reason_resolved) == \
        ("attributed", "call-3", ["call-3", "call-5"], True)


def test_twins_with_different_finish_reasons_withhold_it() -> None:
    conv = Conv()
    conv.root("call-1")
    conv.child("call-2", "call-1", finish_reason="length")
    conv.retry("call-3", "call-2", twin=True, finish_reason="stop")
    a = attribute(conv, response(token_item(conv, "call-2")))
    assert a.outcome == "attributed" and a.call_id == "call-2" and a.finish_reason_resolved is False
    r = build_rollout(snap(conv), final_response=response(token_item(conv, "call-2")))
    # call-2 says "length", but its twin says "stop": the status may not rest on either.
    assert r.metrics["status"] == "completed" and r.mask_sample is False
    assert r.finish_reason_verdict.resolved is False


def test_a_twin_outside_the_candidates_still_withholds_the_finish_reason() -> None:
    conv = Conv()
    conv.root("call-1")
    conv.child("call-2", "call-1", output_items=[msg("answer")], finish_reason="stop")
    # Same tokens, but the capture recorded its output item differently (and "length").
    conv.retry("call-3", "call-2", twin=True, output_items=[msg("answer, differently rendered")],
               finish_reason="length")
    a = attribute(conv, response(msg("answer")))
    assert (a.method, a.candidates) == ("content", ["call-2"])
    assert a.finish_reason_resolved is False


def test_null_counts_as_a_finish_reason() -> None:
    conv = Conv()
    conv.root("call-1")
    conv.child("call-2", "call-1", finish_reason=None)
    conv.retry("call-3", "call-2", twin=True, finish_reason="stop")
    assert attribute(conv, response(token_item(conv, "call-2"))).finish_reason_resolved is False


def test_candidates_with_different_sequences_are_ambiguous() -> None:
    conv = Conv()
    conv.root("call-1", output_items=[msg("Done.")])
    conv.child("call-2", "call-1", output_items=[fcall("check")])
    conv.child("call-3", "call-2", output_items=[msg("Done.")])
    a = attribute(conv, response(msg("Done.")))
    assert (a.outcome, a.call_id, a.candidates, a.method) == ("ambiguous", None, ["call-1", "call-3"], "content")


def test_a_suffix_shared_by_different_sequences_is_ambiguous() -> None:
    conv = Conv()
    conv.root("call-1")
    tail, gen = conv.fresh(2), conv.fresh(3)
    conv.child("call-2", "call-1", inter=tail, gen=gen)
    conv.root("call-3")
    conv.child("call-4", "call-3", inter=tail, gen=gen)  # same last turn, different history
    a = attribute(conv, response(token_item(conv, "call-2", prompt=tail)))
    assert (a.outcome, a.candidates) == ("ambiguous", ["call-2", "call-4"])


# =========================================================================== build_rollout


def test_build_rollout_anchors_on_the_attributed_call_and_cuts_the_title_call() -> None:
    conv = title_call_conv()
    plain = build_rollout(snap(conv))
    assert [link.call_id for link in plain.build.main.links][-1] == "call-4"   # the title call delivered
    r = build_rollout(snap(conv), final_response=response(token_item(conv, "call-3")))
    assert r.mask_sample is False
    assert [link.call_id for link in r.build.main.links] == ["call-1", "call-2", "call-3"]
    assert r.build.notes.after_terminal_calls == ["call-4"]
    assert r.build.notes.terminal_chain == "main"
    assert r.terminal_call_id == "call-3"
    assert r.metrics["after_terminal_calls"] == 1
    assert r.metrics["terminal_attribution"] == {"outcome": "attributed", "method": "tokens", "call_id": "call-3",
                                                 "candidates": ["call-3"]}


def test_the_anchor_moves_to_the_extended_twin() -> None:
    conv = Conv()
    conv.root("call-1")
    conv.child("call-2", "call-1", finish_reason="stop")
    conv.retry("call-3", "call-2", twin=True, finish_reason="stop")
    conv.child("call-4", "call-3")  # a title request continuing the larger twin
    r = build_rollout(snap(conv), final_response=response(token_item(conv, "call-2")))
    assert r.metrics["terminal_attribution"]["call_id"] == "call-2"
    assert r.terminal_call_id == "call-2"
    assert r.build.notes.terminal_call_id == "call-3"   # the call actually anchored
    assert [link.call_id for link in r.build.main.links] == ["call-1", "call-3"]
    assert r.build.notes.after_terminal_calls == ["call-4"]
    assert r.mask_sample is False


def test_an_attributed_call_that_lost_to_a_different_extended_retry_is_not_delivered() -> None:
    conv = Conv()
    conv.root("call-1")
    conv.child("call-2", "call-1")
    conv.retry("call-3", "call-2")          # different generation
    conv.child("call-4", "call-3")          # the run went on from call-3
    r = build_rollout(snap(conv), final_response=response(token_item(conv, "call-2")))
    assert r.build.notes.terminal_chain == "quarantined"
    assert "terminal_call_not_delivered" in r.mask_reasons


def test_the_smallest_twin_anchors_even_when_another_group_quarantined_it() -> None:
    """docs/contract.md#attribution-outcome takes the smallest token-identical candidate and applies docs/contract.md#builder-retries as for a
    given id; the twin hand-over works within a retry group only. Here the twins hang under
    different (both verified) parents, and the smaller one lost its own group to an
    extended retry, so the answer is not delivered -- and the rollout has a second chain."""
    conv = Conv()
    conv.root("p1")
    conv.child("p2", "p1")
    inter = conv.fresh(2)
    gen = conv.fresh(3)
    conv.child("b-y", "p2", inter=inter, gen=gen)                        # twin, linked to p2
    conv._add("c-x", conv.full["p2"] + inter, gen, resolution="resolved", parent="p1")  # twin, linked to p1
    conv.retry("a-z", "b-y")                                             # same prompt as b-y, other tokens
    conv.child("d-w", "a-z")                                             # ... and extended
    r = build_rollout(snap(conv), final_response=response(token_item(conv, "c-x")))
    assert r.metrics["terminal_attribution"]["candidates"] == ["b-y", "c-x"]
    assert r.terminal_call_id == "b-y" and r.build.notes.terminal_chain == "quarantined"
    assert r.mask_reasons == ["multiple_chains", "terminal_call_not_delivered"]


@pytest.mark.parametrize("final_items", [[msg("never said")], [msg("Done.")]], ids=["unattributed", "ambiguous"])
def test_unattributed_and_ambiguous_mask_and_use_no_anchor(final_items) -> None:
    conv = Conv()
    conv.root("call-1", output_items=[msg("Done.")])
    conv.child("call-2", "call-1", output_items=[fcall("check")])
    conv.child("call-3", "call-2", output_items=[msg("Done.")])
    conv.child("call-4", "call-3", output_items=[msg("A title")])
    plain = build_rollout(snap(conv))
    r = build_rollout(snap(conv), final_response=response(*final_items))
    assert r.mask_reasons == ["terminal_call_not_delivered"]
    assert r.terminal_call_id is None
    assert r.build.notes.terminal_chain == "" and r.build.notes.terminal_call_id is None
    assert [link.call_id for link in r.build.main.links] == [link.call_id for link in plain.build.main.links]
    assert r.rebuilt_response == plain.rebuilt_response
    assert r.metrics["terminal_attribution"]["outcome"] in ("unattributed", "ambiguous")


def test_mask_reasons_keep_their_order_with_attribution() -> None:
    conv = Conv()
    conv.root("call-1")
    conv.child("call-2", "call-1")
    conv.retry("call-3", "call-2")  # unresolved retries
    r = build_rollout(TokenCaptureSnapshot(rollout_id="r1", entries=conv.entries(), incomplete=True),
                      final_response=response(msg("never said")))
    assert r.mask_reasons == ["capture_incomplete", "unresolved_retries", "terminal_call_not_delivered"]


def test_the_metric_is_null_without_a_final_response() -> None:
    r = build_rollout(snap(title_call_conv()))
    assert r.metrics["terminal_attribution"] is None and r.terminal_attribution is None
    r = build_rollout(snap(title_call_conv()), terminal_call_id="call-3")
    assert r.metrics["terminal_attribution"] is None


def test_an_explicit_terminal_id_wins_over_attribution() -> None:
    conv = title_call_conv()
    final = response(token_item(conv, "call-3"))
    r = build_rollout(snap(conv), terminal_call_id="call-2", final_response=final)
    assert r.metrics["terminal_attribution"] == {"outcome": "given", "method": None, "call_id": "call-2",
                                                 "candidates": []}
    assert r.terminal_call_id == "call-2"
    assert [link.call_id for link in r.build.main.links] == ["call-1", "call-2"]
    assert r.build.notes.after_terminal_calls == ["call-3", "call-4"]
    # What attribution alone would have said is kept for display.
    assert r.terminal_attribution is not None and r.terminal_attribution.call_id == "call-3"
    # Even an explicit id that cannot be delivered wins (and masks, as without a final response).
    r = build_rollout(snap(conv), terminal_call_id="nope", final_response=final)
    assert r.mask_reasons == ["terminal_call_not_delivered"] and r.build.notes.terminal_chain == "missing"


def test_a_snapshot_that_is_not_built_reports_no_attribution() -> None:
    final = response(msg("x"))
    for s in (TokenCaptureSnapshot(rollout_id="r1"), TokenCaptureSnapshot.failed("r1", "bad file")):
        r = build_rollout(s, final_response=final)
        assert r.metrics["terminal_attribution"] is None
        assert "terminal_call_not_delivered" not in r.mask_reasons


def test_a_malformed_final_response_is_a_build_error_not_a_crash() -> None:
    r = build_rollout(snap(title_call_conv()), final_response={"output": "not a list"})
    assert r.mask_reasons == ["build_error"] and "output" in r.metrics["error"]
    # With an explicit id the final response is only shown, so a bad one does not fail the build.
    r = build_rollout(snap(title_call_conv()), terminal_call_id="call-3", final_response={"output": "not a list"})
    assert r.mask_reasons == [] and r.terminal_attribution is None
    assert r.metrics["terminal_attribution"]["outcome"] == "given"


def test_attribution_does_not_change_the_build_of_a_rollout_it_agrees_with() -> None:
    conv = linear_chain(4)
    plain = build_rollout(snap(conv))
    r = build_rollout(snap(conv), final_response=response(token_item(conv, "call-0004")))
    assert r.rebuilt_response == plain.rebuilt_response
    assert r.mask_reasons == plain.mask_reasons == []


def test_describe_says_the_outcome_in_plain_words() -> None:
    conv = Conv()
    conv.root("call-1", output_items=[msg("Done.")])
    conv.child("call-2", "call-1", output_items=[msg("Done.")])
    assert "nothing is chosen" in attribute(conv, response(msg("Done."))).describe()
    assert "no captured call" in attribute(conv, response(msg("x"))).describe()
    assert "call-2" in attribute(conv, response(token_item(conv, "call-2"))).describe()
