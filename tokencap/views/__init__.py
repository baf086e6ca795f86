"""Views for the inspection app: pandas frames, plotly figures and plain data, no Streamlit.

`app.py` lays out widgets and calls these; every decision the page shows is computed (and
unit-tested) here. Modules:

* `sources` -- opening files, directories, uploads and the bundled samples, keyed by content;
* `model` -- `RolloutView`, one built rollout with its derived views, cached per anchor;
* `tree` -- the call tree layout and figure;
* `detail` -- one call's fields, parent-link check, retry/twin group and output items;
* `mask` -- loss-mask strip, overview, per-link table and log-prob chart;
* `verdicts` -- the verdict banner, refusal conditions, finish-reason verdict, build notes;
* `attribution` -- which harness final responses apply, and the terminal attribution they gave;
* `export` -- the download payloads (byte-identical to `tokencap build`);
* `text`, `style` -- escaping, number formats, one palette.
"""

from .model import RolloutView

__all__ = ["RolloutView"]
