"""The app's services: what the Streamlit pages do besides drawing, with no Streamlit import.

Between `tokencap.run` and `tokencap.views` (DESIGN.md, "Layers"): they read the command line the
app was started with (`arguments`), open rollouts from files, uploads and the bundled samples
(`rollout_sources`), keep scan tables on disk (`scan_cache`, with the claim files of `claims` so
two processes never scan the same run at once, and `prescan`, the scan `tokencap app RUN` starts
beside its server), hold uploaded files (`uploads`) and find where a Run page row's rollout can be
opened from (`run_sources`).
"""
