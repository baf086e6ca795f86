"""The `prefix_merging` builder: chain a frozen snapshot's calls into trainable trajectories.

The one invariant (docs/contract.md#invariant): a delivered trajectory holds exactly the tokens the policy
emitted, conditioned on exactly the recorded context, as one contiguous sequence. Every
rule below prefers dropping or masking to guessing, and nothing is linked across a
boundary nobody proved.

The build never depends on input order: copies of a call are ordered by their canonical
JSON, calls are processed by (full-prompt length, call id), and every tie-break is on
call ids or timestamps. It also never recurses, so a 1,500-call rollout is fine, and it
holds no per-call copy of a whole context: prompts are views (see `tokencap.tokens`).

The steps of docs/contract.md#builder, each in its module: `dedupe` (1, copies of one call
id), `materialize` (2, full prompts, delta rebuilds), `calls` (3-4, the call nodes and
their order), `parents` (5, parent links), `retries` (6, retry groups, quarantine, the
twin hand-over of the anchor), `chains` (7-8, chains and the delivered one); `steps` runs
them in order and writes the notes (9); `output` is what a build returns.
"""

from .output import (
    BUILDER_NAME,
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
    BuildNotes,
    BuildOutput,
    Chain,
    ChainLink,
    LinkDecision,
    RetryGroup,
)
from .steps import PreparedEntries, chain_prepared, prefix_merging, prepare_entries, run_builder

__all__ = [
    "BUILDER_NAME", "DELTA_UNRECONSTRUCTABLE", "DUPLICATE_CONFLICT", "ENTRY_DIGEST_MISMATCH", "MISSING_RESOLUTION",
    "PARENT_DIGEST_MISMATCH", "PARENT_MISSING", "PARENT_MISSING_RECOVERED", "PARENT_UNRESOLVED", "RULE_AFTER_TERMINAL",
    "RULE_EXTENDED", "RULE_TERMINAL", "RULE_TWINS", "RULE_UNRESOLVED", "BuildNotes", "BuildOutput", "Chain",
    "ChainLink", "LinkDecision", "PreparedEntries", "RetryGroup", "chain_prepared", "prefix_merging",
    "prepare_entries", "run_builder",
]
