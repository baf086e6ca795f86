"""Reading input files without trusting them: regular files only, bounded zips, and the
acknowledged lines of a store's ``.jsonl`` files.

The rules, each with its reason:

- Only regular files are read. A FIFO blocks a reader forever, ``/dev/zero`` never ends,
  a socket or a device is not a capture. A path given by the user may be a symbolic link
  to a regular file; inside a store, entries that are symbolic links, FIFOs, sockets,
  devices or subdirectories are not read, and every one of them is named in the
  snapshots' ``source_notes`` (see `tokencap.loading.store` for what happens to a
  rollout whose own file was skipped). Files are opened non-blocking and checked with
  ``fstat`` on the open descriptor, so a file swapped for a FIFO after listing cannot
  block either.
- A directory entry whose name is not valid UTF-8 is skipped and noted: a rollout id is
  text, so such a file cannot belong to any rollout, and its name could not be written
  into JSON output.
- A zip is checked against `tokencap.limits` from its central directory before any
  member is inflated (member count, total size, compression ratio), and no member is
  ever read past the size its header declares. Members are streamed: a store ``.jsonl``
  member is split into lines chunk by chunk, so blank lines and a torn tail cost no
  memory.
- The torn tail of a store ``.jsonl`` on disk is found from the end of the file (and a
  sparse file's holes are never read), so a huge unacknowledged tail costs nothing.
"""

from __future__ import annotations

import errno
import io
import mmap
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ..limits import MAX_ZIP_EXPANDED_BYTES, MAX_ZIP_MEMBERS, MAX_ZIP_RATIO, READ_WHOLE_BELOW, ZIP_RATIO_ALLOWANCE_BYTES
from .lines import iter_lines, iter_stream_lines
from .problems import SNIFF_BYTES, LoadError, binary_problem, control_byte_at
from .raw_records import Buffer

_CHUNK = 1 << 20


def pread(fd: int, size: int, offset: int) -> bytes:
    """``os.pread`` where there is one (POSIX); a seek and a read elsewhere."""
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, size)


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def printable(name: str) -> str:
    """A file name as text that can be printed and written to JSON (undecodable bytes escaped)."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", "backslashreplace")


def open_regular(path: str | os.PathLike[str], label: str, *, follow_symlinks: bool = True) -> int:
    """A read-only descriptor of a regular file, or a `LoadError` saying what ``path`` is instead."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise LoadError(f"{label}: no such file or directory") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise LoadError(f"{label}: is a symbolic link; only regular files are read") from None
        raise LoadError(f"{label}: cannot be read ({exc.strerror or exc})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise LoadError(f"{label}: is {kind_of(mode)}, not a regular file; tokencap reads regular files "
                        "(snapshot JSON, entries JSONL, a zip) and capture-store directories")
    return fd


def read_descriptor(fd: int, start: int = 0, end: int | None = None) -> Buffer:
    """Bytes ``start:end`` of an open regular file; a big range is memory-mapped, not copied.

    The parsers read buffers and every token array they produce is its own copy, so a
    mapping is never outlived by what is built from it.
    """
    size = os.fstat(fd).st_size
    end = size if end is None else min(end, size)
    if end <= start:
        return b""
    if end - start < READ_WHOLE_BELOW or start:
        parts, pos = [], start
        while pos < end:
            piece = pread(fd, min(_CHUNK * 8, end - pos), pos)
            if not piece:
                break
            parts.append(piece)
            pos += len(piece)
        return b"".join(parts)
    mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    return memoryview(mapped)[:end] if end < len(mapped) else mapped


def read_regular(path: str | os.PathLike[str], label: str, *, follow_symlinks: bool = True) -> Buffer:
    fd = open_regular(path, label, follow_symlinks=follow_symlinks)
    try:
        return read_descriptor(fd)
    except OSError as exc:
        raise LoadError(f"{label}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def _data_extents(fd: int, size: int) -> list[tuple[int, int]]:
    """The regions of a file that may hold data; a sparse file's holes (zeros) are left out."""
    if not hasattr(os, "SEEK_DATA"):
        return [(0, size)]
    extents: list[tuple[int, int]] = []
    pos = 0
    try:
        while pos < size:
            start = os.lseek(fd, pos, os.SEEK_DATA)
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            extents.append((start, end))
            pos = end
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # ENXIO: no data after pos; anything else: not supported here
            return [(0, size)]
    return extents


def last_newline(fd: int, size: int) -> int:
    """Offset of the last b"\\n" in the file, or -1; read backwards from the end, block by block."""
    for start, end in reversed(_data_extents(fd, size)):
        hi = end
        while hi > start:
            lo = max(start, hi - _CHUNK)
            block = pread(fd, hi - lo, lo)
            found = block.rfind(b"\n")
            if found >= 0:
                return lo + found
            hi = lo
    return -1


def torn_note(name: str, torn: int) -> str:
    return (f"{name}: skipped a torn final line ({torn} bytes after the last newline were never "
            "acknowledged by the writer)")


@dataclass(frozen=True)
class Skipped:
    """A directory entry or zip member that was not read, and why."""

    name: str
    reason: str
    display: str = ""
    attributable: bool = True
    """False when the name cannot be a rollout's file (hidden, empty, not UTF-8)."""

    @property
    def shown(self) -> str:
        return self.display or self.name


@dataclass
class FileSource:
    """A flat set of named files (a directory on disk, or the members of a zip), read safely."""

    label: str
    names: list[str]
    skipped: list[Skipped] = field(default_factory=list)
    packed = False
    """True when someone chose these files (a zip, one uploaded file), so a rollout's store
    siblings may have been left behind; False for a directory the store itself wrote."""

    def read(self, name: str) -> Buffer:
        """The whole file (bounded: a regular file, or a member within the zip limits)."""
        raise NotImplementedError

    def lines(self, name: str, notes: list[str]) -> Iterator[tuple[int, Buffer]]:
        """The acknowledged, non-blank lines of a store ``.jsonl`` with their line numbers; a
        torn tail (bytes after the last newline) is skipped and noted in ``notes``."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class DirectorySource(FileSource):
    def __init__(self, path: Path) -> None:
        label = printable(str(path))
        names: list[str] = []
        skipped: list[Skipped] = []
        try:
            with os.scandir(path) as entries:
                listing = list(entries)
        except FileNotFoundError:
            raise LoadError(f"{label}: no such file or directory") from None
        except OSError as exc:
            raise LoadError(f"{label}: the directory cannot be listed ({exc.strerror or exc})") from None
        for entry in listing:
            shown = printable(entry.name)
            if shown != entry.name:
                skipped.append(Skipped(entry.name, "its name is not valid UTF-8", shown, attributable=False))
                continue
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError as exc:
                skipped.append(Skipped(entry.name, f"it cannot be examined ({exc.strerror or exc})"))
                continue
            if stat.S_ISREG(mode):
                names.append(entry.name)
            else:
                skipped.append(Skipped(entry.name, f"it is {kind_of(mode)}, not a regular file"))
        super().__init__(label, sorted(names), sorted(skipped, key=lambda s: s.name))
        self.path = path

    @classmethod
    def of_names(cls, path: Path, names: list[str], label: str,
                 skipped: list[Skipped] | None = None) -> DirectorySource:
        """Some files of a directory known to be regular when listed, without listing it again
        (one rollout of a run whose directory holds a million files). Every read still
        refuses anything that is no longer a regular file."""
        source = cls.__new__(cls)
        FileSource.__init__(source, label, sorted(names), list(skipped or ()))
        source.path = Path(path)
        return source

    def _open(self, name: str) -> int:
        # Never follows a link: the entry was a regular file when listed, and must still be.
        return open_regular(self.path / name, name, follow_symlinks=False)

    def read(self, name: str) -> Buffer:
        fd = self._open(name)
        try:
            return read_descriptor(fd)
        except OSError as exc:
            raise LoadError(f"{name}: cannot be read ({exc.strerror or exc})") from None
        finally:
            os.close(fd)

    def lines(self, name: str, notes: list[str]) -> Iterator[tuple[int, Buffer]]:
        fd = self._open(name)
        try:
            size = os.fstat(fd).st_size
            cut = last_newline(fd, size) + 1
            _refuse_binary(name, pread(fd, min(cut, SNIFF_BYTES), 0))  # before mapping gigabytes of it
            if cut < size:
                notes.append(torn_note(name, size - cut))
            body = read_descriptor(fd, 0, cut)
        except OSError as exc:
            raise LoadError(f"{name}: cannot be read ({exc.strerror or exc})") from None
        finally:
            os.close(fd)
        return iter_lines(body)


class MemorySource(FileSource):
    """One file's bytes under its name (an uploaded store file): nothing beside it can be read."""

    packed = True

    def __init__(self, label: str, name: str, data: Buffer) -> None:
        super().__init__(label, [name])
        self.data = data

    def read(self, name: str) -> Buffer:
        return self.data

    def lines(self, name: str, notes: list[str]) -> Iterator[tuple[int, Buffer]]:
        view = memoryview(self.data)
        cut = _last_newline_in(view) + 1
        _refuse_binary(name, view[:min(cut, SNIFF_BYTES)])
        if cut < len(view):
            notes.append(torn_note(name, len(view) - cut))
        return iter_lines(view[:cut])


def _refuse_binary(name: str, head: bytes | memoryview) -> None:
    """A store ``.jsonl`` whose acknowledged lines start with binary data is refused at once
    (a torn tail is skipped whatever it holds, so only bytes before the last newline count)."""
    problem = binary_problem(head)
    if problem is not None:
        raise LoadError(f"{name}: {problem}")


def _last_newline_in(view: memoryview) -> int:
    """Offset of the last b"\\n" in a buffer, or -1; read backwards a block at a time."""
    hi = len(view)
    while hi > 0:
        lo = max(0, hi - _CHUNK)
        found = bytes(view[lo:hi]).rfind(b"\n")
        if found >= 0:
            return lo + found
        hi = lo
    return -1


_S_IFMT = 0o170000


class ZipSource(FileSource):
    """The members of a zip, by base name, checked against the limits before anything is inflated."""

    packed = True

    def __init__(self, handle: BinaryIO, size: int, label: str) -> None:
        import zipfile  # here: most commands never open a zip

        try:
            archive = zipfile.ZipFile(handle)
            infos = archive.infolist()
        except Exception as exc:  # noqa: BLE001 -- zipfile raises many kinds (NotImplementedError for
            # a "version needed" it lacks, struct and Unicode errors...) for a hostile archive
            raise LoadError(f"{label}: not a readable zip archive ({_problem(exc)})") from None
        by_name: dict[str, zipfile.ZipInfo] = {}
        skipped: list[Skipped] = []
        for info in infos:
            path = info.filename.replace("\\", "/")
            if path.endswith("/"):
                continue  # a folder entry: its files are members of their own
            # Only base names are used: nothing is extracted, so a member called
            # "../../etc/x" is just a file named "x" here.
            base = path.rsplit("/", 1)[-1]
            kind = (info.external_attr >> 16) & _S_IFMT if info.create_system == 3 else 0
            if not base:
                skipped.append(Skipped(repr(info.filename), "the member has an empty name", attributable=False))
            elif kind and kind != stat.S_IFREG:
                skipped.append(Skipped(path, f"the member is {kind_of(kind)}, not a regular file"))
            elif base.startswith("."):
                skipped.append(Skipped(path, "a hidden member (its name starts with '.', like macOS '._' files)",
                                       attributable=False))
            elif base in by_name:
                raise LoadError(f"{label}: two members are named {base!r}; zip one capture-store directory at a time")
            else:
                by_name[base] = info
        if len(by_name) > MAX_ZIP_MEMBERS:
            raise LoadError(f"{label}: the zip holds {len(by_name)} files; at most {MAX_ZIP_MEMBERS} are read "
                            "(unzip it and open the directory)")
        total = sum(info.file_size for info in by_name.values())
        allowed = min(MAX_ZIP_EXPANDED_BYTES, max(ZIP_RATIO_ALLOWANCE_BYTES, MAX_ZIP_RATIO * size))
        if total > allowed:
            why = (f"the limit is {_size(MAX_ZIP_EXPANDED_BYTES)}" if allowed == MAX_ZIP_EXPANDED_BYTES else
                   f"a zip may expand to {MAX_ZIP_RATIO} times its size ({_size(size)}) or "
                   f"{_size(ZIP_RATIO_ALLOWANCE_BYTES)}, whichever is more")
            raise LoadError(f"{label}: the zip would expand to {_size(total)}; {why} (a zip bomb? If it is a "
                            "real capture, unzip it and open the directory)")
        super().__init__(label, sorted(by_name), sorted(skipped, key=lambda s: s.name))
        self.archive = archive
        self.handle = handle
        self.members = by_name

    def _chunks(self, name: str) -> Iterator[bytes]:
        info = self.members[name]
        where = f"{self.label}: member {info.filename!r}"
        left = info.file_size
        try:
            with self.archive.open(info) as member:
                while True:
                    # Never past the declared size (plus one byte to catch a lying header).
                    piece = member.read(min(_CHUNK, left + 1))
                    if not piece:
                        return
                    if len(piece) > left:
                        raise LoadError(f"{where} is larger than its header says")
                    left -= len(piece)
                    yield piece
        except LoadError:
            raise
        except Exception as exc:  # noqa: BLE001 -- zlib, lzma, CRC, encryption, truncation...
            raise LoadError(f"{where} cannot be read ({_problem(exc)})") from None

    def read(self, name: str) -> bytes:
        return b"".join(self._chunks(name))

    def lines(self, name: str, notes: list[str]) -> Iterator[tuple[int, bytes]]:
        def torn(count: int) -> None:
            notes.append(torn_note(name, count))

        return iter_stream_lines(self._sniffed(name), torn)

    def _sniffed(self, name: str) -> Iterator[bytes]:
        """The member's chunks; binary data in its first bytes is refused as soon as a newline
        after it shows it is acknowledged (a torn tail is skipped whatever it holds)."""
        head, seen, at = b"", 0, -1
        for chunk in self._chunks(name):
            if at < 0 and seen < SNIFF_BYTES:
                head += chunk[:SNIFF_BYTES - seen]
                at = control_byte_at(head)
            if at >= 0 and chunk.find(b"\n", max(0, at - seen)) >= 0:
                raise LoadError(f"{self.label}: member {self.members[name].filename!r}: {binary_problem(head)}")
            seen += len(chunk)
            yield chunk

    def close(self) -> None:
        self.archive.close()
        self.handle.close()


def zip_source(data: Buffer | None, path: str | os.PathLike[str] | None, label: str) -> ZipSource:
    """A zip from bytes (an upload) or from a regular file on disk (read in place, not copied)."""
    if data is not None:
        return ZipSource(io.BytesIO(data), len(data), label)
    assert path is not None, "zip_source needs the zip's bytes or its path"
    fd = open_regular(path, label)
    handle = os.fdopen(fd, "rb")
    try:
        return ZipSource(handle, os.fstat(fd).st_size, label)
    except BaseException:
        handle.close()
        raise


def _problem(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


__all__ = ["DirectorySource", "FileSource", "MemorySource", "Skipped", "ZipSource", "kind_of", "last_newline",
           "open_regular", "pread", "printable", "read_regular", "zip_source"]
