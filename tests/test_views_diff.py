"""Two builds of one rollout side by side (`tokencap.views.rollout.diff`)."""

from __future__ import annotations

from pathlib import Path

from synth_snapshots import Capture
from tokencap import load_snapshots
from tokencap.views import RolloutView
from tokencap.views.rollout import diff as df

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"


def sample(name: str, anchor: str | None = None) -> RolloutView:
    return RolloutView(load_snapshots(SAMPLES / name)[0], anchor=anchor)


def test_a_build_compared_with_itself_changes_nothing():
    view = sample("clean_multiturn_tools.json")
    cmp = df.compare(view, view)
    assert cmp.changes == [] and cmp.sequence.identical and not cmp.calls_only_a and not cmp.calls_only_b
    assert set(cmp.table["changed"]) == {""}
    assert cmp.sequence.summary().startswith("The delivered sequences are identical")


def test_anchors_a_and_b_every_change_and_the_shorter_sequence():
    a, b = sample("engine_refusal_ended.json"), sample("engine_refusal_ended.json", anchor="call-0002")
    cmp = df.compare(a, b)
    assert cmp.changes[0] == "anchor: none → call-0002"
    assert "response status: incomplete (max_output_tokens) → completed" in cmp.changes
    assert not any(c.startswith("verdict") for c in cmp.changes)  # it stays trainable: no verdict line
    assert cmp.calls_common == 2 and cmp.calls_only_a == ["call-0003"] and cmp.calls_only_b == []
    seq = cmp.sequence
    assert seq.len_b < seq.len_a and seq.agree == seq.len_b and not seq.identical
    assert "B's delivered sequence" in seq.summary() and "is the start of A's" in seq.summary()
    changed = dict(zip(cmp.table["what"], cmp.table["changed"]))
    assert changed["response status"] == "✱" and changed["verdict"] == "" and changed["n_calls"] == ""


def test_two_captures_that_differ_in_a_token_point_at_the_call_holding_it():
    one, two = Capture("r", seed=5), Capture("r", seed=5)
    for c in (one, two):
        c.call("c1", new=10, gen=4)
    one.call("c2", "c1", new=6, gen=4)
    two.call("c2", "c1", new=6, gen=4, generation=[9, 9, 9, 9])
    cmp = df.compare(RolloutView(one.snapshot()), RolloutView(two.snapshot()), "first", "second")
    seq = cmp.sequence
    assert seq.agree == 20 and seq.owner_a == seq.owner_b == "c2"
    assert "first differ at position 20 (in c2 on A, c2 on B)" in seq.summary()
    assert list(cmp.table.columns) == ["what", "first", "second", "changed"]
    fig = df.sequence_figure(seq, "first", "second")
    heat = next(t for t in fig.data if t.type == "heatmap")
    i = seq.agree - seq.window[0]
    assert heat.z[0][i] == 2.0 and heat.z[0][i - 1] == 1.0
    assert {t.marker.color for t in fig.data if t.type == "bar"} >= {df.AGREE, df.DIFFER}
    # The toolbar stands on end in the right margin: it never covers the "first difference" label.
    label = next(a for a in fig.layout.annotations if a.text.startswith("first difference at"))
    assert label.yanchor == "bottom" and fig.layout.modebar.orientation == "v"
    assert fig.layout.margin.r >= df.MODEBAR_MARGIN >= 36


def test_the_compare_tabs_names_and_the_calls_each_side_delivers_alone():
    assert df.anchor_side_name("A", "call-7") == "A (anchored on call-7)"
    assert df.anchor_side_name("B", None) == "B (no anchor)"
    assert df.capture_side_name("B", "later.json", 3) == "B (later.json v3)"
    assert df.capture_label("x.json", None, 2) == "x.json · snapshot — · version 2"
    assert df.capture_label("x.json", "s1", 2) == "x.json · snapshot s1 · version 2"
    calls = [f"c{i}" for i in range(df.CALLS_SHOWN + 1)]
    assert df.calls_only_text("A", calls) == "only A: " + ", ".join(calls[:-1]) + " …"
    assert df.calls_only_text("B", calls[:2]) == "only B: c0, c1"
    assert df.calls_only_text("B", []) == "only B: —"
    same = df.Comparison("A", "B", table=None)
    assert df.delivered_calls_caption(same) is None
    parted = df.Comparison("A", "B", table=None, calls_common=1_200, calls_only_a=["x"],
                           calls_only_b=[])
    assert df.delivered_calls_caption(parted) == ("Delivered calls: 1,200 in common from the start; then A delivers "
                                                  "1 and B 0 of its own.")
