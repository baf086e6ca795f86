"""The call tree can be read at any size, checked from the figure itself (no browser).

`chart_geometry` reads the Vega-Lite spec (every position in it is in pixels) and estimates every
label's box from its position, font size and length (conservatively), every mark's from its size. At 5,
24, 88 and 1,500 calls no label leaves the plot (lane names: the figure), overlaps another
label or a marker, or is crossed by a link; a rollout with no anchor stars no terminal call.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chart_geometry import Geometry, call_labels, lane_names, marks_of, problems
from helpers_diagnosis import compaction_and_subagent
from synth_snapshots import kitchen_sink, long_linear

from tokencap import load_final_responses, load_snapshots
from tokencap.views import RolloutView
from tokencap.views.rollout import tree as tv
from tokencap.views.rollout.tree_layers import SHAPE_PATHS

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"


def sample(name: str, finals: bool = False) -> RolloutView:
    snapshot = load_snapshots(SAMPLES / name)[0]
    final = None
    if finals:
        final = load_final_responses(SAMPLES / "final_responses" / name).for_rollout(snapshot.rollout_id,
                                                                                   single_rollout=True)
    return RolloutView(snapshot, final_response=final)


def shown_charts(model: tv.TreeModel, selected: str | None = None):
    """The figures the page draws: the whole tree, or (long) the window around the selection and
    windows covering every row."""
    selected = selected or model.default_key
    if not tv.needs_overview(model):
        yield tv.tree_chart(model, selected)
        return
    yield tv.tree_chart(model, selected, window=tv.window_around(model, selected), legend=False)
    step = tv.DETAIL_SPAN
    for first in range(1, len(model), step):
        yield tv.tree_chart(model, selected, window=tv.clamp_window(model, (first, first + step)), legend=False)


def assert_readable(model: tv.TreeModel, selected: str | None = None) -> None:
    for fig in shown_charts(model, selected):
        found = problems(fig, lines=True)
        assert not found, "\n".join(found[:10])


CASES = {
    "5 calls": lambda: sample("clean_multiturn_tools.json"),
    "24 calls of the sample run": lambda: RolloutView(load_snapshots(
        SAMPLES / "run" / "task0003-rollout1-attempt0.tokens.jsonl")[0]),
    "24 calls with retries and branches": lambda: RolloutView(long_linear(24, retry_every=5, branch_every=8)
                                                               .snapshot()),
    "every mark": lambda: RolloutView(kitchen_sink().snapshot()),
    "a sub-agent": lambda: sample("subagent_branch.json"),
    "a compaction": lambda: sample("compaction_new_root.json"),
    "88 calls": lambda: RolloutView(long_linear(88, retry_every=9, branch_every=20).snapshot()),
}


@pytest.mark.parametrize("case", list(CASES))
def test_no_label_is_clipped_overlaps_a_label_or_a_node_or_is_crossed_by_a_link(case):
    model = tv.tree_of(CASES[case]())
    assert_readable(model)


def test_the_whole_88_call_tree_is_readable_too_and_every_node_has_its_own_row():
    model = tv.tree_of(CASES["88 calls"]())
    assert tv.needs_overview(model)  # the page shows windows of it; drawn whole it is still readable
    fig = tv.tree_chart(model, model.default_key)
    assert not problems(fig, lines=True)
    g = Geometry(fig)
    marks = {d["key"]: (d["px"], d["py"]) for d in g.points() if d["what"] != "selected"}
    rows = sorted({round(y, 3) for _, y in marks.values()})
    assert len(rows) == len(model) and min(b - a for a, b in zip(rows, rows[1:])) >= 20  # one node per row
    # Each label is on its node's row, to the right of it.
    labels = [d for layer in fig["layer"] if layer.get("name") == "call_ids" for d in layer["data"]["values"]]
    assert len(labels) == len(model)
    for node, label in zip(model.nodes, labels):
        assert label["py"] == marks[node.key][1] and label["px"] >= marks[node.key][0]


def test_1500_calls_windows_are_readable():
    model = tv.tree_of(RolloutView(long_linear(1500).snapshot()))
    for selected in (model.default_key, model.nodes[0].key, model.nodes[700].key):
        fig = tv.tree_chart(model, selected, window=tv.window_around(model, selected), legend=False)
        assert not problems(fig, lines=True)


def test_lanes_are_named_in_the_margin_and_a_branch_names_itself_beside_its_first_call():
    model = tv.tree_of(sample("subagent_branch.json"))
    fig = tv.tree_chart(model, model.default_key)
    assert lane_names(fig) == ["main"]
    g = Geometry(fig)
    header = next(box for box, label in g.texts() if box.what == "text 'main'")
    assert 0 <= header.y0 and header.y1 <= g.plot[1] + 0.5  # above the plot, whole
    labels = dict(zip((n.ident for n in model.nodes), call_labels(fig)))
    assert labels["call-0003"] == "call-0003 · branch-0 · ↯ branch" and labels["call-0002"] == "call-0002"
    # In a window below the top, a lane coming down from above keeps its name at the top.
    long = tv.tree_of(RolloutView(long_linear(88, retry_every=9, branch_every=20).snapshot()))
    names = lane_names(tv.tree_chart(long, None, window=(30, 59), legend=False))
    assert names[0] == "main"


def test_the_refusal_link_does_not_strike_through_the_main_lane_name():
    # Issue 19, item 10: the dashed refusal link ran through the "main" label.
    model = tv.tree_of(sample("engine_refusal_ended.json"))
    fig = tv.tree_chart(model, model.default_key)
    g = Geometry(fig)
    refusal = [s for s in g.segments() if s[2] == tv.EDGE_STYLES["refusal"][1]]
    assert refusal
    assert not problems(fig, lines=True)


@pytest.mark.parametrize("name", ["ambiguous_final_answer.json", "unattributed_final_answer.json"])
def test_no_anchor_no_terminal_star(name):
    # Issue 19, item 2: with the final answer unattributed or ambiguous there is no anchor (the banner
    # says so): the tree stars no call as the terminal one.
    view = sample(name, finals=True)
    assert view.result.terminal_call_id is None and "terminal_call_not_delivered" in view.result.mask_reasons
    model = tv.tree_of(view)
    assert not any(n.category == "terminal" for n in model.nodes)
    stars = [d for d in Geometry(tv.tree_chart(model)).points() if d["what"] == tv.NODE_STYLES["terminal"][0]]
    assert not stars
    assert model.default_key is not None  # the page still opens on the delivered chain's last call
    # Without the final responses (no attribution tried) the delivered chain's end is starred, as before.
    plain = tv.tree_of(sample(name))
    assert [n.ident for n in plain.nodes if n.category == "terminal"] == [plain.node(plain.default_key).ident]
    starred = [d for d in Geometry(tv.tree_chart(plain)).points() if d["what"] == tv.NODE_STYLES["terminal"][0]]
    assert [d["key"] for d in starred] == [plain.default_key] and starred[0]["shape"] == SHAPE_PATHS["star"]


def test_an_attributed_final_answer_keeps_its_star():
    view = sample("title_call_after_final_answer.json", finals=True)
    model = tv.tree_of(view)
    assert [n.ident for n in model.nodes if n.category == "terminal"] == ["call-0004"]


# --------------------------------------------------------------------------- breaks (issue 18, item 6)


def test_each_break_is_marked_with_its_cause():
    view = RolloutView(kitchen_sink().snapshot())
    causes = {b.call_id: b.cause for b in view.breaks}
    assert causes == {"b01": "branch", "s01": "history_replaced", "g01": "new_context", "x01": "record_fault"}
    model = tv.tree_of(view)
    assert {n.ident for n in model.nodes if "break" in n.flags} == set(causes)
    fig = tv.tree_chart(model, model.default_key)
    labels = dict(zip((n.ident for n in model.nodes), call_labels(fig)))
    assert labels["s01"] == "s01 · branch-1 (fragment) · ↯ history replaced"
    assert labels["x01"] == "x01 · ↯ record fault" and labels["c03"] == "c03"
    rings = marks_of(fig, tv.OVERLAY_STYLES["break"][0])
    assert sorted(model.node(d["key"]).ident for d in rings) == sorted(causes)
    assert "cause history replaced (key: history_replaced)" in model.node("call:s01").hover and "should have continued" in \
        model.node("call:s01").hover
    assert_readable(model)
    # Without breaks (the build alone), the tree is today's: no rings, no causes.
    plain = tv.build_tree(view)
    assert not any("break" in n.flags or "↯" in n.note for n in plain.nodes)
    assert [(n.key, n.order, n.lane) for n in plain.nodes] == [(n.key, n.order, n.lane) for n in model.nodes]


def test_a_sub_agent_gets_its_own_labelled_lane_and_compactions_are_marked():
    view = compaction_and_subagent()
    model = tv.tree_of(view)
    sub = model.node("call:sa1")
    run = model.runs[sub.run]
    assert run.name.startswith("sub-agent inv-2") and run.keys == ["call:sa1", "call:sa2"]
    assert run.lane not in {model.node(k).lane for k in ("call:a", "call:b")}  # a lane of its own
    assert sub.note.startswith("sub-agent inv-2") and sub.note.endswith("↯ sub-agent")
    b, s = model.node("call:b"), model.node("call:s")
    assert "compaction" in b.flags and b.note.endswith("↯ compaction")
    assert "compaction" in s.flags and s.note == "compaction summary"
    assert "first call after a compaction (tokens: 4000 → 300 tokens)" in b.hover
    assert_readable(model)
    # A window starting inside the sub-agent's lane names it at the top.
    names = set(lane_names(tv.tree_chart(model, None, window=(6, 6), legend=False)))
    assert any(name.startswith("sub-agent inv-2") for name in names)
