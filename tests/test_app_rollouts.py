"""Rollouts whose output items carry token ids in the app (AppTest): a file of several records opens as a
run, with NeMo RL's contiguity in its tiles, filter and table; one record opens on the Rollout page, whose
calls are named by their items and whose banner speaks the trainer's language."""

from __future__ import annotations

import re
from pathlib import Path

from helpers_app import RUN_PAGE, headings, open_app, pick_call, rerun, run_app, run_table, select_row, shown_count
from helpers_rollouts import ROLLOUTS, culprit_labels, rollouts_file, upload_run

from tokencap.loading import load_snapshots
from tokencap.run import scan_table


def tiles(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_a_rollouts_file_opens_as_a_run_with_contiguity_in_tiles_filter_and_table(monkeypatch):
    table = scan_table(ROLLOUTS, workers=1)
    split = table.column("contiguous").to_pylist().count(False)
    at = run_app(monkeypatch, str(ROLLOUTS))
    assert headings(at)[0].startswith("Run")
    assert shown_count(at) == (36, 36)
    assert tiles(at)["contiguous"] == str(36 - split) and tiles(at)["not contiguous"] == str(split)
    assert run_table(at).value["contiguous"].value_counts().to_dict() == {"no": split, "yes": 36 - split}
    at.segmented_control(key="run_w_contiguous").set_value("not_contiguous")
    rerun(at)
    assert shown_count(at) == (split, 36)
    assert at.query_params["run_contig"] == "not_contiguous"
    assert set(run_table(at).value["contiguous"]) == {"no"}
    first = run_table(at).value["rollout"].iat[0]
    select_row(at, 0)  # a broken rollout opens on the Rollout page
    assert headings(at)[0] == first.replace("-", "\\-")


def test_an_uploaded_rollouts_file_is_a_run(monkeypatch, tmp_path):
    at = run_app(monkeypatch)
    upload_run(at, ("rollouts.jsonl", rollouts_file(tmp_path / "r.jsonl", 4, cut={2}).read_bytes()))
    assert shown_count(at) == (4, 4)
    assert tiles(at)["not contiguous"] == "1"
    shown = run_table(at).value
    assert shown["contiguous"].tolist() == ["yes", "yes", "no", "yes"]
    select_row(at, 2)
    assert headings(at)[0] == "r2"


def test_a_rollouts_file_of_one_record_opens_on_the_rollout_page(monkeypatch, tmp_path):
    at = run_app(monkeypatch, str(rollouts_file(tmp_path / "one.jsonl", 1)))
    assert headings(at) == ["r0"]
    at.switch_page(RUN_PAGE)  # the Run page still scans it, a run of one
    rerun(at)
    assert shown_count(at) == (1, 1)


# --------------------------------------------------------------------------- the Rollout page

QWEN3 = ROLLOUTS.parent.parent / "qwen3" / "tokenizer.json"


def one_rollout(tmp_path: Path, rollout_id: str) -> Path:
    """The bundled record of ``rollout_id`` alone in a file (one record: it opens on the Rollout page)."""
    ids = [s.rollout_id for s in load_snapshots(ROLLOUTS)]
    line = ROLLOUTS.read_bytes().splitlines()[ids.index(rollout_id)]
    path = tmp_path / f"{rollout_id}.jsonl"
    path.write_bytes(line + b"\n")
    return path


def test_the_rollout_page_names_calls_by_their_items_with_each_item_s_text(monkeypatch, tmp_path):

    at = open_app(monkeypatch, str(one_rollout(tmp_path, "task0-rollout2")), "--tokenizer", str(QWEN3))
    pick = next(s for s in at.selectbox if s.key.startswith("pick:"))
    assert pick.options[0].startswith("item-0002 — ") and " · function_call: search_code(" in pick.options[0]
    at.session_state["detail_open"] = {"items": True}
    pick_call(at, "call:item-0021")
    # The break's detail says what its culprit in the banner says.
    assert any(w.value.replace("\\", "").startswith("NeMo RL would stop on this rollout: item-0021's prompt does not "
                                                     "continue item-0017;") for w in at.warning)
    captions = [c.value.replace("\\", "") for c in at.caption]  # Markdown-escaped capture text
    assert any(c.startswith("Read from the rollout record's output item item-0021 (function_call: apply_patch(")
               for c in captions)
    items = [c for c in captions if re.match(r"item-\d{4} · ", c)]
    assert items == ["item-0018 · message (user)", "item-0019 · reasoning", "item-0020 · message (assistant)",
                     "item-0021 · function_call · apply_patch · carries the tokens"]


def test_the_banner_says_where_nemo_rl_stops_and_why(monkeypatch, tmp_path):

    at = open_app(monkeypatch, str(one_rollout(tmp_path, "task0-rollout2")), "--tokenizer", str(QWEN3))
    label = culprit_labels(at)[0].replace("\\", "")
    # The cause first (issue 37), then the trainer's words: where NeMo RL stops, and why.
    assert label.startswith("**Generated tokens dropped** — NeMo RL would stop on this rollout: item-0021's prompt "
                            "does not continue item-0017; the earlier reasoning was stripped from the history (a chat "
                            "template that drops <think>): item-0021's prompt leaves out 33 tokens item-0017 generated "
                            "(its reasoning)"), label


def test_the_bundled_rollouts_scenario_opens_decoded_in_qwen3_s_vocabulary(monkeypatch):

    at = open_app(monkeypatch)
    at.selectbox(key="scenario").set_value("rollouts/qwen3_rollouts.jsonl")
    rerun(at)
    assert any("36 rollouts as NeMo Gym writes them" in c.value for c in at.caption)
    assert str(at.session_state["default_tokenizer"]).endswith("sample_data/qwen3/tokenizer.json")
    assert headings(at)[0] == "task0\\-rollout0"  # the file's first rollout, of 36 in the rollout picker


def test_tokencap_app_refuses_records_beside_a_rollouts_file_before_any_server(monkeypatch, tmp_path, capsys):
    import subprocess

    from tokencap.cli import main

    def refuse(*args, **kwargs):
        raise AssertionError(f"a server was started: {args}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    rollouts = rollouts_file(tmp_path / "r.jsonl", 2)
    records = ROLLOUTS.parent.parent / "rollout_records" / "run.jsonl"
    assert main(["app", str(rollouts), "--final-responses", str(records)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--final-responses given with a source of rollout records" in err[0], err


def test_a_rollouts_file_uploaded_on_the_rollout_page_opens_as_a_run(monkeypatch, tmp_path):

    at = open_app(monkeypatch)
    assert not [b for b in at.button if b.key == "open_upload_as_run"]
    data = rollouts_file(tmp_path / "r.jsonl", 3, cut={1}).read_bytes()
    at.file_uploader(key="uploader").set_value([("rollouts.jsonl", data, "application/octet-stream")])
    rerun(at)
    at.button(key="open_upload_as_run").click()
    rerun(at)
    assert shown_count(at) == (3, 3)
    assert tiles(at)["not contiguous"] == "1"
    assert any("Showing the upload: rollouts.jsonl" in c.value.replace("\\", "") for c in at.sidebar.caption)
