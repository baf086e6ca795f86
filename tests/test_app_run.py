"""The app's Run page driven headless with `streamlit.testing.v1.AppTest`.

Expected numbers come from scanning the same run with `tokencap.run.scan_table`, so these
tests hold for whichever sample run is bundled (``sample_data/run`` or, until it exists,
``sample_data/``). AppTest cannot click a chart bar or a table row, so `send_selection`
hands the page the very message the browser sends for one (a widget state holding the
selection as JSON); tests/test_browser.py does the real clicks.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers_app import (
    AFTER_FIX,
    REPO,
    RUN_PAGE,
    SAMPLE_RECORDS,
    SAMPLE_RUN,
    SAMPLES,
    click_bar,
    escaped,
    headings,
    open_link,
    rerun,
    run_app,
    run_table,
    select_row,
    send_selection,
    shown_count,
)
from helpers_app import compare_with_the_sample_after_fix as _compare_with_the_sample_after_fix
from helpers_rollouts import make_run
from streamlit.proto.Block_pb2 import Block as BlockProto
from streamlit.testing.v1 import AppTest
from synth_snapshots import Capture

import tokencap.cli
import tokencap.run
from tokencap.app.run import loading as rl
from tokencap.rollout import MASK_REASON_ORDER
from tokencap.run import scan_table
from tokencap.services import scan_cache
from tokencap.services.arguments import AppArguments, app_arguments
from tokencap.services.scan_cache import cached_scan_path, fingerprint
from tokencap.views.run import triage as tr
from tokencap.views.run.filters import RunFilter, filter_masks, passing, sorted_rows
from tokencap.views.words import label


def rollout_banner(at: AppTest) -> str:
    """The Rollout page's verdict line and its findings, each with its tooltip (which names the mask reasons'
    keys, escaped as the page's Markdown escapes them), as one text."""
    lines = [m.value for m in at.markdown if re.search(r"\*\*(Masked|Trainable) —", m.value)]
    lines += [f"{m.value}\n{m.proto.help.replace('_', chr(92) + '_')}" for m in at.markdown
              if "mask reasons `" in m.proto.help]
    return "\n".join(lines)


def a_reason(frame) -> str:
    """A mask reason the sample run has, on rollouts that load (so they open on the Rollout page)."""
    loads = ~frame["reason_load_error"].to_numpy()
    counts = {r: int((frame[f"reason_{r}"].to_numpy() & loads).sum()) for r in MASK_REASON_ORDER
              if r not in ("load_error", "capture_incomplete", "no_records")}
    return max(counts, key=lambda r: (counts[r], r == "multiple_chains"))


def parquet_of(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def open_path(at: AppTest, path: str) -> AppTest:
    """Type a run's path into the sidebar and press Enter, as a user of the running app does."""
    at.text_input(key="run_w_path").set_value(path)
    return rerun(at)


def upload_run(at: AppTest, *files: tuple[str, bytes]) -> AppTest:
    at.file_uploader(key="run_uploader").set_value([(n, d, "application/octet-stream") for n, d in files])
    return rerun(at)


# --------------------------------------------------------------------------- the default page


def test_default_opens_the_sample_run_with_its_counts(monkeypatch, sample_run):
    table, frame = sample_run
    at = run_app(monkeypatch)
    assert headings(at)[0].startswith("Run · sample run")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["rollouts"] == f"{len(frame):,}"
    assert metrics["masked"] == f"{int(table.column('mask_sample').to_numpy().sum()):,}"
    assert metrics["trainable"] == f"{len(frame) - int(table.column('mask_sample').to_numpy().sum()):,}"
    assert shown_count(at) == (len(frame), len(frame))
    # The first screen: the mask-reason and cause charts side by side; the other six open with a switch.
    assert [c.proto.id.split(":")[1] for c in at.get("vega_lite_chart") if "run_chart:" in c.proto.id] == \
        ["reasons", "causes"]
    shown = run_table(at).value
    assert shown["rollout"].tolist() == table.column("rollout_id").to_pylist()
    assert not at.query_params  # no filter, nothing in the URL


def run_chart_dimensions(at: AppTest) -> list[str]:
    return [c.proto.id.split(":")[1] for c in at.get("vega_lite_chart") if "run_chart:" in c.proto.id]


def test_the_other_charts_open_with_a_switch_kept_in_the_url(monkeypatch, sample_run):
    at = run_app(monkeypatch)
    assert at.toggle(key="run_w_more").value is False
    at.toggle(key="run_w_more").set_value(True)
    rerun(at)
    assert run_chart_dimensions(at) == ["reasons", "causes", "delivery", "statuses", "delivered", "calls", "link",
                                       "refusal"]
    assert at.toggle(key="run_w_more").label == "More charts (what Gym delivered, status, delivered, calls, links, " \
                                                "refusals)"
    assert at.query_params["run_charts"] == "1"
    # A filter set by one of them keeps them open, and so does the way back from a rollout (its URL).
    click_bar(at, "statuses", "max_output_tokens")
    assert at.query_params["run_charts"] == "1" and len(run_chart_dimensions(at)) == 8
    select_row(at, 0)
    assert STATE_of(at)["open_rollout"].back_params["run_charts"] == "1"
    # A link with the switch on opens them; off again, they are gone and so is the parameter.
    fresh = run_app(monkeypatch, params={"run_charts": "1"})
    assert len(run_chart_dimensions(fresh)) == 8 and fresh.toggle(key="run_w_more").value is True
    fresh.toggle(key="run_w_more").set_value(False)
    rerun(fresh)
    assert run_chart_dimensions(fresh) == ["reasons", "causes"] and "run_charts" not in fresh.query_params


def STATE_of(at: AppTest):
    return at.session_state


def test_the_run_page_draws_without_transitions_from_its_first_element_on(monkeypatch, sample_run):
    """While a run is scanned the page reruns; a fade of the old charts and grid would take
    CPU from the scan (tokencap/app/assets/run_page.css)."""
    at = run_app(monkeypatch)
    styles = [h.proto.body for h in at.get("html") if h.proto.body.startswith("<style>")]
    assert len(styles) == 1
    assert "*, *::before, *::after { transition: none !important; }" in styles[0]


def test_filtering_by_a_reason_filters_the_table_and_goes_in_the_url(monkeypatch, sample_run):
    _, frame = sample_run
    reason = a_reason(frame)
    at = run_app(monkeypatch)
    at.multiselect(key="run_w_reasons").set_value([reason])
    rerun(at)
    expected = frame["rollout_id"][frame[f"reason_{reason}"]].tolist()
    assert run_table(at).value["rollout"].tolist() == expected
    assert all(label(reason) in r for r in run_table(at).value["mask reasons"].astype(str))  # in words
    assert shown_count(at) == (len(expected), len(frame))
    assert at.query_params["run_reason"] == reason
    # Other widgets narrow it further; clearing brings every row back.
    at.text_input(key="run_w_query").set_value(expected[0][:4].upper())
    rerun(at)
    assert run_table(at).value["rollout"].tolist() == [r for r in expected if expected[0][:4].lower() in r.lower()]
    at.button(key="run_clear").click()
    rerun(at)
    assert shown_count(at) == (len(frame), len(frame)) and not at.query_params
    assert at.multiselect(key="run_w_reasons").value == []


def test_clicking_a_bar_filters_the_table_and_a_second_click_clears_it(monkeypatch, sample_run):
    _, frame = sample_run
    at = run_app(monkeypatch, params={"run_charts": "1"})  # the status and calls charts are behind the switch
    click_bar(at, "statuses", "completed")
    completed = int((frame["status"] == "completed").sum())
    assert shown_count(at) == (completed, len(frame))
    assert at.multiselect(key="run_w_statuses").value == ["completed"]  # the widget follows the click
    assert at.query_params["run_status"] == "completed"
    click_bar(at, "calls", str(frame["calls_bin"].mode().iat[0]))
    assert shown_count(at)[0] < completed
    click_bar(at, "statuses", "completed")  # the same bar again: that filter goes, the other stays
    assert at.multiselect(key="run_w_statuses").value == []
    assert shown_count(at)[0] == int((frame["calls_bin"] == frame["calls_bin"].mode().iat[0]).sum())


def test_a_filter_changes_the_table_in_place_unless_it_shows_a_selected_row(monkeypatch, sample_run):
    """A bar click updates the grid in place: the same widget key (a new grid waits ~0.3 s for its layout
    before it draws). A table showing a selected row -- the way back from a rollout shows the row inspected
    -- is drawn under a new key when the filter changes, so that position never opens another rollout."""
    _, frame = sample_run
    reason = a_reason(frame)
    at = run_app(monkeypatch)
    first = run_table(at).proto.id
    click_bar(at, "reasons", reason)
    assert shown_count(at)[0] < len(frame)
    assert run_table(at).proto.id == first
    click_bar(at, "reasons", reason)
    assert shown_count(at)[0] == len(frame) and run_table(at).proto.id == first
    click_bar(at, "reasons", reason)
    rollout_id = run_table(at).value["rollout"].iat[1]
    select_row(at, 1)
    assert headings(at) == [escaped(rollout_id)]
    at.switch_page(RUN_PAGE)
    rerun(at)
    back = run_table(at).proto.id
    assert back != first and list(at.session_state[back].selection.rows) == [1]
    click_bar(at, "reasons", reason)  # every rollout again: row 1 is another one
    assert shown_count(at)[0] == len(frame)
    assert run_table(at).proto.id not in (first, back)
    assert headings(at)[0].startswith("Run")  # still on the Run page: the rollout inspected is not opened again
    assert list(at.session_state[run_table(at).proto.id].selection.rows) == [
        int(np.flatnonzero(run_table(at).value["rollout"].to_numpy() == rollout_id)[0])]  # it is shown selected
    other = 0 if run_table(at).value["rollout"].iat[0] != rollout_id else 1
    other_id = run_table(at).value["rollout"].iat[other]
    select_row(at, other)  # another row opens
    assert headings(at) == [escaped(other_id)]


def test_the_row_shown_selected_on_the_way_back_opens_again_when_clicked(monkeypatch, sample_run):
    """Back from a rollout its row is shown selected, and not opened again by being drawn; a click on it
    (the grid unselects a selected row it is clicked on) opens it again. Unselecting on a table that holds
    no such row opens nothing."""
    at = run_app(monkeypatch)
    nothing = {"rows": [], "columns": [], "cells": []}
    send_selection(at, run_table(at), nothing)
    assert headings(at)[0].startswith("Run")
    rollout_id = run_table(at).value["rollout"].iat[1]
    select_row(at, 1)
    assert headings(at) == [escaped(rollout_id)]
    at.switch_page(RUN_PAGE)
    rerun(at)
    rerun(at)
    assert headings(at)[0].startswith("Run") and list(at.session_state[run_table(at).proto.id].selection.rows) == [1]
    send_selection(at, run_table(at), nothing)  # the click on the row shown selected
    assert headings(at) == [escaped(rollout_id)]
    assert at.session_state["open_rollout"].rollout_id == rollout_id


def test_filters_in_the_url_apply_on_first_load(monkeypatch, sample_run):
    _, frame = sample_run
    at = run_app(monkeypatch, params={"run_verdict": "masked", "run_sort": "n_calls", "run_desc": "1",
                                      "run_reason": "not_a_reason"})
    masked = frame[frame["verdict"] == "masked"]
    shown = run_table(at).value
    assert len(shown) == len(masked)
    assert shown["calls"].tolist() == sorted(masked["n_calls"].tolist(), reverse=True)
    assert at.selectbox(key="run_w_sort").value == "n_calls" and at.toggle(key="run_w_desc").value
    assert "run_reason" not in at.query_params  # an unknown value is dropped from the URL


# --------------------------------------------------------------------------- opening a rollout


def test_selecting_a_row_opens_that_rollout_and_back_keeps_the_filters(monkeypatch, sample_run):
    table, frame = sample_run
    reason = a_reason(frame)
    at = run_app(monkeypatch)
    at.multiselect(key="run_w_reasons").set_value([reason])
    rerun(at)
    shown = run_table(at).value
    position = min(1, len(shown) - 1)
    rollout_id = shown["rollout"].iat[position]
    select_row(at, position)
    # Now on the Rollout page, on that rollout, with its verdict.
    assert headings(at) == [f"{escaped(rollout_id)}"]
    row = table.to_pylist()[int(np.flatnonzero(frame["rollout_id"] == rollout_id)[0])]
    banner = rollout_banner(at)
    assert "**Masked" in banner and all(f"`{escaped(r)}`" in banner for r in row["mask_reasons"])
    assert any("Opened from the run" in m.value for m in at.sidebar.markdown)
    # It opens at the top of the page (the table was far down the Run page), once per opening.
    assert [h.proto.body for h in at.html if "scrollTo(0, 0)" in h.proto.body]
    rerun(at)
    assert not [h for h in at.html if "scrollTo(0, 0)" in h.proto.body]
    assert headings(at) == [f"{escaped(rollout_id)}"]
    back = next(p for p in at.get("page_link") if "Back to the run" in p.proto.label)
    assert back.proto.page_script_hash and back.proto.query_string == f"run_reason={reason}"
    # Back on the Run page: the filter is still there.
    at.switch_page(RUN_PAGE)
    rerun(at)
    assert at.multiselect(key="run_w_reasons").value == [reason]
    assert run_table(at).value["rollout"].tolist() == shown["rollout"].tolist()
    assert at.query_params["run_reason"] == reason


@pytest.mark.parametrize("reason", ["terminal_call_not_delivered"])
def test_a_row_masked_by_its_rollout_records_opens_with_that_verdict(monkeypatch, sample_run, reason):
    """The default page scans the sample run with its records; the Rollout page builds the row's
    rollout with the same records, so a verdict that comes from them is the same there."""
    table, frame = sample_run
    assert frame[f"reason_{reason}"].any()
    at = run_app(monkeypatch)
    at.multiselect(key="run_w_reasons").set_value([reason])
    rerun(at)
    shown = run_table(at).value
    loads = ~frame["reason_load_error"].to_numpy()
    row_of = {r: i for i, r in enumerate(frame["rollout_id"])}
    position = next(i for i, r in enumerate(shown["rollout"]) if loads[row_of[r]])
    rollout_id = shown["rollout"].iat[position]
    select_row(at, position)
    assert at.session_state["open_rollout"].final_responses == str(SAMPLE_RECORDS)
    assert headings(at) == [f"{escaped(rollout_id)}"]
    banner = rollout_banner(at)
    assert "**Masked" in banner and reason.replace("_", "\\_") in banner
    captions = [c.value.replace("\\", "") for c in at.sidebar.caption]
    assert any("Built with the run's rollout records: run.jsonl" in c for c in captions)


def test_a_store_rollout_of_a_run_directory_opens_as_its_own_files(monkeypatch, tmp_path):
    run = make_run(tmp_path)
    at = run_app(monkeypatch, str(run))
    assert headings(at)[0] == f"Run · {escaped(str(run.resolve()))}"
    shown = run_table(at).value
    position = shown["rollout"].tolist().index("store-interrupted")
    select_row(at, position)
    assert headings(at) == ["store\\-interrupted"]
    assert "`capture\\_incomplete`" in rollout_banner(at)
    # Only that rollout was opened (not its neighbour in the same directory), and the export
    # tab's command names it, since the directory holds others.
    assert not [s for s in at.selectbox if s.key == "rollout"]
    at.session_state["tab"] = "Export"
    rerun(at)
    assert any("--rollout store-interrupted" in c.value and str(run / "store") in c.value for c in at.text)  # the Export tab's command, plain text


def test_closing_a_rollout_opened_from_the_run_goes_back_to_the_samples(monkeypatch, tmp_path):
    run = make_run(tmp_path)
    at = run_app(monkeypatch, str(run))
    select_row(at, run_table(at).value["rollout"].tolist().index("length-stop"))
    assert headings(at) == ["length\\-stop"]
    at.button(key="close_run_rollout").click()
    rerun(at)
    # The command-line directory is what the Rollout page shows on its own.
    assert "Opened from the run" not in [m.value for m in at.sidebar.markdown]


# --------------------------------------------------------------------------- the command line


def test_a_directory_argument_is_scanned_with_progress_once(monkeypatch, tmp_path):
    run = make_run(tmp_path)
    calls: list[list[tuple[int, int]]] = []
    real = tokencap.run.scan_table

    def spy(source, **kwargs):
        seen: list[tuple[int, int]] = []
        calls.append(seen)
        progress = kwargs.pop("progress")
        return real(source, progress=lambda d, t: (seen.append((d, t)), progress(d, t)), **kwargs)

    monkeypatch.setattr(tokencap.run, "scan_table", spy)
    at = run_app(monkeypatch, str(run))
    want = scan_table(run, workers=1)
    assert len(calls) == 1 and calls[0][0] == (0, want.num_rows) and calls[0][-1] == (want.num_rows, want.num_rows)
    assert shown_count(at) == (want.num_rows, want.num_rows)
    rerun(at)
    at.multiselect(key="run_w_statuses").set_value(["completed"])
    rerun(at)
    assert len(calls) == 1  # reruns and filters use the cached table
    at.button(key="run_rescan").click()
    rerun(at)
    assert len(calls) == 1  # nothing changed on disk: the same scan
    shutil.copy(SAMPLES / "content_filter_stop.json", run / "files" / "content_filter_stop.json")
    at.button(key="run_rescan").click()
    rerun(at)
    at.button(key="run_clear").click()
    rerun(at)
    assert len(calls) == 2 and shown_count(at) == (want.num_rows + 1, want.num_rows + 1)


def test_a_big_directory_is_scanned_by_a_child_on_every_core_and_its_table_kept(monkeypatch, tmp_path):
    import tokencap.run.child as child_module

    run = make_run(tmp_path)
    monkeypatch.setattr(scan_cache, "IN_PROCESS_BYTES", 0)  # every run is big
    monkeypatch.setenv(scan_cache.CACHE_ENV, str(tmp_path / "cache"))
    children: list[tuple[int, int]] = []
    real = child_module.scan_in_child

    def spy(source, out, **kwargs):
        progress = kwargs.pop("progress")
        real(source, out, progress=lambda d, t: (children.append((d, t)), progress(d, t)), **kwargs)

    monkeypatch.setattr(child_module, "scan_in_child", spy)
    at = run_app(monkeypatch, str(run))
    want = scan_table(run, workers=1)
    assert children and children[-1] == (want.num_rows, want.num_rows)
    assert shown_count(at) == (want.num_rows, want.num_rows)
    assert sorted(run_table(at).value["rollout"]) == sorted(want.column("rollout_id").to_pylist())
    assert cached_scan_path(fingerprint(run)).exists()


def test_a_scan_s_progress_bar_moves_nothing_after_it(monkeypatch, tmp_path):
    """The page draws the same elements at the same positions whether it scanned the run or
    took it from the cache, so the browser updates the previous page in place."""
    run = make_run(tmp_path)
    bars: list[str] = []
    real = rl._progress_bar
    monkeypatch.setattr(rl, "_progress_bar", lambda what: (bars.append(what), real(what))[1])
    at = run_app(monkeypatch)
    before = len(bars)
    open_path(at, str(run))
    assert len(bars) == before + 1  # scanned, with its progress bar

    def positions(at: AppTest) -> list[tuple[int, str]]:
        return [(i, e.type) for i, e in at.main.children.items()]

    scanned = positions(at)
    rerun(at)
    assert len(bars) == before + 1  # from the cache: no progress bar
    assert positions(at) == scanned


def test_a_run_directory_named_in_the_sidebar_opens_in_the_running_app_and_goes_in_the_url(monkeypatch, tmp_path,
                                                                                         sample_run):
    run = make_run(tmp_path)
    want = scan_table(run, workers=1)
    at = run_app(monkeypatch)  # the app already open on the sample run
    open_path(at, f"  {run}  ")
    assert headings(at)[0] == f"Run · {escaped(str(run.resolve()))}"
    assert shown_count(at) == (want.num_rows, want.num_rows)
    assert sorted(run_table(at).value["rollout"]) == sorted(want.column("rollout_id").to_pylist())
    assert at.query_params["run_path"] == str(run)
    # A reload or a shared link opens the same run; clearing the path goes back to the run started on.
    fresh = run_app(monkeypatch, params={"run_path": str(run)})
    assert fresh.text_input(key="run_w_path").value == str(run)
    assert shown_count(fresh) == (want.num_rows, want.num_rows)
    open_path(fresh, "")
    assert headings(fresh)[0].startswith("Run · sample run") and "run_path" not in fresh.query_params
    assert shown_count(fresh) == (len(sample_run[1]), len(sample_run[1]))


def test_a_run_named_in_the_sidebar_is_not_scanned_with_the_command_lines_records(monkeypatch, tmp_path):
    assert SAMPLE_RECORDS is not None
    started_on, other = tmp_path / "a", tmp_path / "b"
    shutil.copytree(SAMPLE_RUN, started_on)
    shutil.copytree(SAMPLE_RUN, other)
    at = run_app(monkeypatch, str(started_on), "--final-responses", str(SAMPLE_RECORDS))
    assert any("run_reward_figure" in i for i in chart_ids(at))
    open_path(at, str(other))
    assert headings(at)[0] == f"Run · {escaped(str(other.resolve()))}"
    assert not [i for i in chart_ids(at) if "run_reward_figure" in i]  # those records are the other run's
    assert not at.error


def test_a_store_records_file_named_in_the_sidebar_is_rescanned_when_its_siblings_change(monkeypatch, tmp_path):
    """A records file opened as the run is scanned with its store siblings; an intent with no record
    appended beside it makes the rollout incomplete, and Rescan (or a new session) must say so, never
    keep the trainable row cached under the unchanged records file."""
    for f in SAMPLE_RUN.glob("task0003-rollout2-attempt0.tokens.*"):
        shutil.copy(f, tmp_path / f.name)
    lone = tmp_path / "task0003-rollout2-attempt0.tokens.jsonl"
    at = run_app(monkeypatch)
    open_path(at, str(lone))
    assert run_table(at).value["verdict"].tolist() == ["trainable"]
    with open(tmp_path / "task0003-rollout2-attempt0.tokens.intents", "a") as handle:
        handle.write("call-9999\n")
    at.button(key="run_rescan").click()
    rerun(at)
    assert run_table(at).value["verdict"].tolist() == ["masked"]
    assert "capture incomplete" in run_table(at).value["mask reasons"].iloc[0]
    fresh = run_app(monkeypatch, params={"run_path": str(lone)})
    assert fresh.text_input(key="run_w_path").value == str(lone)
    assert run_table(fresh).value["verdict"].tolist() == ["masked"]
    select_row(fresh, 0)  # its rollout opens from the file, with the same verdict
    assert headings(fresh) == [escaped("task0003-rollout2-attempt0")]
    assert "Masked" in rollout_banner(fresh) and "capture\\_incomplete" in rollout_banner(fresh)


def test_the_url_names_the_run_shown_never_another(monkeypatch, tmp_path):
    """run_path in the URL is what a reload or a shared link opens: while an upload is shown it is
    not there (the link would open another run under the upload's filters), and a path that cannot
    be opened replaces the last good one (a reload shows that error, not the run before it)."""
    run = make_run(tmp_path)
    at = run_app(monkeypatch)
    open_path(at, str(run))
    assert at.query_params["run_path"] == str(run)
    upload_run(at, ("length_stop.json", (SAMPLES / "length_stop.json").read_bytes()))
    assert headings(at)[0] == "Run · length\\_stop\\.json"
    assert "run_path" not in at.query_params
    at.button(key="run_close_upload").click()
    rerun(at)
    assert headings(at)[0] == f"Run · {escaped(str(run.resolve()))}" and at.query_params["run_path"] == str(run)
    open_path(at, str(tmp_path / "nowhere"))
    assert any("Could not open the run" in e.value for e in at.error)
    assert at.query_params["run_path"] == str(tmp_path / "nowhere")
    fresh = run_app(monkeypatch, params=dict(at.query_params))
    assert any("Could not open the run" in e.value and "nowhere" in e.value for e in fresh.error)


def test_a_missing_directory_named_in_the_sidebar_is_an_error_on_the_run_page(monkeypatch, tmp_path):
    at = run_app(monkeypatch)
    open_path(at, str(tmp_path / "nowhere"))
    assert any("Could not open the run" in e.value and "no such file or directory" in e.value for e in at.error)


def test_a_scan_table_argument_opens_the_run_page_on_it(monkeypatch, tmp_path):
    run = make_run(tmp_path)
    table = scan_table(run, workers=1)
    path = tmp_path / "result.parquet"
    path.write_bytes(parquet_of(table))
    at = run_app(monkeypatch, str(path))
    assert headings(at)[0] == f"Run · {escaped(str(path.resolve()))}"
    assert shown_count(at) == (table.num_rows, table.num_rows)
    position = run_table(at).value["rollout"].tolist().index("length-stop")
    select_row(at, position)  # its rollouts are not here until the run's directory is named
    assert any("table came without its run" in w.value for w in at.warning)
    at.text_input(key="run_w_root").set_value(str(run))
    rerun(at)  # the row still selected opens as soon as its file is found
    assert headings(at) == ["length\\-stop"]
    # On its own, the Rollout page does not try to read the table as a rollout: the samples.
    at.button(key="close_run_rollout").click()
    rerun(at)
    assert not [e for e in at.error if "Could not" in e.value] and at.selectbox(key="scenario")


def test_a_file_argument_opens_the_rollout_page(monkeypatch):
    at = run_app(monkeypatch, str(SAMPLES / "length_stop.json"))
    assert headings(at) == ["length\\-stop"]


def test_a_scan_that_fails_midway_is_one_message(monkeypatch, tmp_path):
    def broken(source, **kwargs):
        raise OSError("a worker died")

    monkeypatch.setattr(tokencap.run, "scan_table", broken)
    at = run_app(monkeypatch, str(make_run(tmp_path)))
    assert any("the scan stopped (OSError: a worker died)" in e.value.replace("\\", "") for e in at.error)


def test_a_missing_directory_is_an_error_on_the_run_page(monkeypatch, tmp_path):
    at = run_app(monkeypatch, str(tmp_path / "nowhere"))
    assert any("Could not open the run" in e.value and "no such file or directory" in e.value for e in at.error)


# --------------------------------------------------------------------------- uploads


def test_an_uploaded_scan_table_is_shown(monkeypatch, tmp_path):
    run = make_run(tmp_path)
    table = scan_table(run, workers=1)
    at = run_app(monkeypatch)
    upload_run(at, ("run.parquet", parquet_of(table)))
    assert headings(at)[0] == "Run · run\\.parquet"
    assert run_table(at).value["rollout"].tolist() == table.column("rollout_id").to_pylist()
    assert {m.label: m.value for m in at.metric}["rollouts"] == str(table.num_rows)
    # The upload survives a trip to the Rollout page and back; closing it returns to the sample run.
    at.switch_page("tokencap/app/rollout/rollout.py")
    rerun(at)
    at.switch_page(RUN_PAGE)
    rerun(at)
    assert headings(at)[0] == "Run · run\\.parquet"
    at.button(key="run_close_upload").click()
    rerun(at)
    assert headings(at)[0].startswith("Run · sample run")


@pytest.mark.parametrize("name, data, message", [
    ("junk.parquet", b"not a parquet file", "junk.parquet: not a readable parquet file"),
    ("other.parquet", parquet_of(pa.table({"x": [1, 2]})), "other.parquet: not a tokencap scan table"),
])
def test_a_bad_parquet_upload_is_a_clear_error(monkeypatch, name, data, message):
    at = run_app(monkeypatch)
    upload_run(at, (name, data))
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and escaped(message) in errors[0] and "tokencap scan" in errors[0]
    assert not at.dataframe


def test_a_diff_table_named_or_uploaded_as_the_run_says_how_to_compare_here(monkeypatch, tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    for path, run in ((a, SAMPLE_RUN), (b, AFTER_FIX)):
        path.write_bytes(parquet_of(scan_table(run, workers=1)))
    diff = tmp_path / "d.parquet"
    assert tokencap.cli.main(["diff", str(a), str(b), "-o", str(diff)]) == 0
    at = run_app(monkeypatch)
    open_path(at, str(diff))
    typed = at.error[0].value.replace("\\", "")
    upload = upload_run(run_app(monkeypatch), ("d.parquet", diff.read_bytes())).error[0].value.replace("\\", "")
    for error in (typed, upload):
        assert "d.parquet: is a diff table" in error and "Compare with another run" in error
        assert error.count("tokencap scan RUN") == 1  # said once, not twice in other words


def test_a_row_of_a_table_uploaded_alone_says_its_file_is_missing_and_takes_an_upload(monkeypatch, tmp_path):
    run = make_run(tmp_path)
    table = scan_table(run, workers=1)
    at = run_app(monkeypatch)
    upload_run(at, ("run.parquet", parquet_of(table)))
    ids = run_table(at).value["rollout"].tolist()
    position = ids.index("subagent-branch")
    select_row(at, position)
    warning = next(w.value for w in at.warning if "Cannot open" in w.value)
    assert "table came without its run" in warning and escaped("files/subagent_branch.json") in warning
    assert "Upload subagent\\_branch\\.json itself" in warning
    uploader = next(u for u in at.file_uploader if u.key.startswith("run_missing_upload:"))
    # The wrong file is refused with what it holds ...
    uploader.set_value(("length_stop.json", (SAMPLES / "length_stop.json").read_bytes(), "application/json"))
    rerun(at)
    refused = escaped("length_stop.json holds length-stop, not subagent-branch")
    assert any(refused in e.value for e in at.error), [e.value for e in at.error]
    # ... the right one opens the rollout.
    uploader = next(u for u in at.file_uploader if u.key.startswith("run_missing_upload:"))
    uploader.set_value(("subagent_branch.json", (SAMPLES / "subagent_branch.json").read_bytes(), "application/json"))
    rerun(at)
    assert headings(at) == ["subagent\\-branch"]


def test_the_table_outlives_a_change_of_run_unless_a_row_was_left_selected(monkeypatch, tmp_path):
    """A change of run keeps the table's widget (the browser updates the grid in place), but
    a row left selected in the old run (its file was missing) must not select -- and open --
    the same position in the new one."""
    run = make_run(tmp_path)
    at = run_app(monkeypatch)
    sample_key = run_table(at).proto.id
    open_path(at, str(run))
    assert run_table(at).proto.id == sample_key  # nothing selected: the same table, new rows
    assert set(run_table(at).value["rollout"]) == set(scan_table(run, workers=1).column("rollout_id").to_pylist())

    upload_run(at, ("run.parquet", parquet_of(scan_table(run, workers=1))))
    assert run_table(at).proto.id == sample_key
    select_row(at, 0)
    assert any("Cannot open" in w.value for w in at.warning)  # the row stays selected
    at.button(key="run_close_upload").click()
    rerun(at)
    assert run_table(at).proto.id != sample_key  # a new table: no row selected in the next run
    assert not any("Cannot open" in w.value for w in at.warning)
    assert "open_rollout" not in at.session_state
    assert headings(at)[0].startswith("Run")


def test_an_uploaded_table_opens_rows_under_a_named_run_directory(monkeypatch, tmp_path):
    run = make_run(tmp_path)
    table = scan_table(run, workers=1)
    at = run_app(monkeypatch)
    upload_run(at, ("run.parquet", parquet_of(table)))
    at.text_input(key="run_w_root").set_value(str(run))
    rerun(at)
    select_row(at, run_table(at).value["rollout"].tolist().index("jsonl-refusal-ended"))
    assert headings(at) == ["jsonl\\-refusal\\-ended"]
    # Back on the Run page, the named directory is still there.
    at.switch_page(RUN_PAGE)
    rerun(at)
    assert at.text_input(key="run_w_root").value == str(run)


def test_rollout_files_upload_is_scanned_in_memory_and_each_row_opens(monkeypatch):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for f in sorted((SAMPLES / "capture_store").iterdir()):
            zf.write(f, f"capture_store/{f.name}")
    at = run_app(monkeypatch)
    upload_run(at, ("entries.jsonl", (SAMPLES / "multi_rollout_entries.jsonl").read_bytes()),
               ("store.zip", buffer.getvalue()), ("broken.json", b'{"entries": [{"model_call_id": 3}]}'))
    shown = run_table(at).value
    assert shown["rollout"].tolist() == ["broken", "jsonl-clean", "jsonl-parameter-refusal", "jsonl-refusal-ended",
                                         "store-complete", "store-interrupted"]
    assert shown["source"].astype(str).tolist()[-1] == "store.zip"
    assert "broken.json" in str(shown["error"].iat[0])
    select_row(at, 5)
    assert headings(at) == ["store\\-interrupted"]
    assert "`capture\\_incomplete`" in rollout_banner(at)


def test_capture_strings_on_the_run_page_are_never_markup(monkeypatch):
    hostile = "<img src=x onerror=alert(1)>[x](javascript:alert(1)):red[boo]"
    c = Capture(hostile)
    c.call("c1", new=5)
    at = run_app(monkeypatch)
    upload_run(at, ("**bold** <b>.json", c.json_bytes()))
    at.text_input(key="run_w_query").set_value("<img")
    rerun(at)
    assert run_table(at).value["rollout"].tolist() == [hostile]  # the table shows the text as it is
    def check(texts):
        for value in texts:
            assert not re.search(r"(?<!\\)<", value), value
            assert "](" not in value and ":red[" not in value, value

    check(e.value for e in list(at.markdown) + list(at.caption) + list(at.error) + list(at.warning))
    # A table uploaded alone: the missing-file message and the upload offered name the rollout.
    upload_run(at, ("run.parquet", parquet_of(scan_table(SAMPLES / "length_stop.json", workers=1)
                                              .set_column(0, "rollout_id", pa.array([hostile])))))
    select_row(at, 0)
    assert any(w.value.startswith("**Cannot open \\<img") for w in at.warning)
    assert any(u.label.startswith("Upload the file holding \\<img") for u in at.file_uploader)
    check(e.value for e in list(at.markdown) + list(at.caption) + list(at.error) + list(at.warning))
    check(u.label for u in at.file_uploader)


# --------------------------------------------------------------------------- rewards, groups and a second run


def chart_ids(at: AppTest) -> list[str]:
    """The ids of the page's charts: a clickable chart's own, else the keyed box holding it."""
    out: list[str] = []

    def walk(node, box: str) -> None:
        for child in getattr(node, "children", {}).values():
            if getattr(child, "type", None) == "vega_lite_chart":
                out.append(child.proto.id or box)
            proto = getattr(child, "proto", None)
            walk(child, getattr(proto, "id", "") or box if isinstance(proto, BlockProto) else box)

    walk(at._tree, "")
    return out


def texts(at: AppTest) -> str:
    return "\n".join([c.value for c in at.caption] + [w.value for w in at.warning] + [i.value for i in at.info])


def test_the_default_page_shows_rewards_and_groups_from_the_bundled_records(monkeypatch, sample_run):
    from tokencap.views.run import reward as rw

    assert SAMPLE_RECORDS is not None
    _, frame = sample_run
    at = run_app(monkeypatch)
    assert any("run_reward_figure" in i for i in chart_ids(at)) and any("run_groups_figure" in i for i in chart_ids(at))
    assert rw.reward_bias(frame).words() in texts(at).replace("\\", "")
    assert rw.group_summary(frame).words() in texts(at).replace("\\", "")
    assert any(f"Rollout records: {SAMPLE_RECORDS.name}" in c.value.replace("\\", "") for c in at.sidebar.caption)
    # The group filter keeps the rollouts of the groups left without a learning signal, and goes in the URL.
    at.segmented_control(key="run_w_groups").set_value("starved")
    rerun(at)
    starved = frame["group"].isin(["few", "flat"]).to_numpy()
    assert shown_count(at) == (int(starved.sum()), len(frame))
    assert set(run_table(at).value["rollout"]) == set(frame["rollout_id"][starved])
    assert at.query_params["run_group"] == "starved"


def test_the_reward_per_slice_table_is_built_only_while_its_expander_is_open(monkeypatch, sample_run):
    from tokencap.views.run import reward as rw

    _, frame = sample_run
    at = run_app(monkeypatch)
    slices = [e for e in at.expander if e.label.startswith("Reward per slice")]
    assert len(slices) == 1 and not slices[0].children  # closed: neither built nor sent

    def slice_tables():
        return [t for t in at.table if "slice" in [str(c).replace("\\", "") for c in t.value.columns]]

    assert slice_tables() == []
    at.session_state["run_reward_slices_open"] = True
    rerun(at)
    shown = rw.reward_slices_shown(frame)
    [table] = slice_tables()
    assert len(table.value) == len(shown)
    assert [str(v).replace("\\", "") for v in table.value.iloc[:, 0]] == list(shown["slice"])


def test_without_records_the_reward_views_say_what_enables_them(monkeypatch, tmp_path):
    run = make_run(tmp_path)
    at = run_app(monkeypatch, str(run))
    hint = next(i.value for i in at.info if "rollout records" in i.value)
    assert "--final-responses records.jsonl" in hint and "add the records file" in hint
    assert not [i for i in chart_ids(at) if "run_reward_figure" in i or "run_groups_figure" in i]


def test_records_given_on_the_command_line_fill_the_reward_views(monkeypatch, tmp_path):
    assert SAMPLE_RECORDS is not None
    run = tmp_path / "run"
    shutil.copytree(SAMPLE_RUN, run)
    at = run_app(monkeypatch, str(run), "--final-responses", str(SAMPLE_RECORDS))
    assert any("run_reward_figure" in i for i in chart_ids(at))
    assert not at.error


def test_an_uploaded_records_file_rescans_the_run_with_it(monkeypatch, tmp_path):
    assert SAMPLE_RECORDS is not None
    run = tmp_path / "run"
    shutil.copytree(SAMPLE_RUN, run)
    at = run_app(monkeypatch, str(run))
    assert not any("run_reward_figure" in i for i in chart_ids(at))
    at.file_uploader(key="run_records_uploader").set_value(
        [("records.jsonl", SAMPLE_RECORDS.read_bytes(), "application/octet-stream")])
    rerun(at)
    assert any("run_reward_figure" in i for i in chart_ids(at))


def test_a_bad_records_file_is_one_error_naming_it(monkeypatch, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(SAMPLE_RUN, run)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"rollout_id": "x", "response": {"object": "response", "output": []}, "reward": "high"}\n')
    at = run_app(monkeypatch, str(run), "--final-responses", str(bad))
    message = at.error[0].value.replace("\\", "")
    assert len(at.error) == 1 and "bad.jsonl, line 1" in message and "'reward'" in message


def test_comparing_with_the_sample_after_fix_shows_both_runs_and_filters_by_change(monkeypatch):
    declared = json.loads((SAMPLES / "rollout_records" / "expected.json").read_text())["diff"]
    at = _compare_with_the_sample_after_fix(monkeypatch)
    tiles = {m.label: m.value for m in at.metric}
    assert tiles["trainable"] == f"{declared['trainable']['a']:,} → {declared['trainable']['b']:,}"
    assert tiles["fixed · broke"] == f"{declared['counts']['fixed']} · {declared['counts']['broke']}"
    assert any("paired by rollout id" in m.value for m in at.markdown)
    assert any("run_chart:change:" in i for i in chart_ids(at))
    pairs = next(d for d in at.dataframe if "run_pairs:" in d.proto.id)
    counts = declared["counts"]
    assert len(pairs.value) == counts["both"] + counts["only_a"] + counts["only_b"]
    at.multiselect(key="run_w_change").set_value(["fixed"])
    rerun(at)
    pairs = next(d for d in at.dataframe if "run_pairs:" in d.proto.id)
    assert sorted(pairs.value["rollout A"]) == sorted(declared["rollouts"]["fixed"])
    assert (pairs.value["verdict A"] == "masked").all() and (pairs.value["verdict B"] == "trainable").all()
    assert at.query_params["run_change"] == "fixed" and at.query_params["run_vs"] == "sample"
    # A click on the change chart's "only in B" bar filters on that change instead.
    chart = next(c for c in at.get("vega_lite_chart") if "run_chart:change:" in c.proto.id)
    send_selection(at, chart, {"pick": [{"dimension": "change", "key": "only_b"}]})
    pairs = next(d for d in at.dataframe if "run_pairs:" in d.proto.id)
    assert sorted(pairs.value["rollout B"]) == sorted(declared["rollouts"]["only_b"])
    assert pairs.value["rollout A"].isna().all()


def test_a_joined_row_opens_on_the_rollout_page_compare_tab_with_both_captures(monkeypatch):
    declared = json.loads((SAMPLES / "rollout_records" / "expected.json").read_text())["diff"]
    at = _compare_with_the_sample_after_fix(monkeypatch)
    at.multiselect(key="run_w_change").set_value(["fixed"])
    rerun(at)
    pairs = next(d for d in at.dataframe if "run_pairs:" in d.proto.id)
    target = pairs.value["rollout A"].iloc[0]
    at = send_selection(at, pairs, {"rows": [0], "columns": [], "cells": []})
    at.button(key="run_open_A").click()
    rerun(at)
    request = at.session_state["open_rollout"]
    assert request.rollout_id == target and request.vs.rollout_id == target
    assert Path(request.vs.path) == AFTER_FIX.resolve() and Path(request.path) == SAMPLE_RUN.resolve()
    assert Path(request.final_responses).name == "run.jsonl"
    assert Path(request.vs.final_responses).name == "run_after_fix.jsonl"
    assert target in declared["rollouts"]["fixed"]
    assert at.session_state["tab"] == "Compare"
    other = next(s for s in at.selectbox if s.key.startswith("cmp_other:"))
    assert other.format_func(other.value).startswith(f"{target}.tokens.* · snapshot ")
    assert any(m.value == "**What changes from A to B**" for m in at.markdown)
    changes = "\n".join(m.value for m in at.markdown if m.value.startswith("- "))
    assert changes.splitlines()[0] == "- verdict\\: masked → trainable"
    back = next(p for p in at.get("page_link") if "Back to the run" in p.proto.label)
    assert back.proto.query_string == "run_change=fixed&run_vs=sample"
    at.switch_page(RUN_PAGE)
    rerun(at)
    pairs = next(d for d in at.dataframe if "run_pairs:" in d.proto.id)
    assert sorted(pairs.value["rollout A"]) == sorted(declared["rollouts"]["fixed"])


def test_a_run_that_cannot_be_compared_is_one_error(monkeypatch, tmp_path):
    at = run_app(monkeypatch)
    at.text_input(key="run_w_vs_path").set_value(str(tmp_path / "missing"))
    rerun(at)
    assert len(at.error) == 1 and "missing" in at.error[0].value
    assert any("run_table:" in d.proto.id for d in at.dataframe)  # the run itself still shows


def test_tokencap_app_passes_the_records_to_the_page(monkeypatch, tmp_path, free_port):
    from tokencap import cli
    from tokencap.cli import server

    calls = []
    monkeypatch.setattr(server, "_serve", lambda cmd, **_: calls.append(cmd) or 0)
    records = tmp_path / "records.jsonl"  # read before the server starts: a readable one
    records.write_text(json.dumps({"rollout_id": "r", "response": {"object": "response", "output": []}}) + "\n")
    assert cli.main(["app", str(tmp_path), "--final-responses", str(records), "--port", str(free_port)]) == 0
    cmd = calls[-1]
    assert cmd[cmd.index("--") + 1:] == [str(tmp_path), "--final-responses", str(records)]
    assert app_arguments(cmd[cmd.index("--") + 1:]) == AppArguments(str(tmp_path), str(records))
    assert cli.main(["app", str(tmp_path), "--final-responses", str(tmp_path / "nope.jsonl")]) == 2
    assert len(calls) == 1


def test_a_link_naming_the_run_compared_with_and_a_change_opens_that_view(monkeypatch):
    declared = json.loads((SAMPLES / "rollout_records" / "expected.json").read_text())["diff"]
    at = run_app(monkeypatch, params={"run_vs": "sample", "run_change": "broke"})
    pairs = next(d for d in at.dataframe if "run_pairs:" in d.proto.id)
    assert sorted(pairs.value["rollout A"]) == sorted(declared["rollouts"]["broke"])
    assert at.toggle(key="run_w_vs_sample").value
    at.toggle(key="run_w_vs_sample").set_value(False)
    rerun(at)
    assert "run_vs" not in at.query_params and not any("run_pairs:" in d.proto.id for d in at.dataframe)
    # An uploaded table to compare with cannot be removed from its uploader after a trip away: "Stop comparing".
    table = scan_table(AFTER_FIX, workers=1, final_responses=str(SAMPLES / "rollout_records" / "run_after_fix.jsonl"))
    at.file_uploader(key="run_vs_uploader").set_value(
        [("after.parquet", parquet_of(table), "application/octet-stream")])
    rerun(at)
    assert any("run_pairs:" in d.proto.id for d in at.dataframe) and "run_vs" not in at.query_params
    at.button(key="run_vs_close").click()
    rerun(at)
    assert not any("run_pairs:" in d.proto.id for d in at.dataframe)


def test_capture_strings_of_a_comparison_are_never_markup(monkeypatch, tmp_path):
    hostile = "<img src=x onerror=alert(1)>[x](javascript:alert(1)):red[boo]"
    c = Capture(hostile)
    c.call("c1", new=5)
    path = tmp_path / "hostile.json"
    path.write_bytes(c.json_bytes())
    at = run_app(monkeypatch)
    upload_run(at, ("**bold** <b>.json", c.json_bytes()))
    at.file_uploader(key="run_vs_uploader").set_value(
        [("<b>b</b>.parquet", parquet_of(scan_table(path, workers=1)), "application/octet-stream")])
    rerun(at)
    pairs = next(d for d in at.dataframe if "run_pairs:" in d.proto.id)
    assert pairs.value["rollout A"].tolist() == [hostile] == pairs.value["rollout B"].tolist()
    send_selection(at, pairs, {"rows": [0], "columns": [], "cells": []})
    button = at.button(key="run_open_A")
    assert button.label.startswith("Open A: \\<img") and "](" not in button.label
    for value in [e.value for e in list(at.markdown) + list(at.caption) + list(at.error) + list(at.warning)]:
        assert not re.search(r"(?<!\\)<", value), value
        assert "](" not in value and ":red[" not in value, value


def test_a_bad_uploaded_records_file_is_named_as_uploaded_and_says_what_to_do(monkeypatch, tmp_path):
    """The scan reads an upload from a file named by its digest; the page names the upload and never that file."""
    run = tmp_path / "run"
    shutil.copytree(SAMPLE_RUN, run)
    at = run_app(monkeypatch, str(run))
    bad = b'{"rollout_id": "x", "response": {"object": "response", "output": []}, "reward": "high"}\n'
    at.file_uploader(key="run_records_uploader").set_value([("badrec.jsonl", bad, "application/octet-stream")])
    rerun(at)
    message = at.error[0].value.replace("\\", "")
    assert len(at.error) == 1 and "badrec.jsonl (uploaded), line 1" in message and "'reward'" in message
    assert "tokencap-records-" not in message and "Could not read the rollout records" in message
    assert "remove it under Rollout records" in message
    assert any("Rollout records: badrec.jsonl" in c.value.replace("\\", "") for c in at.sidebar.caption)


def test_comparing_with_a_run_scanned_without_records_warns_that_verdicts_may_differ_for_that_alone(monkeypatch,
                                                                                                     tmp_path):
    assert AFTER_FIX is not None
    after = tmp_path / "after"
    shutil.copytree(AFTER_FIX, after)  # a copy: the bundled run after a fix would get its bundled records
    at = run_app(monkeypatch)  # the sample run, scanned with its bundled records
    at.text_input(key="run_w_vs_path").set_value(str(after))
    rerun(at)
    warning = next(w.value for w in at.warning if "rollout records" in w.value).replace("\\", "")
    assert warning.startswith("Only A was scanned with rollout records")


# --------------------------------------------------------------------------- a run's rollout in a URL


def ours(at: AppTest) -> dict[str, str]:
    return {k: at.query_params[k] for k in ("src", "part", "rollout") if k in at.query_params}


def copy_link_warnings(at: AppTest) -> list[str]:
    return [w.value for w in at.warning if "can't be in a URL" in w.value]


def test_a_rollout_opened_from_the_sample_run_has_a_link_that_opens_it_anywhere(monkeypatch, sample_run):
    table, frame = sample_run
    at = run_app(monkeypatch)
    shown = run_table(at).value
    loads = [int(i) for i in np.flatnonzero(shown["error"].isna().to_numpy())]
    position = loads[len(loads) // 2]
    rollout_id = shown["rollout"].iat[position]
    source = str(frame["source"].iat[int(np.flatnonzero(frame["rollout_id"] == rollout_id)[0])])
    select_row(at, position)
    assert headings(at) == [escaped(rollout_id)]
    assert ours(at) == {"src": "sample:run", "part": source, "rollout": rollout_id}
    assert not copy_link_warnings(at)
    # A reload or a shared link: a new session, nothing handed over by the Run page.
    fresh = open_link(monkeypatch, dict(at.query_params))
    assert headings(fresh) == [escaped(rollout_id)]
    assert not [s for s in fresh.selectbox if s.key == "scenario"]  # not the sample picker's rollout
    assert rollout_banner(fresh) == rollout_banner(at)


RECORDS_MASKED = "task0153-rollout0-attempt0"
"""A sample-run rollout masked only by its rollout record (the final answer is not on the delivered chain)."""


@pytest.mark.parametrize("where", ["sample", "path"])
def test_a_link_to_a_rollout_masked_by_its_records_opens_it_masked(monkeypatch, tmp_path, where):
    """A reload or a shared link builds the rollout with the records its run was scanned with: without
    them it opened as trainable (its final answer unchecked), while its row and the page said masked."""
    assert SAMPLE_RECORDS is not None
    if where == "sample":
        at = run_app(monkeypatch)
    else:
        run, records = tmp_path / "run", tmp_path / "records.jsonl"
        shutil.copytree(SAMPLE_RUN, run)
        shutil.copy(SAMPLE_RECORDS, records)
        at = run_app(monkeypatch)
        open_path(at, str(run))
        at.text_input(key="run_w_records_path").set_value(str(records))
        rerun(at)
    shown = run_table(at).value
    position = shown["rollout"].tolist().index(RECORDS_MASKED)
    assert shown["mask reasons"].iat[position] == "terminal call not delivered"  # the table's words; the banner's key
    select_row(at, position)
    assert "terminal\\_call\\_not\\_delivered" in rollout_banner(at)
    for args in ((), (str(SAMPLES / "length_stop.json"),)):  # whatever the other server was started on
        fresh = open_link(monkeypatch, dict(at.query_params), *args)
        assert headings(fresh) == [escaped(RECORDS_MASKED)]
        assert rollout_banner(fresh) == rollout_banner(at)


def test_a_rollout_file_given_with_records_on_the_command_line_is_built_with_them(monkeypatch, tmp_path):
    """`tokencap app R.tokens.jsonl --final-responses RECORDS` opens the Rollout page: it ignored the
    records and showed trainable what `tokencap inspect` with the same records masks."""
    assert SAMPLE_RECORDS is not None
    lone = SAMPLE_RUN / f"{RECORDS_MASKED}.tokens.jsonl"
    at = run_app(monkeypatch, str(lone), "--final-responses", str(SAMPLE_RECORDS))
    assert headings(at) == [escaped(RECORDS_MASKED)]
    assert "terminal\\_call\\_not\\_delivered" in rollout_banner(at)
    assert any("from the command line" in c.value for c in at.sidebar.caption)
    without = run_app(monkeypatch, str(lone))
    assert "Trainable" in rollout_banner(without)


def test_a_link_naming_records_this_machine_cannot_read_shows_no_verdict(monkeypatch, tmp_path):
    """Fail closed: the rollout's verdict rests on its run's records; built without them it read trainable
    (with only a sidebar note that they were not used)."""
    run = tmp_path / "run"
    shutil.copytree(SAMPLE_RUN, run)
    fresh = open_link(monkeypatch, {"src": str(run), "part": f"{RECORDS_MASKED}.tokens.*", "rollout": RECORDS_MASKED,
                                    "records": str(tmp_path / "gone.jsonl")})
    assert not rollout_banner(fresh)
    error = next(e.value for e in fresh.error if "rollout records" in e.value).replace("\\", "")
    assert f"{tmp_path / 'gone.jsonl'}: cannot be read" in error and "not shown without them" in error


def test_a_rollout_of_a_run_directory_has_a_link_that_opens_it_anywhere(monkeypatch, tmp_path):
    run = make_run(tmp_path)
    at = run_app(monkeypatch, str(run))
    select_row(at, run_table(at).value["rollout"].tolist().index("store-interrupted"))
    assert ours(at) == {"src": str(run.resolve()), "part": "store/store-interrupted.tokens.*",
                        "rollout": "store-interrupted"}
    for args in ((), (str(SAMPLES / "length_stop.json"),)):  # whatever the other server was started on
        fresh = open_link(monkeypatch, dict(at.query_params), *args)
        assert headings(fresh) == ["store\\-interrupted"]
        assert "`capture\\_incomplete`" in rollout_banner(fresh)
        assert not [s for s in fresh.selectbox if s.key == "rollout"]  # only that rollout's files


def test_a_rollout_of_a_scan_table_opened_with_its_run_directory_has_a_link(monkeypatch, tmp_path):
    run = make_run(tmp_path)
    at = run_app(monkeypatch)
    upload_run(at, ("run.parquet", parquet_of(scan_table(run, workers=1))))
    at.text_input(key="run_w_root").set_value(str(run))
    rerun(at)
    select_row(at, run_table(at).value["rollout"].tolist().index("jsonl-refusal-ended"))
    assert ours(at) == {"src": str(run.resolve()), "part": "files/multi_rollout_entries.jsonl",
                        "rollout": "jsonl-refusal-ended"}
    assert not copy_link_warnings(at)
    fresh = open_link(monkeypatch, dict(at.query_params))
    assert headings(fresh) == ["jsonl\\-refusal\\-ended"]


def test_a_link_to_a_rollout_its_source_does_not_hold_says_so_and_shows_no_other(monkeypatch, tmp_path):
    run = make_run(tmp_path)
    at = open_link(monkeypatch, {"src": str(run), "part": "files/multi_rollout_entries.jsonl", "rollout": "gone"})
    assert headings(at) == ["tokencap rollout inspector"] and not rollout_banner(at)
    assert any(escaped("gone is not in files/multi_rollout_entries.jsonl") in e.value for e in at.error)
    assert at.query_params["rollout"] == "gone"  # the URL still says what was asked for
    at.button(key="show_other_rollouts").click()
    rerun(at)
    assert rollout_banner(at) and [s for s in at.selectbox if s.key == "rollout"]  # now the user picks one
    # The same without a run: a sample's link naming a rollout the sample does not hold.
    at = open_link(monkeypatch, {"src": "sample:length_stop.json", "rollout": "subagent-branch"})
    assert not rollout_banner(at) and any("subagent\\-branch is not in" in e.value for e in at.error)
    # A part outside the run, or a sample run this app does not have, opens nothing.
    shutil.copy(SAMPLES / "length_stop.json", tmp_path / "outside.json")
    at = open_link(monkeypatch, {"src": str(run), "part": "../outside.json", "rollout": "length-stop"})
    assert not rollout_banner(at) and at.error
    at = open_link(monkeypatch, {"src": "sample:../sample_data", "part": "length_stop.json", "rollout": "length-stop"})
    assert not rollout_banner(at) and any("does not bundle" in e.value for e in at.error)


def test_a_broken_upload_opened_from_the_run_has_a_way_back(monkeypatch):
    at = run_app(monkeypatch)
    upload_run(at, ("broken.json", b'{"entries": [{"model_call_id": 3}]}'),
               ("entries.jsonl", (SAMPLES / "multi_rollout_entries.jsonl").read_bytes()))
    select_row(at, run_table(at).value["rollout"].tolist().index("broken"))
    assert any(escaped("Could not load broken.json") in e.value for e in at.error)
    back = next(p for p in at.get("page_link") if "Back to the run" in p.proto.label)
    assert back.proto.page_script_hash
    assert copy_link_warnings(at) == [] and "part" not in at.query_params  # an upload: no URL names it


# --------------------------------------------------------------------------- triage: previous / next, and back


def triage_text(at: AppTest) -> str:
    return next(m.value for m in at.get_by_key("triage").markdown)


def test_previous_and_next_walk_the_runs_filtered_sorted_table_and_back_lands_on_the_row(monkeypatch, sample_run):
    table, frame = sample_run
    reason = a_reason(frame)
    at = run_app(monkeypatch)
    at.multiselect(key="run_w_reasons").set_value([reason])
    at.selectbox(key="run_w_sort").set_value("n_calls")
    rerun(at)
    at.toggle(key="run_w_desc").set_value(True)
    rerun(at)
    ids = run_table(at).value["rollout"].tolist()
    order = tr.run_order(frame, RunFilter(reasons=(reason,), sort="n_calls", descending=True))
    assert len(ids) >= 3 and ids == [order.entry(int(r))[1] for r in order.rows]
    select_row(at, 1)
    assert headings(at) == [escaped(ids[1])]
    assert triage_text(at) == f"Rollout **2 of {len(ids)}** in this filter"
    at.button(key="triage_next").click()
    rerun(at)
    assert headings(at) == [escaped(ids[2])] and triage_text(at) == f"Rollout **3 of {len(ids)}** in this filter"
    assert at.query_params["rollout"] == ids[2]  # the URL follows (a reload opens this one)
    for _ in range(2):
        at.button(key="triage_prev").click()
        rerun(at)
    assert headings(at) == [escaped(ids[0])] and at.button(key="triage_prev").disabled
    assert at.button(key="triage_next").proto.shortcut and at.button(key="triage_prev").proto.shortcut
    # Back on the run: the table of that filter, with the rollout last inspected selected (not reopened).
    at.switch_page(RUN_PAGE)
    rerun(at)
    assert headings(at)[0].startswith("Run")
    grid = run_table(at)
    assert json.loads(grid.proto.selection_default)["selection"]["rows"] == [0]
    assert [h for h in at.html if "dvn-scroller" in h.proto.body]
    rerun(at)
    assert headings(at)[0].startswith("Run")  # still here: the row shown selected does not open again
    select_row(at, 2)
    assert headings(at) == [escaped(ids[2])]


@pytest.mark.parametrize("given", ["path", "upload"])
def test_records_given_for_one_run_are_not_applied_to_the_next_run_typed(monkeypatch, tmp_path, given):
    # Run A's rollout records on run B would anchor B's rollouts on A's final answers (and show
    # A's rewards as B's): a new run path starts without records.
    assert SAMPLE_RECORDS is not None
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(SAMPLE_RUN, run_a)
    shutil.copytree(SAMPLE_RUN, run_b)
    at = run_app(monkeypatch)
    open_path(at, str(run_a))
    if given == "path":
        at.text_input(key="run_w_records_path").set_value(str(SAMPLE_RECORDS))
    else:
        records_uploader(at).set_value([("records.jsonl", SAMPLE_RECORDS.read_bytes(), "application/octet-stream")])
    rerun(at)
    assert any("run_reward_figure" in i for i in chart_ids(at))
    used = records_uploader(at).key
    open_path(at, str(run_b))
    assert headings(at)[0] == f"Run · {escaped(str(run_b.resolve()))}"
    assert not [i for i in chart_ids(at) if "run_reward_figure" in i]
    assert not [c for c in at.sidebar.caption if c.value.startswith("Rollout records:")]
    assert at.text_input(key="run_w_records_path").value == ""
    assert records_uploader(at).key != used  # a new, empty uploader: the browser cannot send the file again
    assert not at.error


def records_uploader(at: AppTest):
    (uploader,) = [u for u in at.sidebar.get("file_uploader") if u.proto.label == "Records file (JSONL)"]
    return uploader


def test_uploaded_rollout_records_do_not_outlive_the_server(tmp_path):
    """The server keeps uploaded records as files while it runs (a scan reads a path) and
    removes them when it exits."""
    script = ("import sys, os\n"
              "from tokencap.app.run.loading import records_directory\n"
              "d = records_directory()\n"
              "open(os.path.join(d, 'records.jsonl'), 'w').write('{}')\n"
              "print(d)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    kept = Path(done.stdout.strip().splitlines()[-1])
    assert kept.name.startswith("tokencap-records-")
    assert not kept.exists()


def test_a_row_clicked_opens_its_rollout_before_the_run_page_is_drawn_again(monkeypatch, sample_run, tmp_path):
    """The table's selection callback notes the row and the fragment's rerun opens it first thing: the
    charts and filters of a page about to be left are not drawn again (the click's rerun holds no chart
    span), and the rollout opened is the row's."""
    from tokencap.views import trace
    from tokencap.views.run import charts as rc

    _, frame = sample_run
    spans = tmp_path / "trace.txt"
    monkeypatch.setenv(trace.TRACE_ENV, str(spans))
    at = run_app(monkeypatch)
    assert f"run chart {rc.FIRST}" in [name for name, _ in trace.read(spans)]  # drawn by the first run
    spans.unlink()
    rows = sorted_rows(frame, passing(frame, filter_masks(frame, RunFilter())), RunFilter())
    select_row(at, 1)
    request = STATE_of(at)["open_rollout"]
    assert request.rollout_id == frame["rollout_id"].iloc[int(rows[1])]
    reran = [name for name, _ in trace.read(spans)]
    assert "run body" in reran and f"run chart {rc.FIRST}" not in reran, reran
    assert escaped(frame["rollout_id"].iloc[int(rows[1])]) in headings(at)  # the Rollout page, drawn
