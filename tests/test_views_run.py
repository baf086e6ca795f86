"""The Run page's views: the run frame, filters, chart bars, figures and where rollouts live.

Correctness on 100,000 rows is checked against plain per-row Python references (never
timed here; `benchmarks/bench_run_page.py` measures speed).
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import vega_specs as vs
from hypothesis import given, settings
from hypothesis import strategies as hs
from synth_run import synthetic_scan_table

from tokencap import build_rollout, load_snapshots
from tokencap.rollout import MASK_REASON_ORDER
from tokencap.run import LINK_NOTES, scan_table
from tokencap.run.table import STATUSES
from tokencap.services import rollout_sources as src
from tokencap.services import run_sources as rs
from tokencap.services.arguments import PATH_PARAM, path_params
from tokencap.services.requests import OpenRequest
from tokencap.services.scan_cache import fingerprint
from tokencap.services.uploads import (
    NoCaptureUploaded,
    Upload,
    check_upload_for,
    table_of_parquet,
    table_of_uploads,
    uploads_key,
)
from tokencap.views import vega
from tokencap.views.run import charts as rc
from tokencap.views.run import data as rd
from tokencap.views.run.bars import CHARTS, Bars, calls_bars, chart_bars, status_bars
from tokencap.views.run.categories import (
    CALLS_BINS,
    DELIVERED_BINS,
    REFUSALS,
    VERDICTS,
    calls_bin_codes,
    delivered_bin_codes,
)
from tokencap.views.run.filters import CHANGES, SORTS, RunFilter, filter_masks, passing, sorted_rows
from tokencap.views.run.frame import run_frame
from tokencap.views.run.summary import run_metrics, single_call_warning

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"


@pytest.fixture(scope="module")
def sample_table(tmp_path_factory):
    """The scenario files of sample_data/ as a small run: 34 rollouts plus expected.json,
    which is not a rollout. The sample run (run/) and the scenarios that need a harness
    final-responses file are left out, so these counts stay those of the capture scenarios."""
    declared = json.loads((SAMPLES / "expected.json").read_text())
    needs_finals = {name for name, spec in declared.items() if "final_responses" in json.dumps(spec)}
    run = tmp_path_factory.mktemp("samples") / "sample_data"
    shutil.copytree(SAMPLES, run, ignore=lambda d, names: [n for n in names if n in needs_finals
                                                           or n in ("run", "run_after_fix", "rollout_records",
                                                                     "final_responses", "README.md", "tokenizer.json",
                                                                     "rollouts", "qwen3")])
    return scan_table(run, workers=1)


@pytest.fixture(scope="module")
def sample_frame(sample_table):
    return run_frame(sample_table)


@pytest.fixture(scope="module")
def big():
    table = synthetic_scan_table(100_000, seed=7)
    return table, run_frame(table), table.to_pylist()


def _row(frame, rollout_id):
    hits = frame.index[frame["rollout_id"] == rollout_id]
    assert len(hits) == 1, rollout_id
    return frame.loc[hits[0]]


# --------------------------------------------------------------------------- the frame


def test_frame_of_the_sample_run_derives_status_verdict_reasons_and_refusal_outcome(sample_frame):
    f = sample_frame
    assert len(f) == 35 and list(f.index) == list(range(35))
    assert _row(f, "length-stop")["status"] == "max_output_tokens"
    assert _row(f, "content-filter-stop")["status"] == "content_filter"
    assert _row(f, "clean-multiturn-tools")["status"] == "completed"
    assert _row(f, "expected")["status"] == "no response"  # expected.json is not a rollout: load_error
    assert _row(f, "expected")["reasons"] == "load_error, capture_incomplete"
    assert _row(f, "clean-multiturn-tools")["reasons"] == "—"
    assert _row(f, "subagent-branch")["verdict"] == "masked"
    assert _row(f, "delta-records")["verdict"] == "trainable"
    assert _row(f, "engine-refusal-ended")["refusal"] == "ended"
    assert _row(f, "engine-refusal-recovered")["refusal"] == "context"
    assert _row(f, "jsonl-parameter-refusal")["refusal"] == "other"
    assert _row(f, "delta-records")["refusal"] == "none"
    assert _row(f, "long-rollout")["calls_bin"] == "513-1024"
    assert _row(f, "long-rollout")["n_calls"] == 526
    assert _row(f, "expected")["delivered_bin"] == "0"
    assert _row(f, "clean-multiturn-tools")["delivered_bin"] == "100"
    # A recovered link is charted but is not a failure.
    assert _row(f, "empty-generation-parent")["link_parent_call_id_missing_recovered"] == 1
    assert _row(f, "empty-generation-parent")["link_failures"] == 0
    assert _row(f, "stale-parent-link")["link_failures"] == 1


def test_a_row_without_a_verdict_is_shown_masked_never_trainable(sample_table):
    """Fail closed: a null mask_sample in a table read from elsewhere is masked on the page, not trainable."""
    import pyarrow as pa

    i = sample_table.schema.get_field_index("mask_sample")
    verdicts = sample_table.column("mask_sample").to_pylist()
    first_trainable = verdicts.index(False)
    verdicts[first_trainable] = None
    frame = run_frame(sample_table.set_column(i, "mask_sample", pa.array(verdicts, pa.bool_())))
    assert frame["verdict"].iloc[first_trainable] == "masked"
    assert (frame["verdict"] == "trainable").sum() == verdicts.count(False)


def test_frame_of_an_empty_table_has_every_column():
    from tokencap.run import SCHEMA

    f = run_frame(SCHEMA.empty_table())
    assert len(f) == 0 and set(rd.TABLE_COLUMNS) <= set(f.columns)
    assert rd.table_frame(f, np.zeros(0, dtype=np.int64)).columns.tolist() == list(rd.TABLE_COLUMNS.values())
    assert [b.total for b in chart_bars(f, {})] == [0] * len(CHARTS)


def test_frame_columns_agree_with_the_table_row_by_row(big):
    _, f, rows = big
    statuses = f["status"].astype(str).to_numpy()
    reasons = f["reasons"].astype(str).to_numpy()
    for i in range(0, len(rows), 997):  # a spread of rows; every one is cheap to compare
        r = rows[i]
        want = "no response" if r["status"] is None else "completed" if r["status"] == "completed" else \
            r["incomplete_reason"] if r["incomplete_reason"] in ("max_output_tokens", "content_filter") \
            else "incomplete"
        assert statuses[i] == want
        assert reasons[i] == (", ".join(r["mask_reasons"]) or "—")
        assert f["link_failures"].iat[i] == sum(r[f"link_{n}"] for n in LINK_NOTES
                                                 if n != "parent_call_id_missing_recovered")


# --------------------------------------------------------------------------- bins


def _calls_bounds(key: str) -> tuple[int, int]:
    lo, _, hi = key.partition("-")
    return int(lo), int(hi or lo)


@given(hs.integers(0, 2 ** 21))
def test_every_call_count_falls_in_the_bin_whose_bounds_hold_it(n):
    key = CALLS_BINS[int(calls_bin_codes(np.array([n]))[0])]
    lo, hi = _calls_bounds(key)
    assert lo <= n <= hi


def test_calls_bins_tile_the_integers():
    bounds = [_calls_bounds(k) for k in CALLS_BINS]
    assert bounds[:5] == [(0, 0), (1, 1), (2, 2), (3, 4), (5, 8)]
    assert all(b[0] == a[1] + 1 for a, b in zip(bounds, bounds[1:]))


@given(hs.floats(0, 1))
def test_delivered_bins_hold_their_fraction(x):
    key = DELIVERED_BINS[int(delivered_bin_codes(np.array([x]))[0])]
    if x == 0:
        assert key == "0"
    elif x == 1:
        assert key == "100"
    else:
        lo, hi = (int(v) for v in key.split("-"))
        assert lo / 100 <= x < hi / 100 or (hi == 100 and x < 1)


# --------------------------------------------------------------------------- filters and the URL


filters = hs.builds(
    RunFilter,
    change=hs.lists(hs.sampled_from(CHANGES), max_size=3).map(tuple),
    groups=hs.sampled_from(("", "few", "flat", "starved")),
    verdict=hs.sampled_from(("",) + VERDICTS),
    reasons=hs.lists(hs.sampled_from(MASK_REASON_ORDER), max_size=3).map(tuple),
    statuses=hs.lists(hs.sampled_from(STATUSES), max_size=2).map(tuple),
    delivered=hs.sampled_from(("",) + DELIVERED_BINS),
    calls=hs.sampled_from(("",) + CALLS_BINS[:10]),
    link=hs.sampled_from(("",) + LINK_NOTES),
    refusal=hs.sampled_from(("",) + REFUSALS),
    source=hs.sampled_from(("", "shard-01", "SHARD-0", "x y")),
    query=hs.text(max_size=12),
    sort=hs.sampled_from(tuple(SORTS)),
    descending=hs.booleans(),
)


@given(filters)
def test_a_filter_survives_the_url(flt):
    params = flt.to_params()
    assert all(k.startswith("run_") for k in params)
    assert RunFilter.from_params(params) == flt
    assert RunFilter.from_params(params).token == flt.token


def test_unknown_url_values_are_dropped_not_raised():
    flt = RunFilter.from_params({"run_reason": "multiple_chains,bogus", "run_status": ["x", "completed"],
                                    "run_calls": "7", "run_link": "nope", "run_sort": "os.system",
                                    "run_desc": "1", "run_verdict": "maybe", "other": "kept out"})
    assert flt == RunFilter(reasons=("multiple_chains",), statuses=("completed",))
    assert flt.to_params() == {"run_reason": "multiple_chains", "run_status": "completed"}


def test_reasons_are_kept_in_spec_order_and_query_text_is_one_line():
    flt = RunFilter(reasons=("multiple_chains", "load_error"), query="  a\nb  ")
    assert flt.reasons == ("load_error", "multiple_chains") and flt.query == "a b"


def test_a_bar_click_sets_its_filter_and_a_second_click_clears_it():
    flt = RunFilter(query="x")
    once = flt.toggle("reasons", "multiple_chains")
    assert once.reasons == ("multiple_chains",) and once.query == "x"
    assert once.toggle("reasons", "multiple_chains").reasons == ()
    assert once.toggle("reasons", "load_error").reasons == ("load_error",)  # a click replaces, never piles up
    assert flt.toggle("calls", "1").calls == "1" and flt.toggle("calls", "1").toggle("calls", "1").calls == ""
    with pytest.raises(ValueError):
        flt.toggle("query", "x")


def test_cleared_keeps_the_sort_and_describe_says_each_filter():
    flt = RunFilter(verdict="masked", link="parent_unresolved", calls="3-4", sort="n_calls", descending=True)
    assert flt.cleared() == RunFilter(sort="n_calls", descending=True)
    assert [d for d, _ in flt.describe()] == ["verdict", "calls", "link"]
    assert "calls: 3–4" in [t for _, t in flt.describe()]
    assert RunFilter(descending=True).descending is False  # no sort, nothing to reverse
    assert flt.token != flt.cleared().token and RunFilter().token == RunFilter().token


def _reference_keep(r: dict, flt: RunFilter) -> bool:
    """One row, one filter, in plain Python: what `filter_masks` must agree with."""
    status = "no response" if r["status"] is None else "completed" if r["status"] == "completed" else \
        r["incomplete_reason"] if r["incomplete_reason"] in ("max_output_tokens", "content_filter") else "incomplete"
    if flt.verdict and (r["mask_sample"] != (flt.verdict == "masked")):
        return False
    if flt.reasons and not set(flt.reasons) & set(r["mask_reasons"]):
        return False
    if flt.statuses and status not in flt.statuses:
        return False
    if flt.link and not r[f"link_{flt.link}"] > 0:
        return False
    if flt.calls:
        lo, hi = _calls_bounds(flt.calls)
        if not lo <= r["n_calls"] <= hi:
            return False
    if flt.refusal:
        outcome = "ended" if r["refusal_ended_chain"] else "context" if r["context_refusals"] else \
            "other" if r["engine_refusals"] else "none"
        if outcome != flt.refusal:
            return False
    if flt.source and flt.source.lower() not in r["source"].lower():
        return False
    if flt.query and flt.query.lower() not in r["rollout_id"].lower():
        return False
    return True


@pytest.mark.parametrize("flt", [
    RunFilter(),
    RunFilter(reasons=("unresolved_retries", "multiple_roots")),
    RunFilter(verdict="trainable", statuses=("max_output_tokens", "content_filter")),
    RunFilter(verdict="masked", link="parent_unresolved", source="SHARD-01"),
    RunFilter(calls="1", query="77"),
    RunFilter(calls="33-64", refusal="context", statuses=("completed",)),
    RunFilter(refusal="ended", query="ROLLOUT-0"),
    RunFilter(statuses=("no response",), reasons=("load_error",)),
])
def test_filters_on_100k_rows_keep_exactly_the_rows_a_per_row_check_keeps(big, flt):
    _, f, rows = big
    keep = passing(f, filter_masks(f, flt))
    want = np.fromiter((_reference_keep(r, flt) for r in rows), dtype=bool, count=len(rows))
    assert np.array_equal(keep, want)
    assert set(filter_masks(f, flt)) == set(flt.active)


def test_delivered_filter_on_100k_rows(big):
    _, f, rows = big
    flt = RunFilter(delivered="90-100")
    keep = passing(f, filter_masks(f, flt))
    want = np.array([0.9 <= r["delivered_fraction"] < 1.0 for r in rows])
    assert np.array_equal(keep, want) and keep.any()


@pytest.mark.parametrize("column", [c for c in SORTS if c])
@pytest.mark.parametrize("descending", [False, True])
def test_sorting_100k_rows_is_stable_in_both_directions(big, column, descending):
    _, f, rows = big
    flt = RunFilter(sort=column, descending=descending, verdict="masked")
    keep = passing(f, filter_masks(f, flt))
    got = sorted_rows(f, keep, flt)
    kept = [i for i in range(len(rows)) if keep[i]]
    key = (lambda i: rows[i][column]) if column != "link_failures" else (lambda i: int(f["link_failures"].iat[i]))
    # Python's sort is stable; reverse=True keeps equal values in table order too.
    want = sorted(kept, key=key, reverse=descending)
    assert got.tolist() == want


def test_table_shows_the_rows_in_order_and_a_selection_maps_back(big):
    _, f, rows = big
    flt = RunFilter(reasons=("multiple_roots",), sort="n_calls", descending=True)
    order = sorted_rows(f, passing(f, filter_masks(f, flt)), flt)
    shown = rd.table_frame(f, order)
    assert shown.columns.tolist() == list(rd.TABLE_COLUMNS.values())
    assert shown["rollout"].tolist()[:50] == [rows[i]["rollout_id"] for i in order[:50]]
    assert all("multiple roots" in m for m in shown["mask reasons"].astype(str))  # the reason in words
    for position in (0, 5, len(order) - 1):
        assert rows[rd.row_at(f, order, position)]["rollout_id"] == shown["rollout"].iat[position]
    assert rd.row_at(f, order, len(order)) is None and rd.row_at(f, order, -1) is None


# --------------------------------------------------------------------------- charts and numbers


def test_each_chart_counts_the_rows_passing_every_other_filter(big):
    _, f, rows = big
    flt = RunFilter(reasons=("multiple_chains",), statuses=("completed",))
    masks = filter_masks(f, flt)
    bars = {b.dimension: b for b in chart_bars(f, masks)}
    # The reasons chart ignores the reason filter: it counts the completed rollouts.
    completed = [r for r in rows if r["status"] == "completed"]
    assert bars["reasons"].total == len(completed)
    assert bars["reasons"].counts == tuple(sum(r[f"reason_{x}"] for r in completed) for x in MASK_REASON_ORDER)
    # The status chart ignores the status filter: it counts rollouts masked for multiple_chains.
    chains = [r for r in rows if "multiple_chains" in r["mask_reasons"]]
    assert bars["statuses"].total == len(chains) and sum(bars["statuses"].counts) == len(chains)
    # Every other chart counts the rows that pass both.
    both = [r for r in chains if r["status"] == "completed"]
    assert bars["calls"].total == len(both) == sum(bars["calls"].counts)
    assert bars["link"].extra == tuple(sum(r[f"link_{n}"] for r in both) for n in LINK_NOTES)
    assert bars["link"].counts == tuple(sum(1 for r in both if r[f"link_{n}"] > 0) for n in LINK_NOTES)


def test_chart_keys_are_fixed_whatever_the_data(sample_frame, big):
    _, f, _ = big
    for (dimension, make) in CHARTS:
        small = make(sample_frame, np.ones(len(sample_frame), dtype=bool))
        assert small.dimension == dimension
        if dimension != "calls":  # calls: 0, 1, 2, then up to the run's largest bin
            assert small.keys == make(f, np.ones(len(f), dtype=bool)).keys
    calls = calls_bars(sample_frame, np.ones(len(sample_frame), dtype=bool))
    assert calls.keys[-1] == "513-1024" and calls.keys[:3] == ("0", "1", "2")


def test_every_chart_is_valid_vega_lite_and_carries_its_filter_key_on_every_bar(sample_frame):
    keep = np.ones(len(sample_frame), dtype=bool)
    for dimension, make in CHARTS:
        bars = make(sample_frame, keep)
        spec = vs.valid(rc.bar_spec(bars, active=(bars.keys[1],)))
        hit = vs.hit_layer(spec)
        assert [[r["dimension"], r["key"]] for r in vs.rows(hit)] == [[dimension, k] for k in bars.keys]
        assert hit["params"][0]["select"]["fields"] == ["dimension", "key"]
        assert spec["layer"][-1] is hit  # on top: a click anywhere in a row lands on it
        drawn = vs.rows(vs.bar_layer(spec))
        assert [r["count"] for r in drawn] == list(bars.counts)
        opacity = [r["opacity"] for r in drawn]
        assert opacity[1] == 1 and all(o == rc.FADED for i, o in enumerate(opacity) if i != 1)
        assert spec["usermeta"]["embedOptions"]["renderer"] == "svg"
    unfiltered = rc.bar_spec(status_bars(sample_frame, keep))
    assert {r["opacity"] for r in vs.rows(vs.bar_layer(unfiltered))} == {1.0}


def test_a_selection_event_maps_to_the_bar_clicked():
    event = {vega.PICK: [{"dimension": "reasons", "key": "multiple_roots"}]}
    assert rc.clicked(event) == ("reasons", "multiple_roots")
    assert rc.clicked({vega.PICK: []}) is None and rc.clicked(None) is None and rc.clicked({}) is None
    assert rc.clicked({vega.PICK: [{"key": "multiple_roots"}]}) is None
    assert rc.clicked({vega.PICK: "reasons"}) is None
    assert rc.clicked({vega.PICK: [{"dimension": "reasons"}, {"dimension": "calls", "key": "1"}]}) == ("calls", "1")
    assert rc.clicked({"other": [{"dimension": "calls", "key": "1"}]}) is None
    flt = RunFilter().toggle(*rc.clicked(event))
    assert flt.reasons == ("multiple_roots",)


def test_a_bar_s_label_and_tooltip_are_plain_text_never_markup_or_a_link():
    bars = Bars("reasons", "t", ("a",), ("<b>x</b>",), (1,), 2, hover=("<script>",))
    spec = vs.valid(rc.bar_spec(bars))
    hit = vs.rows(vs.hit_layer(spec))[0]
    # Vega draws text as SVG text and vega-tooltip escapes values: the text is kept as it is, unescaped.
    assert hit["bar"] == "<b>x</b>" and "<script>" in hit["counts"] and "&lt;" not in vs.texts(spec)
    assert "href" not in vs.channels(spec) and "url" not in spec.get("data", {})


def test_run_metrics_and_the_single_call_warning(sample_frame, big):
    metrics = {m.label: m for m in run_metrics(sample_frame)}
    assert metrics["rollouts"].value == "35"
    assert metrics["trainable"].value == "16" and metrics["masked"].value == "19"
    assert metrics["not loaded"].value == "1" and metrics["not loaded"].share == "2.9%"
    assert single_call_warning(sample_frame) is None
    assert single_call_warning(big[1]) is None
    stuck = synthetic_scan_table(50, seed=1)
    frame = run_frame(stuck)
    frame["n_calls"] = np.where(frame["n_calls"] > 0, 1, 0)
    warning = single_call_warning(frame)
    assert warning is not None and "exactly one model call" in warning and "tool-call parser" in warning


# --------------------------------------------------------------------------- where a run and its rollouts are


def test_the_sample_run_falls_back_to_sample_data(tmp_path):
    (tmp_path / "sample_data").mkdir()
    assert rs.sample_run_path(tmp_path) == tmp_path / "sample_data"
    (tmp_path / "sample_data" / "run").mkdir()
    assert rs.sample_run_path(tmp_path) == tmp_path / "sample_data" / "run"


def test_a_fingerprint_changes_when_a_file_changes(tmp_path):
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / ".hidden").write_text("x")
    first = fingerprint(tmp_path)
    assert first.files == 1 and first.size == 2 and first.exists
    assert fingerprint(tmp_path) == first
    (tmp_path / "a.json").write_text("{} ")
    assert fingerprint(tmp_path).signature != first.signature
    (tmp_path / ".hidden").write_text("changed")
    assert fingerprint(tmp_path).files == 1
    assert not fingerprint(tmp_path / "nope").exists


def test_a_store_records_file_fingerprints_its_siblings_as_its_scan_reads_them(tmp_path):
    """A records file given as the run is scanned with its store siblings: a phantom intent or an
    incomplete marker added beside it must change its fingerprint, or the cached row stays trainable."""
    for f in (SAMPLES / "run").glob("task0003-rollout2-attempt0.tokens.*"):
        shutil.copy(f, tmp_path / f.name)
    lone = tmp_path / "task0003-rollout2-attempt0.tokens.jsonl"
    first = fingerprint(lone)
    assert first.files == 3 and first.size == sum(f.stat().st_size for f in tmp_path.iterdir())
    with open(tmp_path / "task0003-rollout2-attempt0.tokens.intents", "a") as handle:
        handle.write("call-9999\n")
    second = fingerprint(lone)
    assert second.signature != first.signature
    (tmp_path / "task0003-rollout2-attempt0.tokens.incomplete").write_text("")
    assert fingerprint(lone).signature not in (first.signature, second.signature)
    (tmp_path / "other.tokens.intents").write_text("call-1\n")  # another rollout's file: not this run
    assert fingerprint(lone) == fingerprint(lone)
    linked = tmp_path / "elsewhere"
    linked.mkdir()
    (linked / lone.name).symlink_to(lone)  # read through the link: the target's store
    before = fingerprint(linked / lone.name)
    (tmp_path / "task0003-rollout2-attempt0.tokens.incomplete").write_text("stopped")
    assert fingerprint(linked / lone.name).signature != before.signature


def test_the_row_of_a_store_records_file_scanned_as_the_run_is_located_at_that_file(tmp_path):
    for f in (SAMPLES / "run").glob("task0003-rollout2-attempt0.tokens.*"):
        shutil.copy(f, tmp_path / f.name)
    lone = tmp_path / "task0003-rollout2-attempt0.tokens.jsonl"
    (source,) = scan_table(lone, workers=1).column("source").to_pylist()
    origin = rs.RunOrigin("file", str(lone), root=str(lone))
    assert rs.locate(origin, source) == rs.Located(path=str(lone.resolve()))
    assert rs.locate(origin, "task0003-rollout3-attempt0.tokens.*") is None  # another rollout: not this file
    assert rs.locate(origin, "task0003-rollout2-attempt0.json") is None


def test_rows_of_a_scanned_directory_are_located_under_it():
    origin = rs.RunOrigin("directory", "samples", root=str(SAMPLES))
    for source in ("capture_store/store-complete.tokens.*", "multi_rollout_entries.jsonl"):
        located = rs.locate(origin, source)
        assert located == rs.Located(path=str(SAMPLES.resolve()))
    assert rs.locate(origin, "gone.json") is None


def test_a_source_naming_a_file_outside_the_run_is_never_located(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "secret.json").write_text("{}")
    (run / "link.json").symlink_to(tmp_path / "secret.json")
    origin = rs.RunOrigin("parquet", "t.parquet", roots=(str(run),))
    assert rs.run_files(run, "../secret.json") == []
    assert rs.locate(origin, "../secret.json") is None
    assert rs.locate(origin, "link.json") is None
    with pytest.raises(FileNotFoundError):
        rs.source_for_run_rollout(OpenRequest(path=str(run), source="../secret.json", rollout_id="x"))


def _store_zip(pattern: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for f in sorted((SAMPLES / "capture_store").glob(pattern)):
            zf.write(f, f"x/{f.name}")
    return buffer.getvalue()


def test_rows_of_a_table_uploaded_alone_are_found_among_uploaded_files_or_not_at_all():
    jsonl = Upload("multi_rollout_entries.jsonl", (SAMPLES / "multi_rollout_entries.jsonl").read_bytes())
    store = Upload("interrupted.zip", _store_zip("store-interrupted.tokens.*"))
    origin = rs.RunOrigin("parquet", "run.parquet", uploads=(Upload("run.parquet", b"PAR1"), jsonl, store))
    assert origin.from_table_alone
    assert rs.locate(origin, "sub/multi_rollout_entries.jsonl").data == jsonl.data
    assert rs.locate(origin, "capture_store/store-interrupted.tokens.*").name == "interrupted.zip"
    assert rs.locate(origin, "capture_store/store-complete.tokens.*") is None
    assert rs.locate(origin, "run.parquet") is None  # the table itself holds no rollout
    # With the run directory named, its files are found.
    named = rs.RunOrigin("parquet", "run.parquet", roots=(str(SAMPLES),))
    assert rs.locate(named, "capture_store/store-complete.tokens.*").path == str(SAMPLES.resolve())


def test_the_missing_source_message_says_what_to_upload():
    alone = rs.RunOrigin("parquet", "run.parquet")
    store = rs.missing_message(alone, "shard-1/r7.tokens.*")
    assert "table came without its run" in store and "shard-1/r7.tokens.*" in store
    assert "zip its files (r7.tokens.jsonl" in store and "on this machine (no run directory is known)" in store
    single = rs.missing_message(rs.RunOrigin("parquet", "t", roots=("/data/run",)), "a/b/r.jsonl")
    assert "Upload r.jsonl itself" in single and "under /data/run" in single


def test_an_upload_offered_for_a_missing_rollout_is_checked():
    data = (SAMPLES / "multi_rollout_entries.jsonl").read_bytes()
    upload = Upload("m.jsonl", data)
    assert check_upload_for(upload, "jsonl-clean") is None
    assert check_upload_for(upload, "other") == \
        "m.jsonl holds jsonl-clean, jsonl-parameter-refusal, jsonl-refusal-ended, not other"
    assert "line 1" in check_upload_for(Upload("bad.jsonl", b"{oops\n"), "x")
    assert "is a table" in check_upload_for(Upload("t.parquet", b""), "x")


def test_uploaded_files_scan_in_memory_with_a_bad_one_as_a_row():
    uploads = (Upload("store.zip", _store_zip("store-*")),
               Upload("multi_rollout_entries.jsonl", (SAMPLES / "multi_rollout_entries.jsonl").read_bytes()),
               Upload("bad.json", b'{"entries": [{"model_call_id": 3}]}'))
    seen = []
    table = table_of_uploads(uploads, progress=lambda d, t: seen.append((d, t)))
    rows = table.to_pylist()
    assert [(r["source"], r["rollout_id"]) for r in rows] == [
        ("bad.json", "bad"), ("multi_rollout_entries.jsonl", "jsonl-clean"),
        ("multi_rollout_entries.jsonl", "jsonl-parameter-refusal"), ("multi_rollout_entries.jsonl", "jsonl-refusal-ended"),
        ("store.zip", "store-complete"), ("store.zip", "store-interrupted")]
    assert rows[0]["reason_load_error"] and "bad.json" in rows[0]["error"]
    assert seen[-1] == (6, 6)
    origin = rs.RunOrigin("upload", "x", uploads=uploads)
    assert rs.locate(origin, "store.zip").data == uploads[0].data
    assert uploads_key(uploads) != uploads_key(uploads[:2])


def test_uploads_none_of_which_is_a_capture_are_an_error_naming_each_file_not_a_run():
    """Issue 37, item 8: an empty file, truncated JSON, an image or a rollout-records file is no run."""
    records = (SAMPLES / "rollout_records" / "run.jsonl").read_bytes().split(b"\n")[0]
    uploads = (Upload("empty.json", b""), Upload("cut.json", b'{"entries": ['),
               Upload("records.jsonl", records))
    with pytest.raises(NoCaptureUploaded) as caught:
        table_of_uploads(uploads)
    said = str(caught.value)
    assert "\n" not in said and said.index("empty.json") < said.index("cut.json") < said.index("records.jsonl")
    assert "the input is empty" in said and "not valid JSON" in said
    assert "upload it under Rollout records in the sidebar" in said and "--final-responses" not in said
    assert said.endswith("Open a run: its capture files (snapshot JSON, entries JSONL, a zip of a capture store) "
                         "or its scan table (.parquet).")


def test_an_uploaded_parquet_is_read_or_refused_with_its_name(sample_table):
    buffer = io.BytesIO()
    pq.write_table(sample_table, buffer)
    assert table_of_parquet(Upload("run.parquet", buffer.getvalue())).num_rows == 35
    with pytest.raises(ValueError, match=r"^junk\.parquet: not a readable parquet file"):
        table_of_parquet(Upload("junk.parquet", b"nope"))


def test_open_request_is_plain_data():
    request = rs.open_request(rs.Located(path="/runs/a"), "s/r.tokens.*", "r", seq=3,
                              back_params={"run_reason": "load_error"})
    assert request == OpenRequest(path="/runs/a", source="s/r.tokens.*", rollout_id="r", seq=3,
                                  back_params={"run_reason": "load_error"})
    uploaded = rs.open_request(rs.Located(name="u.jsonl", data=b"x"), "u.jsonl", "r")
    assert uploaded.path is None and uploaded.name == "u.jsonl" and uploaded.data == b"x"


# --------------------------------------------------------------------------- the Rollout page's side


def test_a_store_rollout_of_a_run_opens_as_its_own_files_with_the_verdict_of_its_row(sample_frame):
    request = OpenRequest(path=str(SAMPLES), source="capture_store/store-interrupted.tokens.*",
                          rollout_id="store-interrupted")
    source = rs.source_for_run_rollout(request)
    assert source.names == ("store-interrupted.tokens.intents", "store-interrupted.tokens.jsonl",
                            "store-interrupted.tokens.state.json")
    loaded = src.load_source(source)
    assert [s.rollout_id for s in loaded.snapshots] == ["store-interrupted"]
    result = build_rollout(loaded.snapshots[0])
    row = _row(sample_frame, "store-interrupted")
    assert result.mask_reasons == ["capture_incomplete"] and row["reasons"] == "capture_incomplete"
    # The same request always gives the same source key (the page caches by it).
    assert rs.source_for_run_rollout(request).key == source.key


def test_a_file_rollout_and_an_uploaded_rollout_open_whole():
    by_path = rs.source_for_run_rollout(OpenRequest(path=str(SAMPLES), source="multi_rollout_entries.jsonl",
                                                    rollout_id="r"))
    assert by_path.path == str((SAMPLES / "multi_rollout_entries.jsonl").resolve()) and not by_path.names
    single = rs.source_for_run_rollout(OpenRequest(path=str(SAMPLES / "length_stop.json"), source="length_stop.json",
                                                  rollout_id="r"))
    assert single.name == "length_stop.json"
    data = (SAMPLES / "length_stop.json").read_bytes()
    uploaded = rs.source_for_run_rollout(OpenRequest(path=None, source="x.json", rollout_id="r", name="x.json",
                                                    data=data))
    assert uploaded.data == data and [s.rollout_id for s in load_snapshots(uploaded.data)] == ["length-stop"]
    with pytest.raises(FileNotFoundError, match="gone.json: not found under"):
        rs.source_for_run_rollout(OpenRequest(path=str(SAMPLES), source="gone.json", rollout_id="r"))


@settings(max_examples=30, deadline=None)
@given(hs.sampled_from([c for c in SORTS if c]), hs.booleans(), hs.integers(0, 40))
def test_sorting_a_small_frame_matches_pandas_stable_sort(column, descending, n):
    f = run_frame(synthetic_scan_table(n, seed=n))
    flt = RunFilter(sort=column, descending=descending)
    got = sorted_rows(f, np.ones(n, dtype=bool), flt)
    values = f[column].astype(object) if column == "rollout_id" else f[column]
    want = sorted(range(n), key=lambda i: values.iat[i], reverse=descending)
    assert got.tolist() == want


def test_the_url_names_a_typed_run_path_unless_an_upload_is_shown():
    assert path_params("/runs/a", showing_upload=False) == {PATH_PARAM: "/runs/a"}
    assert path_params("/runs/a", showing_upload=True) == {}
    assert path_params("", showing_upload=False) == {}


def test_selected_rows_reads_a_table_selection_as_streamlit_keeps_it_and_nothing_else():
    from types import SimpleNamespace

    from tokencap.views.widgets import selected_rows

    assert selected_rows({"selection": {"rows": [3], "columns": [], "cells": []}}) == (3,)
    assert selected_rows(SimpleNamespace(selection=SimpleNamespace(rows=[0, 5]))) == (0, 5)
    for nothing in (None, {}, {"selection": {}}, {"selection": {"rows": []}}, {"selection": {"rows": "3"}},
                    {"selection": {"rows": [True, "1", 2.0]}}, "rows", 7):
        assert selected_rows(nothing) == ()
