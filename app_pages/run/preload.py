"""The Rollout page's charting library, loaded while the reader looks at the Run page.

The Run page draws its charts with Vega-Lite (`tokencap.views.vega` says why): a fresh browser
no longer evaluates plotly's 4.8 MB bundle before the run's first screen, which was most of that
screen's time. The Rollout page's figures are plotly's, though, and a browser loads the bundle
the first time it mounts a plotly chart: without this, the first row a reader opens would pay
1.3-2 s for it. So once the Run page is drawn and the browser is idle, a small script of ours
imports Streamlit's own plotly chunk. A module is evaluated once per page, so when the Rollout
page mounts its first chart the bundle is already there (measured: a plotly chart's first
mount 2.1 s after a fresh start without this, 0.36 s with it; one fetch of the chunk either way).

The script is constant text of this module: no uploaded or captured text goes into it. If the
chunk is not found (another Streamlit build), nothing is sent and the Rollout page loads plotly
itself, as before. The import runs on an idle callback, so it never delays the Run page's first
screen; a click made while it evaluates waits for it (about a second, once per browser tab).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import streamlit as st

CHUNK_GLOB = "PlotlyChart.*.js"
"""Streamlit's plotly chunk in its static files (``static/static/js/PlotlyChart.<hash>.js``)."""

SCRIPT = """<script>
(() => {
  if (window.__tokencapPlotlyPreload) return;
  const index = document.querySelector('script[type="module"][src*="/static/js/index"]')
    || document.querySelector('script[src*="/static/js/index"]');
  if (!index) return;
  window.__tokencapPlotlyPreload = true;
  const url = new URL(%s, index.src).href;
  const load = () => import(url).then(() => { window.__tokencapPlotlyPreloaded = true; }, () => {});
  (window.requestIdleCallback || ((f) => setTimeout(f, 200)))(load, {timeout: 3000});
})();
</script>"""


@lru_cache(maxsize=1)
def plotly_chunk() -> str | None:
    """The file name of Streamlit's plotly chunk, or None when this Streamlit build has none (or several)."""
    found = sorted((Path(st.__file__).parent / "static" / "static" / "js").glob(CHUNK_GLOB))
    return found[0].name if len(found) == 1 else None


def preload_script(chunk: str) -> str:
    """The script that imports ``chunk`` (a file name beside Streamlit's index module) once the browser is idle."""
    return SCRIPT % json.dumps(chunk)


def preload_plotly() -> None:
    """Send the script, once per page drawn (the browser runs it once per tab; a second import is free)."""
    chunk = plotly_chunk()
    if chunk is not None:
        st.html(preload_script(chunk), unsafe_allow_javascript=True)
