"""What the commands share: exit codes, the usage error, options (`--tokenizer`, ports, counts), the
progress line on stderr, and the checks of a source and an output made before any work."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..export import check_output_path
from ..interrupts import Terminated, current_run
from ..loading import FinalResponses, load_final_responses

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_CRASHED = 1  # a worker process died: not the input's fault, as far as anyone can tell

STDOUT = "-"
"""``-o -``: standard output, for the commands that write text (`build`, `export`)."""
_TO_STDOUT = {"build", "export"}
_PARQUET_WRITERS = {"scan": "run.parquet", "diff": "diff.parquet"}


class _UsageError(Exception):
    pass


_TOKENIZER_HELP = ("a tokenizer.json, a model directory holding one, or a model name Org/Name found in the local "
                   "Hugging Face cache (never downloaded): refines why a lineage broke (re-encoded text, "
                   "stripped reasoning) and shows the divergence as text; never changes a verdict")


def _add_tokenizer(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--tokenizer", metavar="TOKENIZER", help=_TOKENIZER_HELP)


def _checked_tokenizer(path: str | None) -> str | None:
    """``--tokenizer T`` (a tokenizer.json, a model directory or Org/Name in the local Hugging Face
    cache; docs/verdicts.md) read once, so a bad one is a one-line error before any work; the path of
    the tokenizer.json it names."""
    if path is None:
        return None
    from ..diagnosis import TokenizerError
    from ..diagnosis.tokenizer_lookup import checked_tokenizer_file

    try:
        return checked_tokenizer_file(path)
    except TokenizerError as exc:
        raise _UsageError(f"--tokenizer: {exc}") from None


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (1 to 65535)")
    return value


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
        from ..bundled import sample_hint

        raise _UsageError(f"{source}: no such file or directory{sample_hint(source)}")
    return path


def _read_final_responses(path: str | None) -> FinalResponses | None:
    """The ``--final-responses`` file, read before the source so a bad one fails fast."""
    if not path:
        return None
    _PROGRESS.say(f"tokencap: reading final responses {Path(path).name} ...")
    return load_final_responses(path)


def _with_progress(label: str, work: Callable[[Any], Any], output: str | None, note_prefix: str = "") -> Any:
    """``work(progress)`` under a progress bar; the notes of the summary it returns go to stderr."""
    from ..progress import RunProgress

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


def _format_note(output: str, suffixes: tuple[str, ...], written: str) -> str:
    """Words for an output whose name suggests another format than the one written."""
    if Path(output).suffix.lower() in suffixes:
        return ""
    return f" (written as {written}, whatever the file's name says)"


def _check_output(command: str, output: str) -> None:
    """``-o`` can be written: ``-`` is standard output for `build` and `export`, and refused by the
    commands that write parquet (binary, for a file); anything else must be a file `write_atomically`
    can put in place. Never a file named ``-``."""
    if output != STDOUT:
        check_output_path(output)
    elif command not in _TO_STDOUT:
        raise _UsageError(f"-o -: {command} writes a parquet table, which is binary and not for standard "
                          f"output; give a file name (-o {_PARQUET_WRITERS.get(command, 'OUT.parquet')})")
