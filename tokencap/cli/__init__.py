"""Command line: `python -m tokencap build|inspect|check|scan|export|diff|app`.

Exit codes: 0 when the input was built (masked or not; `check` exits 1 when a rollout is
masked), 2 for unreadable input, an unusable -o (``-o -`` is stdout for build and export,
refused by the parquet writers), a port in use (app) or bad arguments -- with one line on stderr
saying what and where, and nothing written at -o; 130 for Ctrl-C (SIGINT) and 143 for SIGTERM,
with nothing left at -o -- unless the output had already been renamed into place, in which case
the run succeeded (0); 141 (128 + SIGPIPE) when the reader of standard output went away
(`| head`), quietly.
`app` runs the Streamlit server as a child process and passes SIGINT/SIGTERM on to it.

This module assembles the parser and runs a command under the error and exit handling; each
command is a module of its own (`build`, `inspect`, `check`, `scan`, `export`, `diff`, `app`), the
app's server is `server`, and what they share is `options`.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import NoReturn

from ..bundled import is_sample_name, sample_path  # at start: a command may run as another user later
from ..diagnosis.decoding import TokenizerError
from ..export import OutputPathError
from ..interrupts import Run, exit_code, handling_interrupts
from ..loading import LoadError
from ..record_errors import RecordError
from ..run.errors import DiffError, DiscoveryError, EngineUnavailable, ScanTableError, WorkerCrashed
from . import app, build, check, diff, export, inspect, scan
from .options import (
    _PROGRESS,
    EXIT_BAD_INPUT,
    EXIT_CRASHED,
    EXIT_OK,
    EXIT_PIPE_CLOSED,
    _check_output,
    _UsageError,
    inputs_of,
    refuse_output_over_inputs,
)

_COMMANDS = {"build": build, "inspect": inspect, "check": check, "scan": scan, "export": export, "diff": diff,
             "app": app}
"""Each command's module, in the order `tokencap --help` lists them: its `add_parser(sub)` and `run(args)`."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tokencap", description="Rebuild and inspect trainable trajectories "
                                     "from captured model calls.")
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"tokencap {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _COMMANDS.values():
        module.add_parser(sub)
    return parser


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


_ENDS_WITHOUT_TEARDOWN = frozenset(("build", "inspect", "check"))
"""Commands that run in this process alone (no worker pool, no Ray, no server): once they
return, their output is written, flushed and closed, and all that is left for the
interpreter's teardown is freeing memory that the operating system frees at once."""


_command_run: list[str] = []  # the command `main` parsed last (`console` reads it)


def console() -> NoReturn:
    """The `tokencap` command and `python -m tokencap`: `main`, then the process ends.

    After `build`, `inspect` and `check` the process exits without the interpreter's teardown
    (unloading every module, freeing every object one by one): a noticeable share of a build,
    spent on nothing the user sees (figures: docs/performance.md). Everything else (and a
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
    try:
        _name_samples(args)
    except ValueError as exc:  # bundled.UnknownSample
        return _fail(str(exc))
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    handler = _COMMANDS[args.command].run  # looked up now: a test may replace a command's run
    run = Run()
    try:
        if getattr(args, "output", None) is not None:  # every command that writes: a bad -o fails before any work
            _check_output(args.command, args.output)
            refuse_output_over_inputs(args.output, inputs_of(args))  # never over, nor into, what it reads
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
    except BrokenPipeError:  # the reader went away (`tokencap export RUN -o - | head`): quietly, but not a success
        _PROGRESS.done()
        _quiet_stdout()
        return EXIT_PIPE_CLOSED
    except (ValueError, OverflowError, UnicodeError, OSError) as exc:
        # Anything else the input provoked: still one line, still exit 2, never a traceback.
        where = args.source if hasattr(args, "source") else f"{args.a} vs {args.b}"
        return _fail(f"{where}: {type(exc).__name__}: {exc}")


_PATH_ARGUMENTS = ("source", "a", "b", "final_responses", "final_responses_a", "final_responses_b", "since",
                   "tokenizer")


def _name_samples(args: argparse.Namespace) -> None:
    """Each path argument written ``sample:NAME`` becomes that bundled sample's path (tokencap.bundled)."""
    for name in _PATH_ARGUMENTS:
        value = getattr(args, name, None)
        if isinstance(value, str) and is_sample_name(value):
            setattr(args, name, sample_path(value))


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not hit the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (captured in a test): nothing will be flushed to a pipe
        pass
