#!/usr/bin/env python3
"""Write a big synthetic run (a capture-store directory) for scan benchmarks.

N rollouts of about K calls each (between K/2 and 3K/2; a situation that needs more calls
gets its minimum, a rollout stuck at one call has one), in the upstream file-store layout.
The mix of situations is the bundled sample run's (``scripts/make_sample_run.py``) scaled
to N, so a scan meets every verdict at the same rates, unloadable rollouts included. The
records come from the same writer: digests and ``cum_len`` are stamped as the model server
stamps them, and ``expected.json.txt`` declares every rollout's verdict and the run's
summary, so a benchmark can check what it timed.

The output is deterministic for a given N, K and seed. It is benchmark input, not a
fixture: write it somewhere outside the repository or under ``benchmarks/out/``
(git-ignored). Earlier store files in the directory are replaced.

    python benchmarks/make_big_run.py benchmarks/out/big_run                 # N=2000, K=20
    python benchmarks/make_big_run.py /tmp/run --rollouts 10000 --calls 40 --seed 7
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))

from make_sample_run import SITUATIONS, Situation, iter_run, write_run  # noqa: E402


LINEAGE_BREAKS = ("subagent_branch", "compaction_new_root", "unresolved_continuation", "stale_parent_link",
                  "legacy_missing_resolution", "broken_delta_chain", "corrupt_record", "duplicate_call_id")
"""The sample run's situations whose rollouts have a break (docs/contract.md#breaks): ~14% of its mix."""


def situation_counts(n: int, break_weight: float = 1.0) -> dict[str, int]:
    """The sample run's mix scaled to ``n`` rollouts (largest remainders, so they sum to n);
    ``break_weight`` multiplies the weight of the situations with a lineage break (3: about a third)."""
    weights = {s.name: s.count * (break_weight if s.name in LINEAGE_BREAKS else 1.0) for s in SITUATIONS}
    total = sum(weights.values())
    exact = {name: n * w / total for name, w in weights.items()}
    counts = {name: int(x) for name, x in exact.items()}
    by_remainder = sorted(exact, key=lambda name: (-(exact[name] - counts[name]), name))
    for name in by_remainder[: n - sum(counts.values())]:
        counts[name] += 1
    return counts


def calls_about(k: int):
    lo, hi = max(1, k // 2), max(1, k + k // 2)

    def draw(rng: random.Random, s: Situation) -> int:
        n = max(s.min_calls, rng.randint(lo, hi))
        return min(n, s.max_calls) if s.max_calls is not None else n

    return draw


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("out_dir", type=Path, help="directory to write the capture store into")
    ap.add_argument("--rollouts", "-n", type=int, default=2000, help="number of rollouts (default 2000)")
    ap.add_argument("--calls", "-k", type=int, default=20, help="about this many calls per rollout (default 20)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    ap.add_argument("--break-weight", type=float, default=1.0,
                    help="weight of the situations whose lineage breaks (default 1: the sample run's ~14%%; "
                         "3: about a third)")
    args = ap.parse_args(argv)
    if args.rollouts < 1 or args.calls < 1:
        ap.error("--rollouts and --calls must be at least 1")

    started = time.perf_counter()
    counts = situation_counts(args.rollouts, args.break_weight)
    planned = iter_run(counts, seed=args.seed, calls=calls_about(args.calls),
                       tasks=max(1000, args.rollouts), spread=4 * 3600.0)
    about = (f"Declared verdicts of a synthetic run of {args.rollouts} rollouts of about {args.calls} calls "
             f"(benchmarks/make_big_run.py, seed {args.seed}); never produced by running the builder.")
    expected = write_run(args.out_dir, planned, seed=args.seed, about=about)
    summary = expected["summary"]
    calls = sum(d["metrics"]["n_calls"] for d in expected["rollouts"].values())
    size = sum(p.stat().st_size for p in args.out_dir.iterdir() if p.is_file())
    print(f"wrote {summary['rollouts']} rollouts, {calls} calls ({summary['trainable']} trainable, "
          f"{summary['masked']} masked, {summary['load_errors']} unloadable), {size / 2**20:.1f} MiB, "
          f"to {args.out_dir} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
