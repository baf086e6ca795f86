"""The app's directory scan: a child process on every core, its table cached per fingerprint,
stopped with the page (tokencap.run.child, tokencap.services.scan_cache.scan_directory)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import tokencap.run.child as child_module
from tokencap import identity
from tokencap.run import DiscoveryError, read_current_scan, scan, scan_table
from tokencap.run.child import ChildScan, scan_in_child
from tokencap.services import run_sources as rs
from tokencap.services import scan_cache
from tokencap.services.claims import claim_path, release_claim, take_claim
from tokencap.services.scan_cache import cached_scan_path, fingerprint, prescan, scan_directory

REPO = Path(__file__).resolve().parent.parent
SAMPLE_RUN = rs.sample_run_path(REPO)


@pytest.fixture
def big(monkeypatch, tmp_path):
    """Every run counts as big (scanned by a child), with the cache under tmp_path."""
    monkeypatch.setattr(scan_cache, "IN_PROCESS_BYTES", 0)
    cache = tmp_path / "cache"
    monkeypatch.setenv(scan_cache.CACHE_ENV, str(cache))
    return cache


def small_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(REPO / "sample_data" / "capture_store", run / "store")
    shutil.copy(REPO / "sample_data" / "length_stop.json", run / "length_stop.json")
    return run


def descendants(pid: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, stack = set(), [pid]
    while stack:
        parent = stack.pop()
        for child, of in parents.items():
            if of == parent and child not in found:
                found.add(child)
                stack.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def counted_children(monkeypatch) -> list[str]:
    """Child scans the page starts (recorded, then run as usual)."""
    children: list[str] = []
    real = child_module.scan_in_child

    def counting(source, out, **kwargs):
        children.append(str(out))
        return real(source, out, **kwargs)

    monkeypatch.setattr(child_module, "scan_in_child", counting)
    return children


def test_a_child_scan_writes_the_table_the_command_line_writes(tmp_path):
    run = small_run(tmp_path)
    seen: list[tuple[int, int]] = []
    scan_in_child(run, tmp_path / "child.parquet", workers=2, progress=lambda d, t: seen.append((d, t)))
    scan(run, tmp_path / "cli.parquet", workers=1)
    assert read_current_scan(tmp_path / "child.parquet").equals(read_current_scan(tmp_path / "cli.parquet"))
    rows = read_current_scan(tmp_path / "cli.parquet").num_rows
    assert seen[-1] == (rows, rows)


def test_a_source_that_is_not_a_run_is_a_discovery_error_with_its_message(tmp_path):
    with pytest.raises(DiscoveryError, match="no such file or directory"):
        scan_in_child(tmp_path / "nowhere", tmp_path / "out.parquet")
    assert not (tmp_path / "out.parquet").exists()


def test_scan_directory_reuses_the_table_of_the_same_fingerprint_only(monkeypatch, tmp_path, big):
    run = small_run(tmp_path)
    children = counted_children(monkeypatch)
    want = scan_table(run, workers=1)
    fp = fingerprint(run)
    assert scan_directory(run, fp).equals(want)
    assert scan_directory(run, fingerprint(run)).equals(want)
    assert len(children) == 1 and Path(children[0]).parent == big  # the second open read the cached table

    shutil.copy(REPO / "sample_data" / "content_filter_stop.json", run / "content_filter_stop.json")
    changed = scan_directory(run, fingerprint(run))
    assert len(children) == 2 and changed.num_rows == want.num_rows + 1

    # A table other tokencap code wrote is never reused, whatever its file is called.
    monkeypatch.setattr(identity, "code_identity", lambda: "0.0.0-other+0000000000000000")
    assert read_current_scan(children[1]) is None


def test_a_table_of_a_run_that_changed_while_it_was_scanned_is_not_kept(monkeypatch, tmp_path, big):
    run = small_run(tmp_path)
    fp = fingerprint(run)
    real = child_module.scan_in_child

    def and_change(source, out, **kwargs):
        real(source, out, **kwargs)
        (run / "late.json").write_bytes((REPO / "sample_data" / "content_filter_stop.json").read_bytes())

    monkeypatch.setattr(child_module, "scan_in_child", and_change)
    scan_directory(run, fp)
    assert not cached_scan_path(fp).exists()


def test_leaving_the_page_stops_the_child_and_its_workers(tmp_path):
    # Streamlit stops a page's script by raising inside its next call -- here, a progress update.
    class PageLeft(BaseException):
        pass

    run = tmp_path / "run"
    for copy in range(3):  # ~900 rollouts: the scan is still running when the page is left
        shutil.copytree(SAMPLE_RUN, run / f"part{copy}")
    out = tmp_path / "cache" / "scan.parquet"
    out.parent.mkdir()
    spawned: set[int] = set()
    child = ChildScan(run, out, workers=2)

    def progress(done: int, total: int) -> None:
        assert child.process is not None
        spawned.update({child.process.pid} | descendants(child.process.pid))
        workers.update(workers_of(child.process.pid))
        if workers and 0 < total and done < total:  # workers up, scan under way
            raise PageLeft

    workers: set[int] = set()
    with pytest.raises(PageLeft):
        with child:
            child.wait(progress)
    assert workers  # the scan, its fork server and at least one worker were running
    assert child.process.returncode == 143  # stopped by SIGTERM, cleanly
    for _ in range(100):  # a bound, not a speed: the fork server may take a moment to see its end
        if not [pid for pid in spawned if alive(pid)]:
            break
        time.sleep(0.1)
    assert not [pid for pid in spawned if alive(pid)]
    assert list(out.parent.iterdir()) == []  # no table, no part file


def test_the_child_scan_is_its_own_process_group_in_the_server_s_session(tmp_path):
    # Its own group: `stop` ends the scan, its fork server and its workers as one. The server's
    # session: Linux divides CPU time between sessions (autogroups) first, so a session of its
    # own would give the whole scan one share against the server's and the browser's.
    child = ChildScan(small_run(tmp_path), tmp_path / "scan.parquet", workers=2)
    with child:
        assert child.process is not None
        pid = child.process.pid
        assert os.getpgid(pid) == pid != os.getpgid(0)
        assert os.getsid(pid) == os.getsid(0)
        child.wait()
    assert (tmp_path / "scan.parquet").exists()


def test_no_page_script_runs_in_the_scan_s_workers(tmp_path):
    # A Streamlit page runs top to bottom with no __main__ guard. A worker pool started from it
    # would import it again in every worker (multiprocessing re-imports __main__); the child
    # scan never does, so the page's body runs once.
    run = small_run(tmp_path)
    marks = tmp_path / "marks.txt"
    page = tmp_path / "page.py"
    page.write_text(textwrap.dedent(f"""
        import os
        with open({str(marks)!r}, "a") as handle:
            handle.write(f"{{os.getpid()}}\\n")
        from tokencap.services import scan_cache as rs
        rs.IN_PROCESS_BYTES = 0
        table = rs.scan_directory({str(run)!r}, rs.fingerprint({str(run)!r}), workers=2,
                                  cache_dir={str(tmp_path / "cache")!r})
        print(table.num_rows)
    """))
    done = subprocess.run([sys.executable, str(page)], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert int(done.stdout) == scan_table(run, workers=1).num_rows
    assert len(marks.read_text().splitlines()) == 1


def test_a_server_killed_outright_takes_its_child_scan_along(tmp_path):
    # SIGKILL cannot be caught, so nothing in the server can stop the child. The kernel does
    # (PR_SET_PDEATHSIG: SIGTERM), and so does its next progress line, into a pipe nobody
    # reads any more; either way the child stops its own workers and leaves no file.
    server = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from tokencap.run.child import ChildScan
        child = ChildScan({str(SAMPLE_RUN)!r}, {str(tmp_path / "scan.parquet")!r}, workers=2).start()
        print(child.process.pid, flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    pid = int(server.stdout.readline())
    spawned = {pid}
    for _ in range(100):  # until its workers are up (a bound, not a speed)
        spawned |= descendants(pid)
        if len(spawned) >= 3:
            break
        time.sleep(0.1)
    server.kill()
    server.wait()
    for _ in range(200):
        if not [p for p in spawned if alive(p)]:
            break
        time.sleep(0.1)
    assert not [p for p in spawned if alive(p)]
    assert list(tmp_path.iterdir()) == []  # no table, no part file


def test_a_run_scanned_with_its_rollout_records_is_cached_apart_and_has_their_columns(tmp_path, big):
    records = rs.sample_records(REPO, SAMPLE_RUN)
    assert records is not None
    want = scan_table(SAMPLE_RUN, workers=1, final_responses=records)
    assert scan_directory(SAMPLE_RUN, fingerprint(SAMPLE_RUN), final_responses=records).equals(want)
    with_records = cached_scan_path(fingerprint(SAMPLE_RUN), final_responses=records)
    assert with_records.exists() and not cached_scan_path(fingerprint(SAMPLE_RUN)).exists()
    assert read_current_scan(with_records) is None  # written with records: not the table of a scan without
    assert read_current_scan(with_records, records).equals(want)


# --------------------------------------------------------------------------- the scan `tokencap app RUN` starts


def test_prescan_writes_the_table_the_page_then_opens_without_a_scan(monkeypatch, tmp_path, big):
    run = small_run(tmp_path)
    children = counted_children(monkeypatch)
    target = prescan(run)
    assert target == cached_scan_path(fingerprint(run)) and not claim_path(target).exists()
    assert scan_directory(run, fingerprint(run)).equals(scan_table(run, workers=1))
    assert children == []


def test_prescan_leaves_a_small_run_to_the_page(monkeypatch, tmp_path, big):
    monkeypatch.setattr(scan_cache, "IN_PROCESS_BYTES", 1 << 40)
    assert prescan(small_run(tmp_path)) is None
    assert not big.exists()


def test_the_page_waits_for_a_scan_already_running_and_shows_its_progress(monkeypatch, tmp_path, big):
    run = small_run(tmp_path)
    children = counted_children(monkeypatch)
    target = cached_scan_path(fingerprint(run))
    target.parent.mkdir(parents=True)
    claim = take_claim(target)
    assert claim is not None
    assert take_claim(target) is None  # one scan at a time
    followed = threading.Event()

    def other_scan() -> None:  # what `tokencap app RUN` started beside the server
        claim.write(b"1 3\n")
        claim.flush()
        followed.wait(60)  # a bound, not a speed: until the page has shown that progress
        scan(run, target, workers=1)
        release_claim(target, claim)

    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        seen.append((done, total))
        if (done, total) == (1, 3):
            followed.set()

    thread = threading.Thread(target=other_scan)
    thread.start()
    table = scan_directory(run, fingerprint(run), progress=progress)
    thread.join()
    assert table.equals(scan_table(run, workers=1))
    assert children == []  # the page started no scan of its own
    assert (1, 3) in seen and seen[-1] == (table.num_rows, table.num_rows)
    assert not claim_path(target).exists()


def test_a_claim_left_by_a_scan_that_died_does_not_hold_the_page(monkeypatch, tmp_path, big):
    run = small_run(tmp_path)
    children = counted_children(monkeypatch)
    target = cached_scan_path(fingerprint(run))
    target.parent.mkdir(parents=True)
    claim_path(target).write_bytes(b"5 10\n")  # nobody holds its lock: its process is gone
    assert scan_directory(run, fingerprint(run)).equals(scan_table(run, workers=1))
    assert len(children) == 1
    claim = take_claim(target)  # and the next scan may take it
    assert claim is not None
    release_claim(target, claim)
    assert not claim_path(target).exists()


def test_a_page_that_gave_up_on_a_failed_scan_scans_the_run_itself(monkeypatch, tmp_path, big):
    run = small_run(tmp_path)
    children = counted_children(monkeypatch)
    target = cached_scan_path(fingerprint(run))
    target.parent.mkdir(parents=True)
    claim = take_claim(target)
    timer = threading.Timer(0.5, release_claim, (target, claim))  # ends without a table
    timer.start()
    assert scan_directory(run, fingerprint(run)).equals(scan_table(run, workers=1))
    timer.join()
    assert len(children) == 1


def test_tokencap_app_scans_a_big_run_beside_its_server_and_stops_that_scan_with_it(monkeypatch, tmp_path):
    from tokencap.cli import server

    big = tmp_path / "cache"
    monkeypatch.setenv(scan_cache.CACHE_ENV, str(big))
    run = small_run(tmp_path)
    with open(run / "padding.txt", "wb") as handle:  # a big run, in every process (and not a rollout file)
        handle.truncate(scan_cache.IN_PROCESS_BYTES)
    started: list[subprocess.Popen] = []

    def prescan() -> subprocess.Popen | None:
        started.append(server._start_prescan(str(run), None))
        started[-1].wait(120)  # a bound, not a speed: the server below ends once the scan has
        return started[-1]

    assert server._serve([sys.executable, "-c", "pass"], beside=prescan) == 0
    assert started[0].returncode == 0
    children = counted_children(monkeypatch)
    assert scan_directory(run, fingerprint(run)).equals(scan_table(run, workers=1))
    assert children == []

    # The server ends first: the scan beside it is stopped, cleanly (SIGTERM: no part file, no claim).
    shutil.rmtree(big)
    (run / "more").mkdir()
    for copy in range(3):
        shutil.copytree(SAMPLE_RUN, run / "more" / f"part{copy}")

    def slow_prescan() -> subprocess.Popen | None:
        started.append(server._start_prescan(str(run), None))
        for _ in range(600):  # until it holds its claim (a bound, not a speed)
            if big.exists() and list(big.glob("*.scanning")):
                break
            time.sleep(0.1)
        return started[-1]

    assert server._serve([sys.executable, "-c", "pass"], beside=slow_prescan) == 0
    assert started[1].returncode == 143
    assert list(big.iterdir()) == []


def test_tokencap_app_leaves_a_small_run_to_the_page(tmp_path):
    from tokencap.cli import server

    assert server._start_prescan(str(small_run(tmp_path)), None) is None


def test_a_module_file_beside_the_table_is_never_imported_by_the_child(tmp_path):
    # The child runs in the table's (the scan cache's) directory; `python -m` puts its working
    # directory first on sys.path, so a stray numpy.py there would have run in the child.
    cache = tmp_path / "cache"
    cache.mkdir()
    marker = tmp_path / "imported"
    (cache / "numpy.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise ImportError('shadow')\n")
    run = small_run(tmp_path)
    scan_in_child(run, cache / "scan.parquet", workers=1)
    assert not marker.exists()
    scan(run, tmp_path / "cli.parquet", workers=1)
    assert read_current_scan(cache / "scan.parquet").equals(read_current_scan(tmp_path / "cli.parquet"))


# --------------------------------------------------------------------------- the spare child


@pytest.fixture
def spares(monkeypatch):
    """Spare child scans turned on for this test, and none left behind after it."""
    monkeypatch.setenv(child_module.SPARE_ENV, "1")
    yield
    timer = child_module._LATER
    if timer is not None:
        timer.cancel()
        timer.join()
    child_module.drop_spare()


def until(condition, what: str) -> None:
    for _ in range(300):  # a bound, not a speed
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def test_a_scan_takes_the_spare_child_and_writes_what_a_fresh_child_writes(tmp_path, spares):
    run = small_run(tmp_path)
    spare = child_module.keep_spare()
    assert spare is not None and child_module.keep_spare() is spare  # one spare, not one per call
    until(lambda: len(descendants(spare.pid)) >= 1, "the spare's fork server is up")  # warmed, then asked
    with ChildScan(run, tmp_path / "spare.parquet", workers=2) as child:
        assert child.process is spare
        child.wait()
    assert child_module._SPARE is None  # taken: the next page run asks for a new one
    scan_in_child(run, tmp_path / "fresh.parquet", workers=2)
    assert read_current_scan(tmp_path / "spare.parquet").equals(read_current_scan(tmp_path / "fresh.parquet"))


@pytest.mark.parametrize("how", ["died", "other environment"])
def test_a_spare_that_died_or_was_made_for_another_environment_is_never_used(tmp_path, spares, monkeypatch, how):
    run = small_run(tmp_path)
    spare = child_module.keep_spare()
    if how == "died":
        spare.kill()
        spare.wait()
    else:
        monkeypatch.setenv("TOKENCAP_TEST_OTHER", "1")  # the scan's child would see another environment
    with ChildScan(run, tmp_path / "scan.parquet", workers=1) as child:
        assert child.process is not spare
        child.wait()
    until(lambda: spare.poll() is not None, "the unused spare is stopped")
    assert read_current_scan(tmp_path / "scan.parquet").num_rows == scan_table(run, workers=1).num_rows


def workers_of(pid: int) -> set[int]:
    """The scan's workers under child ``pid``: its grandchildren. An idle spare already has two
    children of its own (multiprocessing's resource tracker and fork server), which are not workers."""
    return {p for p in descendants(pid) if parent_of(p) not in (pid, None)}


def parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def test_a_spare_stopped_while_it_scans_takes_its_workers_along(tmp_path, spares):
    class PageLeft(BaseException):
        pass

    run = tmp_path / "run"
    for copy in range(3):  # ~900 rollouts: the scan is still running when the page is left
        shutil.copytree(SAMPLE_RUN, run / f"part{copy}")
    out = tmp_path / "cache" / "scan.parquet"
    out.parent.mkdir()
    spare = child_module.keep_spare()
    until(lambda: len(descendants(spare.pid)) >= 2, "the spare's fork server is up")
    spawned = {spare.pid} | descendants(spare.pid)
    workers: set[int] = set()
    child = ChildScan(run, out, workers=2)

    def progress(done: int, total: int) -> None:
        workers.update(workers_of(spare.pid))
        if workers and 0 < total and done < total:  # the spare's workers up, its scan under way
            raise PageLeft

    with pytest.raises(PageLeft):
        with child:
            assert child.process is spare
            child.wait(progress)
    assert workers
    assert spare.returncode == 143  # stopped by SIGTERM, cleanly
    spawned |= workers
    until(lambda: not [p for p in spawned if alive(p)], "every process of the scan has ended")
    assert list(out.parent.iterdir()) == []  # no table, no part file


def test_a_child_killed_after_the_grace_period_leaves_no_part_file(tmp_path, monkeypatch):
    # A child that does not stop on SIGTERM in time is killed; SIGKILL cannot be caught, so
    # its part file stays behind unless the stopping side removes it.
    out = tmp_path / "scan.parquet"
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import signal, sys, time
        from tokencap.export import write_atomically
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # deaf to the polite stop
        def write(handle):
            print("writing", flush=True)
            time.sleep(600)
        write_atomically({str(out)!r}, write)
    """)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)},
        process_group=0)
    assert writer.stdout.readline().strip() == b"writing"
    assert len(list(tmp_path.iterdir())) == 1  # its part file
    monkeypatch.setattr(child_module, "STOP_GRACE", 0.2)
    child = ChildScan(SAMPLE_RUN, out)
    child.process = writer
    child.stop()
    assert writer.returncode == -signal.SIGKILL
    assert list(tmp_path.iterdir()) == []


def test_a_stopped_child_leaves_another_live_writers_part_file_alone(tmp_path):
    out = tmp_path / "scan.parquet"
    other = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from tokencap.export import write_atomically
        def write(handle):
            print("writing", flush=True)
            time.sleep(600)
        write_atomically({str(out)!r}, write)
    """)], stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert other.stdout.readline().strip() == b"writing"
        live = sorted(tmp_path.iterdir())
        child = ChildScan(SAMPLE_RUN, out)
        child.process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], process_group=0)
        child.stop()
        assert sorted(tmp_path.iterdir()) == live  # the live writer still owns its part file
    finally:
        other.kill()
        other.wait()


def test_a_spare_ends_with_the_server_that_made_it(tmp_path):
    server = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import time
        from tokencap.run.child import keep_spare
        print(keep_spare().pid, flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), child_module.SPARE_ENV: "1"})
    pid = int(server.stdout.readline())
    spawned = {pid}
    until(lambda: len(spawned.__ior__(descendants(pid))) >= 2, "the spare's fork server is up")
    server.kill()
    server.wait()
    until(lambda: not [p for p in spawned if alive(p)], "the spare and its fork server have ended")


def test_a_spare_never_asked_ends_cleanly_when_its_stdin_closes(spares):
    spare = child_module.keep_spare()
    taken = child_module._take_spare(child_module.child_environment())
    assert taken is spare
    taken.stdin.close()
    assert taken.wait(60) == child_module.EXIT_OK
    assert taken.stderr.read() == b""


def test_a_spare_sent_something_else_fails_with_one_line(spares):
    child_module.keep_spare()
    spare = child_module._take_spare(child_module.child_environment())
    spare.stdin.write(b'{"not": "arguments"}\n')
    spare.stdin.close()
    assert spare.wait(60) == child_module.EXIT_FAILED
    assert spare.stderr.read().decode().strip() == "the spare child scan was sent something other than its arguments"


def test_keep_spare_soon_makes_one_spare_later_and_none_when_turned_off(monkeypatch, spares):
    child_module.keep_spare_soon(delay=0.05)
    child_module.keep_spare_soon(delay=0.05)  # on its way already: no second one
    until(lambda: child_module._SPARE is not None, "the spare is made")
    first = child_module._SPARE[0]
    child_module.keep_spare_soon(delay=0.05)
    time.sleep(0.3)
    assert child_module._SPARE[0] is first
    monkeypatch.setenv(child_module.SPARE_ENV, "0")
    assert child_module.keep_spare() is None


def test_the_run_page_asks_for_a_spare_once_it_has_drawn_a_run(monkeypatch):
    from helpers_app import start_app

    asked: list[float] = []
    monkeypatch.setattr(child_module, "keep_spare_soon", lambda delay=1.5: asked.append(delay))
    at = start_app(monkeypatch, timeout=120)
    assert len(at.dataframe) >= 1 and asked  # the table is drawn, then the spare asked for


LINGERING_CHILD = """
import os, sys, time
out, release = sys.argv[1], sys.argv[2]
print("1 2", flush=True)
open(out, "wb").close()
print("2 2", flush=True)
print("written", flush=True)
print("a message while it winds down", file=sys.stderr, flush=True)
end = time.monotonic() + 20  # a bound: a page that waits for the exit fails the test instead of hanging
while not os.path.exists(release) and time.monotonic() < end:  # its Python winding down, as the test wants
    time.sleep(0.02)
"""


def test_the_page_reads_the_table_once_the_child_says_written_and_the_child_is_reaped_later(monkeypatch, tmp_path):
    release = tmp_path / "release"
    script = tmp_path / "lingering.py"
    script.write_text(LINGERING_CHILD)
    out = tmp_path / "scan.parquet"
    monkeypatch.setattr(ChildScan, "command", lambda self: [sys.executable, str(script), str(out), str(release)])
    seen: list[tuple[int, int]] = []
    try:
        with ChildScan(tmp_path, out) as child:
            child.wait(progress=lambda done, total: seen.append((done, total)))
            assert child.process.poll() is None  # returned while the child still runs: its exit is not waited for
            assert out.exists() and seen[-1] == (2, 2)
        assert child.process.poll() is None  # leaving the block does not stop a child that wrote its table
        assert child not in child_module._LIVE
    finally:
        release.touch()  # a failed assertion leaves no child behind either
    until(lambda: child.process.returncode == 0, "the child is reaped in the background")
    until(lambda: child.process.stdout.closed and child.process.stderr.closed, "its pipes are closed")


def test_a_child_that_ends_without_saying_written_is_waited_for_and_judged_by_its_exit_code(monkeypatch, tmp_path):
    script = tmp_path / "silent.py"
    script.write_text("import sys; print('1 1', flush=True); print('disk full', file=sys.stderr); sys.exit(1)\n")
    monkeypatch.setattr(ChildScan, "command", lambda self: [sys.executable, str(script)])
    with ChildScan(tmp_path, tmp_path / "scan.parquet") as child, pytest.raises(child_module.ScanFailed, match="disk full"):
        child.wait()
    assert child.process.returncode == 1
