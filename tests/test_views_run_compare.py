"""Two runs compared on the Run page (tokencap.views.run.compare) and the charts' A/B pairs and hit areas."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import vega_specs as vs
from synth_run import after_a_fix, synthetic_scan_table

from tokencap.run import DiffError
from tokencap.views.run import charts as rc
from tokencap.views.run import compare as cv
from tokencap.views.run.bars import CHARTS, Bars
from tokencap.views.run.categories import CALLS_BINS
from tokencap.views.run.filters import CHANGES, SORTS, RunFilter, filter_masks, passing
from tokencap.views.run.frame import run_frame
from tokencap.views.run.summary import run_metrics


@pytest.fixture(scope="module")
def runs():
    a = synthetic_scan_table(5_000, seed=4)
    b = after_a_fix(a)
    cmp = cv.compare_runs(a, run_frame(a), b, run_frame(b), names=("before", "after"))
    return a, b, cmp


def test_every_joined_rollout_maps_to_its_rows_in_both_runs(runs):
    a, b, cmp = runs
    ids_a, ids_b = a.column("rollout_id").to_pylist(), b.column("rollout_id").to_pylist()
    pairs = [(ids_a[i] if i >= 0 else None, ids_b[j] if j >= 0 else None)
             for i, j in zip(cmp.rows["row_a"], cmp.rows["row_b"])]
    assert all(x == y for x, y in pairs if x is not None and y is not None)
    assert sorted(x for x, _ in pairs if x is not None) == sorted(ids_a)
    assert sorted(y for _, y in pairs if y is not None) == sorted(ids_b)
    only_b = {y for x, y in pairs if x is None}
    assert only_b == set(ids_b) - set(ids_a) and all(y.startswith("new-") for y in only_b)


def test_the_change_of_each_rollout_follows_its_verdicts_and_reasons(runs):
    a, b, cmp = runs
    ra, rb = a.to_pylist(), b.to_pylist()
    for i, j, change in zip(cmp.rows["row_a"], cmp.rows["row_b"], cmp.rows["change"]):
        if i < 0 or j < 0:
            assert change == ("only_b" if i < 0 else "only_a")
            continue
        x, y = ra[i], rb[j]
        want = ("fixed" if x["mask_sample"] and not y["mask_sample"] else
                "broke" if y["mask_sample"] and not x["mask_sample"] else
                "reasons_changed" if x["mask_reasons"] != y["mask_reasons"] else "same")
        assert change == want
    counts = cmp.rows["change"].value_counts()
    assert all(counts[c] > 0 for c in CHANGES)
    assert {c: int(counts[c]) for c in CHANGES} == {c: cmp.summary.changes[c] for c in CHANGES}
    # Each frame's change column agrees with its rows of the diff.
    assert cmp.a["change"].iloc[cmp.rows["row_a"][cmp.rows["row_a"] >= 0]].tolist() == \
        cmp.rows["change"][cmp.rows["row_a"] >= 0].tolist()


@pytest.mark.parametrize("flt", [
    RunFilter(change=("fixed",)),
    RunFilter(change=("broke", "only_b")),
    RunFilter(change=("fixed",), reasons=("multiple_roots",)),
    RunFilter(verdict="masked"),
    RunFilter(query="rollout-00", change=("same",)),
])
def test_a_joined_rollout_is_shown_when_either_side_passes_the_filter(runs, flt):
    a, b, cmp = runs
    keep_a = passing(cmp.a, filter_masks(cmp.a, flt))
    keep_b = passing(cmp.b, filter_masks(cmp.b, flt))
    shown = cv.passing_rows(cmp, keep_a, keep_b)
    ra, rb = cmp.rows["row_a"].to_numpy(), cmp.rows["row_b"].to_numpy()
    want = [k for k in range(len(ra)) if (ra[k] >= 0 and keep_a[ra[k]]) or (rb[k] >= 0 and keep_b[rb[k]])]
    assert shown.tolist() == want
    if flt.change:
        assert set(cmp.rows["change"].iloc[shown]) <= set(flt.change) and len(shown)
    if flt == RunFilter(change=("fixed",)):
        assert len(shown) == cmp.summary.changes["fixed"]


def test_the_comparison_table_shows_both_sides_and_sorts_by_a_then_b(runs):
    a, b, cmp = runs
    positions = cv.passing_rows(cmp, np.ones(len(cmp.a), bool), np.ones(len(cmp.b), bool))
    table = cv.compare_table_frame(cmp, positions)
    assert list(table.columns) == list(cv.COMPARE_COLUMNS) and len(table) == len(cmp.rows)
    only_b = table[table["change"] == "only in B"]
    assert only_b["rollout A"].isna().all() and only_b["verdict A"].isna().all() and only_b["rollout B"].notna().all()
    fixed = table[table["change"] == "fixed"]
    assert (fixed["verdict A"] == "masked").all() and (fixed["verdict B"] == "trainable").all()
    ordered = cv.sorted_pairs(cmp, positions, RunFilter(sort="n_calls", descending=True))
    calls = cv.compare_table_frame(cmp, ordered)
    value = calls["calls A"].fillna(calls["calls B"]).to_numpy()
    assert (np.diff(value) <= 0).all()


def test_paired_charts_share_their_keys_and_the_change_chart_counts_every_other_filter(runs):
    a, b, cmp = runs
    flt = RunFilter(change=("fixed",), verdict="masked")
    masks_a, masks_b = filter_masks(cmp.a, flt), filter_masks(cmp.b, flt)
    for bars_a, bars_b in cv.paired_bars(cmp, masks_a, masks_b):
        assert bars_a.keys == bars_b.keys and len(bars_a.counts) == len(bars_b.counts)
        vs.valid(rc.bar_spec(bars_a, versus=bars_b, names=("before", "after")))
    change = cv.change_bars(cmp, masks_a, masks_b)
    without = RunFilter(verdict="masked")
    shown = cv.passing_rows(cmp, passing(cmp.a, filter_masks(cmp.a, without)),
                            passing(cmp.b, filter_masks(cmp.b, without)))
    assert change.total == len(shown)
    assert dict(zip(change.keys, change.counts)) == {
        c: int((cmp.rows["change"].iloc[shown] == c).sum()) for c in CHANGES}


def test_compare_metrics_show_both_figures_and_the_change(runs):
    a, b, cmp = runs
    tiles = {m.label: m for m in cv.compare_metrics(cmp)}
    trainable_a = a.num_rows - pc.sum(a.column("mask_sample")).as_py()
    trainable_b = b.num_rows - pc.sum(b.column("mask_sample")).as_py()
    assert tiles["trainable"].value == f"{trainable_a:,} → {trainable_b:,}"
    assert tiles["trainable"].share.startswith(f"{trainable_b - trainable_a:+,} (")
    assert tiles["rollouts"].value == f"{a.num_rows:,} → {b.num_rows:,}"
    assert tiles["fixed · broke"].value == f"{cmp.summary.changes['fixed']:,} · {cmp.summary.changes['broke']:,}"
    assert "rollout id" in cmp.join_words


def _read_from_items(table: pa.Table) -> pa.Table:
    """``table`` as if its rollouts were read from output items (a rollouts file): every fourth not contiguous."""
    n = table.num_rows
    table = table.set_column(table.column_names.index("tokens_from"), "tokens_from",
                             pa.array(["output_items"] * n, pa.string()))
    return table.set_column(table.column_names.index("contiguous"), "contiguous",
                            pa.array([i % 4 != 0 for i in range(n)], pa.bool_()))


@pytest.mark.parametrize("items_in", ["a", "b"])
def test_compare_metrics_pair_tiles_by_label_when_one_run_has_contiguity_tiles(items_in):
    a = synthetic_scan_table(400, seed=6)
    b = after_a_fix(a)
    if items_in == "a":
        a = _read_from_items(a)
    else:
        b = _read_from_items(b)
    fa, fb = run_frame(a), run_frame(b)
    cmp = cv.compare_runs(a, fa, b, fb, names=("before", "after"))
    tiles = {m.label: m for m in cv.compare_metrics(cmp)}
    one_a, one_b = ({m.label: m.value for m in run_metrics(f, True)} for f in (fa, fb))
    for label in ("trained in doubt", "masked by harness", "not loaded"):  # on both sides: A's figure, then B's
        assert tiles[label].value == f"{one_a[label]} → {one_b[label]}", label
    # Contiguity is counted for the run read from output items only: the other side says it has no such tile.
    for label in ("contiguous", "not contiguous"):
        value = tiles[label].value
        if items_in == "a":
            assert value == f"{one_a[label]} → absent" and tiles[label].share == "absent from after"
        else:
            assert value == f"absent → {one_b[label]}" and tiles[label].share == "absent from before"
        assert "0" not in value.replace(one_a.get(label, one_b.get(label, "")), "")
    labels = [m.label for m in cv.compare_metrics(cmp)]
    assert labels == [m.label for m in run_metrics(fa if items_in == "a" else fb, True)] + ["fixed · broke"]


def test_runs_that_cannot_be_compared_raise_one_line():
    a = synthetic_scan_table(20, seed=1)
    twice = pa.concat_tables([a, a])
    with pytest.raises(DiffError) as info:
        cv.compare_runs(a, run_frame(a), twice, run_frame(twice), names=("a.parquet", "b.parquet"))
    assert "\n" not in str(info.value) and "b.parquet" in str(info.value)


# --------------------------------------------------------------------------- the charts


def test_every_key_has_a_hit_bar_over_its_whole_row_with_its_label(runs):
    _, _, cmp = runs
    keep = np.ones(len(cmp.a), dtype=bool)
    for dimension, make in CHARTS:
        bars = make(cmp.a, keep)
        spec = vs.valid(rc.bar_spec(bars))
        hit = vs.hit_layer(spec)
        horizontal = dimension in rc.HORIZONTAL
        value = "x" if horizontal else "y"
        domain = hit["encoding"][value]["scale"]["domain"]
        # The hit bar spans the whole value scale, transparent, one per key with its label.
        assert [(r["lo"], r["hi"]) for r in vs.rows(hit)] == [tuple(domain)] * len(bars.keys)
        assert hit["encoding"][value + "2"] == {"field": "hi"} and hit["mark"]["opacity"] == 0
        assert [r["label"] for r in vs.rows(hit)] == list(bars.labels)
        labels = [layer for layer in spec["layer"] if layer["mark"]["type"] == "text"
                  and layer["encoding"]["text"] == {"field": "label"}]
        if horizontal:
            # The labels sit left of zero, where no bar is drawn: a label never lies under a bar.
            assert domain[0] < 0 and len(labels) == 1 and labels[0]["encoding"]["x"]["field"] == "lo"
            assert labels[0]["mark"]["align"] == "left"
        else:
            assert domain[0] == 0 and not labels and hit["encoding"]["x"]["axis"]  # the axis names the bins


def test_a_pair_of_runs_is_drawn_as_two_named_series_in_the_run_colours(runs):
    _, _, cmp = runs
    masks = {}
    (a, b), *_ = cv.paired_bars(cmp, masks, masks)
    spec = vs.valid(rc.bar_spec(a, active=(a.keys[2],), versus=b, names=("before", "after")))
    drawn = vs.bar_layer(spec)
    color = drawn["encoding"]["color"]
    assert color["field"] == "run" and color["scale"] == {"domain": ["before", "after"], "range": list(rc.RUN_COLORS)}
    assert color["legend"] is not None and drawn["encoding"]["yOffset"]["field"] == "run"
    per_run = {name: [r for r in vs.rows(drawn) if r["run"] == name] for name in ("before", "after")}
    assert [r["count"] for r in per_run["before"]] == list(a.counts)
    assert [r["count"] for r in per_run["after"]] == list(b.counts)
    assert [r["opacity"] for r in per_run["before"]][2] == 1 and per_run["before"][0]["opacity"] == rc.FADED
    tip = vs.rows(vs.hit_layer(spec))[0]["counts"]
    assert "before: " in tip and "after: " in tip
    with pytest.raises(ValueError):
        rc.bar_spec(a, versus=Bars(a.dimension, a.title, a.keys[:-1], a.labels[:-1], a.counts[:-1], a.total))


def test_an_open_request_carries_the_records_the_run_was_scanned_with():
    from tokencap.services import run_sources as rs
    from tokencap.services.arguments import AppArguments, app_arguments

    located = rs.Located(path="/runs/7")
    assert rs.open_request(located, "a.json", "r").final_responses is None
    request = rs.open_request(located, "a.json", "r", records="/runs/7.records.jsonl")
    assert request.final_responses == "/runs/7.records.jsonl"
    assert app_arguments(["RUN", "--final-responses", "R.jsonl"]) == AppArguments("RUN", "R.jsonl")
    assert app_arguments(["--final-responses=R.jsonl"]) == AppArguments(None, "R.jsonl")
    assert app_arguments(["--final-responses"]) == AppArguments(None, None)


def test_an_uploaded_records_file_is_stored_once_by_its_content(tmp_path):
    from tokencap.services.uploads import Upload, stored_upload

    first = stored_upload(Upload("records.jsonl", b'{"rollout_id": "a"}\n'), tmp_path)
    again = stored_upload(Upload("other-name.jsonl", b'{"rollout_id": "a"}\n'), tmp_path)
    other = stored_upload(Upload("records.jsonl", b'{"rollout_id": "b"}\n'), tmp_path)
    assert first == again != other and first.suffix == ".jsonl"
    assert first.read_bytes() == b'{"rollout_id": "a"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, other.name])  # no part files left


def test_run_names_from_paths_are_plain_text_in_every_chart(runs):
    from tokencap.views.run import reward as rw

    _, _, cmp = runs
    (a, b), *_ = cv.paired_bars(cmp, {}, {})
    names = ("A (<img src=x onerror=alert(1)>)", "B (<b>run</b>)")
    specs = [rc.bar_spec(a, versus=b, names=names), rw.reward_spec([(names[0], cmp.a), (names[1], cmp.b)]),
             rw.groups_spec([(names[0], cmp.a), (names[1], cmp.b)])]
    for spec in specs:
        vs.valid(spec)
        text = vs.texts(spec)
        # Drawn as SVG text (tooltips escaped by vega-tooltip): kept as typed, never a link.
        assert names[0][:60] in text and "&lt;" not in text and "href" not in vs.channels(spec)


@pytest.mark.parametrize("sort", [s for s in SORTS if s])
@pytest.mark.parametrize("descending", [False, True])
def test_every_sort_orders_joined_rollouts_by_a_then_b(runs, sort, descending):
    _, _, cmp = runs
    positions = cv.passing_rows(cmp, np.ones(len(cmp.a), bool), np.ones(len(cmp.b), bool))
    ordered = cv.sorted_pairs(cmp, positions, RunFilter(sort=sort, descending=descending))
    assert sorted(ordered.tolist()) == positions.tolist()
    ra, rb = cmp.rows["row_a"].to_numpy()[ordered], cmp.rows["row_b"].to_numpy()[ordered]
    values = [cmp.a[sort].iloc[i] if i >= 0 else cmp.b[sort].iloc[j] for i, j in zip(ra, rb)]
    assert values == sorted(values, reverse=descending)


def test_calls_bins_of_two_runs_are_padded_to_the_larger_run():
    small = synthetic_scan_table(200, seed=1)
    n_calls = small.column("n_calls").to_numpy()
    small = small.set_column(small.column_names.index("n_calls"), "n_calls", pa.array(np.minimum(n_calls, 2)))
    large = small.set_column(small.column_names.index("n_calls"), "n_calls",
                             pa.array(np.where(np.arange(200) == 0, 300, np.minimum(n_calls, 2))))
    cmp = cv.compare_runs(small, run_frame(small), large, run_frame(large))
    a, b = next((x, y) for x, y in cv.paired_bars(cmp, {}, {}) if x.dimension == "calls")
    assert a.keys == b.keys == CALLS_BINS[:len(b.keys)] and b.keys[-1] == "257-512"
    assert sum(a.counts) == sum(b.counts) == 200 and a.counts[-1] == 0 and b.counts[-1] == 1
    assert a.labels == b.labels


def test_a_scan_error_about_the_records_is_theirs_and_names_an_upload_as_uploaded(tmp_path):
    from tokencap.services import run_sources as rs
    from tokencap.services.uploads import Upload, stored_upload

    upload = Upload("mine.jsonl", b'{"rollout_id": "a", "reward": "x"}\n')
    stored = str(stored_upload(upload, tmp_path))
    title, message = rs.scan_problem(f"{stored}, line 1: field 'reward': must be a finite number", stored, upload)
    assert title == "Could not read the rollout records."
    assert message.startswith("mine.jsonl (uploaded), line 1: field 'reward'") and stored not in message
    assert "remove it under Rollout records" in message
    assert rs.records_name(stored, upload) == "mine.jsonl" and rs.records_name("/r/run.jsonl") == "run.jsonl"
    title, message = rs.scan_problem("/r/run.jsonl, line 3: not valid JSON.", "/r/run.jsonl")
    assert title == "Could not read the rollout records." and message.startswith("/r/run.jsonl, line 3: not valid JSON. Fix")
    assert "--final-responses" in message
    assert rs.scan_problem("/runs/x: no capture-store files", "/r/run.jsonl") == (
        "Could not open the run.", "/runs/x: no capture-store files")


def test_run_a_and_run_b_have_the_same_colours_in_every_compared_chart(runs):
    """Blue is B in the bar charts, so it is B in the reward and group charts too (never A)."""
    from tokencap.views.run import reward as rw

    _, _, cmp = runs
    (a, b), *_ = cv.paired_bars(cmp, {}, {})
    pair = [("A", cmp.a), ("B", cmp.b)]
    bars = vs.bar_layer(rc.bar_spec(a, versus=b, names=("A", "B")))["encoding"]["color"]["scale"]
    assert bars == {"domain": ["A", "B"], "range": list(rc.RUN_COLORS)}
    boxes = rw.reward_spec(pair)["layer"][0]["encoding"]["color"]["scale"]
    assert boxes == {"domain": ["A", "B"], "range": list(rc.RUN_COLORS)}
    groups = rw.groups_spec(pair)["layer"][0]["encoding"]["color"]["scale"]
    signal = {d: c for d, c in zip(groups["domain"], groups["range"])}
    assert [signal["A: learning signal"], signal["B: learning signal"]] == list(rc.RUN_COLORS)
