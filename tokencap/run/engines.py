"""Where a run's shards are worked: in this process, in local worker processes, or on Ray.

Every engine takes the same shard function and the same shards and yields the results in
shard order, so the table a scan writes never depends on the engine or the worker count.
At most a small window of shards is in flight at once: results are written as soon as
their turn comes, and memory stays flat in the number of rollouts.

Ray is optional (``pip install "tokencap-rl[ray]"``, in a checkout ``pip install -e ".[ray]"``). On a
cluster every worker reads the run's files itself, so SOURCE must be a path all nodes can read (shared
storage).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import types
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, TypeVar

from . import ENGINES, RAY_CONNECT_TIMEOUT
from .errors import EngineUnavailable, WorkerCrashed

T = TypeVar("T")


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _ignore_sigint() -> None:
    # Only the coordinating process reacts to Ctrl-C; it stops the workers itself. A
    # worker that died of its own KeyboardInterrupt would surface as a broken pool.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def _no_main_for_workers() -> Iterator[None]:
    """While worker processes start, they are told of no ``__main__`` to re-run.

    multiprocessing re-runs the parent's ``__main__`` script in every worker it starts with
    forkserver or spawn. The shard functions live in tokencap, so workers never need it, and
    re-running it is wrong wherever ``__main__`` is not a plain script: inside a Streamlit
    server (or its AppTest) ``__main__`` is the page script, which re-runs the page in each
    worker or raises outside a session, killing the pool. A bare module stands in while a
    worker starts; the real one is put back unless someone else replaced it meanwhile.
    """
    real = sys.modules.get("__main__")
    stand_in = types.ModuleType("__main__")
    sys.modules["__main__"] = stand_in
    try:
        yield
    finally:
        if sys.modules.get("__main__") is stand_in and real is not None:
            sys.modules["__main__"] = real


def start_fork_server(module: str) -> None:
    """Start this process's fork server now, with ``module`` imported in it, so the first pool
    of `run_local` forks its workers at once (a spare child scan does this while it waits)."""
    from multiprocessing import forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload([module])
    with _no_main_for_workers():
        forkserver.ensure_running()


def run_local(fn: Callable[..., T], shards: Iterable[Any], extra: tuple, workers: int) -> Generator[T, None, None]:
    """``fn(shard, *extra)`` for every shard, in order; a pool of ``workers`` processes when > 1."""
    if workers <= 1:
        for shard in shards:
            yield fn(shard, *extra)
        return
    # forkserver: workers start from a clean interpreter, not a copy of a threaded parent
    # (the app's server, a progress bar's monitor thread).
    context = multiprocessing.get_context("forkserver")
    # Import the work once in the fork server; every worker forks from it ready to build.
    context.set_forkserver_preload([fn.__module__])
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_ignore_sigint)
    pending: deque[Future] = deque()
    window = 2 * workers
    try:
        for shard in shards:
            with _no_main_for_workers():  # a submit may start a worker
                pending.append(pool.submit(fn, shard, *extra))
            while len(pending) >= window:
                yield _result(pending.popleft())
        while pending:
            yield _result(pending.popleft())
    finally:
        if pending:  # interrupted or failed: stop now, do not finish the queued shards
            for future in pending:
                future.cancel()
            for process in list(getattr(pool, "_processes", {}).values()):
                process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)


def _result(future: Future) -> Any:
    try:
        return future.result()
    except BrokenProcessPool:
        # Rollout errors never get here (each is a row); only a process that died does.
        raise WorkerCrashed("a worker process died while building (killed, or out of memory?); nothing was "
                            "written. Run again with --workers 1 to see which rollout it was, or with fewer "
                            "workers to give each more memory") from None


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise EngineUnavailable(
            "the Ray engine needs Ray, which is not installed; install the extra with "
            "pip install 'tokencap-rl[ray]' (in a checkout: pip install -e \".[ray]\"), "
            "or use --engine local") from None
    return ray


_RAY_INIT: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}

_FLAG = "--ray-address"


def join_ray(address: str, timeout: float = RAY_CONNECT_TIMEOUT) -> None:
    """Join the Ray cluster at ``address`` (``auto``: the one started on this machine), or raise
    `EngineUnavailable` within about ``timeout`` seconds, with one line naming the address.

    Ray itself retries a wrong address for ever (printing its reconnect lines): the address is
    first probed (a refused or unanswered connection is said at once), then Ray is joined in a
    thread that is given up after ``timeout`` -- a daemon thread, which ends with the process.
    Nothing happens when this process has already joined or started a Ray.
    """
    ray = _import_ray()
    if ray.is_initialized():
        return
    _probe(address, timeout)
    outcome: list[BaseException | None] = []

    def connect() -> None:
        try:
            ray.init(address=address, **_RAY_INIT)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 -- handed to the caller's thread
            outcome.append(exc)

    import logging
    import threading

    worker_log = logging.getLogger("ray._private.worker")
    quiet = _NotMainThreadWarning()
    worker_log.addFilter(quiet)  # the SIGTERM handler stays tokencap's: nothing to warn about
    try:
        thread = threading.Thread(target=connect, name="tokencap-ray-join", daemon=True)
        thread.start()
        thread.join(timeout)
    finally:
        worker_log.removeFilter(quiet)
    if not outcome:
        raise EngineUnavailable(f"{_FLAG} {address}: no Ray cluster answered within {timeout:g} s; check the "
                                f"address (`ray status` on the head node prints it), or wait longer with "
                                f"--ray-timeout SECONDS")
    exc = outcome[0]
    if exc is None:
        return
    if address == "auto" and isinstance(exc, ConnectionError):
        raise EngineUnavailable(f"{_FLAG} auto: no running Ray cluster found on this machine (none started with "
                                f"`ray start --head`, and RAY_ADDRESS is not set); start one, give a cluster's "
                                f"address with {_FLAG} HOST:PORT, or leave {_FLAG} out for a local Ray for this "
                                "run") from None
    raise EngineUnavailable(f"{_FLAG} {address}: could not join Ray: {type(exc).__name__}: "
                            f"{' '.join(str(exc).split())}") from None


class _NotMainThreadWarning:
    """A logging filter dropping Ray's warning that a thread other than the main one cannot set its
    SIGTERM handler."""

    def filter(self, record: Any) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


def _probe(address: str, timeout: float) -> None:
    """An `EngineUnavailable` at once when nothing listens at ``address`` (as Ray resolves it: a loopback
    host names this node's address). Addresses Ray resolves otherwise (``auto``, ``ray://``) pass."""
    import socket

    try:
        from ray._private.services import canonicalize_bootstrap_address

        if address == "auto" or "://" in address:
            return
        resolved = canonicalize_bootstrap_address(address)
    except Exception:  # noqa: BLE001 -- Ray's own join reports an address it cannot read
        return
    if not resolved:
        return
    host, _, port = resolved.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return
    except TimeoutError:
        raise EngineUnavailable(f"{_FLAG} {address}: nothing answered at {resolved} within {timeout:g} s; check "
                                "the address (`ray status` on the head node prints it), or wait longer with "
                                "--ray-timeout SECONDS") from None
    except (OSError, ValueError) as exc:
        why = (getattr(exc, "strerror", None) or str(exc)) + (f" at {resolved}" if resolved != address else "")
        raise EngineUnavailable(f"{_FLAG} {address}: no Ray cluster listens there ({why}); give the address "
                                f"of a running cluster's head (`ray status` there prints it), auto for the one "
                                f"started on this machine, or leave {_FLAG} out for a local Ray for this run"
                                ) from None


def run_ray(fn: Callable[..., T], shards: Iterable[Any], extra: tuple, workers: int,
            address: str | None = None) -> Generator[T, None, None]:
    """The same shards as Ray tasks, on the cluster at ``address`` (``auto`` joins a running
    one) or on a local Ray of ``workers`` CPUs started for this run and stopped after it."""
    ray = _import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        if address:
            join_ray(address)
        else:
            try:  # a Ray started for this run listens on loopback only
                ray.init(num_cpus=workers, _node_ip_address="127.0.0.1", **_RAY_INIT)
            except Exception as exc:  # noqa: BLE001 -- any start-up failure is one clear message
                raise EngineUnavailable(f"could not start a local Ray: {type(exc).__name__}: {exc}") from None
    task = ray.remote(num_cpus=1, max_retries=1)(fn)
    extra_refs = tuple(ray.put(x) for x in extra)
    cluster_cpus = int(ray.cluster_resources().get("CPU", workers) or workers)
    window = 2 * max(1, cluster_cpus)
    pending: deque[Any] = deque()
    try:
        for shard in shards:
            pending.append(task.remote(shard, *extra_refs))
            while len(pending) >= window:
                yield ray.get(pending.popleft())
        while pending:
            yield ray.get(pending.popleft())
    finally:
        for ref in pending:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 -- best effort while stopping
                pass
        if started_here:
            ray.shutdown()


def run_shards(fn: Callable[..., T], shards: Iterable[Any], extra: tuple = (), *, engine: str = "local",
               workers: int | None = None, ray_address: str | None = None) -> Generator[T, None, None]:
    """Dispatch to an engine by name; results come back in shard order."""
    workers = workers or default_workers()
    if engine == "local":
        return run_local(fn, shards, extra, workers)
    if engine == "ray":
        _import_ray()  # fail before any work starts
        return run_ray(fn, shards, extra, workers, ray_address)
    raise ValueError(f"unknown engine {engine!r}; known engines: {', '.join(ENGINES)}")
