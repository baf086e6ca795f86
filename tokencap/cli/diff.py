"""`tokencap diff`: two runs (scan tables or run directories) compared, rollout by rollout. Also how an
input is told for a table: `_is_parquet`, `_is_diff_table` (the run commands refuse tables with them)."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path
from typing import Any

from ..loading import FinalResponses, LoadError, load_final_responses
from ..loading.files import kind_of
from ..run.errors import DiffError, DiscoveryError
from .options import (
    _EMPTY_PATH,
    EXIT_OK,
    _add_tokenizer,
    _checked_tokenizer,
    _format_note,
    _UsageError,
    _with_progress,
    add_ray_arguments,
    check_ray_arguments,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    cmd = sub.add_parser("diff", help="compare two runs (scan tables or run directories): what a change fixed "
                                      "and broke, and how the mask reasons moved")
    for side in ("a", "b"):
        cmd.add_argument(side, metavar=side.upper(),
                         help=f"run {side.upper()}: a scan table (.parquet) or a run directory (scanned first)")
    cmd.add_argument("-o", "--output", metavar="DIFF.parquet",
                     help="write one row per joined rollout here (parquet, atomically)")
    cmd.add_argument("--join", choices=("auto", "id", "task"), default="auto",
                     help="pair rollouts by rollout id, or by task and rollout index (default: by id, unless the "
                          "ids share nothing and both runs carry the indices)")
    for side in ("a", "b"):
        cmd.add_argument(f"--final-responses-{side}", metavar="FILE",
                         help=f"rollout records of run {side.upper()} (reward, indices, final answers), when "
                              f"{side.upper()} is a run directory")
    add_ray_arguments(cmd, "worker processes or Ray CPUs for scanning a run directory (default: CPU count)")
    _add_tokenizer(cmd)


def run(args: argparse.Namespace) -> int:
    import pyarrow.parquet as pq

    from ..export import write_atomically
    from ..run.diff import diff_tables, summary_text

    if args.ray_address and args.engine != "ray":
        raise _UsageError("--ray-address needs --engine ray")
    tables = {side: _diff_is_table(args, side) for side in ("a", "b")}  # each side exists, or says which fails
    args.tokenizer = _checked_tokenizer(args.tokenizer)
    records = {side: _diff_records(args, side) for side in ("a", "b")}  # both, before a long scan
    if not all(tables.values()):  # a run to scan: its Ray cluster answers before any work
        check_ray_arguments(args)
    # Scan tables are read first (quick), so a task join that cannot be is refused before any scan.
    read = {side: _diff_side(args, side, True, None) for side in ("a", "b") if tables[side]}
    if args.join == "task":
        for side in ("a", "b"):
            _check_task_join(getattr(args, side), read.get(side), records[side])
    a, b = (read[side] if side in read else _diff_side(args, side, False, records[side]) for side in ("a", "b"))
    diff = diff_tables(a, b, args.join, names=(args.a, args.b))
    if args.output:
        write_atomically(args.output, lambda handle: pq.write_table(diff.arrow, handle))
    sys.stdout.write(summary_text(diff, args.a, args.b, tables=(tables["a"], tables["b"])))
    if Path(args.a).resolve() == Path(args.b).resolve():
        print(f"tokencap: note: A and B are the same run ({args.a}): every rollout is compared with itself",
              file=sys.stderr)
    if args.output:
        print(f"tokencap: {diff.arrow.num_rows:,} joined rollouts -> {args.output}"
              f"{_format_note(args.output, ('.parquet',), 'a parquet table')}", file=sys.stderr)
    return EXIT_OK


def _is_parquet(path: Path) -> bool:
    """A regular file named ``.parquet`` or starting like parquet (a scan table); anything else is a run
    source. A ``.parquet`` that is not parquet is thus refused as a table, never scanned as one broken rollout."""
    if not path.is_file():
        return False
    if path.suffix.lower() == ".parquet":
        return True
    with open(path, "rb") as handle:
        return handle.read(4) == b"PAR1"


def _is_diff_table(path: str) -> bool:
    """Whether the parquet at ``path`` is a diff table (what `tokencap diff -o` writes)."""
    from ..run import DiffTableGiven, ScanTableError, read_scan

    try:
        read_scan(path)
    except DiffTableGiven:
        return True
    except ScanTableError:
        pass
    return False


def _diff_is_table(args: argparse.Namespace, side: str) -> bool:
    """Check run A or B (``side``) exists; True when it is a scan table, False for a run to scan. Every
    error names the side, so a person comparing two runs knows which one to fix."""
    source: str = getattr(args, side)
    name = side.upper()
    if not source:
        raise _UsageError(f"run {name} is empty: {_EMPTY_PATH}")
    try:
        exists = Path(source).exists()
        table = exists and _is_parquet(Path(source))
    except OSError as exc:  # a name too long, a directory that cannot be searched
        raise _UsageError(f"{source}: cannot be read ({exc.strerror or exc}) (run {name})") from None
    if not exists:
        raise _UsageError(f"{source}: no such file or directory (run {name})")
    if table and getattr(args, f"final_responses_{side}"):
        raise _UsageError(f"{source}: is a scan table, which already holds what its rollout records said; "
                          f"--final-responses-{side} applies only to a run directory")
    return table


def _diff_records(args: argparse.Namespace, side: str) -> FinalResponses | None:
    """The rollout records of run A or B (``--final-responses-a``/``-b``), read before either run is
    scanned; any problem with them is blamed on the flag and the file, never on the run."""
    path: str | None = getattr(args, f"final_responses_{side}")
    if not path:
        return None
    flag = f"--final-responses-{side}"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise _UsageError(f"{flag}: {path}: no such file") from None
    except OSError as exc:
        raise _UsageError(f"{flag}: {path}: cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):  # a FIFO would block the read, a device never end
        raise _UsageError(f"{flag}: {path}: is {kind_of(mode)}, not a regular file; {flag} takes a rollout "
                          "records file (JSON or JSONL)")
    try:
        return load_final_responses(path)
    except LoadError as exc:
        raise LoadError(f"{flag}: {exc}") from None
    except (OSError, ValueError) as exc:
        raise _UsageError(f"{flag}: {path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    except RecursionError:
        raise _UsageError(f"{flag}: {path}: JSON nested too deeply to read; rollout records are a few "
                          "levels deep") from None


def _diff_side(args: argparse.Namespace, side: str, table: bool, finals: FinalResponses | None) -> Any:
    """Run A or B as a scan table: read, or scanned as `tokencap scan` would (with its records read already)."""
    from ..run import DiffTableGiven, RunSummary, read_scan, scan_table

    source: str = getattr(args, side)
    name = side.upper()
    if table:
        try:
            return read_scan(source)
        except DiffTableGiven:
            raise DiffError(f"{source}: is a diff table (what `tokencap diff -o` writes, one row per joined "
                            "rollout), not a scan table; A and B take scan tables (`tokencap scan RUN -o "
                            "TABLE.parquet`) or run directories") from None
    tables = []

    def work(progress: Any) -> Any:
        summary = RunSummary()
        tables.append(scan_table(source, workers=args.workers, engine=args.engine, ray_address=args.ray_address,
                                 final_responses=finals, progress=progress, summary=summary,
                                 tokenizer=args.tokenizer))
        return summary

    try:
        _with_progress(f"scan {name}", work, args.output, f"{name}: ")
    except (DiscoveryError, LoadError) as exc:  # an empty run, a source that cannot be scanned
        raise DiscoveryError(f"{exc} (run {name})") from None
    return tables[0]


def _check_task_join(name: str, table: Any, records: FinalResponses | None) -> None:
    """`--join task` needs a task and a rollout index on some rollout of each run: of a scan table, in its
    rows; of a run directory, in its rollout records (the only place a scan takes them from). Checked
    before scanning, with the error the join itself would raise after."""
    from ..run.diff import can_join_by_task, no_task_key

    if table is not None:
        keyed = can_join_by_task(table, name)
    else:
        facts = list((records.facts.values() if records is not None else ()))
        if records is not None and records.unnamed is not None:
            facts.append(records.unnamed_facts)
        keyed = any(f.task_index is not None and f.rollout_index is not None for f in facts)
    if not keyed:
        raise no_task_key(name)
