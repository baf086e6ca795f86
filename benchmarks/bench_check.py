"""Benchmark `tokencap check` against the naive check a trainer makes, side by side in one run.

The input is a rollouts JSONL as NeMo Gym writes it with token ids on the output items
(no token capture): 120 rollouts of 24 model calls, prompts growing from ~3k tokens, a
third of them broken (a later prompt leaves out an earlier call's reasoning). About 140 MB.

The naive check is what a trainer does before a training step: `json.loads` each line, then
check that every token-bearing item's prompt starts with every token before it. It says
nothing about where or why; `tokencap check` builds every rollout, verifies every link and
diagnoses every break. The goals: `tokencap check` in at most the naive check's CPU time,
and its peak memory on the whole file at most 1.25x its peak on the file's first half
(memory flat in the number of rollouts).

    python benchmarks/bench_check.py                 # 120 rollouts, 5 runs each
    python benchmarks/bench_check.py --runs 3 --rollouts 120 --turns 24

Figures are CPU time (user + system, the steadier one on a shared machine) and wall time,
medians of the runs, the commands interleaved run by run, and each child's peak RSS (from
wait4's rusage). Generated inputs go to benchmarks/out/ (git-ignored).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"

NAIVE = r'''
import json, sys
stopped = 0
with open(sys.argv[1], "rb") as f:
    for line in f:
        if not line.strip():
            continue
        record = json.loads(line)
        seen = []
        for item in record["response"]["output"]:
            if not item.get("generation_token_ids"):
                continue
            prompt = item.get("prompt_token_ids") or []
            if prompt[:len(seen)] != seen:
                stopped += 1
                break
            seen = prompt + item["generation_token_ids"]
print(stopped)
'''


def _ids(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 150_000, n, dtype=np.int64)


def make_rollout(index: int, turns: int, opening: int, broken: bool, rng: np.random.Generator) -> bytes:
    """One rollout record: `turns` calls of reasoning + a tool call, each followed by its tool's
    output; the last call answers. A broken one leaves one call's reasoning out of every later
    prompt (a chat template that strips earlier reasoning)."""
    history = [_ids(rng, opening)]          # the rendered context, turn by turn
    output = []
    cut = int(rng.integers(4, turns - 2)) if broken else -1
    stripped: tuple[int, int] | None = None  # (turn, reasoning length) left out of later prompts
    for turn in range(turns):
        prompt = np.concatenate(history)
        if stripped is not None:
            # the stripped call's reasoning is the head of its generation in history
            at = 1 + 2 * stripped[0]
            history_wo = history[:at] + [history[at][stripped[1]:]] + history[at + 1:]
            prompt = np.concatenate(history_wo)
        reasoning = _ids(rng, 80)
        answer = _ids(rng, 60)
        generation = np.concatenate((reasoning, answer))
        logprobs = np.round(-rng.random(generation.size) * 2, 5)
        tokens = {"prompt_token_ids": prompt.tolist(), "generation_token_ids": generation.tolist(),
                  "generation_log_probs": logprobs.tolist()}
        output.append({"type": "reasoning", "id": f"rs_{turn}", "summary": [
            {"type": "summary_text", "text": f"thinking about step {turn}"}]})
        if turn == turns - 1:
            output.append({"type": "message", "id": f"msg_{turn}", "role": "assistant", "status": "completed",
                           "content": [{"type": "output_text", "text": "done", "annotations": []}], **tokens})
            break
        output.append({"type": "function_call", "id": f"fc_{turn}", "call_id": f"call_{turn}", "name": "run",
                       "arguments": orjson.dumps({"step": turn}).decode(), "status": "completed", **tokens})
        tool_output = _ids(rng, 260)
        output.append({"type": "function_call_output", "call_id": f"call_{turn}", "output": f"result {turn}"})
        history += [generation, tool_output]
        if turn == cut:
            stripped = (turn, reasoning.size)
    record = {"responses_create_params": {"input": [{"role": "user", "content": "task"}]},
              "response": {"id": f"resp_{index}", "object": "response", "model": "policy", "status": "completed",
                           "output": output},
              "reward": float(rng.random()), "_ng_task_index": index // 4, "_ng_rollout_index": index % 4}
    return orjson.dumps(record) + b"\n"


def generate(path: Path, rollouts: int, turns: int, opening: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".partial")
    with open(tmp, "wb") as f:
        for i in range(rollouts):
            f.write(make_rollout(i, turns, opening, broken=(i % 3 == 2), rng=rng))
    tmp.replace(path)


def _run(cmd: list[str]) -> tuple[float, float, int, int]:
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, cwd=tempfile.gettempdir(), env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, os.waitstatus_to_exitcode(status)


def measure(cases: list[tuple[str, list[str], tuple[int, ...]]], runs: int) -> dict[str, tuple[float, float, int]]:
    """Each case's median wall time, median CPU time and peak RSS (KiB), the cases in turn every round."""
    seen: dict[str, list[tuple[float, float, int]]] = {label: [] for label, _, _ in cases}
    for _ in range(runs):
        for label, cmd, ok in cases:
            wall, cpu, peak, code = _run(cmd)
            if code not in ok:
                raise SystemExit(f"{label}: exit {code} ({' '.join(cmd)})")
            seen[label].append((wall, cpu, peak))
    out = {}
    for label, _, _ in cases:
        walls, cpus, peaks = zip(*seen[label], strict=True)
        wall, cpu, peak = statistics.median(walls), statistics.median(cpus), max(peaks)
        print(f"  {label:<36} CPU median {cpu:6.2f} s (runs {', '.join(f'{c:.2f}' for c in cpus)})  "
              f"wall median {wall:6.2f} s  peak RSS {peak / 1024:7.1f} MiB", flush=True)
        out[label] = (wall, cpu, peak)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rollouts", type=int, default=120)
    parser.add_argument("--turns", type=int, default=24)
    parser.add_argument("--opening", type=int, default=3000, help="the first prompt's length in tokens")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    whole = OUT / f"rollouts{args.rollouts}x{args.turns}.jsonl"
    half = OUT / f"rollouts{args.rollouts}x{args.turns}_half.jsonl"
    if not whole.exists():
        print(f"generating {whole.name} ...", flush=True)
        generate(whole, args.rollouts, args.turns, args.opening)
    if not half.exists():
        with open(whole, "rb") as f:
            lines = f.readlines()
        half.write_bytes(b"".join(lines[:len(lines) // 2]))
    naive = OUT / "naive_check.py"
    naive.write_text(NAIVE)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(HERE.parent / "tokencap")], check=True)
    py = sys.executable
    print(f"input: {whole.name} {whole.stat().st_size / 1e6:.0f} MB ({args.rollouts} rollouts x {args.turns} "
          f"calls), first half {half.stat().st_size / 1e6:.0f} MB; {args.runs} runs each, interleaved")
    figures = measure([
        ("naive check (json.loads + prefix)", [py, str(naive), str(whole)], (0,)),
        ("tokencap check", [py, "-m", "tokencap", "check", str(whole)], (0, 1)),
        ("tokencap check (first half)", [py, "-m", "tokencap", "check", str(half)], (0, 1)),
    ], args.runs)
    _, naive_cpu, _ = figures["naive check (json.loads + prefix)"]
    _, check_cpu, check_peak = figures["tokencap check"]
    _, _, half_peak = figures["tokencap check (first half)"]
    print(f"tokencap check: CPU {check_cpu / naive_cpu:.2f}x the naive check (goal <= 1.0); "
          f"peak memory whole / first half {check_peak / half_peak:.2f}x (goal <= 1.25)")


if __name__ == "__main__":
    main()
