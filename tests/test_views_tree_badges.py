"""Issue 37, item 12: a call-tree node with several states reads as several marks, not a blob.

`compaction_observed`'s call-0004 is an unresolved boundary, a break and a compaction (and, selected, has
the selection ring): its first ring stays around it, the others stand as badges between it and its label,
apart from each other, and the label moves right past them."""

from __future__ import annotations

import math
from pathlib import Path

from chart_geometry import values

from tokencap import load_snapshots
from tokencap.views import RolloutView, vega
from tokencap.views.rollout import tree as tv
from tokencap.views.rollout import tree_chart as tc
from tokencap.views.rollout.tree_marks import OVERLAY_STYLES, RING_FLAGS

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"


def _spec(selected: str | None = "call:call-0004"):
    view = RolloutView(load_snapshots(SAMPLES / "compaction_observed.json")[0])
    model = tv.tree_of(view)
    return model, vega.validated(tv.tree_chart(model, selected=selected))


def test_a_node_with_three_rings_keeps_one_around_it_and_badges_the_others_before_its_label():
    model, spec = _spec()
    node = next(n for n in model.nodes if n.key == "call:call-0004")
    rings = [flag for flag in RING_FLAGS if flag in node.flags]
    assert len(rings) >= 2, rings  # boundary and break (and a compaction, with the sample's records)
    assert tc.ring_badges(node.flags) == rings[1:]
    marks = [d for d in values(spec, "nodes") if d["key"] == node.key]
    centre = next((d["px"], d["py"]) for d in marks if d["what"] not in [OVERLAY_STYLES[f][0] for f in rings]
                  and d["what"] != "selected")
    at_centre = [d["what"] for d in marks if (d["px"], d["py"]) == centre]
    ring_words = {OVERLAY_STYLES[f][0]: f for f in rings}
    assert [ring_words[w] for w in at_centre if w in ring_words] == rings[:1]  # one ring around the node
    assert "selected" in at_centre  # and the selection
    badges = sorted((d for d in marks if d["what"] in ring_words and (d["px"], d["py"]) != centre),
                    key=lambda d: d["px"])
    assert [ring_words[d["what"]] for d in badges] == rings[1:]
    # Right of the node, on its row, apart from each other, before the label.
    diameter = math.sqrt(badges[0]["size"])
    assert all(d["py"] == centre[1] and d["px"] > centre[0] for d in badges)
    assert all(b["px"] - a["px"] >= diameter for a, b in zip(badges, badges[1:]))
    (label,) = [d for d in values(spec, "call_ids") if d["text"].startswith("call-0004")]
    assert label["px"] >= badges[-1]["px"] + diameter / 2
    # The selection ring is still drawn last.
    assert values(spec, "nodes")[-1]["what"] == "selected"


def test_a_node_with_one_ring_or_none_has_no_badge_and_its_label_stays():
    model, spec = _spec(selected=None)
    for node in model.nodes:
        if len([f for f in RING_FLAGS if f in node.flags]) > 1 or node.ident == node.key:
            continue
        assert tc.ring_badges(node.flags) == []
        marks = [d for d in values(spec, "nodes") if d["key"] == node.key]
        assert len({(d["px"], d["py"]) for d in marks}) == 1, node.key  # every mark around the node
    (label,) = [d for d in values(spec, "call_ids") if d["text"].startswith("call-0002")]
    (dot,) = [d for d in values(spec, "nodes") if d["key"] == "call:call-0002"]
    assert math.isclose(label["px"], dot["px"] + tc.label_offset(), abs_tol=0.02)
