"""The link proof: where a parent's cumulative tokens and a child's prompt agree, and where they part."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st
from synth_snapshots import kitchen_sink

from tokencap import TokenEntry, load_snapshots
from tokencap.views import RolloutView
from tokencap.views.formatting import md_frame
from tokencap.views.rollout import detail as dv
from tokencap.views.rollout import linkproof as lp

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"


def entry(call_id: str, prompt: list[int], gen: list[int]) -> TokenEntry:
    return TokenEntry.from_dict({"schema_version": 5, "rollout_id": "r", "model_call_id": call_id,
                                 "prompt_token_ids": prompt, "generation_token_ids": gen,
                                 "generation_log_probs": [-0.5] * len(gen), "parent_resolution": "root"})


def test_a_parent_that_opens_the_prompt_holds_and_marks_where_it_ends():
    parent = entry("p", [1, 2, 3], [4, 5])
    child = entry("c", [1, 2, 3, 4, 5, 6, 7], [8])
    proof = lp.prove(child, parent)
    assert proof.holds and proof.diverges_at is None and proof.agree == 5
    assert proof.runs == ((0, 5, True),)
    assert parent.digest is None and proof.found_digest == proof.expected_digest  # unstamped: the digest computed
    assert "All 5 tokens of p's cumulative sequence open c's prompt (7 tokens; the next 2" in proof.summary()


def test_a_stale_claim_names_the_first_difference_and_the_tokens_on_each_side():
    parent = entry("p", [1, 2, 3, 4], [5, 6])
    child = entry("c", [1, 2, 9, 4, 5, 6, 7], [8])
    proof = lp.prove(child, parent)
    assert not proof.holds and proof.diverges_at == 2
    assert proof.runs == ((0, 2, True), (2, 3, False), (3, 6, True))
    assert proof.same_after == 3
    assert proof.found_digest is not None and proof.found_digest != proof.expected_digest
    text = proof.summary()
    assert "differ at position 2: the parent has token 3, c's prompt has token 9" in text
    assert "Of the 3 positions after it that both have, 3 agree again" in text
    start, end = proof.window
    assert start == 0 and list(proof.parent_tokens) == [1, 2, 3, 4, 5, 6][start:end]


def test_a_prompt_shorter_than_the_parents_sequence_cannot_be_opened_by_it():
    parent = entry("p", [1, 2, 3], [4, 5])
    child = entry("c", [1, 2, 3], [9])
    proof = lp.prove(child, parent)
    assert not proof.holds and proof.diverges_at == 3 and proof.found_digest is None
    assert "ends before" in proof.summary()


def test_views_pick_the_linked_recovered_or_claimed_parent():
    sink = RolloutView(kitchen_sink().snapshot())
    assert lp.link_proof(sink, "c05").relation == "recovered parent"  # claimed the empty c04e
    assert lp.link_proof(sink, "c02").relation == "linked parent"
    stale = lp.link_proof(sink, "s01")
    assert stale.relation == "claimed parent" and stale.parent == "c05" and not stale.holds
    assert lp.link_proof(sink, "c01") is None       # a root
    assert lp.link_proof(sink, "x01") is None       # excluded: its own stamps are the check
    assert lp.link_proof(sink, "g01") is None       # its parent was never captured


@given(st.lists(st.booleans(), min_size=1, max_size=3000), st.integers(2, 50))
def test_runs_cover_the_overlap_and_never_hide_a_difference(same, max_runs):
    a = np.arange(len(same))
    b = np.where(same, a, -1)
    runs = lp.agreement_runs(a, b, max_runs=max_runs)
    assert runs[0][0] == 0 and runs[-1][1] == len(same)
    assert all(x[1] == y[0] for x, y in zip(runs, runs[1:]))
    for start, end, agree in runs:
        assert agree == all(same[start:end])
    # The runs as they are, or (more of them than max_runs) max_runs equal bins.
    natural = sum(1 for i in range(len(same)) if i == 0 or same[i] != same[i - 1])
    assert len(runs) == min(natural, max_runs)


def test_checks_table_shortens_digests_and_the_full_ones_are_listed_below():
    view = RolloutView(load_snapshots(SAMPLES / "stale_parent_link.json")[0])
    d = dv.call_detail(view, "call:call-0003")
    short = dv.short_digests(d.link_checks)
    assert not any(isinstance(v, str) and len(v) == 64 for v in short.to_numpy().ravel())
    lines = dv.digest_lines(d.link_checks).splitlines()
    assert [line.split()[0] for line in lines] == ["expected", "found"]
    assert all(len(line.split()[1]) == 64 for line in lines)


def test_md_frame_escapes_every_cell_for_a_markdown_table():
    frame = pd.DataFrame({"a|b": ["**x**", None], "n": [1.5, float("nan")]})
    out = md_frame(frame)
    assert list(out.columns) == ["a\\|b", "n"]
    assert out.iloc[0, 0] == "\\*\\*x\\*\\*" and out.iloc[1, 0] == "–" and out.iloc[1, 1] == "–"
