"""The Loss mask tab's log-probability chart as a Vega-Lite spec (`..vega` for the spec basics).

The log-prob of every generated token along the training sequence (`.mask.logprob_series`): one
blue line, broken wherever context comes between two calls' generations, with a dot per token on
short sequences. Past `.mask.LOGPROB_POINTS` tokens it is binned: the mean per bin in blue and the
minimum per bin in light red (so a single unlikely token still shows), with a legend. The window the
strip shows is shaded, a red rule at each of its edges. A hover names a point's position and value.

Why not plotly: the app is moving off plotly entirely; its 4.8 MB bundle costs a fresh browser tab
about 1 s before the first chart, and this chart was the Loss mask tab's last plotly. Drawn as SVG
up to `SVG_POINTS` hover points, else on a canvas (up to 4,000 points: as SVG that many elements).

Values are numbers and fixed words; tooltips are escaped by vega-tooltip. No Streamlit here.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from ...lossmask import GENERATED, LossMask
from .. import style, vega
from .mask import LOGPROB_POINTS, logprob_series
from .mask_chart import CANVAS

DESCRIPTION = "loss-mask log-probs"
"""The chart's ``description``: what a test (or a screen reader) reads to find it."""
LOGPROB, MEAN, MIN = "log-prob", "mean per bin", "min per bin"
COLOURS = {LOGPROB: style.MAIN, MEAN: style.MAIN, MIN: "rgba(220,38,38,0.45)"}
WINDOW = "#dc2626"
WINDOW_FILL = 0.07
HEIGHT = 190
DOTS_BELOW = 400
"""Fewer points than this: each drawn as a dot, as well as the line."""
SVG_POINTS = 1000
"""More hover points than this: the chart is drawn on a canvas."""


def _rows(mask: LossMask, max_points: int) -> tuple[list[dict[str, Any]], bool]:
    """One row per point (``p`` position, ``lp`` log-prob or mean, ``mn`` min per bin, ``seg`` the stretch of
    the line it is on), and whether the series is binned. A gap (a context row, or a missing value)
    starts a new stretch: the line never joins one call's generation to the next."""
    binned = int(np.count_nonzero(mask.provenance == GENERATED)) > max_points
    series = logprob_series(mask, max_points)
    rows: list[dict[str, Any]] = []
    seg = 0
    for p, lp, mn in zip(series["position"].tolist(), series["log_prob"].tolist(), series["min_log_prob"].tolist(),
                         strict=True):
        if math.isnan(p) or math.isnan(lp) or math.isnan(mn):
            seg += 1
            continue
        row = {"p": int(p), "lp": round(lp, 4), "seg": seg}
        if binned:
            row["mn"] = round(mn, 4)
        rows.append(row)
    return rows, binned


def logprob_chart(mask: LossMask, window: tuple[int, int] | None = None,
                  max_points: int = LOGPROB_POINTS) -> dict[str, Any]:
    """Log-probs of the generated tokens along the sequence, the strip's ``window`` shaded."""
    n = len(mask)
    rows, binned = _rows(mask, max_points)
    names = (MIN, MEAN) if binned else (LOGPROB,)
    position = {"type": "quantitative", "title": "position (generated tokens only)",
                "scale": {"domain": [0, max(n, 1)], "nice": False, "zero": True},
                "axis": {"format": ",d", "grid": True, "tickCount": 8}}
    colour = {"field": "series", "type": "nominal", "title": None,
              "scale": {"domain": list(names), "range": [COLOURS[s] for s in names]},
              "legend": {"orient": "top", "direction": "horizontal", "offset": 4} if binned else None}
    log_prob = {"type": "quantitative", "title": "log-prob", "scale": {"zero": False}}

    def named(name: str) -> dict[str, Any]:  # a layer's series: a constant field on the shared colour scale
        return {"calculate": json.dumps(name), "as": "series"}

    layers: list[dict[str, Any]] = []
    if window is not None and n and (window[0] > 0 or window[1] < n):
        layers.append({"data": {"values": [{"a": window[0], "b": window[1]}]},
                       "mark": {"type": "rect", "fill": WINDOW, "fillOpacity": WINDOW_FILL},
                       "encoding": {"x": {"field": "a", **position}, "x2": {"field": "b"},
                                    "y": {"value": 0}, "y2": {"value": HEIGHT}}})
        layers.append({"data": {"values": [{"at": window[0], "edge": "the strip's window begins"},
                                           {"at": window[1], "edge": "the strip's window ends"}]},
                       "mark": {"type": "rule", "color": WINDOW, "opacity": 0.6, "strokeWidth": 1},
                       "encoding": {"x": {"field": "at", **position}, "y": {"value": 0}, "y2": {"value": HEIGHT},
                                    "tooltip": [{"field": "edge", "title": "edge", "type": "nominal"},
                                                {"field": "at", "title": "position", "format": ",d",
                                                 "type": "quantitative"}]}})
    lines = [(MIN, "mn", 1.0, "min log-prob", ".3f")] if binned else []
    lines.append((names[-1], "lp", 1.3, "mean log-prob" if binned else "log-prob", ".4f"))
    dots = len(rows) < DOTS_BELOW
    for name, field, width, title, fmt in lines:
        layers.append({"data": {"name": "points"}, "transform": [named(name)],
                       "mark": {"type": "line", "strokeWidth": width},
                       "encoding": {"x": {"field": "p", **position}, "y": {"field": field, **log_prob},
                                    "detail": {"field": "seg", "type": "nominal"}, "color": colour}})
    for name, field, width, title, fmt in lines:
        # A point per token (or bin) on top: a dot on a short series, else invisible; a hover names it.
        shown = dots and field == "lp"
        layers.append({"data": {"name": "points"}, "transform": [named(name)],
                       "mark": {"type": "point", "filled": True, "size": 10 if shown else 30,
                                "opacity": 1 if shown else 0},
                       "encoding": {"x": {"field": "p", **position}, "y": {"field": field, **log_prob},
                                    "color": colour,
                                    "tooltip": [{"field": "p", "title": "position", "format": ",d",
                                                 "type": "quantitative"},
                                                {"field": field, "title": title, "format": fmt,
                                                 "type": "quantitative"}]}})
    hover_points = len(rows) * len(lines)
    return vega.chart(layers, heading=None, height=HEIGHT, description=DESCRIPTION, datasets={"points": rows},
                      usermeta=CANVAS if hover_points > SVG_POINTS else vega.RENDERER)


__all__ = ["COLOURS", "DESCRIPTION", "LOGPROB", "MEAN", "MIN", "SVG_POINTS", "logprob_chart"]
