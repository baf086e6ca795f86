"""Run scale: scan a whole run into one table, export its trajectories in bulk (SPEC 11).

Layers, bottom up: `discover` (find rollouts without loading them) -> `work` (load, build
and summarise one unit; runs in workers) -> `engines` (this process, local processes or
Ray; results in order) -> `scan` (plans, streams and writes parquet or JSONL atomically).
`table` declares the scan table's columns.
"""

from .discover import DiscoveryError, RolloutUnit, discover
from .engines import ENGINES, EngineUnavailable, WorkerCrashed, default_workers
from .scan import (RunSummary, ScanTableError, export, read_scan, scan, scan_batches, scan_table,
                   table_of_snapshots)
from .table import COLUMNS, LINK_NOTES, REASON_COLUMNS, SCHEMA

__all__ = [
    "COLUMNS", "ENGINES", "LINK_NOTES", "REASON_COLUMNS", "SCHEMA", "DiscoveryError", "EngineUnavailable",
    "RolloutUnit", "RunSummary", "ScanTableError", "WorkerCrashed", "default_workers", "discover", "export", "read_scan", "scan",
    "scan_batches", "scan_table", "table_of_snapshots",
]
