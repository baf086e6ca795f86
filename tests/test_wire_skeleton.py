"""The skeleton decode of big snapshots (`loading.skeleton`) against the whole-text decode.

A big snapshot's token arrays are cut out of its text before the typed decode, and each
entry gets its arrays' texts back afterwards. It is a shortcut, never a judge: for any text,
loading with it and loading without it must give the same snapshots (byte for byte) or the
same error message. The threshold is lowered to 0 here so small texts take the shortcut.
"""

from __future__ import annotations

import json
import mmap
from typing import Any

import numpy as np
import pytest
from helpers_wire import conversation, entry_fingerprint, entry_mutations, snapshot_text, snapshots_seen, top_mutations
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokencap.loading import load_snapshots, skeleton, snapshot_json
from tokencap.loading.capture_text import load_text
from tokencap.loading.problems import LoadError


def _outcome(data: bytes, cut: bool) -> tuple[str, Any]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(skeleton, "CUT_ABOVE", 0 if cut else 1 << 62)
        try:
            snapshots = load_text(data, "snap.json")
        except LoadError as exc:
            return "error", str(exc)
    return "ok", snapshots_seen(snapshots)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(delta=st.booleans(), mutations=st.lists(entry_mutations(), min_size=0, max_size=3),
       top=st.lists(top_mutations(), min_size=0, max_size=2), pretty=st.booleans())
def test_cut_and_whole_loads_of_a_mutated_snapshot_agree(delta: bool, mutations: list, top: list,
                                                        pretty: bool) -> None:
    data = snapshot_text(conversation(delta), mutations, top, pretty)
    assert _outcome(data, True) == _outcome(data, False)


def _entries_text(entries: list[dict[str, Any]], **top: Any) -> str:
    return json.dumps({"rollout_id": "r1", **top, "entries": entries})


_PROMPT = '"prompt_token_ids": '


def _with_prompt_text(entries: list[dict[str, Any]], index: int, raw: str) -> bytes:
    """The snapshot with entry ``index``'s prompt written as the raw text ``raw``."""
    text = _entries_text(entries)
    marker = json.dumps(entries[index]["prompt_token_ids"])
    head, _, tail = text.partition(_PROMPT + marker) if index == 0 else (None, None, None)
    if head is None:  # find the entry's own prompt (prompts grow, so the first match is the root's)
        start = text.index(json.dumps(entries[index]["model_call_id"]))
        at = text.index(_PROMPT, start)
        end = at + len(_PROMPT) + len(marker)
        return (text[:at] + _PROMPT + raw + text[end:]).encode()
    return (head + _PROMPT + raw + tail).encode()


@pytest.mark.parametrize("raw", [
    "[1,,2]", "[1 2]", "[1,]", "[01]", "[,]", "[+1]", "[.5]", "[1e5]", "[-1]", "[true]", "[null]", "[]",
    "[ 1 ,\n 2 ]", "[1, {}, 2]", "[18446744073709551616]", "[1, \"]\", 2]", "[[1], 2]", "[1, [2]]",
])
@pytest.mark.parametrize("index", [0, 2])
def test_a_broken_or_odd_token_array_loads_or_fails_as_the_whole_text_does(raw: str, index: int) -> None:
    data = _with_prompt_text(conversation(False), index, raw)
    cut, whole = _outcome(data, True), _outcome(data, False)
    assert cut == whole


@pytest.mark.parametrize("trap", [
    # A string that ends in a token field's name, followed by a colon and an array: a key.
    '"x\\"prompt_token_ids": [5, 6]',
    # The text of a token field inside a string (its quotes escaped, so never a match)...
    '"note": "\\"prompt_token_ids\\": [1, 2]"',
    # ... and inside a carried object, where it is a real key of a nested object.
    '"routed_experts": {"prompt_token_ids": [7, 8], "generation_token_ids": [9]}',
    # The field twice: the decode keeps the last, and the first cut is taken by no entry.
    '"prompt_token_ids": [3, 4]',
])
def test_a_cut_where_no_token_field_is_sends_the_text_the_whole_way(trap: str, monkeypatch) -> None:
    entries = conversation(False)
    text = _entries_text(entries)
    at = text.index('"model_call_id"')
    data = (text[:at] + trap + ", " + text[at:]).encode()
    assert _outcome(data, True) == _outcome(data, False)


def test_a_big_snapshot_is_decoded_from_a_skeleton_without_its_token_arrays(tmp_path, monkeypatch) -> None:
    """The shortcut is taken on a big well-formed snapshot read from a file (an mmap), and
    what it decodes is a small part of the text; the result is what the whole decode gives."""
    rng = np.random.default_rng(0)
    entries, seq, parent = [], [], None
    from tokencap import compute_digest

    for i in range(40):
        prompt = seq + rng.integers(0, 150_000, 4000).tolist()
        gen = rng.integers(0, 150_000, 20).tolist()
        full = prompt + gen
        entries.append({
            "schema_version": 5, "rollout_id": "big", "model_call_id": f"call-{i:03d}", "model": "policy",
            "prompt_token_ids": prompt, "generation_token_ids": gen, "generation_log_probs": [-0.5] * 20,
            "output_items": [{"type": "message", "role": "assistant", "content": [{"text": f"turn {i}"}]}],
            "token_item_index": 0, "created_at": 1000.0 + i, "parent_resolution": "resolved" if parent else "root",
            "parent_call_id": parent, "cum_len": len(full), "digest": compute_digest(full),
        })
        parent, seq = f"call-{i:03d}", full
    path = tmp_path / "big.json"
    path.write_bytes(json.dumps({"rollout_id": "big", "entries": entries}).encode())
    size = path.stat().st_size
    assert size > skeleton.CUT_ABOVE
    decoded: list[int] = []
    real = snapshot_json._decode_typed_snapshot
    monkeypatch.setattr(snapshot_json, "_decode_typed_snapshot", lambda data: decoded.append(len(data)) or real(data))
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        assert skeleton.may_cut(mapped)
        cut = skeleton.cut_token_arrays(mapped)
        assert cut is not None and len(cut[1]) == 80  # both token arrays of every entry
        del cut
    snapshot = load_snapshots(path)[0]
    assert len(decoded) == 1 and decoded[0] < size / 50  # the skeleton only: no token array in it
    assert [int(e.prompt_token_ids.size) for e in snapshot.entries] == [len(e["prompt_token_ids"]) for e in entries]
    monkeypatch.setattr(skeleton, "CUT_ABOVE", 1 << 62)
    whole = load_snapshots(path)[0]
    assert [entry_fingerprint(e) for e in snapshot.entries] == [entry_fingerprint(e) for e in whole.entries]
    assert decoded[1] == size


def test_a_small_text_or_an_unsearchable_buffer_is_not_cut() -> None:
    data = _entries_text(conversation(False)).encode()
    assert not skeleton.may_cut(data) and skeleton.cut_token_arrays(data) is None
    big = data + b" " * skeleton.CUT_ABOVE
    assert skeleton.may_cut(big) and skeleton.cut_token_arrays(big) is not None
    assert not skeleton.may_cut(memoryview(big)) and skeleton.cut_token_arrays(memoryview(big)) is None
    assert skeleton.cut_token_arrays(b'{"entries": []}' + b" " * skeleton.CUT_ABOVE) is None  # nothing to cut
