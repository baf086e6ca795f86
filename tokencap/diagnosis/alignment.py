"""The alignment of a break's prompt against its predecessor's tokens (SPEC 12.3).

S is the predecessor's full cumulative sequence (length L), P the break's full prompt
(length M). The walk starts past their common prefix; at a mismatch (i0, j0) it
resynchronises at the smallest i >= i0, i <= L - 4, whose window S[i:i+k], k = min(8, L - i),
occurs in P at some j >= j0 (the smallest such j), records the divergence
(S[i0:i], P[j0:j]) and goes on from (i, j) past their common prefix. Without such an i
the divergence runs to the end. The walk stops when S is used up.

Why it is linear: every 8-token window of both sequences is hashed once (eight vector
multiply-adds over a strided view), P's window hashes are sorted once, and each S window
learns, by one vectorised binary search, the last position in P where its hash occurs.
"Does S's window at i occur at some j >= j0" is then ``last[i] >= j0``: finding the
resynchronisation point is one vectorised scan over S from i0, in growing chunks so its
cost is proportional to the span scanned, and the smallest j comes from a binary search in
the window's (sorted) group. A hash match is always confirmed on the tokens, so a
collision can cost time but never give a wrong span. Python loops only per divergence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

WINDOW = 8
"""Tokens compared to resynchronise (SPEC 12.3: k = min(8, L - i))."""
MIN_WINDOW = 4
"""A resynchronisation window is never shorter: i <= L - 4."""

# Odd 64-bit multipliers, one per window column (fixed, so results never vary by run).
_MULTIPLIERS = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
                         0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x94D049BB133111EB, 0xBF58476D1CE4E5B9],
                        dtype=np.uint64)

_FIRST_CHUNK = 64


@dataclass(frozen=True)
class Span:
    """One divergence: S[parent_start:parent_end] stands where P[prompt_start:prompt_end] is.

    ``to_end``: no resynchronisation was found, so it runs to the end of both.
    """

    parent_start: int
    parent_end: int
    prompt_start: int
    prompt_end: int
    to_end: bool


@dataclass(frozen=True)
class Alignment:
    """``agree`` (the common prefix), the first ``limit`` divergences and how many there are."""

    agree: int
    spans: tuple[Span, ...]
    total: int

    @property
    def more(self) -> int:
        """Divergences found beyond the listed ones."""
        return self.total - len(self.spans)


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """The length of the longest common prefix of ``a`` and ``b``.

    Compared in chunks that grow fourfold, so the cost follows the prefix found, not the
    arrays' lengths (most candidates of a predecessor search part early)."""
    n = min(int(a.size), int(b.size))
    start, step = 0, _FIRST_CHUNK
    while start < n:
        end = min(n, start + step)
        differ = np.flatnonzero(a[start:end] != b[start:end])
        if differ.size:
            return start + int(differ[0])
        start, step = end, step * 4
    return n


def window_hashes(x: np.ndarray, k: int = WINDOW) -> np.ndarray:
    """A 64-bit hash of every ``k``-token window of ``x`` (``x.size - k + 1`` of them)."""
    n = int(x.size) - k + 1
    out = np.zeros(max(n, 0), dtype=np.uint64)
    if n <= 0:
        return out
    x = np.asarray(x, dtype=np.uint64)
    for c in range(k):  # k vector passes; uint64 arithmetic wraps, which is what a hash wants
        out += x[c:c + n] * _MULTIPLIERS[c]
    out ^= out >> np.uint64(29)
    return out


class _WindowIndex:
    """Where each 8-token window of S (from ``base_i``) occurs in P (from ``base_j``)."""

    def __init__(self, s: np.ndarray, p: np.ndarray, base_i: int, base_j: int) -> None:
        self.s, self.p, self.base_i = s, p, base_i
        hs = window_hashes(s[base_i:])
        hp = window_hashes(p[base_j:])
        order = np.argsort(hp, kind="stable")  # stable: each hash's positions stay ascending
        sorted_hp = hp[order]
        self.positions = order.astype(np.int64) + base_j
        self.lo = np.searchsorted(sorted_hp, hs, side="left")
        self.hi = np.searchsorted(sorted_hp, hs, side="right")
        last = np.full(hs.size, -1, dtype=np.int64)
        present = self.hi > self.lo
        last[present] = self.positions[self.hi[present] - 1]
        self.last = last  # the last position in P of S's window at base_i + index, or -1

    def find(self, i0: int, j0: int) -> tuple[int, int] | None:
        """The smallest i >= i0 (i <= L - 8) whose window occurs in P at some j >= j0, with
        the smallest such j; None when there is none."""
        start, n, step = i0 - self.base_i, int(self.last.size), _FIRST_CHUNK
        while start < n:
            end = min(n, start + step)
            for offset in np.flatnonzero(self.last[start:end] >= j0).tolist():
                k = start + offset
                i = self.base_i + k
                group = self.positions[self.lo[k]:self.hi[k]]
                window = self.s[i:i + WINDOW]
                for j in group[np.searchsorted(group, j0):].tolist():
                    if np.array_equal(self.p[j:j + WINDOW], window):  # confirm: a hash proves nothing
                        return i, j
            start, step = end, step * 4
        return None


def _find_tail(s: np.ndarray, p: np.ndarray, i0: int, j0: int) -> tuple[int, int] | None:
    """Resynchronisation on S's last windows, shorter than 8 (k = L - i, 4 <= k < 8)."""
    length = int(s.size)
    for i in range(max(i0, length - WINDOW + 1), length - MIN_WINDOW + 1):
        window = s[i:]
        k = int(window.size)
        region = p[j0:]
        if region.size < k:
            continue
        hits = np.flatnonzero(region[:region.size - k + 1] == window[0])
        for c in range(1, k):
            if not hits.size:
                break
            hits = hits[region[hits + c] == window[c]]
        if hits.size:
            return i, j0 + int(hits[0])
    return None


def align(s: np.ndarray, p: np.ndarray, limit: int | None = 32) -> Alignment:
    """Walk ``s`` (the predecessor's sequence) against ``p`` (the break's prompt), SPEC 12.3.

    Lists at most ``limit`` divergences (all with None); ``Alignment.total`` counts every
    one. Linear in ``s.size + p.size`` plus a sort of P's windows; neither array is changed.
    """
    length, m = int(s.size), int(p.size)
    agree = common_prefix(s, p)
    spans: list[Span] = []
    total = 0
    index: _WindowIndex | None = None
    i = j = agree
    while i < length:
        i0, j0 = i, j
        found = None
        if i0 <= length - MIN_WINDOW and j0 < m:
            if i0 <= length - WINDOW:
                if index is None:
                    index = _WindowIndex(s, p, agree, agree)
                found = index.find(i0, j0)
            if found is None:
                found = _find_tail(s, p, i0, j0)
        total += 1
        if found is None:
            if limit is None or len(spans) < limit:
                spans.append(Span(i0, length, j0, m, True))
            break
        i1, j1 = found
        if limit is None or len(spans) < limit:
            spans.append(Span(i0, i1, j0, j1, False))
        run = common_prefix(s[i1:], p[j1:])
        i, j = i1 + run, j1 + run
    return Alignment(agree, tuple(spans), total)


__all__ = ["Alignment", "MIN_WINDOW", "Span", "WINDOW", "align", "common_prefix", "window_hashes"]
