"""Opening a run directory in the app against `tokencap scan --workers 2`, side by side.

    python benchmarks/bench_app_scan.py [--rollouts 2000] [--calls 20] [--runs 3]

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

from app_server import AppDidNotStart, launch_chromium, streamlit_app  # noqa: E402


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
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
    cli, cold, cached = [], [], []
    try:
        with sync_playwright() as playwright:
            for i in range(args.runs):
                cli.append(cli_scan(run, table))
                cache = work / f"cache{i}"
                cold.append(open_in_app(playwright, run, rows, cache))
                cached.append(open_in_app(playwright, run, rows, cache))
                print(f"  run {i + 1}: tokencap scan --workers 2 {cli[-1]:.2f} s, app (scan) {cold[-1]:.2f} s, "
                      f"app (cached table) {cached[-1]:.2f} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    c, a, k = statistics.median(cli), statistics.median(cold), statistics.median(cached)
    print(f"{run.name} ({rows:,} rollouts), median of {args.runs}:")
    print(f"  tokencap scan --workers 2      : {c:6.2f} s")
    print(f"  app, open the directory        : {a:6.2f} s  ({a / c:.2f}x the command line)")
    print(f"  app, reopen (cached scan table): {k:6.2f} s  (the page without the scan: server's first run, "
          "browser, charts, table)")
    print(f"  app, the scan's share (open - reopen): {a - k:6.2f} s  ({(a - k) / c:.2f}x the command line)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
