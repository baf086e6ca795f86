"""Where a rollout stops being one proven chain (docs/contract.md#breaks) and what it should have continued
(#predecessor).

A break is found from the build alone (its link decisions, chains, exclusions), never
from evidence or text: whether a call is a break is the build's fact, the diagnosis only
explains it. The predecessor is chosen by a fixed order of rules so that the same build
always names the same call:

- `claimed`: the record named a parent that is among the build's entries -- the capture's
  own claim comes first, even when its digest disagreed, because that disagreement is
  what needs explaining;
- `branch_point`: a branch's linked parent (the link is proven; the question is why the
  conversation forked there);
- `nearest`: otherwise the earlier call sharing the longest common prefix with the
  break's prompt. Descendants of the break are left out (a call cannot have continued
  its own child), and so are calls created after it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from ..builder import (
    DELTA_UNRECONSTRUCTABLE,
    DUPLICATE_CONFLICT,
    ENTRY_DIGEST_MISMATCH,
    MISSING_RESOLUTION,
    PARENT_DIGEST_MISMATCH,
    PARENT_MISSING,
    PARENT_UNRESOLVED,
    BuildOutput,
)
from ..records import TokenEntry
from .alignment import common_prefix

BREAK_KINDS = ("boundary", "extra_root", "branch", "record_fault")
"""Every kind of break (docs/contract.md#breaks)."""

RELATIONS = ("claimed", "branch_point", "nearest")
"""How a break's predecessor was chosen (docs/contract.md#predecessor)."""

BOUNDARY_NOTES = (PARENT_UNRESOLVED, PARENT_DIGEST_MISMATCH, PARENT_MISSING, MISSING_RESOLUTION)
RECORD_FAULT_NOTES = (ENTRY_DIGEST_MISMATCH, DELTA_UNRECONSTRUCTABLE, DUPLICATE_CONFLICT)


@dataclass(frozen=True)
class BreakSite:
    """A break before any alignment: the call, its kind, the build's note, the main-chain sibling."""

    call_id: str
    kind: str
    note: str | None = None
    sibling: str | None = None


def time_key(build: BuildOutput, call_id: str) -> tuple[float, str]:
    """``(created_at, call id)``; a call the build holds no entry for (an excluded record)
    or a NaN time sorts last, so the order stays total."""
    entry = build.entries.get(call_id)
    created = entry.created_at if entry is not None else math.inf
    return (created if created == created else math.inf), call_id


def find_breaks(build: BuildOutput) -> list[BreakSite]:
    """Every break of ``build``, one per call, by ``(created_at, call id)`` (docs/contract.md#breaks).

    A call that qualifies twice is listed once, by the first of: record fault, boundary,
    extra root, branch. A quarantined call is never an extra root or a branch: it is a
    retry of a kept call with the identical prompt, and the retry rules already judge it.
    """
    sites: dict[str, BreakSite] = {}
    for call_id, reason in build.excluded.items():
        sites[call_id] = BreakSite(call_id, "record_fault", reason)
    for call_id in build.conflicting_duplicates:
        sites.setdefault(call_id, BreakSite(call_id, "record_fault", DUPLICATE_CONFLICT))
    for call_id, link in build.links.items():
        if call_id not in sites and link.note in BOUNDARY_NOTES:
            sites[call_id] = BreakSite(call_id, "boundary", link.note)
    quarantined = set(build.quarantined)
    main = build.main
    main_ids = main.call_ids if main is not None else []
    # The conversation started at its earliest root; any later "root" is where it started over in
    # time, whichever fragment was delivered (a compaction's later root is the break, not call one).
    roots = [c for c, link in build.links.items() if link.linked_parent is None and c not in quarantined]
    first_root = min(roots, key=lambda c: time_key(build, c)) if roots else None
    for call_id, link in build.links.items():
        if call_id in sites or call_id in quarantined or call_id == first_root:
            continue
        if link.resolution == "root" and link.linked_parent is None:
            sites[call_id] = BreakSite(call_id, "extra_root")
    on_main = set(main_ids)
    main_child = dict(pairwise(main_ids))
    for call_id, link in build.links.items():
        parent = link.linked_parent
        if call_id in sites or call_id in on_main or call_id in quarantined or parent not in main_child:
            continue
        sibling = main_child[parent]
        if not np.array_equal(build.entries[call_id].prompt_token_ids, build.entries[sibling].prompt_token_ids):
            sites[call_id] = BreakSite(call_id, "branch", None, sibling)
    return sorted(sites.values(), key=lambda s: time_key(build, s.call_id))


def children_by_parent(build: BuildOutput) -> dict[str, list[str]]:
    """Linked parent -> its linked children."""
    children: dict[str, list[str]] = defaultdict(list)
    for call_id, link in build.links.items():
        if link.linked_parent is not None:
            children[link.linked_parent].append(call_id)
    return children


def descendants(children: dict[str, list[str]], call_id: str) -> set[str]:
    """Every call below ``call_id`` through links (iterative: rollouts can be deep)."""
    out: set[str] = set()
    stack = list(children.get(call_id, ()))
    while stack:
        node = stack.pop()
        if node not in out:
            out.add(node)
            stack.extend(children.get(node, ()))
    return out


def predecessor(build: BuildOutput, site: BreakSite, children: dict[str, list[str]]
                ) -> tuple[str | None, str | None]:
    """(the predecessor's call id, the relation) of a break; (None, None) for a record
    fault and for a break with no candidate (docs/contract.md#predecessor)."""
    if site.kind == "record_fault":
        return None, None
    entry = build.entries.get(site.call_id)
    if entry is None:
        return None, None
    if site.kind == "branch":
        link = build.links.get(site.call_id)
        if link is not None and link.linked_parent is not None:
            return link.linked_parent, "branch_point"
    claimed = entry.parent_call_id
    if claimed is not None and claimed != site.call_id and claimed in build.entries:
        return claimed, "claimed"
    nearest = nearest_call(build, entry, descendants(children, site.call_id), children)
    return (nearest, "nearest") if nearest is not None else (None, None)


def sequence_prefix(entry: TokenEntry, prompt: np.ndarray) -> int:
    """The common prefix of ``entry``'s full cumulative sequence with ``prompt`` (no copy)."""
    head = common_prefix(entry.prompt_token_ids, prompt)
    if head < entry.prompt_token_ids.size:
        return head
    return head + common_prefix(entry.generation_token_ids, prompt[head:])


class _SharedPrefix:
    """The common prefix of each call's full sequence with one prompt, memoised over links.

    A linked call's full sequence is a prefix of each linked child's (the build proved it),
    so a call shares ``min(its length, what a child shares)``: one comparison per path down
    to a leaf serves every call above it, instead of one per call."""

    def __init__(self, build: BuildOutput, prompt: np.ndarray, children: dict[str, list[str]]) -> None:
        self.build, self.prompt, self.children = build, prompt, children
        self.memo: dict[str, int] = {}

    def __call__(self, call_id: str) -> int:
        memo, entries = self.memo, self.build.entries
        path: list[str] = []
        cursor: str | None = call_id
        while cursor is not None and cursor not in memo and cursor in entries:
            path.append(cursor)
            kids = [k for k in self.children.get(cursor, ()) if k in entries]
            cursor = kids[0] if kids else None
        if cursor is not None and cursor in memo:
            shared = memo[cursor]
        else:
            shared = sequence_prefix(entries[path[-1]], self.prompt)
        for node in reversed(path):
            shared = min(shared, entries[node].full_len)
            memo[node] = shared
        return memo[call_id]


def nearest_call(build: BuildOutput, entry: TokenEntry, below: set[str],
                 children: dict[str, list[str]] | None = None) -> str | None:
    """The `nearest` rule: among the build's entries other than ``entry`` and ``below``,
    created no later than it, the longest common prefix of the full sequence with its
    prompt; ties to the latest time, then the longer sequence, then the smaller id.

    Candidates are tried by how long a prefix they could share at most (their length, up
    to the prompt's), so most are never compared once a long shared prefix is known; with
    ``children`` (linked parent -> children) a chain of calls costs one comparison."""
    prompt = entry.prompt_token_ids
    created = entry.created_at
    m = int(prompt.size)
    shared_of = _SharedPrefix(build, prompt, children or {})
    candidates = []
    for call_id, other in build.entries.items():
        if call_id == entry.model_call_id or call_id in below:
            continue
        if not (other.created_at <= created):  # NaN on either side: not provably earlier
            continue
        candidates.append((min(other.full_len, m), call_id, other))
    candidates.sort(key=lambda c: -c[0])
    best: tuple[int, float, int] | None = None
    best_id: str | None = None
    for bound, call_id, other in candidates:
        if best is not None and bound < best[0]:
            break
        key = (shared_of(call_id), other.created_at, other.full_len)
        if best is None or best_id is None or key > best or (key == best and call_id < best_id):
            best, best_id = key, call_id
    return best_id


__all__ = ["BOUNDARY_NOTES", "BREAK_KINDS", "BreakSite", "RECORD_FAULT_NOTES", "RELATIONS", "children_by_parent",
           "descendants", "find_breaks", "nearest_call", "predecessor", "sequence_prefix", "time_key"]
