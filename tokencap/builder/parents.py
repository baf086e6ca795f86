"""Step 5 of a build (docs/contract.md#builder-parents): each call's parent decision.

A call is linked to a parent only on proof: its prompt starts with the parent's whole
cumulative sequence. A missing parent is recovered only when exactly one placed call
proves it; every other doubt leaves the call a boundary, never a guessed link.
"""

from __future__ import annotations

import numpy as np

from ..records import ParentResolutionStatus
from .calls import Call
from .output import (
    MISSING_RESOLUTION,
    PARENT_DIGEST_MISMATCH,
    PARENT_MISSING,
    PARENT_MISSING_RECOVERED,
    PARENT_UNRESOLVED,
    LinkDecision,
)


class _PlacedIndex:
    """Calls already placed, indexed for longest-prefix recovery (docs/contract.md#builder-parents).

    Recovery is needed only when a resolved parent is absent, but a harness that filters
    many empty generations can need it for most calls. A candidate can be a prefix of
    the prompt only if its last token sits at the same position in the prompt, so one
    vectorised comparison over all candidates leaves just the few worth a full check.
    """

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._lens: list[int] = []
        self._lasts: list[int] = []

    def add(self, call: Call) -> None:
        self.calls.append(call)
        self._lens.append(call.full_len)
        self._lasts.append(int(call.generation[-1]))

    def recover(self, prompt: np.ndarray) -> tuple[Call | None, list[Call]]:
        """(the unique longest-prefix call, []), or (None, the tied calls), or (None, [])."""
        if not self.calls or not prompt.size:
            return None, []
        lens = np.fromiter(self._lens, dtype=np.int64, count=len(self._lens))
        idx = np.flatnonzero(lens <= prompt.size)
        if not idx.size:
            return None, []
        lasts = np.fromiter(self._lasts, dtype=np.uint64, count=len(self._lasts))
        idx = idx[np.asarray(prompt)[lens[idx] - 1] == lasts[idx]]
        best_len, best = -1, []
        for i in sorted(idx.tolist(), key=lambda i: -self._lens[i]):
            cand = self.calls[i]
            if cand.full_len < best_len:
                break
            if cand.extended_by(prompt):
                best_len = cand.full_len
                best.append(cand)
        if len(best) == 1:
            return best[0], []
        return None, sorted(best, key=lambda c: c.call_id)


def resolve_parents(calls: list[Call], by_id: dict[str, Call], failures: dict[str, int],
                    unresolved_parent: set[str]) -> dict[str, LinkDecision]:
    """Step 5: link each call (in step 4's order) to its parent; call id -> how it was decided."""
    links: dict[str, LinkDecision] = {}
    placed = _PlacedIndex()
    for call in calls:
        decision = _link(call, by_id, placed)
        if call.parent is not None:
            call.parent.children.append(call)
            decision.linked_parent = call.parent.call_id
        if decision.note is not None:
            failures[decision.note] += 1
            if decision.boundary:
                unresolved_parent.add(call.call_id)
        links[call.call_id] = decision
        placed.add(call)
    return links


def _link(call: Call, by_id: dict[str, Call], placed: _PlacedIndex) -> LinkDecision:
    """One call's parent decision; sets ``call.parent`` when a link is proven (or uniquely recovered)."""
    entry = call.entry
    resolution = entry.parent_resolution
    decision = LinkDecision(call.call_id, resolution.value if resolution else None, entry.parent_call_id,
                            None, None, prompt_len=int(call.prompt.size))
    if resolution is None:
        decision.note = MISSING_RESOLUTION
    elif resolution is ParentResolutionStatus.UNRESOLVED:
        decision.note = PARENT_UNRESOLVED
    elif resolution is ParentResolutionStatus.RESOLVED:
        parent = by_id.get(entry.parent_call_id) if entry.parent_call_id is not None else None
        if parent is not None:
            decision.expected_len = parent.full_len
            # Equal tokens <=> equal digests: the parent's stamped digest was already
            # checked against its own tokens in step 2, so comparing the tokens is
            # the digest check without hashing the prefix again.
            if parent is not call and parent.extended_by(call.prompt):
                call.parent = parent
            else:
                decision.note = PARENT_DIGEST_MISMATCH
        else:
            recovered, tied = placed.recover(call.prompt)
            if recovered is not None:
                call.parent = recovered
                decision.note = PARENT_MISSING_RECOVERED
                decision.expected_len = recovered.full_len
            else:
                decision.note = PARENT_MISSING
                decision.candidates = sorted(c.call_id for c in tied)
    return decision
