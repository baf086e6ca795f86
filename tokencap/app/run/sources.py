"""The Run page's sidebar sources: where the run comes from (an upload, a path typed in the
sidebar or given on the command line, the bundled sample run) and the records it is scanned
with. Part of the Run page (`tokencap/app/run/run.py`, whose docstring states the rules); the
decisions are `tokencap.services.run_sources`'s.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

from tokencap.app.run import parts as parts
from tokencap.app.run.loading import LoadedRun, load_any_path, load_uploads, records_directory
from tokencap.app.state import Keys
from tokencap.bundled import SAMPLE_DATA
from tokencap.services import run_sources as rs
from tokencap.services.arguments import PATH_PARAM, AppArguments, app_arguments, typed_path
from tokencap.services.scan_cache import Fingerprint, fingerprint
from tokencap.services.uploads import RUN_UPLOAD_TYPES, Upload, stored_upload
from tokencap.views.formatting import fmt_bytes, md_escape

APP_DIR = SAMPLE_DATA.parent  # the folder holding sample_data/: the checkout, or the installed package
STATE = st.session_state


def cli_arguments() -> AppArguments:
    return app_arguments(sys.argv[1:])


def records_for(path: str, sample: Path) -> str | None:
    """The rollout records a scan of ``path`` uses: the sidebar's (upload or path), the command
    line's (for the run the app was started on, not one opened by path), else the bundled records
    of a bundled run."""
    upload: Upload | None = STATE.get(Keys.RUN_RECORDS_UPLOAD)
    if upload is not None:
        return str(stored_upload(upload, records_directory()))
    typed = (STATE.get(Keys.RUN_RECORDS_PATH) or "").strip()
    if typed:
        return typed_path(typed)
    cli = cli_arguments()
    if cli.records and Path(cli.path or sample).resolve() == Path(path).resolve():  # the run started on
        return str(Path(cli.records).resolve())
    bundled = rs.sample_records(APP_DIR, path) if Path(path).resolve().parent == sample.parent.resolve() else None
    return str(bundled) if bundled else None


def _remember_uploads() -> None:
    files = STATE.get(Keys.RUN_UPLOADER) or []
    STATE[Keys.RUN_UPLOADS] = tuple(Upload(f.name, f.getvalue()) for f in files)


def _forget_uploads() -> None:
    STATE[Keys.RUN_UPLOADS] = ()


def _rescan(path: str) -> None:
    STATE[Keys.RUN_FINGERPRINTS].pop(path, None)


def _remember_path() -> None:
    typed = (STATE.get(Keys.RUN_W_PATH) or "").strip()
    if typed != STATE.get(Keys.RUN_PATH, ""):
        parts.forget_records()  # records belong to the run they were given with
    STATE[Keys.RUN_PATH] = typed


def opened_path() -> str:
    """The run directory or scan table named in the sidebar (or, on a session's first visit, in the URL)."""
    if Keys.RUN_PATH not in STATE:
        STATE[Keys.RUN_PATH] = str(st.query_params.get(PATH_PARAM, "")).strip()
    if STATE.get(Keys.RUN_W_PATH) != STATE[Keys.RUN_PATH]:
        STATE[Keys.RUN_W_PATH] = STATE[Keys.RUN_PATH]
    st.sidebar.text_input(
        "or a run directory or scan table on this machine", key=Keys.RUN_W_PATH, on_change=_remember_path,
        placeholder="/path/to/run", help="A capture-store directory, a tree of rollout files, or a scan table "
        "(.parquet), as `tokencap app PATH` opens it; empty: the run the app was started on.")
    return STATE[Keys.RUN_PATH]


def sidebar_origin() -> tuple[rs.RunOrigin, LoadedRun]:
    """The run to show (upload, command-line path or the sample run) and its table."""
    st.sidebar.title(":material/table_chart: tokencap")
    st.sidebar.caption("Run overview: every rollout of a run, its verdict and why. Select a row to inspect it.")
    # The uploader's own value is lost when the page is left; the uploads live in
    # session state (set when the user changes them), so the way back keeps them.
    st.sidebar.file_uploader(
        "Open a run", type=list(RUN_UPLOAD_TYPES), accept_multiple_files=True, key=Keys.RUN_UPLOADER,
        on_change=_remember_uploads,
        help="A scan table (`tokencap scan RUN -o RESULT.parquet`), optionally with some of its rollouts' files; "
             "or rollouts to scan here: JSON, entries JSONL, or a zip of a capture-store directory.")
    cli = cli_arguments().path
    uploads: tuple[Upload, ...] = STATE[Keys.RUN_UPLOADS]
    if uploads:
        names = ", ".join(u.name for u in uploads)
        st.sidebar.caption(f"Showing the upload: {md_escape(names)}")
        st.sidebar.button("Close the upload", icon=":material/close:", on_click=_forget_uploads,
                          key=Keys.RUN_CLOSE_UPLOAD)
        loaded = load_uploads(uploads)
        if any(u.is_table for u in uploads):
            roots = _run_root_input() + ((cli,) if cli and Path(cli).is_dir() else ())
            label = next(u.name for u in uploads if u.is_table)
            return rs.RunOrigin("parquet", label, roots=roots, uploads=uploads), loaded
        return rs.RunOrigin("upload", names, uploads=uploads), loaded

    sample = rs.sample_run_path(APP_DIR)
    typed = opened_path()
    named = typed or cli  # the sidebar's path, else the command line's
    if typed:
        path = typed_path(typed)
    elif cli:
        path = str(Path(cli).expanduser().resolve())
    else:
        path = str(sample)
    fps: dict[str, Fingerprint] = STATE[Keys.RUN_FINGERPRINTS]
    if path not in fps:
        fps[path] = fingerprint(path)
    fp = fps[path]
    st.sidebar.markdown("**Run**" if named else "**Sample run**")
    # Plain text, not st.code: a code block loads the browser's syntax highlighter (~1 s of a first render).
    st.sidebar.text(path if named else str(sample.relative_to(APP_DIR)))
    if fp.exists:
        st.sidebar.caption(f"{fp.files:,} file{'s' if fp.files != 1 else ''}, {fmt_bytes(fp.size)}")
    st.sidebar.button("Rescan", icon=":material/refresh:", on_click=_rescan, args=(path,), key=Keys.RUN_RESCAN,
                      help="Scan again (files added or changed since this session first scanned the run).")
    label = path if named else f"sample run ({sample.relative_to(APP_DIR)})"
    if path.lower().endswith(".parquet") and Path(path).is_file():
        return rs.RunOrigin("parquet", label, roots=_run_root_input()), load_any_path(path, fp)
    kind = "directory" if Path(path).is_dir() else "file"
    parts.sidebar_records()
    records = records_for(path, sample)
    parts.records_caption(rs.records_name(records, STATE.get(Keys.RUN_RECORDS_UPLOAD)))
    return rs.RunOrigin(kind, label, root=path, records=records), load_any_path(path, fp, records)


def _remember_root() -> None:
    STATE[Keys.RUN_ROOT] = (STATE.get(Keys.RUN_W_ROOT) or "").strip()


def _run_root_input() -> tuple[str, ...]:
    """The run directory the user named for a table; kept in session state, so the way back keeps it."""
    if STATE.get(Keys.RUN_W_ROOT) != STATE.get(Keys.RUN_ROOT, ""):
        STATE[Keys.RUN_W_ROOT] = STATE.get(Keys.RUN_ROOT, "")
    st.sidebar.text_input(
        "Run directory on this machine (optional)", key=Keys.RUN_W_ROOT, on_change=_remember_root,
        help="Where the table's source paths start (the SOURCE it was scanned from), to open its rollouts.")
    root = STATE.get(Keys.RUN_ROOT, "")
    return (root,) if root else ()
