"""Where a plotly figure's texts, markers and lines land, estimated from the figure itself.

No browser: every box is computed from the layout (width, height, margins, axis ranges)
and each trace's positions, marker sizes, text positions and font sizes, conservatively:
a character is `CHAR_EM` of its font size wide (wider than most fonts draw), a line
`LINE_EM` high, a label starts where plotly sets it off from its point (at least half its
marker's size). `problems(fig)` lists every text that leaves its area (the plot area for
text on points, the figure for annotations), overlaps another text or a visible marker,
or (``lines=True``) is crossed by a line.
"""

from __future__ import annotations

import base64
import json
import html
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

CHAR_EM = 0.65
LINE_EM = 1.25
PLOTLY_MARGIN = {"l": 80, "r": 80, "t": 100, "b": 80}


@dataclass(frozen=True)
class Box:
    what: str
    x0: float
    y0: float
    x1: float
    y1: float

    def overlaps(self, other: Box, tol: float = 0.5) -> bool:
        return (self.x0 < other.x1 - tol and other.x0 < self.x1 - tol and
                self.y0 < other.y1 - tol and other.y0 < self.y1 - tol)

    def inside(self, x0: float, y0: float, x1: float, y1: float, tol: float = 0.5) -> bool:
        return self.x0 >= x0 - tol and self.y0 >= y0 - tol and self.x1 <= x1 + tol and self.y1 <= y1 + tol


def values(v: Any) -> list:
    """A trace's array as a list: plotly writes numeric arrays as ``{dtype, bdata}`` (base64)."""
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"])).astype(float).tolist()
    if v is None:
        return []
    return list(v) if isinstance(v, (list, tuple, np.ndarray)) else v


def plain_length(text: str) -> int:
    """Characters a text draws: tags removed, entities counted once."""
    return len(html.unescape(re.sub(r"<[^>]+>", "", text)))


class Geometry:
    def __init__(self, fig: Any, width: float = 930) -> None:
        self.fig = json.loads(fig.to_json()) if hasattr(fig, "to_json") else fig
        layout = self.fig.get("layout", {})
        self.layout = layout
        self.width = float(layout.get("width") or width)
        self.height = float(layout.get("height") or 450)
        m = {**PLOTLY_MARGIN, **{k: v for k, v in (layout.get("margin") or {}).items() if k in PLOTLY_MARGIN}}
        legend = layout.get("legend") or {}
        if layout.get("showlegend", True) is not False and (layout.get("margin") or {}).get("autoexpand", True) \
                and legend.get("x", 1.02) >= 1:
            # A legend right of the plot pushes the margin out by its width (plotly's automargin).
            names = [t.get("name") or "" for t in self.fig.get("data", []) if t.get("showlegend", True) is not False]
            m["r"] = max(float(m["r"]), 40 + 0.6 * 11 * max(map(len, names), default=0))
        self.plot = (float(m["l"]), float(m["t"]), self.width - float(m["r"]), self.height - float(m["b"]))
        self.xrange = layout["xaxis"]["range"]
        self.yrange = layout["yaxis"]["range"]
        self.font = float((layout.get("font") or {}).get("size") or 12)

    def px(self, x: float, y: float) -> tuple[float, float]:
        x0, y0, x1, y1 = self.plot
        (a, b), (c, d) = self.xrange, self.yrange
        return x0 + (x - a) / (b - a) * (x1 - x0), y0 + (d - y) / (d - c) * (y1 - y0)

    def traces(self) -> list[dict]:
        return [t for t in self.fig.get("data", []) if t.get("visible", True) is True]

    def markers(self) -> list[Box]:
        out = []
        for t in self.traces():
            if "markers" not in (t.get("mode") or ""):
                continue
            marker = t.get("marker") or {}
            if re.fullmatch(r"rgba\(.*,\s*0(\.0*)?\)", str(marker.get("color", ""))):
                continue  # invisible (a label's clearance)
            line = (marker.get("line") or {}).get("width") or 0
            sizes = values(marker.get("size", 6))
            for i, (x, y) in enumerate(zip(values(t["x"]), values(t["y"]))):
                if x is None or y is None or math.isnan(x) or math.isnan(y):
                    continue
                size = sizes[i] if isinstance(sizes, (list, tuple)) else sizes
                half = size / 2 + line / 2
                cx, cy = self.px(x, y)
                out.append(Box(f"marker {t.get('name')}", cx - half, cy - half, cx + half, cy + half))
        return out

    def point_texts(self) -> list[Box]:
        out = []
        for t in self.traces():
            if "text" not in (t.get("mode") or "") or not t.get("text"):
                continue
            size = float((t.get("textfont") or {}).get("size") or self.font)
            marker = values((t.get("marker") or {}).get("size", 6)) if "markers" in t["mode"] else 0
            positions = values(t.get("textposition") or "middle center")
            xs, ys = values(t["x"]), values(t["y"])
            texts = t["text"] if isinstance(t["text"], (list, tuple)) else [t["text"]] * len(xs)
            for i, (x, y, text) in enumerate(zip(xs, ys, texts)):
                pos = positions[i] if isinstance(positions, (list, tuple)) else positions
                m = marker[i] if isinstance(marker, (list, tuple)) else marker
                r = m / 2  # plotly sets text off by size / 1.6 + 1: half the size is nearer, so stricter
                w, h = plain_length(str(text)) * CHAR_EM * size, LINE_EM * size
                cx, cy = self.px(x, y)
                if "right" in pos:
                    x0 = cx + r
                elif "left" in pos:
                    x0 = cx - r - w
                else:
                    x0 = cx - w / 2
                if "top" in pos:
                    y0 = cy - r - h
                elif "bottom" in pos:
                    y0 = cy + r
                else:
                    y0 = cy - h / 2
                out.append(Box(f"text {text!r}", x0, y0, x0 + w, y0 + h))
        return out

    def annotation_texts(self) -> list[Box]:
        out = []
        for a in self.layout.get("annotations") or []:
            size = float((a.get("font") or {}).get("size") or self.font)
            w, h = plain_length(str(a.get("text", ""))) * CHAR_EM * size + 2, LINE_EM * size + 2
            x0p, y0p, x1p, y1p = self.plot
            if a.get("xref", "x") == "paper":
                cx = x0p + a["x"] * (x1p - x0p)
            else:
                cx = self.px(a["x"], self.yrange[0])[0]
            if a.get("yref", "y") == "paper":
                cy = y1p - a["y"] * (y1p - y0p)
            else:
                cy = self.px(self.xrange[0], a["y"])[1]
            cx += a.get("xshift", 0)
            cy -= a.get("yshift", 0)
            xa, ya = a.get("xanchor", "center"), a.get("yanchor", "middle")
            x0 = cx if xa == "left" else cx - w if xa == "right" else cx - w / 2
            y0 = cy - h if ya == "bottom" else cy if ya == "top" else cy - h / 2
            out.append(Box(f"annotation {a.get('text')!r}", x0, y0, x0 + w, y0 + h))
        return out

    def segments(self) -> list[tuple[tuple[float, float], tuple[float, float], str]]:
        out = []
        for t in self.traces():
            if (t.get("mode") or "") != "lines":
                continue
            pts = [None if x is None or y is None or math.isnan(x) or math.isnan(y) else self.px(x, y)
                   for x, y in zip(values(t["x"]), values(t["y"]))]
            for a, b in zip(pts, pts[1:]):
                if a is not None and b is not None and a != b:
                    out.append((a, b, str(t.get("name"))))
        return out


def _crosses(a: tuple[float, float], b: tuple[float, float], box: Box, tol: float = 1.0) -> bool:
    """Whether segment a-b passes through ``box`` shrunk by ``tol`` (Liang-Barsky clipping)."""
    x0, y0, x1, y1 = box.x0 + tol, box.y0 + tol, box.x1 - tol, box.y1 - tol
    dx, dy = b[0] - a[0], b[1] - a[1]
    lo, hi = 0.0, 1.0
    for p, q in ((-dx, a[0] - x0), (dx, x1 - a[0]), (-dy, a[1] - y0), (dy, y1 - a[1])):
        if p == 0:
            if q < 0:
                return False
            continue
        r = q / p
        if p < 0:
            lo = max(lo, r)
        else:
            hi = min(hi, r)
        if lo > hi:
            return False
    return True


def problems(fig: Any, *, lines: bool = False, width: float = 930) -> list[str]:
    """Every text that is clipped, overlaps another text or a marker, or (``lines``) is crossed by a line."""
    g = Geometry(fig, width)
    points, notes = g.point_texts(), g.annotation_texts()
    out = []
    for box in points:
        if not box.inside(*g.plot):
            out.append(f"{box.what} leaves the plot area {g.plot}: {box}")
    for box in notes:
        if not box.inside(0, 0, g.width, g.height):
            out.append(f"{box.what} leaves the figure ({g.width}x{g.height}): {box}")
    texts = points + notes
    for i, box in enumerate(texts):
        for other in texts[i + 1:]:
            if box.overlaps(other):
                out.append(f"{box.what} overlaps {other.what}")
    markers = g.markers()
    for box in texts:
        for marker in markers:
            if box.overlaps(marker):
                out.append(f"{box.what} overlaps {marker.what} at ({marker.x0:.0f}, {marker.y0:.0f})")
    if lines:
        segments = g.segments()
        px0, py0, px1, py1 = g.plot
        for box in texts:
            # Lines are clipped to the plot area: only the part of a text inside it can be crossed.
            seen = Box(box.what, max(box.x0, px0), max(box.y0, py0), min(box.x1, px1), min(box.y1, py1))
            if seen.x0 >= seen.x1 or seen.y0 >= seen.y1:
                continue
            for a, b, name in segments:
                if _crosses(a, b, seen):
                    out.append(f"{box.what} is crossed by a line ({name})")
    return out
