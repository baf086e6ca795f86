"""The calls steps 3-8 chain (docs/contract.md#builder-empty, #builder-order): one node per call.

A `Call` holds a call's full prompt and generation as views, its proven parent and its
children; steps 5-8 link, quarantine and walk these nodes. Calls that generated nothing
never become nodes.
"""

from __future__ import annotations

import math

import numpy as np

from ..records import TokenEntry
from ..tokens import prefix_equals


class Call:
    """One call with a generation, as a node of the call tree the build links."""

    __slots__ = ("entry", "call_id", "prompt", "generation", "parent", "children", "quarantined", "created_at")

    def __init__(self, entry: TokenEntry) -> None:
        self.entry = entry
        self.call_id = entry.model_call_id
        self.prompt = entry.prompt_token_ids
        self.generation = entry.generation_token_ids
        self.parent: Call | None = None
        self.children: list[Call] = []
        self.quarantined = False
        # created_at orders and selects, never proves anything; a NaN (possible through the
        # Python API) sorts last so every comparison stays total and order-independent.
        self.created_at = entry.created_at if entry.created_at == entry.created_at else math.inf

    @property
    def full_len(self) -> int:
        return int(self.prompt.size + self.generation.size)

    def extended_by(self, prompt: np.ndarray) -> bool:
        """Whether ``prompt`` starts with this call's whole cumulative sequence."""
        return prefix_equals(prompt, self.prompt, self.generation)

    def same_full_sequence(self, other: Call) -> bool:
        return (self.full_len == other.full_len and np.array_equal(self.prompt, other.prompt)
                and np.array_equal(self.generation, other.generation))


def split_empty_generations(full: dict[str, TokenEntry]) -> tuple[list[str], list[Call]]:
    """Step 3: the ids of calls that generated nothing (sorted), and a `Call` for each other call."""
    empty = sorted(c for c, e in full.items() if e.generation_token_ids.size == 0)
    calls = [Call(e) for c, e in full.items() if e.generation_token_ids.size]
    return empty, calls


def descendants(call: Call) -> set[str]:
    """The ids of every call below ``call`` (walked without recursion)."""
    out: set[str] = set()
    stack = list(call.children)
    while stack:
        node = stack.pop()
        out.add(node.call_id)
        stack.extend(node.children)
    return out
