"""Time the Rollout page in a real browser (Streamlit + Debian's Chromium via Playwright).

Generates a linear 300-call full-prompt snapshot (about 85 MB, as bench_build.py does) into
a temporary directory, starts `streamlit run app.py -- SNAPSHOT` and measures, at 1280x800:

* first render: from opening the page on a freshly started server (nothing cached) until
  the call tree is drawn and the selected call's detail is shown;
* a click on a tree node until that call's detail is shown;
* every tab switch (Call tree -> Loss mask -> Verdicts -> Export -> Compare -> Call tree),
  each until the new tab's content is drawn (twice: the first visit, then a second one);
* an 85 MB download: from the click on "Build result JSON" until the browser's download
  starts (and until it is complete); not with --delta.

    python benchmarks/bench_app_browser.py            # 5 runs, medians
    python benchmarks/bench_app_browser.py --runs 3 --calls 300
    python benchmarks/bench_app_browser.py --delta --calls 1500   # the long delta rollout of the tests

Figures are wall-clock medians of the runs; every run of "first render" starts a new server.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

sys.path.insert(0, str(HERE))
from app_server import CHROMIUM, AppDidNotStart, launch_chromium, streamlit_app  # noqa: E402


@contextmanager
def server(snapshot: Path, log: Path):
    with open(log, "ab") as out:
        try:
            with streamlit_app(str(snapshot), log=out) as url:
                yield url
        except AppDidNotStart as exc:
            raise SystemExit(f"{exc}; see {log}") from None


NODE_XY = """(key) => {
    const gd = document.querySelector('[class*="st-key-tree-"] .js-plotly-plot');
    gd.scrollIntoView({block: 'center'});
    for (const trace of gd._fullData) {
        if (!trace.customdata || trace.mode !== 'markers') continue;
        for (let i = 0; i < trace.customdata.length; i++) {
            const cd = trace.customdata[i];
            if ((Array.isArray(cd) ? cd[0] : cd) === key) {
                const L = gd._fullLayout, r = gd.getBoundingClientRect();
                return [r.left + L._size.l + L.xaxis.l2p(trace.x[i]), r.top + L._size.t + L.yaxis.l2p(trace.y[i])];
            }
        }
    }
    return null; }"""


TAB_DRAWN = {  # what shows that a tab's content was drawn
    "Loss mask": lambda page: page.locator('[class*="st-key-mask_strip"] .js-plotly-plot').first,
    "Verdicts": lambda page: page.get_by_text("Metrics (as tokencap build reports them)").first,
    "Export": lambda page: page.get_by_text("Every loaded rollout", exact=True),
    "Compare": lambda page: page.get_by_text("What changes from A to B").first,
    "Call tree": lambda page: page.locator('[class*="st-key-tree-"] .js-plotly-plot').first,
}


def measure(snapshot: Path, runs: int, workdir: Path, calls: int = 300, download: bool = True) -> dict[str, list[float]]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=120_000)
    times: dict[str, list[float]] = {"first render": [], "click on a node": []}
    for visit in ("first", "second"):
        times.update({f"tab -> {name} ({visit})": [] for name in TAB_DRAWN})
    if download:
        times.update({"85 MB download start": [], "85 MB download complete": []})
    log = workdir / "streamlit.log"
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            for run in range(runs):
                with server(snapshot, log) as url:
                    page = browser.new_context(viewport={"width": 1280, "height": 800},
                                               accept_downloads=True).new_page()
                    page.set_default_timeout(120_000)
                    start = time.perf_counter()
                    page.goto(url)
                    expect(page.locator('[class*="st-key-tree-"] .js-plotly-plot .scatterlayer .point').first
                           ).to_be_attached()
                    expect(page.get_by_text(f"call-{calls - 1:05d} — On the delivered main chain")).to_be_visible()
                    times["first render"].append(time.perf_counter() - start)

                    call = f"call-{max(calls - 10 - run, 0):05d}"  # a node in the zoomed window
                    x, y = page.evaluate(NODE_XY, f"call:{call}")
                    page.mouse.move(x, y)
                    start = time.perf_counter()
                    page.mouse.click(x, y)
                    expect(page.get_by_text(f"{call} — On the delivered main chain")).to_be_visible()
                    times["click on a node"].append(time.perf_counter() - start)

                    for visit in ("first", "second"):
                        for name, drawn in TAB_DRAWN.items():
                            start = time.perf_counter()
                            page.get_by_role("tab", name=name).click()
                            expect(drawn(page)).to_be_visible()
                            times[f"tab -> {name} ({visit})"].append(time.perf_counter() - start)
                    if not download:
                        page.context.close()
                        print(f"run {run + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()),
                              flush=True)
                        continue

                    page.get_by_role("tab", name="Export").click()
                    button = page.get_by_role("button", name="Build result JSON", exact=True)
                    expect(button).to_be_visible()
                    start = time.perf_counter()
                    with page.expect_download(timeout=300_000) as info:
                        button.click()
                    times["85 MB download start"].append(time.perf_counter() - start)
                    info.value.path()
                    times["85 MB download complete"].append(time.perf_counter() - start)
                    page.context.close()
                print(f"run {run + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()), flush=True)
        finally:
            browser.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--delta", action="store_true",
                        help="a delta-prompt rollout with short turns (20 tool, 10 generated tokens a call), "
                             "as the long-rollout tests use; no download is measured")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is not installed")
    with tempfile.TemporaryDirectory(prefix="tokencap-bench-") as tmp:
        work = Path(tmp)
        snapshot = work / f"linear{args.calls}_{'delta' if args.delta else 'full'}.json"
        print(f"generating {snapshot.name} ...", flush=True)
        spec = {"n_calls": args.calls, **({"tool_tokens": 20, "gen_tokens": 10, "delta": True} if args.delta else {})}
        subprocess.run([sys.executable, str(HERE / "bench_build.py"), "--generate", str(snapshot),
                        json.dumps(spec)], check=True)
        print(f"{snapshot.stat().st_size / 1e6:.1f} MB; {args.runs} runs at 1280x800", flush=True)
        times = measure(snapshot, args.runs, work, args.calls, download=not args.delta)
    print("medians:")
    for name, values in times.items():
        print(f"  {name:<26} {statistics.median(values):6.2f} s   (runs: {', '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main()
