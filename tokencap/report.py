"""A readable text report of one build: the call tree, notes, verdicts and mask reasons.

This is what `tokencap inspect` prints. Every fact comes from the build and the verdicts;
this module only arranges them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from .builder import BuildNotes, BuildOutput
from .diagnosis import Break
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


_RELATION_TEXT = {
    "claimed": "the record's own parent_call_id",
    "branch_point": "the call the branch forks from",
    "nearest": "the earlier call sharing the longest prefix with its prompt",
}
_TEXT_SHOWN = 200  # characters of a decoded span per line in the report


def _quoted(text: str | None) -> str:
    """A decoded span on one line: JSON-quoted (newlines and control characters escaped)."""
    if text is None:
        return "(cannot be decoded)"
    shown = text if len(text) <= _TEXT_SHOWN else text[:_TEXT_SHOWN - 1] + "…"
    return json.dumps(shown, ensure_ascii=False)


def _evidence_line(item: dict[str, Any]) -> str:
    kind, call = item.get("kind"), item.get("call_id")
    if kind == "invocation":
        parent = item.get("parent_invocation_id")
        return (f"{call} ran in invocation {item.get('invocation_id')}"
                + (f", a sub-agent of {parent}" if parent else "")
                + (f" spawned by tool call {item['spawned_by_tool_call_id']}" if item.get("spawned_by_tool_call_id")
                   else ""))
    if kind == "compaction_after":
        return (f"the harness compacted its context, after_model_call {call} (trigger {item.get('trigger')}, "
                f"{item.get('tokens_before')} -> {item.get('tokens_after')} tokens)")
    if kind == "compaction_call":
        return f"{call} is a request of a context compaction (the summary)"
    if kind == "tool_calls":
        calls = ", ".join(f"{t.get('tool_name')} {t.get('status')} {t.get('duration_ms')} ms"
                          for t in item.get("calls", []))
        return f"tool calls of {call}: {calls}"
    return json.dumps(item, sort_keys=True)


def break_lines(breaks: Sequence[Break], texts: Sequence[Sequence[tuple[str | None, str | None]]] = ()
                ) -> list[str]:
    """Each break in plain words: call and kind, predecessor and how it was chosen, agree and
    lengths, each divergence's positions (``texts[n]``: its decoded sides, when given), the
    cause with its hint, evidence and notes."""
    lines: list[str] = []
    for n, brk in enumerate(breaks):
        lines.append(f"  {brk.call_id}: {brk.kind}" + (f" ({brk.note})" if brk.note else "")
                     + (f", beside main-chain call {brk.sibling}" if brk.sibling else ""))
        if brk.predecessor is None:
            lines.append("    predecessor: none" + ("" if brk.kind == "record_fault"
                                                     else " (no earlier call to continue)"))
        else:
            relation = _RELATION_TEXT.get(brk.relation or "")
            lines.append(f"    predecessor: {brk.predecessor} ({brk.relation}: {relation})")
            lines.append(f"    agree {brk.agree} of {brk.predecessor_len} predecessor tokens; prompt {brk.prompt_len} "
                         "tokens")
        shown = texts[n] if n < len(texts) else ()
        if not shown and (brk.parent_text is not None or brk.prompt_text is not None):
            shown = ((brk.parent_text, brk.prompt_text),)  # the first divergence, decoded by the diagnosis itself
        for k, d in enumerate(brk.divergences):
            lines.append(f"    divergence {k + 1}: predecessor [{d.parent_start}:{d.parent_end}) "
                         f"({d.parent_end - d.parent_start} tokens) -> prompt [{d.prompt_start}:{d.prompt_end}) "
                         f"({d.prompt_end - d.prompt_start} tokens): {d.kind}")
            if k < len(shown):
                lines.append(f"      predecessor text: {_quoted(shown[k][0])}")
                lines.append(f"      prompt text:      {_quoted(shown[k][1])}")
        if brk.more_divergences:
            lines.append(f"    ... and {brk.more_divergences} more divergences")
        cause = brk.cause + (" (its reasoning)" if brk.reasoning else "")
        if brk.token_cause != brk.cause:
            cause += f"; the tokens alone say {brk.token_cause}"
        lines.append(f"    cause: {cause}")
        lines.append(f"    hint: {brk.hint}")
        for item in brk.evidence:
            lines.append(f"    evidence: {_evidence_line(item)}")
        for note in brk.notes:
            lines.append(f"    note: {' '.join(note.split())}")
    return lines


TREE_INDENT_CAP = 40
"""Columns the call tree indents at most; a line indented further says its depth in words."""

_FORK = "`- "


def _tree_lines(build: BuildOutput, refusals_under: dict[str | None, list]) -> list[str]:
    """The call tree, one line per call, and the refusals under each call (popped off ``refusals_under``).

    A linear chain stays flat: a call that is its parent's only child is listed under it at the
    same indent. The children of a call with several each start with `_FORK`, one step in, and
    their own chains follow at the column of their text. However deep the forks go, no line
    is indented more than `TREE_INDENT_CAP` columns: one that would be says ``(depth N)``, N
    the calls between it and its root."""
    roles = call_roles(build)
    children: dict[str | None, list[str]] = defaultdict(list)
    for cid, link in build.links.items():
        children[link.linked_parent].append(cid)
    for kids in children.values():
        kids.sort(key=lambda c: (build.entries[c].created_at, c))

    def under(kids: list[str], column: int, depth: int) -> list[tuple[str, int, str, int]]:
        """(call, column of its line, its mark, depth) for each of ``kids``, whose parent's text is at ``column``."""
        if len(kids) == 1:
            return [(kids[0], column, "", depth)]
        return [(kid, column + 2, _FORK, depth) for kid in kids]

    lines: list[str] = []
    stack = list(reversed(under(children[None], 2, 0)))
    while stack:
        cid, column, mark, depth = stack.pop()
        lines.append(_indented(column, depth, mark + _describe(build, cid, roles)))
        text_column = column + len(mark)
        for verdict_ in refusals_under.pop(cid, []):
            r = verdict_.refusal
            outcome = "ENDED THE ROLLOUT" if verdict_.ended_chain else "no effect on the verdict"
            lines.append(_indented(text_column + 2, depth, f"! refusal {r.model_call_id} (code {r.code!r}): {outcome}"))
        stack.extend(reversed(under(children.get(cid, []), text_column, depth + 1)))
    return lines


def _indented(column: int, depth: int, text: str) -> str:
    if column <= TREE_INDENT_CAP:
        return " " * column + text
    return " " * TREE_INDENT_CAP + f"(depth {depth}) " + text


def render_text(result: RolloutResult, source_notes: Sequence[str] = (), breaks: Sequence[Break] | None = None,
                break_texts: Sequence[Sequence[tuple[str | None, str | None]]] = ()) -> str:
    """The report of one build; ``source_notes`` (the snapshot's: what the loader skipped or
    inferred, why a capture counts as incomplete) are listed under "source". With
    ``breaks`` (`tokencap.diagnose`'s), a "breaks" section says why the lineage broke;
    ``break_texts`` are each break's decoded divergences (`diagnosis.span_texts`)."""
    lines = _verdict_lines(result, source_notes)
    build = result.build
    if build is None:
        return "\n".join(lines) + "\n"
    lines += _tree_section(result, build)
    lines += _chain_section(build)
    lines += _notes_section(build.notes)
    lines += _attribution_section(result)
    lines += _verdicts_section(result)
    if breaks is not None:
        lines.append("")
        lines.append("breaks (why the lineage is not one proven chain)")
        lines.extend(break_lines(breaks, break_texts) if breaks else ["  none: the rollout is one proven chain"])
    return "\n".join(lines) + "\n"


def _verdict_lines(result: RolloutResult, source_notes: Sequence[str]) -> list[str]:
    """The verdict and its reasons, the capture's status and error, and the source's notes."""
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
    return lines


def _tree_section(result: RolloutResult, build: BuildOutput) -> list[str]:
    """The counts, the call tree with its refusals, and the calls left out of it."""
    m = result.metrics
    lines = [f"calls {m['n_calls']}, chains {m['chains']}, roots {m['roots']}, quarantined {m['quarantined_calls']}, "
             f"delivered {m['generated_tokens_delivered']}/{m['generated_tokens_captured']} generated tokens "
             f"({m['delivered_fraction']:.1%})",
             "",
             f"call tree  (* main chain, + branch, Q quarantined, ~ after terminal, {_FORK.strip()} one of "
             "several children)"]
    refusals_under: dict[str | None, list] = defaultdict(list)
    for verdict_ in result.refusal_verdicts:
        refusals_under[verdict_.refusal.parent_call_id].append(verdict_)
    lines.extend(_tree_lines(build, refusals_under))
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
    return lines


def _chain_section(build: BuildOutput) -> list[str]:
    """Each chain's span and tokens, then the retry groups."""
    lines = ["", "chains"]
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
    return lines


def _notes_section(notes: BuildNotes) -> list[str]:
    """The builder's notes: failed parent links, the terminal call, what stayed unresolved."""
    lines = ["", "notes"]
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
    if len(lines) == 2:
        lines.append("  nothing to report: every link verified, no retries left open")
    return lines


def _attribution_section(result: RolloutResult) -> list[str]:
    attribution = attribution_lines(result)
    if not attribution:
        return []
    return ["", "terminal attribution (from the harness's final response)"] + [f"  {line}" for line in attribution]


def _verdicts_section(result: RolloutResult) -> list[str]:
    """The finish-reason verdict and each engine refusal's, with its conditions."""
    lines = ["", "verdicts"]
    fr = result.finish_reason_verdict
    if fr is not None:
        lines.append(f"  finish reason: {fr.summary}")
    for verdict_ in result.refusal_verdicts:
        r = verdict_.refusal
        lines.append(f"  refusal {r.model_call_id} (code {r.code!r}, parent {r.parent_call_id!r}): {verdict_.summary}")
        for cond in verdict_.conditions:
            lines.append(f"    [{'x' if cond.holds else ' '}] {cond.name}: {cond.detail}")
    if not result.refusal_verdicts:
        lines.append("  no engine refusals")
    return lines
