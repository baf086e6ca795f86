"""docs/contract.md#projection: the payloads a caller receives are JSON-native; docs/contract.md#digest: digests take integers only."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import Conv, linear_chain

from tokencap import (
    TokenCaptureSnapshot,
    TokenEntry,
    build_rollout,
    compute_digest,
    prefix_merging,
    project_chain_to_output_items,
    project_main_chain_response,
)
from tokencap.export import response_bytes, results_bytes
from tokencap.projection import json_native

JSON_TYPES = (dict, list, str, int, float, bool, type(None))


def assert_native(value, path="$") -> None:
    assert type(value) in JSON_TYPES, f"{path}: {type(value).__name__}"
    if isinstance(value, dict):
        for k, v in value.items():
            assert type(k) is str, f"{path}: key {k!r}"
            assert_native(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            assert_native(v, f"{path}[{i}]")


def conv_with_extras() -> Conv:
    conv = linear_chain(3)
    conv.child("call-0004", "call-0003", output_items=[
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
        {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c1"}], token_item_index=1,
        routed_experts=[[1, 2], [3, 4], [5, 6]])
    return conv


def test_json_dumps_works_on_every_public_payload() -> None:
    conv = conv_with_extras()
    out = prefix_merging(conv.entries())
    items = project_chain_to_output_items(out.main)
    response = project_main_chain_response("r1", out, model="m")
    result = build_rollout(TokenCaptureSnapshot(rollout_id="r1", entries=conv.entries()))
    for payload in (items, response, result.rebuilt_response, result.summary()):
        json.dumps(payload)
        assert_native(payload)


def test_token_fields_equal_plain_lists() -> None:
    conv = linear_chain(3)
    response = project_main_chain_response("r1", prefix_merging(conv.entries()))
    tokens = [i for i in response["output"] if "generation_token_ids" in i]
    assert [i["prompt_token_ids"] for i in tokens] == [conv.prompt[c] for c in sorted(conv.prompt)]
    assert [i["generation_token_ids"] for i in tokens] == [conv.gen[c] for c in sorted(conv.gen)]
    assert all(type(x) is float for i in tokens for x in i["generation_log_probs"])
    assert response["usage"] == {"input_tokens": len(conv.prompt["call-0001"]),
                                 "output_tokens": sum(len(g) for g in conv.gen.values())}


def test_big_token_ids_survive_as_python_ints() -> None:
    conv = Conv()
    conv.root("call-1", prompt=[2**64 - 1, 2**63], gen=[0, 2**64 - 2])
    response = project_main_chain_response("r1", prefix_merging(conv.entries()))
    item = response["output"][0]
    assert item["prompt_token_ids"] == [2**64 - 1, 2**63] and item["generation_token_ids"] == [0, 2**64 - 2]
    assert json.loads(json.dumps(response)) == response


def test_each_running_prompt_is_its_own_list() -> None:
    response = project_main_chain_response("r1", prefix_merging(linear_chain(3).entries()))
    prompts = [i["prompt_token_ids"] for i in response["output"] if "prompt_token_ids" in i]
    before = [list(p) for p in prompts]
    prompts[0].append(99)
    prompts[1][0] = -1
    assert prompts[2] == before[2]


def test_the_payload_never_aliases_a_record() -> None:
    conv = conv_with_extras()
    entries = conv.entries()
    response = project_main_chain_response("r1", prefix_merging(entries))
    carrier = next(i for i in response["output"] if "routed_experts" in i)
    carrier["routed_experts"][0][0] = 999
    carrier["name"] = "changed"
    last = next(e for e in entries if e.model_call_id == "call-0004")
    assert last.routed_experts == [[1, 2], [3, 4], [5, 6]] and last.output_items[1]["name"] == "f"


def test_numpy_values_in_records_become_json_types() -> None:
    conv = linear_chain(1)
    record = dict(conv.records[0])
    record["routed_experts"] = np.arange(6, dtype=np.int32).reshape(3, 2)
    record["output_items"] = [{"type": "message", "role": "assistant", "content": [],
                               "score": np.float32(0.5), "tags": ("a", "b")}]
    out = prefix_merging([TokenEntry.from_dict(record)])
    response = project_main_chain_response("r1", out)
    assert_native(response)
    item = response["output"][0]
    assert item["routed_experts"] == [[0, 1], [2, 3], [4, 5]] and item["score"] == 0.5 and item["tags"] == ["a", "b"]


def test_rebuilt_response_is_made_once_and_matches_the_writer() -> None:
    result = build_rollout(TokenCaptureSnapshot(rollout_id="r1", entries=conv_with_extras().entries()))
    assert result.rebuilt_response is result.rebuilt_response
    assert json.loads(response_bytes(result.payload)) == result.rebuilt_response
    line = json.loads(results_bytes([result], jsonl=False))
    assert line["rebuilt_response"] == result.rebuilt_response
    assert line == json.loads(json.dumps(result.summary()))


def test_the_writer_streams_the_array_payload_without_building_the_native_one() -> None:
    result = build_rollout(TokenCaptureSnapshot(rollout_id="r1", entries=linear_chain(4).entries()))
    results_bytes([result], jsonl=False)
    assert "rebuilt_response" not in vars(result)  # the cached property was never computed
    payload_prompt = next(i for i in result.payload["output"] if "prompt_token_ids" in i)["prompt_token_ids"]
    assert isinstance(payload_prompt, np.ndarray)


def test_json_native_converts_prefix_views_of_one_buffer() -> None:
    base = np.arange(10, dtype=np.uint64)
    payload = {"output": [{"prompt_token_ids": base[:3]}, {"prompt_token_ids": base[:7]},
                          {"prompt_token_ids": base[2:5]}], "n": np.int64(3)}
    native = json_native(payload)
    assert native == {"output": [{"prompt_token_ids": [0, 1, 2]}, {"prompt_token_ids": list(range(7))},
                                 {"prompt_token_ids": [2, 3, 4]}], "n": 3}
    assert_native(native)


# =========================================================================== strict digests (docs/contract.md#digest)


@pytest.mark.parametrize(("ids", "position", "shown"), [
    ([1.5], 0, "1.5"),
    (["1"], 0, "'1'"),
    ([-1], 0, "-1"),
    ([3, True], 1, "True"),
    ([3, 4, 2**64], 2, str(2**64)),
    ([1, None], 1, "None"),
    ([7, np.float64(2.0)], 1, "2.0"),
    ([np.bool_(True)], 0, "True"),
    (np.array([1.0, 2.0]), 0, "1.0"),
    (np.array([4, -3], dtype=np.int64), 1, "-3"),
    (np.array([True]), 0, "True"),
    (np.array([5, "x"], dtype=object), 1, "'x'"),
])
def test_digest_rejects_anything_but_integers_in_range(ids, position: int, shown: str) -> None:
    with pytest.raises(ValueError) as info:
        compute_digest(ids)
    text = str(info.value)
    assert f"position {position} is {shown}" in text, text


def test_digest_rejects_strings_and_nested_arrays() -> None:
    with pytest.raises(ValueError):
        compute_digest("12")
    with pytest.raises(ValueError, match="flat"):
        compute_digest(np.zeros((2, 2), dtype=np.uint64))


def test_digest_accepts_integers_of_every_kind_and_nothing_is_coerced() -> None:
    plain = compute_digest([0, 5, 2**64 - 1])
    assert compute_digest([np.int8(0), np.uint16(5), np.uint64(2**64 - 1)]) == plain
    assert compute_digest(np.array([0, 5, 2**64 - 1], dtype=np.uint64)) == plain
    assert compute_digest(np.array([0, 5], dtype=np.int32)) == compute_digest([0, 5])
    assert compute_digest(iter([0, 5])) == compute_digest((0, 5))
    assert compute_digest(np.array([], dtype=np.float64)) == compute_digest([])
