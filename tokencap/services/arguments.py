"""What the command line and the URL give the app: a run path, rollout records, a tokenizer.

`app_arguments` reads ``streamlit run app.py -- RUN [--final-responses RECORDS] [--tokenizer PATH]``.
It is a small parser of its own, not the CLI's argparse definitions: the CLI sits above this layer,
`tokencap app` has already checked these arguments before it starts the server, and the page must
never exit on an argument it does not know (argparse would), only ignore it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

PATH_PARAM = "run_path"
"""The run opened by path in the sidebar, in the URL (a reload or a shared link opens it again)."""


def path_params(typed: str, showing_upload: bool) -> dict[str, str]:
    """The URL's ``run_path``: the path typed in the sidebar, whether or not it opened (a reload then
    shows the same run or the same error, never the run before it); none while an upload is shown,
    which no URL can name (a link must not open another run under the upload's filters)."""
    return {PATH_PARAM: typed} if typed and not showing_upload else {}


RECORDS_OPTION = "--final-responses"
TOKENIZER_OPTION = "--tokenizer"


@dataclass(frozen=True)
class AppArguments:
    """What the command line gives the app: ``[PATH] [--final-responses RECORDS] [--tokenizer PATH]``."""

    path: str | None = None
    records: str | None = None
    tokenizer: str | None = None


def app_arguments(argv: Iterable[str]) -> AppArguments:
    """``streamlit run app.py -- RUN --final-responses FILE`` (``tokencap app RUN --final-responses FILE``)."""
    path = records = tokenizer = None
    args = [a for a in argv if a.strip()]
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in (RECORDS_OPTION, TOKENIZER_OPTION) and i + 1 < len(args):
            if arg == RECORDS_OPTION:
                records = args[i + 1]
            else:
                tokenizer = args[i + 1]
            i += 2
            continue
        if arg.startswith(RECORDS_OPTION + "="):
            records = arg.split("=", 1)[1] or None
        elif arg.startswith(TOKENIZER_OPTION + "="):
            tokenizer = arg.split("=", 1)[1] or None
        elif path is None and not arg.startswith("--"):
            path = arg
        i += 1
    return AppArguments(path, records, tokenizer)


START_DIR_ENV = "TOKENCAP_START_DIR"
"""The directory `tokencap app` was started in (set by it for the server, which may run elsewhere)."""


def start_directory(environ: Mapping[str, str] | None = None) -> Path:
    """Where a relative path typed in the app starts: the directory `tokencap app` was started in
    (``$TOKENCAP_START_DIR``), else the server's working directory (``streamlit run app.py``)."""
    named = (os.environ if environ is None else environ).get(START_DIR_ENV)
    return Path(named) if named else Path.cwd()


def typed_path(typed: str, environ: Mapping[str, str] | None = None) -> str:
    """A path typed in the app (or named in its URL) as the absolute path it opens: ``~`` expanded, a
    relative path taken from `start_directory`, never from wherever the server happens to run."""
    path = Path(typed.strip()).expanduser()
    return str((path if path.is_absolute() else start_directory(environ) / path).resolve())

