"""The Run page's "Why lineage broke" chart, the "What Gym delivered" chart, their filters and tiles (docs/contract.md#scan-diagnosis-columns)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import vega_specs as vs
from synth_run import after_a_fix, synthetic_scan_table

from tokencap.diagnosis import CAUSES, HINTS
from tokencap.run.table import DIAGNOSIS_COLUMNS
from tokencap.views import vega
from tokencap.views.run import charts as rc
from tokencap.views.run import compare as cv
from tokencap.views.run.bars import cause_bars, chart_bars, delivery_bars
from tokencap.views.run.categories import DELIVERY
from tokencap.views.run.filters import RunFilter, filter_masks, passing
from tokencap.views.run.frame import run_frame
from tokencap.views.run.summary import run_metrics


@pytest.fixture(scope="module")
def synth():
    table = synthetic_scan_table(5_000, seed=3)
    return table, run_frame(table), table.to_pylist()


def test_cause_columns_equal_a_per_row_reference(synth):
    table, frame, rows = synth
    for cause in CAUSES:
        want = np.array([cause in r["break_causes"] for r in rows])
        assert (frame[f"cause_{cause}"].to_numpy() == want).all(), cause
    assert list(frame["causes"].astype(str)) == [", ".join(r["break_causes"]) or "—" for r in rows]
    assert (frame["breaks"].to_numpy() == np.array([r["breaks"] for r in rows])).all()


def test_delivery_states_equal_a_per_row_reference(synth):
    table, frame, rows = synth

    def state(r: dict) -> str:
        if r["delivered_mask_sample"] is False:
            return "in_doubt" if r["mask_sample"] else "trained"
        if r["delivered_mask_sample"] is True:
            return "agent" if r["delivered_by"] == "agent" else "capture_masked"
        return "unknown"

    assert list(frame["delivery"].astype(str)) == [state(r) for r in rows]
    assert {"in_doubt", "agent", "trained", "unknown"} <= set(frame["delivery"].astype(str))


def test_cause_bars_count_rollouts_per_cause_with_each_hint_on_hover(synth):
    table, frame, rows = synth
    keep = np.ones(len(frame), dtype=bool)
    keep[::2] = False
    bars = cause_bars(frame, keep)
    assert bars.dimension == "causes" and bars.title == "Why lineage broke"
    assert bars.keys == CAUSES and bars.hover == tuple(f"{HINTS[c]} (key: {c})" for c in CAUSES)
    kept = [r for i, r in enumerate(rows) if keep[i]]
    assert bars.counts == tuple(sum(c in r["break_causes"] for r in kept) for c in CAUSES)
    assert bars.total == len(kept)
    spec = vs.valid(rc.bar_spec(bars, active=("branch",)))
    hits = vs.rows(vs.hit_layer(spec))
    assert [[r["dimension"], r["key"]] for r in hits] == [["causes", c] for c in CAUSES]
    assert "chat template" in hits[CAUSES.index("generation_dropped")]["counts"]
    assert rc.clicked({vega.PICK: [{"dimension": "causes", "key": "seam"}]}) == ("causes", "seam")


def test_a_cause_filter_keeps_rollouts_with_a_break_of_that_cause_and_round_trips_the_url(synth):
    table, frame, rows = synth
    flt = RunFilter().toggle("causes", "branch")
    assert flt.causes == ("branch",)
    assert flt.toggle("causes", "branch").causes == ()
    keep = passing(frame, filter_masks(frame, flt))
    assert list(np.flatnonzero(keep)) == [i for i, r in enumerate(rows) if "branch" in r["break_causes"]]
    both = RunFilter(causes=("seam", "branch", "not-a-cause"))
    assert both.causes == ("seam", "branch")  # vocabulary order, unknown dropped
    assert both.to_params() == {"run_cause": "seam,branch"}
    assert RunFilter.from_params(both.to_params()) == both
    assert ("causes", "lineage broke by: turn boundary lost or branch") in both.describe()  # words, keys in the URL
    # the chart counts over every other filter, never its own
    bars = chart_bars(frame, filter_masks(frame, flt))
    causes = next(b for b in bars if b.dimension == "causes")
    assert causes.total == len(frame)


def test_a_delivery_filter_keeps_rollouts_trained_on_in_doubt(synth):
    table, frame, rows = synth
    flt = RunFilter().toggle("delivery", "in_doubt")
    keep = passing(frame, filter_masks(frame, flt))
    want = [i for i, r in enumerate(rows) if r["delivered_mask_sample"] is False and r["mask_sample"]]
    assert list(np.flatnonzero(keep)) == want and want
    assert RunFilter.from_params({"run_gym": "agent"}).delivery == "agent"
    assert RunFilter.from_params({"run_gym": "nonsense"}).delivery == ""
    bars = delivery_bars(frame, np.ones(len(frame), dtype=bool))
    assert bars.keys == DELIVERY and bars.counts[0] == len(want)
    assert bars.labels[0] == "trained on, lineage in doubt"
    vs.valid(rc.bar_spec(bars))


def test_tiles_of_what_gym_delivered_only_when_a_record_said(synth):
    table, frame, rows = synth
    metrics = {m.label: m for m in run_metrics(frame)}
    doubt = sum(1 for r in rows if r["delivered_mask_sample"] is False and r["mask_sample"])
    agent = sum(1 for r in rows if r["delivered_by"] == "agent" and r["delivered_mask_sample"] is True)
    assert metrics["trained in doubt"].value == f"{doubt:,}"
    assert "lineage is in doubt" in metrics["trained in doubt"].help
    assert metrics["masked by harness"].value == f"{agent:,}"
    bare = run_frame(table.drop_columns(list(DIAGNOSIS_COLUMNS)))  # a table from before 11.3
    assert "trained in doubt" not in {m.label for m in run_metrics(bare)}
    assert not bare["cause_branch"].any() and (bare["delivery"].astype(str) == "unknown").all()
    assert cause_bars(bare, np.ones(len(bare), dtype=bool)).counts == (0,) * len(CAUSES)


def test_a_comparison_shows_both_runs_cause_shares_side_by_side(synth):
    table, frame, rows = synth
    b = after_a_fix(table)
    cmp = cv.compare_runs(table, frame, b, run_frame(b), names=("before", "after"))
    pairs = {a.dimension: (a, bb) for a, bb in cv.paired_bars(cmp, {}, {})}
    a_bars, b_bars = pairs["causes"]
    assert a_bars.keys == b_bars.keys == CAUSES
    b_rows = b.to_pylist()
    assert b_bars.counts == tuple(sum(c in r["break_causes"] for r in b_rows) for c in CAUSES)
    assert sum(b_bars.counts) < sum(a_bars.counts)  # the fix cleared some breaks
    spec = vs.valid(rc.bar_spec(a_bars, versus=b_bars, names=("before", "after")))
    assert vs.bar_layer(spec)["encoding"]["color"]["scale"]["domain"] == ["before", "after"]
    tip = vs.rows(vs.hit_layer(spec))[0]["counts"]
    assert "before: " in tip and "after: " in tip
    labels = [m.label for m in cv.compare_metrics(cmp)]
    assert "trained in doubt" in labels and "masked by harness" in labels
    shares = cmp.summary.causes
    assert list(shares.index) == list(CAUSES)
    assert shares.loc["branch", "count_a"] == a_bars.counts[CAUSES.index("branch")]


def test_comparison_tiles_stay_paired_when_only_one_run_has_records(synth):
    table, frame, rows = synth
    bare = table.drop_columns(list(DIAGNOSIS_COLUMNS))
    cmp = cv.compare_runs(table, frame, bare, run_frame(bare))
    tile = next(m for m in cv.compare_metrics(cmp) if m.label == "trained in doubt")
    assert tile.value.endswith("→ 0")


def test_an_unknown_cause_in_a_table_is_not_counted():
    table = synthetic_scan_table(10, seed=1)
    causes = [["a_future_cause", "seam"]] + [[] for _ in range(9)]
    table = table.set_column(table.column_names.index("break_causes"), "break_causes",
                             pa.array(causes, pa.list_(pa.string())))
    frame = run_frame(table)
    assert frame["cause_seam"].tolist() == [True] + [False] * 9
    assert str(frame["causes"].iloc[0]) == "seam"
