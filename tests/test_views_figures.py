"""Every figure the app draws is a valid plotly figure.

The views build figures without plotly's validation (`tokencap.views.figures`: it cost
more than everything else on a click). So here each kind of figure, on every sample
rollout, is built again *with* validation, which raises on a misspelt property or a value
out of range, and must come out the same. The proofs, the loss mask's charts and the Compare
tab's sequences are Vega-Lite charts: each is checked against the Vega-Lite schema instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
import pytest

from tokencap.views import figures, vega
from tokencap.views import sources as src
from tokencap.views.model import RolloutView
from tokencap.views.rollout import breaks as bv
from tokencap.views.rollout import diff as dv
from tokencap.views.rollout import linkproof as lp
from tokencap.views.rollout import logprob_chart as lc
from tokencap.views.rollout import mask as mv
from tokencap.views.rollout import mask_chart as mc
from tokencap.views.rollout import proof_chart as pc
from tokencap.views.rollout import sequence_chart as sc
from tokencap.views.rollout import tree as tv

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"
NAMES = sorted(p.name for p in SAMPLES.glob("*.json") if p.name not in ("expected.json", "tokenizer.json"))


def _views(name: str) -> list[RolloutView]:
    return [RolloutView(s) for s in src.load_source(src.source_from_path(str(SAMPLES / name))).snapshots]


def _json(fig: go.Figure) -> dict:
    return json.loads(pio.to_json(fig, validate=False, engine="json"))


def _same_when_validated(fig: go.Figure) -> None:
    assert fig._validate is False  # the fast path is the one drawn
    assert _json(figures.validated(fig)) == _json(fig)


@pytest.mark.parametrize("name", NAMES)
def test_every_figure_of_a_sample_rollout_is_valid(name: str) -> None:
    views = _views(name)
    for view in views:
        model = tv.tree_of(view, bv.breaks_of(view, None, "k"), "k")
        selected = model.nodes[-1].key if len(model) else None
        for kwargs in ({}, {"labels": False}, {"legend": False}, {"window": (1, max(1, min(4, len(model))))}):
            vega.validated(tv.tree_chart(model, selected, **kwargs))
        if len(model):
            vega.validated(tv.overview_chart(model, (1, min(3, len(model)))))
        mask = view.mask("main")
        if mask is not None and len(mask):
            vega.validated(mc.strip_chart(mask, 0, min(200, len(mask))))
            vega.validated(mc.overview_chart(mask, (0, min(40, len(mask)))))
            vega.validated(lc.logprob_chart(mask, (0, min(40, len(mask)))))
            vega.validated(lc.logprob_chart(mask, None, max_points=max(2, len(mask) // 8)))  # binned
        for entry in view.snapshot.entries[:4]:
            proof = lp.link_proof(view, entry.model_call_id)
            if proof is not None:
                vega.validated(pc.link_proof_chart(proof))
        for brk in view.breaks[:2]:
            proof = lp.break_proof(view, brk)
            if proof is not None:
                vega.validated(pc.break_proof_chart(proof))
    if len(views) > 1:
        vega.validated(sc.sequence_chart(dv.sequence_diff(views[0], views[1])))
    vega.validated(sc.sequence_chart(dv.sequence_diff(views[0], views[0])))  # identical: no difference to mark


def test_two_sample_rollouts_compared_give_a_valid_chart() -> None:
    a, b = _views("clean_multiturn_tools.json")[0], _views("reasoning_stripped_by_template.json")[0]
    vega.validated(sc.sequence_chart(dv.sequence_diff(a, b), "A (one)", "B (other)", decode=lambda t: f"tok{t}"))


def test_a_misspelt_property_fails_the_validated_build() -> None:
    bad = figures.as_figure({"data": [{"type": "scatter", "x": [1], "y": [1], "markr": {"size": 3}}], "layout": {}})
    with pytest.raises(ValueError, match="markr"):
        figures.validated(bad)


def test_a_stack_lays_out_its_rows_as_make_subplots_does() -> None:
    from plotly.subplots import make_subplots

    stack = figures.Stack((0.45, 0.55), 0.22)
    stack.add("bar", 1, x=[3, 4], base=[0, 3], y=["a", "a"], orientation="h")
    stack.add("heatmap", 2, z=[[1.0, 2.0]], x=[0, 1], y=["b"], showscale=False)
    stack.vline(2, 1, {"color": "#111827", "width": 2, "dash": "dot"})
    stack.annotate(x=2, y=1.0, xref="x", yref="y domain", text="here", showarrow=False)
    stack.xaxis(1, range=[0, 8], showgrid=False, dtick=None)
    stack.yaxis(2, autorange="reversed")
    fig = stack.figure(height=260, bargap=0.35)

    plain = make_subplots(rows=2, cols=1, row_heights=[0.45, 0.55], vertical_spacing=0.22)
    plain.add_trace(go.Bar(x=[3, 4], base=[0, 3], y=["a", "a"], orientation="h"), row=1, col=1)
    plain.add_trace(go.Heatmap(z=[[1.0, 2.0]], x=[0, 1], y=["b"], showscale=False), row=2, col=1)
    plain.add_vline(x=2, line={"color": "#111827", "width": 2, "dash": "dot"}, row=1, col=1)
    plain.add_annotation(x=2, y=1.0, xref="x", yref="y domain", text="here", showarrow=False, row=1, col=1)
    plain.update_xaxes(range=[0, 8], showgrid=False, row=1, col=1)
    plain.update_yaxes(autorange="reversed", row=2, col=1)
    plain.update_layout(height=260, bargap=0.35)
    assert _json(fig) == _json(plain)
    _same_when_validated(fig)
    # Each stack has axes of its own: one stack's axis properties never reach the next.
    assert "range" not in figures.Stack((0.45, 0.55), 0.22).axes["xaxis"]
