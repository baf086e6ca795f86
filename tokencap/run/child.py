"""A run scan in a child process, with its progress read back: how the app scans a directory.

A worker pool started inside the Streamlit server would re-run the page script in every
worker (multiprocessing re-imports ``__main__``), and a scan in the server's own thread
uses one core. So the app starts this module as its own Python process,

    python -m tokencap.run.child SOURCE OUT --workers N [--final-responses RECORDS] --parent PID

which is `tokencap scan SOURCE -o OUT --workers N [--final-responses RECORDS]` (the same `scan`, the same atomic
parquet) with its progress written to stdout as ``DONE TOTAL`` lines, and ``written`` once
the table is in place. The page reads the table at that line: the child's Python then
winds down (its pool, its fork server, its modules: about a tenth of a second) while the
page draws, and is reaped in the background. Its ``__main__`` is
this module, whose work is guarded by ``if __name__ == "__main__"``: a worker that
re-imports it runs nothing.

The child ends with the page: `ChildScan.stop` (the page was left, the server stops) sends
SIGTERM, which the scan turns into a clean stop (workers stopped, no part file left), and
SIGKILL after a grace period; then SIGTERM to its process group, for a fork server or
worker still on its way out; a part file that a killed child could not remove is removed.
If the server itself dies, the kernel sends the child SIGTERM (``PR_SET_PDEATHSIG``), so a
scan never outlives the thread that started it.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..interrupts import die_with_parent
from .errors import DiscoveryError, WorkerCrashed

STOP_GRACE = 5.0
"""Seconds a stopped child has to stop its workers and remove its part file before SIGKILL."""

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2

_MAX_ERROR_BYTES = 4096
WRITTEN = b"written"
"""The child's last stdout line: the table is renamed into place (`scan` writes atomically)."""
_LIVE: set[ChildScan] = set()
_LIVE_LOCK = threading.Lock()


class ScanFailed(RuntimeError):
    """The child scan stopped without a table (a crashed worker, a signal); the message says why."""


def child_environment() -> dict[str, str]:
    """This process's environment, with this checkout's tokencap first on ``PYTHONPATH``: a
    ``python -m tokencap...`` child imports the same code, whatever its working directory."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parent.parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env


class ChildScan:
    """One child scan: `start`, then `wait` (progress as it comes), `stop` to cancel.

    Use as a context manager: leaving the block stops a child that is still running, so
    an exception in the caller (Streamlit stopping the page's script) never leaves it behind.
    """

    def __init__(self, source: str | os.PathLike[str], out: str | os.PathLike[str], *,
                 workers: int | None = None, final_responses: str | os.PathLike[str] | None = None,
                 tokenizer: str | os.PathLike[str] | None = None) -> None:
        self.source, self.out, self.workers = str(source), str(out), workers
        self.final_responses = os.path.abspath(final_responses) if final_responses else None
        self.tokenizer = os.path.abspath(tokenizer) if tokenizer else None
        self.process: subprocess.Popen[bytes] | None = None
        self._winding_down = False

    def arguments(self) -> list[str]:
        """The child's arguments (after ``python -m tokencap.run.child``)."""
        args = [os.path.abspath(self.source), os.path.abspath(self.out), "--parent", str(os.getpid())]
        args += ["--workers", str(self.workers)] if self.workers else []
        args += ["--final-responses", self.final_responses] if self.final_responses else []
        return args + (["--tokenizer", self.tokenizer] if self.tokenizer else [])

    def command(self) -> list[str]:
        return _CHILD + self.arguments()

    def start(self) -> ChildScan:
        env = child_environment()
        spare = _take_spare(env)
        if spare is not None:
            try:  # the spare reads its arguments as one JSON line, then scans as a fresh child would
                assert spare.stdin is not None
                spare.stdin.write((json.dumps(self.arguments()) + "\n").encode())
                spare.stdin.close()
            except OSError:  # it died meanwhile: start a fresh child instead
                stop_process(spare)
            else:
                self.process = spare
                with _LIVE_LOCK:
                    _LIVE.add(self)
                return self
        # A process group of its own: the scan, its fork server and its workers, which `stop`
        # can end as a whole. Not a session of its own: Linux shares CPU time out between
        # sessions (autogroups) before processes, and a new session's workers, one group
        # against the server's and the browser's, ran the scan up to twice as slowly as
        # `tokencap scan` on a busy machine.
        self.process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, env=env, cwd=os.path.dirname(self.out) or ".",
                                        process_group=0)
        with _LIVE_LOCK:
            _LIVE.add(self)
        return self

    def wait(self, progress: Callable[[int, int], None] | None = None, tick: float = 0.25) -> None:
        """Until the child has written its table (or ended), calling ``progress(done, total)`` at least
        every ``tick`` seconds (so a caller that can be interrupted only inside a call -- a
        Streamlit page -- can be).
        Raises `DiscoveryError` (the source is not a run) or `ScanFailed` when there is no table."""
        process = self.process
        assert process is not None and process.stdout is not None and process.stderr is not None
        done = total = 0
        pending = b""
        errors = bytearray()  # read as it comes: a full stderr pipe would stall the child
        last = 0.0
        written = False
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            selector.register(process.stderr, selectors.EVENT_READ)
            while selector.get_map() and not written:
                for key, _ in selector.select(timeout=tick):
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        selector.unregister(key.fileobj)
                    elif key.fileobj is process.stderr:
                        errors += chunk[: max(0, _MAX_ERROR_BYTES - len(errors))]
                    else:
                        pending += chunk
                        *lines, pending = pending.split(b"\n")
                        for line in lines:
                            parts = line.split()
                            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                                done, total = int(parts[0]), int(parts[1])
                            elif line.strip() == WRITTEN:
                                written = True
                now = time.monotonic()
                if progress is not None and now - last >= tick and not written:
                    progress(done, total)
                    last = now
        if written:  # the table is in place: the child's exit is not waited for
            self._let_wind_down()
            if progress is not None:
                progress(done, total)
            return
        code = process.wait()
        message = " ".join(errors.decode("utf-8", "replace").split())
        self._forget()
        if code == EXIT_BAD_INPUT:
            raise DiscoveryError(message or f"{self.source}: cannot be scanned")
        if code != EXIT_OK:
            raise ScanFailed(message or f"the scan of {self.source} ended with exit code {code}")
        if progress is not None:
            progress(done, total)

    def stop(self) -> None:
        """Stop the child (and so its workers) if it still runs: SIGTERM, then SIGKILL after `STOP_GRACE`.
        A child that has written its table is left to end by itself (`_let_wind_down`)."""
        if self._winding_down:
            return
        if self.process is not None:
            running = self.process.poll() is None
            stop_process(self.process)
            if running:
                # A child killed after the grace period (SIGKILL cannot be caught) leaves its
                # part file; its lock died with it, so this removes exactly that one, never
                # the part file of another live writer to the same table.
                from ..export import remove_stale_parts

                remove_stale_parts(self.out)
        self._forget()

    def _let_wind_down(self) -> None:
        """Hand the child, which has said `WRITTEN`, to a background thread that reads what it
        still prints and reaps it (stopping it after `STOP_GRACE`)."""
        self._winding_down = True
        with _LIVE_LOCK:
            _LIVE.discard(self)
        assert self.process is not None
        threading.Thread(target=_reap, args=(self.process,), name="tokencap-child-reaper", daemon=True).start()

    def _forget(self) -> None:
        with _LIVE_LOCK:
            _LIVE.discard(self)
        if self.process is not None:
            for stream in (self.process.stdout, self.process.stderr):
                if stream is not None:
                    stream.close()

    def __enter__(self) -> ChildScan:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _reap(process: subprocess.Popen[bytes]) -> None:
    """Read a finished child's pipes to their end (so it never blocks on a full one) and wait
    for it; one still running after `STOP_GRACE` is stopped."""
    deadline = time.monotonic() + STOP_GRACE
    with selectors.DefaultSelector() as selector:
        for stream in (process.stdout, process.stderr):
            if stream is not None and not stream.closed:
                selector.register(stream, selectors.EVENT_READ)
        while selector.get_map() and (left := deadline - time.monotonic()) > 0:
            for key, _ in selector.select(timeout=left):
                if not os.read(key.fd, 1 << 16):
                    selector.unregister(key.fileobj)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(max(0.0, deadline - time.monotonic()))
    stop_process(process)  # stops it if it still runs; closes its pipes


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Stop a child scan process (or the scan beside `tokencap app`'s server) if it still runs:
    SIGTERM, which the scan turns into a clean stop, then SIGKILL after `STOP_GRACE`; then
    SIGTERM to its process group, for a fork server or worker still on its way out. Closes
    its pipes either way."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_GRACE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        try:  # what the scan started and has not ended yet (its fork server, a worker)
            os.killpg(process.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()


# --------------------------------------------------------------------------- the spare child
#
# Starting a child scan costs about half a second before any rollout is read: Python, the
# imports, then the pool's fork server and its own imports. A server that may be asked to
# open a run keeps one child ready: it has paid all of that and waits for its arguments on
# stdin. A scan takes it (and a new spare is made when `keep_spare` is next called); a spare
# whose environment differs from the one a scan would get is never used.

_CHILD = [sys.executable, "-P", "-m", "tokencap.run.child"]
"""-P: the child runs in the scan cache's directory, which ``python -m`` would otherwise put
first on sys.path, so a stray ``numpy.py`` there would be imported (tokencap itself comes
from PYTHONPATH, see `child_environment`)."""

SPARE_ENV = "TOKENCAP_SPARE_SCAN"
"""Set to ``0`` to keep no spare child (the test suite does, except where it tests one)."""

_SPARE: tuple[subprocess.Popen[bytes], dict[str, str]] | None = None
_SPARE_LOCK = threading.Lock()


def keep_spare() -> subprocess.Popen[bytes] | None:
    """Have a spare child scan ready (started now unless a live one of this environment waits).

    Returns it, or None when spares are turned off (``TOKENCAP_SPARE_SCAN=0``). It costs an
    idle Python process and its fork server; it ends with this process (``PR_SET_PDEATHSIG``
    and at exit)."""
    global _SPARE
    if os.environ.get(SPARE_ENV, "1") == "0":
        return None
    env = child_environment()
    with _SPARE_LOCK:
        current = _SPARE
        if current is not None and current[0].poll() is None and current[1] == env:
            return current[0]
        _SPARE = None
    if current is not None:
        stop_process(current[0])
    process = subprocess.Popen(_CHILD + ["--spare", "--parent", str(os.getpid())], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                               cwd=tempfile.gettempdir(), process_group=0)
    with _SPARE_LOCK:
        if _SPARE is None:
            _SPARE = (process, env)
            return process
    stop_process(process)  # another thread made one meanwhile
    return _SPARE[0] if _SPARE is not None else None


_LATER: threading.Timer | None = None


def keep_spare_soon(delay: float = 1.5) -> None:
    """`keep_spare` in ``delay`` seconds, from a background thread: a page that has just drawn
    a run asks for the next one's spare without its start competing with the browser drawing
    this one. Nothing is started when a live spare waits or one is already on its way."""
    global _LATER
    if os.environ.get(SPARE_ENV, "1") == "0":
        return
    with _SPARE_LOCK:
        if (_SPARE is not None and _SPARE[0].poll() is None) or (_LATER is not None and _LATER.is_alive()):
            return
        _LATER = threading.Timer(delay, keep_spare)
        _LATER.daemon = True
        _LATER.start()


def drop_spare() -> None:
    """Stop the spare child, if any (at exit; a test that made one)."""
    global _SPARE
    with _SPARE_LOCK:
        current, _SPARE = _SPARE, None
    if current is not None:
        stop_process(current[0])


def _take_spare(env: dict[str, str]) -> subprocess.Popen[bytes] | None:
    global _SPARE
    with _SPARE_LOCK:
        current, _SPARE = _SPARE, None
    if current is None:
        return None
    if current[0].poll() is None and current[1] == env:
        return current[0]
    stop_process(current[0])
    return None


def scan_in_child(source: str | os.PathLike[str], out: str | os.PathLike[str], *, workers: int | None = None,
                  final_responses: str | os.PathLike[str] | None = None,
                  tokenizer: str | os.PathLike[str] | None = None,
                  progress: Callable[[int, int], None] | None = None) -> None:
    """Write the scan table of ``source`` to ``out`` from a child process (see the module docstring)."""
    with ChildScan(source, out, workers=workers, final_responses=final_responses, tokenizer=tokenizer) as child:
        child.wait(progress)


@atexit.register
def _stop_live_children() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE)
    for child in live:
        child.stop()
    drop_spare()


def _spare(argv: Sequence[str]) -> int:
    """A spare child: pay for the imports and the fork server, then scan with the arguments
    read from stdin (one JSON list of strings); stdin closed without them: nothing to do."""
    parser = argparse.ArgumentParser(prog="python -m tokencap.run.child --spare")
    parser.add_argument("--parent", type=int, default=0)
    die_with_parent(parser.parse_args(argv).parent)
    from .engines import start_fork_server
    from .scanning import scan  # noqa: F401 -- imported now, before it is asked for
    from .work import scan_shard

    start_fork_server(scan_shard.__module__)
    line = sys.stdin.readline()
    if not line.strip():
        return EXIT_OK
    try:
        request = json.loads(line)
    except ValueError:
        request = None
    if not isinstance(request, list) or not all(isinstance(a, str) for a in request):
        print("the spare child scan was sent something other than its arguments", file=sys.stderr)
        return EXIT_FAILED
    return main(request)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--spare"]:
        return _spare(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m tokencap.run.child")
    parser.add_argument("source")
    parser.add_argument("out")
    parser.add_argument("--workers", type=int)
    parser.add_argument("--parent", type=int, default=0)
    parser.add_argument("--final-responses")
    parser.add_argument("--tokenizer")
    args = parser.parse_args(argv)
    die_with_parent(args.parent)

    from ..interrupts import exit_code, handling_interrupts
    from ..loading import LoadError
    from .scanning import scan

    def report(done: int, total: int) -> None:
        sys.stdout.write(f"{done} {total}\n")
        sys.stdout.flush()

    try:
        with handling_interrupts():
            scan(args.source, args.out, workers=args.workers, final_responses=args.final_responses,
                 tokenizer=args.tokenizer, progress=report)
    except KeyboardInterrupt as exc:
        return exit_code(exc)
    except (DiscoveryError, LoadError) as exc:
        print(" ".join(str(exc).split()), file=sys.stderr)
        return EXIT_BAD_INPUT
    except WorkerCrashed as exc:
        print(" ".join(str(exc).split()), file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # noqa: BLE001 -- one line for the page, never a traceback
        print(f"{type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_FAILED
    sys.stdout.write(WRITTEN.decode() + "\n")
    sys.stdout.flush()
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
