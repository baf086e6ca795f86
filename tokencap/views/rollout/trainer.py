"""A break of a rollout read from output items (docs/contract.md#token-rollouts), in the trainer's language.

Such a rollout reaches a trainer without token capture: NeMo RL concatenates its token-bearing items
and stops the training step on the first rollout whose item's prompt does not start with every token
before it ("Non-contiguous messages found"). Each such item is a boundary break of the diagnosis (its
link to the item before it failed), so the banner can say what the trainer would do and why, cause in
words:

    NeMo RL would stop on this rollout: item-0007's prompt does not continue item-0006; the earlier
    reasoning was moved to another place in the prompt

`words_for` gives the sentence of every break of a view, these for the items' breaks and the
diagnosis's own words (`breaks.break_words`) for any other (a capture's, or a break of another kind).
The banner's layout is not decided here. Capture strings are kept verbatim; the page escapes them.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...builder import PARENT_DIGEST_MISMATCH
from ...diagnosis import Break
from ..model import RolloutView
from .breaks import break_words
from .items import from_items

TRAINER = "NeMo RL"
STOPS = f"{TRAINER} would stop on this rollout"
"""How the first non-contiguous item's sentence starts: the trainer stops its step on the rollout there."""

THINK = "<think>"

CAUSE_WORDS = {
    "generation_dropped": "tokens the model generated were left out of the history",
    "history_reordered": "the model's earlier tokens are in the prompt, at another place (a turn re-rendered in "
                         "another order)",
    "retokenized": "the same text was tokenized again into other ids (a non-canonical split re-encoded)",
    "tokens_replaced": "a few tokens were rendered again differently (a tool call's JSON spacing or key order, "
                       "whitespace)",
    "tokens_inserted": "tokens were added into history the model had already seen",
    "history_dropped": "earlier turns were dropped from the history (truncation or a sliding window)",
    "history_replaced": "a stretch of the history was rewritten",
    "opening_changed": "the system prompt or the tool list changed",
    "seam": "a stop or special token at the turn boundary was lost",
    "new_context": "its prompt starts a new conversation instead",
    "compaction": "the harness compacted its context there",
    "compaction_summary": "it is the harness's own summariser request",
    "subagent": "it opens a sub-agent's own conversation",
}
"""Each cause as what happened to the rollout's history, after the item that does not continue."""
REASONING_STRIPPED = "the earlier reasoning was stripped from the history (a chat template that drops <think>)"
REASONING_STUB = "the earlier reasoning was replaced by an empty <think></think> block"
REASONING_MOVED = "the earlier reasoning was moved to another place in the prompt (after the tool results)"
PROMPT_MISSING = "it carries no prompt at all (empty prompt_token_ids): a turn the harness made up or lost"


def is_item_break(view: RolloutView, brk: Break) -> bool:
    """Whether ``brk`` is an item whose prompt does not continue the tokens before it (NeMo RL's check)."""
    return from_items(view) and brk.kind == "boundary" and brk.note == PARENT_DIGEST_MISMATCH


def _moved_reasoning(view: RolloutView, brk: Break) -> bool:
    """Whether the tokens found elsewhere in the prompt are the predecessor's reasoning: the reordered span's
    text opens with ``<think>`` (with a tokenizer, when it is the first divergence, whose text is decoded);
    else it lies in what the predecessor generated, and the predecessor's items hold a reasoning item."""
    first = brk.first_divergence
    if first is not None and first.kind == "history_reordered" and brk.parent_text is not None:
        return brk.parent_text.lstrip().startswith(THINK)
    entry = view.entry(brk.predecessor) if brk.predecessor else None
    if entry is None or not any(isinstance(i, dict) and i.get("type") == "reasoning" for i in entry.output_items):
        return False
    moved = next((d for d in brk.divergences if d.kind == "history_reordered"), None)
    return moved is None or moved.parent_start >= int(entry.prompt_token_ids.size)


def cause_words(view: RolloutView, brk: Break) -> str:
    """What happened to the history at an item's break, in a few words (its cause, docs/contract.md#causes)."""
    cause = brk.cause
    first = brk.first_divergence
    if cause == "prompt_missing" or (brk.prompt_len == 0):
        return PROMPT_MISSING
    if cause == "generation_dropped":
        stub = first is not None and 1 <= first.prompt_end - first.prompt_start <= 4
        if stub and (brk.reasoning or (brk.prompt_text or "").strip().startswith(("</think>", THINK))):
            return REASONING_STUB
        return REASONING_STRIPPED if brk.reasoning else CAUSE_WORDS[cause]
    if cause == "history_reordered" and _moved_reasoning(view, brk):
        return REASONING_MOVED
    return CAUSE_WORDS.get(cause, cause.replace("_", " "))


def item_break_words(view: RolloutView, brk: Break, first: bool = False) -> str:
    """One sentence for an item that does not continue the tokens before it; ``first``: NeMo RL stops there."""
    stop = f"{STOPS}: " if first else ""
    pred = brk.predecessor or "the item before it"
    return f"{stop}{brk.call_id}'s prompt does not continue {pred}; {cause_words(view, brk)}"


def words_for(view: RolloutView, breaks: Iterable[Break]) -> dict[str, str]:
    """The sentence of each break (by call id) but record faults: in the trainer's language for a rollout
    read from output items (the earliest such break is where NeMo RL stops), else the diagnosis's."""
    out: dict[str, str] = {}
    stopped = False
    for brk in breaks:
        if brk.cause == "record_fault":
            continue
        if is_item_break(view, brk):
            out[brk.call_id] = item_break_words(view, brk, first=not stopped)
            stopped = True
        else:
            out[brk.call_id] = break_words(brk)
    return out


def sentence_of(view: RolloutView, brk: Break, breaks: Iterable[Break]) -> str:
    """The sentence of one break of the view (its detail says what its culprit in the banner says)."""
    return words_for(view, breaks).get(brk.call_id) or break_words(brk)


def not_contiguous_text(call: str) -> str:
    """A culprit's own words for an item that does not continue the tokens before it (the break's sentence
    follows it)."""
    return f"{call} is not contiguous"


__all__ = ["CAUSE_WORDS", "PROMPT_MISSING", "REASONING_MOVED", "REASONING_STRIPPED", "REASONING_STUB", "STOPS",
           "cause_words", "is_item_break", "item_break_words", "not_contiguous_text", "sentence_of", "words_for"]
