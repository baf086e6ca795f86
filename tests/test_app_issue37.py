"""Issue 37's app fixes that AppTest and the views can check without a browser: rollout records that are
not used say so (items 9), and a record of another model applied to a rollout is noted, in the app and
by `tokencap inspect` alike."""

from __future__ import annotations

import json

from test_app import SAMPLES, open_app
from test_app_run import make_run, run_app

from tokencap import build_rollout, cli, load_snapshots
from tokencap.run import scan_table
from tokencap.views.run import records as rr

RECORDS = SAMPLES / "rollout_records" / "run.jsonl"


def _first_record() -> dict:
    return json.loads(RECORDS.read_text().split("\n")[0])


def _records(path, *records: dict):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_records_that_name_no_rollout_of_the_run_are_said_to_be_unused(monkeypatch, tmp_path):
    run = make_run(tmp_path)
    record = {**_first_record(), "rollout_id": "no-such-rollout"}
    records = _records(tmp_path / "records.jsonl", record)
    table = scan_table(run, workers=1, final_responses=str(records))
    assert rr.records_applied(table) == 0
    at = run_app(monkeypatch, str(run), "--final-responses", str(records))
    header = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "with the rollout records" in header
    assert "not used: no record in records.jsonl names a rollout of this run" in header
    hints = [i.value.replace("\\", "") for i in at.info if "rollout records" in i.value]
    assert hints and all("--final-responses" not in h for h in hints), hints
    assert any("name no rollout of this run" in h for h in hints)


def test_records_words_count_the_rollouts_they_apply_to():
    assert rr.records_use_words("r.jsonl", 5, 5) == ""
    assert rr.records_use_words("r.jsonl", 2, 5) == " (they apply to 2 of 5 rollouts; the others have no record)"
    assert rr.records_use_words("r.jsonl", 0, 5).startswith("; not used: no record in r.jsonl names a rollout")


def _unnamed_of_another_model(tmp_path):
    record = _first_record()
    record.pop("rollout_id")
    record["response"]["model"] = "Qwen/Qwen3-0.6B"
    return _records(tmp_path / "unnamed.jsonl", record)


def test_a_record_of_another_model_applied_to_a_single_rollout_is_noted(monkeypatch, tmp_path, capsys):
    records = _unnamed_of_another_model(tmp_path)
    capture = SAMPLES / "ambiguous_final_answer.json"
    from tokencap.loading import load_final_responses

    finals = load_final_responses(records)
    (snapshot,) = load_snapshots(capture)
    result = build_rollout(snapshot, final_response=finals.for_rollout(snapshot.rollout_id, single_rollout=True))
    (note,) = [n for n in result.notes if "model" in n]
    assert "names model 'Qwen/Qwen3-0.6B', but its calls were served by 'policy'" in note
    same = dict(finals.unnamed, model="policy")
    assert not [n for n in build_rollout(snapshot, final_response=same).notes if "model" in n]
    # The command line warns with the same words.
    assert cli.main(["inspect", str(capture), "--final-responses", str(records)]) == 0
    assert "names model 'Qwen/Qwen3-0.6B'" in capsys.readouterr().err
    # The Rollout page says it under the banner.
    at = open_app(monkeypatch, str(capture), "--final-responses", str(records))
    warnings = [w.value.replace("\\", "") for w in at.warning]
    assert any("The rollout record applied to ambiguous-final-answer names model 'Qwen/Qwen3-0.6B'" in w
               for w in warnings), warnings
