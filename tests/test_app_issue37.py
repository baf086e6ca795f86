"""Issue 37's app fixes that AppTest and the views can check without a browser: rollout records that are
not used say so (items 9), and a record of another model applied to a rollout is noted, in the app and
by `tokencap inspect` alike."""

from __future__ import annotations

import json

from helpers_app import SAMPLES, open_app, run_app
from helpers_rollouts import make_run

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
    assert rr.records_use_words("r.jsonl", 2, 5) == " (2 of 5 rollouts have a record)"
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


def test_keys_read_as_words_with_the_key_on_hover_and_counts_agree_in_number():
    """Issue 37, item 14: no snake_case key as a label (the cause and link charts, the tree's break mark, the
    Verdicts tab's notes), the key kept in the tooltip; "1 token", never "1 tokens"; no "claimed parent None"."""
    import numpy as np

    from tokencap.diagnosis import CAUSES
    from tokencap.run.rows import LINK_NOTES
    from tokencap.views import RolloutView
    from tokencap.views.formatting import count
    from tokencap.views.rollout import culprits as cv
    from tokencap.views.rollout import diff as df
    from tokencap.views.rollout import tree as tv
    from tokencap.views.run import charts as rc
    from tokencap.views.run.bars import cause_bars, link_bars
    from tokencap.views.run.frame import run_frame

    table = scan_table(SAMPLES / "run", workers=1)
    frame = run_frame(table)
    keep = np.ones(len(frame), dtype=bool)
    for bars, keys in ((cause_bars(frame, keep), CAUSES), (link_bars(frame, keep), LINK_NOTES)):
        assert not [lab for lab in bars.labels if "_" in lab], bars.labels
        assert all(f"(key: {k})" in h for k, h in zip(keys, bars.hover))
    assert "new context" in cause_bars(frame, keep).labels
    view = RolloutView(load_snapshots(SAMPLES / "run" / "task0265-rollout1-attempt0.tokens.jsonl")[0])
    notes = [n.note for n in tv.tree_of(view).nodes if "↯" in n.note]
    assert notes and not [n for n in notes if "link intact" in n or "_" in n.split("↯")[-1]], notes
    assert any(n.endswith("↯ unrecorded link (tokens match)") for n in notes)
    from tokencap.diagnosis import HINTS

    hovers = [n.hover for n in tv.tree_of(view).nodes if "↯" in n.note]
    assert sum(HINTS["link_intact"] in h and "cause unrecorded link (tokens match) (key: link_intact)" in h
               for h in hovers) == 7 and not [h for h in hovers if "…" in h], hovers[:1]
    assert count(1, "token") == "1 token" and count(2, "rollout") == "2 rollouts" and count(1, "call") == "1 call"
    one = RolloutView(load_snapshots(SAMPLES / "length_stop.json")[0])
    assert df.SequenceDiff(1, 1, 1, [], (0, 1), np.zeros(1), np.zeros(1), None, None).summary() == \
        "The delivered sequences are identical (1 token)."
    assert df.compare(one, one).sequence.summary().endswith("tokens).")
    assert cv._claimed(None) == "claimed parent (none recorded)"
    spec = rc.bar_spec(cause_bars(frame[:1], keep[:1]))
    assert "1 rollouts" not in str(spec)


def test_the_tokenizer_label_names_a_file_only_when_one_is_loaded(monkeypatch, tmp_path):
    """Issue 37, item 13: the sidebar's tokenizer reads "tokenizer.json" only when one is in use."""
    from tokencap.services import rollout_sources as src

    assert src.tokenizer_words(None, None).startswith("None loaded: token ids are shown as numbers")
    assert src.tokenizer_words("tok.json", None) == "In use: tok.json (uploaded)."
    at = open_app(monkeypatch, str(SAMPLES / "length_stop.json"))  # sample data: the bundled tokenizer
    said = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "In use: sample_data/tokenizer.json, bundled with the sample data" in said
    other = tmp_path / "x.json"
    other.write_bytes((SAMPLES / "length_stop.json").read_bytes())
    at = open_app(monkeypatch, str(other))
    said = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "None loaded: token ids are shown as numbers" in said and "In use" not in said
    assert not [u for u in at.get("file_uploader") if "tokenizer.json" in u.proto.label]


def test_a_copy_of_a_sample_opened_first_leaves_the_sample_its_bundled_tokenizer(monkeypatch, tmp_path):
    """Loaded sources are cached by content and name: a copy of a sample under the same name, opened first from
    elsewhere, must not make the sample itself look like outside data (no bundled tokenizer)."""
    copy = tmp_path / "length_stop.json"
    copy.write_bytes((SAMPLES / "length_stop.json").read_bytes())
    at = open_app(monkeypatch, str(copy))
    said = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "None loaded: token ids are shown as numbers" in said
    at = open_app(monkeypatch, str(SAMPLES / "length_stop.json"))
    said = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "In use: sample_data/tokenizer.json, bundled with the sample data" in said


def test_the_sidebar_s_rollout_link_from_the_run_page_opens_the_run_s_first_row(monkeypatch):
    """Issue 37, item 13: from the Run page, the sidebar's Rollout link opens a rollout of the run shown (its
    table's first row, with its place in the run), not an unrelated bundled sample; closing it shows them."""
    at = run_app(monkeypatch)
    first = at.session_state["run_first_row"]
    origin, frame, row, _ = first
    expected = str(frame["rollout_id"].iloc[row])
    at.switch_page("tokencap/app/rollout/rollout.py")
    at.run()
    assert not at.exception, at.exception
    heading = next(m.value for m in at.markdown if m.value.startswith("### "))
    assert heading.replace("\\", "") == f"### {expected}"
    assert any("Rollout **1 of" in m.value for m in at.markdown)


def test_a_failed_upload_leaves_no_earlier_sample_in_the_url(monkeypatch):
    """Issue 37, item 13: a file that fails to load is shown with a URL naming nothing else."""
    at = open_app(monkeypatch, query={"src": "sample:reasoning_stripped_by_template.json"})
    assert at.query_params.get("src") == "sample:reasoning_stripped_by_template.json"
    at.file_uploader(key="uploader").set_value([("bad.json", b"garbage", "application/json")])
    at.run()
    assert any("Could not load bad.json" in e.value.replace("\\", "") for e in at.error)
    assert "src" not in at.query_params and "rollout" not in at.query_params
