"""The Run page's views: one run's scan table as a frame, its filters, charts and sources.

Layers inside (imports point down; tests/test_views_imports.py checks them):

* `categories`, `frame`, `filters`, `summary`, `bars`, `data` -- the scan table's words and bins,
  the table as a pandas frame, `RunFilter` with its vectorised masks and sort, the tiles, the bar
  counts, the table shown (each name imported from the module that defines it);
* `charts` -- one Vega-Lite bar chart per `bars.Bars`;
* `triage` -- a row's place in the table (its filter and sort): previous / next on the
  Rollout page.

Where a run comes from and where each of its rollouts can be opened is the app's service
`tokencap.services.run_sources`, a layer below. This package imports only shared leaves of
`tokencap.views` (`formatting`, `style`), never the Rollout page's parts; nothing here imports Streamlit.
"""
