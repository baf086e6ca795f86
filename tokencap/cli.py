"""Command line: `python -m tokencap build|inspect|scan|export|app`.

Exit codes: 0 when the input was built (masked or not), 2 for unreadable input, an
unusable -o (``-o -`` is stdout for build and export, refused by the parquet writers), a
port in use (app) or bad arguments -- with one line on stderr saying what and where, and nothing
written at -o; 130 for Ctrl-C (SIGINT) and 143 for SIGTERM, with nothing left at -o --
unless the output had already been renamed into place, in which case the run succeeded (0).
`app` runs the Streamlit server as a child process and passes SIGINT/SIGTERM on to it.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import subprocess

from .diagnosis.text import TokenizerError
from .export import OutputPathError, check_output_path
from .interrupts import Run, Terminated, current_run, exit_code, handling_interrupts, parent_death_signal
from .loading import FinalResponses, LoadError, iter_snapshots, load_final_responses, responses_for
from .loading.files import kind_of, printable
from .loading.store import WITHOUT_SIBLINGS
from .run.errors import DiffError, DiscoveryError, EngineUnavailable, ScanTableError, WorkerCrashed
from .records import RecordError, TokenCaptureSnapshot
from .rollout import RolloutResult, build_rollout

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_CRASHED = 1  # a worker process died: not the input's fault, as far as anyone can tell

STDOUT = "-"
"""``-o -``: standard output, for the commands that write text (`build`, `export`)."""
_TO_STDOUT = {"build", "export"}
_PARQUET_WRITERS = {"scan": "run.parquet", "diff": "diff.parquet"}


class _UsageError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tokencap", description="Rebuild and inspect trainable trajectories "
                                     "from captured model calls.")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"tokencap {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in (("build", "build each rollout and write the result as JSON (one rollout) or JSONL"),
                            ("inspect", "print the call tree, notes, verdicts and mask reasons")):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("source", help="snapshot JSON, entries JSONL, capture-store directory, or a zip of one")
        cmd.add_argument("--rollout", metavar="ID", help="only this rollout")
        cmd.add_argument("--terminal-call-id", metavar="ID", help="anchor the delivered chain on this call")
        cmd.add_argument("--final-responses", metavar="FILE",
                         help="the harness's final responses (JSON, JSONL, or a bare Responses object): anchor each "
                              "rollout it names on the call its final answer came from")
        if name == "inspect":
            cmd.add_argument("--tokenizer", metavar="PATH",
                             help="a tokenizer.json (Hugging Face tokenizers): show each break's divergences as text "
                                  "and tell re-encoded text from changed text")
        if name == "build":
            cmd.add_argument("-o", "--output", metavar="OUT",
                             help="write the result to this file instead of stdout (- is stdout): one JSON "
                                  "object for one rollout, JSONL (one object a line) for several; written "
                                  "atomically")
    _add_run_commands(sub)
    _add_diff_command(sub)
    app = sub.add_parser("app", help="open the inspection app (Streamlit) on a run or a source")
    app.add_argument("source", nargs="?",
                     help="a run directory or a scan table (.parquet) opens the Run page; a rollout file opens the "
                          "Rollout page (default: the bundled sample run)")
    app.add_argument("--port", type=_port, default=8501,
                     help="the port the app's server listens on, on localhost only (default: 8501)")
    app.add_argument("--final-responses", metavar="FILE",
                     help="the run's rollout records (JSONL with rollout_id, response, reward, task and rollout "
                          "index): the Run page scans the run with them and shows rewards and task groups")
    _add_tokenizer(app)
    return parser


_TOKENIZER_HELP = ("a tokenizer.json (Hugging Face `tokenizers`): refines why a lineage broke (re-encoded text, "
                   "stripped reasoning) and shows the divergence as text; never changes a verdict")


def _add_tokenizer(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--tokenizer", metavar="PATH", help=_TOKENIZER_HELP)


def _checked_tokenizer(path: str | None) -> str | None:
    """``--tokenizer PATH`` read once, so a bad one is a one-line error before any work."""
    if path is None:
        return None
    from .diagnosis import TokenizerError, load_tokenizer

    try:
        load_tokenizer(path)
    except TokenizerError as exc:
        raise _UsageError(f"--tokenizer: {exc}") from None
    return path


_RUN_OUTPUT_HELP = {
    "scan": "the table to write (parquet, e.g. run.parquet): one row per rollout; written atomically",
    "export": "the trajectories to write (JSONL, e.g. trajectories.jsonl; - for stdout): one rollout's build "
              "result a line, as `tokencap build` writes it; written atomically",
}


def _add_run_commands(sub: argparse._SubParsersAction) -> None:
    from .run import ENGINES

    for name, help_text in (
            ("scan", "build every rollout of a run and write one table row per rollout (parquet)"),
            ("export", "build every rollout of a run and write its trajectories as JSONL")):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("source", help="a capture-store directory, a directory tree of snapshot/JSONL files, "
                                        "or one JSONL holding many rollouts")
        cmd.add_argument("-o", "--output", metavar="OUT", required=True, help=_RUN_OUTPUT_HELP[name])
        cmd.add_argument("--workers", type=_positive_int, metavar="N",
                         help="worker processes or Ray CPUs (default: this machine's CPU count)")
        cmd.add_argument("--engine", choices=ENGINES, default="local",
                         help="local processes (default) or Ray tasks (pip install -e '.[ray]')")
        cmd.add_argument("--ray-address", metavar="ADDR",
                         help="Ray cluster to join ('auto': the running one); default: a local Ray for this run")
        cmd.add_argument("--final-responses", metavar="FILE",
                         help="the harness's final responses (JSON or JSONL), to anchor each rollout on its answer")
        if name == "scan":
            cmd.add_argument("--since", metavar="OLD.parquet",
                             help="reuse the rows of rollouts whose files did not change since this earlier scan")
            _add_tokenizer(cmd)
        else:
            cmd.add_argument("--only-trainable", action="store_true", help="write only rollouts that are not masked")


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (1 to 65535)")
    return value


def _add_diff_command(sub: argparse._SubParsersAction) -> None:
    from .run import ENGINES

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
    cmd.add_argument("--workers", type=_positive_int, metavar="N",
                     help="worker processes or Ray CPUs for scanning a run directory (default: CPU count)")
    cmd.add_argument("--engine", choices=ENGINES, default="local", help="local processes (default) or Ray tasks")
    cmd.add_argument("--ray-address", metavar="ADDR", help="Ray cluster to join ('auto': the running one)")
    _add_tokenizer(cmd)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


class _Progress:
    """One self-overwriting status line on stderr, only when a person is watching (a TTY)."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()
        self.shown = False

    def say(self, text: str) -> None:
        if self.enabled:
            sys.stderr.write(f"\r\033[K{text}")
            sys.stderr.flush()
            self.shown = True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


_PROGRESS = _Progress()


_EMPTY_PATH = "an empty path names no file or directory (give . for the current directory)"


def _existing(source: str) -> Path:
    """``source`` as a path, or a `_UsageError` when there is nothing there to read."""
    if not source:  # an unset shell variable; Path("") would be the working directory
        raise _UsageError(f"SOURCE is empty: {_EMPTY_PATH}")
    path = Path(source)
    if not path.exists():
        raise _UsageError(f"{source}: no such file or directory")
    return path


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




def _read_final_responses(path: str | None) -> FinalResponses | None:
    """The ``--final-responses`` file, read before the source so a bad one fails fast."""
    if not path:
        return None
    _PROGRESS.say(f"tokencap: reading final responses {Path(path).name} ...")
    return load_final_responses(path)


def _with_final_responses(snapshots: Iterator[TokenCaptureSnapshot], finals: FinalResponses | None,
                          source_ids: list[str] | None, evidence: bool = False
                          ) -> Iterator[tuple[TokenCaptureSnapshot, dict | None, dict | None]]:
    """Each snapshot with the final response the file holds for it (SPEC 10).

    Lazily, so a directory is still built one rollout at a time. Whether the source is a
    single rollout (a response without a rollout id applies only then) is known from
    ``source_ids`` when given, else by peeking at the first two snapshots. Responses that
    apply to no rollout of the source are a note on stderr at the end, not an error: a
    run's rollout records may well cover more rollouts than one capture directory holds.
    With ``evidence``, each snapshot also gets its record's harness evidence (SPEC 12.6,
    `FinalResponses.evidence_for`), else None.
    """
    if finals is None:
        for snapshot in snapshots:  # a rollout read from a record's items brings its own (SPEC 13)
            yield snapshot, *responses_for(snapshot, None, single_rollout=True, evidence=evidence)
        return
    head = [] if source_ids is not None else [s for _, s in zip(range(2), snapshots)]
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


def _cmd_build(args: argparse.Namespace) -> int:
    from .export import write_atomically, write_summary

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
        out = sys.stdout.buffer
        write(out)
        out.flush()
    return EXIT_OK


def _cmd_inspect(args: argparse.Namespace) -> int:
    from .diagnosis import diagnose, load_tokenizer, span_texts
    from .report import render_text

    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None  # a bad path fails before any work

    def report(result: RolloutResult, notes: list[str], evidence: dict | None) -> str:
        breaks = diagnose(result, tokenizer=tokenizer, evidence=evidence)
        texts = [span_texts(result, b, tokenizer) for b in breaks] if tokenizer is not None else []
        return render_text(result, notes, breaks, texts)

    results = _build_each(_inputs(args, evidence=True), args.terminal_call_id)
    sys.stdout.write("\n".join(report(*built) for built in results))
    return EXIT_OK


def _run_inputs(args: argparse.Namespace) -> None:
    _existing(args.source)
    if _is_parquet(Path(args.source)):  # not one masked row named after the table
        if _is_diff_table(args.source):
            raise _UsageError(f"{args.source}: is a diff table (what `tokencap diff -o` writes, one row per joined "
                              f"rollout), not a run to {args.command}; give one of the runs it compares")
        raise _UsageError(f"{args.source}: is a scan table (parquet), not a run to {args.command}; open it with "
                          f"`tokencap app {args.source}`, compare it with `tokencap diff`, or give the run it was "
                          "scanned from")
    if args.final_responses and not Path(args.final_responses).is_file():
        raise _UsageError(f"{args.final_responses}: no such file (--final-responses)")
    since = getattr(args, "since", None)
    if since and not Path(since).is_file():
        raise _UsageError(f"{since}: no such file (--since)")
    if args.ray_address and args.engine != "ray":
        raise _UsageError("--ray-address needs --engine ray")


def _run_command(args: argparse.Namespace, label: str, work) -> Any:
    """Check a run command's inputs, run ``work(progress)`` under a progress bar, print its notes."""
    _run_inputs(args)
    return _with_progress(label, work, args.output)


def _with_progress(label: str, work: Callable[[Any], Any], output: str | None, note_prefix: str = "") -> Any:
    """``work(progress)`` under a progress bar; the notes of the summary it returns go to stderr."""
    from .progress import RunProgress

    progress = RunProgress(label)
    try:
        summary = work(progress)
    except KeyboardInterrupt as exc:
        progress.close(_stopped(exc, output))
        raise
    finally:
        progress.close()
    for note in summary.notes:
        print(f"tokencap: note: {note_prefix}{' '.join(note.split())}", file=sys.stderr)
    return summary


def _stopped(exc: KeyboardInterrupt, output: str | None) -> str:
    """What a person reads at the end of the progress line when Ctrl-C or SIGTERM stopped the work."""
    how = "terminated" if isinstance(exc, Terminated) else "interrupted"
    run = current_run()
    if output and run is not None and os.fspath(Path(output)) in run.committed:
        return f"{how} after {output} was written"
    return f"{how}; nothing written"


def _cmd_scan(args: argparse.Namespace) -> int:
    from .run import scan

    tokenizer = _checked_tokenizer(args.tokenizer)
    summary = _run_command(args, "scan", lambda progress: scan(
        args.source, args.output, workers=args.workers, engine=args.engine, ray_address=args.ray_address,
        final_responses=args.final_responses, since=args.since, progress=progress, tokenizer=tokenizer))
    reused = f", {summary.reused:,} reused from {args.since}" if args.since else ""
    print(f"tokencap: scanned {summary.rollouts:,} rollouts ({summary.trainable:,} trainable, "
          f"{summary.rollouts - summary.trainable:,} masked{reused}) -> {args.output}"
          f"{_format_note(args.output, ('.parquet',), 'a parquet table')}", file=sys.stderr)
    return EXIT_OK


def _cmd_export(args: argparse.Namespace) -> int:
    from .run import export

    to_stdout = args.output == STDOUT
    out = sys.stdout.buffer if to_stdout else args.output
    summary = _run_command(args, "export", lambda progress: export(
        args.source, out, only_trainable=args.only_trainable, workers=args.workers, engine=args.engine,
        ray_address=args.ray_address, final_responses=args.final_responses, progress=progress))
    if to_stdout:
        sys.stdout.buffer.flush()
    where = "standard output" if to_stdout else args.output + _format_note(
        args.output, ('.jsonl', '.json', '.ndjson'), 'JSON lines')
    print(f"tokencap: exported {summary.written:,} of {summary.rollouts:,} rollouts "
          f"({summary.trainable:,} trainable) -> {where}", file=sys.stderr)
    return EXIT_OK


def _format_note(output: str, suffixes: tuple[str, ...], written: str) -> str:
    """Words for an output whose name suggests another format than the one written."""
    if Path(output).suffix.lower() in suffixes:
        return ""
    return f" (written as {written}, whatever the file's name says)"


def _app_source(source: str) -> str:
    """The app's command-line source as an absolute path, checked here so a bad one never starts a server."""
    path = _existing(source)
    if not (path.is_dir() or path.is_file()):
        raise _UsageError(f"{source}: not a regular file or directory (a pipe or device is never read)")
    if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
        raise _UsageError(f"{source}: permission denied (the app could not read it)")
    return os.path.abspath(source)


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
    from .run import DiffTableGiven, ScanTableError, read_scan

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
    from .run import DiffTableGiven, RunSummary, read_scan, scan_table

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
    from .run.diff import can_join_by_task, no_task_key

    if table is not None:
        keyed = can_join_by_task(table, name)
    else:
        facts = list((records.facts.values() if records is not None else ()))
        if records is not None and records.unnamed is not None:
            facts.append(records.unnamed_facts)
        keyed = any(f.task_index is not None and f.rollout_index is not None for f in facts)
    if not keyed:
        raise no_task_key(name)


def _check_diff_output(args: argparse.Namespace) -> None:
    """``-o`` must never be one of the inputs (main() has already checked that it can be written)."""
    if not args.output:
        return
    out = Path(args.output)
    for side in (args.a, args.b):
        if out.exists() and Path(side).exists() and out.resolve() == Path(side).resolve():
            raise _UsageError(f"{args.output}: is one of the runs being compared; choose another -o")


def _cmd_diff(args: argparse.Namespace) -> int:
    import pyarrow.parquet as pq

    from .export import write_atomically
    from .run.diff import diff_tables, summary_text

    if args.ray_address and args.engine != "ray":
        raise _UsageError("--ray-address needs --engine ray")
    tables = {side: _diff_is_table(args, side) for side in ("a", "b")}  # each side exists, or says which fails
    _check_diff_output(args)
    args.tokenizer = _checked_tokenizer(args.tokenizer)
    records = {side: _diff_records(args, side) for side in ("a", "b")}  # both, before a long scan
    # Scan tables are read first (quick), so a task join that cannot be is refused before any scan.
    read = {side: _diff_side(args, side, True, None) for side in ("a", "b") if tables[side]}
    if args.join == "task":
        for side in ("a", "b"):
            _check_task_join(getattr(args, side), read.get(side), records[side])
    a, b = (read[side] if side in read else _diff_side(args, side, False, records[side]) for side in ("a", "b"))
    diff = diff_tables(a, b, args.join, names=(args.a, args.b))
    if args.output:
        write_atomically(args.output, lambda handle: pq.write_table(diff.arrow, handle))
    sys.stdout.write(summary_text(diff, args.a, args.b))
    if Path(args.a).resolve() == Path(args.b).resolve():
        print(f"tokencap: note: A and B are the same run ({args.a}): every rollout is compared with itself",
              file=sys.stderr)
    if args.output:
        print(f"tokencap: {diff.arrow.num_rows:,} joined rollouts -> {args.output}"
              f"{_format_note(args.output, ('.parquet',), 'a parquet table')}", file=sys.stderr)
    return EXIT_OK


def streamlit_flags(app_dir: Path) -> list[str]:
    """The app's ``.streamlit/config.toml`` as ``--section.option value`` flags.

    Streamlit reads that file only from its working directory, and `tokencap app` runs in
    the user's: without the flags the upload limit, the file watcher and the theme would be
    Streamlit's defaults. A missing file means no flags."""
    import tomllib

    try:
        with open(app_dir / ".streamlit" / "config.toml", "rb") as handle:
            config = tomllib.load(handle)
    except FileNotFoundError:
        return []
    flags: list[str] = []
    for section, options in config.items():
        for name, value in options.items():
            flags += [f"--{section}.{name}", str(value).lower() if isinstance(value, bool) else str(value)]
    return flags


def _cmd_app(args: argparse.Namespace) -> int:
    app = Path(__file__).resolve().parent.parent / "app.py"
    if not app.exists():
        raise _UsageError(f"the app script {app} is not there; run from a source checkout (pip install -e .)")
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), *streamlit_flags(app.parent), "--server.address",
           "localhost", "--server.port", str(args.port), "--"]
    source = _app_source(args.source) if args.source is not None else None
    if source:
        cmd.append(source)
    if args.final_responses:
        if not Path(args.final_responses).is_file():
            raise _UsageError(f"{args.final_responses}: no such file (--final-responses)")
        # Read here, as `tokencap build` reads them: a bad file is the same one line and exit 2, before
        # any server starts (not an error shown only in the browser).
        _read_final_responses(args.final_responses)
        _PROGRESS.done()
        cmd += ["--final-responses", os.path.abspath(args.final_responses)]
    _check_port_free(args.port)
    from .views.run.source import START_DIR_ENV

    os.environ[START_DIR_ENV] = os.getcwd()  # a path typed in the app starts here, wherever the server runs
    if args.tokenizer:
        cmd += ["--tokenizer", os.path.abspath(_checked_tokenizer(args.tokenizer) or "")]
    cmd[cmd.index("--"):cmd.index("--")] = ["--server.scriptHealthCheckEnabled", "true"]  # for warm_up_app

    def beside() -> subprocess.Popen | None:
        threading.Thread(target=warm_up_app, args=(f"http://localhost:{args.port}",), daemon=True).start()
        return _start_prescan(source, args.final_responses, args.tokenizer) if source else None

    return _serve(cmd, beside=beside)


WARM_UP_WAIT = 60.0


def warm_up_app(url: str, wait: float = WARM_UP_WAIT) -> bool:
    """Run the app's script once as soon as the server at ``url`` answers: its first page then opens warm.

    A fresh server spends ~1.5 s of the first visit importing the pages' modules (pandas,
    the views) and reading the scan table; this does it while the user is still opening the
    link. It asks Streamlit's script health check (``server.scriptHealthCheckEnabled``), which
    runs the script in a session of its own with no browser: the default page, the same work
    the first visit does. True when that run ended without error; False (and nothing else)
    when the server never answered, has no such endpoint, or the script failed -- a warm-up
    only saves time, and the page itself reports any error to whoever opens it.
    """
    import time
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1):
                break
        except (OSError, urllib.error.URLError):
            time.sleep(0.1)
    else:
        return False
    try:
        with urllib.request.urlopen(f"{url}/_stcore/script-health-check", timeout=wait + 30) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _check_port_free(port: int) -> None:
    """A `_UsageError` when something already listens on ``port`` on localhost (a second `tokencap app`,
    say): tested by binding it, as the server will, on every address localhost names."""
    import errno
    import socket

    try:
        addresses = {info[4][:2]: info[0] for info in socket.getaddrinfo("localhost", port, type=socket.SOCK_STREAM)}
    except OSError:
        addresses = {("127.0.0.1", port): socket.AF_INET}
    for address, family in addresses.items():
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does: TIME_WAIT is free
            try:
                sock.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise _UsageError(f"port {port} is already in use on localhost (another tokencap app?); "
                                      f"stop that one, or choose another port with --port N") from None
                # an address this machine cannot bind (no IPv6, say): the server skips it too


def _start_prescan(source: str, records: str | None, tokenizer: str | None = None) -> subprocess.Popen | None:
    """A big run directory is scanned beside the server (tokencap.views.run.prescan), so the scan
    overlaps the server's start and the browser's first load; the page then reuses its table."""
    import subprocess

    from .run.child import child_environment
    from .views.run.source import IN_PROCESS_BYTES, fingerprint

    if not Path(source).is_dir() or fingerprint(source).size < IN_PROCESS_BYTES:
        return None  # a small run is scanned by the page, in the server's process
    # The records as the page names them (resolved), so both look for the same cached table.
    cmd = [sys.executable, "-P", "-m", "tokencap.views.run.prescan", str(Path(source).resolve()), "--parent",
           str(os.getpid())] + (["--final-responses", str(Path(records).resolve())] if records else [])
    cmd += ["--tokenizer", str(Path(tokenizer).resolve())] if tokenizer else []
    # A process group of its own, as the page's child scan: stopping it stops its workers too.
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=child_environment(), process_group=0)


_FORWARDED = (signal.SIGINT, signal.SIGTERM)


def _serve(cmd: list[str], beside: Callable[[], subprocess.Popen | None] | None = None) -> int:
    """Run the server ``cmd`` until it exits; SIGINT and SIGTERM sent to this process are passed on to it.

    So stopping `tokencap app` stops the server: it is never left serving on its own. SIGKILL
    cannot be forwarded; the kernel then sends the server SIGTERM (`parent_death_signal`).
    ``beside`` starts work to do while the server runs (the scan of its run), once the server
    has started; it is stopped (SIGTERM) when the server ends. Returns the server's exit
    status, or 130 / 143 when a signal stopped it.
    """
    import subprocess  # here: only the app's server needs it

    child: subprocess.Popen | None = None
    helper: subprocess.Popen | None = None
    received: list[int] = []

    def forward(signum: int, frame: object) -> None:
        received.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    in_main_thread = threading.current_thread() is threading.main_thread()  # only it may set handlers
    previous = {signum: signal.signal(signum, forward) for signum in _FORWARDED} if in_main_thread else {}
    parent = os.getpid()
    try:
        # The server gets SIGTERM when this process dies, even by SIGKILL (which cannot be forwarded).
        child = subprocess.Popen(cmd, preexec_fn=parent_death_signal(parent))
        if received and child.poll() is None:  # a signal arrived while it was being started
            child.send_signal(received[0])
        if beside is not None and not received:
            try:
                helper = beside()
            except (OSError, ValueError):  # it only saves time: the page does the same work itself
                helper = None
        code = child.wait()  # a forwarded signal does not end the wait: the server is waited for
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if helper is not None:
            from .run.child import stop_process

            stop_process(helper)
    if received:
        return 128 + received[0]
    return 128 - code if code < 0 else code


def _check_output(command: str, output: str) -> None:
    """``-o`` can be written: ``-`` is standard output for `build` and `export`, and refused by the
    commands that write parquet (binary, for a file); anything else must be a file `write_atomically`
    can put in place. Never a file named ``-``."""
    if output != STDOUT:
        check_output_path(output)
    elif command not in _TO_STDOUT:
        raise _UsageError(f"-o -: {command} writes a parquet table, which is binary and not for standard "
                          f"output; give a file name (-o {_PARQUET_WRITERS.get(command, 'OUT.parquet')})")


def _fail(message: str) -> int:
    _PROGRESS.done()
    message = " ".join(message.split())  # one line, whatever the record held
    print(f"tokencap: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


_DONE_WHEN_WRITTEN = {"build", "scan", "export", "diff"}
"""Commands whose run is complete once their (one) output file is renamed into place."""


FULL_COLLECTION_EVERY = 1000
"""Younger-generation passes between two full passes of the cyclic garbage collector in a
command (Python's default is 10)."""


@contextmanager
def _batch_collection() -> Iterator[None]:
    """The cyclic garbage collector tuned for a batch run, restored after it.

    A full pass walks every tracked object alive, and a build holds many at once (each
    record is a handful of them; rollouts loaded ahead of their turn add hundreds of
    thousands): at the default rate the passes cost a third of the time of a build of
    10,000 small snapshots. What the imports made is frozen (never garbage, never walked
    again) and full passes come a hundred times less often. Nothing is left uncollected: a
    rollout's objects are freed by reference counting as soon as it is written, the rare
    cycle by the next full pass.
    """
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(before[0], before[1], max(before[2], FULL_COLLECTION_EVERY))
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


_ENDS_WITHOUT_TEARDOWN = frozenset(("build", "inspect"))
"""Commands that run in this process alone (no worker pool, no Ray, no server): once they
return, their output is written, flushed and closed, and all that is left for the
interpreter's teardown is freeing memory that the operating system frees at once."""

_command_run: list[str] = []  # the command `main` parsed last (`console` reads it)


def console() -> NoReturn:
    """The `tokencap` command and `python -m tokencap`: `main`, then the process ends.

    After `build` and `inspect` the process exits without the interpreter's teardown
    (unloading every module, freeing every object one by one): 50-100 ms, a tenth of a big
    build and half of a small one, spent on nothing the user sees. Everything else (and a
    flush that fails, such as a closed pipe) ends the usual way.
    """
    code = main()
    if _command_run and _command_run[-1] in _ENDS_WITHOUT_TEARDOWN:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            sys.exit(code)
        os._exit(code)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    with _batch_collection():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    _command_run[:] = [args.command] if args.command else []
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    handler = {"build": _cmd_build, "inspect": _cmd_inspect, "scan": _cmd_scan, "export": _cmd_export,
               "diff": _cmd_diff, "app": _cmd_app}[args.command]
    run = Run()
    try:
        if getattr(args, "output", None) is not None:  # every command that writes: a bad -o fails before any work
            _check_output(args.command, args.output)
        if args.command == "app":  # _serve passes SIGINT and SIGTERM on to the app's server
            return handler(args)
        with handling_interrupts(run):  # SIGTERM stops a run like Ctrl-C: part files removed
            return handler(args)
    except KeyboardInterrupt as exc:
        _PROGRESS.done()
        if run.committed and args.command in _DONE_WHEN_WRITTEN:
            return EXIT_OK  # the output was complete before the interrupt: the run succeeded
        return exit_code(exc)
    except (LoadError, RecordError, _UsageError, OutputPathError, DiscoveryError, ScanTableError,
            EngineUnavailable, DiffError, TokenizerError) as exc:
        return _fail(str(exc))
    except WorkerCrashed as exc:
        _PROGRESS.done()
        print(f"tokencap: error: {exc}", file=sys.stderr)
        return EXIT_CRASHED
    except BrokenPipeError:  # the reader went away (`tokencap build RUN | head`): not an error
        _quiet_stdout()
        return EXIT_OK
    except (ValueError, OverflowError, UnicodeError, OSError) as exc:
        # Anything else the input provoked: still one line, still exit 2, never a traceback.
        where = args.source if hasattr(args, "source") else f"{args.a} vs {args.b}"
        return _fail(f"{where}: {type(exc).__name__}: {exc}")


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not hit the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (captured in a test): nothing will be flushed to a pipe
        pass


if __name__ == "__main__":
    console()
