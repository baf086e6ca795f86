"""Page-level decisions of the Rollout page (`tokencap.views.rollout_page`), without Streamlit."""

from __future__ import annotations

from pathlib import Path

from tokencap import load_snapshots
from tokencap.views import RolloutView
from tokencap.views import rollout_page as rp
from tokencap.views import tree as tv

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"


def sample_view(name: str, index: int = 0, anchor: str | None = None) -> RolloutView:
    return RolloutView(load_snapshots(SAMPLES / name)[index], anchor=anchor)


def test_an_anchor_must_be_a_call_the_build_offers():
    base = sample_view("final_retry_unresolved.json")
    assert rp.valid_anchor(base, "call-0004") == "call-0004"
    assert rp.valid_anchor(base, "no-such-call") is None
    assert rp.valid_anchor(base, None) is None


def test_a_remembered_selection_survives_only_while_its_node_exists():
    view = sample_view("subagent_branch.json")
    assert rp.selected_node(view, "call:call-0002") == "call:call-0002"
    assert rp.selected_node(view, "call:gone") == tv.tree_of(view).default_key
    assert rp.selected_node(view, None) == tv.tree_of(view).default_key
