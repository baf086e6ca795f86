"""What the commands share: exit codes, the usage error, options (`--tokenizer`, ports, counts), the
progress line on stderr, and the checks of a source and an output made before any work."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..bundled import sample_hint
from ..export import check_output_path
from ..interrupts import Terminated, current_run
from ..loading import FinalResponses, load_final_responses

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_CRASHED = 1  # a worker process died: not the input's fault, as far as anyone can tell
EXIT_PIPE_CLOSED = 141  # 128 + SIGPIPE: the reader of standard output went away (`| head`), as for any filter

STDOUT = "-"
"""``-o -``: standard output, for the commands that write text (`build`, `export`)."""
_TO_STDOUT = {"build", "export"}
_PARQUET_WRITERS = {"scan": "run.parquet", "diff": "diff.parquet"}


class _UsageError(Exception):
    pass


class StandardOutput:
    """Standard output (binary) for a command's result: a write that fails (a full disk, `> /dev/full`) is
    blamed on standard output, never on the input being read. A closed pipe stays a `BrokenPipeError`."""

    def __init__(self) -> None:
        self._out = sys.stdout.buffer

    def write(self, data: bytes) -> int:
        try:
            return self._out.write(data)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _UsageError(_stdout_failed(exc)) from None

    def flush(self) -> None:
        try:
            self._out.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _UsageError(_stdout_failed(exc)) from None


def _stdout_failed(exc: OSError) -> str:
    return (f"standard output: cannot write the result ({exc.strerror or exc}); write it to a file with -o FILE "
            "on a disk with room")


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


def _parsed(text: str, convert: type, what: str) -> Any:
    """``text`` as a number (``int`` or ``float``), or argparse's one-line complaint naming ``what``."""
    try:
        return convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


def _port(text: str) -> int:
    value: int = _parsed(text, int, "a port number")
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (1 to 65535)")
    return value


def _positive_int(text: str) -> int:
    value: int = _parsed(text, int, "a whole number")
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _seconds(text: str) -> float:
    value: float = _parsed(text, float, "a number of seconds")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds above 0")
    return value


def add_ray_arguments(cmd: argparse.ArgumentParser, workers_help: str) -> None:
    """``--workers``, ``--engine``, ``--ray-address`` and ``--ray-timeout``, as every command that scans takes them."""
    from ..run import ENGINES, RAY_CONNECT_TIMEOUT

    cmd.add_argument("--workers", type=_positive_int, metavar="N", help=workers_help)
    cmd.add_argument("--engine", choices=ENGINES, default="local",
                     help="local processes (default) or Ray tasks (pip install 'tokencap-rl[ray]')")
    cmd.add_argument("--ray-address", metavar="ADDR",
                     help="Ray cluster to join ('auto': the running one); default: a local Ray for this run")
    cmd.add_argument("--ray-timeout", type=_seconds, metavar="SECONDS",
                     help=f"how long to wait for the cluster at --ray-address to answer before giving up "
                          f"(default: {RAY_CONNECT_TIMEOUT:g})")


def check_ray_arguments(args: argparse.Namespace) -> None:
    """The Ray options agree, and the cluster at ``--ray-address`` answers: joined now, before any work,
    within ``--ray-timeout`` seconds -- else a one-line error naming the address."""
    if args.ray_address and args.engine != "ray":
        raise _UsageError("--ray-address needs --engine ray")
    if args.ray_timeout is not None and not args.ray_address:
        raise _UsageError("--ray-timeout needs --ray-address (it is how long to wait for that cluster)")
    if args.ray_address:
        from ..run import RAY_CONNECT_TIMEOUT
        from ..run.engines import join_ray

        join_ray(args.ray_address, args.ray_timeout or RAY_CONNECT_TIMEOUT)


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
        raise _UsageError(f"{source}: no such file or directory{sample_hint(source)}")
    return path


RECORDS_FILE = "a rollout records file (JSON or JSONL)"
SINCE_TABLE = "the scan table (.parquet) of an earlier `tokencap scan`"


def _input_file(path: str, flag: str, takes: str) -> None:
    """A `_UsageError` unless the file a flag names (``--final-responses``, ``--since``) is there and is a file."""
    if os.path.isdir(path):
        raise _UsageError(f"{path}: is a directory; {flag} takes {takes}")
    if not os.path.exists(path):
        raise _UsageError(f"{path}: no such file ({flag})")
    if not os.path.isfile(path):
        raise _UsageError(f"{path}: not a regular file (a pipe or device is never read); {flag} takes {takes}")


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


INPUT_OPTIONS = (("source", "SOURCE"), ("a", "run A"), ("b", "run B"), ("final_responses", "--final-responses"),
                 ("final_responses_a", "--final-responses-a"), ("final_responses_b", "--final-responses-b"),
                 ("since", "--since"))
"""Every argument (its attribute on the parsed arguments, and its name for a person) naming a file or
directory a command reads: what `-o` must never overwrite nor write into."""


def inputs_of(args: argparse.Namespace) -> list[tuple[str, str]]:
    """``(name, path)`` for each input the parsed ``args`` give (see `INPUT_OPTIONS`)."""
    return [(name, value) for attr, name in INPUT_OPTIONS if isinstance(value := getattr(args, attr, None), str)
            and value]


def refuse_output_over_inputs(output: str | None, inputs: Iterable[tuple[str, str]]) -> None:
    """A `_UsageError` when ``output`` (``-o``) is one of ``inputs`` or lies inside one (a directory read).

    Called before any work by every command that writes (`tokencap.cli.main` does it for each
    command with ``-o``, from `inputs_of`): a build written over its capture, a table written
    over a capture file, trajectories written into the run the next scan reads -- each would
    destroy or change an input, and is refused with nothing touched. Symbolic links are
    resolved (an output reached through a link to the input, a linked directory), and a hard
    link to an input counts as the input.
    """
    if not output or output == STDOUT:
        return
    out = os.path.realpath(output)
    for name, path in inputs:
        real = os.path.realpath(path)
        if out == real or _same_file(output, path):
            raise _UsageError(f"-o {output}: is {name} ({path}), which this command reads; writing it would "
                              "destroy the input: choose another -o")
        if out.startswith(real.rstrip(os.sep) + os.sep) and os.path.isdir(real):
            raise _UsageError(f"-o {output}: lies inside {name} ({path}), which this command reads (a file "
                              f"written there becomes part of it); write it outside {path}")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # either is missing or unreadable: not the same existing file
        return False
