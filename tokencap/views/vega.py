"""Vega-Lite specs for every chart the app draws, and reading a click back.

Why not plotly: the Run page is the first screen a researcher sees, and Chromium spends
1.3-2 s evaluating plotly's 4.8 MB bundle before it draws the first plotly chart. Streamlit's
Vega-Lite chart loads 0.8 MB and costs a fresh browser about 0.2 s. The Run page's bar charts,
rewards and groups are simple marks that Vega-Lite draws as well. On the Rollout page the link
and break proofs are Vega-Lite too (`.rollout.proof_chart`: redrawn at every Next), and so are the
loss mask's strip and overview (`.rollout.mask_chart`: drawn at every visit of the tab), its
log-prob chart (`.rollout.logprob_chart`), the Compare tab's sequences (`.rollout.sequence_chart`)
and the call tree with its overview (`.rollout.tree_chart`: the first thing every opened rollout
draws). With no plotly chart left, a fresh tab never fetches plotly's bundle at all.

Text in a spec is drawn as SVG text, and vega-tooltip escapes its values: no capture text is
ever read as HTML here. Every chart is rendered as SVG (`RENDERER`): one element per mark, so
a browser test finds a bar and its accessible description, and a few dozen marks cost less
than a canvas's setup; only the loss mask's charts, with thousands of cells, a hover box per
bin or a hover point per token, are drawn on a canvas. No Streamlit here.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from . import style

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"
RENDERER = {"embedOptions": {"renderer": "svg"}}
PICK = "pick"
"""The name of the point selection a clickable chart declares; Streamlit returns it under this name."""
MUTED = "#64748b"
INK = "#334155"


def title(text: str, subtitle: str = "") -> dict[str, Any]:
    """A chart title at the left, in the Run page's size, with its counts in grey beside it."""
    out: dict[str, Any] = {"text": text, "anchor": "start", "fontSize": 13, "fontWeight": "bold",
                           "color": "#1f2937", "offset": 6}
    if subtitle:
        out.update(subtitle=subtitle, subtitleColor=MUTED, subtitleFontSize=11, subtitlePadding=2)
    return out


def chart(layers: list[dict[str, Any]], *, heading: dict[str, Any] | None, height: int, **top: Any) -> dict[str, Any]:
    """A layered chart as wide as its column, ``height`` px of plot, drawn as SVG without a frame (and
    without a title when ``heading`` is None)."""
    return {
        "$schema": SCHEMA,
        **({"title": heading} if heading is not None else {}),
        "width": "container",
        "height": height,
        "autosize": {"type": "fit-x", "contains": "padding"},
        "padding": {"left": 4, "right": 8, "top": 2, "bottom": 2},
        "background": "transparent",
        "config": {"view": {"stroke": None}, "font": style.FONT,
                   "axis": {"labelColor": INK, "titleColor": INK, "labelFontSize": 10, "titleFontSize": 11,
                            "titleFontWeight": "normal", "gridColor": "#eef2f7", "domainColor": "#cbd5e1"},
                   "legend": {"labelFontSize": 11, "labelColor": INK, "symbolSize": 80}},
        "usermeta": RENDERER,
        "layer": layers,
        **top,
    }


def pick_param(fields: tuple[str, ...]) -> dict[str, Any]:
    """A click selects one datum by ``fields``; a second click on it does not clear it (the app
    draws the chart anew after each click, so a selection never lingers)."""
    return {"name": PICK, "select": {"type": "point", "fields": list(fields), "on": "click", "clear": False,
                                     "toggle": False}}


def picked(selection: Any, name: str = PICK) -> list[dict[str, Any]]:
    """The data a click selected, from Streamlit's selection state (``event.selection``): a list of
    ``{field: value}`` (empty when nothing was clicked, or the state is not a mapping)."""
    if not isinstance(selection, Mapping):
        return []
    points = selection.get(name)
    return [dict(p) for p in points if isinstance(p, Mapping)] if isinstance(points, (list, tuple)) else []


def validated(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec``, checked against the Vega-Lite schema altair ships (raises ``jsonschema.ValidationError``): for
    tests. Neither altair nor jsonschema is needed otherwise."""
    _validator().validate(spec)
    return spec


@lru_cache(maxsize=1)
def _validator() -> Any:
    import json
    from pathlib import Path

    import altair
    import jsonschema

    path = Path(altair.__file__).parent / "vegalite" / "v6" / "schema" / "vega-lite-schema.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    return jsonschema.validators.validator_for(schema)(schema)


__all__ = ["INK", "MUTED", "PICK", "RENDERER", "SCHEMA", "chart", "pick_param", "picked", "title", "validated"]
