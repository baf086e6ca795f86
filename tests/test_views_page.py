"""Page-level decisions of the Rollout page (`tokencap.views.rollout.rollout_page`), without Streamlit."""

from __future__ import annotations

from pathlib import Path

from tokencap import load_snapshots
from tokencap.views import RolloutView
from tokencap.views.rollout import rollout_page as rp
from tokencap.views.rollout import tree as tv

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
    view = sample_view("clean_multiturn_tools.json")
    last = tv.tree_of(view).default_key
    assert rp.selected_node(view, "call:call-0001") == "call:call-0001"
    assert rp.selected_node(view, "call:gone") == last
    assert rp.selected_node(view, None) == last


def test_a_masked_rollout_opens_on_its_first_culprit_a_trainable_one_on_its_last_call():
    assert rp.opening_node(sample_view("stale_parent_link.json")) == "call:call-0003"
    assert rp.opening_node(sample_view("corrupt_record.json")) == "call:call-0002"
    assert rp.opening_node(sample_view("capture_store", 1)) == "ghost:call-0004"  # announced, never captured
    trainable = sample_view("clean_multiturn_tools.json")
    assert rp.opening_node(trainable) == f"call:{trainable.terminal_call_id}"
