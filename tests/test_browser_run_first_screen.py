"""Issue 37, items 6, 7 and 15, in a real browser (Streamlit + /usr/bin/chromium via Playwright, 1280x800).

The Run page's first screen holds the tiles, the mask-reason and cause charts side by side, the filters and
the table's first eight rows, with the verdict, mask reasons, why lineage broke and calls columns whole; a
cut cell shows its whole text on hover, a header its help; the columns keep their widths on the way back
from a rollout; the grey words (captions, the pinned rollout ids) read at 4.5:1. Every wait is on a
condition, never a fixed time.
"""

from __future__ import annotations

import pytest
from helpers_browser import RUN_TABLE, chromium_page, sample_table, select_grid_row, settled, streamlit_server
from helpers_colour import blend, ratio

pytestmark = pytest.mark.browser

PAINTED = """(() => { const fill = CanvasRenderingContext2D.prototype.fillText;
    // What the grid's canvas paints: text, x (CSS px in the canvas), fill style and alpha.
    window.__gridTexts = [];
    CanvasRenderingContext2D.prototype.fillText = function (...a) {
      if (window.__gridTexts.length < 20000)
        window.__gridTexts.push([String(a[0]), a[1] + this.getTransform().e / devicePixelRatio,
                                 String(this.fillStyle), this.globalAlpha]);
      return fill.apply(this, a); }; })()"""

HEADER_STARTS = """(headers) => {
    // Where each header was painted last (x in the grid, px), once every one of them has been.
    const at = {};
    for (const [text, x] of window.__gridTexts) if (headers.includes(text)) at[text] = Math.round(x);
    return headers.every(h => h in at) ? at : null;
}"""


def _rgb(css: str) -> str:
    """'#rrggbb' of a CSS colour given as #rrggbb or rgb(a)(r, g, b[, a])."""
    if css.startswith("#"):
        return css[:7]
    r, g, b = (int(float(v)) for v in css[css.index("(") + 1:-1].split(",")[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


def test_the_first_screen_holds_eight_rows_the_triage_columns_both_headline_charts_and_readable_grey(tmp_path):
    from playwright.sync_api import expect

    from tokencap.views import style
    from tokencap.views.run import charts as rc
    from tokencap.views.run import data as rd
    from tokencap.views.run import table as rt
    from tokencap.views.run.filters import RunFilter, filter_masks, passing, sorted_rows
    from tokencap.views.run.frame import run_frame

    frame = run_frame(sample_table())
    rows = sorted_rows(frame, passing(frame, filter_masks(frame, RunFilter())), RunFilter())
    headers = list(rd.TABLE_COLUMNS.values())
    wanted = [rd.TABLE_COLUMNS[c] for c in rt.FIRST_SCREEN]
    # A row whose mask reasons are wider than their column, in the first eight.
    reasons = [str(text) for text in rd.table_frame(frame, rows[:8])["mask reasons"]]  # in words, as the cells
    cut = next(i for i, text in enumerate(reasons) if len(text) > 30)
    with streamlit_server(tmp_path) as url, chromium_page() as page:
        page.add_init_script(PAINTED)
        page.goto(url)
        expect(page.get_by_text(f"{len(frame):,} of {len(frame):,} rollouts", exact=True)).to_be_visible()
        settled(page, "document.querySelectorAll('[class*=st-key-run_chart] svg.marks').length === 2")
        assert page.evaluate("() => scrollY") == 0

        # Item 7: the cause chart beside the reason chart, on the first screen; the switch names the others.
        charts = page.locator("[class*='st-key-run_chart'] [data-testid='stVegaLiteChart']")
        expect(charts).to_have_count(len(rc.FIRST_ROW))
        left, right = charts.nth(0).bounding_box(), charts.nth(1).bounding_box()
        assert abs(left["y"] - right["y"]) < 2 and left["x"] + left["width"] <= right["x"]
        assert right["y"] + right["height"] <= 800
        expect(charts.nth(0).locator("svg text", has_text="Masked, by reason")).to_have_count(1)
        expect(charts.nth(1).locator("svg text", has_text="Why lineage broke")).to_have_count(1)
        expect(page.get_by_text(rc.MORE_LABEL)).to_be_visible()

        # Item 6: the header and eight rows above the fold; the triage columns whole in the grid's width.
        table = page.locator(RUN_TABLE).last.bounding_box()
        assert table["y"] + 35 + 8 * 35 <= 800, table
        tiles = page.locator("[data-testid='stMetric']")
        for i in range(tiles.count()):
            box = tiles.nth(i).bounding_box()
            assert box["y"] + box["height"] <= table["y"], box
        starts = page.wait_for_function(HEADER_STARTS, arg=headers[:7]).json_value()  # those in view
        for h in wanted:
            assert starts[h] + rt.WIDTHS[next(k for k, v in rd.TABLE_COLUMNS.items() if v == h)] <= table["width"], \
                (h, starts, table["width"])
        assert [starts[h] for h in wanted] == sorted(starts[h] for h in wanted)
        page.screenshot(path=str(tmp_path / "run-first-screen.png"))

        # A header's help on hover.
        x = table["x"] + starts["why lineage broke"] + 20
        page.mouse.move(x, table["y"] + 17)
        tip = page.locator("[data-testid='stDataFrameTooltipContent']")
        expect(tip).to_contain_text(rt.HELP["causes"])
        # A cut cell's whole text on hover (the grid's title); a whole one has none.
        x = table["x"] + starts["mask reasons"] + rt.WIDTHS["reasons"] // 2
        page.mouse.move(x, table["y"] + 35 + 35 * cut + 17)
        canvas = RUN_TABLE
        page.wait_for_function("([sel, text]) => document.querySelector(sel).getAttribute('title') === text",
                               arg=[canvas, reasons[cut]])
        short = next(i for i, text in enumerate(reasons) if len(text) <= 20)
        page.mouse.move(x, table["y"] + 35 + 35 * short + 17)
        page.wait_for_function("(sel) => document.querySelector(sel).getAttribute('title') === ''", arg=canvas)

        # Item 15: the pinned rollout ids and the captions at 4.5:1 or more, as drawn.
        first_id = str(frame["rollout_id"].iloc[int(rows[0])])
        painted = page.evaluate("(id) => window.__gridTexts.find(t => t[0] === id)", first_id)
        drawn = blend(_rgb(painted[2]), float(painted[3]), style.BACKGROUND)
        assert ratio(drawn, style.BACKGROUND) >= 4.5, painted
        captions = page.evaluate("""() => [...document.querySelectorAll('[data-testid=stCaptionContainer]')]
            .map(e => [getComputedStyle(e).color, getComputedStyle(e).opacity])""")
        assert captions
        for colour, opacity in captions:
            assert float(opacity) == 1 and ratio(_rgb(colour), style.SIDEBAR_BACKGROUND) >= 4.5, (colour, opacity)

        # Widths kept on the way back from a rollout (the table drawn again, scrolled to its row).
        page.evaluate("() => { window.__gridTexts = []; }")
        select_grid_row(page, 5, len(frame))
        target = str(frame["rollout_id"].iloc[int(rows[5])])
        expect(page.get_by_role("heading", name=target, exact=True)).to_be_visible()
        page.evaluate("() => { window.__gridTexts = []; }")
        page.get_by_role("link", name="Back to the run").click()
        expect(page.get_by_text(f"{len(frame):,} of {len(frame):,} rollouts", exact=True)).to_be_visible()
        again = page.wait_for_function(HEADER_STARTS, arg=headers[:7]).json_value()
        assert again == {h: starts[h] for h in headers[:7]}, (again, starts)
    print(f"screenshot: {tmp_path / 'run-first-screen.png'}")
