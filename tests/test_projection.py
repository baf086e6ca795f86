"""docs/contract.md#projection, #refusal-ended and #loss-mask: projection to a Responses payload, refusal verdicts, loss masks."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from helpers import Conv, ids_of, linear_chain, make_refusal

from tokencap import (
    BuildOutput,
    Chain,
    ChainLink,
    TokenEntry,
    assert_prefix_contiguity,
    loss_mask,
    prefix_merging,
    project_chain_to_output_items,
    project_main_chain_response,
)

TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")


def ints(x) -> list[int]:
    return [int(t) for t in list(x)]


def floats(x) -> list[float]:
    return [float(t) for t in list(x)]


def token_items(output: list[dict]) -> list[dict]:
    return [item for item in output if "generation_token_ids" in item]


def plain(obj):
    """The payload as JSON would carry it (lists instead of arrays)."""
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def msg(text: str) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def fcall(name: str) -> dict:
    return {"type": "function_call", "name": name, "arguments": "{}", "call_id": f"fc-{name}"}


def three_calls(**last_fields) -> Conv:
    conv = Conv()
    conv.root("call-1", output_items=[msg("one")], token_item_index=0, finish_reason="tool_calls")
    conv.child("call-2", "call-1", output_items=[msg("two"), fcall("search")], token_item_index=0,
               finish_reason="tool_calls")
    fields = {"output_items": [msg("three")], "token_item_index": 0, "finish_reason": "stop"}
    fields.update(last_fields)
    conv.child("call-3", "call-2", **fields)
    return conv


def respond(conv: Conv, *, terminal=None, refusals=(), resolved=True, model="m", entries=None) -> dict:
    out = prefix_merging(entries if entries is not None else conv.entries(), terminal_call_id=terminal)
    return project_main_chain_response("roll-1", out, model=model, finish_reason_resolved=resolved,
                                       engine_refusals=tuple(refusals))


# =========================================================================== 5. output items


def test_output_items_are_copied_with_tokens_on_the_indexed_item() -> None:
    conv = Conv()
    conv.root("call-1", output_items=[{"type": "reasoning", "summary": []}, msg("hello"), fcall("f")],
              token_item_index=1)
    out = prefix_merging(conv.entries())
    items = project_chain_to_output_items(out.chains[0])
    assert [i["type"] for i in items] == ["reasoning", "message", "function_call"]
    assert items[1]["content"] == [{"type": "output_text", "text": "hello"}]
    assert items[2]["name"] == "f" and items[2]["arguments"] == "{}"
    for i in (0, 2):
        assert not any(f in items[i] for f in TOKEN_FIELDS + ("routed_experts",)), items[i]
    assert ints(items[1]["prompt_token_ids"]) == conv.prompt["call-1"]
    assert ints(items[1]["generation_token_ids"]) == conv.gen["call-1"]
    assert floats(items[1]["generation_log_probs"]) == conv.record("call-1")["generation_log_probs"]


def test_without_index_the_last_item_carries_the_tokens() -> None:
    conv = Conv()
    conv.root("call-1", output_items=[msg("text"), fcall("g")])
    items = project_chain_to_output_items(prefix_merging(conv.entries()).chains[0])
    assert len(items) == 2
    assert "generation_token_ids" not in items[0]
    assert ints(items[1]["generation_token_ids"]) == conv.gen["call-1"]
    assert items[1]["name"] == "g"


def test_call_without_output_items_gets_a_token_only_item() -> None:
    conv = Conv()
    conv.root("call-1")
    [item] = project_chain_to_output_items(prefix_merging(conv.entries()).chains[0])
    assert {k: v for k, v in item.items() if k not in TOKEN_FIELDS + ("routed_experts",)} == \
        {"type": "message", "role": "assistant", "content": []}
    assert ints(item["prompt_token_ids"]) == conv.prompt["call-1"]
    assert ints(item["generation_token_ids"]) == conv.gen["call-1"]
    assert floats(item["generation_log_probs"]) == conv.record("call-1")["generation_log_probs"]


def test_routed_experts_carried_when_present_only() -> None:
    conv = Conv()
    conv.root("call-1", routed_experts=[[1, 2], [3, 4], [5, 6]], output_items=[msg("a")], token_item_index=0)
    conv.child("call-2", "call-1", output_items=[msg("b")], token_item_index=0)
    items = project_chain_to_output_items(prefix_merging(conv.entries()).chains[0])
    assert plain(items[0]["routed_experts"]) == [[1, 2], [3, 4], [5, 6]]
    assert items[1].get("routed_experts") is None


def test_projection_does_not_touch_the_entries() -> None:
    conv = three_calls()
    out = prefix_merging(conv.entries())
    before = {cid: copy.deepcopy(e.to_dict()["output_items"]) for cid, e in out.entries.items()}
    items = project_chain_to_output_items(out.chains[0])
    items[0]["content"].append({"type": "output_text", "text": "mutated"})
    items[0]["extra"] = 1
    after = {cid: e.to_dict()["output_items"] for cid, e in out.entries.items()}
    assert after == before
    for e in out.entries.values():
        for item in e.to_dict()["output_items"]:
            assert not any(f in item for f in TOKEN_FIELDS)


def test_running_prompts_are_contiguous_full_prompts() -> None:
    conv = three_calls()
    out = prefix_merging(conv.entries())
    items = project_chain_to_output_items(out.chains[0])
    assert [i["type"] for i in items] == ["message", "message", "function_call", "message"]
    toks = token_items(items)
    assert len(toks) == 3
    for item, cid in zip(toks, ["call-1", "call-2", "call-3"]):
        assert ints(item["prompt_token_ids"]) == conv.prompt[cid]
        assert ints(item["generation_token_ids"]) == conv.gen[cid]
    for prev, nxt in zip(toks, toks[1:]):
        seen = ints(prev["prompt_token_ids"]) + ints(prev["generation_token_ids"])
        assert ints(nxt["prompt_token_ids"])[: len(seen)] == seen


def test_projection_of_a_delta_chain_uses_full_prompts() -> None:
    conv = linear_chain(4, delta=True)
    out = prefix_merging(conv.entries())
    toks = token_items(project_chain_to_output_items(out.chains[0]))
    assert [ints(i["prompt_token_ids"]) for i in toks] == [conv.prompt[c] for c in sorted(conv.prompt)]


# =========================================================================== 5. response


def test_response_shape_and_usage() -> None:
    conv = three_calls()
    out = prefix_merging(conv.entries())
    resp = project_main_chain_response("roll-1", out, model="policy-x")
    assert resp["id"] == "proj-roll-1"
    assert resp["object"] == "response"
    assert resp["model"] == "policy-x"
    assert resp["status"] == "completed"
    assert "incomplete_details" not in resp
    assert plain(resp["output"]) == plain(project_chain_to_output_items(out.chains[0]))
    assert resp["usage"]["input_tokens"] == len(conv.prompt["call-1"])
    assert resp["usage"]["output_tokens"] == sum(len(conv.gen[c]) for c in ("call-1", "call-2", "call-3"))
    assert_prefix_contiguity(resp)
    assert_prefix_contiguity(plain(resp))


def test_usage_input_tokens_is_the_first_generated_items_prompt() -> None:
    conv = Conv()
    conv.root("call-1", prompt_len=9, output_items=[fcall("a"), msg("x")], token_item_index=1)
    conv.child("call-2", "call-1", inter_len=5)
    resp = respond(conv)
    assert resp["usage"]["input_tokens"] == 9
    assert resp["usage"]["output_tokens"] == 6


def test_response_without_chain_is_an_error() -> None:
    conv = Conv()
    conv.root("call-1", gen=[])
    out = prefix_merging(conv.entries())
    assert out.chains == []
    with pytest.raises(ValueError):
        project_main_chain_response("roll-1", out)
    with pytest.raises(ValueError):
        project_main_chain_response("roll-1", BuildOutput(chains=[]))


def test_response_without_generated_token_is_an_error() -> None:
    e = TokenEntry.from_dict({"rollout_id": "r", "model_call_id": "call-1", "prompt_token_ids": [1, 2],
                              "generation_token_ids": [], "generation_log_probs": [],
                              "parent_resolution": "root"})
    chain = Chain(chain_id="main", links=[ChainLink(entry=e, interstitial=np.zeros(0, dtype=np.uint64))],
                  root_prompt=np.array([1, 2], dtype=np.uint64))
    with pytest.raises(ValueError):
        project_main_chain_response("r", BuildOutput(chains=[chain]))


@pytest.mark.parametrize(("reason", "status", "detail"), [
    ("stop", "completed", None),
    ("tool_calls", "completed", None),
    (None, "completed", None),
    ("length", "incomplete", "max_output_tokens"),
    ("content_filter", "incomplete", "content_filter"),
])
def test_status_follows_the_last_calls_finish_reason(reason, status, detail) -> None:
    resp = respond(three_calls(finish_reason=reason))
    assert resp["status"] == status
    if detail is None:
        assert resp.get("incomplete_details") is None
    else:
        assert resp["incomplete_details"] == {"reason": detail}


def test_finish_reason_of_an_earlier_call_does_not_matter() -> None:
    conv = Conv()
    conv.root("call-1", finish_reason="length")
    conv.child("call-2", "call-1", finish_reason="content_filter")
    conv.child("call-3", "call-2", finish_reason="stop")
    assert respond(conv)["status"] == "completed"


def test_status_uses_the_delivered_chains_last_call_not_a_branch() -> None:
    conv = Conv()
    conv.root("call-r")
    conv.child("call-sub", "call-r", finish_reason="length")       # sub-agent branch
    conv.child("call-main", "call-r", finish_reason="stop")       # later: main
    resp = respond(conv)
    assert resp["status"] == "completed"
    conv2 = Conv()
    conv2.root("call-r")
    conv2.child("call-a", "call-r", finish_reason="stop")
    conv2.child("call-b", "call-a", finish_reason="length")
    assert respond(conv2, terminal="call-a")["status"] == "completed"


def test_unresolved_finish_reason_withholds_the_finish_verdict() -> None:
    resp = respond(three_calls(finish_reason="length"), resolved=False)
    assert resp["status"] == "completed"
    assert resp.get("incomplete_details") is None
    resp = respond(three_calls(finish_reason="content_filter"), resolved=False)
    assert resp["status"] == "completed"


# =========================================================================== 5.1 refusals


def _refusal_case():
    conv = three_calls()  # created_at 1, 2, 3
    return conv


def test_context_refusal_continuing_the_last_call_ends_the_chain() -> None:
    resp = respond(_refusal_case(), refusals=[make_refusal("call-4", parent="call-3", recorded_at=10.0)])
    assert resp["status"] == "incomplete"
    assert resp["incomplete_details"] == {"reason": "max_output_tokens"}


def test_refusal_verdict_precedes_the_finish_reason() -> None:
    resp = respond(three_calls(finish_reason="content_filter"),
                   refusals=[make_refusal("call-4", parent="call-3", recorded_at=10.0)])
    assert resp["incomplete_details"] == {"reason": "max_output_tokens"}


def test_refusal_still_counts_when_the_finish_reason_is_withheld() -> None:
    resp = respond(_refusal_case(), resolved=False,
                   refusals=[make_refusal("call-4", parent="call-3", recorded_at=10.0)])
    assert resp["status"] == "incomplete"
    assert resp["incomplete_details"] == {"reason": "max_output_tokens"}


@pytest.mark.parametrize("code", [None, "invalid_max_tokens", "rate_limited"])
def test_refusal_with_another_code_changes_nothing(code) -> None:
    resp = respond(_refusal_case(), refusals=[make_refusal("call-4", parent="call-3", code=code, recorded_at=10.0)])
    assert resp["status"] == "completed"


@pytest.mark.parametrize("resolution", ["unresolved", "root"])
def test_refusal_without_a_parent_changes_nothing(resolution: str) -> None:
    resp = respond(_refusal_case(), refusals=[make_refusal("call-4", resolution=resolution, recorded_at=10.0)])
    assert resp["status"] == "completed"


@pytest.mark.parametrize("parent", ["call-1", "call-2", "call-unknown"])
def test_refusal_continuing_an_earlier_or_unknown_call_changes_nothing(parent: str) -> None:
    resp = respond(_refusal_case(), refusals=[make_refusal("call-4", parent=parent, recorded_at=10.0)])
    assert resp["status"] == "completed"


def test_refusal_on_another_branch_changes_nothing() -> None:
    conv = Conv()
    conv.root("call-r")
    conv.child("call-side", "call-r")
    conv.child("call-main", "call-r")   # later leaf: the delivered chain
    out = prefix_merging(conv.entries())
    assert ids_of(out.chains[0]) == ["call-r", "call-main"]
    resp = project_main_chain_response("r", out, engine_refusals=(make_refusal("x", parent="call-side",
                                                                               recorded_at=10.0),))
    assert resp["status"] == "completed"


def test_refusal_continuing_a_call_below_the_terminal_changes_nothing() -> None:
    conv = _refusal_case()
    refusal = make_refusal("call-4", parent="call-3", recorded_at=10.0)
    assert respond(conv, terminal="call-2", refusals=[refusal])["status"] == "completed"
    ended = make_refusal("call-4", parent="call-2", recorded_at=10.0)
    assert respond(conv, terminal="call-2", refusals=[ended])["status"] == "incomplete"


def test_refusal_continuing_a_twin_of_the_last_call_ends_the_chain() -> None:
    conv = _refusal_case()
    conv.retry("call-3b", "call-3", twin=True, created_at=4.0)
    out = prefix_merging(conv.entries())
    assert out.quarantined == ["call-3b"] and ids_of(out.chains[0])[-1] == "call-3"
    resp = project_main_chain_response("r", out, engine_refusals=(make_refusal("call-4", parent="call-3b",
                                                                               recorded_at=10.0),))
    assert resp["status"] == "incomplete"
    assert resp["incomplete_details"] == {"reason": "max_output_tokens"}


@pytest.mark.parametrize("twin_time", [10.0, 11.0])
def test_twin_served_at_or_after_the_refusal_means_recovery(twin_time: float) -> None:
    conv = _refusal_case()
    conv.retry("call-3b", "call-3", twin=True, created_at=twin_time)
    for parent in ("call-3", "call-3b"):
        resp = respond(conv, refusals=[make_refusal("call-4", parent=parent, recorded_at=10.0)])
        assert resp["status"] == "completed", parent


def test_twin_served_just_before_the_refusal_is_no_recovery() -> None:
    conv = _refusal_case()
    conv.retry("call-3b", "call-3", twin=True, created_at=9.5)
    resp = respond(conv, refusals=[make_refusal("call-4", parent="call-3", recorded_at=10.0)])
    assert resp["status"] == "incomplete"


def test_last_call_itself_served_at_the_refusal_time_means_recovery() -> None:
    conv = _refusal_case()
    resp = respond(conv, refusals=[make_refusal("call-4", parent="call-3", recorded_at=3.0)])
    assert resp["status"] == "completed"
    resp = respond(conv, refusals=[make_refusal("call-4", parent="call-3", recorded_at=3.5)])
    assert resp["status"] == "incomplete"


def test_recovery_reads_the_whole_twin_group_whichever_twin_was_kept() -> None:
    # The later twin holds the smaller id and is the one delivered; the earlier twin
    # is quarantined. Recovery is judged over both.
    conv = Conv()
    conv.root("call-1")
    conv.child("call-2", "call-1")
    conv.child("call-9", "call-2", created_at=5.0)
    conv.retry("call-3", "call-9", twin=True, created_at=20.0)
    out = prefix_merging(conv.entries())
    assert ids_of(out.chains[0])[-1] == "call-3"
    for parent in ("call-3", "call-9"):
        resp = project_main_chain_response("r", out, engine_refusals=(make_refusal("x", parent=parent,
                                                                                   recorded_at=10.0),))
        assert resp["status"] == "completed", parent


def test_empty_generation_call_with_the_same_sequence_is_not_a_twin() -> None:
    conv = _refusal_case()
    # call-e's prompt is call-3's whole sequence and it generated nothing
    conv.child("call-e", "call-3", inter=[], gen=[], created_at=4.0)
    out = prefix_merging(conv.entries())
    assert out.notes.empty_generation_calls == ["call-e"]
    assert "call-e" in out.entries
    resp = project_main_chain_response("r", out, engine_refusals=(make_refusal("x", parent="call-e",
                                                                               recorded_at=10.0),))
    assert resp["status"] == "completed"


def test_one_ending_refusal_among_several_is_enough() -> None:
    refusals = [make_refusal("a", parent="call-1", recorded_at=10.0),
                make_refusal("b", parent="call-3", code=None, recorded_at=10.0),
                make_refusal("c", parent="call-3", recorded_at=10.0)]
    assert respond(_refusal_case(), refusals=refusals)["status"] == "incomplete"


# =========================================================================== assert_prefix_contiguity


def _good_response() -> dict:
    return plain(respond(three_calls()))


def test_contiguity_accepts_a_projected_response() -> None:
    assert_prefix_contiguity(_good_response())


@pytest.mark.parametrize("damage", ["drop_last_prompt_token", "change_middle_token", "omit_previous_generation",
                                    "change_first_prompt_later"])
def test_contiguity_rejects_a_broken_payload(damage: str) -> None:
    resp = _good_response()
    toks = token_items(resp["output"])
    first, second, third = toks
    if damage == "drop_last_prompt_token":
        cut = len(first["prompt_token_ids"]) + len(first["generation_token_ids"])
        second["prompt_token_ids"] = second["prompt_token_ids"][: cut - 1]
    elif damage == "change_middle_token":
        third["prompt_token_ids"][len(first["prompt_token_ids"]) + 1] += 1
    elif damage == "omit_previous_generation":
        n = len(second["prompt_token_ids"])
        third["prompt_token_ids"] = third["prompt_token_ids"][:n] + third["prompt_token_ids"][
            n + len(second["generation_token_ids"]):]
    else:
        third["prompt_token_ids"][0] += 1
    with pytest.raises(AssertionError):
        assert_prefix_contiguity(resp)


def test_contiguity_ignores_items_without_tokens() -> None:
    resp = _good_response()
    resp["output"].insert(1, {"type": "function_call_output", "output": "tool says hi"})
    assert_prefix_contiguity(resp)


# =========================================================================== 6. loss mask


@pytest.mark.parametrize("delta", [False, True])
def test_loss_mask_matches_the_projection(delta: bool) -> None:
    conv = linear_chain(4, delta=delta, inter_len=3)
    out = prefix_merging(conv.entries())
    chain = out.chains[0]
    lm = loss_mask(chain)
    tok, mask, lps = ints(lm.token_ids), ints(lm.mask), floats(lm.log_probs)
    assert len(tok) == len(mask) == len(lps)
    last = token_items(project_chain_to_output_items(chain))[-1]
    assert tok == ints(last["prompt_token_ids"]) + ints(last["generation_token_ids"])
    gen_total = sum(len(conv.gen[c]) for c in conv.gen)
    assert sum(mask) == gen_total
    assert set(mask) <= {0, 1}
    # exact provenance: prompt / interstitial 0 with NaN, generation 1 with its log-probs
    expected_mask: list[int] = []
    expected_lp: list[float] = []
    prev_full = 0
    for cid in sorted(conv.prompt):
        n_prompt = len(conv.prompt[cid]) - prev_full
        expected_mask += [0] * n_prompt + [1] * len(conv.gen[cid])
        expected_lp += [math.nan] * n_prompt + conv.record(cid)["generation_log_probs"]
        prev_full = len(conv.full[cid])
    assert mask == expected_mask
    for got, want in zip(lps, expected_lp):
        if math.isnan(want):
            assert math.isnan(got)
        else:
            assert got == want


def test_loss_mask_of_a_branch_chain_and_a_root_only_chain() -> None:
    conv = Conv()
    conv.root("call-r", prompt_len=5, gen_len=2)
    conv.child("call-x", "call-r", inter_len=4, gen_len=3)
    conv.child("call-y", "call-r", inter_len=1, gen_len=6)
    conv.root("call-z", prompt_len=3, gen_len=1, resolution="unresolved")
    out = prefix_merging(conv.entries())
    for chain in out.chains:
        lm = loss_mask(chain)
        last = ids_of(chain)[-1]
        assert ints(lm.token_ids) == conv.full[last]
        assert sum(ints(lm.mask)) == chain_generated(chain)
        lps = floats(lm.log_probs)
        assert all(math.isnan(lp) == (m == 0) for lp, m in zip(lps, ints(lm.mask)))
    z = next(c for c in out.chains if ids_of(c) == ["call-z"])
    assert ints(loss_mask(z).mask) == [0, 0, 0, 1]


def chain_generated(chain) -> int:
    return sum(len(link.entry.generation_token_ids) for link in chain.links)


def test_loss_mask_converts_cleanly_with_list() -> None:
    conv = Conv()
    conv.root("call-1", prompt=[0, 2**64 - 1], gen=[2**63, 7])
    lm = loss_mask(prefix_merging(conv.entries()).chains[0])
    assert ints(lm.token_ids) == [0, 2**64 - 1, 2**63, 7]
    assert [int(x) for x in list(lm.token_ids)] == [0, 2**64 - 1, 2**63, 7]
    assert ints(lm.mask) == [0, 0, 1, 1]


def test_stale_token_fields_in_captured_items_appear_on_no_other_item() -> None:
    stale = {"prompt_token_ids": [9, 9], "generation_token_ids": [9], "generation_log_probs": [-9.0]}
    conv = Conv()
    conv.root("call-1", output_items=[dict(msg("a"), **stale), dict(fcall("f"), **stale)], token_item_index=1)
    conv.child("call-2", "call-1", output_items=[dict(msg("b"), **stale)], token_item_index=0)
    out = prefix_merging(conv.entries())
    items = project_chain_to_output_items(out.chains[0])
    assert len(items) == 3
    assert not any(f in items[0] for f in TOKEN_FIELDS), items[0]
    assert ints(items[1]["prompt_token_ids"]) == conv.prompt["call-1"]
    assert ints(items[2]["generation_token_ids"]) == conv.gen["call-2"]
    assert_prefix_contiguity({"output": items})


def test_long_chain_projection_is_contiguous_and_masks_match() -> None:
    conv = linear_chain(1500, delta=True, inter_len=1, gen_len=1)
    out = prefix_merging(conv.entries())
    resp = project_main_chain_response("long", out)
    assert len(resp["output"]) == 1500
    assert resp["usage"]["output_tokens"] == 3 + 1499
    assert_prefix_contiguity(resp)
    lm = loss_mask(out.chains[0])
    last = resp["output"][-1]
    assert len(lm.token_ids) == len(last["prompt_token_ids"]) + len(last["generation_token_ids"])
    assert int(np.asarray(lm.mask).sum()) == 3 + 1499


def test_chain_sequence_of_a_loaded_lane_is_the_last_call_without_a_copy() -> None:
    # Issue 19.20: the loader keeps a chain of full prompts in one lane, and the builder links a
    # call only on proof that its prompt extends its parent's sequence: the chain's sequence is
    # then the last call's prompt and generation, viewed where they are.
    import json

    from helpers import snapshot_dict

    from tokencap.builder import prefix_merging
    from tokencap.loading.capture_text import load_text
    from tokencap.projection import chain_sequence

    conv = linear_chain(5)
    [snap] = load_text(json.dumps(snapshot_dict(conv.records)).encode(), "s.json")
    main = prefix_merging(snap.entries).main
    last = main.links[-1].entry
    seq = chain_sequence(main)
    assert np.shares_memory(seq, last.prompt_token_ids), "the chain's sequence was copied"
    expected = ints(main.root_prompt) + [t for link in main.links
                                         for t in ints(link.interstitial) + ints(link.entry.generation_token_ids)]
    assert ints(seq) == expected == ints(last.prompt_token_ids) + ints(last.generation_token_ids)
    # Records whose arrays are not side by side (built in Python) still get the sequence, copied.
    separate = prefix_merging(conv.entries()).main
    assert ints(chain_sequence(separate)) == expected
