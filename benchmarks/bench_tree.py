"""The call tree of a 1,500-call rollout: diagnosis, layout, the zoomed window and the overview.

    PYTHONPATH=. python benchmarks/bench_tree.py [--calls 1500] [--repeat 7]

Prints the median of each step (a fresh `RolloutView` each time): `RolloutView.breaks`
(`tokencap.diagnose`), `tree_of` (rows, runs, lanes, hovers), the zoomed window's chart and
the overview's (Vega-Lite specs), each serialised as the page sends them (JSON). The rollout is
`tests/synth_snapshots.long_linear`: a main chain with a retry every 25 calls and a side
branch every 60 (23 branches at 1,500 calls, so 23 breaks to diagnose).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from synth_snapshots import long_linear  # noqa: E402

from tokencap.views import RolloutView  # noqa: E402
from tokencap.views.rollout import tree as tv  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    snapshot = long_linear(args.calls).snapshot()
    steps: dict[str, list[float]] = {"diagnosis": [], "layout": [], "zoomed chart": [], "overview": []}
    for _ in range(args.repeat):
        view = RolloutView(snapshot)
        t0 = time.perf_counter()
        view.breaks
        t1 = time.perf_counter()
        model = tv.tree_of(view)
        t2 = time.perf_counter()
        selected = model.default_key
        window = tv.window_around(model, selected)
        json.dumps(tv.tree_chart(model, selected, window=window, legend=False))
        t3 = time.perf_counter()
        json.dumps(tv.overview_chart(model, window))
        t4 = time.perf_counter()
        for name, dt in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            steps[name].append(dt)
    print(f"{args.calls:,} calls, median of {args.repeat}: " +
          " · ".join(f"{name} {statistics.median(v) * 1000:.0f} ms" for name, v in steps.items()))


if __name__ == "__main__":
    main()
