"""`app_pages/run/chunks.py`: the Run page sends the import of the Rollout page's plotly chunk ahead of need.

What the browser then does with them (one fetch of each chunk, plotly evaluated before the first
rollout opens) is checked in Chromium by tests/test_browser.py.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.run import chunks

REPO = Path(__file__).resolve().parent.parent
APP = REPO / "app.py"
SAMPLE_ROLLOUT = REPO / "sample_data" / "clean_multiturn_tools.json"
STATIC_JS = Path(chunks.st.__file__).parent / "static" / "static" / "js"


def main_html(at: AppTest) -> list[str | None]:
    """Each top-level element of the page's main area in order: the body of the ``st.html`` in a script box
    (`chunks._send`), or None for another element."""
    out = []
    for child in at.main.children.values():
        inner = list(getattr(child, "children", {}).values()) if getattr(child, "type", None) == "flex_container" else []
        box = [c for c in inner if getattr(c, "type", None) == "html"]
        out.append(box[0].proto.body if len(inner) == 1 and box else None)
    return out


def app_on(monkeypatch, *args: str, page: str | None = None) -> AppTest:
    assert all(Path(a).exists() for a in args)
    monkeypatch.setattr(sys, "argv", [str(APP), *args])
    at = AppTest.from_file(str(APP), default_timeout=60)
    if page is not None:
        at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.mark.parametrize("pattern", [chunks.PLOTLY, "DataFrame.*.js"])
def test_this_streamlit_build_has_each_chunk_once(pattern):
    # If a Streamlit release renames a chunk, its import is left out (Streamlit loads it itself, later):
    # this says so, so the pattern is updated rather than the head start silently lost.
    name = chunks.chunk(pattern)
    assert name is not None and (STATIC_JS / name).is_file()
    assert name.endswith(".js") and "/" not in name


def test_the_script_imports_the_named_chunks_beside_streamlits_index_once_the_page_is_drawn():
    names = chunks.found(("DataFrame.*.js", chunks.PLOTLY))
    script = chunks.import_script(names)
    assert script.startswith("<script>") and script.endswith("</script>")
    assert json.dumps(names) in script and "new URL(c, index.src)" in script
    assert script.count("import(") == 1
    # It waits for the page to be drawn (script idle, no skeleton, grids on their canvas -- not their
    # accessibility table, 200 ms later --, charts drawn), then for an idle moment of the browser.
    assert "querySelector('[aria-rowcount]')" not in script
    for condition in ("notRunning", "stSkeleton", "querySelector('canvas')", "stVegaLiteChart", "requestIdleCallback"):
        assert condition in script, condition


def test_a_chunk_this_build_lacks_is_left_out_and_nothing_is_sent_for_none(monkeypatch):
    assert chunks.found(("NoSuchChunk.*.js", chunks.PLOTLY)) == [chunks.chunk(chunks.PLOTLY)]
    assert chunks.found(("NoSuchChunk.*.js",)) == []
    sent = []
    monkeypatch.setattr(chunks.st, "html", lambda body, **kw: sent.append(body))
    monkeypatch.setattr(chunks.st, "container", lambda **kw: contextlib.nullcontext())
    chunks.load_later("NoSuchChunk.*.js")
    assert sent == []
    chunks.load_later(chunks.PLOTLY)
    assert sent == [chunks.import_script([chunks.chunk(chunks.PLOTLY)])]


def test_the_run_page_loads_plotly_once_drawn_and_the_rollout_page_sends_no_script(monkeypatch):
    at = app_on(monkeypatch)
    shown = main_html(at)
    later = chunks.import_script(chunks.found((chunks.PLOTLY,)), first_plot=True)
    # The main area's last element, after the table and the rewards, and its only script box (the made-up
    # tree's fragment, before it, holds its hidden button).
    assert shown[-1] == later and len(shown) > 5 and shown.count(None) == len(shown) - 1
    # The Run page draws no plotly chart itself: its charts are Vega-Lite.
    assert not at.get("plotly_chart") and at.get("vega_lite_chart")
    at = app_on(monkeypatch, str(SAMPLE_ROLLOUT), page="app_pages/rollout/rollout.py")
    assert at.get("plotly_chart") and not [b for b in main_html(at) if b is not None]


def test_the_script_asks_for_the_first_plot_only_when_told_and_once_plotly_is_in():
    names = chunks.found((chunks.PLOTLY,))
    plain, asking = chunks.import_script(names), chunks.import_script(names, first_plot=True)
    assert "firstPlot(null)" in plain and "FIRST_PLOT_SPEC" not in plain + asking
    assert f"firstPlot({json.dumps(chunks.FIRST_PLOT)})" in asking
    # Clicked while the app is idle, after every chunk resolved; given up after 10 s (the benchmark waits on it).
    for condition in ("'first plot' in loaded", "Object.values(loaded).every(Boolean)", "notRunning", "10000",
                      "button.click()"):
        assert condition in asking, condition


def test_the_hidden_button_draws_the_made_up_tree_once(monkeypatch):
    """The Run page holds a hidden button (the script clicks it once plotly is in); its rerun draws the
    made-up call tree (out of sight: tests/test_browser.py), and the page's next run does not."""
    at = app_on(monkeypatch)
    assert not at.get("plotly_chart")
    at.button(key=chunks.FIRST_PLOT_ASK).click()
    at.run()
    charts = at.get("plotly_chart")
    assert len(charts) == 1 and "run_first_plot" in charts[0].proto.id
    drawn = json.loads(charts[0].proto.spec)
    assert [t.get("name") for t in drawn["data"]] == [t.name for t in chunks.first_plot_figure().data]
    at.run()
    assert not at.get("plotly_chart")
