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
_MIN_CAPACITY = 1024


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
    __slots__ = ("buffer", "used", "address")

    def __init__(self, capacity: int) -> None:
        self.buffer = np.ndarray.__new__(_LaneBuffer, (max(capacity, _MIN_CAPACITY),), dtype=TOKEN_DTYPE)
        self.used = 0
        self.address = _address(self.buffer, 0)  # where token ``i`` sits: address + 8 * i

    def end(self) -> int:
        """The address one past the last written token."""
        return self.address + self.used * _ITEMSIZE


class SequenceArena:
    """Allocates token sequences as read-only views into a few growable buffers."""

    def __init__(self) -> None:
        # Keyed by the address one past the last written token of each lane's buffer, so
        # "is `base` the live tail of a lane" is one dict lookup.
        self._tails: dict[int, _Lane] = {}

    def extend(self, base: np.ndarray, *parts: np.ndarray) -> np.ndarray:
        """A read-only array equal to ``concat(base, *parts)``, sharing ``base``'s storage when possible."""
        extra = sum(int(p.size) for p in parts)
        tail = _end_address(base) if base.size else 0
        lane = self._tails.get(tail) if base.size else None
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
        return as_token_array(lane.buffer[start:pos])

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
    total = sum(int(p.size) for p in parts)
    if seq.size < total:
        return False
    for part in parts:
        n = part.size
        if n and not (seq[pos] == part[0] and seq[pos + n - 1] == part[-1] and np.array_equal(seq[pos: pos + n], part)):
            return False
        pos += n
    return True
