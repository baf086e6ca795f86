"""The app on a free localhost port and Debian's Chromium, for the browser tests and benchmarks.

`streamlit_app(*args)` runs `streamlit run app.py [-- ARGS]` bound to 127.0.0.1, waits for
its health endpoint and yields the URL; the server is stopped when the block ends.
`launch_chromium(playwright)` starts /usr/bin/chromium headless with the flags this machine
needs (no sandbox as root, no background networking: the network is closed). Playwright
never downloads a browser of its own.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
START_TIMEOUT = 120.0


class AppDidNotStart(RuntimeError):
    """The Streamlit server exited or did not answer its health check in time (the log says why)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def streamlit_app(*args: str, log: BinaryIO, env: dict[str, str] | None = None) -> Iterator[str]:
    """`streamlit run app.py [-- ARGS]` on a free localhost port, its output into ``log``; yields its URL."""
    port = free_port()
    full_env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false", "PYTHONPATH": str(REPO),
                **(env or {})}
    command = [sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"), "--server.port", str(port),
               "--server.address", "127.0.0.1", "--server.headless", "true"]
    if args:
        command += ["--", *args]
    proc = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=full_env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(proc, url, log)
        yield url
    finally:
        stop_server(proc)


def stop_server(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM (Streamlit stops cleanly), SIGKILL after ``grace`` seconds."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_until_serving(proc: subprocess.Popen, url: str, log: BinaryIO) -> None:
    """Return once the app at ``url`` answers its health check; `AppDidNotStart` if ``proc`` exits first
    or `START_TIMEOUT` passes."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as resp:
                if resp.read().strip() == b"ok":
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            log.flush()
            raise AppDidNotStart(f"streamlit did not start on {url}")
        try:
            proc.wait(0.2)  # look again in 0.2 s, or at once when the server exits
        except subprocess.TimeoutExpired:
            pass


def launch_chromium(playwright: Any) -> Any:
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
