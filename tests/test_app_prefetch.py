"""The Compare tab's second build is started ahead, once per rollout, in a thread (tokencap/app/rollout/prefetch)."""

from __future__ import annotations

from pathlib import Path

from tokencap.app.rollout.prefetch import prefetch_compare
from tokencap.services import rollout_sources as src
from tokencap.views.model import RolloutView
from tokencap.views.rollout import rollout_page as rp

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "clean_multiturn_tools.json"


def _view() -> RolloutView:
    return RolloutView(src.load_source(src.source_from_path(str(SAMPLE))).snapshots[0])


def test_the_other_anchor_of_the_pair_is_built_in_a_thread_once() -> None:
    base = _view()
    built: list[str | None] = []
    started: set = set()
    thread = prefetch_compare(base, None, "k", built.append, started)
    assert thread is not None
    thread.join(timeout=60)
    # The page shows no anchor: the pair is (none, the delivered chain's second-to-last call); only the latter
    # is not built yet.
    assert built == [rp.default_anchor_pair(base, None)[1]] and built[0] is not None
    assert prefetch_compare(base, None, "k", built.append, started) is None  # once per rollout
    assert built == [rp.default_anchor_pair(base, None)[1]]


def test_nothing_is_started_when_the_page_already_built_the_pair() -> None:
    base = _view()
    built: list[str | None] = []
    # Anchored on a call: the pair is (no anchor, that call): the page's base and its view, both built.
    anchor = rp.default_anchor_pair(base, None)[1]
    assert rp.default_anchor_pair(base, anchor) == (None, anchor)
    assert prefetch_compare(base, anchor, "k", built.append, set()) is None
    assert built == []


def test_a_build_that_fails_in_the_thread_is_left_to_the_tab() -> None:
    def failing(anchor: str | None) -> object:
        raise ValueError("not buildable")

    thread = prefetch_compare(_view(), None, "k", failing, set())
    assert thread is not None
    thread.join(timeout=60)
    assert not thread.is_alive()


def test_the_rollout_page_builds_the_compare_tabs_pair_before_the_tab_is_opened(monkeypatch) -> None:
    """Drawn on its Call tree tab, the page starts the second anchor's build; the Compare tab then builds nothing."""
    import threading

    from helpers_app import ROLLOUT_PAGE, start_app

    from tokencap.views import model

    repo = Path(__file__).resolve().parent.parent
    built: list[str | None] = []
    init = model.RolloutView.__init__

    def counting(self, *args, **kwargs):
        built.append(kwargs.get("anchor"))
        init(self, *args, **kwargs)

    monkeypatch.setattr(model.RolloutView, "__init__", counting)
    # The views are cached per process (Streamlit's resource cache), and another test of this worker may
    # have built this sample's pair already (every sample scenario visits its Compare tab): emptied first,
    # so the builds counted are this test's.
    import streamlit as st

    st.cache_resource.clear()
    path = repo / "sample_data" / "tool_call_rerendered.json"
    at = start_app(monkeypatch, str(path), page=ROLLOUT_PAGE)
    for thread in threading.enumerate():
        if thread.name == "tokencap-prefetch-compare":
            thread.join(timeout=60)
    base = RolloutView(src.load_source(src.source_from_path(str(path))).snapshots[0])
    second = rp.default_anchor_pair(base, None)[1]
    assert second is not None and second in built  # built ahead, on the Call tree tab
    before = len(built)
    at.session_state["tab"] = "Compare"
    at.run()
    assert not at.exception, at.exception
    assert len(built) == before  # the Compare tab built nothing: both of its views were made
    assert any("What changes from A to B" in m.value for m in at.markdown)
