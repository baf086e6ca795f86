"""A big snapshot's text with its token arrays cut out, so the typed decode reads only the rest.

A full-prompt snapshot is almost all token ids: every call repeats its whole context. The
typed decode (msgspec) checks each number it passes over even when it keeps the array as
raw text, and the array parser and the prefix match (`wire`) then read
the same text again. Finding where a flat array ends needs no number checked: its body
holds no '[' and no '"', so it ends at the first ']' after it opens, and the three byte
searches that show this run at memchr speed.

So the token arrays of a big text are cut out first: each ``"prompt_token_ids"`` or
``"generation_token_ids"`` key followed by a flat array has that array replaced by ``[]``
in a small *skeleton*, decoded as the whole text was, and each entry then gets its array's
text back as a zero-copy view of the input (`restore_token_arrays`).

Why this never reads a text differently from the full decode:

- A cut is found by byte search, so it may lie where no token field is (inside a string
  that ends in the key's name, a nested object's key, a duplicate key). Each cut is known
  by where its ``[]`` sits in the skeleton, and an entry's field takes a cut back only when
  the field's raw text is that very ``[]`` (same address). Unless every cut is taken back
  by a token field of a top-level entry, the skeleton is thrown away and the whole text is
  decoded as before: the skeleton then equals the input everywhere but in token fields'
  values, which every entry gets back.
- A cut array's body is not checked here. The array parser or the prefix match reads every
  token array before it is used (simdjson checks the JSON), and an array they cannot read
  goes the exact way, which names the call and the field.
"""

from __future__ import annotations

import mmap
from typing import Any, TypeGuard

import numpy as np

from .raw_records import Buffer, skip_blank

CUT_ABOVE = 1 << 20
"""Texts (bytes) above which token arrays are cut out before the typed decode. Below it the
searches cost more than the numbers they save checking (a zip of small snapshots)."""

TOKEN_ARRAY_FIELDS = ("prompt_token_ids", "generation_token_ids")
_KEY_END = b'_token_ids"'
_KEY_STARTS = (b'"prompt', b'"generation')
_EMPTY = b"[]"


def address(buffer: Any) -> int:
    return np.frombuffer(buffer, dtype=np.uint8).ctypes.data


def may_cut(data: object) -> TypeGuard[bytes | bytearray | mmap.mmap]:
    """Whether `cut_token_arrays` looks at ``data``: a big text in a buffer it can search."""
    return isinstance(data, (bytes, bytearray, mmap.mmap)) and len(data) > CUT_ABOVE


def cut_token_arrays(data: Buffer) -> tuple[bytes, dict[int, memoryview]] | None:
    """The skeleton and, by their offset in it, the cut arrays' texts; None when nothing is cut
    (a small text, a text with no flat token array, or a buffer that cannot be searched)."""
    if not may_cut(data):
        return None
    view = memoryview(data)
    pieces: list[bytes | bytearray] = []
    cuts: dict[int, memoryview] = {}
    size = 0  # of the skeleton so far
    done = 0  # input bytes already in the skeleton
    found = data.find(_KEY_END)
    while found >= 0:
        after = found + len(_KEY_END)
        open_at = -1
        if any(data[found - len(start):found] == start for start in _KEY_STARTS):
            colon = skip_blank(data, after)
            if colon < len(data) and data[colon] == 58:  # ':'
                open_at = skip_blank(data, colon + 1)
                if open_at >= len(data) or data[open_at] != 91:  # '['
                    open_at = -1
        if open_at >= 0:
            close_at = data.find(b"]", open_at)
            if close_at > 0 and data.find(b"[", open_at + 1, close_at) < 0 \
                    and data.find(b'"', open_at + 1, close_at) < 0:
                pieces.append(data[done:open_at])
                size += open_at - done
                cuts[size] = view[open_at:close_at + 1]
                pieces.append(_EMPTY)
                size += len(_EMPTY)
                done = close_at + 1
                found = data.find(_KEY_END, done)
                continue
        found = data.find(_KEY_END, after)
    if not cuts:
        return None
    pieces.append(data[done:])
    return b"".join(pieces), cuts


def restore_token_arrays(skeleton: bytes, cuts: dict[int, memoryview], entries: list[Any]) -> bool:
    """Give each entry (a decoded struct with raw token fields) its cut arrays' texts back.

    True when every cut went back to a token field; False means the skeleton differs from
    the input somewhere else and must not be used (the entries are then partly restored,
    and the caller decodes the input itself)."""
    base = address(skeleton)
    left = len(cuts)
    for entry in entries:
        for name in TOKEN_ARRAY_FIELDS:
            raw = getattr(entry, name)
            if len(raw) != len(_EMPTY):
                continue
            text = cuts.pop(address(raw) - base, None)
            if text is not None:
                setattr(entry, name, text)
                left -= 1
    return left == 0
