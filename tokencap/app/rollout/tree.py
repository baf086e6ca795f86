"""The Rollout page's Call tree tab: the tree (a long rollout's overview too), search, and the selected call's detail.

A helper of ``tokencap/app/rollout/rollout.py`` (not a page): layout and session state only; the
layout, labels and every fact come from `tokencap.views` (`tree`, `detail`, `linkproof`).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from tokencap.app import assets
from tokencap.app.rollout.common import figure_of, outcome, pick_call, show_table, tokenizer_in_use
from tokencap.app.state import Keys
from tokencap.views import vega
from tokencap.views.formatting import fmt_int, md_escape
from tokencap.views.model import RolloutView
from tokencap.views.rollout import breaks as bv
from tokencap.views.rollout import detail as dv
from tokencap.views.rollout import linkproof as lp
from tokencap.views.rollout import mask as mv
from tokencap.views.rollout import proof_chart as pc
from tokencap.views.rollout import rollout_page as rp
from tokencap.views.rollout import trainer as tw
from tokencap.views.rollout import tree as tv
from tokencap.views.widgets import selected_rows
from tokencap.views.words import TERMS, label, with_key

STATE = st.session_state


def _select(rk: str, key: str) -> None:
    """Select a node (from any control): its detail is shown and scrolled into view."""
    pick_call(rk, key)
    STATE[Keys.SCROLL_DETAIL] = True


def _clicked(chart_key: str, name: str) -> str | None:
    """The node a click on the chart ``name`` (the tree, or the overview) selected. That chart is drawn
    again under a new key (`_chart_key`), so its selection never lingers and the next click, on the same
    node too, is a fresh event; the other chart keeps its key, and the browser its drawing."""
    state = STATE.get(chart_key)
    nonces = STATE.setdefault(Keys.TREE_NONCE, {})
    nonces[name] = nonces.get(name, 0) + 1
    return tv.key_from_selection(state.get("selection") if state is not None else None)


def _chart_key(name: str, rk: str, anchor: Any) -> str:
    return f"{name}:{rk}:{anchor}:{STATE.get(Keys.TREE_NONCE, {}).get(name, 0)}"


def _remember_tree_click(chart_key: str, rk: str) -> None:
    key = _clicked(chart_key, "tree")
    if key is not None:
        _select(rk, key)


def _remember_overview(chart_key: str, rk: str, window_key: str, model: tv.TreeModel) -> None:
    """The overview: a drag across calls chooses the rows to zoom into; a click on a dot selects that node
    and moves the zoomed rows to it."""
    state = STATE.get(chart_key)
    window = tv.window_from_selection(model, state.get("selection") if state is not None else None)
    key = _clicked(chart_key, "tree_overview")
    if window is not None:
        STATE[window_key] = window
        return
    if key is not None:
        _select(rk, key)
        STATE[window_key] = tv.window_around(model, key, tv.DETAIL_SPAN)


def _remember_row(table_key: str, rk: str, frame: Any) -> None:
    rows = selected_rows(STATE.get(table_key))
    if rows:
        _select(rk, frame["key"].iloc[rows[0]])


def _remember_pick(pick_key: str, rk: str) -> None:
    value = STATE.get(pick_key)
    if value:
        _select(rk, value)


def _find(find_key: str, rk: str, model: tv.TreeModel) -> None:
    matches = tv.search(model, STATE.get(find_key) or "")
    STATE[Keys.FIND_MATCHES] = (STATE.get(find_key) or "", len(matches))
    if matches:
        _select(rk, matches[0])


def show_tree_tab(view: RolloutView, rk: str) -> None:
    tokenizer, _, key = tokenizer_in_use()  # the tree's causes are the culprits': with the page's tokenizer
    model = tv.tree_of(view, bv.breaks_of(view, tokenizer, key), key)
    if not len(model):
        st.info("No calls to show.")
        return
    selected = rp.selected_node(view, STATE[Keys.SELECTED].get(rk))
    assert selected is not None  # a tree with a node opens on one (`opening_node`)
    STATE[Keys.SELECTED][rk] = selected
    chart_key = _chart_key("tree", rk, view.anchor)
    window = None
    if tv.needs_overview(model):
        # A long rollout: an overview of every node, and a zoomed detail of the depths in the
        # window, which stays put across reruns and moves only to keep the selection in view.
        window_key = f"tree_window:{rk}:{view.anchor}"
        followed_key = f"tree_window_for:{rk}:{view.anchor}"
        window = tv.follow_selection(model, selected, STATE.get(window_key), STATE.get(followed_key))
        STATE[window_key], STATE[followed_key] = window, selected
        overview_key = _chart_key("tree_overview", rk, view.anchor)
        st.caption(tv.tree_caption(model, window))
        overview = figure_of("tree overview", view, (key, window), lambda: tv.overview_chart(model, window))
        st.vega_lite_chart(overview, key=overview_key,
                           on_select=lambda: _remember_overview(overview_key, rk, window_key, model),
                           selection_mode=(vega.PICK, tv.ZOOM), width="stretch")
    else:
        st.caption(tv.tree_caption(model, None))
    # Drawn at the figure's own width: its rows, lanes and labels are sized in pixels.
    tree = figure_of("tree", view, (key, selected, window),
                     lambda: tv.tree_chart(model, selected, window=window, legend=window is None))
    st.vega_lite_chart(tree, key=chart_key, on_select=lambda: _remember_tree_click(chart_key, rk),
                       selection_mode=vega.PICK, width="content")
    if window is not None:
        slider_key = f"tree_window_w:{rk}:{view.anchor}"
        STATE[slider_key] = window
        st.slider("Calls shown in the zoomed view (in call order)", 1, model.max_order, key=slider_key,
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
    found = STATE.get(Keys.FIND_MATCHES)
    if found and found[0] == STATE.get(find_key):
        query, count = found
        st.caption(tv.search_caption(query, count))
    # Both expanders are filled only while open (opening one reruns the tabs): closed, the legend and
    # the table of every node are neither built nor sent with each click in the tree.
    marks = st.expander("What the marks mean", key=Keys.marks_open(rk), on_change="rerun")
    if marks.open:
        with marks:
            show_legend()
    table_key = f"calls_table:{rk}:{view.anchor}"
    nodes = st.expander(f"All {fmt_int(len(model))} nodes as a table (select a row to inspect it)",
                        key=Keys.nodes_open(rk), on_change="rerun")
    if nodes.open:
        with nodes:
            frame = tv.nodes_frame(model, view)
            st.dataframe(frame, hide_index=True, width="stretch", height=min(38 + 35 * len(frame), 420),
                         column_order=[c for c in frame.columns if c != "key"], key=table_key, on_select=lambda:
                         _remember_row(table_key, rk, frame), selection_mode="single-row")
    with st.container(key=Keys.DETAIL):
        # The detail of a call the reader picked (a node, a culprit, the picker, the search, a link's
        # call=). A rollout opened (a row, Next, Previous) has a call selected but none picked: one
        # button stands for its detail, ~15 elements and a chart that were ~0.05 s of the browser's
        # time of every rollout opened, below the first screen.
        if STATE[Keys.DETAIL_OF].get(rk) == selected:
            show_detail(view, selected)
        else:
            st.button(tv.detail_button_label(model, selected), key=Keys.detail_show(rk), icon=":material/info:",
                      on_click=_select, args=(rk, selected), help=tv.DETAIL_HELP)
    if STATE.pop(Keys.SCROLL_DETAIL, False):
        scroll_to_detail()


def show_legend() -> None:
    legend = tv.legend_frame()
    st.dataframe(legend.style.apply(
        lambda col: [f"background-color: {c}; color: {c}" for c in col] if col.name == "colour" else
        [""] * len(col)), hide_index=True, width="stretch",
        column_config={"colour": st.column_config.TextColumn(width="small")})


def scroll_to_detail() -> None:
    """Bring the selected call's detail into view once the page above it is drawn, unless its heading is
    already well on screen (``tokencap/app/assets/scroll_to_detail.js``; a new nonce each time, so the
    script runs again)."""
    STATE[Keys.SCROLL_NONCE] = STATE.get(Keys.SCROLL_NONCE, 0) + 1
    st.html(assets.script("scroll_to_detail.js", NONCE=str(STATE[Keys.SCROLL_NONCE])), unsafe_allow_javascript=True)


def show_link(view: RolloutView, d: Any) -> None:
    st.markdown("**Parent link**")
    outcome(d.link_outcome, d.link_ok)
    brk, break_drawn = show_break(view, d)
    # One chart of the two sequences: the break's proof when it draws one, else the link's (`lp.link_proof_shown`);
    # the digests stay either way.
    proof = lp.link_proof(view, d.ident) if lp.link_proof_shown(brk, break_drawn) else None
    if proof is not None:
        st.caption(md_escape(proof.summary()))
        tokenizer, _, tokenizer_key = tokenizer_in_use()
        decode = mv.token_decoder(tokenizer) if tokenizer is not None else None
        spec = figure_of("link proof", view, (d.key, tokenizer_key), lambda: pc.link_proof_chart(proof, decode))
        with st.container(key=Keys.proof_chart(d.key)):  # a chart with no selection has no key
            st.vega_lite_chart(spec, width="stretch")
        if decode is None:
            st.caption("Cells show token ids; load a tokenizer.json in the sidebar to see their text.")
    if d.link_checks is not None:
        show_table(dv.short_digests(d.link_checks))
        digests = dv.digest_lines(d.link_checks)
        if digests:
            st.caption("The digests in full: the parent's cumulative sequence (expected) and the same number of "
                       "tokens at the start of this call's prompt (found).")
            st.text(digests)  # plain text, as every text of the detail: st.code loads the syntax highlighter (1.5 MB)


def show_break(view: RolloutView, d: Any) -> tuple[Any, bool]:
    """Why the lineage breaks at this call (the diagnosis's words and hint), and its prompt against its
    predecessor with every divergence marked (decoded with a tokenizer); the break (or None) and whether
    its proof was drawn."""
    tokenizer, _, key = tokenizer_in_use()
    brk = bv.break_of(view, d.ident, tokenizer, key) if d.kind == tv.CALL else None
    if brk is None:
        return None, False
    with st.container(key=Keys.break_expander(d.key)):
        st.markdown(f"**Why the lineage breaks here** · {md_escape(label(brk.cause))}", help=with_key("", brk.cause))
        # A rollout read from output items: the trainer's words, as its culprit in the banner says them.
        st.warning(md_escape(tw.sentence_of(view, brk, bv.breaks_of(view, tokenizer, key))), icon=":material/link_off:")
        st.caption(md_escape(bv.hint(brk)))
        proof = lp.break_proof(view, brk) if brk.kind != "branch" else None
        if proof is not None:
            st.caption(md_escape(proof.summary()))
            decode = mv.token_decoder(tokenizer) if tokenizer is not None else None
            spec = figure_of("break proof", view, (d.key, key), lambda: pc.break_proof_chart(proof, decode))
            with st.container(key=Keys.break_proof_chart(d.key)):
                st.vega_lite_chart(spec, width="stretch")
            if proof.parent_text is not None and proof.prompt_text is not None:
                left, right = st.columns(2)
                left.caption(f"{md_escape(proof.parent)} had (decoded)")
                left.text(proof.parent_text or "∅")
                right.caption("this prompt has instead (decoded)")
                right.text(proof.prompt_text or "∅")
                decoded_with = next((n for n in brk.notes if n.startswith("text decoded with ")), None)
                if decoded_with:  # decoded by the rollout's model's tokenizer from the local cache
                # (docs/contract.md#tokenizers)
                    st.caption(md_escape(decoded_with[:1].upper() + decoded_with[1:]))
            elif decode is None:
                st.caption("Cells show token ids; load a tokenizer.json in the sidebar to see their text.")
    return brk, proof is not None


def show_detail(view: RolloutView, key: str) -> None:
    d = dv.call_detail(view, key)
    st.markdown(f"#### {md_escape(d.ident)} — {d.headline}")
    if d.facts:  # one element, a line each
        st.caption("  \n".join(md_escape(fact) for fact in d.facts))
    if d.kind == tv.REFUSAL:
        st.markdown("**Does it end the delivered chain?**")
        outcome(d.link_outcome, None, warn=bool(d.link_ok))
        if d.conditions is not None:
            show_table(d.conditions)
    elif d.link_outcome or d.link_checks is not None:
        show_link(view, d)
    else:
        show_break(view, d)
    if d.group is not None:
        st.markdown("**Retry group** (same linked parent, same full prompt)")
        st.caption(md_escape(d.group_text))
        show_table(d.group)
    if d.twins:
        st.markdown(f"**Token-identical twins** ({TERMS['twin']})")
        st.text(", ".join(d.twins))
    # The record as captured, under two expanders filled only while open: the lineage above is what a
    # reader opens a call for; these are reference (a table and a JSON viewer per item, ~0.05 s of the
    # browser's time of each rollout opened). Each stays open for the next call once opened.
    if d.fields is not None:
        fields = _reference_expander("fields", f"Fields ({len(d.fields)})", ":material/data_object:")
        if fields.open:
            with fields:
                show_table(d.fields)
    if d.items:
        items = _reference_expander("items", f"Output items ({len(d.items)})", ":material/format_list_bulleted:")
        if items.open:
            with items:
                for part in d.items:
                    tag = " · carries the tokens" if part.carries_tokens else ""
                    st.caption(md_escape(part.title + tag))
                    if part.kind == "text":
                        st.text(part.body)  # verbatim, wrapped; not st.code (see show_link)
                    else:
                        st.json(part.body, expanded=2)


def _reference_expander(name: str, label: str, icon: str) -> Any:
    """An expander of the detail that remembers, for the session, whether the reader left it open: the
    next call selected, another rollout or a visit to the Run page and back opens it as it was."""
    kept = STATE.setdefault(Keys.DETAIL_OPEN, {})
    box = st.expander(label, expanded=kept.get(name, False), key=Keys.detail_section_open(name), icon=icon,
                      on_change="rerun")
    kept[name] = bool(box.open)
    return box
