"""The app's scan tables on disk: a run's fingerprint, the cache file of its scan, eviction, and
the scan of a path (in process for a small run, by a child process into the cache for a big one)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from ..export import remove_stale_parts
from ..run import read_scan
from . import rollout_sources as src
from .claims import follow_scan, release_claim, take_claim

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Fingerprint:
    """What a path holds, cheaply: a digest of every file's name, size and mtime, and their totals.

    The scan of a path is cached under (path, signature): the same files give the same
    table, and any change (a rollout added, a store file appended) gives a new scan.
    Hidden entries are skipped, as discovery skips them. A store's records file counts its
    store siblings, which its scan reads with it.
    """

    signature: str
    files: int = 0
    size: int = 0
    exists: bool = True


def fingerprint(path: str | os.PathLike[str]) -> Fingerprint:
    p = Path(path)
    digest = hashlib.sha1(str(p.resolve()).encode("utf-8", "surrogateescape"))
    try:
        st = p.stat()
    except OSError:
        return Fingerprint("missing:" + digest.hexdigest(), exists=False)
    if not p.is_dir():
        digest.update(f"\0{st.st_size}\0{st.st_mtime_ns}".encode())
        siblings = src.records_file_siblings(p)
        if siblings is None:
            return Fingerprint(digest.hexdigest(), 1, st.st_size)
        # A store's records file is scanned with its siblings (an intent with no record, an
        # incomplete marker): they are part of what this path holds.
        _, regular, skipped = siblings
        for name, fst in regular:
            digest.update(f"\0{name}\0{fst.st_size}\0{fst.st_mtime_ns}".encode("utf-8", "surrogateescape"))
        for s in skipped:
            digest.update(f"\0{s.name}\0{s.reason}".encode("utf-8", "surrogateescape"))
        return Fingerprint(digest.hexdigest(), len(regular), sum(fst.st_size for _, fst in regular))
    files = size = 0
    for directory, subdirs, names in os.walk(p):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        rel = os.path.relpath(directory, p)
        for name in sorted(names):
            if name.startswith("."):
                continue
            try:
                fst = os.lstat(os.path.join(directory, name))
            except OSError:
                continue
            files += 1
            size += fst.st_size
            digest.update(f"\0{rel}/{name}\0{fst.st_size}\0{fst.st_mtime_ns}".encode("utf-8", "surrogateescape"))
    return Fingerprint(digest.hexdigest(), files, size)



IN_PROCESS_BYTES = 16 << 20
"""Runs smaller than this are scanned in the app's own process: starting a child and its
workers costs about a second, more than building a few hundred small rollouts."""

CACHED_SCANS = 16
"""Scan tables kept in the cache directory (the least recently used beyond this are removed)."""

CACHED_SCAN_BYTES = 2 << 30
"""Total size of the scan tables kept (2 GiB; the least recently used beyond it are removed)."""

CACHE_ENV = "TOKENCAP_CACHE_DIR"


def scan_cache_dir() -> Path:
    """Where the app keeps scan tables: ``$TOKENCAP_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokencap/scans``
    (``~/.cache/tokencap/scans``)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tokencap" / "scans"


def cached_scan_path(fp: Fingerprint, cache_dir: str | os.PathLike[str] | None = None,
                     final_responses: str | os.PathLike[str] | None = None,
                     tokenizer: str | os.PathLike[str] | None = None) -> Path:
    """The cache file of a run's scan table: one per (directory, fingerprint, tokencap code (`code_identity`),
    rollout records and their fingerprint, tokenizer and its fingerprint: it refines the causes)."""
    from ..identity import code_identity

    records = f"{os.path.abspath(final_responses)}\0{fingerprint(final_responses).signature}" if final_responses else ""
    if tokenizer:
        records += f"\0{os.path.abspath(tokenizer)}\0{fingerprint(tokenizer).signature}"
    key = hashlib.sha256(f"{fp.signature}\0{code_identity()}\0{records}".encode("utf-8", "surrogateescape"))
    return Path(cache_dir if cache_dir is not None else scan_cache_dir()) / f"scan-{key.hexdigest()[:32]}.parquet"


def evict_scans(cache_dir: Path, keep: int = CACHED_SCANS, keep_bytes: int = CACHED_SCAN_BYTES) -> list[Path]:
    """Keep the scan cache bounded: the most recently used tables (opening one touches its
    mtime) are kept while they number at most ``keep`` and weigh at most ``keep_bytes``
    together; the rest are removed. The newest is kept whatever its size: a page is reading
    it. Part files that a killed scan left behind (no live writer holds their lock) are
    removed too. Returns the tables removed."""
    try:
        listed = [(f, f.stat()) for f in cache_dir.glob("scan-*.parquet")]
        parts = {name.split(".")[1] for name in os.listdir(cache_dir) if name.startswith(".scan-")}
    except OSError:
        return []
    for stem in parts:
        remove_stale_parts(cache_dir / f"{stem}.parquet")
    listed.sort(key=lambda item: (-item[1].st_mtime, item[0].name))
    removed: list[Path] = []
    total = 0
    for n, (table, st) in enumerate(listed):
        total += st.st_size
        if n == 0 or (n < keep and total <= keep_bytes):
            continue
        try:
            table.unlink()
            removed.append(table)
        except OSError:
            pass
    return removed



def prescan(path: str | os.PathLike[str], *, final_responses: str | None = None, workers: int | None = None,
            cache_dir: str | os.PathLike[str] | None = None, tokenizer: str | None = None) -> Path | None:
    """Scan a big run into the app's scan cache before any page asks for it; the table's path,
    or None when there is nothing to do here (a small run, which the page scans itself; a scan
    already running) or the run changed while it was scanned (that table is not kept).

    The table is the one `scan_directory` writes for the same path, fingerprint and records,
    so the page reuses it, or waits for it while this scan holds its claim. Raises what `scan`
    raises; the page then scans the run itself and says what is wrong.
    """
    from ..run import read_current_scan, scan

    fp = fingerprint(path)
    if not fp.exists or fp.size < IN_PROCESS_BYTES:
        return None
    target = cached_scan_path(fp, cache_dir, final_responses, tokenizer)
    if target.exists() and read_current_scan(target, final_responses, tokenizer) is not None:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    claim = take_claim(target)
    if claim is None:
        return None
    try:
        def report(done: int, total: int) -> None:
            claim.write(f"{done} {total}\n".encode())
            claim.flush()

        scan(path, target, workers=workers, final_responses=final_responses, tokenizer=tokenizer, progress=report)
        if fingerprint(path) != fp:
            target.unlink(missing_ok=True)
            return None
        evict_scans(target.parent, CACHED_SCANS, CACHED_SCAN_BYTES)
        return target
    finally:
        release_claim(target, claim)


def _reused(target: Path, final_responses: str | None, progress: Progress | None,
            tokenizer: str | None = None) -> pa.Table | None:
    """The cached table at ``target`` when this code wrote it with these records and this tokenizer (marked
    most recently used)."""
    from ..run import read_current_scan

    if not target.exists():
        return None
    table = read_current_scan(target, final_responses, tokenizer)
    if table is not None:
        os.utime(target)  # most recently used: pruned last
        if progress:
            progress(table.num_rows, table.num_rows)
    return table


def scan_directory(path: str | os.PathLike[str], fp: Fingerprint, *, final_responses: str | None = None,
                   progress: Progress | None = None, workers: int | None = None,
                   cache_dir: str | os.PathLike[str] | None = None, tokenizer: str | None = None) -> pa.Table:
    """The run table of a path on this machine, as `tokencap scan PATH --workers N
    [--final-responses RECORDS] [--tokenizer PATH]` makes it.

    A run of `IN_PROCESS_BYTES` or more is scanned by a child process on every core
    (`tokencap.run.child`: a pool started inside the app's server would re-run the page
    script in each worker) into a parquet in the cache directory, and read back; the same
    directory with the same fingerprint (names, sizes, mtimes) and the same rollout records
    then opens from that table, when this tokencap version wrote it with those records (its
    metadata says so). While another process scans into that table (`prescan`, started by
    `tokencap app RUN`), the page waits for it and shows its progress. A table is kept only
    when the run did not change while it was scanned. A smaller run is scanned here. Raises
    `DiscoveryError` or `LoadError` when the run or its records cannot be read, `ScanFailed`
    when the scan stopped.
    """
    from ..run import scan_table
    from ..run.child import scan_in_child

    records = {"final_responses": final_responses} if final_responses else {}
    if tokenizer:
        records["tokenizer"] = tokenizer
    if fp.size < IN_PROCESS_BYTES:
        return scan_table(path, workers=1, progress=progress, **records)
    target = cached_scan_path(fp, cache_dir, final_responses, tokenizer)
    table = _reused(target, final_responses, progress, tokenizer)
    if table is not None:
        return table
    if follow_scan(target, progress):  # `tokencap app RUN` started this scan with the server
        table = _reused(target, final_responses, progress, tokenizer)
        if table is not None:
            return table
    target.parent.mkdir(parents=True, exist_ok=True)
    scan_in_child(path, target, workers=workers, progress=progress, **records)
    table = read_scan(target)
    if fingerprint(path) != fp:  # the run changed while it was scanned: the table is not this fingerprint's
        target.unlink(missing_ok=True)
    evict_scans(target.parent, CACHED_SCANS, CACHED_SCAN_BYTES)
    return table


def keep_scan_ready() -> None:
    """Have a child scan ready for the next run opened by path: started in the background a
    moment from now, it has paid for Python, the imports and the worker pool's fork server
    before it is asked, so a big run's scan starts at once (`tokencap.run.child.keep_spare`)."""
    from ..run.child import keep_spare_soon

    keep_spare_soon()

