"""A wrong `--ray-address` is one line and exit 2 within `--ray-timeout`, never a hang (issue 37, item 2)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tokencap.cli import main

ray = pytest.importorskip("ray")

REPO = Path(__file__).resolve().parent.parent
RUN = REPO / "sample_data" / "run"
DEADLINE = 120  # seconds a wrong address may take here at most (Ray alone never gave up)


def _scan(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("RAY_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "tokencap", "scan", str(RUN), "-o", str(tmp_path / "r.parquet"),
                           "--engine", "ray", *extra], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=DEADLINE)


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def test_an_address_where_nothing_listens_is_one_line_at_once(tmp_path: Path) -> None:
    from ray._private.services import canonicalize_bootstrap_address

    address = f"127.0.0.1:{_unused_port()}"
    resolved = canonicalize_bootstrap_address(address)  # Ray reaches a loopback host at this node's address
    proc = _scan(tmp_path, "--ray-address", address, "--ray-timeout", "20")
    where = f" at {resolved}" if resolved != address else ""
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1:] == [
        f"tokencap: error: --ray-address {address}: no Ray cluster listens there (Connection refused{where}); "
        "give the address of a running cluster's head (`ray status` there prints it), auto for the one started on "
        "this machine, or leave --ray-address out for a local Ray for this run"]
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "r.parquet").exists()


def test_an_address_that_never_answers_as_ray_gives_up_after_ray_timeout(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts connections (the kernel does), never speaks Ray
        silent.bind(("", 0))
        silent.listen()
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        proc = _scan(tmp_path, "--ray-address", address, "--ray-timeout", "2")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        f"tokencap: error: --ray-address {address}: no Ray cluster answered within 2 s; check the address "
        "(`ray status` on the head node prints it), or wait longer with --ray-timeout SECONDS")
    assert "SIGTERM handler" not in proc.stderr
    assert not (tmp_path / "r.parquet").exists()


def test_auto_without_a_cluster_names_tokencap_s_flag(monkeypatch, tmp_path: Path, capsys) -> None:
    def no_cluster(address=None, **kwargs):
        raise ConnectionError("Could not find any running Ray instance. Please specify the one to connect to by "
                              "setting `--address` flag or `RAY_ADDRESS` environment variable.")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", no_cluster)
    out = tmp_path / "r.parquet"
    assert main(["scan", str(RUN), "-o", str(out), "--engine", "ray", "--ray-address", "auto"]) == 2
    assert capsys.readouterr().err == (
        "tokencap: error: --ray-address auto: no running Ray cluster found on this machine (none started with "
        "`ray start --head`, and RAY_ADDRESS is not set); start one, give a cluster's address with --ray-address "
        "HOST:PORT, or leave --ray-address out for a local Ray for this run\n")
    assert not out.exists()


@pytest.mark.parametrize("command", ["scan", "export", "diff"])
def test_ray_timeout_needs_a_ray_address(command: str, tmp_path: Path, capsys) -> None:
    args = [str(RUN), str(RUN)] if command == "diff" else [str(RUN), "-o", str(tmp_path / "out")]
    assert main([command, *args, "--engine", "ray", "--ray-timeout", "5"]) == 2
    assert capsys.readouterr().err == ("tokencap: error: --ray-timeout needs --ray-address (it is how long to "
                                       "wait for that cluster)\n")


def test_ray_timeout_is_a_number_of_seconds_above_0(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["scan", str(RUN), "-o", "x.parquet", "--engine", "ray", "--ray-address", "auto", "--ray-timeout", "0"])
    assert stop.value.code == 2
    assert "--ray-timeout: 0 is not a number of seconds above 0" in capsys.readouterr().err
