"""Views for the inspection app: pandas frames, Vega-Lite specs and plain data, no Streamlit.

The app's pages lay out widgets and call these; every decision a page shows is computed
(and unit-tested) here. The modules form layers, and an import only ever points down
(tests/test_views_imports.py checks it, counting guarded and function-local imports):

1. leaves -- `formatting` (escaping, number formats), `style` (one palette), `words` (every
   note, rule and term explained once); where rollouts come from (files, uploads, samples) is
   `tokencap.services.rollout_sources`, a layer below;
2. shared view data -- `model`: `RolloutView`, one built rollout and what is derived from
   it (memoised per view), and the call-tree node keys;
3. page parts -- `tree` (layout and figure), `detail` (one call: fields, link check,
   retry group, output items), `mask` (loss-mask strip, overview, per-link table),
   `verdicts` (banner, refusal and finish-reason verdicts, build notes), `attribution`
   (which harness final responses apply, and what they attributed), `export` (download
   payloads, byte-identical to `tokencap build`); the Run page's parts live in the
   subpackage `run` (`run.data`, `run.charts`, ...: see its docstring);
4. page assembly -- `rollout_page`: what the Rollout page decides across parts.

The Run page's modules (`tokencap.views.run`) import nothing from the Rollout page's parts.
"""

from .model import RolloutView

__all__ = ["RolloutView"]
