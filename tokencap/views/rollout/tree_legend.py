"""The call tree's legend, drawn in the chart's right margin from the marks the chart drew.

`tree_chart` hands over a row per kind of link, node category and ring it drew (`LegendRow`), in
the order it drew them; here they become titled groups of a symbol (or a line) and its label.
The page's table of every mark the tree can draw is `tree_marks.legend_frame`.
"""

from __future__ import annotations

from typing import Any

from .. import style
from .tree_layers import CHAR_EM, point_datum, point_layer, rule_layer, text_layer

LEGEND = "legend_"
"""The start of the ``name`` of every layer of the legend (`LEGEND` + the part)."""
LEGEND_ROW_PX = 19
LEGEND_TITLE_PX = 22
LEGEND_GAP_PX = 8
LEGEND_SYMBOL_PX = 12

LegendRow = tuple[str, str, dict[str, Any]]
"""One row of the legend: (its group, its label, how its symbol is drawn: ``{"line": (colour, dash, width)}``
or ``{"point": (symbol, colour, size factor, line width)}``)."""


def legend_layers_at(items: list[LegendRow], left: float, top: float,
                     size: float) -> tuple[list[dict[str, Any]], float, float]:
    """The legend's layers (drawn, not clickable) at (``left``, ``top``), and its width and height: a titled
    group of rows per kind of mark, each row its symbol (a node drawn ``size`` across, at most
    `LEGEND_SYMBOL_PX` + 2) or line, then its label."""
    titles: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    symbols: list[dict[str, Any]] = []
    lines: list[tuple[float, str, str, float]] = []
    y = top + 4
    group = None
    longest = 0
    for name, label, how in items:
        if name != group:
            if group is not None:
                y += LEGEND_GAP_PX
            titles.append({"px": left, "py": y + LEGEND_TITLE_PX / 2, "text": name})
            y += LEGEND_TITLE_PX
            group = name
            longest = max(longest, len(name))
        cy = y + LEGEND_ROW_PX / 2
        if "line" in how:
            colour, dash, width = how["line"]
            lines.append((cy, colour, dash, width))
        else:
            symbol, colour, factor, width = how["point"]
            symbols.append(point_datum(left + LEGEND_SYMBOL_PX / 2, cy, symbol, colour,
                                       min(size * factor, LEGEND_SYMBOL_PX + 2), width, None, label))
        texts.append({"px": left + LEGEND_SYMBOL_PX + 8, "py": cy, "text": label})
        longest = max(longest, len(label) + 3)
        y += LEGEND_ROW_PX
    layers: list[dict[str, Any]] = []
    for i, (cy, colour, dash, width) in enumerate(lines):
        data = [{"edge": 0, "px": left, "py": cy, "px2": left + LEGEND_SYMBOL_PX + 2, "py2": cy}]
        layers.append(rule_layer(data, colour, dash, width, f"{LEGEND}link_{i}"))
    if symbols:
        points = point_layer(symbols, pick=False, name=LEGEND + "symbols")
        points["encoding"].pop("tooltip")
        points["encoding"].pop("description")
        points["mark"]["aria"] = False
        layers.append(points)
    layers.append(text_layer(titles, LEGEND + "titles", color="#334155", fontWeight="bold", font=style.FONT,
                              fontSize=11))
    layers.append(text_layer(texts, LEGEND + "texts", color="#334155", font=style.FONT, fontSize=11))
    width = LEGEND_SYMBOL_PX + 8 + CHAR_EM * 11 * max(longest - 3, 1) + 8
    return layers, width, y - top + 4
