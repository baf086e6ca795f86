"""The Rollout page: one rollout's call tree, loss mask, verdicts and export.

Run through `app.py` (the navigation entry point). This file is the page's frame (the
placeholders, the rollout shown, the tabs); its parts sit beside it in `tokencap/app/rollout/`:
`sources` (sidebar sources, final responses, loading), `url` (links in and out), `banner`
(title and verdict), `triage` (back to the run, previous / next), the tabs (`tree`, `tabs`,
`export`, with `common`), `prefetch` (the Compare tab's builds, made ahead) and `warm` (this
page's imports, made while the Run page is read; called by `app.py`). They only lay out widgets
and keep session state. Every fact and decision on the page comes from `tokencap.views`
(frames, figures, plain data), which is unit-tested without Streamlit. Text from the
capture is shown with plain-text elements, or escaped (`md_escape`, `md_frame`) where it
must sit in a heading, a message or a Markdown table; nothing renders HTML.

Opening a rollout from another page (the contract)
--------------------------------------------------
The page's view lives in the URL query parameters ``src``, ``rollout``, ``call``, ``tab``,
``anchor`` and ``mask`` (see `tokencap.views.links`); other pages keep their own keys
(the Run page's ``run_*``), which this page never touches. To open rollout R of source S::

    from tokencap.views.links import open_rollout_params
    st.switch_page(ROLLOUT_PAGE, query_params=open_rollout_params(S, R))   # S: a path or "sample:NAME"

optionally with ``call=``, ``tab=`` ("tree", "mask", "verdicts", "export") and
``anchor=``; with ``vs_src=`` / ``vs_rollout=`` the page loads that capture too and opens
the Compare tab on the two. The page applies any query parameters it did not write itself (a first
load, a reload, a shared link, a switch from another page), then keeps them in step
with what it shows. Uploaded files cannot be named in a URL. A URL that names a rollout its
source does not hold says so and shows no rollout (never another one in its place).

Opened from the Run page: an `OpenRequest` in the session (``tokencap/services/requests.py``:
where the rollout's files are, its id, ``seq``, the filters to return with, the rollout records
the run was scanned with, which build it unless final responses are uploaded here, and as ``vs``
another run's capture to compare with) makes that rollout's file the source, below uploads and above the
command-line path; the rollout is selected once per
``seq``, and "Back to the run" returns to the Run page with its filters. Its URL names the run
and the row's source (``src``, ``part``; `rp.run_link`) and the run's rollout records (``records``;
`rp.run_link_records`), so a reload or a shared link opens that very rollout, built as its row was,
wherever the run is reachable (a URL with ``part`` becomes the same request); records that cannot be
read show an error instead of a verdict. (The
one ``st.html`` with a script is a constant that scrolls to the top.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from tokencap.app import assets
from tokencap.app.rollout import export as export_tab
from tokencap.app.rollout import tabs as tabs_part
from tokencap.app.rollout import tree as tree_tab
from tokencap.app.rollout.banner import show_banner
from tokencap.app.rollout.common import sidebar_tokenizer
from tokencap.app.rollout.prefetch import prefetch_compare
from tokencap.app.rollout.sources import (
    Builds,
    default_tokenizer,
    final_responses_choice,
    load_sources,
    run_records,
    run_request,
    sidebar_final_responses,
    sidebar_rollout,
    sidebar_sources,
    versus_sources,
)
from tokencap.app.rollout.triage import show_triage
from tokencap.app.rollout.url import (
    apply_url_state,
    current_view_state,
    loaded_keys,
    open_run_default,
    pin_comparison,
    show_missing_rollout,
    take_url_state,
    write_source_url,
    write_url_state,
)
from tokencap.app.state import Keys
from tokencap.services import rollout_sources as src
from tokencap.views import trace
from tokencap.views.formatting import md_escape
from tokencap.views.model import RolloutView
from tokencap.views.rollout import attribution as av
from tokencap.views.rollout import rollout_page as rp

TABS = list(rp.TABS)

STATE = st.session_state
for _name, _default in ((Keys.UPLOADS, {}), (Keys.SELECTED, {}), (Keys.DETAIL_OF, {}), (Keys.ANCHORS, {}),
                       (Keys.MASK_PAGE, {}), (Keys.LOADED_KEYS, set()), (Keys.MASK_VIEW, {})):
    if _name not in STATE:
        STATE[_name] = _default


def main() -> None:
    st.html(assets.style_tag("rollout_page.css"))
    st.html(assets.script("history.js"), unsafe_allow_javascript=True)  # Back / Forward step through the rollouts seen
    # The whole main area lives in one placeholder, emptied when a big load starts; the
    # progress box has its own, above it (see load_sources).
    progress = st.empty()
    page = st.empty()
    take_url_state()
    open_run_default()  # from the Run page by the sidebar: the run's first row, not an unrelated sample
    sources, source_label, path_error = sidebar_sources()
    taken = {x.cache_key for x in sources}
    sources += [s for s in versus_sources(run_request(), taken) if s.cache_key not in taken]
    # Before loading: every view is built with its final response (this run's, never a module's).
    builds = Builds(final_responses_choice(), run_records())
    loaded = load_sources(sources, builds, page, progress)
    STATE[Keys.DEFAULT_TOKENIZER] = default_tokenizer(sources)
    with page.container():
        show_page(loaded, source_label, path_error, builds)
    sidebar_tokenizer()


def show_page(loaded: list[src.LoadedSource], source_label: str, path_error: str | None, builds: Builds) -> None:
    request = run_request()
    if request is not None:  # opened from the Run page (or a link to a run's rollout) in this session
        # First, so a rollout that fails to load still has its way back and on.
        show_triage(request)
    if STATE.get(Keys.LINK_ERROR):
        st.error(f"**Could not open the link.** {md_escape(STATE[Keys.LINK_ERROR])}", icon=":material/error:")
        return
    if STATE.get(Keys.RUN_RECORDS_ERROR):  # its verdict rests on them: no verdict without them
        st.error(rp.run_records_problem(STATE[Keys.RUN_RECORDS_ERROR]), icon=":material/error:")
        return
    if path_error:
        st.error(f"**Could not open the source.** {md_escape(path_error)}", icon=":material/error:")
    for ls in loaded:
        if not ls.ok:
            st.error(f"**Could not load {md_escape(ls.source.name)}**  \n{md_escape(ls.error)}",
                     icon=":material/error:")
    good = [ls for ls in loaded if ls.ok]
    file_refs = src.rollout_refs(good)  # in file order: the export writes them as tokencap build does
    refs = rp.in_table_order(file_refs)
    builds.finals = av.with_notes(builds.finals, (r.rollout_id for r in refs))
    sidebar_final_responses(builds.finals)
    if not refs:
        write_source_url()  # nothing shown: the URL must not name the sample or rollout shown before
        st.markdown("### tokencap rollout inspector")
        st.info("Open a snapshot `.json`, an entries `.jsonl` or a `.zip` of a capture-store directory in the sidebar.")
        return
    several_sources = len(good) > 1
    by_key = {ls.source.cache_key: ls for ls in good}
    apply_url_state(refs, good)
    if request is not None and STATE.get(Keys.OPEN_ROLLOUT_SELECTED) != request.seq:
        STATE[Keys.OPEN_ROLLOUT_SELECTED] = request.seq
        # Streamlit keeps the scroll position across pages; a rollout opened from far down
        # the run's table would open mid-page, below its verdict. A constant script, no data.
        st.html(assets.script("scroll_to_top.js"), unsafe_allow_javascript=True)
        wanted, other = rp.handed_over_refs(refs, request, STATE.get(Keys.VS_SOURCE_KEY))
        if wanted is not None:
            STATE[Keys.ROLLOUT] = wanted.key
            pin_comparison(wanted, other)
        else:
            STATE[Keys.ROLLOUT_MISSING] = (request.rollout_id, request.source, loaded_keys(good))
    if show_missing_rollout(good):
        return
    ref = sidebar_rollout(refs, by_key, several_sources, builds)
    rk = ref.key
    ls = by_key[ref.source_key]
    view_of = builds.view_of
    base = view_of(ls, ref.index, None)
    anchor = rp.valid_anchor(base, STATE[Keys.ANCHORS].get(rk))
    view = view_of(ls, ref.index, anchor) if anchor is not None else base

    if STATE.get(Keys.TAB) not in TABS:
        STATE[Keys.TAB] = TABS[0]
    # The URL first, before anything is drawn: a click (Back to the run, a tab) after the verdict is
    # on screen must never be followed by this run's URL update, which would land on the next page.
    write_url_state(current_view_state(view, ref, rk))
    with trace.span("rollout banner"):
        show_banner(view, ref, rk)
    show_tabs(TabsContext(base, view, ref, rk, refs, file_refs, by_key, view_of, source_label, builds))


@dataclass
class TabsContext:
    """What the tabs need of the page: the rollout shown (its view under the anchor, and without one)."""
    base: RolloutView
    view: RolloutView
    ref: src.RolloutRef
    rk: str
    refs: list[src.RolloutRef]
    file_refs: list[src.RolloutRef]  # in file order: the export writes them as tokencap build does
    by_key: dict[str, src.LoadedSource]
    view_of: Callable[[src.LoadedSource, int, str | None], RolloutView]
    source_label: str
    builds: Builds


@st.fragment
def show_tabs(c: TabsContext) -> None:
    """The tabs, as a fragment: a tab, a click in the tree, a mask window or a table row reruns this
    alone (not the sources, the sidebar or the banner). Only the open tab's body is computed
    (``st.tabs`` with ``on_change``: the others' ``.open`` is False). A change that moves the whole
    page -- another anchor (the banner's verdict follows it) -- reruns the page."""
    with trace.span("rollout tabs"):
        if rp.valid_anchor(c.base, STATE[Keys.ANCHORS].get(c.rk)) != c.view.anchor:
            st.rerun(scope="app")
        view, rk, ref = c.view, c.rk, c.ref
        tabs = st.tabs(TABS, key=Keys.TAB, on_change="rerun")
        for name, tab in zip(TABS, tabs, strict=True):
            if not tab.open:
                continue
            with tab, trace.span(f"rollout tab {name}"):
                if name == "Call tree":
                    tree_tab.show_tree_tab(view, rk)
                elif name == "Loss mask":
                    tabs_part.show_mask_tab(view, rk)
                elif name == "Verdicts":
                    tabs_part.show_verdicts_tab(view)
                elif name == "Compare":
                    tabs_part.show_compare_tab(c.base, view, rk, ref, c.refs, c.by_key, c.view_of)
                else:
                    ls = c.by_key[ref.source_key]
                    all_views = [c.view_of(c.by_key[r.source_key], r.index, STATE[Keys.ANCHORS].get(r.key))
                                 for r in c.file_refs]
                    label = rp.export_source_label(ref.source_name, c.source_label,
                                                   c.source_label == "uploaded files")
                    several = rp.export_several(c.refs, ref, bool(ls.source.names))
                    export_tab.show_export_tab(c.base, view, rk, ref, label, all_views, several,
                                               c.builds.choice_for(ls).label)
        if STATE.get(Keys.TAB) != "Export":
            STATE.pop(Keys.PREPARED, None)  # a prepared download is only kept while the Export tab shows it
        # The selected call and the loss-mask window, when a click in the tab moved them.
        write_url_state(current_view_state(view, ref, rk))
        if STATE.get(Keys.TAB) != "Compare":  # its builds, made while the reader is here
            ls = c.by_key[ref.source_key]
            prefetch_compare(c.base, view.anchor, rk, lambda a: c.view_of(ls, ref.index, a),
                             STATE.setdefault(Keys.COMPARE_PREFETCHED, set()))


main()
