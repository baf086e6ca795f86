"""What hovering a node of the call tree says: what the node is, then its facts, then its break.

A call says its output item (rollouts read from items), its tokens, finish and creation time,
its request-time resolution and claimed parent, the link the build made (or why it made none),
why it was excluded, whether the harness's final answer is its, the reason the harness gave,
and the chains it is on. A refusal says its code, time, parent and message; a node never
captured says why it is drawn at all. Capture strings are cut to one line each.
"""

from __future__ import annotations

from ...builder import (
    MISSING_RESOLUTION,
    PARENT_DIGEST_MISMATCH,
    PARENT_MISSING,
    PARENT_MISSING_RECOVERED,
    PARENT_UNRESOLVED,
    LinkDecision,
)
from ...records import EngineRefusalRecord
from ..formatting import fmt_int, fmt_time, one_line
from ..model import CALL, REFUSAL, RolloutView
from . import items
from .tree_layout import TreeNode
from .tree_marks import NODE_STYLES

_NOTE_SHORT = {
    PARENT_UNRESOLVED: "unresolved at request time: fragment root",
    PARENT_DIGEST_MISMATCH: "claimed parent's digest does not match: fragment root",
    PARENT_MISSING: "claimed parent missing, no unique prefix: fragment root",
    PARENT_MISSING_RECOVERED: "claimed parent missing: recovered by longest prefix",
    MISSING_RESOLUTION: "no resolution recorded: fragment root",
}
"""Each link note in a few words: what the build did with the call's claimed parent."""


def node_hover(n: TreeNode, view: RolloutView, origin: float | None) -> str:
    """What hovering node ``n`` says (times relative to ``origin``), its break's lines last."""
    lines = [f"{one_line(n.ident, 80)}  ·  {NODE_STYLES[n.category][0]}"]
    if n.kind == CALL:
        lines += _call_lines(n, view, origin)
    elif n.kind == REFUSAL:
        lines += _refusal_lines(view.refusals_by_id.get(n.ident), origin)
    elif n.category == "announced":
        lines.append("the store wrote an intent for this call; no record of it was captured")
    else:
        lines.append("claimed as a parent; no record of this id was captured")
    return "\n".join(lines) + (f"\n{n.break_hover}" if n.break_hover else "")


def _call_lines(n: TreeNode, view: RolloutView, origin: float | None) -> list[str]:
    entry = view.entry(n.ident)
    build = view.build
    lines: list[str] = []
    # The output item the call was read from (docs/contract.md#token-rollouts).
    if entry is not None and items.from_items(view):
        lines.append(f"item {items.call_text(entry, 100)}")
    if entry is not None:
        p, g = int(entry.prompt_token_ids.size), int(entry.generation_token_ids.size)
        stored = " (delta record)" if entry.prompt_is_delta else ""
        lines.append(f"prompt {fmt_int(p)} · generated {fmt_int(g)} · total {fmt_int(p + g)}{stored}")
        lines.append(f"finish {one_line(entry.finish_reason, 40)} · created {fmt_time(entry.created_at, origin)}")
        res = entry.parent_resolution.value if entry.parent_resolution is not None else "null"
        claimed = f" → {one_line(entry.parent_call_id, 60)}" if entry.parent_call_id else ""
        lines.append(f"resolution {res}{claimed}")
    decision = build.links.get(n.ident) if build is not None else None
    if decision is not None:
        lines += _link_lines(decision)
    if build is not None and n.ident in build.excluded:
        lines.append(f"excluded: {one_line(build.excluded[n.ident])}")
    if "conflict" in n.flags:
        lines.append("conflicting duplicate copies of this id")
    if "final_answer" in n.flags or "answer_candidate" in n.flags:
        attribution = view.result.terminal_attribution
        method = attribution.method if attribution is not None else ""
        lines.append(f"the harness's final answer (attributed by {method})" if "final_answer" in n.flags else
                     f"matches the harness's final answer by {method}, as does another sequence: ambiguous")
    if entry is not None and entry.parent_resolution_reason:
        lines.append(f"reason: {one_line(entry.parent_resolution_reason, 100)}")
    chains = view.chain_membership.get(n.ident)
    if chains:
        lines.append("on " + one_line(", ".join(chains[:6]) + (" …" if len(chains) > 6 else "")))
    return lines


def _link_lines(decision: LinkDecision) -> list[str]:
    """The link the build made for a call: verified, a root, or what its note says."""
    if decision.note is None:
        if decision.linked_parent is not None:
            return [f"link verified to {one_line(decision.linked_parent, 60)}"]
        return ["root"]
    lines = [one_line(_NOTE_SHORT.get(decision.note, decision.note))]
    if decision.note == PARENT_MISSING_RECOVERED and decision.linked_parent:
        lines.append(f"re-attached to {one_line(decision.linked_parent, 60)}")
    return lines


def _refusal_lines(refusal: EngineRefusalRecord | None, origin: float | None) -> list[str]:
    """An engine refusal's code, time, parent and message (nothing when its record is gone)."""
    if refusal is None:
        return []
    lines = [f"code {one_line(refusal.code, 60)} · recorded {fmt_time(refusal.recorded_at, origin)}"]
    parent = f" → {one_line(refusal.parent_call_id, 60)}" if refusal.parent_call_id else ""
    lines.append(f"resolution {refusal.parent_resolution.value}{parent}")
    if refusal.message:
        lines.append(f"message: {one_line(refusal.message, 100)}")
    return lines
