"""Rewards and groups of a run: does masking remove a biased slice, and which groups lose their signal?

A scan table carries ``reward``, ``task_index`` and ``rollout_index`` when the run was
scanned with its rollout records (SPEC 11.1). From them, for the Run page:

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
from .. import style
from ..text import html_text

GROUP_STATES = ("none", "signal", "few", "flat")
"""A rollout's group, as `group_codes` gives it: no task index; a group with a learning signal;
fewer than two trainable rollouts; two or more trainable rollouts, all with one reward."""

GROUP_FILTERS = {
    "few": "fewer than 2 trainable",
    "flat": "trainable all one reward",
    "starved": "no learning signal (either)",
}
"""The Run page's group filter: its values (URL ``run_group``) and their labels."""

GROUP_TEXT = {
    "few": "the group (task) keeps fewer than two trainable rollouts: nothing to compare them with",
    "flat": "the group's trainable rollouts all have the same reward: every advantage is zero",
}

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


def groups_figure(runs: list[tuple[str, pd.DataFrame]]) -> dict[str, Any]:
    """Groups by trainable rollouts kept, split into those with and without a learning signal.

    ``runs`` is ``[(name, frame)]``; with two runs, their bars stand side by side (one
    offset group per run, its starved part stacked on its part with a signal).
    """
    traces = []
    top = 0
    paired = len(runs) > 1
    for i, (name, frame) in enumerate(runs):
        per = trainable_per_group(frame)
        top = max(top, len(per))
        signal = (per["groups"] - per["starved"]).tolist()
        prefix = f"{name}: " if paired else ""
        for part, values, color, opacity in (
                ("no learning signal", per["starved"].tolist(), style.REFUSAL, 1.0 if i == 0 or not paired else 0.6),
                ("learning signal", signal, style.RUN_COLORS[i] if paired else style.MAIN, 1.0)):
            traces.append({
                "type": "bar", "name": html_text(prefix + part, limit=80), "x": per["trainable"].tolist(), "y": values,
                "offsetgroup": str(i), "marker": {"color": color, "opacity": opacity},
                "hovertemplate": f"{html_text(prefix)}%{{y:,}} groups keep %{{x}} trainable rollouts"
                                 f" ({part})<extra></extra>",
            })
    # Stack each run's two parts: the starved part at the bottom, the rest on top of it.
    for i in range(0, len(traces), 2):
        traces[i + 1]["base"] = traces[i]["y"]
    layout = {
        **style.BASE_LAYOUT,
        "title": {"text": "<b>Groups (tasks) by trainable rollouts kept</b>", "x": 0, "xanchor": "left",
                  "y": 0.99, "yanchor": "top", "font": {"size": 13}},
        "height": 290 if paired else 270, "margin": {"l": 8, "r": 8, "t": 74 if paired else 52, "b": 36},
        "barmode": "group", "bargap": 0.2,
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.0, "yanchor": "bottom", "font": {"size": 11}},
        "xaxis": {"title": {"text": "trainable rollouts in the group"}, "dtick": 1, "fixedrange": True,
                  "range": [-0.5, max(top, 1) - 0.5]},
        "yaxis": {"title": {"text": "groups"}, "fixedrange": True, "rangemode": "tozero"},
        "dragmode": False,
    }
    return {"data": traces, "layout": layout}


# --------------------------------------------------------------------------- rewards


def _slices(frame: pd.DataFrame) -> list[tuple[str, np.ndarray]]:
    masked = frame["verdict"].cat.codes.to_numpy() == 1
    out = [("all rollouts", np.ones(len(frame), dtype=bool)), ("trainable", ~masked), ("masked", masked)]
    for reason in MASK_REASON_ORDER:
        rows = frame[f"reason_{reason}"].to_numpy()
        if rows.any():
            out.append((f"masked: {reason}", rows))
    return out


def reward_slices(frame: pd.DataFrame) -> pd.DataFrame:
    """Reward per slice of the run: all, trainable, masked, masked for each reason present.

    Columns: ``slice``, ``rollouts``, ``rewarded`` (with a reward), ``share`` (of the run),
    ``mean``, ``vs trainable`` (the slice's mean minus the trainable mean), ``min``, ``q1``,
    ``median``, ``q3``, ``max``. Quantiles are of the rewarded rollouts (NaN when none).
    """
    reward = frame["reward"].to_numpy(dtype=np.float64, na_value=np.nan) if "reward" in frame else \
        np.full(len(frame), np.nan)
    names, rows = zip(*_slices(frame))
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


def reward_figure(runs: list[tuple[str, pd.DataFrame]], colors: tuple[str, ...] = ()) -> dict[str, Any]:
    """Box plots of reward per slice (precomputed quartiles and means), one trace per run.

    ``runs`` is ``[(name, frame)]``: one run, or A and B side by side. A plain plotly spec,
    as `charts.bar_figure` makes.
    """
    palette = colors or ((style.MAIN,) if len(runs) == 1 else style.RUN_COLORS)
    order: list[str] = []
    tables = []
    for _, frame in runs:
        table = reward_slices(frame)
        table = table[(table["rewarded"] > 0) & (table["slice"] != "all rollouts")]
        tables.append(table)
        order += [s for s in table["slice"] if s not in order]
    traces = []
    for (name, _), table, color in zip(runs, tables, palette):
        hover = [f"<b>{html_text(name)} · {html_text(s)}</b><br>{int(n):,} rewarded of {int(r):,} rollouts<br>"
                 f"mean {m:.3g} · median {md:.3g}<br>quartiles {q1:.3g} – {q3:.3g} · range {lo:.3g} – {hi:.3g}"
                 for s, n, r, m, md, q1, q3, lo, hi in zip(table["slice"], table["rewarded"], table["rollouts"],
                                                           table["mean"], table["median"], table["q1"], table["q3"],
                                                           table["min"], table["max"])]
        traces.append({
            "type": "box", "name": html_text(name, limit=60), "orientation": "h", "y": list(table["slice"]),
            "q1": list(table["q1"]), "median": list(table["median"]), "q3": list(table["q3"]),
            "lowerfence": list(table["min"]), "upperfence": list(table["max"]), "mean": list(table["mean"]),
            "marker": {"color": color}, "line": {"color": color, "width": 1.5}, "fillcolor": color + "33",
            "hovertext": hover, "hoverinfo": "text", "boxpoints": False,
        })
    layout = {
        **style.BASE_LAYOUT,
        "title": {"text": "<b>Reward, trainable vs masked</b> <span style='color:#64748b'>· quartiles, range, "
                          "mean (dashed)</span>",
                  "x": 0, "xanchor": "left", "y": 0.99, "yanchor": "top", "font": {"size": 13}},
        "height": (80 if len(runs) == 1 else 100) + 34 * max(len(order), 1) * (1 if len(runs) == 1 else 1.6),
        "margin": {"l": 8, "r": 8, "t": 30 if len(runs) == 1 else 52, "b": 30},
        "boxmode": "group",
        "showlegend": len(runs) > 1,
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.0, "yanchor": "bottom", "font": {"size": 11}},
        "xaxis": {"title": {"text": "reward"}, "zeroline": False, "fixedrange": True},
        "yaxis": {"type": "category", "categoryorder": "array", "categoryarray": order, "autorange": "reversed",
                  "automargin": True, "fixedrange": True},
        "dragmode": False,
    }
    for trace in traces:
        trace["boxmean"] = True
    return {"data": traces, "layout": layout}


__all__ = [
    "BIAS_THRESHOLD", "GROUP_FILTERS", "reward_slices_shown", "scope_words", "GROUP_STATES", "GroupSummary", "RECORDS_HINT", "RewardBias", "group_codes",
    "group_filter_mask", "group_summary", "groups_figure", "has_groups", "has_rewards", "reward_bias", "reward_figure",
    "reward_slices", "trainable_per_group",
]
