"""Builds the Compare tab will ask for, made in a background thread while the reader is on another tab.

A helper of ``tokencap/app/rollout/rollout.py`` (not a page). The Compare tab opens on two anchors
of the rollout shown (`tokencap.views.rollout.rollout_page.default_anchor_pair`): the page's own
view, already built, and usually a second build, under another anchor (0.14 s for a 1,500-call
rollout), which the first visit to the tab used to wait for. Once the page has drawn its tab, that
build starts in a thread, into the same cache the tab reads (`sources.rollout_view`), so the tab
finds it made. Nothing is shown from the thread: a build that fails there is built again by the tab,
which shows its error as it always did.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from tokencap.views.model import RolloutView
from tokencap.views.rollout import rollout_page as rp


def prefetch_compare(base: RolloutView, anchor: str | None, key: str, build: Callable[[str | None], object],
                     started: set) -> threading.Thread | None:
    """Start building, in a thread, the anchor-pair views the Compare tab opens on that the page has not
    built: neither its own (``anchor``) nor ``base`` (no anchor, always built). ``build(anchor)`` builds (and
    caches) one; ``started`` holds the jobs already started in this session, so each starts once. The
    thread, or None when nothing is left to build."""
    wanted = [a for a in dict.fromkeys(rp.default_anchor_pair(base, anchor)) if a not in (anchor, None)]
    job = (key, tuple(wanted))
    if not wanted or job in started:
        return None
    started.add(job)
    script = threading.current_thread()

    def run() -> None:
        # After the script run that started it: a build holding the GIL while the run ends would delay
        # the messages that end it (the page shows "running" longer); the script's thread ends with it.
        if script is not threading.main_thread():
            script.join()
        for a in wanted:
            try:
                build(a)
            except Exception:  # noqa: BLE001 -- the tab builds it again and shows the error
                return

    thread = threading.Thread(target=run, name="tokencap-prefetch-compare", daemon=True)
    ctx = get_script_run_ctx()
    if ctx is not None:  # the cache is Streamlit's: the thread works for this session
        add_script_run_ctx(thread, ctx)
    thread.start()
    return thread
