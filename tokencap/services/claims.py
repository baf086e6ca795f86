"""Claim files: one process scans a run into the scan cache while any other waits for it.

`tokencap app RUN` starts `prescan` beside the server (tokencap.services.prescan), so the
scan runs while the server starts and the browser loads the page. The page must then wait
for that scan, not start a second one: the scanning process holds an exclusive lock on
``scan-KEY.scanning`` beside the table it writes, and appends its progress (``DONE TOTAL``
lines) to it. The lock dies with its process, so a claim left by a scan that was killed
is seen as free, and the page scans the run itself.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

Progress = Callable[[int, int], None]

FOLLOW_TICK = 0.25
"""Seconds between the page's looks at another process's scan (and its progress updates)."""


def claim_path(target: str | os.PathLike[str]) -> Path:
    """The claim file of a scan writing ``target``."""
    return Path(target).with_suffix(".scanning")


def _held(claim: Path) -> bool:
    try:
        with open(claim, "rb") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False
    except OSError:
        return False


def take_claim(target: str | os.PathLike[str]) -> BinaryIO | None:
    """The claim on scanning into ``target`` (an open, exclusively locked claim file), or None
    when another live process holds it. The file appears already locked (made under another
    name, locked, then linked into place), so a reader never takes a fresh claim for a free one."""
    claim = claim_path(target)
    fresh = claim.with_name(f".{claim.name}.{os.getpid()}.{threading.get_ident()}")
    handle = open(fresh, "wb")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            os.link(fresh, claim)
        except FileExistsError:
            if _held(claim):
                handle.close()
                return None
            os.replace(fresh, claim)  # a claim left by a scan that died: free
        return handle
    except BaseException:
        handle.close()
        raise
    finally:
        fresh.unlink(missing_ok=True)


def release_claim(target: str | os.PathLike[str], handle: BinaryIO) -> None:
    """Give up the claim `take_claim` returned: the file goes (when it is still ours), then the lock."""
    claim = claim_path(target)
    try:
        if os.stat(claim).st_ino == os.fstat(handle.fileno()).st_ino:
            claim.unlink()
    except OSError:
        pass
    handle.close()


def follow_scan(target: str | os.PathLike[str], progress: Progress | None = None, tick: float = FOLLOW_TICK) -> bool:
    """Wait while another process holds the claim on scanning into ``target``, calling
    ``progress(done, total)`` with what it reports at least every ``tick`` seconds (so a page can
    be left meanwhile: the update raises). True when there was such a scan (it has ended; its
    table may or may not be there), False when nobody was scanning."""
    try:
        handle = open(claim_path(target), "rb")
    except OSError:
        return False
    done = total = 0
    pending = b""
    followed = False
    with handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return followed
            except BlockingIOError:
                followed = True
            pending += handle.read()
            *lines, pending = pending.split(b"\n")
            for line in lines:
                parts = line.split()
                if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                    done, total = int(parts[0]), int(parts[1])
            if progress is not None:
                progress(done, total)
            time.sleep(tick)

