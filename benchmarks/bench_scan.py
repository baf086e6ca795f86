"""Benchmark `tokencap scan` on synthetic runs: workers, engines, memory over run size.

    python benchmarks/bench_scan.py                 # 2,000 rollouts of 20 calls, 3 runs each
    python benchmarks/bench_scan.py --runs 5 --rollouts 2000 --calls 20 --ray

What it reports (median wall time of the whole `tokencap scan` command over the runs, and
peak memory from one more run that samples it):
- rollouts per second with 1 and 2 local workers, and the speed-up;
- with ``--ray``: the same on a local Ray of 2 CPUs (Ray's start-up included, and shown
  apart by also timing a scan of 10 rollouts);
- peak memory of the whole process tree (the scan and its workers, sampled from /proc
  every 20 ms) for runs of 500 and 2,000 rollouts, and how much it grows between them.

Runs are generated into benchmarks/out/ (git-ignored) by `make_big_run.py`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"


def write_run(path: Path, rollouts: int, calls: int) -> None:
    subprocess.run([sys.executable, str(HERE / "make_big_run.py"), str(path), "--rollouts", str(rollouts),
                    "--calls", str(calls)], check=True)


def _tree_rss_kib(root: int) -> int:
    """Resident memory of ``root`` and all its descendants, in KiB."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{entry}/statm", "rb") as handle:
                pages = int(handle.read().split()[1])
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        rss[int(entry)] = pages * (os.sysconf("SC_PAGE_SIZE") // 1024)
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(child for child, parent in parents.items() if parent == pid)
    return total


def timed_scan(source: Path, out: Path, *args: str, sample: bool = True) -> tuple[float, int]:
    """Wall seconds and peak process-tree RSS (KiB) of one `tokencap scan`."""
    return timed_command([sys.executable, "-m", "tokencap", "scan", str(source), "-o", str(out), *args], sample)


def timed_command(command: list[str], sample: bool = True) -> tuple[float, int]:
    """Wall seconds and peak process-tree RSS (KiB) of one command. Sampling /proc costs CPU
    on a 2-core machine, so timing runs leave it off (``sample=False``)."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    stop = threading.Event()

    def sample_rss() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _tree_rss_kib(proc.pid))
            stop.wait(0.02)

    sampler = threading.Thread(target=sample_rss, daemon=True)
    if sample:
        sampler.start()
    _, err = proc.communicate()
    elapsed = time.perf_counter() - started
    stop.set()
    if sample:
        sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command[2:4])} failed ({proc.returncode}): {err.decode()[-2000:]}")
    return elapsed, peak


def median_scan(source: Path, runs: int, *args: str) -> tuple[float, int]:
    """Median wall time of ``runs`` unsampled scans, and the peak memory of one more, sampled."""
    times = [timed_scan(source, OUT / "bench.parquet", *args, sample=False)[0] for _ in range(runs)]
    _, peak = timed_scan(source, OUT / "bench.parquet", *args)
    return statistics.median(times), peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--ray", action="store_true", help="also time --engine ray on a local 2-CPU Ray")
    args = parser.parse_args()

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(HERE.parent / "tokencap")], check=True)
    OUT.mkdir(exist_ok=True)
    big = OUT / f"run-{args.rollouts}x{args.calls}"
    small = OUT / f"run-500x{args.calls}"
    tiny = OUT / f"run-10x{args.calls}"
    for path, n in ((big, args.rollouts), (small, 500), (tiny, 10)):
        if not path.exists():
            write_run(path, n, args.calls)

    print(f"run: {args.rollouts:,} rollouts x ~{args.calls} calls, median of {args.runs}")
    one, mem_one = median_scan(big, args.runs, "--workers", "1")
    two, mem_two = median_scan(big, args.runs, "--workers", "2")
    print(f"local, 1 worker : {one:6.2f} s  {args.rollouts / one:7.0f} rollouts/s  peak {mem_one / 1024:6.0f} MiB")
    print(f"local, 2 workers: {two:6.2f} s  {args.rollouts / two:7.0f} rollouts/s  peak {mem_two / 1024:6.0f} MiB"
          f"  speed-up {one / two:.2f}x")
    _, mem_small = median_scan(small, args.runs, "--workers", "2")
    print(f"peak memory, 2 workers: 500 rollouts {mem_small / 1024:.0f} MiB, {args.rollouts:,} rollouts "
          f"{mem_two / 1024:.0f} MiB ({(mem_two / mem_small - 1) * 100:+.1f}%)")
    if args.ray:
        ray_big, mem_ray = median_scan(big, args.runs, "--engine", "ray", "--workers", "2")
        ray_tiny, _ = median_scan(tiny, args.runs, "--engine", "ray", "--workers", "2")
        work = max(ray_big - ray_tiny, 1e-9)
        print(f"ray, 2 CPUs     : {ray_big:6.2f} s  {args.rollouts / ray_big:7.0f} rollouts/s "
              f"({args.rollouts / work:.0f}/s after Ray's start-up of ~{ray_tiny:.1f} s)  peak {mem_ray / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
