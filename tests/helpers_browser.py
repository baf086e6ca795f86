"""The app served on a free localhost port and driven in Debian's Chromium through Playwright, for
the browser tests: the one starter of a served app (`streamlit_server`, also conftest.py's
`served_app` fixture), a page that knows when the app has finished a rerun, and where the Run
page draws its table and bars.

Not a test module: test modules import from here, never from each other.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from app_server import CHROMIUM, AppDidNotStart, launch_chromium, streamlit_app  # noqa: E402

__all__ = ["CHROMIUM", "launch_chromium"]  # re-exported for the browser tests


WAIT_MS = 300_000
"""How long a wait on a condition may take before the test fails. Generous: on a 2-core machine the
first paint of the Run page took 30 s at a load of 20 and over 120 s at a load of 40; a condition
met sooner ends the wait sooner."""


@contextlib.contextmanager
def streamlit_server(tmp_path: Path, *args: str, env: dict[str, str] | None = None, browser: bool = True):
    """`streamlit run app.py [-- ARGS]` on a free localhost port, its log under ``tmp_path``; yields its URL.
    With ``browser`` (for a test that drives Chromium) the test skips where Chromium or Playwright is missing."""
    if browser and not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed")
    if browser:
        pytest.importorskip("playwright.sync_api")
    log_path = tmp_path / f"streamlit-{time.monotonic_ns()}.log"
    with open(log_path, "wb") as log:
        try:
            with streamlit_app(*args, log=log, env=env) as url:
                yield url
        except AppDidNotStart as exc:
            pytest.fail(f"{exc}:\n" + log_path.read_text())


@contextlib.contextmanager
def chromium_page(**context_options):
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            context = browser.new_context(**{"viewport": {"width": 1280, "height": 800}, **context_options})
            page = context.new_page()
            page.set_default_timeout(WAIT_MS)
            watch_runs(page)
            yield page
        finally:
            browser.close()


SETTLED = """([token, arg]) => {
    // Streamlit marks what a running script has not redrawn yet as stale, and shows its status widget
    // while a run lasts. The page has settled when neither is there, the caller's condition holds, and
    // the layout (the main block's height, the number and box of the tables) held still for 10 frames.
    const busy = document.querySelector('[data-stale="true"], [data-testid="stStatusWidget"]');
    const ready = !busy && (CONDITION);
    const grids = document.querySelectorAll('[data-testid="stDataFrame"]');
    const last = grids[grids.length - 1], main = document.querySelector('[data-testid="stMain"]');
    const r = last ? last.getBoundingClientRect() : {top: 0, height: 0};
    const shape = [main ? main.scrollHeight : 0, grids.length, r.top, r.height].join();
    const s = window.__tokencapSettled;
    if (!s || s.token !== token || !ready || s.shape !== shape) {
        window.__tokencapSettled = {token, shape, frames: 0};
        return false;
    }
    return ++s.frames >= 10;
}"""


def settled(page, condition: str = "true", arg=None) -> None:
    """Wait until the app has finished its rerun and the page stands still (see `SETTLED`), with the
    JavaScript expression ``condition`` (on ``arg``) true: what a test waits on instead of a fixed time."""
    page.wait_for_function(SETTLED.replace("CONDITION", condition), arg=[time.monotonic_ns(), arg],
                           polling="raf")


SOCKETS: dict[int, object] = {}
"""Page (by id) -> the websocket its app talks over (the latest: a reload opens another)."""


def watch_runs(page) -> None:
    """Keep the page's Streamlit websocket, so `after_rerun` can see the server end a script run."""
    page.on("websocket", lambda ws: SOCKETS.__setitem__(id(page), ws))


def script_finished(payload) -> bool:
    """Whether a websocket frame from the server says a script run ended (not one cut short for a rerun)."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    if not isinstance(payload, bytes):
        return False
    try:
        msg = ForwardMsg.FromString(payload)
    except Exception:  # noqa: BLE001 -- any frame that is not a ForwardMsg is not the one waited for
        return False
    return msg.WhichOneof("type") == "script_finished" and msg.script_finished in (
        ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY)


def after_rerun(page, act, condition: str = "true", arg=None) -> None:
    """Do ``act`` (an input that makes the app rerun) once the page has settled, wait for the server to
    say that rerun finished (its websocket's ``script_finished``), then until the page settles again:
    right after ``act`` the old page still stands and would pass for settled. The page must come from
    `chromium_page` (which watches its websocket)."""
    settled(page)
    with SOCKETS[id(page)].expect_event("framereceived", predicate=script_finished, timeout=WAIT_MS):
        act()
    settled(page, condition, arg)


GRID = """(() => { const pick = sel => { const all = document.querySelectorAll(sel); return all[all.length - 1]; };
    return pick("[class*='st-key-run_pairs'] [data-testid='stDataFrame']")
        || pick(".st-key-run_table_box [data-testid='stDataFrame']") || pick('[data-testid="stDataFrame"]'); })()"""
"""The Run page's table as a JavaScript expression: a comparison's joined rows, else the run's rows."""


GRID_ROWS = ("""arg => { const found = GRID; const grid = found && found.querySelector('table[role=grid]');
    return !!grid && (arg === null || grid.getAttribute('aria-rowcount') === String(arg + 1)); }"""
              .replace("GRID", GRID))


TREE = "[class*='st-key-tree-'] [data-testid='stVegaLiteChart'] svg"
"""The call tree drawn (its SVG)."""


RUN_TABLE = ".st-key-run_table_box [data-testid='stDataFrame']"
"""The Run page's table (the rewards' tables follow it)."""


RUN_BAR = """([dimension, label]) => {
    // A Run-page chart's row for the category drawn as ``label`` (its key's label), in the page's
    // coordinates: ``hit``, the transparent bar that spans the row (the chart's last layer of rect marks,
    // one path per category, described "LABEL: counts"), and ``bar``, the first run's drawn bar in that
    // row (the first layer of rect marks, however many groups Vega splits it into). Null while the chart
    // is not drawn (a rerun sends it again).
    const box = (el) => { const r = el.getBoundingClientRect();
                          return {x: r.left, y: r.top, width: r.width, height: r.height}; };
    for (const chart of document.querySelectorAll(
            `[class*="st-key-run_chart-${dimension}-"] [data-testid="stVegaLiteChart"]`)) {
        const layers = chart.querySelectorAll('svg g.mark-rect.role-mark');
        if (layers.length < 2) continue;
        const hit = [...layers[layers.length - 1].querySelectorAll('path')]
            .find(p => (p.getAttribute('aria-label') || '').startsWith(label + ': '));
        if (!hit) continue;
        const h = box(hit), horizontal = h.width > h.height;
        // Vega draws a bar with a rounded end in a group of its own: gather every group of the first layer.
        const first = [...layers[0].classList].find(c => /^layer_[0-9]+_marks$/.test(c));
        const drawn = [...layers].filter(g => first ? g.classList.contains(first) : g === layers[0]);
        const bar = drawn.flatMap(g => [...g.querySelectorAll('path')]).map(box).find(b => horizontal
            ? Math.abs(b.y + b.height / 2 - (h.y + h.height / 2)) <= h.height / 2
            : b.x + b.width / 2 >= h.x && b.x + b.width / 2 <= h.x + h.width);
        return bar ? {hit: h, bar: bar, horizontal: horizontal} : null;
    }
    return null;
}"""
"""Find a Run-page chart's category on the page (see the string)."""


def sample_table(name: str = "run"):
    """A bundled sample run as the Run page scans it: with its bundled rollout records."""
    from tokencap.run import scan_table

    records = REPO / "sample_data" / "rollout_records" / f"{name}.jsonl"
    return scan_table(REPO / "sample_data" / name, workers=1, final_responses=str(records))


TOOLTIP = """() => {
    const tip = document.querySelector('#vg-tooltip-element');
    if (!tip || !tip.classList.contains('visible')) return null;
    return [...tip.querySelectorAll('tr')].map(r => [...r.querySelectorAll('td')].map(d => d.textContent.trim()));
}"""


def select_grid_row(page, position: int, rows: int | None = None) -> None:
    """Click the checkbox column of the ``position``-th row of the Run page's table (a canvas), the last
    table of the page, once the rerun that drew it is over (holding ``rows`` rows, when given).

    A filter's rerun replaces the table: a locator resolved before would point at a detached one. So
    the table is looked up afresh, scrolled to and measured in one step, after the page settled."""
    settled(page, f"({GRID_ROWS})(arg)", rows)
    page.evaluate(f"() => {GRID}.scrollIntoView({{block: 'center'}})")
    settled(page, f"({GRID_ROWS})(arg)", rows)  # the scroll moved it: measure it where it stands
    box = page.evaluate(f"() => {{ const r = {GRID}.getBoundingClientRect(); return {{x: r.left, y: r.top}}; }}")
    # Header and rows are 35 px high; the first column holds the row's checkbox.
    page.mouse.click(box["x"] + 16, box["y"] + 35 + 35 * position + 17)
