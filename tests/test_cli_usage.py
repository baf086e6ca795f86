"""The command line as a new user meets it: help, bad -o paths, output permissions, `tokencap app`."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from helpers import linear_chain, snapshot_dict
from sigint import default_sigint

from tokencap.cli import _parser, main
from tokencap.export import write_atomically

REPO = Path(__file__).resolve().parent.parent
SAMPLE_RUN = REPO / "sample_data" / "run"
sys.path.insert(0, str(REPO / "benchmarks"))
from app_server import free_port, wait_until_serving  # noqa: E402

WRITERS = ["build", "scan", "export"]


def small_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "a.json").write_text(json.dumps(snapshot_dict(linear_chain(2, rollout_id="a").records)))
    return run


def writer_args(command: str, source: Path, out: str) -> list[str]:
    return [command, str(source), "-o", out] + (["--workers", "1"] if command != "build" else [])


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# =========================================================================== help (issue 13, point 14)


def test_no_command_prints_the_full_help(capsys) -> None:
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("usage: tokencap")
    for command in ("build", "inspect", "check", "scan", "export", "app"):
        assert f"\n    {command} " in err, command
    assert "required" not in err


def help_of(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    assert stop.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def test_port_has_a_help_text(capsys) -> None:
    text = help_of(capsys, "app")
    assert "--port PORT the port the app's server listens on, on localhost only (default: 8501)" in text


@pytest.mark.parametrize(("command", "says"), [("build", "JSON object for one rollout, JSONL"),
                                               ("scan", "(parquet"), ("export", "(JSONL")])
def test_output_help_says_what_each_command_writes(command: str, says: str, capsys) -> None:
    text = help_of(capsys, command)
    output_help = text.split("-o OUT, --output OUT ", 1)[1]
    assert says in output_help.split(" --", 1)[0]
    assert "(scan)" not in output_help and "(export)" not in output_help


@pytest.mark.parametrize("port", ["0", "70000", "http"])
def test_a_port_that_cannot_be_is_refused_before_anything_starts(port: str, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["app", "--port", port])
    assert stop.value.code == 2
    assert "port" in capsys.readouterr().err


# =========================================================================== README (points 15, 16)


# The reference moved to docs/ (the README keeps the tour); the README and every docs page are read as one.
README = "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])


def _section(title: str) -> str:
    return README.split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


def test_user_facing_text_never_cites_the_spec(capsys) -> None:
    assert "SPEC" not in README
    for command in ("build", "inspect", "check", "scan", "export", "app"):
        assert "SPEC" not in help_of(capsys, command)


def test_readme_layout_lists_each_path_once_and_each_exists() -> None:
    block = _section("Layout").split("```", 2)[1]
    paths = re.findall(r"(?:tokencap/[\w/.]+|app\.py|tokencap/app/)", block)
    assert len(paths) == len(set(paths)), sorted(p for p in paths if paths.count(p) > 1)
    assert all((REPO / p).exists() for p in paths), [p for p in paths if not (REPO / p).exists()]
    for module in (REPO / "tokencap").glob("*.py"):
        if module.name not in ("__init__.py", "__main__.py"):
            assert f"tokencap/{module.name}" in paths, module.name


def _usage_lines() -> dict[str, str]:
    """Each command's usage as the README's command-line blocks write it (continuation lines joined)."""
    text = ""
    for section in ("Command line", "A whole run: scan, triage, export"):
        for block in _section(section).split("```bash\n")[1:]:
            text += block.split("```", 1)[0]
    usage: dict[str, str] = {}
    command = None
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["tokencap"] and len(words) > 1:
            command = words[1]
            usage[command] = usage.get(command, "") + " " + line.split("#", 1)[0]
        elif command and line.startswith(" "):
            usage[command] += " " + line
    return usage


@pytest.mark.parametrize("command", ["build", "inspect", "check", "scan", "export", "app"])
def test_readme_usage_of_each_command_names_exactly_its_options(command: str) -> None:
    written = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-o)\b", _usage_lines()[command]))
    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    options = [a.option_strings for a in commands.choices[command]._actions if a.option_strings and a.dest != "help"]
    assert [o for o in options if not written & set(o)] == []  # every option is in the README
    assert written <= {name for o in options for name in o}  # and the README names no other


# =========================================================================== -o checked first (point 9)


@pytest.mark.parametrize("command", WRITERS)
@pytest.mark.parametrize("case", ["missing directory", "a directory", "under a file"])
def test_an_unusable_output_is_named_in_plain_words_before_any_work(command: str, case: str, tmp_path: Path,
                                                                    capsys) -> None:
    run = small_run(tmp_path)
    (tmp_path / "file.txt").write_text("x")
    out, expected = {
        "missing directory": (tmp_path / "no" / "such" / "x.out",
                              f"directory {tmp_path / 'no' / 'such'} does not exist"),
        "a directory": (tmp_path, "it is a directory; give a file name inside it"),
        "under a file": (tmp_path / "file.txt" / "x.out", f"{tmp_path / 'file.txt'} is not a directory"),
    }[case]
    before = listing(tmp_path)
    code = main(writer_args(command, run, str(out)))
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"tokencap: error: cannot write {out}: {expected}\n"  # one line, no progress: nothing ran
    assert listing(tmp_path) == before


@pytest.mark.parametrize("command", WRITERS)
@pytest.mark.parametrize("out", ["", "sub/"])
def test_an_output_that_names_no_file_is_refused(command: str, out: str, tmp_path: Path, monkeypatch,
                                                 capsys) -> None:
    (tmp_path / "sub").mkdir()
    run = small_run(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = listing(tmp_path)
    assert main(writer_args(command, run, out)) == 2
    assert capsys.readouterr().err == f"tokencap: error: cannot write {out!r}: that names no file; give a file name\n"
    assert listing(tmp_path) == before


@pytest.mark.parametrize("args, expected", [
    (["build", ""], "SOURCE is empty"),
    (["inspect", ""], "SOURCE is empty"),
    (["scan", "", "-o", "out.parquet"], "SOURCE is empty"),
    (["export", "", "-o", "out.jsonl"], "SOURCE is empty"),
    (["diff", "", "B"], "run A is empty"),
    (["diff", "A", "", "-o", "OUT"], "run B is empty"),
])
def test_an_empty_source_is_refused_not_read_as_the_current_directory(args: list[str], expected: str,
                                                                      tmp_path: Path, monkeypatch, capsys) -> None:
    # An unset shell variable ("$RUN") is an empty argument: it used to scan the working directory.
    run = small_run(tmp_path)
    monkeypatch.chdir(run)
    # OUT is beside the run: -o inside run A (the working directory here) is refused for that (issue 37.1).
    args = [str(run) if a in ("A", "B") else str(tmp_path / "out.parquet") if a == "OUT" else a for a in args]
    assert main(args) == 2
    assert capsys.readouterr().err == (f"tokencap: error: {expected}: an empty path names no file or directory "
                                       "(give . for the current directory)\n")
    assert sorted(os.listdir(run)) == ["a.json"]


@pytest.mark.parametrize("command", WRITERS)
def test_a_device_as_output_is_refused_not_replaced(command: str, tmp_path: Path, capsys) -> None:
    # The rename would swap the device node for a regular file (as root: /dev/null itself).
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert main(writer_args(command, small_run(tmp_path), str(fifo))) == 2
    assert "is not a regular file" in capsys.readouterr().err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize("command", WRITERS)
def test_an_output_that_is_a_symbolic_link_is_written_through(command: str, tmp_path: Path) -> None:
    run = small_run(tmp_path)
    plain = tmp_path / "plain.out"
    assert main(writer_args(command, run, str(plain))) == 0
    (tmp_path / "results").mkdir()
    target = tmp_path / "results" / "kept.out"
    target.write_text("old")
    link = tmp_path / "latest.out"
    link.symlink_to(Path("results") / "kept.out")  # relative, as `ln -s` makes them
    assert main(writer_args(command, run, str(link))) == 0
    assert os.path.islink(link) and os.readlink(link) == str(Path("results") / "kept.out")
    assert target.read_bytes() == plain.read_bytes()
    assert listing(tmp_path / "results") == ["kept.out"]  # no part file left beside the target
    # A link to a file not there yet is written through too, as `open` would.
    target.unlink()
    assert main(writer_args(command, run, str(link))) == 0
    assert os.path.islink(link) and target.read_bytes() == plain.read_bytes()


@pytest.mark.parametrize("command", WRITERS)
def test_a_link_whose_target_cannot_be_written_is_named_before_any_work(command: str, tmp_path: Path,
                                                                          capsys) -> None:
    run = small_run(tmp_path)
    dangling = tmp_path / "dangling.out"
    dangling.symlink_to(tmp_path / "gone" / "x.out")
    assert main(writer_args(command, run, str(dangling))) == 2
    assert capsys.readouterr().err == (f"tokencap: error: cannot write {dangling}: it is a symbolic link to "
                                       f"{tmp_path / 'gone' / 'x.out'}, whose directory does not exist\n")
    to_directory = tmp_path / "to_dir.out"
    to_directory.symlink_to(run)
    assert main(writer_args(command, run, str(to_directory))) == 2
    assert "it is a directory" in capsys.readouterr().err
    assert os.path.islink(dangling) and os.path.islink(to_directory)


NOT_WRITABLE = textwrap.dedent("""
    import argparse, os, sys
    import tokencap.cli as cli
    import tokencap.run.scanning  # everything a failing run imports, read while still root

    if os.geteuid() == 0:
        os.setgid(65534)
        os.setuid(65534)  # root may write anywhere: check as "nobody"
    sys.exit(cli.main(sys.argv[1:]))
""")


@pytest.mark.parametrize("command", WRITERS)
def test_an_output_directory_that_is_not_writable_is_named(command: str) -> None:
    # Under /tmp (not pytest's 0700 tmp_path) so that "nobody" can read the run.
    with tempfile.TemporaryDirectory() as name:
        root = Path(name)
        root.chmod(0o755)
        run = small_run(root)
        run.chmod(0o755)
        locked = root / "locked"
        locked.mkdir(mode=0o555)
        locked.chmod(0o555)
        script = root / "child.py"
        script.write_text(NOT_WRITABLE)
        out = locked / "x.out"
        proc = subprocess.run([sys.executable, str(script), *writer_args(command, run, str(out))],
                              capture_output=True, text=True, timeout=120, cwd=root,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == f"tokencap: error: cannot write {out}: directory {locked} is not writable\n"
        assert list(locked.iterdir()) == []


def test_a_part_file_that_cannot_be_created_is_blamed_on_the_output(tmp_path: Path) -> None:
    # What a caller that skipped the check (the app's disk export) or a directory removed
    # after it sees: an OSError naming the output, not the part file alone.
    out = tmp_path / "gone" / "x.json"
    with pytest.raises(OSError, match=rf"^cannot write {re.escape(str(out))}: No such file or directory"):
        write_atomically(out, lambda handle: handle.write(b"{}"))


def test_a_relative_output_in_the_current_directory_is_fine(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["build", str(small_run(tmp_path)), "-o", "out.json"]) == 0
    assert json.loads((tmp_path / "out.json").read_text())["rollout_id"] == "a"


# =========================================================================== output permissions (point 12)


@pytest.fixture
def umask():
    def set_umask(value: int) -> None:
        os.umask(value)

    previous = os.umask(0o022)
    yield set_umask
    os.umask(previous)


@pytest.mark.parametrize("command", WRITERS)
@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_outputs_are_created_as_open_would_create_them(command: str, mask: int, umask, tmp_path: Path,
                                                       capsys) -> None:
    umask(mask)
    out = tmp_path / "out"
    assert main(writer_args(command, small_run(tmp_path), str(out))) == 0, capsys.readouterr().err
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~mask


def test_an_output_replacing_a_file_keeps_that_files_permissions(umask, tmp_path: Path, capsys) -> None:
    umask(0o077)
    out = tmp_path / "out.json"
    out.write_text("old")
    out.chmod(0o640)
    assert main(["build", str(small_run(tmp_path)), "-o", str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and json.loads(out.read_text())["rollout_id"] == "a"


# =========================================================================== tokencap app (point 7)


def test_app_on_a_missing_path_fails_on_the_command_line(no_server, tmp_path: Path, capsys) -> None:
    missing = tmp_path / "no" / "such"
    assert main(["app", str(missing)]) == 2
    assert capsys.readouterr().err == f"tokencap: error: {missing}: no such file or directory\n"


def test_app_on_an_empty_path_fails_on_the_command_line(no_server, capsys) -> None:
    # `tokencap app "$RUN"` with RUN unset opened the bundled sample run as if no path was given.
    assert main(["app", ""]) == 2
    assert capsys.readouterr().err == ("tokencap: error: SOURCE is empty: an empty path names no file or directory "
                                       "(give . for the current directory)\n")


def test_app_on_a_pipe_fails_on_the_command_line(no_server, tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert main(["app", str(fifo)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tokencap: error: {fifo}: not a regular file or directory") and err.count("\n") == 1


def _children(pid: int) -> list[int]:
    task = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in task.read_text().split()] if task.exists() else []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.skipif(not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists(),
                    reason="needs /proc/PID/task/PID/children to find the server process")
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_stopping_tokencap_app_stops_its_server(signum: int, code: int, tmp_path: Path) -> None:
    port = free_port()
    log = (tmp_path / "app.log").open("wb")
    env = {**os.environ, "PYTHONPATH": str(REPO), "STREAMLIT_SERVER_HEADLESS": "true",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    app = subprocess.Popen([sys.executable, "-m", "tokencap", "app", str(SAMPLE_RUN), "--port", str(port)],
                           stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path, preexec_fn=default_sigint)
    servers: list[int] = []
    try:
        wait_until_serving(app, f"http://localhost:{port}", log)
        servers = _children(app.pid)
        assert len(servers) == 1, servers
        app.send_signal(signum)
        assert app.wait(timeout=60) == code
        # `tokencap app` waited for its server: gone (reaped), its port closed.
        assert not _alive(servers[0]), (tmp_path / "app.log").read_text()
        assert not _port_open(port)
    finally:
        for pid in servers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if app.poll() is None:
            app.kill()
            app.wait()
        log.close()


def test_tokencap_app_runs_its_page_once_before_any_browser_opens_it(tmp_path: Path) -> None:
    """The server is warmed up: the first visit finds the pages' modules imported and the run's scan
    table read, because `tokencap app` has the script run once (no browser here ever connects)."""
    port = free_port()
    trace = tmp_path / "trace.tsv"
    env = {**os.environ, "PYTHONPATH": str(REPO), "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
           "TOKENCAP_APP_TRACE": str(trace), "TOKENCAP_CACHE_DIR": str(tmp_path / "cache")}
    with (tmp_path / "app.log").open("wb") as log:
        app = subprocess.Popen([sys.executable, "-m", "tokencap", "app", str(SAMPLE_RUN), "--port", str(port)],
                               stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
        try:
            wait_until_serving(app, f"http://localhost:{port}", log)
            deadline = time.monotonic() + 120
            while not any(name == "script" for name, _ in _spans(trace)) and time.monotonic() < deadline:
                assert app.poll() is None, (tmp_path / "app.log").read_text()
                time.sleep(0.1)  # polling a condition (the trace's "script" line), with a deadline
            names = [name for name, _ in _spans(trace)]
            assert "script" in names and "run body" in names, ((tmp_path / "app.log").read_text(), names)
        finally:
            app.terminate()
            app.wait(timeout=60)


def _spans(path: Path) -> list[tuple[str, float]]:
    from tokencap.views import trace

    return trace.read(path)


def _gone(pid: int) -> bool:
    """The process has exited (a zombie that nobody reaped counts: it holds no port)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_killing_tokencap_app_with_sigkill_stops_its_server(tmp_path: Path) -> None:
    port = free_port()
    log = (tmp_path / "app.log").open("wb")
    env = {**os.environ, "PYTHONPATH": str(REPO), "STREAMLIT_SERVER_HEADLESS": "true",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    app = subprocess.Popen([sys.executable, "-m", "tokencap", "app", str(SAMPLE_RUN), "--port", str(port)],
                           stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    servers: list[int] = []
    try:
        wait_until_serving(app, f"http://localhost:{port}", log)
        servers = _children(app.pid)
        assert len(servers) == 1, servers
        app.kill()  # SIGKILL: nothing can be forwarded
        assert app.wait(timeout=60) == -signal.SIGKILL
        # Waits (no speed is asserted): the server stops on the kernel's SIGTERM, or never.
        for _ in range(600):
            if _gone(servers[0]) and not _port_open(port):
                break
            time.sleep(0.1)
        assert _gone(servers[0]), (tmp_path / "app.log").read_text()
        assert not _port_open(port)
    finally:
        for pid in servers:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
        log.close()


def test_tokencap_app_gives_the_server_the_app_s_settings_from_any_working_directory(monkeypatch, tmp_path) -> None:
    # Streamlit reads .streamlit/config.toml only from its working directory; `tokencap app`
    # runs in the user's, where the upload limit, the watcher and the theme were defaults.
    import tomllib

    from tokencap.cli import server

    calls: list[list[str]] = []
    monkeypatch.setattr(server, "_serve", lambda cmd, **_: calls.append(cmd) or 0)
    monkeypatch.chdir(tmp_path)
    port = str(free_port())  # `tokencap app` refuses a port in use
    assert main(["app", "--port", port]) == 0
    (cmd,) = calls
    flags = cmd[cmd.index("run") + 2: cmd.index("--")]
    given = dict(zip(flags[::2], flags[1::2], strict=True))
    config = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    for section, options in config.items():
        for name, value in options.items():
            assert given[f"--{section}.{name}"] == (str(value).lower() if isinstance(value, bool) else str(value))
    assert given["--server.maxUploadSize"] == "256" and given["--server.fileWatcherType"] == "none"
    assert given["--server.address"] == "localhost" and given["--server.port"] == port
