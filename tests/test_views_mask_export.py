"""Loss-mask views (paging, downsampling, decoding) and exports byte-identical to `tokencap build`."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from helpers_diagnosis import word_tokenizer_json
from synth_snapshots import Capture, cli_build, kitchen_sink

from tokencap import load_snapshots
from tokencap.export import results_bytes
from tokencap.lossmask import GENERATED, INTERSTITIAL, PROMPT
from tokencap.rollout import build_rollout
from tokencap.views import RolloutView, style, vega
from tokencap.views.rollout import export as ev
from tokencap.views.rollout import logprob_chart as lc
from tokencap.views.rollout import mask as mv
from tokencap.views.rollout import mask_chart as mc

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"
UPSTREAM = REPO / "tests" / "data" / "upstream_store"


@pytest.fixture(scope="module")
def long_view() -> RolloutView:
    """A chain of about 100k tokens (the scale the strip must page)."""
    c = Capture("hundred-k", seed=3)
    prev = None
    for i in range(40):
        c.call(f"k{i:03d}", prev, new=2000, gen=500, finish_reason="tool_calls" if i < 39 else "stop")
        prev = f"k{i:03d}"
    return RolloutView(c.snapshot())


# --------------------------------------------------------------------------- loss mask


def test_paging_covers_the_sequence_exactly(long_view):
    mask = long_view.mask()
    assert len(mask) == 100_000
    for window in mv.WINDOW_SIZES:
        pages = mv.page_count(mask, window)
        bounds = [mv.page_bounds(mask, p, window) for p in range(pages)]
        assert bounds[0][0] == 0 and bounds[-1][1] == len(mask)
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
        assert all(0 < e - s <= window for s, e in bounds)
        assert mv.page_bounds(mask, pages + 5, window) == bounds[-1]
        assert mv.page_of(bounds[3][0] + 7, window) == 3


def _values(spec: dict, layer: dict) -> list[dict]:
    data = layer["data"]
    return data["values"] if "values" in data else spec["datasets"][data["name"]]


def test_strip_chart_draws_one_cell_per_token_of_the_window(long_view):
    mask = long_view.mask()
    start, end = mv.page_bounds(mask, 1, 2048)
    spec = vega.validated(mc.strip_chart(mask, start, end, columns=64))
    assert spec["description"] == mc.STRIP_DESCRIPTION and spec["usermeta"] == mc.CANVAS
    context, generated, ticks = spec["layer"]
    cells = context["data"]["values"] + generated["data"]["values"]
    assert sorted(c["pos"] for c in cells) == list(range(start, end))  # every position once, no padding
    prov = mask.provenance[start:end]
    by_pos = {c["pos"]: c for c in cells}
    for pos in (start, start + 1, end - 1, *range(start, end, 97)):
        c = by_pos[pos]
        assert (c["x"], c["r"]) == ((pos - start) % 64, start + (pos - start) // 64 * 64)  # its row and column
        assert c["token"] == int(mask.token_ids[pos]) and c["mask"] == int(mask.mask[pos])
        assert c["kind"] == {PROMPT: "prompt", INTERSTITIAL: "interstitial", GENERATED: "generated"}[int(prov[pos - start])]
    assert {c["kind"] for c in context["data"]["values"]} <= {"prompt", "interstitial"}
    assert {c["kind"] for c in generated["data"]["values"]} == {"generated"}
    # Generated cells are coloured by their log-prob clipped into the range; context cells by their kind.
    low, high = mv.logprob_range(mask)
    fill = generated["encoding"]["fill"]
    assert fill["field"] == "v" and fill["scale"]["domain"] == [low, high] and fill["scale"]["range"] == list(style.LOGPROB_RANGE)
    lps = mask.log_probs[start:end][prov == GENERATED]
    np.testing.assert_allclose([c["v"] for c in sorted(generated["data"]["values"], key=lambda c: c["pos"])],
                               np.clip(lps, low, high))
    assert context["encoding"]["color"]["scale"] == {"domain": ["prompt", "interstitial"],
                                                     "range": [style.PROMPT_COLOR, style.INTERSTITIAL_COLOR]}
    # Rows are labelled by their first position; the y domain is exactly the window's rows.
    assert context["encoding"]["y"]["scale"]["domain"] == list(range(start, end, 64))
    # Link boundaries inside the window are ticked at the left edge of their cells.
    inside = mask.link_starts[(mask.link_starts >= start) & (mask.link_starts < end)]
    assert [t["r"] + t["x"] for t in ticks["data"]["values"]] == list(inside)
    assert ticks["encoding"]["x"]["bandPosition"] == 0
    # The call a cell belongs to comes from one lookup table, not a copy per cell.
    calls = context["transform"][0]["from"]["data"]["values"]
    assert calls[0]["link"] == -1 and [c["call"] for c in calls[1:]] == list(mask.call_ids)
    owner = int(np.searchsorted(mask.link_starts, start, side="right") - 1)
    assert by_pos[start]["link"] == owner


def test_strip_chart_of_a_4096_window_wraps_into_128_columns_and_cuts_long_call_ids():
    c = Capture("wide", seed=1)
    c.call("x" * 200, None, new=3000, gen=2000, finish_reason="stop")
    mask = RolloutView(c.snapshot()).mask()
    spec = vega.validated(mc.strip_chart(mask, 0, 4096, columns=mv.columns_for(4096)))
    assert spec["layer"][0]["encoding"]["x"]["scale"]["domain"] == list(range(128))
    assert spec["height"] == 32 * mc.cell_px(128)
    calls = spec["layer"][0]["transform"][0]["from"]["data"]["values"]
    assert max(len(c["call"]) for c in calls) <= mc.CALL_CHARS + len(" (root prompt)")


def test_strip_of_a_short_chain_and_provenance():
    view = RolloutView(kitchen_sink().snapshot())
    mask = view.mask()
    spec = mc.strip_chart(mask)
    assert spec["layer"][0]["encoding"]["x"]["scale"]["domain"] == list(range(64))
    s = mv.mask_summary(mask)
    assert s.total == len(mask) and s.prompt + s.interstitial + s.generated == s.total
    assert s.generated == view.chain("main").generated_tokens
    assert s.prompt == int(view.chain("main").root_prompt.size)
    assert s.links == len(view.chain("main").links)


def test_overview_bins_sum_to_the_whole(long_view):
    mask = long_view.mask()
    frame = mv.binned(mask, 600)
    assert len(frame) == 600 and frame["start"].iloc[0] == 0 and frame["end"].iloc[-1] == len(mask)
    widths = frame["end"] - frame["start"]
    assert round(float((frame["generated"] * widths).sum())) == mask.generated_tokens
    spec = vega.validated(mc.overview_chart(mask, (2048, 4096)))
    assert spec["description"] == mc.OVERVIEW_DESCRIPTION
    frames = [layer for layer in spec["layer"] if layer["mark"]["type"] == "rect" and "stroke" in layer["mark"]]
    assert [_values(spec, f) for f in frames] == [[{"a": 2048, "b": 4096}]]  # the window's frame
    # Each share is one step area (a path, not a bar per bin): a point per bin and the sequence's end.
    areas = [layer for layer in spec["layer"] if layer["mark"]["type"] == "area"]
    assert len(areas) == 2 and all(a["mark"]["interpolate"] == "step-after" for a in areas)
    steps = _values(spec, areas[0])
    assert len(steps) == 601 and steps[0]["s"] == 0 and steps[-1]["s"] == len(mask)
    bins = spec["datasets"]["bins"]
    assert [b["s"] for b in bins] == frame["start"].tolist() and bins[-1]["l"] == len(mask) - 1
    np.testing.assert_allclose([b["g"] for b in bins], frame["generated"], atol=1e-4)
    assert areas[1]["encoding"]["y"]["field"] == "i" and areas[1]["encoding"]["y2"]["field"] == "top"
    # The legend's three entries share one colour scale.
    colours = [layer["encoding"]["color"] for layer in spec["layer"] if "color" in layer["encoding"]]
    assert [c["scale"]["domain"] for c in colours] == [list(mc.SHARES)] * 3
    # A hover over any bin names it: one invisible box per bin on top.
    hover = spec["layer"][-1]
    assert hover["data"] == {"name": "bins"} and hover["mark"]["fillOpacity"] == 0 and "tooltip" in hover["encoding"]
    # No frame when the window is the whole sequence.
    whole = mc.overview_chart(mask, (0, len(mask)))
    assert not [layer for layer in whole["layer"] if layer["mark"]["type"] == "rect" and "stroke" in layer["mark"]]
    assert mv.binned(RolloutView(kitchen_sink().snapshot()).mask(), 10_000)["end"].iloc[-1] > 0


def test_logprob_series_downsamples_and_keeps_minimums(long_view):
    mask = long_view.mask()
    series = mv.logprob_series(mask, max_points=4000)
    assert len(series) <= 2000
    assert float(series["min_log_prob"].min()) == float(np.nanmin(mask.log_probs))
    small = RolloutView(kitchen_sink().snapshot()).mask()
    full = mv.logprob_series(small)
    assert int(full["log_prob"].notna().sum()) == small.generated_tokens
    # A gap between links, so the line does not join across context.
    assert full["log_prob"].isna().sum() == len(small.call_ids) - 1


def _layers(spec: dict, mark: str) -> list[dict]:
    return [layer for layer in spec["layer"] if layer["mark"]["type"] == mark]


def test_logprob_chart_of_a_long_chain_draws_the_mean_and_the_minimum_per_bin(long_view):
    mask = long_view.mask()
    series = mv.logprob_series(mask)
    spec = vega.validated(lc.logprob_chart(mask, (2048, 4096)))
    assert spec["description"] == lc.DESCRIPTION and spec["usermeta"] == mc.CANVAS  # 4,000 hover points
    points = spec["datasets"]["points"]
    assert [p["p"] for p in points] == series["position"].astype(int).tolist()
    np.testing.assert_allclose([p["lp"] for p in points], series["log_prob"], atol=1e-4)
    assert min(p["mn"] for p in points) == pytest.approx(float(np.nanmin(mask.log_probs)), abs=1e-4)
    # Two lines, the min's below the mean's, with a legend, in the colours the plotly figure had.
    lines = _layers(spec, "line")
    assert [(line["encoding"]["y"]["field"], line["transform"][0]["calculate"]) for line in lines] == \
        [("mn", json.dumps(lc.MIN)), ("lp", json.dumps(lc.MEAN))]
    colour = lines[0]["encoding"]["color"]
    assert colour["scale"] == {"domain": [lc.MIN, lc.MEAN], "range": ["rgba(220,38,38,0.45)", style.MAIN]}
    assert colour["legend"] is not None
    # A hover names a point: its position and its value, on each line.
    tips = [[(t["field"], t["title"]) for t in layer["encoding"]["tooltip"]] for layer in _layers(spec, "point")]
    assert tips == [[("p", "position"), ("mn", "min log-prob")], [("p", "position"), ("lp", "mean log-prob")]]
    assert all(layer["mark"]["opacity"] == 0 for layer in _layers(spec, "point"))  # 2,000 bins: no dots
    # The strip's window shaded, a rule at each edge.
    (shade,) = _layers(spec, "rect")
    assert shade["data"]["values"] == [{"a": 2048, "b": 4096}] and shade["mark"]["fill"] == lc.WINDOW
    (edges,) = _layers(spec, "rule")
    assert [e["at"] for e in edges["data"]["values"]] == [2048, 4096]
    assert edges["encoding"]["x"]["scale"]["domain"] == [0, len(mask)]
    # No window marked when it is the whole sequence.
    assert not _layers(lc.logprob_chart(mask, (0, len(mask))), "rule")


def test_logprob_chart_of_a_short_chain_breaks_the_line_between_calls():
    mask = RolloutView(kitchen_sink().snapshot()).mask()
    spec = vega.validated(lc.logprob_chart(mask, (0, 10)))
    assert spec["usermeta"] == vega.RENDERER  # a few hundred points: SVG
    points = spec["datasets"]["points"]
    generated = np.flatnonzero(mask.provenance == GENERATED)
    assert [p["p"] for p in points] == generated.tolist() and "mn" not in points[0]
    # One stretch of line per call's generation: never joined across the context between them.
    stretches = {}
    for p in points:
        stretches.setdefault(p["seg"], []).append(p["p"])
    assert len(stretches) == len(mask.call_ids)
    assert all(run[-1] - run[0] == len(run) - 1 for run in stretches.values())
    (line,) = _layers(spec, "line")
    assert line["encoding"]["detail"]["field"] == "seg" and line["encoding"]["color"]["legend"] is None
    assert line["encoding"]["color"]["scale"]["range"] == [style.MAIN]
    (dots,) = _layers(spec, "point")
    assert dots["mark"]["opacity"] == 1  # a dot per token, as well as the line
    assert [t["field"] for t in dots["encoding"]["tooltip"]] == ["p", "lp"]
    assert [e["at"] for e in _layers(spec, "rule")[0]["data"]["values"]] == [0, 10]
    assert "<" not in json.dumps(spec)  # plain text: nothing for a browser to read as HTML


def test_link_frame_matches_the_chain():
    view = RolloutView(kitchen_sink().snapshot())
    chain = view.chain("main")
    frame = mv.link_frame(view.mask(), chain)
    assert list(frame["call"]) == chain.call_ids
    assert list(frame["generated"]) == [int(l.entry.generation_token_ids.size) for l in chain.links]
    assert frame["context"].iloc[0] == int(chain.root_prompt.size)
    assert list(frame["context"].iloc[1:]) == [int(l.interstitial.size) for l in chain.links[1:]]
    np.testing.assert_allclose(frame["mean lp"],
                               [float(l.entry.generation_log_probs.mean()) for l in chain.links])


def test_segments_split_by_provenance_and_call():
    view = RolloutView(kitchen_sink().snapshot())
    mask = view.mask()
    segs = mv.segments(mask, 0, len(mask))
    assert segs[0][0] == 0 and segs[-1][1] == len(mask)
    assert all(a[1] == b[0] for a, b in zip(segs, segs[1:]))
    assert [s[2] for s in segs[:3]] == [PROMPT, GENERATED, INTERSTITIAL]
    assert sum(b - a for a, b, kind, _ in segs if kind == GENERATED) == mask.generated_tokens


def test_decoded_segments_with_a_tokenizer_json():
    tokenizer, problem = mv.load_tokenizer(word_tokenizer_json())
    assert problem is None
    view = RolloutView(kitchen_sink().snapshot())
    mask = view.mask()
    frame = mv.decoded_segments(mask, tokenizer, 0, 60)
    assert list(frame.columns) == ["positions", "kind", "call", "tokens", "text"]
    first = frame.iloc[0]
    assert first["kind"] == "prompt" and first["call"] == "c01 (root prompt)"
    ids = [int(t) for t in mask.token_ids[:3]]
    assert first["text"].startswith(" ".join(f"w{i}" for i in ids))
    text = mv.window_text(frame)
    assert text.count("⟦") == int((frame["kind"] == "generated").sum()) >= 1
    assert text.replace("⟦", "").replace("⟧", "") == "".join(frame["text"])
    assert mv.load_tokenizer(b"{not a tokenizer")[1].startswith("not a tokenizer.json")
    assert mv.load_tokenizer(b"\xff\xfe")[1] is not None


# --------------------------------------------------------------------------- export


@pytest.mark.parametrize("name,anchor", [
    ("subagent_branch.json", None),
    ("final_retry_unresolved.json", "call-0004"),
    ("retry_resolved_by_child.json", "call-0002"),  # quarantined anchor: masked, still exported
    ("engine_refusal_ended.json", None),
])
def test_result_and_response_downloads_equal_tokencap_build(name, anchor, tmp_path):
    snapshot = load_snapshots(SAMPLES / name)[0]
    view = RolloutView(snapshot, anchor=anchor)
    extra = ["--terminal-call-id", anchor] if anchor else []
    cli = cli_build(SAMPLES / name, *extra, tmp_path=tmp_path)
    assert ev.result_json(view.result) == cli
    assert ev.result_json(view.result) == results_bytes([build_rollout(snapshot, terminal_call_id=anchor)],
                                                        jsonl=False)
    response = ev.response_json(view.result)
    assert json.loads(response) == json.loads(cli)["rebuilt_response"]
    assert response.endswith(b"\n")


def test_jsonl_of_every_rollout_equals_tokencap_build(tmp_path):
    for source in (SAMPLES / "multi_rollout_entries.jsonl", SAMPLES / "capture_store", UPSTREAM):
        views = [RolloutView(s) for s in load_snapshots(source)]
        assert ev.results_jsonl(v.result for v in views) == cli_build(source, tmp_path=tmp_path)


def test_mask_csv_rows_follow_the_mask():
    view = RolloutView(kitchen_sink().snapshot())
    rows = list(csv.DictReader(io.StringIO(ev.mask_csv(view).decode())))
    mask = view.mask()
    assert len(rows) == len(mask)
    assert [int(r["mask"]) for r in rows] == list(mask.mask)
    assert {r["provenance"] for r in rows} == {"prompt", "interstitial", "generated"}
    assert rows[-1]["call_id"] == "c06"
    assert ev.mask_csv(view, "branch-7") is None


def test_download_names_and_availability():
    view = RolloutView(load_snapshots(SAMPLES / "final_retry_unresolved.json")[0], anchor="call-0004")
    files = ev.downloads(view)
    assert files["response"].file_name == "final-retry-unresolved.at-call-0004.response.json"
    assert all(f.available for f in files.values())
    from tokencap import TokenCaptureSnapshot

    failed = RolloutView(TokenCaptureSnapshot.failed("../evil name", "boom"))
    files = ev.downloads(failed)
    assert not files["response"].available and not files["mask"].available and files["result"].available
    assert files["result"].file_name == "evil_name.result.json"
    assert ev.response_json(failed.result) is None


def test_cli_command_is_shell_quoted():
    cmd = ev.cli_command("my dir/x.jsonl", "r 1", "call;rm", several=True)
    assert cmd == "python -m tokencap build 'my dir/x.jsonl' --rollout 'r 1' --terminal-call-id 'call;rm' -o result.json"
    assert ev.cli_command("a.json", "r", None, several=False) == "python -m tokencap build a.json -o result.json"


def test_a_urls_mask_window_applies_to_its_rollout_and_chain_only():
    from tokencap.views.links import MaskWindow

    asked = ("rk", MaskWindow("main", 5000, 1024))
    assert mv.asked_chain(asked, "rk", ["main", "sub"]) == "main"
    assert mv.asked_chain(asked, "other", ["main"]) is None
    assert mv.asked_chain(asked, "rk", ["sub"]) is None
    assert mv.asked_chain(None, "rk", ["main"]) is None
    assert mv.asked_page(asked, "rk", "main", 2048) == (1024, 4)  # its window, the page holding its start
    odd = ("rk", MaskWindow("main", 5000, 999))  # not a window size: the one in use
    assert mv.asked_page(odd, "rk", "main", 2048) == (2048, 2)
    assert mv.asked_page(asked, "rk", "sub", 2048) is None
    assert mv.asked_page(asked, "other", "main", 2048) is None


def test_overview_draws_each_link_boundary_up_to_a_bound():
    mask = RolloutView(kitchen_sink().snapshot()).mask()
    assert mask.link_starts.size > 2
    spec = vega.validated(mc.overview_chart(mask, (0, 10)))
    rules = [layer for layer in spec["layer"] if layer["mark"]["type"] == "rule"]
    assert len(rules) == 1 and rules[0]["data"]["values"] == [{"at": int(s)} for s in mask.link_starts[1:]]
    few = mc.overview_chart(mask, (0, 10), max_link_lines=1)
    assert not [layer for layer in few["layer"] if layer["mark"]["type"] == "rule"]
    # The mean log-prob of a bin with no generated token is a gap, not a zero.
    bins = spec["datasets"]["bins"]
    assert any(b["lp"] is None for b in bins) and all(b["lp"] is None or b["lp"] <= 0 for b in bins)
