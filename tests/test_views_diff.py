"""Two builds of one rollout side by side (`tokencap.views.rollout.diff`)."""

from __future__ import annotations

import json
from pathlib import Path

from synth_snapshots import Capture

from tokencap import load_snapshots
from tokencap.views import RolloutView, vega
from tokencap.views.rollout import diff as df
from tokencap.views.rollout import sequence_chart as sc
from tokencap.views.rollout.linkproof import AGREE, DIFFER

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
    spec = vega.validated(sc.sequence_chart(seq, "first", "second"))
    assert spec["description"] == sc.DESCRIPTION and spec["usermeta"] == vega.RENDERER
    strip, cells = spec["layer"]
    # A strip per sequence: bars tiling each side from 0 to its length, green then red where they part.
    bars = strip["layer"][0]["data"]["values"]
    assert strip["layer"][0]["encoding"]["y"]["sort"] == ["first", "second", "first · tokens", "second · tokens"]
    for row, length in (("first", seq.len_a), ("second", seq.len_b)):
        spans = sorted((b["start"], b["end"], b["what"]) for b in bars if b["row"] == row)
        assert spans[0][:2] == (0, seq.agree) and spans[0][2] == sc.SAME and spans[-1][1] == length
        assert spans[1][:2] == (seq.agree, 24) and spans[1][2] == sc.DIFFERENT
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert {b["colour"] for b in bars} == {sc.BAR[sc.SAME], sc.BAR[sc.DIFFERENT]} == {AGREE, DIFFER}
    assert [t["field"] for t in strip["layer"][0]["encoding"]["tooltip"]] == ["what", "positions", "detail"]
    # The divergence marked where it is: a dotted rule and its label at position 20.
    rule, label = strip["layer"][1], strip["layer"][2]
    assert rule["mark"]["type"] == "rule" and rule["data"]["values"][0]["at"] == seq.agree == 20
    assert label["data"]["values"][0]["label"] == "first difference at 20"
    # The cells around it: one per position of the window and side, red from the difference on.
    values = cells["layer"][0]["data"]["values"]
    assert len(values) == 2 * (seq.window[1] - seq.window[0])
    state = {(c["row"], c["column"]): c["state"] for c in values}
    assert state[("first · tokens", "19")] == state[("second · tokens", "19")] == "agree"
    assert state[("first · tokens", "20")] == state[("second · tokens", "20")] == "differ"
    tip = next(c["tip"] for c in values if c["row"] == "second · tokens" and c["column"] == "20")
    assert tip == "pos 20 · token 9"
    assert cells["layer"][0]["encoding"]["tooltip"]["field"] == "tip"


def test_a_sequence_that_is_the_start_of_the_other_is_grey_past_its_end_and_decoded_in_plain_text():
    a, b = sample("engine_refusal_ended.json"), sample("engine_refusal_ended.json", anchor="call-0002")
    seq = df.sequence_diff(a, b)
    spec = vega.validated(sc.sequence_chart(seq, "A <b>x</b>", "A <b>x</b>", decode=lambda t: f"<i>{t}</i> "))
    strip, cells = spec["layer"]
    rows = strip["layer"][0]["encoding"]["y"]["sort"]
    assert rows == ["A: A <b>x</b>", "B: A <b>x</b>", "A: A <b>x</b> · tokens", "B: A <b>x</b> · tokens"]
    bars = strip["layer"][0]["data"]["values"]
    only = [b for b in bars if b["what"] == sc.ONE_SIDE]
    assert [(b["row"], b["start"], b["end"]) for b in only] == [(rows[0], seq.len_b, seq.len_a)]
    assert only[0]["colour"] == sc.BAR[sc.ONE_SIDE]
    values = cells["layer"][0]["data"]["values"]
    past = [c for c in values if c["column"] == f"{seq.len_b:,}"]
    assert [c["state"] for c in past] == ["only_child", "absent"]
    assert past[1]["tip"] == f"pos {seq.len_b:,}: this sequence ended" and past[1]["text"] == "—"
    # Decoded tokens are plain text (spaces shown as ␣), never HTML: vega-tooltip escapes what it shows.
    token = int(seq.tokens_a[0])
    first = values[0]
    assert first["text"] == f"<i>{token}</i>␣" and first["tip"].endswith(f" · <i>{token}</i> ")
    assert "<br>" not in json.dumps(spec) and "&lt;" not in json.dumps(spec)


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
