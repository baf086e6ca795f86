"""The app's terminal attribution (docs/contract.md#attribution), driven headless with AppTest.

The sample scenarios with a bundled final-responses file use it automatically; an upload
beside the snapshots beats it; the Verdicts tab says outcome, method and candidates; the
tree marks the final answer; Export says what the chain is anchored on and a manual
anchor still overrides it. Downloads stay byte-identical to `tokencap build`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from helpers_app import ROLLOUT_PAGE, rerun, start_app
from streamlit.testing.v1 import AppTest
from synth_snapshots import cli_build

REPO = Path(__file__).resolve().parent.parent
APP = REPO / "app.py"
SAMPLES = REPO / "sample_data"
FINALS = SAMPLES / "final_responses"
TIMEOUT = 60


def start(monkeypatch, *args: str, scenario: str | None = None, tab: str | None = None) -> AppTest:
    state = {k: v for k, v in (("scenario", scenario), ("tab", tab)) if v is not None}
    return start_app(monkeypatch, *args, page=ROLLOUT_PAGE, state=state)  # the Run page opens first


def banner(at: AppTest) -> str:
    """The Rollout page's verdict line and its findings (Markdown, each with its tooltip naming the mask
    reasons' keys), as one text."""
    return "\n".join(f"{m.value}\n{m.proto.help}" for m in at.markdown
                     if re.search(r"\*\*(Masked|Trainable) —", m.value) or "mask reasons `" in m.proto.help)


def upload_finals(at: AppTest, name: str, data: bytes) -> AppTest:
    at.file_uploader(key="final_responses_uploader").set_value((name, data, "application/json"))
    return rerun(at)


def plain(text: str) -> str:
    """Markdown as read: the page escapes capture text (`md_escape`), the tests read it back."""
    return re.sub(r"\\(.)", r"\1", text)


def texts(elements) -> list[str]:
    return [plain(e.value) for e in elements]


def test_the_uploader_sits_beside_the_snapshots(monkeypatch) -> None:
    at = start(monkeypatch)
    labels = [u.label for u in at.sidebar.get("file_uploader")]
    assert labels[0] == "Open files" and labels[1].startswith("Harness final responses")


def test_a_sample_scenario_uses_its_bundled_final_responses(monkeypatch) -> None:
    at = start(monkeypatch, scenario="title_call_after_final_answer.json", tab="Verdicts")
    assert any("final_responses/title_call_after_final_answer.json" in c and "bundled" in c
               for c in texts(at.sidebar.caption))
    assert "**Trainable —" in banner(at)
    attributed = next(t for t in texts(at.success) if "Attributed" in t)
    assert "call-0004" in attributed and "call-0005" in attributed
    assert any("Outcome **attributed**" in c and "by tokens" in c for c in texts(at.caption))
    frame = at.dataframe[0].value
    assert list(frame["call"]) == ["call-0004"] and frame["role"][0].startswith("anchored")


def test_without_final_responses_the_verdicts_tab_says_so(monkeypatch) -> None:
    at = start(monkeypatch, scenario="subagent_branch.json", tab="Verdicts")
    assert any("No harness final response for this rollout" in c for c in texts(at.caption))


def test_ambiguous_and_unattributed_scenarios_explain_the_mask(monkeypatch) -> None:
    at = start(monkeypatch, scenario="ambiguous_final_answer.json", tab="Verdicts")
    assert "mask reasons `terminal_call_not_delivered`" in banner(at)
    explained = next(t for t in texts(at.error) if "Ambiguous" in t)
    assert "call-0003, call-0005" in explained and "nothing is chosen" in explained
    assert sorted(at.dataframe[0].value["call"]) == ["call-0003", "call-0005"]
    at.session_state["scenario"] = "unattributed_final_answer.json"
    rerun(at, "Verdicts")
    assert any("Unattributed" in e.value for e in at.error)
    assert any("Outcome **unattributed**" in c and "by tokens" in c for c in texts(at.caption))


def test_the_tree_marks_the_attributed_final_answer(monkeypatch) -> None:
    at = start(monkeypatch, scenario="attributed_twins_finish_disagree.json")
    pick = next(s for s in at.selectbox if s.key.startswith("pick:"))
    labels = {key: label for key, label in zip(pick.options, pick.options)}
    marked = [label for label in labels if "the harness's final answer" in label]
    assert [m.split(" — ")[0] for m in marked] == ["call-0003", "call-0004"]
    spec = next(s for s in (json.loads(c.proto.spec) for c in at.get("vega_lite_chart"))
                if s.get("description") == "call tree")
    rings = [d["key"] for layer in spec["layer"] if layer.get("name") == "nodes" for d in layer["data"]["values"]
             if d["what"] == "the harness's final answer (attributed)"]
    assert sorted(rings) == ["call:call-0003", "call:call-0004"]


def test_export_says_it_is_anchored_on_the_final_answer_and_matches_the_cli(monkeypatch, downloads,
                                                                           tmp_path) -> None:
    name = "title_call_after_final_answer.json"
    at = start(monkeypatch, scenario=name, tab="Export")
    anchor = next(s for s in at.selectbox if s.key.startswith("anchor_w:"))
    assert anchor.value is None
    assert any("Anchored on the harness's final answer: call-0004" in c for c in texts(at.caption))
    command = next(t.value for t in at.text if "tokencap build" in t.value)
    assert "--final-responses sample_data/final_responses/title_call_after_final_answer.json" in command
    cli = cli_build(SAMPLES / name, "--final-responses", str(FINALS / name), tmp_path=tmp_path)
    assert downloads["title-call-after-final.result.json"]() == cli
    assert json.loads(cli)["metrics"]["terminal_attribution"]["call_id"] == "call-0004"
    assert downloads["tokencap_results.jsonl"]() == cli


def test_a_manual_anchor_overrides_the_attribution(monkeypatch, downloads, tmp_path) -> None:
    name = "title_call_after_final_answer.json"
    at = start(monkeypatch, scenario=name, tab="Export")
    anchor = next(s for s in at.selectbox if s.key.startswith("anchor_w:"))
    anchor.set_value("call-0005")
    rerun(at)
    assert any("overrides the harness's final answer (call-0004)" in c for c in texts(at.caption))
    cli = cli_build(SAMPLES / name, "--terminal-call-id", "call-0005", "--final-responses", str(FINALS / name),
                    tmp_path=tmp_path)
    assert downloads["title-call-after-final.at-call-0005.result.json"]() == cli
    assert json.loads(cli)["metrics"]["terminal_attribution"]["outcome"] == "given"
    rerun(at, "Verdicts")
    assert any("Manual anchor call-0005 overrides" in t for t in texts(at.info))


def test_an_upload_applies_to_uploaded_snapshots_and_beats_the_bundled_file(monkeypatch, tmp_path) -> None:
    at = start(monkeypatch, scenario="title_call_after_final_answer.json", tab="Verdicts")
    # A bare Responses object whose final turn matches nothing: it replaces the bundled file.
    bare = {"object": "response", "output": [{"type": "message", "role": "assistant",
                                              "content": [{"type": "output_text", "text": "never said"}]}]}
    upload_finals(at, "mine.json", json.dumps(bare).encode())
    assert any("mine.json" in c and "uploaded" in c for c in texts(at.sidebar.caption))
    assert "mask reasons `terminal_call_not_delivered`" in banner(at)
    assert any("Unattributed" in e.value for e in at.error)
    # Uploaded snapshots use it too.
    snapshot = (SAMPLES / "title_call_after_final_answer.json").read_bytes()
    finals = (FINALS / "title_call_after_final_answer.json").read_bytes()
    at.file_uploader(key="uploader").set_value([("t.json", snapshot, "application/json")])
    upload_finals(at, "finals.json", finals)
    assert "**Trainable —" in banner(at)
    assert any("Attributed" in s.value for s in at.success)


def test_a_malformed_upload_is_an_error_naming_file_line_and_field(monkeypatch) -> None:
    at = start(monkeypatch, scenario="title_call_after_final_answer.json")
    bad = b'{"rollout_id": "a", "response": {"output": []}}\n{"rollout_id": "b", "response": {"output": [{"type": 3}]}}\n'
    upload_finals(at, "bad.jsonl", bad)
    error = next(iter(texts(at.sidebar.error)))
    assert "bad.jsonl, line 2" in error and "response.output[0].type" in error
    # Nothing applies: the rollout builds as without final responses (the title call delivered).
    rerun(at, "Verdicts")
    assert any("No harness final response for this rollout" in c for c in texts(at.caption))


def test_responses_for_rollouts_not_loaded_are_a_note(monkeypatch) -> None:
    at = start(monkeypatch, scenario="final_retry_attributed_by_tokens.json")
    assert any(c.startswith("Note:") and "final-retry-by-tokens-other" in c for c in texts(at.sidebar.caption))
    assert "**Trainable —" in banner(at)


def test_copy_link_says_uploaded_final_responses_are_not_in_the_link(monkeypatch) -> None:
    # The link opens the rollout without them: a rollout they mask may read trainable there.
    lone = SAMPLES / "run" / "task0153-rollout0-attempt0.tokens.jsonl"
    at = start(monkeypatch, str(lone))
    assert not any("final responses" in w.value for w in at.warning)
    at = upload_finals(at, "run.jsonl", (SAMPLES / "rollout_records" / "run.jsonl").read_bytes())
    assert "Masked" in banner(at)
    assert not any("final responses" in w.value for w in at.warning)  # the Copy link popover is closed
    at.session_state["share"] = True  # opened: filled
    at.run()
    (note,) = [plain(w.value) for w in at.warning if "final responses" in w.value]
    assert "run.jsonl" in note and "without them" in note
