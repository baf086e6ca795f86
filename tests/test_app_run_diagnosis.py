"""The Run page's "Why lineage broke" chart, its cause filter and the tiles of what Gym delivered (AppTest)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import vega_specs as vs
from helpers_app import click_bar, run_app, run_table, shown_count
from helpers_diagnosis import broken_rollout, records_file

from tokencap.run import scan_table
from tokencap.views.run.frame import run_frame


def broken_run(tmp_path: Path) -> tuple[Path, Path]:
    """Six rollouts, every third broken (tokens_replaced); records: r00 (broken) and r01 (clean) delivered as
    trainable by token capture, r02 masked by the harness itself."""
    run = tmp_path / "run"
    run.mkdir()
    for i in range(6):
        rid = f"r{i:02d}"
        (run / f"{rid}.json").write_text(json.dumps(broken_rollout(rid, replaced=i % 3 == 0)))
    records = records_file(tmp_path / "records.jsonl", [f"r{i:02d}" for i in range(6)], {
        "r00": {"mask_sample": False, "_ng_token_capture": {"calls": 2}},
        "r01": {"mask_sample": False, "_ng_token_capture": {"calls": 2}},
        "r02": {"mask_sample": True},
    })
    return run, records


def test_the_cause_chart_counts_rollouts_by_cause_and_a_click_filters_the_table(monkeypatch, tmp_path):
    run, records = broken_run(tmp_path)
    at = run_app(monkeypatch, str(run), "--final-responses", str(records))
    # On the first screen, beside the mask-reason chart (issue 37: not behind "More charts").
    assert any("run_chart:causes:" in c.proto.id for c in at.get("vega_lite_chart"))
    chart = next(c for c in at.get("vega_lite_chart") if "run_chart:causes:" in c.proto.id)
    spec = vs.valid(json.loads(chart.proto.spec))
    assert "Why lineage broke" in spec["title"]["text"]
    counts = {r["key"]: r["count"] for r in vs.rows(vs.bar_layer(spec))}
    assert counts["tokens_replaced"] == 2 and counts["seam"] == 0
    hover = {r["key"]: r["counts"] for r in vs.rows(vs.hit_layer(spec))}
    assert "re-serialised" in hover["tokens_replaced"]  # the cause's hint on hover
    assert shown_count(at) == (6, 6)
    click_bar(at, "causes", "tokens_replaced")
    assert shown_count(at) == (2, 6)
    assert at.query_params["run_cause"] == "tokens_replaced"
    assert run_table(at).value["rollout"].tolist() == ["r00", "r03"]
    assert run_table(at).value["why lineage broke"].tolist() == ["tokens replaced"] * 2  # words; the URL keeps the key
    click_bar(at, "causes", "tokens_replaced")  # again: cleared
    assert shown_count(at) == (6, 6)


def test_the_tiles_and_the_filter_of_rollouts_trained_on_in_doubt(monkeypatch, tmp_path):
    run, records = broken_run(tmp_path)
    at = run_app(monkeypatch, str(run), "--final-responses", str(records), params={"run_charts": "1"})
    metrics = {m.label: m.value for m in at.metric}
    # r00 and r01: Gym trained on them, tokencap masks them (r00's lineage breaks; the final answer of
    # each names none of its calls)
    assert metrics["trained in doubt"] == "2"
    assert metrics["masked by harness"] == "1"  # r02
    click_bar(at, "delivery", "in_doubt")
    assert shown_count(at) == (2, 6)
    assert run_table(at).value["rollout"].tolist() == ["r00", "r01"]
    click_bar(at, "delivery", "in_doubt")
    click_bar(at, "delivery", "agent")
    assert run_table(at).value["rollout"].tolist() == ["r02"]


def test_without_records_there_is_no_delivery_tile(monkeypatch, tmp_path):
    run, _ = broken_run(tmp_path)
    at = run_app(monkeypatch, str(run))
    assert "trained in doubt" not in {m.label for m in at.metric}
    frame = run_frame(scan_table(run, workers=1))
    assert int(frame["cause_tokens_replaced"].sum()) == 2


def test_the_run_page_diagnoses_with_the_app_s_tokenizer(monkeypatch, tmp_path):
    """`tokencap app RUN --tokenizer PATH` refines the Run page's causes as it does the Rollout page's: a
    history decoded and encoded again reads `retokenized` with it, `tokens_replaced` without (the scan
    cache keeps the two apart)."""
    from helpers_diagnosis import tokenizer_file

    run, _ = broken_run(tmp_path)
    tok = tokenizer_file(tmp_path / "tokenizer.json")
    without = run_table(run_app(monkeypatch, str(run))).value
    assert set(without["why lineage broke"]) == {"—", "tokens replaced"}
    with_tok = run_table(run_app(monkeypatch, str(run), "--tokenizer", str(tok))).value
    assert set(with_tok["why lineage broke"]) == {"—", "retokenized"}
    assert (with_tok["why lineage broke"] != "—").sum() == (without["why lineage broke"] != "—").sum() == 2


def test_the_bundled_sample_tokenizer_diagnoses_the_bundled_run_only(tmp_path, monkeypatch):
    from tokencap.app.run import loading

    monkeypatch.setattr(sys, "argv", ["app.py"])
    samples = Path(loading.APP_DIR) / "sample_data"
    assert loading.run_tokenizer(str(samples / "run")) == str(samples / "tokenizer.json")
    assert loading.run_tokenizer(str(tmp_path)) is None
    monkeypatch.setattr(sys, "argv", ["app.py", str(tmp_path), "--tokenizer", str(tmp_path / "tok.json")])
    (tmp_path / "tok.json").write_text("{}")
    assert loading.run_tokenizer(str(tmp_path)) == str(tmp_path / "tok.json")
