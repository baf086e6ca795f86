"""The app's server, from start to end: Streamlit's flags from the app's config, the port checked free,
the server run as a child that SIGINT and SIGTERM reach, its first page warmed up, and a big run
scanned beside it (`tokencap app` assembles the command; see `tokencap.cli.app`)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

from ..interrupts import parent_death_signal
from .options import _UsageError

WARM_UP_WAIT = 60.0


def warm_up_app(url: str, wait: float = WARM_UP_WAIT) -> bool:
    """Run the app's script once as soon as the server at ``url`` answers: its first page then opens warm.

    A fresh server's first visit would import the pages' modules (pandas, the views) and read
    the scan table; this does it while the user is still opening the link. It asks Streamlit's
    script health check (``server.scriptHealthCheckEnabled``), which runs the script in a
    session of its own with no browser: the default page, the same work the first visit does.
    True when that run ended without error; False (and nothing else) when the server never
    answered, has no such endpoint, or the script failed -- a warm-up only saves time, and the
    page itself reports any error to whoever opens it.
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


def _start_prescan(source: str, records: str | None, tokenizer: str | None = None) -> subprocess.Popen | None:
    """A big run directory is scanned beside the server (tokencap.services.prescan), so the scan
    overlaps the server's start and the browser's first load; the page then reuses its table."""
    import subprocess

    from ..run.child import child_environment
    from ..services.scan_cache import IN_PROCESS_BYTES, fingerprint

    if not Path(source).is_dir() or fingerprint(source).size < IN_PROCESS_BYTES:
        return None  # a small run is scanned by the page, in the server's process
    # The records as the page names them (resolved), so both look for the same cached table.
    cmd = [sys.executable, "-P", "-m", "tokencap.services.prescan", str(Path(source).resolve()), "--parent",
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
            from ..run.child import stop_process

            stop_process(helper)
    if received:
        return 128 + received[0]
    return 128 - code if code < 0 else code
