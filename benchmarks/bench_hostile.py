"""Time and peak memory of `tokencap build` on three hostile inputs.

    python benchmarks/bench_hostile.py              # 3 runs each (median)
    python benchmarks/bench_hostile.py --runs 5 --keep

The inputs are generated into a temporary directory (deleted afterwards unless --keep,
never committed):

- ``bomb.zip``: a zip bomb, one store member of 2.5 GB of zero bytes deflated to ~2.5 MB,
  next to a small valid rollout;
- ``blank.jsonl``: two records with 32 MiB of blank lines between them;
- ``many.zip``: 10,000 small snapshot JSON files (three calls each), ~21 MB zipped;
- ``renamed.zip``: the same members named ``f{i}.json`` holding rollout ``r{i}`` (names that are
  not rollout ids, so each member's name sorts before every rollout id);
- ``renamed12.zip``: 10,000 snapshots of 12 calls (~8.7 KB each), members ``f{i}.json`` holding
  ``r{i}``; ``renamed12/``: the first 1,000 of them as files of a plain directory;
- ``many.jsonl``: the same records as one JSONL file (what the same bytes cost without
  the per-file overhead).
- ``sparse.jsonl``: a 3 GiB sparse file (all zero bytes, no disk blocks), as SOURCE: binary
  input that must be refused from its first bytes, not after scanning it for line ends.

Each run is a fresh ``python -m tokencap build INPUT -o OUT``; the figures are wall time
and CPU time (user + system; steadier than wall time on a shared machine), medians of the
runs, and peak RSS of the child (wait4's rusage), with the exit code, so a refusal (exit 2)
is visible as such. ``--compare DIR`` times another checkout run for run.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _digest(ids) -> str:
    h = hashlib.sha256(b"nemo-gym-tokens")
    if ids.size:
        h.update(struct.pack(">BQ", 1, ids.size))
        h.update(ids.astype(">u8").tobytes())
    return h.hexdigest()


def linear_records(rollout_id: str, n_calls: int, new: int, gen: int, rng) -> list[dict]:
    """A linear rollout in wire format: full prompts, stamped digests."""
    import numpy as np

    seq = np.zeros(0, dtype=np.uint64)
    out, parent = [], None
    for i in range(n_calls):
        prompt = np.concatenate((seq, rng.integers(0, 150_000, new, dtype=np.uint64)))
        generation = rng.integers(0, 150_000, gen, dtype=np.uint64)
        full = np.concatenate((prompt, generation))
        call_id = f"{rollout_id}-c{i}"
        out.append({
            "schema_version": 5, "rollout_id": rollout_id, "model_call_id": call_id, "model": "policy",
            "prompt_token_ids": prompt.tolist(), "generation_token_ids": generation.tolist(),
            "generation_log_probs": np.round(-rng.random(gen) * 3, 4).tolist(),
            "output_items": [{"type": "message", "role": "assistant", "content": []}],
            "token_item_index": 0, "created_at": 1000.0 + i,
            "parent_resolution": "resolved" if parent else "root", "parent_call_id": parent,
            "cum_len": int(full.size), "digest": _digest(full), "finish_reason": "stop",
        })
        parent, seq = call_id, full
    return out


def make_bomb(path: Path, size: int = 2_500_000_000) -> None:
    import numpy as np
    import orjson

    rng = np.random.default_rng(1)
    chunk = b"\0" * (64 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("ok.tokens.jsonl", b"".join(orjson.dumps(r) + b"\n" for r in linear_records("ok", 3, 40, 20, rng)))
        with zf.open("bomb.tokens.jsonl", "w", force_zip64=True) as member:
            left = size
            while left:
                n = min(left, len(chunk))
                member.write(chunk[:n])
                left -= n


def make_blank_lines(path: Path, blank_bytes: int = 32 << 20) -> None:
    import numpy as np
    import orjson

    rng = np.random.default_rng(2)
    first, second = (orjson.dumps(r) + b"\n" for r in linear_records("blank", 2, 40, 20, rng))
    with open(path, "wb") as out:
        out.write(first)
        out.write(b"\n" * blank_bytes)
        out.write(second)


def make_many(path: Path, count: int = 10_000) -> None:
    import numpy as np
    import orjson

    rng = np.random.default_rng(3)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(count):
            rid = f"tiny-{i:05d}"
            zf.writestr(f"{rid}.json", orjson.dumps({"rollout_id": rid,
                                                     "entries": linear_records(rid, 3, 70, 35, rng)}))


def make_renamed(path: Path, count: int = 10_000) -> None:
    """``many.zip`` with member names that are not rollout ids (``f{i}.json`` holds ``r{i}``):
    every member's name sorts before every rollout id, the order a lazy loader must not follow."""
    import numpy as np
    import orjson

    rng = np.random.default_rng(3)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(count):
            rid = f"r{i}"
            zf.writestr(f"f{i}.json", orjson.dumps({"rollout_id": rid, "entries": linear_records(rid, 3, 70, 35, rng)}))


def make_renamed12(path: Path, count: int = 10_000) -> None:
    """``count`` snapshots of 12 calls (~8.7 KB each), members ``f{i}.json`` holding rollout ``r{i}``."""
    import numpy as np
    import orjson

    rng = np.random.default_rng(4)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(count):
            rid = f"r{i}"
            zf.writestr(f"f{i}.json", orjson.dumps({"rollout_id": rid, "entries": linear_records(rid, 12, 5, 2, rng)}))


def make_renamed12_dir(path: Path, count: int = 1_000) -> None:
    """The first ``count`` snapshots of ``renamed12.zip``, as files of a plain directory."""
    import numpy as np
    import orjson

    rng = np.random.default_rng(4)
    path.mkdir()
    for i in range(count):
        rid = f"r{i}"
        (path / f"f{i}.json").write_bytes(orjson.dumps({"rollout_id": rid,
                                                        "entries": linear_records(rid, 12, 5, 2, rng)}))


def make_many_jsonl(path: Path, count: int = 10_000) -> None:
    """The same records as ``many.zip``, as one JSONL file: the per-file cost is the difference."""
    import numpy as np
    import orjson

    rng = np.random.default_rng(3)
    with open(path, "wb") as out:
        for i in range(count):
            for record in linear_records(f"tiny-{i:05d}", 3, 70, 35, rng):
                out.write(orjson.dumps(record) + b"\n")


def make_sparse(path: Path, size: int = 3 << 30) -> None:
    with open(path, "wb") as out:
        out.truncate(size)  # a hole: no blocks on disk, reads as zeros


def _size(path: Path) -> int:
    """A file's size, or the total size of a directory's files."""
    return sum(p.stat().st_size for p in path.iterdir()) if path.is_dir() else path.stat().st_size


def run_once(cmd: list[str]) -> tuple[float, float, int, int, str]:
    start = time.perf_counter()
    # From a neutral directory: `python -m` puts the working directory first on sys.path.
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tempfile.gettempdir())
    stderr = proc.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    cpu = usage.ru_utime + usage.ru_stime
    return elapsed, cpu, usage.ru_maxrss, os.waitstatus_to_exitcode(status), stderr.decode(errors="replace").strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the generated inputs (the path is printed)")
    parser.add_argument("--only", choices=tuple(MAKERS), action="append")
    parser.add_argument("--compare", metavar="DIR", help="also time the tokencap package under DIR (an older "
                        "checkout, e.g. from `git archive`), run for run, for a before/after on the same machine")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tokencap-hostile-"))
    try:
        inputs = {"bomb": (work / "bomb.zip", None), "blank": (work / "blank.jsonl", None),
                  "many": (work / "many.zip", None), "renamed": (work / "renamed.zip", None),
                  "renamed12": (work / "renamed12.zip", None), "renamed12-dir": (work / "renamed12", None),
                  "many-jsonl": (work / "many.jsonl", None), "sparse": (work / "sparse.jsonl", None)}
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "tokencap")], check=True)
        env_py = [sys.executable, "-m", "tokencap", "build"]
        for label in args.only or list(inputs):
            path, _ = inputs[label]
            print(f"generating {path.name} ...", flush=True)
            # In a child: a process forked from one that held the generated data would
            # report the parent's pages in its own peak RSS.
            subprocess.run([sys.executable, __file__, "--generate", label, str(path)], check=True)
            trees = [("", str(ROOT))] + ([("before", args.compare)] if args.compare else [])
            figures: dict[str, tuple[list[float], list[float], list[int], str]] = {
                name: ([], [], [], "") for name, _ in trees}
            for _ in range(args.runs):
                for name, tree in trees:  # interleaved, so both see the same machine load
                    os.environ["PYTHONPATH"] = tree
                    elapsed, cpu, peak, code, err = run_once(env_py + [str(path), "-o", str(work / f"{label}.out")])
                    times, cpus, peaks, _ = figures[name]
                    times.append(elapsed)
                    cpus.append(cpu)
                    peaks.append(peak)
                    figures[name] = (times, cpus, peaks, f"exit {code}" + (f": {err[:120]}" if err else ""))
            for name, (times, cpus, peaks, note) in figures.items():
                print(f"  {(label + ' ' + name).strip():<17} {_size(path) / 1e6:7.1f} MB  wall median "
                      f"{statistics.median(times):7.2f} s (runs {', '.join(f'{t:.2f}' for t in times)})  CPU median "
                      f"{statistics.median(cpus):7.2f} s  peak RSS {max(peaks) / 1024:8.1f} MiB  {note}", flush=True)
    finally:
        if args.keep:
            print(f"inputs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


MAKERS = {"bomb": make_bomb, "blank": make_blank_lines, "many": make_many, "renamed": make_renamed,
          "renamed12": make_renamed12, "renamed12-dir": make_renamed12_dir, "many-jsonl": make_many_jsonl,
          "sparse": make_sparse}

if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--generate":
        MAKERS[sys.argv[2]](Path(sys.argv[3]))
        raise SystemExit(0)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    main()
