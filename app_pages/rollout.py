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

import sys
from pathlib import Path
from typing import Any

import streamlit as st

from app_pages import rollout_export as export_tab
from app_pages import rollout_tabs as tabs_part
from app_pages import rollout_tree as tree_tab
from app_pages.rollout_common import show_tiles, sidebar_tokenizer
from tokencap.views.rollout import attribution as av
from tokencap.views import links
from tokencap.views.rollout import rollout_page as rp
from tokencap.views.run import data as rd
from tokencap.views.run import source as rs
from tokencap.views.run import triage as tr
from tokencap.views import sources as src
from tokencap.views import style
from tokencap.views.rollout import verdicts as vv
from tokencap.views.model import RolloutView
from tokencap.views.text import fmt_bytes, md_escape

APP_DIR = Path(__file__).resolve().parent.parent
SAMPLE_DIR = APP_DIR / "sample_data"
RUN_PAGE = "app_pages/run.py"
SCROLL_TO_TOP = "<script>document.querySelector('[data-testid=\"stMain\"]')?.scrollTo(0, 0);</script>"
TABS = list(rp.TABS)

STATE = st.session_state
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
    # The URL first, before anything is drawn: a click (Back to the run, a tab) after the verdict is
    # on screen must never be followed by this run's URL update, which would land on the next page.
    write_url_state(current_view_state(view, ref, rk))
    show_banner(view, ref, rk)
    tabs = st.tabs(TABS, key="tab", on_change="rerun")
    for name, tab in zip(TABS, tabs):
        if not tab.open:
            continue
        with tab:
            if name == "Call tree":
                tree_tab.show_tree_tab(view, rk)
            elif name == "Loss mask":
                tabs_part.show_mask_tab(view, rk)
            elif name == "Verdicts":
                tabs_part.show_verdicts_tab(view)
            elif name == "Compare":
                tabs_part.show_compare_tab(base, view, rk, ref, refs, by_key, view_of)
            else:
                all_views = [view_of(by_key[r.source_key], r.index, STATE["anchors"].get(r.key)) for r in refs]
                label = rp.export_source_label(ref.source_name, source_label, source_label == "uploaded files")
                several = sum(1 for r in refs if r.source_key == ref.source_key) > 1 or bool(ls.source.names)
                export_tab.show_export_tab(base, view, rk, ref, label, all_views, several,
                                           _RUN_FINALS.get(ls.source.cache_key, _FINALS).label)
    if STATE.get("tab") != "Export":
        STATE.pop("prepared", None)  # a prepared download is only kept while the Export tab shows it
    write_url_state(current_view_state(view, ref, rk))  # the loss-mask window, when the tab moved it


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
            filtered = rd.RunFilter.from_params(request.get("back_params") or {}).active
            scope = "in this filter" if filtered else "in the run"
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
