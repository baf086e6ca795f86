"""Benchmark `tokencap build` against a plain orjson script, side by side in one run.

The reference is the least a consumer could do with a full-prompt snapshot: orjson-load
the file, hash each call's full sequence once (the wire digest), and write every call's
output item back with its running prompt. `tokencap build` does strictly more (validation,
chaining, verdicts, metrics), so the ratio says how much its data layout saves.

    python benchmarks/bench_build.py            # 300 calls, 5 runs each
    python benchmarks/bench_build.py --runs 7 --calls 300 --long-calls 1500

tokencap's modules are byte-compiled first, as an installed package's are. Figures are wall time (median of the runs) and peak RSS of each child process (from
wait4's rusage, so every run is measured on its own). Generated inputs go to
benchmarks/out/ (git-ignored).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import orjson

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"

BASELINE = r'''
import sys, hashlib, struct, orjson
data = orjson.loads(open(sys.argv[1], "rb").read())
entries = sorted(data["entries"], key=lambda e: (len(e["prompt_token_ids"]), e["model_call_id"]))
items = []
for e in entries:
    full = e["prompt_token_ids"] + e["generation_token_ids"]
    h = hashlib.sha256(b"nemo-gym-tokens")
    h.update(struct.pack(">BQ", 1, len(full)))
    h.update(struct.pack(f">{len(full)}Q", *full))
    e["digest_checked"] = h.hexdigest()
    item = dict(e["output_items"][0])
    item.update(prompt_token_ids=e["prompt_token_ids"], generation_token_ids=e["generation_token_ids"],
                generation_log_probs=e["generation_log_probs"])
    items.append(item)
open(sys.argv[2], "wb").write(orjson.dumps({"output": items}))
'''


def _digest(ids: np.ndarray) -> str:
    h = hashlib.sha256(b"nemo-gym-tokens")
    if ids.size:
        h.update(struct.pack(">BQ", 1, ids.size))
        h.update(ids.astype(">u8").tobytes())
    return h.hexdigest()


def make_linear_rollout(path: Path, n_calls: int, tool_tokens: int = 200, gen_tokens: int = 100,
                        delta: bool = False, seed: int = 0) -> None:
    """A linear agent rollout: each call adds `tool_tokens` of tool output and generates `gen_tokens`."""
    rng = np.random.default_rng(seed)
    seq = np.zeros(0, dtype=np.uint64)
    entries = []
    prev = None
    for i in range(n_calls):
        suffix = rng.integers(0, 150_000, tool_tokens, dtype=np.uint64)
        prompt = np.concatenate((seq, suffix))
        gen = rng.integers(0, 150_000, gen_tokens, dtype=np.uint64)
        full = np.concatenate((prompt, gen))
        call_id = f"call-{i:05d}"
        entries.append({
            "schema_version": 5, "rollout_id": "bench", "model_call_id": call_id, "model": "policy",
            "prompt_token_ids": (suffix if delta and prev else prompt).tolist(),
            "prompt_is_delta": bool(delta and prev),
            "generation_token_ids": gen.tolist(),
            "generation_log_probs": np.round(-rng.random(gen_tokens) * 3, 4).tolist(),
            "output_items": [{"type": "message", "role": "assistant",
                              "content": [{"type": "output_text", "text": f"turn {i}"}]}],
            "token_item_index": 0, "created_at": 1000.0 + i,
            "parent_resolution": "resolved" if prev else "root", "parent_call_id": prev,
            "cum_len": int(full.size), "digest": _digest(full), "finish_reason": "tool_calls",
        })
        prev, seq = call_id, full
    path.write_bytes(orjson.dumps({"rollout_id": "bench", "entries": entries}))


def _run(cmd: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}")
    return elapsed, usage.ru_maxrss  # KiB on Linux


def measure(label: str, cmd: list[str], runs: int) -> tuple[float, int]:
    times, peaks = [], []
    for _ in range(runs):
        t, peak = _run(cmd)
        times.append(t)
        peaks.append(peak)
    med, peak = statistics.median(times), max(peaks)
    print(f"  {label:<28} median {med:6.3f} s  (runs: {', '.join(f'{t:.3f}' for t in times)})  "
          f"peak RSS {peak / 1024:7.1f} MiB")
    return med, peak


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--generate":
        make_linear_rollout(Path(sys.argv[2]), **orjson.loads(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--long-calls", type=int, default=1500)
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    full = OUT / f"linear{args.calls}_full.json"
    delta = OUT / f"linear{args.calls}_delta.json"
    long_delta = OUT / f"linear{args.long_calls}_delta.json"
    for path, kwargs in ((full, dict(n_calls=args.calls)), (delta, dict(n_calls=args.calls, delta=True)),
                         (long_delta, dict(n_calls=args.long_calls, tool_tokens=20, gen_tokens=10, delta=True))):
        if not path.exists():
            # In a child process: a child forked from a parent that held the generated data
            # would report the parent's pages in its own peak RSS.
            print(f"generating {path.name} ...", flush=True)
            subprocess.run([sys.executable, __file__, "--generate", str(path), orjson.dumps(kwargs).decode()],
                           check=True)
    # An installed package ships byte-compiled modules; an editable checkout under
    # PYTHONDONTWRITEBYTECODE=1 would otherwise recompile tokencap on every start.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(HERE.parent / "tokencap")], check=True)
    baseline = OUT / "baseline.py"
    baseline.write_text(BASELINE)
    py = sys.executable
    print(f"inputs: {full.name} {full.stat().st_size / 1e6:.1f} MB, {delta.name} {delta.stat().st_size / 1e6:.2f} MB, "
          f"{long_delta.name} {long_delta.stat().st_size / 1e6:.2f} MB; {args.runs} runs each")
    base_t, base_m = measure("baseline (orjson script)", [py, str(baseline), str(full), str(OUT / "base.json")], args.runs)
    tc_t, tc_m = measure("tokencap build (full)", [py, "-m", "tokencap", "build", str(full), "-o",
                                                   str(OUT / "tc_full.json")], args.runs)
    dl_t, dl_m = measure("tokencap build (delta)", [py, "-m", "tokencap", "build", str(delta), "-o",
                                                    str(OUT / "tc_delta.json")], args.runs)
    lg_t, lg_m = measure(f"tokencap build ({args.long_calls} calls)", [py, "-m", "tokencap", "build", str(long_delta),
                                                                       "-o", str(OUT / "tc_long.json")], args.runs)
    print(f"full-prompt: time {tc_t / base_t:.2f}x baseline (target <= 0.30), peak memory {tc_m / base_m:.2f}x "
          f"(target <= 0.50)")
    print(f"delta:       time {dl_t / base_t:.2f}x baseline (target < 0.20)")
    same = orjson.loads((OUT / "tc_full.json").read_bytes())["rebuilt_response"] == \
        orjson.loads((OUT / "tc_delta.json").read_bytes())["rebuilt_response"]
    print(f"full and delta builds give the same response: {same}")


if __name__ == "__main__":
    main()
