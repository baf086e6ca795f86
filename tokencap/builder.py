"""The `prefix_merging` builder: chain a frozen snapshot's calls into trainable trajectories.

The one invariant (docs/contract.md#invariant): a delivered trajectory holds exactly the tokens the policy
emitted, conditioned on exactly the recorded context, as one contiguous sequence. Every
rule below prefers dropping or masking to guessing, and nothing is linked across a
boundary nobody proved.

The build never depends on input order: copies of a call are ordered by their canonical
JSON, calls are processed by (full-prompt length, call id), and every tie-break is on
call ids or timestamps. It also never recurses, so a 1,500-call rollout is fine, and it
holds no per-call copy of a whole context: prompts are views (see `tokencap.tokens`).
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from .digest import SwappedBuffers, digest_of_parts
from .records import ParentResolutionStatus, TokenEntry, canonical_json
from .tokens import TOKEN_DTYPE, SequenceArena, as_token_array, joined, prefix_equals

BUILDER_NAME = "prefix_merging"

# Notes a build can attach to a call (keys of `BuildNotes.parent_link_failures`).
PARENT_UNRESOLVED = "parent_unresolved"
PARENT_DIGEST_MISMATCH = "parent_digest_mismatch"
PARENT_MISSING = "parent_call_id_missing"
PARENT_MISSING_RECOVERED = "parent_call_id_missing_recovered"
MISSING_RESOLUTION = "missing_resolution"
DUPLICATE_CONFLICT = "duplicate_call_id_conflict"
DELTA_UNRECONSTRUCTABLE = "delta_chain_unreconstructable"
ENTRY_DIGEST_MISMATCH = "entry_digest_mismatch"

# Retry rules of docs/contract.md#builder-retries, named for what decided the group.
RULE_EXTENDED = "extended"          # a: members with a linked child are kept
RULE_TERMINAL = "terminal"          # b: the named terminal call is kept
RULE_TWINS = "twins"                # c: token-identical twins, smallest id kept
RULE_UNRESOLVED = "unresolved"      # d: nobody knows which generation the harness kept
RULE_AFTER_TERMINAL = "after_terminal"  # d, but below the anchored call: nothing delivered anyway


def _as_ids(value: Any) -> np.ndarray:
    """Token ids as a read-only array (callers may build chains from plain lists)."""
    if isinstance(value, np.ndarray) and value.dtype == TOKEN_DTYPE:
        return value
    return as_token_array(np.asarray(list(value), dtype=TOKEN_DTYPE))


@dataclass
class ChainLink:
    """One call on a chain; ``interstitial`` is its prompt beyond the parent's cumulative sequence."""

    entry: TokenEntry
    interstitial: np.ndarray

    def __post_init__(self) -> None:
        self.interstitial = _as_ids(self.interstitial)

    @property
    def call_id(self) -> str:
        return self.entry.model_call_id


@dataclass
class Chain:
    """A root-to-leaf path of calls: ``root_prompt``, then per link interstitial + generation."""

    chain_id: str
    links: list[ChainLink] = field(default_factory=list)
    root_prompt: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=TOKEN_DTYPE))

    def __post_init__(self) -> None:
        self.root_prompt = _as_ids(self.root_prompt)

    def validate(self) -> None:
        """Require one log-probability per generated token (a trainer cannot use anything else)."""
        for link in self.links:
            n_tokens = len(link.entry.generation_token_ids)
            n_logprobs = len(link.entry.generation_log_probs)
            if n_tokens != n_logprobs:
                raise ValueError(f"chain {self.chain_id!r}: call {link.call_id!r} has {n_tokens} generated tokens "
                                 f"but {n_logprobs} log-probabilities")

    @property
    def call_ids(self) -> list[str]:
        return [link.call_id for link in self.links]

    @property
    def generated_tokens(self) -> int:
        return sum(int(link.entry.generation_token_ids.size) for link in self.links)

    @property
    def total_tokens(self) -> int:
        return int(self.root_prompt.size) + sum(
            int(link.interstitial.size + link.entry.generation_token_ids.size) for link in self.links)


@dataclass
class BuildNotes:
    """What the build kept, dropped, or could not resolve (typed, so dashboards never read a renamed key as 0)."""

    builder: str = BUILDER_NAME
    roots: int = 0
    chains: int = 0
    generated_tokens_captured: int = 0
    generated_tokens_delivered: int = 0
    delivered_fraction: float = 0.0
    unresolved_retries: list[str] = field(default_factory=list)
    terminal_call_id: str | None = None
    terminal_chain: str = ""
    after_terminal_calls: list[str] = field(default_factory=list)
    empty_generation_calls: list[str] = field(default_factory=list)
    parent_link_failures: dict[str, int] = field(default_factory=dict)
    unresolved_parent_calls: list[str] = field(default_factory=list)


@dataclass
class LinkDecision:
    """How one call's parent was decided in step 5, for the inspector."""

    call_id: str
    resolution: str | None          # the request-time decision ("root", "resolved", ...)
    claimed_parent: str | None      # parent_call_id as recorded
    linked_parent: str | None       # the parent actually linked (recovered links included)
    note: str | None                # a parent_link_failures reason, or None
    expected_len: int | None = None  # the claimed parent's cumulative length, when present
    prompt_len: int = 0             # the call's full prompt length
    candidates: list[str] = field(default_factory=list)  # ambiguous prefix-recovery candidates

    @property
    def boundary(self) -> bool:
        """An unresolved boundary: a proof was missing, so the call starts a new fragment."""
        return self.note is not None and self.note != PARENT_MISSING_RECOVERED


@dataclass
class RetryGroup:
    """Calls with one linked parent and the identical full prompt: retries of one request."""

    parent: str | None
    members: list[str]
    kept: list[str]
    quarantined: list[str]
    rule: str


@dataclass
class BuildOutput:
    chains: list[Chain] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    notes: BuildNotes = field(default_factory=BuildNotes)
    entries: dict[str, TokenEntry] = field(default_factory=dict)
    # Diagnostics for inspection (not part of the upstream surface).
    links: dict[str, LinkDecision] = field(default_factory=dict)
    retry_groups: list[RetryGroup] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)
    """Call id -> why it never entered chaining (entry_digest_mismatch, delta_chain_unreconstructable)."""
    duplicate_copies: dict[str, int] = field(default_factory=dict)
    """Call id -> number of extra copies dropped by dedupe."""
    conflicting_duplicates: list[str] = field(default_factory=list)

    @property
    def main(self) -> Chain | None:
        return self.chains[0] if self.chains and self.chains[0].chain_id == "main" else None

    def chain(self, chain_id: str) -> Chain | None:
        return next((c for c in self.chains if c.chain_id == chain_id), None)


# --------------------------------------------------------------------------- steps 1-2


def _dedupe(entries: Iterable[TokenEntry]) -> tuple[dict[str, TokenEntry], dict[str, int], list[str]]:
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
    return (a.prompt_is_delta != b.prompt_is_delta
            or not np.array_equal(a.prompt_token_ids, b.prompt_token_ids)
            or not np.array_equal(a.generation_token_ids, b.generation_token_ids)
            or not np.array_equal(a.generation_log_probs, b.generation_log_probs))


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


def _materialize(kept: dict[str, TokenEntry]) -> tuple[dict[str, TokenEntry], dict[str, str]]:
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


# --------------------------------------------------------------------------- steps 3-8


class _Call:
    __slots__ = ("entry", "call_id", "prompt", "generation", "parent", "children", "quarantined", "created_at")

    def __init__(self, entry: TokenEntry) -> None:
        self.entry = entry
        self.call_id = entry.model_call_id
        self.prompt = entry.prompt_token_ids
        self.generation = entry.generation_token_ids
        self.parent: _Call | None = None
        self.children: list[_Call] = []
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

    def same_full_sequence(self, other: _Call) -> bool:
        return (self.full_len == other.full_len and np.array_equal(self.prompt, other.prompt)
                and np.array_equal(self.generation, other.generation))


class _PlacedIndex:
    """Calls already placed, indexed for longest-prefix recovery (docs/contract.md#builder-parents).

    Recovery is needed only when a resolved parent is absent, but a harness that filters
    many empty generations can need it for most calls. A candidate can be a prefix of
    the prompt only if its last token sits at the same position in the prompt, so one
    vectorised comparison over all candidates leaves just the few worth a full check.
    """

    def __init__(self) -> None:
        self.calls: list[_Call] = []
        self._lens: list[int] = []
        self._lasts: list[int] = []

    def add(self, call: _Call) -> None:
        self.calls.append(call)
        self._lens.append(call.full_len)
        self._lasts.append(int(call.generation[-1]))

    def recover(self, prompt: np.ndarray) -> tuple[_Call | None, list[_Call]]:
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


def _prompt_key(call: _Call) -> tuple[int, bytes]:
    """Identity of a call's full prompt within its parent group (hash of the new tokens only)."""
    start = call.parent.full_len if call.parent is not None else 0
    tail = np.ascontiguousarray(call.prompt[start:])
    return int(call.prompt.size), hashlib.blake2b(tail.data, digest_size=20).digest()


def _time_key(call: _Call) -> tuple[float, str]:
    return call.created_at, call.call_id


@dataclass
class PreparedEntries:
    """Steps 1-2 of a build: deduped, materialized full-prompt entries and what was dropped.

    Independent of the terminal call, so one preparation serves a build with and without
    an anchor (terminal attribution reads ``full`` before choosing the anchor).
    """

    full: dict[str, TokenEntry]
    excluded: dict[str, str]
    dropped: dict[str, int]
    conflicts: list[str]


def prepare_entries(entries: Iterable[TokenEntry]) -> PreparedEntries:
    """Steps 1-2: dedupe by call id, materialize delta prompts, exclude corrupt records."""
    kept, dropped, conflicts = _dedupe(entries)
    full, excluded = _materialize(kept)
    return PreparedEntries(full, excluded, dropped, conflicts)


def prefix_merging(entries: Iterable[TokenEntry], terminal_call_id: str | None = None) -> BuildOutput:
    """Chain a frozen snapshot's entries into trajectories (docs/contract.md#builder)."""
    return chain_prepared(prepare_entries(entries), terminal_call_id)


def chain_prepared(prepared: PreparedEntries, terminal_call_id: str | None = None) -> BuildOutput:
    """Steps 3-9 of `prefix_merging` on entries `prepare_entries` made."""
    failures: dict[str, int] = defaultdict(int)
    unresolved_parent: set[str] = set()
    # 1-2. Dedupe and materialize (done by prepare_entries): their casualties are unresolved.
    _note_prepared(prepared, failures, unresolved_parent)
    # 3. Empty generations carry no training signal.
    empty, calls = _split_empty_generations(prepared.full)
    # 4. Shorter prompts first: a parent's cumulative sequence is a prefix of its child's prompt.
    calls.sort(key=lambda c: (c.prompt.size, c.call_id))
    by_id = {c.call_id: c for c in calls}
    # 5. Resolve parents.
    links = _resolve_parents(calls, by_id, failures, unresolved_parent)
    # 6. Retries, settled after the anchor is known (a terminal call can decide its group).
    retry_groups = _retry_groups(calls)
    anchor_id = _anchor(terminal_call_id, by_id, retry_groups)
    below_anchor = _descendants(by_id[anchor_id]) if anchor_id is not None else set()
    group_reports, unresolved_retries = _settle_retries(retry_groups, by_id, terminal_call_id, anchor_id,
                                                        below_anchor)
    # 7-8. Chains and the delivered one.
    anchor, terminal_chain = _delivered_anchor(terminal_call_id, by_id, anchor_id)
    chains = _chains(calls, anchor)
    for call in calls:
        # Parent and children refer to each other: cut the cycle, so the calls are freed by
        # reference counting when the build returns rather than by a full garbage-collector pass.
        call.children = []
    # 9. Notes.
    notes = _notes(calls, chains, failures, unresolved_parent)
    notes.unresolved_retries = sorted(unresolved_retries)
    notes.terminal_call_id = anchor.call_id if anchor is not None else terminal_call_id
    notes.terminal_chain = terminal_chain
    notes.after_terminal_calls = sorted(below_anchor) if anchor is not None else []
    notes.empty_generation_calls = empty
    return BuildOutput(
        chains=chains,
        quarantined=sorted(c.call_id for c in calls if c.quarantined),
        notes=notes,
        entries=dict(prepared.full),
        links=links,
        retry_groups=group_reports,
        excluded=dict(sorted(prepared.excluded.items())),
        duplicate_copies=dict(sorted(prepared.dropped.items())),
        conflicting_duplicates=prepared.conflicts,
    )


def _note_prepared(prepared: PreparedEntries, failures: dict[str, int], unresolved_parent: set[str]) -> None:
    """Steps 1-2's casualties: conflicting copies, corrupt and unreconstructable records are unresolved."""
    for call_id in prepared.conflicts:
        failures[DUPLICATE_CONFLICT] += 1
        unresolved_parent.add(call_id)
    for call_id, reason in prepared.excluded.items():
        failures[reason] += 1
        unresolved_parent.add(call_id)


def _split_empty_generations(full: dict[str, TokenEntry]) -> tuple[list[str], list[_Call]]:
    """Step 3: the ids of calls that generated nothing (sorted), and a `_Call` for each other call."""
    empty = sorted(c for c, e in full.items() if e.generation_token_ids.size == 0)
    calls = [_Call(e) for c, e in full.items() if e.generation_token_ids.size]
    return empty, calls


def _resolve_parents(calls: list[_Call], by_id: dict[str, _Call], failures: dict[str, int],
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


def _link(call: _Call, by_id: dict[str, _Call], placed: _PlacedIndex) -> LinkDecision:
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


def _retry_groups(calls: list[_Call]) -> list[list[_Call]]:
    """Step 6's groups: calls with one linked parent and an identical full prompt, each sorted by id.

    Prompts of different lengths always differ, so only calls sharing a parent and a prompt
    length have their new tokens hashed.
    """
    by_length: dict[tuple[str | None, int], list[_Call]] = defaultdict(list)
    for call in calls:
        by_length[(call.parent.call_id if call.parent else None, int(call.prompt.size))].append(call)
    groups: dict[tuple[str | None, tuple[int, bytes]], list[_Call]] = defaultdict(list)
    for (parent_id, _length), same_length in by_length.items():
        if len(same_length) > 1:
            for call in same_length:
                groups[(parent_id, _prompt_key(call))].append(call)
    return [sorted(g, key=lambda c: c.call_id) for g in groups.values() if len(g) > 1]


def _settle_retries(retry_groups: list[list[_Call]], by_id: dict[str, _Call], terminal_call_id: str | None,
                    anchor_id: str | None, below_anchor: set[str]) -> tuple[list[RetryGroup], set[str]]:
    """Step 6's rules: quarantine all but the kept members of each group; the reports and the unresolved ids."""
    unresolved_retries: set[str] = set()
    group_reports: list[RetryGroup] = []
    for members in sorted(retry_groups, key=lambda g: (g[0].parent.call_id if g[0].parent else "", g[0].call_id)):
        keep, rule = _retry_rule(members, by_id, terminal_call_id, anchor_id, below_anchor)
        if rule == RULE_UNRESOLVED:
            unresolved_retries.update(m.call_id for m in members)
        kept_ids = {k.call_id for k in keep}
        for m in members:
            m.quarantined = m.call_id not in kept_ids
        group_reports.append(RetryGroup(
            parent=members[0].parent.call_id if members[0].parent else None,
            members=[m.call_id for m in members], kept=sorted(kept_ids),
            quarantined=sorted(m.call_id for m in members if m.call_id not in kept_ids), rule=rule))
    return group_reports, unresolved_retries


def _retry_rule(members: list[_Call], by_id: dict[str, _Call], terminal_call_id: str | None,
                anchor_id: str | None, below_anchor: set[str]) -> tuple[list[_Call], str]:
    """The members one retry group keeps, and the rule (a-d) that decided it."""
    with_children = [m for m in members if m.children]
    if with_children:
        return with_children, RULE_EXTENDED
    if terminal_call_id is not None and any(m.call_id == terminal_call_id for m in members):
        return [by_id[terminal_call_id]], RULE_TERMINAL
    if all(members[0].same_full_sequence(m) for m in members[1:]):
        return [members[0]], RULE_TWINS
    parent = members[0].parent
    if parent is not None and (parent.call_id == anchor_id or parent.call_id in below_anchor):
        return [members[0]], RULE_AFTER_TERMINAL
    return [members[0]], RULE_UNRESOLVED


def _delivered_anchor(terminal_call_id: str | None, by_id: dict[str, _Call],
                      anchor_id: str | None) -> tuple[_Call | None, str]:
    """Steps 7-8: the call the main chain ends on (None: no anchor) and `BuildNotes.terminal_chain`."""
    anchor = by_id.get(anchor_id) if anchor_id is not None else None
    if terminal_call_id is None:
        return anchor, ""
    if terminal_call_id not in by_id:
        return anchor, "missing"
    if anchor is None or anchor.quarantined:
        return None, "quarantined"
    return anchor, "main"


def _notes(calls: list[_Call], chains: list[Chain], failures: dict[str, int],
           unresolved_parent: set[str]) -> BuildNotes:
    """Step 9's counts (the caller adds what the retries and the anchor decided)."""
    captured = sum(int(c.generation.size) for c in calls)
    delivered = chains[0].generated_tokens if chains and chains[0].chain_id == "main" else 0
    return BuildNotes(
        roots=sum(1 for c in calls if c.parent is None and not c.quarantined),
        chains=len(chains),
        generated_tokens_captured=captured,
        generated_tokens_delivered=delivered,
        delivered_fraction=round(delivered / captured, 4) if captured else 0.0,
        parent_link_failures=dict(sorted(failures.items())),
        unresolved_parent_calls=sorted(unresolved_parent),
    )


def _anchor(terminal_call_id: str | None, by_id: dict[str, _Call], groups: list[list[_Call]]) -> str | None:
    """The call the delivered chain ends on, after rule 6a's twin hand-over.

    A terminal call that lost to an extended sibling stays quarantined; when a kept
    sibling is its token-identical twin the harness received the same tokens, so the
    anchor moves to that twin (smallest id). Otherwise the named call is the anchor
    (and will be reported quarantined).
    """
    if terminal_call_id is None or terminal_call_id not in by_id:
        return None
    terminal = by_id[terminal_call_id]
    if terminal.children:
        return terminal_call_id
    for members in groups:
        if terminal in members:
            extended = [m for m in members if m.children]
            if not extended:
                return terminal_call_id
            twins = sorted(m.call_id for m in extended if m.same_full_sequence(terminal))
            return twins[0] if twins else terminal_call_id
    return terminal_call_id


def _descendants(call: _Call) -> set[str]:
    out: set[str] = set()
    stack = list(call.children)
    while stack:
        node = stack.pop()
        out.add(node.call_id)
        stack.extend(node.children)
    return out


def _chains(calls: list[_Call], anchor: _Call | None) -> list[Chain]:
    """Every root-to-leaf path without a quarantined call; the delivered one first as "main"."""
    cut = anchor  # paths through the anchor end there; its subtree forms no chain
    paths: list[list[_Call]] = []
    for root in calls:
        if root.parent is not None or root.quarantined:
            continue
        stack: list[tuple[_Call, list[_Call]]] = [(root, [root])]
        while stack:
            node, path = stack.pop()
            live = [] if node is cut else [c for c in node.children if not c.quarantined]
            if not live:
                paths.append(path)
                continue
            for child in live:
                stack.append((child, path + [child]))
    if anchor is not None:
        main_path = next(p for p in paths if p[-1] is anchor)
    elif paths:
        main_path = min(paths, key=lambda p: (_time_key(p[0]), -p[-1].created_at, p[-1].call_id))
    else:
        main_path = None
    branches = sorted((p for p in paths if p is not main_path), key=lambda p: (_time_key(p[0]), _time_key(p[-1])))
    chains = []
    if main_path is not None:
        chains.append(_make_chain("main", main_path))
    chains += [_make_chain(f"branch-{i}", p) for i, p in enumerate(branches)]
    return chains


def _make_chain(chain_id: str, path: list[_Call]) -> Chain:
    links = []
    for call in path:
        start = call.parent.full_len if call.parent is not None else call.prompt.size
        links.append(ChainLink(entry=call.entry, interstitial=call.prompt[start:]))
    return Chain(chain_id=chain_id, links=links, root_prompt=path[0].prompt)


_BUILDERS: dict[str, Callable[..., BuildOutput]] = {BUILDER_NAME: prefix_merging}


def run_builder(entries: Iterable[TokenEntry], builder: str = BUILDER_NAME,
                terminal_call_id: str | None = None) -> BuildOutput:
    """Chain entries with the named strategy; an unknown name is a ValueError listing the known ones."""
    try:
        build = _BUILDERS[builder]
    except KeyError:
        raise ValueError(f"unknown builder {builder!r}; known builders: {', '.join(sorted(_BUILDERS))}") from None
    return build(list(entries), terminal_call_id=terminal_call_id)
