"""The token-sequence digest: the wire contract that links a child call to its parent.

It must match every other implementation bit for bit (docs/contract.md#digest), so the byte layout is
fixed: a domain tag, then -- for a non-empty sequence only -- a version byte, the length
and every id, all as unsigned 64-bit big-endian integers.
"""

from __future__ import annotations

import hashlib
import struct
import threading
from collections.abc import Iterable

import numpy as np

from .tokens import is_shared_buffer

DIGEST_DOMAIN = b"nemo-gym-tokens"
DIGEST_VERSION = 1

_BIG_ENDIAN_U64 = np.dtype(">u8")


def _big_endian(ids: np.ndarray) -> memoryview:
    """The ids' bytes as contiguous big-endian u64 (one vectorised copy; SHA reads the buffer)."""
    arr = ids.astype(_BIG_ENDIAN_U64)  # a new array, C-contiguous whatever the input's strides
    return (arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)).data


_U64_LIMIT = 1 << 64


def _token_error(pos: int, value: object) -> ValueError:
    if isinstance(value, np.generic):
        value = value.item()
    return ValueError(f"token id at position {pos} is {value!r}; ids must be integers in [0, 2^64) "
                      "(booleans, floats and strings are not token ids)")


def checked_token_ids(token_ids: Iterable[int] | np.ndarray) -> np.ndarray:
    """``token_ids`` as a uint64 array, or `ValueError` naming the first element that is not
    an integer in [0, 2^64) (docs/contract.md#digest).

    Nothing is coerced: a digest of ``[1.5]`` or ``["1"]`` that silently hashed ``[1]``
    would "verify" a parent link against tokens nobody sampled, and a bool is a Python int
    only by accident of history.
    """
    if isinstance(token_ids, np.ndarray):
        arr = token_ids
        if arr.ndim != 1:
            raise ValueError(f"token ids must be a flat sequence; got an array of shape {arr.shape}")
        kind = arr.dtype.kind
        if kind == "u":
            return arr
        if kind == "i":
            if arr.size and arr.min() < 0:
                pos = int(np.argmax(arr < 0))
                raise _token_error(pos, int(arr[pos]))
            return arr
        if arr.size == 0:
            return np.zeros(0, dtype=np.uint64)
        if kind != "O":
            raise _token_error(0, arr[0].item())
        values: list = arr.tolist()
    elif isinstance(token_ids, (str, bytes, bytearray)):
        raise ValueError(f"token ids must be a sequence of integers, got {type(token_ids).__name__} {token_ids!r:.60}")
    else:
        values = list(token_ids)
    for pos, tok in enumerate(values):
        if type(tok) is int:  # the common case, checked without isinstance chains
            if not 0 <= tok < _U64_LIMIT:
                raise _token_error(pos, tok)
        elif isinstance(tok, (bool, np.bool_)) or not isinstance(tok, (int, np.integer)):
            raise _token_error(pos, tok)
        elif not 0 <= int(tok) < _U64_LIMIT:
            raise _token_error(pos, int(tok))
    return np.array(values, dtype=np.uint64) if values else np.zeros(0, dtype=np.uint64)


def compute_digest(token_ids: Iterable[int] | np.ndarray) -> str:
    """Lowercase hex SHA-256 of a token sequence in the shared wire layout.

    Accepts a numpy array of an integer dtype (hashed without a Python object per token)
    or any iterable of ints. Any element that is not an integer in [0, 2^64) -- a bool, a
    float, a string, a negative or too large number -- raises `ValueError` naming its
    position and value. The empty sequence hashes the domain tag alone, so it carries no
    length header.
    """
    ids = checked_token_ids(token_ids)
    hasher = hashlib.sha256(DIGEST_DOMAIN)
    if ids.size:
        hasher.update(struct.pack(">BQ", DIGEST_VERSION, ids.size))
        # astype to big-endian u64 is a single vectorised copy; SHA reads the buffer.
        hasher.update(_big_endian(ids))
    return hasher.hexdigest()


_SWAP_ON_THE_FLY_BELOW = 1 << 13
"""Tokens (64 KiB) below which a swapped copy of the sequence itself is cheaper than the lookup."""


class SwappedBuffers:
    """Big-endian copies of shared token buffers, made once per buffer.

    A rollout's sequences are views into a few shared buffers (see `tokencap.tokens`), so
    hashing each call's whole sequence would byte-swap the same tokens once per call. This
    swaps each underlying buffer once and hashes views of the copy. Use one instance per
    pass over buffers that no longer change; it is safe to share between threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._copies: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def big_endian(self, ids: np.ndarray) -> memoryview:
        # A short sequence is swapped on the fly: copying it costs less than finding its
        # lane's cached copy.
        if ids.size < _SWAP_ON_THE_FLY_BELOW:
            return _big_endian(ids)
        owner = ids
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        # Only shared lane buffers are worth a cached copy; a call's private array is
        # swapped on the fly and freed, so no per-call copy outlives its hash.
        if owner is ids or not is_shared_buffer(owner) or not ids.flags.c_contiguous:
            return _big_endian(ids)
        with self._lock:
            entry = self._copies.get(id(owner))
            if entry is None:
                entry = (owner, owner.view(np.ndarray).astype(_BIG_ENDIAN_U64))  # a plain copy, not a lane
                self._copies[id(owner)] = entry
        offset = (ids.__array_interface__["data"][0] - owner.__array_interface__["data"][0]) // ids.itemsize
        return entry[1][offset: offset + ids.size].data.cast("B")


def digest_of_parts(*parts: np.ndarray, swapped: SwappedBuffers | None = None) -> str:
    """`compute_digest` of the concatenation of ``parts``, without building it."""
    total = sum(int(p.size) for p in parts)
    hasher = hashlib.sha256(DIGEST_DOMAIN)
    if total:
        hasher.update(struct.pack(">BQ", DIGEST_VERSION, total))
        for part in parts:
            if part.size:
                hasher.update(swapped.big_endian(part) if swapped is not None else _big_endian(part))
    return hasher.hexdigest()
