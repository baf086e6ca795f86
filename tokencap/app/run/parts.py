"""Parts of the Run page: rollout records, the run compared with, rewards and groups, joined rows.

A helper of ``tokencap/app/run/run.py`` (not a page): layout and session state only; every number
comes from `tokencap.views.run` (`compare`, `reward`). Widget values that must outlive the
page (a trip to the Rollout page and back) are copied into plain session-state keys in
callbacks, as the page does for its other inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import streamlit as st

from tokencap.app.run.loading import LoadedRun, load_any_path, load_uploads
from tokencap.app.state import Keys, next_open_seq
from tokencap.bundled import SAMPLE_DATA
from tokencap.run import DiffError
from tokencap.services import run_sources as rs
from tokencap.services.arguments import typed_path
from tokencap.services.requests import OpenRequest
from tokencap.services.scan_cache import Fingerprint, fingerprint, keep_scan_ready
from tokencap.services.uploads import Upload
from tokencap.views.formatting import md_escape, md_frame
from tokencap.views.run import compare as cv
from tokencap.views.run import records as rr
from tokencap.views.run import reward as rw
from tokencap.views.run import triage as tr
from tokencap.views.run.filters import CHANGE_LABELS, RunFilter, passing

APP_DIR = SAMPLE_DATA.parent  # the folder holding sample_data/: the checkout, or the installed package
STATE = st.session_state
RECORD_TYPES = ("jsonl", "json")


# --------------------------------------------------------------------------- rollout records


def _remember_records_upload() -> None:
    upload = STATE.get(_records_uploader_key())
    STATE[Keys.RUN_RECORDS_UPLOAD] = Upload(upload.name, upload.getvalue()) if upload is not None else None


def _remember_records_path() -> None:
    STATE[Keys.RUN_RECORDS_PATH] = (STATE.get(Keys.RUN_W_RECORDS_PATH) or "").strip()


def forget_records() -> None:
    """Drop the sidebar's rollout records (another run is opened: run A's records on run B would
    anchor B's rollouts on A's final answers and show A's rewards as B's)."""
    STATE[Keys.RUN_RECORDS_PATH] = ""
    STATE[Keys.RUN_RECORDS_UPLOAD] = None
    # A file uploader cannot be emptied from the server (the browser sends its files again);
    # a new key is a new, empty widget.
    STATE[Keys.RUN_RECORDS_UPLOADS_MADE] = STATE.get(Keys.RUN_RECORDS_UPLOADS_MADE, 0) + 1


def _records_uploader_key() -> str:
    made = STATE.get(Keys.RUN_RECORDS_UPLOADS_MADE, 0)
    return "run_records_uploader" if not made else f"run_records_uploader_{made}"


def sidebar_records() -> None:
    """Rollout records for the run (rewards, task groups, terminal attribution): an upload or a path."""
    if STATE.get(Keys.RUN_W_RECORDS_PATH) != STATE.get(Keys.RUN_RECORDS_PATH, ""):
        STATE[Keys.RUN_W_RECORDS_PATH] = STATE.get(Keys.RUN_RECORDS_PATH, "")
    with st.sidebar.expander("Rollout records", icon=":material/emoji_events:"):
        st.file_uploader("Records file (JSONL)", type=list(RECORD_TYPES), key=_records_uploader_key(),
                         on_change=_remember_records_upload,
                         help="The harness's rollout records: one JSON object a line with rollout_id, response, "
                              "reward, _ng_task_index, _ng_rollout_index. The run is scanned again with them "
                              "(tokencap scan RUN --final-responses FILE).")
        st.text_input("or its path on this machine", key=Keys.RUN_W_RECORDS_PATH, on_change=_remember_records_path)


def records_caption(name: str | None) -> None:
    if name:
        st.sidebar.caption(f"Rollout records: {md_escape(name)}")


# --------------------------------------------------------------------------- the run compared with


@dataclass(frozen=True, eq=False)
class Versus:
    """Run B: where it comes from, its table, its name on the page."""

    origin: rs.RunOrigin
    run: LoadedRun
    name: str


def _remember_vs(field: str, widget: str) -> None:
    value = STATE.get(widget)
    if field == "upload":
        value = Upload(value.name, value.getvalue()) if value is not None else None
    elif isinstance(value, str):
        value = value.strip()
    STATE[Keys.RUN_VS] = {**STATE.get(Keys.RUN_VS, {}), field: value}


COMPARE_PARAM = "run_vs"
"""The run compared with, in the URL: ``sample`` (the bundled run after a fix) or a path; an upload is not named."""


def _stop_comparing() -> None:
    STATE[Keys.RUN_VS] = {}


def compare_params() -> dict[str, str]:
    chosen: dict[str, Any] = STATE.get(Keys.RUN_VS) or {}
    if chosen.get("upload") is not None:
        return {}
    value = chosen.get("path") or ("sample" if chosen.get("sample") else "")
    return {COMPARE_PARAM: value} if value else {}


def sidebar_compare(app_dir: Path, default_page: bool) -> Versus | None:
    """The "compare with" inputs (the bundled run after a fix, a path, a table upload) and run B."""
    if Keys.RUN_VS not in STATE:  # first visit in this session: a link may name the run compared with
        named = str(st.query_params.get(COMPARE_PARAM, "")).strip()
        STATE[Keys.RUN_VS] = {"sample": True} if named == "sample" else {"path": named} if named else {}
    chosen: dict[str, Any] = STATE[Keys.RUN_VS]
    after = rs.sample_after_fix_path(app_dir) if default_page else None
    for field, widget in (("sample", Keys.RUN_W_VS_SAMPLE), ("path", Keys.RUN_W_VS_PATH),
                          ("records", Keys.RUN_W_VS_RECORDS)):
        if STATE.get(widget) != chosen.get(field, False if field == "sample" else ""):
            STATE[widget] = chosen.get(field, False if field == "sample" else "")
    with st.sidebar.expander("Compare with another run", icon=":material/compare_arrows:",
                             expanded=any(chosen.values())):
        if after is not None:
            st.toggle("The sample run after a fix", key=Keys.RUN_W_VS_SAMPLE, on_change=_remember_vs,
                      args=("sample", Keys.RUN_W_VS_SAMPLE),
                      help=f"{after.relative_to(app_dir)}: the same tasks captured again after a harness fix.")
        st.text_input("Run directory or scan table (.parquet)", key=Keys.RUN_W_VS_PATH, on_change=_remember_vs,
                      args=("path", Keys.RUN_W_VS_PATH))
        st.text_input("Its rollout records (optional)", key=Keys.RUN_W_VS_RECORDS, on_change=_remember_vs,
                      args=("records", Keys.RUN_W_VS_RECORDS))
        st.file_uploader("or upload its scan table", type=["parquet"], key=Keys.RUN_VS_UPLOADER,
                         on_change=_remember_vs, args=("upload", Keys.RUN_VS_UPLOADER))
        if any(chosen.values()):
            st.button("Stop comparing", icon=":material/close:", key=Keys.RUN_VS_CLOSE, on_click=_stop_comparing)
    return versus_of(chosen, app_dir, after)


def versus_of(chosen: dict[str, Any], app_dir: Path, after: Path | None) -> Versus | None:
    """Run B as ``chosen`` names it (the sidebar's inputs, or a link's ``run_vs``), loaded (cached for the
    server); ``after`` is the bundled run after a fix when the page shows the sample run."""
    upload: Upload | None = chosen.get("upload")
    if upload is not None:
        return Versus(rs.RunOrigin("parquet", upload.name, uploads=(upload,)), load_uploads((upload,)),
                      f"B ({upload.name})")
    path = chosen.get("path") or (str(after) if after is not None and chosen.get("sample") else "")
    if not path:
        return None
    path = typed_path(path)  # from where `tokencap app` was started, not the server's directory
    records = (typed_path(chosen["records"]) if chosen.get("records") else "") or (
        str(rs.sample_records(app_dir, path) or "") if after is not None and Path(path) == after.resolve() else "")
    fps: dict[str, Fingerprint] = STATE.setdefault(Keys.RUN_FINGERPRINTS, {})
    if path not in fps:
        fps[path] = fingerprint(path)
    run = load_any_path(path, fps[path], records or None)
    kind = "parquet" if path.lower().endswith(".parquet") else "directory" if Path(path).is_dir() else "file"
    origin = rs.RunOrigin(kind, path, root=None if kind == "parquet" else path,
                          records=None if kind == "parquet" else records or None)
    return Versus(origin, run, f"B ({Path(path).name})")


def versus_words(versus: Versus) -> str:
    """Where run B was read from (the absolute path used) and the records it was scanned with."""
    if versus.origin.kind == "parquet":
        return f"{versus.name}: read from the scan table {versus.origin.label}"
    return f"{versus.name}: {versus.origin.label}, scanned {rs.records_words(versus.origin.records, APP_DIR)}"


@st.cache_resource(max_entries=4, show_spinner=False)
def _compared(key_a: str, key_b: str, names: tuple[str, str], _a: LoadedRun, _b: LoadedRun) -> cv.Comparison | str:
    try:
        return cv.compare_runs(_a.table, _a.frame, _b.table, _b.frame, names=names)
    except DiffError as exc:
        return str(exc)


def place_of_link(request: OpenRequest) -> OpenRequest | None:
    """A run's rollout opened by a link (a reload, a shared link): the request with its place in the run's
    table (frame and row; in a comparison, the joined rows and their position), found in the run's scan
    (the Run page's own cache, so "Back to the run" selects its row); None when the run cannot be read or
    does not hold it."""
    named = str(request.back_params.get(COMPARE_PARAM, "")).strip()
    side = str(request.side or "A") if named else "A"
    run_a = request if side != "B" else request.vs  # run A is the page's run, B the one compared with
    if run_a is None:
        return None
    path, records = str(run_a.path or ""), run_a.final_responses
    if not path or run_a.data is not None:
        return None
    fps: dict[str, Fingerprint] = STATE.setdefault(Keys.RUN_FINGERPRINTS, {})
    if path not in fps:
        fps[path] = fingerprint(path)
    run = load_any_path(path, fps[path], records)
    if run.frame is None:
        return None
    kind = "parquet" if path.lower().endswith(".parquet") else "directory" if Path(path).is_dir() else "file"
    origin = rs.RunOrigin(kind, path, root=path, records=records)
    source, rollout_id = request.source, request.rollout_id
    if not named or side not in ("A", "B"):
        row = tr.row_of(run.frame, source, rollout_id)
        return None if row is None else tr.with_place(request, origin, run.frame, row)
    sample = rs.sample_run_path(APP_DIR)
    after = rs.sample_after_fix_path(APP_DIR) if Path(path).resolve() == sample.resolve() else None
    versus = versus_of({"sample": True} if named == "sample" else {"path": named}, APP_DIR, after)
    if versus is None or versus.run.frame is None or run.table is None or versus.run.table is None:
        return None
    result = _compared(run.key, versus.run.key, (f"A ({Path(path).name})", versus.name), run, versus.run)
    if isinstance(result, str):
        return None
    position = tr.pair_position(result, side, tr.row_of(result.a if side == "A" else result.b, source, rollout_id))
    if position is None:
        return None
    return replace(request, comparison=result, row=position, origin=origin, origin_b=versus.origin)


def comparison(origin: rs.RunOrigin, run: LoadedRun, versus: Versus) -> cv.Comparison | None:
    """Run A against run B (cached per pair of runs), or None with the reason on the page."""
    if versus.run.error or versus.run.frame is None:
        st.error(f"**Could not open the run to compare with.** {md_escape(versus.run.error or 'no table')}",
                 icon=":material/error:")
        return None
    name_a = f"A ({Path(origin.root).name if origin.root else origin.label})"
    result = _compared(run.key, versus.run.key, (name_a, versus.name), run, versus.run)
    if isinstance(result, str):
        st.error(f"**Cannot compare the two runs.** {md_escape(result)}", icon=":material/error:")
        return None
    return result


# --------------------------------------------------------------------------- rewards and groups


def show_rewards(origin: rs.RunOrigin, frame: pd.DataFrame, cmp: cv.Comparison | None, flt: RunFilter,
                 on_groups: Callable[[], None], unused_records: bool = False) -> None:
    """Reward of trainable vs masked rollouts, and the groups masking leaves without a learning signal."""
    runs = [(cmp.name_a, cmp.a), (cmp.name_b, cmp.b)] if cmp is not None else [("this run", frame)]
    st.markdown("#### Rewards and groups · does masking bias what the trainer learns?")
    st.caption(md_escape(rw.scope_words(len(runs[0][1]), bool(flt.active), len(runs))))
    rewarded = [(n, f) for n, f in runs if rw.has_rewards(f)]
    grouped = [(n, f) for n, f in runs if rw.has_groups(f)]
    if not rewarded and not grouped:
        hint = rw.RECORDS_HINT
        if unused_records:  # given, but none applies: say why, not "pass the records"
            hint = rr.records_unused_hint(rs.records_name(origin.records, STATE.get(Keys.RUN_RECORDS_UPLOAD)) or "")
        elif origin.kind == "parquet":
            hint += (" This run is a scan table: scan it again with its records "
                     "(`tokencap scan RUN -o RESULT.parquet --final-responses records.jsonl`).")
        st.info(hint, icon=":material/emoji_events:")
        return
    left, right = st.columns([1.15, 1], gap="small")
    with left, st.container(border=True):
        if rewarded:
            _chart_and_words(rw.reward_spec(rewarded), "run_reward_figure", rewarded, rw.reward_bias, cmp)
        else:
            st.info("No reward in the rollout records: the trainable/masked reward comparison needs `reward`.")
    with right, st.container(border=True):
        if grouped:
            _chart_and_words(rw.groups_spec(grouped), "run_groups_figure", grouped, rw.group_summary, cmp)
            st.segmented_control("Show the rollouts of groups with", list(rw.GROUP_FILTERS), key=Keys.RUN_W_GROUPS,
                                 format_func=rw.GROUP_FILTERS.__getitem__, on_change=on_groups)
        else:
            st.info("No task index in the rollout records (`_ng_task_index`): no groups to judge.")
    if rewarded:  # the page's whole width: its columns are cut off in half of it at 1280 px
        # Filled only while open (opening it reruns the page's body): a collapsed expander's content is
        # still sent and mounted, and each cell of an st.table is a Markdown element -- 110 of the Run
        # page's 169 on the sample run, mounted at every first render and every Back to the run.
        slices = st.expander("Reward per slice (trainable, masked, each mask reason)", key=Keys.RUN_REWARD_SLICES_OPEN,
                             on_change="rerun")
        if not slices.open:
            return
        with slices:
            for i, (name, f) in enumerate(rewarded):
                if cmp is not None:
                    st.caption(md_escape(name))
                with st.container(key=Keys.run_reward_slices(i)):
                    st.table(md_frame(rw.reward_slices_shown(f)), hide_index=True, border="horizontal")


def _chart_and_words(spec: dict[str, Any], key: str, runs: list[tuple[str, pd.DataFrame]],
                      verdict: Callable[[pd.DataFrame], Any], cmp: cv.Comparison | None) -> None:
    """A chart, then each run's verdict in words (a warning when it flags something)."""
    with st.container(key=key):  # a chart without a selection has no element id: its box carries the key
        st.vega_lite_chart(spec, width="stretch")
    for name, frame in runs:
        said = verdict(frame)
        (st.warning if said.flagged else st.caption)((f"{md_escape(name)}: " if cmp is not None else "")
                                                + md_escape(said.words()))


# --------------------------------------------------------------------------- joined rollouts


def show_pairs(cmp: cv.Comparison, flt: RunFilter, masks: dict[str, np.ndarray], masks_b: dict[str, np.ndarray],
               run_key: str, heading: Callable[..., None], column_config: dict[str, Any],
               back_position: Callable[[np.ndarray], tuple[int, int] | None] | None = None,
               scroll: Callable[[int], str] | None = None) -> int | None:
    """The joined rollouts passing the filters (either side); the position of the one selected. Back from a
    joined rollout opened here, its row is selected and scrolled into view, as on one run's table."""
    keep_a, keep_b = passing(cmp.a, masks), passing(cmp.b, masks_b)
    positions = cv.sorted_pairs(cmp, cv.passing_rows(cmp, keep_a, keep_b), flt)
    heading(flt, len(positions), len(cmp.rows), "joined rollouts")
    shown = cv.compare_table_frame(cmp, positions)
    config = {f"{name} {side}": column_config[name] for name in ("delivered", "calls") for side in "AB"}
    config["rollout A"] = column_config["rollout"]  # pinned, as on one run's table
    back = back_position(positions) if back_position is not None else None
    with st.container(key=Keys.RUN_TABLE_BOX):
        event = st.dataframe(shown, key=f"run_pairs:{run_key}:{flt.token}" + (f":{back[0]}" if back else ""),
                             on_select="rerun", selection_mode="single-row", hide_index=True, column_config=config,
                             height=min(38 + 35 * max(len(shown), 1), 560), width="stretch", placeholder="",
                             selection_default={"selection": {"rows": [back[1]]}} if back else None)
    if back and scroll is not None and STATE.pop(Keys.RUN_BACK_SCROLL, None) == back[0]:
        st.html(scroll(back[1]), unsafe_allow_javascript=True)
    picked = event.selection.rows if event is not None else []
    if picked and 0 <= int(picked[0]) < len(positions):
        return int(positions[int(picked[0])])
    return None


class _PairSide(NamedTuple):
    """One side of a joined rollout that its run has: the rollout, where it is, and the run."""

    side: str  # "A" or "B"
    source: str
    rollout_id: str
    located: rs.Located | None  # None: its file is not here
    where: rs.RunOrigin


def open_pair(origin: rs.RunOrigin, versus: Versus | None, cmp: cv.Comparison, position: int, flt: RunFilter,
              back_params: dict[str, str], open_request: Callable[[OpenRequest], None]) -> None:
    """Buttons opening a joined rollout's A or B capture; with both, on the Rollout page's Compare tab
    (`triage.pair_request`: each side named by its run, built with its records, previous / next kept)."""
    assert versus is not None
    sides: list[_PairSide | None] = []
    for side, frame, row, where in (("A", cmp.a, int(cmp.rows["row_a"].iloc[position]), origin),
                                    ("B", cmp.b, int(cmp.rows["row_b"].iloc[position]), versus.origin)):
        if row < 0:
            sides.append(None)
            continue
        source, rollout_id = str(frame["source"].iloc[row]), str(frame["rollout_id"].iloc[row])
        sides.append(_PairSide(side, source, rollout_id, rs.locate(where, source), where))
    change = CHANGE_LABELS[str(cmp.rows["change"].iloc[position])]
    with st.container(border=True, key=Keys.RUN_PAIR_OPEN):
        ids = " / ".join(md_escape(s.rollout_id) for s in sides if s is not None)
        st.markdown(f"**{ids}** · change: *{change}*"
                    + (" · opening either side shows the two captures on the Rollout page's Compare tab"
                       if all(s is not None and s.located is not None for s in sides) else ""))
        columns = st.columns(2)
        for i, (col, mine) in enumerate(zip(columns, sides, strict=True)):
            if mine is None:
                col.caption(f"Not in run {'AB'[i]}.")
                continue
            side, source, rollout_id, located, where = mine
            if located is None:
                col.caption(md_escape(rs.missing_message(where, source)))
                continue
            label = f"Open {side}: {md_escape(rollout_id)}"
            if col.button(label, key=Keys.run_open(side), icon=":material/open_in_new:", width="stretch"):
                step = tr.pair_request(cmp, position, side, (origin, versus.origin), next_open_seq(),
                                       back_params)
                if step.request is not None:
                    open_request(step.request)


def work_ahead() -> None:
    """What the Run page readies once it is drawn, for what a reader does next: a scan process for
    the next run typed in the sidebar. (The Rollout page's charts are Vega-Lite, whose code the Run
    page's own charts have loaded: nothing to load ahead in the browser.)"""
    keep_scan_ready()
