"""The link proof and the break proof as Vega-Lite charts: what each part draws, read from the spec."""

from __future__ import annotations

from pathlib import Path

from helpers_diagnosis import XY, X, Y, broken_rollout, view_of
from vega_specs import texts

from tokencap import load_snapshots
from tokencap.views import vega
from tokencap.views.model import RolloutView
from tokencap.views.rollout import breaks as bv
from tokencap.views.rollout import linkproof as lp
from tokencap.views.rollout import proof_chart as pc

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"


def _data(spec: dict, part: str) -> list[dict]:
    """Every datum of one part of a proof chart (`pc.STRIP` or `pc.CELLS`), from every layer that draws it."""
    out: list[dict] = []
    for group in spec["layer"]:
        for layer in group["layer"]:
            rows = [r for r in layer["data"]["values"] if r.get("part") == part]
            if rows and layer["mark"]["type"] in ("bar", "rect"):
                out.extend(rows)
    return out


def _cell(cells: list[dict], row: str, column: str) -> dict:
    (cell,) = [c for c in cells if c["row"] == row and c["column"] == column]
    return cell


def test_a_stale_link_s_chart_marks_the_first_difference_in_both_parts():
    view = RolloutView(load_snapshots(SAMPLES / "stale_parent_link.json")[0])
    proof = lp.link_proof(view, "call-0003")
    spec = vega.validated(pc.link_proof_chart(proof))
    cells = _data(spec, pc.CELLS)
    parent_row, child_row = sorted({c["row"] for c in cells}, key=lambda r: "prompt" in r)
    at, before = f"{proof.diverges_at:,}", f"{proof.diverges_at - 1:,}"
    assert _cell(cells, parent_row, at)["state"] == "differ" and _cell(cells, child_row, at)["state"] == "differ"
    assert _cell(cells, parent_row, before)["state"] == "agree"
    assert _cell(cells, parent_row, at)["text"] != _cell(cells, child_row, at)["text"]
    assert len(cells) == 2 * (proof.window[1] - proof.window[0])
    bars = _data(spec, pc.STRIP)
    assert {b["colour"] for b in bars} >= {lp.AGREE, lp.DIFFER}
    # The bars tile each sequence: the parent's from 0 to its length, the child's to its prompt's.
    for row, length in zip(sorted({b["row"] for b in bars}, key=lambda r: r.startswith("this call")),
                           (proof.parent_len, proof.prompt_len)):
        spans = sorted((b["start"], b["end"]) for b in bars if b["row"] == row)
        assert spans[0][0] == 0 and spans[-1][1] == length
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert f"first difference at {proof.agree:,}" in texts(spec)


def test_decoded_cells_are_plain_text_with_spaces_shown_and_cut():
    view = RolloutView(load_snapshots(SAMPLES / "stale_parent_link.json")[0])
    proof = lp.link_proof(view, "call-0003")
    spec = pc.link_proof_chart(proof, decode=lambda t: f"<b> t{t} and a long tail")
    cell = _data(spec, pc.CELLS)[0]
    # Drawn as SVG text (never HTML): the markup stays as it is, a space shows as ␣, the text is cut.
    assert cell["text"].startswith("<b>␣t") and cell["text"].endswith("…") and len(cell["text"]) == pc.CELL_CHARS
    assert "<b> t" in cell["tip"] and "&lt;" not in texts(spec)


def test_a_holding_link_marks_where_the_parent_ends():
    view = RolloutView(load_snapshots(SAMPLES / "clean_multiturn_tools.json")[0])
    held = [p for e in view.snapshot.entries if (p := lp.link_proof(view, e.model_call_id)) is not None and p.holds]
    assert held
    spec = vega.validated(pc.link_proof_chart(held[0]))
    assert f"parent ends at {held[0].parent_len:,}" in texts(spec)
    assert {c["state"] for c in _data(spec, pc.CELLS)} <= {"agree", "only_child", "absent"}


def test_a_break_s_chart_marks_the_replaced_span_and_decodes_both_sides():
    view = view_of(broken_rollout("r"))
    proof = lp.break_proof(view, bv.breaks_of(view)[0])
    spec = vega.validated(pc.break_proof_chart(proof, decode=lambda t: {X: "x", Y: "y", XY: "x y"}.get(t, f"w{t}")))
    cells = _data(spec, pc.CELLS)
    assert {"x", "y", "x␣y"} <= {c["text"] for c in cells}
    assert {c["state"] for c in cells if c["text"] in ("x", "y", "x␣y")} == {"replaced"}
    bars = _data(spec, pc.STRIP)
    replaced = [b for b in bars if b["what"] == "replaced"]
    assert {(b["start"], b["end"]) for b in replaced} == {(5, 7), (5, 6)}
    assert {b["colour"] for b in replaced} == {pc.SPAN["replaced"]} and "tokens_replaced" in replaced[0]["detail"]
    assert f"they part at {proof.agree:,}" in texts(spec)


def test_the_rule_stays_over_the_strip():
    view = RolloutView(load_snapshots(SAMPLES / "stale_parent_link.json")[0])
    spec = pc.link_proof_chart(lp.link_proof(view, "call-0003"))
    (rule,) = [layer for layer in spec["layer"][0]["layer"] if layer["mark"]["type"] == "rule"]
    # The plot is four rows of ROW_PX; the rule ends between the strip's second row and the cells' first.
    assert spec["height"] == 4 * pc.ROW_PX
    second_row_foot = pc.ROW_PX * (pc.PADDING_OUTER + 2 - pc.PADDING_INNER)
    assert second_row_foot < rule["encoding"]["y2"]["value"] < second_row_foot + pc.ROW_PX * pc.PADDING_INNER + 1e-9
