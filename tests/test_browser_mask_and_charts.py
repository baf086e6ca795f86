"""Issue 37, items 10 and 12, in a real browser (Streamlit + /usr/bin/chromium via Playwright, 1280x800).

The loss-mask strip of a short rollout: the cell under the pointer is drawn green when generated and grey or
grey-blue when context (read from the canvas's pixels), and its hover shows the token's decoded text (the
bundled sample tokenizer). Every wait is on a condition, never a fixed time.
"""

from __future__ import annotations

import colorsys

import pytest
from helpers_browser import REPO, TOOLTIP, TREE, chromium_page, streamlit_server

pytestmark = pytest.mark.browser

PIXEL = """([sel, x, y]) => {
    // The colour the strip's canvas drew at page point (x, y).
    const c = document.querySelector(sel + ' canvas'), r = c.getBoundingClientRect();
    const sx = c.width / r.width, sy = c.height / r.height;
    const d = c.getContext('2d').getImageData(Math.floor((x - r.left) * sx), Math.floor((y - r.top) * sy), 1, 1).data;
    return [d[0], d[1], d[2], d[3]];
}"""


def test_the_loss_mask_strip_colours_trained_apart_from_context_and_hovers_the_token_s_text(tmp_path):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    from tokencap import load_snapshots
    from tokencap.views import RolloutView
    from tokencap.views.rollout import mask as mv

    path = REPO / "sample_data" / "clean_multiturn_tools.json"
    mask = RolloutView(load_snapshots(path)[0]).mask()
    tokenizer, _ = mv.load_tokenizer((REPO / "sample_data" / "tokenizer.json").read_bytes())
    seen: dict[str, tuple[int, int, int]] = {}
    with streamlit_server(tmp_path) as url, chromium_page() as page:
        page.goto(f"{url}/rollout?src=sample:{path.name}")
        page.get_by_role("tab", name="Loss mask").click()
        expect(page.get_by_text(f"of {len(mask):,}.", exact=False).first).to_be_visible()
        page.wait_for_function("() => { const c = document.querySelector('.st-key-mask_strip canvas');"
                               " return !!c && c.width > 100 && c.height > 100; }")
        canvas = page.locator(".st-key-mask_strip canvas")
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        # Walk the strip's rows until a generated, an interstitial and a prompt cell have been hovered.
        for fy in (0.35, 0.45, 0.55, 0.65, 0.75):
            for fx in (0.1, 0.3, 0.5, 0.7, 0.85):
                x, y = box["x"] + box["width"] * fx, box["y"] + box["height"] * fy
                page.mouse.move(x, y)
                try:  # a point between cells, on an axis or past the last cell shows no tooltip: the next one
                    rows = page.wait_for_function(TOOLTIP, polling="raf", timeout=5_000).json_value()
                except PlaywrightTimeout:
                    continue
                cell = {r[0]: r[1] for r in rows if len(r) == 2}
                if "position" not in cell:
                    continue
                position = int(cell["position"].replace(",", ""))
                expected = mv.token_texts(tokenizer, mask.token_ids[position:position + 1])[0]
                assert cell["token"] == str(int(mask.token_ids[position])) and cell["text"] == expected, cell
                seen.setdefault(cell["kind"], tuple(page.evaluate(PIXEL, [".st-key-mask_strip", x, y])[:3]))
                page.mouse.move(box["x"] - 40, box["y"] - 40)  # away: the tooltip hides before the next cell
                page.wait_for_function("() => !document.querySelector('#vg-tooltip-element.visible')")
            if len(seen) == 3:
                break
        page.screenshot(path=str(tmp_path / "loss-mask-short.png"))
    assert set(seen) == {"generated", "interstitial", "prompt"}, seen
    hls = {k: colorsys.rgb_to_hls(*(c / 255 for c in v)) for k, v in seen.items()}
    r, g, b = seen["generated"]
    assert g > r + 30 and g > b + 20, seen  # green
    assert max(seen["prompt"]) - min(seen["prompt"]) <= 12, seen  # grey
    assert 0.5 <= hls["interstitial"][0] <= 0.7 and hls["interstitial"][2] < 0.55, seen  # grey-blue
    print(f"screenshot: {tmp_path / 'loss-mask-short.png'}")




def test_a_node_s_rings_stand_apart_an_intact_link_says_nothing_diverges_and_a_break_draws_one_proof(tmp_path):
    from playwright.sync_api import expect
    with streamlit_server(tmp_path) as url, chromium_page() as page:
        # compaction_observed's call-0004: its boundary ring around it, its other rings as badges beside it.
        page.goto(f"{url}/rollout?src=sample:compaction_observed.json&call=call-0004")
        expect(page.locator(".st-key-detail h4").first).to_contain_text("call-0004")
        marks = page.locator(f"{TREE} path[aria-label^='call:call-0004']")
        expect(marks.first).to_be_attached()
        boxes = [marks.nth(i).bounding_box() for i in range(marks.count())]
        centres = {(round(b["x"] + b["width"] / 2), round(b["y"] + b["height"] / 2)) for b in boxes}
        assert len(centres) >= 2, boxes  # not every mark on one centre
        node_x = min(x for x, _ in centres)
        apart = sorted(x for x, _ in centres if x > node_x + 2)
        assert apart and all(b - a >= 8 for a, b in zip(apart, apart[1:])), centres
        page.screenshot(path=str(tmp_path / "tree-badges.png"))

        # An intact link's break: nothing diverges (it said "they part at 260").
        page.goto(f"{url}/rollout?src=sample:legacy_missing_resolution.json&call=call-0002")
        proof = page.locator("[class*='st-key-break_proof_chart_'] [data-testid='stVegaLiteChart'] svg").last
        expect(proof.locator("text", has_text="nothing diverges").first).to_be_attached()
        expect(proof.locator("text", has_text="they part at")).to_have_count(0)

        # A break at a claimed parent: the break's proof is the one chart of the two sequences, decoded.
        page.goto(f"{url}/rollout?src=sample:stale_parent_link.json&call=call-0003")
        expect(page.locator("[class*='st-key-break_proof_chart_'] svg").last).to_be_attached()
        expect(page.get_by_text("Why the lineage breaks here").first).to_be_visible()
        expect(page.locator("[class*='st-key-proof_chart_']")).to_have_count(0)
        page.screenshot(path=str(tmp_path / "one-proof.png"))

        # The comparison's reason chart: one count label a key, "A → B".
        page.goto(f"{url}/?run_vs=sample")
        chart = page.locator("[class*='st-key-run_chart-reasons-'] svg")
        expect(chart.locator("text", has_text="→").first).to_be_attached()
        labels = chart.locator("text", has_text="→")
        boxes = [labels.nth(i).bounding_box() for i in range(labels.count())]
        for a, b in zip(boxes, boxes[1:]):
            assert a["y"] + a["height"] <= b["y"] + 1 or b["y"] + b["height"] <= a["y"] + 1, (a, b)
    print(f"screenshots: {tmp_path / 'tree-badges.png'} {tmp_path / 'one-proof.png'}")
