"""`tokencap build`: each rollout of a source built, one at a time, and written as JSON (one rollout) or
JSONL. Also the source reading `tokencap inspect` shares: snapshots, final responses, each rollout built."""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..loading import FinalResponses, iter_snapshots, responses_for
from ..loading.files import printable
from ..loading.store_files import WITHOUT_SIBLINGS
from ..records import TokenCaptureSnapshot
from ..rollout import RolloutResult, build_rollout
from .options import _PROGRESS, EXIT_OK, STDOUT, StandardOutput, _existing, _read_final_responses, _UsageError


def add_source_arguments(cmd: argparse.ArgumentParser) -> None:
    """The source and its selection, as `build` and `inspect` take them."""
    cmd.add_argument("source", help="snapshot JSON, entries JSONL, capture-store directory, or a zip of one")
    cmd.add_argument("--rollout", metavar="ID", help="only this rollout")
    cmd.add_argument("--terminal-call-id", metavar="ID", help="anchor the delivered chain on this call")
    cmd.add_argument("--final-responses", metavar="FILE",
                     help="the harness's final responses (JSON, JSONL, or a bare Responses object): anchor each "
                          "rollout it names on the call its final answer came from")


def add_parser(sub: argparse._SubParsersAction) -> None:
    cmd = sub.add_parser("build", help="build each rollout and write the result as JSON (one rollout) or JSONL")
    add_source_arguments(cmd)
    cmd.add_argument("-o", "--output", metavar="OUT",
                     help="write the result to this file instead of stdout (- is stdout): one JSON "
                          "object for one rollout, JSONL (one object a line) for several; written "
                          "atomically")


def run(args: argparse.Namespace) -> int:
    from ..export import write_atomically, write_summary

    # Built and written one rollout at a time: memory is that of one rollout. One rollout
    # is a JSON document and several are JSONL -- the same bytes for each line either way.
    inputs = _inputs(args)

    def write(handle) -> None:
        for result, notes, _ in _build_each(inputs, args.terminal_call_id):
            for note in notes:
                if WITHOUT_SIBLINGS in note:  # the one source note that masks a sample for a reason one can fix
                    _PROGRESS.done()
                    print(f"tokencap: note: {' '.join(note.split())}", file=sys.stderr)
            write_summary(handle, result)
            handle.write(b"\n")
            del result

    if args.output and args.output != STDOUT:
        write_atomically(args.output, write)
    else:
        out = StandardOutput()
        write(out)
        out.flush()
    return EXIT_OK


def _snapshots(source: str, rollout: str | None) -> Iterator[TokenCaptureSnapshot]:
    """The source's snapshots, lazily (a directory or zip: one rollout at a time).

    Errors about the source as a whole are raised here, before anything is built."""
    path = _existing(source)
    if path.is_file():
        _PROGRESS.say(f"tokencap: loading {path.name} ({path.stat().st_size / 1e6:.1f} MB) ...")
    else:
        _note_subdirectories(path, source)
        _PROGRESS.say(f"tokencap: loading {source} ...")
    return _warned(iter_snapshots(source, rollout_id=rollout), source, rollout)


_SHOWN_SUBDIRECTORIES = 8


def _note_subdirectories(path: Path, source: str) -> None:
    """A note on stderr naming the subdirectories of a directory given to `build` / `inspect`: those read
    only the files directly in it, and a tree (a run) is what `tokencap scan` walks."""
    try:
        with os.scandir(path) as entries:
            names = sorted(printable(e.name) for e in entries
                           if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
    except OSError:  # the loader says what is wrong with the directory
        return
    if not names:
        return
    shown = ", ".join(names[:_SHOWN_SUBDIRECTORIES]) + (
        f" and {len(names) - _SHOWN_SUBDIRECTORIES:,} more" if len(names) > _SHOWN_SUBDIRECTORIES else "")
    note = (f"{source}: {len(names):,} subdirector{'y' if len(names) == 1 else 'ies'} not read ({shown}): this "
            f"reads only the files directly in a directory; for a tree of runs and stores, use `tokencap scan "
            f"{source} -o run.parquet` (or `tokencap export`)")
    print(f"tokencap: note: {' '.join(note.split())}", file=sys.stderr)  # one line, whatever the names hold


def _warned(snapshots: Iterable[TokenCaptureSnapshot], source: str, rollout: str | None
            ) -> Iterator[TokenCaptureSnapshot]:
    found = False
    for snapshot in snapshots:
        found = True
        if snapshot.load_error is not None:
            # Still built (and masked with load_error); say so where a person will see it.
            _PROGRESS.done()
            print(f"tokencap: warning: rollout {snapshot.rollout_id!r} could not be loaded: "
                  f"{' '.join(snapshot.load_error.split())}", file=sys.stderr)
        yield snapshot
        del snapshot  # not held while the next one loads
    if rollout is not None and not found:
        raise _UsageError(f"{source}: no rollout {rollout!r} in this source")


def _with_final_responses(snapshots: Iterator[TokenCaptureSnapshot], finals: FinalResponses | None,
                          source_ids: list[str] | None, evidence: bool = False
                          ) -> Iterator[tuple[TokenCaptureSnapshot, dict | None, dict | None]]:
    """Each snapshot with the final response the file holds for it (docs/contract.md#attribution).

    Lazily, so a directory is still built one rollout at a time. Whether the source is a
    single rollout (a response without a rollout id applies only then) is known from
    ``source_ids`` when given, else by peeking at the first two snapshots. Responses that
    apply to no rollout of the source are a note on stderr at the end, not an error: a
    run's rollout records may well cover more rollouts than one capture directory holds.
    With ``evidence``, each snapshot also gets its record's harness evidence (docs/contract.md#evidence,
    `FinalResponses.evidence_for`), else None.
    """
    if finals is None:
        # A rollout read from a record's items brings its own record (docs/contract.md#token-rollouts).
        for snapshot in snapshots:
            yield snapshot, *responses_for(snapshot, None, single_rollout=True, evidence=evidence)
        return
    head = [] if source_ids is not None else [s for _, s in zip(range(2), snapshots, strict=False)]  # the first two
    single = len(set(source_ids)) == 1 if source_ids is not None else len(head) == 1
    seen: list[str] = []
    for snapshot in itertools.chain(head, snapshots):
        head = []
        seen.append(snapshot.rollout_id)
        yield snapshot, *responses_for(snapshot, finals, single_rollout=single, evidence=evidence)
    for note in finals.notes(source_ids if source_ids is not None else seen):
        _PROGRESS.done()
        print(f"tokencap: note: {' '.join(note.split())}", file=sys.stderr)


def _inputs(args: argparse.Namespace, evidence: bool = False
            ) -> Iterator[tuple[TokenCaptureSnapshot, dict | None, dict | None]]:
    """The selected snapshots, lazily, each with the final response that applies to it (and,
    with ``evidence``, its record's harness evidence)."""
    finals = _read_final_responses(getattr(args, "final_responses", None))
    source_ids = None
    if finals is not None and args.rollout is not None:
        # The notes and the single-rollout rule speak of the whole source, not the selection:
        # list its rollout ids first (one rollout in memory at a time).
        source_ids = [s.rollout_id for s in iter_snapshots(args.source)]
    return _with_final_responses(_snapshots(args.source, args.rollout), finals, source_ids, evidence)


def _build_each(inputs: Iterable[tuple[TokenCaptureSnapshot, dict | None, dict | None]], terminal: str | None
                ) -> Iterator[tuple[RolloutResult, list[str], dict | None]]:
    """Each rollout built, with its snapshot's source notes (what the loader skipped or
    inferred) and its record's evidence (as `_inputs` gave it)."""
    for n, (snapshot, final, evidence) in enumerate(inputs, 1):
        _PROGRESS.say(f"tokencap: building rollout {n} ({snapshot.rollout_id}, {len(snapshot.entries)} records) ...")
        result = build_rollout(snapshot, terminal_call_id=terminal, final_response=final)
        source_notes = snapshot.source_notes
        del snapshot, final  # one rollout in memory at a time: neither is held while the next loads
        for note in result.notes:  # e.g. a terminal call id the rollout does not have
            _PROGRESS.done()
            print(f"tokencap: warning: {' '.join(note.split())}", file=sys.stderr)
        yield result, source_notes, evidence
        del result, evidence
    _PROGRESS.done()
