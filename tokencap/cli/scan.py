"""`tokencap scan`: every rollout of a run built, one table row per rollout (parquet)."""

from __future__ import annotations

import argparse
import sys

from .options import EXIT_OK, _add_tokenizer, _checked_tokenizer, _format_note
from .runs import _run_command, add_run_arguments


def add_parser(sub: argparse._SubParsersAction) -> None:
    cmd = sub.add_parser("scan", help="build every rollout of a run and write one table row per rollout (parquet)")
    add_run_arguments(cmd, "scan")
    cmd.add_argument("--since", metavar="OLD.parquet",
                     help="reuse the rows of rollouts whose files did not change since this earlier scan")
    _add_tokenizer(cmd)


def run(args: argparse.Namespace) -> int:
    from ..run import scan

    tokenizer = _checked_tokenizer(args.tokenizer)
    summary = _run_command(args, "scan", lambda progress: scan(
        args.source, args.output, workers=args.workers, engine=args.engine, ray_address=args.ray_address,
        final_responses=args.final_responses, since=args.since, progress=progress, tokenizer=tokenizer))
    reused = f", {summary.reused:,} reused from {args.since}" if args.since else ""
    print(f"tokencap: scanned {summary.rollouts:,} rollouts ({summary.trainable:,} trainable, "
          f"{summary.rollouts - summary.trainable:,} masked{reused}) -> {args.output}"
          f"{_format_note(args.output, ('.parquet',), 'a parquet table')}", file=sys.stderr)
    return EXIT_OK
