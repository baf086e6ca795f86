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

With ``--floor``: in one process, `scan_shard` over a run's units against a floor that
reads every file of the run and parses every line with orjson, interleaved, median of the
runs, and the ratio (``--floor-rollouts``/``--floor-calls`` pick the run; default 500 × 80,
about 95 MB). A second line adds to that floor the digests any verifier must compute (one
SHA-256 per call of its whole prompt + generation), so the report shows what is inherent.

With ``--diagnosis``: the cost of the diagnosis columns (docs/contract.md#scan-diagnosis-columns). The code of ``--before``
(a git ref, default ``main``) is exported into a temporary directory and both checkouts scan
the same run (``--break-weight 3``: about a third of the rollouts have a break), interleaved,
each `tokencap scan --workers 1` with PYTHONPATH on its checkout; medians, their ratio, and the
peak memory of one sampled scan each, plus this checkout's peak on a run a quarter the size
(memory must stay flat in the number of rollouts). A second pair of lines does the same with
rollout records that carry what Gym delivered and harness evidence for every rollout.

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


def parse_floor(source: Path) -> int:
    """Read every file of the run and parse every line with orjson: what any scan must pay."""
    import orjson

    lines = 0
    for entry in sorted(os.scandir(source), key=lambda e: e.name):
        with open(entry.path, "rb") as handle:
            data = handle.read()
        if entry.name.endswith((".jsonl", ".json")):
            for line in data.splitlines():
                if line.strip():
                    try:
                        orjson.loads(line)
                    except orjson.JSONDecodeError:
                        pass  # a torn tail or a hostile line of the sample mix
                    lines += 1
    return lines


def digest_floor(source: Path) -> int:
    """The parse floor plus what any verifier of the run must also compute: one digest per
    captured call of its whole prompt + generation (a delta record's prompt rebuilt on its
    parent's sequence), as numpy big-endian u64 and SHA-256. Returns the digests made."""
    import hashlib
    import struct

    import numpy as np
    import orjson

    from tokencap.digest import DIGEST_DOMAIN, DIGEST_VERSION

    made = 0
    for entry in sorted(os.scandir(source), key=lambda e: e.name):
        with open(entry.path, "rb") as handle:
            data = handle.read()
        if not entry.name.endswith((".jsonl", ".json")):
            continue
        sequences: dict[str, np.ndarray] = {}
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a torn tail or a hostile line of the sample mix
            try:
                own = np.array(record["prompt_token_ids"] + record["generation_token_ids"], dtype=">u8")
                if record.get("prompt_is_delta"):
                    own = np.concatenate((sequences[record["parent_call_id"]], own))
            except (KeyError, TypeError, ValueError, OverflowError):
                continue  # a refusal, or a record whose parent cannot be found
            sequences[record["model_call_id"]] = own
            hasher = hashlib.sha256(DIGEST_DOMAIN)
            if own.size:
                hasher.update(struct.pack(">BQ", DIGEST_VERSION, own.size))
                hasher.update(own)
            hasher.hexdigest()
            made += 1
    return made


def scan_in_process(source: Path) -> int:
    """`scan_shard` over every unit of the run, in this process (no pool, no parquet)."""
    from tokencap.run.discover import discover
    from tokencap.run.work import RunOptions, scan_shard

    units = discover(source)
    return len(scan_shard(units, RunOptions(single_rollout=len(units) == 1)))


def floor_ratio(source: Path, runs: int) -> None:
    import gc

    scan_in_process(source)  # imports and page cache warm, for all three
    parse_floor(source)
    digest_floor(source)
    floors, digests, scans = [], [], []
    for _ in range(runs):
        for fn, times in ((parse_floor, floors), (digest_floor, digests), (scan_in_process, scans)):
            gc.collect()
            started = time.process_time()
            fn(source)
            times.append(time.process_time() - started)
    floor, digest, scan = statistics.median(floors), statistics.median(digests), statistics.median(scans)

    def shown(times: list[float]) -> str:
        return ", ".join(f"{t:.2f}" for t in times)

    print(f"{source.name}: floor (read + orjson every line) {floor:.2f} s CPU, scan_shard {scan:.2f} s CPU, "
          f"ratio {scan / floor:.2f}x (median of {runs}; runs: floor {shown(floors)}; scan {shown(scans)})")
    print(f"{source.name}: floor + digests (read + orjson + one digest per call of its prompt + generation) "
          f"{digest:.2f} s CPU, scan_shard {scan:.2f} s CPU, ratio {scan / digest:.2f}x (runs: {shown(digests)})")


def records_for(run: Path, out: Path) -> Path:
    """Rollout records for every rollout of a `make_big_run` run: what Gym delivered (trainable, by token
    capture), a tool-call and a compaction observation naming its first call, and a final answer that
    names no call (the same for both checkouts: it only adds work)."""
    import json

    expected = json.loads((run / "expected.json.txt").read_text())
    with open(out, "w") as handle:
        for rollout_id in sorted(expected["rollouts"]):
            handle.write(json.dumps({
                "rollout_id": rollout_id, "reward": 1.0, "mask_sample": False, "_ng_token_capture": {"calls": 1},
                "ng_agent_observations": {"source": "bench", "gaps": [], "records": [
                    {"kind": "tool_call", "tool_call_id": "t1", "tool_name": "bash", "status": "ok",
                     "duration_ms": 12.5},
                    {"kind": "context_compaction", "after_model_call": {"model_call_id": "call-0002"},
                     "trigger": "tokens", "tokens_before": 900, "tokens_after": 100}]},
                "response": {"object": "response", "output": [
                    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}]},
            }) + "\n")
    return out


def diagnosis_cost(args: argparse.Namespace) -> None:
    """The scan with the diagnosis columns against the scan of ``--before``, side by side (see the docstring)."""
    import shutil
    import tempfile

    OUT.mkdir(exist_ok=True)
    repo = HERE.parent
    big = OUT / f"run-{args.rollouts}x{args.calls}-breaks"
    quarter = OUT / f"run-{max(1, args.rollouts // 4)}x{args.calls}-breaks"
    for path, n in ((big, args.rollouts), (quarter, max(1, args.rollouts // 4))):
        if not path.exists():
            subprocess.run([sys.executable, str(HERE / "make_big_run.py"), str(path), "--rollouts", str(n),
                            "--calls", str(args.calls), "--break-weight", "3"], check=True)
    records = records_for(big, OUT / f"records-{args.rollouts}x{args.calls}.jsonl")
    before = Path(tempfile.mkdtemp(prefix="tokencap-before-"))
    try:
        archive = subprocess.run(["git", "-C", str(repo), "archive", args.before, "tokencap"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        checkouts = {"before": before, "after": repo}
        for path in checkouts.values():
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(path / "tokencap")], check=True)

        def cpu_of(cmd: list[str]) -> tuple[float, float]:
            """(wall, CPU) seconds of one command: CPU is user + system of it and its children, which
            other load on a shared machine disturbs far less than the wall clock."""
            import resource

            before_usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall, _ = timed_command(cmd, sample=False)
            after_usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            return wall, (after_usage.ru_utime - before_usage.ru_utime) + (after_usage.ru_stime - before_usage.ru_stime)

        def command(code: Path, run: Path, *extra: str) -> list[str]:
            return ["env", f"PYTHONPATH={code}", sys.executable, "-m", "tokencap", "scan", str(run), "-o",
                    str(OUT / f"diag-{code.name}.parquet"), "--workers", "1", *extra]

        broken = _broken_share(repo, big)
        print(f"run: {args.rollouts:,} rollouts x ~{args.calls} calls, {broken:.0%} with a break; "
              f"before = {args.before}, interleaved, median of {args.runs}")
        for label, extra in (("no records", ()), ("records with evidence", ("--final-responses", str(records)))):
            times: dict[str, list[float]] = {"before": [], "after": []}
            cpus: dict[str, list[float]] = {"before": [], "after": []}
            for name, code in checkouts.items():  # warm-up: imports and page cache
                timed_command(command(code, big, *extra), sample=False)
            for _ in range(args.runs):
                for name, code in checkouts.items():
                    wall, cpu = cpu_of(command(code, big, *extra))
                    times[name].append(wall)
                    cpus[name].append(cpu)
            peaks = {name: timed_command(command(code, big, *extra))[1] for name, code in checkouts.items()}
            small = timed_command(command(repo, quarter))[1] if not extra else None
            med = {name: statistics.median(t) for name, t in times.items()}
            cpu = {name: statistics.median(t) for name, t in cpus.items()}
            print(f"{label}: CPU before {cpu['before']:.2f} s, after {cpu['after']:.2f} s, "
                  f"ratio {cpu['after'] / cpu['before']:.3f}x (runs: before "
                  f"{', '.join(f'{t:.2f}' for t in cpus['before'])}; after "
                  f"{', '.join(f'{t:.2f}' for t in cpus['after'])})")
            print(f"{label}: wall before {med['before']:.2f} s, after {med['after']:.2f} s, "
                  f"ratio {med['after'] / med['before']:.3f}x")
            print(f"{label}: peak memory before {peaks['before'] / 1024:.0f} MiB, after {peaks['after'] / 1024:.0f} MiB"
                  + (f"; after on {max(1, args.rollouts // 4):,} rollouts {small / 1024:.0f} MiB "
                     f"({(peaks['after'] / small - 1) * 100:+.1f}% for {args.rollouts:,})" if small else ""))
    finally:
        shutil.rmtree(before, ignore_errors=True)


def _broken_share(repo: Path, run: Path) -> float:
    """The share of the run's rollouts with a break, read from this checkout's scan table."""
    import pyarrow.parquet as pq

    table = pq.read_table(OUT / f"diag-{repo.name}.parquet") if (OUT / f"diag-{repo.name}.parquet").exists() else None
    if table is None or table.num_rows == 0 or "breaks" not in table.column_names:
        subprocess.run(["env", f"PYTHONPATH={repo}", sys.executable, "-m", "tokencap", "scan", str(run), "-o",
                        str(OUT / f"diag-{repo.name}.parquet"), "--workers", "2"], check=True, capture_output=True)
        table = pq.read_table(OUT / f"diag-{repo.name}.parquet")
    breaks = table.column("breaks").to_pylist()
    return sum(1 for b in breaks if b) / max(1, len(breaks))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--ray", action="store_true", help="also time --engine ray on a local 2-CPU Ray")
    parser.add_argument("--floor", action="store_true", help="only the in-process scan against the parse floor")
    parser.add_argument("--floor-rollouts", type=int, default=500)
    parser.add_argument("--floor-calls", type=int, default=80)
    parser.add_argument("--floor-run", type=Path, help="an existing run directory for --floor")
    parser.add_argument("--diagnosis", action="store_true",
                        help="only the scan with the diagnosis columns against --before's, side by side")
    parser.add_argument("--before", default="main", help="the git ref --diagnosis compares with (default: main)")
    args = parser.parse_args()

    if args.diagnosis:
        diagnosis_cost(args)
        return

    if args.floor:
        sys.path.insert(0, str(HERE.parent))  # this checkout's tokencap, in this process
        source = args.floor_run
        if source is None:
            OUT.mkdir(exist_ok=True)
            source = OUT / f"run-{args.floor_rollouts}x{args.floor_calls}"
            if not source.exists():
                write_run(source, args.floor_rollouts, args.floor_calls)
        floor_ratio(source, args.runs)
        return
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
