"""Properties of the diagnosis over random rollouts (the builder's own random strategy).

(a) The diagnosis explains and never decides: `build_rollout` writes the same bytes, metrics
    and payload whether or not `diagnose` ran, with a tokenizer and with random evidence,
    and the result it read is unchanged.
(c) `diagnose` never raises on random evidence, on ids the tokenizer cannot decode, or on a
    tokenizer that fails; every break it returns is well formed.
"""

from __future__ import annotations

import functools
import io
import json
import math

from diagnosis_cases import tiny_tokenizer
from helpers_properties import rollouts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokencap import TokenCaptureSnapshot, build_rollout, diagnose
from tokencap.diagnosis import BREAK_FIELDS, BREAK_KINDS, CAUSES, DIVERGENCE_KINDS, RELATIONS
from tokencap.export import write_summary

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@functools.lru_cache(maxsize=1)
def tokenizer():
    return tiny_tokenizer()


@functools.lru_cache(maxsize=1)
def small_vocabulary():
    """Knows ids 0-10 only: most ids of a random rollout (0-49) cannot be decoded."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate("<unk> a b c d e f g h i j".split())},
                                     unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


class FailingTokenizer:
    """Knows only some ids and raises on others, as a broken tokenizer might."""

    def id_to_token(self, value):
        if value % 7 == 3:
            raise RuntimeError("boom")
        return None if value % 5 == 4 else f"t{value}"

    def decode(self, ids, skip_special_tokens=False):
        if len(ids) > 6:
            raise ValueError("cannot")
        return " ".join(map(str, ids))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)


def mostly(good):
    """``good`` three times in four, else any JSON value (a wrong type, most likely)."""
    return st.one_of(good, good, good, json_values)


@st.composite
def evidence_records(draw, call_ids):
    """Rollout records with evidence: well-shaped parts naming real and unknown calls, and junk."""
    call_id = st.sampled_from(sorted(call_ids) + ["ghost"])
    ref = st.fixed_dictionaries({"model_call_id": mostly(call_id)}, optional={
        "response_id": mostly(st.sampled_from(["r1", "r2", "r3"]))}) | st.fixed_dictionaries(
        {"response_id": st.sampled_from(["r1", "r2", "r3"])})
    record = st.one_of(
        st.fixed_dictionaries({"kind": st.just("context_compaction"), "after_model_call": mostly(ref)}, optional={
            "model_calls": mostly(st.lists(ref, max_size=3)), "tokens_before": mostly(st.integers(0, 9)),
            "trigger": mostly(st.text(max_size=3))}),
        st.fixed_dictionaries({"kind": st.just("agent_invocation"), "invocation_id": st.sampled_from(["i1", "i2"]),
                               "model_calls": mostly(st.lists(ref, max_size=3))},
                              optional={"parent_invocation_id": mostly(st.sampled_from(["i0", "i1"]))}),
        st.fixed_dictionaries({"kind": st.just("tool_call"), "tool_call_id": st.text(max_size=2)},
                              optional={"duration_ms": mostly(st.floats(0, 1e4))}),
        json_values)
    out = {}
    if draw(st.booleans()):
        out["ng_agent_observations"] = draw(mostly(st.fixed_dictionaries({"records": st.lists(record, max_size=5)})))
    if draw(st.booleans()):
        out["ng_model_call_capture"] = draw(mostly(st.fixed_dictionaries({"calls": st.lists(
            st.fixed_dictionaries({"model_call_id": mostly(call_id), "response_id": st.sampled_from(["r1", "r2"])}),
            max_size=4)})))
    if draw(st.booleans()):
        out["ng_trajectory"] = draw(mostly(st.fixed_dictionaries({"schema": st.just("1.0")}, optional={
            "invocations": mostly(st.lists(record, max_size=3)), "model_calls": mostly(st.lists(ref, max_size=3))})))
    if draw(st.booleans()):
        out["mask_sample"] = draw(mostly(st.booleans()))
    return out if draw(st.integers(0, 9)) else draw(json_values)


def written(result) -> bytes:
    out = io.BytesIO()
    write_summary(out, result)
    return out.getvalue()


def arrays(result) -> list[bytes]:
    build = result.build
    if build is None:
        return []
    return [e.prompt_token_ids.tobytes() + e.generation_token_ids.tobytes() for _, e in sorted(build.entries.items())]


@SETTINGS
@given(rollouts(), st.data())
def test_the_build_is_the_same_with_or_without_a_diagnosis(case, data):
    entries, terminal, _ = case
    snapshot = TokenCaptureSnapshot(rollout_id="r", entries=entries)
    plain = build_rollout(snapshot, terminal_call_id=terminal)
    expected = (written(plain), json.dumps(plain.metrics, sort_keys=True), plain.mask_reasons,
                json.dumps(plain.rebuilt_response, sort_keys=True))
    diagnosed = build_rollout(snapshot, terminal_call_id=terminal)
    before = arrays(diagnosed)
    record = data.draw(evidence_records({e.model_call_id for e in entries}))
    for tok in (None, tokenizer(), FailingTokenizer()):
        diagnose(diagnosed, tokenizer=tok, evidence=record)
    assert arrays(diagnosed) == before
    got = (written(diagnosed), json.dumps(diagnosed.metrics, sort_keys=True), diagnosed.mask_reasons,
           json.dumps(diagnosed.rebuilt_response, sort_keys=True))
    assert got == expected
    assert written(build_rollout(snapshot, terminal_call_id=terminal)) == expected[0]


@SETTINGS
@given(rollouts(), st.data(), st.sampled_from(["none", "tiny", "failing", "small"]))
def test_diagnose_never_raises_and_every_break_is_well_formed(case, data, which):
    entries, terminal, _ = case
    result = build_rollout(TokenCaptureSnapshot(rollout_id="r", entries=entries), terminal_call_id=terminal)
    tok = {"none": None, "tiny": tokenizer(), "failing": FailingTokenizer(), "small": small_vocabulary()}[which]
    record = data.draw(evidence_records({e.model_call_id for e in entries}))
    breaks = diagnose(result, tokenizer=tok, evidence=record)
    build = result.build
    if build is None:
        assert breaks == []
        return
    ids = [b.call_id for b in breaks]
    assert len(ids) == len(set(ids))
    times = [build.entries[c].created_at if c in build.entries else math.inf for c in ids]
    assert [(t, c) for t, c in zip(times, ids)] == sorted(zip(times, ids))
    if not build.notes.unresolved_parent_calls and build.notes.roots <= 1 and build.notes.chains <= 1:
        assert breaks == []  # one proven chain: nothing broke
    for b in breaks:
        d = b.to_dict()
        assert tuple(d) == BREAK_FIELDS and json.loads(json.dumps(d)) == d
        assert b.kind in BREAK_KINDS and b.cause in CAUSES and b.token_cause in CAUSES
        assert b.relation in RELATIONS + (None,)
        assert (b.predecessor is None) == (b.relation is None)
        if b.predecessor is not None:
            assert 0 <= b.agree <= min(b.predecessor_len, b.prompt_len)
            assert (b.token_cause == "link_intact") == (b.agree == b.predecessor_len)
            for div in b.divergences:
                assert div.kind in DIVERGENCE_KINDS
                assert b.agree <= div.parent_start <= div.parent_end <= b.predecessor_len
                assert b.agree <= div.prompt_start <= div.prompt_end <= b.prompt_len
            starts = [d.parent_start for d in b.divergences]
            assert starts == sorted(starts)
        if b.kind == "record_fault":
            assert b.cause == "record_fault" and b.predecessor is None
        if tok is None:
            assert (b.parent_text, b.prompt_text, b.same_text) == (None, None, None)
        if which == "small" and b.divergences:
            first = b.divergences[0]
            ids = list(build.entries[b.call_id].prompt_token_ids[first.prompt_start:first.prompt_end])
            if b.parent_text is None:
                assert any("cannot decode token id" in n for n in b.notes)
            else:
                assert all(i <= 10 for i in ids) and b.same_text == (b.parent_text == b.prompt_text)


def _reference_predecessor(build, brk):
    """docs/contract.md#predecessor word for word, with plain lists."""
    entry = build.entries[brk.call_id]
    if brk.kind == "branch":
        return build.links[brk.call_id].linked_parent, "branch_point"
    claimed = entry.parent_call_id
    if claimed is not None and claimed != brk.call_id and claimed in build.entries:
        return claimed, "claimed"
    below, stack = set(), [brk.call_id]
    while stack:
        node = stack.pop()
        for cid, link in build.links.items():
            if link.linked_parent == node and cid not in below:
                below.add(cid)
                stack.append(cid)
    prompt = list(entry.prompt_token_ids)
    best = None
    for cid, other in build.entries.items():
        if cid == brk.call_id or cid in below or not other.created_at <= entry.created_at:
            continue
        seq = list(other.prompt_token_ids) + list(other.generation_token_ids)
        shared = 0
        while shared < min(len(seq), len(prompt)) and seq[shared] == prompt[shared]:
            shared += 1
        key = (shared, other.created_at, len(seq), [-ord(ch) for ch in cid])
        if best is None or key > best[0]:
            best = (key, cid)
    return (best[1], "nearest") if best else (None, None)


@SETTINGS
@given(rollouts())
def test_the_predecessor_is_the_one_the_rules_name(case):
    entries, terminal, _ = case
    result = build_rollout(TokenCaptureSnapshot(rollout_id="r", entries=entries), terminal_call_id=terminal)
    for b in diagnose(result):
        if b.kind != "record_fault":
            assert (b.predecessor, b.relation) == _reference_predecessor(result.build, b)


# --------------------------------------------------------------------------- rollouts bent on purpose (docs/contract.md#breaks, #causes)


@st.composite
def bent_rollouts(draw):
    """a (opening O, generation G1) and a2 (+ interstitial X, generation G2), then a break ``b`` bent
    one known way: its reasoning moved after the rest (``reordered``), its generation replaced by a
    stub (``stub``), an empty prompt (``empty``), or a later root starting over (``later_root``).
    Token ids are distinct, so only the bend can make spans match. Returns the capture, the bend,
    the terminal call and the token cause the bend must give."""
    from synth_snapshots import Capture

    sizes = [draw(st.integers(1, 30)), draw(st.integers(4, 40)), draw(st.integers(0, 12)), draw(st.integers(1, 30))]
    fresh = iter(range(1000, 10_000))
    o, g1, x, g2 = ([next(fresh) for _ in range(k)] for k in sizes)
    z = [next(fresh) for _ in range(draw(st.integers(0, 5)))]
    bend = draw(st.sampled_from(["reordered", "stub", "empty", "later_root"]))
    c = Capture("bent", seed=draw(st.integers(0, 9)))
    c.call("a", prompt=o, generation=g1)
    c.call("a2", "a", prompt=o + g1 + x, generation=g2)
    terminal, want = None, None
    if bend == "reordered":  # S = O G1 X G2; P = O X G2 G1 Z: X G2 stands whole before G1
        c.call("b", prompt=o + x + g2 + g1 + z, generation=[next(fresh)], resolution="unresolved")
        # G1's first 8-token window resynchronises at once (X G2 inserted), then X G2 runs to the end
        # and is found whole. A shorter G1 is the dropped span itself (X G2 resynchronises first).
        want = ("history_reordered" if len(g1) >= 8 and len(x) + len(g2) >= 16
                else "generation_dropped" if len(g1) < 8 and len(x) + len(g2) >= 4 else None)
    elif bend == "stub":  # G1 replaced by k tokens, |G1| >= 4k; X G2 lines up again after it
        k = draw(st.integers(1, 4))
        c.call("b", prompt=o + [next(fresh) for _ in range(k)] + x + g2 + z, generation=[next(fresh)],
               resolution="unresolved")
        want = "generation_dropped" if len(g1) >= 4 * k and len(x) + len(g2) >= 4 else None
    elif bend == "empty":
        c.call("b", prompt=[], generation=[next(fresh)], resolution="unresolved")
        want = "prompt_missing"
    else:
        c.call("b", prompt=o + z + [next(fresh)], generation=[next(fresh)], resolution="root")
        c.call("b2", "b", prompt=o + z + c.full["b"][len(o) + len(z):] + [next(fresh)], generation=[next(fresh)])
        terminal = draw(st.sampled_from([None, "a2", "b2"]))  # whichever fragment is delivered
    return c, bend, terminal, want


@SETTINGS
@given(bent_rollouts(), st.sampled_from(["none", "tiny", "failing", "small"]))
def test_bent_rollouts_get_the_amended_causes_and_the_build_never_changes(case, which):
    c, bend, terminal, want = case
    snapshot = c.snapshot()
    plain = build_rollout(snapshot, terminal_call_id=terminal)
    expected = (written(plain), json.dumps(plain.metrics, sort_keys=True), plain.mask_reasons)
    tok = {"none": None, "tiny": tokenizer(), "failing": FailingTokenizer(), "small": small_vocabulary()}[which]
    result = build_rollout(snapshot, terminal_call_id=terminal)
    breaks = {b.call_id: b for b in diagnose(result, tokenizer=tok)}
    assert (written(result), json.dumps(result.metrics, sort_keys=True), result.mask_reasons) == expected
    for b in breaks.values():
        assert tuple(b.to_dict()) == BREAK_FIELDS and b.cause in CAUSES and b.token_cause in CAUSES
        assert all(d.kind in DIVERGENCE_KINDS for d in b.divergences)
    if bend == "later_root":
        assert "a" not in breaks and breaks["b"].kind == "extra_root"  # the earliest root never breaks
        return
    b = breaks["b"]
    if want is not None:
        assert b.token_cause == want, (bend, b)
    if bend == "empty":
        assert b.divergences == () and b.prompt_len == 0
