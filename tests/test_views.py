"""The app's views layer: sources, call tree, call detail and verdicts (no Streamlit)."""

from __future__ import annotations

import io
import json
import math
import zipfile
from pathlib import Path

import numpy as np
import pytest
from chart_geometry import call_labels, values
from synth_snapshots import Capture, kitchen_sink, long_linear

from tokencap import load_snapshots
from tokencap.services import rollout_sources as src
from tokencap.views import RolloutView, vega
from tokencap.views.formatting import fmt_fraction, md_escape, one_line, safe_file_stem
from tokencap.views.rollout import detail as dv
from tokencap.views.rollout import tree as tv
from tokencap.views.rollout import tree_layers as tl
from tokencap.views.rollout import tree_marks as tm
from tokencap.views.rollout import verdicts as vv
from tokencap.views.rollout.tree_chart import ROW_PX

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"
UPSTREAM = REPO / "tests" / "data" / "upstream_store"


def sample_view(name: str, index: int = 0, anchor: str | None = None) -> RolloutView:
    return RolloutView(load_snapshots(SAMPLES / name)[index], anchor=anchor)


@pytest.fixture(scope="module")
def sink() -> RolloutView:
    return RolloutView(kitchen_sink().snapshot())


# --------------------------------------------------------------------------- text


@pytest.mark.parametrize("hostile", [
    "[click](javascript:alert(1))", "<img src=x onerror=alert(1)>", ":red[alarm] :material/home:", "$x^2$",
    "**bold** _it_ `code`", "# heading\n- item", "a|b|c", "\\[escaped\\]",
])
def test_md_escape_leaves_no_markdown_construct(hostile):
    escaped = md_escape(hostile)
    # Every ASCII punctuation character is preceded by a backslash, and no line break survives.
    i = 0
    while i < len(escaped):
        ch = escaped[i]
        if ch == "\\":
            assert i + 1 < len(escaped) and not escaped[i + 1].isalnum()
            i += 2
            continue
        assert ch.isalnum() or ch == " " or ord(ch) > 127, (hostile, escaped)
        i += 1
    assert "\n" not in escaped


def test_one_line_joins_lines_and_cuts_but_never_escapes():
    # Vega draws it as SVG text and vega-tooltip escapes it: escaping here would show "&lt;b&gt;".
    assert one_line("<b>x</b>\n & 'y'") == "<b>x</b> & 'y'"
    assert one_line("abcdefghij", limit=5) == "abcd…"
    assert safe_file_stem("../../etc/passwd") == "etc_passwd"
    assert safe_file_stem("...") == "rollout"
    assert fmt_fraction(1.0) == "100%" and fmt_fraction(0.4884) == "48.8%"


# --------------------------------------------------------------------------- sources


def test_sources_are_keyed_by_content_and_never_raise(tmp_path):
    good = kitchen_sink().json_bytes()
    a = src.source_from_bytes("a.json", good)
    assert a.key == src.source_from_bytes("renamed.json", good).key
    loaded = src.load_source(a)
    assert loaded.ok and [s.rollout_id for s in loaded.snapshots] == ["kitchen-sink"]

    bad = src.load_source(src.source_from_bytes("broken.jsonl", b'{"rollout_id": "r"}\n{not json\n'))
    assert not bad.ok and not bad.snapshots
    assert "broken.jsonl" in bad.error and "line" in bad.error

    empty = src.load_source(src.source_from_bytes("empty.json", b"   "))
    assert not empty.ok and "empty.json" in empty.error


def test_directory_source_hashes_files_and_loads_the_store(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    for f in UPSTREAM.iterdir():
        (store / f.name).write_bytes(f.read_bytes())
    first = src.source_from_path(store)
    assert first.is_directory and first.size > 0
    loaded = src.load_source(first)
    assert sorted(s.rollout_id for s in loaded.snapshots) == ["task3-rollout0-attempt0", "task4-rollout1-attempt0"]
    assert src.source_from_path(store).key == first.key
    sig = src.path_signature(store)
    (store / "task3-rollout0-attempt0.tokens.intents").write_text("call-1\ncall-2\ncall-3\ncall-9\n")
    assert src.source_from_path(store).key != first.key
    assert src.path_signature(store) != sig
    with pytest.raises(FileNotFoundError):
        src.source_from_path(tmp_path / "missing.json")


class _Upload:
    def __init__(self, name: str, data: bytes, file_id: str) -> None:
        self.name, self._data, self.file_id = name, data, file_id
        self.reads = 0

    def getvalue(self) -> bytes:
        self.reads += 1
        return self._data


def test_uploads_are_hashed_once_and_deduplicated():
    memo: dict[str, src.Source] = {}
    a = _Upload("a.json", kitchen_sink().json_bytes(), "id-a")
    b = _Upload("b.jsonl", "\n".join(Capture("other").jsonl_lines()).encode() or b"x", "id-b")
    same_as_a = _Upload("copy.json", a._data, "id-c")
    out = src.sources_from_uploads([a, b, same_as_a], memo)
    assert [s.name for s in out] == ["a.json", "b.jsonl"]
    out2 = src.sources_from_uploads([a], memo)
    assert a.reads == 1 and [s.name for s in out2] == ["a.json"]
    assert set(memo) == {"id-a"}
    assert src.sources_from_uploads(None, memo) == [] and memo == {}


def test_zip_upload_of_a_capture_store():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for f in sorted((SAMPLES / "capture_store").iterdir()):
            zf.write(f, f"capture_store/{f.name}")
    loaded = src.load_source(src.source_from_bytes("store.zip", buffer.getvalue()))
    assert loaded.ok and sorted(s.rollout_id for s in loaded.snapshots) == ["store-complete", "store-interrupted"]


def test_sample_scenarios_follow_expected_json():
    scenarios = src.sample_scenarios(SAMPLES)
    names = [s.name for s in scenarios]
    expected = list(json.loads((SAMPLES / "expected.json").read_text()))
    assert names[: len(expected)] == [n.rstrip("/") for n in expected]
    assert "expected.json" not in names and "README.md" not in names
    assert "rollout_records" not in names and "run_after_fix" not in names  # for comparing runs, not scenarios
    by_name = {s.name: s for s in scenarios}
    assert by_name["subagent_branch.json"].situation
    assert "masked: multiple_chains" in by_name["subagent_branch.json"].expectation
    assert "store-interrupted" in by_name["capture_store"].expectation
    assert scenarios[src.default_scenario_index(scenarios)].name == "subagent_branch.json"
    assert src.sample_scenarios(SAMPLES / "nope") == []


def test_rollout_refs_are_unique_per_source_and_index():
    loaded = [src.load_source(src.source_from_path(SAMPLES / "multi_rollout_entries.jsonl")),
              src.load_source(src.source_from_path(SAMPLES / "subagent_branch.json"))]
    refs = src.rollout_refs(loaded)
    assert [r.rollout_id for r in refs] == [s.rollout_id for ls in loaded for s in ls.snapshots]
    assert refs[-1].rollout_id == "subagent-branch" and refs[-1].index == 0
    assert len({r.key for r in refs}) == 4


# --------------------------------------------------------------------------- tree


def test_tree_draws_every_mark_of_the_kitchen_sink(sink):
    model = tv.tree_of(sink)
    cats = {n.ident: n.category for n in model.nodes}
    assert cats["c06"] == "terminal"
    assert cats["c01"] == cats["c02"] == cats["c03"] == cats["c05"] == "main"
    assert cats["b01"] == cats["b02"] == "branch"
    assert cats["c03r"] == "quarantined"
    assert cats["c04e"] == "empty"
    assert cats["x01"] == "excluded"
    assert cats["r-end"] == "refusal_ended" and cats["r-early"] == "refusal"
    assert cats["ghost-parent"] == "ghost"
    flags = {n.ident: n.flags for n in model.nodes}
    assert flags["c05"] == {"recovered"}
    assert flags["s01"] == {"boundary", "break"} and flags["g01"] == {"boundary", "break"}  # breaks: diagnosed
    edges = {(model.node(b).ident, kind) for a, b, kind in model.edges()}
    assert ("c05", "recovered") in edges and ("c05", "claimed") in edges  # recovered, and the claim it replaced
    assert ("s01", "digest_mismatch") in edges
    assert ("g01", "missing_parent") in edges
    assert ("c04e", "claimed") in edges and ("x01", "claimed") in edges
    assert ("r-end", "refusal") in edges and ("r-early", "refusal") in edges
    assert ("c02", "verified") in edges


def test_tree_layout_main_chain_is_the_top_lane_and_nodes_never_overlap(sink):
    model = tv.tree_of(sink)
    main = sink.chain("main").call_ids
    assert [model.node(f"call:{c}").lane for c in main] == [0] * len(main)
    assert [model.node(f"call:{c}").depth for c in main] == list(range(len(main)))
    positions = [(n.depth, n.lane) for n in model.nodes]
    assert len(positions) == len(set(positions))
    # A rejected link never continues its claimed parent's lane: the fragment has its own.
    s01 = model.node("call:s01")
    assert s01.lane != model.node(s01.parent).lane
    # Every drawn parent sits one step to the left.
    for n in model.nodes:
        if n.parent is not None:
            assert model.node(n.parent).depth == n.depth - 1


def test_tree_survives_a_loop_of_claimed_parents():
    c = Capture("loop")
    c.call("a1", new=10)
    # Two delta records naming each other: both unreconstructable, drawn under each other's claim.
    for cid, parent in (("d1", "d2"), ("d2", "d1")):
        c.records.append({"schema_version": 5, "rollout_id": "loop", "model_call_id": cid, "prompt_token_ids": [1, 2],
                          "generation_token_ids": [3], "generation_log_probs": [-0.5], "parent_resolution": "resolved",
                          "parent_call_id": parent, "prompt_is_delta": True, "cum_len": 9, "digest": "00"})
    view = RolloutView(c.snapshot())
    assert set(view.build.excluded) == {"d1", "d2"}
    model = tv.tree_of(view)
    assert {n.ident for n in model.nodes} == {"a1", "d1", "d2"}
    assert sum(1 for n in model.nodes if n.parent is None) == 2  # a1, and the cut in the loop


def test_tree_chart_has_few_layers_and_every_node_carries_its_key(sink):
    model = tv.tree_of(sink)
    spec = vega.validated(tv.tree_chart(model, selected="call:c05"))
    # A layer per link style, one clickable layer of nodes and rings, the labels, lane names, shading, legend.
    assert len(spec["layer"]) <= len(tv.EDGE_STYLES) + 12
    clickable = [layer for layer in spec["layer"] if layer.get("params")]
    assert [layer["name"] for layer in clickable] == ["nodes"]
    assert clickable[0]["params"][0]["name"] == vega.PICK and clickable[0]["params"][0]["select"]["fields"] == ["key"]
    shading = values(spec, "row_shading")
    rows = [(d["y"] + d["y2"]) / 2 for d in shading]  # every other row, from the second
    assert len(rows) == model.max_order // 2 and rows == sorted(rows)
    points = values(spec, "nodes")
    assert {d["key"] for d in points} == set(model.keys())
    whats = {d["what"] for d in points}
    assert {"selected", "recovered link (parent re-found by prefix)", "unresolved boundary (fragment root)"} <= whats
    assert [d["key"] for d in points if d["what"] == "selected"] == ["call:c05"]
    assert points[-1]["what"] == "selected"  # drawn last, over its node
    links = {layer["name"] for layer in spec["layer"] if layer["mark"]["type"] == "rule"
             and not layer["name"].startswith("legend_")}
    assert "links_recovered" in links and links <= {f"links_{kind}" for kind in tv.EDGE_STYLES}
    names = [layer["name"] for layer in spec["layer"]]
    assert len(names) == len(set(names)) and all(n.isidentifier() for n in names)  # Vega names its data after them
    # Text is SVG text and tooltips are escaped by vega-tooltip: nothing in the spec is HTML.
    assert "<br>" not in json.dumps(spec) and "<b>" not in json.dumps(spec)


def test_tree_hover_and_labels_escape_capture_strings():
    c = Capture("hostile")
    c.call("<img src=x onerror=alert(1)>", new=5, parent_resolution_reason="<script>alert(1)</script>")
    view = RolloutView(c.snapshot())
    model = tv.tree_of(view)
    node = model.nodes[0]
    # Plain text (the chart draws SVG text and vega-tooltip escapes a tooltip): the characters are kept as
    # they are, never turned into markup here, and never sent as HTML.
    assert "<img src=x onerror=alert(1)>" in node.hover and "<script>alert(1)</script>" in node.hover
    assert model.label(node.key).startswith("<img")
    spec = tv.tree_chart(model)
    assert call_labels(spec)[0] == "…c=x onerror=alert(1)>"  # the id as it is, cut to the label's width
    assert all(layer["mark"]["type"] in ("text", "point", "rule", "rect") for layer in spec["layer"])


def test_key_from_selection():
    assert tv.key_from_selection(None) is None
    assert tv.key_from_selection({}) is None and tv.key_from_selection({"pick": []}) is None
    assert tv.key_from_selection({"pick": [{"key": "call:c01"}]}) == "call:c01"
    assert tv.key_from_selection({"pick": [{"key": 3}, {"key": "refusal:r1"}]}) == "refusal:r1"
    assert tv.key_from_selection({"pick": [{"key": "no-kind"}]}) is None
    assert tv.key_from_selection({"other": [{"key": "call:c01"}]}) is None


@pytest.mark.parametrize("n_calls", [600, 1500])
def test_tree_is_compact_at_scale(n_calls):
    # Speed is measured by benchmarks/bench_app_browser.py, never asserted here.
    view = RolloutView(long_linear(n_calls).snapshot())
    model = tv.tree_of(view)
    spec = tv.tree_chart(model, selected=model.default_key)
    json.dumps(spec)
    assert len(model) == n_calls
    assert model.lanes <= 4  # retries and side branches pack into a few lanes
    assert len(spec["layer"]) < 20
    renderer = spec["usermeta"]["embedOptions"]["renderer"]
    assert renderer == ("canvas" if n_calls > tv.CANVAS_ROWS else "svg")
    assert not values(spec, "call_ids")  # the whole tree of a long rollout: no labels, they would only crowd


def test_dense_trees_draw_nodes_without_rims():
    # White rims on hundreds of touching markers paint over their fills (the main chain vanished).
    main = tv.NODE_STYLES["main"][0]
    dense = [d for d in values(tv.tree_chart(tv.tree_of(RolloutView(long_linear(600).snapshot()))), "nodes")
             if d["what"] == main]
    assert dense and all(d["sw"] == 0 for d in dense)
    small = [d for d in values(tv.tree_chart(tv.tree_of(RolloutView(kitchen_sink().snapshot()))), "nodes")
             if d["what"] == main]
    assert small and all(d["stroke"] == "#ffffff" and d["sw"] == 1.0 for d in small)


def test_nodes_frame_lists_every_node_with_its_link(sink):
    frame = tv.nodes_frame(tv.tree_of(sink), sink)
    assert list(frame["key"]) == tv.tree_of(sink).keys()
    links = dict(zip(frame["node"], frame["link"]))
    assert links["c01"] == "root" and links["c02"] == "verified"
    assert links["c05"] == "parent_call_id_missing_recovered" and links["s01"] == "parent_digest_mismatch"
    assert links["c04e"] == "claimed only (not chained)" and links["r-end"] == "refused continuation"
    assert frame.loc[frame["node"] == "ghost-parent", "prompt"].isna().all()


def test_tree_of_an_unbuilt_rollout_shows_nothing_and_does_not_fail():
    from tokencap import TokenCaptureSnapshot

    view = RolloutView(TokenCaptureSnapshot.failed("bad", "bad: line 3: not JSON"))
    assert len(tv.tree_of(view)) == 0 and tv.tree_of(view).default_key is None
    assert vv.banner_of(view).error == "bad: line 3: not JSON"


def test_legend_frame_lists_every_mark():
    frame = tv.legend_frame()
    assert len(frame) == len(tv.NODE_STYLES) + len(tv.OVERLAY_STYLES) + len(tv.EDGE_STYLES)
    assert set(frame["mark"]) == {"node", "ring", "edge"}


def test_legend_frame_names_each_shape_in_words():
    shapes = dict(zip(tv.legend_frame()["meaning"], tv.legend_frame()["shape"], strict=True))
    assert shapes["terminal call (end of the delivered chain)"] == "star"
    assert shapes["engine refusal (does not end the chain)"] == "open hexagon"
    assert shapes["excluded record (corrupt digest or broken delta)"] == "diagonal cross"
    assert shapes["matches the final answer, ambiguously"] == "open three-pointed star"
    assert shapes["claimed link not trusted: no resolution recorded"] == "dash-dotted line"
    assert all(" " in shape or shape.isalpha() for shape in shapes.values()), shapes  # words, not symbol codes


def test_every_shape_and_dash_of_the_tree_can_be_drawn():
    vega_own = {"circle", "square", "diamond", "triangle-down"}
    assert set(tm.SHAPE_WORDS) == vega_own | set(tl.SHAPE_PATHS)
    assert set(tm.DASH_WORDS) == set(tl.DASHES)
    symbols = [style[2] for style in tv.NODE_STYLES.values()] + [style[2] for style in tv.OVERLAY_STYLES.values()]
    assert {s.shape for s in symbols} <= set(tm.SHAPE_WORDS)
    assert {style[2] for style in tv.EDGE_STYLES.values()} <= set(tm.DASH_WORDS)


# --------------------------------------------------------------------------- detail


def _checks(d: dv.CallDetail) -> dict[str, tuple[str, str, str]]:
    return {row["check"]: (row["expected"], row["found"], row["ok"]) for _, row in d.link_checks.iterrows()}


def test_detail_verified_link_recomputes_the_digest(sink):
    d = dv.call_detail(sink, "call:c02")
    assert d.link_ok is True and "Verified" in d.link_outcome
    checks = _checks(d)
    digest_row = next(v for k, v in checks.items() if k.startswith("digest"))
    assert digest_row[0] == digest_row[1] and digest_row[2] == "✓"
    assert digest_row[0] == sink.build.entries["c01"].digest
    fields = dict(zip(d.fields["field"], d.fields["value"]))
    assert fields["model_call_id"] == "c02" and fields["parent_call_id"] == "c01"


def test_detail_digest_mismatch_shows_both_digests(sink):
    d = dv.call_detail(sink, "call:s01")
    assert d.link_ok is False and "do not open this call's prompt" in d.link_outcome
    digest_row = next(v for k, v in _checks(d).items() if k.startswith("digest"))
    assert digest_row[0] != digest_row[1] and digest_row[2] == "✗"


def test_detail_recovered_link_names_the_absent_claim_and_the_recovered_parent(sink):
    d = dv.call_detail(sink, "call:c05")
    assert d.link_ok is True and "re-attached" in d.link_outcome
    checks = _checks(d)
    assert checks["claimed parent among the chained calls"] == ("c04e", "left out of chaining (empty generation)", "✗")
    digest_row = next(v for k, v in checks.items() if k.startswith("digest") and "c03" in k)
    assert digest_row[2] == "✓"


def test_detail_excluded_record_shows_the_stamp_it_failed(sink):
    d = dv.call_detail(sink, "call:x01")
    assert d.headline == "Excluded record" and d.link_ok is False
    checks = _checks(d)
    assert checks["stamped cum_len vs prompt + generation"][2] == "✓"
    assert checks["stamped digest vs digest of its own tokens"][2] == "✗"


def test_detail_broken_delta_walk():
    view = sample_view("broken_delta_chain.json")
    d = dv.call_detail(view, "call:call-0004")
    rows = list(d.link_checks.itertuples(index=False))
    assert rows[-1].found == "excluded (delta_chain_unreconstructable)"
    d3 = dv.call_detail(view, "call:call-0003")
    assert list(d3.link_checks.itertuples(index=False))[-1].found == "never captured"


def test_detail_retry_group_and_twins():
    view = sample_view("token_identical_twins.json")
    d = dv.call_detail(view, "call:call-0004")
    assert d.headline == "Quarantined retry"
    assert d.group is not None and set(d.group["decision"]) == {"kept", "quarantined"}
    assert "token-identical twins" in d.group_text
    assert d.twins == ["call-0003"]

    unresolved = dv.call_detail(sample_view("final_retry_unresolved.json"), "call:call-0003")
    assert "unresolved retry" in unresolved.group_text and "no" in set(unresolved.group["same tokens as kept"])


def test_detail_output_items_text_and_json(sink):
    items = dv.call_detail(sink, "call:c01").items
    assert [(p.kind, p.body, p.carries_tokens) for p in items] == [("text", "answer of c01", True)]
    tool = dv.call_detail(sink, "call:c02").items
    assert tool[0].kind == "json" and tool[0].body["name"] == "search"
    assert tool[0].body["arguments"] == "{\"q\": \"<b>x</b>\"}"  # kept verbatim, shown as JSON, never rendered


def test_detail_of_refusals_and_ghosts(sink):
    d = dv.call_detail(sink, "refusal:r-end")
    assert d.link_ok is True and list(d.conditions["met"]) == ["✓", "✓", "✓"]
    early = dv.call_detail(sink, "refusal:r-early")
    assert early.link_ok is False and list(early.conditions["met"])[:2] == ["✗", "✗"]
    ghost = dv.call_detail(sink, "ghost:ghost-parent")
    assert ghost.kind == "ghost" and "g01" in ghost.facts[0]


def test_detail_of_a_conflicting_duplicate():
    view = sample_view("duplicate_call_id.json")
    d = dv.call_detail(view, "call:call-0003")
    assert d.link_ok is False and "copies of this call id agree" in set(d.link_checks["check"])
    assert "conflict" in tv.tree_of(view).node("call:call-0003").flags


# --------------------------------------------------------------------------- verdicts


def test_banner_trainable_and_masked():
    ok = vv.verdict_banner(sample_view("clean_multiturn_tools.json").result)
    assert ok.trainable and not ok.reasons and ok.status_line == "completed"
    masked = vv.verdict_banner(sample_view("stale_parent_link.json").result)
    assert not masked.trainable
    assert [code for code, _ in masked.reasons] == ["unresolved_parent_calls", "multiple_roots", "multiple_chains"]
    assert all(text and text != code for code, text in masked.reasons)
    metrics = {m.label: m.value for m in masked.metrics}
    assert metrics["calls"] == "4" and metrics["unproven links"] == "1" and metrics["chains"] == "2"
    length = vv.verdict_banner(sample_view("length_stop.json").result)
    assert length.status_line == "incomplete (max_output_tokens)"


def test_verdict_labels():
    assert vv.verdict_label(sample_view("clean_multiturn_tools.json").result) == "✓ trainable"
    assert vv.verdict_label(sample_view("length_stop.json").result) == "✓ trainable · incomplete"
    assert vv.verdict_label(sample_view("stale_parent_link.json").result) == \
        "✗ masked: unresolved parent calls, multiple roots +1"


def test_refusal_conditions_one_by_one():
    ended = vv.refusal_views(sample_view("engine_refusal_ended.json").result)
    assert len(ended) == 1 and ended[0].ended_chain
    assert list(ended[0].conditions["question"]) == [
        "Was it a context-window refusal?", "Did it continue the delivered chain's last call (or a twin of it)?",
        "Was the last call (or a twin) served again at or after the refusal?"]
    assert list(ended[0].conditions["answer"]) == ["yes", "yes", "no"]
    assert not any(q.lower().startswith("not ") for q in ended[0].conditions["question"])  # no double negative
    recovered = vv.refusal_views(sample_view("engine_refusal_recovered.json").result)[0]
    assert not recovered.ended_chain and list(recovered.conditions["met"]) == ["✓", "✓", "✗"]
    assert list(recovered.conditions["answer"]) == ["yes", "yes", "yes"]
    earlier = vv.refusal_views(sample_view("engine_refusal_earlier_call.json").result)[0]
    assert list(earlier.conditions["met"])[1] == "✗"


def test_finish_reason_withheld_when_twins_disagree():
    summary, resolved, frame = vv.finish_reason_frame(sample_view("twins_finish_reason_disagree.json").result)
    assert resolved is False and summary.startswith("Withheld")
    assert dict(zip(frame["call"], frame["finish_reason"])) == {"call-0003": "length", "call-0004": "stop"}
    summary, resolved, _ = vv.finish_reason_frame(sample_view("length_stop.json").result)
    assert resolved is True and summary.startswith("Applies")


def test_notes_frames(sink):
    frame = vv.notes_frame(sink.build)
    notes = dict(zip(frame["note"], frame["value"]))
    assert notes["quarantined calls"] == "c03r" and notes["empty generation calls"] == "c04e"
    meaning = dict(zip(frame["note"], frame["meaning"]))
    assert "share of all generated tokens" in meaning["delivered fraction"]  # terms explained where they appear
    failures = vv.failures_frame(sink.build)
    masks = dict(zip(failures["key"], failures["masks"]))
    assert set(failures["note"]) >= {"parent absent, re-attached", "claimed parent does not match"}
    assert masks["parent_call_id_missing_recovered"] == "no" and masks["parent_digest_mismatch"] == "yes"
    assert list(vv.retry_groups_frame(sink.build)["rule"]) == ["extended"]
    assert set(vv.exclusions_frame(sink.build)["call"]) == {"x01"}
    metrics = dict(zip(*vv.metrics_frame(sink.result).T.values))
    assert metrics["n_calls"] == "12"


def test_anchor_effect_sentences():
    base = sample_view("final_retry_unresolved.json")
    anchored = sample_view("final_retry_unresolved.json", anchor="call-0004")
    text = vv.anchor_effect(base.result, anchored.result)
    assert "verdict: masked → trainable" in text and "no longer masked for unresolved_retries" in text
    # A verdict that stays trainable while the status flips still reports the flip (and the rest).
    ended = sample_view("engine_refusal_ended.json")
    cut = sample_view("engine_refusal_ended.json", anchor="call-0002")
    text = vv.anchor_effect(ended.result, cut.result)
    assert "verdict" not in text.split("Compared")[1]
    assert "response status: incomplete (max_output_tokens) → completed" in text
    assert "generated_tokens_delivered: 113 → 79" in text and "after_terminal_calls: 0 → 1" in text
    last = sample_view("engine_refusal_ended.json", anchor="call-0003")
    assert vv.anchor_effect(ended.result, last.result).endswith("Nothing else changes: the verdict stays trainable.")
    quarantined = sample_view("retry_resolved_by_child.json", anchor="call-0002")
    assert "was quarantined" in vv.anchor_effect(base.result, quarantined.result)
    assert vv.anchor_effect(base.result, base.result).startswith("No anchor")


def test_anchor_options_put_the_main_chain_first():
    view = sample_view("subagent_branch.json")
    options = view.anchor_options()
    assert options[:3] == view.chain("main").call_ids
    assert sorted(options) == sorted(view.build.entries)


def test_rollout_view_caches_masks_and_tree():
    view = sample_view("clean_multiturn_tools.json")
    assert view.mask("main") is view.mask("main")
    assert tv.tree_of(view) is tv.tree_of(view)
    assert view.mask("branch-9") is None
    assert np.array_equal(view.mask("main").token_ids, view.mask().token_ids)


# --------------------------------------------------------------------------- long rollouts


def test_a_deep_tree_gets_an_overview_and_a_zoomed_window_that_keeps_its_place():
    model = tv.tree_of(RolloutView(long_linear(400).snapshot()))
    assert tv.needs_overview(model) and not tv.needs_overview(tv.tree_of(RolloutView(kitchen_sink().snapshot())))
    # Windows are rows: 1-based positions in call order.
    assert [n.order for n in model.nodes] == list(range(1, len(model) + 1))
    key = "call:m00200"
    window = tv.window_around(model, key)
    assert window[1] - window[0] == tv.DETAIL_SPAN and window[0] <= model.node(key).order <= window[1]
    # A selection inside the window keeps it; one outside moves it, keeping its height.
    assert tv.keep_in_window(model, "call:m00205", window) == window
    moved = tv.keep_in_window(model, "call:m00300", (10, 50))
    assert moved[1] - moved[0] == 40 and moved[0] <= model.node("call:m00300").order <= moved[1]
    assert tv.clamp_window(model, (-5, 10)) == (1, 16)
    assert tv.clamp_window(model, (model.max_order + 3, model.max_order + 10)) == (model.max_order - 7,
                                                                                  model.max_order)
    assert tv.keep_in_window(model, None, None) == tv.window_around(model, None)
    # The window follows the selection only when the selection changed.
    assert tv.follow_selection(model, "call:m00200", (10, 40), "call:m00200") == (10, 40)
    assert tv.follow_selection(model, "call:m00300", (10, 50), "call:m00200") == moved


def test_the_zoomed_chart_draws_only_its_window_with_labels():
    model = tv.tree_of(RolloutView(long_linear(400).snapshot()))
    window = (100, 124)
    spec = tv.tree_chart(model, "call:m00110", window=window, legend=False)
    keys = {d["key"] for d in values(spec, "nodes")}
    rows = {model.node(k).order for k in keys}
    assert min(rows) == 100 and max(rows) == 124 and "call:m00110" in keys
    # Rows run down in call order: the window's first call on top, one row apart.
    ys = {model.node(d["key"]).order: d["py"] for d in values(spec, "nodes")}
    assert ys[100] < ys[101] < ys[124] and ys[101] - ys[100] == ROW_PX
    geometry = spec["usermeta"]["geometry"]
    assert geometry["rows"] == [100, 124] and geometry["plot"][1] < ys[100] < ys[124] < geometry["plot"][3]
    labels = values(spec, "call_ids")
    assert any(d["text"] == "m00110" for d in labels) and not values(spec, "legend_")
    # Labels start right of the widest ring a node can carry, so they never sit on a node.
    widest = max(math.sqrt(d["size"]) / 2 + d["sw"] / 2 for d in values(spec, "nodes"))
    lane_x = min(d["px"] for d in values(spec, "nodes"))
    assert min(d["px"] for d in labels) >= lane_x + widest
    # A lane passing through the window without a node in it is still drawn: links reaching into it count.
    assert any(layer["mark"]["type"] == "rule" for layer in spec["layer"])
    # The whole tree (400 rows) is drawn without labels: they would only crowd.
    assert not values(tv.tree_chart(model), "call_ids")


def test_the_overview_marks_the_window_and_a_click_on_a_dot_is_its_key():
    model = tv.tree_of(RolloutView(long_linear(400).snapshot()))
    spec = vega.validated(tv.overview_chart(model, (100, 124)))
    frame, dots = spec["layer"]
    assert frame["data"]["values"] == [{"order": 99.5, "order2": 124.5}]
    assert len(dots["data"]["values"]) == len(model)  # the selection is not drawn: see overview_chart
    assert dots["params"][0]["name"] == vega.PICK and dots["params"][0]["select"]["fields"] == ["key"]
    # A dot's x is its place in call order; its hover names the call and that place, never the key.
    order = model.node("call:m00110").order
    dot = next(d for d in dots["data"]["values"] if d["key"] == "call:m00110")
    assert dot["order"] == order and dot["tip"] == f"m00110 · #{order}"
    assert not any(d["tip"].startswith("call:") for d in dots["data"]["values"])
    assert spec["description"] == tv.OVERVIEW_DESCRIPTION
    # A drag across calls is an interval of call order: the rows it covers (whole calls inside it).
    assert {"name": tv.ZOOM, "select": {"type": "interval", "encodings": ["x"]}} in dots["params"]
    assert tv.window_from_selection(model, {tv.ZOOM: {"order": [200.4, 251.7]}, vega.PICK: []}) == (201, 251)
    assert tv.window_from_selection(model, {tv.ZOOM: {"order": [5.2, 5.4]}}) == (6, 6)
    assert tv.window_from_selection(model, {tv.ZOOM: {"order": [-40, 9000]}}) == (1, len(model))
    assert tv.window_from_selection(model, {vega.PICK: [{"key": "call:m00001"}]}) is None
    assert tv.window_from_selection(model, {tv.ZOOM: {}}) is None and tv.window_from_selection(model, None) is None


def test_search_finds_exact_then_prefix_then_substring():
    model = tv.tree_of(RolloutView(long_linear(400).snapshot()))
    assert tv.search(model, "m00120")[0] == "call:m00120"
    # Prefix matches in call order: m00120's side branch came right after it.
    assert tv.search(model, " M0012 ")[:4] == ["call:m00120", "call:m00120-b1", "call:m00120-b2", "call:m00121"]
    assert "call:m00125-retry" in tv.search(model, "125-ret")
    assert tv.search(model, "") == [] and tv.search(model, "zzz") == []


def test_short_labels_keep_short_ids_and_the_telling_end_of_long_ones():
    assert tv.short_labels(["call-0001", "m00050-retry"]) == ["call-0001", "…050-retry"]
    assert tv.short_labels(["m00048", "m00050-retry"]) == ["m00048", "…50-retry"]  # shared "m000" dropped
    assert tv.short_labels(["chatcmpl-8f3a9b2c1d", "chatcmpl-8f3a9b2c2e"]) == ["8f3a9b2c1d", "8f3a9b2c2e"]
    long = tv.short_labels(["4f9c0d2e-aaaa-bbbb-cccc-000000000001", "4f9c0d2e-aaaa-bbbb-cccc-000000000002"])
    assert long == ["…000000001", "…000000002"] and len(set(long)) == 2


def test_the_bundled_run_scenario_is_built_with_the_run_s_rollout_records():
    # The picker's "run" entry builds as the Run page scans it (README): with rollout_records/run.jsonl.
    run = next(s for s in src.sample_scenarios(SAMPLES) if s.name == "run")
    assert run.final_responses == SAMPLES / "rollout_records" / "run.jsonl"


def test_values_on_the_page_read_as_json_or_words_never_as_python():
    """Issue 37, item 11: the Verdicts tab's metrics and the Compare tab's changes say ``false``, ``null``
    and ``{"parent_unresolved": 2}``, as `tokencap build` writes them, never ``False``, ``None`` or
    ``['call-0003']``; and item 14: a capture time is a readable UTC time, not Unix seconds."""
    from tokencap.views.formatting import fmt_time, json_text
    from tokencap.views.rollout import diff as df

    python_words = ("True", "False", "None", "'")
    for name in ("ambiguous_final_answer.json", "capture_store", "final_retry_unresolved.json"):
        view = sample_view(name)
        for value in vv.metrics_frame(view.result)["value"]:
            assert not any(w in value for w in python_words), (name, value)
    metrics = dict(zip(*vv.metrics_frame(sample_view("ambiguous_final_answer.json").result).T.values))
    assert metrics["capture_incomplete"] == "false"
    base = sample_view("final_retry_unresolved.json")
    anchored = sample_view("final_retry_unresolved.json", anchor="call-0004")
    changes = vv.verdict_changes(base.result, anchored.result) + df.compare(base, anchored).changes
    assert changes and not any(w in c for c in changes for w in ("False", "None", "{'", ": {}")), changes
    assert json_text({"parent_unresolved": 2}) == '{"parent_unresolved": 2}' and json_text({}) == "none"
    assert json_text(None) == "null" and json_text(0.123456, 4) == "0.1235"
    assert fmt_time(1717000005.631) == "2024-05-29 16:26:45.631 UTC"
    assert fmt_time(1717000005.631, 1717000000.0) == "2024-05-29 16:26:45.631 UTC (t+5.631 s)"
    assert fmt_time(float("nan")) == "nan"
