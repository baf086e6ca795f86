"""The Streamlit app: the entry script `main.py` and a room per page (`run/`, `rollout/`).

The only part of tokencap that imports Streamlit. Pages lay out widgets and keep session
state; every fact and decision they show comes from `tokencap.views`.
"""
