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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokencap import TokenEntry, assert_prefix_contiguity, compute_digest, loss_mask, prefix_merging
from tokencap.projection import project_chain_to_output_items


@st.composite
def rollouts(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    n_calls = draw(st.integers(1, 14))
    rng = random.Random(seed)
    calls: list[dict] = []
    fulls: list[list[int]] = []
    prompts: list[list[int]] = []  # full prompts (a delta record stores only its suffix)

    def tokens(n):
        return [rng.randrange(0, 50) for _ in range(n)]

    for i in range(n_calls):
        call_id = f"c{i:02d}"
        kind = rng.random()
        twin = None
        if not calls or kind < 0.15:
            parent = None
            prompt = tokens(rng.randint(1, 4))
        elif kind < 0.3:
            # A retry: same parent and prompt as an earlier call.
            t = rng.randrange(len(calls))
            twin = calls[t]
            parent, prompt = twin["parent_call_id"], list(prompts[t])
        else:
            p = rng.randrange(len(calls))
            parent = calls[p]["model_call_id"]
            prompt = fulls[p] + tokens(rng.randint(0, 3))
        same_gen = twin is not None and rng.random() < 0.5
        generation = list(twin["generation_token_ids"]) if same_gen else tokens(rng.choice([0, 1, 2, 3]))
        full = prompt + generation
        resolution = "resolved" if parent else "root"
        roll = rng.random()
        if roll < 0.07:
            resolution, parent = "unresolved", None
        elif roll < 0.12:
            resolution = None
        elif roll < 0.17 and calls:
            resolution, parent = "resolved", rng.choice(calls)["model_call_id"]  # possibly a stale claim
        record = {
            "rollout_id": "r", "model_call_id": call_id, "prompt_token_ids": prompt,
            "generation_token_ids": generation, "generation_log_probs": [-rng.random() for _ in generation],
            "created_at": float(rng.randint(0, 30)), "parent_resolution": resolution,
            "parent_call_id": parent if resolution == "resolved" else None,
            "cum_len": len(full), "digest": compute_digest(full), "finish_reason": rng.choice(["stop", "length", None]),
            "output_items": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": call_id}]}]
            if rng.random() < 0.8 else [],
        }
        if rng.random() < 0.05:
            record["digest"] = compute_digest(full + [1])  # corrupt stamp
        if resolution == "resolved" and rng.random() < 0.2:
            parent_idx = next((k for k, c in enumerate(calls) if c["model_call_id"] == parent), None)
            if parent_idx is not None and full[: len(fulls[parent_idx])] == fulls[parent_idx]:
                record["prompt_is_delta"] = True
                record["prompt_token_ids"] = prompt[len(fulls[parent_idx]):]
        calls.append(record)
        fulls.append(full)
        prompts.append(prompt)
    entries = [TokenEntry.from_dict(c) for c in calls]
    if rng.random() < 0.2:
        dup = dict(rng.choice(calls))
        if rng.random() < 0.5 and dup["generation_token_ids"]:
            dup["generation_log_probs"] = [lp - 1.0 for lp in dup["generation_log_probs"]]  # conflicting copy
        entries.append(TokenEntry.from_dict(dup))
    terminal = rng.choice([None, None] + [c["model_call_id"] for c in calls])
    return entries, terminal, seed


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
