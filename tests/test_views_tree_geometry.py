"""The call tree can be read at any size, checked from the figure itself (no browser).

`figure_geometry` estimates every label's box from its position, font size and length
(conservatively), every marker's from its size, and the plot area from the layout. At 5,
24, 88 and 1,500 calls no label leaves the plot (lane names: the figure), overlaps another
label or a marker, or is crossed by a link; a rollout with no anchor stars no terminal call.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from figure_geometry import Geometry, problems
from synth_snapshots import kitchen_sink, long_linear
from tokencap import load_final_responses, load_snapshots
from tokencap.views import RolloutView
from tokencap.views.rollout import tree as tv

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"


def sample(name: str, finals: bool = False) -> RolloutView:
    snapshot = load_snapshots(SAMPLES / name)[0]
    final = None
    if finals:
        final = load_final_responses(SAMPLES / "final_responses" / name).for_rollout(snapshot.rollout_id,
                                                                                   single_rollout=True)
    return RolloutView(snapshot, final_response=final)


def shown_figures(model: tv.TreeModel, selected: str | None = None):
    """The figures the page draws: the whole tree, or (long) the window around the selection and
    windows covering every row."""
    selected = selected or model.default_key
    if not tv.needs_overview(model):
        yield tv.tree_figure(model, selected)
        return
    yield tv.tree_figure(model, selected, window=tv.window_around(model, selected), legend=False)
    step = tv.DETAIL_SPAN
    for first in range(1, len(model), step):
        yield tv.tree_figure(model, selected, window=tv.clamp_window(model, (first, first + step)), legend=False)


def assert_readable(model: tv.TreeModel, selected: str | None = None) -> None:
    for fig in shown_figures(model, selected):
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
    fig = tv.tree_figure(model, model.default_key)
    assert not problems(fig, lines=True)
    g = Geometry(fig)
    marks = {row[0]: g.px(x, y) for t in fig.data if t.customdata is not None and t.name != "selected"
             for row, x, y in zip(t.customdata, t.x, t.y)}
    rows = sorted({round(y, 3) for _, y in marks.values()})
    assert len(rows) == len(model) and min(b - a for a, b in zip(rows, rows[1:])) >= 20  # one node per row
    # Each label is on its node's row, to the right of it.
    labels = next(t for t in fig.data if t.name == "call ids")
    for node, x, y in zip(model.nodes, labels.x, labels.y):
        lx, ly = g.px(x, y)
        assert ly == marks[node.key][1] and lx >= marks[node.key][0]


def test_1500_calls_windows_are_readable():
    model = tv.tree_of(RolloutView(long_linear(1500).snapshot()))
    for selected in (model.default_key, model.nodes[0].key, model.nodes[700].key):
        fig = tv.tree_figure(model, selected, window=tv.window_around(model, selected), legend=False)
        assert not problems(fig, lines=True)


def test_lanes_are_named_in_the_margin_and_a_branch_names_itself_beside_its_first_call():
    model = tv.tree_of(sample("subagent_branch.json"))
    fig = tv.tree_figure(model, model.default_key)
    assert [a.text for a in fig.layout.annotations] == ["main"]
    g = Geometry(fig)
    header = g.annotation_texts()[0]
    assert header.y1 <= g.plot[1] + 0.5  # above the plot, whole
    labels = dict(zip((n.ident for n in model.nodes), next(t for t in fig.data if t.name == "call ids").text))
    assert labels["call-0003"] == "call-0003 · branch-0" and labels["call-0002"] == "call-0002"
    # In a window below the top, a lane coming down from above keeps its name at the top.
    long = tv.tree_of(RolloutView(long_linear(88, retry_every=9, branch_every=20).snapshot()))
    names = [a.text for a in tv.tree_figure(long, None, window=(30, 59), legend=False).layout.annotations]
    assert names[0] == "main"


def test_the_refusal_link_does_not_strike_through_the_main_lane_name():
    # Issue 19, item 10: the dashed refusal link ran through the "main" label.
    model = tv.tree_of(sample("engine_refusal_ended.json"))
    fig = tv.tree_figure(model, model.default_key)
    g = Geometry(fig)
    refusal = [s for s in g.segments() if s[2] == "refused request continuing this call"]
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
    assert not any(t.marker.symbol == "star" for t in tv.tree_figure(model).data if t.mode == "markers")
    assert model.default_key is not None  # the page still opens on the delivered chain's last call
    # Without the final responses (no attribution tried) the delivered chain's end is starred, as before.
    plain = tv.tree_of(sample(name))
    assert [n.ident for n in plain.nodes if n.category == "terminal"] == [plain.node(plain.default_key).ident]


def test_an_attributed_final_answer_keeps_its_star():
    view = sample("title_call_after_final_answer.json", finals=True)
    model = tv.tree_of(view)
    assert [n.ident for n in model.nodes if n.category == "terminal"] == ["call-0004"]
