"""The Run page's charts: one small plotly bar chart per `data.Bars`.

Every bar carries ``[dimension, key]`` in its ``customdata``: the `RunFilter` field a
click sets and the value it sets it to. Keys are fixed per chart (every mask reason,
every status, every bin), never positions, so a click maps to the same filter however
the bars were counted. `clicked` reads that pair back from a Streamlit selection event.

Bars of the active filter are drawn solid and the others faded, so the chart says what
the table is filtered on. No Streamlit here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import style
from ..figures import as_figure
from ..text import html_text
from .data import Bars

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
FADED = "#e2e8f0"
HORIZONTAL = frozenset({"reasons", "statuses", "refusal", "link", "change", "causes", "delivery"})
FIRST = "reasons"
"""The chart on the Run page's first screen, beside the filters and above the table: why rollouts are masked."""
ROWS = (("causes", "delivery"), ("statuses", "delivered"), ("calls", "link"), ("refusal",))
"""The other charts, two a row (a third column leaves no room for the bar labels at 1280 px), shown when the
page's "more charts" switch is on (`MORE_PARAM`)."""
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


HEIGHTS = {"change": 230, "reasons": 262, "statuses": 290, "delivered": 230, "calls": 230, "link": 250, "refusal": 250,
           "causes": 380, "delivery": 380}
CONFIG = {"displayModeBar": False}
"""plotly config for these charts: nothing to zoom or pan, a click is the only interaction."""


def _colors(bars: Bars, active: tuple[str, ...], color: str | None = None, faded: str = FADED) -> list[str]:
    out = []
    for key in bars.keys:
        base = color or KEY_BAR.get(bars.dimension, {}).get(key) or BAR.get(bars.dimension, style.MAIN)
        out.append(base if not active or key in active else faded)
    return out


def _pct(count: int, total: int) -> str:
    share = count / total if total else 0.0
    return f"{share:.0%}" if share >= 0.1 or share == 0 else f"{share:.1%}" if share >= 0.001 else "<0.1%"


def _text(count: int, total: int) -> str:
    return f"{count:,} · {_pct(count, total)}" if count else "0"


RUN_COLORS = style.RUN_COLORS
RUN_FADED = ("#e2e8f0", "#dbeafe")
CHART_WIDTH = 390
"""The plot width (px) a chart is laid out for (half the main area at 1280 px with the sidebar open):
sets the in-plot label column's share. Wider screens only leave the labels more room."""
LABEL_FONT = 11


def _hover(bars: Bars, runs: list[tuple[str, Bars]]) -> list[str]:
    out = []
    for i, label in enumerate(bars.labels):
        lines = [f"<b>{html_text(label)}</b>"]
        for name, b in runs:
            who = f"{html_text(name)}: " if len(runs) > 1 else ""
            lines.append(f"{who}{b.counts[i]:,} of {b.total:,} rollouts ({_pct(b.counts[i], b.total)})"
                         + (f" · {b.extra[i]:,} occurrences" if b.extra else ""))
        if bars.hover:
            lines.append(html_text(bars.hover[i], limit=110))
        lines.append("<i>click the bar, its label or its count to filter the table</i>")
        out.append("<br>".join(lines))
    return out


def bar_figure(bars: Bars, active: tuple[str, ...] = (), versus: Bars | None = None,
               names: tuple[str, str] = ("A", "B")) -> dict[str, Any]:
    """One chart: count (and share of the rollouts it counts) per key; ``active`` keys are the filter.

    With ``versus`` (the same chart of a second run: the same keys in the same order), the
    runs' bars are grouped side by side, in `RUN_COLORS`, with a legend of ``names``.

    Every key is clickable over its whole row (column, for vertical charts): a transparent
    "hit" bar on an axis of its own spans the plot and carries the key's label as its text,
    so a category with a 2 px bar is selected by a click on its label or its count too.

    A plotly figure as plain data (``{"data": [...], "layout": {...}}``), which
    ``st.plotly_chart`` takes as it is: building a ``go.Figure`` validates every property
    and costs more than everything else on a filter change, for six charts each rerun.
    """
    horizontal = bars.dimension in HORIZONTAL
    labels = list(bars.labels)
    paired = versus is not None
    runs = [(names[0], bars)] + ([(names[1], versus)] if versus is not None else [])
    if versus is not None and versus.keys != bars.keys:
        raise ValueError(f"{bars.dimension}: the two runs' bars have different keys")
    customdata = [[bars.dimension, key] for key in bars.keys]
    hover = _hover(bars, runs)
    value_axis, label_axis, hit_axis = ("x", "y", "x2") if horizontal else ("y", "x", "y2")
    traces = []
    for i, (name, b) in enumerate(runs):
        counts = list(b.counts)
        traces.append({
            "type": "bar", "name": html_text(name, limit=60), "showlegend": paired,
            value_axis: counts, label_axis: labels,
            "orientation": "h" if horizontal else "v",
            "marker": {"color": _colors(b, active, RUN_COLORS[i], RUN_FADED[i]) if paired else _colors(b, active),
                       "line": {"width": 0}},
            "text": [(f"{c:,}" if paired else _text(c, b.total)) if horizontal else f"{c:,}" if c else ""
                     for c in counts],
            "textposition": "outside", "textangle": 0, "cliponaxis": False,
            "textfont": {"size": 11 if horizontal else 10},
            "customdata": customdata, "hovertext": hover, "hoverinfo": "text",
            "selected": {"marker": {"opacity": 1}}, "unselected": {"marker": {"opacity": 1}},
        })
    longest = max((len(s) for s in labels), default=4)
    height = HEIGHTS.get(bars.dimension, 250) + (18 if paired else 0)
    rotated = not horizontal and len(labels) > 8
    label_px = (12 + LABEL_FONT * 0.62 * longest) if horizontal or rotated else 20
    share = min(0.55, label_px / (CHART_WIDTH if horizontal else height - 38))
    traces.append({  # the hit area and the labels (see the docstring)
        "type": "bar", "name": "", "showlegend": False, value_axis + "axis": hit_axis,
        value_axis: [1] * len(labels), label_axis: labels,
        "orientation": "h" if horizontal else "v", "width": 1,
        "marker": {"color": "rgba(0,0,0,0)", "line": {"width": 0}},
        "text": labels, "textposition": "inside", "insidetextanchor": "start", "constraintext": "none",
        "textangle": -90 if rotated else 0,
        "textfont": {"size": LABEL_FONT if horizontal else 10, "color": "#334155"},
        "customdata": customdata, "hovertext": hover, "hoverinfo": "text",
        "selected": {"marker": {"opacity": 1}, "textfont": {"color": "#334155"}},
        "unselected": {"marker": {"opacity": 1}, "textfont": {"color": "#334155"}},
    })
    top = max((max(b.counts, default=0) for _, b in runs), default=0)
    # Room beyond the longest bar for its "count · share" label.
    values = {"visible": False, "range": [0, top * (1.55 if horizontal else 1.2) + 1], "fixedrange": True,
              "domain": [share, 1]}
    hits = {"visible": False, "range": [0, 1], "fixedrange": True, "domain": [0, 1],
            "anchor": label_axis}
    categories = {"fixedrange": True, "showticklabels": False, "type": "category", "categoryorder": "array",
                  "categoryarray": labels, "showgrid": False, "zeroline": False}
    totals = " · ".join(f"{html_text(n)} {b.total:,}" for n, b in runs) if paired else f"{bars.total:,} rollouts"
    layout = {
        **style.BASE_LAYOUT,
        "plot_bgcolor": "rgba(0,0,0,0)",  # the hit axis's plot lies over the bars' plot
        "title": {"text": f"<b>{html_text(bars.title)}</b> <span style='color:#64748b'>· {totals}</span>",
                  "x": 0, "xanchor": "left", "y": 0.98, "yanchor": "top", "font": {"size": 13}},
        "height": height,
        "margin": {"l": 8, "r": 8, "t": 48 if paired else 30, "b": 8},
        "showlegend": paired,
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.0, "yanchor": "bottom",
                   "font": {"size": 11}},
        "clickmode": "event+select",
        "dragmode": False,
        "hovermode": "closest",
        "barmode": "group",
        "bargap": 0.25,
        "bargroupgap": 0.05,
    }
    if horizontal:
        layout["xaxis"], layout["xaxis2"] = values, hits
        layout["yaxis"] = {**categories, "autorange": "reversed"}
    else:
        layout["yaxis"], layout["yaxis2"] = values, hits
        layout["xaxis"] = categories
    return {"data": traces, "layout": layout}


def clicked(selection: Any) -> tuple[str, str] | None:
    """The ``(dimension, key)`` of the bar a Streamlit selection event clicked, or None.

    Accepts Streamlit's selection state (``event.selection``) or a plain mapping with a
    ``points`` list; each point carries ``[dimension, key]`` in ``customdata``.
    """
    if selection is None:
        return None
    points = selection.get("points") if isinstance(selection, Mapping) else getattr(selection, "points", None)
    for point in points or ():
        data = point.get("customdata") if isinstance(point, Mapping) else None
        if isinstance(data, (list, tuple)) and len(data) == 2 and all(isinstance(v, str) for v in data):
            return data[0], data[1]
    return None


__all__ = ["CONFIG", "FIRST", "HEIGHTS", "MORE_PARAM", "ROWS", "more_charts_open", "more_charts_params", "RUN_COLORS", "as_figure", "bar_figure", "clicked"]
