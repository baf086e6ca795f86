"""Rollouts whose output items carry token ids load as captures (docs/contract.md#token-rollouts): the mapping from
items to calls, the rollout ids, the record each snapshot carries, every error, and where
such a file loads (alone, as bytes, in a directory, in a zip)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from helpers import Conv, jsonl_bytes, snapshot_dict, zip_bytes
from rollouts_data import jsonl, rollout_record, turns_of, without_tokens

from tokencap import build_rollout, load_snapshots
from tokencap.loading import LoadError, iter_snapshots, records_for

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_data"


def one(data: bytes, name: str = "rollouts.jsonl"):
    (snap,) = load_snapshots(data, name=name)
    return snap


def test_each_token_bearing_item_is_a_call_linked_to_the_one_before() -> None:
    record = rollout_record(turns_of(3), reward=0.5)
    snap = one(jsonl([record]))
    output = record["response"]["output"]
    assert [e.model_call_id for e in snap.entries] == ["item-0000", "item-0002", "item-0004"]
    for k, entry in enumerate(snap.entries):
        item = output[[0, 2, 4][k]]
        assert isinstance(entry.prompt_token_ids, np.ndarray) and entry.prompt_token_ids.dtype == np.uint64
        assert list(entry.prompt_token_ids) == item["prompt_token_ids"]
        assert list(entry.generation_token_ids) == item["generation_token_ids"]
        assert list(entry.generation_log_probs) == item["generation_log_probs"]
        assert entry.created_at == k + 1 and entry.model == "policy"
        assert entry.cum_len is None and entry.digest is None
    first, second, last = snap.entries
    assert (first.parent_resolution.value, first.parent_call_id) == ("root", None)
    assert (second.parent_resolution.value, second.parent_call_id) == ("resolved", "item-0000")
    assert (last.parent_resolution.value, last.parent_call_id) == ("resolved", "item-0002")
    assert [e.finish_reason for e in snap.entries] == [None, None, "stop"]
    # Items after call k-1's up to this call's; the token fields removed; the call's item found by index.
    assert second.output_items == [without_tokens(output[1]), without_tokens(output[2])]
    assert second.token_item_index == 1
    assert first.output_items == [without_tokens(output[0])] and first.token_item_index == 0
    assert snap.snapshot_id == "resp_1" and not snap.incomplete and not snap.engine_refusals
    assert any("read from the output items" in note for note in snap.source_notes)


def test_the_last_call_keeps_every_item_after_it() -> None:
    record = rollout_record(turns_of(2))
    record["response"]["output"].append({"type": "message", "role": "assistant", "content": [],
                                         "routed_experts": [[1, 2]]})
    snap = one(jsonl([record]))
    assert snap.entries[-1].output_items[-1] == {"type": "message", "role": "assistant", "content": []}


@pytest.mark.parametrize(("status", "reason", "finish"), [
    ("completed", None, "stop"), ("incomplete", "max_output_tokens", "length"),
    ("incomplete", "content_filter", "content_filter"), ("incomplete", "other", "stop")])
def test_the_last_calls_finish_reason_comes_from_the_response_status(status, reason, finish) -> None:
    snap = one(jsonl([rollout_record(turns_of(2), status=status, reason=reason)]))
    assert [e.finish_reason for e in snap.entries] == [None, finish]


def test_a_missing_or_null_prompt_is_an_empty_prompt() -> None:
    record = rollout_record(turns_of(1))
    del record["response"]["output"][0]["prompt_token_ids"]
    assert one(jsonl([record])).entries[0].prompt_token_ids.size == 0
    record["response"]["output"][0]["prompt_token_ids"] = None
    assert one(jsonl([record])).entries[0].prompt_token_ids.size == 0


def test_rollout_ids_follow_the_record_then_indices_then_response_id_then_the_line() -> None:
    records = [rollout_record(turns_of(1), rollout_id="named"),
               rollout_record(turns_of(1), rollout_id=None, _ng_task_index=4, _ng_rollout_index=2),
               rollout_record(turns_of(1), rollout_id=None, response_id="resp_x"),
               rollout_record(turns_of(1), rollout_id=None, response_id="")]
    ids = [s.rollout_id for s in load_snapshots(jsonl(records), name="dir/run.jsonl")]
    assert ids == ["named", "task4-rollout2", "resp_x", "run.jsonl:4"]


def test_a_repeated_rollout_id_gets_a_suffix_and_a_note() -> None:
    records = [rollout_record(turns_of(1), rollout_id="same") for _ in range(3)]
    snaps = load_snapshots(jsonl(records), name="run.jsonl")
    assert [s.rollout_id for s in snaps] == ["same", "same#2", "same#3"]
    assert any("already read from line 1" in note and "'same#3'" in note for note in snaps[2].source_notes)


def test_a_bare_responses_object_pretty_printed_is_one_rollout() -> None:
    response = rollout_record(turns_of(2), rollout_id=None, response_id="resp_bare")["response"]
    snap = one(json.dumps(response, indent=2).encode(), "final.json")
    assert snap.rollout_id == "resp_bare" and len(snap.entries) == 2


def test_the_record_is_the_rollouts_final_response_and_its_facts() -> None:
    record = rollout_record(turns_of(3), reward=1.5, _ng_task_index=7, _ng_rollout_index=1, mask_sample=False,
                            ng_agent_observations={"source": "h", "records": [], "gaps": []})
    snap = one(jsonl([record]))
    records = records_for(snap, None)
    assert records is snap.record
    facts = records.facts_for(snap.rollout_id, single_rollout=False)
    assert (facts.reward, facts.task_index, facts.rollout_index) == (1.5, 7, 1)
    assert set(records.evidence_for(snap.rollout_id, single_rollout=False)) == {"mask_sample", "ng_agent_observations"}
    result = build_rollout(snap)  # the snapshot's own record attributes the terminal call, by tokens
    assert not result.mask_sample
    assert result.metrics["terminal_attribution"] == {"outcome": "attributed", "method": "tokens",
                                                      "call_id": "item-0004", "candidates": ["item-0004"]}
    assert snap.to_dict().keys() >= {"entries"} and "record" not in snap.to_dict()


def test_a_rollout_that_does_not_continue_is_masked_at_the_cut_item() -> None:
    snap = one(jsonl([rollout_record(turns_of(3), cuts=[2])]))
    result = build_rollout(snap)
    assert result.mask_sample and "unresolved_parent_calls" in result.mask_reasons
    assert snap.entries[2].model_call_id == "item-0004"


def test_final_responses_beside_a_rollouts_source_is_an_error() -> None:
    from tokencap.loading import load_final_responses

    data = jsonl([rollout_record(turns_of(1))])
    finals = load_final_responses(data, name="records.jsonl")
    with pytest.raises(LoadError, match=r"^records.jsonl: --final-responses given with a source of rollout records"):
        records_for(one(data), finals)


# ----------------------------------------------------------------------------- errors


def test_a_file_of_records_without_token_ids_says_why_and_names_final_responses() -> None:
    record = rollout_record(turns_of(2))
    for item in record["response"]["output"]:
        item.pop("generation_token_ids", None)
    with pytest.raises(LoadError) as caught:
        load_snapshots(jsonl([record]), name="records.jsonl")
    message = str(caught.value)
    assert message.startswith("records.jsonl, line 1: a rollout record or Responses object, not a captured call")
    assert "holds rollouts without token ids" in message and "return_token_id_information" in message
    assert "token capture" in message and "--final-responses" in message and "\n" not in message


def test_records_a_capture_delivered_are_that_captures_records_not_a_source() -> None:
    record = rollout_record(turns_of(2), _ng_token_capture={"builder": "prefix_merging"})
    with pytest.raises(LoadError, match="delivered through token capture.*--final-responses"):
        load_snapshots(jsonl([record]), name="records.jsonl")


def test_a_record_without_a_token_bearing_item_is_a_rollout_with_a_load_error() -> None:
    bare = rollout_record(turns_of(1), rollout_id="bare")
    bare["response"]["output"][0]["generation_token_ids"] = []
    good, bad = load_snapshots(jsonl([rollout_record(turns_of(1)), bare]), name="run.jsonl")
    assert good.load_error is None and bad.rollout_id == "bare" and bad.incomplete
    assert bad.load_error.startswith("run.jsonl, line 2: rollout 'bare': no output item carries generation_token_ids")


def test_a_bad_token_field_names_file_line_call_and_field() -> None:
    record = rollout_record(turns_of(2), rollout_id="bad")
    record["response"]["output"][2]["generation_log_probs"] = [-0.1]
    (snap,) = load_snapshots(jsonl([record]), name="run.jsonl")
    assert snap.load_error.startswith("run.jsonl, line 1: call 'item-0002': ")
    assert "generation_log_probs" in snap.load_error
    record["response"]["output"][0]["prompt_token_ids"] = [1, -2]
    (snap,) = load_snapshots(jsonl([record]), name="run.jsonl")
    assert snap.load_error.startswith("run.jsonl, line 1: call 'item-0000': field 'prompt_token_ids'")


def test_a_line_that_is_not_json_is_that_rollouts_error_and_the_others_load() -> None:
    data = jsonl([rollout_record(turns_of(1), rollout_id="ok")]) + b'{"response": nope\n'
    ok, broken = load_snapshots(data, name="run.jsonl")
    assert ok.load_error is None
    assert broken.rollout_id == "run.jsonl:2" and broken.load_error.startswith("run.jsonl, line 2: not valid JSON")


def test_a_bad_reward_is_that_rollouts_error() -> None:
    (snap,) = load_snapshots(jsonl([rollout_record(turns_of(1), reward="high")]), name="run.jsonl")
    assert snap.load_error == "run.jsonl, line 1: field 'reward': must be a finite number, got 'high'"


# ----------------------------------------------------------------------------- where it loads


def test_a_file_on_disk_and_its_bytes_load_the_same(tmp_path: Path) -> None:
    data = jsonl([rollout_record(turns_of(2), rollout_id=f"r{i}") for i in range(3)])
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(data)
    on_disk = [s.to_dict() for s in load_snapshots(path)]
    uploaded = [s.to_dict() for s in load_snapshots(data, name="rollouts.jsonl")]
    for snaps in (on_disk, uploaded):
        for snap in snaps:
            snap["source_notes"] = [n.split(": ", 1)[1] for n in snap["source_notes"]]
    assert on_disk == uploaded and [s["rollout_id"] for s in on_disk] == ["r0", "r1", "r2"]
    assert [s.rollout_id for s in iter_snapshots(path, rollout_id="r1")] == ["r1"]


def test_a_directory_of_only_rollouts_files_loads_them(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(jsonl([rollout_record(turns_of(1), rollout_id=f"a{i}") for i in range(2)]))
    (tmp_path / "b.json").write_bytes(json.dumps(rollout_record(turns_of(2), rollout_id="b0"), indent=1).encode())
    snaps = load_snapshots(tmp_path)
    assert [s.rollout_id for s in snaps] == ["a0", "a1", "b0"]
    assert all(s.load_error is None and s.record is not None for s in snaps)


def capture_records() -> list[dict]:
    conv = Conv("cap")
    conv.root("c1")
    conv.child("c2", "c1")
    return conv.records


def test_a_directory_that_also_holds_captures_leaves_rollouts_files_out_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "cap.tokens.jsonl").write_bytes(jsonl_bytes(capture_records()))
    (tmp_path / "records.jsonl").write_bytes(jsonl([rollout_record(turns_of(1), rollout_id="cap")]))
    (snap,) = load_snapshots(tmp_path)
    assert snap.rollout_id == "cap" and snap.record is None and snap.load_error is None
    (note,) = [n for n in snap.source_notes if "records.jsonl" in n]
    assert "also holds captures" in note and "--final-responses" in note


def test_a_zip_follows_the_directory_rule() -> None:
    rollouts = jsonl([rollout_record(turns_of(1), rollout_id="z1")])
    alone = load_snapshots(zip_bytes({"run/rollouts.jsonl": rollouts}), name="run.zip")
    assert [s.rollout_id for s in alone] == ["z1"] and alone[0].load_error is None
    snapshot = json.dumps(snapshot_dict(capture_records())).encode()
    mixed = load_snapshots(zip_bytes({"cap.json": snapshot, "rollouts.jsonl": rollouts}), name="run.zip")
    assert [s.rollout_id for s in mixed] == ["cap"]
    assert any("rollouts.jsonl" in n and "--final-responses" in n for n in mixed[0].source_notes)


def test_a_rollout_id_in_two_rollouts_files_of_a_directory_is_that_rollouts_error(tmp_path: Path) -> None:
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_bytes(jsonl([rollout_record(turns_of(1), rollout_id="same")]))
    (snap,) = load_snapshots(tmp_path)
    assert "comes from several sources (a.jsonl, b.jsonl)" in snap.load_error


# ----------------------------------------------------------------------------- memory


def _peak_while_iterating(n: int, tmp_path: Path) -> int:
    turns = turns_of(6, added=4000, generated=200)
    path = tmp_path / f"run{n}.jsonl"
    path.write_bytes(jsonl([rollout_record(turns, rollout_id=f"r{i:03d}") for i in range(n)]))
    tracemalloc.start()
    try:
        for snap in iter_snapshots(path):
            assert snap.load_error is None
            del snap
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_is_flat_in_the_number_of_rollouts(tmp_path: Path) -> None:
    small, large = _peak_while_iterating(4, tmp_path), _peak_while_iterating(24, tmp_path)
    assert large < 1.5 * small, (small, large)


def test_a_rollout_that_failed_to_load_still_has_its_files_records() -> None:
    bare = rollout_record(turns_of(1), rollout_id="bare")
    bare["response"]["output"][0]["generation_token_ids"] = []
    _, failed = load_snapshots(jsonl([rollout_record(turns_of(1)), bare]), name="run.jsonl")
    assert failed.record is not None and failed.record.for_rollout("bare", single_rollout=True) is None
    from tokencap.loading import load_final_responses

    with pytest.raises(LoadError, match="drop --final-responses"):
        records_for(failed, load_final_responses(jsonl([bare]), name="records.jsonl"))


def test_inspect_of_a_directory_names_the_rollouts_files_it_left_out(tmp_path: Path, capsys) -> None:
    from tokencap.cli import main

    (tmp_path / "cap.tokens.jsonl").write_bytes(jsonl_bytes(capture_records()))
    (tmp_path / "records.jsonl").write_bytes(jsonl([rollout_record(turns_of(1), rollout_id="cap")]))
    assert main(["inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "records.jsonl" in out and "--final-responses" in out


@pytest.mark.parametrize("value", ["12", {"ids": [1]}, [[1, 2]], [1.5]])
def test_a_generation_that_is_no_list_of_ids_is_that_calls_error_not_ignored(value) -> None:
    record = rollout_record(turns_of(2), rollout_id="odd")
    record["response"]["output"][2]["generation_token_ids"] = value
    (snap,) = load_snapshots(jsonl([record]), name="run.jsonl")
    assert snap.load_error.startswith("run.jsonl, line 1: call 'item-0002': field 'generation_token_ids'")


def big_record() -> dict:
    """A record over a MiB: its token arrays are cut out before its fields are split."""
    return rollout_record(turns_of(3, added=60_000, generated=50), rollout_id="big")


def test_a_big_record_reads_as_a_small_one_does() -> None:
    record = big_record()
    snap = one(jsonl([record]))
    output = record["response"]["output"]
    assert [list(e.prompt_token_ids) for e in snap.entries] == [output[i]["prompt_token_ids"] for i in (0, 2, 4)]
    assert snap.entries[1].output_items == [without_tokens(output[1]), without_tokens(output[2])]
    record["response"]["output"][2]["prompt_token_ids"][5] = -1
    (bad,) = load_snapshots(jsonl([record]), name="big.jsonl")
    assert bad.load_error.startswith("big.jsonl, line 1: call 'item-0002': field 'prompt_token_ids': token id at "
                                     "position 5 is -1")


def test_a_token_field_name_elsewhere_in_a_big_record_is_read_as_written() -> None:
    record = big_record()
    record["response"]["output"][1]["arguments"] = {"prompt_token_ids": [1, 2, 3]}  # not an item's token field
    snap = one(jsonl([record]))
    assert snap.entries[1].output_items[0]["arguments"] == {"prompt_token_ids": [1, 2, 3]}
    assert len(snap.entries) == 3 and snap.load_error is None
