"""Benchmark `tokencap.diagnose` on one break, in process (docs/contract.md#alignment: linear in the tokens).

Cases:

* ``P300 generation dropped``: the 300-call, ~90k-token rollout of `bench_build.py` (each
  call adds 200 tool tokens and generates 100), where call 250's prompt leaves out call
  100's generation and is unresolved, so the predecessor is found by the `nearest` rule
  over every earlier call (the most expensive rule) and the alignment resynchronises once.
* ``P300 stale claim``: the same rollout, call 250 claims call 249 (`claimed`, no search).
* ``90k many divergences``: a 90k-token predecessor and a prompt with one token replaced
  every 100 (900 divergences: 32 listed, the rest counted).
* ``90k new context``: a 90k-token predecessor and a 90k-token prompt sharing only the
  opening (no window ever resynchronises: the whole index is scanned).

Figures: median wall time of ``--runs`` calls of `diagnose` (the build is made once,
outside the timing) and the peak of memory allocated during one call (tracemalloc; numpy
reports its buffers to it). Target: P300 under 50 ms.

    python benchmarks/bench_diagnose.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tokencap import build_rollout, compute_digest, diagnose, load_snapshots  # noqa: E402


def _record(call_id: str, prompt: np.ndarray, gen: np.ndarray, created: float, resolution: str,
            parent: str | None) -> dict:
    full = np.concatenate((prompt, gen))
    return {"schema_version": 5, "rollout_id": "bench", "model_call_id": call_id, "model": "policy",
            "prompt_token_ids": prompt.tolist(), "generation_token_ids": gen.tolist(),
            "generation_log_probs": [-0.5] * int(gen.size), "output_items": [], "created_at": created,
            "parent_resolution": resolution, "parent_call_id": parent if resolution == "resolved" else None,
            "cum_len": int(full.size), "digest": compute_digest(full), "finish_reason": "tool_calls"}


def p300(break_at: int = 250, dropped: int = 100, claim: bool = False, seed: int = 0):
    """The P300 rollout with call ``break_at``'s prompt leaving out call ``dropped``'s generation."""
    rng = np.random.default_rng(seed)
    seq = np.zeros(0, dtype=np.uint64)
    gen_span = None
    records, prev = [], None
    for i in range(300):
        tool = rng.integers(0, 150_000, 200, dtype=np.uint64)
        gen = rng.integers(0, 150_000, 100, dtype=np.uint64)
        prompt = np.concatenate((seq, tool))
        call_id = f"call-{i:05d}"
        resolution = "resolved" if prev else "root"
        if i == dropped:
            gen_span = (prompt.size, prompt.size + gen.size)
        if i == break_at:
            a, b = gen_span
            prompt = np.concatenate((prompt[:a], prompt[b:]))
            resolution = "resolved" if claim else "unresolved"
        records.append(_record(call_id, prompt, gen, 1000.0 + i, resolution, prev))
        prev, seq = call_id, np.concatenate((prompt, gen))
    return build_rollout(load_snapshots(orjson.dumps({"rollout_id": "bench", "entries": records}))[0])


def long_pair(kind: str, length: int = 90_000, seed: int = 1):
    """A 90k-token root and a break against it: ``many`` divergences, or a ``new`` context."""
    rng = np.random.default_rng(seed)
    opening = rng.integers(0, 150_000, 2_000, dtype=np.uint64)
    gen = rng.integers(0, 150_000, length - opening.size, dtype=np.uint64)
    s = np.concatenate((opening, gen))
    if kind == "many":
        p = s.copy()
        p[2_050::100] = rng.integers(150_000, 160_000, p[2_050::100].size, dtype=np.uint64)
        p = np.concatenate((p, rng.integers(0, 150_000, 50, dtype=np.uint64)))
    else:
        p = np.concatenate((opening, rng.integers(150_000, 300_000, length - opening.size, dtype=np.uint64)))
    records = [_record("root", opening, gen, 1.0, "root", None),
               _record("brk", p, rng.integers(0, 150_000, 10, dtype=np.uint64), 2.0, "unresolved", None)]
    return build_rollout(load_snapshots(orjson.dumps({"rollout_id": "bench", "entries": records}))[0])


def measure(label: str, result, runs: int) -> None:
    diagnose(result)  # warm
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        breaks = diagnose(result)
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    diagnose(result)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    b = breaks[0]
    print(f"  {label:<28} median {statistics.median(times) * 1e3:7.2f} ms  (min {min(times) * 1e3:.2f}, max "
          f"{max(times) * 1e3:.2f})  peak {peak / 2**20:6.2f} MiB  -> {len(breaks)} break, cause {b.cause}, "
          f"predecessor {b.predecessor} ({b.relation}), {len(b.divergences)}+{b.more_divergences} divergences")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print("building inputs ...", flush=True)
    cases = [("P300 generation dropped", p300()), ("P300 stale claim", p300(claim=True)),
             ("90k many divergences", long_pair("many")), ("90k new context", long_pair("new"))]
    tokens = sum(e.full_len for e in cases[0][1].build.entries.values())
    print(f"P300: {len(cases[0][1].build.entries)} calls, {cases[0][1].build.entries['call-00299'].full_len} tokens "
          f"in the last call ({tokens / 1e6:.1f}M tokens over all calls); {args.runs} runs each")
    for label, result in cases:
        measure(label, result, args.runs)


if __name__ == "__main__":
    main()
