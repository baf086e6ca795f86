"""`tokencap export`: every rollout of a run built, its trajectories written as JSONL."""

from __future__ import annotations

import argparse
import sys

from .options import EXIT_OK, STDOUT, StandardOutput, _format_note
from .runs import _run_command, add_run_arguments


def add_parser(sub: argparse._SubParsersAction) -> None:
    cmd = sub.add_parser("export", help="build every rollout of a run and write its trajectories as JSONL")
    add_run_arguments(cmd, "export")
    cmd.add_argument("--only-trainable", action="store_true", help="write only rollouts that are not masked")


def run(args: argparse.Namespace) -> int:
    from ..run import export

    to_stdout = args.output == STDOUT
    out = StandardOutput() if to_stdout else args.output
    summary = _run_command(args, "export", lambda progress: export(
        args.source, out, only_trainable=args.only_trainable, workers=args.workers, engine=args.engine,
        ray_address=args.ray_address, final_responses=args.final_responses, progress=progress))
    if to_stdout:
        out.flush()
    where = "standard output" if to_stdout else args.output + _format_note(
        args.output, ('.jsonl', '.json', '.ndjson'), 'JSON lines')
    print(f"tokencap: exported {summary.written:,} of {summary.rollouts:,} rollouts "
          f"({summary.trainable:,} trainable) -> {where}", file=sys.stderr)
    return EXIT_OK
