"""The `prefix_merging` build from start to end: the steps of docs/contract.md#builder, in order.

Steps 1-2 (`prepare_entries`) do not depend on the terminal call, so one preparation
serves builds with and without an anchor; steps 3-9 (`chain_prepared`) link, settle and
chain the calls. Each step lives in its own module; this one runs them and gathers
the notes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..records import TokenEntry
from .calls import Call, descendants, split_empty_generations
from .chains import build_chains, delivered_anchor
from .dedupe import dedupe
from .materialize import materialize
from .output import BUILDER_NAME, DUPLICATE_CONFLICT, BuildNotes, BuildOutput, Chain
from .parents import resolve_parents
from .retries import choose_anchor, group_retries, settle_retries


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
    kept, dropped, conflicts = dedupe(entries)
    full, excluded = materialize(kept)
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
    empty, calls = split_empty_generations(prepared.full)
    # 4. Shorter prompts first: a parent's cumulative sequence is a prefix of its child's prompt.
    calls.sort(key=lambda c: (c.prompt.size, c.call_id))
    by_id = {c.call_id: c for c in calls}
    # 5. Resolve parents.
    links = resolve_parents(calls, by_id, failures, unresolved_parent)
    # 6. Retries, settled after the anchor is known (a terminal call can decide its group).
    retry_groups = group_retries(calls)
    anchor_id = choose_anchor(terminal_call_id, by_id, retry_groups)
    below_anchor = descendants(by_id[anchor_id]) if anchor_id is not None else set()
    group_reports, unresolved_retries = settle_retries(retry_groups, by_id, terminal_call_id, anchor_id,
                                                       below_anchor)
    # 7-8. Chains and the delivered one.
    anchor, terminal_chain = delivered_anchor(terminal_call_id, by_id, anchor_id)
    chains = build_chains(calls, anchor)
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


def _notes(calls: list[Call], chains: list[Chain], failures: dict[str, int],
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


_BUILDERS: dict[str, Callable[..., BuildOutput]] = {BUILDER_NAME: prefix_merging}


def run_builder(entries: Iterable[TokenEntry], builder: str = BUILDER_NAME,
                terminal_call_id: str | None = None) -> BuildOutput:
    """Chain entries with the named strategy; an unknown name is a ValueError listing the known ones."""
    try:
        build = _BUILDERS[builder]
    except KeyError:
        raise ValueError(f"unknown builder {builder!r}; known builders: {', '.join(sorted(_BUILDERS))}") from None
    return build(list(entries), terminal_call_id=terminal_call_id)
