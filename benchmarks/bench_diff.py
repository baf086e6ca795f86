"""Benchmark `tokencap diff` of two scan tables of 100,000 rollouts each.

    python benchmarks/bench_diff.py                  # 100,000 rows, median of 5 runs
    python benchmarks/bench_diff.py --rows 200000 --runs 3

The two tables are made here, straight as Arrow arrays (no rollouts are built): run A with
about 22% of its rollouts masked for a mix of reasons, rewards and indices; run B is A
after a change -- 5% of the rollouts change verdict or reasons, 1% are gone and 1% are
new. What it reports: the median wall time of the whole command (`python -m tokencap diff
A B -o DIFF.parquet`, start-up and parquet reading and writing included) over the runs,
and the peak memory of one more run (its process tree, sampled from /proc every 20 ms).

Tables are written to benchmarks/out/ (git-ignored).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_scan import OUT, timed_command  # noqa: E402
from tokencap.rollout import MASK_REASON_ORDER  # noqa: E402
from tokencap.run.table import SCHEMA  # noqa: E402

REASON_RATES = (0.01, 0.04, 0.0, 0.0, 0.03, 0.08, 0.07, 0.1, 0.0, 0.03)
"""How often each mask reason (the order of docs/contract.md#rollout) is drawn; roughly the sample run's mix."""


def make_table(ids: np.ndarray, reasons: np.ndarray, rng: np.random.Generator) -> pa.Table:
    """A scan table of these rollout ids and reason matrix; the other columns are plausible fillers."""
    n = ids.size
    columns: dict[str, pa.Array] = {}
    for field in SCHEMA:
        if pa.types.is_list(field.type):
            columns[field.name] = pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, np.int32)), pa.array([], pa.string()))
        elif pa.types.is_boolean(field.type):
            columns[field.name] = pa.array(np.zeros(n, bool))
        elif pa.types.is_integer(field.type):
            columns[field.name] = pa.array(rng.integers(0, 40, n))
        elif pa.types.is_floating(field.type):
            columns[field.name] = pa.array(rng.random(n))
        else:
            columns[field.name] = pa.nulls(n, pa.string())
    offsets = np.concatenate([[0], np.cumsum(reasons.sum(axis=1))]).astype(np.int32)
    names = np.asarray(MASK_REASON_ORDER, dtype=object)[np.nonzero(reasons)[1]]
    columns["mask_reasons"] = pa.ListArray.from_arrays(pa.array(offsets), pa.array(names, pa.string()))
    for j, reason in enumerate(MASK_REASON_ORDER):
        columns[f"reason_{reason}"] = pa.array(reasons[:, j])
    columns["mask_sample"] = pa.array(reasons.any(axis=1))
    columns["rollout_id"] = pa.array(ids.astype(str), pa.string())
    columns["source"] = pa.array(np.char.add(ids.astype(str), ".tokens.*"), pa.string())
    columns["snapshot_id"] = columns["rollout_id"]
    columns["status"] = pa.array(np.where(rng.random(n) < 0.88, "completed", "incomplete"), pa.string())
    columns["reward"] = pa.array(np.round(rng.random(n)))
    numbers = np.char.rpartition(np.char.rpartition(ids.astype(str), "-")[:, 0], "-")  # taskN, -, rolloutM
    columns["task_index"] = pa.array(np.char.lstrip(numbers[:, 0], "task").astype(np.int64))
    columns["rollout_index"] = pa.array(np.char.lstrip(numbers[:, 2], "rollout").astype(np.int64))
    return pa.Table.from_arrays([columns[f.name].cast(f.type) for f in SCHEMA], schema=SCHEMA)


def write_pair(rows: int, a_path: Path, b_path: Path, seed: int = 5) -> None:
    rng = np.random.default_rng(seed)
    index = np.arange(rows + rows // 100)
    ids = np.char.add(np.char.add(np.char.add("task", (index // 4).astype(str)), "-rollout"),
                      np.char.add((index % 4).astype(str), "-attempt0"))
    reasons = rng.random((ids.size, len(REASON_RATES))) < np.asarray(REASON_RATES)
    a_ids, a_reasons = ids[:rows], reasons[:rows]
    changed = rng.random(rows) < 0.05
    b_reasons = a_reasons.copy()
    b_reasons[changed] = rng.random((int(changed.sum()), len(REASON_RATES))) < np.asarray(REASON_RATES)
    keep = rng.random(rows) >= 0.01
    b_ids = np.concatenate([a_ids[keep], ids[rows:]])
    b_reasons = np.concatenate([b_reasons[keep], reasons[rows:]])
    order = rng.permutation(b_ids.size)  # B lists its rollouts in another order
    pq.write_table(make_table(a_ids, a_reasons, rng), a_path)
    pq.write_table(make_table(b_ids[order], b_reasons[order], rng), b_path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(HERE.parent / "tokencap")], check=True)
    OUT.mkdir(exist_ok=True)
    a, b = OUT / f"diff-a-{args.rows}.parquet", OUT / f"diff-b-{args.rows}.parquet"
    if not (a.exists() and b.exists()):
        write_pair(args.rows, a, b)
    command = [sys.executable, "-m", "tokencap", "diff", str(a), str(b), "-o", str(OUT / "diff.parquet")]
    times = [timed_command(command, sample=False)[0] for _ in range(args.runs)]
    _, peak = timed_command(command)
    print(f"tokencap diff of two {args.rows:,}-row tables (median of {args.runs}): {statistics.median(times):.2f} s"
          f"  (min {min(times):.2f} s, max {max(times):.2f} s)  peak {peak / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
