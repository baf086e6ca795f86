"""tokencap -- the app researchers open when a rollout's training tokens look wrong.

    streamlit run app.py                  # the bundled samples
    streamlit run app.py -- PATH          # a snapshot JSON, entries JSONL or capture-store directory
    tokencap app PATH                     # the same, through the command line

This file is the navigation entry point only: page config and the list of pages. Each
page under `app_pages/` lays out widgets and keeps session state; every fact and decision
it shows comes from `tokencap.views`, which is tested without Streamlit.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

PAGES_DIR = Path(__file__).resolve().parent / "app_pages"

st.set_page_config(page_title="tokencap", page_icon="🧵", layout="wide", initial_sidebar_state="expanded")

ROLLOUT_PAGE = st.Page(str(PAGES_DIR / "rollout.py"), title="Rollout", icon=":material/account_tree:",
                       url_path="rollout", default=True)

st.navigation([ROLLOUT_PAGE]).run()
