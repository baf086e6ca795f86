"""Opening a run directory in the app against `tokencap scan --workers 2`, side by side.

    python benchmarks/bench_app_scan.py [--rollouts 2000] [--calls 20] [--runs 3] [--open-only]

Writes a synthetic run with `make_big_run.py` (default 2,000 rollouts of ~20 calls, about
65 MB) into benchmarks/out/, then, interleaved run for run (medians printed):

* ``tokencap scan RUN -o OUT --workers 2``: the whole command, wall time;
* the app: ``streamlit run app.py -- RUN`` with an empty scan cache (``TOKENCAP_CACHE_DIR``
  in a fresh temporary directory), Debian's Chromium (``/usr/bin/chromium``) via
  Playwright; from ``page.goto`` until the script has finished and the table's grid
  reports every row (``aria-rowcount``): the scan, the frame, the charts and the table;
* the app again in a new server with the same cache directory: the table of the same
  fingerprint is reused, so this is the page without the scan.

The server's start (before its health check answers) is not counted: a scan starts when
the first session opens the page.

Those two start a fresh server and a fresh Chromium each time, so they include the browser
fetching and compiling Streamlit's, plotly's and the grid's scripts. What a user does in a
running app is measured too, interleaved with the rest:

* the app already open: one server (started on the bundled sample run) and one browser
  that has the page open on it; the run's path is typed into the sidebar's "or a run
  directory or scan table on this machine" and Enter pressed; from Enter until the grid
  reports every row. Before each open the scan cache is emptied and one file of the run
  gets a new mtime (its contents unchanged), so the server's own cache of the
  previous open (per fingerprint) does not answer: every open is a scan;
* from the command: ``tokencap app RUN`` started (an empty scan cache), Chromium launched
  at once (as the command would open the user's browser), the page loaded as soon as the
  server answers; from the command's start until every row is in the grid. `tokencap app`
  scans a big run beside its server, so the scan overlaps the server's start and the
  browser's first load. Against the same without that scan beside the server
  (``streamlit run app.py -- RUN``: the page starts the scan when it first runs), and
  against `tokencap scan` from its start (the first figure).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
sys.path[:0] = [str(REPO), str(HERE)]

from app_server import (  # noqa: E402
    AppDidNotStart, free_port, launch_chromium, stop_server, streamlit_app, wait_until_serving)


def cli_scan(run: Path, out: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tokencap", "scan", str(run), "-o", str(out), "--workers", "2"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir(),
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    return time.perf_counter() - start


def open_in_app(playwright, run: Path, rows: int, cache: Path) -> float:
    log = tempfile.TemporaryFile()
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(streamlit_app(str(run), log=log, env={"TOKENCAP_CACHE_DIR": str(cache)}))
        except AppDidNotStart:
            log.seek(0)
            raise RuntimeError("streamlit did not start:\n" + log.read().decode(errors="replace")) from None
        browser = launch_chromium(playwright)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
            start = time.perf_counter()
            page.goto(url)
            page.wait_for_function(
                """(n) => {
                    const app = document.querySelector("[data-testid='stApp']");
                    const grid = document.querySelector("[data-testid='stDataFrame'] [aria-rowcount]");
                    return app && app.getAttribute('data-test-script-state') === 'notRunning'
                        && grid && grid.getAttribute('aria-rowcount') === String(n + 1);
                }""", arg=rows, timeout=600_000, polling=100)
            return time.perf_counter() - start
        finally:
            browser.close()


SETTLE = 3.0
"""Seconds of quiet around an open in the app already open: the page asks for a spare child
scan 1.5 s after drawing a run (`tokencap.run.child.keep_spare_soon`), which then takes about
half a second of CPU; the pause keeps that out of the command line's timing beside it."""

ALL_ROWS = """(n) => {
    const app = document.querySelector("[data-testid='stApp']");
    const grid = document.querySelector("[data-testid='stDataFrame'] [aria-rowcount]");
    return app && app.getAttribute('data-test-script-state') === 'notRunning'
        && grid && grid.getAttribute('aria-rowcount') === String(n + 1);
}"""


class OpenApp:
    """One server on the sample run and one browser page on it: the app a user already has open."""

    def __init__(self, playwright, cache: Path, stack: contextlib.ExitStack) -> None:
        self.cache = cache
        self.log = stack.enter_context(tempfile.TemporaryFile())
        try:
            self.url = stack.enter_context(streamlit_app(log=self.log, env={"TOKENCAP_CACHE_DIR": str(cache)}))
        except AppDidNotStart:
            self.log.seek(0)
            raise RuntimeError("streamlit did not start:\n" + self.log.read().decode(errors="replace")) from None
        browser = launch_chromium(playwright)
        stack.callback(browser.close)
        self.page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
        from tokencap.run import scan_table
        from tokencap.services.run_sources import sample_run_path

        self.sample_rows = scan_table(sample_run_path(REPO), workers=1).num_rows

    def open(self, run: Path, rows: int) -> float:
        page = self.page
        page.goto(self.url)  # the sample run, not timed: the app as the user has it open
        page.wait_for_function(ALL_ROWS, arg=self.sample_rows, timeout=600_000, polling=100)
        time.sleep(SETTLE)  # a user reads the page before typing; the page's spare scan is ready by then
        shutil.rmtree(self.cache, ignore_errors=True)
        touched = next(f for f in sorted(run.iterdir()) if f.suffix == ".jsonl")
        os.utime(touched, ns=(time.time_ns(), time.time_ns()))  # a new fingerprint: the server's cache misses
        box = page.get_by_role("textbox", name="or a run directory or scan table on this machine")
        box.fill(str(run))
        start = time.perf_counter()
        box.press("Enter")
        page.wait_for_function(ALL_ROWS, arg=rows, timeout=600_000, polling=50)
        took = time.perf_counter() - start
        time.sleep(SETTLE)  # the next spare starts after the page is drawn: not during the next timing
        return took


def command_to_table(playwright, command: list[str], port: int, rows: int, cache: Path) -> float:
    """From starting ``command`` (a server on ``port``) until the page shows every row, in a new Chromium."""
    env = {**os.environ, "TOKENCAP_CACHE_DIR": str(cache), "STREAMLIT_SERVER_HEADLESS": "true",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false", "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryFile() as log:
        start = time.perf_counter()
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tempfile.gettempdir())
        try:
            browser = launch_chromium(playwright)
            try:
                url = f"http://localhost:{port}"
                wait_until_serving(server, url, log)
                page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
                page.goto(url)
                page.wait_for_function(ALL_ROWS, arg=rows, timeout=600_000, polling=50)
                return time.perf_counter() - start
            finally:
                browser.close()
        finally:
            stop_server(server, grace=15)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--open-only", action="store_true",
                        help="only the command line and the app already open (the issue's figure), interleaved")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    import pyarrow.parquet as pq

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "tokencap")], check=True)
    OUT.mkdir(exist_ok=True)
    run = OUT / f"run-{args.rollouts}x{args.calls}"
    if not run.exists():
        subprocess.run([sys.executable, str(HERE / "make_big_run.py"), str(run), "--rollouts", str(args.rollouts),
                        "--calls", str(args.calls)], check=True)
    table = OUT / "bench_app_scan.parquet"
    cli_scan(run, table)  # page cache warm for both
    rows = pq.read_metadata(table).num_rows
    work = Path(tempfile.mkdtemp(prefix="tokencap-app-scan-"))
    cli, warm, cold, cached, launched, unlaunched = [], [], [], [], [], []
    load = os.getloadavg()[0]
    try:
        with sync_playwright() as playwright, contextlib.ExitStack() as stack:
            app = OpenApp(playwright, work / "open-app-cache", stack)
            app.open(run, rows)  # the server's and the browser's first use of every element, not counted
            for i in range(args.runs):
                cli.append(cli_scan(run, table))
                warm.append(app.open(run, rows))
                if args.open_only:
                    print(f"  run {i + 1}: tokencap scan --workers 2 {cli[-1]:.2f} s, open app (path typed) "
                          f"{warm[-1]:.2f} s", flush=True)
                    continue
                cache = work / f"cache{i}"
                cold.append(open_in_app(playwright, run, rows, cache))
                cached.append(open_in_app(playwright, run, rows, cache))
                port = free_port()
                launched.append(command_to_table(
                    playwright, [sys.executable, "-m", "tokencap", "app", str(run), "--port", str(port)], port, rows,
                    work / f"launched{i}"))
                port = free_port()
                unlaunched.append(command_to_table(
                    playwright, [sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"), "--server.port",
                                 str(port), "--server.address", "localhost", "--", str(run)], port, rows,
                    work / f"unlaunched{i}"))
                print(f"  run {i + 1}: tokencap scan --workers 2 {cli[-1]:.2f} s, open app (path typed) "
                      f"{warm[-1]:.2f} s, fresh server+browser (scan) {cold[-1]:.2f} s, "
                      f"(cached table) {cached[-1]:.2f} s, tokencap app RUN from its start {launched[-1]:.2f} s, "
                      f"streamlit run app.py -- RUN from its start {unlaunched[-1]:.2f} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    c, w = statistics.median(cli), statistics.median(warm)
    print(f"{run.name} ({rows:,} rollouts), median of {args.runs}, load average {load:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end:")
    print(f"  tokencap scan --workers 2                : {c:6.2f} s")
    print(f"  app already open, the run's path typed   : {w:6.2f} s  ({w / c:.2f}x the command line)")
    if args.open_only:
        return 0
    a, k = statistics.median(cold), statistics.median(cached)
    print(f"  fresh server and browser, open the run   : {a:6.2f} s  ({a / c:.2f}x the command line)")
    print(f"  fresh server and browser, cached table   : {k:6.2f} s  (the page without the scan: server's first "
          "run, a cold browser, charts, table)")
    t, u = statistics.median(launched), statistics.median(unlaunched)
    print(f"  tokencap app RUN, from the command       : {t:6.2f} s  ({t / c:.2f}x the command line; the scan beside "
          "the server)")
    print(f"  streamlit run app.py -- RUN, from its start: {u:6.2f} s  ({u / c:.2f}x; the page starts the scan)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
