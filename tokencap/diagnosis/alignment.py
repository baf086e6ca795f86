"""The alignment of a break's prompt against its predecessor's tokens (docs/contract.md#alignment).

S is the predecessor's full cumulative sequence (length L), P the break's full prompt
(length M). The walk starts past their common prefix; at a mismatch (i0, j0) it
resynchronises at the smallest i >= i0, i <= L - 4, whose window S[i:i+k], k = min(8, L - i),
occurs in P at some j >= j0 (the smallest such j), records the divergence
(S[i0:i], P[j0:j]) and goes on from (i, j) past their common prefix. Without such an i
the divergence runs to the end. The walk stops when S is used up.

Why it is linear: every 8-token window of both sequences is hashed once (eight vector
multiply-adds), and P's windows go into a direct-address table that tells, for any S
window, the last position in P where its hash occurs (`_WindowIndex`; no sort but of the
few windows whose slot another hash took). "Does S's window at i occur at some j >= j0" is
then ``last >= j0``: the resynchronisation point is found by a vectorised scan over S from
i0, and the smallest such j by a vectorised scan over P from j0, both in chunks that grow
fourfold, so each costs what it scans; the walk consumes what both scans pass over, so
the whole walk is linear in L + M. A hash match is always confirmed on the tokens: a
collision can cost time but never give a wrong span. Python loops only per divergence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

WINDOW = 8
"""Tokens compared to resynchronise (docs/contract.md#alignment: k = min(8, L - i))."""
MIN_WINDOW = 4
"""A resynchronisation window is never shorter: i <= L - 4."""

# Odd 64-bit multipliers, one per window column (fixed, so results never vary by run).
_MULTIPLIERS = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
                         0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x94D049BB133111EB, 0xBF58476D1CE4E5B9],
                        dtype=np.uint64)

_FIRST_CHUNK = 16
_PREFIX_CHUNK = 64
_BLOCK = 1024


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
    start, step = 0, _PREFIX_CHUNK
    while start < n:
        end = min(n, start + step)
        differ = a[start:end] != b[start:end]
        first = int(differ.argmax())
        if differ[first]:
            return start + first
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
    """Where the 8-token windows of S (from ``base_i``) occur in P (from ``base_j``).

    Built without sorting P: a direct-address table, of at least eight slots per window,
    keeps in each slot the last P window that falls there (checked, since numpy does not
    promise which of repeated writes wins). A window whose slot another hash won is
    *evicted*; the few evicted ones (about one in sixteen) are sorted on their own and
    their slots marked, so only a query landing on a marked slot searches them. A query is
    a couple of vector lookups, made in blocks for the S windows a walk scans.
    """

    def __init__(self, s: np.ndarray, p: np.ndarray, base_i: int, base_j: int) -> None:
        self.s, self.p, self.base_i, self.base_j = s, p, base_i, base_j
        self.hs = window_hashes(s[base_i:])
        hp = self.hp = window_hashes(p[base_j:])
        n = int(hp.size)
        bits = max(8, (8 * max(n, 1)).bit_length())
        self.shift = np.uint64(64 - bits)
        slots = (hp >> self.shift).astype(np.intp)
        table = np.full(1 << bits, -1, dtype=np.int64)
        positions = np.arange(n, dtype=np.int64)
        table[slots] = positions  # in practice the last write of a slot wins, but numpy does not promise it:
        won = table[slots]
        if (won < positions).any():  # so check, and take the guaranteed (slower) way if it did not
            np.maximum.at(table, slots, positions)
            won = table[slots]
        self.table = table
        evicted = np.flatnonzero(hp[won] != hp)
        self.crowded = np.zeros(1 << bits, dtype=bool)  # slots that hold an evicted window
        self.crowded[slots[evicted]] = True
        # Evicted windows: the last position of each distinct hash, sorted by hash.
        order = np.lexsort((evicted, hp[evicted]))
        ev_hash, ev_pos = hp[evicted][order], evicted[order]
        keep = np.ones(ev_hash.size, dtype=bool)
        keep[:-1] = ev_hash[1:] != ev_hash[:-1]
        self.ev_hash, self.ev_last = ev_hash[keep], ev_pos[keep]
        self.last = np.empty(self.hs.size, dtype=np.int64)  # per S window: its last position in P, or -1
        self.filled = 0

    def _ensure(self, end: int) -> None:
        """`last` filled for S's windows up to ``end`` at least (in doubling blocks)."""
        if end > self.filled:
            new = min(int(self.hs.size), max(end, 2 * self.filled, _BLOCK))
            self.last[self.filled:new] = self._last(self.filled, new)
            self.filled = new

    def _last(self, start: int, end: int) -> np.ndarray:
        """The last position in P (absolute) of S's windows ``start:end`` (index into ``hs``), or -1."""
        h = self.hs[start:end]
        if not self.hp.size:
            return np.full(h.size, -1, dtype=np.int64)
        slots = (h >> self.shift).astype(np.intp)
        pos = self.table[slots]
        won = (pos >= 0) & (self.hp[np.maximum(pos, 0)] == h)
        last = np.where(won, pos, -1)
        if self.ev_hash.size:
            ask = np.flatnonzero(~won & self.crowded[slots])  # only these can be evicted windows
            if ask.size:
                at = np.minimum(np.searchsorted(self.ev_hash, h[ask]), self.ev_hash.size - 1)
                found = self.ev_hash[at] == h[ask]
                last[ask[found]] = self.ev_last[at[found]]
        return np.where(last >= 0, last + self.base_j, -1)

    def _first_at_or_after(self, i: int, j0: int) -> int | None:
        """The smallest j >= j0 where S's window at i occurs in P (tokens confirmed), else None."""
        h = self.hs[i - self.base_i]
        window = self.s[i:i + WINDOW].tobytes()
        start, n, step = j0 - self.base_j, int(self.hp.size), _FIRST_CHUNK
        while start < n:
            end = min(n, start + step)
            for j in (np.flatnonzero(self.hp[start:end] == h) + (start + self.base_j)).tolist():
                if self.p[j:j + WINDOW].tobytes() == window:  # confirm on the tokens: a hash proves nothing
                    return j
            start, step = end, step * 4
        return None

    def find(self, i0: int, j0: int) -> tuple[int, int] | None:
        """The smallest i >= i0 (i <= L - 8) whose window occurs in P at some j >= j0, with
        the smallest such j; None when there is none."""
        start, n, step = i0 - self.base_i, int(self.hs.size), _FIRST_CHUNK
        while start < n:
            end = min(n, start + step)
            self._ensure(end)
            for offset in np.flatnonzero(self.last[start:end] >= j0).tolist():
                i = self.base_i + start + offset
                j = self._first_at_or_after(i, j0)
                if j is not None:
                    return i, j
            start, step = end, step * 4
        return None


_POLY = np.uint64(0x9E3779B97F4A7C15)  # odd: its powers are invertible modulo 2**64
_MIX = np.uint64(0xFF51AFD7ED558CCD)


def _mixed(x: np.ndarray) -> np.ndarray:
    """Each id scrambled (a multiply and a shift), so sequences built to collide in a plain
    polynomial hash do not collide here."""
    y = np.asarray(x, dtype=np.uint64) * _MIX
    return y ^ (y >> np.uint64(31))


class PromptRuns:
    """Whether a run of ids occurs whole, as one contiguous run, somewhere in P (for
    `history_reordered`, docs/contract.md#causes).

    Built once per prompt: a prefix sum of a polynomial hash (``H[k] = sum of y[t] B^t`` for
    t < k, modulo 2**64), so the hash of every window of any length is ``H[j+n] - H[j]``. A
    query of n ids compares all M - n + 1 windows against the run's hash in one vector pass
    and confirms candidates on the ids (a hash match proves nothing), so each query costs
    O(M + n) and never loops per token in Python.
    """

    def __init__(self, p: np.ndarray) -> None:
        self.p = np.asarray(p)
        m = int(self.p.size)
        powers = np.full(m + 1, _POLY, dtype=np.uint64)
        powers[0] = 1
        self.powers = np.cumprod(powers, dtype=np.uint64)  # uint64 products wrap: arithmetic modulo 2**64
        self.prefix = np.zeros(m + 1, dtype=np.uint64)
        np.cumsum(_mixed(self.p) * self.powers[:m], dtype=np.uint64, out=self.prefix[1:])

    def find(self, run: np.ndarray) -> int | None:
        """The first position in P where ``run`` occurs whole, else None (an empty run: None)."""
        n, m = int(run.size), int(self.p.size)
        if n == 0 or n > m:
            return None
        target = np.cumsum(_mixed(run) * self.powers[:n], dtype=np.uint64)[-1]
        windows = self.prefix[n:] - self.prefix[:m - n + 1]
        wanted = self.powers[:m - n + 1] * target
        for j in np.flatnonzero(windows == wanted).tolist():
            if np.array_equal(self.p[j:j + n], run):
                return j
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
    """Walk ``s`` (the predecessor's sequence) against ``p`` (the break's prompt), docs/contract.md#alignment.

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


__all__ = ["Alignment", "MIN_WINDOW", "PromptRuns", "Span", "WINDOW", "align", "common_prefix", "window_hashes"]
