"""The Rollout page made ready while the reader looks at the Run page.

A helper of ``app.py`` (not a page), in the Rollout page's room: what it makes ready is that
page's. The first rollout a reader opens from the run's table used to pay, on top of loading and
building it, the Rollout page's imports (its parts and their views, ~50 ms) and plotly's layout of
each two-row proof figure (`tokencap.views.figures.Stack`, asked of ``make_subplots`` once per
shape: ~40 ms). Once a page has been drawn, a thread does both, once per server process. Nothing
is shown from it, and nothing it does can change what a page shows: an import or layout that
fails there is done, and its error raised, by the page as before.
"""

from __future__ import annotations

import importlib
import threading

ROLLOUT_PARTS = ("app_pages.rollout.sources", "app_pages.rollout.url", "app_pages.rollout.banner",
                 "app_pages.rollout.triage", "app_pages.rollout.tree", "app_pages.rollout.tabs",
                 "app_pages.rollout.export", "app_pages.rollout.prefetch")
"""The Rollout page's parts (never the page file itself: importing it would run it)."""

_started = threading.Lock()
_thread: threading.Thread | None = None


def _warm() -> None:
    try:
        for name in ROLLOUT_PARTS:
            importlib.import_module(name)
        from tokencap.views.figures import Stack
        from tokencap.views.rollout.linkproof import BREAK_ROWS, PROOF_ROWS

        for rows in (PROOF_ROWS, BREAK_ROWS):
            Stack(*rows)
    except Exception:  # noqa: BLE001 -- the page does it again and raises there
        return


def warm_rollout_page() -> threading.Thread:
    """Start the thread (once per process; later calls return the same thread)."""
    global _thread
    with _started:
        if _thread is None:
            _thread = threading.Thread(target=_warm, name="tokencap-warm-rollout-page", daemon=True)
            _thread.start()
        return _thread
