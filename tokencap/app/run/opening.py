"""Opening a rollout from the Run page: the request the Rollout page reads, and the switch to it.

A helper of ``tokencap/app/run/run.py`` (not a page). A row of the run's table is opened in two steps:
the table's selection callback (`row_clicked`) notes the row, and the fragment's rerun opens it first
thing (`open_clicked_row`), before anything of a page about to be left is drawn again. The request is
plain data (`tokencap.services.run_sources.open_request`): the rollout's file, its place in the run's
table (previous / next, the way back) and the run's ``run_*`` query parameters, so a reload or a
shared link of the rollout keeps its place.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from tokencap.app.run import parts as parts
from tokencap.app.state import Keys, next_open_seq
from tokencap.services import run_sources as rs
from tokencap.services.arguments import path_params
from tokencap.services.requests import OpenRequest
from tokencap.services.uploads import Upload, check_upload_for
from tokencap.views.formatting import md_escape
from tokencap.views.run import charts as rc
from tokencap.views.run import data as rd
from tokencap.views.run import triage as tr
from tokencap.views.run.filters import RunFilter
from tokencap.views.widgets import selected_rows

STATE = st.session_state
ROLLOUT_PAGE = str(Path(__file__).resolve().parents[1] / "rollout" / "rollout.py")  # absolute: from any entry script


def run_params(flt: RunFilter) -> dict[str, str]:
    """The page's ``run_*`` query parameters: the filter's, and the run compared with (``run_vs``)."""
    return {**flt.to_params(), **parts.compare_params(), **path_params(STATE.get(Keys.RUN_PATH, ""),
                                                                          bool(STATE[Keys.RUN_UPLOADS])),
            **rc.more_charts_params(bool(STATE.get(Keys.RUN_MORE_CHARTS)))}


def row_clicked(table_key: str, frame: pd.DataFrame, rows: np.ndarray) -> None:
    """The table's selection callback (before the fragment reruns): note the row picked, for
    `open_clicked_row`. The row shown selected on the way back notes nothing until it is clicked: a click
    on a selected row unselects it (the grid's toggle), and a reader clicking the row they came from
    means to open it again. Any other row unselected notes nothing."""
    picked = list(selected_rows(STATE.get(table_key)))
    hold = STATE.get(Keys.RUN_BACK_HOLD)
    if hold is not None and hold[0] == table_key and not picked:
        picked = list(hold[1])  # the held row, clicked again
        STATE.pop(Keys.RUN_BACK_HOLD, None)
    elif not picked or hold == (table_key, picked):
        return
    row = rd.row_at(frame, rows, picked[0])
    if row is not None:
        STATE[Keys.RUN_ROW_CLICKED] = (table_key, row)


def open_clicked_row(origin: rs.RunOrigin, frame: pd.DataFrame, run_key: str, flt: RunFilter) -> None:
    """At the top of the fragment's rerun, open the row `row_clicked` noted on this run's table (switches
    page) before the charts, filters and table are drawn again for a page about to be left (~0.1 s of
    the server's and the browser's time of a row click). A row whose file is not on this machine is
    left to `show_table`, which draws its warning under the table, as before."""
    clicked = STATE.pop(Keys.RUN_ROW_CLICKED, None)
    last = STATE.get(Keys.RUN_TABLE_LAST)
    if clicked is None or last is None or (last[0], last[2]) != (run_key, clicked[0]):
        return
    row = clicked[1]
    source = str(frame["source"].iloc[row])
    located = rs.locate(origin, source)
    if located is not None:
        open_located(located, source, str(frame["rollout_id"].iloc[row]), flt, records=origin.records,
                     place=(origin, frame, row))


def open_located(located: rs.Located, source: str, rollout_id: str, flt: RunFilter, vs: OpenRequest | None = None,
                 records: str | None = None, place: tuple[rs.RunOrigin, pd.DataFrame, int] | None = None) -> None:
    """Switch to the Rollout page on the rollout ``rollout_id`` of ``located``."""
    request = rs.open_request(located, source, rollout_id, seq=next_open_seq(), back_params=run_params(flt),
                              records=records)
    if vs is not None:
        request = replace(request, vs=vs)  # the other run's capture: the Rollout page opens its Compare tab on the two
    if place is not None:
        request = tr.with_place(request, *place)  # previous / next, and the way back to this row
    switch_to_rollout(request)


def first_row_request() -> OpenRequest | None:
    """The request that opens the first row of the table the Run page drew last (its filter and sort), as a
    click on it would: the Rollout page opens it when the reader goes there by the sidebar with no rollout
    open, instead of a bundled sample unrelated to the run (`STATE["run_default_open"]`)."""
    first = STATE.get(Keys.RUN_FIRST_ROW)
    if first is None:
        return None
    origin, frame, row, flt = first
    source = str(frame["source"].iloc[row])
    located = rs.locate(origin, source)
    if located is None:
        return None
    request = rs.open_request(located, source, str(frame["rollout_id"].iloc[row]), seq=next_open_seq(),
                              back_params=run_params(flt), records=origin.records)
    return tr.with_place(request, origin, frame, row)


def switch_to_rollout(request: OpenRequest) -> None:
    """Switch to the Rollout page on ``request``; its URL keeps the run's filters (``run_*``), so a reload or a
    shared link of the rollout still knows its place in the run's table (previous / next)."""
    STATE[Keys.OPEN_ROLLOUT] = request
    st.switch_page(ROLLOUT_PAGE, query_params=dict(request.back_params) or None)


def open_row(origin: rs.RunOrigin, frame: pd.DataFrame, row: int, flt: RunFilter) -> None:
    """Open row ``row`` of the run's table, or say its file is not here and offer an upload of it."""
    source = str(frame["source"].iloc[row])
    rollout_id = str(frame["rollout_id"].iloc[row])
    located = rs.locate(origin, source)
    if located is not None:
        open_located(located, source, rollout_id, flt, records=origin.records, place=(origin, frame, row))
        return
    # A table uploaded alone names files this machine does not have: say so, offer an upload.
    with st.container(border=True):
        st.warning(f"**Cannot open {md_escape(rollout_id)}: its source file is not here.**  \n"
                   f"{md_escape(rs.missing_message(origin, source))}", icon=":material/folder_off:")
        upload = st.file_uploader(f"Upload the file holding {md_escape(rollout_id)}", type=["json", "jsonl", "zip"],
                                  key=Keys.run_missing_upload(row))
        if upload is not None:
            candidate = Upload(upload.name, upload.getvalue())
            problem = check_upload_for(candidate, rollout_id)
            if problem:
                st.error(md_escape(problem), icon=":material/error:")
            else:
                open_located(rs.Located(name=candidate.name, data=candidate.data), source, rollout_id, flt,
                             records=origin.records, place=(origin, frame, row))
