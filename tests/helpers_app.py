"""Driving the app headless with `streamlit.testing.v1.AppTest`: the one starter (`start_app`, also the
`app_tester` fixture of conftest.py) and what the app tests read off its pages.

Not a test module: test modules import from here, never from each other.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import AppTest

from tokencap.services import run_sources as rs

REPO = Path(__file__).resolve().parent.parent
APP = REPO / "app.py"
SAMPLES = REPO / "sample_data"
UPSTREAM = REPO / "tests" / "data" / "upstream_store"
TIMEOUT = 60
ROLLOUT_PAGE = "tokencap/app/rollout/rollout.py"
RUN_PAGE = "tokencap/app/run/run.py"
SAMPLE_RUN = rs.sample_run_path(REPO)
SAMPLE_RECORDS = rs.sample_records(REPO, SAMPLE_RUN)
AFTER_FIX = rs.sample_after_fix_path(REPO)


def start_app(monkeypatch, *args: str, page: str | None = None, state: dict[str, Any] | None = None,
              query: dict[str, str] | None = None, timeout: float = TIMEOUT) -> AppTest:
    """The app (`app.py` started with ``args`` as its command line) run once and free of exceptions: on
    ``page`` (the Run page when None, the app's first page), with ``state`` in its session and ``query``
    in its URL."""
    monkeypatch.setattr(sys, "argv", [str(APP), *args])
    at = AppTest.from_file(str(APP), default_timeout=timeout)
    if page is not None:
        at.switch_page(page)
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.query_params.update(query or {})
    at.run()
    assert not at.exception, at.exception
    return at


def rerun(at: AppTest, tab: str | None = None) -> AppTest:
    """Run the page again (on ``tab`` of the Rollout page, when given), free of exceptions."""
    if tab is not None:
        at.session_state["tab"] = tab
    at.run()
    assert not at.exception, at.exception
    return at


# --------------------------------------------------------------------------- the Rollout page


def open_app(monkeypatch, *args: str, tab: str | None = None, query: dict[str, str] | None = None) -> AppTest:
    """The app on its Rollout page (the Run page is the default; tests/test_app_run.py drives it)."""
    return start_app(monkeypatch, *args, page=ROLLOUT_PAGE, state={"tab": tab} if tab is not None else None,
                     query=query)


def open_link(monkeypatch, params: dict[str, str], *args: str) -> AppTest:
    """A fresh session on the Rollout page with a URL's query parameters (a reload, a shared link)."""
    return start_app(monkeypatch, *args, page=ROLLOUT_PAGE, query=params)


def pick_call(at: AppTest, key: str) -> AppTest:
    """Select call ``key`` as a reader does, with the picker; the call a rollout opened on (selected, its
    detail not shown) with the button that shows its detail."""
    pick = next(s for s in at.selectbox if s.key.startswith("pick:"))
    if pick.value != key:
        pick.set_value(key)
    else:
        for button in [b for b in at.button if b.key.startswith("detail_show:")]:
            button.click()
    return rerun(at)


def proof_charts(at: AppTest) -> list[str]:
    """The calls whose link or break proof is drawn: each proof is a Vega-Lite chart whose second
    strip row names the call ("this call CALL")."""
    out = []
    for chart in at.get("vega_lite_chart"):
        spec = json.loads(chart.proto.spec)
        if spec.get("description", "").startswith(("loss-mask", "call tree")):
            continue  # the Loss mask tab's strip and overview, the call tree and its overview
        rows = spec["layer"][0]["layer"][0]["encoding"]["y"]["sort"]
        out.extend(row.removeprefix("this call ") for row in rows if row.startswith("this call "))
    return out


# --------------------------------------------------------------------------- the Run page


def run_app(monkeypatch, *args: str, params: dict[str, str] | None = None) -> AppTest:
    """The app on its Run page (its first page), with ``params`` in its URL."""
    return start_app(monkeypatch, *args, query=params)


def send_selection(at: AppTest, element, selection: dict) -> AppTest:
    """Rerun as the browser does after a click on a chart bar or a table row."""
    states = at._tree.get_widget_states()
    kept = [w for w in states.widgets if w.id != element.proto.id]
    del states.widgets[:]
    states.widgets.extend(kept + [WidgetState(id=element.proto.id, string_value=json.dumps({"selection": selection}))])
    at._run(states)
    assert not at.exception, at.exception
    return at


def click_bar(at: AppTest, dimension: str, key: str) -> AppTest:
    chart = next(c for c in at.get("vega_lite_chart") if f"run_chart:{dimension}:" in c.proto.id)
    return send_selection(at, chart, {"pick": [{"dimension": dimension, "key": key}]})


def run_table(at: AppTest):
    return next(d for d in at.dataframe if "run_table:" in d.proto.id)


def select_row(at: AppTest, position: int) -> AppTest:
    return send_selection(at, run_table(at), {"rows": [position], "columns": [], "cells": []})


def headings(at: AppTest) -> list[str]:
    """Page headings without their Markdown level (the Run page's is "##", the Rollout page's "###")."""
    return [m.value.lstrip("#").strip() for m in at.markdown if m.value.startswith(("## ", "### "))]


def escaped(text: str) -> str:
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", text)


def shown_count(at: AppTest) -> tuple[int, int]:
    text = next(m.value for m in at.markdown if " rollouts**" in m.value)
    shown, total = re.match(r"\*\*([\d,]+) of ([\d,]+) rollouts\*\*", text).groups()
    return int(shown.replace(",", "")), int(total.replace(",", ""))


def compare_with_the_sample_after_fix(monkeypatch) -> AppTest:
    """The Run page comparing the sample run with the bundled run after the fix."""
    assert AFTER_FIX is not None
    at = run_app(monkeypatch)
    at.toggle(key="run_w_vs_sample").set_value(True)
    return rerun(at)
