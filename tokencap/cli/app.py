"""`tokencap app`: its options checked (source, final responses, tokenizer, port) before the app's
server starts, then the server run (`tokencap.cli.server`)."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from . import server
from .options import (
    _PROGRESS,
    RECORDS_FILE,
    _add_tokenizer,
    _checked_tokenizer,
    _existing,
    _input_file,
    _port,
    _read_final_responses,
    _UsageError,
)

if TYPE_CHECKING:
    import subprocess


def add_parser(sub: argparse._SubParsersAction) -> None:
    app = sub.add_parser("app", help="open the inspection app (Streamlit) on a run or a source")
    app.add_argument("source", nargs="?",
                     help="a run directory, a scan table (.parquet) or a rollouts JSONL of several records (output "
                          "items with token ids) opens the Run page; a rollout file opens the Rollout page "
                          "(default: the bundled sample run)")
    app.add_argument("--port", type=_port, default=8501,
                     help="the port the app's server listens on, on localhost only (default: 8501)")
    app.add_argument("--final-responses", metavar="FILE",
                     help="the run's rollout records (JSONL with rollout_id, response, reward, task and rollout "
                          "index): the Run page scans the run with them and shows rewards and task groups")
    _add_tokenizer(app)


def _app_source(source: str) -> str:
    """The app's command-line source as an absolute path, checked here so a bad one never starts a server."""
    path = _existing(source)
    if not (path.is_dir() or path.is_file()):
        raise _UsageError(f"{source}: not a regular file or directory (a pipe or device is never read)")
    if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
        raise _UsageError(f"{source}: permission denied (the app could not read it)")
    return os.path.abspath(source)


APP_EXTRA = 'install the app extra: pip install "tokencap-rl[app]" (in a checkout: pip install -e ".[app]")'


def _has_streamlit() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("streamlit") is not None
    except (ImportError, ValueError):
        return False


def run(args: argparse.Namespace) -> int:
    from ..bundled import streamlit_flags

    if not _has_streamlit():
        raise _UsageError(f"the app needs Streamlit, which is not installed; {APP_EXTRA}")
    app = Path(__file__).resolve().parents[1] / "app" / "main.py"  # the app's entry, in a checkout or a wheel
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), *streamlit_flags(),
           "--server.address", "localhost", "--server.port", str(args.port), "--"]
    source = _app_source(args.source) if args.source is not None else None
    if source:
        cmd.append(source)
    if args.final_responses:
        _input_file(args.final_responses, "--final-responses", RECORDS_FILE)
        # Read here, as `tokencap build` reads them: a bad file is the same one line and exit 2, before
        # any server starts (not an error shown only in the browser).
        _read_final_responses(args.final_responses)
        _PROGRESS.done()
        _refuse_records_beside_rollouts(source, args.final_responses)
        cmd += ["--final-responses", os.path.abspath(args.final_responses)]
    if args.tokenizer:
        # the tokenizer.json any of the three forms names: what the pages and the pre-scan read
        args.tokenizer = os.path.abspath(_checked_tokenizer(args.tokenizer) or "")
        cmd += ["--tokenizer", args.tokenizer]
    server._check_port_free(args.port)  # last: every input is checked first, whichever port is busy
    from ..services.arguments import START_DIR_ENV

    os.environ[START_DIR_ENV] = os.getcwd()  # a path typed in the app starts here, wherever the server runs
    cmd[cmd.index("--"):cmd.index("--")] = ["--server.scriptHealthCheckEnabled", "true"]  # for warm_up_app

    def beside() -> subprocess.Popen | None:
        threading.Thread(target=server.warm_up_app, args=(f"http://localhost:{args.port}",), daemon=True).start()
        return server._start_prescan(source, args.final_responses, args.tokenizer) if source else None

    return server._serve(cmd, beside=beside)


def _refuse_records_beside_rollouts(source: str | None, final_responses: str) -> None:
    """A rollouts file whose output items carry token ids is its own records
    (docs/contract.md#token-rollouts-format): with
    ``--final-responses`` it is the same one-line refusal as `tokencap scan` gives, before any server."""
    from ..loading import final_responses_beside_rollouts
    from ..run.discover import rollouts_file
    from ..run.errors import DiscoveryError

    if source is None or not Path(source).is_file():
        return  # a directory's rollouts files: its scan on the Run page says so
    st = os.stat(source)
    try:
        units = rollouts_file(source, os.path.basename(source), st.st_size, st.st_mtime, alone=True)
    except DiscoveryError:
        return  # rollout records without token ids: not a rollouts source (the page says what it is)
    if units and units[0].kind == "rollouts":
        raise _UsageError(final_responses_beside_rollouts(final_responses))
