"""Rollouts whose output items carry token ids on the Run page's views (docs/contract.md#scan-token-source, #token-rollouts): where the app opens
such a file, and NeMo RL's contiguity in the frame, its filter, tiles and table column."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from helpers_rollouts import ROLLOUTS, rollouts_file
from rollouts_data import rollout_record, turns_of

from tokencap.run import scan_table
from tokencap.views.run import data as rd
from tokencap.views.run import rollouts as ro
from tokencap.views.run.filters import RunFilter, filter_masks, passing
from tokencap.views.run.frame import run_frame
from tokencap.views.run.summary import run_metrics

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"


def test_a_rollouts_file_of_several_records_opens_as_a_run_and_one_record_as_a_rollout(tmp_path):
    assert ro.opens_as_run(rollouts_file(tmp_path / "many.jsonl", 3))
    assert not ro.opens_as_run(rollouts_file(tmp_path / "one.jsonl", 1))
    pretty = tmp_path / "pretty.json"  # one record spread over lines is one rollout
    pretty.write_text(json.dumps(rollout_record(turns_of(2), rollout_id="p"), indent=2))
    assert not ro.opens_as_run(pretty)
    assert ro.opens_as_run(ROLLOUTS)
    # Everything else as before: a directory and a table open the Run page, a capture file the Rollout page.
    assert ro.opens_as_run(SAMPLES / "run") and ro.opens_as_run(tmp_path / "t.parquet")
    assert not ro.opens_as_run(SAMPLES / "multi_rollout_entries.jsonl")
    assert not ro.opens_as_run(SAMPLES / "length_stop.json")


def test_the_record_count_is_read_again_when_the_file_changes(tmp_path):
    path = rollouts_file(tmp_path / "r.jsonl", 1)
    assert not ro.opens_as_run(path)
    rollouts_file(path, 2)
    assert ro.opens_as_run(path)


def test_contiguity_follows_the_scan_table_columns(tmp_path):
    table = scan_table(rollouts_file(tmp_path / "r.jsonl", 5, cut={1, 3}), workers=1)
    frame = run_frame(table)
    assert frame["contiguity"].astype(str).tolist() == ["contiguous", "not_contiguous"] * 2 + ["contiguous"]
    assert ro.has_items(frame) and ro.counts(frame) == (3, 2)
    # A capture's rollouts, and a table from before docs/contract.md#scan-token-source, have none.
    capture = run_frame(scan_table(SAMPLES / "capture_store", workers=1))
    assert capture["contiguity"].astype(str).tolist() == ["capture"] * len(capture) and not ro.has_items(capture)
    old = table.drop_columns(["tokens_from", "contiguous"])
    assert set(ro.contiguity_codes(old)) == {ro.CONTIGUITY.index("capture")}


def test_the_contiguity_filter_keeps_its_rows_and_round_trips_the_url(tmp_path):
    frame = run_frame(scan_table(rollouts_file(tmp_path / "r.jsonl", 5, cut={1, 3}), workers=1))
    flt = RunFilter(contiguous="not_contiguous")
    assert flt.to_params() == {"run_contig": "not_contiguous"}
    assert RunFilter.from_params(flt.to_params()) == flt
    assert RunFilter(contiguous="bogus").contiguous == ""
    kept = passing(frame, filter_masks(frame, flt))
    assert frame["rollout_id"][kept].tolist() == ["r1", "r3"]
    assert flt.describe() == [("contiguous", "NeMo RL contiguity: not contiguous")]
    assert flt.toggle("contiguous", "not_contiguous").contiguous == ""
    assert RunFilter().toggle("contiguous", "contiguous").contiguous == "contiguous"


def test_tiles_and_table_column_only_for_a_run_holding_such_rollouts(tmp_path):
    frame = run_frame(scan_table(rollouts_file(tmp_path / "r.jsonl", 5, cut={1, 3}), workers=1))
    tiles = {m.label: m for m in run_metrics(frame)}
    assert tiles["contiguous"].value == "3" and tiles["not contiguous"].value == "2"
    assert tiles["not contiguous"].share == "40%" and "NeMo RL would stop" in tiles["not contiguous"].help
    shown = rd.table_frame(frame, np.arange(len(frame)))
    assert shown["contiguous"].tolist() == ["yes", "no", "yes", "no", "yes"]
    assert list(shown.columns)[-1] == "contiguous"  # last: the columns before it keep their fixed widths
    capture = run_frame(scan_table(SAMPLES / "capture_store", workers=1))
    assert "contiguous" not in {m.label for m in run_metrics(capture)}
    assert "contiguous" not in rd.table_frame(capture, np.arange(len(capture))).columns


def test_the_bundled_rollouts_decode_with_qwen3_s_vocabulary():
    from tokencap.services.rollout_sources import default_tokenizer_path

    assert default_tokenizer_path(REPO, None, [str(ROLLOUTS)]) == REPO / "sample_data" / "qwen3" / "tokenizer.json"
    assert default_tokenizer_path(REPO, None, [str(SAMPLES / "length_stop.json")]) == SAMPLES / "tokenizer.json"
    assert default_tokenizer_path(REPO, None, [str(ROLLOUTS), str(SAMPLES / "length_stop.json")]) == \
        SAMPLES / "tokenizer.json"
    assert default_tokenizer_path(REPO, "/x/tok.json", [str(ROLLOUTS)]) == Path("/x/tok.json")


def test_the_bundled_rollouts_are_one_scenario_of_the_rollout_page_named_by_their_file():
    from tokencap.services import rollout_sources as src

    scenarios = {s.name: s for s in src.sample_scenarios(SAMPLES)}
    assert "rollouts" not in scenarios and "qwen3" not in scenarios
    rollouts = scenarios["rollouts/qwen3_rollouts.jsonl"]
    assert rollouts.path == ROLLOUTS and rollouts.label == "qwen3 rollouts (token ids on output items, 36 rollouts)"
    declared = json.loads((ROLLOUTS.parent / "expected.json.txt").read_text())["rollouts"]
    trainable = sum(not r["mask_sample"] for r in declared.values())
    assert rollouts.expectation.startswith(f"{trainable} contiguous (trainable); {36 - trainable} that NeMo RL would "
                                           "stop on")
    assert "tokencap app sample_data/rollouts/qwen3_rollouts.jsonl" in rollouts.situation


def test_uploads_that_are_runs_by_themselves(tmp_path):
    many = rollouts_file(tmp_path / "many.jsonl", 3).read_bytes()
    one = rollouts_file(tmp_path / "one.jsonl", 1).read_bytes()
    capture = (SAMPLES / "multi_rollout_entries.jsonl").read_bytes()
    assert ro.run_uploads([("m.jsonl", many), ("o.jsonl", one), ("c.jsonl", capture), ("z.zip", b"PK\x03\x04")]) == \
        [("m.jsonl", many)]
