"""The Rollout page's Loss mask, Verdicts and Compare tabs.

A helper of ``tokencap/app/rollout/rollout.py`` (not a page): layout and session state only; every
fact comes from `tokencap.views` (`mask`, `mask_chart`, `logprob_chart`, `verdicts`, `attribution`, `diff`,
`sequence_chart`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from tokencap.app.rollout.common import (
    figure_of,
    outcome,
    show_table,
    show_tiles,
    sidebar_tokenizer_state,
    tokenizer_in_use,
)
from tokencap.app.rollout.sources import run_request
from tokencap.app.state import Keys
from tokencap.services import rollout_sources as src
from tokencap.views import links
from tokencap.views.formatting import md_escape
from tokencap.views.model import RolloutView
from tokencap.views.rollout import attribution as av
from tokencap.views.rollout import diff as df
from tokencap.views.rollout import logprob_chart as lc
from tokencap.views.rollout import mask as mv
from tokencap.views.rollout import mask_chart as mc
from tokencap.views.rollout import rollout_page as rp
from tokencap.views.rollout import sequence_chart as sc
from tokencap.views.rollout import verdicts as vv

STATE = st.session_state
ViewOf = Callable[[src.LoadedSource, int, "str | None"], RolloutView]
"""The page's cached view of a loaded rollout under an anchor (``view_of``)."""


def show_mask_tab(view: RolloutView, rk: str) -> None:
    chains = view.chains
    if not chains:
        st.info("No chain was built, so there is no loss mask.")
        return
    ids = [c.chain_id for c in chains]
    labels = {c.chain_id: mv.chain_label(c) for c in chains}
    chain_key = f"mask_chain:{rk}:{view.anchor}"
    asked = STATE.pop(Keys.MASK_URL, None)
    asked_chain = mv.asked_chain(asked, rk, ids)
    if asked_chain is not None:
        STATE[chain_key] = asked_chain
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
    wanted = mv.asked_page(asked, rk, chain_id, STATE[window_key])
    if wanted is not None:
        STATE[window_key], STATE[Keys.MASK_PAGE][page_state_key] = wanted
    window = STATE[window_key]
    pages = mv.page_count(mask, window)
    page = min(STATE[Keys.MASK_PAGE].get(page_state_key, 0), pages - 1)
    STATE[Keys.MASK_VIEW][rk] = links.MaskWindow(chain_id, mv.page_bounds(mask, page, window)[0], window)

    # The chain's label (calls, generated of total tokens) gets a row's width: a quarter of it cut it off.
    chain_col, window_col = st.columns([5, 1.5], vertical_alignment="bottom")
    page_col, jump_col = st.columns(2, vertical_alignment="bottom")
    with chain_col:
        st.selectbox("Chain", ids, key=chain_key, format_func=labels.__getitem__)
    with window_col:
        st.selectbox("Window (tokens)", mv.WINDOW_SIZES, key=window_key,
                     format_func=lambda w: f"{w:,}", on_change=lambda: STATE[Keys.MASK_PAGE].pop(page_state_key, None))
    with page_col:
        if pages > 1:
            STATE[pages_key] = page + 1
            st.slider("Page", 1, pages, key=pages_key,
                      on_change=lambda: STATE[Keys.MASK_PAGE].__setitem__(page_state_key, STATE[pages_key] - 1))
        else:
            st.caption("The whole chain fits in one window.")
    with jump_col:
        jump_key = f"mask_jump:{page_state_key}"
        options = list(range(len(mask.call_ids)))

        def jump() -> None:
            link = STATE.get(jump_key)
            if link is not None:
                STATE[Keys.MASK_PAGE][page_state_key] = mv.page_of(int(mask.link_starts[link]), window)

        st.selectbox("Jump to the start of a call", options, index=None, key=jump_key, placeholder="choose a call",
                     format_func=lambda i: f"{i}: {mask.call_ids[i]}", on_change=jump)
    show_tiles([(label, value, help_text, False) for label, value, help_text in
                mv.summary_tiles(mv.mask_summary(mask))], "mask_tiles")
    start, end = mv.page_bounds(mask, page, window)
    st.caption(f"Positions {start:,}–{end - 1:,} of {len(mask):,}. {mv.STRIP_LEGEND}")
    drawn = (chain_id, start, end, window)
    tokenizer, _, tokenizer_key = tokenizer_in_use()  # a cell's hover shows its token's text
    strip = figure_of("mask strip", view, (*drawn, tokenizer_key), lambda: mc.strip_chart(
        mask, start, end, columns=mv.columns_for(window),
        texts=mv.token_texts(tokenizer, mask.token_ids[start:end]) if tokenizer is not None else None))
    with st.container(key=Keys.MASK_STRIP):  # one strip on the page: the tab shows one window of one chain
        st.vega_lite_chart(strip, width="stretch")
    # The whole sequence's overview, the log-probs and the table of every link are filled only while open
    # (opening one reruns the tabs): closed, none is built nor sent, and a visit of the tab draws one chart.
    # Each Vega-Lite chart costs the browser ~0.15 s however few its marks (measured on a 1,500-call
    # rollout: 0.58 s a first visit with the overview drawn, 0.42 s without), and the caption above says
    # where the window lies.
    overview_box = st.expander("The whole sequence: where this window lies, what is trained",
                               icon=":material/timeline:", key=Keys.MASK_OVERVIEW_OPEN, on_change="rerun")
    if overview_box.open:
        with overview_box:
            st.caption("Where this window lies (red frame), how much of each stretch is trained, and the mean "
                       "log-probability.")
            overview = figure_of("mask overview", view, drawn, lambda: mc.overview_chart(mask, (start, end)))
            with st.container(key=Keys.MASK_OVERVIEW):
                st.vega_lite_chart(overview, width="stretch")
    logprobs_box = st.expander("Log-probability of generated tokens", icon=":material/show_chart:",
                               key=Keys.MASK_LOGPROBS_OPEN, on_change="rerun")
    if logprobs_box.open:
        with logprobs_box:
            logprobs = figure_of("mask log-probs", view, drawn, lambda: lc.logprob_chart(mask, (start, end)))
            with st.container(key=Keys.MASK_LP):
                st.vega_lite_chart(logprobs, width="stretch")
    links_box = st.expander(f"Per link ({len(mask.call_ids):,})", icon=":material/table_rows:",
                            key=Keys.MASK_LINKS_OPEN, on_change="rerun")
    if links_box.open:
        with links_box:
            show_links(mask, chain)

    # Filled only while open (opening it reruns the tabs): closed, its styled table is neither built nor sent.
    decoded = st.expander("Decoded text of this window", icon=":material/translate:", key=Keys.MASK_DECODED_OPEN,
                          on_change="rerun")
    if not decoded.open:
        return
    with decoded:
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
            st.caption(mv.DECODED_CAPTION)
            with st.container(height=320, key=Keys.MASK_WINDOW_TEXT):
                st.text(mv.window_text(frame))  # not st.code: it loads the syntax highlighter (1.5 MB)


def show_links(mask: Any, chain: Any) -> None:
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
            outcome(r.summary, None, warn=r.ended_chain)
            show_table(r.conditions)
            if r.message:
                st.text(f"engine message: {r.message}")

    st.markdown("#### Finish reason")
    summary, resolved, frame = vv.finish_reason_frame(result)
    outcome(summary, None if resolved is None else (True if resolved else False))
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
                     refs: list[src.RolloutRef], by_key: dict[str, src.LoadedSource], view_of: ViewOf) -> None:
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
        name_a, name_b = df.anchor_side_name("A", anchor_a), df.anchor_side_name("B", anchor_b)
    else:
        others = rp.other_captures(refs, ref, also=STATE.get(Keys.cmp_pinned(rk)))
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
            return df.capture_label(r.source_name, snap.snapshot_id, snap.version)

        st.selectbox("The other capture", list(by_ref), key=other_key, format_func=describe)
        other = by_ref[STATE[other_key]]
        vo = view_of(by_key[other.source_key], other.index, None)
        # A joined rollout of two runs: run A's capture on the left whichever side was opened, each named by its run.
        handed = STATE.get(Keys.OPEN_ROLLOUT_SOURCE)  # (seq, source) of the rollout the Run page handed over
        runs = rp.capture_runs(run_request(), [handed[1].cache_key if handed else None, STATE.get(Keys.VS_SOURCE_KEY)])
        (ra, va), (rb, vb) = ((other, vo), (ref, base)) if rp.capture_columns(ref, other, runs) else \
            ((ref, base), (other, vo))
        name_a = rp.capture_column_name("A", ra.source_name, va.snapshot.version, runs.get(ra.source_key, ("", ""))[1])
        name_b = rp.capture_column_name("B", rb.source_name, vb.snapshot.version, runs.get(rb.source_key, ("", ""))[1])
        same = rp.identical_files_note(by_key[ra.source_key].source, by_key[rb.source_key].source)
        if same:
            st.info(same, icon=":material/difference:")
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
            with st.container(key=Keys.CMP_SEQ):  # one comparison on the page: the Compare tab's
                st.vega_lite_chart(sc.sequence_chart(seq, name_a, name_b, decode), width="stretch")
    st.markdown("**Side by side** (✱: differs)")
    show_table(cmp.table)
    parted = df.delivered_calls_caption(cmp)
    if parted is not None:
        st.caption(parted)
        left, right = st.columns(2)
        left.text(df.calls_only_text("A", cmp.calls_only_a))
        right.text(df.calls_only_text("B", cmp.calls_only_b))
