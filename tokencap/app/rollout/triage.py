"""The Rollout page's triage bar, for a rollout opened from the Run page: back to the run, and the
previous / next rollout of the run's table (its filter and sort).

A helper of ``tokencap/app/rollout/rollout.py`` (not a page): layout and session state only. Which rollout is
previous or next comes from `tokencap.views.run.triage` (the Run page's own filter and sort), the
words from `tokencap.views.rollout.rollout_page`.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from tokencap.app.rollout.sources import run_request
from tokencap.app.run import parts as run_parts
from tokencap.app.state import Keys, next_open_seq
from tokencap.services.requests import OpenRequest
from tokencap.views.formatting import md_escape
from tokencap.views.rollout import rollout_page as rp
from tokencap.views.run import triage as tr
from tokencap.views.run.filters import RunFilter

RUN_PAGE = str(Path(__file__).resolve().parents[1] / "run" / "run.py")  # absolute: found from any entry script

STATE = st.session_state


def triage_order(request: OpenRequest) -> tr.RunOrder | None:
    """The Run page's table (its filter and sort) this rollout was opened from, computed once per run and filter."""
    key = (id(request.frame), id(request.comparison), tuple(sorted(request.back_params.items())))
    memo = STATE.get(Keys.TRIAGE_ORDER)
    if memo is None or memo[0] != key:
        memo = STATE[Keys.TRIAGE_ORDER] = (key, tr.order_of(request))
    return memo[1]


def _step(delta: int) -> None:
    """Previous / next: open the rollout ``delta`` rows away in the run's table."""
    request, order = run_request(), None
    if request is not None:
        order = triage_order(request)
    if request is None or order is None:
        return
    seq = next_open_seq()
    step = tr.step_request(request, order, delta, seq)
    if step is not None and step.request is not None:
        STATE[Keys.OPEN_ROLLOUT] = step.request
    elif step is not None:
        STATE[Keys.TRIAGE_PROBLEM] = step.problem


def placed(request: OpenRequest) -> OpenRequest:
    """The request with its place in the run's table: a run's rollout opened by a link (a reload) finds it
    once per opening in the run's scan (`run_parts.place_of_link`), so previous / next and "Rollout N of M"
    are there as on the way from the Run page."""
    if request.placed or STATE.get(Keys.TRIAGE_PLACED) == request.seq:
        return request
    STATE[Keys.TRIAGE_PLACED] = request.seq
    found = run_parts.place_of_link(request)
    if found is None:
        return request
    STATE[Keys.OPEN_ROLLOUT] = found
    return found


def show_triage(request: OpenRequest) -> None:
    """Back to the run, and previous / next in its filter (buttons, and the keys K and J)."""
    request = placed(request)
    order = triage_order(request)
    row = request.row
    with st.container(horizontal=True, vertical_alignment="center", gap="small", key=Keys.TRIAGE):
        st.page_link(RUN_PAGE, label="Back to the run", icon=":material/arrow_back:",
                     query_params=dict(request.back_params) or None)
        if order is not None and row is not None:
            st.button("Previous", icon=":material/arrow_upward:", key=Keys.TRIAGE_PREV, shortcut="K", on_click=_step,
                      args=(-1,), disabled=order.step(row, -1) is None, help="The rollout above in the run's table")
            filtered = bool(RunFilter.from_params(request.back_params).active)
            st.markdown(rp.triage_position(order.where(row), filtered), width="content")
            st.button("Next", icon=":material/arrow_downward:", key=Keys.TRIAGE_NEXT, shortcut="J", on_click=_step,
                      args=(1,), disabled=order.step(row, 1) is None, help="The rollout below in the run's table")
    problem = STATE.pop(Keys.TRIAGE_PROBLEM, None)
    if problem:
        st.warning(md_escape(problem), icon=":material/folder_off:")
