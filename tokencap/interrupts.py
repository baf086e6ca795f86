"""Clean interrupts for runs that write files: SIGTERM like SIGINT, and renames that are never cut.

A command-line run that writes output wraps its work in `handling_interrupts()`:

    with handling_interrupts() as run:
        try:
            ... work, then write_atomically(out, write) ...
        except KeyboardInterrupt as exc:      # SIGINT, or SIGTERM as `Terminated`
            code = 0 if run.committed else exit_code(exc)

- SIGTERM raises `Terminated` (a `KeyboardInterrupt`), so every ``finally`` and
  ``except BaseException`` clean-up that runs for Ctrl-C also runs for a polite kill --
  `tokencap.export.write_atomically` removes its part file either way.
- `critical()` holds SIGINT and SIGTERM back for the length of a block (a rename plus the
  note that it happened) and raises the first one held back when the block ends. So an
  output is either renamed into place and recorded in ``run.committed``, or not renamed
  and its part file removed -- never renamed and then reported as failed.
- ``run.committed`` lists the outputs renamed into place during the run: once a run's
  last output is there, it has succeeded, whatever arrives afterwards.

Signal handlers can only be set from the main thread; elsewhere (a Streamlit script
thread, say) these helpers change no handler and `critical()` only records commits.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM

_HELD = (signal.SIGINT, signal.SIGTERM)


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: stop like Ctrl-C (clean-up runs), then exit 143."""


def exit_code(exc: BaseException) -> int:
    """The conventional exit status for an interrupt: 143 for SIGTERM, 130 for SIGINT."""
    return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED


@dataclass
class Run:
    """What a run has finished so far: the outputs renamed into place, in order."""

    committed: list[str] = field(default_factory=list)


_ACTIVE: list[Run] = []


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def handling_interrupts(run: Run | None = None) -> Iterator[Run]:
    """For the length of the block, SIGTERM raises `Terminated`; yields the run's record.

    Pass your own ``run`` to read ``run.committed`` in a handler around the block (an
    interrupt can arrive while the block is being entered or left).
    """
    run = run if run is not None else Run()
    previous = None
    if _in_main_thread():
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    _ACTIVE.append(run)
    try:
        yield run
    finally:
        _ACTIVE.remove(run)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


@contextmanager
def critical() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back until the block ends, then deliver the first one held.

    For short, must-finish steps only (a rename): the interrupt is delayed, never lost.
    """
    if not _in_main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: object) -> None:
        held.append(signum)

    previous = {signum: signal.signal(signum, hold) for signum in _HELD}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        if held:
            signal.raise_signal(held[0])  # runs the restored handler: raises here


def current_run() -> Run | None:
    """The record of the innermost `handling_interrupts` block running now, if any."""
    return _ACTIVE[-1] if _ACTIVE else None


def note_committed(path: str | os.PathLike[str]) -> None:
    """Record that ``path`` is in place (call inside `critical()`, right after the rename)."""
    for run in _ACTIVE:
        run.committed.append(os.fspath(path))


_PR_SET_PDEATHSIG = 1


def parent_death_signal(parent: int) -> Callable[[], None]:
    """A function that has the kernel send this process SIGTERM when the thread that started it
    ends (Linux's ``PR_SET_PDEATHSIG``), even by SIGKILL, which the parent cannot catch to stop
    its child; it exits at once when ``parent`` is already gone (it died before the signal
    was armed). Elsewhere a no-op: the parent's own signal forwarding is then all there is.

    For a ``Popen``'s ``preexec_fn`` (between fork and exec, so the program run needs no part
    in it): the C function is looked up here, in the parent, so the child only calls it.
    """
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        prctl = None  # not Linux

    def arm() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if parent and os.getppid() != parent:
            raise SystemExit(1)

    return arm


def die_with_parent(parent: int) -> None:
    """`parent_death_signal`, armed now: for a child process that runs Python of ours (its first step)."""
    parent_death_signal(parent)()


__all__ = ["EXIT_INTERRUPTED", "EXIT_TERMINATED", "Run", "Terminated", "critical", "current_run", "die_with_parent",
           "exit_code", "handling_interrupts", "note_committed", "parent_death_signal"]
