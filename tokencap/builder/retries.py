"""Step 6 of a build (docs/contract.md#builder-retries): retries of one request, and who is quarantined.

Calls with one linked parent and an identical full prompt are retries; all but the kept
members of a group are quarantined, so a quarantined call is always a leaf. When no rule
says which generation the harness kept, the group is reported unresolved.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

import numpy as np

from .calls import Call
from .output import RULE_AFTER_TERMINAL, RULE_EXTENDED, RULE_TERMINAL, RULE_TWINS, RULE_UNRESOLVED, RetryGroup


def _prompt_key(call: Call) -> tuple[int, bytes]:
    """Identity of a call's full prompt within its parent group (hash of the new tokens only)."""
    start = call.parent.full_len if call.parent is not None else 0
    tail = np.ascontiguousarray(call.prompt[start:])
    return int(call.prompt.size), hashlib.blake2b(tail.data, digest_size=20).digest()


def group_retries(calls: list[Call]) -> list[list[Call]]:
    """Step 6's groups: calls with one linked parent and an identical full prompt, each sorted by id.

    Prompts of different lengths always differ, so only calls sharing a parent and a prompt
    length have their new tokens hashed.
    """
    by_length: dict[tuple[str | None, int], list[Call]] = defaultdict(list)
    for call in calls:
        by_length[(call.parent.call_id if call.parent else None, int(call.prompt.size))].append(call)
    groups: dict[tuple[str | None, tuple[int, bytes]], list[Call]] = defaultdict(list)
    for (parent_id, _length), same_length in by_length.items():
        if len(same_length) > 1:
            for call in same_length:
                groups[(parent_id, _prompt_key(call))].append(call)
    return [sorted(g, key=lambda c: c.call_id) for g in groups.values() if len(g) > 1]


def settle_retries(retry_groups: list[list[Call]], by_id: dict[str, Call], terminal_call_id: str | None,
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


def _retry_rule(members: list[Call], by_id: dict[str, Call], terminal_call_id: str | None,
                anchor_id: str | None, below_anchor: set[str]) -> tuple[list[Call], str]:
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


def choose_anchor(terminal_call_id: str | None, by_id: dict[str, Call], groups: list[list[Call]]) -> str | None:
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
