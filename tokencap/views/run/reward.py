"""Rewards and groups of a run: does masking remove a biased slice, and which groups lose their signal?

A scan table carries ``reward``, ``task_index`` and ``rollout_index`` when the run was
scanned with its rollout records (docs/contract.md#scan-rollout-records). From them, for the Run page:

* `reward_slices` -- reward of the trainable and the masked rollouts, and of the rollouts
  masked for each reason: count, mean, quartiles (the box plot's numbers, computed here so
  a 100,000-row run sends the browser a few numbers, not every reward);
* `reward_bias` -- the masked slice's mean against the trainable one's, in plain words;
* `group_codes` / `group_summary` -- groups are tasks (``task_index``). A group left with
  fewer than two trainable rollouts, or whose trainable rollouts all share one reward,
  gives a group-relative trainer (GRPO and its kin) no learning signal: masking removed it.

Everything is vectorised (numpy / pandas group-bys, no Python per row). The frame's
columns come from `data.run_frame`; this module imports nothing from the page's other parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...rollout import MASK_REASON_ORDER
from .. import style, vega
from ..formatting import count
from ..words import label

GROUP_STATES = ("none", "signal", "few", "flat")
"""A rollout's group, as `group_codes` gives it: no task index; a group with a learning signal;
fewer than two trainable rollouts; two or more trainable rollouts, all with one reward."""

GROUP_FILTERS = {
    "few": "fewer than 2 trainable",
    "flat": "trainable all one reward",
    "starved": "no learning signal (either)",
}
"""The Run page's group filter: its values (URL ``run_group``) and their labels."""

RECORDS_HINT = ("This run's table has no rewards. Open the run with its rollout records: "
                "`tokencap app RUN --final-responses records.jsonl`, or add the records file in the sidebar "
                "(the rollout records carry `reward`, `_ng_task_index`, `_ng_rollout_index`).")
"""What the reward and group views say when there is nothing to show, and what enables them."""

BIAS_THRESHOLD = 0.2
"""A masked slice whose mean reward differs from the trainable one's by at least this many of the
run's standard deviations is called biased (Cohen's "small" effect), when both sides hold
`BIAS_MINIMUM` rewards or more."""
BIAS_MINIMUM = 5


def scope_words(total: int, filtered: bool, runs: int = 1) -> str:
    """What the rewards and groups section describes: the whole run (each whole run of a comparison), never
    only the rows passing the table's filters."""
    words = (f"Rewards and groups describe the whole run: all {total:,} rollout{'s' if total != 1 else ''}"
             if runs == 1 else "Rewards and groups describe both whole runs: every rollout of each")
    return words + (", not only those passing the table's filters." if filtered else ".")


def has_rewards(frame: pd.DataFrame) -> bool:
    return "reward" in frame and bool(frame["reward"].notna().to_numpy().any())


def has_groups(frame: pd.DataFrame) -> bool:
    return "task_index" in frame and bool(frame["task_index"].notna().to_numpy().any())


# --------------------------------------------------------------------------- groups


def group_codes(task_index: Any, trainable: np.ndarray, reward: Any) -> np.ndarray:
    """Each rollout's group state, an index into `GROUP_STATES`.

    ``task_index`` may hold nulls (no group); ``reward`` NaN or nulls. A group is ``flat``
    only when every trainable rollout has a reward and they are all equal; a trainable
    rollout without a reward leaves the question open, and the group is not called flat.
    """
    groups, _ = pd.factorize(pd.array(task_index), use_na_sentinel=True)
    groups = np.asarray(groups, dtype=np.int64)
    trainable = np.asarray(trainable, dtype=bool)
    rewards = pd.to_numeric(pd.Series(reward), errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    valid = groups >= 0
    out = np.zeros(len(groups), dtype=np.int64)
    if not valid.any():
        return out
    n = int(groups.max()) + 1
    kept = trainable & valid
    per_group = pd.DataFrame({"g": groups[kept], "r": rewards[kept]}).groupby("g")["r"]
    stats = pd.DataFrame({"trainable": per_group.size(), "rewarded": per_group.count(),
                          "low": per_group.min(), "high": per_group.max()}).reindex(range(n))
    count = stats["trainable"].fillna(0).to_numpy(dtype=np.int64)
    flat = ((count >= 2) & (stats["rewarded"].fillna(0).to_numpy() == count)
            & (stats["low"].to_numpy() == stats["high"].to_numpy()))
    state = np.where(count < 2, GROUP_STATES.index("few"),
                     np.where(flat, GROUP_STATES.index("flat"), GROUP_STATES.index("signal")))
    out[valid] = state[groups[valid]]
    return out


def group_filter_mask(codes: np.ndarray, key: str) -> np.ndarray:
    """Rows of the groups a group filter (`GROUP_FILTERS`) keeps."""
    wanted = {"few": ("few",), "flat": ("flat",), "starved": ("few", "flat")}.get(key, ())
    return np.isin(codes, [GROUP_STATES.index(w) for w in wanted])


@dataclass(frozen=True)
class GroupSummary:
    """How many groups (tasks) keep a learning signal after masking."""

    groups: int
    rollouts: int  # rollouts with a task index
    total: int  # rollouts in the run
    few_groups: int
    few_rollouts: int
    flat_groups: int
    flat_rollouts: int

    @property
    def starved_groups(self) -> int:
        return self.few_groups + self.flat_groups

    @property
    def starved_rollouts(self) -> int:
        return self.few_rollouts + self.flat_rollouts

    @property
    def flagged(self) -> bool:
        """Whether the page warns: some group has no learning signal left."""
        return self.starved_groups > 0

    def share(self, rollouts: int) -> float:
        return rollouts / self.total if self.total else 0.0

    def words(self) -> str:
        if not self.groups:
            return "No rollout carries a task index: there are no groups to judge."
        if not self.starved_groups:
            return (f"Every one of the {self.groups:,} groups keeps at least two trainable rollouts "
                    "with different rewards: masking leaves each a learning signal.")
        return (f"{self.starved_groups:,} of {self.groups:,} groups ({_pct(self.share(self.starved_rollouts))} of the "
                f"run's rollouts) give a group-relative trainer no learning signal: {self.few_groups:,} keep fewer "
                f"than two trainable rollouts, {self.flat_groups:,} keep trainable rollouts that all share one reward.")


def _pct(share: float) -> str:
    return f"{share:.0%}" if share >= 0.1 or share == 0 else f"{share:.1%}"


def group_summary(frame: pd.DataFrame) -> GroupSummary:
    codes = frame["group"].cat.codes.to_numpy() if "group" in frame else np.zeros(len(frame), dtype=np.int64)
    tasks = frame["task_index"] if "task_index" in frame else pd.Series(pd.array([pd.NA] * len(frame), dtype="Int64"))
    known = tasks.notna().to_numpy()
    few = codes == GROUP_STATES.index("few")
    flat = codes == GROUP_STATES.index("flat")
    return GroupSummary(
        groups=int(tasks[known].nunique()), rollouts=int(known.sum()), total=len(frame),
        few_groups=int(tasks[few].nunique()), few_rollouts=int(few.sum()),
        flat_groups=int(tasks[flat].nunique()), flat_rollouts=int(flat.sum()))


def trainable_per_group(frame: pd.DataFrame) -> pd.DataFrame:
    """Groups by how many trainable rollouts they keep: one row per count 0..max, with how many
    groups keep that many and how many of those have no learning signal (``few`` or ``flat``)."""
    known = frame["task_index"].notna().to_numpy() if "task_index" in frame else np.zeros(len(frame), dtype=bool)
    if not known.any():
        return pd.DataFrame({"trainable": [], "groups": [], "starved": []}, dtype=np.int64)
    trainable = (frame["verdict"].cat.codes.to_numpy() == 0)
    part = pd.DataFrame({"task": frame["task_index"].to_numpy()[known], "trainable": trainable[known],
                         "state": frame["group"].cat.codes.to_numpy()[known]})
    per = part.groupby("task").agg(trainable=("trainable", "sum"), state=("state", "first"))
    starved = per["state"].isin([GROUP_STATES.index("few"), GROUP_STATES.index("flat")])
    top = int(per["trainable"].max())
    groups = np.bincount(per["trainable"].to_numpy(dtype=np.int64), minlength=top + 1)
    starved_n = np.bincount(per["trainable"].to_numpy(dtype=np.int64)[starved.to_numpy()], minlength=top + 1)
    return pd.DataFrame({"trainable": np.arange(top + 1), "groups": groups, "starved": starved_n})


def groups_spec(runs: list[tuple[str, pd.DataFrame]]) -> dict[str, Any]:
    """Groups by trainable rollouts kept, split into those with and without a learning signal: a
    Vega-Lite spec (`..vega`).

    ``runs`` is ``[(name, frame)]``; with two runs, their bars stand side by side (one
    offset group per run, its starved part stacked under its part with a signal).
    """
    paired = len(runs) > 1
    names = _run_names(runs)
    rows, series, colors = [], [], []
    top = 0
    for i, ((_, frame), name) in enumerate(zip(runs, names, strict=True)):
        per = trainable_per_group(frame)
        top = max(top, len(per))
        prefix = f"{name}: " if paired else ""
        for order, (part, column, color) in enumerate((
                ("no learning signal", "starved", style.REFUSAL),
                ("learning signal", "signal", style.RUN_COLORS[i] if paired else style.MAIN))):
            label = prefix + part
            series.append(label)
            colors.append(color if i == 0 or not paired or order else "#f87171")
            values = per["starved"] if column == "starved" else per["groups"] - per["starved"]
            rows += [{"run": name, "series": label, "order": order, "trainable": int(t), "groups": int(g),
                      "says": f"{int(g):,} groups keep {int(t)} trainable rollouts ({part})"}
                     for t, g in zip(per["trainable"], values, strict=True)]
    encoding: dict[str, Any] = {
        "x": {"field": "trainable", "type": "ordinal", "title": "trainable rollouts in the group",
              "scale": {"domain": list(range(max(top, 1)))}, "axis": {"labelAngle": 0}},
        "y": {"field": "groups", "type": "quantitative", "title": "groups", "stack": "zero"},
        "color": {"field": "series", "type": "nominal", "title": None, "sort": series,
                  "scale": {"domain": series, "range": colors},
                  "legend": {"orient": "top", "direction": "horizontal", "columns": 2 if paired else 0}},
        "order": {"field": "order", "type": "quantitative"},
        "tooltip": [{"field": "run", "title": "run"}, {"field": "says", "title": " "}] if paired
        else [{"field": "says", "title": " "}],
    }
    if paired:
        encoding["xOffset"] = {"field": "run", "type": "nominal", "sort": names}
    return vega.chart([{"data": {"values": rows}, "mark": {"type": "bar"}, "encoding": encoding}],
                      heading=vega.title("Groups (tasks) by trainable rollouts kept"),
                      height=170 if paired else 168)


def _run_names(runs: list[tuple[str, pd.DataFrame]]) -> list[str]:
    """The runs' names as a chart shows them: short, and two of the same name told apart."""
    names = [name[:60] for name, _ in runs]
    if len(names) > 1 and names[0] == names[1]:
        names[1] += " (B)"
    return names


# --------------------------------------------------------------------------- rewards


def _slices(frame: pd.DataFrame) -> list[tuple[str, np.ndarray]]:
    masked = frame["verdict"].cat.codes.to_numpy() == 1
    out = [("all rollouts", np.ones(len(frame), dtype=bool)), ("trainable", ~masked), ("masked", masked)]
    for reason in MASK_REASON_ORDER:
        rows = frame[f"reason_{reason}"].to_numpy()
        if rows.any():
            out.append((f"masked: {label(reason)}", rows))
    return out


def reward_slices(frame: pd.DataFrame) -> pd.DataFrame:
    """Reward per slice of the run: all, trainable, masked, masked for each reason present.

    Columns: ``slice``, ``rollouts``, ``rewarded`` (with a reward), ``share`` (of the run),
    ``mean``, ``vs trainable`` (the slice's mean minus the trainable mean), ``min``, ``q1``,
    ``median``, ``q3``, ``max``. Quantiles are of the rewarded rollouts (NaN when none).
    """
    reward = frame["reward"].to_numpy(dtype=np.float64, na_value=np.nan) if "reward" in frame else \
        np.full(len(frame), np.nan)
    names, rows = zip(*_slices(frame), strict=True)
    membership = np.stack(rows)  # slices x rollouts
    values = np.where(membership & ~np.isnan(reward), reward, np.nan)
    rewarded = (~np.isnan(values)).sum(axis=1)
    with np.errstate(all="ignore"):
        quantiles = np.nanquantile(np.where(rewarded[:, None] > 0, values, 0.0), [0, 0.25, 0.5, 0.75, 1], axis=1)
        means = np.nansum(values, axis=1) / np.where(rewarded > 0, rewarded, 1)
    quantiles[:, rewarded == 0] = np.nan
    means = np.where(rewarded > 0, means, np.nan)
    out = pd.DataFrame({
        "slice": list(names), "rollouts": membership.sum(axis=1), "rewarded": rewarded,
        "share": membership.sum(axis=1) / max(len(frame), 1), "mean": means,
        "vs trainable": means - means[1], "min": quantiles[0], "q1": quantiles[1], "median": quantiles[2],
        "q3": quantiles[3], "max": quantiles[4]})
    return out


def reward_slices_shown(frame: pd.DataFrame) -> pd.DataFrame:
    """`reward_slices` as the page shows it: shares in percent, rewards to two decimals (as text, so a
    table that wraps shows every column at 1280 px)."""
    out = reward_slices(frame).astype(object)
    for column in out.columns:
        if column == "share":
            out[column] = [f"{v:.1%}" if pd.notna(v) else "–" for v in out[column]]
        elif column not in ("slice", "rollouts", "rewarded"):
            out[column] = [f"{v:.2f}" if pd.notna(v) else "–" for v in out[column]]
    return out


@dataclass(frozen=True)
class RewardBias:
    """The masked slice's reward against the trainable slice's."""

    trainable_mean: float
    masked_mean: float
    trainable_n: int
    masked_n: int
    spread: float  # standard deviation of every reward of the run

    @property
    def difference(self) -> float:
        return self.masked_mean - self.trainable_mean

    @property
    def effect(self) -> float:
        """The difference in the run's standard deviations (NaN when rewards do not vary)."""
        return self.difference / self.spread if self.spread > 0 else float("nan")

    @property
    def flagged(self) -> bool:
        """Whether the page warns: masking removes a biased slice."""
        return self.biased

    @property
    def biased(self) -> bool:
        return (self.trainable_n >= BIAS_MINIMUM and self.masked_n >= BIAS_MINIMUM
                and bool(np.isfinite(self.effect)) and abs(self.effect) >= BIAS_THRESHOLD)

    def words(self) -> str:
        if not self.masked_n or not self.trainable_n:
            side = "masked" if not self.masked_n else "trainable"
            return f"No {side} rollout carries a reward: nothing to compare."
        head = (f"Masked rollouts average a reward of {self.masked_mean:.3g} ({self.masked_n:,}), trainable ones "
                f"{self.trainable_mean:.3g} ({self.trainable_n:,}): {self.difference:+.3g}")
        if np.isfinite(self.effect):
            head += f", {self.effect:+.2f} standard deviations of the run's rewards"
        if not self.biased:
            if self.masked_n < BIAS_MINIMUM or self.trainable_n < BIAS_MINIMUM:
                return head + f". Too few rewards on one side (under {BIAS_MINIMUM}) to call a bias."
            return head + ". Masking does not visibly shift the reward the trainer sees."
        way = "higher" if self.difference > 0 else "lower"
        return (head + f". Masking removes a {way}-reward slice: the trainer sees a "
                f"{'lower' if way == 'higher' else 'higher'}-reward run than the policy produced.")


def reward_bias(frame: pd.DataFrame) -> RewardBias:
    reward = frame["reward"].to_numpy(dtype=np.float64, na_value=np.nan)
    masked = frame["verdict"].cat.codes.to_numpy() == 1
    known = ~np.isnan(reward)
    t, m = reward[known & ~masked], reward[known & masked]
    return RewardBias(float(t.mean()) if len(t) else float("nan"), float(m.mean()) if len(m) else float("nan"),
                      len(t), len(m), float(reward[known].std()) if known.sum() > 1 else 0.0)


def reward_spec(runs: list[tuple[str, pd.DataFrame]], colors: tuple[str, ...] = ()) -> dict[str, Any]:
    """Box plots of reward per slice (precomputed quartiles and means), one box per run and
    slice: a Vega-Lite spec (`..vega`), a rule from the lowest to the highest reward, a box
    over the quartiles, a tick at the median and a diamond at the mean.

    ``runs`` is ``[(name, frame)]``: one run, or A and B side by side.
    """
    palette = list(colors or ((style.MAIN,) if len(runs) == 1 else style.RUN_COLORS))
    names = _run_names(runs)
    order: list[str] = []
    rows = []
    for (_, frame), name in zip(runs, names, strict=True):
        table = reward_slices(frame)
        table = table[(table["rewarded"] > 0) & (table["slice"] != "all rollouts")]
        order += [s for s in table["slice"] if s not in order]
        for s, n, r, m, md, q1, q3, lo, hi in zip(table["slice"], table["rewarded"], table["rollouts"],
                                                  table["mean"], table["median"], table["q1"], table["q3"],
                                                  table["min"], table["max"], strict=True):
            rows.append({"run": name, "slice": s, "min": float(lo), "q1": float(q1), "median": float(md),
                         "q3": float(q3), "max": float(hi), "mean": float(m),
                         "counts": f"{int(n):,} rewarded of {count(int(r), 'rollout')}",
                         "spread": f"mean {m:.3g} · median {md:.3g} · quartiles {q1:.3g} – {q3:.3g} · "
                                   f"range {lo:.3g} – {hi:.3g}"})
    paired = len(runs) > 1
    band = {"field": "slice", "type": "nominal", "sort": order, "title": None,
            "axis": {"labelLimit": 220, "labelFontSize": 11, "ticks": False, "domain": False}}
    color = {"field": "run", "type": "nominal", "title": None, "sort": names,
             "scale": {"domain": names, "range": palette[:len(names)]},
             "legend": {"orient": "top", "direction": "horizontal"} if paired else None}
    shared: dict[str, Any] = {"y": band, "color": color}
    if paired:
        shared["yOffset"] = {"field": "run", "type": "nominal", "sort": names}
    tooltip = [{"field": "slice", "title": "slice"}] + ([{"field": "run", "title": "run"}] if paired else []) + [
        {"field": "counts", "title": "reward"}, {"field": "spread", "title": " "}]
    reward = {"type": "quantitative", "title": "reward", "scale": {"zero": False}}
    layers = [
        {"mark": {"type": "rule", "strokeWidth": 1.5},
         "encoding": {**shared, "x": {"field": "min", **reward}, "x2": {"field": "max"}}},
        {"mark": {"type": "bar", "fillOpacity": 0.2, "strokeWidth": 1.5, "height": {"band": 0.7}},
         "encoding": {**shared, "x": {"field": "q1", **reward}, "x2": {"field": "q3"}, "stroke": color,
                      "tooltip": tooltip}},
        {"mark": {"type": "tick", "thickness": 2.5, "bandSize": 16},
         "encoding": {**shared, "x": {"field": "median", **reward}}},
        {"mark": {"type": "point", "shape": "diamond", "filled": True, "size": 46, "color": "#111827", "opacity": 1},
         "encoding": {"y": band, **({"yOffset": shared["yOffset"]} if paired else {}),
                      "x": {"field": "mean", **reward}}},
    ]
    height = 34 * max(len(order), 1) * (1 if len(runs) == 1 else 1.6) + (10 if len(runs) == 1 else 16)
    return vega.chart(layers, heading=vega.title("Reward, trainable vs masked",
                                                 "quartiles, range, median (bar), mean (◆)"),
                      height=int(height), data={"values": rows})


__all__ = [
    "BIAS_THRESHOLD", "GROUP_FILTERS", "reward_slices_shown", "scope_words", "GROUP_STATES", "GroupSummary",
    "RECORDS_HINT", "RewardBias", "group_codes",
    "group_filter_mask", "group_summary", "groups_spec", "has_groups", "has_rewards", "reward_bias", "reward_spec",
    "reward_slices", "trainable_per_group",
]
