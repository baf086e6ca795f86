"""The Rollout page's URL: the view a link asks for, the view the page shows, and a rollout a link names
that its source does not hold.

A helper of ``tokencap/app/rollout/rollout.py`` (not a page): session state and the query string only. What a
link means, which capture it compares with and what the URL says come from
`tokencap.views.rollout.rollout_page` and `tokencap.views.links`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import streamlit as st

from tokencap.app.rollout.common import pick_call
from tokencap.app.rollout.sources import SAMPLE_DIR, run_request, source_path
from tokencap.app.state import Keys, next_open_seq
from tokencap.services import rollout_sources as src
from tokencap.views import links
from tokencap.views.model import RolloutView
from tokencap.views.rollout import rollout_page as rp
from tokencap.views.run.categories import PARAM_PREFIX

STATE = st.session_state


def take_url_state() -> links.ViewState | None:
    """The view the URL asks for, when it came from outside (a first load, a reload, a shared link,
    another page's `st.switch_page`); None for a URL this page applied or wrote before in this
    session, which a rerun may carry late (`links.UrlHistory`). A sample or a path
    it names is applied at once (before the sidebar's widgets); the rest waits in
    ``url_pending`` until the rollouts are loaded."""
    current = links.ours(st.query_params.to_dict())
    history: links.UrlHistory = STATE.setdefault(Keys.URL_HISTORY, links.UrlHistory())
    if not history.is_new(current):
        return None  # this page's own URL, possibly a late echo of an earlier one: not a request
    history.remember(current)
    state = links.parse(current)
    STATE.pop(Keys.LINK_ERROR, None)
    target = rp.link_target(state, run_request(), SAMPLE_DIR)
    if target == "run rollout":  # exactly that row's files
        STATE.pop(Keys.OPEN_ROLLOUT, None)
        seq = next_open_seq()
        try:
            request = rp.run_request_of_link(state, SAMPLE_DIR, seq)
            # The run's filters the link carries (``run_*``): the triage bar finds the rollout's place in them.
            kept = {k: str(v) for k, v in st.query_params.to_dict().items() if k.startswith(PARAM_PREFIX)}
            STATE[Keys.OPEN_ROLLOUT] = replace(request, back_params=kept)
        except ValueError as exc:
            STATE[Keys.LINK_ERROR] = str(exc)
    elif target == "sample":
        STATE.pop(Keys.OPEN_ROLLOUT, None)  # a link to another source: not the run's rollout any more
        STATE.pop(Keys.SRC_PATH, None)
        STATE[Keys.SCENARIO] = state.sample
    elif target == "path":
        STATE.pop(Keys.OPEN_ROLLOUT, None)
        STATE[Keys.SRC_PATH] = state.path
    STATE[Keys.VS_SRC], STATE[Keys.VS_ROLLOUT] = state.vs_src, state.vs_rollout
    STATE[Keys.URL_PENDING] = state
    return state


def open_run_default() -> None:
    """The Rollout page reached by the sidebar's link from the Run page, with nothing asked for yet in this
    session (no rollout, link, path, upload or sample): open the first row of the run's table, as a click on
    it would, not a bundled sample unrelated to the run. Once: closing it shows the samples."""
    if STATE.get(Keys.RUN_DEFAULT_DONE) or run_request() is not None or Keys.SCENARIO in STATE or source_path() \
            or STATE.get(Keys.UPLOADER) or STATE.get(Keys.ROLLOUT_MISSING) or STATE.get(Keys.LINK_ERROR):
        return
    make = STATE.get(Keys.RUN_DEFAULT_OPEN)
    request = make() if callable(make) else None
    if request is not None:
        STATE[Keys.RUN_DEFAULT_DONE] = True
        STATE[Keys.OPEN_ROLLOUT] = request


def apply_url_state(refs: list[src.RolloutRef], good: list[src.LoadedSource]) -> None:
    """Select the rollout, anchor, call, tab and mask window a URL asked for (once). A rollout the
    loaded sources do not hold is remembered as missing (`show_missing_rollout`), never replaced."""
    state: links.ViewState | None = STATE.pop(Keys.URL_PENDING, None)
    if state is None:
        return
    ref = rp.ref_for(refs, state.rollout)
    if ref is None and state.rollout is not None:
        STATE[Keys.ROLLOUT_MISSING] = (state.rollout, rp.missing_where(state), loaded_keys(good))
        return
    if ref is not None and len(refs) > 1:
        STATE[Keys.ROLLOUT] = ref.key
    rk = (ref or refs[0]).key
    if state.anchor:
        STATE[Keys.ANCHORS][rk] = state.anchor
    if state.call:  # a link names a call: its detail shows
        pick_call(rk, state.call)
    if state.tab:
        STATE[Keys.TAB] = state.tab
    if state.mask is not None:
        STATE[Keys.MASK_URL] = (rk, state.mask)
    if state.vs_src and ref is not None:
        pin_comparison(ref, rp.linked_comparison(refs, ref, state.vs_rollout, STATE.get(Keys.VS_SOURCE_KEY)))


def pin_comparison(ref: src.RolloutRef, other: src.RolloutRef | None) -> None:
    """Open the Compare tab on ``ref`` against ``other`` (the capture a link or the Run page named)."""
    if other is None:
        return
    STATE[Keys.TAB] = "Compare"
    STATE[Keys.ROLLOUT] = ref.key
    STATE[Keys.cmp_mode(ref.key)] = "Two captures of this rollout"
    STATE[Keys.cmp_other(ref.key)] = other.key
    STATE[Keys.cmp_pinned(ref.key)] = other.key


def write_url_state(state: links.ViewState) -> None:
    """Put the page's state in the URL, touching only this page's keys, in one update (the browser
    never holds a half-written URL it could send back with the next rerun)."""
    params = links.to_params(state)
    STATE[Keys.URL_HISTORY].remember(params)
    if links.ours(st.query_params.to_dict()) != params:
        current = {key: st.query_params.get_all(key) for key in st.query_params}
        st.query_params.from_dict(links.with_ours(current, params))


def write_source_url() -> None:
    """The URL of a page that shows no rollout (a file that failed to load, nothing open): its source
    alone -- none for an upload, which no URL can name -- never the rollout shown before it."""
    write_url_state(links.ViewState(src=STATE.get(Keys.SRC_PARAM), part=STATE.get(Keys.PART_PARAM),
                                    records=STATE.get(Keys.RECORDS_PARAM)))


def _versus_link() -> dict[str, Any]:
    """The URL's ``vs_*`` of the run's rollout handed over with another run's capture; {} when none."""
    request = run_request()
    return rp.versus_link(request, SAMPLE_DIR) if request is not None else {}


def current_view_state(view: RolloutView, ref: src.RolloutRef, rk: str) -> links.ViewState:
    """What the page shows now, as the URL says it."""
    return rp.page_view_state(
        view, ref.rollout_id, selected=STATE[Keys.SELECTED].get(rk), tab=STATE.get(Keys.TAB),
        mask=STATE[Keys.MASK_VIEW].get(rk), src=STATE.get(Keys.SRC_PARAM), part=STATE.get(Keys.PART_PARAM),
        vs_src=STATE.get(Keys.VS_SRC), vs_rollout=STATE.get(Keys.VS_ROLLOUT), from_run=run_request() is not None,
        records=STATE.get(Keys.RECORDS_PARAM), versus=_versus_link())


def loaded_keys(good: list[src.LoadedSource]) -> tuple[str, ...]:
    return tuple(ls.source.cache_key for ls in good)


def show_missing_rollout(good: list[src.LoadedSource]) -> bool:
    """Say plainly that the rollout a link (or a run's row) names is not in its source, and show
    nothing else: never another rollout in its place. True while that is what the page shows
    (until another source is opened, or the user asks for this source's rollouts)."""
    missing = STATE.get(Keys.ROLLOUT_MISSING)
    if missing is None:
        return False
    rollout_id, where, keys = missing
    if keys != loaded_keys(good):
        STATE.pop(Keys.ROLLOUT_MISSING, None)
        return False
    st.markdown("### tokencap rollout inspector")
    st.error(rp.missing_rollout_message(rollout_id, where), icon=":material/search_off:")
    st.button("Show the rollouts this source holds", key=Keys.SHOW_OTHER_ROLLOUTS,
              on_click=lambda: STATE.pop(Keys.ROLLOUT_MISSING, None))
    return True
