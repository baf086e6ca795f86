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

Then plotly's first plot (``load_later(..., first_plot=True)``): the script clicks a hidden button,
whose fragment rerun draws a made-up call tree (`tokencap.views.rollout.tree.warm_up_model`) in a
box laid out out of sight (`style.OFFSCREEN_BOX`). A browser's first plot runs plotly's code for the
first time (V8 compiles ~1,200 functions as it goes): measured, it made the first row click of a tab
~0.15 s slower than the next (0.55 against 0.40 s), and with the plot drawn ahead it is not (0.44).
The plot is gone on the page's next run; the script asks once per browser tab, only while the app is
idle (never in the middle of a reader's rerun), and gives up after 10 s.

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
from typing import Any

import streamlit as st

from tokencap.views import style

STATE = st.session_state

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
  // Then plotly's first plot (`plot`: the hidden button asking the server for it, and the plot drawn), once
  // per browser tab, while the app is idle: its code runs for the first time on a made-up tree out of sight
  // (~0.15 s), not on the first rollout a reader opens. Only once every chunk is in; given up after 10 s.
  const firstPlot = (plot) => {
    if (!plot || 'first plot' in loaded || !Object.values(loaded).every(Boolean)) return;
    loaded['first plot'] = false;
    const asked = performance.now();
    const late = () => performance.now() - asked > 10000;
    const done = () => {
      if (document.querySelector(plot.drawn) || late()) { loaded['first plot'] = true; return; }
      setTimeout(done, 100);
    };
    const ask = () => {
      const button = document.querySelector(plot.ask);
      const app = document.querySelector("[data-testid='stApp']");
      if (!button) { delete loaded['first plot']; return; }  // another page now: the next Run page asks
      if (late()) { loaded['first plot'] = true; return; }
      if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') { setTimeout(ask, 150); return; }
      button.click();
      done();
    };
    ask();
  };
  const start = performance.now();
  let calm = 0;
  const wait = () => {
    calm = drawn() ? calm + 1 : 0;
    // Twice in a row, 150 ms apart (a rerun's elements arrive in batches); or, whatever the page, after 10 s.
    if (calm < 2 && performance.now() - start < 10000) { setTimeout(wait, 150); return; }
    (window.requestIdleCallback || ((f) => setTimeout(f, 50)))(() => load().then(() => firstPlot(FIRST_PLOT_SPEC)),
                                                           {timeout: 2000});
  };
  wait();
})();"""

FIRST_PLOT_ASK = "run_first_plot_ask"
"""The key of the hidden button the script clicks to have the made-up call tree drawn (`first_plot`)."""
FIRST_PLOT_BOX = f"{style.OFFSCREEN_BOX}_first_plot"
FIRST_PLOT = {"ask": f".st-key-{FIRST_PLOT_ASK} button", "drawn": f".st-key-{FIRST_PLOT_BOX} .js-plotly-plot .main-svg"}
"""What the script clicks, and what it waits for."""


@lru_cache(maxsize=None)
def chunk(pattern: str) -> str | None:
    """The file name of the chunk matching ``pattern`` in Streamlit's static files, or None when this
    Streamlit build has none (or several)."""
    found = sorted((Path(st.__file__).parent / "static" / "static" / "js").glob(pattern))
    return found[0].name if len(found) == 1 else None


def found(patterns: tuple[str, ...]) -> list[str]:
    """The chunks of ``patterns`` this Streamlit build has, in order."""
    return [name for name in (chunk(p) for p in patterns) if name is not None]


def import_script(chunks: list[str], first_plot: bool = False) -> str:
    """The script that imports ``chunks`` (file names beside Streamlit's index module) once the page is
    drawn and the browser idle; with ``first_plot``, then has `first_plot` draw its tree."""
    return "<script>" + _SCRIPT.replace("CHUNKS", json.dumps(chunks), 1).replace(
        "FIRST_PLOT_SPEC", json.dumps(FIRST_PLOT if first_plot else None), 1) + "</script>"


def load_later(*patterns: str, first_plot: bool = False) -> None:
    """Send the import of the chunks the next page needs, run once this page is drawn and the browser idle;
    with ``first_plot`` (plotly among them), then plotly's first plot, out of sight (`first_plot`)."""
    names = found(patterns)
    if not names:
        return
    first_plot = first_plot and chunk(PLOTLY) in names
    if first_plot:
        _first_plot()
    # In a box the page's CSS hides: a script-only element would still take a gap of the layout.
    with st.container(key=f"{style.SCRIPT_BOX}_later"):
        st.html(import_script(names, first_plot), unsafe_allow_javascript=True)


@lru_cache(maxsize=1)
def first_plot_figure() -> Any:
    """The made-up call tree's figure (`tokencap.views.rollout.tree.warm_up_model`), drawn as the Rollout
    page draws a rollout's tree. Imported here, not with the module: the Run page's first run does not
    import plotly (the server's warm-up thread has, by the time the script asks for the plot)."""
    from tokencap.views.rollout import tree as tv

    model = tv.warm_up_model()
    return tv.tree_figure(model, model.default_key)


@st.fragment
def _first_plot() -> None:
    """A hidden button, and once the script clicks it (this fragment's rerun, ~20 ms of the server's) the
    made-up tree drawn out of sight, that once: on the page's next run it is gone."""
    asked = bool(STATE.pop("run_first_plot_asked", False))
    with st.container(key=style.OFFSCREEN_FRAGMENT):
        st.button("Draw a call tree ahead", key=FIRST_PLOT_ASK, on_click=STATE.__setitem__,
                  args=("run_first_plot_asked", True))
    if asked:
        from app_pages.rollout.common import PLOTLY_CONFIG

        with st.container(key=FIRST_PLOT_BOX):
            st.plotly_chart(first_plot_figure(), key="run_first_plot", config=PLOTLY_CONFIG, width="content")
