"""Hypothesis strategies shared by the property tests: random rollouts that mix everything a capture
can hold (see tests/test_builder_properties.py for what the build must do with them).

Not a test module: test modules import from here, never from each other.
"""

from __future__ import annotations

import random

from hypothesis import strategies as st

from tokencap import TokenEntry, compute_digest


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

