"""The server made ready while the reader looks at the first page.

A helper of ``app.py`` (not a page), in the Rollout page's room: most of what it makes ready is
that page's. Once a page has been drawn, a thread, once per server process:

- imports the Rollout page's parts and their views (~50 ms the first rollout opened from the
  run's table used to pay, on top of loading and building it);
- then moves every object loaded so far -- modules, classes, pandas --
  out of the garbage collector's sight (``gc.freeze``). Streamlit collects garbage after each
  script run (``runner.postScriptGC``), and with those objects in view a full collection took
  ~0.1 s holding the GIL, so the message that a click's rerun had ended waited for it on
  every click. Turning the collection off instead left 20 filter cycles of a 100,000-row table
  at 573 MiB rather than ~360 (measured when the charts were plotly figures, which hold reference
  cycles): it must run, over the
  objects a session makes. Frozen objects are still freed by reference counting; only cycles
  among them would stay, and they are the app's code, loaded for the server's lifetime.

Nothing is shown from the thread, and nothing it does changes what a page shows: an import
that fails there is done, and its error raised, by the page as before.

`is_warm_up_run` tells ``app.py`` when the run is the server's warm-up (``tokencap app`` asks for
one as the server starts, see `tokencap.cli.server.warm_up_app`): Streamlit's script health check runs
the script once in a session of its own, with no browser, and ends it when that first run ends.
On a rollout file that run must draw the Rollout page itself: the switch to it a browser's first
run makes (`st.switch_page`) would end the warm-up before the page ran, and the first visit paid
for loading and building the rollout (1.2 s of a 1,500-call rollout's first render, most of it its
digests), which the warm-up now leaves in the caches the page reads.
"""

from __future__ import annotations

import gc
import importlib
import threading

ROLLOUT_PARTS = ("tokencap.app.rollout.sources", "tokencap.app.rollout.url", "tokencap.app.rollout.banner",
                 "tokencap.app.rollout.triage", "tokencap.app.rollout.tree", "tokencap.app.rollout.tabs",
                 "tokencap.app.rollout.export", "tokencap.app.rollout.prefetch")
"""The Rollout page's parts (never the page file itself: importing it would run it)."""

_started = threading.Lock()
_thread: threading.Thread | None = None


def _warm(script: threading.Thread) -> None:
    # After the script run that started it (its thread ends with the run): imports holding the GIL
    # while the run ends would delay the messages that end it.
    if script is not threading.main_thread():
        script.join()
    try:
        for name in ROLLOUT_PARTS:
            importlib.import_module(name)
    except Exception:  # noqa: BLE001 -- the page does it again and raises there
        pass
    gc.freeze()  # what is loaded now lives as long as the server: out of each collection's walk


def is_warm_up_run() -> bool:
    """True in a run of the server's warm-up: a script run whose session no browser is attached to
    (Streamlit's script health check makes such a session; a browser's session has its client from
    its first run on). False outside a server (``AppTest``), so tests see a browser's behaviour."""
    from streamlit import runtime
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    if ctx is None or not runtime.exists():
        return False
    return runtime.get_instance().get_client(ctx.session_id) is None


def warm_server() -> threading.Thread:
    """Start the thread (once per process; later calls return the same thread)."""
    global _thread
    with _started:
        if _thread is None:
            _thread = threading.Thread(target=_warm, args=(threading.current_thread(),), name="tokencap-warm-server",
                                       daemon=True)
            _thread.start()
        return _thread
