"""Step 1 of a build (docs/contract.md#builder-dedupe): one copy per call id.

A capture can hold one call id more than once. The kept copy must not depend on input
order, and copies that disagree on any token cannot both be true, so their call is
reported unresolved rather than silently trusted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from ..records import TokenEntry, canonical_json


def dedupe(entries: Iterable[TokenEntry]) -> tuple[dict[str, TokenEntry], dict[str, int], list[str]]:
    """One kept copy per call id; per id the number of extra copies dropped; the ids whose copies conflict."""
    copies: dict[str, list[TokenEntry]] = defaultdict(list)
    for entry in entries:
        copies[entry.model_call_id].append(entry)
    kept: dict[str, TokenEntry] = {}
    dropped: dict[str, int] = {}
    conflicts: list[str] = []
    for call_id, group in copies.items():
        if len(group) == 1:
            kept[call_id] = group[0]
            continue
        # Canonical JSON order makes the kept copy independent of input order.
        group = sorted(group, key=canonical_json)
        first = group[0]
        kept[call_id] = first
        dropped[call_id] = len(group) - 1
        if any(_copies_conflict(first, other) for other in group[1:]):
            conflicts.append(call_id)
    return kept, dropped, sorted(conflicts)


def _copies_conflict(a: TokenEntry, b: TokenEntry) -> bool:
    """Whether two copies of one call disagree on the delta flag or any of the three token arrays."""
    return (a.prompt_is_delta != b.prompt_is_delta
            or not np.array_equal(a.prompt_token_ids, b.prompt_token_ids)
            or not np.array_equal(a.generation_token_ids, b.generation_token_ids)
            or not np.array_equal(a.generation_log_probs, b.generation_log_probs))
