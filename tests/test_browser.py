"""The app in a real browser: Streamlit server + Debian's Chromium driven by Playwright.

Starts `streamlit run app.py` on a free localhost port. The Rollout test uploads a
snapshot through the sidebar's file input, waits for the call tree, clicks a node (at
the pixel where Vega drew it), checks the detail panel follows, downloads the
Responses JSON and the build result from the Export tab and compares them with
`tokencap build`. The Run test opens the sample run, clicks a mask reason's bar, selects
a row of the filtered table (the grid is a canvas: the click lands on the row's pixel),
sees that rollout's verdict on the Rollout page and goes back with the filter kept.
Screenshots are kept under the test's temporary directory (the paths are printed).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_browser import GRID as _GRID
from helpers_browser import GRID_ROWS as _GRID_ROWS
from helpers_browser import (
    REPO,
    RUN_BAR,
    RUN_TABLE,
    TOOLTIP,
    TREE,
    WAIT_MS,
    chromium_page,
    launch_chromium,
    streamlit_server,
)
from helpers_browser import after_rerun as _after_rerun
from helpers_browser import sample_table as _sample_table
from helpers_browser import select_grid_row as _select_grid_row
from helpers_browser import settled as _settled
from synth_snapshots import kitchen_sink

pytestmark = pytest.mark.browser


@pytest.fixture
def server(served_app):
    """The app serving its default page (the sample run)."""
    with served_app() as url:
        yield url


def _selecting(page, act) -> None:
    """Do ``act`` (a click that selects a call), then wait until the page has scrolled the
    selected call's detail into view: that scroll comes after the detail is drawn (late on a
    busy machine), and a pointer aimed before it would hit whatever the scroll moved there."""
    before = page.evaluate("() => document.documentElement.dataset.detailScroll || ''")
    act()
    page.wait_for_function("b => (document.documentElement.dataset.detailScroll || '') !== b", arg=before)


def _click_node(page, call_key: str, chart: str = "tree") -> None:
    """Click the node ``call_key`` of a tree chart (see `_node_pixel`) and wait for its selection to settle."""
    def click() -> None:
        _settled(page)  # not while a rerun re-plots the tree: a point aimed at then may be drawn elsewhere
        x, y = _node_pixel(page, call_key, chart)
        page.mouse.move(x, y)
        page.mouse.click(x, y)
    _selecting(page, click)


def _node_pixel(page, call_key: str, chart: str = "tree") -> tuple[float, float]:
    """Page coordinates of the tree node with ``call_key`` (the SVG mark Vega drew for it, named by its
    key), in the Vega-Lite chart whose Streamlit key starts with ``chart`` (the tree, or the long tree's
    overview): once the script is idle and the node has stood at the same place for three frames. (On a
    busy machine a point aimed at while the page still scrolls, or while Streamlit draws the chart again
    just after mounting it, was clicked where it no longer was: the click selected nothing.)"""
    box = page.wait_for_function(  # checked at each frame
        """([key, chart]) => {
            const app = document.querySelector("[data-testid='stApp']");
            const busy = document.querySelector('[data-stale="true"], [data-testid="stStatusWidget"]');
            if (!app || app.getAttribute('data-test-script-state') !== 'notRunning' || busy) {
                window.__aim = null;
                return null;
            }
            const holder = [...document.querySelectorAll('[class*="st-key-' + chart + '-"]')][0];
            const mark = holder && [...holder.querySelectorAll('svg path[aria-label]')]
                .find(p => p.getAttribute('aria-label') === key);
            if (!mark) return null;
            let r = mark.getBoundingClientRect();
            if (r.top < 0 || r.bottom > window.innerHeight) {  // the detail may have been scrolled into view
                mark.scrollIntoView({block: 'center'});
                r = mark.getBoundingClientRect();
            }
            const p = [r.left + r.width / 2, r.top + r.height / 2];
            const a = window.__aim;
            const same = !!a && a.key === key && a.x === p[0] && a.y === p[1];
            window.__aim = {key, x: p[0], y: p[1], frames: same ? a.frames + 1 : 0};
            return window.__aim.frames >= 3 ? p : null;
        }""", arg=[call_key, chart], polling="raf").json_value()
    return box[0], box[1]


TREE_NODE = f"{TREE} path[aria-label^='call:']"
"""A call's node drawn in the tree."""


def test_upload_click_and_download_in_chromium(server, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)

    capture = kitchen_sink()
    snapshot = tmp_path / "kitchen-sink.json"
    snapshot.write_bytes(capture.json_bytes())
    cli_out = tmp_path / "cli.json"
    subprocess.run([sys.executable, "-m", "tokencap", "build", str(snapshot), "-o", str(cli_out)], check=True,
                   cwd=REPO)

    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            context = browser.new_context(viewport={"width": 1500, "height": 1300}, accept_downloads=True)
            page = context.new_page()
            page.set_default_timeout(WAIT_MS)
            page.goto(f"{server}/rollout")
            # The Rollout page on its own: a bundled sample with its tree.
            expect(page.locator(TREE).first).to_be_visible()

            page.locator("section[data-testid='stSidebar'] input[type=file]").first.set_input_files(str(snapshot))
            expect(page.get_by_role("heading", name="kitchen-sink")).to_be_visible()
            expect(page.locator(TREE_NODE).first).to_be_attached()
            # Masked: it opens on its first culprit, not on the terminal call, selected; its detail waits to be
            # asked for (one button).
            expect(page.get_by_role("button", name="Show the detail of g01", exact=True)).to_be_visible()

            # A culprit link in the banner selects its call.
            expect(page.locator(".st-key-verdict_masked")).to_contain_text("s01's prompt replaces c05's history")
            _selecting(page, page.locator(".st-key-verdict_masked").get_by_role("button", name="s01", exact=True).first.click)
            expect(page.get_by_text("s01 — On a branch (not delivered)")).to_be_visible()
            # The break's proof, drawn: the detail's one chart of the two sequences (issue 37).
            expect(page.get_by_text("then part:").first).to_be_visible()

            # Click node c03: the detail panel follows the selection.
            _click_node(page, "call:c03")
            expect(page.get_by_text("c03 — On the delivered main chain")).to_be_visible()
            expect(page.get_by_text("Verified: the parent's whole cumulative sequence opens this prompt")).to_be_visible()
            _settled(page)
            shot = tmp_path / "app-tree.png"
            page.screenshot(path=str(shot), full_page=True)

            # A second click, on the refusal that ended the chain.
            _click_node(page, "refusal:r-end")
            expect(page.get_by_text("r-end — Engine refusal")).to_be_visible()
            expect(page.get_by_text("ended the rollout: the harness's next request did not fit")).to_be_visible()

            # Export: the Responses JSON and the build result, as tokencap build writes them.
            page.get_by_role("tab", name="Export").click()
            button = page.get_by_role("button", name="Responses JSON")
            expect(button).to_be_visible()
            with page.expect_download() as info:
                button.click()
            response_path = tmp_path / "downloaded.response.json"
            info.value.save_as(str(response_path))
            with page.expect_download() as info:
                page.get_by_role("button", name="Build result JSON").click()
            result_path = tmp_path / "downloaded.result.json"
            info.value.save_as(str(result_path))
            page.screenshot(path=str(tmp_path / "app-export.png"), full_page=True)
        finally:
            browser.close()

    cli = cli_out.read_bytes()
    assert json.loads(response_path.read_bytes()) == json.loads(cli)["rebuilt_response"]
    assert result_path.read_bytes() == cli
    assert shot.stat().st_size > 10_000
    print(f"screenshots: {shot} {tmp_path / 'app-export.png'}")


RUN_TABLE_JS = f"document.querySelector({json.dumps(RUN_TABLE)})"


RUN_BARS = "[class*='st-key-run_chart'] [data-testid='stVegaLiteChart'] svg g.mark-rect path"
"""A drawn bar of any Run-page chart."""


FETCHES = """() => performance.getEntriesByType('resource')
    .filter(e => /\\/static\\/js\\/PlotlyChart\\./.test(e.name)).length"""
"""How many times this tab fetched plotly's chunk (no page of the app draws a plotly chart)."""


def _label(dimension: str, key: str) -> str:
    """What a Run-page chart writes for the category ``key``."""
    from tokencap.views.run.categories import DELIVERED_LABELS, DELIVERY_LABELS, REFUSAL_LABELS
    from tokencap.views.run.filters import CHANGE_LABELS
    from tokencap.views.words import label

    labels = {"refusal": REFUSAL_LABELS, "change": CHANGE_LABELS, "delivery": DELIVERY_LABELS,
              "delivered": DELIVERED_LABELS}
    if dimension in ("causes", "link", "reasons"):  # readable labels of keys (issue 37, item 14)
        return label(key)
    return labels.get(dimension, {}).get(key, key)


def _bar_box(page, dimension: str, key: str) -> dict | None:
    """Where a Run-page chart's category is drawn (`RUN_BAR`), once it is, scrolled into view: a chart
    that a rerun sends again is re-drawn, and has no bars for a moment (None if none is drawn within the
    page's timeout)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    try:
        page.wait_for_function(f"(a) => ({RUN_BAR})(a) !== null", arg=[dimension, _label(dimension, key)],
                               polling="raf")
        page.evaluate("""(d) => document.querySelector(`[class*="st-key-run_chart-${d}-"]`)
                                    .scrollIntoView({block: 'center', behavior: 'instant'})""", dimension)
        found = page.wait_for_function(f"(a) => ({RUN_BAR})(a)", arg=[dimension, _label(dimension, key)],
                                       polling="raf")
    except PlaywrightTimeoutError:
        return None
    return found.json_value()


def _bar_pixel(page, dimension: str, key: str) -> tuple[float, float]:
    """Page coordinates of the middle of a Run-page chart's bar."""
    box = _bar_box(page, dimension, key)
    assert box is not None, f"no bar {dimension}={key}"
    bar = box["bar"]
    return bar["x"] + bar["width"] / 2, bar["y"] + bar["height"] / 2


def _label_pixel(page, dimension: str, key: str) -> tuple[float, float]:
    """Page coordinates of a few pixels into the label of a horizontal Run-page chart's category (drawn
    in the plot, at the left of its row), once the chart is drawn (see `_bar_box`)."""
    box = _bar_box(page, dimension, key)
    assert box is not None and box["horizontal"], f"no horizontal row {dimension}={key}"
    hit = box["hit"]
    return hit["x"] + 14, hit["y"] + hit["height"] / 2


def _bar_width(page, dimension: str, key: str) -> float:
    """Drawn length (px) of a Run-page chart's bar (the first run's)."""
    box = _bar_box(page, dimension, key)
    assert box is not None, f"no bar {dimension}={key}"
    return box["bar"]["width"] if box["horizontal"] else box["bar"]["height"]


def test_run_page_filter_select_and_back_in_chromium(server, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    from tokencap.rollout import MASK_REASON_ORDER

    expect.set_options(timeout=WAIT_MS)
    table = _sample_table()
    rows = table.to_pylist()
    # A mask reason with rollouts that load (so their verdict is drawn), the most common one.
    counts = {r: sum(1 for x in rows if r in x["mask_reasons"] and not x["reason_load_error"])
              for r in MASK_REASON_ORDER if r not in ("load_error", "no_records")}
    reason = max(counts, key=counts.get)
    filtered = [x for x in rows if reason in x["mask_reasons"]]
    position = next(i for i, x in enumerate(filtered) if not x["reason_load_error"])
    target = filtered[position]

    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            page.set_default_timeout(WAIT_MS)
            page.goto(server)
            # The default page is the Run page on the sample run.
            expect(page.get_by_text(f"{len(rows):,} of {len(rows):,} rollouts", exact=True)).to_be_visible()
            expect(page.locator(RUN_BARS).first).to_be_attached()
            _settled(page, f"document.querySelectorAll({json.dumps(RUN_BARS)}).length > 0")
            x, y = _bar_pixel(page, "reasons", reason)
            page.mouse.move(x, y)
            page.mouse.click(x, y)
            expect(page.get_by_text(f"{len(filtered):,} of {len(rows):,} rollouts", exact=True)).to_be_visible()
            expect(page).to_have_url(re.compile(f"run_reason={reason}"))
            # The filtered table replaces the old one: wait for it, never for a fixed time.
            _settled(page, f"({_GRID_ROWS})(arg)", len(filtered))
            page.screenshot(path=str(tmp_path / "run-filtered.png"))
            _select_grid_row(page, position, len(filtered))

            # The Rollout page, on that rollout, with its verdict.
            expect(page.get_by_role("heading", name=target["rollout_id"], exact=True)).to_be_visible()
            expect(page.get_by_text("Masked — the trainer drops this rollout")).to_be_visible()
            from tokencap.views.rollout.culprits import REASON_WORDS  # the banner names the reason in words

            expect(page.locator(".st-key-verdict_masked").get_by_text(re.compile(re.escape(REASON_WORDS[reason]),
                                                                                  re.I)).first).to_be_visible()
            page.screenshot(path=str(tmp_path / "run-opened.png"))
            # Its call tree is Vega-Lite, whose code the Run page's charts loaded: plotly is never fetched.
            expect(page.locator(TREE_NODE).first).to_be_visible()
            assert page.evaluate(FETCHES) == 0

            page.get_by_role("link", name="Back to the run").click()
            expect(page.get_by_text(f"{len(filtered):,} of {len(rows):,} rollouts", exact=True)).to_be_visible()
            expect(page).to_have_url(re.compile(f"run_reason={reason}"))
        finally:
            browser.close()
    print(f"screenshots: {tmp_path / 'run-filtered.png'} {tmp_path / 'run-opened.png'}")


def test_a_tiny_bar_is_selected_by_its_label_and_the_reward_views_show_in_chromium(server, tmp_path):
    from playwright.sync_api import expect

    from tokencap.views.run import reward as rw
    from tokencap.views.run.categories import REFUSALS
    from tokencap.views.run.frame import run_frame

    table = _sample_table()
    frame = run_frame(table)
    total = len(frame)
    # The smallest non-empty bar of the refusal outcomes (a few rollouts next to ~290 without refusal).
    counts = frame["refusal"].value_counts()
    key = min((k for k in REFUSALS if counts[k] > 0), key=lambda k: counts[k])
    with chromium_page(viewport={"width": 1280, "height": 1400}) as page:
        page.goto(f"{server}/?run_charts=1")  # the other charts open (the refusal chart is one of them)
        expect(page.get_by_text(f"{total:,} of {total:,} rollouts", exact=True)).to_be_visible()
        expect(page.locator(RUN_BARS).first).to_be_attached()
        # The reward and group views, filled from the bundled rollout records.
        expect(page.get_by_text("Reward, trainable vs masked")).to_be_visible()
        expect(page.get_by_text("Groups (tasks) by trainable rollouts kept")).to_be_visible()
        expect(page.get_by_text(rw.reward_bias(frame).words()[:60])).to_be_visible()
        expect(page.get_by_text(rw.group_summary(frame).words()[:60])).to_be_visible()
        _settled(page)
        assert 0 < _bar_width(page, "refusal", key) < 4  # a bar too thin to aim at
        x, y = _label_pixel(page, "refusal", key)
        page.mouse.move(x, y)
        page.mouse.click(x, y)
        expect(page.get_by_text(f"{int(counts[key]):,} of {total:,} rollouts", exact=True)).to_be_visible()
        expect(page).to_have_url(re.compile(f"run_refusal={key}"))
        page.screenshot(path=str(tmp_path / "run-tiny-bar.png"), full_page=True)
    print(f"screenshot: {tmp_path / 'run-tiny-bar.png'}")


def test_comparing_the_two_sample_runs_and_filtering_fixed_in_chromium(server, tmp_path):
    from playwright.sync_api import expect

    declared = json.loads((REPO / "sample_data" / "rollout_records" / "expected.json").read_text())["diff"]
    counts = declared["counts"]
    joined = counts["both"] + counts["only_a"] + counts["only_b"]
    with chromium_page(viewport={"width": 1280, "height": 1400}) as page:
        page.goto(server)
        expect(page.locator(RUN_BARS).first).to_be_attached()
        page.get_by_text("Compare with another run").click()
        page.get_by_text("The sample run after a fix").click()
        expect(page.get_by_text(f"{joined:,} of {joined:,} joined rollouts", exact=True)).to_be_visible()
        expect(page.get_by_text("Rollouts are paired by rollout id")).to_be_visible()
        expect(page.locator("[class*='st-key-run_chart'] svg g.role-legend").first).to_be_attached()
        _settled(page)
        # "fixed" by its label in the change chart (a click on the label selects its bar).
        x, y = _label_pixel(page, "change", "fixed")
        page.mouse.move(x, y)
        page.mouse.click(x, y)
        expect(page.get_by_text(f"{counts['fixed']:,} of {joined:,} joined rollouts", exact=True)).to_be_visible()
        expect(page).to_have_url(re.compile("run_change=fixed"))
        page.screenshot(path=str(tmp_path / "run-compare-fixed.png"), full_page=True)
        # A fixed rollout opens on the Rollout page's Compare tab with its two captures.
        _select_grid_row(page, 0, counts["fixed"])
        first = sorted(declared["rollouts"]["fixed"])[0]
        page.get_by_role("button", name=f"Open A: {first}").click()
        expect(page.get_by_role("heading", name=first, exact=True)).to_be_visible()
        expect(page.get_by_role("tab", name="Compare")).to_have_attribute("aria-selected", "true")
        expect(page.get_by_text("verdict: masked → trainable")).to_be_visible()
        page.screenshot(path=str(tmp_path / "run-compare-opened.png"))
    print(f"screenshot: {tmp_path / 'run-compare-fixed.png'}")


def _calls_shown(page) -> list[str]:
    """The calls whose nodes the tree chart draws (its window of rows), sorted."""
    return page.evaluate(f"""() => [...new Set([...document.querySelectorAll({json.dumps(TREE_NODE)})]
        .map(p => p.getAttribute('aria-label')))].sort()""")


def test_a_click_on_a_1500_call_tree_selects_that_call_and_keeps_the_zoom(tmp_path):
    from bench_build import make_linear_rollout
    from playwright.sync_api import expect

    path = tmp_path / "linear1500.json"
    make_linear_rollout(path, 1500, tool_tokens=20, gen_tokens=10, delta=True)
    with streamlit_server(tmp_path, str(path)) as url, chromium_page() as page:
        page.goto(url)
        expect(page.get_by_role("heading", name="bench")).to_be_visible()
        expect(page.get_by_role("button", name="Show the detail of call-01499", exact=True)).to_be_visible()
        expect(page.locator(TREE_NODE).first).to_be_attached()
        zoom = _calls_shown(page)
        assert 20 <= len(zoom) < 40 and "call:call-01499" in zoom  # a window of rows, not 1,500 touching dots
        for call in ("call-01480", "call-01481"):  # neighbours: each click lands on the one pointed at
            _click_node(page, f"call:{call}")
            expect(page.get_by_text(f"{call} — On the delivered main chain")).to_be_visible()
            assert _calls_shown(page) == zoom  # the window is kept across the rerun
        # The detail of the selected call was scrolled into view.
        page.wait_for_function("() => { const t = document.querySelector('.st-key-detail')"
                               ".getBoundingClientRect().top; return t >= 0 && t < 800; }")
        # The search box finds a call far away; the window moves to it.
        page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollTo(0, 0)")
        box = page.get_by_label("Find a call by id")
        box.fill("call-00042")
        box.press("Enter")
        expect(page.get_by_text("call-00042 — On the delivered main chain")).to_be_visible()
        page.wait_for_function(f"""() => !!document.querySelector({json.dumps(TREE_NODE)}
                                   + "[aria-label='call:call-00042']")""")
        moved = _calls_shown(page)
        assert "call:call-00042" in moved and len(moved) == len(zoom)
        page.screenshot(path=str(tmp_path / "long-tree.png"))


def _hover_tooltip(page, selector: str, at: tuple[float, float]) -> dict[str, str]:
    """What the Vega tooltip says with the pointer at fraction ``at`` of the chart's canvas."""
    canvas = page.locator(f"{selector} canvas")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + box["width"] * at[0], box["y"] + box["height"] * at[1])
    rows = page.wait_for_function(TOOLTIP).json_value()
    return {row[0]: row[1] for row in rows if len(row) == 2}


def test_the_loss_mask_strip_and_overview_draw_and_name_what_is_under_the_pointer(tmp_path):
    from playwright.sync_api import expect

    from tokencap import load_snapshots
    from tokencap.views import RolloutView

    path = REPO / "sample_data" / "long_rollout_delta.json"
    mask = RolloutView(load_snapshots(path)[0]).mask()
    with streamlit_server(tmp_path, str(path)) as url, chromium_page() as page:
        page.goto(url)
        page.get_by_role("tab", name="Loss mask").click()
        expect(page.get_by_text("Positions 0–2,047 of", exact=False)).to_be_visible()
        # The whole sequence's overview is drawn once its expander is opened.
        assert page.locator(".st-key-mask_overview").count() == 0
        page.get_by_text("The whole sequence: where this window lies", exact=False).click()
        for chart in (".st-key-mask_strip", ".st-key-mask_overview"):  # drawn: a canvas with a size
            page.wait_for_function("(s) => { const c = document.querySelector(s + ' canvas');"
                                   " return !!c && c.width > 100 && c.height > 100; }", arg=chart)
        # A cell names its position, kind and call: the call comes from the lookup of its link.
        cell = _hover_tooltip(page, ".st-key-mask_strip", (0.5, 0.5))
        position = int(cell["position"].replace(",", ""))
        assert 0 <= position < 2048
        owner = int(mask.owner_index()[position])
        assert cell["call"].startswith(mask.call_ids[max(owner, 0)])
        assert cell["token"] == str(int(mask.token_ids[position]))
        assert cell["kind"] == ["prompt", "interstitial", "generated"][int(mask.provenance[position])]
        # A bin of the overview names its positions and shares.
        bin_ = _hover_tooltip(page, ".st-key-mask_overview", (0.5, 0.6))
        start, end = (int(bin_[k].replace(",", "")) for k in ("from position", "to position"))
        assert 0 < start <= end < len(mask) and bin_["generated"].endswith("%")
        page.screenshot(path=str(tmp_path / "loss-mask.png"))


def test_the_url_restores_a_view_after_reload(tmp_path):
    from playwright.sync_api import expect

    with streamlit_server(tmp_path) as url, chromium_page() as page:
        page.goto(f"{url}/rollout?src=sample:final_retry_unresolved.json&call=call-0002&tab=verdicts&anchor=call-0004")
        expect(page.get_by_role("heading", name="final-retry-unresolved")).to_be_visible()
        expect(page.get_by_role("tab", name="Verdicts")).to_have_attribute("aria-selected", "true")
        expect(page.get_by_text("Trainable — the trainer receives this rollout").first).to_be_visible()
        page.get_by_role("tab", name="Call tree").click()
        expect(page.get_by_text("call-0002 — On the delivered main chain")).to_be_visible()
        page.wait_for_function("() => location.search.includes('tab=tree')")
        page.reload()
        expect(page.get_by_role("heading", name="final-retry-unresolved")).to_be_visible()
        expect(page.get_by_role("tab", name="Call tree")).to_have_attribute("aria-selected", "true")
        expect(page.get_by_text("call-0002 — On the delivered main chain")).to_be_visible()
        assert "anchor=call-0004" in page.url and "call=call-0002" in page.url
        # Copy link offers the same URL.
        page.get_by_role("button", name="Copy link").click()
        expect(page.get_by_text("src=sample%3Afinal_retry_unresolved.json").first).to_be_visible()


def test_a_large_export_shows_progress_and_lands_whole(tmp_path):
    """A result above the browser limit is written to disk with a progress bar; one below it is prepared
    (with progress) and downloads by itself. Both are the bytes `tokencap build` writes."""
    from bench_build import make_linear_rollout
    from playwright.sync_api import expect

    path = tmp_path / "linear120.json"
    make_linear_rollout(path, 120)  # about 14 MB of result
    cli_out = tmp_path / "cli.json"
    subprocess.run([sys.executable, "-m", "tokencap", "build", str(path), "-o", str(cli_out)], check=True, cwd=REPO)
    cli = cli_out.read_bytes()
    limit = str(len(cli) - 1000)  # the result is just above the limit; the mask CSV well below it
    out_dir = tmp_path / "exports"
    with streamlit_server(tmp_path, str(path), env={"TOKENCAP_DOWNLOAD_LIMIT": limit}) as url, \
            chromium_page(accept_downloads=True) as page:
        page.goto(f"{url}/rollout?tab=export")
        expect(page.get_by_role("heading", name="bench")).to_be_visible()
        page.get_by_label("Export directory (created if missing)").fill(str(out_dir))
        _after_rerun(page, lambda: page.get_by_label("Export directory (created if missing)").press("Enter"))
        page.get_by_role("button", name="Build result JSON → disk").click()
        bar = page.locator("[data-testid=stProgress]").filter(has_text="wrote")
        expect(bar.first).to_be_visible()
        expect(page.get_by_text(str(out_dir / "bench.result.json"), exact=True).first).to_be_visible()
        assert (out_dir / "bench.result.json").read_bytes() == cli
        page.screenshot(path=str(tmp_path / "export-disk.png"))

    with streamlit_server(tmp_path, str(path)) as url, chromium_page(accept_downloads=True) as page:
        page.goto(f"{url}/rollout?tab=export")
        expect(page.get_by_role("heading", name="bench")).to_be_visible()
        with page.expect_download() as info:
            page.get_by_role("button", name="Build result JSON", exact=True).click()
        assert info.value.suggested_filename == "bench.result.json"
        downloaded = tmp_path / "downloaded.result.json"
        info.value.save_as(str(downloaded))
        assert downloaded.read_bytes() == cli


def test_a_row_clicked_as_the_run_page_is_drawn_opens_its_call_tree_without_plotly(tmp_path):
    """The worst case of issue 20 (a row clicked in a fresh tab the moment the Run page is drawn waited
    ~1 s for plotly's 4.8 MB chunk): the call tree is Vega-Lite, so nothing waits for plotly. Plotly's
    chunk is refused outright here; the rollout, its call tree and a node click work all the same."""
    from playwright.sync_api import expect

    from tokencap.views.run.filters import RunFilter, filter_masks, passing, sorted_rows
    from tokencap.views.run.frame import run_frame

    frame = run_frame(_sample_table())
    flt = RunFilter()
    rows = sorted_rows(frame, passing(frame, filter_masks(frame, flt)), flt)
    target = str(frame["rollout_id"].iloc[int(rows[1])])
    refused: list[str] = []
    with streamlit_server(tmp_path) as url, chromium_page() as page:
        page.route("**/PlotlyChart.*.js", lambda route: (refused.append(route.request.url), route.abort()))
        page.goto(url)
        expect(page.get_by_text(f"{len(frame):,} of {len(frame):,} rollouts", exact=True)).to_be_visible()
        _select_grid_row(page, 1, len(frame))
        expect(page.get_by_role("heading", name=target, exact=True)).to_be_visible()
        expect(page.locator(TREE_NODE).first).to_be_visible()
        keys = _calls_shown(page)
        # Opened, the selected call's detail is a button until asked for; a click on a node asks.
        expect(page.locator(".st-key-detail").get_by_role("button", name=re.compile("^Show the detail of "))) \
            .to_be_visible()
        other = keys[0]
        _click_node(page, other)
        expect(page.locator(".st-key-detail h4").first).to_contain_text(other.removeprefix("call:"))
        assert not refused and page.evaluate(FETCHES) == 0


def _opened_in_a_fresh_browser(page, heading: str) -> None:
    """The URL of the page, opened in a new browser context (a shared link), shows the same rollout."""
    from playwright.sync_api import expect

    other = page.context.browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        fresh = other.new_page()
        fresh.goto(page.url)
        expect(fresh.get_by_role("heading", name=heading, exact=True)).to_be_visible()
        expect(fresh.get_by_text("is not in")).to_have_count(0)
    finally:
        other.close()


def test_triage_next_previous_back_to_the_row_and_links_that_reopen_the_rollout(tmp_path):
    from playwright.sync_api import expect

    from tokencap.run import scan_table
    from tokencap.views.run import triage as tr
    from tokencap.views.run.filters import RunFilter
    from tokencap.views.run.frame import run_frame

    frame = run_frame(_sample_table())
    flt = RunFilter(reasons=("multiple_chains",))
    order = tr.run_order(frame, flt)
    ids = [order.entry(int(r))[1] for r in order.rows]
    position = 11
    assert len(ids) > position + 1
    with streamlit_server(tmp_path) as url, chromium_page() as page:
        page.goto(f"{url}/?run_reason=multiple_chains")
        expect(page.get_by_text(f"{len(ids):,} of {len(frame):,} rollouts", exact=True)).to_be_visible()
        _select_grid_row(page, position)
        expect(page.get_by_role("heading", name=ids[position], exact=True)).to_be_visible()
        expect(page.get_by_text(f"{position + 1} of {len(ids)}")).to_be_visible()
        page.keyboard.press("j")  # next, from the keyboard
        expect(page.get_by_role("heading", name=ids[position + 1], exact=True)).to_be_visible()
        expect(page.get_by_text(f"{position + 2} of {len(ids)}")).to_be_visible()
        page.get_by_role("button", name="Previous").click()
        expect(page.get_by_role("heading", name=ids[position], exact=True)).to_be_visible()
        page.wait_for_function(f"() => location.search.includes('rollout={ids[position]}')")
        _opened_in_a_fresh_browser(page, ids[position])
        page.screenshot(path=str(tmp_path / "triage-rollout.png"))

        # Back to the run: the same filter, the table in view, scrolled to the row, which is selected.
        page.get_by_role("link", name="Back to the run").click()
        expect(page.get_by_text(f"{len(ids):,} of {len(frame):,} rollouts", exact=True)).to_be_visible()
        page.wait_for_function("""() => {
            const box = document.querySelector('.st-key-run_table_box');
            const grid = box && box.querySelector('.dvn-scroller');
            if (!grid || grid.scrollTop <= 0) return false;
            const r = box.getBoundingClientRect();
            return r.top < innerHeight && r.bottom > 0;
        }""")
        _settled(page)
        page.screenshot(path=str(tmp_path / "triage-back.png"))
        assert page.get_by_role("heading", name=ids[position], exact=True).count() == 0  # not reopened
        # Clicked again, the row it came from opens again (a click on a selected row unselects it).
        at = page.evaluate(f"""() => {{ const g = {_GRID}, r = g.getBoundingClientRect();
            const top = document.querySelector('.st-key-run_table_box .dvn-scroller').scrollTop;
            return {{x: r.left + 16, y: r.top + 35 + 35 * {position} - top + 17, bottom: r.bottom}}; }}""")
        assert at["y"] < at["bottom"] - 17  # the row is on the table's screen
        page.mouse.click(at["x"], at["y"])
        expect(page.get_by_role("heading", name=ids[position], exact=True)).to_be_visible()

        # A link to a file the run does not hold opens nothing in its place.
        page.goto(f"{url}/rollout?src=sample:run&part=x.json&rollout=y")
        expect(page.get_by_text("x.json: not found under")).to_be_visible()
        expect(page.get_by_text("Masked — the trainer").or_(page.get_by_text("Trainable — the trainer"))).to_have_count(0)

    # A run directory and a scan table opened with its run directory.
    run = tmp_path / "run"
    import shutil
    shutil.copytree(REPO / "sample_data" / "capture_store", run / "store")
    (run / "files").mkdir()
    shutil.copy(REPO / "sample_data" / "multi_rollout_entries.jsonl", run / "files" / "entries.jsonl")
    table = scan_table(run, workers=1)
    ids = table.column("rollout_id").to_pylist()
    parquet = tmp_path / "run.parquet"
    import pyarrow.parquet as pq
    pq.write_table(table, parquet)
    with streamlit_server(tmp_path, str(run)) as url, chromium_page() as page:
        page.goto(url)
        _select_grid_row(page, ids.index("store-interrupted"))
        expect(page.get_by_role("heading", name="store-interrupted", exact=True)).to_be_visible()
        page.wait_for_function("() => location.search.includes('part=')")
        page.reload()
        expect(page.get_by_role("heading", name="store-interrupted", exact=True)).to_be_visible()
        _opened_in_a_fresh_browser(page, "store-interrupted")
    with streamlit_server(tmp_path, str(parquet)) as url, chromium_page() as page:
        page.goto(url)
        _settled(page, f"({_GRID_ROWS})(arg)", len(ids))  # the table's first run is over
        root = page.get_by_role("textbox", name="Run directory on this machine (optional)")
        root.fill(str(run))
        _after_rerun(page, lambda: root.press("Enter"))
        _select_grid_row(page, ids.index("jsonl-refusal-ended"))
        expect(page.get_by_role("heading", name="jsonl-refusal-ended", exact=True)).to_be_visible()
        page.wait_for_function("() => location.search.includes('part=')")
        _opened_in_a_fresh_browser(page, "jsonl-refusal-ended")
    print(f"screenshots: {tmp_path / 'triage-rollout.png'} {tmp_path / 'triage-back.png'}")


def test_the_long_rollout_overview_goes_where_a_dot_is_clicked_and_zooms_where_a_drag_covers(tmp_path):
    from bench_build import make_linear_rollout
    from playwright.sync_api import expect

    path = tmp_path / "linear1500.json"
    make_linear_rollout(path, 1500, tool_tokens=20, gen_tokens=10, delta=True)
    overview = '[class*="st-key-tree_overview-"] [data-testid="stVegaLiteChart"] svg'
    with streamlit_server(tmp_path, str(path)) as url, chromium_page() as page:
        page.goto(url)
        expect(page.get_by_role("button", name="Show the detail of call-01499", exact=True)).to_be_visible()
        expect(page.locator(f"{overview} path[aria-label]").first).to_be_attached()
        _settled(page)
        # Hovering a dot names its call and its place in call order, never the internal key.
        x, y = _node_pixel(page, "call:call-00749", chart="tree_overview")
        page.mouse.move(x, y)
        tip = page.wait_for_function("""() => { const t = document.querySelector('#vg-tooltip-element');
            return t && t.classList.contains('visible') && t.textContent.includes('#') ? t.textContent : null; }""")
        # (1,500 dots in the strip's width overlap: the one on top under the pointer is a near neighbour.)
        said = re.fullmatch(r"call-(\d{5}) · #([\d,]+)", tip.json_value().strip())
        assert said and int(said[2].replace(",", "")) == int(said[1]) + 1 and abs(int(said[1]) - 749) <= 12, said
        # A click on a dot far from the zoomed window goes there.
        # (the dot on top under the pointer may again be a near neighbour of call-00300)
        _click_node(page, "call:call-00300", chart="tree_overview")
        picked = page.get_by_text(re.compile(r"call-00(29|30|31)\d — On the delivered main chain"))
        expect(picked).to_be_visible()
        number = int(re.search(r"call-(\d{5})", picked.inner_text())[1]) + 1  # its place in call order
        caption = page.get_by_text(re.compile(r"Below: calls ([\d,]+)–([\d,]+)"))
        low, high = (int(v.replace(",", "")) for v in re.search(r"calls ([\d,]+)–([\d,]+)", caption.inner_text()).groups())
        assert low <= number <= high
        # A drag across calls 1,000-1,100 zooms into them.
        x1, y1 = _node_pixel(page, "call:call-01000", chart="tree_overview")
        x2, _ = _node_pixel(page, "call:call-01100", chart="tree_overview")
        page.mouse.move(x1, y1 - 4)
        page.mouse.down()
        page.mouse.move((x1 + x2) / 2, y1 + 4, steps=5)
        page.mouse.move(x2, y1 + 4, steps=5)
        page.mouse.up()
        page.screenshot(path=str(tmp_path / "overview-drag.png"))
        expect(page.get_by_text(re.compile(r"Below: calls (99\d|1,0\d\d)–1,(09|10)\d"))).to_be_visible()
        page.wait_for_function(f"""() => !!document.querySelector({json.dumps(TREE_NODE)} + "[aria-label='call:call-01050']")""")
        page.screenshot(path=str(tmp_path / "overview.png"))


_TREE_BOXES = """() => {
    const svg = document.querySelector("[class*='st-key-tree-'] [data-testid='stVegaLiteChart'] svg.marks");
    const rect = el => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    const texts = [...svg.querySelectorAll('g.mark-text text')].filter(t => t.textContent)
        .map(t => [t.textContent, t.getAttribute('fill') === '#1e293b', ...rect(t)]);
    const marks = [...svg.querySelectorAll('g.mark-symbol path')].filter(p => {
        const s = getComputedStyle(p);
        const fill = !/rgba\\(0, 0, 0, 0\\)|transparent|none/.test(s.fill);
        return fill || parseFloat(s.strokeWidth) > 0;
    }).map(p => rect(p));
    return {chart: rect(svg), texts, marks};
}"""


def _tree_geometry_problems(page) -> tuple[int, list[str]]:
    """(labels drawn, what is wrong): every text of the tree as Chromium drew it (call labels, lane names,
    the legend), against the others, the marks and the chart's own box."""
    g = page.evaluate(_TREE_BOXES)

    def overlap(a, b) -> bool:
        return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5

    def inside(a, area) -> bool:
        return a[0] >= area[0] - 0.5 and a[1] >= area[1] - 0.5 and a[2] <= area[2] + 0.5 and a[3] <= area[3] + 0.5

    out = [f"{t[0]!r} is clipped" for t in g["texts"] if not inside(t[2:], g["chart"])]
    boxes = g["texts"]
    out += [f"{a[0]!r} overlaps {b[0]!r}" for i, a in enumerate(boxes) for b in boxes[i + 1:] if overlap(a[2:], b[2:])]
    out += [f"{a[0]!r} overlaps a mark" for a in boxes for m in g["marks"] if overlap(a[2:], m)]
    return sum(1 for t in g["texts"] if t[1]), out


def test_the_call_tree_labels_as_chromium_draws_them_never_collide_or_clip(tmp_path):
    """Issue 20: at 24 and 88 calls every label sits whole beside its node, clear of the others."""
    from playwright.sync_api import expect
    from synth_snapshots import long_linear

    path = tmp_path / "linear88.json"
    path.write_bytes(long_linear(88, retry_every=9, branch_every=20).json_bytes())
    with streamlit_server(tmp_path, str(path)) as url, chromium_page() as page:
        tree = page.locator(TREE_NODE).first
        page.goto(f"{url}/rollout?src=sample:run&part=task0003-rollout1-attempt0.tokens.jsonl"
                  "&rollout=task0003-rollout1-attempt0")
        expect(page.get_by_role("heading", name="task0003-rollout1-attempt0")).to_be_visible()
        expect(tree).to_be_attached()
        drawn, found = _tree_geometry_problems(page)
        assert drawn == 25 and not found, found
        page.screenshot(path=str(tmp_path / "tree-24.png"), full_page=True)
        page.goto(url)
        expect(page.get_by_role("heading", name="linear-88")).to_be_visible()
        expect(tree).to_be_attached()
        drawn, found = _tree_geometry_problems(page)
        assert drawn == 30 and not found, found  # the window of 30 rows under the overview
        page.screenshot(path=str(tmp_path / "tree-88.png"), full_page=True)
    print(f"screenshots: {tmp_path / 'tree-24.png'} {tmp_path / 'tree-88.png'}")


def _spans(path: Path) -> list[str]:
    from tokencap.views import trace

    return [name for name, _ in trace.read(path)]


def _idle(page) -> None:
    page.wait_for_function("""() => {
        const app = document.querySelector("[data-testid='stApp']");
        return app && app.getAttribute('data-test-script-state') === 'notRunning';
    }""")


def test_the_run_page_shows_the_tiles_the_reason_chart_and_the_table_on_the_first_screen(tmp_path):
    from playwright.sync_api import expect

    from tokencap.views.run import charts as rc
    from tokencap.views.run import data as rd
    from tokencap.views.run.frame import run_frame

    frame = run_frame(_sample_table())
    with streamlit_server(tmp_path) as url, chromium_page() as page:  # 1280x800
        # What the run's grid paints on its canvas, and where (the columns' headers, below).
        page.add_init_script("""(() => { const fill = CanvasRenderingContext2D.prototype.fillText;
            window.__gridTexts = [];  // what the grid's canvas paints and where (x, in the canvas's CSS pixels)
            CanvasRenderingContext2D.prototype.fillText = function (...a) {
              if (window.__gridTexts.length < 5000) window.__gridTexts.push([String(a[0]), a[1], this.getTransform().e]);
              return fill.apply(this, a); }; })()""")
        page.goto(url)
        expect(page.get_by_text(f"{len(frame):,} of {len(frame):,} rollouts", exact=True)).to_be_visible()
        expect(page.locator(RUN_BARS).first).to_be_attached()
        _idle(page)
        tiles = page.locator("[data-testid='stMetric']")
        expect(tiles.first).to_be_visible()
        charts = page.locator("[class*='st-key-run_chart'] [data-testid='stVegaLiteChart']")
        expect(charts).to_have_count(len(rc.FIRST_ROW))  # the mask-reason and cause charts; the others behind the switch
        assert page.evaluate("() => scrollY") == 0
        table = page.locator(RUN_TABLE).last.bounding_box()
        assert table["y"] + 35 * 9 <= 800, table  # the header and eight rows are on the first screen (issue 37)
        for box in [tiles.nth(i).bounding_box() for i in range(tiles.count())] + [charts.first.bounding_box()]:
            assert box["y"] + box["height"] <= 800, box
        # Seven tiles share 1280 px: each label wraps rather than being cut to "traina…" or "not c…".
        cut = page.evaluate("""() => [...document.querySelectorAll('[data-testid=stMetricLabel]')].map(l => {
            const text = l.querySelector('.stMarkdownEllipsis') || l;
            return [text.innerText, text.scrollWidth > text.clientWidth + 1 || text.scrollHeight > text.clientHeight + 1]; })""")
        assert len(cut) == tiles.count() and not [label for label, clipped in cut if clipped], cut
        # Beside the sidebar the grid shows its first columns: the counts come before the wider text ones, so
        # its first screen holds `calls` and `delivered` whole: the next column's header starts in view (a
        # numeric column cut at the edge shows its header, its right-aligned values out of sight).
        headers = list(rd.TABLE_COLUMNS.values())
        after = headers[headers.index("delivered") + 1]
        width = page.evaluate(f"() => {RUN_TABLE_JS}.getBoundingClientRect().width")
        starts = [x + shift for text, x, shift in page.evaluate("() => window.__gridTexts") if text.startswith(after)]
        assert headers.index("calls") < headers.index("delivered") < headers.index("status")
        assert starts and min(starts) < width, (after, starts, width)
        page.screenshot(path=str(tmp_path / "run-first-screen.png"))
        # No page of the app draws plotly: its 4.8 MB chunk is never fetched (the Rollout page's charts use
        # the Vega-Lite code the Run page's charts loaded).
        assert page.evaluate(FETCHES) == 0
        # The switch opens the other charts; the URL keeps them open.
        page.get_by_text("More charts (").click()
        expect(charts).to_have_count(len(rc.FIRST_ROW) + sum(len(row) for row in rc.ROWS))  # every other chart
        page.wait_for_function("() => location.search.includes('run_charts=1')")
    print(f"screenshot: {tmp_path / 'run-first-screen.png'}")


def test_a_click_reruns_only_the_part_it_changes(tmp_path):
    """A bar click reruns the Run page's fragment (filters, first chart, table), not the page, the header
    or the charts behind the switch; a tab of the Rollout page reruns its tabs alone and computes the
    open tab only (the spans the app writes with TOKENCAP_APP_TRACE)."""
    from playwright.sync_api import expect

    from tokencap.views.run.filters import RunFilter, filter_masks
    from tokencap.views.run.frame import run_frame

    spans = tmp_path / "trace.txt"
    frame = run_frame(_sample_table())
    reason = "multiple_chains"
    filtered = int(filter_masks(frame, RunFilter(reasons=(reason,)))["reasons"].sum())
    with streamlit_server(tmp_path, env={"TOKENCAP_APP_TRACE": str(spans)}) as url, chromium_page() as page:
        page.goto(url)
        expect(page.get_by_text(f"{len(frame):,} of {len(frame):,} rollouts", exact=True)).to_be_visible(timeout=90_000)
        expect(page.locator(RUN_BARS).first).to_be_attached()
        _idle(page)
        before = _spans(spans)
        assert before.count("script") >= 1 and "run body" in before and "run header" in before
        assert not [s for s in before if s.startswith("run chart") and s not in ("run chart reasons", "run chart causes")]
        x, y = _bar_pixel(page, "reasons", reason)
        page.mouse.move(x, y)
        page.mouse.click(x, y)
        expect(page.get_by_text(f"{filtered:,} of {len(frame):,} rollouts", exact=True)).to_be_visible()
        expect(page.locator(RUN_TABLE).last.locator(f"[aria-rowcount='{filtered + 1}']")).to_be_attached()
        _idle(page)
        clicked = len(before)
        page.goto(f"{url}/rollout?src=sample:final_retry_unresolved.json")
        expect(page.get_by_role("tab", name="Call tree")).to_have_attribute("aria-selected", "true")
        expect(page.locator(TREE_NODE).first).to_be_visible()
        _idle(page)
        before = _spans(spans)
        assert "rollout tab Call tree" in before and not [s for s in before if s.startswith("rollout tab ")
                                                           and s != "rollout tab Call tree"]
        page.get_by_role("tab", name="Verdicts").click()
        expect(page.get_by_text("Metrics (as tokencap build reports them)").first).to_be_visible()
        _idle(page)
        tab_clicked = len(before)
        # Another page load ends both stretches for sure: what each click reran is every span written
        # after it and before the next page's parts (a script run writes its parts' spans, then "script").
        page.goto(url)
        expect(page.get_by_text(f"{len(frame):,} of {len(frame):,} rollouts", exact=True)).to_be_visible()
        _idle(page)
        written = _spans(spans)

        def reran(start: int, next_page: str) -> list[str]:
            out = []
            for name in written[start:]:
                if name == "script" or name.startswith(next_page):
                    break
                out.append(name)
            return out

        after = reran(clicked, "rollout ")
        assert "run body" in after and "run chart reasons" in after, after
        assert "run header" not in after and "run rewards" not in after, after
        after = reran(tab_clicked, "run ")
        assert "rollout tab Verdicts" in after, after
        assert "rollout banner" not in after and "rollout tab Call tree" not in after, after
