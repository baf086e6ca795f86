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

import plotly.graph_objects as go

from .. import style
from ..text import html_text
from .data import Bars

BAR = {
    "reasons": style.QUARANTINED,
    "statuses": style.MAIN,
    "refusal": style.REFUSAL,
    "delivered": style.BRANCH,
    "calls": style.MAIN,
    "link": style.AFTER_TERMINAL,
}
KEY_BAR = {
    "statuses": {"completed": style.MAIN, "max_output_tokens": style.QUARANTINED, "content_filter": style.REFUSAL,
                 "incomplete": style.AFTER_TERMINAL, "no response": style.EXCLUDED},
    "refusal": {"none": style.EXCLUDED, "other": style.REFUSAL_SOFT, "context": style.QUARANTINED,
                "ended": style.REFUSAL},
    "link": {"parent_call_id_missing_recovered": style.RECOVERED},
}
"""Bars whose key has a meaning of its own (a recovered link is proven, not a failure)."""
FADED = "#e2e8f0"
HORIZONTAL = frozenset({"reasons", "statuses", "refusal", "link"})
ROWS = (("reasons", "statuses"), ("delivered", "calls"), ("link", "refusal"))
"""The page's grid of charts, two a row (a third column leaves no room for the bar labels at 1280 px)."""
HEIGHTS = {"reasons": 290, "statuses": 290, "delivered": 230, "calls": 230, "link": 250, "refusal": 250}
CONFIG = {"displayModeBar": False}
"""plotly config for these charts: nothing to zoom or pan, a click is the only interaction."""


def _colors(bars: Bars, active: tuple[str, ...]) -> list[str]:
    out = []
    for key in bars.keys:
        base = KEY_BAR.get(bars.dimension, {}).get(key) or BAR.get(bars.dimension, style.MAIN)
        out.append(base if not active or key in active else FADED)
    return out


def _pct(count: int, total: int) -> str:
    share = count / total if total else 0.0
    return f"{share:.0%}" if share >= 0.1 or share == 0 else f"{share:.1%}" if share >= 0.001 else "<0.1%"


def _text(count: int, total: int) -> str:
    return f"{count:,} · {_pct(count, total)}" if count else "0"


def bar_figure(bars: Bars, active: tuple[str, ...] = ()) -> dict[str, Any]:
    """One chart: count (and share of the rollouts it counts) per key; ``active`` keys are the filter.

    A plotly figure as plain data (``{"data": [...], "layout": {...}}``), which
    ``st.plotly_chart`` takes as it is: building a ``go.Figure`` validates every property
    and costs more than everything else on a filter change, for six charts each rerun.
    """
    horizontal = bars.dimension in HORIZONTAL
    labels = list(bars.labels)
    counts = list(bars.counts)
    hover = []
    for i, (label, count) in enumerate(zip(bars.labels, bars.counts)):
        lines = [f"<b>{html_text(label)}</b>", f"{count:,} of {bars.total:,} rollouts ({_pct(count, bars.total)})"]
        if bars.extra:
            lines.append(f"{bars.extra[i]:,} occurrences")
        if bars.hover:
            lines.append(html_text(bars.hover[i], limit=110))
        lines.append("<i>click to filter the table</i>")
        hover.append("<br>".join(lines))
    trace = {
        "type": "bar",
        "x": counts if horizontal else labels,
        "y": labels if horizontal else counts,
        "orientation": "h" if horizontal else "v",
        "marker": {"color": _colors(bars, active), "line": {"width": 0}},
        "text": [_text(c, bars.total) if horizontal else f"{c:,}" if c else "" for c in counts],
        "textposition": "outside",
        "textangle": 0,
        "cliponaxis": False,
        "textfont": {"size": 11 if horizontal else 10},
        "customdata": [[bars.dimension, key] for key in bars.keys],
        "hovertext": hover,
        "hoverinfo": "text",
        "selected": {"marker": {"opacity": 1}},
        "unselected": {"marker": {"opacity": 1}},
    }
    longest = max((len(s) for s in labels), default=4)
    top = max(counts, default=0)
    # Room beyond the longest bar for its "count · share" label.
    value_axis = {"visible": False, "range": [0, top * (1.55 if horizontal else 1.2) + 1], "fixedrange": True}
    label_axis = {"fixedrange": True, "tickfont": {"size": 11}, "automargin": True, "type": "category",
                  "categoryorder": "array", "categoryarray": labels}
    layout = {
        **style.BASE_LAYOUT,
        "title": {"text": f"<b>{html_text(bars.title)}</b> <span style='color:#64748b'>· {bars.total:,} rollouts</span>",
                  "x": 0, "xanchor": "left", "y": 0.98, "yanchor": "top", "font": {"size": 13}},
        "height": HEIGHTS.get(bars.dimension, 250),
        "margin": {"l": min(8 + 6 * longest, 200) if horizontal else 8, "r": 8, "t": 30, "b": 8},
        "showlegend": False,
        "clickmode": "event+select",
        "dragmode": False,
        "bargap": 0.25,
    }
    if horizontal:
        layout["xaxis"] = value_axis
        layout["yaxis"] = {**label_axis, "autorange": "reversed"}
    else:
        layout["yaxis"] = value_axis
        layout["xaxis"] = {**label_axis, "tickangle": 0 if len(labels) <= 8 else -45}
    return {"data": [trace], "layout": layout}


def as_figure(spec: dict[str, Any]) -> go.Figure:
    """``spec`` as a ``go.Figure`` without plotly's property validation.

    ``st.plotly_chart`` validates a plain dict by building a ``go.Figure`` from it (tens of
    ms a chart on a busy machine, on every rerun); it takes a ``go.Figure`` as already
    valid. Every spec `bar_figure` makes is validated once in the tests instead.
    """
    return go.Figure(spec, _validate=False)


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


__all__ = ["CONFIG", "HEIGHTS", "ROWS", "as_figure", "bar_figure", "clicked"]
