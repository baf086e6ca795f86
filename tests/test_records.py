"""docs/contract.md#token-entry to #digest: record validation, round trips and the digest wire contract."""

from __future__ import annotations

import copy
import hashlib
import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest
from helpers import entry_dict, minimal_entry_dict, refusal_dict

from tokencap import EngineRefusalRecord, ParentResolutionStatus, TokenEntry, compute_digest

GOLDEN = Path(__file__).resolve().parent / "data" / "golden_digests.json"
CID = "call-Q7"  # distinctive, so "the message names the call id" cannot pass by accident

KNOWN_ENTRY_FIELDS = {
    "schema_version", "rollout_id", "model_call_id", "model", "prompt_token_ids",
    "generation_token_ids", "generation_log_probs", "routed_experts", "output_items",
    "token_item_index", "created_at", "parent_resolution", "parent_call_id",
    "parent_resolution_reason", "cum_len", "digest", "prompt_is_delta", "prefix_requested",
    "prefix_supplied", "continuation_fingerprint", "continuation_context_len",
    "continuation_context_digest", "fingerprint_version", "finish_reason",
}
KNOWN_REFUSAL_FIELDS = {
    "schema_version", "rollout_id", "model_call_id", "parent_resolution", "parent_call_id",
    "code", "message", "recorded_at",
}


def _bad_entry(fields_over: dict, *, drop: tuple[str, ...] = ()) -> str:
    d = minimal_entry_dict(CID, **fields_over)
    for k in drop:
        d.pop(k)
    with pytest.raises(ValueError) as info:
        TokenEntry.from_dict(d)
    return str(info.value)


def _assert_names(msg: str, *fields: str, call_id: str | None = CID) -> None:
    if call_id is not None:
        assert call_id in msg, f"call id {call_id!r} not named in: {msg}"
    assert any(f in msg for f in fields), f"none of {fields} named in: {msg}"


# --------------------------------------------------------------------------- TokenEntry: invalid


@pytest.mark.parametrize("field", ["prompt_token_ids", "generation_token_ids"])
@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("7", id="str"),
        pytest.param(7.0, id="float"),
        pytest.param(True, id="bool-true"),
        pytest.param(False, id="bool-false"),
        pytest.param(-1, id="negative"),
        pytest.param(2**64, id="2^64"),
        pytest.param(2**70, id="huge"),
        pytest.param(None, id="null"),
        pytest.param([1], id="nested-list"),
    ],
)
def test_token_id_not_an_integer_in_range_is_invalid(field: str, bad) -> None:
    good = {"prompt_token_ids": [1, 2, 3], "generation_token_ids": [4, 5]}[field]
    msg = _bad_entry({field: good[:1] + [bad] + good[1:]})
    _assert_names(msg, field)


@pytest.mark.parametrize("field", ["prompt_token_ids", "generation_token_ids", "generation_log_probs"])
@pytest.mark.parametrize("bad", [None, "1,2", {"0": 1}, 5])
def test_token_arrays_of_the_wrong_type_are_invalid(field: str, bad) -> None:
    msg = _bad_entry({field: bad})
    _assert_names(msg, field)


def test_negative_cum_len_is_invalid() -> None:
    _assert_names(_bad_entry({"cum_len": -1}), "cum_len")


def test_generation_length_mismatch_is_invalid() -> None:
    msg = _bad_entry({"generation_token_ids": [4, 5, 6], "generation_log_probs": [-0.1, -0.2]})
    _assert_names(msg, "generation_log_probs", "generation_token_ids")


def test_log_probs_without_tokens_is_invalid() -> None:
    msg = _bad_entry({"generation_token_ids": [], "generation_log_probs": [-0.1]})
    _assert_names(msg, "generation_log_probs", "generation_token_ids")


@pytest.mark.parametrize(
    "bad",
    [float("nan"), float("inf"), float("-inf"), "-0.5", None, True],
    ids=["nan", "inf", "-inf", "str", "null", "bool"],
)
def test_non_finite_or_non_number_log_prob_is_invalid(bad) -> None:
    msg = _bad_entry({"generation_log_probs": [-0.5, bad]})
    _assert_names(msg, "generation_log_probs")


@pytest.mark.parametrize(
    ("items", "index"),
    [
        ([{"type": "message"}], 1),
        ([{"type": "message"}], -1),
        ([], 0),
        ([{"type": "message"}, {"type": "function_call"}], 2),
    ],
)
def test_token_item_index_out_of_range_is_invalid(items, index) -> None:
    msg = _bad_entry({"output_items": items, "token_item_index": index})
    _assert_names(msg, "token_item_index")


def test_resolved_without_parent_is_invalid() -> None:
    msg = _bad_entry({"parent_resolution": "resolved", "parent_call_id": None})
    _assert_names(msg, "parent_call_id", "parent_resolution")


@pytest.mark.parametrize("resolution", ["root", "unresolved"])
def test_root_or_unresolved_with_parent_is_invalid(resolution: str) -> None:
    msg = _bad_entry({"parent_resolution": resolution, "parent_call_id": "call-P"})
    _assert_names(msg, "parent_call_id", "parent_resolution")


@pytest.mark.parametrize("resolution", ["root", "unresolved", None])
def test_prompt_is_delta_without_resolved_parent_is_invalid(resolution) -> None:
    msg = _bad_entry({"parent_resolution": resolution, "prompt_is_delta": True})
    _assert_names(msg, "prompt_is_delta")


@pytest.mark.parametrize(
    "field", ["prompt_token_ids", "generation_token_ids", "generation_log_probs", "rollout_id"]
)
def test_missing_required_field_is_invalid(field: str) -> None:
    msg = _bad_entry({}, drop=(field,))
    _assert_names(msg, field)


def test_missing_model_call_id_is_invalid() -> None:
    d = minimal_entry_dict(CID)
    d.pop("model_call_id")
    with pytest.raises(ValueError, match="model_call_id"):
        TokenEntry.from_dict(d)


@pytest.mark.parametrize("version", [0, 1, 2, 7, 100, -5])
def test_schema_version_outside_3_to_6_is_invalid(version: int) -> None:
    msg = _bad_entry({"schema_version": version})
    _assert_names(msg, "schema_version")
    assert str(version) in msg, msg
    assert "3" in msg and "6" in msg, f"supported range not stated: {msg}"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("schema_version", "5"),
        ("schema_version", 5.5),
        ("schema_version", 5.0),
        ("schema_version", True),
        ("rollout_id", 12),
        ("rollout_id", None),
        ("model", 3),
        ("output_items", {"type": "message"}),
        ("output_items", "message"),
        ("output_items", ["not an object"]),
        ("token_item_index", "0"),
        ("token_item_index", True),
        ("created_at", "yesterday"),
        ("created_at", True),
        ("parent_resolution", "maybe"),
        ("parent_resolution", 1),
        ("parent_call_id", 5),
        ("parent_resolution_reason", 5),
        ("cum_len", "5"),
        ("cum_len", 5.0),
        ("cum_len", True),
        ("digest", 5),
        ("prompt_is_delta", "yes"),
        ("prompt_is_delta", 1),
        ("prefix_requested", "no"),
        ("prefix_supplied", 0),
        ("finish_reason", 3),
    ],
)
def test_value_not_of_the_table_type_is_invalid(field: str, value) -> None:
    msg = _bad_entry({field: value})
    _assert_names(msg, field)


@pytest.mark.parametrize(("field", "value"), [
    pytest.param("created_at", 10**400, id="created_at"),
    pytest.param("generation_log_probs", [10**400, -1.0], id="log_prob"),
])
def test_number_beyond_float_range_is_invalid(field: str, value) -> None:
    msg = _bad_entry({field: value})
    _assert_names(msg, field)


def test_refusal_recorded_at_beyond_float_range_is_invalid() -> None:
    _assert_names(_bad_refusal({"recorded_at": 10**400}), "recorded_at")


def test_model_call_id_of_wrong_type_is_invalid() -> None:
    d = minimal_entry_dict(CID, model_call_id=42)
    with pytest.raises(ValueError, match="model_call_id"):
        TokenEntry.from_dict(d)


def test_not_a_mapping_is_invalid() -> None:
    with pytest.raises(ValueError, match="^a token entry must be a JSON object, got a list$"):
        TokenEntry.from_dict([1, 2, 3])  # type: ignore[arg-type]


def test_errors_are_value_errors_naming_call_and_field_for_negative_token() -> None:
    # The canonical example: one bad id deep in the generation.
    d = minimal_entry_dict(CID, generation_token_ids=[4, -3], generation_log_probs=[-0.1, -0.2])
    with pytest.raises(ValueError) as info:
        TokenEntry.from_dict(d)
    assert str(info.value) == ("call 'call-Q7': field 'generation_token_ids': token id at position 1 is -3; ids must "
                               "be in [0, 2^64)")


# --------------------------------------------------------------------------- TokenEntry: valid edges


@pytest.mark.parametrize("version", [3, 4, 5, 6])
def test_schema_versions_3_to_6_are_accepted(version: int) -> None:
    e = TokenEntry.from_dict(minimal_entry_dict(CID, schema_version=version))
    assert e.schema_version == version
    assert e.to_dict()["schema_version"] == version


def test_token_ids_zero_and_max_uint64_are_accepted() -> None:
    top = 2**64 - 1
    e = TokenEntry.from_dict(minimal_entry_dict(CID, prompt_token_ids=[0, top], generation_token_ids=[top, 0]))
    d = e.to_dict()
    assert d["prompt_token_ids"] == [0, top]
    assert d["generation_token_ids"] == [top, 0]
    assert all(type(t) is int for t in d["prompt_token_ids"] + d["generation_token_ids"])
    assert list(e.prompt_token_ids) == [0, top]


def test_numpy_token_arrays_are_accepted() -> None:
    d = minimal_entry_dict(CID, prompt_token_ids=np.array([1, 2, 3], dtype=np.uint64),
                           generation_token_ids=np.array([4, 5], dtype=np.int64),
                           generation_log_probs=np.array([-0.5, -1.5]))
    e = TokenEntry.from_dict(d)
    assert e.to_dict()["prompt_token_ids"] == [1, 2, 3]
    assert e.to_dict()["generation_token_ids"] == [4, 5]


def test_empty_generation_is_valid() -> None:
    e = TokenEntry.from_dict(minimal_entry_dict(CID, generation_token_ids=[], generation_log_probs=[]))
    assert list(e.generation_token_ids) == []


def test_integer_log_probs_and_created_at_are_numbers() -> None:
    e = TokenEntry.from_dict(minimal_entry_dict(CID, generation_log_probs=[0, -1], created_at=1001))
    assert [float(x) for x in e.generation_log_probs] == [0.0, -1.0]
    assert float(e.to_dict()["created_at"]) == 1001.0


@pytest.mark.parametrize(
    "over",
    [
        pytest.param({"cum_len": 999, "digest": "00" * 32}, id="stamps-disagree-builder-judges"),
        pytest.param({"cum_len": 0}, id="cum-len-zero"),
        pytest.param({"parent_resolution": None, "parent_call_id": "call-P"}, id="null-resolution-with-parent"),
        pytest.param({"parent_resolution": "resolved", "parent_call_id": "call-P", "prompt_is_delta": True},
                     id="delta-resolved"),
        pytest.param({"parent_resolution": "unresolved"}, id="unresolved"),
        pytest.param({"output_items": [{"type": "message"}], "token_item_index": 0}, id="index-0"),
        pytest.param({"output_items": [{"type": "a"}, {"type": "b"}], "token_item_index": 1}, id="index-last"),
        pytest.param({"routed_experts": [[1, 2], [3]]}, id="routed-experts"),
        pytest.param({"finish_reason": "length"}, id="finish-reason"),
        pytest.param({"generation_log_probs": [-1e300, -0.0]}, id="extreme-finite"),
    ],
)
def test_valid_edge_cases_are_accepted(over: dict) -> None:
    d = minimal_entry_dict(CID, **over)
    e = TokenEntry.from_dict(d)
    back = e.to_dict()
    for k, v in over.items():
        assert back[k] == v


def test_parent_resolution_status_values() -> None:
    assert {s.value for s in ParentResolutionStatus} == {"root", "resolved", "unresolved"}
    e = TokenEntry.from_dict(minimal_entry_dict(CID, parent_resolution="resolved", parent_call_id="p"))
    assert e.parent_resolution == ParentResolutionStatus.RESOLVED
    assert e.to_dict()["parent_resolution"] == "resolved"


# --------------------------------------------------------------------------- TokenEntry: round trip


def test_to_dict_emits_every_known_field_with_defaults() -> None:
    d = TokenEntry.from_dict(minimal_entry_dict(CID)).to_dict()
    assert KNOWN_ENTRY_FIELDS <= set(d), f"missing: {sorted(KNOWN_ENTRY_FIELDS - set(d))}"
    assert set(d) == KNOWN_ENTRY_FIELDS, f"unexpected: {sorted(set(d) - KNOWN_ENTRY_FIELDS)}"
    expected_defaults = {
        "schema_version": 5,
        "model": "",
        "routed_experts": None,
        "output_items": [],
        "token_item_index": None,
        "created_at": 0.0,
        "parent_resolution": None,
        "parent_call_id": None,
        "parent_resolution_reason": "",
        "cum_len": None,
        "digest": None,
        "prompt_is_delta": False,
        "prefix_requested": False,
        "prefix_supplied": False,
        "finish_reason": None,
    }
    for k, v in expected_defaults.items():
        assert d[k] == v and type(d[k]) is type(v), f"{k}: {d[k]!r} (expected default {v!r})"
    assert d["prompt_token_ids"] == [1, 2, 3]
    assert d["generation_token_ids"] == [4, 5]
    assert d["generation_log_probs"] == [-0.5, -1.5]
    json.dumps(d, allow_nan=False)  # plain JSON types only


def test_unknown_fields_round_trip() -> None:
    extra = {"x_vendor": {"nested": [1, 2, {"a": None}]}, "zz_flag": True, "record_note": "kept"}
    d = entry_dict(CID, [1, 2, 3], [4, 5], **extra)
    e = TokenEntry.from_dict(copy.deepcopy(d))
    back = e.to_dict()
    for k, v in extra.items():
        assert back[k] == v
    again = TokenEntry.from_dict(back).to_dict()
    assert again == back


def test_full_record_round_trips_exactly() -> None:
    d = entry_dict(
        CID, [10, 11, 12], [13, 14], logprobs=[-0.125, -2.5], resolution="resolved", parent="call-P",
        model="policy", created_at=12.5, output_items=[{"type": "message", "content": []}], token_item_index=0,
        parent_resolution_reason="matched", prefix_requested=True, prefix_supplied=True,
        continuation_fingerprint="fp", continuation_context_len=7, continuation_context_digest="cd",
        fingerprint_version=2, finish_reason="tool_calls", routed_experts={"layers": [1, 2]}, schema_version=6,
        prompt_is_delta=False,
    )
    back = TokenEntry.from_dict(copy.deepcopy(d)).to_dict()
    assert set(back) == KNOWN_ENTRY_FIELDS
    for k in KNOWN_ENTRY_FIELDS:
        assert back[k] == d[k], k


# --------------------------------------------------------------------------- EngineRefusalRecord


def _bad_refusal(over: dict, drop: tuple[str, ...] = ()) -> str:
    d = refusal_dict(CID, **over)
    for k in drop:
        d.pop(k)
    with pytest.raises(ValueError) as info:
        EngineRefusalRecord.from_dict(d)
    return str(info.value)


def test_refusal_defaults_and_to_dict() -> None:
    r = EngineRefusalRecord.from_dict({"rollout_id": "r1", "model_call_id": CID, "recorded_at": 5.0})
    d = r.to_dict()
    assert set(d) == KNOWN_REFUSAL_FIELDS
    assert d["schema_version"] == 1
    assert d["parent_resolution"] == "unresolved"
    assert d["parent_call_id"] is None
    assert d["code"] is None
    assert d["message"] == ""
    assert d["recorded_at"] == 5.0
    json.dumps(d, allow_nan=False)


@pytest.mark.parametrize("version", [0, 2, 3, 5])
def test_refusal_schema_version_other_than_1_is_invalid(version: int) -> None:
    msg = _bad_refusal({"schema_version": version})
    _assert_names(msg, "schema_version")
    assert str(version) in msg


def test_refusal_resolved_without_parent_is_invalid() -> None:
    msg = _bad_refusal({"resolution": "resolved", "parent": None})
    _assert_names(msg, "parent_call_id", "parent_resolution")


@pytest.mark.parametrize("resolution", ["root", "unresolved"])
def test_refusal_root_or_unresolved_with_parent_is_invalid(resolution: str) -> None:
    msg = _bad_refusal({"resolution": resolution, "parent": "call-P"})
    _assert_names(msg, "parent_call_id", "parent_resolution")


@pytest.mark.parametrize("field", ["rollout_id", "recorded_at"])
def test_refusal_missing_required_field_is_invalid(field: str) -> None:
    _assert_names(_bad_refusal({}, drop=(field,)), field)


def test_refusal_missing_call_id_is_invalid() -> None:
    d = refusal_dict(CID)
    d.pop("model_call_id")
    with pytest.raises(ValueError, match="model_call_id"):
        EngineRefusalRecord.from_dict(d)


@pytest.mark.parametrize(
    ("field", "value"),
    [("code", 5), ("recorded_at", "later"), ("parent_resolution", "maybe"), ("message", 3),
     ("parent_call_id", 7), ("rollout_id", 1), ("schema_version", "1")],
)
def test_refusal_value_of_wrong_type_is_invalid(field: str, value) -> None:
    d = refusal_dict(CID)
    d[field] = value
    if field == "parent_call_id":
        d["parent_resolution"] = "resolved"
    with pytest.raises(ValueError) as info:
        EngineRefusalRecord.from_dict(d)
    _assert_names(str(info.value), field)


@pytest.mark.parametrize("resolution", ["root", "unresolved"])
def test_refusal_valid_without_parent(resolution: str) -> None:
    r = EngineRefusalRecord.from_dict(refusal_dict(CID, resolution=resolution, code=None))
    assert r.to_dict()["parent_resolution"] == resolution


def test_refusal_unknown_fields_round_trip() -> None:
    d = refusal_dict(CID, parent="call-P", vendor_detail={"k": [1, 2]}, retry_after=3)
    back = EngineRefusalRecord.from_dict(copy.deepcopy(d)).to_dict()
    assert back == d


# --------------------------------------------------------------------------- digest


def _reference_digest(ids: list[int]) -> str:
    h = hashlib.sha256(b"nemo-gym-tokens")
    if ids:
        h.update(struct.pack(">BQ", 1, len(ids)))
        h.update(b"".join(struct.pack(">Q", t) for t in ids))
    return h.hexdigest()


GOLDEN_VECTORS = json.loads(GOLDEN.read_text(encoding="utf-8"))["vectors"]


@pytest.mark.parametrize("vector", GOLDEN_VECTORS, ids=[v["name"] for v in GOLDEN_VECTORS])
def test_golden_digest_vectors(vector: dict) -> None:
    ids = vector["token_ids"]
    assert compute_digest(ids) == vector["digest"]
    assert compute_digest(np.array(ids, dtype=np.uint64)) == vector["digest"]


def test_golden_file_has_the_expected_vectors() -> None:
    # The set must cover empty, a single zero and large (>= 2^63) ids.
    names = {v["name"] for v in GOLDEN_VECTORS}
    assert {"empty", "single zero", "large ids"} <= names
    assert any(max(v["token_ids"], default=0) >= 2**32 for v in GOLDEN_VECTORS)
    assert len(GOLDEN_VECTORS) >= 7


def test_empty_digest_is_the_domain_alone() -> None:
    assert compute_digest([]) == hashlib.sha256(b"nemo-gym-tokens").hexdigest()


@pytest.mark.parametrize("ids", [[5], [0, 0], [2**64 - 1, 1, 2**32], list(range(300, 0, -7))])
def test_digest_matches_an_independent_construction(ids: list[int]) -> None:
    d = compute_digest(ids)
    assert d == _reference_digest(ids)
    assert d == d.lower() and len(d) == 64


def test_digest_distinguishes_order_and_length() -> None:
    assert compute_digest([1, 2]) != compute_digest([2, 1])
    assert compute_digest([0]) != compute_digest([])
    assert compute_digest([0]) != compute_digest([0, 0])


def test_nan_is_not_finite_sanity() -> None:
    # guard for the parametrisation above: the values really are non-finite
    assert math.isnan(float("nan")) and math.isinf(float("inf"))


def test_digest_of_non_contiguous_and_signed_arrays() -> None:
    arr = np.arange(20, dtype=np.uint64)
    assert compute_digest(arr[::3]) == _reference_digest(list(range(0, 20, 3)))
    assert compute_digest(np.arange(5, dtype=np.int64)) == _reference_digest([0, 1, 2, 3, 4])
    big = np.array([2**64 - 1, 2**63], dtype=np.uint64)
    assert compute_digest(big) == _reference_digest([2**64 - 1, 2**63])
    assert compute_digest(big.astype(">u8")) == _reference_digest([2**64 - 1, 2**63])


def test_public_import_surface() -> None:
    import tokencap

    names = ["TokenEntry", "EngineRefusalRecord", "TokenCaptureSnapshot", "ParentResolutionStatus",
             "compute_digest", "load_snapshots", "prefix_merging", "run_builder", "BuildOutput", "BuildNotes",
             "Chain", "ChainLink", "project_chain_to_output_items", "project_main_chain_response",
             "assert_prefix_contiguity", "loss_mask", "build_rollout"]
    missing = [n for n in names if not hasattr(tokencap, n)]
    assert missing == []
