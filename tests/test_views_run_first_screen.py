"""Issue 37, items 6 and 7: the Run page's first screen (its table's columns, the charts beside each other).

What the browser shows is checked in tests/test_browser_run_first_screen.py; these are the decisions
behind it, in `tokencap.views.run` (`table`, `charts`).
"""

from __future__ import annotations

import re

from tokencap.app import assets
from tokencap.views.run import charts as rc
from tokencap.views.run import data as rd
from tokencap.views.run import table as rt
from tokencap.views.run.bars import chart_bars
from tokencap.views.run.filters import RunFilter, filter_masks
from tokencap.views.run.frame import run_frame


def test_every_column_has_a_fixed_width_and_a_header_tooltip():
    assert set(rt.WIDTHS) == set(rd.TABLE_COLUMNS) == set(rt.HELP)
    assert all(isinstance(w, int) and w >= 60 for w in rt.WIDTHS.values())
    assert all(rt.HELP[c].strip() for c in rd.TABLE_COLUMNS)
    assert rt.header_help("why lineage broke") == rt.HELP["causes"]


def test_the_columns_a_reader_triages_by_fit_the_first_screen_and_the_grid_never_stretches_them():
    order = list(rd.TABLE_COLUMNS)
    assert order[:len(rt.FIRST_SCREEN)] == list(rt.FIRST_SCREEN)  # rollout, verdict, reasons, causes, calls
    for rows in (5, 306, 2_000, 20_000):
        assert rt.first_screen_right(rows) <= rt.GRID_WIDTH_1280, rows
    # Wider than the grid altogether: a grid wider than its columns would stretch them to fill it.
    assert rt.marker_width(306) + sum(rt.WIDTHS.values()) > rt.GRID_WIDTH_1280
    assert [rt.marker_width(n) for n in (5, 101, 1_001, 10_001)] == [32, 36, 44, 48]


def test_the_cell_tooltip_script_carries_the_widths_and_no_data():
    script = assets.script("cell_titles.js", SETTINGS=rt.cell_titles_settings())
    assert script.startswith("<script>") and script.endswith("</script>")
    widths = [int(w) for w in re.findall(r'"w": (\d+)', script)]
    assert widths == [rt.WIDTHS[c] for c in rd.TABLE_COLUMNS]
    assert script.count('"pinned": true') == len(rt.PINNED) and script.count('"text": true') == len(rt.TEXT)
    assert "setAttribute('title'" in script and "innerHTML" not in script  # text as an attribute, never HTML


def test_the_cause_chart_stands_beside_the_reason_chart_and_the_switch_names_every_other_chart():
    assert rc.FIRST_ROW == ("reasons", "causes")
    others = [d for row in rc.ROWS for d in row]
    assert not set(others) & set(rc.FIRST_ROW)
    assert sorted(others + list(rc.FIRST_ROW)) == sorted(["reasons", "causes", "delivery", "statuses", "delivered",
                                                          "calls", "link", "refusal"])
    label = rc.MORE_LABEL
    for word in ("what Gym delivered", "status", "delivered", "calls", "links", "refusals"):
        assert word in label
    # Short enough for the table's first eight rows below them at 1280x800, tall enough for 15 bars.
    assert rc.HEIGHTS["reasons"] == rc.HEIGHTS["causes"] <= 204


def test_a_dense_chart_uses_a_smaller_label_font():
    frame = run_frame(_table())
    bars = {b.dimension: b for b in chart_bars(frame, filter_masks(frame, RunFilter()))}
    assert len(bars["causes"].keys) > rc.DENSE >= len(bars["reasons"].keys)
    fonts = {d: {layer["mark"].get("fontSize") for layer in rc.bar_spec(bars[d])["layer"]
                 if layer["mark"]["type"] == "text"} for d in ("reasons", "causes")}
    # The 17 causes are more than DENSE + 3: two points smaller, so their labels never overlap.
    assert len(bars["causes"].keys) == 17
    assert fonts == {"reasons": {rc.LABEL_FONT}, "causes": {rc.LABEL_FONT - 2}}
    subtitle = rc.bar_spec(bars["reasons"])["title"]["subtitle"]
    assert subtitle == f"{len(frame):,} rollouts passing the other filters · click a bar to filter"


def _table():
    from pathlib import Path

    from tokencap.run import scan_table

    repo = Path(__file__).resolve().parent.parent
    return scan_table(repo / "sample_data" / "run", workers=1,
                      final_responses=str(repo / "sample_data" / "rollout_records" / "run.jsonl"))
