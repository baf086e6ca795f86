"""The parent-link check of one call, recomputed for the selected call only, with its numbers.

The digest the claimed (or recovered) parent's cumulative sequence carries, against the digest
of the same number of tokens at the start of this call's prompt -- the test the builder made.
Excluded records get the check that excluded them (stamped `cum_len`/`digest` against their own
tokens, or the delta walk that broke); a call left out of chaining gets its claim checked; a call
whose id has copies that differ says so. Every row is plain text: ok, check, expected, found.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    BuildOutput,
    LinkDecision,
)
from ...digest import compute_digest, digest_of_parts
from ...records import TokenEntry
from ..formatting import count
from ..model import RolloutView
from ..words import NOTE_TEXT
from .call_fields import field_value

Rows = list[dict[str, Any]]


@dataclass
class LinkCheck:
    """What the detail says of a call's parent link: the outcome in words, whether the link holds (None when
    that is not the question: not built, not chained), and the checks behind it (None: no check to show)."""

    outcome: str
    ok: bool | None = None
    checks: pd.DataFrame | None = None


def link_check(view: RolloutView, entry: TokenEntry) -> LinkCheck:
    """The check of ``entry``'s parent link in ``view``'s build."""
    build = view.build
    cid = entry.model_call_id
    if build is None:
        return LinkCheck("The rollout was not built, so no link was checked.")
    if cid in build.excluded:
        return _exclusion_check(view, entry)
    decision = build.links.get(cid)
    if decision is None:
        return _unchained_check(build, entry)
    outcome, ok, rows = _chained_check(view, entry, decision)
    if cid in build.conflicting_duplicates:
        rows.append({"check": "copies of this call id agree", "expected": "identical tokens",
                     "found": f"{len(view.copies_by_id.get(cid, ()))} records that differ", "ok": "✗"})
        outcome += " " + NOTE_TEXT[DUPLICATE_CONFLICT]
        ok = False
    return LinkCheck(outcome, ok, _frame(rows))


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


def _unchained_check(build: BuildOutput, entry: TokenEntry) -> LinkCheck:
    """An empty generation: left out of chaining, but its claim can still be checked."""
    cid, claimed = entry.model_call_id, entry.parent_call_id
    rows: Rows = []
    if claimed is not None and claimed in build.entries:
        rows, _ = _parent_check_rows(build.entries[cid], build.entries[claimed], "claimed parent")
    return LinkCheck("Not chained: this call generated no tokens, so it carries no training signal. Its "
                     "children are re-attached to the longest placed prefix of their prompts.", None, _frame(rows))


def _chained_check(view: RolloutView, entry: TokenEntry, decision: LinkDecision) -> tuple[str, bool, Rows]:
    """(outcome, ok, rows) of a chained call: a root, a verified link, or what its link note says, checked."""
    build = view.build
    assert build is not None
    full = build.entries[entry.model_call_id]
    if decision.note is None:
        if decision.linked_parent is None:
            return "A root: the request was recorded as the start of a conversation.", True, []
        rows, ok = _parent_check_rows(full, build.entries[decision.linked_parent], "parent")
        return (f"Verified: the parent's whole cumulative sequence opens this prompt, so this call "
                f"continues {decision.linked_parent} exactly.", ok, rows)
    return (NOTE_TEXT.get(decision.note, decision.note), decision.note == PARENT_MISSING_RECOVERED,
            _noted_rows(view, full, decision, entry.parent_call_id))


def _noted_rows(view: RolloutView, full: TokenEntry, decision: LinkDecision, claimed: str | None) -> Rows:
    """The checks behind a link note: the claimed parent's digest, where the claimed parent went and the
    prefix search that replaced it, or the parent named without a request-time resolution."""
    build = view.build
    assert build is not None
    rows: Rows = []
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
    return rows


def _exclusion_check(view: RolloutView, entry: TokenEntry) -> LinkCheck:
    """An excluded record: the check that excluded it."""
    build = view.build
    assert build is not None
    reason = build.excluded[entry.model_call_id]
    rows: Rows = []
    if reason == ENTRY_DIGEST_MISMATCH:
        actual_len = entry.full_len
        rows.append({"check": "stamped cum_len vs prompt + generation", "expected": field_value(entry.cum_len),
                     "found": f"{actual_len:,}", "ok": "✓" if entry.cum_len in (None, actual_len) else "✗"})
        computed = digest_of_parts(entry.prompt_token_ids, entry.generation_token_ids)
        rows.append({"check": "stamped digest vs digest of its own tokens", "expected": field_value(entry.digest),
                     "found": computed, "ok": "✓" if entry.digest in (None, computed) else "✗"})
    elif reason == DELTA_UNRECONSTRUCTABLE:
        rows = _delta_walk(view, entry)
    return LinkCheck(NOTE_TEXT.get(reason, reason), False, _frame(rows))


def _delta_walk(view: RolloutView, entry: TokenEntry) -> Rows:
    """Where the walk up a delta record's parents broke (or that its rebuild did not verify)."""
    build = view.build
    assert build is not None
    records = view.records_by_id
    rows: Rows = []
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
                         "expected": f"cum_len {field_value(entry.cum_len)}, digest {field_value(entry.digest)}",
                         "found": "no match (or a stamp is missing)", "ok": "✗"})
            break
        rows.append({"check": f"ancestor {steps}", "expected": cursor, "found": "delta record", "ok": "✓"})
        cursor = rec.parent_call_id
        if steps > 10_000:
            break
    return rows


def _parent_check_rows(child: TokenEntry, parent: TokenEntry, label: str) -> tuple[Rows, bool]:
    """Length and digest of ``parent``'s full sequence against the start of ``child``'s prompt."""
    expected_len = parent.full_len
    prompt = child.prompt_token_ids
    rows: Rows = []
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


def _frame(rows: Rows) -> pd.DataFrame | None:
    return pd.DataFrame(rows, columns=["ok", "check", "expected", "found"]) if rows else None


def _why_absent(view: RolloutView, call_id: str) -> str:
    """Where a claimed parent went, if not among the chained calls."""
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
