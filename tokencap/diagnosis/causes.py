"""The fixed vocabulary of causes (docs/contract.md#causes), its hints, and the kind of one divergence.

Why a fixed vocabulary: tables, charts and the comparison of two runs count rollouts by
cause, so a cause is a key, never free text. Why the kind is read off positions only: the
same spans must give the same kind whoever computes it; the rules that read text apply only
when a tokenizer is given: it turns `tokens_replaced` into `retokenized`, and keeps a short
span that reads the same from being taken for a stub of dropped output (`generation_dropped`)
-- decoding never makes a divergence out of nothing.

The diagnosis explains and never decides: nothing here is read by the build, a verdict,
a metric or a payload.
"""

from __future__ import annotations

from typing import Final

CAUSES: Final[tuple[str, ...]] = (
    "compaction", "compaction_summary", "subagent",
    "generation_dropped", "history_reordered", "retokenized", "tokens_replaced", "tokens_inserted",
    "history_dropped", "history_replaced", "opening_changed", "seam", "prompt_missing", "new_context",
    "branch", "link_intact", "record_fault",
)
"""Every cause a break can have, in the order tables and charts list them (docs/contract.md#causes)."""

DIVERGENCE_KINDS: Final[tuple[str, ...]] = (
    "generation_dropped", "history_reordered", "retokenized", "tokens_replaced", "tokens_inserted",
    "history_dropped", "history_replaced", "opening_changed", "seam", "new_context",
)
"""The kinds one divergence span can have (a subset of `CAUSES`, same order)."""

EVIDENCE_CAUSES: Final[tuple[str, ...]] = ("compaction", "compaction_summary", "subagent")
"""Causes only the harness's own evidence can give (docs/contract.md#evidence); they replace a token cause."""

HINTS: Final[dict[str, str]] = {
    "compaction": ("The harness compacted its context before this call, so the prompt starts over from a "
                   "summary; train on the fragments separately or capture the compacted turn as a new root."),
    "compaction_summary": ("This call is the harness's own summariser request during a compaction; it is not a "
                           "turn of the conversation, so mark it as such in the harness or leave it out of training."),
    "subagent": ("This call opens a sub-agent's own conversation; give the sub-agent its own rollout (or its own "
                 "root) instead of expecting it to continue the caller's tokens."),
    "generation_dropped": ("Tokens the model generated earlier are missing from this prompt, usually a chat "
                           "template that strips earlier reasoning; keep that reasoning in the template's history, "
                           "or send token ids back to the server instead of text."),
    "history_reordered": ("The model's tokens are all in the prompt but at another place, as when a template "
                          "renders earlier reasoning as a separate message after the tool results; render each "
                          "turn back in the order the model produced it, or send token ids back instead of text."),
    "retokenized": ("The history came back as the same text with different token ids (decoded and encoded "
                    "again); send the captured token ids back instead of re-encoding the text."),
    "tokens_replaced": ("A short stretch was rendered differently, typically a tool call re-serialised (JSON "
                        "spacing, key order) or changed whitespace; render earlier turns from the exact text the "
                        "model produced."),
    "tokens_inserted": ("Tokens were inserted into history the model had already seen; append new context after "
                        "the last turn instead of editing earlier ones."),
    "history_dropped": ("Earlier prompt tokens or whole turns were left out, as truncation or a sliding window "
                        "does; keep the full history, or capture the shortened context as a new conversation."),
    "history_replaced": ("A long stretch of history was replaced by other tokens (rewritten or summarised turns); "
                         "keep earlier turns unchanged, or start the rewritten context as a new root."),
    "opening_changed": ("The opening of the conversation (system prompt or tool list) changed between calls; keep "
                        "the system prompt and tool definitions fixed within a rollout."),
    "seam": ("Only the last few tokens of the previous call were not carried over, usually a stop or special "
             "token lost at the turn boundary; keep the end-of-turn token in the history the template renders."),
    "prompt_missing": ("The call carries generated tokens but an empty prompt, a turn the harness made up or lost "
                       "(a placeholder turn); record the prompt the model was given, or leave the turn out of "
                       "training."),
    "new_context": ("Nothing beyond the opening is shared with any earlier call: a fresh conversation, a title or "
                    "summary request, or a sub-agent; give such calls their own rollout or mark them in the harness."),
    "branch": ("A second conversation continues the same call as the delivered chain; a harness that forks (best "
               "of n, tree search) should record each fork as its own rollout."),
    "link_intact": ("The prompt continues the earlier call exactly, so the tokens prove the link the capture's "
                    "metadata did not; fix the parent resolution in the capture (the lineage itself is sound)."),
    "record_fault": ("The record itself is faulty (its tokens disagree with its stamped digest, a delta cannot be "
                     "rebuilt, or two copies of one call differ); look at the capture writer and its storage."),
}
"""One fixed sentence per cause: what usually produces it and what fixes it."""

SHORT_SPAN: Final[int] = 32
"""Neither side of a `tokens_replaced` divergence is longer than this many tokens."""

SEAM_TOKENS: Final[int] = 3
"""A divergence to the end that starts in the predecessor's last this-many tokens is a `seam`."""

REORDERED_TOKENS: Final[int] = 16
"""A dropped span at least this long found whole elsewhere in the prompt is `history_reordered`."""

STUB_TOKENS: Final[int] = 4
"""A stub in place of generated tokens is at most this long, and at most a quarter of what it replaces."""


def is_stub(d_len: int, i_len: int, all_generated: bool) -> bool:
    """Whether I (``i_len`` tokens) may be a stub standing for D (``d_len`` generated tokens), docs/contract.md#causes:
    every position of D generated, 1 <= |I| <= 4 and |D| >= 4 |I| (an emptied ``<think>`` block)."""
    return all_generated and 1 <= i_len <= STUB_TOKENS and d_len >= STUB_TOKENS * i_len


def divergence_kind(*, parent_start: int, parent_end: int, prompt_start: int, prompt_end: int,
                    to_end: bool, predecessor_len: int, opening_len: int, all_generated: bool,
                    same_text: bool | None = None, reordered: bool = False) -> str:
    """The kind of one divergence D = S[parent_start:parent_end], I = P[prompt_start:prompt_end]
    (docs/contract.md#causes).

    ``to_end``: the walk found no resynchronisation (the divergence runs to the end);
    ``predecessor_len`` is L, ``opening_len`` the opening's length O; ``all_generated``:
    every position of D was generated by the predecessor or a linked ancestor;
    ``same_text``: D and I decode to the same text (None without a tokenizer);
    ``reordered``: D has at least `REORDERED_TOKENS` tokens and occurs whole somewhere in the
    prompt (`alignment.PromptRuns`), which makes it `history_reordered` whatever else holds.
    """
    d_len = parent_end - parent_start
    i_len = prompt_end - prompt_start
    if reordered and d_len >= REORDERED_TOKENS:
        return "history_reordered"
    if to_end:
        if parent_start >= predecessor_len - SEAM_TOKENS:
            return "seam"
        if parent_start <= opening_len:
            return "new_context"
        return "history_replaced"
    if i_len == 0:
        return "generation_dropped" if all_generated else "history_dropped"
    if is_stub(d_len, i_len, all_generated) and not same_text:
        return "generation_dropped"
    if d_len == 0:
        return "tokens_inserted"
    if parent_end <= opening_len:
        return "opening_changed"
    if d_len <= SHORT_SPAN and i_len <= SHORT_SPAN:
        return "retokenized" if same_text else "tokens_replaced"
    return "history_replaced"


def cause_order(causes: set[str] | list[str] | tuple[str, ...]) -> list[str]:
    """The distinct ``causes`` in the order of `CAUSES` (unknown names are dropped)."""
    present = set(causes)
    return [c for c in CAUSES if c in present]


__all__ = ["CAUSES", "DIVERGENCE_KINDS", "EVIDENCE_CAUSES", "HINTS", "REORDERED_TOKENS", "SEAM_TOKENS", "SHORT_SPAN",
           "STUB_TOKENS", "cause_order", "divergence_kind", "is_stub"]
