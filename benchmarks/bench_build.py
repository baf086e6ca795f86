"""Benchmark `tokencap build` against a plain orjson script, side by side in one run.

The reference is the least a consumer could do with a full-prompt snapshot: orjson-load
the file, hash each call's full sequence once (the wire digest), and write every call's
output item back with its running prompt. `tokencap build` does strictly more (validation,
chaining, verdicts, metrics), so the ratio says how much its data layout saves.

    python benchmarks/bench_build.py            # 300 calls, 5 runs each
    python benchmarks/bench_build.py --runs 7 --calls 300 --long-calls 1500
    python benchmarks/bench_build.py --runs 7 --against 180a37f   # also that commit's tokencap/

``--against COMMIT`` extracts that commit's ``tokencap/`` (``git archive``) into a temporary
directory and times it on the same inputs, run for run with the checkout (interleaved, so
both see the same machine load), and says whether both wrote the same bytes.

tokencap's modules are byte-compiled first, as an installed package's are. Figures are wall
time and CPU time (user + system; steadier on a shared machine), medians of the runs, and
peak RSS of each child process (from wait4's rusage, so every run is measured on its own).
Generated inputs go to benchmarks/out/ (git-ignored).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import struct
import shutil
import subprocess
import sys
import tempfile
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


def _run(cmd: list[str], tree: Path) -> tuple[float, float, int]:
    start = time.perf_counter()
    # From a neutral directory with the tree first on the path: `python -m` would put the
    # working directory first, and the editable install may point at another checkout.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, cwd=tempfile.gettempdir(), env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss  # KiB on Linux


def measure(cases: list[tuple[str, list[str], Path]], runs: int) -> dict[str, tuple[float, int]]:
    """Each case's median wall time and peak RSS, the cases run in turn in every round."""
    times: dict[str, list[float]] = {label: [] for label, _, _ in cases}
    cpus: dict[str, list[float]] = {label: [] for label, _, _ in cases}
    peaks: dict[str, list[int]] = {label: [] for label, _, _ in cases}
    for _ in range(runs):
        for label, cmd, tree in cases:
            t, cpu, peak = _run(cmd, tree)
            times[label].append(t)
            cpus[label].append(cpu)
            peaks[label].append(peak)
    out = {}
    for label, _, _ in cases:
        med, cpu, peak = statistics.median(times[label]), statistics.median(cpus[label]), max(peaks[label])
        print(f"  {label:<34} median {med:6.3f} s  (runs: {', '.join(f'{t:.3f}' for t in times[label])})  "
              f"CPU median {cpu:6.3f} s  peak RSS {peak / 1024:7.1f} MiB", flush=True)
        out[label] = (med, cpu, peak)
    return out


def extract_tree(commit: str, into: Path) -> Path:
    """``commit``'s tokencap/ package under ``into`` (what PYTHONPATH then points at)."""
    archive = subprocess.run(["git", "-C", str(HERE.parent), "archive", commit, "tokencap"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(into / "tokencap")], check=True)
    return into


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--generate":
        make_linear_rollout(Path(sys.argv[2]), **orjson.loads(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--long-calls", type=int, default=1500)
    parser.add_argument("--against", metavar="COMMIT", help="also time this commit's tokencap/ (e.g. 180a37f), "
                        "run for run with the checkout")
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
    tree = HERE.parent
    old_dir = Path(tempfile.mkdtemp(prefix="tokencap-against-")) if args.against else None
    try:
        old = extract_tree(args.against, old_dir) if old_dir is not None else None
        print(f"inputs: {full.name} {full.stat().st_size / 1e6:.1f} MB, {delta.name} "
              f"{delta.stat().st_size / 1e6:.2f} MB, {long_delta.name} {long_delta.stat().st_size / 1e6:.2f} MB; "
              f"{args.runs} runs each" + (f"; against {args.against}, interleaved" if old else ""))
        build = [py, "-m", "tokencap", "build"]
        cases = [("baseline (orjson script)", [py, str(baseline), str(full), str(OUT / "base.json")], tree),
                 ("tokencap build (full)", build + [str(full), "-o", str(OUT / "tc_full.json")], tree)]
        if old:
            cases.append((f"{args.against} build (full)", build + [str(full), "-o", str(OUT / "old_full.json")], old))
        figures = measure(cases, args.runs)
        cases = [("tokencap build (delta)", build + [str(delta), "-o", str(OUT / "tc_delta.json")], tree),
                 (f"tokencap build ({args.long_calls} calls)", build + [str(long_delta), "-o",
                                                                       str(OUT / "tc_long.json")], tree)]
        if old:
            cases.insert(1, (f"{args.against} build (delta)", build + [str(delta), "-o",
                                                                      str(OUT / "old_delta.json")], old))
            cases.append((f"{args.against} build ({args.long_calls} calls)",
                          build + [str(long_delta), "-o", str(OUT / "old_long.json")], old))
        figures.update(measure(cases, args.runs))
    finally:
        if old_dir is not None:
            shutil.rmtree(old_dir, ignore_errors=True)
    base_t, base_c, base_m = figures["baseline (orjson script)"]
    tc_t, tc_c, tc_m = figures["tokencap build (full)"]
    dl_t, dl_c, _ = figures["tokencap build (delta)"]
    print(f"full-prompt: time {tc_t / base_t:.2f}x baseline (target <= 0.20; CPU {tc_c / base_c:.2f}x), "
          f"peak memory {tc_m / base_m:.2f}x (target <= 0.50)")
    print(f"delta:       time {dl_t / base_t:.2f}x baseline (target < 0.20; CPU {dl_c / base_c:.2f}x)")
    if args.against:
        for kind in ("full", "delta", f"{args.long_calls} calls"):
            new_t, new_c, new_m = figures[f"tokencap build ({kind})"]
            old_t, old_c, old_m = figures[f"{args.against} build ({kind})"]
            print(f"{kind + ':':<12} time {new_t / old_t:.2f}x {args.against} ({new_t:.3f} s against {old_t:.3f} s; "
                  f"CPU {new_c:.3f} s against {old_c:.3f} s), peak memory {new_m / 1024:.1f} MiB against "
                  f"{old_m / 1024:.1f} MiB")
        for mine, theirs in (("tc_full.json", "old_full.json"), ("tc_delta.json", "old_delta.json"),
                             ("tc_long.json", "old_long.json")):
            same = (OUT / mine).read_bytes() == (OUT / theirs).read_bytes()
            print(f"{mine} and {args.against}'s {theirs}: {'byte-identical' if same else 'DIFFERENT'}")
    same = orjson.loads((OUT / "tc_full.json").read_bytes())["rebuilt_response"] == \
        orjson.loads((OUT / "tc_delta.json").read_bytes())["rebuilt_response"]
    print(f"full and delta builds give the same response: {same}")


if __name__ == "__main__":
    main()
