"""Run scale: scan a whole run into one table, export its trajectories in bulk (SPEC 11).

Layers, bottom up: `discover` (find rollouts without loading them) -> `rows` and `work`
(load, build and summarise one unit; runs in workers) -> `engines` (this process, local
processes or Ray; results in order) -> `table` (the Arrow schema) and `scan` (plans,
streams and writes parquet or JSONL atomically); `diff` compares two scan tables. `errors`
holds what a run can end with.

The table and scan names are imported on first use: `tokencap build` and the workers never
pay for pyarrow.
"""

from __future__ import annotations

import importlib
from typing import Any

from .discover import RolloutUnit, discover
from .engines import ENGINES, default_workers
from .errors import DiffError, DiffTableGiven, DiscoveryError, EngineUnavailable, ScanTableError, WorkerCrashed
from .rows import LINK_NOTES, REASON_COLUMNS

_LAZY = {
    "RunSummary": "scan", "export": "scan", "read_current_scan": "scan", "read_scan": "scan", "scan": "scan", "scan_batches": "scan",
    "scan_table": "scan", "table_of_snapshots": "scan", "COLUMNS": "table", "SCHEMA": "table",
    "RECORD_COLUMNS": "table", "RunDiff": "diff", "diff_tables": "diff",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f".{_LAZY[name]}", __name__)
    # Importing the submodule `scan` binds the package attribute `scan` to the module; the
    # public names (the function `scan` among them) are bound over it, once.
    for lazy_name, home in _LAZY.items():
        if home == _LAZY[name]:
            globals()[lazy_name] = getattr(module, lazy_name)
    return globals()[name]


__all__ = [
    "COLUMNS", "ENGINES", "LINK_NOTES", "REASON_COLUMNS", "RECORD_COLUMNS", "SCHEMA", "DiffError", "DiffTableGiven",
    "DiscoveryError",
    "EngineUnavailable", "RunDiff", "diff_tables",
    "RolloutUnit", "RunSummary", "ScanTableError", "WorkerCrashed", "default_workers", "discover", "export",
    "read_current_scan", "read_scan", "scan", "scan_batches", "scan_table", "table_of_snapshots",
]
