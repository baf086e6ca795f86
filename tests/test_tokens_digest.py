"""Digests of sequences that live in arena lanes (docs/contract.md#digest): every way `digest_of_parts`
reads a lane -- swapped on the fly below 8,192 tokens, through a lane's cached big-endian
copy above -- gives `compute_digest` of the same tokens, at any offset in the lane."""

from __future__ import annotations

import numpy as np
import pytest

from tokencap.digest import SwappedBuffers, compute_digest, digest_of_parts
from tokencap.tokens import SequenceArena, is_shared_buffer


def _tokens(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1 << 63, size=n, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


@pytest.mark.parametrize("sizes", [[5, 7, 11], [3000, 3000, 3000], [9000, 9000, 20], [1, 20000, 1]])
def test_lane_sequences_hash_like_their_tokens_at_every_offset(sizes: list[int]) -> None:
    arena = SequenceArena()
    swapped = SwappedBuffers()
    sequence = np.zeros(0, dtype=np.uint64)
    seen = []
    for i, n in enumerate(sizes):
        sequence = arena.extend(sequence, _tokens(n, i))
        seen.append(sequence)
    branch = arena.extend(seen[0], _tokens(sizes[-1], 99))  # a second child of the first: a new lane
    for view in [*seen, branch, seen[-1][sizes[0]:], seen[-1][: sizes[0] + 1]]:
        plain = np.array(view.tolist(), dtype=np.uint64)
        assert digest_of_parts(view, swapped=swapped) == compute_digest(plain)
        cut = view.size // 3
        assert digest_of_parts(view[:cut], view[cut:], swapped=swapped) == compute_digest(plain)
        assert digest_of_parts(view[:cut], view[cut:]) == compute_digest(plain)


def test_only_a_lanes_own_buffer_counts_as_shared() -> None:
    arena = SequenceArena()
    sequence = arena.fresh(_tokens(10, 1), _tokens(10, 2))
    owner = sequence
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    assert is_shared_buffer(owner)
    assert not is_shared_buffer(sequence) and not is_shared_buffer(sequence[:5])
    assert not is_shared_buffer(np.array(sequence)) and not is_shared_buffer(owner.copy().view(np.ndarray))
