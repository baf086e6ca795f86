"""The Rollout page's words for why a lineage broke, and a break's proof (views/rollout/breaks.py, linkproof.py)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import entry_dict, snapshot_dict
from helpers_diagnosis import XY, X, Y, broken_rollout, tokenizer_file, view_of

from tokencap.diagnosis import Break, Divergence
from tokencap.views.rollout import breaks as bv
from tokencap.views.rollout import culprits as cv
from tokencap.views.rollout import linkproof as lp


def brk(cause: str, *, token_cause: str | None = None, d=(10, 422), i=(10, 10), reasoning=False, agree=10,
        evidence=(), predecessor="call-0006", kind="boundary", sibling=None) -> Break:
    div = (Divergence(d[0], d[1], i[0], i[1], token_cause or cause),)
    return Break("call-0007", kind, "parent_unresolved", predecessor, "nearest", sibling, agree, 500, 300, div, 0,
                 cause, token_cause or cause, "", reasoning, evidence=tuple(evidence))


@pytest.mark.parametrize("cause, kw, words", [
    ("generation_dropped", {"reasoning": True},
     "call-0007's prompt leaves out 412 tokens call-0006 generated (its reasoning): the chat template likely "
     "strips earlier reasoning"),
    ("generation_dropped", {}, "call-0007's prompt leaves out 412 tokens call-0006 generated: earlier model output"),
    ("history_dropped", {}, "call-0007's prompt leaves out 412 tokens of call-0006's history at position 10: "
                            "likely truncation"),
    ("tokens_inserted", {"d": (10, 10), "i": (10, 13)},
     "call-0007's prompt inserts 3 tokens into call-0006's history at position 10"),
    ("tokens_replaced", {"d": (10, 12), "i": (10, 11)},
     "call-0007's prompt replaces 2 tokens of call-0006 at position 10 with 1 token of its own: likely a "
     "re-rendered tool call"),
    ("retokenized", {"d": (10, 12), "i": (10, 11)},
     "call-0007's prompt carries 2 tokens of call-0006 at position 10 as 1 token of the same text"),
    ("opening_changed", {"d": (3, 4), "i": (3, 4)},
     "call-0007's prompt replaces 1 token of call-0006 in the opening (system prompt, tools) at position 3"),
    ("seam", {"d": (497, 500), "i": (497, 300)}, "leaves out the last 3 tokens of call-0006 (its turn boundary)"),
    ("new_context", {"agree": 0}, "call-0007's prompt shares no token with call-0006"),
    ("new_context", {"agree": 40}, "shares only the opening with call-0006 (40 tokens), nothing after it"),
    ("history_replaced", {}, "replaces call-0006's history from position 10 on (412 tokens) with 0 tokens"),
])
def test_break_words_name_the_cause_the_predecessor_and_the_first_divergence(cause, kw, words):
    assert words in bv.break_words(brk(cause, **kw))


def test_words_of_link_intact_branch_record_fault_and_no_predecessor():
    intact = Break("c2", "boundary", None, "c1", "nearest", None, 500, 500, 600, (), 0, "link_intact", "link_intact",
                   "", False)
    assert bv.break_words(intact).startswith("c2's prompt continues all 500 tokens of c1 exactly: the tokens prove")
    branch = Break("c3", "branch", None, "c1", "branch_point", "c2", 10, 20, 30, (), 0, "branch", "seam", "", False)
    assert bv.break_words(branch) == "c3 continues c1 as c2 does, with another prompt: a second conversation " \
                                     "continues the same call"
    fault = Break("c4", "record_fault", "entry_digest_mismatch", None, None, None, None, None, 9, (), 0,
                  "record_fault", "record_fault", "", False)
    assert bv.break_words(fault) == "c4's record is faulty (entry_digest_mismatch)"
    alone = Break("c5", "extra_root", None, None, None, None, None, None, 9, (), 0, "new_context", "new_context", "",
                  False)
    assert bv.break_words(alone).startswith("c5 continues no earlier call: likely")


def test_evidence_causes_say_what_the_harness_recorded_and_what_the_tokens_show():
    compaction = brk("compaction", token_cause="history_replaced",
                     evidence=[{"kind": "compaction_after", "call_id": "call-0007", "tokens_before": 9000,
                                "tokens_after": 800}])
    words = bv.break_words(compaction)
    assert words.startswith("the harness recorded a compaction at call-0007 (9,000 → 800 tokens): the prompt "
                            "starts over from a summary of the history; in the tokens, call-0007's prompt replaces")
    sub = brk("subagent", token_cause="new_context", agree=0,
              evidence=[{"kind": "invocation", "call_id": "call-0007", "invocation_id": "inv-2"}])
    assert bv.break_words(sub).startswith("call-0007 opens a sub-agent's conversation (invocation inv-2)")
    assert "summariser request" in bv.break_words(brk("compaction_summary", token_cause="new_context"))
    for cause in ("compaction", "compaction_summary", "subagent"):  # no phrase said twice (issue 37, item 5)
        said = bv.break_words(brk(cause, token_cause="new_context", agree=0, evidence=sub.evidence))
        head, _, tail = said.partition(": ")
        assert not ({w for w in head.split() if len(w) > 4} & {w for w in tail.split(";")[0].split() if len(w) > 4}
                    - {"call-0007", "harness"}), said
    assert "chat template" in bv.hint(brk("generation_dropped"))


def test_breaks_of_a_view_with_and_without_a_tokenizer(tmp_path):
    view = view_of(broken_rollout("r"))
    plain = bv.breaks_of(view)
    assert [(b.call_id, b.cause) for b in plain] == [("call-0002", "tokens_replaced")]
    assert bv.breaks_of(view) is plain  # once per view
    tok = tokenizer_file(tmp_path / "tokenizer.json")
    from tokencap.diagnosis import load_tokenizer

    refined = bv.breaks_of(view, load_tokenizer(tok), "k1")
    assert refined[0].cause == "retokenized" and refined[0].parent_text == refined[0].prompt_text == "x y"
    assert bv.break_of(view, "call-0001") is None
    assert bv.breaks_of(view_of(broken_rollout("r", replaced=False))) == []


def test_the_views_evidence_reaches_the_diagnosis_never_the_verdict():
    evidence = {"ng_agent_observations": {"source": "a", "gaps": [], "records": [
        {"kind": "context_compaction", "after_model_call": {"model_call_id": "call-0002"}}]}}
    with_evidence, without = view_of(broken_rollout("r"), evidence), view_of(broken_rollout("r"))
    assert bv.breaks_of(with_evidence)[0].cause == "compaction"
    assert with_evidence.result.mask_reasons == without.result.mask_reasons
    assert with_evidence.result.metrics == without.result.metrics


def test_culprits_carry_why_and_keep_their_own_words():
    view = view_of(broken_rollout("r"))
    lines = cv.culprits_of(view)
    culprit = lines[0].culprits[0]
    assert culprit.text == "call-0002's claimed parent call-0001 does not open its prompt"
    assert culprit.why.startswith("call-0002's prompt replaces 2 tokens of call-0001 at position 5")
    assert culprit.words == f"{culprit.text} — {culprit.why}"
    assert cv.culprits_of(view_of(broken_rollout("r", replaced=False))) == []


def test_a_break_proof_marks_each_divergence_and_shows_both_sides_tokens(tmp_path):
    view = view_of(broken_rollout("r"))
    proof = lp.break_proof(view, bv.breaks_of(view)[0])
    assert (proof.child, proof.parent, proof.relation, proof.cause) == ("call-0002", "call-0001", "claimed",
                                                                        "tokens_replaced")
    assert proof.agree == 5 and proof.parent_len == 17 and proof.prompt_len == 25
    assert [(s.side, s.start, s.end, s.kind) for s in proof.spans] == [("parent", 5, 7, "replaced"),
                                                                       ("prompt", 5, 6, "replaced")]
    assert proof.parent_tokens.tolist()[proof.spans[0].start - proof.parent_window[0]:][:2] == [X, Y]
    assert XY in proof.prompt_tokens.tolist()
    assert "share a prefix of 5 tokens" in proof.summary() and "1 divergence" in proof.summary()


def test_a_dropped_span_and_an_unresolved_boundary_have_their_proof():
    # call-0002 claims no parent (unresolved) and leaves out call-0001's generated [1, 2]: dropped
    gen = [X, Y, *range(20, 30)]
    root = entry_dict("call-0001", [10, 11, 12, 13, 14], gen, rollout_id="d", created_at=1.0)
    child = entry_dict("call-0002", [10, 11, 12, 13, 14, *range(20, 30), 40, 41], [50], rollout_id="d",
                       resolution="unresolved", created_at=2.0)
    view = view_of(snapshot_dict([root, child], rollout_id="d"))
    found = bv.breaks_of(view)
    assert [(b.call_id, b.relation, b.cause) for b in found] == [("call-0002", "nearest", "generation_dropped")]
    proof = lp.break_proof(view, found[0])
    assert [(s.side, s.start, s.end, s.kind) for s in proof.spans] == [("parent", 5, 7, "dropped")]
    assert "leaves out 2 tokens call-0001 generated" in bv.break_words(found[0])
    assert lp.break_proof(view, Break("x", "record_fault", None, None, None, None, None, None, 1, (), 0,
                                      "record_fault", "record_fault", "", False)) is None
    assert np.asarray(proof.parent_tokens).size > 0
