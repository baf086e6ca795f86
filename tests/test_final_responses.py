"""docs/contract.md#attribution: reading final-response files (`load_final_responses`)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from helpers import Conv

from tokencap import FinalResponses, LoadError, TokenCaptureSnapshot, build_rollout, load_final_responses
from tokencap.loading import FinalResponses as FromLoading
from tokencap.loading import load_final_responses as from_loading
from tokencap.loading.final_responses import NO_FACTS, RecordFacts


def resp(text: str = "done", **token_fields) -> dict:
    item = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    item.update(token_fields)
    return {"id": "resp_1", "object": "response", "status": "completed", "output": [item]}


def lines(*records) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def test_the_interface_is_exported_from_both_places() -> None:
    assert FinalResponses is FromLoading and load_final_responses is from_loading


# =========================================================================== shapes


def test_a_json_object_with_response_and_rollout_id(tmp_path: Path) -> None:
    path = tmp_path / "final.json"
    path.write_text(json.dumps({"rollout_id": "r1", "reward": 1.0, "responses_create_params": {"x": 1},
                                "response": resp("hello")}, indent=2))
    finals = load_final_responses(path)
    assert finals.rollout_ids == ["r1"] and len(finals) == 1
    got = finals.for_rollout("r1", single_rollout=False)
    assert got["output"][0]["content"][0]["text"] == "hello"
    assert finals.for_rollout("r2", single_rollout=True) is None


def test_jsonl_with_one_record_a_line() -> None:
    data = lines({"rollout_id": "a", "response": resp("A")}, {"rollout_id": "b", "response": resp("B")})
    finals = load_final_responses(data, name="run.jsonl")
    assert finals.rollout_ids == ["a", "b"]
    assert finals.lines == {"a": 1, "b": 2}
    assert finals.for_rollout("b", single_rollout=False)["output"][0]["content"][0]["text"] == "B"


def test_a_bare_responses_object_applies_only_to_a_single_rollout_source() -> None:
    finals = load_final_responses(json.dumps(resp("solo")).encode())
    assert finals.rollout_ids == [] and finals.unnamed is not None and finals.unnamed_line == 1
    assert finals.for_rollout("anything", single_rollout=True) is not None
    assert finals.for_rollout("anything", single_rollout=False) is None
    assert any("single rollout" in n for n in finals.notes(["r1", "r2"]))
    assert finals.notes(["r1"]) == []


def test_a_record_without_rollout_id_is_unnamed_too() -> None:
    finals = load_final_responses(lines({"response": resp("x")}, {"rollout_id": "r9", "response": resp("y")}))
    assert finals.rollout_ids == ["r9"] and finals.unnamed_line == 1
    # A named line wins over the unnamed one for its own rollout.
    assert finals.for_rollout("r9", single_rollout=True)["output"][0]["content"][0]["text"] == "y"


def test_unknown_fields_are_ignored_everywhere() -> None:
    record = {"rollout_id": "r1", "reward": 0.5, "extra": {"deep": [1, 2]},
              "response": dict(resp("t"), metadata={"k": "v"}, usage={"input_tokens": 3})}
    record["response"]["output"][0]["annotations"] = [{"anything": True}]
    record["response"]["output"].append({"type": "web_search_call", "id": "ws", "action": {"query": "q"}})
    finals = load_final_responses(json.dumps(record).encode())
    out = finals.for_rollout("r1", single_rollout=False)["output"]
    assert [i["type"] for i in out] == ["message", "web_search_call"]


def test_unmatched_names_rollouts_not_in_the_source() -> None:
    finals = load_final_responses(lines(*({"rollout_id": r, "response": resp()} for r in ("a", "b", "c"))))
    assert finals.unmatched(["b", "z"]) == ["a", "c"]
    assert finals.unmatched(iter(["a", "b", "c"])) == []
    note = finals.notes(["b"])
    assert len(note) == 1 and "a, c" in note[0] and "not in the source" in note[0]


def test_only_the_token_item_attribution_reads_keeps_its_tokens() -> None:
    output = [
        dict(resp("first")["output"][0], prompt_token_ids=list(range(50)), generation_token_ids=[7, 8]),
        {"type": "function_call_output", "call_id": "c", "output": "x", "prompt_token_ids": [1]},
        dict(resp("last")["output"][0], prompt_token_ids=[1, 2, 3], generation_token_ids=[9, 2**64 - 1],
             generation_log_probs=[-0.1, -0.2]),
        dict(resp("after")["output"][0], generation_token_ids=[]),
    ]
    finals = load_final_responses(json.dumps({"object": "response", "output": output}).encode())
    items = finals.unnamed["output"]
    assert "prompt_token_ids" not in items[0] and "generation_token_ids" not in items[0]
    assert items[2]["prompt_token_ids"].tolist() == [1, 2, 3]
    assert items[2]["generation_token_ids"].dtype == np.uint64
    assert items[2]["generation_token_ids"].tolist() == [9, 2**64 - 1]
    assert "generation_log_probs" not in items[2]


def test_a_token_item_without_prompt_gets_an_empty_prompt() -> None:
    finals = load_final_responses(json.dumps(resp("x", generation_token_ids=[4, 5])).encode())
    assert finals.unnamed["output"][0]["prompt_token_ids"].tolist() == []


def test_final_responses_pickle() -> None:
    data = lines({"rollout_id": "a", "response": resp("A", prompt_token_ids=[1], generation_token_ids=[2])},
                 {"response": resp("B")})
    finals = load_final_responses(data, name="f.jsonl")
    back = pickle.loads(pickle.dumps(finals))
    assert back.rollout_ids == ["a"] and back.name == "f.jsonl" and back.unnamed_line == 2
    assert back.for_rollout("a", single_rollout=False)["output"][0]["generation_token_ids"].tolist() == [2]


def test_a_loaded_response_attributes_like_the_original() -> None:
    conv = Conv()
    conv.root("call-1")
    conv.child("call-2", "call-1")
    conv.child("call-3", "call-2")
    final = resp("x", prompt_token_ids=conv.prompt["call-2"], generation_token_ids=conv.gen["call-2"])
    loaded = load_final_responses(json.dumps({"rollout_id": "r1", "response": final}).encode())
    snapshot = TokenCaptureSnapshot(rollout_id="r1", entries=conv.entries())
    direct = build_rollout(snapshot, final_response=final)
    via_file = build_rollout(snapshot, final_response=loaded.for_rollout("r1", single_rollout=True))
    assert direct.metrics == via_file.metrics
    assert via_file.metrics["terminal_attribution"]["call_id"] == "call-2"


def test_a_big_file_is_read(tmp_path: Path) -> None:
    prompt = list(range(1, 1_200_001))  # ~ 9 MB of JSON: memory-mapped
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"rollout_id": "r", "response": resp("x", prompt_token_ids=prompt,
                                                                   generation_token_ids=[3])}))
    finals = load_final_responses(path)
    assert finals.for_rollout("r", single_rollout=False)["output"][0]["prompt_token_ids"].size == len(prompt)


# =========================================================================== errors


BAD = [
    pytest.param(b"", "empty", id="empty"),
    pytest.param(b"  \n\t\n", "empty", id="blank"),
    pytest.param(b'{"rollout_id": "a", "response": {"output": []}}\n{not json\n', "line 2: not valid JSON",
                 id="invalid-line"),
    pytest.param(b'{"rollout_id": "a", "response": {"output": []}}\n[1, 2]\n', "line 2: expected one JSON object",
                 id="array-line"),
    pytest.param(b'{"rollout_id": "a", "reward": 1}', "line 1: field 'response': is missing", id="no-response"),
    pytest.param(b'{"rollout_id": "a", "response": "text"}', "field 'response': must be a Responses object",
                 id="response-not-object"),
    pytest.param(b'{"rollout_id": "a", "response": {"id": "x"}}', "field 'response.output': is missing",
                 id="no-output"),
    pytest.param(b'{"rollout_id": "a", "response": {"output": {"a": 1}}}', "field 'response.output': must be a list",
                 id="output-not-list"),
    pytest.param(b'{"rollout_id": "a", "response": {"output": [1]}}', "field 'response.output': must be a list of",
                 id="item-not-object"),
    pytest.param(b'{"rollout_id": 7, "response": {"output": []}}', "field 'rollout_id': must be a string",
                 id="rollout-id-type"),
    pytest.param(b'{"object": "response", "output": [{"type": "message", "generation_token_ids": [1, -2]}]}',
                 "line 1: field 'output[0].generation_token_ids': token id at position 1 is -2", id="negative-token"),
    pytest.param(b'{"response": {"output": [{"type": "message", "generation_token_ids": [1.5]}]}}',
                 "field 'response.output[0].generation_token_ids': token id at position 0 is 1.5", id="float-token"),
    pytest.param(b'{"response": {"output": [{"type": "x"}, {"generation_token_ids": "12"}]}}',
                 "field 'response.output[1].generation_token_ids': must be a list of token ids", id="string-tokens"),
    pytest.param(b'{"response": {"output": [{"type": "m", "generation_token_ids": [1], "prompt_token_ids": [true]}]}}',
                 "field 'response.output[0].prompt_token_ids': token id at position 0 is True", id="bool-prompt"),
    pytest.param(b'{"response": {"output": [{"type": 3}]}}', "field 'response.output[0].type': must be a string",
                 id="type-not-string"),
    pytest.param(b'{"response": {"output": [{"type": "message", "content": 5}]}}',
                 "field 'response.output[0].content': must be a list of parts", id="content-type"),
    pytest.param(b'{"response": {"output": [{"type": "message", "content": [{"text": 5}]}]}}',
                 "field 'response.output[0].content[0].text': must be a string", id="text-type"),
    pytest.param(b'{"response": {"output": [{"type": "function_call", "arguments": 5}]}}',
                 "field 'response.output[0].arguments': must be a JSON string or an object", id="arguments-type"),
    pytest.param(b'{"response": {"output": [{"type": "reasoning", "summary": "x"}]}}',
                 "field 'response.output[0].summary': must be a list of parts", id="summary-type"),
    pytest.param(lines({"rollout_id": "a", "response": {"output": []}}, {"rollout_id": "a", "response": {"output": []}}),
                 "line 2: field 'rollout_id': rollout 'a' already has a final response (line 1)", id="duplicate"),
    pytest.param(lines({"response": {"output": []}}, {"object": "response", "output": []}),
                 "line 2: field 'rollout_id' is missing, and line 1", id="two-unnamed"),
    pytest.param(b'{"object": "not-a-response", "output": []}', "field 'response': is missing", id="other-object"),
]


@pytest.mark.parametrize(("data", "message"), BAD)
def test_a_malformed_file_names_file_line_and_field(data: bytes, message: str) -> None:
    with pytest.raises(LoadError) as info:
        load_final_responses(data, name="finals.jsonl")
    text = str(info.value)
    assert text.startswith("finals.jsonl"), text
    assert message in text, text


def test_the_line_is_that_of_the_record(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"\n\n" + lines({"rollout_id": "a", "response": {"output": []}},
                                     {"rollout_id": "b", "response": {"output": [{"type": 1}]}}))
    with pytest.raises(LoadError, match=r"f\.jsonl, line 4: field 'response\.output\[0\]\.type'"):
        load_final_responses(path)


def test_a_pretty_printed_document_names_its_first_line() -> None:
    data = b"\n\n" + json.dumps({"rollout_id": "a", "response": {"output": 3}}, indent=2).encode()
    with pytest.raises(LoadError, match=r"x\.json, line 3: field 'response\.output'"):
        load_final_responses(data, name="x.json")


def test_a_missing_file_or_a_directory(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="no such file"):
        load_final_responses(tmp_path / "nope.json")
    with pytest.raises(LoadError, match="is a directory"):
        load_final_responses(tmp_path)


# =========================================================================== facts of rollout records (docs/contract.md#scan-rollout-records)


def test_reward_and_indices_are_kept_from_rollout_records() -> None:
    data = lines(
        {"rollout_id": "a", "reward": 1, "_ng_task_index": 7, "_ng_rollout_index": 2, "task_index": 99,
         "rollout_index": 98, "response": resp("A")},
        {"rollout_id": "b", "reward": -0.25, "task_index": 3, "rollout_index": 0, "response": resp("B")},
        {"rollout_id": "c", "response": resp("C")},
        {"rollout_id": "d", "_ng_task_index": None, "task_index": 4, "response": resp("D")},
    )
    finals = load_final_responses(data, name="records.jsonl")
    assert finals.facts_for("a", single_rollout=False) == RecordFacts(1.0, 7, 2)  # _ng_ wins over the plain names
    assert isinstance(finals.facts_for("a", single_rollout=False).reward, float)
    assert finals.facts_for("b", single_rollout=False) == RecordFacts(-0.25, 3, 0)
    assert finals.facts_for("c", single_rollout=False) == NO_FACTS
    assert finals.facts_for("d", single_rollout=False) == RecordFacts(None, 4, None)  # null: the next name
    assert finals.facts_for("unknown", single_rollout=True) == NO_FACTS


def test_a_string_task_id_is_a_note_never_an_index() -> None:
    data = lines({"rollout_id": "a", "task_id": "swe-1234", "reward": 0.0, "response": resp("A")})
    facts = load_final_responses(data, name="records.jsonl").facts_for("a", single_rollout=False)
    assert facts.task_index is None and facts.reward == 0.0
    assert facts.note is not None and "records.jsonl, line 1" in facts.note and "'swe-1234'" in facts.note


def test_the_facts_of_an_unnamed_response_apply_like_the_response() -> None:
    finals = load_final_responses(json.dumps({"reward": 0.5, "_ng_task_index": 1, "response": resp()}).encode())
    assert finals.facts_for("r", single_rollout=True) == RecordFacts(0.5, 1, None)
    assert finals.facts_for("r", single_rollout=False) == NO_FACTS


@pytest.mark.parametrize(("field", "value", "shown"), [
    ("reward", "high", "'high'"), ("reward", True, "True"), ("reward", None, "None"), ("reward", [1], "a list"),
    ("_ng_task_index", 1.5, "1.5"), ("_ng_task_index", -1, "-1"),
    ("rollout_index", "3", "'3'"), ("_ng_rollout_index", False, "False"),
])
def test_a_bad_reward_or_index_is_one_line_naming_file_line_and_field(field, value, shown) -> None:
    good = {"rollout_id": "a", "response": resp()}
    data = lines(good | {"rollout_id": "z"}, good | {field: value})
    with pytest.raises(LoadError) as err:
        load_final_responses(data, name="records.jsonl")
    message = str(err.value)
    assert message.startswith(f"records.jsonl, line 2: field '{field}': must be ")
    assert shown in message and "\n" not in message


def test_a_reward_too_big_for_a_float_is_an_error_too() -> None:
    data = b'{"rollout_id": "a", "reward": 1e400, "response": ' + json.dumps(resp()).encode() + b"}\n"
    with pytest.raises(LoadError, match=r"^records.jsonl, line 1: field 'reward': .*out of range"):
        load_final_responses(data, name="records.jsonl")


def test_facts_pickle_with_the_responses() -> None:
    data = lines({"rollout_id": "a", "reward": 2.5, "_ng_task_index": 1, "_ng_rollout_index": 0, "task_id": "t",
                  "response": resp()})
    finals = load_final_responses(data, name="f.jsonl")
    back = pickle.loads(pickle.dumps(finals))
    assert back.facts == finals.facts and back.facts_for("a", single_rollout=False).reward == 2.5


@pytest.mark.parametrize("record", [
    b'{"rollout_id": "r1", "response": {"output": %s}}',  # one whole object
    b'{"rollout_id": "r1", "reward": %s}',
])
@pytest.mark.parametrize("lines", [1, 2])
def test_json_nested_too_deeply_is_a_load_error_not_a_crash(record: bytes, lines: int) -> None:
    # The whole-file decode runs before the line-by-line one; a file of one deep object
    # used to escape as a RecursionError traceback from there.
    deep = b"[" * 5000 + b"]" * 5000
    data = b"\n".join([record % deep] * lines) + b"\n"
    with pytest.raises(LoadError, match="nested too deeply"):
        load_final_responses(data)


@pytest.mark.parametrize("name, what", [("length_stop.json", "a capture snapshot (it has 'entries')"),
                                        ("multi_rollout_entries.jsonl", "a captured call (a token entry")])
def test_a_capture_given_as_rollout_records_is_named_for_what_it_is(name, what):
    path = Path(__file__).resolve().parent.parent / "sample_data" / name
    with pytest.raises(LoadError) as caught:
        load_final_responses(path)
    message = str(caught.value)
    assert message.startswith(f"{path}, line 1: field 'response': is missing: this is {what}")
    assert "not a rollout record" in message and "Open captures as the run instead" in message


def test_a_record_without_response_that_is_no_capture_keeps_the_general_message(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"rollout_id": "r1", "reward": 1.0}\n')
    with pytest.raises(LoadError, match="expected a record with 'response'"):
        load_final_responses(path)
