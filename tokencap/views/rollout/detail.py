"""One node of the call tree in detail: fields, parent-link check, retry/twin group, output items.

The call's fields come from `call_fields`, its parent-link check (recomputed for this call
only, with its numbers) from `link_check`; here are its headline and facts, its retry group
and twins, and its output items, and a refusal's or a never-captured parent's detail.

Everything returned is plain data; strings from the capture are never formatted into
markup here (the app shows them with plain-text elements).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ...builder import RetryGroup
from ...records import TokenEntry
from ...verdicts import twins_of
from ..formatting import fmt_time
from ..model import CALL, GHOST, REFUSAL, RolloutView, split_key
from ..words import RULE_TEXT
from . import items
from .call_fields import entry_fields, field_value
from .link_check import digest_lines, link_check, short_digests
from .verdicts import conditions_frame


@dataclass
class ItemPart:
    """One piece of an output item: plain text, or an object to show as JSON."""

    title: str
    kind: str  # "text" or "json"
    body: Any
    carries_tokens: bool = False


@dataclass
class CallDetail:
    key: str
    kind: str
    ident: str
    headline: str
    facts: list[str] = field(default_factory=list)
    fields: pd.DataFrame | None = None
    link_outcome: str = ""
    link_ok: bool | None = None
    link_checks: pd.DataFrame | None = None
    group_text: str = ""
    group: pd.DataFrame | None = None
    twins: list[str] = field(default_factory=list)
    items: list[ItemPart] = field(default_factory=list)
    conditions: pd.DataFrame | None = None


# --------------------------------------------------------------------------- retry group and twins


def retry_group_of(view: RolloutView, call_id: str) -> RetryGroup | None:
    if view.build is None:
        return None
    return next((g for g in view.build.retry_groups if call_id in g.members), None)


def group_frame(view: RolloutView, group: RetryGroup) -> pd.DataFrame:
    build = view.build
    assert build is not None
    linked_children: dict[str, int] = {}
    for d in build.links.values():
        if d.linked_parent is not None:
            linked_children[d.linked_parent] = linked_children.get(d.linked_parent, 0) + 1
    kept = group.kept[0] if group.kept else None
    kept_entry = build.entries.get(kept) if kept else None
    rows = []
    for m in group.members:
        e = build.entries[m]
        same = kept_entry is not None and e.full_len == kept_entry.full_len and bool(
            (e.generation_token_ids.size == kept_entry.generation_token_ids.size)
            and (e.generation_token_ids == kept_entry.generation_token_ids).all())
        rows.append({
            "call": m,
            "decision": "kept" if m in group.kept else "quarantined",
            "generated": int(e.generation_token_ids.size),
            "same tokens as kept": "—" if m == kept else ("yes" if same else "no"),
            "linked children": linked_children.get(m, 0),
            "finish_reason": field_value(e.finish_reason),
            "created_at": fmt_time(e.created_at, view.origin_time),
        })
    return pd.DataFrame(rows)


def twin_ids(view: RolloutView, call_id: str) -> list[str]:
    """Other calls with this call's exact full sequence (prompt + generation), generation non-empty."""
    build = view.build
    if build is None or call_id not in build.entries:
        return []
    entry = build.entries[call_id]
    if not entry.generation_token_ids.size:
        return []
    return [t.model_call_id for t in twins_of(entry, build) if t.model_call_id != call_id]


# --------------------------------------------------------------------------- output items


def output_item_parts(entry: TokenEntry, names: Sequence[str] = ()) -> list[ItemPart]:
    """Each output item as plain-text parts (assistant text) or JSON (tool calls, ...), titled by ``names`` if given."""
    carrier = entry.token_item_index if entry.token_item_index is not None else len(entry.output_items) - 1
    parts: list[ItemPart] = []
    for i, item in enumerate(entry.output_items):
        carries = i == carrier
        typ = str(item.get("type", "item"))
        role = item.get("role")
        name = names[i] if i < len(names) else f"item {i}"
        title = f"{name} · {typ}" + (f" ({role})" if isinstance(role, str) else "")
        if typ == "function_call" and isinstance(item.get("name"), str):
            title += f" · {item['name']}"
        texts = _texts(item)
        if texts is not None:
            for j, text in enumerate(texts):
                parts.append(ItemPart(title if len(texts) == 1 else f"{title} · part {j}", "text", text, carries))
            if not texts:
                parts.append(ItemPart(title, "json", _jsonable(item), carries))
        else:
            parts.append(ItemPart(title, "json", _jsonable(item), carries))
    return parts


def _texts(item: Mapping[str, Any]) -> list[str] | None:
    """The text of a message-like item, or None when it is not only text."""
    content = item.get("content")
    if item.get("type") == "message" or (content is not None and item.get("type") is None):
        if isinstance(content, str):
            return [content]
        if isinstance(content, list):
            out = []
            for part in content:
                if isinstance(part, Mapping) and isinstance(part.get("text"), str) and \
                        set(part) <= {"type", "text", "annotations", "logprobs"}:
                    out.append(part["text"])
                else:
                    return None
            return out
    if item.get("type") in ("output_text", "text") and isinstance(item.get("text"), str):
        return [item["text"]]
    return None


def _jsonable(value: Any) -> Any:
    """A JSON round trip, so the app's JSON viewer gets plain types (and nothing else)."""
    return json.loads(json.dumps(value, default=str))


# --------------------------------------------------------------------------- entry point


def call_detail(view: RolloutView, key: str) -> CallDetail:
    """Everything the detail panel shows for one node key (``call:ID``, ``refusal:ID``, ``ghost:ID``)."""
    kind, ident = split_key(key)
    if kind == REFUSAL:
        return _refusal_detail(view, key, ident)
    if kind == GHOST:
        return _ghost_detail(view, key, ident)
    entry = view.entry(ident)
    if entry is None:
        return CallDetail(key, kind, ident, "Unknown call", facts=["No record with this id in the snapshot."])
    headline, facts = _call_headline(view, ident)
    check = link_check(view, entry)
    detail = CallDetail(key, kind, ident, headline, facts=facts, fields=entry_fields(entry, view),
                        link_outcome=check.outcome, link_ok=check.ok, link_checks=check.checks)
    group = retry_group_of(view, ident)
    if group is not None:
        detail.group = group_frame(view, group)
        detail.group_text = RULE_TEXT.get(group.rule, group.rule)
    detail.twins = twin_ids(view, ident)
    from_items = items.from_items(view)  # docs/contract.md#token-rollouts: the call is its item; items named by
    # their place in the output
    facts[:0] = [items.read_from_fact(entry)] if from_items else []
    detail.items = output_item_parts(entry, items.item_names(entry) if from_items else ())
    return detail


_ROLE_HEADLINES = {"main": "On the delivered main chain", "branch": "On a branch (not delivered)",
                   "quarantined": "Quarantined retry", "after_terminal": "After the terminal call (not delivered)"}


def _call_headline(view: RolloutView, ident: str) -> tuple[str, list[str]]:
    """A call's headline (what it is in the build) and the facts under it: the terminal call, its chains, and
    whether it masks the sample."""
    build = view.build
    if build is None:
        return "Record (rollout not built)", []
    facts: list[str] = []
    if ident in build.excluded:
        headline = "Excluded record"
    elif ident in build.notes.empty_generation_calls:
        headline = "Empty generation (not chained)"
    else:
        headline = _ROLE_HEADLINES.get(view.roles.get(ident) or "", "Call")
    if ident == view.terminal_call_id:
        facts.append("The delivered chain ends on this call (the terminal call).")
    chains = view.chain_membership.get(ident)
    if chains:
        shown = ", ".join(chains[:8]) + (f" and {len(chains) - 8} more" if len(chains) > 8 else "")
        facts.append(f"On {len(chains)} chain{'s' if len(chains) != 1 else ''}: {shown}")
    if ident in build.notes.unresolved_parent_calls:
        facts.append("Its parent link is unproven, which masks the sample (listed in unresolved_parent_calls).")
    if ident in build.notes.unresolved_retries:
        facts.append("Its retries differ and none was kept provably, which masks the sample (listed in "
                     "unresolved_retries).")
    return headline, facts


def _refusal_detail(view: RolloutView, key: str, ident: str) -> CallDetail:
    refusal = view.refusals_by_id.get(ident)
    if refusal is None:
        return CallDetail(key, REFUSAL, ident, "Unknown refusal")
    rows = [(k, field_value(v)) for k, v in refusal.to_dict().items()]
    verdict = next((v for v in view.result.refusal_verdicts if v.refusal.model_call_id == ident), None)
    detail = CallDetail(key, REFUSAL, ident, "Engine refusal", fields=pd.DataFrame(rows, columns=["field", "value"]))
    if verdict is not None:
        detail.conditions = conditions_frame(verdict)
        detail.link_outcome = verdict.summary
        detail.link_ok = verdict.ended_chain
        detail.facts.append("Ended the delivered chain." if verdict.ended_chain
                            else "Does not end the delivered chain.")
    return detail


def _ghost_detail(view: RolloutView, key: str, ident: str) -> CallDetail:
    claimants = sorted(e.model_call_id for e in view.records_by_id.values() if e.parent_call_id == ident)
    claimants += sorted(r.model_call_id for r in view.snapshot.engine_refusals if r.parent_call_id == ident)
    if ident in view.announced_uncaptured:
        facts = ["The capture store wrote an intent for this call (the request was started), but no record of it "
                 "was ever captured: the trajectory may be missing this turn, so the rollout is masked "
                 "(capture_incomplete)."]
        if claimants:
            facts.append(f"Named as parent by: {', '.join(claimants)}.")
        return CallDetail(key, GHOST, ident, "Announced, never captured", facts=facts)
    facts = [f"Named as parent by: {', '.join(claimants) or 'nobody'}.",
             "No record with this id was captured, so nothing below it can be linked by its claim."]
    return CallDetail(key, GHOST, ident, "Claimed parent, never captured", facts=facts)


__all__ = ["CALL", "CallDetail", "ItemPart", "call_detail", "digest_lines", "entry_fields", "output_item_parts",
           "short_digests", "twin_ids"]
