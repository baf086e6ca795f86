"""The Rollout page: one rollout's call tree, loss mask, verdicts and export.

Run through `app.py` (the navigation entry point). This file only lays out widgets and
keeps session state. Every fact and decision on the page comes from `tokencap.views`
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

Opened from the Run page: ``st.session_state["open_rollout"]`` (a dict: ``path``,
``source``, ``rollout_id``, ``seq``, ``back_params``, and ``name``/``data`` for an
uploaded file; ``final_responses``, the rollout records the run was scanned with, which
build it unless final responses are uploaded here; with ``vs``, a dict of the same shape
naming another run's capture to compare with; the contract is in ``app_pages/run.py``) makes that rollout's file the
source, below uploads and above the command-line path; the rollout is selected once per
``seq``, and "Back to the run" returns to the Run page with its filters. Its URL names the run
and the row's source (``src``, ``part``; `rp.run_link`), so a reload or a shared link opens that
very rollout wherever the run is reachable (a URL with ``part`` becomes the same request). (The
one ``st.html`` with a script is a constant that scrolls to the top.)
"""

from __future__ import annotations

import html
import sys
from pathlib import Path
from typing import Any

import streamlit as st

from tokencap.views import attribution as av
from tokencap.views import detail as dv
from tokencap.views import diff as df
from tokencap.views import export as ev
from tokencap.views import linkproof as lp
from tokencap.views import links
from tokencap.views import mask as mv
from tokencap.views import rollout_page as rp
from tokencap.views.run import data as rd
from tokencap.views.run import source as rs
from tokencap.views.run import triage as tr
from tokencap.views import sources as src
from tokencap.views import style
from tokencap.views import tree as tv
from tokencap.views import verdicts as vv
from tokencap.views.model import RolloutView
from tokencap.views.text import fmt_bytes, fmt_int, md_escape, md_frame
from tokencap.views.words import TERMS

APP_DIR = Path(__file__).resolve().parent.parent
SAMPLE_DIR = APP_DIR / "sample_data"
RUN_PAGE = "app_pages/run.py"
SCROLL_TO_TOP = "<script>document.querySelector('[data-testid=\"stMain\"]')?.scrollTo(0, 0);</script>"
TABS = list(rp.TABS)
PLOTLY_CONFIG = {"displaylogo": False, "scrollZoom": True,
                 "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"]}

STATE = st.session_state
RUN: dict[str, Any] = {"export_dir_shown": False}  # facts about this run only (the script re-runs from the top)
for _name, _default in (("uploads", {}), ("selected", {}), ("anchors", {}), ("mask_page", {}), ("loaded_keys", set()),
                       ("mask_view", {})):
    if _name not in STATE:
        STATE[_name] = _default


# --------------------------------------------------------------------------- cached work


@st.cache_resource(show_spinner=False, max_entries=8)
def path_source(path: str, signature: Any) -> src.Source:
    """A command-line path, hashed once per (path, names/sizes/mtimes)."""
    del signature
    return src.source_from_path(path)


@st.cache_resource(show_spinner=False, max_entries=24)
def loaded_source(key: str, _source: src.Source) -> src.LoadedSource:
    return src.load_source(_source)


@st.cache_resource(show_spinner=False, max_entries=512)
def rollout_view(key: str, index: int, anchor: str | None, _loaded: src.LoadedSource,
                 finals_key: str | None = None, _final: dict | None = None) -> RolloutView:
    """One rollout built once per (source content, rollout, anchor, final responses); derived views live on it."""
    return RolloutView(_loaded.snapshots[index], anchor=anchor, final_response=_final)


@st.cache_resource(show_spinner=False, max_entries=8)
def parsed_final_responses(key: str, name: str, _data: bytes) -> tuple[Any, str | None]:
    return av.read_final_responses(name, _data)


# The harness final responses in use for this run of the page (set first thing in main).
_FINALS = av.FinalResponsesChoice()
# Per source (cache key): the rollout records a run was scanned with, for rollouts the Run page
# hands over (without an upload here, they build with them, so a verdict is its row's).
_RUN_FINALS: dict[str, av.FinalResponsesChoice] = {}


def view_of(ls: src.LoadedSource, index: int, anchor: str | None) -> RolloutView:
    """The cached view of one rollout, built with its harness final response when one applies
    (matched by rollout id; an unnamed response only when the file holds a single rollout)."""
    choice = _RUN_FINALS.get(ls.source.cache_key, _FINALS)
    final, finals_key = choice.response_for(ls.snapshots[index].rollout_id, len(ls.snapshots))
    return rollout_view(ls.source.cache_key, index, anchor, ls, finals_key, final)


def cli_argument() -> str | None:
    return rs.app_arguments(sys.argv[1:]).path  # the path; --final-responses is the Run page's


def source_path() -> str | None:
    """The path to open: one a link named (``src``), else the command line's."""
    return STATE.get("src_path") or cli_argument()


# --------------------------------------------------------------------------- the URL


def take_url_state() -> links.ViewState | None:
    """The view the URL asks for, when it came from outside (a first load, a reload, a shared link,
    another page's `st.switch_page`); None for a URL this page applied or wrote before in this
    session, which a rerun may carry late (`links.UrlHistory`). A sample or a path
    it names is applied at once (before the sidebar's widgets); the rest waits in
    ``url_pending`` until the rollouts are loaded."""
    current = links.ours(st.query_params.to_dict())
    history: links.UrlHistory = STATE.setdefault("url_history", links.UrlHistory())
    if not history.is_new(current):
        return None  # this page's own URL, possibly a late echo of an earlier one: not a request
    history.remember(current)
    state = links.parse(current)
    STATE.pop("link_error", None)
    if state.part is not None and state.src is not None:
        # A rollout of a run (opened from the Run page, reloaded or shared): exactly that row's files.
        if not rp.same_run_rollout(run_request(), state, SAMPLE_DIR):
            STATE.pop("open_rollout", None)
            STATE["open_rollout_seq"] = seq = STATE.get("open_rollout_seq", 0) + 1
            try:
                STATE["open_rollout"] = rp.run_request_of_link(state, SAMPLE_DIR, seq)
            except ValueError as exc:
                STATE["link_error"] = str(exc)
    elif state.sample is not None:
        STATE.pop("open_rollout", None)  # a link to another source: not the run's rollout any more
        STATE.pop("src_path", None)
        STATE["scenario"] = state.sample
    elif state.path is not None:
        STATE.pop("open_rollout", None)
        STATE["src_path"] = state.path
    STATE["vs_src"], STATE["vs_rollout"] = state.vs_src, state.vs_rollout
    STATE["url_pending"] = state
    return state


def apply_url_state(refs: list[src.RolloutRef], good: list[src.LoadedSource]) -> None:
    """Select the rollout, anchor, call, tab and mask window a URL asked for (once). A rollout the
    loaded sources do not hold is remembered as missing (`show_missing_rollout`), never replaced."""
    state: links.ViewState | None = STATE.pop("url_pending", None)
    if state is None:
        return
    ref = rp.ref_for(refs, state.rollout)
    if ref is None and state.rollout is not None:
        where = state.part or state.src or "the source shown"
        STATE["rollout_missing"] = (state.rollout, where, loaded_keys(good))
        return
    if ref is not None and len(refs) > 1:
        STATE["rollout"] = ref.key
    rk = (ref or refs[0]).key
    if state.anchor:
        STATE["anchors"][rk] = state.anchor
    if state.call:
        STATE["selected"][rk] = state.call
    if state.tab:
        STATE["tab"] = state.tab
    if state.mask is not None:
        STATE["mask_url"] = (rk, state.mask)
    if state.vs_src and ref is not None:
        vs_key = STATE.get("vs_source_key")
        wanted = state.vs_rollout or ref.rollout_id
        pin_comparison(refs, ref, next((r for r in refs if r.source_key == vs_key and r.rollout_id == wanted
                                        and r.key != ref.key), None))


def pin_comparison(refs: list[src.RolloutRef], ref: src.RolloutRef, other: src.RolloutRef | None) -> None:
    """Open the Compare tab on ``ref`` against ``other`` (the capture a link or the Run page named)."""
    if other is None:
        return
    STATE["tab"] = "Compare"
    STATE["rollout"] = ref.key
    STATE[f"cmp_mode:{ref.key}"] = "Two captures of this rollout"
    STATE[f"cmp_other:{ref.key}"] = other.key
    STATE[f"cmp_pinned:{ref.key}"] = other.key


def versus_sources(request: dict[str, Any] | None) -> list[src.Source]:
    """The capture to compare with: the Run page's ``open_rollout["vs"]``, or the URL's ``vs_src``."""
    STATE["vs_source_key"] = None
    vs = request.get("vs") if request is not None else None
    if isinstance(vs, dict):
        try:
            source = source_once(vs, request.get("seq"), "open_rollout_vs_source")
        except (OSError, ValueError) as exc:
            st.sidebar.warning(f"Cannot open the capture to compare with: {md_escape(str(exc))}")
            return []
        st.sidebar.caption(f"Compared with {md_escape(vs.get('rollout_id'))} ({md_escape(vs.get('source'))})")
    elif request is None and STATE.get("vs_src"):
        named = links.ViewState(vs_src=STATE["vs_src"])
        scenario = next((s for s in src.sample_scenarios(SAMPLE_DIR) if s.name == named.vs_sample), None)
        path = str(scenario.path) if scenario is not None else named.vs_path
        if not path:
            return []
        try:
            source = path_source(path, src.path_signature(path))
        except (OSError, ValueError) as exc:
            st.sidebar.warning(f"Cannot open {md_escape(path)} to compare with: {md_escape(str(exc))}")
            return []
        st.sidebar.caption(f"Compared with {md_escape(path)}")
    else:
        return []
    STATE["vs_source_key"] = source.cache_key
    return [source]


def write_url_state(state: links.ViewState) -> None:
    """Put the page's state in the URL, touching only this page's keys, in one update (the browser
    never holds a half-written URL it could send back with the next rerun)."""
    params = links.to_params(state)
    STATE["url_history"].remember(params)
    if links.ours(st.query_params.to_dict()) != params:
        current = {key: st.query_params.get_all(key) for key in st.query_params}
        st.query_params.from_dict(links.with_ours(current, params))


def load_sources(sources: list[src.Source], page: Any, progress: Any) -> list[src.LoadedSource]:
    """Load (cached) every source, building each rollout once.

    For big new inputs the ``page`` placeholder is emptied first, so the previous rollout's
    verdict is gone the moment loading starts and can never be read as the new file's, and
    a progress box shows in the ``progress`` placeholder above it until the load is done.
    (Two placeholders, not one: replacing a block with another block at the same place in
    one run lets Streamlit's message queue merge their children's updates out of order.)
    """
    seen: set[str] = STATE["loaded_keys"]
    pending = [s for s in sources if s.cache_key not in seen]
    if not rp.needs_progress([s.size for s in pending]):
        out = [loaded_source(s.cache_key, s) for s in sources]
        for ls in out:
            for i in range(len(ls.snapshots)):
                view_of(ls, i, None)
        seen.update(s.cache_key for s in sources)
        return out
    by_key: dict[str, src.LoadedSource] = {}
    size = sum(s.size for s in pending)
    page.empty()
    with progress.status(rp.loading_label(len(pending), size), expanded=True) as status:
        bar = st.progress(0.0, text="reading")
        for n, s in enumerate(pending):
            bar.progress(n / len(pending), text=f"parsing {md_escape(s.name)} ({fmt_bytes(s.size)})")
            ls = loaded_source(s.cache_key, s)
            by_key[s.cache_key] = ls
            for i in range(len(ls.snapshots)):
                bar.progress((n + (i + 1) / (len(ls.snapshots) + 1)) / len(pending),
                             text=f"building rollout {i + 1} of {len(ls.snapshots)} in {md_escape(s.name)}")
                view_of(ls, i, None)
        bar.progress(1.0, text="done")
        status.update(label=f"Loaded {fmt_bytes(size)}", state="complete", expanded=False)
    progress.empty()
    seen.update(s.cache_key for s in sources)
    return [by_key.get(s.cache_key) or loaded_source(s.cache_key, s) for s in sources]


# --------------------------------------------------------------------------- sidebar: sources and rollout


def run_request() -> dict[str, Any] | None:
    """The Run page's request to open a rollout (see the module docstring), if any."""
    request = STATE.get("open_rollout")
    return request if isinstance(request, dict) and request.get("rollout_id") is not None else None


def _close_run_rollout() -> None:
    STATE.pop("open_rollout", None)


def source_once(request: dict[str, Any], seq: Any, memo: str) -> src.Source:
    """The source of a rollout handed over by the Run page, built once per opening (``seq``)."""
    kept = STATE.get(memo)
    if kept is not None and kept[0] == seq:
        return kept[1]
    source = rs.source_for_run_rollout(request)
    STATE[memo] = (seq, source)
    return source


def opened_from_run(request: dict[str, Any]) -> tuple[list[src.Source], str, str | None]:
    """The source of a rollout opened from the Run page, built once per opening (``seq``)."""
    st.sidebar.markdown("**Opened from the run**")
    st.sidebar.code(str(request.get("source")), language=None, wrap_lines=True)
    st.sidebar.button("Close it", icon=":material/close:", on_click=_close_run_rollout, key="close_run_rollout",
                      help="Back to the samples (or the command-line file) on this page.")
    try:
        source = source_once(request, request.get("seq"), "open_rollout_source")
    except (OSError, ValueError) as exc:
        return [], str(request.get("source")), str(exc)
    label = source.path or source.name  # a store rollout's directory, a file, or an upload's name
    return [source], label, None


def sidebar_sources() -> tuple[list[src.Source], str, str | None]:
    """The sources to show, a label of where they came from, and an error about the CLI path."""
    st.sidebar.title(":material/account_tree: tokencap")
    st.sidebar.caption("Rollout inspector: how captured model calls became (or did not become) a training sample.")
    uploads = st.sidebar.file_uploader(
        "Open files", type=list(src.UPLOAD_TYPES), accept_multiple_files=True, key="uploader",
        help="Snapshot `.json`, entries `.jsonl`, or a `.zip` of a capture-store directory. Several at once are fine.")
    st.sidebar.file_uploader(
        "Harness final responses (optional)", type=list(av.FINAL_RESPONSE_TYPES), key="final_responses_uploader",
        help="The Responses object the harness returned per rollout: a rollout record `{rollout_id, response}`, JSON "
             "lines of them, or a bare Responses object. Each rollout it names is anchored on the call its final "
             "answer came from (terminal attribution).")
    STATE["bundled_final_responses"] = None
    uploaded = src.sources_from_uploads(uploads, STATE["uploads"])
    # What follows the uploader depends on the source; one placeholder holds it, so switching
    # from a sample to an upload replaces the sample's description at once (not after loading).
    below = st.sidebar.empty()
    if uploaded:
        below.caption(f"Showing {len(uploaded)} uploaded file{'s' if len(uploaded) > 1 else ''}. "
                      "Remove them to go back.")
        STATE["src_param"] = STATE["part_param"] = None  # an upload cannot be named in a URL
        return uploaded, "uploaded files", None
    with below.container():
        return _sidebar_path_or_sample()


def _sidebar_path_or_sample() -> tuple[list[src.Source], str, str | None]:
    """A rollout opened from the Run page, the command-line path or the bundled samples
    (written into the sidebar container in use)."""
    request = run_request()
    if request is not None:
        # The run and the row's source, so a reload or a shared link opens this very rollout (not an upload's).
        STATE["src_param"], STATE["part_param"] = rp.run_link(request, SAMPLE_DIR)
        return opened_from_run(request)
    path = source_path()
    STATE["src_param"] = STATE["part_param"] = None
    if path is not None and path.lower().endswith(".parquet"):
        path = None  # a run's scan table: the Run page reads it, there is no rollout in it
    if path is not None and not src.is_same_directory(path, SAMPLE_DIR):
        STATE["src_param"] = rp.path_src(path)
        st.markdown("**Source**")
        st.code(path, language=None, wrap_lines=True)
        if STATE.get("src_path"):
            st.button("Close (back to the default source)", key="close_src", type="tertiary",
                      on_click=lambda: STATE.pop("src_path", None))
        try:
            source = path_source(path, src.path_signature(path))
        except (OSError, ValueError) as exc:
            strerror = exc.strerror if isinstance(exc, OSError) else None
            return [], path, f"{path}: {strerror}" if strerror else str(exc)
        return [source], path, None

    scenarios = src.sample_scenarios(SAMPLE_DIR)
    if not scenarios:
        st.info("No bundled samples here. Upload a file above.")
        return [], "samples", None
    names = [s.name for s in scenarios]
    by_name = {s.name: s for s in scenarios}
    if "scenario" not in STATE or STATE["scenario"] not in by_name:
        STATE["scenario"] = names[src.default_scenario_index(scenarios)]
    st.selectbox("Sample scenario", names, key="scenario", format_func=lambda n: by_name[n].label,
                         help="Small synthetic captures, one per situation you meet in real data.")
    scenario = by_name[STATE["scenario"]]
    STATE["src_param"] = links.sample_src(scenario.name)
    if scenario.situation:
        st.caption(scenario.situation)
    if scenario.expectation:
        st.caption(f"Expected: {scenario.expectation}")
    STATE["bundled_final_responses"] = str(scenario.final_responses) if scenario.final_responses else None
    try:
        source = path_source(str(scenario.path), src.path_signature(scenario.path))
    except OSError as exc:
        return [], scenario.name, str(exc)
    return [source], f"sample_data/{scenario.name}", None


def sidebar_rollout(refs: list[src.RolloutRef], loaded: dict[str, src.LoadedSource],
                    several_sources: bool) -> src.RolloutRef:
    by_key = {r.key: r for r in refs}
    if len(refs) == 1:
        return refs[0]
    if STATE.get("rollout") not in by_key:
        STATE["rollout"] = refs[0].key

    def label(key: str) -> str:
        ref = by_key[key]
        view = view_of(loaded[ref.source_key], ref.index, None)
        where = f"  ({ref.source_name})" if several_sources else ""
        return f"{vv.verdict_label(view.result)} · {ref.rollout_id}{where}"

    st.sidebar.selectbox(f"Rollout ({len(refs)} loaded)", list(by_key), key="rollout", format_func=label,
                         help="Each rollout's verdict is shown next to its id.")
    return by_key[STATE["rollout"]]


# --------------------------------------------------------------------------- verdict banner


CULPRITS_INLINE = 3  # culprits shown per reason before "+N more"


def _open_culprit(rk: str, key: str) -> None:
    """A culprit link: select its node and show it on the call tree."""
    STATE["selected"][rk] = key
    STATE["scroll_detail"] = True
    STATE["tab"] = "Call tree"


def _culprit_button(rk: str, culprit: Any, widget_key: str) -> None:
    if culprit.key is None:
        st.markdown(md_escape(culprit.text), width="content")
    else:
        st.button(md_escape(culprit.text), key=widget_key, type="tertiary", on_click=_open_culprit,
                  args=(rk, culprit.key), help="Select this call in the call tree")


def show_copy_link(view: RolloutView, ref: src.RolloutRef, rk: str) -> None:
    with st.popover("Copy link", icon=":material/link:", key="share", width="stretch"):
        url = links.share_url(st.context.url, current_view_state(view, ref, rk))
        st.caption("This view (source, rollout, call, tab, anchor, mask window). Copy it with the icon:")
        st.code(url, language=None, wrap_lines=True)
        if STATE.get("src_param") is None:
            st.warning("Uploaded files can't be in a URL: the link opens the same rollout, call and tab only "
                       "where the same file is uploaded again. Open the file by path (`tokencap app PATH`) to "
                       "share it.", icon=":material/info:")


def show_banner(view: RolloutView, ref: src.RolloutRef, rk: str) -> None:
    banner = vv.banner_of(view)
    snap = view.snapshot
    title, share = st.columns([5, 1], vertical_alignment="bottom")
    title.markdown(f"### {md_escape(view.rollout_id)}")
    with share:
        show_copy_link(view, ref, rk)
    bits = [f"from {md_escape(ref.source_name)}"]
    if snap.snapshot_id:
        bits.append(f"snapshot {md_escape(snap.snapshot_id)}")
    if snap.version:
        bits.append(f"version {snap.version}")
    if banner.anchor is not None and view.anchor is None:
        bits.append(f"anchored on the harness's final answer, {md_escape(banner.anchor)} (override it under Export)")
    elif banner.anchor is not None:
        bits.append(f"anchored on {md_escape(banner.anchor)} (change it under Export)")
    st.caption(" · ".join(bits))

    status = f"response status **{md_escape(banner.status_line)}**" + (
        f" — {md_escape(banner.status_text)}" if banner.status_text else "")
    if banner.trainable:
        with st.container(key="verdict_ok", border=True):
            st.markdown(f":material/check_circle: **{banner.headline}** · {status}")
    else:
        with st.container(key="verdict_masked", border=True):
            st.markdown(f":material/block: **{banner.headline}** · {status}")
            for i, line in enumerate(banner.lines):
                with st.container(horizontal=True, gap="small", vertical_alignment="center",
                                  key=f"culprits_{i}"):
                    st.markdown(f"**{md_escape(line.code)}** ({md_escape(line.words)})" +
                                (":" if line.culprits else ""), width="content", help=line.explanation or None)
                    for j, culprit in enumerate(line.culprits[:CULPRITS_INLINE]):
                        _culprit_button(rk, culprit, f"culprit:{rk}:{i}:{j}")
                    rest = line.culprits[CULPRITS_INLINE:]
                    if rest:
                        with st.popover(f"+{len(rest)} more", type="tertiary", key=f"more:{rk}:{i}"):
                            for j, culprit in enumerate(rest, start=CULPRITS_INLINE):
                                _culprit_button(rk, culprit, f"culprit:{rk}:{i}:{j}")
    if banner.error:
        st.error(f"**Error:** {md_escape(banner.error)}", icon=":material/error:")
    show_tiles([(m.label, m.value, m.help, m.alert) for m in banner.metrics], "tiles")
    if snap.source_notes:
        with st.expander(f"Loader notes ({len(snap.source_notes)})", icon=":material/notes:"):
            for note in snap.source_notes:
                st.text(note)


# --------------------------------------------------------------------------- call tree tab


def _select(rk: str, key: str) -> None:
    """Select a node (from any control): the detail follows and is scrolled into view."""
    STATE["selected"][rk] = key
    STATE["scroll_detail"] = True


def _remember_tree_click(chart_key: str, rk: str) -> None:
    state = STATE.get(chart_key)
    selection = state.get("selection") if state is not None else None
    key = tv.key_from_selection(selection)
    if key is not None:
        _select(rk, key)


def _remember_overview(chart_key: str, rk: str, window_key: str, model: tv.TreeModel) -> None:
    """The overview: a box chooses the depths to zoom into; a click goes to that node."""
    state = STATE.get(chart_key)
    selection = state.get("selection") if state is not None else None
    if selection is None:
        return
    window = tv.window_from_selection(model, selection)
    if window is not None:
        STATE[window_key] = window
        return
    key = tv.key_from_selection(selection)
    if key is not None:
        _select(rk, key)
        STATE[window_key] = tv.window_around(model, key, tv.DETAIL_SPAN)


def _remember_row(table_key: str, rk: str, frame: Any) -> None:
    state = STATE.get(table_key)
    rows = state.get("selection", {}).get("rows", []) if state is not None else []
    if rows:
        _select(rk, frame["key"].iloc[rows[0]])


def _remember_pick(pick_key: str, rk: str) -> None:
    value = STATE.get(pick_key)
    if value:
        _select(rk, value)


def _find(find_key: str, rk: str, model: tv.TreeModel) -> None:
    matches = tv.search(model, STATE.get(find_key) or "")
    STATE["find_matches"] = (STATE.get(find_key) or "", len(matches))
    if matches:
        _select(rk, matches[0])


def show_tree_tab(view: RolloutView, rk: str) -> None:
    model = tv.tree_of(view)
    if not len(model):
        st.info("No calls to show.")
        return
    selected = rp.selected_node(view, STATE["selected"].get(rk))
    STATE["selected"][rk] = selected
    chart_key = f"tree:{rk}:{view.anchor}"
    lanes = f"{model.lanes} lane{'s' if model.lanes != 1 else ''}"
    window = None
    if tv.needs_overview(model):
        # A long rollout: an overview of every node, and a zoomed detail of the depths in the
        # window, which stays put across reruns and moves only to keep the selection in view.
        window_key = f"tree_window:{rk}:{view.anchor}"
        followed_key = f"tree_window_for:{rk}:{view.anchor}"
        window = tv.follow_selection(model, selected, STATE.get(window_key), STATE.get(followed_key))
        STATE[window_key], STATE[followed_key] = window, selected
        overview_key = f"tree_overview:{rk}:{view.anchor}"
        st.caption(f"{fmt_int(len(model))} nodes in {lanes}, depths 0–{fmt_int(model.max_depth)}. Overview (all "
                   "nodes): click a dot to go there, or take the box tool (top right) and drag across depths to "
                   f"zoom into them. Below: depths {window[0]:,}–{window[1]:,}; click a node to inspect it.")
        st.plotly_chart(tv.overview_figure(model, window, selected), key=overview_key,
                        on_select=lambda: _remember_overview(overview_key, rk, window_key, model),
                        selection_mode=("points", "box"), config=tv.OVERVIEW_CONFIG, width="stretch")
    else:
        st.caption(f"{fmt_int(len(model))} nodes in {lanes}. Click a node to inspect it; drag to zoom, "
                   "double-click to reset.")
    st.plotly_chart(model.figure(selected, window=window, legend=window is None), key=chart_key,
                    on_select=lambda: _remember_tree_click(chart_key, rk), selection_mode="points",
                    config=PLOTLY_CONFIG, width="stretch")
    if window is not None:
        slider_key = f"tree_window_w:{rk}:{view.anchor}"
        STATE[slider_key] = window
        st.slider("Depths shown in the zoomed view", 0, model.max_depth, key=slider_key,
                  on_change=lambda: STATE.__setitem__(window_key, tuple(STATE[slider_key])))

    find_col, pick_col = st.columns([1, 2], vertical_alignment="bottom")
    with find_col:
        find_key = f"find:{rk}"
        st.text_input("Find a call by id", key=find_key, on_change=_find, args=(find_key, rk, model),
                      placeholder="id or part of it", icon=":material/search:")
    with pick_col:
        pick_key = f"pick:{rk}"
        if STATE.get(pick_key) != selected:
            STATE[pick_key] = selected
        st.selectbox("Selected call", model.keys(), key=pick_key, format_func=model.label,
                     on_change=_remember_pick, args=(pick_key, rk))
    found = STATE.get("find_matches")
    if found and found[0] == STATE.get(find_key):
        query, count = found
        st.caption(f"No call id contains “{md_escape(query)}”." if not count else
                   f"{count} match{'es' if count != 1 else ''} for “{md_escape(query)}”; showing the first "
                   "(exact, then prefix, then substring)." if count > 1 else f"Found “{md_escape(query)}”.")
    with st.expander("What the marks mean"):
        legend = tv.legend_frame()
        st.dataframe(legend.style.apply(
            lambda col: [f"background-color: {c}; color: {c}" for c in col] if col.name == "colour" else
            [""] * len(col)), hide_index=True, width="stretch",
            column_config={"colour": st.column_config.TextColumn(width="small")})
    table_key = f"calls_table:{rk}:{view.anchor}"
    with st.expander(f"All {fmt_int(len(model))} nodes as a table (select a row to inspect it)"):
        frame = tv.nodes_frame(model, view)
        st.dataframe(frame, hide_index=True, width="stretch", height=min(38 + 35 * len(frame), 420),
                     column_order=[c for c in frame.columns if c != "key"], key=table_key, on_select=lambda:
                     _remember_row(table_key, rk, frame), selection_mode="single-row")
    with st.container(key="detail"):
        show_detail(view, selected)
    if STATE.pop("scroll_detail", False):
        scroll_to_detail()


def scroll_to_detail() -> None:
    """Bring the selected call's detail into view, unless its heading is already well on screen."""
    STATE["scroll_nonce"] = STATE.get("scroll_nonce", 0) + 1
    st.html(f"""<script>/* {STATE["scroll_nonce"]} */
      (function () {{
        const el = document.querySelector('.st-key-detail');
        if (!el) return;
        const top = el.getBoundingClientRect().top;
        if (top > window.innerHeight * 0.6 || top < 0) el.scrollIntoView({{block: 'start'}});
      }})();</script>""", unsafe_allow_javascript=True)


def _outcome(text: str, ok: bool | None, warn: bool = False) -> None:
    body = md_escape(text)
    if warn:
        st.warning(body, icon=":material/warning:")
    elif ok is True:
        st.success(body, icon=":material/check:")
    elif ok is False:
        st.error(body, icon=":material/close:")
    elif text:
        st.info(body)


def show_table(frame: Any) -> None:
    """A small table that wraps instead of clipping (capture strings escaped: st.table renders Markdown)."""
    st.table(md_frame(frame), hide_index=True, border="horizontal")


def show_link(view: RolloutView, d: Any) -> None:
    st.markdown("**Parent link**")
    _outcome(d.link_outcome, d.link_ok)
    proof = lp.link_proof(view, d.ident)
    if proof is not None:
        st.caption(md_escape(proof.summary()))
        tokenizer, _ = sidebar_tokenizer_state()
        decode = mv.token_decoder(tokenizer) if tokenizer is not None else None
        st.plotly_chart(lp.proof_figure(proof, decode), config=PLOTLY_CONFIG, width="stretch",
                        key=f"proof:{d.key}")
        if decode is None:
            st.caption("Cells show token ids; load a tokenizer.json in the sidebar to see their text.")
    if d.link_checks is not None:
        show_table(dv.short_digests(d.link_checks))
        digests = dv.digest_lines(d.link_checks)
        if digests:
            st.caption("The digests in full: the parent's cumulative sequence (expected) and the same number of "
                       "tokens at the start of this call's prompt (found).")
            st.code(digests, language=None, wrap_lines=True)


def show_detail(view: RolloutView, key: str) -> None:
    d = dv.call_detail(view, key)
    st.markdown(f"#### {md_escape(d.ident)} — {d.headline}")
    for fact in d.facts:
        st.caption(md_escape(fact))
    if d.kind == tv.REFUSAL:
        st.markdown("**Does it end the delivered chain?**")
        _outcome(d.link_outcome, None, warn=bool(d.link_ok))
        if d.conditions is not None:
            show_table(d.conditions)
    elif d.link_outcome or d.link_checks is not None:
        show_link(view, d)
    side = d.group is not None or bool(d.twins)
    left, right = st.columns([1, 1], gap="large") if side else (st.container(), st.container())
    with left:
        if d.fields is not None:
            st.markdown("**Fields**")
            show_table(d.fields)
    with right:
        if d.group is not None:
            st.markdown("**Retry group** (same linked parent, same full prompt)")
            st.caption(md_escape(d.group_text))
            show_table(d.group)
        if d.twins:
            st.markdown(f"**Token-identical twins** ({TERMS['twin']})")
            st.text(", ".join(d.twins))
    if d.items:
        st.markdown(f"**Output items** ({len(d.items)})")
        for part in d.items:
            tag = " · carries the tokens" if part.carries_tokens else ""
            st.caption(md_escape(part.title + tag))
            if part.kind == "text":
                st.code(part.body, language=None, wrap_lines=True)
            else:
                st.json(part.body, expanded=2)


# --------------------------------------------------------------------------- loss mask tab


def sidebar_tokenizer() -> None:
    """The optional tokenizer (decodes the loss-mask window and the link-proof cells)."""
    st.sidebar.file_uploader("Tokenizer (optional): tokenizer.json", type=["json"], key="tokenizer",
                             help="A Hugging Face `tokenizers` file; token ids are then shown as text in the loss "
                                  "mask window and the parent-link proof.")


def sidebar_tokenizer_state() -> tuple[Any | None, str | None]:
    """(tokenizer, problem) from the sidebar's upload: (None, None) when there is none."""
    upload = STATE.get("tokenizer")
    if upload is None:
        return None, None
    return cached_tokenizer(src.content_key(upload.getvalue()), upload.getvalue())


@st.cache_resource(show_spinner=False, max_entries=4)
def cached_tokenizer(key: str, _data: bytes) -> tuple[Any | None, str | None]:
    return mv.load_tokenizer(_data)


def show_tiles(tiles: list[tuple[str, str, str, bool]], key: str) -> None:
    """Numbers as one line of small tiles that size to their content (a number is never cut)."""
    with st.container(horizontal=True, gap="small", key=key):
        for label, value, help_text, alert in tiles:
            shown = f":red[**{md_escape(value)}**]" if alert else f"**{md_escape(value)}**"
            st.markdown(f"{md_escape(label)} {shown}", help=help_text or None, width="content")


def show_mask_tab(view: RolloutView, rk: str) -> None:
    chains = view.chains
    if not chains:
        st.info("No chain was built, so there is no loss mask.")
        return
    ids = [c.chain_id for c in chains]
    labels = {c.chain_id: mv.chain_label(c) for c in chains}
    chain_key = f"mask_chain:{rk}:{view.anchor}"
    asked = STATE.pop("mask_url", None)
    if asked is not None and asked[0] == rk and asked[1].chain in ids:
        STATE[chain_key] = asked[1].chain
    if STATE.get(chain_key) not in ids:
        STATE[chain_key] = ids[0]
    chain_id = STATE[chain_key]
    chain = view.chain(chain_id)
    mask = view.mask(chain_id)
    assert chain is not None and mask is not None
    page_state_key = f"{rk}:{view.anchor}:{chain_id}"
    window_key = f"mask_window:{page_state_key}"
    if STATE.get(window_key) not in mv.WINDOW_SIZES:
        STATE[window_key] = mv.DEFAULT_WINDOW
    pages_key = f"mask_pagew:{page_state_key}"
    if asked is not None and asked[0] == rk and asked[1].chain == chain_id:
        if asked[1].window in mv.WINDOW_SIZES:
            STATE[window_key] = asked[1].window
        STATE["mask_page"][page_state_key] = mv.page_of(asked[1].start, STATE[window_key])
    window = STATE[window_key]
    pages = mv.page_count(mask, window)
    page = min(STATE["mask_page"].get(page_state_key, 0), pages - 1)
    STATE["mask_view"][rk] = links.MaskWindow(chain_id, mv.page_bounds(mask, page, window)[0], window)

    controls = st.columns([3, 1.2, 2.2, 2.2], vertical_alignment="bottom")
    with controls[0]:
        st.selectbox("Chain", ids, key=chain_key, format_func=labels.get)
    with controls[1]:
        st.selectbox("Window (tokens)", mv.WINDOW_SIZES, key=window_key,
                     format_func=lambda w: f"{w:,}", on_change=lambda: STATE["mask_page"].pop(page_state_key, None))
    with controls[2]:
        if pages > 1:
            STATE[pages_key] = page + 1
            st.slider("Page", 1, pages, key=pages_key,
                      on_change=lambda: STATE["mask_page"].__setitem__(page_state_key, STATE[pages_key] - 1))
        else:
            st.caption("The whole chain fits in one window.")
    with controls[3]:
        jump_key = f"mask_jump:{page_state_key}"
        options = list(range(len(mask.call_ids)))

        def jump() -> None:
            link = STATE.get(jump_key)
            if link is not None:
                STATE["mask_page"][page_state_key] = mv.page_of(int(mask.link_starts[link]), window)

        st.selectbox("Jump to the start of a call", options, index=None, key=jump_key, placeholder="choose a call",
                     format_func=lambda i: f"{i}: {mask.call_ids[i]}", on_change=jump)
    show_tiles([(label, value, help_text, False) for label, value, help_text in
                mv.summary_tiles(mv.mask_summary(mask))], "mask_tiles")
    start, end = mv.page_bounds(mask, page, window)
    st.caption(f"Positions {start:,}–{end - 1:,} of {len(mask):,}. {mv.STRIP_LEGEND}")
    st.plotly_chart(mv.strip_figure(mask, start, end, columns=mv.columns_for(window)), config=PLOTLY_CONFIG,
                    width="stretch", key=f"mask_strip:{page_state_key}")
    st.caption("The whole sequence: where this window lies (red frame), how much of each stretch is trained, "
               "and the mean log-probability.")
    st.plotly_chart(mv.overview_figure(mask, (start, end)), config=PLOTLY_CONFIG, width="stretch",
                    key=f"mask_overview:{page_state_key}")

    st.markdown("**Per link**")
    link_rows = mv.link_frame(mask, chain)
    st.dataframe(link_rows, hide_index=True, width="stretch", height=min(38 + 35 * len(link_rows), 360),
                 column_config={"link": st.column_config.NumberColumn(width=50),
                                "call": st.column_config.TextColumn(width="medium"),
                                "starts at": st.column_config.NumberColumn(width=90, format="localized"),
                                "context": st.column_config.NumberColumn(width=90, help=mv.CONTEXT_HELP,
                                                                         format="localized"),
                                "generated": st.column_config.NumberColumn(width=90, format="localized"),
                                "mean lp": st.column_config.NumberColumn(width=80, format="%.3f"),
                                "min lp": st.column_config.NumberColumn(width=80, format="%.3f"),
                                "finish_reason": st.column_config.TextColumn(width=110)})
    st.markdown("**Log-probability of generated tokens**")
    st.plotly_chart(mv.logprob_figure(mask, (start, end)), config=PLOTLY_CONFIG, width="stretch",
                    key=f"mask_lp:{page_state_key}")

    with st.expander("Decoded text of this window", icon=":material/translate:"):
        tokenizer, problem = sidebar_tokenizer_state()
        if problem:
            st.error(md_escape(problem))
        elif tokenizer is None:
            st.caption("Load a tokenizer.json in the sidebar to read this window as text.")
        else:
            frame = mv.decoded_segments(mask, tokenizer, start, end)
            styled = frame.style.apply(
                lambda row: [f"background-color: {mv.KIND_BACKGROUND.get(row['kind'], '#ffffff')}"] * len(row), axis=1)
            st.dataframe(styled, hide_index=True, width="stretch",
                         column_config={"positions": st.column_config.TextColumn(width="small"),
                                        "kind": st.column_config.TextColumn(width="small"),
                                        "tokens": st.column_config.NumberColumn(width="small"),
                                        "text": st.column_config.TextColumn(width="large")})
            st.caption("Blue rows are generated (trained) spans; amber rows are interstitial context. "
                       "The whole window as text, generated spans between ⟦ and ⟧:")
            st.code(mv.window_text(frame), language=None, wrap_lines=True, height=320)


# --------------------------------------------------------------------------- verdicts tab


def show_attribution(view: RolloutView) -> None:
    st.markdown("#### Terminal attribution")
    a = av.attribution_view(view)
    if a is None:
        st.caption("No harness final response for this rollout, so the delivered chain ends on the latest leaf. "
                   "Upload the harness's final responses in the sidebar to anchor on its own final answer.")
        return
    body = f"**{md_escape(a.headline)}**  \n{md_escape(a.summary)}"
    {"success": st.success, "error": st.error, "warning": st.warning}.get(a.tone, st.info)(body)
    st.caption(f"Outcome **{md_escape(a.outcome)}** · method {md_escape(a.method or '—')}")
    if len(a.candidates):
        st.dataframe(a.candidates, hide_index=True, width="stretch")


def show_verdicts_tab(view: RolloutView) -> None:
    result = view.result
    show_attribution(view)
    st.markdown("#### Engine refusals")
    refusals = vv.refusal_views(result)
    if not refusals:
        st.caption("No engine refusal was recorded for this rollout.")
    for r in refusals:
        with st.container(border=True):
            st.markdown(f"**{md_escape(r.refusal_id)}** · code {md_escape(r.code if r.code is not None else 'null')}"
                        f" · continued {md_escape(r.parent or '—')}")
            _outcome(r.summary, None, warn=r.ended_chain)
            show_table(r.conditions)
            if r.message:
                st.text(f"engine message: {r.message}")

    st.markdown("#### Finish reason")
    summary, resolved, frame = vv.finish_reason_frame(result)
    _outcome(summary, None if resolved is None else (True if resolved else False))
    if len(frame):
        show_table(frame)

    build = view.build
    if build is None:
        st.info("The rollout was not built, so there are no build notes.")
        show_table(vv.metrics_frame(result))
        return
    st.markdown("#### Parent-link notes")
    failures = vv.failures_frame(build)
    if len(failures):
        show_table(failures)
    else:
        st.caption("Every link was verified: no parent-link notes.")
    exclusions = vv.exclusions_frame(build)
    if len(exclusions):
        st.markdown("#### Excluded and duplicate records")
        show_table(exclusions)
    groups = vv.retry_groups_frame(build)
    if len(groups):
        st.markdown("#### Retry groups")
        show_table(groups)
    st.markdown("#### Build notes")
    show_table(vv.notes_frame(build))
    st.markdown("#### Metrics (as `tokencap build` reports them)")
    show_table(vv.metrics_frame(result))


# --------------------------------------------------------------------------- compare tab


def show_compare_tab(base: RolloutView, view: RolloutView, rk: str, ref: src.RolloutRef,
                     refs: list[src.RolloutRef], by_key: dict[str, src.LoadedSource]) -> None:
    mode_key = f"cmp_mode:{rk}"
    modes = ["Two anchors of this rollout", "Two captures of this rollout"]
    if STATE.get(mode_key) not in modes:
        STATE[mode_key] = modes[0]
    st.radio("Compare", modes, key=mode_key, horizontal=True, label_visibility="collapsed")
    if STATE[mode_key] == modes[0]:
        options = [""] + base.anchor_options()  # "": no anchor (None would show as an empty picker)
        key_a, key_b = f"cmp_a:{rk}", f"cmp_b:{rk}"
        default_a, default_b = rp.default_anchor_pair(base, view.anchor)
        if STATE.get(key_a) not in options:
            STATE[key_a] = default_a or ""
        if STATE.get(key_b) not in options:
            STATE[key_b] = default_b or ""
        label = lambda cid: cid or "no anchor (default chain)"  # noqa: E731
        left, right = st.columns(2)
        left.selectbox("A: anchored on", options, key=key_a, format_func=label)
        right.selectbox("B: anchored on", options, key=key_b, format_func=label)
        anchor_a, anchor_b = STATE[key_a] or None, STATE[key_b] or None
        ls = by_key[ref.source_key]
        va = view_of(ls, ref.index, anchor_a)
        vb = view_of(ls, ref.index, anchor_b)
        name_a = f"A (anchored on {anchor_a})" if anchor_a else "A (no anchor)"
        name_b = f"B (anchored on {anchor_b})" if anchor_b else "B (no anchor)"
    else:
        others = rp.other_captures(refs, ref, also=STATE.get(f"cmp_pinned:{rk}"))
        if not others:
            st.info(f"Only one capture of {md_escape(ref.rollout_id)} is loaded. Upload another (a later snapshot "
                    "version, or the same rollout from another store) in the sidebar, next to this one, to compare "
                    "the two.", icon=":material/compare:")
            return
        by_ref = {r.key: r for r in others}
        other_key = f"cmp_other:{rk}"
        if STATE.get(other_key) not in by_ref:
            STATE[other_key] = others[0].key

        def describe(key: str) -> str:
            r = by_ref[key]
            snap = by_key[r.source_key].snapshots[r.index]
            return f"{r.source_name} · snapshot {snap.snapshot_id or '—'} · version {snap.version}"

        st.selectbox("B: the other capture", list(by_ref), key=other_key, format_func=describe)
        other = by_ref[STATE[other_key]]
        va = base
        vb = view_of(by_key[other.source_key], other.index, None)
        name_a = f"A ({ref.source_name} v{base.snapshot.version})"
        name_b = f"B ({other.source_name} v{vb.snapshot.version})"
    cmp = df.compare(va, vb, name_a, name_b)
    st.markdown("**What changes from A to B**")
    if cmp.changes:
        st.markdown("\n".join(f"- {md_escape(c)}" for c in cmp.changes))
    else:
        st.caption("Nothing: the two builds give the same verdict, status, metrics and delivered calls.")
    seq = cmp.sequence
    if seq is not None:
        st.markdown("**The delivered token sequences**")
        st.caption(md_escape(seq.summary("A", "B")))
        if not seq.identical:
            tokenizer, _ = sidebar_tokenizer_state()
            decode = mv.token_decoder(tokenizer) if tokenizer is not None else None
            st.plotly_chart(df.sequence_figure(seq, name_a, name_b, decode), config=PLOTLY_CONFIG, width="stretch",
                            key=f"cmp_seq:{rk}")
    st.markdown("**Side by side** (✱: differs)")
    show_table(cmp.table)
    if cmp.calls_only_a or cmp.calls_only_b:
        st.caption(f"Delivered calls: {cmp.calls_common:,} in common from the start; then A delivers "
                   f"{len(cmp.calls_only_a):,} and B {len(cmp.calls_only_b):,} of its own.")
        left, right = st.columns(2)
        left.text("only A: " + (", ".join(cmp.calls_only_a[:50]) or "—") + (" …" if len(cmp.calls_only_a) > 50 else ""))
        right.text("only B: " + (", ".join(cmp.calls_only_b[:50]) or "—") + (" …" if len(cmp.calls_only_b) > 50 else ""))


# --------------------------------------------------------------------------- export tab


def _remember_anchor(widget_key: str, rk: str) -> None:
    STATE["anchors"][rk] = STATE.get(widget_key)


def show_export_tab(base: RolloutView, view: RolloutView, rk: str, ref: src.RolloutRef, source_label: str,
                    all_views: list[RolloutView], several: bool) -> None:
    st.markdown("#### Fixed trajectory")
    options: list[str | None] = [None] + base.anchor_options()
    roles = base.roles
    widget_key = f"anchor_w:{rk}"
    if STATE.get(widget_key) != view.anchor:
        STATE[widget_key] = view.anchor

    def label(cid: str | None) -> str:
        if cid is None:
            return av.none_anchor_label(base.result)
        role = roles.get(cid) or ("empty generation" if base.build and cid in base.build.notes.empty_generation_calls
                                  else "not chained")
        return f"{cid} · {role.replace('_', ' ')}"

    st.selectbox("Anchor on a terminal call", options, key=widget_key, format_func=label,
                 on_change=_remember_anchor, args=(widget_key, rk),
                 help="The delivered chain is cut at this call (what the harness says it ended on). "
                      "Default: none, or the harness's final answer when its final responses are loaded; a "
                      "call chosen here always overrides that.")
    banner = vv.banner_of(view)
    if banner.trainable:
        st.success(f"**{banner.headline}** · status {md_escape(banner.status_line)}", icon=":material/check_circle:")
    else:
        reasons = "\n".join(f"- **{code}** — {text}" for code, text in banner.reasons)
        st.error(f"**{banner.headline}** · status {md_escape(banner.status_line)}\n\n{reasons}", icon=":material/block:")
    st.caption(md_escape(av.anchor_summary(base.result, view.result, view.anchor)))

    size_exports([view] + [v for v in all_views if v is not view])
    files = ev.downloads(view)
    cols = st.columns(3)
    for col, kind in zip(cols, ev.KINDS):
        with col:
            show_file(f"{rk}:{view.anchor}:{kind}", files[kind], ev.estimate(view, kind),
                      lambda report, kind=kind: ev.render(view, kind, report),
                      lambda handle, kind=kind: ev.write_kind(handle, view, kind),
                      ev.cli_command(source_label, ref.rollout_id, view.anchor, several, out="OUT"))
    st.caption("These are the bytes `tokencap build` writes for the same input and anchor:")
    finals_label = _FINALS.label if view.final_response is not None else None
    st.code(ev.cli_command(source_label, ref.rollout_id, view.anchor, several, finals_label), language="bash")

    st.markdown("#### Every loaded rollout")
    anchored = sum(1 for v in all_views if v.anchor is not None)
    st.caption(f"{len(all_views)} rollout{'s' if len(all_views) != 1 else ''}, one build result per line"
               + (f"; {anchored} with the anchor chosen here" if anchored else "") + ".")
    results = [v.result for v in all_views]
    every = ev.Download("Build results JSONL (all rollouts)", "tokencap_results.jsonl", "application/jsonl",
                        what="every loaded rollout's build result, one per line")
    with st.columns(3)[0]:
        show_file(rp.export_key(v.rollout_id + "@" + str(v.anchor) for v in all_views), every,
                  ev.estimate_all(all_views),
                  lambda report: ev.render_all(all_views, report),
                  lambda handle: ev.write_results_to(handle, results),
                  ev.cli_command(source_label, None, None, False, out="OUT"))


def size_exports(views: list[RolloutView]) -> None:
    """Size every export once per rollout and anchor (`ev.sizes`, kept on the view), with a progress
    bar while that runs; later visits and reruns reuse the sizes."""
    todo = [v for v in views if not ev.sized(v)]
    if not todo:
        return
    bar = st.progress(0.0, text="sizing the exports")
    for n, v in enumerate(todo):
        def report(done: int, total: int, n: int = n, name: str = md_escape(v.rollout_id)) -> None:
            bar.progress(min((n + done / max(total, 1)) / len(todo), 0.99),
                         text=f"sizing the exports: {done:,} of {total:,} calls of {name}")
        ev.sizes(v, report)
    bar.empty()


def _progress(bar: Any, verb: str) -> Any:
    def report(done: int, total: int) -> None:
        bar.progress(min(done / total, 0.99), text=f"{verb} {fmt_bytes(done)} of about {fmt_bytes(total)}")
    return report


def show_file(pkey: str, d: ev.Download, size: int, render: Any, write: Any, command: str) -> None:
    """One export: a download (rendered now, or when asked with a progress bar) or, when too big for
    the browser, a file written to disk with a progress bar. See `tokencap.views.export.route`."""
    if not d.available:
        st.button(d.label, key=f"na:{pkey}", disabled=True, icon=":material/download:", width="stretch")
        st.caption(d.why_not)
        return
    how = ev.route(size)
    dl_key = f"dl:{pkey}"
    if how == "now":
        # Rendered when clicked (a deferred download), not on every rerun of the page.
        st.download_button(d.label, lambda: render(None), file_name=d.file_name, mime=d.mime, key=dl_key,
                           icon=":material/download:", on_click="ignore", width="stretch")
        st.caption(d.what)
        return
    if how == "prepare":
        prepared = STATE.get("prepared")
        if STATE.get("prepare") == pkey:
            # Asked for: render it now, with progress, and hand that one bytes object to Streamlit.
            STATE.pop("prepare")
            bar = st.progress(0.0, text=f"preparing about {fmt_bytes(size)}")
            data = render(_progress(bar, "prepared"))
            bar.empty()
            STATE["prepared"] = prepared = (pkey, data)  # one prepared file at a time
            STATE["autoclick"] = pkey
        if prepared is not None and prepared[0] == pkey:
            show_prepared(pkey, d, prepared[1], autoclick=STATE.pop("autoclick", None) == pkey)
            st.caption(f"{d.what}. Ready: it downloads by itself; the link gives another copy.")
        else:
            st.button(d.label, key=f"prep:{pkey}", icon=":material/download:", width="stretch",
                      on_click=lambda: STATE.__setitem__("prepare", pkey), help=f"about {fmt_bytes(size)}")
            st.caption(f"About {fmt_bytes(size)}: {d.what}. Prepared when you click (with a progress bar), "
                       "then it downloads.")
        return
    # Too big for a browser download: write it to disk.
    st.button(f"{d.label} → disk", key=f"disk:{pkey}", icon=":material/save:", width="stretch",
              on_click=lambda: STATE.__setitem__("write", pkey), help=f"about {fmt_bytes(size)}")
    st.caption(f"About {fmt_bytes(size)}: {d.what}. More than {fmt_bytes(ev.download_limit())} is too big to pass "
               "through the browser, so it is written to the export directory below, with a progress bar.")
    if "export_dir" not in STATE:
        STATE["export_dir"] = ev.default_export_dir()
    if not RUN["export_dir_shown"]:
        RUN["export_dir_shown"] = True
        st.text_input("Export directory (created if missing)", key="export_dir")
    folder = STATE["export_dir"]
    if STATE.get("write") == pkey:
        STATE.pop("write")
        target = str(Path(folder) / d.file_name)
        bar = st.progress(0.0, text=f"writing about {fmt_bytes(size)} to {md_escape(target)}")
        try:
            n = ev.write_file(target, write, size, _progress(bar, "wrote"))
        except OSError as exc:
            bar.empty()
            st.error(f"**Could not write {md_escape(target)}:** {md_escape(exc.strerror or exc)}. Choose another "
                     "export directory.", icon=":material/error:")
            return
        bar.progress(1.0, text=f"wrote {fmt_bytes(n)}")
        STATE.setdefault("written", {})[pkey] = (target, n)
    written = STATE.get("written", {}).get(pkey)
    if written is not None:
        st.success(f"Wrote {fmt_bytes(written[1])} to", icon=":material/check:")
        st.code(written[0], language=None, wrap_lines=True)
        st.caption("The same file from the command line:")
        st.code(command.replace("OUT", written[0]) if "OUT" in command else command, language="bash",
                wrap_lines=True)


def media_url(pkey: str, data: bytes, d: ev.Download) -> str | None:
    """Serve ``data`` (that very object: no copy) from Streamlit's media store while this page shows it.

    It is served as an attachment under its own file name, with the content type `ev.PASS_THROUGH_MIME`:
    Streamlit's gzip middleware compresses every other type of download in one piece before
    sending the first byte (4.5 s for an 85 MB result, and CPU the page needs).
    """
    from streamlit import runtime

    if not runtime.exists():
        return None
    return runtime.get_instance().media_file_mgr.add(data, ev.PASS_THROUGH_MIME, f"export:{pkey}",
                                                     file_name=d.file_name, is_for_static_download=True)


def show_prepared(pkey: str, d: ev.Download, data: bytes, autoclick: bool) -> None:
    """A prepared file as a plain download link, clicked once by the page when it was just prepared.

    Not `st.download_button`: its frontend fetches the file's URL in the background whenever it
    renders, and Chromium then holds a second request for the same URL (the click) behind that
    unread fetch for many seconds. A link of our own, with its own query string, starts at once.
    """
    url = media_url(pkey, data, d)
    if url is None:  # no Streamlit runtime (bare mode): the plain button still works
        st.download_button(d.label, data, file_name=d.file_name, mime=d.mime, key=f"dl:{pkey}",
                           icon=":material/download:", on_click="ignore", width="stretch")
        return
    STATE["link_nonce"] = STATE.get("link_nonce", 0) + (1 if autoclick else 0)
    href = html.escape(f"{url}?copy={STATE['link_nonce']}", quote=True)
    label = html.escape(f"{d.label} ({fmt_bytes(len(data))})")
    st.html(f'<a class="tc-download" href="{href}" download="{html.escape(d.file_name, quote=True)}">'
            f'&#x2913;&nbsp; {label}</a>')
    if autoclick:
        st.html(f"""<script>/* {STATE["link_nonce"]} */
          (function () {{
            const link = document.querySelector('a.tc-download[href="{href}"]');
            if (link) link.click();
          }})();</script>""", unsafe_allow_javascript=True)


# --------------------------------------------------------------------------- page


def run_records() -> dict[str, av.FinalResponsesChoice]:
    """The rollout records of the rollouts handed over by the Run page, per source (none under an upload)."""
    request = run_request()
    if request is None or STATE.get("final_responses_uploader") is not None:
        return {}
    out = {}
    for handed, memo in ((request, "open_rollout_source"), (request.get("vs"), "open_rollout_vs_source")):
        kept = STATE.get(memo)
        records = handed.get("final_responses") if isinstance(handed, dict) else None
        if records and kept is not None and kept[0] == request.get("seq"):
            out[kept[1].cache_key] = av.final_responses_choice(None, Path(records), _parse_final_responses)
    for choice in out.values():
        if choice.error:
            st.sidebar.error(f"**Rollout records not used.** {md_escape(choice.error)}", icon=":material/error:")
        else:
            st.sidebar.caption(f"Built with the run's rollout records: {md_escape(Path(choice.label).name)}")
    return {key: choice for key, choice in out.items() if not choice.error}


def _parse_final_responses(name: str, data: bytes) -> tuple[Any, str | None]:
    return parsed_final_responses(av.content_key(name, data), name, data)


def final_responses_choice() -> av.FinalResponsesChoice:
    """The uploaded final responses, else the file bundled with the sample scenario, else none."""
    upload = STATE.get("final_responses_uploader")
    bundled = STATE.get("bundled_final_responses")
    return av.final_responses_choice((upload.name, upload.getvalue()) if upload is not None else None,
                                     Path(bundled) if bundled else None, _parse_final_responses)


def sidebar_final_responses(choice: av.FinalResponsesChoice) -> None:
    if choice.error:
        st.sidebar.error(f"**Final responses not used.** {md_escape(choice.error)}", icon=":material/error:")
    elif choice.finals is not None:
        n = len(choice.finals)
        where = "bundled with this scenario" if choice.bundled else "uploaded"
        st.sidebar.caption(f"Terminal attribution from {md_escape(choice.label)} ({where}, {n} final "
                           f"response{'s' if n != 1 else ''}); a manual anchor under Export overrides it.")
        for note in choice.notes:
            st.sidebar.caption(f"Note: {md_escape(note)}")


def main() -> None:
    global _FINALS
    st.html(f"<style>{style.PAGE_CSS}</style>")
    # The whole main area lives in one placeholder, emptied when a big load starts; the
    # progress box has its own, above it (see load_sources).
    progress = st.empty()
    page = st.empty()
    take_url_state()
    sources, source_label, path_error = sidebar_sources()
    sources += [s for s in versus_sources(run_request()) if s.cache_key not in {x.cache_key for x in sources}]
    _FINALS = final_responses_choice()  # before loading: every view is built with its final response
    _RUN_FINALS.clear()
    _RUN_FINALS.update(run_records())
    loaded = load_sources(sources, page, progress)
    with page.container():
        show_page(loaded, source_label, path_error)
    sidebar_tokenizer()


def show_page(loaded: list[src.LoadedSource], source_label: str, path_error: str | None) -> None:
    global _FINALS
    request = run_request()
    if request is not None and "back_params" in request:  # opened from the Run page in this session
        # First, so a rollout that fails to load still has its way back and on.
        show_triage(request)
    if STATE.get("link_error"):
        st.error(f"**Could not open the link.** {md_escape(STATE['link_error'])}", icon=":material/error:")
        return
    if path_error:
        st.error(f"**Could not open the source.** {md_escape(path_error)}", icon=":material/error:")
    for ls in loaded:
        if not ls.ok:
            st.error(f"**Could not load {md_escape(ls.source.name)}**  \n{md_escape(ls.error)}", icon=":material/error:")
    good = [ls for ls in loaded if ls.ok]
    refs = src.rollout_refs(good)
    _FINALS = av.with_notes(_FINALS, (r.rollout_id for r in refs))
    sidebar_final_responses(_FINALS)
    if not refs:
        st.markdown("### tokencap rollout inspector")
        st.info("Open a snapshot `.json`, an entries `.jsonl` or a `.zip` of a capture-store directory in the sidebar.")
        return
    several_sources = len(good) > 1
    by_key = {ls.source.cache_key: ls for ls in good}
    apply_url_state(refs, good)
    if request is not None and STATE.get("open_rollout_selected") != request.get("seq"):
        STATE["open_rollout_selected"] = request.get("seq")
        # Streamlit keeps the scroll position across pages; a rollout opened from far down
        # the run's table would open mid-page, below its verdict. A constant script, no data.
        st.html(SCROLL_TO_TOP, unsafe_allow_javascript=True)
        wanted = next((r for r in refs if r.rollout_id == request["rollout_id"]
                       and r.source_key != STATE.get("vs_source_key")), None)
        if wanted is not None:
            STATE["rollout"] = wanted.key
            vs = request.get("vs") or {}
            pin_comparison(refs, wanted, next((r for r in refs if r.source_key == STATE.get("vs_source_key")
                                               and r.rollout_id == vs.get("rollout_id")), None))
        else:
            STATE["rollout_missing"] = (request["rollout_id"], str(request.get("source")), loaded_keys(good))
    if show_missing_rollout(good):
        return
    ref = sidebar_rollout(refs, by_key, several_sources)
    rk = ref.key
    ls = by_key[ref.source_key]
    base = view_of(ls, ref.index, None)
    anchor = rp.valid_anchor(base, STATE["anchors"].get(rk))
    view = view_of(ls, ref.index, anchor) if anchor is not None else base

    if STATE.get("tab") not in TABS:
        STATE["tab"] = TABS[0]
    show_banner(view, ref, rk)
    tabs = st.tabs(TABS, key="tab", on_change="rerun")
    for name, tab in zip(TABS, tabs):
        if not tab.open:
            continue
        with tab:
            if name == "Call tree":
                show_tree_tab(view, rk)
            elif name == "Loss mask":
                show_mask_tab(view, rk)
            elif name == "Verdicts":
                show_verdicts_tab(view)
            elif name == "Compare":
                show_compare_tab(base, view, rk, ref, refs, by_key)
            else:
                all_views = [view_of(by_key[r.source_key], r.index, STATE["anchors"].get(r.key)) for r in refs]
                label = rp.export_source_label(ref.source_name, source_label, source_label == "uploaded files")
                several = sum(1 for r in refs if r.source_key == ref.source_key) > 1 or bool(ls.source.names)
                show_export_tab(base, view, rk, ref, label, all_views, several)
    if STATE.get("tab") != "Export":
        STATE.pop("prepared", None)  # a prepared download is only kept while the Export tab shows it
    write_url_state(current_view_state(view, ref, rk))


def triage_order(request: dict[str, Any]) -> tr.RunOrder | None:
    """The Run page's table (its filter and sort) this rollout was opened from, computed once per run and filter."""
    key = (id(request.get("frame")), tuple(sorted((request.get("back_params") or {}).items())))
    memo = STATE.get("triage_order")
    if memo is None or memo[0] != key:
        memo = STATE["triage_order"] = (key, tr.order_of(request))
    return memo[1]


def _step(delta: int) -> None:
    """Previous / next: open the rollout ``delta`` rows away in the run's table."""
    request, order = run_request(), None
    if request is not None:
        order = triage_order(request)
    if request is None or order is None:
        return
    STATE["open_rollout_seq"] = seq = STATE.get("open_rollout_seq", 0) + 1
    step = tr.step_request(request, order, delta, seq)
    if step is not None and step.request is not None:
        STATE["open_rollout"] = step.request
    elif step is not None:
        STATE["triage_problem"] = step.problem


def show_triage(request: dict[str, Any]) -> None:
    """Back to the run, and previous / next in its filter (buttons, and the keys K and J)."""
    order = triage_order(request)
    row = request.get("row")
    with st.container(horizontal=True, vertical_alignment="center", gap="small", key="triage"):
        st.page_link(RUN_PAGE, label="Back to the run", icon=":material/arrow_back:",
                     query_params=request.get("back_params") or None)
        if order is not None and isinstance(row, int):
            st.button("Previous", icon=":material/arrow_upward:", key="triage_prev", shortcut="K", on_click=_step,
                      args=(-1,), disabled=order.step(row, -1) is None, help="The rollout above in the run's table")
            scope = "in this filter" if rd.RunFilter.from_params(request.get("back_params") or {}).active else "in the run"
            st.markdown(f"Rollout **{order.where(row)}** {scope}", width="content")
            st.button("Next", icon=":material/arrow_downward:", key="triage_next", shortcut="J", on_click=_step,
                      args=(1,), disabled=order.step(row, 1) is None, help="The rollout below in the run's table")
    problem = STATE.pop("triage_problem", None)
    if problem:
        st.warning(md_escape(problem), icon=":material/folder_off:")


def loaded_keys(good: list[src.LoadedSource]) -> tuple[str, ...]:
    return tuple(ls.source.cache_key for ls in good)


def show_missing_rollout(good: list[src.LoadedSource]) -> bool:
    """Say plainly that the rollout a link (or a run's row) names is not in its source, and show
    nothing else: never another rollout in its place. True while that is what the page shows
    (until another source is opened, or the user asks for this source's rollouts)."""
    missing = STATE.get("rollout_missing")
    if missing is None:
        return False
    rollout_id, where, keys = missing
    if keys != loaded_keys(good):
        STATE.pop("rollout_missing", None)
        return False
    st.markdown("### tokencap rollout inspector")
    st.error(f"**{md_escape(rollout_id)} is not in {md_escape(where)}.** The link names a rollout this source does "
             "not hold (moved, renamed, or another run), so no rollout is shown in its place.",
             icon=":material/search_off:")
    st.button("Show the rollouts this source holds", key="show_other_rollouts",
              on_click=lambda: STATE.pop("rollout_missing", None))
    return True


def current_view_state(view: RolloutView, ref: src.RolloutRef, rk: str) -> links.ViewState:
    mask = STATE["mask_view"].get(rk)
    return links.ViewState(
        vs_src=STATE.get("vs_src") if run_request() is None else None,
        vs_rollout=STATE.get("vs_rollout") if STATE.get("vs_src") else None,
        src=STATE.get("src_param"), part=STATE.get("part_param"), rollout=ref.rollout_id,
        call=rp.selected_node(view, STATE["selected"].get(rk)), tab=STATE.get("tab"), anchor=view.anchor,
        mask=mask if mask is not None and mask.chain in {c.chain_id for c in view.chains} else None)

main()
