"""Why lineage broke, in a real browser (Streamlit + Chromium via Playwright; see tests/test_browser.py).

The Run page of a small run: the "Why lineage broke" chart is drawn, a click on a cause's bar
filters the table (and goes in the URL); a row of the filtered table opens its rollout, whose
detail shows the break's link proof with the divergence decoded by the tokenizer given on the
command line. Every wait is on a condition, never a fixed time.
"""

from __future__ import annotations

import json
import re

import pytest
from helpers_browser import RUN_BAR, launch_chromium, streamlit_server
from helpers_diagnosis import broken_rollout, tokenizer_file

pytestmark = pytest.mark.browser

CAUSE_BAR = """([dimension, label]) => {
    // The bar's centre once the script is idle and the same bar element has stood still for ten
    // frames (this runs at every animation frame): a chart still laid out or scrolled moves under
    // the pointer, a click read one frame early lands on a neighbouring chart, and a chart that a
    // rerun sends again is embedded anew (a new element) while the old one may still be found.
    const app = document.querySelector("[data-testid='stApp']");
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') { window.__bar = null; return null; }
    const chart = document.querySelector(`[class*="st-key-run_chart-${dimension}-"]`);
    const found = chart && (RUN_BAR)([dimension, label]);
    if (!found) return null;
    chart.scrollIntoView({block: 'center', behavior: 'instant'});
    const r = found.bar;
    if (!(r.width > 2 && r.height > 2)) return null;
    const here = [r.x + r.width / 2, r.y + r.height / 2];
    const svg = chart.querySelector('svg');
    const before = window.__bar;
    const same = before && before.svg === svg && before.at[0] === here[0] && before.at[1] === here[1];
    window.__bar = {svg: svg, at: here, frames: same ? before.frames + 1 : 0};
    return window.__bar.frames >= 10 ? here : null;
}""".replace("RUN_BAR", RUN_BAR)


FILTERED_AND_IDLE = """(n) => {
    const app = document.querySelector("[data-testid='stApp']");
    const grids = [...document.querySelectorAll(".st-key-run_table_box [aria-rowcount]")];
    return !!app && app.getAttribute('data-test-script-state') === 'notRunning'
        && grids.some(g => g.getAttribute('aria-rowcount') === String(n + 1));
}"""

FIRST_ROW = """() => {
    const grids = [...document.querySelectorAll("[data-testid='stDataFrame']")];
    const grid = grids[grids.length - 1];
    if (!grid) return null;
    grid.scrollIntoView({block: 'center'});
    const r = grid.getBoundingClientRect();
    return r.height > 60 && r.height < 160 ? [r.left + 16, r.top + 35 + 17] : null;
}"""


def test_the_cause_chart_a_cause_filter_and_a_break_s_decoded_proof_in_chromium(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    run = tmp_path / "run"
    run.mkdir()
    for i in range(6):
        rid = f"r{i:02d}"
        (run / f"{rid}.json").write_text(json.dumps(broken_rollout(rid, replaced=i % 3 == 0)))
    tok = tokenizer_file(tmp_path / "tokenizer.json")
    expect.set_options(timeout=30_000)
    with streamlit_server(tmp_path, str(run), "--tokenizer", str(tok)) as url, sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            page.set_default_timeout(30_000)
            page.goto(f"{url}/?run_charts=1")  # the cause chart is behind More charts
            expect(page.get_by_text("6 of 6 rollouts", exact=True)).to_be_visible(timeout=120_000)  # a cold server, a busy box
            # The Run page diagnoses with the tokenizer too: the re-encoded history reads retokenized.
            handle = page.wait_for_function(CAUSE_BAR, arg=["causes", "retokenized"], timeout=120_000)
            x, y = handle.json_value()
            page.screenshot(path=str(tmp_path / "causes.png"))
            page.mouse.move(x, y)
            page.mouse.click(x, y)
            expect(page.get_by_text("2 of 6 rollouts", exact=True)).to_be_visible()
            expect(page).to_have_url(re.compile("run_cause=retokenized"))

            # The filtered table (two rows: header and rows are 35 px): its first row's checkbox, once the grid
            # holds the two rows and the rerun that filtered it has ended (a click during it may be dropped).
            page.wait_for_function(FILTERED_AND_IDLE, arg=2, timeout=120_000)
            handle = page.wait_for_function(FIRST_ROW, timeout=120_000)
            x, y = handle.json_value()
            page.mouse.click(x, y)

            expect(page.get_by_role("heading", name="r00", exact=True)).to_be_visible()
            finding = page.locator(".st-key-finding_0 [data-testid=stMarkdownContainer]").first
            expect(finding).to_contain_text(re.compile(r"^Retokenized — .*the same text"))
            culprit = page.locator(".st-key-finding_0").get_by_role("button", name="call-0002")
            expect(culprit).to_be_visible()
            culprit.click()
            expect(page.get_by_text("Why the lineage breaks here").first).to_be_visible()
            expect(page.get_by_text("Why the lineage breaks here · retokenized").first).to_be_attached()
            decoded = page.locator("[data-testid='stText']", has_text="x y")
            expect(decoded.first).to_be_visible()
            expect(decoded).to_have_count(2)
            # The break's proof, drawn (Vega-Lite SVG): its cells show the decoded tokens.
            proof = page.locator("[class*='st-key-break_proof_chart_'] [data-testid='stVegaLiteChart'] svg").last
            expect(proof).to_be_attached()
            expect(proof.locator("text", has_text="x␣y").first).to_be_attached()
            page.screenshot(path=str(tmp_path / "break-proof.png"))
        finally:
            browser.close()
    print(f"screenshots: {tmp_path / 'causes.png'} {tmp_path / 'break-proof.png'}")
