"""The non-blank lines of a JSON-lines text, with their 1-based line numbers.

From a buffer they come as zero-copy views (`iter_lines`) or offsets (`line_spans`); from a
text that arrives in chunks (`iter_stream_lines`) as bytes, the unacknowledged tail after the
last newline dropped. Blank stretches are crossed at C speed, never a Python step per line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from .raw_records import Buffer

NON_BLANK = re.compile(rb"[^ \t\r\n]")

_NEWLINE = re.compile(rb"\n")
_BLOCK = 1 << 20


def _count_newlines(view: memoryview, start: int, end: int) -> tuple[int, int]:
    """(newlines in ``view[start:end]``, offset of the last one or -1), a block at a time."""
    count, last = 0, -1
    for lo in range(start, end, _BLOCK):
        block = bytes(view[lo: min(end, lo + _BLOCK)])
        found = block.count(b"\n")
        if found:
            count += found
            last = lo + block.rfind(b"\n")
    return count, last


def line_of(data: Buffer, byte_offset: int) -> int:
    """The 1-based line of ``data`` that holds ``byte_offset``."""
    view = memoryview(data)
    return _count_newlines(view, 0, min(byte_offset, len(view)))[0] + 1


def is_blank(data: Buffer) -> bool:
    """True for empty or whitespace-only input (stops at the first real byte)."""
    return NON_BLANK.search(data) is None


def spans_lines(data: Buffer) -> bool:
    """Whether the text's non-blank content runs over more than one line."""
    start = NON_BLANK.search(data)
    newline = _NEWLINE.search(data, start.start()) if start is not None else None
    return newline is not None and NON_BLANK.search(data, newline.end()) is not None


def iter_lines(data: Buffer, first_line: int = 1
               ) -> Iterator[tuple[int, memoryview]]:
    """Non-blank lines as zero-copy views, with 1-based line numbers.

    Blank stretches are crossed by one regex search and counted with ``bytes.count`` (C
    speed, a block at a time), never by a Python step per line: a flood of blank lines
    costs what reading it costs.
    """
    view = _byte_view(data)
    for line, start, end in line_spans(view, first_line):
        yield line, view[start:end]


def _byte_view(data: Buffer) -> memoryview:
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view


def line_spans(data: Buffer, first_line: int = 1
               ) -> Iterator[tuple[int, int, int]]:
    """`iter_lines` as (line number, start offset, end offset) of each non-blank line."""
    view = _byte_view(data)
    n, pos, line = len(view), 0, first_line
    while pos < n:
        found = NON_BLANK.search(view, pos)
        if found is None:
            return
        first = found.start()
        start = pos
        if first > pos:  # a blank stretch: count its newlines
            skipped, last = _count_newlines(view, pos, first)
            line += skipped
            if last >= 0:
                start = last + 1
        newline = _NEWLINE.search(view, first)
        end = newline.start() if newline is not None else n
        yield line, start, end
        pos, line = end + 1, line + 1


def iter_stream_lines(chunks: Iterable[bytes], on_torn: Callable[[int], None]) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of a text that arrives in chunks, each line its own bytes object.

    Only complete lines (ended by a newline) are yielded: the bytes after the last newline
    are reported to ``on_torn`` (their count) and dropped -- a store's unacknowledged
    tail. A blank stretch is never held in memory; a line with content is held until its
    newline arrives.
    """
    line = 1
    pending: list[bytes] = []  # the unfinished line, once it has a non-blank byte
    pending_blank = 0  # bytes of the unfinished line that were blank (not kept)
    for chunk in chunks:
        first = chunk.find(b"\n")
        if first < 0:
            if pending or NON_BLANK.search(chunk):
                pending.append(chunk)
            else:
                pending_blank += len(chunk)
            continue
        head = chunk[:first]
        if pending:
            pending.append(head)
            yield line, b"".join(pending)
        elif NON_BLANK.search(head):
            yield line, head
        line += 1
        cut = chunk.rfind(b"\n")
        if cut > first:
            body = memoryview(chunk)[first + 1: cut + 1]
            for number, text in iter_lines(body, line):
                yield number, bytes(text)  # its own copy: the chunk is not kept alive
            line += chunk.count(b"\n", first + 1, cut + 1)
        tail = chunk[cut + 1:]
        pending, pending_blank = ([tail], 0) if NON_BLANK.search(tail) else ([], len(tail))
    torn = pending_blank + sum(len(piece) for piece in pending)
    if torn:
        on_torn(torn)


__all__ = ["NON_BLANK", "is_blank", "iter_lines", "iter_stream_lines", "line_of", "line_spans", "spans_lines"]
