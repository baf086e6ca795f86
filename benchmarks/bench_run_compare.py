"""How fast the Run page's comparison and reward views are on two 100,000-row runs (views alone).

    python benchmarks/bench_run_compare.py [--rows 100000] [--repeat 5]

Builds a synthetic scan table (``tests/synth_run.py``) with rewards and task groups of
four, and a second run "after a fix" (a third of the masked rollouts trainable, one in
fifty trainable ones masked, 1% gone, 25 new), then times, without Streamlit:

* the frame with records (``run_frame``: group states included);
* the comparison, once per pair of runs (``compare_runs``: the diff of docs/contract.md#diff and its rows
  laid over both frames);
* one filter change while comparing (both runs' masks, the joined rows shown and sorted,
  every chart of both runs, the change chart, the table frame);
* the reward and group views (slices, bias, group summary, both figures).

Medians of ``--repeat`` runs, and the peak RSS of the process.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from synth_run import after_a_fix, synthetic_scan_table  # noqa: E402
from tokencap.views.run import charts as rc  # noqa: E402
from tokencap.views.run import compare as cv  # noqa: E402
from tokencap.views.run.filters import RunFilter, filter_masks, passing  # noqa: E402
from tokencap.views.run.frame import run_frame  # noqa: E402
from tokencap.views.run import reward as rw  # noqa: E402


def with_records(table: pa.Table, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = table.num_rows
    masked = table.column("mask_sample").to_numpy(zero_copy_only=False)
    reward = np.where(rng.random(n) < 0.5 + 0.3 * masked, 1.0, 0.0)
    for name, values in (("reward", pa.array(reward)), ("task_index", pa.array(np.arange(n) // 4)),
                         ("rollout_index", pa.array(np.arange(n) % 4))):
        table = table.set_column(table.column_names.index(name), name, values.cast(table.schema.field(name).type))
    return table


def timed(fn, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return statistics.median(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    a = with_records(synthetic_scan_table(args.rows, seed=4), 1)
    b = with_records(after_a_fix(a), 2)
    frame_a, frame_b = run_frame(a), run_frame(b)
    cmp = cv.compare_runs(a, frame_a, b, frame_b)
    flt = RunFilter(change=("fixed",), sort="n_calls", descending=True)

    def change() -> None:
        masks_a, masks_b = filter_masks(cmp.a, flt), filter_masks(cmp.b, flt)
        positions = cv.sorted_pairs(cmp, cv.passing_rows(cmp, passing(cmp.a, masks_a),
                                                         passing(cmp.b, masks_b)), flt)
        for x, y in cv.paired_bars(cmp, masks_a, masks_b):
            rc.bar_spec(x, versus=y)
        rc.bar_spec(cv.change_bars(cmp, masks_a, masks_b))
        cv.compare_table_frame(cmp, positions)

    def rewards() -> None:
        for frame in (cmp.a, cmp.b):
            rw.reward_bias(frame)
            rw.group_summary(frame)
        rw.reward_spec([("A", cmp.a), ("B", cmp.b)])
        rw.groups_spec([("A", cmp.a), ("B", cmp.b)])

    figures = {
        "frame with records (run_frame)": timed(lambda: run_frame(a), args.repeat),
        "comparison (compare_runs, once per pair)": timed(lambda: cv.compare_runs(a, frame_a, b, frame_b),
                                                          args.repeat),
        "filter change while comparing": timed(change, args.repeat),
        "reward and group views, both runs": timed(rewards, args.repeat),
    }
    print(f"{args.rows:,} rows a run, median of {args.repeat}")
    for name, seconds in figures.items():
        print(f"  {name}: {seconds * 1000:.0f} ms")
    print(f"  peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
