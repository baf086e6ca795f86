"""The Run page: every rollout of a run -- the charts to read first, then a table to drill into.

Run through `app.py` (the navigation entry point). This file lays out widgets and keeps
session state; the frame, filters, counts, figures and where a rollout lives come from
`tokencap.views.run_data`, `run_charts` and `run_source`, unit-tested without Streamlit.

Where the run comes from (sidebar), first match wins:
1. an upload: a scan table (``.parquet`` written by ``tokencap scan``, checked against
   SPEC 11), optionally with some of its rollouts' files; or rollout files (JSON, JSONL,
   a zip of a capture store) scanned in memory;
2. the path given on the command line (``streamlit run app.py -- RUN_DIR``,
   ``tokencap app RUN_DIR``), scanned with a progress bar -- or, for a ``.parquet``
   file, read as a scan table;
3. the bundled sample run (``sample_data/run``; ``sample_data/`` while that is missing).
A scan is cached for the whole server per (absolute path, fingerprint of its files); the
fingerprint is taken once per session and path ("Rescan" takes it again), so a rerun
never walks the run. An upload's table is cached per its content.

Filters: `RunFilter` in ``st.session_state["run_filter"]`` (the one source of truth; the
widgets show it, chart clicks and widget changes replace it) mirrored into the URL's
``run_*`` query parameters, so a reload or a shared link opens the same view.

Opening a rollout -- the contract with the Rollout page. Selecting a table row sets::

    st.session_state["open_rollout"] = {
        "path": absolute path of the run's directory, or of the rollout's file when the run
                is one file; None when the rollout lives in an uploaded file,
        "source": the row's ``source`` (relative to "path"; ``sub/R.tokens.*`` for a store rollout),
        "rollout_id": the row's rollout id,
        "seq": a number new at every opening (the Rollout page selects the rollout once per seq),
        "back_params": the ``run_*`` query parameters of the current filters,
        "name", "data": the uploaded file's name and bytes (only when "path" is None),
        "frame", "row", "origin": the run's frame, the row number and the `RunOrigin`
                (previous / next in this filter, `tokencap.views.triage`),
    }

and switches to the Rollout page, which opens exactly that rollout (a store rollout as
its own files only) and shows "Back to the run", returning here with the filters kept
and that row (the last one opened) selected and scrolled into view.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import streamlit as st

from tokencap.run import DiscoveryError, ScanTableError, read_scan, scan_table
from tokencap.views import run_charts as rc
from tokencap.views import run_data as rd
from tokencap.views import run_source as rs
from tokencap.views import triage as tr
from tokencap.views.text import fmt_bytes, md_escape

APP_DIR = Path(__file__).resolve().parent.parent
ROLLOUT_PAGE = "app_pages/rollout.py"
CACHED_RUNS = 6

STATE = st.session_state
for _name, _default in (("run_fingerprints", {}), ("run_uploads", ()), ("open_rollout_seq", 0),
                        ("run_chart_nonce", {})):
    if _name not in STATE:
        STATE[_name] = _default


# --------------------------------------------------------------------------- loading a run


@dataclass(frozen=True, eq=False)
class LoadedRun:
    """A run's table and frame (or why there is none), as cached for every session."""

    table: pa.Table | None
    frame: pd.DataFrame | None
    seconds: float = 0.0
    error: str | None = None
    key: str = ""  # short digest of the cache key: widget keys of this run's table and charts


@dataclass
class RunCache:
    """Scanned runs for the whole server, most recent last (at most `CACHED_RUNS`).

    A plain mapping behind `st.cache_resource`, not a cached function, so the progress bar
    is drawn while a scan runs and never replayed from the cache. Sessions run in threads
    of their own, so every access holds the lock.
    """

    runs: OrderedDict[tuple, LoadedRun]
    lock: threading.Lock

    def get(self, key: tuple) -> LoadedRun | None:
        with self.lock:
            run = self.runs.get(key)
            if run is not None:
                self.runs.move_to_end(key)
            return run

    def put(self, key: tuple, run: LoadedRun) -> LoadedRun:
        run = LoadedRun(run.table, run.frame, run.seconds, run.error,
                        hashlib.sha1(repr(key).encode("utf-8", "surrogateescape")).hexdigest()[:10])
        with self.lock:
            self.runs[key] = run
            while len(self.runs) > CACHED_RUNS:
                self.runs.popitem(last=False)
        return run


@st.cache_resource(show_spinner=False)
def run_cache() -> RunCache:
    return RunCache(OrderedDict(), threading.Lock())


def _remember(key: tuple, run: LoadedRun) -> LoadedRun:
    return run_cache().put(key, run)


def _cached(key: tuple) -> LoadedRun | None:
    return run_cache().get(key)


def _progress_bar(what: str) -> tuple[Any, Any]:
    bar = st.progress(0.0, text=f"{what}…")

    def update(done: int, total: int) -> None:
        bar.progress(min(1.0, done / total) if total else 0.0, text=f"{what}: {done:,} of {total:,} rollouts")

    return bar, update


def load_path(path: str, fp: rs.Fingerprint) -> LoadedRun:
    key = ("path", path, fp.signature)
    run = _cached(key)
    if run is not None:
        return run
    bar, update = _progress_bar(f"Scanning {md_escape(path)}")
    start = time.perf_counter()
    try:
        # In this process: a worker pool started from inside the Streamlit server would re-run the
        # page script in every worker (multiprocessing re-imports __main__). Big runs are scanned on
        # the command line (`tokencap scan RUN -o run.parquet --workers N`, or on Ray) and the table
        # opened here.
        table = scan_table(path, workers=1, progress=update)
    except DiscoveryError as exc:
        bar.empty()
        return LoadedRun(None, None, error=str(exc))  # not cached: the path may appear
    except Exception as exc:  # noqa: BLE001 -- a worker that died, a file that vanished: one message, no traceback
        bar.empty()
        return LoadedRun(None, None, error=f"{path}: the scan stopped ({type(exc).__name__}: {exc}); "
                                           "try Rescan, or scan it with tokencap scan to see which rollout")
    bar.empty()
    return _remember(key, LoadedRun(table, rd.run_frame(table), time.perf_counter() - start))


def load_table_file(path: str, fp: rs.Fingerprint) -> LoadedRun:
    """A scan table named on the command line (``tokencap app RESULT.parquet``)."""
    key = ("table", path, fp.signature)
    run = _cached(key)
    if run is not None:
        return run
    start = time.perf_counter()
    try:
        table = read_scan(path)
    except ScanTableError as exc:
        return LoadedRun(None, None, error=f"{exc}. Give a table written by: tokencap scan RUN -o RESULT.parquet")
    return _remember(key, LoadedRun(table, rd.run_frame(table), time.perf_counter() - start))


def load_uploads(uploads: tuple[rs.Upload, ...]) -> LoadedRun:
    key = ("upload", rs.uploads_key(uploads))
    run = _cached(key)
    if run is not None:
        return run
    start = time.perf_counter()
    tables = [u for u in uploads if u.is_table]
    if len(tables) > 1:
        return LoadedRun(None, None, error="Upload one scan table (.parquet) at a time; "
                                           f"these are several: {', '.join(u.name for u in tables)}.")
    if tables:
        try:
            table = rs.table_of_parquet(tables[0])
        except ScanTableError as exc:
            return LoadedRun(None, None, error=f"{exc}. Upload a table written by: tokencap scan RUN -o RESULT.parquet")
    else:
        bar, update = _progress_bar("Scanning the uploaded files")
        table = rs.table_of_uploads(uploads, progress=update)
        bar.empty()
    return _remember(key, LoadedRun(table, rd.run_frame(table), time.perf_counter() - start))


def cli_argument() -> str | None:
    args = [a for a in sys.argv[1:] if a.strip()]
    return args[0] if args else None


def _remember_uploads() -> None:
    files = STATE.get("run_uploader") or []
    STATE["run_uploads"] = tuple(rs.Upload(f.name, f.getvalue()) for f in files)


def _forget_uploads() -> None:
    STATE["run_uploads"] = ()


def _rescan(path: str) -> None:
    STATE["run_fingerprints"].pop(path, None)


def sidebar_origin() -> tuple[rs.RunOrigin, LoadedRun]:
    """The run to show (upload, command-line path or the sample run) and its table."""
    st.sidebar.title(":material/table_chart: tokencap")
    st.sidebar.caption("Run overview: every rollout of a run, its verdict and why. Select a row to inspect it.")
    # The uploader's own value is lost when the page is left; the uploads live in
    # session state (set when the user changes them), so the way back keeps them.
    st.sidebar.file_uploader(
        "Open a run", type=list(rs.RUN_UPLOAD_TYPES), accept_multiple_files=True, key="run_uploader",
        on_change=_remember_uploads,
        help="A scan table (`tokencap scan RUN -o RESULT.parquet`), optionally with some of its rollouts' files; "
             "or rollouts to scan here: JSON, entries JSONL, or a zip of a capture-store directory.")
    cli = cli_argument()
    uploads: tuple[rs.Upload, ...] = STATE["run_uploads"]
    if uploads:
        names = ", ".join(u.name for u in uploads)
        st.sidebar.caption(f"Showing the upload: {md_escape(names)}")
        st.sidebar.button("Close the upload", icon=":material/close:", on_click=_forget_uploads, key="run_close_upload")
        loaded = load_uploads(uploads)
        if any(u.is_table for u in uploads):
            roots = _run_root_input() + ((cli,) if cli and Path(cli).is_dir() else ())
            label = next(u.name for u in uploads if u.is_table)
            return rs.RunOrigin("parquet", label, roots=roots, uploads=uploads), loaded
        return rs.RunOrigin("upload", names, uploads=uploads), loaded

    sample = rs.sample_run_path(APP_DIR)
    path = str(Path(cli).resolve()) if cli else str(sample)
    fps: dict[str, rs.Fingerprint] = STATE["run_fingerprints"]
    if path not in fps:
        fps[path] = rs.fingerprint(path)
    fp = fps[path]
    st.sidebar.markdown("**Run**" if cli else "**Sample run**")
    st.sidebar.code(path if cli else str(sample.relative_to(APP_DIR)), language=None, wrap_lines=True)
    if fp.exists:
        st.sidebar.caption(f"{fp.files:,} file{'s' if fp.files != 1 else ''}, {fmt_bytes(fp.size)}")
    st.sidebar.button("Rescan", icon=":material/refresh:", on_click=_rescan, args=(path,), key="run_rescan",
                      help="Scan again (files added or changed since this session first scanned the run).")
    label = path if cli else f"sample run ({sample.relative_to(APP_DIR)})"
    if path.lower().endswith(".parquet") and Path(path).is_file():
        return rs.RunOrigin("parquet", label, roots=_run_root_input()), load_table_file(path, fp)
    kind = "directory" if Path(path).is_dir() else "file"
    return rs.RunOrigin(kind, label, root=path), load_path(path, fp)


def _remember_root() -> None:
    STATE["run_root"] = (STATE.get("run_w_root") or "").strip()


def _run_root_input() -> tuple[str, ...]:
    """The run directory the user named for a table; kept in session state, so the way back keeps it."""
    if STATE.get("run_w_root") != STATE.get("run_root", ""):
        STATE["run_w_root"] = STATE.get("run_root", "")
    st.sidebar.text_input(
        "Run directory on this machine (optional)", key="run_w_root", on_change=_remember_root,
        help="Where the table's source paths start (the SOURCE it was scanned from), to open its rollouts.")
    root = STATE.get("run_root", "")
    return (root,) if root else ()


# --------------------------------------------------------------------------- filters


def current_filter() -> rd.RunFilter:
    flt = STATE.get("run_filter")
    if not isinstance(flt, rd.RunFilter):
        flt = rd.RunFilter.from_params(st.query_params.to_dict())
        STATE["run_filter"] = flt
    return flt


def _set_filter(flt: rd.RunFilter) -> None:
    STATE["run_filter"] = flt


def _sync_url(flt: rd.RunFilter) -> None:
    wanted = flt.to_params()
    present = {k: st.query_params[k] for k in st.query_params if k.startswith(rd.PARAM_PREFIX)}
    if present == wanted:
        return
    for k in present:
        if k not in wanted:
            del st.query_params[k]
    st.query_params.update(wanted)


WIDGETS = {  # widget key -> RunFilter field
    "run_w_verdict": "verdict",
    "run_w_reasons": "reasons",
    "run_w_statuses": "statuses",
    "run_w_query": "query",
    "run_w_source": "source",
    "run_w_sort": "sort",
    "run_w_desc": "descending",
}


def _widget_changed(key: str) -> None:
    name = WIDGETS[key]
    value = STATE.get(key)
    if name in ("reasons", "statuses"):
        value = tuple(value or ())
    elif name == "descending":
        value = bool(value)
    else:
        value = value or ""
    _set_filter(current_filter().set(**{name: value}))


def _show_filter_in_widgets(flt: rd.RunFilter) -> None:
    """Widgets show the filter (chart clicks and the way back change it behind them)."""
    for key, name in WIDGETS.items():
        value = getattr(flt, name)
        value = list(value) if isinstance(value, tuple) else (value or None) if name == "verdict" else value
        if STATE.get(key) != value:
            STATE[key] = value


def _chart_clicked(chart_key: str, dimension: str) -> None:
    event = STATE.get(chart_key)
    hit = rc.clicked(event.get("selection") if event is not None else None)
    # The clicked chart is drawn under a new key, so its selection never lingers and the
    # next click on any of its bars is a fresh event. (A chart's element id also follows
    # its figure, so a chart whose counts changed is a new element anyway.)
    STATE["run_chart_nonce"][dimension] = STATE["run_chart_nonce"].get(dimension, 0) + 1
    if hit is not None:
        bar_dimension, key = hit
        _set_filter(current_filter().toggle(bar_dimension, key))


def filter_controls(flt: rd.RunFilter) -> None:
    _show_filter_in_widgets(flt)
    top = st.columns([1.5, 2.6, 2.2], gap="small", vertical_alignment="bottom")
    with top[0]:
        st.segmented_control("Verdict", list(rd.VERDICTS), key="run_w_verdict", on_change=_widget_changed,
                             args=("run_w_verdict",))
    with top[1]:
        st.multiselect("Mask reason (any of)", list(rd.MASK_REASON_ORDER), key="run_w_reasons",
                       on_change=_widget_changed, args=("run_w_reasons",), placeholder="any")
    with top[2]:
        st.multiselect("Status", list(rd.STATUSES), key="run_w_statuses", on_change=_widget_changed,
                       args=("run_w_statuses",), placeholder="any")
    bottom = st.columns([2, 2, 2, 1.2], gap="small", vertical_alignment="bottom")
    with bottom[0]:
        st.text_input("Rollout id contains", key="run_w_query", on_change=_widget_changed, args=("run_w_query",),
                      placeholder="search ids", icon=":material/search:")
    with bottom[1]:
        st.text_input("Source contains", key="run_w_source", on_change=_widget_changed, args=("run_w_source",),
                      placeholder="path or file name", icon=":material/folder:")
    with bottom[2]:
        st.selectbox("Sort by", list(rd.SORTS), key="run_w_sort", format_func=rd.SORTS.get,
                     on_change=_widget_changed, args=("run_w_sort",))
    with bottom[3]:
        st.toggle("Descending", key="run_w_desc", on_change=_widget_changed, args=("run_w_desc",),
                  disabled=not flt.sort)


def table_heading(flt: rd.RunFilter, shown: int, total: int) -> None:
    described = flt.describe()
    cols = st.columns([8, 1.6], vertical_alignment="center")
    with cols[0]:
        text = f"**{shown:,} of {total:,} rollouts**"
        if described:
            text += " · filtered on " + " · ".join(f"*{md_escape(t)}*" for _, t in described)
        st.markdown(text + " · select a row to open it on the Rollout page")
    with cols[1]:
        if described:
            st.button("Clear filters", icon=":material/filter_alt_off:", key="run_clear",
                      on_click=lambda: _set_filter(current_filter().cleared()), width="stretch")


# --------------------------------------------------------------------------- page parts


def show_header(origin: rs.RunOrigin, run: LoadedRun) -> None:
    st.markdown(f"## Run · {md_escape(origin.label)}")
    frame = run.frame
    assert frame is not None
    how = {"directory": "scanned", "file": "scanned", "upload": "scanned in memory",
           "parquet": "read from the scan table"}[origin.kind]
    st.caption(f"{len(frame):,} rollout{'s' if len(frame) != 1 else ''} · {how}"
               + (f" in {run.seconds:.1f} s" if run.seconds >= 0.05 and origin.kind != "parquet" else "")
               + " · charts count the rollouts passing every other filter; click a bar to filter the table.")
    metrics = rd.run_metrics(frame)
    for col, m in zip(st.columns(len(metrics)), metrics):
        col.metric(m.label, m.value, delta=m.share or None, delta_color="off", delta_arrow="off",
                   help=m.help or None, border=True, height="stretch")
    warning = rd.single_call_warning(frame)
    if warning:
        st.warning(md_escape(warning), icon=":material/build:")


def show_charts(frame: pd.DataFrame, flt: rd.RunFilter, masks: dict[str, np.ndarray], run_key: str) -> None:
    bars = {b.dimension: b for b in rd.chart_bars(frame, masks)}
    for row in rc.ROWS:
        cols = st.columns(len(row), gap="small")
        for col, b in zip(cols, (bars[d] for d in row)):
            key = f"run_chart:{b.dimension}:{run_key}:{STATE['run_chart_nonce'].get(b.dimension, 0)}"
            with col, st.container(border=True):
                st.plotly_chart(rc.as_figure(rc.bar_figure(b, flt.active_keys(b.dimension))), key=key,
                                on_select=lambda k=key, d=b.dimension: _chart_clicked(k, d),
                                selection_mode="points", config=rc.CONFIG, width="stretch")


COLUMN_CONFIG = {
    "rollout": st.column_config.TextColumn("rollout", width="medium"),
    "verdict": st.column_config.TextColumn(width="small"),
    "mask reasons": st.column_config.TextColumn(width="medium"),
    "status": st.column_config.TextColumn(),
    "calls": st.column_config.NumberColumn(width="small", format="%d"),
    "delivered": st.column_config.ProgressColumn(width="small", min_value=0.0, max_value=1.0, format="percent",
                                                 help="share of the rollout's calls on the delivered chain"),
    "link failures": st.column_config.NumberColumn(width="small", format="%d",
                                                   help="parent links rejected, missing or unprovable"),
    "refusals": st.column_config.NumberColumn(width="small", format="%d", help="engine refusals"),
    "chains": st.column_config.NumberColumn(width="small", format="%d"),
    "quarantined": st.column_config.NumberColumn(width="small", format="%d"),
    "gen. tokens": st.column_config.NumberColumn(width="small", format="%d", help="generated tokens delivered"),
    "source": st.column_config.TextColumn(width="medium"),
    "error": st.column_config.TextColumn(width="large"),
}


def show_table(origin: rs.RunOrigin, frame: pd.DataFrame, flt: rd.RunFilter, masks: dict[str, np.ndarray],
               run_key: str) -> None:
    keep = rd.passing(frame, masks)
    rows = rd.sorted_rows(frame, keep, flt)
    table_heading(flt, len(rows), len(frame))
    back = _back_position(frame, rows)  # the row just inspected, when coming back from it
    table_key = f"run_table:{run_key}:{flt.token}" + (f":{back[0]}" if back else "")
    shown = rd.table_frame(frame, rows)
    with st.container(key="run_table_box"):
        event = st.dataframe(shown, key=table_key, on_select="rerun", selection_mode="single-row",
                             hide_index=True, height=min(38 + 35 * max(len(shown), 1), TABLE_HEIGHT),
                             column_config=COLUMN_CONFIG, width="stretch", lazy=False, placeholder="",
                             selection_default={"selection": {"rows": [back[1]]}} if back else None)
    picked = list(event.selection.rows) if event is not None else []
    if back and STATE.pop("run_back_scroll", None) == back[0]:
        st.html(scroll_to_row(back[1]), unsafe_allow_javascript=True)
        STATE["run_back_hold"] = (table_key, [back[1]])
    # The row shown selected on the way back is not a request to open it again (until it changes).
    hold = STATE.get("run_back_hold")
    if hold is not None and hold != (table_key, picked):
        STATE.pop("run_back_hold", None)
        hold = None
    if picked and hold is None:
        row = rd.row_at(frame, rows, int(picked[0]))
        if row is not None:
            open_row(origin, frame, row, flt)


TABLE_HEIGHT = 560
ROW_HEIGHT = 35


def _back_position(frame: pd.DataFrame, rows: np.ndarray) -> tuple[int, int] | None:
    """(seq, position in the table) of the rollout last opened from this table, when it is shown."""
    request = STATE.get("open_rollout")
    if not isinstance(request, dict) or request.get("frame") is not frame or not isinstance(request.get("row"), int):
        return None
    hits = np.flatnonzero(rows == request["row"])
    if not len(hits):
        return None
    if STATE.get("run_back_seen") != request.get("seq"):
        STATE["run_back_seen"] = STATE["run_back_scroll"] = request.get("seq")
    return int(request.get("seq") or 0), int(hits[0])


def scroll_to_row(position: int) -> str:
    """A script (no data but a row number) that scrolls the page to the table and the table to a row."""
    top = max(0, ROW_HEIGHT * int(position) - TABLE_HEIGHT // 2)
    return f"""<script>(function (n) {{
      const go = () => {{
        const box = document.querySelector('.st-key-run_table_box');
        const grid = box && box.querySelector('.dvn-scroller');
        if (!grid) return n-- > 0 && setTimeout(go, 100);
        box.scrollIntoView({{block: 'center'}});
        grid.scrollTop = {top};
      }};
      go();
    }})(50);</script>"""


def _open(origin: rs.RunOrigin, frame: pd.DataFrame, row: int, located: rs.Located, flt: rd.RunFilter) -> None:
    STATE["open_rollout_seq"] += 1
    STATE["open_rollout"] = tr.row_request(origin, frame, row, located, flt.to_params(), STATE["open_rollout_seq"])
    st.switch_page(ROLLOUT_PAGE)


def open_row(origin: rs.RunOrigin, frame: pd.DataFrame, row: int, flt: rd.RunFilter) -> None:
    source = str(frame["source"].iloc[row])
    rollout_id = str(frame["rollout_id"].iloc[row])
    located = rs.locate(origin, source)
    if located is not None:
        _open(origin, frame, row, located, flt)
        return
    # A table uploaded alone names files this machine does not have: say so, offer an upload.
    with st.container(border=True):
        st.warning(f"**Cannot open {md_escape(rollout_id)}: its source file is not here.**  \n"
                   f"{md_escape(rs.missing_message(origin, source))}", icon=":material/folder_off:")
        upload = st.file_uploader(f"Upload the file holding {md_escape(rollout_id)}", type=["json", "jsonl", "zip"],
                                  key=f"run_missing_upload:{row}")
        if upload is not None:
            candidate = rs.Upload(upload.name, upload.getvalue())
            problem = rs.check_upload_for(candidate, rollout_id)
            if problem:
                st.error(md_escape(problem), icon=":material/error:")
            else:
                _open(origin, frame, row, rs.Located(name=candidate.name, data=candidate.data), flt)


# --------------------------------------------------------------------------- page


def main() -> None:
    origin, run = sidebar_origin()
    if run.error or run.frame is None:
        st.markdown("## Run")
        st.error(f"**Could not open the run.** {md_escape(run.error or 'no table')}", icon=":material/error:")
        return
    frame = run.frame
    flt = current_filter()
    _sync_url(flt)
    show_header(origin, run)
    if not len(frame):
        st.info("This run holds no rollout.")
        return
    masks = rd.filter_masks(frame, flt)
    run_key = run.key
    show_charts(frame, flt, masks, run_key)
    filter_controls(flt)
    show_table(origin, frame, flt, masks, run_key)


main()
