"""Exporting a whole run (docs/contract.md#scan-table): every rollout's build result as JSONL, each line
byte-identical to what `tokencap build` writes for that rollout, in the scan's order.

The run is planned as a scan plans it (`planning`) and its shards' lines are written as each shard
comes back, so the trajectories of a run are never held whole. To a path the output is atomic
(temporary file + rename); to an open handle (standard output) it streams.
"""

from __future__ import annotations

import os
from typing import BinaryIO

from ..export import write_atomically
from .engines import default_workers
from .planning import Progress, RunSummary, ordered_results, plan_run, rollout_records
from .work import RunOptions, export_shard


def export(source: str | os.PathLike[str], out: str | os.PathLike[str] | BinaryIO, *, only_trainable: bool = False,
           workers: int | None = None, engine: str = "local", ray_address: str | None = None,
           final_responses: str | None = None, progress: Progress | None = None) -> RunSummary:
    """Write every rollout's build result as JSONL, in the scan's order: atomically to the path ``out``,
    or as it comes to ``out`` when that is an open binary handle (standard output, `tokencap export -o -`)."""
    workers = workers or default_workers()
    summary = RunSummary()
    finals = rollout_records(final_responses)
    plan, _, total, single = plan_run(source, None, final_responses, workers, summary)
    options = RunOptions(final_responses=finals, single_rollout=single, only_trainable=only_trainable)

    def write(handle: BinaryIO) -> None:
        done = 0
        if progress:
            progress(0, total)
        ids: list[str] = []
        for _kind, (seen, trainable, lines) in ordered_results(export_shard, plan, options, engine, workers,
                                                                 ray_address):
            handle.write(lines)
            summary.trainable += trainable
            summary.written += lines.count(b"\n")
            done += len(seen)
            if options.final_responses is not None:
                ids.extend(seen)
            if progress:
                progress(done, max(total, done))
        summary.rollouts = done
        if options.final_responses is not None:
            summary.notes.extend(options.final_responses.notes(ids))

    if isinstance(out, (str, os.PathLike)):
        write_atomically(out, write)
    else:
        write(out)
    return summary


__all__ = ["export"]
