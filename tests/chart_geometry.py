"""Where a call-tree chart's texts, marks and links land, read from its Vega-Lite spec (no browser).

`tokencap.views.rollout.tree_chart` hands Vega-Lite every position in pixels (``scale: null``), so
each box is computed from the spec's data alone, conservatively: a character is `CHAR_EM` of its
font size wide (wider than monospace fonts draw), a line `LINE_EM` high, a point as wide as the
square root of its ``size`` plus its stroke. `problems(spec)` lists every text that leaves its
area (a call label the plot, any text the chart), overlaps another text or a drawn mark, or
(``lines=True``) is crossed by a link.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

CHAR_EM = 0.66
LINE_EM = 1.25


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


def _mark(layer: dict[str, Any]) -> dict[str, Any]:
    mark = layer.get("mark")
    return mark if isinstance(mark, dict) else {"type": mark}


class Geometry:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.width, self.height = float(spec["width"]), float(spec["height"])
        geometry = spec["usermeta"]["geometry"]
        self.plot = tuple(float(v) for v in geometry["plot"])
        self.layers = spec.get("layer", [])

    def _of(self, kind: str) -> list[dict[str, Any]]:
        return [layer for layer in self.layers if _mark(layer)["type"] == kind]

    def texts(self) -> list[tuple[Box, bool]]:
        """(box, is a call label) of every text: call labels are left-aligned, mono, middle-baselined in the plot."""
        out = []
        for layer in self._of("text"):
            mark = _mark(layer)
            size = float(mark.get("fontSize", 11))
            align, baseline = mark.get("align", "center"), mark.get("baseline", "middle")
            bold = mark.get("fontWeight") == "bold"
            for d in layer["data"]["values"]:
                w, h = len(str(d["text"])) * (CHAR_EM + (0.04 if bold else 0)) * size, LINE_EM * size
                x, y = float(d["px"]) + float(mark.get("dx", 0)), float(d["py"]) + float(mark.get("dy", 0))
                x0 = x if align == "left" else x - w if align == "right" else x - w / 2
                y0 = y - h if baseline == "bottom" else y if baseline == "top" else y - h / 2
                label = mark.get("color") == "#1e293b"
                out.append((Box(f"text {d['text']!r}", x0, y0, x0 + w, y0 + h), label))
        return out

    def marks(self) -> list[Box]:
        out = []
        for layer in self._of("point"):
            for d in layer["data"]["values"]:
                if d.get("fill") == "transparent" and not d.get("sw"):
                    continue
                half = math.sqrt(float(d["size"])) / 2 + float(d.get("sw") or 0) / 2
                x, y = float(d["px"]), float(d["py"])
                out.append(Box(f"mark {d.get('key') or d.get('shape')}", x - half, y - half, x + half, y + half))
        return out

    def points(self) -> list[dict[str, Any]]:
        """Every node and ring datum (with its key) of the clickable layer."""
        return [d for layer in self._of("point") if layer.get("params") for d in layer["data"]["values"]]

    def segments(self) -> list[tuple[tuple[float, float], tuple[float, float], str]]:
        """Every drawn link segment (rule marks), with its colour."""
        return [((float(d["px"]), float(d["py"])), (float(d["px2"]), float(d["py2"])), str(_mark(layer).get("color")))
                for layer in self._of("rule") for d in layer["data"]["values"]]


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


def problems(spec: dict[str, Any], *, lines: bool = False) -> list[str]:
    """Every text that is clipped, overlaps another text or a mark, or (``lines``) is crossed by a line."""
    g = Geometry(spec)
    texts = g.texts()
    out = []
    for box, label in texts:
        if label and not box.inside(*g.plot):
            out.append(f"{box.what} leaves the plot area {g.plot}: {box}")
        if not box.inside(0, 0, g.width, g.height):
            out.append(f"{box.what} leaves the chart ({g.width}x{g.height}): {box}")
    boxes = [box for box, _ in texts]
    for i, box in enumerate(boxes):
        for other in boxes[i + 1:]:
            if box.overlaps(other):
                out.append(f"{box.what} overlaps {other.what}")
    marks = g.marks()
    for box in boxes:
        for mark in marks:
            if box.overlaps(mark):
                out.append(f"{box.what} overlaps {mark.what} at ({mark.x0:.0f}, {mark.y0:.0f})")
    if lines:
        segments = g.segments()
        for box in boxes:
            for a, b, name in segments:
                if _crosses(a, b, box):
                    out.append(f"{box.what} is crossed by a line ({name})")
    return out


def values(spec: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The data of every layer of ``spec`` named ``name`` (`tree_chart.NODES`, `CALL_IDS`, ...) or, for a name
    ending in ``_`` (`LINKS`, `LEGEND`), starting with it, in order."""
    def named(layer: dict[str, Any]) -> bool:
        own = layer.get("name") or ""
        return own.startswith(name) if name.endswith("_") else own == name
    return [d for layer in spec.get("layer", []) if named(layer) for d in layer["data"]["values"]]


def call_labels(spec: dict[str, Any]) -> list[str]:
    """The labels written beside the nodes, top to bottom."""
    return [d["text"] for d in values(spec, "call_ids")]


def lane_names(spec: dict[str, Any]) -> list[str]:
    """The lane names in the top margin, left to right."""
    return [d["text"] for d in values(spec, "lane_names")]


def marks_of(spec: dict[str, Any], what: str) -> list[dict[str, Any]]:
    """The clickable nodes and rings whose legend label is ``what``."""
    return [d for d in values(spec, "nodes") if d["what"] == what]
