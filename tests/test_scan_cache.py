"""The app's scan cache stays bounded: least recently used tables go beyond a count and a size.

`tokencap.services.scan_cache.evict_scans` runs after every scan the app keeps; opening a
cached table touches its mtime, which is what "recently used" means here.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

from tokencap.services import scan_cache as rs

REPO = Path(__file__).resolve().parent.parent
SAMPLE_RUN = REPO / "sample_data" / "run"
MiB = 1 << 20


def table(cache: Path, n: int, size: int, used: float) -> Path:
    """A cached table ``scan-tN.parquet`` of ``size`` bytes, last used at ``used`` (seconds)."""
    path = cache / f"scan-t{n}.parquet"
    path.write_bytes(b"\0" * size)
    os.utime(path, (used, used))
    return path


def names(cache: Path) -> list[str]:
    return sorted(os.listdir(cache))


def test_tables_beyond_the_count_go_least_recently_used_first(tmp_path: Path) -> None:
    for n in range(5):
        table(tmp_path, n, 10, used=1000 + (n * 7) % 5)  # used at 1000, 1002, 1004, 1001, 1003
    removed = rs.evict_scans(tmp_path, keep=3, keep_bytes=1 << 40)
    assert sorted(p.name for p in removed) == ["scan-t0.parquet", "scan-t3.parquet"]
    assert names(tmp_path) == ["scan-t1.parquet", "scan-t2.parquet", "scan-t4.parquet"]


def test_tables_beyond_the_size_go_least_recently_used_first(tmp_path: Path) -> None:
    table(tmp_path, 0, 3 * MiB, used=1003)
    table(tmp_path, 1, 2 * MiB, used=1002)
    table(tmp_path, 2, 1 * MiB, used=1001)  # fits on its own, but older tables come first
    table(tmp_path, 3, 1 * MiB, used=1000)
    rs.evict_scans(tmp_path, keep=16, keep_bytes=5 * MiB)
    assert names(tmp_path) == ["scan-t0.parquet", "scan-t1.parquet"]


def test_the_newest_table_is_kept_whatever_its_size(tmp_path: Path) -> None:
    table(tmp_path, 0, 4 * MiB, used=1001)
    table(tmp_path, 1, 1 * MiB, used=1000)
    rs.evict_scans(tmp_path, keep=16, keep_bytes=2 * MiB)
    assert names(tmp_path) == ["scan-t0.parquet"]


def test_part_files_of_killed_scans_go_and_a_live_scan_s_stays(tmp_path: Path) -> None:
    table(tmp_path, 0, 10, used=1000)
    dead = tmp_path / ".scan-t7.parquet.abcdefgh.part"
    dead.write_bytes(b"\0" * MiB)
    live = tmp_path / ".scan-t8.parquet.ijklmnop.part"
    live.write_bytes(b"")
    with open(live, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a writer that is still running holds its part file's lock
        rs.evict_scans(tmp_path)
        assert names(tmp_path) == [live.name, "scan-t0.parquet"]


def test_the_app_s_scan_of_a_big_run_evicts_old_tables_beyond_the_size(tmp_path: Path, monkeypatch) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    for n in range(3):
        table(cache, n, 2 * MiB, used=1000 + n)
    run = tmp_path / "run"
    shutil.copytree(SAMPLE_RUN, run)
    monkeypatch.setattr(rs, "IN_PROCESS_BYTES", 0)  # scanned by a child into the cache
    monkeypatch.setattr(rs, "CACHED_SCAN_BYTES", 5 * MiB)
    fp = rs.fingerprint(run)
    got = rs.scan_directory(run, fp, workers=1, cache_dir=cache)
    new = rs.cached_scan_path(fp, cache)
    assert got.num_rows > 0 and new.exists() and new.stat().st_size < MiB
    assert names(cache) == sorted([new.name, "scan-t1.parquet", "scan-t2.parquet"])  # t0, least recent, went
