"""Run-page fixes of issue 19, driven headless with AppTest: which records each run was scanned with,
where a typed path starts, what the rewards section describes, and triage in a comparison.

The browser half (the same views clicked in Chromium) is tests/test_browser_app_fixes.py.
"""

from __future__ import annotations

import os

from test_app_run import AFTER_FIX, REPO, escaped, rerun, run_app, sample  # noqa: F401 (a fixture)
from tokencap.views.run import reward as rw
from tokencap.views.run import source as rs


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
    monkeypatch.setenv(rs.START_DIR_ENV, str(REPO / "sample_data"))
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
    assert rs.typed_path("a/b", {rs.START_DIR_ENV: str(tmp_path)}) == str(tmp_path / "a" / "b")
    assert rs.typed_path(str(tmp_path / "c"), {rs.START_DIR_ENV: "/elsewhere"}) == str(tmp_path / "c")
    assert rs.typed_path("x", {}) == os.path.join(os.getcwd(), "x")


def test_tokencap_app_tells_the_server_where_it_was_started(monkeypatch, tmp_path):
    from tokencap import cli

    seen = []
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(rs.START_DIR_ENV, raising=False)
    monkeypatch.setattr(cli, "_serve", lambda cmd, **_: seen.append(os.environ.get(rs.START_DIR_ENV)) or 0)
    assert cli.main(["app", "--port", "8765"]) == 0
    assert seen == [str(tmp_path)]


def test_the_rewards_section_says_it_describes_the_whole_run(monkeypatch, sample):
    _, frame = sample
    at = run_app(monkeypatch, params={"run_reason": "multiple_chains"})
    assert escaped(rw.scope_words(len(frame), True)) in captions(at)
    assert "not only those passing the table's filters" in rw.scope_words(len(frame), True)
    assert rw.scope_words(3, False) == "Rewards and groups describe the whole run: all 3 rollouts."
