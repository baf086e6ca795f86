"""Token sequences that share storage.

A rollout of N calls whose contexts grow to L tokens holds about N*L/2 prompt tokens if
every call keeps its own copy -- 13M ids for a 300-call, 90k-token agent session. But a
child's prompt *is* its parent's cumulative sequence plus an interstitial, so a lane of
calls can live in one growable buffer: each call's prompt and generation are read-only
views into it, and extending the lane appends only the new tokens.

`SequenceArena.extend` is the one primitive: "the sequence `base` followed by `parts`".
When `base` ends exactly where its buffer's written region ends (the usual case: the
newest call of a lane), the new tokens are appended in place and no existing token is
copied. Otherwise (a second child of the same parent: a retry or a branch) a new buffer
starts with a copy of `base`; that copy is per branch point, not per call.
"""

from __future__ import annotations

import numpy as np

TOKEN_DTYPE = np.uint64
_ITEMSIZE = np.dtype(TOKEN_DTYPE).itemsize
_MIN_CAPACITY = 64  # tokens: a small rollout's lane is not 8 KiB, and a growing one doubles anyway


class TokenArray(np.ndarray):
    """A read-only 1-D numpy array whose iteration yields plain Python numbers.

    ``list(entry.prompt_token_ids)`` therefore gives ints that ``json.dumps`` accepts,
    while every vectorised operation stays numpy.
    """

    def __iter__(self):
        return iter(self.tolist())


def as_token_array(arr: np.ndarray) -> TokenArray:
    """A read-only `TokenArray` view of ``arr`` (no copy)."""
    view = arr.view(TokenArray)
    view.flags.writeable = False
    return view


class _LaneBuffer(np.ndarray):
    """An arena lane's own storage: its type says that many calls' sequences are views of
    it, so telling a lane from a call's private array needs no registry."""


def is_shared_buffer(arr: np.ndarray) -> bool:
    """Whether ``arr`` is an arena lane's buffer (many calls' sequences are views of it)."""
    return type(arr) is _LaneBuffer and arr.base is None


class _Lane:
    __slots__ = ("buffer", "used", "address", "last")

    def __init__(self, capacity: int) -> None:
        self.buffer = np.ndarray.__new__(_LaneBuffer, (max(capacity, _MIN_CAPACITY),), dtype=TOKEN_DTYPE)
        self.used = 0
        self.address = _address(self.buffer, 0)  # where token ``i`` sits: address + 8 * i
        self.last: np.ndarray | None = None  # the view `extend` returned last: it ends at ``used``

    def end(self) -> int:
        """The address one past the last written token."""
        return self.address + self.used * _ITEMSIZE


class SequenceArena:
    """Allocates token sequences as read-only views into a few growable buffers."""

    def __init__(self) -> None:
        # Keyed by the address one past the last written token of each lane's buffer, so
        # "is `base` the live tail of a lane" is one dict lookup.
        self._tails: dict[int, _Lane] = {}
        # The same question answered without an address for the usual caller, which extends
        # the view it was just given: keyed by ``id`` of each lane's last view (held by the
        # lane, so the id is not reused while it is a key).
        self._last: dict[int, _Lane] = {}

    def extend(self, base: np.ndarray, *parts: np.ndarray) -> np.ndarray:
        """A read-only array equal to ``concat(base, *parts)``, sharing ``base``'s storage when possible."""
        extra = 0
        for part in parts:
            extra += part.size
        lane = self._last.get(id(base))
        if lane is not None and lane.last is base:
            tail = lane.end()
        elif base.size:
            tail = _end_address(base)
            lane = self._tails.get(tail)
        else:
            tail, lane = 0, None
        if lane is not None and lane.used + extra <= lane.buffer.size:
            start = lane.used - base.size
        else:
            if lane is not None:
                # Grown past capacity: move the lane into a buffer twice the size. Views
                # already handed out keep the old buffer alive; the total stays within a
                # geometric series of the final size.
                need = lane.used + extra
                new_lane = _Lane(2 * need)
                new_lane.buffer[: base.size] = base
                del self._tails[tail]
                if lane.last is not None:
                    del self._last[id(lane.last)]
                    lane.last = None
            else:
                new_lane = _Lane(2 * (base.size + extra))
                new_lane.buffer[: base.size] = base
            new_lane.used = base.size
            lane, start = new_lane, 0
        if lane.used:
            self._tails.pop(lane.end(), None)
        pos = lane.used
        for part in parts:
            lane.buffer[pos: pos + part.size] = part
            pos += part.size
        lane.used = pos
        self._tails[lane.end()] = lane
        view = as_token_array(lane.buffer[start:pos])
        if lane.last is not None:
            del self._last[id(lane.last)]
        lane.last = view
        self._last[id(view)] = lane
        return view

    def fresh(self, *parts: np.ndarray) -> np.ndarray:
        """A new lane holding ``concat(*parts)``."""
        return self.extend(np.zeros(0, dtype=TOKEN_DTYPE), *parts)


def _address(buffer: np.ndarray, index: int) -> int:
    return buffer.__array_interface__["data"][0] + index * buffer.itemsize


def _end_address(view: np.ndarray) -> int:
    return view.__array_interface__["data"][0] + view.size * view.itemsize



def joined(first: np.ndarray, second: np.ndarray) -> np.ndarray | None:
    """``concat(first, second)`` as a zero-copy view when ``second`` directly follows ``first``.

    True for every call the loader or the delta rebuild placed in a lane; None otherwise.
    """
    if not second.size:
        return first
    if not first.size:
        return second
    base = first.base
    if base is None or base is not second.base or first.dtype != second.dtype or _end_address(first) != \
            second.__array_interface__["data"][0] or not first.flags.c_contiguous or not second.flags.c_contiguous:
        return None
    offset = first.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return as_token_array(np.ndarray((first.size + second.size,), dtype=first.dtype, buffer=base, offset=offset))


def prefix_equals(seq: np.ndarray, *parts: np.ndarray) -> bool:
    """Whether ``seq`` starts with the concatenation of ``parts`` (compared piecewise, no copy)."""
    pos = 0
    total = 0
    for part in parts:
        total += part.size
    if seq.size < total:
        return False
    for part in parts:
        n = part.size
        if n and not _equal(seq[pos: pos + n], part):
            return False
        pos += n
    return True


_COMPARE_AS_BYTES = 512
"""Tokens up to which two arrays are compared as bytes (one small copy each, one memcmp):
cheaper than a numpy comparison's set-up for the short sequences of most calls."""


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two 1-D arrays of one size hold the same values."""
    if a.dtype == b.dtype and a.dtype.kind in "iu":  # integers: equal bytes <=> equal values
        if a.size <= _COMPARE_AS_BYTES:
            return a.tobytes() == b.tobytes()
        if a.flags.c_contiguous and b.flags.c_contiguous and \
                a.__array_interface__["data"][0] == b.__array_interface__["data"][0]:
            return True  # the same memory: a child's prompt viewing its parent's lane
    return bool(a[0] == b[0] and a[-1] == b[-1] and np.array_equal(a, b))
