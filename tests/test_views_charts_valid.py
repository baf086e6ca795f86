"""Every chart the Rollout page draws is a valid Vega-Lite spec.

The views write Vega-Lite specs as plain dicts (no altair). So here each kind of chart (the call
tree and its overview, the proofs, the loss mask's strip, overview and log-probs, the Compare tab's
sequences), on every sample rollout, is checked against the Vega-Lite schema, which fails on a
misspelt property or a value of the wrong kind.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tokencap.services import rollout_sources as src
from tokencap.views import vega
from tokencap.views.model import RolloutView
from tokencap.views.rollout import breaks as bv
from tokencap.views.rollout import diff as dv
from tokencap.views.rollout import linkproof as lp
from tokencap.views.rollout import logprob_chart as lc
from tokencap.views.rollout import mask_chart as mc
from tokencap.views.rollout import proof_chart as pc
from tokencap.views.rollout import sequence_chart as sc
from tokencap.views.rollout import tree as tv

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"
NAMES = sorted(p.name for p in SAMPLES.glob("*.json") if p.name not in ("expected.json", "tokenizer.json"))


def _views(name: str) -> list[RolloutView]:
    return [RolloutView(s) for s in src.load_source(src.source_from_path(str(SAMPLES / name))).snapshots]


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
