"""The token-sequence digest: the wire contract that links a child call to its parent.

It must match every other implementation bit for bit (SPEC 2.4), so the byte layout is
fixed: a domain tag, then -- for a non-empty sequence only -- a version byte, the length
and every id, all as unsigned 64-bit big-endian integers.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable

import numpy as np

DIGEST_DOMAIN = b"nemo-gym-tokens"
DIGEST_VERSION = 1

_BIG_ENDIAN_U64 = np.dtype(">u8")


def _big_endian(ids: np.ndarray) -> memoryview:
    """The ids as contiguous big-endian u64 bytes (one vectorised copy; SHA reads the buffer)."""
    arr = np.ascontiguousarray(ids.astype(_BIG_ENDIAN_U64, copy=False))
    return memoryview(arr.view(np.ndarray)).cast("B")


def compute_digest(token_ids: Iterable[int] | np.ndarray) -> str:
    """Lowercase hex SHA-256 of a token sequence in the shared wire layout.

    Accepts a numpy array (hashed without a Python object per token) or any iterable of
    ints. The empty sequence hashes the domain tag alone, so it carries no length header.
    """
    ids = token_ids if isinstance(token_ids, np.ndarray) else np.asarray(list(token_ids), dtype=np.uint64)
    hasher = hashlib.sha256(DIGEST_DOMAIN)
    if ids.size:
        hasher.update(struct.pack(">BQ", DIGEST_VERSION, ids.size))
        # astype to big-endian u64 is a single vectorised copy; tobytes hands SHA one buffer.
        hasher.update(_big_endian(ids))
    return hasher.hexdigest()


def digest_of_parts(*parts: np.ndarray) -> str:
    """`compute_digest` of the concatenation of ``parts``, without building it."""
    total = sum(int(p.size) for p in parts)
    hasher = hashlib.sha256(DIGEST_DOMAIN)
    if total:
        hasher.update(struct.pack(">BQ", DIGEST_VERSION, total))
        for part in parts:
            if part.size:
                hasher.update(_big_endian(part))
    return hasher.hexdigest()
