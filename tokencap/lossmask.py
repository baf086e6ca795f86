"""Loss masks that follow token provenance (docs/contract.md#loss-mask).

A chain's training sequence is its root prompt, then per link the interstitial (context
the harness added: tool output, user turns) and the generation. Only generated tokens
were sampled from the policy, so only they are trained on (mask 1) and only they carry a
log-probability; everything else is context (mask 0, log-prob NaN).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .builder import Chain
from .projection import chain_sequence
from .tokens import as_token_array

PROMPT, INTERSTITIAL, GENERATED = 0, 1, 2
"""Values of `LossMask.provenance`: where each position came from."""


@dataclass(frozen=True)
class LossMask:
    """Equal-length arrays over a chain's training sequence."""

    token_ids: np.ndarray      # uint64
    mask: np.ndarray           # uint8, 1 on generated positions
    log_probs: np.ndarray      # float64, NaN where no log-probability
    provenance: np.ndarray     # uint8: PROMPT, INTERSTITIAL or GENERATED
    link_starts: np.ndarray    # int64: position where each link's interstitial begins
    call_ids: tuple[str, ...]  # the link owning each entry of link_starts

    def __len__(self) -> int:
        return int(self.token_ids.size)

    @property
    def generated_tokens(self) -> int:
        return int(self.mask.sum())

    def owner_index(self) -> np.ndarray:
        """For every position, the index of the link it belongs to (-1 for the root prompt)."""
        return np.searchsorted(self.link_starts, np.arange(self.token_ids.size), side="right") - 1


def loss_mask(chain: Chain) -> LossMask:
    """The chain's training sequence with its mask and log-probabilities, as arrays."""
    token_ids = chain_sequence(chain)
    n = int(token_ids.size)
    mask = np.zeros(n, dtype=np.uint8)
    log_probs = np.full(n, np.nan, dtype=np.float64)
    provenance = np.full(n, PROMPT, dtype=np.uint8)
    starts = np.empty(len(chain.links), dtype=np.int64)
    pos = int(chain.root_prompt.size)
    for i, link in enumerate(chain.links):
        starts[i] = pos
        inter = int(link.interstitial.size)
        provenance[pos: pos + inter] = INTERSTITIAL
        pos += inter
        gen = int(link.entry.generation_token_ids.size)
        mask[pos: pos + gen] = 1
        provenance[pos: pos + gen] = GENERATED
        log_probs[pos: pos + gen] = link.entry.generation_log_probs
        pos += gen
    return LossMask(token_ids, as_token_array(mask), as_token_array(log_probs), as_token_array(provenance), starts,
                    tuple(chain.call_ids))
