"""Where a tokenizer comes from: a file, a model directory, or the local Hugging Face cache.

The rules are docs/contract.md#tokenizers.

Decoded text needs the vocabulary of the model that produced the ids. A tokenizer is given
as a ``tokenizer.json`` file, a directory holding one (a Hugging Face model directory), or a
model name ``Org/Name`` found in the local Hugging Face cache (``$HF_HUB_CACHE``, else
``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``), laid out as
``models--Org--Name/snapshots/REV/tokenizer.json`` with REV from ``refs/main`` when present,
else the most recently modified snapshot that holds one.

Nothing is ever downloaded: the cache is only read, and ``huggingface_hub`` is never
imported. Without a given tokenizer, a rollout whose delivered calls name a model
(``Org/Name``) present in the cache is decoded with that model's tokenizer, looked up once per model and process
(`tokenizer_for_model`); a model not found there decodes nothing, and `missing_model_note`
says so once. Every tokenizer carries a label saying which it is and where it came from,
shown wherever decoded text is, and the digest of its file, which a scan's ``--since`` reuse
compares (`cache_fingerprint` for the ones found in the cache).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .decoding import TokenizerError, read_tokenizer_file

TOKENIZER_FILE = "tokenizer.json"
FORMS = ("a tokenizer.json file, a directory holding one (a Hugging Face model directory), or a model name "
         "Org/Name found in the local Hugging Face cache")
"""The three forms a tokenizer is given in, for error messages."""


@dataclass(frozen=True)
class FoundTokenizer:
    """A tokenizer and where it came from.

    ``tokenizer``: the `tokenizers.Tokenizer` read; ``label``: which tokenizer and where it
    came from, for a person ("tokenizer.json at PATH", "model directory PATH",
    "Org/Name from the local Hugging Face cache (PATH)"); ``path``: the ``tokenizer.json`` read
    (absolute, symbolic links kept); ``sha256``: the digest of its bytes. It decodes like the tokenizer it holds, so
    it can be handed to `tokencap.diagnose` as is.
    """

    tokenizer: Any = field(repr=False, compare=False)
    label: str
    path: str
    sha256: str

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def id_to_token(self, id: int) -> str | None:
        return self.tokenizer.id_to_token(id)


def hub_cache() -> Path:
    """The local Hugging Face hub cache: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``~/.cache/huggingface/hub`` (it may not exist)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def _model_dir(cache: Path, model: str) -> Path:
    return cache / ("models--" + model.replace("/", "--"))


def cached_tokenizer_file(model: str, cache: Path | None = None) -> Path | None:
    """The ``tokenizer.json`` of ``model`` (``Org/Name``) in the local cache: the snapshot
    ``refs/main`` names when it holds one, else the most recently modified snapshot that does;
    None when there is none. Reads the cache only."""
    if not model or model.startswith(("/", ".")) or ".." in model.split("/") or "\\" in model:
        return None
    root = _model_dir(cache if cache is not None else hub_cache(), model)
    snapshots = root / "snapshots"
    try:
        rev = (root / "refs" / "main").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        rev = ""
    if rev and "/" not in rev and rev not in (".", ".."):
        named = snapshots / rev / TOKENIZER_FILE
        if named.is_file():
            return named
    try:
        candidates = [d / TOKENIZER_FILE for d in snapshots.iterdir() if (d / TOKENIZER_FILE).is_file()]
    except OSError:
        return None
    if not candidates:
        return None
    return max(candidates, key=lambda f: (f.parent.stat().st_mtime_ns, f.stat().st_mtime_ns, f.parent.name))


def _looks_like_model_name(spec: str) -> bool:
    parts = spec.split("/")
    return len(parts) == 2 and all(parts) and not any(p in (".", "..") for p in parts) and "\\" not in spec


def _read(file: Path, label: str, shown: str) -> FoundTokenizer:
    data = read_tokenizer_file(file, shown)
    # Absolute, links kept: a cache's snapshot file links into its blobs, and the snapshot path is
    # what still says which model it is (`file_label`) when a command hands the path on.
    return FoundTokenizer(data[0], label, os.path.abspath(file), hashlib.sha256(data[1]).hexdigest())


def file_label(file: str | os.PathLike[str], shown: str | None = None) -> str:
    """What a ``tokenizer.json`` path is, for a person: "Org/Name from the local Hugging Face cache
    (SNAPSHOT)" when it lies in a cache's layout (``models--Org--Name/snapshots/REV/``, as the path a
    command hands on for a model name), else "tokenizer.json at PATH"."""
    path = Path(file)
    snapshot = path.parent
    if path.name == TOKENIZER_FILE and snapshot.parent.name == "snapshots" \
            and snapshot.parent.parent.name.startswith("models--"):
        model = snapshot.parent.parent.name[len("models--"):].replace("--", "/")
        if _looks_like_model_name(model):
            return f"{model} from the local Hugging Face cache ({snapshot})"
    return f"tokenizer.json at {shown if shown is not None else path}"


def find_tokenizer(spec: str | os.PathLike[str]) -> FoundTokenizer:
    """The tokenizer ``spec`` names: a ``tokenizer.json`` file, a directory holding one, or a
    model name ``Org/Name`` in the local Hugging Face cache (a path that exists wins over a
    name). `TokenizerError` (one line, naming the three forms) when it is none of these or
    cannot be read. Never downloads."""
    shown = os.fspath(spec)
    path = Path(shown).expanduser()
    if path.is_file():
        return _read(path, file_label(path, shown), shown)
    if path.is_dir():
        inside = path / TOKENIZER_FILE
        if not inside.is_file():
            raise TokenizerError(f"{shown}: a directory without a {TOKENIZER_FILE}; give {FORMS}")
        return _read(inside, f"model directory {shown}", str(inside))
    if _looks_like_model_name(shown):
        cache = hub_cache()
        file = cached_tokenizer_file(shown, cache)
        if file is None:
            raise TokenizerError(f"{shown}: no such file, and no {TOKENIZER_FILE} for model {shown} in the local "
                                 f"Hugging Face cache ({cache}; nothing is downloaded); give {FORMS}")
        return _read(file, f"{shown} from the local Hugging Face cache ({file.parent})", str(file))
    raise TokenizerError(f"{shown}: no such file or directory; give {FORMS}")


def checked_tokenizer_file(spec: str | os.PathLike[str]) -> str:
    """The ``tokenizer.json`` that ``spec`` names (any of the three forms), read once so a bad one
    fails before any work (`TokenizerError`); what a command hands its workers."""
    return find_tokenizer(spec).path


_BY_MODEL: dict[tuple[str, str], FoundTokenizer | None] = {}
_NOTED: set[tuple[str, str]] = set()


def tokenizer_for_model(model: str) -> FoundTokenizer | None:
    """The tokenizer of ``model`` in the local Hugging Face cache, looked up once per model,
    cache directory and process; None when the cache holds none (or it cannot be read)."""
    key = (str(hub_cache()), model)
    if key not in _BY_MODEL:
        file = cached_tokenizer_file(model, Path(key[0]))
        found = None
        if file is not None:
            try:
                found = _read(file, f"{model} from the local Hugging Face cache ({file.parent})", str(file))
            except TokenizerError:
                found = None
        _BY_MODEL[key] = found
    return _BY_MODEL[key]


def tokenizer_for_models(models: Iterable[str]) -> tuple[FoundTokenizer | None, str | None]:
    """The first of ``models`` (the delivered calls', in order) whose tokenizer is in the local
    cache, else None with the model to name in a note (the first one, when there is one). Only
    hub names (``Org/Name``) are looked up: a served-model name such as ``policy`` names no
    repository, and saying so for every rollout would be noise."""
    named = list(dict.fromkeys(m for m in models if isinstance(m, str) and _looks_like_model_name(m)))
    for model in named:
        found = tokenizer_for_model(model)
        if found is not None:
            return found, None
    return None, (named[0] if named else None)


def missing_model_note(model: str) -> str | None:
    """A one-line note that ``model`` has no tokenizer in the local cache, the first time it is
    asked for this model and cache in this process; None after that (it says so once)."""
    key = (str(hub_cache()), model)
    if key in _NOTED:
        return None
    _NOTED.add(key)
    return (f"no tokenizer for model {model} in the local Hugging Face cache ({key[0]}); nothing was decoded "
            "(give --tokenizer: a tokenizer.json, a model directory or Org/Name)")


def cache_fingerprint() -> dict[str, str]:
    """Model name -> the sha256 of the tokenizer.json the cache gives it, for every model in the
    local cache that has one (what a scan without a given tokenizer may decode with)."""
    cache = hub_cache()
    try:
        dirs = sorted(d.name for d in cache.iterdir() if d.name.startswith("models--"))
    except OSError:
        return {}
    out: dict[str, str] = {}
    for name in dirs:
        model = name[len("models--"):].replace("--", "/")
        file = cached_tokenizer_file(model, cache)
        digest = _file_digest(file) if file is not None else None
        if digest is not None:
            out[model] = digest
    return out


_DIGESTS: dict[tuple[str, int, int], str] = {}


def _file_digest(file: Path) -> str | None:
    """The sha256 of ``file``'s bytes, hashed once per path, size and modification time (a scan
    compares the cache on every table it writes or reads; no tokenizer is parsed for it)."""
    try:
        info = file.stat()
        key = (str(file), info.st_size, info.st_mtime_ns)
        if key not in _DIGESTS:
            digest = hashlib.sha256()
            with open(file, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            _DIGESTS[key] = digest.hexdigest()
        return _DIGESTS[key]
    except OSError:
        return None


def _reset() -> None:
    """Forget every lookup and note (tests)."""
    _BY_MODEL.clear()
    _NOTED.clear()
    _DIGESTS.clear()


__all__ = [
    "FORMS",
    "TOKENIZER_FILE",
    "FoundTokenizer",
    "cache_fingerprint",
    "cached_tokenizer_file",
    "checked_tokenizer_file",
    "file_label",
    "find_tokenizer",
    "hub_cache",
    "missing_model_note",
    "tokenizer_for_model",
    "tokenizer_for_models",
]
