"""Rewards and groups on the Run page (tokencap.views.run.reward): checked against per-row references."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import vega_specs as vs
from synth_run import synthetic_scan_table

from tokencap.rollout import MASK_REASON_ORDER
from tokencap.views.run import reward as rw
from tokencap.views.run.filters import RunFilter, filter_masks, passing
from tokencap.views.run.frame import run_frame
from tokencap.views.words import label


def with_records(table: pa.Table, reward, task, index=None) -> pa.Table:
    """``table`` with the docs/contract.md#scan-rollout-records columns (None = null)."""
    n = table.num_rows
    index = index if index is not None else [None] * n
    for name, values, kind in (("reward", reward, pa.float64()), ("task_index", task, pa.int64()),
                               ("rollout_index", index, pa.int64())):
        table = table.set_column(table.column_names.index(name), name, pa.array(values, kind))
    return table


def small(masked: list[bool], reward: list, task: list) -> pd.DataFrame:
    table = synthetic_scan_table(len(masked), seed=3)
    table = table.set_column(table.column_names.index("mask_sample"), "mask_sample", pa.array(masked))
    return run_frame(with_records(table, reward, task))


@pytest.fixture(scope="module")
def big():
    rng = np.random.default_rng(11)
    table = synthetic_scan_table(20_000, seed=5)
    n = table.num_rows
    reward = rng.choice([0.0, 0.5, 1.0], size=n).astype(object)
    reward[rng.random(n) < 0.05] = None
    task = (np.arange(n) // 4).astype(object)
    task[rng.random(n) < 0.03] = None
    frame = run_frame(with_records(table, list(reward), list(task)))
    return frame, list(reward), list(task)


def reference_states(masked, reward, task):
    """Per-row Python: each row's group state."""
    groups: dict = {}
    for m, r, t in zip(masked, reward, task):
        if t is not None and not m:
            groups.setdefault(t, []).append(r)
    out = []
    for t in task:
        if t is None:
            out.append("none")
            continue
        kept = groups.get(t, [])
        if len(kept) < 2:
            out.append("few")
        elif all(r is not None for r in kept) and len(set(kept)) == 1:
            out.append("flat")
        else:
            out.append("signal")
    return out


def test_group_states_of_a_small_run():
    frame = small(
        masked=[False, False, True, True, False, False, False, True, False, False],
        reward=[1.0, 0.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.0, None, 1.0],
        task=[0, 0, 0, 1, 1, 2, 2, 2, None, 3],
    )
    assert list(frame["group"]) == ["signal", "signal", "signal", "few", "few", "flat", "flat", "flat", "none", "few"]
    summary = rw.group_summary(frame)
    assert (summary.groups, summary.rollouts, summary.total) == (4, 9, 10)
    assert (summary.few_groups, summary.few_rollouts, summary.flat_groups, summary.flat_rollouts) == (2, 3, 1, 3)
    assert summary.starved_groups == 3 and summary.share(summary.starved_rollouts) == pytest.approx(0.6)
    assert summary.flagged
    assert "3 of 4 groups" in summary.words() and "60%" in summary.words()


def test_a_trainable_rollout_without_a_reward_never_makes_its_group_flat():
    frame = small(masked=[False, False, False], reward=[1.0, None, 1.0], task=[5, 5, 5])
    assert list(frame["group"]) == ["signal"] * 3


def test_group_states_of_20k_rows_match_a_per_row_reference(big):
    frame, reward, task = big
    masked = list(frame["verdict"] == "masked")
    assert list(frame["group"].astype(str)) == reference_states(masked, reward, task)


@pytest.mark.parametrize("key", list(rw.GROUP_FILTERS))
def test_the_group_filter_keeps_exactly_the_rollouts_of_those_groups(big, key):
    frame, _, _ = big
    flt = RunFilter(groups=key)
    assert RunFilter.from_params(flt.to_params()) == flt and flt.to_params() == {"run_group": key}
    kept = passing(frame, filter_masks(frame, flt))
    wanted = {"few": {"few"}, "flat": {"flat"}, "starved": {"few", "flat"}}[key]
    assert kept.tolist() == [s in wanted for s in frame["group"].astype(str)]
    assert kept.any()
    assert RunFilter().toggle("groups", key) == flt and flt.toggle("groups", key) == RunFilter()


def test_trainable_per_group_counts_groups_by_trainable_rollouts_left(big):
    frame, _, task = big
    per = rw.trainable_per_group(frame)
    trainable = (frame["verdict"] == "trainable").to_numpy()
    counts: dict = {}
    for t, ok in zip(task, trainable):
        if t is not None:
            counts[t] = counts.get(t, 0) + int(ok)
    expected = np.bincount(list(counts.values()))
    assert per["groups"].tolist() == expected.tolist()
    assert per["trainable"].tolist() == list(range(len(expected)))
    # Groups with 0 or 1 trainable rollouts are all starved; the others only when flat.
    assert per["starved"].tolist()[:2] == expected.tolist()[:2]
    assert int(per["starved"].sum()) == rw.group_summary(frame).starved_groups


def test_reward_slices_match_numpy_per_slice(big):
    frame, reward, _ = big
    r = np.array([np.nan if x is None else x for x in reward])
    table = rw.reward_slices(frame).set_index("slice")
    masked = (frame["verdict"] == "masked").to_numpy()
    for name, rows in [("all rollouts", np.ones(len(frame), bool)), ("trainable", ~masked), ("masked", masked)] + [
            (f"masked: {label(x)}", frame[f"reason_{x}"].to_numpy()) for x in MASK_REASON_ORDER
            if frame[f"reason_{x}"].any()]:
        values = r[rows & ~np.isnan(r)]
        row = table.loc[name]
        assert row["rollouts"] == rows.sum() and row["rewarded"] == len(values)
        assert row["mean"] == pytest.approx(values.mean())
        assert [row["min"], row["q1"], row["median"], row["q3"], row["max"]] == pytest.approx(
            np.quantile(values, [0, 0.25, 0.5, 0.75, 1]))
    difference = table.loc["masked", "mean"] - table.loc["trainable", "mean"]
    assert table.loc["masked", "vs trainable"] == pytest.approx(difference)
    reason_of = {f"masked: {label(x)}": x for x in MASK_REASON_ORDER}  # a slice names its reason in words
    assert not any(n.startswith("masked: ") and not frame[f"reason_{reason_of[n]}"].any() for n in table.index)


def test_a_slice_without_rewards_has_no_numbers_rather_than_zeros():
    frame = small(masked=[False, True, True], reward=[1.0, None, None], task=[1, 1, 1])
    table = rw.reward_slices(frame).set_index("slice")
    assert table.loc["masked", "rewarded"] == 0 and np.isnan(table.loc["masked", "mean"])
    assert np.isnan(table.loc["masked", "median"])
    assert rw.reward_bias(frame).words().startswith("No masked rollout carries a reward")


def test_reward_bias_calls_a_shifted_masked_slice_biased_and_an_even_one_not():
    masked = [False] * 10 + [True] * 10
    shifted = small(masked, [0.0, 1.0] * 5 + [1.0] * 10, [None] * 20)
    bias = rw.reward_bias(shifted)
    assert bias.trainable_mean == pytest.approx(0.5) and bias.masked_mean == pytest.approx(1.0)
    assert bias.biased and bias.flagged and "removes a higher-reward slice" in bias.words()
    even = small(masked, [0.0, 1.0] * 10, [None] * 20)
    assert not rw.reward_bias(even).biased and "does not visibly shift" in rw.reward_bias(even).words()
    few = small([False] * 10 + [True] * 2, [0.0] * 10 + [1.0] * 2, [None] * 12)
    assert not rw.reward_bias(few).biased and "Too few" in rw.reward_bias(few).words()


def test_a_table_without_record_columns_reads_as_no_rewards_and_no_groups():
    table = synthetic_scan_table(50, seed=2)
    frame = run_frame(table.drop_columns(["reward", "task_index", "rollout_index"]))
    assert frame["reward"].isna().all() and run_frame(table)["task_index"].notna().all()
    assert not rw.has_rewards(frame) and not rw.has_groups(frame)
    assert frame["reward"].isna().all() and frame["task_index"].isna().all()
    assert set(frame["group"].astype(str)) == {"none"}
    assert rw.group_summary(frame).words().startswith("No rollout carries a task index")
    assert rw.trainable_per_group(frame).empty and not rw.group_summary(frame).flagged
    assert "--final-responses" in rw.RECORDS_HINT


def test_reward_chart_is_valid_vega_lite_with_both_runs(big):
    frame, _, _ = big
    spec = vs.valid(rw.reward_spec([("A", frame), ("B", frame.iloc[:100])]))
    data = vs.rows(spec["layer"][0], spec)
    assert {r["run"] for r in data} == {"A", "B"}
    assert spec["layer"][0]["encoding"]["color"]["legend"] is not None
    assert spec["layer"][0]["encoding"]["y"]["sort"][:2] == ["trainable", "masked"]
    slices = rw.reward_slices(frame).set_index("slice")
    first = next(r for r in data if r["run"] == "A" and r["slice"] == "trainable")
    assert (first["q1"], first["median"], first["q3"], first["mean"]) == tuple(
        float(slices.loc["trainable", c]) for c in ("q1", "median", "q3", "mean"))
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert marks == ["rule", "bar", "tick", "point"]  # range, quartiles, median, mean
    one = vs.valid(rw.reward_spec([("<b>run</b>", frame)]))
    assert one["layer"][0]["encoding"]["color"]["legend"] is None and "yOffset" not in one["layer"][0]["encoding"]


def test_groups_chart_stacks_starved_groups_under_the_others_for_each_run(big):
    frame, _, _ = big
    per = rw.trainable_per_group(frame)
    spec = vs.valid(rw.groups_spec([("A", frame), ("A", frame)]))
    data = vs.rows(spec["layer"][0])
    for run in ("A", "A (B)"):  # two runs of one name are told apart
        starved = [r["groups"] for r in data if r["run"] == run and r["order"] == 0]
        signal = [r["groups"] for r in data if r["run"] == run and r["order"] == 1]
        assert starved == per["starved"].tolist() and signal == (per["groups"] - per["starved"]).tolist()
    encoding = spec["layer"][0]["encoding"]
    assert encoding["y"]["stack"] == "zero" and encoding["order"]["field"] == "order"  # starved at the bottom
    assert encoding["xOffset"]["field"] == "run" and data[0]["series"].startswith("A: ")
    one = vs.valid(rw.groups_spec([("run", frame)]))
    assert vs.rows(one["layer"][0])[0]["series"] == "no learning signal" and "xOffset" not in one["layer"][0]["encoding"]


@pytest.mark.parametrize("name", ["run", "run_after_fix"])
def test_the_bundled_sample_runs_show_the_declared_reward_and_group_facts(name):
    """scripts/make_sample_run.py declares what the reward and group views must show
    (sample_data/rollout_records/expected.json), from the rewards it drew, never from tokencap."""
    import json
    from pathlib import Path

    from tokencap.run import scan_table

    samples = Path(__file__).resolve().parent.parent / "sample_data"
    declared = json.loads((samples / "rollout_records" / "expected.json").read_text())["rewards"][name]
    table = scan_table(samples / name, workers=1, final_responses=str(samples / "rollout_records" / f"{name}.jsonl"))
    frame = run_frame(table)
    bias, groups = rw.reward_bias(frame), rw.group_summary(frame)
    assert int(frame["reward"].notna().sum()) == declared["rollouts_with_reward"]
    assert rw.reward_slices(frame).set_index("slice").loc["all rollouts", "mean"] == pytest.approx(
        declared["mean_reward"], abs=1e-6)
    assert bias.trainable_mean == pytest.approx(declared["mean_reward_trainable"], abs=1e-6)
    assert bias.masked_mean == pytest.approx(declared["mean_reward_masked"], abs=1e-6)
    assert (groups.groups, groups.few_groups, groups.flat_groups) == (
        declared["groups"], declared["groups_under_2_trainable"], declared["groups_one_reward"])
    assert bias.biased  # the sample run masks long, high-reward rollouts more often
