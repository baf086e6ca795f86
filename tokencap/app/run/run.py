"""The Run page: every rollout of a run -- the charts to read first, then a table to drill into.

Run through `app.py` (the navigation entry point). This file lays out widgets and keeps
session state; the frame, filters, counts, figures and where a rollout lives come from
`tokencap.views.run` (`data`, `charts`, `source`), unit-tested without Streamlit.

Where the run comes from (the sidebar, `run_sources`), first match wins:
1. an upload: a scan table (``.parquet`` written by ``tokencap scan``, checked to have the
   scan table's columns and types), optionally with some of its rollouts' files; or rollout files (JSON, JSONL,
   a zip of a capture store, a rollouts file whose output items carry token ids) scanned in memory;
2. a path typed in the sidebar (``run_path`` in the URL: a reload or a link opens it), else
   the path given on the command line (``streamlit run app.py -- RUN_DIR``,
   ``tokencap app RUN_DIR``; a rollouts file of several records is a run too), scanned with a
   progress bar (a big run by a child process on every core, its table kept on disk;
   `tokencap.services.scan_cache.scan_directory`) -- or, for a ``.parquet`` file, read as a scan table;
3. the bundled sample run (``sample_data/run``; ``sample_data/`` while that is missing).
A path is scanned with its rollout records (rewards, task groups): the sidebar's upload or
path, else ``--final-responses FILE`` on the command line, else the sample run's bundled
records. "Compare with another run" (``run_parts``) adds run B: charts, tiles and the table
then show both, joined as ``tokencap diff`` joins them.
A scan is cached for the whole server per (absolute path, fingerprint of its files; taken
once per session and path, "Rescan" takes it again); an upload's table per its content.

Filters: `RunFilter` in the session (``Keys.RUN_FILTER``) (the one source of truth; the
widgets show it, chart clicks and widget changes replace it) mirrored into the URL's
``run_*`` query parameters, so a reload or a shared link opens the same view.

Opening a rollout -- the contract with the Rollout page. Selecting a table row puts an
`OpenRequest` (``tokencap/services/requests.py``: where the rollout's files are, its id, a
``seq`` new at every opening, the filters to return with, the run's records, a comparison's
other capture as ``vs``, and the row's place in the run for previous / next) in the session
under ``Keys.OPEN_ROLLOUT`` (``tokencap/app/state.py``)
and switches to the Rollout page, which opens exactly that rollout (a store rollout as
its own files only) and shows "Back to the run", returning here with the filters kept
and that row (the last one opened) selected and scrolled into view. The Rollout page's URL keeps
the ``run_*`` parameters, so a reload finds the rollout's place again (`parts.place_of_link`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from tokencap.app import assets
from tokencap.app.run import parts as parts
from tokencap.app.run.loading import LoadedRun, progress_in
from tokencap.app.run.opening import (
    first_row_request,
    open_clicked_row,
    open_row,
    row_clicked,
    run_params,
    switch_to_rollout,
)
from tokencap.app.run.sources import cli_arguments, sidebar_origin
from tokencap.app.state import Keys, open_request
from tokencap.bundled import SAMPLE_DATA
from tokencap.rollout import MASK_REASON_ORDER
from tokencap.run.table import STATUSES
from tokencap.services import run_sources as rs
from tokencap.views import trace, vega
from tokencap.views.formatting import md_escape
from tokencap.views.run import charts as rc
from tokencap.views.run import compare as cv
from tokencap.views.run import data as rd
from tokencap.views.run import records as rr
from tokencap.views.run import rollouts as ro
from tokencap.views.run import table as rt
from tokencap.views.run.bars import Bars, chart_bars
from tokencap.views.run.categories import PARAM_PREFIX, VERDICTS
from tokencap.views.run.filters import CHANGE_LABELS, CHANGES, SORTS, RunFilter, filter_masks, passing, sorted_rows
from tokencap.views.run.summary import run_metrics, single_call_warning
from tokencap.views.widgets import selected_rows
from tokencap.views.words import label

APP_DIR = SAMPLE_DATA.parent  # the folder holding sample_data/: the checkout, or the installed package

STATE = st.session_state
for _name, _default in ((Keys.RUN_FINGERPRINTS, {}), (Keys.RUN_UPLOADS, ()), (Keys.OPEN_ROLLOUT_SEQ, 0),
                        (Keys.RUN_CHART_NONCE, {})):
    if _name not in STATE:
        STATE[_name] = _default
if Keys.RUN_MORE_CHARTS not in STATE:  # a first load, a reload, a link: the URL says whether the other charts show
    STATE[Keys.RUN_MORE_CHARTS] = rc.more_charts_open(st.query_params.to_dict())


# --------------------------------------------------------------------------- filters


def current_filter() -> RunFilter:
    flt = STATE.get(Keys.RUN_FILTER)
    if not isinstance(flt, RunFilter):
        flt = RunFilter.from_params(st.query_params.to_dict())
        STATE[Keys.RUN_FILTER] = flt
    return flt


def _set_filter(flt: RunFilter) -> None:
    STATE[Keys.RUN_FILTER] = flt


def _sync_url(flt: RunFilter) -> None:
    wanted = run_params(flt)
    present = {k: st.query_params[k] for k in st.query_params if k.startswith(PARAM_PREFIX)}
    if present == wanted:
        return
    for k in present:
        if k not in wanted:
            del st.query_params[k]
    st.query_params.update(wanted)


WIDGETS = {  # widget key -> RunFilter field
    Keys.RUN_W_CHANGE: "change",
    Keys.RUN_W_GROUPS: "groups",
    Keys.RUN_W_VERDICT: "verdict",
    Keys.RUN_W_CONTIGUOUS: "contiguous",
    Keys.RUN_W_REASONS: "reasons",
    Keys.RUN_W_STATUSES: "statuses",
    Keys.RUN_W_QUERY: "query",
    Keys.RUN_W_SOURCE: "source",
    Keys.RUN_W_SORT: "sort",
    Keys.RUN_W_DESC: "descending",
}


def _widget_changed(key: str) -> None:
    name = WIDGETS[key]
    value = STATE.get(key)
    if name in ("reasons", "statuses", "change"):
        value = tuple(value or ())
    elif name == "descending":
        value = bool(value)
    else:
        value = value or ""
    _set_filter(current_filter().set(**{name: value}))


def _show_filter_in_widgets(flt: RunFilter) -> None:
    """Widgets show the filter (chart clicks and the way back change it behind them)."""
    for key, name in WIDGETS.items():
        value = getattr(flt, name)
        single = name in ("verdict", "groups", "contiguous")  # segmented controls: None when nothing is chosen
        value = list(value) if isinstance(value, tuple) else (value or None) if single else value
        if STATE.get(key) != value:
            STATE[key] = value


def _chart_clicked(chart_key: str, dimension: str) -> None:
    event = STATE.get(chart_key)
    hit = rc.clicked(event.get("selection") if event is not None else None)
    # The clicked chart is drawn under a new key, so its selection never lingers and the
    # next click on any of its bars is a fresh event. (A chart's element id also follows
    # its figure, so a chart whose counts changed is a new element anyway.)
    STATE[Keys.RUN_CHART_NONCE][dimension] = STATE[Keys.RUN_CHART_NONCE].get(dimension, 0) + 1
    if hit is not None:
        bar_dimension, key = hit
        _set_filter(current_filter().toggle(bar_dimension, key))


def filter_controls(flt: RunFilter, comparing: bool, items: bool = False) -> None:
    """The filters in one row under the charts (the first screen holds the table's first rows below them);
    for rollouts read from output items, NeMo RL's contiguity too."""
    if comparing:
        st.multiselect("Change from A to B (any of)", list(CHANGES), key=Keys.RUN_W_CHANGE,
                       format_func=CHANGE_LABELS.__getitem__, on_change=_widget_changed, args=(Keys.RUN_W_CHANGE,),
                       placeholder="any")
    with st.container(key=Keys.RUN_FILTERS, horizontal=True, gap="small", vertical_alignment="bottom"):
        st.segmented_control("Verdict", list(VERDICTS), key=Keys.RUN_W_VERDICT, on_change=_widget_changed,
                             args=(Keys.RUN_W_VERDICT,))
        st.multiselect("Status", list(STATUSES), key=Keys.RUN_W_STATUSES, on_change=_widget_changed,
                       args=(Keys.RUN_W_STATUSES,), placeholder="any")
        if items:  # rollouts read from output items: what NeMo RL's contiguity check says of them
            st.segmented_control("NeMo RL contiguity", list(ro.FILTERS), key=Keys.RUN_W_CONTIGUOUS,
                                 format_func=ro.CONTIGUITY_LABELS.__getitem__, on_change=_widget_changed,
                                 args=(Keys.RUN_W_CONTIGUOUS,), help=ro.CONTIGUITY_TEXT["not_contiguous"])
        st.multiselect("Mask reason (any of)", list(MASK_REASON_ORDER), key=Keys.RUN_W_REASONS, format_func=label,
                       on_change=_widget_changed, args=(Keys.RUN_W_REASONS,), placeholder="any")
        st.text_input("Rollout id contains", key=Keys.RUN_W_QUERY, on_change=_widget_changed, args=(Keys.RUN_W_QUERY,),
                      placeholder="search ids", icon=":material/search:")
        st.text_input("Source contains", key=Keys.RUN_W_SOURCE, on_change=_widget_changed, args=(Keys.RUN_W_SOURCE,),
                      placeholder="path or file", icon=":material/folder:")
        st.selectbox("Sort by", list(SORTS), key=Keys.RUN_W_SORT, format_func=SORTS.__getitem__,
                     on_change=_widget_changed, args=(Keys.RUN_W_SORT,))
        st.toggle("Descending", key=Keys.RUN_W_DESC, on_change=_widget_changed, args=(Keys.RUN_W_DESC,),
                  disabled=not flt.sort)


def table_heading(flt: RunFilter, shown: int, total: int, what: str = "rollouts") -> None:
    """The table's count and filter in words, the other charts' switch and "Clear filters", in one row whose
    right end stays empty: the table's hover toolbar stands there, above the table's top edge."""
    described = flt.describe()
    with st.container(key=Keys.RUN_TABLE_HEADING, horizontal=True, gap="small", vertical_alignment="center"):
        text = f"**{shown:,} of {total:,} {what}**"
        if described:
            text += " · filtered on " + " · ".join(f"*{md_escape(t)}*" for _, t in described)
        st.markdown(text + " · select a row to open it", width="stretch")
        more_charts_switch()
        if described:
            st.button("Clear filters", icon=":material/filter_alt_off:", key=Keys.RUN_CLEAR,
                      on_click=lambda: _set_filter(current_filter().cleared()), width="content")


# --------------------------------------------------------------------------- page parts


def _records_use(origin: rs.RunOrigin, run: LoadedRun) -> str:
    """How many rollouts the run's records apply to, when not all (issue 37: never "with" unused records)."""
    if not origin.records or run.table is None:
        return ""
    name = rs.records_name(origin.records, STATE.get(Keys.RUN_RECORDS_UPLOAD)) or origin.records
    return rr.records_use_words(name, rr.records_applied(run.table), run.table.num_rows)


def show_header(origin: rs.RunOrigin, run: LoadedRun, cmp: cv.Comparison | None,
                versus: parts.Versus | None = None) -> None:
    st.markdown(f"## Run · {md_escape(origin.label)}")
    frame = run.frame
    assert frame is not None
    how = {"directory": "scanned", "file": "scanned", "upload": "scanned in memory",
           "parquet": "read from the scan table"}[origin.kind]
    st.caption(f"{len(frame):,} rollout{'s' if len(frame) != 1 else ''} · {how}"
               + (f" in {run.seconds:.1f} s" if run.seconds >= 0.05 and origin.kind != "parquet" else "")
               + ("" if origin.kind == "parquet" else
                  " " + md_escape(rs.records_words(origin.records, APP_DIR, STATE.get(Keys.RUN_RECORDS_UPLOAD))
                                  + _records_use(origin, run)))
               + ".")
    if cmp is not None:
        st.markdown(f"**Compared with {md_escape(cmp.name_b)}** · {md_escape(cmp.join_words)}")
        if versus is not None:
            st.caption(md_escape(parts.versus_words(versus)))
        for note in cmp.summary.notes:
            st.warning(md_escape(note[0].upper() + note[1:]), icon=":material/warning:")
    metrics = run_metrics(frame) if cmp is None else cv.compare_metrics(cmp)
    if cmp is None:  # one row of compact tiles (`tokencap/app/assets/run_page.css`)
        tiles = st.container(key=Keys.RUN_TILES, horizontal=True, gap="small")
        columns = [tiles] * len(metrics)
    else:  # "241 → 259" needs a third of the width
        columns = [c for i in range(0, len(metrics), 3) for c in st.columns(3)]
    for col, m in zip(columns, metrics, strict=False):
        col.metric(m.label, m.value, delta=m.share or None, delta_color="off", delta_arrow="off",
                   help=md_escape(m.help) or None, border=True, height="stretch")
    warning = single_call_warning(frame)
    if warning:
        st.warning(md_escape(warning), icon=":material/build:")


def _chart(bars: Bars, flt: RunFilter, run_key: str, versus: Bars | None = None,
           names: tuple[str, str] = ("A", "B")) -> None:
    key = f"run_chart:{bars.dimension}:{run_key}:{STATE[Keys.RUN_CHART_NONCE].get(bars.dimension, 0)}"
    with st.container(border=True, key=Keys.run_box(bars.dimension)):
        st.vega_lite_chart(rc.bar_spec(bars, flt.active_keys(bars.dimension), versus, names), key=key,
                           on_select=lambda k=key, d=bars.dimension: _chart_clicked(k, d),
                           selection_mode=vega.PICK, width="stretch")


def chart_pairs(frame: pd.DataFrame, masks: dict[str, np.ndarray], cmp: cv.Comparison | None,
                masks_b: dict[str, np.ndarray] | None) -> dict[str, tuple[Bars, Bars | None]]:
    if cmp is None:
        return {b.dimension: (b, None) for b in chart_bars(frame, masks)}
    return {a.dimension: (a, b) for a, b in cv.paired_bars(cmp, masks, masks_b or {})}


def show_other_charts(pairs: dict[str, tuple[Bars, Bars | None]], flt: RunFilter, run_key: str,
                      names: tuple[str, str]) -> None:
    for row in rc.ROWS:
        for col, d in zip(st.columns(2, gap="small"), row, strict=False):
            with col, trace.span(f"run chart {d}"):
                _chart(pairs[d][0], flt, run_key, pairs[d][1], names)


def _more_charts_changed() -> None:
    STATE[Keys.RUN_MORE_CHARTS] = bool(STATE.get(Keys.RUN_W_MORE))


def more_charts_switch() -> None:
    """The switch that opens the other charts (closed at first; ``run_charts=1`` in the URL keeps it open),
    in the table's heading: the charts it opens are drawn above it, under the first two."""
    STATE[Keys.RUN_W_MORE] = STATE[Keys.RUN_MORE_CHARTS]
    st.toggle(rc.MORE_LABEL, key=Keys.RUN_W_MORE, on_change=_more_charts_changed, width="content")


def _column(name: str) -> Any:
    """A column of the run's table: its fixed width and its header's tooltip (`tokencap.views.run.table`)."""
    header, width, help_ = rd.TABLE_COLUMNS[name], rt.WIDTHS[name], rt.HELP[name]
    if name == "delivered_fraction":
        return st.column_config.ProgressColumn(header, width=width, min_value=0.0, max_value=1.0, format="percent",
                                               help=help_)
    if name in rt.TEXT:
        return st.column_config.TextColumn(header, width=width, help=help_, pinned=name in rt.PINNED)
    return st.column_config.NumberColumn(header, width=width, format="%d", help=help_)


# Header -> column: every width fixed (a column sized by the browser changed width on the way back), the
# rollout id pinned (scrolled right to the source or the error, a row still says which rollout it is).
COLUMN_CONFIG = {rd.TABLE_COLUMNS[name]: _column(name) for name in rd.TABLE_COLUMNS}
# Rollouts read from output items add NeMo RL's contiguity as the last column.
COLUMN_CONFIG[ro.TABLE_HEADER] = st.column_config.TextColumn(ro.TABLE_HEADER, width=90,
                                                             help=ro.CONTIGUITY_TEXT["not_contiguous"])


def show_table(origin: rs.RunOrigin, frame: pd.DataFrame, flt: RunFilter, masks: dict[str, np.ndarray],
               run_key: str) -> None:
    keep = passing(frame, masks)
    rows = sorted_rows(frame, keep, flt)
    # The sidebar's Rollout link opens this table's first row (`opening.first_row_request`), not a sample.
    STATE[Keys.RUN_FIRST_ROW] = (origin, frame, int(rows[0]), flt) if len(rows) else None
    STATE[Keys.RUN_DEFAULT_OPEN] = first_row_request
    table_heading(flt, len(rows), len(frame))
    back = _back_position(frame, rows)  # the row just inspected, when coming back from it
    drawn = (STATE.get(Keys.RUN_TABLE_LAST) or (None,) * 3)[2]
    table_key = _table_key(run_key, flt, back)
    shown = rd.table_frame(frame, rows)
    with st.container(key=Keys.RUN_TABLE_BOX):
        event = st.dataframe(shown, key=table_key, selection_mode="single-row",
                             on_select=lambda: row_clicked(table_key, frame, rows),
                             hide_index=True, height=min(38 + 35 * max(len(shown), 1), TABLE_HEIGHT),
                             column_config=COLUMN_CONFIG, width="stretch", lazy=False, placeholder="",
                             selection_default={"selection": {"rows": [back[1]]}} if back else None)
    picked = list(event.selection.rows) if event is not None else []
    if back and STATE.pop(Keys.RUN_BACK_SCROLL, None) == back[0]:
        st.html(scroll_to_row(back[1]), unsafe_allow_javascript=True)
    # The row shown selected on the way back (by a new table, whatever the filter) is not a request to
    # open it again (until it changes).
    if back and table_key != drawn:
        STATE[Keys.RUN_BACK_HOLD] = (table_key, [back[1]])
    hold = STATE.get(Keys.RUN_BACK_HOLD)
    if hold is not None and hold != (table_key, picked):
        STATE.pop(Keys.RUN_BACK_HOLD, None)
        hold = None
    if picked and hold is None:
        row = rd.row_at(frame, rows, int(picked[0]))
        if row is not None:
            open_row(origin, frame, row, flt)


def _table_key(run_key: str, flt: RunFilter, back: tuple[int, int] | None) -> str:
    """The table's widget key: the same across a change of filter or run, so the browser updates the
    grid in place (a new grid waits ~0.3 s for its layout); new with each way back (a new selection).
    Streamlit keeps a keyed table's selection when its data changes, so a table showing a selected row
    (the row inspected, on the way back; a rollout that could not be opened) gets a new key when the
    filter or the run changes: the same position in other rows must never open a rollout nobody picked.
    """
    epoch = int(STATE.get(Keys.RUN_TABLE_EPOCH, 0))
    last = STATE.get(Keys.RUN_TABLE_LAST)  # (run_key, filter token, table key) of the table drawn last
    if last is not None and last[:2] != (run_key, flt.token) and selected_rows(STATE.get(last[2])):
        epoch += 1
        STATE[Keys.RUN_TABLE_EPOCH] = epoch
    key = f"run_table:{epoch}" + (f":{back[0]}" if back else "")
    STATE[Keys.RUN_TABLE_LAST] = (run_key, flt.token, key)
    return key


TABLE_HEIGHT = 560
ROW_HEIGHT = 35


def _back_position(frame: pd.DataFrame | cv.Comparison, rows: np.ndarray) -> tuple[int, int] | None:
    """(seq, position in the table) of the rollout last opened from this table (a run's frame, or the joined
    rows of a comparison), when it is shown."""
    request = open_request()
    if request is None or request.row is None or \
            (request.comparison if isinstance(frame, cv.Comparison) else request.frame) is not frame:
        return None
    hits = np.flatnonzero(rows == request.row)
    if not len(hits):
        return None
    if STATE.get(Keys.RUN_BACK_SEEN) != request.seq:
        STATE[Keys.RUN_BACK_SEEN] = STATE[Keys.RUN_BACK_SCROLL] = request.seq
    return request.seq, int(hits[0])


def scroll_to_row(position: int) -> str:
    """A script (no data but a row number) that scrolls the page to the table and the table to a row."""
    top = max(0, ROW_HEIGHT * int(position) - TABLE_HEIGHT // 2)
    return assets.script("scroll_to_row.js", TOP=str(top))


# --------------------------------------------------------------------------- page


@st.fragment
def run_body(origin: rs.RunOrigin, frame: pd.DataFrame, versus: parts.Versus | None, cmp: cv.Comparison | None,
             run_key: str) -> None:
    """What a click changes -- the charts, the filters, the table -- as a fragment: a bar click, a filter or
    a row reruns this alone, not the sidebar, the scan or the header (a change of run reruns the page).

    First screen (1280x800): the mask-reason chart beside the filters, then the table; the other charts
    open with a switch (`more_charts_shown`) and are computed only while it is on. The rewards and
    groups follow the table, outside the fragment."""
    with trace.span("run body"):
        flt = current_filter()
        if STATE.get(Keys.RUN_GROUPS_DRAWN, flt.groups) != flt.groups:
            st.rerun(scope="app")  # the rewards' group control, outside this fragment, shows the filter too
        _sync_url(flt)
        if cmp is None:
            flt = flt.set(change=())  # nothing to compare with: no change to filter on
            open_clicked_row(origin, frame, run_key, flt)
        masks = filter_masks(cmp.a if cmp is not None else frame, flt)
        masks_b = filter_masks(cmp.b, flt) if cmp is not None else None
        _show_filter_in_widgets(flt)
        pairs = chart_pairs(frame, masks, cmp, masks_b)
        names = (cmp.name_a, cmp.name_b) if cmp is not None else ("A", "B")
        if cmp is not None:
            _chart(cv.change_bars(cmp, masks, masks_b or {}), flt, run_key)
        # The first screen: why rollouts are masked and why their lineage broke, side by side.
        for col, d in zip(st.columns(len(rc.FIRST_ROW), gap="small"), rc.FIRST_ROW, strict=False):
            with col, trace.span(f"run chart {d}"):
                _chart(pairs[d][0], flt, run_key, pairs[d][1], names)
        filter_controls(flt, cmp is not None, ro.has_items(frame))
        if STATE[Keys.RUN_MORE_CHARTS]:
            show_other_charts(pairs, flt, run_key, names)
        if cmp is None:
            show_table(origin, frame, flt, masks, run_key)
        else:
            picked = parts.show_pairs(cmp, flt, masks, masks_b or {}, run_key, table_heading, COLUMN_CONFIG,
                                      lambda rows: _back_position(cmp, rows), scroll_to_row)
            if picked is not None:
                parts.open_pair(origin, versus, cmp, picked, flt, run_params(flt), switch_to_rollout)


def main() -> None:
    # First: in place before a scan starts. The same element carries the table's cell tooltips (a script of
    # numbers and column names, no run data).
    st.html(assets.style_tag("run_page.css") + assets.script("cell_titles.js", SETTINGS=rt.cell_titles_settings()),
            unsafe_allow_javascript=True)
    with progress_in(st.empty()):  # a scan's progress bar, at one position whether a run is scanned or not
        origin, run = sidebar_origin()
        versus = parts.sidebar_compare(APP_DIR, default_page=not cli_arguments().path and not STATE.get(Keys.RUN_PATH)
                                       and not STATE[Keys.RUN_UPLOADS])
    flt = current_filter()
    _sync_url(flt)  # a run that cannot be opened is named in the URL too: a reload shows this error
    if run.error or run.frame is None:
        STATE[Keys.RUN_FIRST_ROW] = None  # no run: the Rollout page has no row of it to open
        st.markdown("## Run")
        title, problem = rs.scan_problem(run.error or "no table", origin.records, STATE.get(Keys.RUN_RECORDS_UPLOAD))
        st.error(f"**{title}** {md_escape(problem)}", icon=":material/error:")
        return
    frame = run.frame
    cmp = parts.comparison(origin, run, versus) if versus is not None else None
    with trace.span("run header"):
        show_header(origin, run, cmp, versus)
    if not len(frame):
        st.info("This run holds no rollout.")
        return
    run_key = run.key + (versus.run.key if versus is not None and cmp is not None else "")
    STATE[Keys.RUN_GROUPS_DRAWN] = current_filter().groups  # what the rewards below show, in this run
    run_body(origin, frame, versus, cmp, run_key)
    # Below the table, outside the fragment: a click on the run's charts or table leaves them be.
    with trace.span("run rewards"):
        parts.show_rewards(origin, frame, cmp, current_filter(), lambda: _widget_changed(Keys.RUN_W_GROUPS),
                           unused_records=bool(origin.records) and run.table is not None
                           and rr.records_applied(run.table) == 0)
    parts.work_ahead()


main()
