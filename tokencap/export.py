"""Writing build results as JSON / JSONL, fast and without a Python object per token.

The running prompts of a delivered chain are prefixes of one sequence, so their JSON text
is a prefix of that sequence's JSON text. The sequence is rendered once (orjson, straight
from numpy) and each item's ``prompt_token_ids`` is written as a slice of that text: an
85 MB response costs one render of the final context plus memory copies.

Every writer here produces the same bytes for the same result, so the app's downloads are
exactly what `tokencap build` writes.
"""

from __future__ import annotations

import io
import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson

from .interrupts import critical, note_committed
from .rollout import RolloutResult

try:
    import fcntl
except ImportError:  # not POSIX: no part-file locks, so no stale-part clean-up either
    fcntl = None  # type: ignore[assignment]
from .tokens import TokenArray

_OPTS = orjson.OPT_SERIALIZE_NUMPY


def _default(obj: Any) -> Any:
    if isinstance(obj, TokenArray):
        return obj.view(np.ndarray)
    if isinstance(obj, np.ndarray):
        return np.ascontiguousarray(obj).view(np.ndarray)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def dumps(value: Any) -> bytes:
    """Compact JSON with numpy arrays written as arrays."""
    return orjson.dumps(value, default=_default, option=_OPTS)


class _PrefixText:
    """The JSON text of one token buffer, rendered once, sliced per prefix length."""

    def __init__(self, tokens: np.ndarray) -> None:
        self.text = dumps(tokens)
        raw = np.frombuffer(self.text, dtype=np.uint8)
        self.commas = np.flatnonzero(raw == ord(","))
        self.size = int(tokens.size)

    def write_prefix(self, out: BinaryIO, length: int) -> None:
        if length == 0:
            out.write(b"[]")
        elif length == self.size:
            out.write(self.text)
        else:
            out.write(memoryview(self.text)[: int(self.commas[length - 1])])
            out.write(b"]")


def _prefix_owner(arr: Any) -> tuple[int, np.ndarray] | None:
    """(key, buffer) when ``arr`` is a numpy view starting at the start of a larger buffer."""
    if not isinstance(arr, np.ndarray) or arr.base is None or not isinstance(arr.base, np.ndarray):
        return None
    base = arr.base
    if base.dtype != arr.dtype or base.ndim != 1 or \
            base.__array_interface__["data"][0] != arr.__array_interface__["data"][0]:
        return None
    return id(base), base


def write_response(out: BinaryIO, response: Mapping[str, Any]) -> None:
    """Write a Responses payload as compact JSON, streaming the running prompts."""
    output = response.get("output", [])
    # Render each shared buffer once, only as far as the longest prompt that uses it.
    needed: dict[int, tuple[np.ndarray, int]] = {}
    owners = [_prefix_owner(item.get("prompt_token_ids")) if isinstance(item, Mapping) else None for item in output]
    for item, owner in zip(output, owners, strict=True):
        if owner is not None:
            key, base = owner
            length = int(item["prompt_token_ids"].size)
            if length > needed.get(key, (base, 0))[1]:
                needed[key] = (base, length)
    texts = {key: _PrefixText(base[:length]) for key, (base, length) in needed.items()}

    head = {k: v for k, v in response.items() if k != "output"}
    head_text = dumps(head)
    out.write(head_text[:-1])
    out.write(b',"output":[' if len(head_text) > 2 else b'"output":[')
    for i, (item, owner) in enumerate(zip(output, owners, strict=True)):
        if i:
            out.write(b",")
        if owner is None or owner[0] not in texts:
            out.write(dumps(item))
            continue
        rest = dumps({k: v for k, v in item.items() if k != "prompt_token_ids"})
        out.write(b'{"prompt_token_ids":')
        texts[owner[0]].write_prefix(out, int(item["prompt_token_ids"].size))
        if len(rest) > 2:
            out.write(b",")
            out.write(memoryview(rest)[1:])
        else:
            out.write(b"}")
    out.write(b"]}")


def write_summary(out: BinaryIO, result: RolloutResult) -> None:
    """One build result as a JSON object: rollout_id, mask_sample, mask_reasons, metrics, rebuilt_response."""
    # The head by hand, not `result.summary()`: that would build the JSON-native response,
    # and the writer streams the array payload instead (same bytes, no Python int per token).
    head = dumps({"rollout_id": result.rollout_id, "mask_sample": result.mask_sample,
                  "mask_reasons": list(result.mask_reasons), "metrics": result.metrics})
    response = result.payload
    out.write(head[:-1])
    out.write(b',"rebuilt_response":')
    if response is None:
        out.write(b"null")
    else:
        write_response(out, response)
    out.write(b"}")


def write_results(out: BinaryIO, results: Iterable[RolloutResult], *, jsonl: bool) -> None:
    """One JSON object (``jsonl=False``, exactly one result) or one object per line."""
    results = list(results)
    if not jsonl and len(results) != 1:
        raise ValueError(f"a JSON document holds one rollout; got {len(results)} (write JSONL instead)")
    for result in results:
        write_summary(out, result)
        out.write(b"\n")


def results_bytes(results: Iterable[RolloutResult], *, jsonl: bool) -> bytes:
    buffer = io.BytesIO()
    write_results(buffer, results, jsonl=jsonl)
    return buffer.getvalue()


def response_bytes(response: Mapping[str, Any]) -> bytes:
    buffer = io.BytesIO()
    write_response(buffer, response)
    buffer.write(b"\n")
    return buffer.getvalue()


_PART_SUFFIX = ".part"
_PART_LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789_"
_PART_RANDOM = "[a-z0-9_]{8}"  # what `_create_part` (like tempfile before it) puts between prefix and suffix


class OutputPathError(OSError):
    """An output path (``-o``) that cannot be written: says which and why, in plain words.

    An `OSError`, so callers that already handle a failed write (the app's disk export) handle it.
    """


def check_output_path(path: str | os.PathLike[str]) -> None:
    """Raise `OutputPathError` unless `write_atomically` can put a file at ``path``.

    For commands that write: call it before any work, so a bad ``-o`` costs nothing and
    is blamed on itself. Checks that the directory exists, is a directory and is writable,
    and that ``path`` is not a directory or another non-regular file (a device or a pipe
    would be replaced by the rename, not written into).
    """
    text = os.fspath(path)
    if not text or text.endswith(os.sep):
        raise OutputPathError(f"cannot write {text!r}: that names no file; give a file name")
    real = os.fspath(output_target(text))
    if real != text:  # a symbolic link: its target is written, so its target's directory must do
        try:
            os.stat(text)
        except FileNotFoundError:
            if not os.path.isdir(os.path.dirname(real) or "."):
                raise OutputPathError(f"cannot write {text}: it is a symbolic link to {real}, whose directory "
                                      "does not exist") from None
        except OSError as exc:
            raise OutputPathError(f"cannot write {text}: {exc.strerror or exc}") from None
    directory = os.path.dirname(real) or "."
    if not os.path.exists(directory):
        raise OutputPathError(f"cannot write {text}: directory {directory} does not exist")
    if not os.path.isdir(directory):
        raise OutputPathError(f"cannot write {text}: {directory} is not a directory")
    try:
        st = os.stat(text)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputPathError(f"cannot write {text}: {exc.strerror or exc}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputPathError(f"cannot write {text}: it is a directory; give a file name inside it")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OutputPathError(f"cannot write {text}: it is not a regular file (a device or a pipe); "
                              "give a file name")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputPathError(f"cannot write {text}: directory {directory} is not writable")


def output_target(path: str | os.PathLike[str]) -> Path:
    """The file an output at ``path`` is: the target of a symbolic link (followed to the end),
    else ``path`` itself. The rename goes there, so a link given as ``-o`` is written through,
    as a plain ``open`` would write it, never replaced by a regular file."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)


def _create_part(target: Path) -> tuple[int, Path]:
    """A new, empty part file beside ``target``, created as a plain ``open`` would create ``target``.

    Mode 0666 less the umask (the kernel applies it), or the mode of the file it will
    replace: so the output's permissions do not depend on it having been written atomically.
    """
    directory = target.parent if str(target.parent) else Path(".")
    try:
        keep_mode = stat.S_IMODE(os.stat(target).st_mode) if target.is_file() else None
    except OSError:
        keep_mode = None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        # Unguessable enough to never meet another writer's name (O_EXCL catches the rest);
        # os.urandom, not `secrets`, which would import `random` and more for eight letters.
        random = "".join(_PART_LETTERS[byte % len(_PART_LETTERS)] for byte in os.urandom(8))
        part = directory / f".{target.name}.{random}{_PART_SUFFIX}"
        try:
            fd = os.open(part, flags, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:
            reason = f"{exc.strerror or exc} (creating {part.name} in {directory})"
            error = OutputPathError(f"cannot write {os.fspath(target)}: {reason}")
            error.strerror = reason  # what a caller that names the path itself shows
            raise error from None
        if keep_mode is not None:
            os.fchmod(fd, keep_mode)
        return fd, part
    raise OutputPathError(f"cannot write {os.fspath(target)}: no free part-file name in {directory}")


def _part_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"\.{re.escape(name)}\.{_PART_RANDOM}{re.escape(_PART_SUFFIX)}")


def remove_stale_parts(path: str | os.PathLike[str]) -> list[str]:
    """Remove part files that an earlier, killed write to ``path`` left beside it.

    Only files named exactly like this tool's part files for ``path`` are candidates, and
    one is removed only when no process holds its lock: a live writer keeps an exclusive
    ``flock`` on its part file until it renames or removes it, and the kernel drops the
    lock when the writer dies, even by SIGKILL. Returns the names removed.
    """
    if fcntl is None:
        return []
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    pattern = _part_pattern(target.name)
    removed = []
    try:
        names = [n for n in os.listdir(directory) if pattern.fullmatch(n)]
    except OSError:
        return []
    for name in names:
        candidate = directory / name
        try:
            fd = os.open(candidate, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live writer holds it
            os.unlink(candidate)
            removed.append(name)
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


def write_atomically(path: str | os.PathLike[str], write: Any) -> None:
    """Run ``write(handle)`` into a part file beside ``path``, then rename it into place.

    A failure or an interrupt half way (SIGINT, or SIGTERM under
    `tokencap.interrupts.handling_interrupts`) leaves nothing at ``path`` and removes the
    part file. A part file a killed earlier write left behind (SIGKILL cannot be caught)
    is removed by the next write to the same ``path``. The rename runs in
    `tokencap.interrupts.critical`, so it is never cut in two: once it is done the output
    is recorded as committed, and an interrupt after that does not undo the run. The
    output gets the permissions a plain ``open`` would give it (see `_create_part`). A
    symbolic link at ``path`` is written through: its target is replaced (`output_target`).
    """
    target = output_target(path)
    remove_stale_parts(target)
    fd: int | None = None
    tmp: Path | None = None
    committed = False
    try:
        # Held back while the part file is made: an interrupt that landed between its
        # creation and the names below would leave a part file nobody knows to remove.
        with critical():
            fd, tmp = _create_part(target)
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # "a live writer owns this part file" (see remove_stale_parts)
            except OSError:
                pass  # a file system without locks: the write still works, only clean-up is weaker
        handle_fd, fd = fd, None  # from here the handle owns it and closes it
        with os.fdopen(handle_fd, "wb", buffering=1 << 20) as handle:
            write(handle)
            handle.flush()
            with critical():
                os.replace(tmp, target)
                committed = True
                note_committed(target)
    except BaseException:
        if fd is not None:
            os.close(fd)
        if not committed and tmp is not None:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        raise


def loss_mask_csv(mask: Any) -> bytes:
    """A loss mask as CSV: position, token_id, mask, log_prob, provenance, call_id."""
    from .lossmask import GENERATED, INTERSTITIAL

    owners = mask.owner_index()
    names = np.array(("",) + mask.call_ids, dtype=object)
    labels = np.array(["prompt", "interstitial", "generated"], dtype=object)
    kind = np.where(mask.provenance == GENERATED, 2, np.where(mask.provenance == INTERSTITIAL, 1, 0))
    import pandas as pd

    frame = pd.DataFrame({
        "position": np.arange(len(mask)),
        "token_id": mask.token_ids.view(np.ndarray),
        "mask": mask.mask,
        "log_prob": mask.log_probs,
        "provenance": labels[kind],
        "call_id": names[owners + 1],
    })
    return frame.to_csv(index=False).encode()
