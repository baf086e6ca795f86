"""No test depends on a fixed port being free (issue 37, item 3): the tests that run `tokencap app` pass
while ports 8501 (the app's default) and 8765 are held by someone else."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

APP_COMMAND_TESTS = [
    "tests/test_app_run_sources_and_comparison.py::test_tokencap_app_tells_the_server_where_it_was_started",
    "tests/test_app_run.py::test_tokencap_app_passes_the_records_to_the_page",
    "tests/test_run_diagnosis.py::test_scan_with_a_bad_tokenizer_is_a_one_line_exit_2",
    "tests/test_cli_new_user.py::test_app_with_bad_rollout_records_fails_as_build_does_before_any_server",
    "tests/test_cli_new_user.py::test_app_with_good_rollout_records_starts_the_server",
    "tests/test_cli_new_user.py::test_app_on_a_busy_port_says_so_in_one_line_and_suggests_another",
    "tests/test_cli_new_user.py::test_app_on_a_free_port_starts_the_server",
    "tests/test_cli_usage.py::test_app_on_a_missing_path_fails_on_the_command_line",
    "tests/test_cli_usage.py::test_tokencap_app_gives_the_server_the_app_s_settings_from_any_working_directory",
]
"""Every test that calls `tokencap app` in-process (the server stubbed)."""

HELD = (8501, 8765)


def _hold(stack: ExitStack, port: int) -> None:
    """Listen on ``port`` on localhost; already taken (by someone else) is as good."""
    sock = stack.enter_context(socket.socket())
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        return
    sock.listen()


def _busy(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def test_the_app_command_tests_pass_while_the_usual_ports_are_taken(tmp_path: Path) -> None:
    with ExitStack() as stack:
        for port in HELD:
            _hold(stack, port)
        assert all(_busy(port) for port in HELD)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                               *APP_COMMAND_TESTS], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout and "deselected" not in proc.stdout
