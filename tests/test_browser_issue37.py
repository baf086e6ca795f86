"""Issue 37's app fixes in a real browser (Streamlit server + /usr/bin/chromium through Playwright, 1280 x 800):
the banner says each break once, cause first and whole; a file that is no capture is an error on the Run
page, not a fake run; the URL and the browser's Back follow what the page shows.

Every wait is on a condition (an element, a URL, a DOM state), never a fixed time. Servers and helpers
are tests/test_browser.py's.
"""

from __future__ import annotations

import re

import pytest
from helpers_browser import REPO, chromium_page, sample_table, settled, streamlit_server

pytestmark = pytest.mark.browser

CUT_TEXT = """() => {
    // Every piece of text in the masked banner that the browser cuts (an ellipsis, or wider than its box).
    const box = document.querySelector('.st-key-verdict_masked');
    if (!box) return ['no banner'];
    const cut = [];
    for (const el of box.querySelectorAll('p, span, div[data-testid=stMarkdownContainer]')) {
        const style = getComputedStyle(el);
        if (el.scrollWidth > el.clientWidth + 1 && style.overflow !== 'visible') cut.push(el.textContent);
        if (style.textOverflow === 'ellipsis' && el.scrollWidth > el.clientWidth + 1) cut.push(el.textContent);
    }
    return cut;
}"""


def test_the_banner_says_each_break_once_cause_first_and_whole(tmp_path):
    from playwright.sync_api import expect

    with streamlit_server(tmp_path) as url, chromium_page() as page:
        expect.set_options(timeout=120_000)
        page.goto(f"{url}/rollout?src=sample:reasoning_stripped_by_template.json")
        banner = page.locator(".st-key-verdict_masked")
        expect(banner).to_be_visible()
        # The cause comes first, in words, and the whole sentence is shown (wrapped, not cut).
        first = banner.locator(".st-key-finding_0 [data-testid=stMarkdownContainer]").first
        expect(first).to_contain_text(re.compile(r"^Generated tokens dropped — the chat template likely strips "
                                                 r"earlier reasoning: call-0002's prompt leaves out 24 tokens"))
        expect(first).to_contain_text("call-0004's prompt leaves out 22 tokens call-0003 generated (its reasoning)")
        assert page.evaluate(CUT_TEXT) == []
        # One finding for the three mask reasons it explains; each call once.
        expect(banner.locator("[class*='st-key-finding_']")).to_have_count(1)
        expect(banner).to_contain_text("explains 3 mask reasons")
        banner.screenshot(path=str(tmp_path / "banner.png"))
        links = banner.get_by_role("button", name=re.compile(r"call-000\d"))
        expect(links).to_have_count(3)
        # The hover says what happened at the call, not only where a click goes.
        links.first.hover()
        tooltip = page.locator("[data-testid=stTooltipContent]")
        expect(tooltip).to_contain_text("call-0002's prompt leaves out 24 tokens call-0001 generated")
        expect(tooltip).to_contain_text("select call-0002 in the call tree")
        links.first.click()
        expect(page).to_have_url(re.compile(r"call=call-0002"))

        # A legacy capture: seven links the tokens prove, one finding with seven calls, nothing behind "+N more".
        page.goto(f"{url}/rollout?src=sample:run&rollout=task0265-rollout1-attempt0")
        expect(page.get_by_role("heading", name="task0265-rollout1-attempt0")).to_be_visible()
        findings = banner.locator("[class*='st-key-finding_']")
        expect(findings).to_have_count(2)
        expect(findings.nth(1)).to_contain_text(re.compile(r"^Unrecorded link \(tokens match\) — the tokens prove"))
        expect(banner.get_by_role("button", name=re.compile(r"call-000\d"))).to_have_count(8)
        expect(banner.get_by_text(re.compile(r"\+\d+ more"))).to_have_count(0)
        assert page.evaluate(CUT_TEXT) == []
        banner.screenshot(path=str(tmp_path / "banner-legacy.png"))
    print(f"screenshot: {tmp_path / 'banner.png'}")


def test_a_file_that_is_no_capture_is_an_error_on_the_run_page_not_a_run(tmp_path):
    from playwright.sync_api import expect

    bad = {"empty.json": b"", "truncated.json": b'{"entries": [', "image.json": b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
           "garbage.json": b"garbage here\n",
           "records.jsonl": (REPO / "sample_data" / "rollout_records" / "run.jsonl").read_bytes().split(b"\n")[0]}
    said = {"empty.json": "the input is empty", "truncated.json": "not valid JSON",
            "image.json": "binary data", "garbage.json": "not valid JSON",
            "records.jsonl": "upload it under Rollout records in the sidebar"}
    for name, data in bad.items():
        (tmp_path / name).write_bytes(data)
    with streamlit_server(tmp_path) as url, chromium_page() as page:
        expect.set_options(timeout=120_000)
        page.goto(url)
        expect(page.get_by_text(re.compile(r"^\d[\d,]* of [\d,]+ rollouts$")).first).to_be_visible()
        uploader = page.locator("section[data-testid='stSidebar'] input[type=file]").first
        for name in bad:
            uploader.set_input_files(str(tmp_path / name))
            error = page.locator("[data-testid=stAlertContentError]", has_text=f"{name}")
            expect(error).to_contain_text("Could not open the run.")
            expect(error).to_contain_text(said[name])
            expect(page.get_by_text("not loaded")).to_have_count(0)
            expect(page.get_by_text(re.compile(r"masked 100%"))).to_have_count(0)
            expect(page.locator(".st-key-run_table_box")).to_have_count(0)


def test_back_steps_through_the_rollouts_visited_and_the_url_follows_what_is_shown(tmp_path):
    """Item 13: browser Back after J (next) shows the rollout before it, then the one before that, never a
    URL mixing the run's and a rollout's parameters; the sidebar's Rollout link from the Run page opens a
    rollout of that run; a file that fails to load leaves no earlier sample in the URL."""
    from playwright.sync_api import expect

    from tokencap.views.run import triage as tr
    from tokencap.views.run.filters import RunFilter
    from tokencap.views.run.frame import run_frame

    frame = run_frame(sample_table())
    order = tr.run_order(frame, RunFilter(reasons=("multiple_chains",)))
    ids = [order.entry(int(r))[1] for r in order.rows]
    sources = {order.entry(int(r))[1]: str(frame["source"].iloc[int(r)]) for r in order.rows}
    (tmp_path / "bad.json").write_bytes(b"garbage here\n")
    with streamlit_server(tmp_path) as url, chromium_page() as page:
        expect.set_options(timeout=120_000)
        # The sidebar's Rollout link, from the Run page: a rollout of this run, not a bundled sample.
        page.goto(f"{url}/?run_reason=multiple_chains")
        expect(page.get_by_text(re.compile(r"^\d+ of [\d,]+ rollouts$")).first).to_be_visible()
        page.locator("[data-testid=stSidebarNav] a", has_text="Rollout").click()
        expect(page.get_by_role("heading", name=ids[0], exact=True)).to_be_visible()
        expect(page.get_by_text(f"1 of {len(ids)}")).to_be_visible()

        page.goto(f"{url}/rollout?src=sample:run&part={sources[ids[3]]}&rollout={ids[3]}&run_reason=multiple_chains")
        expect(page.get_by_role("heading", name=ids[3], exact=True)).to_be_visible()
        expect(page.get_by_text(f"4 of {len(ids)}")).to_be_visible()
        for k in (4, 5):
            settled(page)  # a key pressed while the script runs may be dropped
            page.keyboard.press("j")
            expect(page.get_by_role("heading", name=ids[k], exact=True)).to_be_visible()
            page.wait_for_function(f"() => location.search.includes('rollout={ids[k]}')")
        for k in (4, 3):
            page.go_back()
            expect(page.get_by_role("heading", name=ids[k], exact=True)).to_be_visible()
            page.wait_for_function(f"() => location.search.includes('rollout={ids[k]}')")
            assert "/rollout" in page.url

        # A failed upload: the URL names no earlier sample or rollout.
        page.goto(f"{url}/rollout?src=sample:reasoning_stripped_by_template.json")
        expect(page.get_by_role("heading", name="reasoning-stripped", exact=True)).to_be_visible()
        page.locator("section[data-testid='stSidebar'] input[type=file]").first.set_input_files(str(tmp_path / "bad.json"))
        expect(page.get_by_text("Could not load bad.json")).to_be_visible()
        page.wait_for_function("() => !location.search.includes('src=') && !location.search.includes('rollout=')")
