"""Breaks, predecessors, divergence kinds and causes (docs/contract.md#breaks to #decoded-text), one built rollout each."""

from __future__ import annotations

import json

import pytest
from diagnosis_cases import GEN1, OPENING, Case, tiny_tokenizer
from synth_snapshots import Capture, kitchen_sink

from tokencap import build_rollout, diagnose
from tokencap.diagnosis import BREAK_FIELDS, CAUSES, DIVERGENCE_KINDS, HINTS, TokenizerError, break_facts, cause_order
from tokencap.diagnosis.causes import divergence_kind


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


def test_every_cause_has_one_sentence_hint_and_the_kinds_are_causes():
    assert set(HINTS) == set(CAUSES) and CAUSES == (
        "compaction", "compaction_summary", "subagent", "generation_dropped", "history_reordered", "retokenized",
        "tokens_replaced", "tokens_inserted", "history_dropped", "history_replaced", "opening_changed", "seam",
        "prompt_missing", "new_context", "branch", "link_intact", "record_fault")  # the order of docs/contract.md#causes
    for cause, hint in HINTS.items():
        assert hint.endswith(".") and hint.count(". ") == 0, cause
    assert [c for c in CAUSES if c in DIVERGENCE_KINDS] == list(DIVERGENCE_KINDS)
    assert cause_order({"seam", "compaction", "nonsense", "branch"}) == ["compaction", "seam", "branch"]


# --------------------------------------------------------------------------- divergence kinds


def test_generation_dropped():
    case = Case()
    case.brk(case.opening + case.x + case.g2 + case.fresh(3))  # G1 (a's generation) left out
    b = case.only()
    assert (b.predecessor, b.relation, b.agree, b.predecessor_len) == ("a2", "nearest", OPENING, 45)
    d = b.divergences[0]
    assert (d.parent_start, d.parent_end, d.prompt_start, d.prompt_end) == (OPENING, OPENING + GEN1, OPENING, OPENING)
    assert d.kind == b.cause == b.token_cause == "generation_dropped"
    assert b.hint == HINTS["generation_dropped"] and b.reasoning is False


def test_history_dropped():
    case = Case()
    case.brk(case.opening + case.g1 + case.g2 + case.fresh(3))  # the interstitial X left out
    b = case.only()
    assert b.divergences[0].kind == b.cause == "history_dropped"
    assert (b.divergences[0].parent_start, b.divergences[0].parent_end) == (30, 35)


def test_tokens_inserted():
    case = Case()
    case.brk(case.opening + case.g1 + case.fresh(3) + case.x + case.g2)
    b = case.only()
    d = b.divergences[0]
    assert (d.parent_start, d.parent_end, d.prompt_end - d.prompt_start) == (30, 30, 3)
    assert b.cause == "tokens_inserted"


def test_tokens_replaced_when_both_sides_are_short():
    case = Case()
    case.brk(case.opening + case.g1 + case.fresh(6) + case.g2)
    assert case.only().cause == "tokens_replaced"


def test_history_replaced_when_a_side_is_long():
    case = Case()
    case.brk(case.opening + case.g1 + case.fresh(40) + case.g2)
    b = case.only()
    assert b.cause == "history_replaced" and b.divergences[0].prompt_end - b.divergences[0].prompt_start == 40


def test_history_replaced_to_the_end():
    case = Case()
    case.brk(case.opening + case.g1 + case.fresh(30))  # X and G2 gone, nothing resynchronises
    b = case.only()
    assert b.divergences[0].parent_end == 45 and b.cause == "history_replaced"


def test_opening_changed():
    case = Case()
    prompt = list(case.s)
    prompt[5:8] = case.fresh(2)
    case.brk(prompt + case.fresh(2))
    b = case.only()
    assert b.divergences[0].parent_end <= OPENING and b.cause == "opening_changed"


@pytest.mark.parametrize("lost", [1, 2, 3])
def test_seam(lost):
    case = Case()
    case.brk(case.s[:-lost] + case.fresh(6))
    b = case.only()
    assert b.cause == "seam" and b.divergences[0].parent_start == 45 - lost


def test_four_lost_tokens_are_not_a_seam():
    case = Case()
    case.brk(case.s[:-4] + case.fresh(6))
    assert case.only().cause == "history_replaced"


def test_new_context():
    case = Case()
    case.brk(case.opening + case.fresh(30))
    b = case.only()
    assert b.agree == OPENING and b.cause == "new_context"


def test_link_intact_when_the_prompt_continues_the_predecessor():
    case = Case()
    case.brk(case.s + case.fresh(4))  # unresolved at request time, but the tokens prove the link
    b = case.only()
    assert (b.agree, b.divergences, b.cause, b.more_divergences) == (45, (), "link_intact", 0)


def test_the_kind_function_orders_its_rules():
    kw = dict(predecessor_len=100, opening_len=20, all_generated=True)
    assert divergence_kind(parent_start=97, parent_end=100, prompt_start=97, prompt_end=97, to_end=True, **kw) == "seam"
    assert divergence_kind(parent_start=20, parent_end=100, prompt_start=20, prompt_end=30, to_end=True,
                           **kw) == "new_context"
    assert divergence_kind(parent_start=0, parent_end=10, prompt_start=0, prompt_end=5, to_end=False,
                           **kw) == "opening_changed"
    assert divergence_kind(parent_start=30, parent_end=40, prompt_start=30, prompt_end=35, to_end=False,
                           same_text=True, **kw) == "retokenized"
    assert divergence_kind(parent_start=30, parent_end=30, prompt_start=30, prompt_end=35, to_end=False,
                           **kw) == "tokens_inserted"


def test_more_than_32_divergences_are_counted_not_listed():
    c = Capture("many", seed=2)
    body = list(range(10_000, 10_000 + 40 * 16))
    c.call("a", prompt=body[:20], generation=body[20:])
    bent = list(body)
    for k in range(40):
        bent[30 + k * 15] = 5_000 + k  # one token replaced every 15: each resynchronises
    c.call("b", prompt=bent + [1, 2], generation=[3], resolution="unresolved")
    (b,) = diagnose(build_rollout(c.snapshot()))
    assert len(b.divergences) == 32 and b.more_divergences == 8
    assert all(d.kind == "tokens_replaced" for d in b.divergences)
    assert len(b.to_dict()["divergences"]) == 32


# --------------------------------------------------------------------------- kinds of breaks and predecessors


def test_a_stale_claim_is_a_boundary_aligned_against_the_claimed_parent():
    case = Case()
    case.brk(case.opening + case.fresh(12), claimed="a2")
    b = case.only()
    assert (b.kind, b.note, b.predecessor, b.relation) == ("boundary", "parent_digest_mismatch", "a2", "claimed")


def test_missing_resolution_and_missing_parent_are_boundaries():
    case = Case()
    case.brk(case.s + case.fresh(3), resolution=None)
    case.brk(case.opening + case.fresh(3), call_id="g", claimed="ghost")
    found = {b.call_id: b for b in case.breaks()}
    assert (found["b"].note, found["b"].relation, found["b"].cause) == ("missing_resolution", "nearest", "link_intact")
    assert (found["g"].note, found["g"].relation) == ("parent_call_id_missing", "nearest")


def test_an_extra_root_has_the_nearest_predecessor():
    case = Case()
    case.brk(case.opening + case.g1 + case.fresh(8), resolution="root")
    b = case.only()
    assert (b.kind, b.note, b.relation, b.predecessor) == ("extra_root", None, "nearest", "a2")


def test_without_an_earlier_call_there_is_no_predecessor():
    c = Capture("early", seed=1)
    c.call("a", prompt=[1, 2, 3], generation=[4, 5], created_at=10.0)
    c.call("b", prompt=[1, 2, 9], generation=[6], resolution="unresolved", created_at=5.0)
    found = {b.call_id: b for b in diagnose(build_rollout(c.snapshot()))}
    b = found["b"]
    assert (b.predecessor, b.relation, b.agree, b.predecessor_len, b.prompt_len) == (None, None, None, None, 3)
    assert b.cause == b.token_cause == "new_context"


def test_nearest_prefers_the_longest_shared_prefix_then_latest_then_longer_then_smaller_id():
    c = Capture("ties", seed=1)
    c.call("r", prompt=[1, 2, 3, 4], generation=[5, 6], created_at=1.0)
    c.call("p", prompt=[1, 2, 3, 4, 5, 6, 7], generation=[8], created_at=2.0, resolution="root")
    c.call("q", prompt=[1, 2, 3, 4, 5, 6, 7, 8], generation=[50, 51], created_at=2.0, resolution="root")
    c.call("s", prompt=[1, 2, 3, 4, 5, 6, 7, 8], generation=[50, 52], created_at=2.0, resolution="root")
    c.call("b", prompt=[1, 2, 3, 4, 5, 6, 7, 8, 50, 99], generation=[9], created_at=3.0, resolution="unresolved")
    found = {b.call_id: b for b in diagnose(build_rollout(c.snapshot()))}
    # q and s share 9 tokens, at the same time and length: the smaller id.
    assert (found["b"].predecessor, found["b"].agree) == ("q", 9)


def test_nearest_compares_each_call_of_a_chain_by_its_own_length():
    # a's child a2 shares 7 tokens with b but was made after b (no candidate); a itself has
    # only 4 tokens, so a ties with y at 4 shared tokens and the later y wins the tie.
    c = Capture("capped", seed=1)
    c.call("a", prompt=[1, 2, 3], generation=[4], created_at=1.0)
    c.call("a2", "a", prompt=[1, 2, 3, 4, 5, 6], generation=[7, 8], created_at=20.0)
    c.call("y", prompt=[1, 2, 3, 4, 50], generation=[51], created_at=5.0, resolution="root")
    c.call("b", prompt=[1, 2, 3, 4, 5, 6, 7, 99], generation=[9], created_at=10.0, resolution="unresolved")
    found = {b.call_id: b for b in diagnose(build_rollout(c.snapshot()))}
    assert (found["b"].predecessor, found["b"].agree) == ("y", 4)


def test_a_quarantined_root_retry_is_no_extra_root():
    c = Capture("retry", seed=1)
    c.call("a", prompt=[1, 2, 3], generation=[4, 5])
    c.call("a-retry", prompt=[1, 2, 3], generation=[6, 7], resolution="root")  # same request, not extended
    c.call("a2", "a", generation=[8])
    result = build_rollout(c.snapshot())
    assert result.build.quarantined == ["a-retry"] and not result.mask_sample
    assert diagnose(result) == []


def test_nearest_never_picks_the_break_s_own_descendant():
    c = Capture("desc", seed=1)
    c.call("a", prompt=[1, 2, 3], generation=[4], created_at=1.0)
    c.call("b", prompt=[1, 2, 3, 4, 7, 7], generation=[8, 9], created_at=5.0, resolution="unresolved")
    c.call("kid", "b", generation=[10], created_at=2.0)  # linked below b, yet created earlier
    found = {b.call_id: b for b in diagnose(build_rollout(c.snapshot()))}
    assert found["b"].predecessor == "a"


def test_a_branch_names_its_branch_point_and_main_sibling():
    breaks = {b.call_id: b for b in diagnose(build_rollout(kitchen_sink().snapshot()))}
    b = breaks["b01"]
    assert (b.kind, b.predecessor, b.relation, b.sibling) == ("branch", "c02", "branch_point", "c03")
    assert (b.cause, b.token_cause) == ("branch", "link_intact")
    assert "c03r" not in breaks  # a quarantined retry is not a branch
    assert "b02" not in breaks  # continues the branch, whose parent is not on the main chain


def test_record_faults_of_each_kind():
    case = Case()
    bad = case.c.call("x", "a2", generation=case.fresh(2))
    bad["digest"] = "0" * 64
    delta = case.c.call("d", "x", generation=case.fresh(2))
    delta.update(prompt_is_delta=True, prompt_token_ids=delta["prompt_token_ids"][47:])
    dup = case.c.call("dup", "a2", generation=case.fresh(2))
    case.c.records.append({**dup, "generation_log_probs": [-9.0, -9.0]})
    found = {b.call_id: b for b in case.breaks()}
    assert {c: (b.kind, b.note) for c, b in found.items() if b.kind == "record_fault"} == {
        "x": ("record_fault", "entry_digest_mismatch"), "d": ("record_fault", "delta_chain_unreconstructable"),
        "dup": ("record_fault", "duplicate_call_id_conflict")}
    for call_id in ("x", "d", "dup"):
        b = found[call_id]
        assert (b.predecessor, b.relation, b.cause, b.token_cause, b.divergences) == (None, None, "record_fault",
                                                                                      "record_fault", ())


def test_breaks_are_listed_by_creation_time_then_id_and_summed_up_for_the_table():
    case = Case()
    case.brk(case.opening + case.fresh(5), call_id="z", created_at=2000.0)
    case.brk(case.opening + case.fresh(5), call_id="y", created_at=1500.0)
    case.brk(case.s[:-1] + case.fresh(5), call_id="w", created_at=1500.0)
    breaks = case.breaks()
    assert [b.call_id for b in breaks] == ["w", "y", "z"]
    assert break_facts(breaks) == (3, ["seam", "new_context"], "w")
    assert break_facts([]) == (0, [], None)


def test_a_trainable_rollout_and_an_unbuilt_one_have_no_breaks():
    case = Case()
    assert case.breaks() == []
    from tokencap import TokenCaptureSnapshot
    assert diagnose(build_rollout(TokenCaptureSnapshot(rollout_id="x", entries=[], load_error="bad"))) == []


def test_to_dict_is_json_native_in_field_order():
    case = Case()
    case.brk(case.opening + case.x + case.g2)
    d = case.only().to_dict()
    assert tuple(d) == BREAK_FIELDS
    assert json.loads(json.dumps(d)) == d
    assert d["divergences"][0] == {"parent_start": 20, "parent_end": 30, "prompt_start": 20, "prompt_end": 20,
                                   "kind": "generation_dropped"}


# --------------------------------------------------------------------------- reasoning and text


def test_reasoning_from_the_owner_s_reasoning_item():
    case = Case()
    case.c.records[0]["output_items"] = [{"type": "reasoning", "summary": []},
                                         {"type": "message", "role": "assistant", "content": []}]
    case.brk(case.opening + case.x + case.g2)
    b = case.only()
    assert b.cause == "generation_dropped" and b.reasoning is True


def _encoded(tok, text):
    return tok.encode(text).ids


def test_reasoning_from_decoded_think_and_texts(tokenizer):
    c = Capture("think", seed=1)
    opening = _encoded(tokenizer, "<|im_start|>the model reads the question<|im_end|>")
    think = _encoded(tokenizer, "  <think>the model thinks about the answer</think>")
    answer = _encoded(tokenizer, "hello world, this is the answer")
    c.call("a", prompt=opening, generation=think + answer)
    c.call("b", prompt=opening + answer + _encoded(tokenizer, "<|im_end|>the tool returned"), generation=[5],
           resolution="unresolved")
    (b,) = diagnose(build_rollout(c.snapshot()), tokenizer=tokenizer)
    assert b.cause == "generation_dropped" and b.reasoning is True
    assert b.parent_text == tokenizer.decode(think, skip_special_tokens=False) and b.parent_text.lstrip().startswith(
        "<think>")
    assert b.prompt_text == "" and b.same_text is False
    (plain,) = diagnose(build_rollout(c.snapshot()))
    assert (plain.reasoning, plain.parent_text, plain.prompt_text, plain.same_text) == (False, None, None, None)


def test_retokenized_needs_a_tokenizer_and_the_same_text(tokenizer):
    word = next(t for t, i in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
                if len(t) >= 4 and t.isalpha())
    whole = [tokenizer.token_to_id(word)]
    pieces = [tokenizer.token_to_id(ch) for ch in word]
    assert None not in pieces and tokenizer.decode(whole) == tokenizer.decode(pieces)
    c = Capture("retok", seed=1)
    c.call("a", prompt=list(range(300, 320)), generation=list(range(320, 330)))
    c.call("a2", "a", prompt=list(range(300, 330)) + whole + list(range(330, 340)), generation=list(range(340, 350)))
    c.call("b", prompt=list(range(300, 330)) + pieces + list(range(330, 350)) + [1], generation=[2],
           resolution="unresolved")
    (b,) = diagnose(build_rollout(c.snapshot()), tokenizer=tokenizer)
    assert (b.cause, b.same_text, b.parent_text, b.prompt_text) == ("retokenized", True, word.replace("Ġ", " "),
                                                                   word.replace("Ġ", " "))
    (plain,) = diagnose(build_rollout(c.snapshot()))
    assert plain.cause == "tokens_replaced"


def test_an_undecodable_id_leaves_the_text_out_with_a_note(tokenizer):
    case = Case()  # ids from 900,000: far outside the tiny vocabulary
    case.brk(case.opening + case.x + case.g2)
    b = case.only(tokenizer=tokenizer)
    assert (b.parent_text, b.prompt_text, b.same_text) == (None, None, None)
    assert b.cause == "generation_dropped"
    assert any("cannot decode token id" in n for n in b.notes)


def test_a_long_text_is_clipped_with_an_ellipsis(tokenizer):
    c = Capture("long", seed=1)
    sentence = _encoded(tokenizer, "the tool returned three results and the model answered ")
    c.call("a", prompt=[5, 6, 7], generation=sentence * 60)
    c.call("b", prompt=[5, 6, 7, 8], generation=[9], resolution="unresolved")
    (b,) = diagnose(build_rollout(c.snapshot()), tokenizer=tokenizer)
    assert len(b.parent_text) == 2000 and b.parent_text.endswith("…")


def test_a_tokenizer_path_is_read_and_a_bad_one_is_a_clear_error(tmp_path, tokenizer):
    path = tmp_path / "tokenizer.json"
    tiny_tokenizer(path)
    case = Case()
    case.brk(case.opening + case.x + case.g2)
    result = case.result()
    assert diagnose(result, tokenizer=str(path))[0].cause == "generation_dropped"
    (tmp_path / "bad.json").write_text("{}")
    (tmp_path / "empty").mkdir()  # a directory without a tokenizer.json (one with it is a model directory)
    for bad in (tmp_path / "missing.json", tmp_path / "bad.json", tmp_path / "empty"):
        with pytest.raises(TokenizerError, match=str(bad)):
            diagnose(result, tokenizer=bad)
