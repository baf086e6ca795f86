"""What a build returns: chains of links, the notes, and the words its notes and retry rules use.

The note and rule names are the vocabulary every reader of a build shares (the report, the
scan table, the views): a decision is reported under one of these names and no other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..records import TokenEntry
from ..tokens import TOKEN_DTYPE, as_token_array

BUILDER_NAME = "prefix_merging"

# Notes a build can attach to a call (keys of `BuildNotes.parent_link_failures`).
PARENT_UNRESOLVED = "parent_unresolved"
PARENT_DIGEST_MISMATCH = "parent_digest_mismatch"
PARENT_MISSING = "parent_call_id_missing"
PARENT_MISSING_RECOVERED = "parent_call_id_missing_recovered"
MISSING_RESOLUTION = "missing_resolution"
DUPLICATE_CONFLICT = "duplicate_call_id_conflict"
DELTA_UNRECONSTRUCTABLE = "delta_chain_unreconstructable"
ENTRY_DIGEST_MISMATCH = "entry_digest_mismatch"

# Retry rules of docs/contract.md#builder-retries, named for what decided the group.
RULE_EXTENDED = "extended"          # a: members with a linked child are kept
RULE_TERMINAL = "terminal"          # b: the named terminal call is kept
RULE_TWINS = "twins"                # c: token-identical twins, smallest id kept
RULE_UNRESOLVED = "unresolved"      # d: nobody knows which generation the harness kept
RULE_AFTER_TERMINAL = "after_terminal"  # d, but below the anchored call: nothing delivered anyway


def _as_ids(value: Any) -> np.ndarray:
    """Token ids as a read-only array (callers may build chains from plain lists)."""
    if isinstance(value, np.ndarray) and value.dtype == TOKEN_DTYPE:
        return value
    return as_token_array(np.asarray(list(value), dtype=TOKEN_DTYPE))


@dataclass
class ChainLink:
    """One call on a chain; ``interstitial`` is its prompt beyond the parent's cumulative sequence."""

    entry: TokenEntry
    interstitial: np.ndarray

    def __post_init__(self) -> None:
        self.interstitial = _as_ids(self.interstitial)

    @property
    def call_id(self) -> str:
        return self.entry.model_call_id


@dataclass
class Chain:
    """A root-to-leaf path of calls: ``root_prompt``, then per link interstitial + generation."""

    chain_id: str
    links: list[ChainLink] = field(default_factory=list)
    root_prompt: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=TOKEN_DTYPE))

    def __post_init__(self) -> None:
        self.root_prompt = _as_ids(self.root_prompt)

    def validate(self) -> None:
        """Require one log-probability per generated token (a trainer cannot use anything else)."""
        for link in self.links:
            n_tokens = len(link.entry.generation_token_ids)
            n_logprobs = len(link.entry.generation_log_probs)
            if n_tokens != n_logprobs:
                raise ValueError(f"chain {self.chain_id!r}: call {link.call_id!r} has {n_tokens} generated tokens "
                                 f"but {n_logprobs} log-probabilities")

    @property
    def call_ids(self) -> list[str]:
        return [link.call_id for link in self.links]

    @property
    def generated_tokens(self) -> int:
        return sum(int(link.entry.generation_token_ids.size) for link in self.links)

    @property
    def total_tokens(self) -> int:
        return int(self.root_prompt.size) + sum(
            int(link.interstitial.size + link.entry.generation_token_ids.size) for link in self.links)


@dataclass
class BuildNotes:
    """What the build kept, dropped, or could not resolve (typed, so dashboards never read a renamed key as 0)."""

    builder: str = BUILDER_NAME
    roots: int = 0
    chains: int = 0
    generated_tokens_captured: int = 0
    generated_tokens_delivered: int = 0
    delivered_fraction: float = 0.0
    unresolved_retries: list[str] = field(default_factory=list)
    terminal_call_id: str | None = None
    terminal_chain: str = ""
    after_terminal_calls: list[str] = field(default_factory=list)
    empty_generation_calls: list[str] = field(default_factory=list)
    parent_link_failures: dict[str, int] = field(default_factory=dict)
    unresolved_parent_calls: list[str] = field(default_factory=list)


@dataclass
class LinkDecision:
    """How one call's parent was decided in step 5, for the inspector."""

    call_id: str
    resolution: str | None          # the request-time decision ("root", "resolved", ...)
    claimed_parent: str | None      # parent_call_id as recorded
    linked_parent: str | None       # the parent actually linked (recovered links included)
    note: str | None                # a parent_link_failures reason, or None
    expected_len: int | None = None  # the claimed parent's cumulative length, when present
    prompt_len: int = 0             # the call's full prompt length
    candidates: list[str] = field(default_factory=list)  # ambiguous prefix-recovery candidates

    @property
    def boundary(self) -> bool:
        """An unresolved boundary: a proof was missing, so the call starts a new fragment."""
        return self.note is not None and self.note != PARENT_MISSING_RECOVERED


@dataclass
class RetryGroup:
    """Calls with one linked parent and the identical full prompt: retries of one request."""

    parent: str | None
    members: list[str]
    kept: list[str]
    quarantined: list[str]
    rule: str


@dataclass
class BuildOutput:
    chains: list[Chain] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    notes: BuildNotes = field(default_factory=BuildNotes)
    entries: dict[str, TokenEntry] = field(default_factory=dict)
    # Diagnostics for inspection (not part of the upstream surface).
    links: dict[str, LinkDecision] = field(default_factory=dict)
    retry_groups: list[RetryGroup] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)
    """Call id -> why it never entered chaining (entry_digest_mismatch, delta_chain_unreconstructable)."""
    duplicate_copies: dict[str, int] = field(default_factory=dict)
    """Call id -> number of extra copies dropped by dedupe."""
    conflicting_duplicates: list[str] = field(default_factory=list)

    @property
    def main(self) -> Chain | None:
        return self.chains[0] if self.chains and self.chains[0].chain_id == "main" else None

    def chain(self, chain_id: str) -> Chain | None:
        return next((c for c in self.chains if c.chain_id == chain_id), None)
