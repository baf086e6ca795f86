"""The alignment walk (docs/contract.md#alignment) against a plain reference walk, and its invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokencap.diagnosis import alignment
from tokencap.diagnosis.alignment import align, common_prefix

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference_walk(s: list[int], p: list[int]) -> tuple[int, list[tuple[int, int, int, int]]]:
    """docs/contract.md#alignment word for word, one token at a time (slow, obviously right)."""
    length, m = len(s), len(p)
    agree = 0
    while agree < min(length, m) and s[agree] == p[agree]:
        agree += 1
    spans = []
    i = j = agree
    while i < length:
        i0, j0 = i, j
        found = None
        for i1 in range(i0, length - 3):
            k = min(8, length - i1)
            window = s[i1:i1 + k]
            for j1 in range(j0, m - k + 1):
                if p[j1:j1 + k] == window:
                    found = (i1, j1)
                    break
            if found:
                break
        if found is None:
            spans.append((i0, length, j0, m))
            break
        i1, j1 = found
        spans.append((i0, i1, j0, j1))
        while i1 < length and j1 < m and s[i1] == p[j1]:
            i1, j1 = i1 + 1, j1 + 1
        i, j = i1, j1
    return agree, spans


def arr(values) -> np.ndarray:
    return np.asarray(values, dtype=np.uint64)


def spans_of(result) -> list[tuple[int, int, int, int]]:
    return [(s.parent_start, s.parent_end, s.prompt_start, s.prompt_end) for s in result.spans]


@st.composite
def pairs(draw):
    """A sequence and a prompt made from it by drops, inserts, replacements and a new tail,
    over a small alphabet so windows repeat and near-matches abound."""
    alphabet = draw(st.integers(2, 12))
    s = draw(st.lists(st.integers(0, alphabet), min_size=0, max_size=70))
    p = list(s)
    for _ in range(draw(st.integers(0, 5))):
        if not p:
            break
        at = draw(st.integers(0, len(p)))
        op = draw(st.sampled_from(["drop", "insert", "replace"]))
        n = draw(st.integers(1, 12))
        new = draw(st.lists(st.integers(0, alphabet + 3), min_size=n, max_size=n))
        if op == "drop":
            del p[at:at + n]
        elif op == "insert":
            p[at:at] = new
        else:
            p[at:at + n] = new
    p += draw(st.lists(st.integers(0, alphabet + 3), max_size=10))
    return s, p


@SETTINGS
@given(pairs())
def test_the_walk_matches_the_reference_walk(pair):
    s, p = pair
    got = align(arr(s), arr(p), limit=None)
    agree, spans = reference_walk(s, p)
    assert got.agree == agree
    assert spans_of(got) == spans
    assert got.total == len(spans)


@SETTINGS
@given(pairs())
def test_divergences_are_ordered_in_bounds_and_what_lies_between_is_equal(pair):
    s, p = pair
    got = align(arr(s), arr(p), limit=None)
    length, m = len(s), len(p)
    assert s[:got.agree] == p[:got.agree]
    i = j = got.agree
    for span in got.spans:
        assert i <= span.parent_start <= span.parent_end <= length
        assert j <= span.prompt_start <= span.prompt_end <= m
        # The stretch since the previous divergence is the same tokens on both sides.
        assert span.parent_start - i == span.prompt_start - j
        assert s[i:span.parent_start] == p[j:span.prompt_start]
        assert (span.parent_start, span.prompt_start) != (span.parent_end, span.prompt_end) or span.to_end
        i, j = span.parent_end, span.prompt_end
    if got.spans and got.spans[-1].to_end:
        assert (i, j) == (length, m)
    else:  # S used up past a common run: the rest of P is the ordinary interstitial
        rest = length - i
        assert s[i:] == p[j:j + rest]


@SETTINGS
@given(pairs(), st.integers(0, 4))
def test_a_limit_lists_the_first_divergences_and_counts_them_all(pair, limit):
    s, p = pair
    full = align(arr(s), arr(p), limit=None)
    capped = align(arr(s), arr(p), limit=limit)
    assert capped.spans == full.spans[:limit]
    assert capped.total == full.total
    assert capped.more == max(0, full.total - limit)


def test_a_hash_collision_never_gives_a_wrong_span(monkeypatch):
    # Every window hashes alike: the index must confirm each candidate on the tokens.
    monkeypatch.setattr(alignment, "window_hashes",
                        lambda x, k=8: np.zeros(max(int(x.size) - k + 1, 0), dtype=np.uint64))
    rng = np.random.default_rng(5)
    for _ in range(40):
        s = rng.integers(0, 6, int(rng.integers(0, 60))).tolist()
        p = list(s)
        at = int(rng.integers(0, len(p) + 1))
        p[at:at + 3] = rng.integers(0, 8, 2).tolist()
        got = align(arr(s), arr(p), limit=None)
        assert (got.agree, spans_of(got)) == reference_walk(s, p)


@pytest.mark.parametrize("drop", [1, 2, 3])
def test_the_last_tokens_dropped_run_to_the_end(drop):
    s = list(range(100, 130))
    p = s[:-drop] + [7, 8, 9]
    got = align(arr(s), arr(p))
    assert spans_of(got) == [(30 - drop, 30, 30 - drop, len(p))]
    assert got.spans[0].to_end


def test_a_short_tail_window_resynchronises():
    # A mismatch 6 tokens before S ends: only a window shorter than 8 (k = L - i) can match.
    s = list(range(100, 130))
    p = s[:24] + [1] + s[25:] + [2, 3]
    got = align(arr(s), arr(p))
    assert spans_of(got) == [(24, 25, 24, 25)]
    assert not got.spans[0].to_end


def test_a_prompt_that_continues_the_sequence_has_no_divergence():
    s = list(range(50))
    got = align(arr(s), arr(s + [1, 2, 3]))
    assert (got.agree, got.spans, got.total) == (50, (), 0)


def test_neither_array_is_written():
    s, p = arr(range(40)), arr(list(range(20)) + [999] + list(range(21, 40)))
    s.flags.writeable = p.flags.writeable = False
    assert align(s, p).total == 1


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 300, 5000])
def test_common_prefix_at_every_chunk_edge(n):
    a = np.arange(6000, dtype=np.uint64)
    b = a.copy()
    if n < b.size:
        b[n] = 1 << 40
    assert common_prefix(a, b) == n
    assert common_prefix(a[:n], b) == n


def test_windows_crowded_into_few_slots_are_still_found(monkeypatch):
    # Distinct hashes that all land in three table slots: nearly every P window is evicted,
    # so the walk depends on the evicted windows' own index.
    real = alignment.window_hashes

    def crowded(x, k=8):
        h = real(x, k)
        first = np.asarray(x[:h.size], dtype=np.uint64) % np.uint64(3)
        return (first << np.uint64(62)) | (h & np.uint64((1 << 40) - 1))
    monkeypatch.setattr(alignment, "window_hashes", crowded)
    rng = np.random.default_rng(9)
    for _ in range(60):
        s = rng.integers(0, 9, int(rng.integers(0, 90))).tolist()
        p = list(s)
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(0, len(p) + 1))
            p[at:at + int(rng.integers(0, 5))] = rng.integers(0, 12, int(rng.integers(0, 5))).tolist()
        got = align(arr(s), arr(p), limit=None)
        assert (got.agree, spans_of(got)) == reference_walk(s, p)


def test_the_last_window_that_may_resynchronise_starts_four_tokens_before_the_end():
    s = list(range(100, 130))
    inserted = s[:26] + [1] + s[26:]  # a mismatch at L - 4: the 4-token tail still matches
    got = align(arr(s), arr(inserted))
    assert spans_of(got) == [(26, 26, 26, 27)] and not got.spans[0].to_end
    late = s[:27] + [1] + s[27:]  # at L - 3 no window may resynchronise: it runs to the end
    got = align(arr(s), arr(late))
    assert spans_of(got) == [(27, 30, 27, 31)] and got.spans[0].to_end
