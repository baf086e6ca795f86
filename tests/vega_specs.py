"""Reading the Run page's Vega-Lite specs in tests: which layer is which, and its rows."""

from __future__ import annotations

from typing import Any

from tokencap.views import vega


def valid(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec``, checked against the Vega-Lite schema (altair's copy)."""
    return vega.validated(spec)


def hit_layer(spec: dict[str, Any]) -> dict[str, Any]:
    """The layer a click selects in (the one declaring the `vega.PICK` selection)."""
    (layer,) = [layer for layer in spec["layer"] if any(p.get("name") == vega.PICK for p in layer.get("params", ()))]
    return layer


def bar_layer(spec: dict[str, Any]) -> dict[str, Any]:
    """The first layer of bar marks that is drawn (opacity above zero): the counts."""
    return next(layer for layer in spec["layer"] if layer["mark"]["type"] == "bar"
                and layer["mark"].get("opacity", 1) > 0)


def rows(layer: dict[str, Any], spec: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A layer's data rows (its own, else the chart's)."""
    data = layer.get("data") or (spec or {}).get("data") or {}
    return list(data.get("values", ()))


def texts(spec: dict[str, Any]) -> str:
    """Every string a spec holds, as one text (what it may draw or show in a tooltip)."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)

    walk(spec)
    return "\n".join(out)


def channels(spec: dict[str, Any]) -> set[str]:
    """Every encoding channel any layer uses."""
    return {name for layer in spec.get("layer", [spec]) for name in layer.get("encoding", {})}
