"""A readable text report of one build: the call tree, notes, verdicts and mask reasons.

This is what `tokencap inspect` prints. Every fact comes from the build and the verdicts;
this module only arranges them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from .builder import BuildOutput
from .rollout import MASK_REASON_TEXT, RolloutResult

_MARKS = {
    "main": "*",
    "branch": "+",
    "quarantined": "Q",
    "after_terminal": "~",
}


def call_roles(build: BuildOutput) -> dict[str, str]:
    """Each chained call's role: main, branch, quarantined or after_terminal."""
    roles: dict[str, str] = {}
    for chain in build.chains:
        for cid in chain.call_ids:
            if chain.chain_id == "main":
                roles[cid] = "main"
            else:
                roles.setdefault(cid, "branch")
    for cid in build.quarantined:
        roles[cid] = "quarantined"
    for cid in build.notes.after_terminal_calls:
        roles.setdefault(cid, "after_terminal")
    return roles


def _describe(build: BuildOutput, cid: str, roles: dict[str, str]) -> str:
    entry = build.entries[cid]
    link = build.links.get(cid)
    bits = [f"{_MARKS.get(roles.get(cid, ''), ' ')} {cid}",
            f"prompt {entry.prompt_token_ids.size}", f"gen {entry.generation_token_ids.size}"]
    if entry.finish_reason:
        bits.append(f"finish={entry.finish_reason}")
    role = roles.get(cid)
    if role and role != "main":
        bits.append(role.replace("_", " "))
    if build.notes.terminal_chain == "main" and cid == build.notes.terminal_call_id:
        bits.append("<- terminal call")
    if link is not None and link.note:
        if link.boundary:
            bits.append(f"UNRESOLVED BOUNDARY ({link.note}; claimed parent {link.claimed_parent!r})")
        else:
            bits.append(f"recovered link to {link.linked_parent} (claimed {link.claimed_parent!r} is absent)")
    return "  ".join(bits)


def attribution_lines(result: RolloutResult) -> list[str]:
    """The terminal attribution in plain words (empty when no final response was given)."""
    metric = result.metrics.get("terminal_attribution")
    if metric is None:
        return []
    attribution = result.terminal_attribution
    outcome = metric["outcome"]
    lines = []
    if outcome == "given":
        lines.append(f"outcome: given -- the terminal call id {metric['call_id']} was given explicitly, so it wins "
                     "over the harness's final response")
        if attribution is not None:
            lines.append(f"the final response alone would give: {attribution.outcome}"
                         + (f" ({attribution.call_id})" if attribution.call_id else "")
                         + f" -- {attribution.describe()}")
        return lines
    method = {"tokens": "by tokens (the final answer's generated token ids)",
              "content": "by content (the final turn's text, tool calls and reasoning summaries; it carried no token "
                         "ids)"}.get(metric["method"], "-")
    lines.append(f"outcome: {outcome}" + (f" -> {metric['call_id']}" if metric["call_id"] else ""))
    lines.append(f"method: {method}")
    lines.append(f"candidates: {', '.join(metric['candidates']) if metric['candidates'] else 'none'}")
    if attribution is not None:
        lines.append(attribution.describe())
    build = result.build
    if outcome == "attributed" and build is not None:
        notes = build.notes
        if notes.terminal_chain == "main":
            moved = (f" (moved to its token-identical twin {notes.terminal_call_id})"
                     if notes.terminal_call_id != metric["call_id"] else "")
            lines.append(f"the delivered chain ends on the harness's final answer{moved}")
            if notes.after_terminal_calls:
                lines.append(f"not delivered, sent after the final answer: {', '.join(notes.after_terminal_calls)}")
        else:
            lines.append(f"the attributed call is {notes.terminal_chain or 'not placed'}, so it cannot be delivered")
    return lines


def render_text(result: RolloutResult, source_notes: Sequence[str] = ()) -> str:
    """The report of one build; ``source_notes`` (the snapshot's: what the loader skipped or
    inferred, why a capture counts as incomplete) are listed under "source"."""
    lines: list[str] = []
    verdict = "MASKED" if result.mask_sample else "TRAINABLE"
    lines.append(f"rollout {result.rollout_id}: {verdict}")
    for reason in result.mask_reasons:
        lines.append(f"  - {reason}: {MASK_REASON_TEXT.get(reason, '')}")
    m = result.metrics
    status = m.get("status")
    if status:
        extra = f" ({m['incomplete_reason']})" if m.get("incomplete_reason") else ""
        lines.append(f"status: {status}{extra}")
    if m.get("error"):
        lines.append(f"error: {m['error']}")
    if source_notes:
        lines.append("source")
        lines.extend(f"  {' '.join(note.split())}" for note in source_notes)
    build = result.build
    if build is None:
        return "\n".join(lines) + "\n"
    lines.append(f"calls {m['n_calls']}, chains {m['chains']}, roots {m['roots']}, quarantined {m['quarantined_calls']}, "
                 f"delivered {m['generated_tokens_delivered']}/{m['generated_tokens_captured']} generated tokens "
                 f"({m['delivered_fraction']:.1%})")
    lines.append("")
    lines.append("call tree  (* main chain, + branch, Q quarantined, ~ after terminal)")
    roles = call_roles(build)
    children: dict[str | None, list[str]] = defaultdict(list)
    for cid, link in build.links.items():
        children[link.linked_parent].append(cid)
    for kids in children.values():
        kids.sort(key=lambda c: (build.entries[c].created_at, c))
    refusals_under: dict[str | None, list] = defaultdict(list)
    for verdict_ in result.refusal_verdicts:
        refusals_under[verdict_.refusal.parent_call_id].append(verdict_)
    stack = [(cid, 0) for cid in reversed(children[None])]
    while stack:
        cid, depth = stack.pop()
        lines.append("  " + "  " * depth + _describe(build, cid, roles))
        for verdict_ in refusals_under.pop(cid, []):
            r = verdict_.refusal
            outcome = "ENDED THE ROLLOUT" if verdict_.ended_chain else "no effect on the verdict"
            lines.append("  " + "  " * (depth + 1) + f"! refusal {r.model_call_id} (code {r.code!r}): {outcome}")
        stack.extend((kid, depth + 1) for kid in reversed(children.get(cid, [])))
    for parent, verdicts_ in refusals_under.items():
        for verdict_ in verdicts_:
            r = verdict_.refusal
            where = f"continued {parent!r}, which is not chained" if parent else "no known parent"
            lines.append(f"  ! refusal {r.model_call_id} (code {r.code!r}): {where}")
    if build.notes.empty_generation_calls:
        lines.append(f"empty generations (not chained): {', '.join(build.notes.empty_generation_calls)}")
    for cid, reason in build.excluded.items():
        lines.append(f"excluded {cid}: {reason}")
    for cid in build.conflicting_duplicates:
        lines.append(f"conflicting duplicate copies of {cid}: first copy kept, call listed as unresolved")
    lines.append("")
    lines.append("chains")
    for chain in build.chains:
        ids = chain.call_ids
        span = f"{ids[0]} .. {ids[-1]}" if len(ids) > 1 else ids[0]
        lines.append(f"  {chain.chain_id}: {len(ids)} calls ({span}), {chain.generated_tokens} generated of "
                     f"{chain.total_tokens} tokens")
    if build.retry_groups:
        lines.append("")
        lines.append("retry groups")
        for group in build.retry_groups:
            lines.append(f"  parent {group.parent or '(root)'}: kept {', '.join(group.kept)}; quarantined "
                         f"{', '.join(group.quarantined) or '-'}  [{group.rule}]")
    notes = build.notes
    lines.append("")
    lines.append("notes")
    before = len(lines)
    if notes.parent_link_failures:
        for reason, count in notes.parent_link_failures.items():
            lines.append(f"  {reason}: {count}")
    if notes.terminal_call_id is not None or notes.terminal_chain:
        lines.append(f"  terminal call {notes.terminal_call_id!r}: {notes.terminal_chain or '-'}")
    if notes.after_terminal_calls:
        lines.append(f"  after terminal: {', '.join(notes.after_terminal_calls)}")
    if notes.unresolved_retries:
        lines.append(f"  unresolved retries: {', '.join(notes.unresolved_retries)}")
    if notes.unresolved_parent_calls:
        lines.append(f"  unresolved parent calls: {', '.join(notes.unresolved_parent_calls)}")
    if len(lines) == before:
        lines.append("  nothing to report: every link verified, no retries left open")
    attribution = attribution_lines(result)
    if attribution:
        lines.append("")
        lines.append("terminal attribution (from the harness's final response)")
        lines.extend(f"  {line}" for line in attribution)
    fr = result.finish_reason_verdict
    lines.append("")
    lines.append("verdicts")
    if fr is not None:
        lines.append(f"  finish reason: {fr.summary}")
    for verdict_ in result.refusal_verdicts:
        r = verdict_.refusal
        lines.append(f"  refusal {r.model_call_id} (code {r.code!r}, parent {r.parent_call_id!r}): {verdict_.summary}")
        for cond in verdict_.conditions:
            lines.append(f"    [{'x' if cond.holds else ' '}] {cond.name}: {cond.detail}")
    if not result.refusal_verdicts:
        lines.append("  no engine refusals")
    return "\n".join(lines) + "\n"
