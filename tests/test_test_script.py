"""`scripts/test.sh --load N`: N busy processes run beside the suite and are always stopped (issue 19, 18).

The script is run with `--no-install` (the environment is the one running these tests) on a
probe test that records the busy processes it sees; they must be gone once the script ends:
the suite passed, failed, was stopped by Ctrl-C, or the script was killed outright.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sigint import default_sigint

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "test.sh"

pytestmark = pytest.mark.skipif(not (sys.platform.startswith("linux") and hasattr(os, "pidfd_open")),
                                reason="reads /proc and waits on pidfds")

PROBE = textwrap.dedent("""
    import os
    import signal
    from pathlib import Path


    def test_probe():
        pids = os.environ["TOKENCAP_TEST_LOAD_PIDS"]
        for pid in pids.split():
            assert "getppid" in Path(f"/proc/{pid}/cmdline").read_text()  # a busy loop, running
        Path(os.environ["PROBE_OUT"]).write_text(pids)
        if os.environ.get("PROBE_HOLD"):
            signal.pause()  # until the test stops the script
        assert not os.environ.get("PROBE_FAIL")
""")


def _start(tmp_path: Path, load: int = 1, **env: str) -> tuple[subprocess.Popen, Path]:
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE)
    out = tmp_path / "pids"
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "PROBE_OUT": str(out), **env}
    # -n 0 after the script's own -n 2: the probe needs no pytest workers, only the busy processes.
    proc = subprocess.Popen(["bash", str(SCRIPT), "--no-install", "--load", str(load), "-n", "0", "-p",
                             "no:cacheprovider", "-q", str(probe)], env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=default_sigint)  # Ctrl-C must reach it, even from a suite run under nohup
    return proc, out


def _wait_gone(pid: int, deadline: float = 120.0) -> bool:
    """Wait until process ``pid`` has exited (its pidfd turns readable), at most ``deadline`` seconds."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], deadline)[0])
    finally:
        os.close(fd)


def _probe_pids(proc: subprocess.Popen, out: Path, deadline: float = 300.0) -> list[int]:
    """The busy processes the probe saw, once it has written them (the script still running)."""
    end = time.monotonic() + deadline
    while not (out.exists() and out.read_text()):
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < end, "the probe never ran"
        try:
            proc.wait(0.1)  # returns at once if the script ends; otherwise look again
        except subprocess.TimeoutExpired:
            pass
    return [int(p) for p in out.read_text().split()]


@pytest.mark.parametrize(("load", "fail", "code"), [(2, "", 0), (1, "1", 1)])
def test_load_runs_busy_processes_beside_the_suite_and_stops_them(load: int, fail: str, code: int,
                                                                   tmp_path: Path) -> None:
    proc, out = _start(tmp_path, load, PROBE_FAIL=fail)
    log, _ = proc.communicate(timeout=300)
    assert proc.returncode == code, log  # the suite's own exit status
    pids = [int(p) for p in out.read_text().split()]
    assert len(pids) == load and f"--load {load}: busy processes {' '.join(map(str, pids))} beside" in log
    assert all(_wait_gone(pid, 0) for pid in pids), "a busy process outlived scripts/test.sh"


def test_ctrl_c_stops_the_suite_and_its_busy_processes(tmp_path: Path) -> None:
    proc, out = _start(tmp_path, PROBE_HOLD="1")
    try:
        pids = _probe_pids(proc, out)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group (busy loops ignore it)
        # Read while waiting: the suite's interrupted-run report must never block on a full pipe.
        log, _ = proc.communicate(timeout=120)
        assert proc.returncode == 130, log
        assert all(_wait_gone(pid, 0) for pid in pids), "a busy process outlived scripts/test.sh"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def test_busy_processes_stop_by_themselves_when_the_script_is_killed(tmp_path: Path) -> None:
    proc, out = _start(tmp_path, PROBE_HOLD="1")
    try:
        pids = _probe_pids(proc, out)
        os.kill(proc.pid, signal.SIGKILL)  # no trap runs
        assert proc.wait(timeout=120) == -signal.SIGKILL
        assert all(_wait_gone(pid) for pid in pids), "a busy process outlived a killed scripts/test.sh"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the probe's pytest, still holding
        proc.communicate()


@pytest.mark.parametrize("value", ["two", "", "-1"])
def test_load_takes_a_whole_number(value: str) -> None:
    done = subprocess.run(["bash", str(SCRIPT), "--no-install", "--load", value], capture_output=True, text=True)
    assert done.returncode == 2 and "--load takes a whole number" in done.stderr
