"""What `tokencap scan` and `tokencap export` share: their options, and the checks of a run's inputs
made before any worker starts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .diff import _is_diff_table, _is_parquet
from .options import (
    RECORDS_FILE,
    SINCE_TABLE,
    _existing,
    _input_file,
    _UsageError,
    _with_progress,
    add_ray_arguments,
    check_ray_arguments,
)

_RUN_OUTPUT_HELP = {
    "scan": "the table to write (parquet, e.g. run.parquet): one row per rollout; written atomically",
    "export": "the trajectories to write (JSONL, e.g. trajectories.jsonl; - for stdout): one rollout's build "
              "result a line, as `tokencap build` writes it; written atomically",
}


def add_run_arguments(cmd: argparse.ArgumentParser, name: str) -> None:
    """The options every run command takes (``name``: scan or export, for the help of ``-o``)."""
    cmd.add_argument("source", help="a capture-store directory, a directory tree of snapshot/JSONL files, "
                                    "or one JSONL holding many rollouts")
    cmd.add_argument("-o", "--output", metavar="OUT", required=True, help=_RUN_OUTPUT_HELP[name])
    add_ray_arguments(cmd, "worker processes or Ray CPUs (default: this machine's CPU count)")
    cmd.add_argument("--final-responses", metavar="FILE",
                     help="the harness's final responses (JSON or JSONL), to anchor each rollout on its answer")


def _run_inputs(args: argparse.Namespace) -> None:
    _existing(args.source)
    if _is_parquet(Path(args.source)):  # not one masked row named after the table
        if _is_diff_table(args.source):
            raise _UsageError(f"{args.source}: is a diff table (what `tokencap diff -o` writes, one row per joined "
                              f"rollout), not a run to {args.command}; give one of the runs it compares")
        raise _UsageError(f"{args.source}: is a scan table (parquet), not a run to {args.command}; open it with "
                          f"`tokencap app {args.source}`, compare it with `tokencap diff`, or give the run it was "
                          "scanned from")
    if args.final_responses:
        _input_file(args.final_responses, "--final-responses", RECORDS_FILE)
    since = getattr(args, "since", None)
    if since:
        _input_file(since, "--since", SINCE_TABLE)
    check_ray_arguments(args)  # last: joining a cluster may take a while


def _run_command(args: argparse.Namespace, label: str, work) -> Any:
    """Check a run command's inputs, run ``work(progress)`` under a progress bar, print its notes."""
    _run_inputs(args)
    return _with_progress(label, work, args.output)
