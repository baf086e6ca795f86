"""The Rollout page says why a lineage broke: the culprit's words and a break's link proof (AppTest)."""

from __future__ import annotations

import json
import shutil

from helpers_app import SAMPLES, open_app, pick_call, proof_charts
from helpers_diagnosis import broken_rollout, tokenizer_file
from helpers_rollouts import culprit_labels

from tokencap.services.rollout_sources import default_tokenizer_path


def test_the_culprit_names_the_cause_the_predecessor_and_the_divergence(monkeypatch, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken_rollout("broken")))
    at = open_app(monkeypatch, str(path))
    label = culprit_labels(at)[0].replace("\\", "")
    assert label.startswith("**Tokens replaced** — likely a re-rendered tool call")
    assert "call-0002's claimed parent call-0001 does not open its prompt" in label
    assert "call-0002's prompt replaces 2 tokens of call-0001 at position 5 with 1 token of its own" in label
    assert "re-rendered tool call" in label
    # The break's detail: its words, its hint and the proof against its predecessor.
    pick_call(at, "call:call-0002")
    # The cause in words; its key on hover (issue 37, item 14: no snake_case label).
    assert any(m.value == "**Why the lineage breaks here** · tokens replaced" and "tokens_replaced" in m.proto.help
               for m in at.markdown)
    assert proof_charts(at) == ["call-0002"]  # the break's proof only: the claimed link's told the same twice
    assert not [c for c in at.caption if "(decoded)" in c.value]  # no tokenizer: no decoded sides


def test_with_a_tokenizer_the_cause_is_refined_and_the_divergence_decoded(monkeypatch, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken_rollout("broken")))
    tok = tokenizer_file(tmp_path / "tokenizer.json")
    at = open_app(monkeypatch, str(path), "--tokenizer", str(tok))
    label = culprit_labels(at)[0].replace("\\", "")
    assert label.startswith("**Retokenized** — the history was likely decoded and encoded again: ")
    assert "as 1 token of the same text" in label
    pick_call(at, "call:call-0002")
    assert any(m.value == "**Why the lineage breaks here** · retokenized" for m in at.markdown)
    decoded = [c.value for c in at.text]
    assert "x y" in decoded  # both sides decode to the same text
    assert decoded.count("x y") >= 2


def test_an_unresolved_boundary_gets_a_proof_against_its_nearest_predecessor(monkeypatch):
    at = open_app(monkeypatch, str(SAMPLES / "unresolved_continuation.json"))
    label = culprit_labels(at)[0].replace("\\", "")
    entries = {e["model_call_id"]: e for e in json.loads((SAMPLES / "unresolved_continuation.json").read_text())["entries"]}
    predecessor_len = len(entries["call-0002"]["prompt_token_ids"]) + len(entries["call-0002"]["generation_token_ids"])
    assert f"call-0003's prompt continues all {predecessor_len} tokens of call-0002 exactly" in label
    pick_call(at, "call:call-0003")
    assert any(m.value.endswith("· unrecorded link \\(tokens match\\)") and "link_intact" in m.proto.help
               for m in at.markdown)
    assert proof_charts(at) == ["call-0003"]


def test_the_bundled_sample_tokenizer_is_the_default_only_for_sample_data(tmp_path):
    app = tmp_path / "app"
    (app / "sample_data").mkdir(parents=True)
    sample = app / "sample_data" / "x.json"
    sample.write_text("{}")
    assert default_tokenizer_path(app, None, [str(sample)]) is None  # no bundled tokenizer: a no-op
    tokenizer_file(app / "sample_data" / "tokenizer.json")
    assert default_tokenizer_path(app, None, [str(sample)]) == app / "sample_data" / "tokenizer.json"
    other = tmp_path / "mine.json"
    shutil.copy(sample, other)
    assert default_tokenizer_path(app, None, [str(sample), str(other)]) is None
    assert default_tokenizer_path(app, None, [None]) is None  # an upload
    assert default_tokenizer_path(app, "/given/tokenizer.json", [str(other)]).name == "tokenizer.json"


def test_the_call_tree_names_the_cause_the_culprit_names(monkeypatch, tmp_path):
    """With a tokenizer the tree's mark beside a break says what the culprit says (`retokenized`), not the
    cause the token ids alone give (`tokens_replaced`)."""
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken_rollout("broken")))

    def tree_text(at) -> str:
        spec = next(s for s in (json.loads(c.proto.spec) for c in at.get("vega_lite_chart"))
                    if s.get("description") == "call tree")
        return json.dumps([layer["data"] for layer in spec["layer"] if layer.get("name") == "call_ids"],
                          ensure_ascii=False)

    assert "tokens replaced" in tree_text(open_app(monkeypatch, str(path)))
    tok = tokenizer_file(tmp_path / "tokenizer.json")
    text = tree_text(open_app(monkeypatch, str(path), "--tokenizer", str(tok)))
    assert "retokenized" in text and "tokens replaced" not in text


def test_the_sidebar_names_the_tokenizer_and_where_it_came_from(monkeypatch, tmp_path):
    """docs/contract.md#tokenizers: a model name given to `tokencap app --tokenizer` reaches the app as the cache's
    tokenizer.json, and the sidebar says which model it is and that it came from the local cache."""
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken_rollout("broken")))
    snapshot = tmp_path / "hub" / "models--Acme--Tiny" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    tok = tokenizer_file(snapshot / "tokenizer.json")
    at = open_app(monkeypatch, str(path), "--tokenizer", str(tok))
    captions = [c.value.replace("\\", "") for c in at.sidebar.caption]
    assert f"In use: Acme/Tiny from the local Hugging Face cache ({snapshot}); upload another to replace it." \
        in captions
    plain = open_app(monkeypatch, str(path))
    assert not [c for c in plain.sidebar.caption if "Acme/Tiny" in c.value]


def test_without_a_tokenizer_the_rollout_s_model_decodes_from_the_local_cache(monkeypatch, tmp_path):
    """docs/contract.md#tokenizers: no tokenizer given or uploaded, the calls name a model whose tokenizer is in the
    local Hugging Face cache: the break's sides are decoded with it, and the page says so."""
    snap = broken_rollout("broken")
    for entry in snap["entries"]:
        entry["model"] = "Acme/Tiny"
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(snap))
    snapshot = tmp_path / "hub" / "models--Acme--Tiny" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    tokenizer_file(snapshot / "tokenizer.json")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    at = open_app(monkeypatch, str(path))
    pick_call(at, "call:call-0002")
    assert any(m.value == "**Why the lineage breaks here** · retokenized" and "retokenized" in m.proto.help
               for m in at.markdown)
    assert [c.value for c in at.text].count("x y") >= 2
    wanted = f"Text decoded with Acme/Tiny from the local Hugging Face cache ({snapshot})"
    assert wanted in [c.value.replace("\\", "") for c in at.caption]
