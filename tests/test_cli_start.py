"""What starting and ending the command line costs: the imports a command pays for, and
the process ending without the interpreter's teardown once a one-process command is done."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import linear_chain, snapshot_dict

import tokencap
import tokencap.cli as cli

ROOT = Path(__file__).resolve().parent.parent

# Modules `tokencap build` never runs: the diagnosis, the process pool, the scan table, the
# app server's subprocess, `secrets`.
NOT_FOR_A_BUILD = ("tokencap.diagnosis.explain", "tokencap.diagnosis.evidence", "tokencap.run.engines",
                   "tokencap.run.rows", "concurrent.futures.process", "pyarrow", "pandas", "subprocess", "secrets")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_starting_the_command_line_imports_only_what_a_build_needs() -> None:
    loaded = _modules_after("import tokencap.cli\ntokencap.cli._parser()")  # options named, nothing run
    assert "tokencap.builder" in loaded and "tokencap.loading.wire" in loaded
    assert loaded.isdisjoint(NOT_FOR_A_BUILD), sorted(loaded & set(NOT_FOR_A_BUILD))


def test_the_package_names_load_on_first_use() -> None:
    loaded = _modules_after("import tokencap")
    assert "tokencap.builder" not in loaded and "tokencap.diagnosis.explain" not in loaded
    loaded = _modules_after("from tokencap import build_rollout, diagnose\nfrom tokencap.run import REASON_COLUMNS, default_workers")
    assert {"tokencap.rollout", "tokencap.diagnosis.explain", "tokencap.run.engines", "tokencap.run.rows"} <= loaded


def test_every_public_name_resolves_to_its_home() -> None:
    import tokencap.diagnosis as diagnosis
    import tokencap.run as run

    for package in (tokencap, diagnosis, run):
        for name in package.__all__:
            value = getattr(package, name)
            assert value is not None, f"{package.__name__}.{name}"
            assert not (isinstance(value, type(os)) and name not in ("export",)), f"{package.__name__}.{name} is a module"
    assert tokencap.build_rollout.__module__ == "tokencap.rollout"
    assert callable(run.scan) and callable(run.discover)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        tokencap.nothing_here  # noqa: B018


class _Exited(Exception):
    def __init__(self, how: str, code: int) -> None:
        super().__init__(how, code)
        self.how, self.code = how, code


def _console(argv: list[str], monkeypatch) -> _Exited:
    monkeypatch.setattr(sys, "argv", ["tokencap", *argv])

    def hard(code: int) -> None:
        raise _Exited("without teardown", code)

    def soft(code: int = 0) -> None:
        raise _Exited("with teardown", code)

    monkeypatch.setattr(cli.os, "_exit", hard)
    monkeypatch.setattr(cli.sys, "exit", soft)
    with pytest.raises(_Exited) as caught:
        cli.console()
    return caught.value


def test_a_build_ends_without_the_interpreters_teardown_once_its_output_is_flushed(tmp_path, monkeypatch,
                                                                                    capsys) -> None:
    source = tmp_path / "r.json"
    source.write_text(json.dumps(snapshot_dict(linear_chain(3).records)))
    ended = _console(["build", str(source), "-o", str(tmp_path / "out.json")], monkeypatch)
    assert (ended.how, ended.code) == ("without teardown", 0)
    assert json.loads((tmp_path / "out.json").read_text())["metrics"]["n_calls"] == 3
    ended = _console(["build", str(tmp_path / "missing.json")], monkeypatch)
    assert (ended.how, ended.code) == ("without teardown", 2)
    assert "missing.json" in capsys.readouterr().err


def test_commands_with_pools_or_servers_end_the_usual_way(tmp_path, monkeypatch) -> None:
    source = tmp_path / "r.json"
    source.write_text(json.dumps(snapshot_dict(linear_chain(3).records)))
    ended = _console(["scan", str(source), "-o", str(tmp_path / "scan.parquet")], monkeypatch)
    assert (ended.how, ended.code) == ("with teardown", 0)
    ended = _console([], monkeypatch)  # no command: the help
    assert (ended.how, ended.code) == ("with teardown", 2)


def test_python_dash_m_tokencap_writes_everything_before_it_ends(tmp_path) -> None:
    source = tmp_path / "r.json"
    source.write_text(json.dumps(snapshot_dict(linear_chain(3).records)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "tokencap", "build", str(source)], capture_output=True, cwd=tmp_path,
                         env=env, check=True)
    assert json.loads(out.stdout)["metrics"]["n_calls"] == 3  # standard output flushed before the exit
    out = subprocess.run([sys.executable, "-m", "tokencap", "build", str(tmp_path / "nope.json")],
                         capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 2 and "nope.json" in out.stderr
