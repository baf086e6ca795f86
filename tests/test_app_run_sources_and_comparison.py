"""The Run page driven headless with AppTest: which records each run was scanned with,
where a typed path starts, what the rewards section describes, and triage in a comparison.

The browser half (the same views clicked in Chromium) is tests/test_browser_comparison_and_layout.py.
"""

from __future__ import annotations

import json
import os

from helpers_app import (
    AFTER_FIX,
    REPO,
    RUN_PAGE,
    escaped,
    headings,
    open_link,
    rerun,
    run_app,
    run_table,
    select_row,
    send_selection,
)
from helpers_app import compare_with_the_sample_after_fix as _compare_with_the_sample_after_fix

from tokencap.services.arguments import START_DIR_ENV, typed_path
from tokencap.views.run import reward as rw


def captions(at) -> list[str]:
    return [c.value for c in at.caption]


def test_the_run_page_names_the_records_the_sample_run_was_scanned_with(monkeypatch):
    at = run_app(monkeypatch)
    words = escaped("with the bundled rollout records sample_data/rollout_records/run.jsonl")
    assert any(words in c for c in captions(at)), captions(at)


def test_a_run_scanned_without_records_says_so(monkeypatch, tmp_path):
    import shutil

    shutil.copy(REPO / "sample_data" / "length_stop.json", tmp_path / "length_stop.json")
    at = run_app(monkeypatch, str(tmp_path))
    assert any("without rollout records" in c for c in captions(at)), captions(at)


def test_a_relative_path_to_compare_with_starts_where_tokencap_app_was_started(monkeypatch, tmp_path):
    monkeypatch.setenv(START_DIR_ENV, str(REPO / "sample_data"))
    monkeypatch.chdir(tmp_path)  # the server's own directory is somewhere else
    at = run_app(monkeypatch)
    at.text_input(key="run_w_vs_path").set_value("run_after_fix")
    rerun(at)
    assert not at.error, [e.value for e in at.error]
    assert any("run_pairs:" in d.proto.id for d in at.dataframe)
    used = escaped(f"B (run_after_fix): {AFTER_FIX.resolve()}, scanned with the bundled rollout records "
                   "sample_data/rollout_records/run_after_fix.jsonl")
    assert any(used in c for c in captions(at)), captions(at)


def test_typed_paths_start_in_the_start_directory_else_the_working_directory(tmp_path):
    assert typed_path("a/b", {START_DIR_ENV: str(tmp_path)}) == str(tmp_path / "a" / "b")
    assert typed_path(str(tmp_path / "c"), {START_DIR_ENV: "/elsewhere"}) == str(tmp_path / "c")
    assert typed_path("x", {}) == os.path.join(os.getcwd(), "x")


def test_tokencap_app_tells_the_server_where_it_was_started(monkeypatch, tmp_path, free_port):
    from tokencap import cli
    from tokencap.cli import server

    seen = []
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(START_DIR_ENV, raising=False)
    monkeypatch.setattr(server, "_serve", lambda cmd, **_: seen.append(os.environ.get(START_DIR_ENV)) or 0)
    assert cli.main(["app", "--port", str(free_port)]) == 0
    assert seen == [str(tmp_path)]


def test_the_rewards_section_says_it_describes_the_whole_run(monkeypatch, sample_run):
    _, frame = sample_run
    at = run_app(monkeypatch, params={"run_reason": "multiple_chains"})
    assert escaped(rw.scope_words(len(frame), True)) in captions(at)
    assert "not only those passing the table's filters" in rw.scope_words(len(frame), True)
    assert rw.scope_words(3, False) == "Rewards and groups describe the whole run: all 3 rollouts."


IDENTICAL = "task0153-rollout0-attempt0"
"""A "fixed" rollout of the sample comparison whose files are byte-identical in both runs (only its records differ)."""


def _pairs(at):
    return next(d for d in at.dataframe if "run_pairs:" in d.proto.id)


def _open_fixed(monkeypatch, side: str):
    """The sample comparison filtered on "fixed", the row of `IDENTICAL` selected and its ``side`` opened."""
    at = _compare_with_the_sample_after_fix(monkeypatch)
    at.multiselect(key="run_w_change").set_value(["fixed"])
    rerun(at)
    shown = list(_pairs(at).value["rollout A"])
    position = shown.index(IDENTICAL)
    at = send_selection(at, _pairs(at), {"rows": [position], "columns": [], "cells": []})
    at.button(key=f"run_open_{side}").click()
    return rerun(at), shown, position


def _compare_columns(at) -> list[str]:
    for t in at.table:  # st.table's Markdown: capture strings escaped
        columns = [str(c).replace("\\", "") for c in t.value.columns]
        if any(c.startswith("A (run)") for c in columns):
            return columns
    raise AssertionError("no Compare table")


def test_a_joined_rollout_with_byte_identical_files_opens_on_compare_with_both_captures(monkeypatch):
    at, _, _ = _open_fixed(monkeypatch, "A")
    assert headings(at) == [escaped(IDENTICAL)]
    assert not [e.value for e in at.error]
    assert at.session_state["tab"] == "Compare"
    assert any("byte-identical" in i.value for i in at.info)
    columns = _compare_columns(at)
    assert any(c.startswith("A (run) · ") for c in columns) and any(c.startswith("B (run_after_fix) · ") for c in columns)
    changes = "\n".join(m.value for m in at.markdown if m.value.startswith("- "))
    assert "masked → trainable" in changes


def test_opening_b_keeps_run_a_on_the_left(monkeypatch):
    at, _, _ = _open_fixed(monkeypatch, "B")
    assert at.session_state["open_rollout"].side == "B"
    columns = _compare_columns(at)
    assert columns.index(next(c for c in columns if c.startswith("A (run)"))) < \
        columns.index(next(c for c in columns if c.startswith("B (run_after_fix)")))
    changes = "\n".join(m.value for m in at.markdown if m.value.startswith("- "))
    assert "masked → trainable" in changes  # A to B, as the Run page's change says: fixed


def test_triage_in_a_comparison_walks_the_joined_rows_and_back_selects_the_row(monkeypatch):
    at, shown, position = _open_fixed(monkeypatch, "A")
    assert any(f"{position + 1} of {len(shown)}" in m.value for m in at.markdown)
    step = "triage_next" if position + 1 < len(shown) else "triage_prev"
    at.button(key=step).click()
    rerun(at)
    other = shown[position + 1 if step == "triage_next" else position - 1]
    assert headings(at) == [escaped(other)]
    assert at.session_state["open_rollout"].vs.rollout_id == other
    at.button(key="triage_prev" if step == "triage_next" else "triage_next").click()
    rerun(at)
    assert headings(at) == [escaped(IDENTICAL)]
    at.switch_page(RUN_PAGE)
    rerun(at)
    pairs = _pairs(at)
    assert json.loads(pairs.proto.selection_default)["selection"]["rows"] == [position]
    assert [h for h in at.html if "dvn-scroller" in h.proto.body]  # scrolled to it
    assert at.get_by_key("run_pair_open") is not None  # its open box, not the rollout opened again


def test_a_link_to_a_joined_rollout_reopens_the_comparison_and_its_place(monkeypatch):
    at, shown, position = _open_fixed(monkeypatch, "B")
    params = dict(at.query_params)
    assert params["vs_src"] == "sample:run" and params["side"] == "B" and params["src"] == "sample:run_after_fix"
    assert params["run_change"] == "fixed" and params["run_vs"] == "sample"
    fresh = open_link(monkeypatch, params)
    assert headings(fresh) == [escaped(IDENTICAL)]
    assert fresh.session_state["tab"] == "Compare"
    columns = _compare_columns(fresh)
    assert columns.index(next(c for c in columns if c.startswith("A (run)"))) < \
        columns.index(next(c for c in columns if c.startswith("B (run_after_fix)")))
    assert any(f"{position + 1} of {len(shown)}" in m.value and "in this filter" in m.value for m in fresh.markdown), [m.value for m in fresh.markdown][:6]


def test_a_reloaded_rollout_link_keeps_its_place_in_the_filter(monkeypatch, sample_run):
    at = run_app(monkeypatch, params={"run_reason": "multiple_chains"})
    shown = run_table(at).value
    select_row(at, 2)
    assert any("3 of" in m.value and "in this filter" in m.value for m in at.markdown)
    fresh = open_link(monkeypatch, dict(at.query_params))
    assert headings(fresh) == [escaped(shown["rollout"].iat[2])]
    assert any(f"3 of {len(shown)}" in m.value and "in this filter" in m.value for m in fresh.markdown)
    fresh.button(key="triage_next").click()
    rerun(fresh)
    assert headings(fresh) == [escaped(shown["rollout"].iat[3])]
