"""Why a rollout's lineage broke, in plain words, for the Rollout page (docs/contract.md#diagnosis).

`breaks_of(view, tokenizer, key)` runs `tokencap.diagnose` once per view and tokenizer
(kept on the view), with the harness evidence the view was built with (its rollout
record's, `RolloutView.evidence`). `break_words(brk)` says in one sentence what the
break's prompt did to its predecessor's tokens and what that likely means:

    call-0007's prompt leaves out 412 tokens call-0006 generated (its reasoning): the chat
    template likely strips earlier reasoning

The culprits of the verdict banner end with these words (`culprits.py`), and the link
proof of a break draws its prompt against its predecessor (`linkproof.break_proof`).

The diagnosis explains and never decides: nothing here changes a verdict, and a
diagnosis that fails for any reason leaves the page with no break words, never an error.
Capture strings (call ids) are kept verbatim; the page escapes them.
"""

from __future__ import annotations

from typing import Any

from ...diagnosis import HINTS, Break, diagnose
from ..model import RolloutView

LIKELY = {
    "compaction": "the prompt starts over from a summary of the history",
    "compaction_summary": "it is not a turn of the conversation, so it continues no earlier call",
    "subagent": "the sub-agent starts from a prompt of its own, not the caller's history",
    "generation_dropped": "earlier model output was left out of the history",
    "history_reordered": "the model's tokens were likely rendered back in another order (a turn split or moved)",
    "retokenized": "the history was likely decoded and encoded again",
    "tokens_replaced": "likely a re-rendered tool call (JSON spacing, key order) or changed whitespace",
    "tokens_inserted": "tokens were added to history the model had already seen",
    "history_dropped": "likely truncation or a sliding window",
    "history_replaced": "a stretch of history was likely rewritten or summarised",
    "opening_changed": "the system prompt or the tool list likely changed",
    "seam": "likely a stop or special token lost at the turn boundary",
    "prompt_missing": "a turn the harness made up or lost (a placeholder with no prompt)",
    "new_context": "likely a summary after compaction, a sub-agent, a title request or a fresh conversation",
    "branch": "a second conversation continues the same call",
    "link_intact": "the tokens prove the link the capture's metadata did not (fix the parent resolution)",
    "record_fault": "the record itself is faulty",
}
"""What each cause likely means, a few words after the break's facts (the hint says how to fix it)."""
REASONING_LIKELY = "the chat template likely strips earlier reasoning"


def breaks_of(view: RolloutView, tokenizer: Any = None, key: str = "") -> list[Break]:
    """The view's breaks, diagnosed once per view and tokenizer (``key`` names the tokenizer: its
    content hash; empty without one); [] when the diagnosis cannot be made."""
    def compute(v: RolloutView) -> list[Break]:
        try:
            return diagnose(v.result, tokenizer=tokenizer, evidence=getattr(v, "evidence", None))
        except Exception:  # noqa: BLE001 -- it explains and never decides: no words, never a failed page
            return []
    return view.derived(f"breaks:{key}" if tokenizer is not None else "breaks", compute)


def break_of(view: RolloutView, call_id: str, tokenizer: Any = None, key: str = "") -> Break | None:
    """The break at ``call_id``, if there is one."""
    return next((b for b in breaks_of(view, tokenizer, key) if b.call_id == call_id), None)


def _n(count: int, what: str = "token") -> str:
    return f"{count:,} {what}{'' if count == 1 else 's'}"


def token_words(brk: Break) -> str:
    """What the break's prompt did to its predecessor's tokens (its first divergence), in words."""
    call, pred = brk.call_id, brk.predecessor
    cause = brk.token_cause
    if cause == "prompt_missing":
        return f"{call}'s prompt is empty" + (f" (nothing of {pred}'s {_n(brk.predecessor_len or 0)} carried)"
                                              if pred is not None else "")
    if pred is None:
        return f"{call} continues no earlier call"
    if cause == "link_intact":
        return f"{call}'s prompt continues all {_n(brk.predecessor_len or 0)} of {pred} exactly"
    first = brk.first_divergence
    if first is None:
        return f"{call}'s prompt shares {_n(brk.agree or 0)} with {pred}"
    dropped = first.parent_end - first.parent_start
    inserted = first.prompt_end - first.prompt_start
    at = f"at position {first.parent_start:,}"
    if cause == "history_reordered":
        moved = next((d for d in brk.divergences if d.kind == "history_reordered"), first)
        return (f"{call}'s prompt carries {_n(moved.parent_end - moved.parent_start)} of {pred} from position "
                f"{moved.parent_start:,} elsewhere in the prompt, not where they stood")
    if cause == "generation_dropped":
        stub = f" for a stub of {_n(inserted)}" if inserted else ""
        return f"{call}'s prompt leaves out {_n(dropped)} {pred} generated{stub}" + (
            " (its reasoning)" if brk.reasoning else "")
    if cause == "history_dropped":
        return f"{call}'s prompt leaves out {_n(dropped)} of {pred}'s history {at}"
    if cause == "tokens_inserted":
        return f"{call}'s prompt inserts {_n(inserted)} into {pred}'s history {at}"
    if cause == "retokenized":
        return f"{call}'s prompt carries {_n(dropped)} of {pred} {at} as {_n(inserted)} of the same text"
    if cause in ("tokens_replaced", "opening_changed"):
        where = "in the opening (system prompt, tools) " if cause == "opening_changed" else ""
        return f"{call}'s prompt replaces {_n(dropped)} of {pred} {where}{at} with {_n(inserted)} of its own"
    if cause == "seam":
        return f"{call}'s prompt leaves out the last {_n(dropped)} of {pred} (its turn boundary)"
    if cause == "new_context":
        if not brk.agree:
            return f"{call}'s prompt shares no token with {pred}, the nearest earlier call"
        return f"{call}'s prompt shares only the opening with {pred} ({_n(brk.agree)}), nothing after it"
    return f"{call}'s prompt replaces {pred}'s history from position {first.parent_start:,} on ({_n(dropped)}) " \
           f"with {_n(inserted)} of its own"


def _evidence_words(brk: Break) -> str:
    if brk.cause == "compaction":
        compaction = next((e for e in brk.evidence if e.get("kind") == "compaction_after"), {})
        before, after = compaction.get("tokens_before"), compaction.get("tokens_after")
        sizes = f" ({before:,} → {after:,} tokens)" if isinstance(before, int) and isinstance(after, int) else ""
        return f"the harness recorded a compaction at {brk.call_id}{sizes}"
    if brk.cause == "compaction_summary":
        return f"{brk.call_id} is the summariser request of a compaction the harness recorded"
    invocation = next((e for e in brk.evidence if e.get("kind") == "invocation"
                       and e.get("call_id", brk.call_id) == brk.call_id), {})
    name = invocation.get("invocation_id")
    return f"{brk.call_id} opens a sub-agent's conversation" + (f" (invocation {name})" if name else "")


def likely_words(brk: Break) -> str:
    """What the break's cause likely means, in a few words (`LIKELY`; reasoning has its own)."""
    if brk.cause == "generation_dropped" and brk.reasoning:
        return REASONING_LIKELY
    return LIKELY.get(brk.cause, "")


def break_facts(brk: Break) -> str:
    """What happened at the break, without what it likely means: the harness's record, then the tokens."""
    if brk.cause == "record_fault":
        return f"{brk.call_id}'s record is faulty ({brk.note or 'record fault'})"
    if brk.cause == "branch":
        return f"{brk.call_id} continues {brk.predecessor} as {brk.sibling} does, with another prompt"
    if brk.cause in ("compaction", "compaction_summary", "subagent"):
        return f"{_evidence_words(brk)}; in the tokens, {token_words(brk)}"
    return token_words(brk)


def break_words(brk: Break) -> str:
    """One sentence: the cause, the predecessor and the first divergence, then what it likely means."""
    if brk.cause == "record_fault":
        return break_facts(brk)
    if brk.cause in ("compaction", "compaction_summary", "subagent"):
        return f"{_evidence_words(brk)}: {likely_words(brk)}; in the tokens, {token_words(brk)}"
    return f"{break_facts(brk)}: {likely_words(brk)}"


def hint(brk: Break) -> str:
    """The cause's fixed sentence: what usually produces it and what fixes it."""
    return HINTS.get(brk.cause, "")


__all__ = ["LIKELY", "REASONING_LIKELY", "break_facts", "break_of", "likely_words",
           "break_words", "breaks_of", "hint", "token_words"]
