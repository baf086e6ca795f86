"""Where the app's rollouts come from: files, directories, uploads and the bundled samples.

A `Source` is one thing the user opened (a snapshot JSON, an entries JSONL, a capture-store
directory or a zip of one), identified by a hash of its content, so a cache keyed by
``source.key`` never confuses two files and never reloads the same bytes. `load_source`
turns it into snapshots and never raises: a file that cannot be read comes back with the
loader's message (file, line, call, field, problem) in ``error`` and no snapshots, and
the other sources stay usable.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..loading import load_snapshots
from ..loading.files import DirectorySource, Skipped, kind_of, open_regular, read_regular
from ..loading.store import load_store
from ..loading.store_files import ENTRIES_SUFFIX, store_file, store_siblings
from ..records import TokenCaptureSnapshot

UPLOAD_TYPES = ("json", "jsonl", "zip")
"""File types the app's uploader accepts."""

_HASH_CHUNK = 1 << 20
_SAMPLE_SKIP = {"expected.json", "README.md", "final_responses", "run_after_fix", "rollout_records", "tokenizer.json",
                "qwen3"}
"""Entries of sample_data/ that are not a scenario to open on the Rollout page (the run after a fix
and the rollout records are for comparing runs; the tokenizers decode the samples: ``qwen3/`` is
Qwen3's, for ``rollouts/``)."""


@dataclass(frozen=True, eq=False)
class Source:
    """One opened input. ``key`` is the SHA-256 of its content (directories: of every file in it)."""

    name: str
    key: str
    size: int
    path: str | None = None
    data: bytes | None = field(default=None, repr=False)
    names: tuple[str, ...] = ()  # only these files of the directory ``path`` (one store rollout of a run)
    copy: str = ""  # set on the same content opened again beside itself (the other run of a comparison)

    @property
    def is_directory(self) -> bool:
        return self.data is None and self.path is not None

    @property
    def cache_key(self) -> str:
        """Content plus name: the same bytes under another name load to other error messages."""
        named = f"{self.name}\0{self.copy}" if self.copy else self.name
        name = hashlib.sha256(named.encode("utf-8", "surrogateescape")).hexdigest()[:12]
        return f"{self.key}-{name}"


@dataclass(frozen=True, eq=False)
class LoadedSource:
    """A source's snapshots, or why it could not be read."""

    source: Source
    snapshots: tuple[TokenCaptureSnapshot, ...] = ()
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


def content_key(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_from_bytes(name: str, data: bytes) -> Source:
    return Source(name=name, key=content_key(data), size=len(data), data=data)


def _directory_files(path: Path) -> list[Path]:
    files: list[Path] = []
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        files.extend(Path(root) / n for n in sorted(names) if not n.startswith("."))
    return files


def source_from_path(path: str | os.PathLike[str]) -> Source:
    """A file (read into memory) or a directory (hashed file by file, loaded from disk).

    Raises `FileNotFoundError` for a path that does not exist; the app reports it.
    """
    p = Path(path)
    if p.is_dir():
        digest = hashlib.sha256(b"directory\0")
        size = 0
        for f in _directory_files(p):
            digest.update(str(f.relative_to(p)).encode("utf-8", "surrogateescape") + b"\0")
            mode = os.lstat(f).st_mode
            if not stat.S_ISREG(mode):
                # Never opened: a FIFO would block the app (the loader skips and notes it).
                digest.update(kind_of(mode).encode() + b"\0")
                continue
            with os.fdopen(open_regular(f, str(f), follow_symlinks=False), "rb") as handle:
                while chunk := handle.read(_HASH_CHUNK):
                    digest.update(chunk)
                    size += len(chunk)
            digest.update(b"\0")
        return Source(name=p.name or str(p), key=digest.hexdigest(), size=size, path=str(p))
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or directory")
    data = bytes(read_regular(p, str(p)))  # a FIFO or a device is refused (LoadError), never read
    key = content_key(data)
    siblings = _store_siblings(p)
    if siblings:
        # A store's records file is loaded with its siblings (load_source): they are part of its content.
        digest = hashlib.sha256(b"store rollout\0")
        for name, content in siblings:
            digest.update(name.encode("utf-8", "surrogateescape") + b"\0" + content + b"\0")
        key = digest.hexdigest()
    return Source(name=p.name, key=key, size=len(data), path=str(p), data=data)


def records_file_siblings(path: str | os.PathLike[str]
                          ) -> tuple[Path, list[tuple[str, os.stat_result]], list[Skipped]] | None:
    """The store files read with ``path`` when it is a store's records file: their directory (the
    link target's, as the loader and run discovery read it), the regular files with their stat
    and the others as `Skipped`; None when ``path`` is any other file."""
    found = store_file(os.path.basename(path))
    real = Path(os.path.realpath(path))
    if found is None or found[1] != ENTRIES_SUFFIX or store_file(real.name) != found:
        return None
    return (real.parent, *store_siblings(real.parent, found[0]))


def _store_siblings(path: Path) -> list[tuple[str, bytes]]:
    """The store files of the rollout whose records file is ``path`` (with their content), or
    [] when ``path`` is not a store's records file. Links and pipes among them are named,
    never opened: the loader fails such a rollout."""
    siblings = records_file_siblings(path)
    if siblings is None:
        return []
    directory, regular, skipped = siblings
    out = [(name, bytes(read_regular(directory / name, name, follow_symlinks=False))) for name, _ in regular]
    return sorted(out + [(s.name, s.reason.encode()) for s in skipped])


def path_signature(path: str | os.PathLike[str]) -> tuple[Any, ...]:
    """A cheap fingerprint (names, sizes, modification times) to decide when to re-hash a path."""
    p = Path(path)
    if p.is_dir():
        return (str(p.resolve()), tuple((str(f.relative_to(p)), f.lstat().st_size, f.lstat().st_mtime_ns)
                                        for f in _directory_files(p)))
    if p.exists():
        st = p.stat()
        siblings = records_file_siblings(p)
        if siblings is not None:  # a store file is loaded with its siblings: any of them may change
            _, regular, skipped = siblings
            return (str(p.resolve()), st.st_size, st.st_mtime_ns,
                    tuple((n, s.st_size, s.st_mtime_ns) for n, s in regular), tuple(s.name for s in skipped))
        return (str(p.resolve()), st.st_size, st.st_mtime_ns)
    return (str(p), None)


def load_source(source: Source) -> LoadedSource:
    """Load every rollout of ``source``; never raises (the message goes to ``error``)."""
    start = time.perf_counter()
    try:
        if source.data is not None and source.path is not None and store_file(source.name):
            snapshots = load_snapshots(source.path)  # a store file on disk: read with its siblings
        elif source.data is not None:
            snapshots = load_snapshots(source.data, name=source.name)
        elif source.names:
            directory = Path(source.path)  # type: ignore[arg-type]
            snapshots = load_store(DirectorySource.of_names(directory, list(source.names), directory.name))
        else:
            snapshots = load_snapshots(source.path)  # type: ignore[arg-type]
    except ValueError as exc:  # LoadError, RecordError: the message already says where and what
        return LoadedSource(source, (), _one_line(str(exc)) or "the file could not be read",
                            time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 -- a page must never show a traceback for a bad file
        why = f"{type(exc).__name__}: {_one_line(str(exc))}"
        return LoadedSource(source, (), f"{source.name}: could not be read ({why})", time.perf_counter() - start)
    if not snapshots:
        return LoadedSource(source, (), f"{source.name}: holds no rollout", time.perf_counter() - start)
    return LoadedSource(source, tuple(snapshots), None, time.perf_counter() - start)


def _one_line(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------------- uploads


class UploadedLike(Protocol):
    """What the uploader hands over (Streamlit's ``UploadedFile`` fits)."""

    name: str
    file_id: str

    def getvalue(self) -> bytes: ...


def sources_from_uploads(files: Iterable[UploadedLike] | None, memo: dict[str, Source]) -> list[Source]:
    """Sources for the uploaded files, in upload order, each hashed once.

    ``memo`` maps an upload's ``file_id`` to its `Source` and lives in the session, so a
    rerun does not hash an 85 MB upload again; entries of files no longer uploaded are
    dropped. Two uploads with the same content are one source.
    """
    out: list[Source] = []
    seen: set[str] = set()
    live: set[str] = set()
    for f in files or ():
        fid = getattr(f, "file_id", None) or f"{f.name}:{id(f)}"
        live.add(fid)
        source = memo.get(fid)
        if source is None:
            source = source_from_bytes(f.name, f.getvalue())
            memo[fid] = source
        if source.key not in seen:
            seen.add(source.key)
            out.append(source)
    for fid in list(memo):
        if fid not in live:
            del memo[fid]
    return out


# --------------------------------------------------------------------------- bundled samples


@dataclass(frozen=True)
class Scenario:
    """One bundled sample: a file or directory plus what it demonstrates (from ``expected.json``)."""

    name: str
    path: Path
    situation: str = ""
    expectation: str = ""
    why: str = ""
    final_responses: Path | None = None
    """The harness's final responses bundled for this scenario (``expected.json``), if any."""
    title: str = ""
    """The picker's words for it, when not its file name's."""

    @property
    def label(self) -> str:
        if self.title:
            return self.title
        title = self.name.rsplit(".", 1)[0] if not self.path.is_dir() else self.name
        return title.replace("_", " ")


def _expectation(rollouts: Mapping[str, Any]) -> str:
    parts = []
    for rid, exp in rollouts.items():
        verdict = "masked: " + ", ".join(exp.get("mask_reasons", [])) if exp.get("mask_sample") else "trainable"
        status = exp.get("status")
        if status:
            reason = exp.get("incomplete_reason")
            verdict += f"; {status}" + (f" / {reason}" if reason else "")
        parts.append(f"{rid}: {verdict}" if len(rollouts) > 1 else verdict)
    return " · ".join(parts)


def sample_scenarios(directory: str | os.PathLike[str]) -> list[Scenario]:
    """The bundled samples in the order ``expected.json`` tells their story, then any others."""
    root = Path(directory)
    if not root.is_dir():
        return []
    described: dict[str, Any] = {}
    expected = root / "expected.json"
    if expected.is_file():
        try:
            loaded = json.loads(expected.read_text(encoding="utf-8"))
            described = loaded if isinstance(loaded, dict) else {}
        except (ValueError, OSError):
            described = {}
    out: list[Scenario] = []
    names: list[str] = []
    for name in described:
        if (root / name.rstrip("/")).exists():
            names.append(name.rstrip("/"))
    extra = sorted(p.name for p in root.iterdir()
                   if not p.name.startswith(".") and p.name not in _SAMPLE_SKIP and p.name not in names
                   and (p.is_dir() or p.suffix in (".json", ".jsonl", ".zip")))
    for name in names + extra:
        bundled_rollouts = _rollouts_scenario(root, name)
        if bundled_rollouts is not None:
            out.append(bundled_rollouts)
            continue
        info = described.get(name) or described.get(name + "/") or {}
        info = info if isinstance(info, dict) else {}
        rollouts = info.get("rollouts") if isinstance(info.get("rollouts"), dict) else {}
        finals = info.get("final_responses")
        finals_path = root / finals if isinstance(finals, str) and (root / finals).is_file() else None
        records = root / "rollout_records" / f"{name}.jsonl"
        if finals_path is None and records.is_file():  # a bundled run: built with its rollout records (README)
            finals_path = records
        out.append(Scenario(name=name, path=root / name, situation=str(info.get("situation", "")),
                            expectation=_expectation(rollouts) if rollouts else "", why=str(info.get("why", "")),
                            final_responses=finals_path))
    return out


ROLLOUTS_DECLARED = "expected.json.txt"
"""Beside a bundled rollouts file (docs/contract.md#token-rollouts): the file's name (``file``) and each rollout's
declared verdict."""


def _rollouts_scenario(root: Path, name: str) -> Scenario | None:
    """A bundled folder of rollouts whose output items carry token ids (``sample_data/rollouts``) as the
    scenario of its file, told in words from the verdicts declared beside it; None for any other entry."""
    declared_path = root / name / ROLLOUTS_DECLARED
    if not declared_path.is_file():
        return None
    try:
        declared = json.loads(declared_path.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return None
    file = declared.get("file") if isinstance(declared, dict) else None
    if not isinstance(file, str) or "/" in file or not (root / name / file).is_file():
        return None
    rollouts = declared.get("rollouts") if isinstance(declared.get("rollouts"), dict) else {}
    split = sum(1 for r in rollouts.values() if isinstance(r, dict) and r.get("contiguous") is False)
    vocabulary = f" in {declared['model']}'s vocabulary" if isinstance(declared.get("model"), str) else ""
    situation = (f"{len(rollouts)} rollouts as NeMo Gym writes them with token ids on their output items (no token "
                 f"capture), rendered{vocabulary}: each token-bearing item is a call item-NNNN. As a run: "
                 f"`tokencap app sample_data/{name}/{file}`.")
    expectation = (f"{len(rollouts) - split} contiguous (trainable); {split} that NeMo RL would stop on "
                   "(\"Non-contiguous messages found\"), each banner saying where and why") if rollouts else ""
    title = f"{file.rsplit('.', 1)[0].replace('_', ' ')} (token ids on output items, {len(rollouts)} rollouts)"
    return Scenario(name=f"{name}/{file}", path=root / name / file, situation=situation, expectation=expectation,
                    title=title)


def default_scenario_index(scenarios: list[Scenario], preferred: str = "subagent_branch.json") -> int:
    """The scenario the app opens on: one with a branch, so the first screen shows every lane."""
    for i, s in enumerate(scenarios):
        if s.name == preferred:
            return i
    return 0


def is_same_directory(a: str | os.PathLike[str] | None, b: str | os.PathLike[str] | None) -> bool:
    if a is None or b is None:
        return False
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


# --------------------------------------------------------------------------- rollouts across sources


@dataclass(frozen=True)
class RolloutRef:
    """One rollout of one loaded source; ``key`` is stable across reruns and unique per content and name."""

    source_key: str
    index: int
    rollout_id: str
    source_name: str

    @property
    def key(self) -> str:
        return f"{self.source_key[:16]}{self.source_key[-6:]}/{self.index}"


def rollout_refs(loaded: Iterable[LoadedSource]) -> list[RolloutRef]:
    return [RolloutRef(ls.source.cache_key, i, snap.rollout_id, ls.source.name)
            for ls in loaded for i, snap in enumerate(ls.snapshots)]


def tokenizer_label(path: str | os.PathLike[str], app_dir: str | os.PathLike[str]) -> str:
    """Which tokenizer the app decodes with and where it came from (docs/contract.md#tokenizers), for a caption: the
    bundled sample tokenizer, a model's from the local Hugging Face cache (what ``--tokenizer
    Org/Name`` hands the app), or a tokenizer.json at its path."""
    from ..diagnosis.tokenizer_lookup import file_label

    bundled = Path(app_dir) / "sample_data" / "tokenizer.json"
    try:
        if Path(path).resolve() == bundled.resolve():
            return "the bundled sample tokenizer (sample_data/tokenizer.json)"
    except OSError:
        pass
    return file_label(path)


def default_tokenizer_path(app_dir: str | os.PathLike[str], given: str | None,
                           source_paths: list[str | None]) -> Path | None:
    """The tokenizer the app decodes and diagnoses with (both pages) when none is uploaded: the one given on the command
    line (``tokencap app ... --tokenizer PATH``), else the bundled ``sample_data/qwen3/tokenizer.json`` when
    every source shown is a bundled rollouts file (``sample_data/rollouts/``, rendered in Qwen3's vocabulary),
    else the bundled ``sample_data/tokenizer.json`` when it exists and every source shown is bundled sample
    data; else None."""
    if given:
        return Path(given)
    samples = Path(app_dir) / "sample_data"
    if not source_paths or any(p is None for p in source_paths):
        return None
    qwen3 = samples / "qwen3" / "tokenizer.json"
    if qwen3.is_file() and all(Path(p).resolve().is_relative_to((samples / "rollouts").resolve())  # type: ignore[arg-type]
                               for p in source_paths):
        return qwen3  # the bundled rollouts were rendered in Qwen3's vocabulary
    bundled = samples / "tokenizer.json"
    if not bundled.is_file():
        return None
    base = samples.resolve()
    if all(Path(p).resolve().is_relative_to(base) for p in source_paths):  # type: ignore[arg-type]
        return bundled
    return None


def tokenizer_words(uploaded: str | None, default: str | None, app_dir: str | None = None) -> str:
    """What the sidebar says of the tokenizer in use: the upload, the default (the command line's
    ``--tokenizer``, or the tokenizer bundled with the sample data), or none -- never a file name when
    no file is loaded."""
    if uploaded:
        return f"In use: {uploaded} (uploaded)."
    if default:
        path = Path(default)
        bundled = app_dir is not None and path.parent.resolve() == (Path(app_dir) / "sample_data").resolve()
        return (f"In use: sample_data/{path.name}, bundled with the sample data; upload another to replace it."
                if bundled else f"In use: {tokenizer_label(path, app_dir or '.')}; upload another to replace it.")
    return "None loaded: token ids are shown as numbers. Upload a Hugging Face tokenizer.json to read them as text."
