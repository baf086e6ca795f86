"""Plotly figures made from plain specs, without plotly's property validation.

Building a ``go.Figure`` the usual way (``go.Scatter(...)``, ``update_layout``) validates
every property and walks plotly's property tree for each: 50-100 ms for an ordinary call
tree on an idle machine, three times that on a busy one, on every rollout a reader opens.
A figure made from a dict with validation off costs a tenth of that, and ``st.plotly_chart``
takes a ``go.Figure`` as already valid. Each spec is validated once in the tests instead
(`validated`), so a misspelt property still fails a test, never the reader.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import plotly.graph_objects as go


def as_figure(spec: dict[str, Any]) -> go.Figure:
    """``spec`` (``{"data": [trace dicts], "layout": {...}}``) as a ``go.Figure``, unvalidated."""
    return go.Figure(spec, _validate=False)


def validated(fig: go.Figure) -> go.Figure:
    """The same figure built with validation (raises ``ValueError`` on a bad property): for tests."""
    return go.Figure(fig.to_dict())


def unvalidated(fig: go.Figure) -> go.Figure:
    """``fig`` (from ``make_subplots``, say) with validation off for what is added to it from now on."""
    fig._validate = False
    return fig


Heatmap = partial(go.Heatmap, _validate=False)
Bar = partial(go.Bar, _validate=False)
"""Trace constructors without validation, for the subplot figures built trace by trace."""
