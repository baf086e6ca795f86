"""Step 2 of a build (docs/contract.md#builder-materialize): a full prompt for every surviving call.

A full-prompt record is trusted only when its stamps agree with its tokens; a delta
record's prompt is rebuilt from its parents and trusted only when the rebuild matches its
own stamps. Anything else is excluded: a context nobody can verify is never chained.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ..digest import SwappedBuffers, digest_of_parts
from ..records import TokenEntry
from ..tokens import SequenceArena, joined
from .output import DELTA_UNRECONSTRUCTABLE, ENTRY_DIGEST_MISMATCH


def _stamps_agree(entry: TokenEntry, swapped: SwappedBuffers | None = None) -> bool:
    """A full-prompt record's stamped cum_len/digest (when present) match its own tokens."""
    if entry.cum_len is not None and entry.cum_len != entry.full_len:
        return False
    if entry.digest is not None and entry.digest != digest_of_parts(
            entry.prompt_token_ids, entry.generation_token_ids, swapped=swapped):
        return False
    return True


_PARALLEL_HASH_TOKENS = 1 << 20


def _map_verify(check: Callable[[Any], bool], items: list[Any],
                size: Callable[[Any], int] = lambda e: e.full_len) -> list[bool]:
    """``check`` over items; on big rollouts in two threads (SHA-256 and the byte swap
    release the GIL, and hashing every record's full sequence dominates a large build)."""
    total = sum(size(e) for e in items)
    if total < _PARALLEL_HASH_TOKENS or len(items) < 4:
        return [check(e) for e in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(check, items, chunksize=max(1, len(items) // 16)))


def materialize(kept: dict[str, TokenEntry]) -> tuple[dict[str, TokenEntry], dict[str, str]]:
    """Full-prompt entries for every surviving call; excluded call id -> reason.

    Corrupt full-prompt records are found first, so a delta built on one is
    unreconstructable. Delta walks are iterative (no recursion) and memoised; a rebuilt
    sequence must match the delta record's stamped cum_len and digest, or the record is
    excluded -- an unverifiable rebuild would be a fabricated context.
    """
    excluded: dict[str, str] = {}
    full: dict[str, TokenEntry] = {}
    plain = [(call_id, entry) for call_id, entry in kept.items() if not entry.prompt_is_delta]
    swapped = SwappedBuffers()
    for (call_id, entry), agree in zip(plain, _map_verify(partial(_stamps_agree, swapped=swapped),
                                                          [e for _, e in plain]), strict=True):
        if agree:
            full[call_id] = entry
        else:
            excluded[call_id] = ENTRY_DIGEST_MISMATCH
    arena = SequenceArena()
    sequences: dict[str, np.ndarray] = {}  # call id -> full cumulative sequence (views)

    def sequence_of(entry: TokenEntry) -> np.ndarray:
        seq = sequences.get(entry.model_call_id)
        if seq is None:
            seq = joined(entry.prompt_token_ids, entry.generation_token_ids)
            if seq is None:
                seq = arena.fresh(entry.prompt_token_ids, entry.generation_token_ids)
            sequences[entry.model_call_id] = seq
        return seq

    pending: list[str] = []  # rebuilt deltas awaiting verification, parents first
    for call_id in sorted(c for c, e in kept.items() if e.prompt_is_delta):
        if call_id in sequences or call_id in excluded:
            continue
        # Walk up to a full-prompt record (or a failure), then rebuild downwards.
        path: list[str] = []
        on_path: set[str] = set()
        cursor: str | None = call_id
        broken = False
        while True:
            if cursor is None or cursor in excluded or cursor not in kept or cursor in on_path:
                broken = True
                break
            if cursor in full or cursor in sequences:
                break
            path.append(cursor)
            on_path.add(cursor)
            cursor = kept[cursor].parent_call_id
        if broken or cursor is None:  # the walk stops on None only as broken
            for c in path:
                excluded[c] = DELTA_UNRECONSTRUCTABLE
            continue
        base = sequences[cursor] if cursor in sequences else sequence_of(full[cursor])
        for c in reversed(path):
            delta = kept[c]
            seq = arena.extend(base, delta.prompt_token_ids, delta.generation_token_ids)
            sequences[c] = seq
            pending.append(c)
            base = seq
    # Verify every rebuilt sequence against its stamps (hashing in parallel on big builds),
    # then drop each failure and every delta built on it. `pending` lists parents first.
    swapped = SwappedBuffers()  # a fresh one: the lanes were still growing until now

    def verified(call_id: str) -> bool:
        delta, seq = kept[call_id], sequences[call_id]
        return delta.cum_len == seq.size and delta.digest is not None and \
            delta.digest == digest_of_parts(seq, swapped=swapped)

    bad: set[str] = set()
    for c, ok in zip(pending, _map_verify(verified, pending, size=lambda c: sequences[c].size), strict=True):
        if not ok or kept[c].parent_call_id in bad:
            bad.add(c)
            excluded[c] = DELTA_UNRECONSTRUCTABLE
            continue
        delta, seq = kept[c], sequences[c]
        prompt_len = seq.size - delta.generation_token_ids.size
        full[c] = delta.with_full_prompt(seq[:prompt_len], seq[prompt_len:])
    return full, excluded
