"""The Streamlit app's Rollout page driven headless with `streamlit.testing.v1.AppTest`.

Downloads are deferred (Streamlit calls the payload function when the button is
clicked), so the tests capture the payload functions the page registers and compare
their bytes with what `tokencap build` writes for the same input and anchor.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import pytest
import streamlit as st
from helpers_app import ROLLOUT_PAGE, SAMPLES, TIMEOUT, UPSTREAM, open_app, pick_call, proof_charts, rerun
from streamlit.testing.v1 import AppTest
from synth_snapshots import Capture, cli_build, kitchen_sink

from tokencap import load_snapshots
from tokencap.export import loss_mask_csv
from tokencap.lossmask import loss_mask
from tokencap.rollout import build_rollout
from tokencap.services import rollout_sources as src


def heading(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("### "))


def verdict(at: AppTest) -> str:
    """The banner's verdict line (markdown)."""
    return next(m.value for m in at.markdown if re.search(r"\*\*(Masked|Trainable) —", m.value))


def reason_lines(at: AppTest) -> list[str]:
    """The banner's findings (Markdown), each followed by its tooltip (its hint and the mask reasons' keys)."""
    return [f"{m.value}\n{m.proto.help}" for m in at.markdown if "mask reasons `" in m.proto.help]


def culprit_links(at: AppTest) -> list[tuple[str, str]]:
    """The banner's call links: (label, hover)."""
    return [(b.label, b.proto.help) for b in at.button if b.key.startswith("culprit:")]


TILE = re.compile(r"(.+?) (?::red\[)?\*\*([^*]+)\*\*\]?")


def tiles(at: AppTest) -> dict[str, str]:
    """The header's number tiles, label -> value."""
    return {m[1].replace("\\", ""): m[2].replace("\\", "")
            for m in (TILE.fullmatch(el.value) for el in at.get_by_key("tiles").markdown) if m}


def upload(at: AppTest, *files: tuple[str, bytes]) -> AppTest:
    at.file_uploader(key="uploader").set_value([(name, data, "application/octet-stream") for name, data in files])
    return rerun(at)


def rollout_keys(*sources: src.Source) -> list[str]:
    """The rollout selector's values (labels are what AppTest lists as options)."""
    return [r.key for r in src.rollout_refs(src.load_source(s) for s in sources)]


def tree_charts(at: AppTest) -> list[str]:
    """The Call tree tab's Vega-Lite charts drawn (the overview, the tree), by their description, in page order."""
    return [d for d in (json.loads(c.proto.spec).get("description", "") for c in at.get("vega_lite_chart"))
            if d.startswith("call tree")]


def tree_spec(at: AppTest, description: str = "call tree") -> tuple[dict, str]:
    """(spec, element id) of the tree chart with ``description`` (the tree, or "call tree overview")."""
    chart = next(c for c in at.get("vega_lite_chart") if json.loads(c.proto.spec).get("description") == description)
    return json.loads(chart.proto.spec), chart.proto.id


def mask_charts(at: AppTest) -> list[str]:
    """The Loss mask tab's Vega-Lite charts drawn, by their description, in page order."""
    return [d for d in (json.loads(c.proto.spec).get("description", "") for c in at.get("vega_lite_chart"))
            if d.startswith("loss-mask")]


def store_zip(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for f in sorted(directory.iterdir()):
            zf.write(f, f"{directory.name}/{f.name}")
    return buffer.getvalue()


# --------------------------------------------------------------------------- start-up


def test_default_start_opens_the_sample_scenarios(monkeypatch):
    at = open_app(monkeypatch)
    scenario = at.selectbox(key="scenario")
    assert scenario.value == "subagent_branch.json"
    assert "capture store" in scenario.options
    assert heading(at) == "### subagent\\-branch"
    assert list(tiles(at)) == ["calls", "chains", "delivered", "quarantined", "unproven links", "excluded",
                               "empty gen.", "refusals"]
    assert "**Masked" in verdict(at)
    assert "`multiple_chains`" in reason_lines(at)[0]
    assert tree_charts(at) == ["call tree"]  # the tree, Vega-Lite
    assert not at.get("plotly_chart")
    assert [t.label for t in at.tabs] == ["Call tree", "Loss mask", "Verdicts", "Export", "Compare"]
    # A masked rollout opens on its first culprit, the branch's first call, selected; its detail is one
    # button until the reader asks for it (a node, a culprit, the picker, or the button).
    assert at.selectbox(key=next(s.key for s in at.selectbox if s.key.startswith("pick:"))).value == "call:call-0003"
    assert not any(m.value.startswith("#### ") for m in at.markdown)
    shown = [b for b in at.button if b.key.startswith("detail_show:")]
    assert [b.label for b in shown] == ["Show the detail of call\\-0003"]
    shown[0].click()
    rerun(at)
    assert any(m.value.startswith("#### call\\-0003") for m in at.markdown)
    assert not [b for b in at.button if b.key.startswith("detail_show:")]
    assert proof_charts(at) == ["call-0003"]  # the link proof, Vega-Lite


def test_scenario_picker_switches_source(monkeypatch):
    at = open_app(monkeypatch)
    at.selectbox(key="scenario").set_value("capture_store")
    rerun(at)
    rollout = at.selectbox(key="rollout")
    assert rollout.options == ["✓ trainable · store-complete", "✗ masked: capture incomplete · store-interrupted"]
    assert heading(at) == "### store\\-complete"


@pytest.mark.parametrize("scenario", [s.name for s in src.sample_scenarios(SAMPLES)])
def test_every_sample_scenario_renders_every_tab(app_tester, scenario):
    at = app_tester(page=ROLLOUT_PAGE, state={"scenario": scenario})
    for tab in ("Loss mask", "Verdicts", "Export", "Compare"):
        rerun(at, tab)
    declared = json.loads((SAMPLES / "expected.json").read_text())
    if scenario in declared:
        first = next(iter(declared[scenario]["rollouts"].values()))
    else:  # the sample run (sample_data/run/) declares its rollouts next to its store, the bundled rollouts
        # file (rollouts/qwen3_rollouts.jsonl) next to itself; the first id opens
        folder = SAMPLES / scenario if (SAMPLES / scenario).is_dir() else (SAMPLES / scenario).parent
        run = json.loads((folder / "expected.json.txt").read_text())["rollouts"]
        first = run[min(run)]
    assert ("**Trainable" if not first["mask_sample"] else "**Masked") in verdict(at)


def test_path_argument_opens_a_capture_store(monkeypatch):
    at = open_app(monkeypatch, str(UPSTREAM))
    rollout = at.selectbox(key="rollout")
    assert len(rollout.options) == 2
    assert heading(at) == "### task3\\-rollout0\\-attempt0"
    rollout.set_value(rollout_keys(src.source_from_path(UPSTREAM))[1])
    rerun(at)
    assert heading(at) == "### task4\\-rollout1\\-attempt0"
    assert reason_lines(at)[0].startswith("**A call may be missing from the capture**")
    assert "`capture_incomplete`" in reason_lines(at)[0]


def test_path_argument_to_a_missing_file_is_an_error_in_the_page(monkeypatch, tmp_path):
    at = open_app(monkeypatch, str(tmp_path / "nope.json"))
    assert any("nope\\.json" in e.value and "no such file" in e.value for e in at.error)


# --------------------------------------------------------------------------- uploads


def test_upload_snapshot_json(monkeypatch):
    at = open_app(monkeypatch)
    upload(at, ("sink.json", kitchen_sink().json_bytes()))
    assert heading(at) == "### kitchen\\-sink"
    assert any("Showing 1 uploaded file" in c.value for c in at.sidebar.caption)
    assert tiles(at)["calls"] == "12"


def test_upload_jsonl_with_several_rollouts_gets_a_verdict_selector(monkeypatch):
    at = open_app(monkeypatch)
    upload(at, ("entries.jsonl", (SAMPLES / "multi_rollout_entries.jsonl").read_bytes()))
    rollout = at.selectbox(key="rollout")
    assert len(rollout.options) == 3
    labels = rollout.options
    assert all(label.startswith("✓ trainable") for label in labels)
    assert any("jsonl-refusal-ended" in label and "incomplete" in label for label in labels)


def test_upload_zip_of_a_capture_store(monkeypatch):
    at = open_app(monkeypatch)
    upload(at, ("store.zip", store_zip(SAMPLES / "capture_store")))
    rollout = at.selectbox(key="rollout")
    assert [o.split(" · ")[-1] for o in rollout.options] == ["store-complete", "store-interrupted"]


def test_several_uploads_and_a_bad_file(monkeypatch):
    at = open_app(monkeypatch)
    bad = b'{"rollout_id": "r", "model_call_id": "c1"}\n{"oops": \n'
    good, zipped = kitchen_sink().json_bytes(), store_zip(UPSTREAM)
    upload(at, ("good.json", good), ("bad.jsonl", bad), ("store.zip", zipped))
    errors = [e.value for e in at.error if "Could not load" in e.value]
    assert len(errors) == 1
    assert "bad\\.jsonl" in errors[0] and "line" in errors[0]
    assert not at.exception
    rollout = at.selectbox(key="rollout")
    assert len(rollout.options) == 3  # the good file and both store rollouts stay usable
    assert all(o.endswith(("(good.json)", "(store.zip)")) for o in rollout.options)  # several files: names shown
    rollout.set_value(rollout_keys(src.source_from_bytes("good.json", good),
                                   src.source_from_bytes("store.zip", zipped))[2])
    rerun(at)
    assert heading(at) == "### task4\\-rollout1\\-attempt0"


def test_a_big_load_clears_the_previous_page_before_its_progress_box_opens(monkeypatch):
    """The placeholder that holds the whole page is emptied when loading starts, so the previous
    rollout's verdict is gone at once (the browser test watches it happen)."""
    from streamlit.delta_generator import DeltaGenerator

    from tokencap.views.rollout import rollout_page

    events: list[tuple[str, tuple[int, ...]]] = []
    real_status, real_empty = DeltaGenerator.status, DeltaGenerator.empty

    def spy_status(self, label, *args, **kwargs):
        events.append((f"status {label}", tuple(self._cursor.delta_path)))
        return real_status(self, label, *args, **kwargs)

    def spy_empty(self):
        if self._cursor is not None and not self._cursor.is_locked:
            return real_empty(self)  # creating a placeholder
        events.append(("empty", tuple(self._cursor.delta_path)))
        return real_empty(self)

    monkeypatch.setattr(DeltaGenerator, "status", spy_status)
    monkeypatch.setattr(DeltaGenerator, "empty", spy_empty)
    at = open_app(monkeypatch)
    assert not any(e.startswith("status") for e, _ in events)  # the sample is small: no progress box
    events.clear()
    monkeypatch.setattr(rollout_page, "PROGRESS_BYTES", 1)
    upload(at, ("sink.json", kitchen_sink().json_bytes()))
    size = f"{len(kitchen_sink().json_bytes()) / 1000:.1f} KB"
    names = [e for e, _ in events]
    assert names[:2] == ["empty", f"status Loading 1 file ({size})…"]  # the page goes, then the box opens
    # ... and the box goes once the load is done.
    assert names[2] == "empty" and events[2][1] == events[1][1]
    # The whole page is one block of the main area, at the path that was emptied first.
    blocks = [(i, node) for i, node in at.main.children.items() if node.type not in ("html", "empty")]
    assert len(blocks) == 1
    index, page = blocks[0]
    assert events[0][1][-1] == index
    assert heading(at) == "### kitchen\\-sink" and any(m.value == heading(at) for m in page.markdown)
    # The sample's description in the sidebar was replaced by the upload's caption.
    assert not any(c.value.startswith("Expected:") for c in at.sidebar.caption)


def test_capture_strings_are_never_rendered_as_markup(monkeypatch):
    hostile = "<img src=x onerror=alert(1)>[x](javascript:alert(1)):red[boo]"
    c = Capture(hostile)
    c.call("c<b>1</b>", new=5, text="**not bold** <script>alert(1)</script> [link](http://evil)")
    at = open_app(monkeypatch)
    at.session_state["detail_open"] = {"fields": True, "items": True}  # left open: the record is shown too
    upload(at, ("hostile.json", c.json_bytes()))
    shown = next(b for b in at.button if b.key.startswith("detail_show:"))  # its label names the call, escaped
    assert "c\\<b\\>1" in shown.label and not re.search(r"(?<!\\)<", shown.label), shown.label
    shown.click()
    rerun(at)
    assert [t for t in at.table if "field" in t.value.columns]
    for element in list(at.markdown) + list(at.caption) + list(at.error) + list(at.success):
        value = element.value
        # Markdown only ever sees the escaped characters: no raw tag, link or directive.
        assert not re.search(r"(?<!\\)<", value), value
        assert "](" not in value and ":red[" not in value, value
    assert heading(at).startswith("### \\<img")
    # Output text is shown verbatim as plain text.
    assert any(text.value == "**not bold** <script>alert(1)</script> [link](http://evil)" for text in at.text)
    # Plain text, never a code block: one loads the browser's syntax highlighter (a 1.5 MB chunk, ~0.4 s of a first render).
    assert not at.code


# --------------------------------------------------------------------------- switching and caching


def test_switching_rollouts_and_tabs_does_not_rebuild(monkeypatch):
    import threading

    import tokencap.views.model as model_module

    st.cache_resource.clear()
    every: list[tuple[str, int, str | None]] = []  # (thread, snapshot, anchor) of each build
    real = model_module.build_rollout

    def counting(snapshot, terminal_call_id=None, model="", final_response=None):
        every.append((threading.current_thread().name, id(snapshot), terminal_call_id))
        return real(snapshot, terminal_call_id=terminal_call_id, model=model, final_response=final_response)

    def page_builds() -> list[str | None]:  # the script's own; the Compare tab's are made ahead in a thread
        return [anchor for thread, _, anchor in every if thread != "tokencap-prefetch-compare"]

    monkeypatch.setattr(model_module, "build_rollout", counting)
    at = open_app(monkeypatch, str(SAMPLES / "multi_rollout_entries.jsonl"))
    assert len(page_builds()) == 3  # each rollout built once, up front, for its verdict
    for key in rollout_keys(src.source_from_path(SAMPLES / "multi_rollout_entries.jsonl")):
        at.selectbox(key="rollout").set_value(key)
        rerun(at)
        for tab in ("Loss mask", "Verdicts", "Call tree"):
            rerun(at, tab)
    rerun(at)
    assert len(page_builds()) == 3
    # Anchoring builds once more, and only once.
    rerun(at, "Export")
    anchor = next(s for s in at.selectbox if s.key.startswith("anchor_w:"))
    first_call = anchor.options[1].split(" · ")[0]
    anchor.set_value(first_call)
    rerun(at)
    rerun(at, "Call tree")
    rerun(at, "Export")
    for thread in threading.enumerate():
        if thread.name == "tokencap-prefetch-compare":
            thread.join(timeout=TIMEOUT)
    # Built once: by the page, or ahead of it when it is the Compare tab's second anchor.
    assert page_builds().count(first_call) <= 1 and any(anchor == first_call for _, _, anchor in every)
    assert [anchor for anchor in page_builds() if anchor != first_call] == [None] * 3
    # Nothing, in the script or ahead of it, is built twice.
    assert len({(snap, anchor) for _, snap, anchor in every}) == len(every)


def test_culprit_links_name_the_cause_and_select_the_call(monkeypatch):
    at = open_app(monkeypatch, str(SAMPLES / "stale_parent_link.json"), tab="Verdicts")
    line = reason_lines(at)[0].replace("\\", "")
    assert "call-0003's claimed parent call-0002 does not open its prompt" in line or \
        "call-0003's prompt" in line, line
    assert "`unresolved_parent_calls`" in line
    (label, hover), *_ = culprit_links(at)
    assert label == "call\\-0003"
    assert "call\\-0003\\'s claimed parent call\\-0002 does not open its prompt" in hover
    links = [b for b in at.button if b.key.startswith("culprit:")]
    links[0].click()
    rerun(at)
    assert at.session_state["tab"] == "Call tree"
    pick = next(s for s in at.selectbox if s.key.startswith("pick:"))
    assert pick.value == "call:call-0003"
    # Announced but never captured: the culprit is a node of its own.
    at = open_app(monkeypatch, str(SAMPLES / "capture_store"))
    at.selectbox(key="rollout").set_value(rollout_keys(src.source_from_path(SAMPLES / "capture_store"))[1])
    rerun(at)
    (label, hover), *_ = culprit_links(at)
    assert label == "call\\-0004" and hover.startswith("call\\-0004 was announced but never captured")
    assert "call-0004 was announced but never captured" in reason_lines(at)[0].replace("\\", "")
    assert next(s for s in at.selectbox if s.key.startswith("pick:")).value == "ghost:call-0004"
    pick_call(at, "ghost:call-0004")
    assert any(m.value.startswith("#### call\\-0004 — Announced, never captured") for m in at.markdown)


def test_a_corrupt_record_reads_as_corrupt(monkeypatch):
    at = open_app(monkeypatch, str(SAMPLES / "corrupt_record.json"))
    assert "call-0002 is corrupt:" in reason_lines(at)[0].replace("\\", "")
    assert culprit_links(at)[0][1].startswith("call\\-0002 is corrupt\\:")
    assert tiles(at)["excluded"] == "1" and tiles(at)["unproven links"] == "0"
    assert "unresolved" not in " ".join(tiles(at))


def test_a_break_s_calls_are_linked_once_and_more_than_eight_go_behind_a_popover(monkeypatch):
    c = Capture("many-fragments")
    c.call("c0", new=10)
    for i in range(10):
        c.call(f"f{i}", prompt=c._tokens(9), claimed=f"lost-{i}")
    at = open_app(monkeypatch)
    upload(at, ("many.json", c.json_bytes()))
    lines = reason_lines(at)
    # one finding for the ten calls' break, explaining the three reasons it masks the rollout as
    assert len(lines) == 1 and all(f"`{r}`" in lines[0]
                                   for r in ("unresolved_parent_calls", "multiple_roots", "multiple_chains"))
    culprit_keys = [b.key for b in at.button if b.key.startswith("culprit:")]
    assert len(culprit_keys) == 10 == len(set(culprit_keys))
    assert [p.proto.popover.label for p in at.get("popover") if p.proto.popover.label.startswith("+")] == \
        ["+2 more"]


def test_selecting_a_call_shows_its_parent_link_check(monkeypatch):
    at = open_app(monkeypatch, str(SAMPLES / "stale_parent_link.json"))
    pick_call(at, "call:call-0003")
    assert any(m.value.startswith("#### call\\-0003") for m in at.markdown)
    assert any("do not open this call" in e.value for e in at.error)
    checks = [t.value for t in at.table if "check" in t.value.columns]
    assert checks and "✗" in set(checks[0]["ok"])
    # The selection survives a visit to another tab.
    rerun(at, "Verdicts")
    rerun(at, "Call tree")
    assert any(m.value.startswith("#### call\\-0003") for m in at.markdown)


def test_the_record_s_fields_and_output_items_open_on_demand_and_stay_open(monkeypatch):
    """The detail's reference (the record's fields, its output items) is under two expanders, sent only
    while open; opened, each stays open for the next call selected, and after a visit to the Run page."""
    at = open_app(monkeypatch, str(SAMPLES / "stale_parent_link.json"))
    pick_call(at, "call:call-0003")
    labels = [e.label for e in at.expander]
    assert "Fields (" in " ".join(labels) and "Output items (" in " ".join(labels)
    assert not [t for t in at.table if "field" in t.value.columns] and not at.json
    at.session_state["detail_fields_open"] = True  # opened (AppTest has no click on an expander)
    rerun(at)
    assert [t for t in at.table if "field" in t.value.columns] and not at.json
    # Another call: the fields stay open (their count in the label changes), the items stay closed.
    pick_call(at, "call:call-0001")
    assert any(m.value.startswith("#### call\\-0001") for m in at.markdown)
    assert [t for t in at.table if "field" in t.value.columns] and not at.json
    at.session_state["detail_items_open"] = True
    rerun(at)
    assert at.json and "item 0 · message \\(assistant\\)" in [c.value for c in at.caption]
    # The Run page and back (its widgets' state is gone with the page): both as they were left.
    at.switch_page("tokencap/app/run/run.py")
    rerun(at)
    at.switch_page(ROLLOUT_PAGE)
    rerun(at)
    assert [t for t in at.table if "field" in t.value.columns]
    assert at.json and "item 0 · message \\(assistant\\)" in [c.value for c in at.caption]


def test_a_call_s_detail_shows_once_asked_for_in_that_rollout(monkeypatch):
    """A rollout opens with a call selected and its detail behind one button (the ~15 elements of a
    detail were ~0.05 s of every rollout opened with J / K); a call picked stays shown for its rollout."""
    store = SAMPLES / "capture_store"
    at = open_app(monkeypatch, str(store))
    first, second = rollout_keys(src.source_from_path(store))[:2]
    assert not any(m.value.startswith("#### ") for m in at.markdown)
    pick = next(s for s in at.selectbox if s.key.startswith("pick:"))
    ident = next(o.split(" — ")[0] for o in pick.options  # the options as shown: "call-0001 — what it is"
                 if o.startswith("call-") and f"call:{o.split(' — ')[0]}" != pick.value)
    pick_call(at, f"call:{ident}")
    ident = ident.replace("-", "\\-")
    assert any(m.value.startswith(f"#### {ident}") for m in at.markdown)
    at.selectbox(key="rollout").set_value(second)
    rerun(at)
    assert not any(m.value.startswith("#### ") for m in at.markdown)  # another rollout: not asked for there
    assert [b for b in at.button if b.key.startswith("detail_show:")]
    at.selectbox(key="rollout").set_value(first)
    rerun(at)
    assert any(m.value.startswith(f"#### {ident}") for m in at.markdown)


def test_the_link_proof_is_a_picture_with_the_digests_in_full_below(monkeypatch):
    at = open_app(monkeypatch, str(SAMPLES / "stale_parent_link.json"))
    view_snapshot = load_snapshots(SAMPLES / "stale_parent_link.json")[0]
    build = build_rollout(view_snapshot).build
    parent = build.entries["call-0002"]
    assert proof_charts(at) == []  # opened: the selected call's detail waits to be asked for
    pick_call(at, "call:call-0003")
    # The break's proof is the detail's one chart of the two sequences (issue 37: the claimed link's drew them
    # again, with another story); the digests stay below.
    assert proof_charts(at) == ["call-0003"]
    assert any("share a prefix of 176 tokens" in c.value for c in at.caption)
    assert not at.code  # plain text (see test_capture_strings_are_never_rendered_as_markup)
    codes = [c.value for c in at.text if c.value.startswith("expected")]
    assert len(codes) == 1 and parent.digest in codes[0]
    found = [line for line in codes[0].splitlines() if line.startswith("found")][0]
    assert len(found.split()[1]) == 64  # the digest of the child's first 236 tokens, in full
    # The checks table shows the digests shortened (they are in full just below), and wraps.
    checks = next(t.value for t in at.table if "check" in t.value.columns)
    assert all(len(v) <= 13 or " " in v for v in checks["expected"])
    # The fields are a wrapping table too (no clipped value column), under their expander.
    assert not any("field" in t.value.columns for t in at.table)  # closed: not sent
    at.session_state["detail_fields_open"] = True
    rerun(at)
    assert any("field" in t.value.columns for t in at.table)
    # A verified link has its proof too; a root has none.
    pick_call(at, "call:call-0002")
    assert any("All 171 tokens of call\\-0001" in c.value for c in at.caption)
    pick_call(at, "call:call-0001")
    assert proof_charts(at) == []


def test_loss_mask_tab_pages_and_decodes(monkeypatch):
    at = open_app(monkeypatch, str(SAMPLES / "long_rollout_delta.json"), tab="Loss mask")
    snapshot = load_snapshots(SAMPLES / "long_rollout_delta.json")[0]
    total = len(loss_mask(build_rollout(snapshot).build.main))
    assert total > 4096
    page = next(s for s in at.slider if s.key.startswith("mask_pagew:"))
    assert page.max == -(-total // 2048)
    page.set_value(2)
    rerun(at)
    assert any(c.value.startswith("Positions 2,048–4,095") for c in at.caption)
    # A visit draws one chart, the strip: the whole sequence's overview, the log-probs and the table of
    # every link are built only while their expanders are open.
    assert mask_charts(at) == ["loss-mask strip"] and not at.get("plotly_chart")
    assert any(e.label.startswith("The whole sequence") for e in at.expander)
    strip = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    assert strip["layer"][0]["encoding"]["y"]["scale"]["domain"][0] == 2048  # the second page's first row
    assert not [d for d in at.dataframe if "starts at" in d.value.columns]
    at.session_state["mask_overview_open"] = True
    at.session_state["mask_logprobs_open"] = True
    at.session_state["mask_links_open"] = True
    rerun(at)
    assert mask_charts(at) == ["loss-mask strip", "loss-mask overview", "loss-mask log-probs"]
    assert not at.get("plotly_chart")
    overview = json.loads(at.get("vega_lite_chart")[1].proto.spec)
    frames = [layer for layer in overview["layer"] if layer.get("mark", {}).get("stroke") == "#dc2626"]
    assert frames[0]["data"]["values"] == [{"a": 2048, "b": 4096}]  # the window framed: the second page
    logprobs = json.loads(at.get("vega_lite_chart")[2].proto.spec)
    rules = [layer for layer in logprobs["layer"] if layer["mark"]["type"] == "rule"]
    assert [r["at"] for r in rules[0]["data"]["values"]] == [2048, 4096]  # the second page's window
    links = next(d.value for d in at.dataframe if "starts at" in d.value.columns)
    links_of_chain = len(build_rollout(snapshot).build.main.links)
    assert len(links) == links_of_chain and any(e.label == f"Per link ({links_of_chain:,})" for e in at.expander)


def test_loss_mask_tab_decodes_the_window_with_a_tokenizer_json(monkeypatch):
    from helpers_diagnosis import word_tokenizer_json

    tokenizer = word_tokenizer_json()  # skips without the tokenizers package
    at = open_app(monkeypatch, str(SAMPLES / "clean_multiturn_tools.json"), tab="Loss mask")
    at.file_uploader(key="tokenizer").set_value(("tokenizer.json", tokenizer, "application/json"))
    rerun(at)
    assert not [df for df in at.dataframe if "kind" in df.value.columns]  # closed: not built
    at.session_state["mask_decoded_open"] = True  # opened
    rerun(at)
    frames = [df.value for df in at.dataframe if "kind" in df.value.columns]
    assert frames and list(frames[0]["kind"])[:3] == ["prompt", "generated", "interstitial"]
    assert any("⟦" in t.value for t in at.text) and not at.code
    at.file_uploader(key="tokenizer").set_value(("tokenizer.json", b"{}", "application/json"))
    rerun(at)
    assert any("not a tokenizer" in e.value for e in at.error)


# --------------------------------------------------------------------------- anchoring and export


def test_export_downloads_equal_tokencap_build(monkeypatch, downloads, tmp_path):
    source = SAMPLES / "subagent_branch.json"
    open_app(monkeypatch, str(source), tab="Export")
    cli = cli_build(source, tmp_path=tmp_path)
    assert downloads["subagent-branch.result.json"]() == cli
    assert json.loads(downloads["subagent-branch.response.json"]()) == json.loads(cli)["rebuilt_response"]
    snapshot = load_snapshots(source)[0]
    assert downloads["subagent-branch.loss_mask.csv"]() == loss_mask_csv(loss_mask(build_rollout(snapshot).build.main))
    assert downloads["tokencap_results.jsonl"]() == cli


def test_jsonl_of_every_loaded_rollout(monkeypatch, downloads, tmp_path):
    source = SAMPLES / "multi_rollout_entries.jsonl"
    open_app(monkeypatch, str(source), tab="Export")
    assert downloads["tokencap_results.jsonl"]() == cli_build(source, tmp_path=tmp_path)


def test_reanchoring_recomputes_the_verdict_and_the_export(monkeypatch, downloads, tmp_path):
    source = SAMPLES / "final_retry_unresolved.json"
    at = open_app(monkeypatch, str(source), tab="Export")
    assert at.error[0].value.startswith("**Masked") and "unresolved_retries" in at.error[0].value
    anchor = next(s for s in at.selectbox if s.key.startswith("anchor_w:"))
    assert anchor.value is None and anchor.options[0].startswith("(none)")
    anchor.set_value("call-0004")
    rerun(at)
    assert at.success[0].value.startswith("**Trainable")
    assert any("verdict\\: masked → trainable" in c.value for c in at.caption)
    cli = cli_build(source, "--terminal-call-id", "call-0004", tmp_path=tmp_path)
    assert downloads["final-retry-unresolved.at-call-0004.result.json"]() == cli
    assert json.loads(downloads["final-retry-unresolved.at-call-0004.response.json"]()) == \
        json.loads(cli)["rebuilt_response"]
    assert downloads["tokencap_results.jsonl"]() == cli  # the one loaded rollout, with its anchor
    assert any("--terminal-call-id call-0004" in t.value for t in at.text) and not at.code
    # The whole page follows the anchor, and it survives other tabs.
    rerun(at, "Call tree")
    assert any("anchored on call\\-0004" in c.value for c in at.caption)
    assert "**Trainable" in verdict(at)
    # Back to no anchor.
    rerun(at, "Export")
    next(s for s in at.selectbox if s.key.startswith("anchor_w:")).set_value(None)
    rerun(at)
    assert at.error[0].value.startswith("**Masked")


def test_anchoring_on_a_quarantined_call_masks_with_terminal_not_delivered(monkeypatch, downloads, tmp_path):
    source = SAMPLES / "retry_resolved_by_child.json"
    at = open_app(monkeypatch, str(source), tab="Export")
    next(s for s in at.selectbox if s.key.startswith("anchor_w:")).set_value("call-0002")
    rerun(at)
    assert "terminal_call_not_delivered" in at.error[0].value
    assert downloads["retry-resolved-by-child.at-call-0002.result.json"]() == \
        cli_build(source, "--terminal-call-id", "call-0002", tmp_path=tmp_path)


def test_same_bytes_under_another_name_keep_their_own_name(monkeypatch):
    data = kitchen_sink().json_bytes()
    at = open_app(monkeypatch)
    upload(at, ("first.json", data))
    at2 = open_app(monkeypatch)
    upload(at2, ("second.json", data))
    assert any("from second\\.json" in c.value for c in at2.caption)
    assert not any("first" in c.value for c in at2.caption)


def test_a_directory_rollout_that_failed_to_load_is_shown_masked_on_every_tab(monkeypatch, tmp_path, downloads):
    store = tmp_path / "store"
    store.mkdir()
    for f in UPSTREAM.iterdir():
        (store / f.name).write_bytes(f.read_bytes())
    (store / "broken.json").write_text('{"entries": [{"model_call_id": 3}]}')
    at = open_app(monkeypatch, str(store))
    keys = rollout_keys(src.source_from_path(store))
    labels = at.selectbox(key="rollout").options
    failed = next(i for i, label in enumerate(labels) if "load error" in label)  # the picker says reasons in words
    at.selectbox(key="rollout").set_value(keys[failed])
    rerun(at)
    assert any(e.value.startswith("**Error:**") and "broken\\.json" in e.value for e in at.error)
    for tab in ("Loss mask", "Verdicts", "Export", "Compare"):
        rerun(at, tab)
    result = json.loads(downloads["broken.result.json"]())
    assert result["mask_reasons"][0] == "load_error" and result["rebuilt_response"] is None


# --------------------------------------------------------------------------- shareable views


def picked(at: AppTest) -> str:
    return next(s for s in at.selectbox if s.key.startswith("pick:")).value


def test_the_url_follows_the_view(monkeypatch):
    at = open_app(monkeypatch)
    assert at.query_params == {"src": "sample:subagent_branch.json", "rollout": "subagent-branch",
                               "call": "call-0003", "tab": "tree"}
    next(s for s in at.selectbox if s.key.startswith("pick:")).set_value("call:call-0002")
    rerun(at)
    assert at.query_params["call"] == "call-0002"
    rerun(at, "Loss mask")
    assert at.query_params["tab"] == "mask" and at.query_params["mask"] == "main:0:2048"
    at.selectbox(key="scenario").set_value("engine_refusal_ended.json")
    rerun(at, "Call tree")
    assert at.query_params["src"] == "sample:engine_refusal_ended.json"


def test_a_link_restores_source_rollout_call_tab_anchor_and_mask_window(monkeypatch):
    at = open_app(monkeypatch, query={"src": "sample:final_retry_unresolved.json", "call": "call-0002",
                                      "tab": "verdicts", "anchor": "call-0004"})
    assert at.selectbox(key="scenario").value == "final_retry_unresolved.json"
    assert at.session_state["tab"] == "Verdicts"
    assert "**Trainable" in verdict(at)  # anchored on call-0004
    assert any("anchored on call\\-0004" in c.value for c in at.caption)
    rerun(at, "Call tree")
    assert picked(at) == "call:call-0002"
    assert any(m.value.startswith("#### call\\-0002") for m in at.markdown)  # a link names a call: its detail
    # A path source, a rollout among several, a page of the loss mask.
    store = str(SAMPLES / "capture_store")
    at = open_app(monkeypatch, query={"src": store, "rollout": "store-interrupted", "tab": "mask"})
    assert heading(at) == "### store\\-interrupted"
    assert at.query_params["src"] == store
    long = str(SAMPLES / "long_rollout_delta.json")
    at = open_app(monkeypatch, query={"src": long, "tab": "mask", "mask": "main:4096:2048"})
    assert any(c.value.startswith("Positions 4,096–6,143") for c in at.caption)
    assert at.query_params["mask"] == "main:4096:2048"


def test_a_rerun_that_carries_the_previous_url_keeps_the_tab_the_user_chose(monkeypatch):
    """On a busy machine the browser can send a rerun (a tab click) before the URL the page wrote
    last reached it: the late query string is the page's own earlier URL, not a new link."""
    link = {"src": "sample:final_retry_unresolved.json", "call": "call-0002", "tab": "verdicts",
            "anchor": "call-0004"}
    at = open_app(monkeypatch, query=link)
    assert at.query_params["rollout"] == "final-retry-unresolved"  # the page wrote the rollout in
    at.query_params.clear()
    at.query_params.update(link)  # ... but the click left the browser before that update arrived
    rerun(at, "Call tree")
    assert at.session_state["tab"] == "Call tree"
    assert at.query_params["tab"] == "tree" and picked(at) == "call:call-0002"


def test_links_that_do_not_fit_are_ignored_and_other_pages_keys_are_kept(monkeypatch):
    at = open_app(monkeypatch, query={"src": "sample:no-such-sample", "call": "nope", "tab": "bogus",
                                      "mask": "main:x:y", "run_id": "r7"})
    assert not at.exception
    assert at.selectbox(key="scenario").value == "subagent_branch.json"
    assert picked(at) == "call:call-0003"  # an unknown call falls back to the first culprit
    assert at.query_params["run_id"] == "r7"
    assert at.query_params["src"] == "sample:subagent_branch.json"


def test_copy_link_shows_the_url_and_says_uploads_cannot_be_shared(monkeypatch):
    at = open_app(monkeypatch)
    assert not [c for c in at.code if "src=sample" in c.value]  # filled only while open
    at.session_state["share"] = True  # opened
    rerun(at)
    share = next(c.value for c in at.code if "src=sample" in c.value)
    assert "call=call-0003" in share and "tab=tree" in share
    assert not any("can't be in a URL" in w.value for w in at.warning)
    upload(at, ("sink.json", kitchen_sink().json_bytes()))
    assert "src" not in at.query_params and at.query_params["rollout"] == "kitchen-sink"
    assert any("Uploaded files can't be in a URL" in w.value for w in at.warning)


# --------------------------------------------------------------------------- long rollouts


def test_a_long_rollout_has_an_overview_a_zoomed_window_that_stays_and_a_search_box(monkeypatch, tmp_path):
    from synth_snapshots import long_linear

    path = tmp_path / "long.json"
    path.write_bytes(long_linear(300).json_bytes())
    at = open_app(monkeypatch, str(path))
    assert tree_charts(at) == ["call tree overview", "call tree"]
    rk = rollout_keys(src.source_from_path(path))[0]
    window_key = f"tree_window:{rk}:None"
    first = tuple(at.session_state[window_key])
    assert first[1] - first[0] == 29  # 30 rows
    # Choose other rows (calls in call order) with the slider: the window stays there across reruns.
    at.slider(key=f"tree_window_w:{rk}:None").set_value((100, 130))
    rerun(at)
    assert tuple(at.session_state[window_key]) == (100, 130)
    rerun(at, "Verdicts")
    rerun(at, "Call tree")
    assert tuple(at.session_state[window_key]) == (100, 130)
    # Selecting a call inside the window keeps it; searching one outside moves it there.
    at.text_input(key=f"find:{rk}").input("m00110")
    rerun(at)
    assert picked(at) == "call:m00110" and tuple(at.session_state[window_key]) == (100, 130)
    assert "scroll_detail" not in at.session_state  # it was taken: the detail was scrolled to
    at.text_input(key=f"find:{rk}").input("m0025")
    rerun(at)
    assert picked(at) == "call:m00250"
    window = tuple(at.session_state[window_key])
    from tokencap.views import RolloutView
    from tokencap.views.rollout import tree as tv
    order = tv.tree_of(RolloutView(long_linear(300).snapshot())).node("call:m00250").order
    assert window[0] <= order <= window[1] and window[1] - window[0] == 30
    assert any("matches for" in c.value for c in at.caption)
    at.text_input(key=f"find:{rk}").input("no-such-call")
    rerun(at)
    assert picked(at) == "call:m00250" and any("No call id contains" in c.value for c in at.caption)


def test_a_click_inside_the_zoomed_window_sends_the_same_overview(monkeypatch, tmp_path):
    """The overview's figure depends on the window alone: a selection that keeps the window leaves its
    spec (and so its element id) unchanged, and the browser keeps it as drawn instead of re-plotting
    1,500 dots; a selection that moves the window changes it."""
    from synth_snapshots import long_linear

    path = tmp_path / "long.json"
    path.write_bytes(long_linear(300).json_bytes())
    at = open_app(monkeypatch, str(path))

    def overview() -> tuple[dict, str]:
        return tree_spec(at, "call tree overview")

    rk = rollout_keys(src.source_from_path(path))[0]
    window = tuple(at.session_state[f"tree_window:{rk}:None"])
    before = overview()
    inside = f"call:m{window[0] + 3:05d}"
    next(s for s in at.selectbox if s.key.startswith("pick:")).set_value(inside)
    rerun(at)
    assert picked(at) == inside and tuple(at.session_state[f"tree_window:{rk}:None"]) == window
    assert overview() == before
    next(s for s in at.selectbox if s.key.startswith("pick:")).set_value("call:m00010")
    rerun(at)
    assert overview() != before


def test_selecting_a_call_scrolls_its_detail_into_view(monkeypatch):
    at = open_app(monkeypatch, str(SAMPLES / "stale_parent_link.json"))
    assert not [h for h in at.get("html") if "scrollIntoView" in h.proto.body]  # nothing chosen yet
    next(s for s in at.selectbox if s.key.startswith("pick:")).set_value("call:call-0002")
    rerun(at)
    scripts = [h for h in at.get("html") if "scrollIntoView" in h.proto.body]
    assert len(scripts) == 1 and scripts[0].proto.unsafe_allow_javascript
    rerun(at)  # a rerun for another reason does not scroll again
    assert not [h for h in at.get("html") if "scrollIntoView" in h.proto.body]


# --------------------------------------------------------------------------- exports of any size


def test_the_exports_are_sized_once_per_rollout_and_anchor_with_progress(monkeypatch):
    from tokencap.views.rollout import export as ev

    sized: list[str] = []
    estimate = ev._response_estimate

    def counting(response, report=None):
        sized.append(response["id"] if "id" in response else "?")
        return estimate(response, report)

    monkeypatch.setattr(ev, "_response_estimate", counting)
    # The built views (and the sizes kept on them) are server-wide: an earlier test in this
    # process may have sized this very rollout.
    st.cache_resource.clear()
    at = open_app(monkeypatch, str(SAMPLES / "long_rollout_delta.json"), tab="Export")
    assert len(sized) == 1
    for tab in ("Call tree", "Export", "Export"):
        rerun(at, tab)
    assert len(sized) == 1  # every later visit and rerun reuses the sizes
    next(s for s in at.selectbox if s.key.startswith("anchor_w:")).set_value("call-0100")
    rerun(at)
    assert len(sized) == 2  # another anchor is another build: sized once more


def test_a_bigger_export_is_prepared_with_progress_then_downloads_by_itself(monkeypatch, downloads, tmp_path):
    from tokencap.views.rollout import export as ev

    reporters: list[object] = []
    real = ev.render

    def spy(view, kind, report=None):
        reporters.append(report)
        return real(view, kind, report)

    monkeypatch.setattr(ev, "render", spy)
    monkeypatch.setattr(ev, "NOW_BYTES", 100)  # every file of the sample counts as big
    source = SAMPLES / "subagent_branch.json"
    at = open_app(monkeypatch, str(source), tab="Export")
    assert "subagent-branch.result.json" not in downloads and not reporters  # nothing rendered before it is asked
    prepare = next(b for b in at.button if b.key.startswith("prep:") and b.key.endswith(":result"))
    assert prepare.label == "Build result JSON" and prepare.help.startswith("about ")
    prepare.click()
    rerun(at)
    assert downloads["subagent-branch.result.json"]() == cli_build(source, tmp_path=tmp_path)
    assert len(reporters) == 1 and callable(reporters[0])  # rendered once, driving the progress bar
    links = [h.proto.body for h in at.get("html") if h.proto.body.startswith("<a class=\"tc-download\"")]
    assert len(links) == 1 and 'download="subagent-branch.result.json"' in links[0] and "/media/" in links[0]
    clicks = [h for h in at.get("html") if "<script>" in h.proto.body and "a.tc-download" in h.proto.body]
    assert len(clicks) == 1 and clicks[0].proto.unsafe_allow_javascript
    rerun(at)  # the link stays; the download does not start again by itself
    assert [h for h in at.get("html") if h.proto.body.startswith("<a class=\"tc-download\"")]
    assert not [h for h in at.get("html") if "<script>" in h.proto.body and "a.tc-download" in h.proto.body]


def test_an_export_too_big_for_the_browser_is_written_to_disk_with_progress(monkeypatch, tmp_path):
    monkeypatch.setenv("TOKENCAP_DOWNLOAD_LIMIT", "100")
    source = SAMPLES / "subagent_branch.json"
    at = open_app(monkeypatch, str(source), tab="Export")
    assert not at.download_button  # nothing goes through the browser
    at.text_input(key="export_dir").input(str(tmp_path / "out"))
    rerun(at)
    next(b for b in at.button if b.key.startswith("disk:") and b.key.endswith(":result")).click()
    rerun(at)
    written = tmp_path / "out" / "subagent-branch.result.json"
    assert written.read_bytes() == cli_build(source, tmp_path=tmp_path)
    assert any(c.value == str(written) for c in at.code)
    assert any(f"-o {written}" in c.value and "tokencap build" in c.value for c in at.code)
    assert any(p.value == 100 and p.text.startswith("wrote ") for p in at.get("progress"))
    assert not list((tmp_path / "out").glob(".*.part"))  # written atomically: no temporary file left
    # A directory that cannot be written is an error in the page, not a traceback.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    at.text_input(key="export_dir").input(str(blocker / "sub"))
    rerun(at)
    next(b for b in at.button if b.key.startswith("disk:") and b.key.endswith(":response")).click()
    rerun(at)
    assert any("Could not write" in e.value for e in at.error)


# --------------------------------------------------------------------------- compare two builds


def test_compare_two_anchors_reports_every_change_and_draws_the_first_difference(monkeypatch):
    at = open_app(monkeypatch, str(SAMPLES / "engine_refusal_ended.json"), tab="Compare")
    rk = rollout_keys(src.source_from_path(SAMPLES / "engine_refusal_ended.json"))[0]
    assert at.selectbox(key=f"cmp_a:{rk}").value == ""  # no anchor
    assert at.selectbox(key=f"cmp_b:{rk}").value == "call-0002"  # one call before the end
    changes = next(m.value for m in at.markdown if m.value.startswith("- "))
    # The verdict stays trainable, and the status flip is reported all the same.
    assert "verdict\\:" not in changes
    assert "response status\\: incomplete \\(max\\_output\\_tokens\\) → completed" in changes
    assert "anchor\\: none → call\\-0002" in changes
    table = next(t.value for t in at.table if "what" in t.value.columns)
    row = table[table["what"] == "response status"].iloc[0]
    assert row["changed"] == "✱" and row.iloc[1].startswith("incomplete") and row.iloc[2] == "completed"
    assert not at.get("plotly_chart")
    (chart,) = [spec for spec in (json.loads(c.proto.spec) for c in at.get("vega_lite_chart"))
                if spec.get("description") == "delivered sequences compared"]
    rows = chart["layer"][0]["layer"][0]["encoding"]["y"]["sort"]
    assert rows[:2] == ["A (no anchor)", "B (anchored on call-0002)"]
    assert chart["layer"][0]["layer"][1]["data"]["values"][0]["label"].startswith("first difference at ")
    assert any("B\\'s delivered sequence" in c.value and "is the start of" in c.value for c in at.caption)


def test_compare_two_captures_of_one_rollout(monkeypatch):
    at = open_app(monkeypatch, tab="Compare")
    first, second = Capture("same-rollout", seed=3), Capture("same-rollout", seed=3)
    for c in (first, second):
        c.call("c1", new=10)
        c.call("c2", "c1")
    second.call("c3", "c2")  # a later capture: one more call
    at.session_state["tab"] = "Compare"
    upload(at, ("v1.json", first.json_bytes()), ("v2.json", second.json_bytes()))
    modes = next(r for r in at.radio if r.key.startswith("cmp_mode:"))
    modes.set_value("Two captures of this rollout")
    rerun(at)
    changes = next(m.value for m in at.markdown if m.value.startswith("- "))
    assert "n\\_calls\\: 2 → 3" in changes and "delivered calls\\: 2 → 3" in changes
    assert any("A\\'s delivered sequence" in c.value and "is the start of" in c.value for c in at.caption)
    # With a single capture loaded, the page says how to get a second one.
    at = open_app(monkeypatch, tab="Compare")
    next(r for r in at.radio if r.key.startswith("cmp_mode:")).set_value("Two captures of this rollout")
    rerun(at)
    assert any("Only one capture" in i.value for i in at.info)


def test_a_link_naming_a_second_capture_opens_the_compare_tab_on_the_two(monkeypatch):
    """``vs_src`` / ``vs_rollout`` (the Run page's comparison, or a shared link): both captures load,
    and the Compare tab opens on them even when their rollout ids differ (a task join)."""
    from tokencap.views.links import open_rollout_params

    at = open_app(monkeypatch, query=open_rollout_params("sample:length_stop.json", "length-stop",
                                                         vs_src="sample:subagent_branch.json",
                                                         vs_rollout="subagent-branch"))
    assert heading(at) == "### length\\-stop"
    assert at.session_state["tab"] == "Compare"
    mode = next(r for r in at.radio if r.key.startswith("cmp_mode:"))
    assert mode.value == "Two captures of this rollout"
    other = next(s for s in at.selectbox if s.key.startswith("cmp_other:"))
    assert "subagent_branch.json" in other.format_func(other.value)
    assert any(m.value == "**What changes from A to B**" for m in at.markdown)
    assert at.query_params["vs_src"] == "sample:subagent_branch.json" and at.query_params["tab"] == "compare"


def test_query_parameters_set_by_another_page_open_that_rollout(monkeypatch):
    """What the Run page does (`st.switch_page(..., query_params=open_rollout_params(...))`): new
    parameters in a running session are applied like a fresh link."""
    from tokencap.views.links import open_rollout_params

    at = open_app(monkeypatch)
    assert heading(at) == "### subagent\\-branch"
    at.query_params.clear()
    at.query_params.update(open_rollout_params(str(SAMPLES / "capture_store"), "store-interrupted",
                                               call="call-0003", tab="tree"))
    rerun(at)
    assert heading(at) == "### store\\-interrupted"
    assert picked(at) == "call:call-0003"
    assert at.query_params["src"] == str(SAMPLES / "capture_store")


def test_only_the_open_tab_is_computed(monkeypatch):
    """A tab's body runs only while it is shown: the loss mask's strip and the verdicts' finish-reason
    table are built by the tab that shows them, never while another tab is open."""
    from collections import Counter

    from tokencap.views.rollout import mask_chart as mc
    from tokencap.views.rollout import verdicts as vv

    built: Counter[str] = Counter()
    for module, name in ((mc, "strip_chart"), (vv, "finish_reason_frame")):
        original = getattr(module, name)

        def counted(*a, _original=original, _name=name, **k):
            built[_name] += 1
            return _original(*a, **k)

        monkeypatch.setattr(module, name, counted)
    at = open_app(monkeypatch, tab="Call tree", query={"src": "sample:final_retry_unresolved.json"})
    assert not built["strip_chart"] and not built["finish_reason_frame"]
    rerun(at, tab="Loss mask")
    assert built["strip_chart"] == 1 and not built["finish_reason_frame"]
    rerun(at, tab="Verdicts")
    assert built["strip_chart"] == 1 and built["finish_reason_frame"] == 1


def test_the_multi_rollout_sample_opens_on_its_first_rollout_in_rollout_id_order(monkeypatch):
    at = open_app(monkeypatch)
    at.selectbox(key="scenario").set_value("multi_rollout_entries.jsonl")
    rerun(at)
    assert heading(at) == "### jsonl\\-clean"
    assert [o.split(" · ")[-1] for o in at.selectbox(key="rollout").options] == [
        "jsonl-clean", "jsonl-parameter-refusal", "jsonl-refusal-ended"]


def test_the_tree_tabs_legend_and_node_table_are_built_only_when_opened(monkeypatch):
    """Closed, the "What the marks mean" legend and the table of every node are neither built nor sent
    with each click in the tree; opening the table shows every node."""
    from collections import Counter

    from tokencap.views.rollout import tree as tv

    built: Counter[str] = Counter()
    for name in ("nodes_frame", "legend_frame"):
        original = getattr(tv, name)

        def counted(*a, _original=original, _name=name, **k):
            built[_name] += 1
            return _original(*a, **k)

        monkeypatch.setattr(tv, name, counted)
    at = open_app(monkeypatch, tab="Call tree")
    assert not built
    label = next(e.label for e in at.expander if e.label.startswith("All ") and "nodes as a table" in e.label)
    count = int(label.split()[1].replace(",", ""))
    assert not [d for d in at.dataframe if len(d.value) == count and "key" not in d.value.columns]
    rk = next(iter(at.session_state["selected"]))
    at.session_state[f"nodes_open:{rk}"] = True  # opened
    rerun(at)
    assert built["nodes_frame"] == 1 and not built["legend_frame"]
    assert [d for d in at.dataframe if len(d.value) == count]


def test_figures_are_built_once_per_view_and_what_they_show(monkeypatch, tmp_path):
    """A rerun that draws the same tree, overview or loss-mask figures (a click elsewhere, a tab visited
    again) takes them from the session instead of building them again; what a figure shows changing (the
    selected call) builds that figure anew, and only it."""
    from collections import Counter

    from synth_snapshots import long_linear

    from tokencap.views.rollout import mask_chart as mc
    from tokencap.views.rollout import tree as tv

    built: Counter[str] = Counter()
    for module, name in ((tv, "tree_chart"), (tv, "overview_chart"), (mc, "strip_chart")):
        original = getattr(module, name)

        def counted(*a, _original=original, _name=name, **k):
            built[_name] += 1
            return _original(*a, **k)

        monkeypatch.setattr(module, name, counted)
    path = tmp_path / "long.json"
    path.write_bytes(long_linear(300).json_bytes())
    at = open_app(monkeypatch, str(path))
    assert built == {"tree_chart": 1, "overview_chart": 1}
    rerun(at)
    rerun(at, "Loss mask")
    rerun(at, "Call tree")
    rerun(at, "Loss mask")
    assert built == {"tree_chart": 1, "overview_chart": 1, "strip_chart": 1}  # the log-probs are closed
    rerun(at, "Call tree")
    rk = rollout_keys(src.source_from_path(path))[0]
    window = tuple(at.session_state[f"tree_window:{rk}:None"])
    next(s for s in at.selectbox if s.key.startswith("pick:")).set_value(f"call:m{window[0] + 3:05d}")
    rerun(at)
    assert built["tree_chart"] == 2 and built["overview_chart"] == 1  # the window stays: the same overview
