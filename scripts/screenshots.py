"""The README's two screenshots, taken from the running app on the bundled sample data.

    python scripts/screenshots.py            # writes docs/img/run-page.png and docs/img/rollout-page.png

Starts `streamlit run app.py` on a free localhost port (benchmarks/app_server.py), opens the
Run page of the sample run and one rollout of it in Debian's Chromium (1280×800), waits until
Streamlit is idle and the content is drawn, and saves a PNG of each. Run it again after a change
to either page, so the README shows what a user sees.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from app_server import launch_chromium, streamlit_app  # noqa: E402

# A rollout of the sample run with a broken lineage, so the page shows a verdict worth reading.
ROLLOUT_QUERY = "src=sample:reasoning_stripped_by_template.json"
TIMEOUT_MS = 120_000


def wait_idle(page) -> None:
    """Streamlit has drawn the page: its main block is there and no script run is in progress."""
    page.wait_for_selector('[data-testid="stMain"]', timeout=TIMEOUT_MS)
    page.wait_for_function(
        """() => !document.querySelector('[data-testid="stStatusWidget"]')
                 && document.querySelectorAll('[data-testid="stSkeleton"]').length === 0""",
        timeout=TIMEOUT_MS)
    page.wait_for_function("""() => document.querySelector("[data-testid='stApp']")
                                        ?.getAttribute('data-test-script-state') === 'notRunning'""",
                           timeout=TIMEOUT_MS)
    page.wait_for_load_state("networkidle", timeout=TIMEOUT_MS)


def take(url: str, out: Path, wait_for: str) -> None:
    """A PNG of ``url`` once ``wait_for`` (a CSS selector) is on the page and Streamlit is idle."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(url, timeout=TIMEOUT_MS)
            page.locator(wait_for).first.wait_for(timeout=TIMEOUT_MS)
            wait_idle(page)
            page.screenshot(path=str(out))
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as log, streamlit_app(log=log) as url:
        # What says each page is drawn: the run's table (a scan's progress line also counts "rollouts"),
        # and the rollout's call tree.
        take(url, args.out / "run-page.png", ".st-key-run_table_box [data-testid='stDataFrame'] canvas")
        take(f"{url}/rollout?{ROLLOUT_QUERY}", args.out / "rollout-page.png",
             "[class*='st-key-tree-'] [data-testid='stVegaLiteChart'] svg path[aria-label]")
    print(f"wrote {args.out / 'run-page.png'} and {args.out / 'rollout-page.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
