"""Plotly figures made from plain specs, without plotly's property validation.

Building a ``go.Figure`` the usual way (``go.Scatter(...)``, ``update_layout``) validates
every property and walks plotly's property tree for each: 50-100 ms for an ordinary call
tree on an idle machine, three times that on a busy one, on every rollout a reader opens.
A figure made from a dict with validation off costs a tenth of that, and ``st.plotly_chart``
takes a ``go.Figure`` as already valid. Each spec is validated once in the tests instead
(`validated`), so a misspelt property still fails a test, never the reader. Figures of
stacked rows (`Stack`) are laid out as ``make_subplots`` lays them out, without its
validated build (20 ms a figure: a break's proof, a link's, a comparison's strip).
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

import plotly.graph_objects as go


def as_figure(spec: dict[str, Any]) -> go.Figure:
    """``spec`` (``{"data": [trace dicts], "layout": {...}}``) as a ``go.Figure``, unvalidated."""
    return go.Figure(spec, _validate=False)


def validated(fig: go.Figure) -> go.Figure:
    """The same figure built with validation (raises ``ValueError`` on a bad property): for tests."""
    return go.Figure(fig.to_dict())


def trace(kind: str, **props: Any) -> dict[str, Any]:
    """A trace spec of plotly type ``kind``; a property given as None is left out."""
    return {"type": kind, **{name: value for name, value in props.items() if value is not None}}


@lru_cache(maxsize=8)
def _stacked_axes(row_heights: tuple[float, ...], vertical_spacing: float) -> dict[str, Any]:
    """The axes ``make_subplots(rows=n, cols=1)`` lays out for these rows: asked of plotly once per shape
    (its validated build costs 40 ms), so the domains are plotly's own to the last digit."""
    from plotly.subplots import make_subplots

    layout = make_subplots(rows=len(row_heights), cols=1, row_heights=list(row_heights),
                           vertical_spacing=vertical_spacing).layout.to_plotly_json()
    return {name: value for name, value in layout.items() if name.startswith(("xaxis", "yaxis"))}


class Stack:
    """Plots stacked in one column, as ``make_subplots(rows=n, cols=1, ...)`` lays them out, built as a
    plain spec: a trace, a vertical line, an axis's properties go to a row (1 is the top one)."""

    def __init__(self, row_heights: tuple[float, ...], vertical_spacing: float) -> None:
        self.data: list[dict[str, Any]] = []
        self.shapes: list[dict[str, Any]] = []
        self.annotations: list[dict[str, Any]] = []
        self.axes = copy.deepcopy(_stacked_axes(tuple(row_heights), vertical_spacing))

    @staticmethod
    def _suffix(row: int) -> str:
        return "" if row == 1 else str(row)

    def add(self, kind: str, row: int, **props: Any) -> None:
        """A trace of type ``kind`` on ``row``'s axes."""
        n = self._suffix(row)
        self.data.append(trace(kind, **props, xaxis=f"x{n}", yaxis=f"y{n}"))

    def vline(self, x: float, row: int, line: dict[str, Any]) -> None:
        """A vertical line at ``x`` across ``row``'s plot (what ``add_vline(row=...)`` draws)."""
        n = self._suffix(row)
        self.shapes.append({"line": line, "type": "line", "x0": x, "x1": x, "xref": f"x{n}", "y0": 0, "y1": 1,
                            "yref": f"y{n} domain"})

    def annotate(self, **props: Any) -> None:
        self.annotations.append(props)

    def xaxis(self, row: int, **props: Any) -> None:
        self._axis("xaxis", row, props)

    def yaxis(self, row: int, **props: Any) -> None:
        self._axis("yaxis", row, props)

    def _axis(self, name: str, row: int, props: dict[str, Any]) -> None:
        """Set ``row``'s axis properties; one given as None is left out (as ``update_xaxes`` leaves it)."""
        self.axes[f"{name}{self._suffix(row)}"].update({k: v for k, v in props.items() if v is not None})

    def figure(self, **layout: Any) -> go.Figure:
        """The figure, unvalidated, with ``layout`` beside the axes, lines and annotations."""
        extra: dict[str, Any] = {}
        if self.shapes:
            extra["shapes"] = self.shapes
        if self.annotations:
            extra["annotations"] = self.annotations
        return as_figure({"data": self.data, "layout": {**layout, **self.axes, **extra}})
