"""Where the Run page's table comes from, and where each of its rollouts can be opened.

A `RunOrigin` records what the table was made from:

* ``directory`` / ``file`` -- a path on this machine, scanned with `tokencap.run.scan_table`;
  every row's ``source`` names files under it;
* ``parquet`` -- a scan table uploaded (`tokencap scan ... -o RESULT.parquet`). Its rows
  name files of a run this page never saw: they are looked for under ``roots`` (a run
  directory the user names, the command-line directory) and among files uploaded with
  the table. When none holds them the page says so and offers to upload the file;
* ``upload`` -- JSON / JSONL / zip files uploaded and scanned in memory; a row's source
  is the name of the upload it came from.

`locate` finds a row's rollout and `open_request` turns it into the `OpenRequest` the
Rollout page reads from ``st.session_state["open_rollout"]`` (the contract is in the
docstring of ``tokencap/app/run/run.py``). The scan cache is `scan_cache`'s,
uploads are `uploads`', the command line `arguments`' (import their names from them). No Streamlit here,
nothing from the Rollout page.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..run.discover import STORE_LABEL
from ..run.scanning import relative_source_path
from . import rollout_sources as src
from .requests import OpenRequest
from .uploads import Upload


def sample_run_path(app_dir: str | os.PathLike[str]) -> Path:
    """The bundled sample run: ``sample_data/run`` when it exists, else ``sample_data`` itself."""
    base = Path(app_dir) / "sample_data"
    run = base / "run"
    return run if run.is_dir() else base


def sample_records(app_dir: str | os.PathLike[str], run: str | os.PathLike[str]) -> Path | None:
    """The bundled rollout records of a bundled run (``sample_data/rollout_records/NAME.jsonl``), if any."""
    records = Path(app_dir) / "sample_data" / "rollout_records" / f"{Path(run).name}.jsonl"
    return records if records.is_file() else None


def sample_after_fix_path(app_dir: str | os.PathLike[str]) -> Path | None:
    """The bundled second version of the sample run, "after a fix" (``sample_data/run_after_fix``), if any."""
    run = Path(app_dir) / "sample_data" / "run_after_fix"
    return run if run.is_dir() else None


def records_words(records: str | os.PathLike[str] | None, app_dir: str | os.PathLike[str],
                  upload: Upload | None = None) -> str:
    """Which rollout records a run was scanned with, in plain words: an upload by its name, the records
    bundled with a sample run as such, any other file by its absolute path; or none."""
    if upload is not None:
        return f"with the rollout records {upload.name} (uploaded)"
    if not records:
        return "without rollout records"
    path = Path(records).resolve()
    bundled = (Path(app_dir) / "sample_data" / "rollout_records").resolve()
    if path.parent == bundled:
        return f"with the bundled rollout records sample_data/rollout_records/{path.name}"
    return f"with the rollout records {path}"


def records_name(records: str | os.PathLike[str] | None, upload: Upload | None = None) -> str | None:
    """How the page names the run's rollout records: an upload by the name it was uploaded with (never the
    digest-named file `stored_upload` keeps), a path by its file name."""
    if upload is not None:
        return upload.name
    return Path(records).name if records else None


def scan_problem(error: str, records: str | None, upload: Upload | None = None) -> tuple[str, str]:
    """The heading and message the Run page shows for a run that could not be opened.

    An error about the rollout records (it names their file) is said to be theirs, names an upload
    as uploaded, and says what to do: the run itself is fine without them.
    """
    if not records or records not in error:
        return "Could not open the run.", error
    error = error.rstrip(". ")
    if upload is not None:
        return ("Could not read the rollout records.",
                f"{error.replace(records, f'{upload.name} (uploaded)')}. Fix the file and upload it again, or "
                "remove it under Rollout records in the sidebar to open the run without records.")
    return ("Could not read the rollout records.",
            f"{error}. Fix the file, or clear the records path under Rollout records in the sidebar (or start "
            "tokencap app without --final-responses) to open the run without records.")


# --------------------------------------------------------------------------- where a row's rollout is


@dataclass(frozen=True, eq=False)
class RunOrigin:
    """What the Run page's table was made from (see the module docstring)."""

    kind: str
    label: str
    root: str | None = None
    roots: tuple[str, ...] = ()
    uploads: tuple[Upload, ...] = ()
    records: str | None = None  # the rollout records the run was scanned with (a path)

    @property
    def from_table_alone(self) -> bool:
        return self.kind == "parquet"


@dataclass(frozen=True)
class Located:
    """Where a row's rollout is: under ``path`` on disk, or in the bytes of an uploaded file."""

    path: str | None = None
    name: str | None = None
    data: bytes | None = field(default=None, repr=False)


def is_store_source(source: str) -> bool:
    return source.endswith(STORE_LABEL)


def _store_stem(source: str) -> str:
    return source[: -len(STORE_LABEL)].rsplit("/", 1)[-1]


def _zip_members(data: bytes) -> set[str]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return {m.filename.replace("\\", "/").rsplit("/", 1)[-1] for m in archive.infolist()}
    except (zipfile.BadZipFile, OSError, ValueError):
        return set()


def upload_holds(upload: Upload, source: str) -> bool:
    """Whether an uploaded file is the file a row's ``source`` names (by name; a store by its zip's members)."""
    if upload.is_table:
        return False
    if upload.name == source:
        return True
    base = source.rsplit("/", 1)[-1]
    if is_store_source(source):
        stem = _store_stem(source)
        return upload.name.lower().endswith(".zip") and any(
            m.startswith(f"{stem}.tokens.") for m in _zip_members(upload.data))
    return upload.name == base


def run_files(root: str | os.PathLike[str], source: str) -> list[Path]:
    """The files a row's ``source`` names under ``root``, only if every one lies inside it.

    A table can be uploaded, so its ``source`` strings are untrusted: one reading
    ``../../etc/passwd`` must never make the app open a file outside the run.
    """
    try:
        base = Path(root).resolve()
        files = relative_source_path(base, source)
        inside = [f for f in files if f.resolve() == base or f.resolve().is_relative_to(base)]
    except (OSError, ValueError):
        return []
    return files if files and len(inside) == len(files) else []


def locate(origin: RunOrigin, source: str) -> Located | None:
    """Where the rollout of a row with ``source`` can be opened from, or None when nowhere."""
    if origin.kind == "upload":
        for u in origin.uploads:
            if u.name == source and not u.is_table:
                return Located(name=u.name, data=u.data)
        return None
    roots = ((origin.root,) if origin.root else ()) + tuple(origin.roots)
    for root in roots:
        if root and run_files(root, source):
            return Located(path=str(Path(root).resolve()))
    for u in origin.uploads:
        if upload_holds(u, source):
            return Located(name=u.name, data=u.data)
    return None


def open_request(located: Located, source: str, rollout_id: str, seq: int = 0,
                 back_params: Mapping[str, str] | None = None, records: str | None = None) -> OpenRequest:
    """The `OpenRequest` the Rollout page reads for a row found at ``located``.

    ``records`` is the rollout-records file the run was scanned with: the Rollout page
    builds the rollout with it, so its verdict is its row's.
    """
    return OpenRequest(path=located.path, source=source, rollout_id=rollout_id, seq=seq,
                       back_params=dict(back_params or {}), final_responses=records or None,
                       name=located.name if located.data is not None else None, data=located.data)


def missing_message(origin: RunOrigin, source: str) -> str:
    """Plain words for a row whose rollout this machine does not have (a table uploaded alone)."""
    looked = [r for r in ((origin.root,) if origin.root else ()) + tuple(origin.roots) if r]
    where = ("under " + ", ".join(looked)) if looked else "on this machine (no run directory is known)"
    if is_store_source(source):
        stem = _store_stem(source)
        what = (f"It is a capture-store rollout: zip its files ({stem}.tokens.jsonl, {stem}.tokens.intents, "
                f"{stem}.tokens.state.json, …) and upload the zip")
    else:
        what = f"Upload {source.rsplit('/', 1)[-1]} itself"
    return (f"This table came without its run, and the file it names for this rollout, {source}, "
            f"was not found {where} nor among the uploaded files. {what}, or name the run's directory on this "
            "machine in the sidebar.")


def source_for_run_rollout(request: OpenRequest) -> src.Source:
    """What the Rollout page opens for a row of the Run page (an `OpenRequest`).

    ``request`` holds ``source`` (the row's source) and either ``data`` and ``name`` (an
    uploaded file) or ``path`` (the run's directory, or the rollout's file). A store
    rollout (``sub/R.tokens.*``) opens as just its own files, so the page builds exactly
    what the scan built, however many rollouts share the directory. Raises
    `FileNotFoundError` when the files are gone; the page reports it.
    """
    if request.data is not None:
        return src.source_from_bytes(str(request.name or request.source or "upload"), request.data)
    path, source = Path(str(request.path)), str(request.source or "")
    if path.is_file() or (not source and path.is_dir()):  # a file, or a capture named whole (a link's vs_src)
        return src.source_from_path(path)
    files = run_files(path, source)
    if not files:
        raise FileNotFoundError(f"{source}: not found under {path} (moved or deleted since the scan?)")
    if not is_store_source(source):
        return src.source_from_path(files[0])
    digest = hashlib.sha256(b"store rollout\0")
    size = 0
    for f in files:
        data = f.read_bytes()
        digest.update(f.name.encode("utf-8", "surrogateescape") + b"\0" + data + b"\0")
        size += len(data)
    return src.Source(name=source, key=digest.hexdigest(), size=size, path=str(files[0].parent),
                  names=tuple(f.name for f in files))


__all__ = [
    "Located", "RunOrigin", "is_store_source", "locate", "missing_message", "open_request", "records_name",
    "records_words", "run_files", "sample_after_fix_path", "sample_records", "sample_run_path", "scan_problem",
    "source_for_run_rollout", "upload_holds",
]
