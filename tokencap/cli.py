"""Command line: `python -m tokencap build|inspect|app`.

Exit codes: 0 when the input was built (masked or not), 2 for unreadable input or bad
arguments -- with one line on stderr saying what and where, and nothing written at -o;
130 for Ctrl-C (SIGINT) and 143 for SIGTERM, with nothing left at -o -- unless the
output had already been renamed into place, in which case the run succeeded (0).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from .interrupts import Run, exit_code, handling_interrupts
from .loading import LoadError, iter_snapshots
from .records import RecordError, TokenCaptureSnapshot
from .rollout import RolloutResult, build_rollout

EXIT_OK = 0
EXIT_BAD_INPUT = 2


class _UsageError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tokencap", description="Rebuild and inspect trainable trajectories "
                                     "from captured model calls.")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"tokencap {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("build", "build each rollout and write the result as JSON (one rollout) or JSONL"),
                            ("inspect", "print the call tree, notes, verdicts and mask reasons")):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("source", help="snapshot JSON, entries JSONL, capture-store directory, or a zip of one")
        cmd.add_argument("--rollout", metavar="ID", help="only this rollout")
        cmd.add_argument("--terminal-call-id", metavar="ID", help="anchor the delivered chain on this call")
        if name == "build":
            cmd.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout (atomically)")
    app = sub.add_parser("app", help="open the inspection app (Streamlit) on a source")
    app.add_argument("source", nargs="?", help="file or directory to open (default: the bundled samples)")
    app.add_argument("--port", type=int, default=8501)
    return parser


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


def _snapshots(source: str, rollout: str | None) -> Iterator[TokenCaptureSnapshot]:
    """The source's snapshots, lazily (a directory or zip: one rollout at a time).

    Errors about the source as a whole are raised here, before anything is built."""
    path = Path(source)
    if not path.exists():
        raise _UsageError(f"{source}: no such file or directory")
    if path.is_file():
        _PROGRESS.say(f"tokencap: loading {path.name} ({path.stat().st_size / 1e6:.1f} MB) ...")
    else:
        _PROGRESS.say(f"tokencap: loading {source} ...")
    return _warned(iter_snapshots(source, rollout_id=rollout), source, rollout)


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


def _load(source: str, rollout: str | None) -> list[TokenCaptureSnapshot]:
    return list(_snapshots(source, rollout))


def _build_each(snapshots: Iterable[TokenCaptureSnapshot], terminal: str | None) -> Iterator[RolloutResult]:
    for n, snapshot in enumerate(snapshots, 1):
        _PROGRESS.say(f"tokencap: building rollout {n} ({snapshot.rollout_id}, {len(snapshot.entries)} records) ...")
        result = build_rollout(snapshot, terminal_call_id=terminal)
        del snapshot  # one rollout in memory at a time: neither is held while the next loads
        yield result
        del result
    _PROGRESS.done()


def _build_all(snapshots: list[TokenCaptureSnapshot], terminal: str | None) -> list[RolloutResult]:
    return list(_build_each(snapshots, terminal))


def _cmd_build(args: argparse.Namespace) -> int:
    from .export import write_atomically, write_summary

    # Built and written one rollout at a time: memory is that of one rollout. One rollout
    # is a JSON document and several are JSONL -- the same bytes for each line either way.
    snapshots = _snapshots(args.source, args.rollout)

    def write(handle) -> None:
        for result in _build_each(snapshots, args.terminal_call_id):
            write_summary(handle, result)
            handle.write(b"\n")
            del result

    if args.output:
        write_atomically(args.output, write)
    else:
        out = sys.stdout.buffer
        write(out)
        out.flush()
    return EXIT_OK


def _cmd_inspect(args: argparse.Namespace) -> int:
    from .report import render_text

    results = _build_all(_load(args.source, args.rollout), args.terminal_call_id)
    sys.stdout.write("\n".join(render_text(r) for r in results))
    return EXIT_OK


def _cmd_app(args: argparse.Namespace) -> int:
    app = Path(__file__).resolve().parent.parent / "app.py"
    if not app.exists():
        raise _UsageError(f"the app script {app} is not there; run from a source checkout (pip install -e .)")
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.address", "localhost",
           "--server.port", str(args.port), "--"]
    if args.source:
        cmd.append(os.path.abspath(args.source))
    return subprocess.call(cmd)


def _fail(message: str) -> int:
    _PROGRESS.done()
    message = " ".join(message.split())  # one line, whatever the record held
    print(f"tokencap: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


_DONE_WHEN_WRITTEN = {"build"}
"""Commands whose run is complete once their (one) output file is renamed into place."""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler = {"build": _cmd_build, "inspect": _cmd_inspect, "app": _cmd_app}[args.command]
    run = Run()
    try:
        if args.command == "app":  # the app's own server handles its signals
            return handler(args)
        with handling_interrupts(run):  # SIGTERM stops a run like Ctrl-C: part files removed
            return handler(args)
    except KeyboardInterrupt as exc:
        _PROGRESS.done()
        if run.committed and args.command in _DONE_WHEN_WRITTEN:
            return EXIT_OK  # the output was complete before the interrupt: the run succeeded
        return exit_code(exc)
    except (LoadError, RecordError, _UsageError) as exc:
        return _fail(str(exc))
    except (ValueError, OverflowError, UnicodeError, OSError) as exc:
        # Anything else the input provoked: still one line, still exit 2, never a traceback.
        return _fail(f"{args.source}: {type(exc).__name__}: {exc}")
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
