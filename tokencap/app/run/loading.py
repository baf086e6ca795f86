"""Loading a run for the Run page: scans and tables, cached for the whole server.

A helper of ``tokencap/app/run/run.py`` (not a page): a scan of a path is cached per (absolute
path, fingerprint of its files, rollout records); an upload's table per its content. The
page shows a progress bar while a scan runs, never replayed from the cache.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import hashlib
import shutil
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import streamlit as st

import tokencap.run as tr
from tokencap.bundled import SAMPLE_DATA
from tokencap.loading import LoadError
from tokencap.services.arguments import app_arguments
from tokencap.services.rollout_sources import default_tokenizer_path
from tokencap.services.scan_cache import Fingerprint, fingerprint, scan_directory
from tokencap.services.uploads import (
    NoCaptureUploaded,
    Upload,
    table_of_parquet,
    table_of_uploads,
    table_problem,
    uploads_key,
)
from tokencap.views.formatting import md_escape
from tokencap.views.run.frame import run_frame

APP_DIR = SAMPLE_DATA.parent  # the folder holding sample_data/: the checkout, or the installed package

CACHED_RUNS = 6


@dataclass(frozen=True, eq=False)
class LoadedRun:
    """A run's table and frame (or why there is none), as cached for every session."""

    table: pa.Table | None
    frame: pd.DataFrame | None
    seconds: float = 0.0
    error: str | None = None
    key: str = ""  # short digest of the cache key: widget keys of this run's table and charts


@dataclass
class RunCache:
    """Scanned runs for the whole server, most recent last (at most `CACHED_RUNS`).

    A plain mapping behind `st.cache_resource`, not a cached function, so the progress bar
    is drawn while a scan runs and never replayed from the cache. Sessions run in threads
    of their own, so every access holds the lock.
    """

    runs: OrderedDict[tuple, LoadedRun]
    lock: threading.Lock

    def get(self, key: tuple) -> LoadedRun | None:
        with self.lock:
            run = self.runs.get(key)
            if run is not None:
                self.runs.move_to_end(key)
            return run

    def put(self, key: tuple, run: LoadedRun) -> LoadedRun:
        run = LoadedRun(run.table, run.frame, run.seconds, run.error,
                        hashlib.sha1(repr(key).encode("utf-8", "surrogateescape")).hexdigest()[:10])
        with self.lock:
            self.runs[key] = run
            while len(self.runs) > CACHED_RUNS:
                self.runs.popitem(last=False)
        return run


@st.cache_resource(show_spinner=False)
def run_cache() -> RunCache:
    return RunCache(OrderedDict(), threading.Lock())


@st.cache_resource(show_spinner=False)
def records_directory() -> str:
    """Where uploaded rollout records are kept as files for the server's life (a scan reads a path).

    Removed when the server exits: a user's upload does not outlive the server that took it
    (a link that names one says it cannot be read, and shows no verdict).
    """
    path = tempfile.mkdtemp(prefix="tokencap-records-")
    atexit.register(shutil.rmtree, path, True)
    return path


def _remember(key: tuple, run: LoadedRun) -> LoadedRun:
    return run_cache().put(key, run)


def _cached(key: tuple) -> LoadedRun | None:
    return run_cache().get(key)


_PROGRESS_PLACE: contextvars.ContextVar[Any] = contextvars.ContextVar("run_progress_place", default=None)


@contextlib.contextmanager
def progress_in(place: Any) -> Iterator[None]:
    """Scans started inside the block draw their progress bar in ``place`` (an ``st.empty()``).

    The page makes that place at the same position on every run, scanned or not, so the
    elements after it keep their positions: the browser then updates the previous run's
    table in place instead of mounting a new grid, which waits ~0.3 s for its layout before
    it draws. (A context variable: each session's script runs in a thread of its own.)
    """
    token = _PROGRESS_PLACE.set(place)
    try:
        yield
    finally:
        _PROGRESS_PLACE.reset(token)


def _progress_bar(what: str) -> tuple[Any, Any]:
    bar = (_PROGRESS_PLACE.get() or st).progress(0.0, text=f"{what}…")

    def update(done: int, total: int) -> None:
        bar.progress(min(1.0, done / total) if total else 0.0, text=f"{what}: {done:,} of {total:,} rollouts")

    return bar, update


def run_tokenizer(path: str) -> str | None:
    """The tokenizer a run is diagnosed with (as the Rollout page decodes with it): ``tokencap app ...
    --tokenizer PATH``, else the bundled sample tokenizer for the bundled sample data; else None."""
    found = default_tokenizer_path(APP_DIR, app_arguments(sys.argv[1:]).tokenizer, [path])
    return str(found) if found is not None and found.is_file() else None


def load_path(path: str, fp: Fingerprint, records: str | None = None) -> LoadedRun:
    """A run directory (or one file) scanned here, with its rollout records when given, and diagnosed with
    the app's tokenizer (`run_tokenizer`): part of the cache key, since it refines the causes."""
    records_fp = fingerprint(records).signature if records else ""
    tokenizer = run_tokenizer(path)
    tokenizer_fp = fingerprint(tokenizer).signature if tokenizer else ""
    key = ("path", path, fp.signature, records or "", records_fp, tokenizer or "", tokenizer_fp)
    run = _cached(key)
    if run is not None:
        return run
    bar, update = _progress_bar(f"Scanning {md_escape(path)}")
    start = time.perf_counter()
    try:
        # A big run is scanned by a child process on every core and its table kept on disk per
        # fingerprint; leaving the page stops the child (the progress update raises).
        table = scan_directory(path, fp, final_responses=records, progress=update, tokenizer=tokenizer)
    except (tr.DiscoveryError, LoadError) as exc:
        bar.empty()
        return LoadedRun(None, None, error=str(exc))  # not cached: the path (or the records) may be fixed
    except Exception as exc:  # noqa: BLE001 -- a worker that died, a file that vanished: one message, no traceback
        bar.empty()
        return LoadedRun(None, None, error=f"{path}: the scan stopped ({type(exc).__name__}: {exc}); "
                                           "try Rescan, or scan it with tokencap scan to see which rollout")
    bar.empty()
    return _remember(key, LoadedRun(table, run_frame(table), time.perf_counter() - start))


def load_table_file(path: str, fp: Fingerprint) -> LoadedRun:
    """A scan table named on the command line (``tokencap app RESULT.parquet``)."""
    key = ("table", path, fp.signature)
    run = _cached(key)
    if run is not None:
        return run
    start = time.perf_counter()
    try:
        table = tr.read_scan(path)
    except tr.ScanTableError as exc:
        return LoadedRun(None, None, error=table_problem(exc))
    return _remember(key, LoadedRun(table, run_frame(table), time.perf_counter() - start))


def load_any_path(path: str, fp: Fingerprint, records: str | None = None) -> LoadedRun:
    """A ``.parquet`` scan table, or a directory / file to scan."""
    if path.lower().endswith(".parquet") and Path(path).is_file():
        return load_table_file(path, fp)
    return load_path(path, fp, records)


def load_uploads(uploads: tuple[Upload, ...]) -> LoadedRun:
    key = ("upload", uploads_key(uploads))
    run = _cached(key)
    if run is not None:
        return run
    start = time.perf_counter()
    tables = [u for u in uploads if u.is_table]
    if len(tables) > 1:
        return LoadedRun(None, None, error="Upload one scan table (.parquet) at a time; "
                                           f"these are several: {', '.join(u.name for u in tables)}.")
    if tables:
        try:
            table = table_of_parquet(tables[0])
        except tr.ScanTableError as exc:
            return LoadedRun(None, None, error=table_problem(exc))
    else:
        bar, update = _progress_bar("Scanning the uploaded files")
        try:
            table = table_of_uploads(uploads, progress=update)
        except NoCaptureUploaded as exc:  # no file is a capture: the error, not a run of failed rows
            return LoadedRun(None, None, error=str(exc))
        finally:
            bar.empty()
    return _remember(key, LoadedRun(table, run_frame(table), time.perf_counter() - start))
