"""The Run and Rollout pages in a real browser (Streamlit server + /usr/bin/chromium through Playwright), at
1280 x 800: a comparison's joined rollouts open, walk and link like one run's rows; what the Run page says
it was scanned with; the layout boxes (nothing cut off, nothing covered); the Rollout page's culprits
without an anchor, the bundled run's records and a file's first rollout.

Every wait is on a condition (an element, a URL, a DOM state), never a fixed time. Servers and helpers
are tests/helpers_browser.py's.
"""

from __future__ import annotations

import re

import pytest
from helpers_browser import REPO, chromium_page, sample_table, streamlit_server

pytestmark = pytest.mark.browser

IDENTICAL = "task0153-rollout0-attempt0"
"""A "fixed" joined rollout whose files are byte-identical in both sample runs (its records differ)."""


def _overlap(a: dict, b: dict) -> bool:
    return a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"] and \
        a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"]


def _grid_ready(page, heading: str):
    """The Run page's table once it shows ``heading`` and has drawn its rows (a canvas), scrolled into view."""
    from playwright.sync_api import expect

    expect(page.get_by_text(heading)).to_be_visible()
    grid = page.locator(".st-key-run_table_box [data-testid='stDataFrame']")
    expect(grid).to_be_visible()
    page.wait_for_function("() => document.querySelector('.st-key-run_table_box .dvn-scroller')")
    grid.scroll_into_view_if_needed()
    return grid


def _click_row(page, heading: str, position: int) -> None:
    """Click the checkbox of the ``position``-th row of the table, aimed once its box stopped moving."""
    grid = _grid_ready(page, heading)
    page.wait_for_function("""() => {
        const g = document.querySelector('.st-key-run_table_box [data-testid=stDataFrame]');
        const top = g && g.getBoundingClientRect().top;
        const still = window.__gridTop === top;
        window.__gridTop = top;
        return g && still;
    }""", polling=200)
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 16, box["y"] + 35 + 35 * position + 17)


def test_a_comparison_s_rows_open_walk_and_link_like_one_run_s_and_the_run_page_fits_1280(tmp_path):
    from playwright.sync_api import expect

    from tokencap.views.run import compare as cv
    from tokencap.views.run.filters import RunFilter, filter_masks, passing
    from tokencap.views.run.frame import run_frame

    a, b = sample_table("run"), sample_table("run_after_fix")
    cmp = cv.compare_runs(a, run_frame(a), b, run_frame(b), names=("A (run)", "B (run_after_fix)"))
    flt = RunFilter(change=("fixed",))  # the joined rows of the table, as the page lists them
    keep_a = passing(cmp.a, filter_masks(cmp.a, flt))
    keep_b = passing(cmp.b, filter_masks(cmp.b, flt))
    rows = cv.sorted_pairs(cmp, cv.passing_rows(cmp, keep_a, keep_b), flt)
    ids = [str(cmp.a["rollout_id"].iat[int(cmp.rows["row_a"].iat[int(p)])]) for p in rows]
    position = ids.index(IDENTICAL)
    frame = run_frame(a)
    multiple = sum("multiple_chains" in r for r in a.column("mask_reasons").to_pylist())
    with streamlit_server(tmp_path) as url, chromium_page() as page:
        expect.set_options(timeout=60_000)  # a busy machine (the suite beside it) draws slowly
        # One run, filtered: the records it was scanned with, what the rewards describe, the layout boxes.
        page.goto(f"{url}/?run_reason=multiple_chains")
        heading = f"{multiple:,} of {len(frame):,} rollouts"
        grid = _grid_ready(page, heading)
        expect(page.get_by_text("with the bundled rollout records sample_data/rollout_records/run.jsonl")).to_be_visible()
        expect(page.get_by_text(f"Rewards and groups describe the whole run: all {len(frame):,} rollouts, not only "
                                "those passing the table's filters.")).to_be_visible()
        grid.hover()
        toolbar = page.locator(".st-key-run_table_box [data-testid='stElementToolbar']")
        expect(toolbar).to_be_visible()
        clear = page.get_by_role("button", name="Clear filters")
        assert not _overlap(toolbar.bounding_box(), clear.bounding_box())
        page.screenshot(path=str(tmp_path / "run-toolbar.png"))
        page.get_by_text("Reward per slice").click()
        slices = page.locator(".st-key-run_reward_slices_0 table")
        expect(slices).to_be_visible()
        slices.scroll_into_view_if_needed()
        fits = page.evaluate("""() => {
            const box = document.querySelector('.st-key-run_reward_slices_0');
            const cut = [...box.querySelectorAll('*')].filter(e => e.scrollWidth > e.clientWidth + 1
                && getComputedStyle(e).overflowX !== 'visible');
            const t = box.querySelector('table').getBoundingClientRect();
            return cut.length === 0 && t.right <= box.getBoundingClientRect().right + 1 && t.right <= innerWidth;
        }""")
        page.screenshot(path=str(tmp_path / "run-slices.png"))
        assert fits, "the reward-per-slice table is cut off"

        # The comparison, filtered on "fixed": run B's path and records are named.
        page.goto(f"{url}/?run_vs=sample&run_change=fixed")
        heading = f"{len(ids):,} of {len(cmp.rows):,} joined rollouts"
        expect(page.get_by_text(
            f"B (run_after_fix): {(REPO / 'sample_data' / 'run_after_fix').resolve()}, scanned with the bundled "
            "rollout records sample_data/rollout_records/run_after_fix.jsonl")).to_be_visible()
        _click_row(page, heading, position)
        page.get_by_role("button", name=f"Open B: {IDENTICAL}").click()

        # Both captures on the Compare tab, run A on the left, each column named by its run.
        expect(page.get_by_role("heading", name=IDENTICAL, exact=True)).to_be_visible()
        expect(page.get_by_role("tab", name="Compare")).to_have_attribute("aria-selected", "true")
        expect(page.get_by_text("byte-identical")).to_be_visible()
        expect(page.get_by_text("verdict: masked → trainable")).to_be_visible()
        header = page.locator("[data-testid='stTable'] th").filter(has_text=re.compile(r"^[AB] \(run"))
        expect(header).to_have_count(2)
        assert header.nth(0).inner_text().startswith("A (run) · ")
        assert header.nth(1).inner_text().startswith("B (run_after_fix) · ")
        expect(page.get_by_text(f"{position + 1} of {len(ids)}")).to_be_visible()
        page.screenshot(path=str(tmp_path / "compare-opened.png"))

        # J and K walk the joined rows, as on one run.
        step, back = ("j", "k") if position + 1 < len(ids) else ("k", "j")
        neighbour = ids[position + 1] if step == "j" else ids[position - 1]
        page.keyboard.press(step)
        expect(page.get_by_role("heading", name=neighbour, exact=True)).to_be_visible()
        page.keyboard.press(back)
        expect(page.get_by_role("heading", name=IDENTICAL, exact=True)).to_be_visible()

        # The URL reopens this very view: the comparison, its sides and its place in the filter.
        page.wait_for_function(f"() => location.search.includes('rollout={IDENTICAL}') && "
                               "location.search.includes('vs_src=') && location.search.includes('side=B')")
        page.get_by_role("button", name="Copy link").click()
        copied = page.locator("[data-testid='stCode']").filter(has_text="vs_src=")
        expect(copied).to_be_visible()
        shared = copied.inner_text().strip()
        assert "run_change=fixed" in shared and "side=B" in shared and "vs_part=" in shared
        page.keyboard.press("Escape")
        other = page.context.browser.new_context(viewport={"width": 1280, "height": 800})
        try:
            fresh = other.new_page()
            fresh.goto(shared)
            expect(fresh.get_by_role("heading", name=IDENTICAL, exact=True)).to_be_visible()
            expect(fresh.get_by_role("tab", name="Compare")).to_have_attribute("aria-selected", "true")
            expect(fresh.get_by_text("byte-identical")).to_be_visible()
            expect(fresh.get_by_text(f"{position + 1} of {len(ids)}")).to_be_visible()
            expect(fresh.get_by_text("in this filter")).to_be_visible()
        finally:
            other.close()

        # Back to the run: the joined row is selected (its open box shows) and scrolled into view.
        page.get_by_role("link", name="Back to the run").click()
        expect(page.get_by_text(heading)).to_be_visible()
        expect(page.get_by_role("button", name=f"Open A: {IDENTICAL}")).to_be_visible()
        page.wait_for_function("""() => {
            const r = document.querySelector('.st-key-run_table_box').getBoundingClientRect();
            return r.top < innerHeight && r.bottom > 0;
        }""")
        page.screenshot(path=str(tmp_path / "compare-back.png"))
    print(f"screenshots: {tmp_path}")


def test_the_rollout_page_names_unanchored_candidates_builds_the_run_with_its_records_and_fits_1280(tmp_path):
    from playwright.sync_api import expect

    from tokencap import load_final_responses, load_snapshots
    from tokencap.views import RolloutView

    snapshot = load_snapshots(REPO / "sample_data" / "ambiguous_final_answer.json")[0]
    finals = load_final_responses(REPO / "sample_data" / "final_responses" / "ambiguous_final_answer.json")
    view = RolloutView(snapshot, final_response=finals.for_rollout(snapshot.rollout_id, single_rollout=True))
    candidates = view.result.terminal_attribution.candidates
    with streamlit_server(tmp_path) as url, chromium_page() as page:
        expect.set_options(timeout=60_000)  # a busy machine (the suite beside it) draws slowly
        # An ambiguous final answer: its outcome and each candidate, a link to its call; never "the anchor None".
        page.goto(f"{url}/rollout?src=sample:ambiguous_final_answer.json")
        expect(page.get_by_role("heading", name=snapshot.rollout_id, exact=True)).to_be_visible()
        finding = page.locator(".st-key-finding_0 [data-testid=stMarkdownContainer]").first
        expect(finding).to_contain_text(f"ambiguous final answer: candidate {candidates[0]} ")
        expect(finding).to_contain_text(f"ambiguous final answer: candidate {candidates[1]} ")
        expect(page.locator(".st-key-finding_0").get_by_role("button", name=candidates[0])).to_be_visible()
        expect(page.get_by_text("the anchor None")).to_have_count(0)
        second = page.locator(".st-key-finding_0").get_by_role("button", name=candidates[1])
        second.click()
        expect(page.get_by_text(re.compile(f"^{candidates[1]} — "))).to_be_visible()

        # The picker's bundled run builds with the run's rollout records: masked by its record, as its row is.
        page.goto(f"{url}/rollout?src=sample:run&rollout=task0153-rollout0-attempt0")
        expect(page.get_by_role("heading", name="task0153-rollout0-attempt0", exact=True)).to_be_visible()
        expect(page.get_by_text("Masked — the trainer drops this rollout")).to_be_visible()
        expect(page.locator(".st-key-verdict_masked").get_by_text(re.compile("^The anchor is not delivered"))).to_be_visible()

        # A file of several rollouts opens on its first in rollout-id order.
        page.goto(f"{url}/rollout?src=sample:multi_rollout_entries.jsonl")
        expect(page.get_by_role("heading", name="jsonl-clean", exact=True)).to_be_visible()

        # The loss mask's chain picker shows its whole label.
        page.goto(f"{url}/rollout?src=sample:long_rollout_delta.json&tab=mask")
        expect(page.get_by_text("Jump to the start of a call")).to_be_visible()
        chain = page.locator("[data-testid='stSelectbox']").filter(has_text="Chain").locator("input")
        expect(chain).to_have_value(re.compile("generated of"))
        page.screenshot(path=str(tmp_path / "mask-chain.png"))
        assert chain.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "the chain picker's label is cut off"
    print(f"screenshots: {tmp_path}")
