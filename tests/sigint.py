"""SIGINT in tests that interrupt processes: the same whatever signal disposition the test run inherited."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


def default_sigint() -> None:
    """``preexec_fn`` for a child process a test interrupts with SIGINT.

    A child inherits an ignored SIGINT (the test run started under ``nohup``, as a
    background job ``&``, or from a shell that ran ``trap "" INT``), and Python then never
    turns SIGINT into KeyboardInterrupt. Restoring the default before the child's program
    starts makes Ctrl-C reach it as it would reach a program started from a terminal.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def sigint_handler(handler: object) -> Iterator[None]:
    """SIGINT handled by ``handler`` in this process for the length of the block."""
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
