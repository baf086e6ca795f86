"""Culprits: every mask reason names the call(s) that caused it, in words that do not mislead."""

from __future__ import annotations

from pathlib import Path

from synth_snapshots import Capture, kitchen_sink

from tokencap import TokenCaptureSnapshot, load_snapshots
from tokencap.views import RolloutView
from tokencap.views.model import dangling_intents
from tokencap.views.rollout import culprits as cv
from tokencap.views.rollout import tree as tv
from tokencap.views.rollout import verdicts as vv

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"


def view_of(name: str, index: int = 0, anchor: str | None = None) -> RolloutView:
    return RolloutView(load_snapshots(SAMPLES / name)[index], anchor=anchor)


def lines_by_code(view: RolloutView) -> dict[str, list[cv.Culprit]]:
    return {line.code: line.culprits for line in cv.culprits_of(view)}


def test_every_reason_of_every_masked_sample_has_a_line_and_every_culprit_key_is_a_tree_node():
    for path in sorted(SAMPLES.iterdir()):
        if path.name in ("README.md", "expected.json", "final_responses", "tokenizer.json"):  # not captures
            continue
        for snapshot in load_snapshots(path):
            view = RolloutView(snapshot)
            lines = cv.culprits_of(view)
            assert [line.code for line in lines] == view.result.mask_reasons
            model = tv.tree_of(view)
            for line in lines:
                assert line.culprits, (path.name, line.code)
                for culprit in line.culprits:
                    assert culprit.key is None or culprit.key in model.index, (path.name, culprit)


def test_a_stale_link_names_the_claimed_parent_that_does_not_open_the_prompt():
    culprits = lines_by_code(view_of("stale_parent_link.json"))["unresolved_parent_calls"]
    assert [(c.text, c.key) for c in culprits] == [
        ("call-0003's claimed parent call-0002 does not open its prompt", "call:call-0003")]


def test_a_corrupt_record_reads_as_corrupt_not_unresolved():
    (culprit,) = lines_by_code(view_of("corrupt_record.json"))["unresolved_parent_calls"]
    assert culprit.text.startswith("call-0002 is corrupt:") and "unresolved" not in culprit.text
    (dup,) = lines_by_code(view_of("duplicate_call_id.json"))["unresolved_parent_calls"]
    assert dup.text == "call-0003 is corrupt: 2 records carry this id with different tokens"
    banner = vv.banner_of(view_of("corrupt_record.json"))
    tiles = {m.label: m.value for m in banner.metrics}
    assert tiles["excluded"] == "1" and tiles["unproven links"] == "0"


def test_capture_incomplete_names_the_call_that_was_announced_but_never_captured():
    view = view_of("capture_store", 1)
    (culprit,) = lines_by_code(view)["capture_incomplete"]
    assert (culprit.text, culprit.key) == ("call-0004 was announced but never captured", "ghost:call-0004")
    node = tv.tree_of(view).node("ghost:call-0004")
    assert node is not None and node.category == "announced"


def test_capture_incomplete_without_a_named_call_says_so():
    c = Capture("flagged")
    c.call("c1")
    view = RolloutView(c.snapshot(incomplete=True))
    (culprit,) = lines_by_code(view)["capture_incomplete"]
    assert culprit.key is None and "without naming the call" in culprit.text


def test_dangling_intents_are_read_from_the_loader_note():
    notes = ["x.tokens.jsonl: skipped a torn final line (3 bytes ...)",
             "x.tokens.intents: 2 dangling intent(s) with no captured entry or refusal (the call was started but "
             "never captured): call-7, call-9"]
    assert dangling_intents(notes) == ["call-7", "call-9"]
    assert dangling_intents(["nothing here: a, b"]) == []


def test_retries_roots_and_branches_point_at_their_calls():
    retries = lines_by_code(view_of("final_retry_unresolved.json"))["unresolved_retries"]
    assert [(c.text, c.key) for c in retries] == [
        ("call-0003 / call-0004: retries of call-0002's request generated different tokens and none was continued",
         "call:call-0003")]
    roots = lines_by_code(view_of("compaction_new_root.json"))
    assert roots["multiple_roots"][0].key == "call:call-0004"
    assert "start of another conversation" in roots["multiple_roots"][0].text
    branch = lines_by_code(view_of("subagent_branch.json"))["multiple_chains"]
    assert [(c.text, c.key) for c in branch] == [
        ("branch-0 forks off call-0001 at call-0003 (2 calls not delivered)", "call:call-0003")]


def test_the_kitchen_sink_names_each_kind_of_link_failure():
    culprits = {c.key: c.text for c in lines_by_code(RolloutView(kitchen_sink().snapshot()))["unresolved_parent_calls"]}
    assert culprits == {
        "call:g01": "g01's claimed parent ghost-parent was never captured, and no single call's tokens open its prompt",
        "call:s01": "s01's claimed parent c05 does not open its prompt",
        "call:x01": "x01 is corrupt: its tokens disagree with its own stamped cum_len or digest",
    }


def test_an_anchor_that_is_not_delivered_is_the_culprit():
    view = view_of("retry_resolved_by_child.json", anchor="call-0002")
    (culprit,) = lines_by_code(view)["terminal_call_not_delivered"]
    assert culprit.key == "call:call-0002" and "was quarantined" in culprit.text


def test_unbuilt_rollouts_name_the_error_and_point_at_nothing():
    failed = RolloutView(TokenCaptureSnapshot.failed("bad", "bad.json: line 3: not JSON"))
    lines = lines_by_code(failed)
    assert [c.text for c in lines["load_error"]] == ["bad.json: line 3: not JSON"]
    assert all(c.key is None for culprits in lines.values() for c in culprits)
    assert cv.first_culprit(failed) is None


def test_no_generated_tokens_points_at_the_last_call_of_the_empty_chain():
    c = Capture("empty")
    c.call("c1", gen=0)
    view = RolloutView(c.snapshot())
    assert "no_generated_tokens" in view.result.mask_reasons
    assert [c.key for c in lines_by_code(view)["no_generated_tokens"]] == [None]


def _attributed_view(name: str) -> RolloutView:
    from tokencap import load_final_responses

    snapshot = load_snapshots(SAMPLES / name)[0]
    finals = load_final_responses(next((SAMPLES / "final_responses").glob(name.rsplit(".", 1)[0] + ".*")))
    return RolloutView(snapshot, final_response=finals.for_rollout(snapshot.rollout_id, single_rollout=True))


def test_a_final_answer_without_an_anchor_names_its_outcome_and_links_each_candidate():
    ambiguous = _attributed_view("ambiguous_final_answer.json")
    attribution = ambiguous.result.terminal_attribution
    assert ambiguous.result.terminal_call_id is None and attribution.outcome == "ambiguous"
    culprits = lines_by_code(ambiguous)["terminal_call_not_delivered"]
    assert [c.key for c in culprits] == [f"call:{cid}" for cid in attribution.candidates]
    assert len(culprits) >= 2
    for c in culprits:
        assert "None" not in c.text and c.text.startswith("ambiguous final answer: candidate ")
    unattributed = _attributed_view("unattributed_final_answer.json")
    assert unattributed.result.terminal_attribution.outcome == "unattributed"
    [culprit] = lines_by_code(unattributed)["terminal_call_not_delivered"]
    assert culprit.text.startswith("unattributed: no captured call matches the final answer") and culprit.key is None


def test_after_a_compaction_delivered_from_the_later_root_the_later_root_is_the_culprit():
    """docs/contract.md#breaks: the conversation began at its earliest root whichever fragment was
    delivered, so the banner blames the post-compaction call with the compaction's words, and never
    the rollout's first call."""
    from tokencap import load_final_responses

    snapshot = load_snapshots(SAMPLES / "compaction_observed.json")[0]
    records = load_final_responses(SAMPLES / "final_responses" / "compaction_observed.json")
    rid = snapshot.rollout_id
    view = RolloutView(snapshot, final_response=records.for_rollout(rid, single_rollout=True),
                       evidence=records.evidence_for(rid, single_rollout=True))
    assert view.build.main.call_ids[0] == "call-0004"  # the later fragment is delivered
    roots = lines_by_code(view)["multiple_roots"]
    assert [c.key for c in roots] == ["call:call-0004"]
    assert roots[0].why.startswith("the harness recorded a compaction at call-0004")
    assert not any("call-0001" in c.text for line in cv.culprits_of(view) for c in line.culprits
                   if line.code != "multiple_chains")


def test_the_banner_says_each_break_once_cause_first_with_the_reasons_it_explains():
    """Issue 37, items 4 and 5: a legacy capture's seven links the tokens prove are one finding (not 21
    lines under three reasons), whose words start with the cause; each call is linked once, its hover
    saying what happened there and what a click does."""
    from tokencap.views.rollout import findings as fd

    view = RolloutView(load_snapshots(SAMPLES / "run" / "task0265-rollout1-attempt0.tokens.jsonl")[0])
    found = fd.findings_of(view)
    intact = next(f for f in found if f.key == "link_intact")
    assert intact.reasons == ["unresolved_parent_calls", "multiple_roots", "multiple_chains"]
    assert [c.call_id for c in intact.calls] == [f"call-000{i}" for i in range(2, 9)]
    assert intact.sentence().startswith("Unrecorded link (tokens match) — the tokens prove the link")
    assert "and 4 more calls alike" in intact.sentence()
    hover = intact.calls[0].hover()
    assert hover.startswith("call-0002's prompt continues all 171 tokens of call-0001 exactly; ")
    assert "branch-0 is a separate fragment from call-0002" in hover and "select call-0002 in the call tree" in hover
    assert "`link_intact`" in intact.tooltip() and "`multiple_roots`" in intact.tooltip()
    assert sum(len(f.calls) for f in found) == len({c.call_id for f in found for c in f.calls})
    stripped = fd.findings_of(view_of("reasoning_stripped_by_template.json"))
    assert len(stripped) == 1 and stripped[0].sentence().startswith(
        "Generated tokens dropped — the chat template likely strips earlier reasoning: call-0002's prompt")
    # A culprit without a break stays under its reason, in its reason's words.
    (corrupt,) = fd.findings_of(view_of("corrupt_record.json"))
    assert corrupt.key == "unresolved_parent_calls" and fd.explains_markdown(corrupt) == ""
    assert corrupt.sentence().startswith("A parent link is unproven, or a record is corrupt: call-0002 is corrupt")
