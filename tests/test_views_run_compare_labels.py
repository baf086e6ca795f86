"""Issue 37, item 12: a comparison's bar charts label each key once ("5 → 3"): a label per run, half a row
apart, overlapped ("0" over "0" read "8")."""

from __future__ import annotations

from tokencap.views.run import charts as rc
from tokencap.views.run.bars import Bars


def _bars(counts: tuple[int, ...]) -> Bars:
    keys = ("load_error", "no_records", "multiple_chains")
    return Bars("reasons", "Masked, by reason", keys, keys, counts, 10)


def _count_layer(spec: dict) -> dict:
    (layer,) = [lay for lay in spec["layer"] if lay["mark"]["type"] == "text"
                and lay["encoding"]["text"] == {"field": "text"}]
    return layer


def test_two_runs_get_one_count_label_a_key_at_the_longer_bar():
    spec = rc.bar_spec(_bars((5, 0, 3)), ("multiple_chains",), _bars((2, 0, 7)), ("A (run)", "B (fix)"))
    layer = _count_layer(spec)
    rows = layer["data"]["values"]
    assert [(r["label"], r["text"], r["count"]) for r in rows] == [
        ("load_error", "5 → 2", 5), ("no_records", "0", 0), ("multiple_chains", "3 → 7", 7)]
    assert "yOffset" not in layer["encoding"] and "xOffset" not in layer["encoding"]  # centred on the key's row
    assert [r["opacity"] for r in rows] == [rc.FADED, rc.FADED, 1.0]  # faded with its bars
    # The bars themselves still stand side by side, a run each.
    assert "yOffset" in spec["layer"][0]["encoding"]


def test_one_run_keeps_its_count_and_share():
    spec = rc.bar_spec(_bars((5, 0, 3)))
    rows = _count_layer(spec)["data"]["values"]
    assert [r["text"] for r in rows] == ["5 · 50%", "0", "3 · 30%"]


def test_a_comparison_s_first_row_charts_are_taller_than_one_run_s():
    one = rc.bar_spec(_bars((5, 0, 3)))
    two = rc.bar_spec(_bars((5, 0, 3)), (), _bars((2, 0, 7)))
    assert two["height"] >= one["height"] + rc.PAIRED_FIRST_ROW - 20  # less the room of its legend
