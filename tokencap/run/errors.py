"""The errors a run can end with, in a module that imports nothing heavy (the CLI catches
them without paying for pyarrow or Ray on every command)."""


class DiscoveryError(ValueError):
    """SOURCE itself cannot be scanned (missing, unreadable, holds nothing)."""


class ScanTableError(ValueError):
    """A ``--since`` or uploaded table that is not a tokencap scan table."""


class DiffTableGiven(ScanTableError):
    """A diff table (what `tokencap diff -o` writes) where a scan table was expected: a caller that
    knows what the table was for (`tokencap diff`'s A or B) says what it takes instead."""


class EngineUnavailable(RuntimeError):
    """The requested engine cannot run here (Ray not installed, cluster unreachable)."""


class WorkerCrashed(RuntimeError):
    """A worker process died while building (killed, out of memory, a crash in native code)."""


class DiffError(ValueError):
    """Two tables that cannot be compared (not scan tables, a key on two rows, no indices for a task join)."""
