"""Page-level decisions of the Rollout page (`tokencap.views.rollout.rollout_page`), without Streamlit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokencap import load_snapshots
from tokencap.loading import load_final_responses
from tokencap.services import rollout_sources as src
from tokencap.services.requests import OpenRequest
from tokencap.services.rollout_sources import RolloutRef
from tokencap.views import RolloutView, links
from tokencap.views.formatting import md_escape
from tokencap.views.rollout import attribution as av
from tokencap.views.rollout import rollout_page as rp
from tokencap.views.rollout import tree as tv
from tokencap.views.rollout import verdicts as vv
from tokencap.views.rollout.culprits import Culprit

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


# --------------------------------------------------------------------------- decisions moved out of tokencap/app/rollout/*.py


def ref(source: str, index: int, rollout_id: str, name: str = "f.json") -> RolloutRef:
    return RolloutRef(source * 4, index, rollout_id, name)


def test_progress_texts_escape_the_file_name():
    assert rp.parsing_label("a_b*.json", 2048) == "parsing a\\_b\\*\\.json (2.0 KB)"
    assert rp.building_label(0, 3, "x.zip") == "building rollout 1 of 3 in x\\.zip"
    assert rp.loaded_label(5 << 20) == "Loaded 5.2 MB"
    assert rp.uploads_caption(1) == "Showing 1 uploaded file. Remove them to go back."
    assert rp.uploads_caption(2) == "Showing 2 uploaded files. Remove them to go back."


def test_a_scan_table_on_the_command_line_is_not_a_rollout_source_and_a_bad_path_says_why():
    assert rp.rollout_path("run/RESULT.PARQUET") is None
    assert rp.rollout_path("run/r.jsonl") == "run/r.jsonl"
    assert rp.rollout_path(None) is None
    assert rp.path_problem("/x", FileNotFoundError(2, "No such file or directory")) == "/x: No such file or directory"
    assert rp.path_problem("/x", ValueError("/x: not a capture")) == "/x: not a capture"


def test_a_vs_link_names_a_bundled_sample_or_a_path():
    scenarios = src.sample_scenarios(SAMPLES)
    assert rp.versus_path("sample:capture_store", scenarios) == str(SAMPLES / "capture_store")
    assert rp.versus_path("/runs/b/r.json", scenarios) == "/runs/b/r.json"
    assert rp.versus_path("sample:no_such_sample", scenarios) is None


def test_the_rollout_picker_shows_the_verdict_and_the_file_only_when_several_are_loaded():
    view = sample_view("stale_parent_link.json")
    r = ref("k", 0, view.rollout_id, "stale.json")
    assert rp.rollout_option_label(view, r, False) == \
        f"✗ masked: unresolved parent calls, multiple roots +1 · {view.rollout_id}"
    assert rp.rollout_option_label(view, r, True).endswith(f"· {view.rollout_id}  (stale.json)")
    clean = sample_view("clean_multiturn_tools.json")
    assert rp.rollout_option_label(clean, r, False).startswith("✓ trainable · ")


def opening(rollout_id: str, **fields: Any) -> OpenRequest:
    """A request to open ``rollout_id`` (no files: what these tests read is its other fields)."""
    return OpenRequest(path=None, source="", rollout_id=rollout_id, **fields)


def test_a_handed_over_rollout_and_its_comparison_are_found_in_their_own_sources():
    refs = [ref("a", 0, "r1"), ref("a", 1, "r2"), ref("b", 0, "r1"), ref("b", 1, "r9")]
    request = opening("r1", vs=opening("r9"))
    assert rp.handed_over_refs(refs, request, "bbbb") == (refs[0], refs[3])  # never the vs source's r1
    assert rp.handed_over_refs(refs, opening("r1"), "bbbb") == (refs[0], None)
    assert rp.handed_over_refs(refs, opening("r9"), "bbbb") == (None, None)  # only in the vs source
    assert rp.handed_over_refs(refs, opening("r2", vs=opening("r1")), None) == (refs[1], None)


def test_a_links_comparison_is_its_vs_rollout_or_the_same_id_in_the_vs_source_never_itself():
    refs = [ref("a", 0, "r1"), ref("b", 0, "r1"), ref("b", 1, "r2")]
    assert rp.linked_comparison(refs, refs[0], None, "bbbb") == refs[1]
    assert rp.linked_comparison(refs, refs[0], "r2", "bbbb") == refs[2]
    assert rp.linked_comparison(refs, refs[0], "r3", "bbbb") is None
    assert rp.linked_comparison(refs, refs[0], None, "aaaa") is None  # the same capture is no comparison


def test_the_run_records_of_a_handover_apply_only_to_sources_built_for_this_opening():
    class Built:
        def __init__(self, key: str) -> None:
            self.cache_key = key

    request = opening("r", seq=4, final_responses="/r/a.jsonl", vs=opening("r", final_responses="/r/b.jsonl"))
    assert rp.handed_over_records(request, [(4, Built("A")), (4, Built("B"))]) == {"A": "/r/a.jsonl",
                                                                                 "B": "/r/b.jsonl"}
    assert rp.handed_over_records(request, [(3, Built("A")), None]) == {}  # built for an earlier opening
    assert rp.handed_over_records(opening("r", seq=1), [(1, Built("A")), None]) == {}  # scanned without records


def test_the_export_offers_every_rollout_when_the_source_holds_more_than_one():
    refs = [ref("a", 0, "r1"), ref("a", 1, "r2"), ref("b", 0, "r3")]
    assert rp.export_several(refs, refs[0], False)
    assert not rp.export_several(refs, refs[2], False)
    assert rp.export_several(refs, refs[2], True)  # a directory of named files


def test_what_a_link_from_outside_opens():
    run = OpenRequest(path=str(SAMPLES / "run"), source="a/r1.json", rollout_id="r1")
    linked = links.ViewState(src="sample:run", part="a/r1.json", rollout="r1")
    assert rp.link_target(linked, None, SAMPLES) == "run rollout"
    assert rp.link_target(linked, run, SAMPLES) == "same run rollout"
    assert rp.link_target(linked.with_(rollout="r2"), run, SAMPLES) == "run rollout"
    assert rp.link_target(links.ViewState(src="sample:capture_store"), run, SAMPLES) == "sample"
    assert rp.link_target(links.ViewState(src="/data/r.json"), run, SAMPLES) == "path"
    assert rp.link_target(links.ViewState(tab="Verdicts"), run, SAMPLES) == "same source"


def test_a_missing_rollout_is_named_with_where_the_link_looked_escaped():
    assert rp.missing_where(links.ViewState(src="sample:run", part="a/r.json")) == "a/r.json"
    assert rp.missing_where(links.ViewState(src="/d/x.json")) == "/d/x.json"
    assert rp.missing_where(links.ViewState()) == "the source shown"
    message = rp.missing_rollout_message("r_1", "[x](y)")
    assert message.startswith("**r\\_1 is not in \\[x\\]\\(y\\).** The link names a rollout")
    assert "so no rollout is shown in its place" in message


def test_the_url_of_the_page_keeps_only_what_holds_for_this_view():
    view = sample_view("clean_multiturn_tools.json")
    chain = view.chains[0].chain_id
    kwargs = dict(selected="call:gone", tab="Loss mask", src="sample:x", part=None, vs_src="/b.json",
                  vs_rollout="r2")
    state = rp.page_view_state(view, view.rollout_id, mask=links.MaskWindow(chain, 0, 64), from_run=False, **kwargs)
    assert (state.rollout, state.call, state.tab, state.vs_src, state.vs_rollout) == (
        view.rollout_id, tv.tree_of(view).default_key, "Loss mask", "/b.json", "r2")
    assert state.mask == links.MaskWindow(chain, 0, 64)
    handed = rp.page_view_state(view, view.rollout_id, mask=links.MaskWindow("gone", 0, 64), from_run=True, **kwargs)
    # Handed over by the Run page: the comparison comes from the request (`versus_link`), never a stale vs_src.
    assert handed.vs_src is None and handed.vs_rollout is None and handed.mask is None
    versus = {"vs_src": "sample:run", "vs_part": "p", "vs_records": None, "vs_rollout": "r3", "side": "B"}
    linked = rp.page_view_state(view, view.rollout_id, mask=None, from_run=True, versus=versus,
                                **{**kwargs, "part": "x"})
    assert (linked.vs_src, linked.vs_part, linked.vs_rollout, linked.side) == ("sample:run", "p", "r3", "B")
    assert links.to_params(linked)["side"] == "B" and links.parse(links.to_params(linked)) == linked.with_(
        call=links.decode_call(links.encode_call(linked.call)))
    no_vs = rp.page_view_state(view, view.rollout_id, mask=None, from_run=False,
                               **{**kwargs, "vs_src": None})
    assert no_vs.vs_rollout is None


def test_the_banner_caption_says_where_the_rollout_is_from_and_what_anchors_it():
    view = sample_view("final_answer_by_content.json")
    final = rp.RolloutView(view.snapshot, final_response=_final_response("final_answer_by_content"))
    banner = vv.banner_of(final)
    caption = rp.banner_caption(final, banner, "my_file.json")
    assert caption.startswith("from my\\_file\\.json")
    assert f"anchored on the harness's final answer, {md_escape(banner.anchor)} (override it under Export)" in caption
    anchored = sample_view("final_retry_unresolved.json", anchor="call-0004")
    assert rp.banner_caption(anchored, vv.banner_of(anchored), "f").endswith(
        "anchored on call\\-0004 (change it under Export)")
    plain = sample_view("clean_multiturn_tools.json")
    assert "anchored" not in rp.banner_caption(plain, vv.banner_of(plain), "f")


def test_the_verdict_lines_mark_culprits_and_show_eight_inline():
    view = sample_view("stale_parent_link.json")
    banner = vv.banner_of(view)
    assert rp.status_markdown(banner).startswith(f"response status **{md_escape(banner.status_line)}**")
    line = banner.lines[0]
    assert rp.reason_markdown(line) == f"**{md_escape(line.code)}** ({md_escape(line.words)})" + (
        ":" if line.culprits else "")
    culprits = [Culprit("r", f"c{i}") for i in range(10)]
    assert rp.split_culprits(culprits) == (culprits[:8], culprits[8:])
    assert rp.split_culprits(culprits[:2]) == (culprits[:2], [])


def test_the_triage_bar_says_whether_the_position_is_in_a_filter():
    assert rp.triage_position("3 of 17", True) == "Rollout **3 of 17** in this filter"
    assert rp.triage_position("3 of 17", False) == "Rollout **3 of 17** in the run"


def test_the_sidebar_names_the_final_responses_in_use():
    finals = load_final_responses(SAMPLES / "final_responses" / "final_answer_by_content.json")
    n = len(finals)
    uploaded = av.FinalResponsesChoice(finals, "up_load.json", "k")
    assert av.choice_caption(uploaded) == (f"Terminal attribution from up\\_load\\.json (uploaded, {n} final "
                                           f"response{'s' if n != 1 else ''}); a manual anchor under Export "
                                           "overrides it.")
    assert "(bundled with this scenario, " in av.choice_caption(av.FinalResponsesChoice(finals, "f", "k", True))
    assert av.choice_caption(av.FinalResponsesChoice()) is None
    assert av.run_records_caption(av.FinalResponsesChoice(finals, "/runs/x/re_cords.jsonl", "k")) == \
        "Built with the run's rollout records: re\\_cords\\.jsonl"


def _final_response(name: str) -> dict:
    finals = load_final_responses(SAMPLES / "final_responses" / f"{name}.json")
    return finals.for_rollout(load_snapshots(SAMPLES / f"{name}.json")[0].rollout_id, single_rollout=True)


def test_the_call_tree_captions_say_its_size_and_how_to_move_around():
    model = tv.tree_of(sample_view("clean_multiturn_tools.json"))
    n = len(model)
    lanes = f"{model.lanes} lane{'s' if model.lanes != 1 else ''}"
    assert tv.tree_caption(model, None) == (f"{n} nodes in {lanes}, one row per node in call order. Click a node "
                                            "to inspect it; hover it for its link, tokens and finish.")
    zoomed = tv.tree_caption(model, (2, 1_500))
    assert zoomed.startswith(f"{n} nodes in {lanes}. Overview (every node, in call order from left to right)")
    assert "click a dot to go there, or drag across calls to zoom into them" in zoomed
    assert zoomed.endswith("Below: calls 2–1,500 in call order (the slider under them picks others); click a node "
                           "to inspect it.")
    assert tv.search_caption("c*1", 0) == "No call id contains “c\\*1”."
    assert tv.search_caption("c1", 1) == "Found “c1”."
    assert tv.search_caption("c1", 3) == "3 matches for “c1”; showing the first (exact, then prefix, then substring)."


def test_the_export_tabs_anchor_picker_names_each_calls_place():
    base = sample_view("final_retry_unresolved.json")
    roles = base.roles
    some = next(cid for cid in base.anchor_options() if cid in roles)
    assert rp.anchor_option_label(base, some) == f"{some} · {roles[some].replace('_', ' ')}"
    assert rp.anchor_option_label(base, None) == av.none_anchor_label(base.result)
    empty = sample_view("empty_generation_parent_recovered.json")
    assert "call-0002" in empty.anchor_options() and "call-0002" not in empty.roles
    assert rp.anchor_option_label(empty, "call-0002") == "call-0002 · empty generation"
    assert rp.anchor_option_label(base, "never-seen") == "never-seen · not chained"


def test_the_export_tab_repeats_the_verdict_and_counts_anchored_rollouts():
    trainable = vv.banner_of(sample_view("clean_multiturn_tools.json"))
    assert rp.export_verdict_markdown(trainable) == f"**{trainable.headline}** · status " \
                                                    f"{md_escape(trainable.status_line)}"
    masked = vv.banner_of(sample_view("stale_parent_link.json"))
    text = rp.export_verdict_markdown(masked)
    assert text.split("\n\n")[1].splitlines() == [f"- **{code}** — {words}" for code, words in masked.reasons]
    views = [sample_view("clean_multiturn_tools.json"), sample_view("final_retry_unresolved.json", anchor="call-0004")]
    assert rp.every_rollout_caption(views) == "2 rollouts, one build result per line; 1 with the anchor chosen here."
    assert rp.every_rollout_caption(views[:1]) == "1 rollout, one build result per line."


def test_a_file_s_rollouts_are_listed_and_opened_in_rollout_id_order_as_the_run_table_lists_them():
    from tokencap.services import rollout_sources as src
    from tokencap.views.rollout import rollout_page as rp

    loaded = [src.load_source(src.source_from_path(REPO / "sample_data" / "multi_rollout_entries.jsonl"))]
    refs = rp.in_table_order(src.rollout_refs(loaded))
    assert [r.rollout_id for r in refs] == ["jsonl-clean", "jsonl-parameter-refusal", "jsonl-refusal-ended"]


def test_a_link_to_a_run_s_rollout_keeps_the_capture_it_compares_with():
    from tokencap.services import rollout_sources as src

    samples = REPO / "sample_data"
    state = links.parse({"src": "sample:run", "part": "p.tokens.*", "rollout": "r", "vs_src": "sample:run_after_fix",
                         "vs_part": "p.tokens.*", "side": "B"})
    request = rp.run_request_of_link(state, samples, 3)
    assert request.vs == OpenRequest(path=str(samples / "run_after_fix"), source="p.tokens.*", rollout_id="r",
                                     final_responses=str(samples / "rollout_records" / "run_after_fix.jsonl"),
                                     side="A", run="A (run_after_fix)")
    assert (request.side, request.run) == ("B", "B (run)")
    plain = rp.run_request_of_link(links.parse({"src": "sample:run", "part": "p", "rollout": "r",
                                                "vs_src": "sample:length_stop.json"}), samples, 4)
    assert plain.vs == OpenRequest(path=str(samples / "length_stop.json"), source="", rollout_id="r")
    # Byte-identical captures stay two sources; run A's is shown on the left.
    one = src.source_from_path(samples / "length_stop.json")
    two = rp.distinct_capture(src.source_from_path(samples / "length_stop.json"), {one.cache_key}, "B (x)")
    assert two.cache_key != one.cache_key and two.key == one.key and two.name == one.name
    assert rp.identical_files_note(one, two) and rp.identical_files_note(one, src.source_from_path(
        samples / "content_filter_stop.json")) is None
    a, b = src.RolloutRef(one.cache_key, 0, "r", "f"), src.RolloutRef(two.cache_key, 0, "r", "f")
    runs = rp.capture_runs(opening("r", side="B", run="B (x)", vs=opening("r", side="A", run="A (y)")),
                           [two.cache_key, one.cache_key])
    assert rp.capture_columns(b, a, runs) and not rp.capture_columns(a, b, runs)
