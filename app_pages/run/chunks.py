"""Streamlit's JavaScript chunks, loaded before a page needs them.

A browser loads the code of a Streamlit element (the grid, a Vega-Lite chart, a plotly chart)
the first time it mounts one, and that code is large: plotly's chunk is 4.8 MB (1.3-2 s of a
fresh Chromium's main thread), the grid's with its Arrow helpers 1.2 MB, Vega-Lite's 0.8 MB.
The Run page's last element (`load_later`) loads the chunks of the page a reader opens next,
plotly for the Rollout page, once the page is drawn (the script idle, no element waiting for its
code, every grid drawn on its canvas, every Vega-Lite chart drawn) and the browser has an idle
moment. Not before: plotly evaluated while the first screen was still drawn delayed the grid by
a second (an idle callback finds idle moments between the page's script run and its grid). A
click made while it evaluates waits for it (about a second, once per browser tab).

Tried and left out: importing a page's own chunks from its first element, while the server
computes the page. Measured, it gained nothing: the server's script run is short (the warm-up has
loaded and built what the page shows), the page's elements arrive in one batch, and Streamlit
requests their chunks at the same moment the script would.

A module is evaluated once per page, whoever imports it, so when Streamlit mounts the element its
code is already there (one fetch of each chunk either way). The scripts are constant text of this
module and the chunks' file names found in Streamlit's own static files: no uploaded or captured
text goes into them. A chunk that this Streamlit build does not have (a rename) is left out, and
Streamlit loads it as before.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import streamlit as st

from tokencap.views import style

PLOTLY = "PlotlyChart.*.js"
"""The plotly chart element, plotly.js inside it."""

_SCRIPT = """(() => {
  const index = document.querySelector('script[type="module"][src*="/static/js/index"]')
    || document.querySelector('script[src*="/static/js/index"]');
  if (!index) return;
  const loaded = window.__tokencapChunks = window.__tokencapChunks || {};
  const load = () => Promise.all(CHUNKS.filter(c => !(c in loaded)).map(c => {
    loaded[c] = false;
    return import(new URL(c, index.src).href).then(() => { loaded[c] = true; }, () => {});
  }));
  // Drawn: the script idle, no element still waiting for its code (Streamlit shows a skeleton meanwhile),
  // every grid on its canvas (its accessibility table, aria-rowcount, follows 200 ms later: not waited
  // for) and every Vega-Lite chart its marks. An empty page is drawn too.
  const drawn = () => {
    const app = document.querySelector("[data-testid='stApp']");
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (document.querySelector("[data-testid='stSkeleton']")) return false;
    const grids = [...document.querySelectorAll("[data-testid='stDataFrame']")];
    const charts = [...document.querySelectorAll("[data-testid='stVegaLiteChart']")];
    return grids.every(g => g.querySelector('canvas')) && charts.every(c => c.querySelector('svg, canvas'));
  };
  const start = performance.now();
  let calm = 0;
  const wait = () => {
    calm = drawn() ? calm + 1 : 0;
    // Twice in a row, 150 ms apart (a rerun's elements arrive in batches); or, whatever the page, after 10 s.
    if (calm < 2 && performance.now() - start < 10000) { setTimeout(wait, 150); return; }
    (window.requestIdleCallback || ((f) => setTimeout(f, 50)))(load, {timeout: 2000});
  };
  wait();
})();"""


@lru_cache(maxsize=None)
def chunk(pattern: str) -> str | None:
    """The file name of the chunk matching ``pattern`` in Streamlit's static files, or None when this
    Streamlit build has none (or several)."""
    found = sorted((Path(st.__file__).parent / "static" / "static" / "js").glob(pattern))
    return found[0].name if len(found) == 1 else None


def found(patterns: tuple[str, ...]) -> list[str]:
    """The chunks of ``patterns`` this Streamlit build has, in order."""
    return [name for name in (chunk(p) for p in patterns) if name is not None]


def import_script(chunks: list[str]) -> str:
    """The script that imports ``chunks`` (file names beside Streamlit's index module) once the page is
    drawn and the browser idle."""
    return "<script>" + _SCRIPT.replace("CHUNKS", json.dumps(chunks), 1) + "</script>"


def load_later(*patterns: str) -> None:
    """Send the import of the chunks the next page needs, run once this page is drawn and the browser idle."""
    names = found(patterns)
    if names:
        # In a box the page's CSS hides: a script-only element would still take a gap of the layout.
        with st.container(key=f"{style.SCRIPT_BOX}_later"):
            st.html(import_script(names), unsafe_allow_javascript=True)
