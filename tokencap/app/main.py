"""tokencap -- the app researchers open when a run's, or one rollout's, training tokens look wrong.

    streamlit run app.py                  # the bundled sample run
    streamlit run app.py -- RUN_DIR       # a run: a capture-store directory or a tree of rollout files
    streamlit run app.py -- RESULT.parquet  # a run's scan table (tokencap scan RUN -o RESULT.parquet)
    streamlit run app.py -- FILE          # one snapshot JSON / entries JSONL, on the Rollout page
    streamlit run app.py -- ROLLOUTS.jsonl  # rollouts whose output items carry token ids: a run, on the Run page
    tokencap app [PATH]                   # the same, through the command line
    tokencap app RUN_DIR --final-responses RECORDS.jsonl  # a run with its rollout records (rewards, groups)

This file is the navigation entry point only: page config and the list of pages. `tokencap app`
hands it to ``streamlit run`` (from a checkout or an installed wheel); in a checkout ``app.py``
calls its `main`. The Run page (a whole run's charts and table) comes first and is the default;
the Rollout page (one rollout's call tree, loss mask, verdicts and export) opens a row of the
run, or a file.
A rollout file given on the command line opens the Rollout page directly, as it always
did; a directory, a scan table or a rollouts file of several records opens the Run page on it.
Each page under `tokencap/app/` lays out widgets and keeps session state; every fact and decision it shows comes from
`tokencap.views`, which is tested without Streamlit.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

from tokencap.app.rollout.warm import is_warm_up_run, warm_server
from tokencap.app.state import Keys
from tokencap.services.arguments import app_arguments
from tokencap.views import trace
from tokencap.views.run.rollouts import opens_as_run

PAGES_DIR = Path(__file__).resolve().parent  # the rooms run/ and rollout/ beside this file


def file_argument() -> bool:
    """True when the command line names a rollout file: it opens on the Rollout page.

    A directory (a run), a ``.parquet`` scan table and a rollouts file of several records
    (docs/contract.md#token-rollouts: a run
    by itself) open on the Run page (`tokencap.views.run.rollouts.opens_as_run`).
    """
    path = app_arguments(sys.argv[1:]).path
    return path is not None and not opens_as_run(path)


def main() -> None:
    """Set up the page and run the page the reader is on (Streamlit runs this on every rerun)."""
    st.set_page_config(page_title="tokencap", page_icon="🧵", layout="wide", initial_sidebar_state="expanded")

    rollout_first = file_argument()
    # The server's warm-up on a rollout file (no browser: see warm.is_warm_up_run) draws the Rollout page
    # in its one run, so the first visit finds the rollout loaded and built.
    warm_up_on_rollout = rollout_first and is_warm_up_run()
    # Run stays the default page, so every page keeps its own URL (/run is "/", /rollout is
    # always /rollout): a shared link to a rollout view works whatever the server was started on.
    run_page = st.Page(str(PAGES_DIR / "run" / "run.py"), title="Run", icon=":material/table_chart:", url_path="run",
                       default=not warm_up_on_rollout)
    rollout_page = st.Page(str(PAGES_DIR / "rollout" / "rollout.py"), title="Rollout", icon=":material/account_tree:",
                           url_path="rollout", default=warm_up_on_rollout)

    current = st.navigation([run_page, rollout_page])
    if rollout_first and current is run_page and not st.session_state.get(Keys.ROLLOUT_FIRST_DONE):
        # A rollout file on the command line opens on the Rollout page (once: the Run page stays reachable).
        st.session_state[Keys.ROLLOUT_FIRST_DONE] = True
        st.switch_page(rollout_page)
    st.session_state[Keys.ROLLOUT_FIRST_DONE] = True
    with trace.span("script"):  # TOKENCAP_APP_TRACE=FILE: a line per script run (a fragment's rerun has none)
        current.run()
    warm_server()  # once per server, in a thread: the Rollout page's imports; what is loaded, frozen out of GC walks


if __name__ == "__main__":  # `streamlit run tokencap/app/main.py`, as `tokencap app` does
    main()
