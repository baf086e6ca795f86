"""The Rollout page's header: the rollout's title, its share link, and the verdict banner with each mask
reason's culprit calls.

A helper of ``tokencap/app/rollout/rollout.py`` (not a page): layout and session state only; the banner's
words come from `tokencap.views.rollout.verdicts` (`banner_of`) and `rollout_page`.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from tokencap.app.rollout.common import pick_call, show_tiles, tokenizer_in_use
from tokencap.app.rollout.sources import run_request
from tokencap.app.rollout.url import current_view_state
from tokencap.app.state import Keys
from tokencap.services import rollout_sources as src
from tokencap.views import links
from tokencap.views.formatting import md_escape
from tokencap.views.model import RolloutView
from tokencap.views.rollout import findings as fd
from tokencap.views.rollout import rollout_page as rp
from tokencap.views.rollout import verdicts as vv

STATE = st.session_state


def _open_culprit(rk: str, key: str) -> None:
    """A culprit link: select its node and show it on the call tree."""
    pick_call(rk, key)
    STATE[Keys.SCROLL_DETAIL] = True
    STATE[Keys.TAB] = "Call tree"


def _culprit_button(rk: str, link: Any, widget_key: str) -> None:
    st.button(md_escape(link.call_id), key=widget_key, type="tertiary", icon=":material/account_tree:",
              on_click=_open_culprit, args=(rk, link.key), help=md_escape(link.hover()))


def _show_finding(rk: str, i: int, finding: Any) -> None:
    """One finding: its whole sentence, cause first (wrapped), the reasons it explains, its calls as links."""
    with st.container(key=Keys.finding(i), gap="small"):
        st.markdown(fd.finding_markdown(finding), help=finding.tooltip())
        explains = fd.explains_markdown(finding)
        if explains:
            st.caption(explains)
        with st.container(horizontal=True, gap="small", vertical_alignment="center", key=Keys.culprits(i)):
            inline, rest = rp.split_culprits(finding.calls)
            for j, link in enumerate(inline):
                _culprit_button(rk, link, f"culprit:{rk}:{i}:{j}")
            if rest:
                with st.popover(f"+{len(rest)} more", type="tertiary", key=Keys.more(rk, i)):
                    for j, link in enumerate(rest, start=len(inline)):
                        _culprit_button(rk, link, f"culprit:{rk}:{i}:{j}")


def show_copy_link(view: RolloutView, ref: src.RolloutRef, rk: str) -> None:
    # Filled only while open (opening it reruns the page): its URL is the view's at that moment (a click
    # in the tabs reruns them alone), and a closed popover sends nothing to the browser.
    popover = st.popover("Copy link", icon=":material/link:", key=Keys.SHARE, width="stretch", on_change="rerun")
    if not popover.open:
        return
    with popover:
        request = run_request()  # a run's rollout: the link keeps its place in the run's filters
        url = links.share_url(st.context.url, current_view_state(view, ref, rk),
                              request.back_params if request is not None else None)
        st.caption("This view (source, rollout, call, tab, anchor, mask window). Copy it with the icon:")
        st.code(url, language=None, wrap_lines=True)
        if STATE.get(Keys.SRC_PARAM) is None:
            st.warning("Uploaded files can't be in a URL: the link opens the same rollout, call and tab only "
                       "where the same file is uploaded again. Open the file by path (`tokencap app PATH`) to "
                       "share it.", icon=":material/info:")
        finals = STATE.get(Keys.FINAL_RESPONSES_UPLOADER)
        if finals is not None:
            st.warning(rp.uploaded_finals_link_note(finals.name), icon=":material/info:")


def show_banner(view: RolloutView, ref: src.RolloutRef, rk: str) -> None:
    tokenizer, _, key = tokenizer_in_use()
    banner = vv.banner_of(view, tokenizer, key)  # the culprits say why each lineage broke, in the tokens' text
    snap = view.snapshot
    title, share = st.columns([5, 1], vertical_alignment="bottom")
    title.markdown(f"### {md_escape(view.rollout_id)}")
    with share:
        show_copy_link(view, ref, rk)
    st.caption(rp.banner_caption(view, banner, ref.source_name))

    status = rp.status_markdown(banner)
    if banner.trainable:
        with st.container(key=Keys.VERDICT_OK, border=True):
            st.markdown(f":material/check_circle: **{banner.headline}** · {status}")
    else:
        with st.container(key=Keys.VERDICT_MASKED, border=True):
            st.markdown(f":material/block: **{banner.headline}** · {status}")
            for i, finding in enumerate(fd.findings_of(view, tokenizer, key)):
                _show_finding(rk, i, finding)
    if banner.error:
        st.error(f"**Error:** {md_escape(banner.error)}", icon=":material/error:")
    for note in vv.record_notes(view):  # a rollout record of another model, applied to this rollout
        st.warning(md_escape(note), icon=":material/warning:")
    show_tiles([(m.label, m.value, m.help, m.alert) for m in banner.metrics], "tiles")
    if snap.source_notes:
        with st.expander(f"Loader notes ({len(snap.source_notes)})", icon=":material/notes:"):
            for note in snap.source_notes:
                st.text(note)
