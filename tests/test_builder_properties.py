"""Property tests of the builder's invariants over random rollouts.

Random rollouts mix everything a capture can hold: branches, retries with equal and
different generations, empty generations, delta records, corrupt stamps, wrong or
missing parent claims, unresolved and null resolutions, duplicate copies, and a random
terminal anchor. Whatever the input, the build must:

* not depend on the order of the entries;
* project every chain contiguously (each running prompt extends everything before it);
* give a loss mask whose sum is the chain's generated tokens, and the main chain's sum is
  `generated_tokens_delivered`;
* never deliver a token of a quarantined, excluded or empty-generation call.
"""

from __future__ import annotations

import random

import numpy as np
from helpers_properties import rollouts
from hypothesis import HealthCheck, given, settings

from tokencap import assert_prefix_contiguity, loss_mask, prefix_merging
from tokencap.projection import project_chain_to_output_items


def _fingerprint(out):
    return (
        [(c.chain_id, c.call_ids, list(c.root_prompt)) for c in out.chains],
        out.quarantined,
        out.notes,
        sorted(out.entries),
    )


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(rollouts())
def test_build_does_not_depend_on_entry_order(case):
    entries, terminal, seed = case
    reference = _fingerprint(prefix_merging(entries, terminal_call_id=terminal))
    shuffled = list(entries)
    random.Random(seed ^ 0x5EED).shuffle(shuffled)
    assert _fingerprint(prefix_merging(shuffled, terminal_call_id=terminal)) == reference
    assert _fingerprint(prefix_merging(list(reversed(entries)), terminal_call_id=terminal)) == reference


@SETTINGS
@given(rollouts())
def test_every_chain_projects_contiguously_and_masks_exactly_its_generation(case):
    entries, terminal, _ = case
    out = prefix_merging(entries, terminal_call_id=terminal)
    for chain in out.chains:
        chain.validate()
        items = project_chain_to_output_items(chain)
        assert_prefix_contiguity({"output": items})
        mask = loss_mask(chain)
        assert int(mask.mask.sum()) == chain.generated_tokens
        token_items = [i for i in items if "generation_token_ids" in i]
        last = token_items[-1]
        assert list(mask.token_ids) == list(last["prompt_token_ids"]) + list(last["generation_token_ids"])
        assert np.isnan(mask.log_probs[mask.mask == 0]).all()
        assert not np.isnan(mask.log_probs[mask.mask == 1]).any()
    main = out.main
    assert out.notes.generated_tokens_delivered == (main.generated_tokens if main else 0)
    if out.notes.generated_tokens_captured:
        assert out.notes.delivered_fraction == round(
            out.notes.generated_tokens_delivered / out.notes.generated_tokens_captured, 4)


@SETTINGS
@given(rollouts())
def test_no_token_is_delivered_from_a_quarantined_excluded_or_empty_call(case):
    entries, terminal, _ = case
    out = prefix_merging(entries, terminal_call_id=terminal)
    forbidden = set(out.quarantined) | set(out.excluded) | set(out.notes.empty_generation_calls)
    for chain in out.chains:
        assert not forbidden & set(chain.call_ids), chain.chain_id
        # Every link after the first is a proven (verified or recovered) link to the previous call.
        for prev, link in zip(chain.links, chain.links[1:]):
            assert out.links[link.call_id].linked_parent == prev.call_id
    # Quarantined calls are leaves: nothing links below them.
    linked_parents = {d.linked_parent for d in out.links.values()}
    assert not linked_parents & set(out.quarantined)
    # Anything below the anchor is not delivered.
    if out.main is not None:
        assert not set(out.notes.after_terminal_calls) & set(out.main.call_ids)


@SETTINGS
@given(rollouts())
def test_delivered_links_are_real_prefixes(case):
    entries, terminal, _ = case
    out = prefix_merging(entries, terminal_call_id=terminal)
    for chain in out.chains:
        for prev, link in zip(chain.links, chain.links[1:]):
            parent_full = list(prev.entry.prompt_token_ids) + list(prev.entry.generation_token_ids)
            child_prompt = list(link.entry.prompt_token_ids)
            assert child_prompt[: len(parent_full)] == parent_full
            assert list(link.interstitial) == child_prompt[len(parent_full):]
