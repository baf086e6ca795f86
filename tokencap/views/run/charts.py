"""The Run page's charts: one small Vega-Lite bar chart per `data.Bars` (`..vega` says why not plotly).

Every bar's row carries ``dimension`` and ``key``: the `RunFilter` field a
click sets and the value it sets it to. Keys are fixed per chart (every mask reason,
every status, every bin), never positions, so a click maps to the same filter however
the bars were counted. `clicked` reads that pair back from a Streamlit selection event.

Bars of the active filter are drawn solid and the others faded, so the chart says what
the table is filtered on. No Streamlit here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import style, vega
from ..formatting import count as count_of
from .bars import Bars

BAR = {
    "reasons": style.QUARANTINED,
    "statuses": style.MAIN,
    "refusal": style.REFUSAL,
    "delivered": style.BRANCH,
    "calls": style.MAIN,
    "link": style.AFTER_TERMINAL,
    "causes": style.BOUNDARY,
    "delivery": style.EXCLUDED,
}
KEY_BAR = {
    "statuses": {"completed": style.MAIN, "max_output_tokens": style.QUARANTINED, "content_filter": style.REFUSAL,
                 "incomplete": style.AFTER_TERMINAL, "no response": style.EXCLUDED},
    "refusal": {"none": style.EXCLUDED, "other": style.REFUSAL_SOFT, "context": style.QUARANTINED,
                "ended": style.REFUSAL},
    "link": {"parent_call_id_missing_recovered": style.RECOVERED},
    "change": {"fixed": style.RECOVERED, "broke": style.REFUSAL, "reasons_changed": style.QUARANTINED,
               "only_a": style.EXCLUDED, "only_b": style.EXCLUDED, "same": style.GHOST},
    "causes": {"compaction": style.AFTER_TERMINAL, "compaction_summary": style.AFTER_TERMINAL,
               "subagent": style.AFTER_TERMINAL, "branch": style.BRANCH, "link_intact": style.RECOVERED,
               "record_fault": style.EXCLUDED},
    "delivery": {"in_doubt": style.REFUSAL, "agent": style.QUARANTINED, "capture_masked": style.AFTER_TERMINAL,
                 "trained": style.RECOVERED, "unknown": style.GHOST},
}
"""Bars whose key has a meaning of its own (a recovered link is proven, not a failure)."""
HORIZONTAL = frozenset({"reasons", "statuses", "refusal", "link", "change", "causes", "delivery"})
FIRST = "reasons"
FIRST_ROW = (FIRST, "causes")
"""The charts on the Run page's first screen, side by side above the filters and the table: why rollouts are
masked, and why their lineage broke (the diagnosis: the product's headline)."""
ROWS = (("delivery", "statuses"), ("delivered", "calls"), ("link", "refusal"))
"""The other charts, two a row (a third column leaves no room for the bar labels at 1280 px), shown when the
page's "more charts" switch is on (`MORE_PARAM`)."""
MORE_LABEL = "More charts (what Gym delivered, status, delivered, calls, links, refusals)"
"""The switch's label: it names every chart it opens."""
MORE_PARAM = "run_charts"
"""The URL parameter that keeps the other charts open (``run_charts=1``): a reload or a shared link keeps them."""


def more_charts_open(params: Mapping[str, Any]) -> bool:
    """Whether a URL's parameters ask for the Run page's other charts (closed unless ``run_charts=1``)."""
    value = params.get(MORE_PARAM, "")
    if isinstance(value, (list, tuple)):
        value = value[-1] if value else ""
    return str(value) in ("1", "true", "yes")


def more_charts_params(shown: bool) -> dict[str, str]:
    """The URL parameter for the other charts' switch: only when they are open (the default is closed)."""
    return {MORE_PARAM: "1"} if shown else {}


HEIGHTS = {"change": 230, "reasons": 200, "statuses": 290, "delivered": 230, "calls": 230, "link": 250, "refusal": 250,
           "causes": 200, "delivery": 250}
"""Each chart's height (px). The first row's two are short: at 1280x800 the table's first eight rows are on the
first screen below them (a chart of 15 bars gets a smaller label font, `DENSE`)."""
PAIRED_FIRST_ROW = 110
"""Extra height (px) of a first-row chart comparing two runs (a comparison's first screen holds more above)."""
DENSE = 12
"""More bars than this: labels and counts in a 10 px font (the bars are ~12 px apart)."""


def _colors(bars: Bars, color: str | None = None) -> list[str]:
    """Each bar's colour: the run's when two runs are compared, else its key's own or its chart's."""
    return [color or KEY_BAR.get(bars.dimension, {}).get(key) or BAR.get(bars.dimension, style.MAIN)
            for key in bars.keys]


def _pct(count: int, total: int) -> str:
    share = count / total if total else 0.0
    return f"{share:.0%}" if share >= 0.1 or share == 0 else f"{share:.1%}" if share >= 0.001 else "<0.1%"


def _text(count: int, total: int) -> str:
    return f"{count:,} · {_pct(count, total)}" if count else "0"


RUN_COLORS = style.RUN_COLORS
FADED = 0.28
"""The opacity of a bar outside the active filter."""
CHART_WIDTH = 390
"""The plot width (px) a chart is laid out for (half the main area at 1280 px with the sidebar open):
sets the in-plot label column's share. Wider screens only leave the labels more room."""
LABEL_FONT = 11


def _about(bars: Bars, runs: list[tuple[str, Bars]], i: int) -> list[str]:
    """What a bar's tooltip says: its count (of each run) among the rollouts counted, and what it means."""
    lines = []
    for name, b in runs:
        who = f"{name}: " if len(runs) > 1 else ""
        lines.append(f"{who}{b.counts[i]:,} of {count_of(b.total, 'rollout')} ({_pct(b.counts[i], b.total)})"
                     + (f" · {b.extra[i]:,} occurrences" if b.extra else ""))
    if bars.hover:
        lines.append(bars.hover[i])
    return lines


def _paired_counts(runs: list[tuple[str, Bars]], labels: list[str],
                   counted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The count labels of two runs' bars: one per key, "A → B", at the longer of the two bars (faded with
    them when the filter leaves them out)."""
    (_, a), (_, b) = runs
    opacity = {row["label"]: row["opacity"] for row in counted}
    return [{"label": label, "count": int(max(ca, cb)), "opacity": opacity[label],
             "text": f"{int(ca):,} → {int(cb):,}" if ca or cb else "0"}
            for label, ca, cb in zip(labels, a.counts, b.counts, strict=False)]


CLICK_HINT = "click the bar, its label or its count to filter the table"
COUNTED = " passing the other filters · click a bar to filter"
"""After a chart's count of rollouts: what it counts, and what a click does."""


@dataclass(frozen=True)
class _Drawn:
    """What one chart draws: its bars, each run's bars with the run's name as the legend shows it, and
    whether its bars lie (``horizontal``) and come in pairs (two runs)."""

    bars: Bars
    runs: list[tuple[str, Bars]]
    run_names: list[str]
    labels: list[str]
    horizontal: bool

    @property
    def paired(self) -> bool:
        return len(self.runs) > 1


@dataclass(frozen=True)
class _Scale:
    """The value axis, from ``lo`` (below zero on a horizontal chart: the labels' room) to ``hi``, and the
    labels' font and share of the plot's width."""

    lo: float
    hi: float
    font: int
    share: float


def bar_spec(bars: Bars, active: tuple[str, ...] = (), versus: Bars | None = None,
               names: tuple[str, str] = ("A", "B")) -> dict[str, Any]:
    """One chart as a Vega-Lite spec: count (and share of the rollouts it counts) per key; ``active``
    keys are the filter, the other bars faded.

    With ``versus`` (the same chart of a second run: the same keys in the same order), the
    runs' bars are grouped side by side, in `RUN_COLORS`, with a legend of ``names``.

    Every key is clickable over its whole row (column, for vertical charts): a transparent
    "hit" bar laid over the others spans the plot and carries the key's ``dimension`` and
    ``key``, which the chart's point selection (`vega.PICK`) returns, so a category with a
    2 px bar is selected by a click on its label or its count too. A horizontal chart's
    labels are drawn inside the plot, left of the bars (the value scale starts below zero to
    leave them `CHART_WIDTH`'s room); a vertical chart's are its axis labels.
    """
    drawn = _drawn(bars, versus, names)  # 1. the runs and their names
    counted = _bar_rows(drawn, active)  # 2. a row per bar: count, colour, opacity, count label
    scale = _scale(drawn)  # 3. the value axis and the labels' room
    hits = _hit_rows(drawn, scale)  # 4. a row per key: the span a click on its row selects
    band, value, encoding = _encoding(drawn, scale)  # 5. the channels of the bars and their counts
    layers = [_bar_layer(counted, encoding), _count_layer(drawn, counted, encoding, scale)]  # 6. bars, counts
    if drawn.horizontal:  # 7. a horizontal chart's labels, inside the plot
        layers.append(_label_layer(hits, band, value, scale))
    layers.append(_hit_layer(drawn, hits, band, value))  # 8. the transparent hit bars on top
    return vega.chart(layers, heading=vega.title(bars.title, _totals(drawn)), height=_plot_height(drawn))  # 9.


def _drawn(bars: Bars, versus: Bars | None, names: tuple[str, str]) -> _Drawn:
    """Step 1: the runs drawn (two share their keys), named as the legend shows them: short, and two of
    the same name told apart."""
    runs = [(names[0], bars)] + ([(names[1], versus)] if versus is not None else [])
    if versus is not None and versus.keys != bars.keys:
        raise ValueError(f"{bars.dimension}: the two runs' bars have different keys")
    run_names = [name[:60] for name, _ in runs]
    if versus is not None and run_names[0] == run_names[1]:
        run_names[1] += " (B)"
    return _Drawn(bars, runs, run_names, list(bars.labels), bars.dimension in HORIZONTAL)


def _bar_rows(drawn: _Drawn, active: tuple[str, ...]) -> list[dict[str, Any]]:
    """Step 2: a row per bar of each run: its key, label, count, colour, opacity (faded outside the
    filter) and the count label drawn at its end."""
    counted = []
    for i, (name, b) in enumerate(drawn.runs):
        colors = _colors(b, RUN_COLORS[i]) if drawn.paired else _colors(b)
        for j, (key, count) in enumerate(zip(b.keys, b.counts, strict=False)):
            counted.append({
                "dimension": drawn.bars.dimension, "key": key, "label": drawn.labels[j], "run": drawn.run_names[i],
                "count": int(count), "color": colors[j], "opacity": 1.0 if not active or key in active else FADED,
                "text": (f"{count:,}" if drawn.paired else _text(count, b.total)) if drawn.horizontal else
                        (f"{count:,}" if count else ""),
            })
    return counted


def _scale(drawn: _Drawn) -> _Scale:
    """Step 3: the value axis: room past the longest bar for its count, and on a horizontal chart room
    below zero for the labels (their share of the plot's width, from the longest label)."""
    top = max((max(b.counts, default=0) for _, b in drawn.runs), default=0)
    hi = top * (1.55 if drawn.horizontal else 1.2) + 1
    longest = max((len(s) for s in drawn.labels), default=4)
    # A long list gets a smaller font, so its labels never overlap in the first row's height.
    n = len(drawn.labels)
    font = LABEL_FONT - 2 if n > DENSE + 3 else LABEL_FONT - 1 if n > DENSE else LABEL_FONT
    label_px = 12 + font * 0.62 * longest
    share = min(0.55, label_px / CHART_WIDTH)
    lo = -hi * share / (1 - share) if drawn.horizontal else 0
    return _Scale(lo, hi, font, share)


def _hit_rows(drawn: _Drawn, scale: _Scale) -> list[dict[str, Any]]:
    """Step 4: a row per key spanning the whole value axis, with what its tooltip and a screen reader say."""
    bars, labels = drawn.bars, drawn.labels
    return [{"dimension": bars.dimension, "key": key, "label": labels[j], "lo": scale.lo, "hi": scale.hi,
             "bar": labels[j], "counts": " · ".join(_about(bars, drawn.runs, j)), "click": CLICK_HINT,
             "aria": f"{labels[j]}: " + " · ".join(_about(bars, drawn.runs, j))}
            for j, key in enumerate(bars.keys)]


def _encoding(drawn: _Drawn, scale: _Scale) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Step 5: the band channel (a key per row or column, in the bars' order), the value channel, and the
    bars' encoding: coloured per bar, or per run with a legend when two runs stand side by side."""
    band: dict[str, Any] = {"field": "label", "type": "nominal", "sort": drawn.labels, "title": None,
                            "scale": {"paddingInner": 0.25, "paddingOuter": 0.12}}
    value = {"field": "count", "type": "quantitative", "title": None, "axis": None,
             "scale": {"domain": [scale.lo, scale.hi], "nice": False, "zero": False}}
    band_channel, value_channel = _channels(drawn)
    if drawn.horizontal:
        band["axis"] = None
    else:
        rotated = len(drawn.labels) > 8
        band["axis"] = {"labelAngle": -90 if rotated else 0, "labelLimit": 120, "ticks": False, "domain": False,
                        "labelPadding": 4, "labelFontSize": 10}
    color = ({"field": "run", "type": "nominal", "title": None, "sort": drawn.run_names,
              "scale": {"domain": drawn.run_names, "range": list(RUN_COLORS)},
              "legend": {"orient": "top", "direction": "horizontal", "offset": 2}}
             if drawn.paired else {"field": "color", "type": "nominal", "scale": None, "legend": None})
    encoding = {band_channel: band, value_channel: value, "color": color,
                "opacity": {"field": "opacity", "type": "quantitative", "scale": None, "legend": None}}
    if drawn.paired:
        encoding[band_channel + "Offset"] = {"field": "run", "type": "nominal", "sort": drawn.run_names}
    return band, value, encoding


def _channels(drawn: _Drawn) -> tuple[str, str]:
    """The band's channel and the value's: a horizontal chart's keys go down, a vertical one's across."""
    return ("y", "x") if drawn.horizontal else ("x", "y")


def _bar_layer(counted: list[dict[str, Any]], encoding: dict[str, Any]) -> dict[str, Any]:
    """Step 6a: the bars."""
    return {"data": {"values": counted}, "mark": {"type": "bar", "cornerRadiusEnd": 1}, "encoding": encoding}


def _count_layer(drawn: _Drawn, counted: list[dict[str, Any]], encoding: dict[str, Any],
                 scale: _Scale) -> dict[str, Any]:
    """Step 6b: the counts at the bars' ends. Two runs: one label a key ("5 → 3"), past the longer bar: a
    label each, half a row apart, overlapped ("0" over "0" read "8")."""
    band_channel, _ = _channels(drawn)
    return {
        "data": {"values": _paired_counts(drawn.runs, drawn.labels, counted) if drawn.paired else counted},
        "mark": {"type": "text", "fontSize": scale.font if drawn.horizontal else 10, "color": "#1f2937",
                 **({"align": "left", "baseline": "middle", "dx": 3} if drawn.horizontal else
                    {"align": "center", "baseline": "bottom", "dy": -2})},
        "encoding": {k: v for k, v in encoding.items() if k not in ("color", band_channel + "Offset")}
                    | {"text": {"field": "text"}},
    }


def _label_layer(hits: list[dict[str, Any]], band: dict[str, Any], value: dict[str, Any],
                 scale: _Scale) -> dict[str, Any]:
    """Step 7: a horizontal chart's labels, left of the bars in the room below zero."""
    return {"data": {"values": hits},
            "mark": {"type": "text", "align": "left", "baseline": "middle", "dx": 2, "fontSize": scale.font,
                     "color": vega.INK, "limit": max(40, scale.share * CHART_WIDTH - 6)},
            "encoding": {"y": band, "x": {"field": "lo", "type": "quantitative", "scale": value["scale"],
                                          "axis": None}, "text": {"field": "label"}}}


def _hit_layer(drawn: _Drawn, hits: list[dict[str, Any]], band: dict[str, Any],
               value: dict[str, Any]) -> dict[str, Any]:
    """Step 8: the transparent hit bars over each key's whole row, which a click selects (`vega.PICK`)."""
    band_channel, value_channel = _channels(drawn)
    hit_span = {"field": "lo", "type": "quantitative", "scale": value["scale"], "axis": None, "title": None}
    return {
        "data": {"values": hits},
        "params": [vega.pick_param(("dimension", "key"))],
        "mark": {"type": "bar", "opacity": 0, "cursor": "pointer"},
        "encoding": {band_channel: band, value_channel: hit_span, value_channel + "2": {"field": "hi"},
                     "tooltip": [{"field": "bar", "title": drawn.bars.title}, {"field": "counts", "title": "rollouts"},
                                 {"field": "click", "title": " "}],
                     "description": {"field": "aria"}},  # what a screen reader says of the row (and a test finds)
    }


def _totals(drawn: _Drawn) -> str:
    """Step 9a: the title's count of the rollouts each run's chart counts, and what a click does."""
    if drawn.paired:
        return " · ".join(f"{n} {b.total:,}" for n, (_, b) in zip(drawn.run_names, drawn.runs, strict=False)) + COUNTED
    return count_of(drawn.bars.total, "rollout") + COUNTED


def _plot_height(drawn: _Drawn) -> int:
    """Step 9b: the plot's height: the chart's, taller for two runs (a first-row chart by a run's height
    more), less the title, the legend and a vertical chart's axis labels."""
    height = HEIGHTS.get(drawn.bars.dimension, 250) + (18 if drawn.paired else 0)
    if drawn.paired and drawn.bars.dimension in FIRST_ROW:  # two bars a key: the first row's short height is one run's
        height += PAIRED_FIRST_ROW
    plot = height - (64 if drawn.paired else 44) - (0 if drawn.horizontal else 30 if len(drawn.labels) <= 8 else 70)
    return max(plot, 80)


def clicked(selection: Any) -> tuple[str, str] | None:
    """The ``(dimension, key)`` of the bar a Streamlit selection event clicked, or None.

    Accepts Streamlit's selection state (``event.selection``: the chart's `vega.PICK`
    selection, a list of ``{"dimension": ..., "key": ...}``) or any mapping of that shape.
    """
    for point in vega.picked(selection):
        dimension, key = point.get("dimension"), point.get("key")
        if isinstance(dimension, str) and isinstance(key, str):
            return dimension, key
    return None


__all__ = ["DENSE", "FIRST", "FIRST_ROW", "HEIGHTS", "MORE_LABEL", "MORE_PARAM", "ROWS", "more_charts_open",
           "more_charts_params", "RUN_COLORS", "bar_spec", "clicked"]
