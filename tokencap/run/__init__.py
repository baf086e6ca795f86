"""Run scale: scan a whole run into one table, export its trajectories in bulk (docs/contract.md#scan-table).

Layers, bottom up: `discover` (find rollouts without loading them) -> `rows` and `work`
(load, build and summarise one unit; runs in workers) -> `engines` (this process, local
processes or Ray; results in order) -> `table` (the Arrow schemas), `reading` (a written
table read back) and `planning` (a run cut into shards, worked in order) -> `scanning`
(`scan`: streams and writes parquet atomically) and `exporting` (`export`: JSONL); `diff`
compares two scan tables (`pairing` joins them, `diff_summary` counts and prints). `errors`
holds what a run can end with.

The table, scan, diff, engine and row names are imported on first use (`tokencap.lazy`):
`tokencap build` and the workers never pay for pyarrow or the process pool.
"""

from __future__ import annotations

from ..lazy import lazy_names
from .discover import RolloutUnit, discover
from .errors import DiffError, DiffTableGiven, DiscoveryError, EngineUnavailable, ScanTableError, WorkerCrashed

ENGINES = ("local", "ray")
RAY_CONNECT_TIMEOUT = 30.0
"""Seconds `tokencap.run.engines.join_ray` waits for a Ray cluster to answer (`--ray-timeout`)."""
"""Where a run's shards can be worked (`engines`): named here, so a command's options list
them without importing the process pool."""

_LAZY = {  # submodule -> its names, imported on first use
    "engines": ("default_workers",),
    "rows": ("LINK_NOTES", "REASON_COLUMNS"),
    "planning": ("RunSummary",),
    "reading": ("read_current_scan", "read_scan"),
    "scanning": ("scan", "scan_batches", "scan_table", "table_of_snapshots"),
    "exporting": ("export",),
    "table": ("COLUMNS", "SCHEMA", "RECORD_COLUMNS"),
    "diff": ("RunDiff", "diff_tables"),
}


__getattr__ = lazy_names(__name__, _LAZY)


__all__ = [
    "COLUMNS", "ENGINES", "LINK_NOTES", "REASON_COLUMNS", "RECORD_COLUMNS", "SCHEMA", "DiffError", "DiffTableGiven",
    "DiscoveryError",
    "EngineUnavailable", "RunDiff", "diff_tables",
    "RolloutUnit", "RunSummary", "ScanTableError", "WorkerCrashed", "default_workers", "discover", "export",
    "read_current_scan", "read_scan", "scan", "scan_batches", "scan_table", "table_of_snapshots",
]
