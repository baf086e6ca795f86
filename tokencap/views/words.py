"""The domain's words, explained once: link notes, retry rules, mask reasons and terms.

Every explanation the app shows next to a code or a term comes from here, so the call
detail, the verdicts and the banner use one wording. This module imports nothing else
from `tokencap.views`.
"""

from __future__ import annotations

from ..builder import (
    DELTA_UNRECONSTRUCTABLE,
    DUPLICATE_CONFLICT,
    ENTRY_DIGEST_MISMATCH,
    MISSING_RESOLUTION,
    PARENT_DIGEST_MISMATCH,
    PARENT_MISSING,
    PARENT_MISSING_RECOVERED,
    PARENT_UNRESOLVED,
    RULE_AFTER_TERMINAL,
    RULE_EXTENDED,
    RULE_TERMINAL,
    RULE_TWINS,
    RULE_UNRESOLVED,
)

NOTE_TEXT = {
    PARENT_UNRESOLVED: "The resolver could not decide this call's parent when the request was made. The call "
                       "starts a new fragment and is never joined to anything by prefix matching.",
    PARENT_DIGEST_MISMATCH: "The claimed parent's cumulative tokens do not open this call's prompt (the history "
                            "was edited, or the claim is stale). The link is rejected and the call starts a new "
                            "fragment.",
    PARENT_MISSING: "The claimed parent is not among the chained calls, and no single placed call's full sequence "
                    "is the longest prefix of this prompt. Nothing is guessed: the call starts a new fragment.",
    PARENT_MISSING_RECOVERED: "The claimed parent is not among the chained calls (empty generation, excluded or "
                              "never captured). Exactly one placed call's full sequence is the longest prefix of "
                              "this prompt, so the call was re-attached to it. This is proven by the tokens, so "
                              "it does not mask the sample.",
    MISSING_RESOLUTION: "No request-time parent decision was recorded (a legacy record). No link is trusted without "
                        "one, so the call starts a new fragment.",
    DUPLICATE_CONFLICT: "Several records carry this call id with different tokens. The first copy in canonical "
                        "order is chained, but the id is reported and the sample masked.",
    DELTA_UNRECONSTRUCTABLE: "This delta record stores only its prompt suffix, and its full prompt could not be "
                             "rebuilt and verified from its ancestors. It is excluded, with every delta built on it.",
    ENTRY_DIGEST_MISMATCH: "This record's own tokens disagree with its stamped cum_len or digest, so it was altered "
                           "after capture. It is excluded from chaining.",
}
"""Plain-words explanation of every parent-link note and exclusion reason."""

RULE_TEXT = {
    RULE_EXTENDED: "The member(s) with a linked child were kept: the conversation went on from them, so that is "
                   "the generation the harness kept. The others were abandoned and are quarantined.",
    RULE_TERMINAL: "The call you anchored on was kept; the other retries are quarantined.",
    RULE_TWINS: "All members generated the very same tokens (token-identical twins), so training on any of them is "
                "exact. The smallest call id was kept.",
    RULE_UNRESOLVED: "The retries generated different tokens and none was extended, so nothing shows which one the "
                     "harness kept. The smallest call id is kept for the projection, but every member is listed "
                     "as an unresolved retry and the sample is masked.",
    RULE_AFTER_TERMINAL: "The retries differ, but they hang below the anchored call, where nothing is delivered "
                         "anyway; the smallest call id is kept without masking the sample.",
}

TERMS = {
    "chain": "a path of linked calls from a root to a leaf, without a quarantined call",
    "delivered chain": "the chain the trainer receives: the one that starts earliest and ends latest, or the one "
                       "ending at the anchor",
    "delivered fraction": "the share of all generated tokens captured for this rollout that lie on the delivered "
                          "chain; the rest (branches, retries, fragments) is not trained on",
    "interstitial": "the context the harness added between one call's generation and the next call's prompt (tool "
                    "output, user turns); it is part of the training sequence with loss mask 0",
    "quarantined": "a retry that was dropped because another retry of the same request was kept",
    "unproven link": "a call whose claimed parent could not be proven by tokens; it starts a new fragment",
    "excluded record": "a record left out of chaining: corrupt (its tokens disagree with its own digest), or a "
                       "delta record whose full prompt could not be rebuilt",
    "empty generation": "a call that generated no token; it carries no training signal and is not chained",
    "engine refusal": "a request the model server refused (for instance, too long for the context window)",
    "twin": "another call with exactly the same prompt and generated tokens",
    "anchor": "the call the harness says it finished on; the delivered chain is cut there",
}
"""The app's terms, each explained in one sentence where it appears."""

CAUSE_LABELS = {
    "compaction": "compaction",
    "compaction_summary": "compaction summary request",
    "subagent": "sub-agent",
    "generation_dropped": "generated tokens dropped",
    "retokenized": "retokenized",
    "tokens_replaced": "tokens replaced",
    "tokens_inserted": "tokens inserted",
    "history_dropped": "history dropped",
    "history_replaced": "history replaced",
    "opening_changed": "opening changed",
    "seam": "turn boundary lost",
    "new_context": "new context",
    "branch": "branch",
    "link_intact": "unrecorded link (tokens match)",
    "record_fault": "record fault",
}
"""A break cause's readable label (docs/contract.md#causes's keys stay in tooltips, tables' data and exports)."""

LINK_NOTE_LABELS = {
    PARENT_UNRESOLVED: "parent undecided",
    PARENT_DIGEST_MISMATCH: "claimed parent does not match",
    PARENT_MISSING_RECOVERED: "parent absent, re-attached",
    PARENT_MISSING: "parent absent",
    MISSING_RESOLUTION: "no parent decision recorded",
    DUPLICATE_CONFLICT: "conflicting duplicate id",
    DELTA_UNRECONSTRUCTABLE: "delta prompt not rebuilt",
    ENTRY_DIGEST_MISMATCH: "record altered (digest)",
}
"""A parent-link note's (or exclusion reason's) readable label; the key stays in tooltips and data."""


MASK_REASON_LABELS = {
    "load_error": "load error",
    "capture_incomplete": "capture incomplete",
    "no_records": "no records",
    "build_error": "build error",
    "unresolved_retries": "unresolved retries",
    "unresolved_parent_calls": "unresolved parent calls",
    "multiple_roots": "multiple roots",
    "multiple_chains": "multiple chains",
    "no_generated_tokens": "no generated tokens",
    "terminal_call_not_delivered": "terminal call not delivered",
}
"""A mask reason's readable label: the name docs/verdicts.md gives it, in words (the key stays in tooltips, the
URL's filter and exports)."""


def label(key: str) -> str:
    """The readable label of a key the app shows (a break cause, a link note, a mask reason): one place maps
    keys to labels, so a chart, the tree and the tables read alike. An unknown key reads with spaces."""
    return CAUSE_LABELS.get(key) or LINK_NOTE_LABELS.get(key) or MASK_REASON_LABELS.get(key) or key.replace("_", " ")


def with_key(text: str, key: str) -> str:
    """A tooltip ending with the key it explains, for those who script against the table or the export."""
    return f"{text} (key: {key})" if text else f"key: {key}"
