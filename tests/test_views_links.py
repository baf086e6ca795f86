"""Shareable views: the Rollout page's state as query parameters and back."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokencap.services.requests import OpenRequest
from tokencap.services.rollout_sources import RolloutRef
from tokencap.views import links
from tokencap.views.rollout import rollout_page as rp

ids = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # two cores shared with other work
@given(src=st.one_of(st.none(), ids), rollout=st.one_of(st.none(), ids), call=st.one_of(st.none(), ids),
       kind=st.sampled_from(["call", "refusal", "ghost"]), tab=st.sampled_from([None, *rp.TABS]),
       anchor=st.one_of(st.none(), ids),
       mask=st.one_of(st.none(), st.builds(links.MaskWindow, ids, st.integers(0, 10**7), st.integers(1, 10**5))),
       vs_src=st.one_of(st.none(), ids), vs_rollout=st.one_of(st.none(), ids), part=st.one_of(st.none(), ids))
def test_state_round_trips_through_query_parameters(src, rollout, call, kind, tab, anchor, mask, vs_src, vs_rollout,
                                                    part):
    if kind == "call" and call is not None and call.startswith(("refusal:", "ghost:")):
        call = "x" + call  # such a bare call id is read as that node kind (see decode_call)
    state = links.ViewState(src=src, rollout=rollout, call=f"{kind}:{call}" if call else None, tab=tab,
                            anchor=anchor, mask=mask, vs_src=vs_src, vs_rollout=vs_rollout, part=part)
    params = links.to_params(state)
    assert set(params) <= set(links.KEYS)
    assert links.parse(params) == state


def test_a_call_is_its_bare_id_in_the_url():
    assert links.to_params(links.ViewState(call="call:call-0003")) == {"call": "call-0003"}
    assert links.to_params(links.ViewState(call="refusal:r-end", tab="Loss mask")) == {"call": "refusal:r-end",
                                                                                       "tab": "mask"}
    # With the tree's keys at hand, a call whose id looks like another kind's key is still found.
    assert links.decode_call("ghost:x", {"call:ghost:x": 0}) == "call:ghost:x"
    assert links.decode_call("ghost:x", {"ghost:x": 0}) == "ghost:x"


def test_parse_drops_what_does_not_fit():
    state = links.parse({"tab": "nope", "mask": "main:-1:2048", "rollout": "", "call": ["a", "b"],
                         "src": "x" * 5000, "run_id": "7"})
    assert state == links.ViewState(call="call:b")
    assert links.MaskWindow.decode("branch:0:7:4096:1024") == links.MaskWindow("branch:0:7", 4096, 1024)
    assert links.MaskWindow.decode("main:4096") is None


def test_samples_and_paths():
    state = links.parse({"src": "sample:stale_parent_link.json"})
    assert state.sample == "stale_parent_link.json" and state.path is None
    state = links.parse({"src": "/data/run7/store"})
    assert state.path == "/data/run7/store" and state.sample is None
    assert rp.path_src("relative/dir").endswith("/relative/dir") and rp.path_src("relative/dir").startswith("/")


def test_share_url_and_the_contract_for_other_pages():
    state = links.ViewState(src="sample:a b.json", rollout="r&1", call="call:c?1", tab="Verdicts")
    url = links.share_url("http://localhost:8501/rollout", state)
    assert url == "http://localhost:8501/rollout?src=sample%3Aa+b.json&rollout=r%261&call=c%3F1&tab=verdicts"
    assert links.share_url(None, links.ViewState()) == ""
    params = links.open_rollout_params("/runs/7/store", "task-3", call="call-0004", tab="mask")
    assert params == {"src": "/runs/7/store", "rollout": "task-3", "call": "call-0004", "tab": "mask"}
    assert links.parse(params).tab == "Loss mask"
    assert links.ours({"run_id": "1", "call": "c", "tab": ["tree"]}) == {"call": "c", "tab": "tree"}


def test_a_link_names_a_rollout_by_id():
    refs = [RolloutRef("k1", 0, "a", "f.jsonl"), RolloutRef("k1", 1, "b", "f.jsonl")]
    assert rp.ref_for(refs, "b") is refs[1]
    assert rp.ref_for(refs, "zzz") is None and rp.ref_for(refs, None) is None


def test_a_late_echo_of_the_pages_own_url_is_not_a_request():
    history = links.UrlHistory(limit=3)
    first = {"src": "sample:a.json", "tab": "verdicts"}          # a shared link, applied
    assert history.is_new(first)
    history.remember(first)
    written = {**first, "rollout": "a"}                            # the page then writes the rollout
    history.remember(written)
    # A rerun that left the browser before the written URL arrived carries `first` again.
    assert not history.is_new(first) and not history.is_new(dict(reversed(list(written.items()))))
    assert history.is_new({"src": "sample:b.json"})                # another page's switch, a new link
    for n in range(3):
        history.remember({"call": str(n)})
    assert history.is_new(first)                                   # only the last few are kept


def test_the_whole_query_string_is_written_with_other_pages_keys_kept():
    current = {"run_reason": ["multiple_chains"], "tab": ["tree"], "call": ["c1"], "run_q": ["a", "b"]}
    assert links.with_ours(current, {"tab": "mask", "rollout": "r"}) == {
        "run_reason": ["multiple_chains"], "run_q": ["a", "b"], "tab": ["mask"], "rollout": ["r"]}


def test_a_rollout_of_a_run_is_named_by_the_run_and_its_row_source(tmp_path):
    samples = tmp_path / "sample_data"
    (samples / "run").mkdir(parents=True)
    store = OpenRequest(path=str(samples / "run"), source="a/R.tokens.*", rollout_id="R", seq=3,
                        back_params={"run_q": "R"})
    assert rp.run_link(store, samples) == ("sample:run", "a/R.tokens.*")      # the bundled sample run
    elsewhere = replace(store, path=str(tmp_path / "runs" / ".." / "run7"))
    assert rp.run_link(elsewhere, samples) == (str(tmp_path / "run7"), "a/R.tokens.*")
    assert rp.run_link(replace(store, path=None, name="x.json", data=b"{}"), samples) == (None, None)
    # The link, opened in a new session, stands for the same request (without the Run page's filter).
    state = links.parse(links.to_params(links.ViewState(src="sample:run", part="a/R.tokens.*", rollout="R")))
    request = rp.run_request_of_link(state, samples, seq=9)
    assert request == OpenRequest(path=str(samples / "run"), source="a/R.tokens.*", rollout_id="R", seq=9)
    assert rp.same_run_rollout(store, state, samples) and rp.same_run_rollout(request, state, samples)
    assert not rp.same_run_rollout(replace(store, rollout_id="S"), state, samples)
    assert not rp.same_run_rollout(None, state, samples)
    for name in ("..", "run/..", "nope", ""):
        try:
            rp.run_request_of_link(links.ViewState(src=f"sample:{name}", part="p", rollout="R"), samples, 1)
        except ValueError as exc:
            assert "does not bundle" in str(exc)
        else:
            raise AssertionError(name)


def test_a_link_to_a_run_s_rollout_names_the_records_the_run_was_scanned_with(tmp_path):
    samples = tmp_path / "sample_data"
    (samples / "run").mkdir(parents=True)
    (samples / "rollout_records").mkdir()
    bundled = samples / "rollout_records" / "run.jsonl"
    bundled.write_text("{}\n")
    theirs = tmp_path / "records.jsonl"
    row = OpenRequest(path=None, source="R.tokens.*", rollout_id="R", seq=1)
    # The bundled run with its own records: the link names none, and a new session uses them anyway.
    sample = replace(row, path=str(samples / "run"), final_responses=str(bundled))
    assert rp.run_link_records(sample, samples) is None
    state = links.parse(links.to_params(links.ViewState(src="sample:run", part="R.tokens.*", rollout="R")))
    assert rp.run_request_of_link(state, samples, seq=2).final_responses == str(bundled)
    assert rp.same_run_rollout(sample, state, samples)
    # Any other records: named by absolute path, and a new session builds with them.
    run = replace(row, path=str(tmp_path / "run7"), final_responses=str(theirs))
    assert rp.run_link_records(run, samples) == str(theirs)
    state = links.parse(links.to_params(links.ViewState(src=str(tmp_path / "run7"), part="R.tokens.*", rollout="R",
                                                        records=str(theirs))))
    assert state.records == str(theirs)
    assert rp.run_request_of_link(state, samples, seq=3).final_responses == str(theirs)
    assert rp.same_run_rollout(run, state, samples)
    assert not rp.same_run_rollout(replace(run, final_responses=None), state, samples)  # another build
    assert rp.run_request_of_link(state.with_(records=None), samples, seq=4).final_responses is None
    assert rp.run_link_records(replace(run, final_responses=None), samples) is None
    assert rp.run_link_records(replace(run, path=None, name="x.json", data=b"{}"), samples) is None
    assert "records" not in links.to_params(links.ViewState(src="x.json", rollout="R", records=str(theirs)))


def test_a_link_can_name_a_second_capture_to_compare_with():
    params = links.open_rollout_params("/runs/7", "task-3", vs_src="/runs/8", vs_rollout="task-3-again")
    assert params == {"src": "/runs/7", "rollout": "task-3", "tab": "compare", "vs_src": "/runs/8",
                      "vs_rollout": "task-3-again"}
    state = links.parse(params)
    assert state.tab == "Compare" and state.vs_path == "/runs/8" and state.vs_sample is None
    assert links.parse({"vs_src": "sample:a.json"}).vs_sample == "a.json"
    assert links.open_rollout_params("/runs/7", "r", tab="tree", vs_src="/runs/8")["tab"] == "tree"
    assert "vs_src" not in links.open_rollout_params("/runs/7", "r")
    assert links.ours({"vs_src": "/x", "vs_rollout": "y", "run_vs": "z"}) == {"vs_src": "/x", "vs_rollout": "y"}
    refs = [RolloutRef("k1", 0, "a", "f.jsonl"), RolloutRef("k2", 0, "a", "g.jsonl"), RolloutRef("k2", 1, "b", "g.jsonl")]
    assert rp.other_captures(refs, refs[0]) == [refs[1]]
    assert rp.other_captures(refs, refs[0], also=refs[2].key) == [refs[1], refs[2]]


def test_a_shared_link_keeps_the_run_s_filters_beside_the_page_s_own_keys():
    state = links.ViewState(src="sample:run", part="p", rollout="r")
    url = links.share_url("http://h/rollout?x=1", state, {"run_reason": "multiple_chains", "rollout": "other"})
    assert url == "http://h/rollout?run_reason=multiple_chains&src=sample%3Arun&part=p&rollout=r"
