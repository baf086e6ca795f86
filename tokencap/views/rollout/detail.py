"""One node of the call tree in detail: fields, parent-link check, retry/twin group, output items.

The parent-link check is recomputed here for the selected call only: the digest the
claimed (or recovered) parent's cumulative sequence carries, against the digest of the
same number of tokens at the start of this call's prompt -- the test the builder made,
shown with its numbers. Excluded records get the check that excluded them (stamped
`cum_len`/`digest` against their own tokens, or the delta walk that broke).

Everything returned is plain data; strings from the capture are never formatted into
markup here (the app shows them with plain-text elements).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ...builder import (
    DELTA_UNRECONSTRUCTABLE,
    DUPLICATE_CONFLICT,
    ENTRY_DIGEST_MISMATCH,
    MISSING_RESOLUTION,
    PARENT_DIGEST_MISMATCH,
    PARENT_MISSING,
    PARENT_MISSING_RECOVERED,
    RetryGroup,
)
from ...digest import compute_digest, digest_of_parts
from ...records import TokenEntry
from ...verdicts import twins_of
from ..formatting import count, fmt_time, shorten
from ..model import CALL, GHOST, REFUSAL, RolloutView, split_key
from ..words import NOTE_TEXT, RULE_TEXT
from . import items
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


# --------------------------------------------------------------------------- fields


def _value(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return shorten(json.dumps(v, ensure_ascii=False, default=str), 300)
    return str(v)


def entry_fields(entry: TokenEntry, view: RolloutView | None = None) -> pd.DataFrame:
    """A call's fields as (field, value) rows, token arrays summarised by their lengths."""
    origin = view.origin_time if view is not None else None
    full = view.build.entries.get(entry.model_call_id) if view is not None and view.build is not None else None
    prompt_len = int(full.prompt_token_ids.size) if full is not None else int(entry.prompt_token_ids.size)
    rows: list[tuple[str, str]] = [
        ("model_call_id", entry.model_call_id),
        ("rollout_id", entry.rollout_id),
        ("model", entry.model or "—"),
        ("schema_version", str(entry.schema_version)),
        ("created_at", fmt_time(entry.created_at, origin)),
        ("finish_reason", _value(entry.finish_reason)),
        ("parent_resolution", _value(entry.parent_resolution.value if entry.parent_resolution else None)),
        ("parent_call_id", _value(entry.parent_call_id)),
        ("parent_resolution_reason", entry.parent_resolution_reason or "—"),
        ("prompt tokens (full)", f"{prompt_len:,}"),
        ("generated tokens", f"{int(entry.generation_token_ids.size):,}"),
    ]
    if entry.prompt_is_delta:
        rows.append(("prompt tokens stored (delta suffix)", f"{int(entry.prompt_token_ids.size):,}"))
    rows += [
        ("prompt_is_delta", _value(entry.prompt_is_delta)),
        ("cum_len (stamped)", _value(entry.cum_len)),
        ("digest (stamped)", _value(entry.digest)),
        ("token_item_index", _value(entry.token_item_index)),
        ("output items", str(len(entry.output_items))),
        ("prefix_requested / prefix_supplied", f"{_value(entry.prefix_requested)} / {_value(entry.prefix_supplied)}"),
        ("continuation_fingerprint", _value(entry.continuation_fingerprint) or "—"),
        ("continuation_context_len", _value(entry.continuation_context_len)),
        ("continuation_context_digest", _value(entry.continuation_context_digest) or "—"),
        ("fingerprint_version", _value(entry.fingerprint_version)),
        ("routed_experts", "present" if entry.routed_experts is not None else "—"),
    ]
    if entry.generation_log_probs.size:
        lp = entry.generation_log_probs
        rows.append(("log-prob mean / min", f"{float(lp.mean()):.3f} / {float(lp.min()):.3f}"))
    if view is not None:
        copies = len(view.copies_by_id.get(entry.model_call_id, ()))
        if copies > 1:
            rows.append(("records with this id", str(copies)))
    for k, v in entry.extra.items():
        rows.append((f"{k} (unknown field, kept)", _value(v)))
    return pd.DataFrame(rows, columns=["field", "value"])


# --------------------------------------------------------------------------- parent link


def _parent_check_rows(child: TokenEntry, parent: TokenEntry, label: str) -> tuple[list[dict[str, Any]], bool]:
    """Length and digest of ``parent``'s full sequence against the start of ``child``'s prompt."""
    expected_len = parent.full_len
    prompt = child.prompt_token_ids
    rows: list[dict[str, Any]] = []
    long_enough = prompt.size >= expected_len
    rows.append({"check": f"length vs {label}",
                 "expected": f"prompt ≥ {count(expected_len, 'token')}", "found": count(int(prompt.size), "token"),
                 "ok": "✓" if long_enough else "✗"})
    if parent.digest is not None:
        expected = parent.digest
        source = "stamped"
    else:
        expected = digest_of_parts(parent.prompt_token_ids, parent.generation_token_ids)
        source = "computed: no stamped digest"
    if long_enough:
        found = compute_digest(prompt[:expected_len])
        ok = found == expected
    else:
        found, ok = "— (prompt shorter than the parent's sequence)", False
    rows.append({"check": f"digest vs {label} ({source})", "expected": expected, "found": found,
                 "ok": "✓" if ok else "✗"})
    return rows, long_enough and ok


def _is_digest(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def short_digests(checks: pd.DataFrame) -> pd.DataFrame:
    """The checks with every 64-hex digest cut to its first 12 characters (the page shows them in full below)."""
    return checks.map(lambda v: f"{v[:12]}…" if _is_digest(v) else v)


def digest_lines(checks: pd.DataFrame | None) -> str:
    """Every digest of the checks in full, one per line, labelled by its check: the copyable proof."""
    if checks is None:
        return ""
    lines = []
    for row in checks.itertuples(index=False):
        for side in ("expected", "found"):
            value = getattr(row, side)
            if _is_digest(value):
                lines.append(f"{side:<8} {value}  ({row.check})")
    return "\n".join(lines)


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame | None:
    return pd.DataFrame(rows, columns=["ok", "check", "expected", "found"]) if rows else None


def _why_absent(view: RolloutView, call_id: str) -> str:
    build = view.build
    if build is None:
        return "not built"
    if call_id in build.excluded:
        return f"excluded ({build.excluded[call_id]})"
    if call_id in build.notes.empty_generation_calls:
        return "left out of chaining (empty generation)"
    if call_id in build.entries:
        return "chained"
    return "never captured (no record with this id)"


def _link_check(view: RolloutView, detail: CallDetail, entry: TokenEntry) -> None:
    build = view.build
    cid = entry.model_call_id
    rows: list[dict[str, Any]] = []
    if build is None:
        detail.link_outcome = "The rollout was not built, so no link was checked."
        return
    if cid in build.excluded:
        _exclusion_check(view, detail, entry)
        return
    decision = build.links.get(cid)
    claimed = entry.parent_call_id
    if decision is None:
        # Empty generation: left out of chaining, but its claim can still be checked.
        detail.link_outcome = ("Not chained: this call generated no tokens, so it carries no training signal. Its "
                               "children are re-attached to the longest placed prefix of their prompts.")
        detail.link_ok = None
        if claimed is not None and claimed in build.entries:
            rows, _ = _parent_check_rows(build.entries[cid], build.entries[claimed], "claimed parent")
        detail.link_checks = _frame(rows)
        return
    full = build.entries[cid]
    if decision.note is None:
        if decision.linked_parent is None:
            detail.link_outcome = "A root: the request was recorded as the start of a conversation."
            detail.link_ok = True
        else:
            rows, ok = _parent_check_rows(full, build.entries[decision.linked_parent], "parent")
            detail.link_outcome = (f"Verified: the parent's whole cumulative sequence opens this prompt, so this call "
                                   f"continues {decision.linked_parent} exactly.")
            detail.link_ok = ok
    else:
        detail.link_outcome = NOTE_TEXT.get(decision.note, decision.note)
        detail.link_ok = decision.note == PARENT_MISSING_RECOVERED
        if decision.note == PARENT_DIGEST_MISMATCH and claimed in build.entries:
            rows, _ = _parent_check_rows(full, build.entries[claimed], "claimed parent")
        elif decision.note in (PARENT_MISSING, PARENT_MISSING_RECOVERED) and claimed is not None:
            rows.append({"check": "claimed parent among the chained calls", "expected": claimed,
                         "found": _why_absent(view, claimed), "ok": "✗"})
            if decision.note == PARENT_MISSING_RECOVERED and decision.linked_parent is not None:
                more, _ = _parent_check_rows(full, build.entries[decision.linked_parent],
                                             f"recovered parent {decision.linked_parent}")
                rows += more
            elif decision.candidates:
                rows.append({"check": "calls sharing the longest prefix (ambiguous)", "expected": "exactly one",
                             "found": ", ".join(decision.candidates), "ok": "✗"})
            else:
                rows.append({"check": "placed call whose full sequence prefixes this prompt", "expected": "exactly one",
                             "found": "none", "ok": "✗"})
        elif decision.note == MISSING_RESOLUTION and claimed is not None and claimed in build.entries:
            more, _ = _parent_check_rows(full, build.entries[claimed], "named parent")
            rows += more
            rows.append({"check": "request-time resolution", "expected": "root / resolved / unresolved",
                         "found": "null", "ok": "✗"})
    if cid in build.conflicting_duplicates:
        rows.append({"check": "copies of this call id agree", "expected": "identical tokens",
                     "found": f"{len(view.copies_by_id.get(cid, ()))} records that differ", "ok": "✗"})
        detail.link_outcome += " " + NOTE_TEXT[DUPLICATE_CONFLICT]
        detail.link_ok = False
    detail.link_checks = _frame(rows)


def _exclusion_check(view: RolloutView, detail: CallDetail, entry: TokenEntry) -> None:
    build = view.build
    assert build is not None
    reason = build.excluded[entry.model_call_id]
    detail.link_outcome = NOTE_TEXT.get(reason, reason)
    detail.link_ok = False
    rows: list[dict[str, Any]] = []
    if reason == ENTRY_DIGEST_MISMATCH:
        actual_len = entry.full_len
        rows.append({"check": "stamped cum_len vs prompt + generation", "expected": _value(entry.cum_len),
                     "found": f"{actual_len:,}", "ok": "✓" if entry.cum_len in (None, actual_len) else "✗"})
        computed = digest_of_parts(entry.prompt_token_ids, entry.generation_token_ids)
        rows.append({"check": "stamped digest vs digest of its own tokens", "expected": _value(entry.digest),
                     "found": computed, "ok": "✓" if entry.digest in (None, computed) else "✗"})
    elif reason == DELTA_UNRECONSTRUCTABLE:
        rows = _delta_walk(view, entry)
    detail.link_checks = _frame(rows)


def _delta_walk(view: RolloutView, entry: TokenEntry) -> list[dict[str, Any]]:
    """Where the walk up a delta record's parents broke (or that its rebuild did not verify)."""
    build = view.build
    assert build is not None
    records = view.records_by_id
    rows: list[dict[str, Any]] = []
    seen = {entry.model_call_id}
    cursor = entry.parent_call_id
    steps = 0
    while True:
        steps += 1
        if cursor is None:
            rows.append({"check": f"ancestor {steps}", "expected": "a record", "found": "no parent named", "ok": "✗"})
            break
        if cursor in seen:
            rows.append({"check": f"ancestor {steps}", "expected": "a record not seen before",
                         "found": f"{cursor} again: the parent links loop", "ok": "✗"})
            break
        seen.add(cursor)
        rec = records.get(cursor)
        if rec is None:
            rows.append({"check": f"ancestor {steps}", "expected": cursor, "found": "never captured", "ok": "✗"})
            break
        if cursor in build.excluded:
            rows.append({"check": f"ancestor {steps}", "expected": cursor,
                         "found": f"excluded ({build.excluded[cursor]})", "ok": "✗"})
            break
        if not rec.prompt_is_delta:
            rows.append({"check": f"ancestor {steps}", "expected": cursor, "found": "full-prompt record", "ok": "✓"})
            rows.append({"check": "rebuilt sequence vs stamped cum_len and digest",
                         "expected": f"cum_len {_value(entry.cum_len)}, digest {_value(entry.digest)}",
                         "found": "no match (or a stamp is missing)", "ok": "✗"})
            break
        rows.append({"check": f"ancestor {steps}", "expected": cursor, "found": "delta record", "ok": "✓"})
        cursor = rec.parent_call_id
        if steps > 10_000:
            break
    return rows


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
            "finish_reason": _value(e.finish_reason),
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
    build = view.build
    role = view.roles.get(ident)
    facts: list[str] = []
    if build is not None:
        if ident in build.excluded:
            headline = "Excluded record"
        elif ident in build.notes.empty_generation_calls:
            headline = "Empty generation (not chained)"
        elif role == "main":
            headline = "On the delivered main chain"
        elif role == "branch":
            headline = "On a branch (not delivered)"
        elif role == "quarantined":
            headline = "Quarantined retry"
        elif role == "after_terminal":
            headline = "After the terminal call (not delivered)"
        else:
            headline = "Call"
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
    else:
        headline = "Record (rollout not built)"
    detail = CallDetail(key, kind, ident, headline, facts=facts, fields=entry_fields(entry, view))
    _link_check(view, detail, entry)
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


def _refusal_detail(view: RolloutView, key: str, ident: str) -> CallDetail:
    refusal = view.refusals_by_id.get(ident)
    if refusal is None:
        return CallDetail(key, REFUSAL, ident, "Unknown refusal")
    rows = [(k, _value(v)) for k, v in refusal.to_dict().items()]
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
