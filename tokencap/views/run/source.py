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

`locate` finds a row's rollout and `open_request` turns it into the `OpenRequest`
(``tokencap/views/requests.py``) the Rollout page reads. No Streamlit here, nothing from the Rollout page.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import threading
import time
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa

from ...export import remove_stale_parts, write_atomically
from ...loading import load_snapshots
from ...loading.text import FINAL_RESPONSES_HINT
from ...records import TokenCaptureSnapshot
from ...run import DiffTableGiven, ScanTableError, read_scan, table_of_snapshots
from ...run.discover import STORE_LABEL
from ...run.scanning import relative_source_path
from .. import sources as src
from ..requests import OpenRequest

RUN_UPLOAD_TYPES = ("parquet", "json", "jsonl", "zip")
"""What the Run page's uploader takes: a scan table, or rollouts to scan in memory."""

Progress = Callable[[int, int], None]


def sample_run_path(app_dir: str | os.PathLike[str]) -> Path:
    """The bundled sample run: ``sample_data/run`` when it exists, else ``sample_data`` itself."""
    base = Path(app_dir) / "sample_data"
    run = base / "run"
    return run if run.is_dir() else base


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


def sample_records(app_dir: str | os.PathLike[str], run: str | os.PathLike[str]) -> Path | None:
    """The bundled rollout records of a bundled run (``sample_data/rollout_records/NAME.jsonl``), if any."""
    records = Path(app_dir) / "sample_data" / "rollout_records" / f"{Path(run).name}.jsonl"
    return records if records.is_file() else None


def sample_after_fix_path(app_dir: str | os.PathLike[str]) -> Path | None:
    """The bundled second version of the sample run, "after a fix" (``sample_data/run_after_fix``), if any."""
    run = Path(app_dir) / "sample_data" / "run_after_fix"
    return run if run.is_dir() else None


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


def stored_upload(upload: Upload, directory: str | os.PathLike[str]) -> Path:
    """An uploaded records file as a file on disk (a scan reads records from a path).

    Named by its content's digest, so the same upload is one file and its path a stable
    cache key; written atomically (a reader never sees half a file).
    """
    suffix = ".jsonl" if upload.name.lower().endswith(".jsonl") else ".json"
    target = Path(directory) / f"{hashlib.sha256(upload.data).hexdigest()[:32]}{suffix}"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, lambda handle: handle.write(upload.data))
    return target


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


@dataclass(frozen=True)
class Fingerprint:
    """What a path holds, cheaply: a digest of every file's name, size and mtime, and their totals.

    The scan of a path is cached under (path, signature): the same files give the same
    table, and any change (a rollout added, a store file appended) gives a new scan.
    Hidden entries are skipped, as discovery skips them. A store's records file counts its
    store siblings, which its scan reads with it.
    """

    signature: str
    files: int = 0
    size: int = 0
    exists: bool = True


def fingerprint(path: str | os.PathLike[str]) -> Fingerprint:
    p = Path(path)
    digest = hashlib.sha1(str(p.resolve()).encode("utf-8", "surrogateescape"))
    try:
        st = p.stat()
    except OSError:
        return Fingerprint("missing:" + digest.hexdigest(), exists=False)
    if not p.is_dir():
        digest.update(f"\0{st.st_size}\0{st.st_mtime_ns}".encode())
        siblings = src.records_file_siblings(p)
        if siblings is None:
            return Fingerprint(digest.hexdigest(), 1, st.st_size)
        # A store's records file is scanned with its siblings (an intent with no record, an
        # incomplete marker): they are part of what this path holds.
        _, regular, skipped = siblings
        for name, fst in regular:
            digest.update(f"\0{name}\0{fst.st_size}\0{fst.st_mtime_ns}".encode("utf-8", "surrogateescape"))
        for s in skipped:
            digest.update(f"\0{s.name}\0{s.reason}".encode("utf-8", "surrogateescape"))
        return Fingerprint(digest.hexdigest(), len(regular), sum(fst.st_size for _, fst in regular))
    files = size = 0
    for directory, subdirs, names in os.walk(p):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        rel = os.path.relpath(directory, p)
        for name in sorted(names):
            if name.startswith("."):
                continue
            try:
                fst = os.lstat(os.path.join(directory, name))
            except OSError:
                continue
            files += 1
            size += fst.st_size
            digest.update(f"\0{rel}/{name}\0{fst.st_size}\0{fst.st_mtime_ns}".encode("utf-8", "surrogateescape"))
    return Fingerprint(digest.hexdigest(), files, size)


# --------------------------------------------------------------------------- scanning a directory

IN_PROCESS_BYTES = 16 << 20
"""Runs smaller than this are scanned in the app's own process: starting a child and its
workers costs about a second, more than building a few hundred small rollouts."""

CACHED_SCANS = 16
"""Scan tables kept in the cache directory (the least recently used beyond this are removed)."""

CACHED_SCAN_BYTES = 2 << 30
"""Total size of the scan tables kept (2 GiB; the least recently used beyond it are removed)."""

CACHE_ENV = "TOKENCAP_CACHE_DIR"


def scan_cache_dir() -> Path:
    """Where the app keeps scan tables: ``$TOKENCAP_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokencap/scans``
    (``~/.cache/tokencap/scans``)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tokencap" / "scans"


def cached_scan_path(fp: Fingerprint, cache_dir: str | os.PathLike[str] | None = None,
                     final_responses: str | os.PathLike[str] | None = None,
                     tokenizer: str | os.PathLike[str] | None = None) -> Path:
    """The cache file of a run's scan table: one per (directory, fingerprint, tokencap code (`code_identity`),
    rollout records and their fingerprint, tokenizer and its fingerprint: it refines the causes)."""
    from ...identity import code_identity

    records = f"{os.path.abspath(final_responses)}\0{fingerprint(final_responses).signature}" if final_responses else ""
    if tokenizer:
        records += f"\0{os.path.abspath(tokenizer)}\0{fingerprint(tokenizer).signature}"
    key = hashlib.sha256(f"{fp.signature}\0{code_identity()}\0{records}".encode("utf-8", "surrogateescape"))
    return Path(cache_dir if cache_dir is not None else scan_cache_dir()) / f"scan-{key.hexdigest()[:32]}.parquet"


def evict_scans(cache_dir: Path, keep: int = CACHED_SCANS, keep_bytes: int = CACHED_SCAN_BYTES) -> list[Path]:
    """Keep the scan cache bounded: the most recently used tables (opening one touches its
    mtime) are kept while they number at most ``keep`` and weigh at most ``keep_bytes``
    together; the rest are removed. The newest is kept whatever its size: a page is reading
    it. Part files that a killed scan left behind (no live writer holds their lock) are
    removed too. Returns the tables removed."""
    try:
        listed = [(f, f.stat()) for f in cache_dir.glob("scan-*.parquet")]
        parts = {name.split(".")[1] for name in os.listdir(cache_dir) if name.startswith(".scan-")}
    except OSError:
        return []
    for stem in parts:
        remove_stale_parts(cache_dir / f"{stem}.parquet")
    listed.sort(key=lambda item: (-item[1].st_mtime, item[0].name))
    removed: list[Path] = []
    total = 0
    for n, (table, st) in enumerate(listed):
        total += st.st_size
        if n == 0 or (n < keep and total <= keep_bytes):
            continue
        try:
            table.unlink()
            removed.append(table)
        except OSError:
            pass
    return removed


# --------------------------------------------------------------------------- a scan started before the page asks
#
# `tokencap app RUN` starts `prescan` beside the server (tokencap.views.run.prescan), so the
# scan runs while the server starts and the browser loads the page. The page must then wait
# for that scan, not start a second one: the scanning process holds an exclusive lock on
# ``scan-KEY.scanning`` beside the table it writes, and appends its progress (``DONE TOTAL``
# lines) to it. The lock dies with its process, so a claim left by a scan that was killed
# is seen as free, and the page scans the run itself.

FOLLOW_TICK = 0.25
"""Seconds between the page's looks at another process's scan (and its progress updates)."""


def claim_path(target: str | os.PathLike[str]) -> Path:
    """The claim file of a scan writing ``target``."""
    return Path(target).with_suffix(".scanning")


def _held(claim: Path) -> bool:
    try:
        with open(claim, "rb") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False
    except OSError:
        return False


def take_claim(target: str | os.PathLike[str]) -> BinaryIO | None:
    """The claim on scanning into ``target`` (an open, exclusively locked claim file), or None
    when another live process holds it. The file appears already locked (made under another
    name, locked, then linked into place), so a reader never takes a fresh claim for a free one."""
    claim = claim_path(target)
    fresh = claim.with_name(f".{claim.name}.{os.getpid()}.{threading.get_ident()}")
    handle = open(fresh, "wb")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            os.link(fresh, claim)
        except FileExistsError:
            if _held(claim):
                handle.close()
                return None
            os.replace(fresh, claim)  # a claim left by a scan that died: free
        return handle
    except BaseException:
        handle.close()
        raise
    finally:
        fresh.unlink(missing_ok=True)


def release_claim(target: str | os.PathLike[str], handle: BinaryIO) -> None:
    """Give up the claim `take_claim` returned: the file goes (when it is still ours), then the lock."""
    claim = claim_path(target)
    try:
        if os.stat(claim).st_ino == os.fstat(handle.fileno()).st_ino:
            claim.unlink()
    except OSError:
        pass
    handle.close()


def follow_scan(target: str | os.PathLike[str], progress: Progress | None = None, tick: float = FOLLOW_TICK) -> bool:
    """Wait while another process holds the claim on scanning into ``target``, calling
    ``progress(done, total)`` with what it reports at least every ``tick`` seconds (so a page can
    be left meanwhile: the update raises). True when there was such a scan (it has ended; its
    table may or may not be there), False when nobody was scanning."""
    try:
        handle = open(claim_path(target), "rb")
    except OSError:
        return False
    done = total = 0
    pending = b""
    followed = False
    with handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return followed
            except BlockingIOError:
                followed = True
            pending += handle.read()
            *lines, pending = pending.split(b"\n")
            for line in lines:
                parts = line.split()
                if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                    done, total = int(parts[0]), int(parts[1])
            if progress is not None:
                progress(done, total)
            time.sleep(tick)


def prescan(path: str | os.PathLike[str], *, final_responses: str | None = None, workers: int | None = None,
            cache_dir: str | os.PathLike[str] | None = None, tokenizer: str | None = None) -> Path | None:
    """Scan a big run into the app's scan cache before any page asks for it; the table's path,
    or None when there is nothing to do here (a small run, which the page scans itself; a scan
    already running) or the run changed while it was scanned (that table is not kept).

    The table is the one `scan_directory` writes for the same path, fingerprint and records,
    so the page reuses it, or waits for it while this scan holds its claim. Raises what `scan`
    raises; the page then scans the run itself and says what is wrong.
    """
    from ...run import read_current_scan, scan

    fp = fingerprint(path)
    if not fp.exists or fp.size < IN_PROCESS_BYTES:
        return None
    target = cached_scan_path(fp, cache_dir, final_responses, tokenizer)
    if target.exists() and read_current_scan(target, final_responses, tokenizer) is not None:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    claim = take_claim(target)
    if claim is None:
        return None
    try:
        def report(done: int, total: int) -> None:
            claim.write(f"{done} {total}\n".encode())
            claim.flush()

        scan(path, target, workers=workers, final_responses=final_responses, tokenizer=tokenizer, progress=report)
        if fingerprint(path) != fp:
            target.unlink(missing_ok=True)
            return None
        evict_scans(target.parent, CACHED_SCANS, CACHED_SCAN_BYTES)
        return target
    finally:
        release_claim(target, claim)


def _reused(target: Path, final_responses: str | None, progress: Progress | None,
            tokenizer: str | None = None) -> pa.Table | None:
    """The cached table at ``target`` when this code wrote it with these records and this tokenizer (marked
    most recently used)."""
    from ...run import read_current_scan

    if not target.exists():
        return None
    table = read_current_scan(target, final_responses, tokenizer)
    if table is not None:
        os.utime(target)  # most recently used: pruned last
        if progress:
            progress(table.num_rows, table.num_rows)
    return table


def scan_directory(path: str | os.PathLike[str], fp: Fingerprint, *, final_responses: str | None = None,
                   progress: Progress | None = None, workers: int | None = None,
                   cache_dir: str | os.PathLike[str] | None = None, tokenizer: str | None = None) -> pa.Table:
    """The run table of a path on this machine, as `tokencap scan PATH --workers N
    [--final-responses RECORDS] [--tokenizer PATH]` makes it.

    A run of `IN_PROCESS_BYTES` or more is scanned by a child process on every core
    (`tokencap.run.child`: a pool started inside the app's server would re-run the page
    script in each worker) into a parquet in the cache directory, and read back; the same
    directory with the same fingerprint (names, sizes, mtimes) and the same rollout records
    then opens from that table, when this tokencap version wrote it with those records (its
    metadata says so). While another process scans into that table (`prescan`, started by
    `tokencap app RUN`), the page waits for it and shows its progress. A table is kept only
    when the run did not change while it was scanned. A smaller run is scanned here. Raises
    `DiscoveryError` or `LoadError` when the run or its records cannot be read, `ScanFailed`
    when the scan stopped.
    """
    from ...run import scan_table
    from ...run.child import scan_in_child

    records = {"final_responses": final_responses} if final_responses else {}
    if tokenizer:
        records["tokenizer"] = tokenizer
    if fp.size < IN_PROCESS_BYTES:
        return scan_table(path, workers=1, progress=progress, **records)
    target = cached_scan_path(fp, cache_dir, final_responses, tokenizer)
    table = _reused(target, final_responses, progress, tokenizer)
    if table is not None:
        return table
    if follow_scan(target, progress):  # `tokencap app RUN` started this scan with the server
        table = _reused(target, final_responses, progress, tokenizer)
        if table is not None:
            return table
    target.parent.mkdir(parents=True, exist_ok=True)
    scan_in_child(path, target, workers=workers, progress=progress, **records)
    table = read_scan(target)
    if fingerprint(path) != fp:  # the run changed while it was scanned: the table is not this fingerprint's
        target.unlink(missing_ok=True)
    evict_scans(target.parent, CACHED_SCANS, CACHED_SCAN_BYTES)
    return table


def keep_scan_ready() -> None:
    """Have a child scan ready for the next run opened by path: started in the background a
    moment from now, it has paid for Python, the imports and the worker pool's fork server
    before it is asked, so a big run's scan starts at once (`tokencap.run.child.keep_spare`)."""
    from ...run.child import keep_spare_soon

    keep_spare_soon()


# --------------------------------------------------------------------------- uploads


@dataclass(frozen=True)
class Upload:
    """One uploaded file (name and bytes)."""

    name: str
    data: bytes = field(repr=False)

    @property
    def is_table(self) -> bool:
        return self.name.lower().endswith(".parquet")


def uploads_key(uploads: Iterable[Upload]) -> str:
    """A digest of the uploads' names and contents (the cache key of the table made from them)."""
    digest = hashlib.sha256()
    for u in uploads:
        digest.update(u.name.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(hashlib.sha256(u.data).digest())
    return digest.hexdigest()


def _base_name(name: str) -> str:
    for ext in (".jsonl", ".json", ".zip"):
        if name.endswith(ext):
            return name[: -len(ext)]
    return name


class NoCaptureUploaded(ValueError):
    """No uploaded file is a capture: each one's load error, one line a file (never a run of failed rows)."""


def table_of_uploads(uploads: Iterable[Upload], progress: Progress | None = None) -> pa.Table:
    """The run table of uploaded rollout files (JSON, JSONL, zips of a store), scanned in memory.

    A file that cannot be loaded, among files that can, is a row with its error (``load_error``),
    as `scan` makes it: a run table never drops a rollout. When no file can be loaded (an empty
    file, truncated JSON, an image, a rollout-records file) there is no run to show: raises
    `NoCaptureUploaded` with each file's error. Rows are sorted by (source, rollout id).
    """
    loaded: list[tuple[Upload, list[TokenCaptureSnapshot]]] = []
    errors = []
    for u in uploads:
        try:
            snapshots = load_snapshots(u.data, name=u.name)
        except ValueError as exc:  # LoadError / RecordError: the message names file, line, field
            errors.append(" ".join(str(exc).split()))
            snapshots = [TokenCaptureSnapshot.failed(_base_name(u.name), errors[-1])]
        loaded.append((u, snapshots))
    if loaded and len(errors) == len(loaded):
        raise NoCaptureUploaded(upload_problem(errors))
    total = sum(len(s) for _, s in loaded)
    done = 0
    tables = []
    for u, snapshots in loaded:
        def step(n: int, _total: int, base: int = done) -> None:
            if progress:
                progress(base + n, total)

        tables.append(table_of_snapshots(snapshots, u.name, source_bytes=len(u.data), progress=step))
        done += len(snapshots)
    if not tables:
        return table_of_snapshots([], "")
    table = pa.concat_tables(tables)
    return table.sort_by([("source", "ascending"), ("rollout_id", "ascending")])


def upload_problem(errors: list[str]) -> str:
    """What the Run page says when no uploaded file is a capture: each file's error (they name the file,
    the line and what is wrong), one after another, and what the uploader takes; a rollout-records file
    is sent to the Rollout records upload, in the page's words."""
    said = [e.replace(FINAL_RESPONSES_HINT, "upload it under Rollout records in the sidebar, and the run's "
                                         "captures here").rstrip(". ") for e in errors]
    return ("; ".join(said) + ". Open a run: its capture files (snapshot JSON, entries JSONL, a zip of a capture "
            "store) or its scan table (.parquet).")


def table_problem(exc: ScanTableError) -> str:
    """What the Run page says of a ``.parquet`` that is no scan table: the reader's message (the file,
    what is wrong, how to write a scan table); for a diff table, also how to compare two runs here."""
    if isinstance(exc, DiffTableGiven):
        return f"{exc}; or, to compare two runs here, open run A and add run B under Compare with another run"
    return str(exc)


def table_of_parquet(upload: Upload) -> pa.Table:
    """An uploaded scan table, checked (raises `ScanTableError` naming the upload)."""
    return read_scan(upload.data, name=upload.name)


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


def check_upload_for(upload: Upload, rollout_id: str) -> str | None:
    """None when ``upload`` holds ``rollout_id``; else why it cannot open it."""
    if upload.is_table:
        return f"{upload.name} is a table; upload the rollout's own file (JSON, JSONL or a zip of store files)"
    try:
        ids = sorted(s.rollout_id for s in load_snapshots(upload.data, name=upload.name))
    except ValueError as exc:
        return " ".join(str(exc).split())
    if rollout_id in ids:
        return None
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    return f"{upload.name} holds {shown or 'no rollout'}, not {rollout_id}"


__all__ = [
    "NoCaptureUploaded", "upload_problem",
    "AppArguments", "PATH_PARAM", "START_DIR_ENV", "records_words", "start_directory", "typed_path", "app_arguments", "path_params", "records_name", "sample_after_fix_path",
    "sample_records", "scan_problem", "stored_upload",
    "Located", "RUN_UPLOAD_TYPES", "RunOrigin", "Upload", "cached_scan_path", "check_upload_for", "is_store_source",
    "locate", "Fingerprint", "missing_message", "open_request", "fingerprint", "run_files", "sample_run_path",
    "evict_scans", "keep_scan_ready", "scan_cache_dir", "scan_directory", "table_of_parquet", "table_of_uploads",
    "table_problem", "claim_path",
    "follow_scan", "prescan", "release_claim", "take_claim",
    "upload_holds", "uploads_key",
]


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
