"""Every interaction of the app, timed in a real browser (Streamlit + Debian's Chromium via Playwright).

The goals of issue 20 (a click <= 0.5 s; a first render <= 3 s, <= 4 s for the big rollouts;
a 100,000-row table rendering <= 4 s, filtering <= 0.5 s, the server under 600 MiB after
20 filter cycles), each measured at 1280x800 in headless Chromium, median of ``--runs``:

* ``run``: the Run page on the bundled sample run -- first render in a fresh browser (a new
  server each run, started as that tree's ``tokencap app`` starts it: warmed up where it does); a bar click that filters the table, and one that clears it; a row of the
  filtered table opening its rollout, Next and Previous (each until the rollout's heading and its
  call tree are drawn); every tab of that rollout; the
  rollout's link opened in a new tab of the same browser; "Back to the run". The clicks begin once
  the chunks the page loads in the background are in (as while a reader reads the page); the
  worst case, a row clicked in a new tab as soon as the Run page is drawn, is timed on its own;
* ``long``: the 1,500-call delta rollout of the tests; ``big``: the 300-call full-prompt
  rollout (about 85 MB) of bench_build.py -- first render on a new server, a click on a
  tree node, every tab (a first visit);
* ``table``: a 100,000-row scan table (tests/synth_run.py) -- first render until the table
  says every row and has painted its first screen, a bar click filtering it and one clearing it, and the server's resident
  memory (VmRSS, and its peak VmHWM) after 20 more filter cycles.

An interaction ends when the content that says it is done is drawn (a heading, a count, a
chart of the new tab, the table's count of rows and a rollout id only the expected rows show,
painted on the grid's canvas) and the app's script is idle
(``stApp[data-test-script-state=notRunning]``). Beside each wall time the benchmark prints
where it went: the server's CPU time over the same interval (``/proc/PID/stat``: the script
run) and the time the page's main thread was busy (Chromium's ``TaskDuration`` from the
DevTools protocol: receiving, laying out, drawing); the rest is waiting (and other processes).

    python benchmarks/bench_app_browser.py                      # this tree, 5 runs, medians
    python benchmarks/bench_app_browser.py --compare main       # main's code and this tree, side by side
    python benchmarks/bench_app_browser.py --only run,table --runs 3
    python benchmarks/bench_app_browser.py --download           # also the 85 MB download of the big rollout

``--compare REV`` extracts REV's files (``git archive``) into a temporary directory and runs
every measurement on both trees, interleaved run by run, so both columns meet the same load
(REV may also be a directory holding a tree). To keep editing while it runs, run a copy:
``git archive HEAD | tar -x -C /tmp/head && python /tmp/head/benchmarks/bench_app_browser.py
--compare /tmp/before`` (with REV extracted into /tmp/before the same way).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(HERE)]

from app_server import CHROMIUM, free_port, launch_chromium, stop_server, wait_until_serving  # noqa: E402

CLICK = 0.5
GOALS = {  # interaction name prefix -> goal (seconds), as issue 20 sets them
    "first render (sample run)": 3.0, "rollout link in a new tab": 3.0, "first render (1,500 calls)": 4.0,
    "first render (85 MB)": 4.0, "first render (100,000 rows)": 4.0,
}
MEMORY_GOAL_MIB = 600
TIMEOUT = 180_000
CYCLES = 20


# --------------------------------------------------------------------------- servers and conditions


@dataclass
class Server:
    url: str
    pid: int

    def cpu(self) -> float:
        """The server's CPU seconds so far (user + system)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def memory_mib(self) -> tuple[float, float]:
        """(VmRSS, VmHWM) of the server, MiB."""
        status = dict(line.split(":", 1) for line in Path(f"/proc/{self.pid}/status").read_text().splitlines()
                      if ":" in line)
        return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


@contextlib.contextmanager
def app_server(app_dir: Path, *args: str, log: Path, cache: Path) -> Iterator[Server]:
    """`streamlit run app.py [-- ARGS]` of the tree ``app_dir`` on a free port, scans cached in ``cache``."""
    port = free_port()
    env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false", "PYTHONPATH": str(app_dir),
           "TOKENCAP_CACHE_DIR": str(cache)}
    command = [sys.executable, "-m", "streamlit", "run", str(app_dir / "app.py"), "--server.port", str(port),
               "--server.address", "127.0.0.1", "--server.headless", "true"]
    # As that tree's `tokencap app` starts its server: warmed up (its script run once) before anyone visits.
    warm = any("def warm_up_app(" in path.read_text(encoding="utf-8")  # cli.py until it became a package
               for path in (app_dir / "tokencap" / "cli.py", app_dir / "tokencap" / "cli" / "server.py") if path.exists())
    if warm:
        command += ["--server.scriptHealthCheckEnabled", "true"]
    if args:
        command += ["--", *args]
    with open(log, "ab") as out:
        proc = subprocess.Popen(command, cwd=app_dir, stdout=out, stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_serving(proc, url, out)
            if warm:
                with urllib.request.urlopen(f"{url}/_stcore/script-health-check", timeout=TIMEOUT / 1000):
                    pass
            yield Server(url, proc.pid)
        finally:
            stop_server(proc)


IDLE = "(() => { const a = document.querySelector(\"[data-testid='stApp']\");" \
       " return !!a && a.getAttribute('data-test-script-state') === 'notRunning'; })()"

# What says an interaction is done, as page-side predicates checked at every animation frame
# (``polling="raf"``): within a frame of being drawn. Playwright's locator assertions poll with
# a backoff (0, 20, 50, 100, 100, then every 500 ms), so content drawn at 0.3 s is seen at
# 0.77 s, and each poll computes roles, accessible names and styles over the whole page,
# which the page's busy time would count. These predicates touch only text nodes and one
# element's boxes.
_VISIBLE = "(e) => !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden'"


def text_shown(text: str, exact: bool = False) -> tuple[str, list]:
    """Some visible element's own text holds ``text`` (is it, trimmed, when ``exact``)."""
    return (f"""([t, exact]) => {{ const visible = {_VISIBLE};
        const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT); let n;
        while ((n = walk.nextNode())) {{
            const s = n.nodeValue.replace(/\\s+/g, ' ');
            if ((exact ? s.trim() === t : s.includes(t)) && visible(n.parentElement)) return true;
        }}
        return false; }}""", [text, exact])


def any_text_shown(*texts: str) -> tuple[str, list]:
    """Some visible element's own text holds one of ``texts``."""
    one, _ = text_shown("")
    return (f"""([ts]) => ts.some(t => ({one})([t, false]))""", [list(texts)])


def heading_shown(name: str) -> tuple[str, list]:
    """A visible heading whose text is ``name``."""
    return (f"""([t]) => {{ const visible = {_VISIBLE};
        return [...document.querySelectorAll('h1, h2, h3, h4, h5, h6')].some(
            h => h.textContent.trim() === t && visible(h)); }}""", [name])


def css_shown(selector: str) -> tuple[str, list]:
    """A visible element matching ``selector``."""
    return (f"([s]) => ({_VISIBLE})(document.querySelector(s))", [selector])


def all_shown(*selectors: str) -> tuple[str, list]:
    """A visible element matching each of ``selectors``."""
    return (f"([ss]) => ss.every(s => ({_VISIBLE})(document.querySelector(s)))", [list(selectors)])


def settle(page, shown: tuple[str, list] | None = None, js: str | None = None, arg=None) -> None:
    """Wait until ``shown`` (a predicate and its argument, see `text_shown`) and ``js`` hold, and the
    app's script is idle, all checked at each animation frame."""
    checks = [(f"({cond})(arg[{i}])", a) for i, (cond, a) in enumerate(c for c in (shown, (js, arg)) if c and c[0])]
    body = " && ".join([c for c, _ in checks] + [IDLE])
    page.wait_for_function(f"(arg) => {body}", arg=[a for _, a in checks], timeout=TIMEOUT, polling="raf")


# The run's table is a canvas (glide-data-grid): it is drawn when its canvas has painted the rows' text.
# Its hidden accessibility table (``aria-rowcount``) follows 200 ms after each change (a debounce of the
# grid's), so waiting for it counted 0.2-0.3 s the reader does not wait; the benchmark before
# 2026-12-04 did. This script, added to every page, notes when each text was last painted on any canvas.
PAINT_LOG = """(() => {
  window.__tokencapPainted = new Map(); window.__tokencapSince = 0;
  for (const C of [window.CanvasRenderingContext2D, window.OffscreenCanvasRenderingContext2D]) {
    if (!C) continue;
    const fill = C.prototype.fillText;
    C.prototype.fillText = function (text, ...rest) {
      window.__tokencapPainted.set(String(text), performance.now());
      return fill.call(this, text, ...rest);
    };
  }
})();"""


def new_context(browser, **options):
    """A 1280x800 browser context whose pages log what their canvases paint (`PAINT_LOG`)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, **options)
    context.add_init_script(PAINT_LOG)
    return context


def grid_rows(page, painted: str) -> None:
    """The run's table has painted ``painted`` on its canvas since the interaction began (a rollout id
    only the expected rows show on its first screen; the caller checks the heading's count of rows) and
    the script is idle."""
    settle(page, js="""([text]) => (window.__tokencapPainted.get(text) ?? -1) >= window.__tokencapSince
                         && !!document.querySelector(".st-key-run_table_box [data-testid='stDataFrame'] canvas")""",
           arg=[painted])


# The call tree as drawn, or null: the Vega-Lite chart's SVG once its nodes are drawn (each a path named by
# its key; a new SVG at each embed), or in a tree from before 2026-12-06 the plotly chart once its points are.
TREE_NOW = f"""(() => {{
    const svg = document.querySelector('[class*="st-key-tree-"] [data-testid="stVegaLiteChart"] svg.marks');
    if (svg) return svg.querySelector('path[aria-label]') && ({_VISIBLE})(svg) ? svg : null;
    const gd = document.querySelector('[class*="st-key-tree-"] .js-plotly-plot');
    return gd && gd.querySelector('.main-svg .scatterlayer .point') && ({_VISIBLE})(gd) ? gd : null; }})"""

# At the start of each interaction: the paints before it do not count, nor the call tree drawn before it.
MARK_START = f"""() => {{ window.__tokencapSince = performance.now(); window.__tokencapOldTree = {TREE_NOW}(); }}"""

# A rollout opened (a row, Next, Previous) is drawn when its heading and its call tree are: a call tree
# other than the one on the page when the interaction began, drawn.
NEW_TREE = f"""() => {{ const tree = {TREE_NOW}(); return !!tree && tree !== window.__tokencapOldTree; }}"""
TREE_DRAWN = f"() => !!{TREE_NOW}()"


def rollout_shown(page, rollout_id: str) -> None:
    """The Rollout page of ``rollout_id``: its heading and its call tree (see `NEW_TREE`) drawn, the script idle."""
    settle(page, heading_shown(rollout_id), js=NEW_TREE)


def background_loaded(page) -> None:
    """In a tree from before 2026-12-06, whose Run page loaded plotly once drawn (``app_pages.run.chunks``:
    ~1 s of the main thread, once per browser tab): wait (untimed, up to 15 s) until it is in, as it is
    while a reader reads the page; the first click made before then waits for it, timed on its own ("row ->
    rollout, clicked as the Run page is drawn"). A tree that loads nothing ahead (its charts all Vega-Lite,
    whose code the Run page's own charts loaded) sets no ``__tokencapChunks``: given 3 s to show one."""
    try:
        page.wait_for_function("() => !!window.__tokencapChunks", timeout=3_000)
    except Exception:
        return
    page.wait_for_function("""() => { const c = window.__tokencapChunks;
        return Object.keys(c).length > 0 && Object.values(c).every(Boolean); }""", timeout=15_000)


VISIBLE_ROWS = 15  # the table's first screen: 560 px of 35 px rows


def table_marker(frame, flt, other) -> str:
    """A rollout id on the first screen of the table filtered by ``flt`` that the first screen under the
    filter ``other`` does not show: seen painted, the table shows ``flt``'s rows."""
    from tokencap.views.run import data as rd
    from tokencap.views.run.filters import filter_masks, passing, sorted_rows

    def first(f):
        rows = sorted_rows(frame, passing(frame, filter_masks(frame, f)), f)
        return [str(v) for v in rd.table_frame(frame, rows[:VISIBLE_ROWS])["rollout"]]

    others = set(first(other))
    return next(t for t in first(flt) if t not in others)


def click_at(page, locator) -> Callable[[], None]:
    """A click on ``locator``'s middle as a user makes it, once it is actionable: found and checked
    now (Playwright's actionability waits take frames of their own), clicked when called."""
    locator.wait_for(state="visible", timeout=TIMEOUT)
    locator.scroll_into_view_if_needed()
    box = locator.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    return lambda: page.mouse.click(x, y)


class Timer:
    """Wall time, the server's CPU time and the page's main-thread busy time (Chromium's
    ``TaskDuration``, through the DevTools protocol) of the interactions of one run of one tree."""

    def __init__(self, server: Server, out: dict[str, list[tuple[float, float, float]]]):
        self.server, self.out = server, out
        self.sessions: dict[int, object] = {}

    def _busy(self, page) -> float:
        if page is None:
            return 0.0
        session = self.sessions.get(id(page))
        if session is None:
            session = self.sessions[id(page)] = page.context.new_cdp_session(page)
            session.send("Performance.enable")
        metrics = session.send("Performance.getMetrics")["metrics"]
        return next(m["value"] for m in metrics if m["name"] == "TaskDuration")

    @contextlib.contextmanager
    def __call__(self, name: str, page=None):
        if page is not None and not page.is_closed() and page.url.startswith("http"):
            page.evaluate(MARK_START)
        busy, cpu, start = self._busy(page), self.server.cpu(), time.perf_counter()
        yield
        wall = time.perf_counter() - start
        self.out.setdefault(name, []).append((wall, self.server.cpu() - cpu, self._busy(page) - busy))


BAR_JS = """([dimension, key, scroll]) => {
    // The Run page's charts are Vega-Lite (SVG): the hit layer (the chart's last rect mark group) has a
    // path per key, described "LABEL: counts" (a mask reason's label is its key). Trees before them drew
    // plotly charts, each bar carrying [dimension, key] in its customdata: both are found.
    const place = (el) => { if (scroll) el.scrollIntoView({block: 'center'});
                            const r = el.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; };
    for (const chart of document.querySelectorAll(`[class*="st-key-run_chart-${dimension}-"] [data-testid=stVegaLiteChart]`)) {
        const groups = chart.querySelectorAll('svg g.mark-rect.role-mark');
        const hits = groups.length ? groups[groups.length - 1].querySelectorAll('path') : [];
        const hit = [...hits].find(p => (p.getAttribute('aria-label') || '').startsWith(key + ': '));
        if (hit) return place(hit);
    }
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
        const t = gd._fullData && gd._fullData[0];
        if (!t || !t.customdata) continue;
        const i = t.customdata.findIndex(cd => cd[0] === dimension && cd[1] === key);
        const point = i < 0 ? null : gd.querySelectorAll('.trace.bars .point')[i];
        if (point && point.querySelector('path')) {
            if (scroll) gd.scrollIntoView({block: 'center'});
            const r = point.querySelector('path').getBoundingClientRect();
            return [r.left + r.width / 2, r.top + r.height / 2];
        }
    }
    return null;
}"""


def _bar_xy(page, dimension: str, key: str) -> tuple[float, float]:
    """Scroll a Run-page chart's bar into view; the page coordinates of its middle."""
    xy = page.evaluate(BAR_JS, [dimension, key, True])
    if xy is None:
        raise RuntimeError(f"bar {dimension}={key} is not drawn")
    return xy[0], xy[1]


def bar_drawn(page, dimension: str, key: str) -> None:
    """Wait (at each animation frame) until a Run-page chart's bar is drawn: part of a first render."""
    page.wait_for_function(f"(a) => ({BAR_JS})([a[0], a[1], false]) !== null", arg=[dimension, key], timeout=TIMEOUT,
                           polling="raf")


def click_bar(page, dimension: str, key: str) -> None:
    bar_drawn(page, dimension, key)
    x, y = _bar_xy(page, dimension, key)
    page.mouse.move(x, y)
    page.mouse.click(x, y)


def row_at(page, position: int) -> Callable[[], None]:
    """A click on the checkbox of the ``position``-th row of the Run page's table (a canvas), located now
    (scrolling it into view and reading its box are round trips of their own: ~0.13 s that the
    benchmark before 2026-12-04 timed as part of the click), clicked when called."""
    grid = page.locator(".st-key-run_table_box [data-testid='stDataFrame']")
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    x, y = box["x"] + 16, box["y"] + 35 + 35 * position + 17
    page.mouse.move(x, y)
    return lambda: page.mouse.click(x, y)


TAB_DRAWN = {  # what shows that a Rollout tab's content was drawn
    # The strip's canvas (Vega-Lite since 2026-12-03; a plotly chart in a tree from before), and the whole
    # sequence's overview where the tab draws one (every tree before 2026-12-06; since, only while its
    # expander is open): sent in the same script run as the strip, so its box is there once the strip is.
    "Loss mask": (f"""() => {{ const visible = {_VISIBLE};
        const drawn = (box) => visible(document.querySelector(`.${{box}} canvas, [class*="${{box}}"] .js-plotly-plot`));
        return drawn('st-key-mask_strip')
               && (!document.querySelector('.st-key-mask_overview') || drawn('st-key-mask_overview')); }}""",
                  []),
    "Verdicts": text_shown("Metrics (as "),  # "Metrics (as `tokencap build` reports them)"
    "Compare": text_shown("What changes from A to B"),
    "Export": text_shown("Fixed trajectory", exact=True),
    "Call tree": (TREE_DRAWN, []),
}


def every_tab(page, timer: Timer, label: str) -> None:
    for name, drawn in TAB_DRAWN.items():
        click = click_at(page, page.get_by_role("tab", name=name))
        with timer(f"tab {name} ({label})", page):
            click()
            settle(page, drawn)


# --------------------------------------------------------------------------- the scenarios


@dataclass
class Inputs:
    work: Path
    sample_total: int = 0
    sample_reason: str = "multiple_chains"
    sample_filtered: int = 0
    sample_ids: tuple[str, ...] = ()  # the rollouts of the filtered table, in its order
    sample_all_ids: tuple[str, ...] = ()  # of the whole table
    long: Path | None = None
    big: Path | None = None
    table: Path | None = None
    table_rows: int = 0
    table_reason: str = "multiple_chains"
    table_filtered: int = 0
    sample_all_marker: str = ""  # rollout ids that show the table holds all rows / the filtered rows
    sample_filtered_marker: str = ""
    table_all_marker: str = ""
    table_filtered_marker: str = ""


SAMPLE_POSITION = 3


def scenario_run(browser, app_dir: Path, inp: Inputs, out, log: Path, cache: Path) -> None:
    n, k, reason, ids = inp.sample_total, inp.sample_filtered, inp.sample_reason, inp.sample_ids
    with app_server(app_dir, log=log, cache=cache) as server:
        timer = Timer(server, out)
        context = new_context(browser)
        page = context.new_page()
        page.set_default_timeout(TIMEOUT)
        counted = lambda shown: text_shown(f"{shown:,} of {n:,} rollouts")  # noqa: E731
        with timer("first render (sample run)", page):
            page.goto(server.url)
            settle(page, counted(n))
            grid_rows(page, inp.sample_all_marker)
            bar_drawn(page, "reasons", reason)
        background_loaded(page)
        with timer("bar click: filter", page):
            click_bar(page, "reasons", reason)
            settle(page, counted(k))
            grid_rows(page, inp.sample_filtered_marker)
        with timer("bar click: clear", page):
            click_bar(page, "reasons", reason)
            settle(page, counted(n))
            grid_rows(page, inp.sample_all_marker)
        page.evaluate(MARK_START)
        click_bar(page, "reasons", reason)
        settle(page, counted(k))
        grid_rows(page, inp.sample_filtered_marker)
        click = row_at(page, SAMPLE_POSITION)
        with timer("row -> rollout", page):
            click()
            rollout_shown(page, ids[SAMPLE_POSITION])
        click = click_at(page, page.get_by_role("button", name="Next"))
        with timer("next", page):
            click()
            rollout_shown(page, ids[SAMPLE_POSITION + 1])
        click = click_at(page, page.get_by_role("button", name="Previous"))
        with timer("previous", page):
            click()
            rollout_shown(page, ids[SAMPLE_POSITION])
        every_tab(page, timer, "sample rollout")
        page.wait_for_function(f"() => location.search.includes('rollout={ids[SAMPLE_POSITION]}')")
        link = page.url
        other = context.new_page()
        with timer("rollout link in a new tab", other):
            other.goto(link)
            settle(other, heading_shown(ids[SAMPLE_POSITION]))
            settle(other, TAB_DRAWN["Call tree"])
        other.close()
        click = click_at(page, page.get_by_role("link", name="Back to the run"))
        with timer("back to the run", page):
            click()
            settle(page, counted(k))
            grid_rows(page, ids[SAMPLE_POSITION])  # the row it came from, shown selected
        # The worst case: a row clicked as soon as the Run page is drawn, in a new tab (before 2026-12-06
        # plotly was not yet loaded then, and the Rollout page's call tree waited for it).
        eager = context.new_page()
        eager.set_default_timeout(TIMEOUT)
        eager.goto(server.url)
        settle(eager, counted(n))
        grid_rows(eager, inp.sample_all_marker)
        click = row_at(eager, SAMPLE_POSITION)
        with timer("row -> rollout, clicked as the Run page is drawn", eager):
            click()
            rollout_shown(eager, inp.sample_all_ids[SAMPLE_POSITION])
        context.close()


def scenario_rollout(browser, app_dir: Path, path: Path, calls: int, label: str, out, log: Path, cache: Path,
                     download: bool = False) -> None:
    from playwright.sync_api import expect

    with app_server(app_dir, str(path), log=log, cache=cache) as server:
        timer = Timer(server, out)
        context = new_context(browser, accept_downloads=True)
        page = context.new_page()
        page.set_default_timeout(TIMEOUT)
        with timer(f"first render ({label})", page):
            page.goto(server.url)
            # The selected call's detail (every tree before 2026-12-06), or the button standing for it (since).
            last = f"call-{calls - 1:05d}"
            settle(page, any_text_shown(f"{last} — On the delivered main chain", f"Show the detail of {last}"),
                   js=TREE_DRAWN)
        call = f"call-{calls - 10:05d}"  # a node of the zoomed window
        x, y = node_xy(page, f"call:{call}")
        page.mouse.move(x, y)
        with timer(f"node click ({label})", page):
            page.mouse.click(x, y)
            settle(page, text_shown(f"{call} — On the delivered main chain"))
        every_tab(page, timer, label)
        if download:
            page.get_by_role("tab", name="Export").click()
            button = page.get_by_role("button", name="Build result JSON", exact=True)
            expect(button).to_be_visible(timeout=TIMEOUT)
            with timer(f"download complete ({label})", page):
                with page.expect_download(timeout=300_000) as info:
                    button.click()
                info.value.path()
        context.close()


def node_xy(page, key: str) -> tuple[float, float]:
    """Page coordinates of the tree node ``key`` once it has stood at the same place for three frames
    (Streamlit may draw a chart again just after mounting it: a point aimed at before was clicked where it
    no longer was, and the click selected nothing)."""
    xy = page.wait_for_function(f"""(key) => {{
        const p = ({NODE_XY})(key), a = window.__tokencapAim;
        const same = !!p && !!a && a.key === key && a.x === p[0] && a.y === p[1];
        window.__tokencapAim = p && {{key, x: p[0], y: p[1], frames: same ? a.frames + 1 : 0}};
        return p && window.__tokencapAim.frames >= 3 ? p : null; }}""", arg=key, polling="raf", timeout=TIMEOUT)
    x, y = xy.json_value()
    return x, y


NODE_XY = """(key) => {
    // The Vega-Lite tree: the node's path, named by its key.
    const node = [...document.querySelectorAll('[class*="st-key-tree-"] [data-testid="stVegaLiteChart"] svg path[aria-label]')]
        .find(p => p.getAttribute('aria-label') === key);
    if (node) {
        node.scrollIntoView({block: 'center'});
        const r = node.getBoundingClientRect();
        return [r.left + r.width / 2, r.top + r.height / 2];
    }
    // A tree from before 2026-12-06: the plotly chart's point.
    const gd = document.querySelector('[class*="st-key-tree-"] .js-plotly-plot');
    if (!gd || !gd._fullData || !gd._fullLayout) return null;
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


def scenario_table(browser, app_dir: Path, inp: Inputs, out, log: Path, cache: Path, memory: dict) -> None:
    n, k, reason = inp.table_rows, inp.table_filtered, inp.table_reason
    counted = lambda shown: text_shown(f"{shown:,} of {n:,} rollouts")  # noqa: E731
    with app_server(app_dir, str(inp.table), log=log, cache=cache) as server:
        timer = Timer(server, out)
        context = new_context(browser)
        page = context.new_page()
        page.set_default_timeout(TIMEOUT)
        with timer(f"first render ({n:,} rows)", page):
            page.goto(server.url)
            settle(page, counted(n))
            grid_rows(page, inp.table_all_marker)
            bar_drawn(page, "reasons", reason)
        with timer(f"bar click: filter ({n:,} rows)", page):
            click_bar(page, "reasons", reason)
            settle(page, counted(k))
            grid_rows(page, inp.table_filtered_marker)
        with timer(f"bar click: clear ({n:,} rows)", page):
            click_bar(page, "reasons", reason)
            settle(page, counted(n))
            grid_rows(page, inp.table_all_marker)
        for _ in range(CYCLES):
            for rows, marker in ((k, inp.table_filtered_marker), (n, inp.table_all_marker)):
                page.evaluate(MARK_START)
                click_bar(page, "reasons", reason)
                settle(page, counted(rows))
                grid_rows(page, marker)
        rss, peak = server.memory_mib()
        memory.setdefault("rss", []).append(rss)
        memory.setdefault("peak", []).append(peak)
        context.close()


# --------------------------------------------------------------------------- inputs and trees


def make_inputs(work: Path, only: set[str], table_rows: int) -> Inputs:
    inp = Inputs(work)
    if "run" in only:
        from tokencap.run import scan_table
        from tokencap.views.run.filters import RunFilter, filter_masks
        from tokencap.views.run.frame import run_frame
        from tokencap.views.run import triage as tr

        records = REPO / "sample_data" / "rollout_records" / "run.jsonl"
        frame = run_frame(scan_table(REPO / "sample_data" / "run", workers=1, final_responses=str(records)))
        everything, filtered = RunFilter(), RunFilter(reasons=(inp.sample_reason,))
        order = tr.run_order(frame, filtered)
        inp.sample_total, inp.sample_filtered = len(frame), len(order.rows)
        inp.sample_ids = tuple(order.entry(int(r))[1] for r in order.rows)
        every = tr.run_order(frame, everything)
        inp.sample_all_ids = tuple(every.entry(int(r))[1] for r in every.rows)
        inp.sample_all_marker = table_marker(frame, everything, filtered)
        inp.sample_filtered_marker = table_marker(frame, filtered, everything)
    for name, calls, spec in (("long", 1500, {"n_calls": 1500, "tool_tokens": 20, "gen_tokens": 10, "delta": True}),
                              ("big", 300, {"n_calls": 300})):
        if name in only:
            path = work / f"linear{calls}_{name}.json"
            subprocess.run([sys.executable, str(HERE / "bench_build.py"), "--generate", str(path), json.dumps(spec)],
                           check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
            setattr(inp, name, path)
            print(f"{path.name}: {path.stat().st_size / 1e6:.1f} MB", flush=True)
    if "table" in only:
        import pyarrow.parquet as pq

        from synth_run import synthetic_scan_table
        from tokencap.views.run.filters import RunFilter, filter_masks
        from tokencap.views.run.frame import run_frame

        table = synthetic_scan_table(table_rows, seed=1)
        frame = run_frame(table)
        inp.table, inp.table_rows = work / "run.parquet", table_rows
        inp.table_filtered = int(filter_masks(frame, RunFilter(reasons=(inp.table_reason,)))["reasons"].sum())
        everything, filtered = RunFilter(), RunFilter(reasons=(inp.table_reason,))
        inp.table_all_marker = table_marker(frame, everything, filtered)
        inp.table_filtered_marker = table_marker(frame, filtered, everything)
        pq.write_table(table, inp.table)
    return inp


def extract(rev: str, into: Path) -> Path:
    """The files of commit ``rev`` (``git archive``) under ``into``; raises when git cannot name it."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", rev], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run_tree(browser, app_dir: Path, inp: Inputs, only: set[str], work: Path, results: dict,
             download: bool) -> None:
    log = work / f"streamlit-{app_dir.name}.log"
    cache = work / f"cache-{app_dir.name}"
    out = results.setdefault("times", {})
    if "run" in only:
        scenario_run(browser, app_dir, inp, out, log, cache)
    if "long" in only:
        scenario_rollout(browser, app_dir, inp.long, 1500, "1,500 calls", out, log, cache)
    if "big" in only:
        scenario_rollout(browser, app_dir, inp.big, 300, "85 MB", out, log, cache, download=download)
    if "table" in only:
        scenario_table(browser, app_dir, inp, out, log, cache, results.setdefault("memory", {}))


def goal_of(name: str) -> float | None:
    for prefix, goal in GOALS.items():
        if name.startswith(prefix):
            return goal
    return None if name.startswith("download") else CLICK


def report(trees: list[str], results: dict[str, dict], runs: int) -> None:
    print(f"\nmedians of {runs} runs, seconds (in brackets: server CPU / browser main thread busy), 1280x800 headless Chromium, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print("| interaction | goal | " + " | ".join(trees) + " | met |")
    print("|---|---|" + "---|" * len(trees) + "---|")
    names = list(results[trees[-1]]["times"])
    for name in names:
        goal = goal_of(name)
        cells, last = [], None
        for tree in trees:
            values = results[tree]["times"].get(name)
            if not values:
                cells.append("—")
                continue
            last = statistics.median(v[0] for v in values)
            cells.append(f"{last:.2f} ({statistics.median(v[1] for v in values):.2f} / "
                         f"{statistics.median(v[2] for v in values):.2f})")
        met = "" if goal is None or last is None else ("yes" if last <= goal else "no")
        print(f"| {name} | {'' if goal is None else f'≤ {goal:g} s'} | " + " | ".join(cells) + f" | {met} |")
    if any("memory" in results[t] for t in trees):
        cells = []
        for tree in trees:
            mem = results[tree].get("memory")
            cells.append("—" if not mem else
                         f"{statistics.median(mem['rss']):.0f} MiB (peak {statistics.median(mem['peak']):.0f})")
        last = results[trees[-1]].get("memory")
        met = "" if not last else ("yes" if statistics.median(last["rss"]) < MEMORY_GOAL_MIB else "no")
        print(f"| server memory after {CYCLES} filter cycles | < {MEMORY_GOAL_MIB} MiB | " + " | ".join(cells)
              + f" | {met} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--compare", metavar="REV", help="also measure commit REV's code (or the tree in the "
                                                        "directory REV), side by side")
    parser.add_argument("--only", default="run,long,big,table", help="scenarios: run, long, big, table")
    parser.add_argument("--rows", type=int, default=100_000, help="rows of the scan table (table)")
    parser.add_argument("--download", action="store_true", help="also time the big rollout's download")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is not installed")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT)
    with tempfile.TemporaryDirectory(prefix="tokencap-bench-") as tmp:
        work = Path(tmp)
        trees: dict[str, Path] = {}
        if args.compare and Path(args.compare).is_dir():  # a tree extracted before
            trees[Path(args.compare).name] = Path(args.compare).resolve()
        elif args.compare:
            trees[args.compare] = extract(args.compare, work / "before")
        trees["this tree"] = REPO
        inp = make_inputs(work, only, args.rows)
        results: dict[str, dict] = {name: {} for name in trees}
        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            try:
                for run in range(args.runs):
                    for name, app_dir in trees.items():
                        run_tree(browser, app_dir, inp, only, work, results[name], args.download)
                        times = results[name]["times"]
                        print(f"run {run + 1}, {name}: " + ", ".join(f"{k} {v[-1][0]:.2f}" for k, v in times.items()),
                              flush=True)
            finally:
                browser.close()
        report(list(trees), results, args.runs)


if __name__ == "__main__":
    main()
