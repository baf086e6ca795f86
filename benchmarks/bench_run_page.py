"""How fast the Run page is on a 100,000-row run, measured in a real Chromium.

    python benchmarks/bench_run_page.py [--rows 100000] [--repeat 7]

Writes a synthetic scan table (``tests/synth_run.py``: every column consistent, a few
percent of each failure) to parquet, starts ``streamlit run app.py -- TABLE.parquet`` on
a free localhost port and drives Debian's Chromium (``/usr/bin/chromium``) with
Playwright. An interaction counts as done when the app's script has finished
(``stApp[data-test-script-state=notRunning]``) and the table's grid reports the expected
row count (``aria-rowcount``): the browser has received and laid out every row.

* cold load: the first session after the server starts (reads the parquet, builds the
  frame, renders);
* first render: a new session opening the Run page on the cached run, in a new browser
  (nothing cached: Streamlit's, plotly's and the grid's scripts are fetched and compiled)
  and in a browser that has opened the app before;
* filter change: a click on a chart bar (status ``max_output_tokens``) and a click that
  clears it again, then the verdict control; from the click until the table is redrawn.

It also times the views alone, without Streamlit (building the frame; one filter
change: masks, sort, every chart's bars, the table frame), and repeats everything for a
``--baseline``-row run, to show what does not depend on the run's size. Medians of
``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "benchmarks")]

import pyarrow.parquet as pq  # noqa: E402

from app_server import CHROMIUM, AppDidNotStart, launch_chromium, streamlit_app  # noqa: E402
from synth_run import synthetic_scan_table  # noqa: E402
from tokencap.views.run import data as rd  # noqa: E402
from tokencap.views.run.bars import chart_bars  # noqa: E402
from tokencap.views.run.filters import RunFilter, filter_masks, passing, sorted_rows  # noqa: E402
from tokencap.views.run.frame import run_frame  # noqa: E402



def views_only(table, repeat: int) -> dict[str, float]:
    build = []
    for _ in range(repeat):
        start = time.perf_counter()
        frame = run_frame(table)
        build.append(time.perf_counter() - start)
    changes = []
    filters = [RunFilter(statuses=("max_output_tokens",)), RunFilter(),
               RunFilter(verdict="masked", sort="n_calls", descending=True), RunFilter(query="12")]
    for _ in range(repeat):
        for flt in filters:
            start = time.perf_counter()
            masks = filter_masks(frame, flt)
            rows = sorted_rows(frame, passing(frame, masks), flt)
            chart_bars(frame, masks)
            rd.table_frame(frame, rows)
            changes.append(time.perf_counter() - start)
    return {"frame": statistics.median(build), "change": statistics.median(changes)}


def _idle_with_rows(page, rows: int, timeout: float = 60_000) -> None:
    page.wait_for_function(
        """(n) => {
            const app = document.querySelector("[data-testid='stApp']");
            const grid = document.querySelector("[data-testid='stDataFrame'] [aria-rowcount]");
            return app && app.getAttribute('data-test-script-state') === 'notRunning'
                && grid && grid.getAttribute('aria-rowcount') === String(n + 1);
        }""", arg=rows, timeout=timeout, polling="raf")


def _bar(page, dimension: str, key: str) -> tuple[float, float]:
    box = page.evaluate(
        """([dimension, key]) => {
            for (const gd of document.querySelectorAll('.js-plotly-plot')) {
                const t = gd._fullData && gd._fullData[0];
                if (!t || !t.customdata) continue;
                const i = t.customdata.findIndex(cd => cd[0] === dimension && cd[1] === key);
                if (i < 0) continue;
                const r = gd.querySelectorAll('.trace.bars .point')[i].querySelector('path').getBoundingClientRect();
                return [r.left + r.width / 2, r.top + r.height / 2];
            }
            return null;
        }""", [dimension, key])
    if box is None:
        raise RuntimeError(f"bar {dimension}={key} not drawn")
    return box[0], box[1]


def in_browser(path: Path, total: int, by_status: int, masked: int, repeat: int) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    log = tempfile.TemporaryFile()
    out: dict[str, list[float]] = {"cold load": [], "first render, new browser": [],
                                   "first render, browser cache warm": [], "filter change (bar click)": [],
                                   "filter change (clear by click)": [], "filter change (verdict control)": []}
    stack = contextlib.ExitStack()
    try:
        try:
            url = stack.enter_context(streamlit_app(str(path), log=log))
        except AppDidNotStart:
            log.seek(0)
            raise RuntimeError("streamlit did not start:\n" + log.read().decode(errors="replace")) from None
        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            try:
                for i in range(repeat + 1):
                    context = browser.new_context(viewport={"width": 1280, "height": 800})
                    page = context.new_page()
                    start = time.perf_counter()
                    page.goto(url)
                    _idle_with_rows(page, total, timeout=300_000)
                    out["cold load" if i == 0 else "first render, new browser"].append(time.perf_counter() - start)
                    context.close()
                # A new session (tab) in a browser that has loaded the app before: its scripts
                # (Streamlit, plotly.js, the grid) come from the browser's caches.
                context = browser.new_context(viewport={"width": 1280, "height": 800})
                context.new_page().goto(url)
                for _ in range(repeat):
                    page = context.new_page()
                    start = time.perf_counter()
                    page.goto(url)
                    _idle_with_rows(page, total, timeout=300_000)
                    out["first render, browser cache warm"].append(time.perf_counter() - start)
                    page.close()
                context.close()
                context = browser.new_context(viewport={"width": 1280, "height": 1000})
                page = context.new_page()
                page.goto(url)
                _idle_with_rows(page, total)
                for _ in range(repeat):
                    for name, rows in (("filter change (bar click)", by_status),
                                       ("filter change (clear by click)", total)):
                        page.wait_for_timeout(300)  # let plotly attach its handlers (not timed)
                        x, y = _bar(page, "statuses", "max_output_tokens")
                        page.mouse.move(x, y)
                        start = time.perf_counter()
                        page.mouse.click(x, y)
                        _idle_with_rows(page, rows)
                        out[name].append(time.perf_counter() - start)
                    control = page.locator("[data-testid='stButtonGroup']").get_by_text("masked", exact=True)
                    control.scroll_into_view_if_needed()
                    start = time.perf_counter()
                    control.click()
                    _idle_with_rows(page, masked)
                    out["filter change (verdict control)"].append(time.perf_counter() - start)
                    control.click()  # off again (not timed)
                    _idle_with_rows(page, total)
                    page.mouse.wheel(0, -10_000)
            finally:
                browser.close()
    finally:
        stack.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--baseline", type=int, default=100,
                        help="also measure a run of this many rows (what does not depend on the run's size); 0: skip")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing: apt-get install chromium", file=sys.stderr)
        return 1
    sizes = [args.rows] + ([args.baseline] if args.baseline else [])
    results = {}
    for rows in sizes:
        table = synthetic_scan_table(rows, seed=1)
        frame = run_frame(table)
        by_status = int((frame["status"] == "max_output_tokens").sum())
        masked = int((frame["verdict"] == "masked").sum())
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "run.parquet"
            pq.write_table(table, path)
            size = path.stat().st_size
            results[rows] = (size, views_only(table, args.repeat),
                             in_browser(path, rows, by_status, masked, args.repeat))
    size, views, browser = results[args.rows]
    print(f"Run page, {args.rows:,}-row scan table ({size / 1e6:.1f} MB parquet), median of {args.repeat} "
          f"(range), {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    header = f"| measure | {args.rows:,} rows |" + (f" {args.baseline:,} rows |" if args.baseline else "")
    print(header)
    print("|---|---|" + ("---|" if args.baseline else ""))

    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} s ({min(values):.2f}–{max(values):.2f})"

    for name, values in browser.items():
        line = f"| {name} | {cell(values)} |"
        if args.baseline:
            line += f" {cell(results[args.baseline][2][name])} |"
        print(line)
    line = f"| views only: build the frame | {views['frame'] * 1000:.0f} ms |"
    print(line + (f" {results[args.baseline][1]['frame'] * 1000:.0f} ms |" if args.baseline else ""))
    line = f"| views only: one filter change (masks, sort, 6 charts' counts, table frame) | {views['change'] * 1000:.0f} ms |"
    print(line + (f" {results[args.baseline][1]['change'] * 1000:.0f} ms |" if args.baseline else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
