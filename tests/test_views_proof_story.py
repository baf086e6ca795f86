"""Issue 37, item 12: a call's detail tells one story of its two sequences, and an intact link's chart says
nothing diverges (it said "they part at 260")."""

from __future__ import annotations

from pathlib import Path

from vega_specs import texts

from tokencap import load_snapshots
from tokencap.views import vega
from tokencap.views.model import RolloutView
from tokencap.views.rollout import breaks as bv
from tokencap.views.rollout import linkproof as lp
from tokencap.views.rollout import proof_chart as pc

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"


def _break(name: str, call: str):
    view = RolloutView(load_snapshots(SAMPLES / name)[0])
    (brk,) = [b for b in bv.breaks_of(view) if b.call_id == call]
    return view, brk


def test_an_intact_link_s_chart_says_nothing_diverges():
    view, brk = _break("legacy_missing_resolution.json", "call-0002")
    assert brk.cause == "link_intact"
    proof = lp.break_proof(view, brk)
    assert proof is not None and not proof.parted()
    said = texts(vega.validated(pc.break_proof_chart(proof)))
    assert "they part at" not in said and "first divergence" not in said
    assert f"nothing diverges: all {proof.parent_len:,} carried" in said
    assert "where the predecessor's sequence ends" in said
    assert proof.summary().endswith("the prompt continues it exactly.")


def test_a_parted_break_still_names_where_they_part():
    view, brk = _break("stale_parent_link.json", "call-0003")
    proof = lp.break_proof(view, brk)
    assert proof.parted()
    said = texts(vega.validated(pc.break_proof_chart(proof)))
    assert f"they part at {proof.agree:,}" in said and "tokens around the first divergence" in said


def test_a_break_drawn_with_its_proof_is_the_detail_s_only_chart_of_the_two_sequences():
    view, brk = _break("stale_parent_link.json", "call-0003")
    assert brk.relation == "claimed" and lp.break_proof(view, brk) is not None
    # The claimed parent is the predecessor: its link proof would draw the same two sequences again.
    assert not lp.link_proof_shown(brk, break_drawn=True)
    assert lp.link_proof_shown(brk, break_drawn=False)  # no proof of the break's own: the link's stands in
    assert lp.link_proof_shown(None, break_drawn=False)  # no break: the link proof
    _, branch = _break("subagent_branch.json", "call-0003")
    assert branch.kind == "branch" and lp.link_proof_shown(branch, break_drawn=False)
    _, nearest = _break("history_truncated.json", "call-0005")
    assert nearest.relation == "nearest" and not lp.link_proof_shown(nearest, break_drawn=False)
