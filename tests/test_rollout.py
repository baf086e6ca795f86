"""docs/contract.md#rollout: rollout assembly — mask reasons, metrics, model fallback, finish-reason twins."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from helpers import Conv, linear_chain, make_refusal

from tokencap import TokenCaptureSnapshot, build_rollout, compute_digest

ORDER = ["load_error", "capture_incomplete", "no_records", "build_error", "unresolved_retries",
         "unresolved_parent_calls", "multiple_roots", "multiple_chains", "no_generated_tokens",
         "terminal_call_not_delivered"]

METRIC_KEYS = {"n_calls", "chains", "roots", "quarantined_calls", "quarantined_fraction", "delivered_fraction",
               "generated_tokens_captured", "generated_tokens_delivered", "parent_link_failures",
               "unresolved_parent_calls", "empty_generation_calls", "after_terminal_calls", "engine_refusals",
               "capture_incomplete", "status", "incomplete_reason", "error"}


def snap(conv_or_entries, *, refusals=(), incomplete=False, rollout_id="r1", load_error=None):
    entries = conv_or_entries.entries() if isinstance(conv_or_entries, Conv) else list(conv_or_entries)
    return TokenCaptureSnapshot(rollout_id=rollout_id, entries=entries, engine_refusals=list(refusals),
                                incomplete=incomplete, load_error=load_error)


def run(conv_or_entries, terminal=None, model="", **kw):
    return build_rollout(snap(conv_or_entries, **kw), terminal_call_id=terminal, model=model)


def check_consistent(r) -> None:
    assert r["mask_sample"] is bool(r["mask_reasons"])
    assert r["mask_reasons"] == sorted(r["mask_reasons"], key=ORDER.index)
    assert len(set(r["mask_reasons"])) == len(r["mask_reasons"])


# =========================================================================== result shape


def test_clean_rollout_is_trainable() -> None:
    r = run(linear_chain(3))
    check_consistent(r)
    assert r["rollout_id"] == "r1"
    assert r["mask_sample"] is False and r["mask_reasons"] == []
    assert r["rebuilt_response"]["status"] == "completed"
    assert r["rebuilt_response"]["id"] == "proj-r1"
    assert r["build"] is not None and r["build"].chains[0].chain_id == "main"


def test_metrics_keys_and_values() -> None:
    conv = Conv()
    conv.root("call-r", gen_len=2)
    conv.child("call-a", "call-r", gen_len=4)
    conv.retry("call-b", "call-a", gen_len=4)          # rule d: call-b quarantined
    conv.child("call-e", "call-r", gen=[])             # empty
    conv.child("call-u", "call-r", resolution="unresolved", gen_len=1)
    entries = conv.entries() + conv.entries(["call-a"])  # a duplicate copy
    r = run(entries, refusals=[make_refusal("x1", code=None), make_refusal("x2", parent="call-r")])
    m = r["metrics"]
    assert METRIC_KEYS <= set(m), sorted(METRIC_KEYS - set(m))
    assert m["n_calls"] == 5
    assert m["chains"] == 2 and m["roots"] == 2
    assert m["quarantined_calls"] == 1
    assert m["quarantined_fraction"] == 0.2
    assert m["generated_tokens_captured"] == 2 + 4 + 4 + 1
    assert m["generated_tokens_delivered"] == 6
    assert m["delivered_fraction"] == round(6 / 11, 4)
    assert m["parent_link_failures"] == {"parent_unresolved": 1}
    assert m["unresolved_parent_calls"] == 1
    assert m["empty_generation_calls"] == 1
    assert m["after_terminal_calls"] == 0
    assert m["engine_refusals"] == 2
    assert m["capture_incomplete"] is False
    assert m["status"] == "completed" and m["incomplete_reason"] is None
    assert m["error"] is None
    assert r["mask_reasons"] == ["unresolved_retries", "unresolved_parent_calls", "multiple_roots",
                                 "multiple_chains"]


def test_quarantined_fraction_rounds_over_n_calls() -> None:
    conv = Conv()
    conv.root("call-r")
    conv.child("call-a1", "call-r")
    conv.retry("call-a2", "call-a1", twin=True)
    m = run(conv)["metrics"]
    assert m["n_calls"] == 3 and m["quarantined_calls"] == 1
    assert m["quarantined_fraction"] == 0.3333


def test_n_calls_counts_distinct_ids_including_excluded_and_empty() -> None:
    conv = linear_chain(3)
    conv.child("call-e", "call-0003", gen=[])
    conv.root("call-bad")
    conv.record("call-bad")["digest"] = compute_digest([3])
    entries = conv.entries() + conv.entries(["call-0001", "call-bad"])
    m = run(entries)["metrics"]
    assert m["n_calls"] == 5


def test_after_terminal_calls_metric_and_terminal_passthrough() -> None:
    r = run(linear_chain(4), terminal="call-0002")
    assert r["metrics"]["after_terminal_calls"] == 2
    assert r["mask_reasons"] == []
    assert len(r["rebuilt_response"]["output"]) == 2
    assert r["build"].notes.terminal_chain == "main"


# =========================================================================== mask reasons, one by one


def test_capture_incomplete_still_builds() -> None:
    r = run(linear_chain(2), incomplete=True)
    assert r["mask_reasons"] == ["capture_incomplete"]
    assert r["mask_sample"] is True
    assert r["rebuilt_response"] is not None and r["build"] is not None
    assert r["metrics"]["capture_incomplete"] is True
    assert r["metrics"]["status"] == "completed"


def test_unresolved_retries_reason() -> None:
    conv = Conv()
    conv.root("call-r")
    conv.child("call-a1", "call-r")
    conv.retry("call-a2", "call-a1")
    r = run(conv)
    assert r["mask_reasons"] == ["unresolved_retries"]
    assert r["rebuilt_response"] is not None


def test_unresolved_parent_calls_reason_alone() -> None:
    conv = linear_chain(3)
    conv.record("call-0003")["cum_len"] += 1   # corrupt leaf: excluded
    r = run(conv)
    assert r["mask_reasons"] == ["unresolved_parent_calls"]
    assert r["metrics"]["unresolved_parent_calls"] == 1


def test_duplicate_conflict_masks() -> None:
    conv = linear_chain(2)
    dup = dict(conv.record("call-0002"))
    dup["generation_log_probs"] = [-3.0, -3.0, -3.0]
    from tokencap import TokenEntry
    r = run(conv.entries() + [TokenEntry.from_dict(dup)])
    assert r["mask_reasons"] == ["unresolved_parent_calls"]
    assert r["metrics"]["parent_link_failures"] == {"duplicate_call_id_conflict": 1}


def test_recovered_parent_does_not_mask() -> None:
    conv = Conv()
    conv.root("call-1")
    conv.child("call-2", "call-1", gen=[])
    conv.child("call-3", "call-2")
    r = run(conv)
    assert r["mask_reasons"] == []
    assert r["metrics"]["parent_link_failures"] == {"parent_call_id_missing_recovered": 1}
    assert r["metrics"]["unresolved_parent_calls"] == 0


def test_multiple_roots_and_chains_reasons() -> None:
    conv = linear_chain(2)
    conv.root("call-new")  # compaction: a fresh root
    r = run(conv)
    assert r["mask_reasons"] == ["multiple_roots", "multiple_chains"]


def test_multiple_chains_reason_alone() -> None:
    conv = Conv()
    conv.root("call-r")
    conv.child("call-a", "call-r")
    conv.child("call-b", "call-r")
    assert run(conv)["mask_reasons"] == ["multiple_chains"]


def test_unresolved_boundary_reasons() -> None:
    conv = linear_chain(2)
    conv.child("call-3", "call-0002", resolution="unresolved")
    assert run(conv)["mask_reasons"] == ["unresolved_parent_calls", "multiple_roots", "multiple_chains"]


def test_no_generated_tokens_reason() -> None:
    conv = Conv()
    conv.root("call-1", gen=[])
    r = run(conv)
    assert r["mask_reasons"] == ["no_generated_tokens"]
    assert r["rebuilt_response"] is None
    assert r["metrics"]["empty_generation_calls"] == 1
    assert r["metrics"]["status"] is None and r["metrics"]["incomplete_reason"] is None


@pytest.mark.parametrize("terminal", ["call-nope", "call-a1"])
def test_terminal_call_not_delivered_reason(terminal: str) -> None:
    conv = Conv()
    conv.root("call-r")
    conv.child("call-a1", "call-r")
    conv.retry("call-a2", "call-a1")
    conv.child("call-b", "call-a2")   # a2 extended: a1 (if named) loses and is quarantined
    r = run(conv, terminal=terminal)
    assert r["mask_reasons"] == ["terminal_call_not_delivered"]
    assert r["rebuilt_response"] is not None


def test_terminal_twin_anchor_move_delivers() -> None:
    conv = Conv()
    conv.root("call-r")
    conv.child("call-a1", "call-r")
    conv.retry("call-a2", "call-a1", twin=True)
    conv.child("call-b", "call-a1")
    r = run(conv, terminal="call-a2")
    assert r["mask_reasons"] == []
    assert r["build"].notes.terminal_call_id == "call-a1"


def test_all_reasons_in_order() -> None:
    conv = Conv()
    conv.root("call-r")
    conv.child("call-a1", "call-r")
    conv.retry("call-a2", "call-a1")
    conv.child("call-u", "call-r", resolution="unresolved")
    r = run(conv, terminal="call-nope", incomplete=True)
    assert r["mask_reasons"] == ["capture_incomplete", "unresolved_retries", "unresolved_parent_calls",
                                 "multiple_roots", "multiple_chains", "terminal_call_not_delivered"]
    check_consistent(r)


# =========================================================================== not built


@pytest.mark.parametrize("incomplete", [True, False])
def test_load_error_short_circuits(incomplete: bool) -> None:
    s = TokenCaptureSnapshot(rollout_id="broken", entries=linear_chain(2).entries(), incomplete=incomplete,
                             load_error="broken.jsonl, line 3: bad")
    r = build_rollout(s)
    assert r["mask_reasons"] == (["load_error", "capture_incomplete"] if incomplete else ["load_error"])
    assert r["mask_sample"] is True
    assert r["rebuilt_response"] is None and r["build"] is None
    assert r["metrics"]["error"] == "broken.jsonl, line 3: bad"
    assert r["metrics"]["capture_incomplete"] is incomplete
    assert r["metrics"]["status"] is None and r["metrics"]["incomplete_reason"] is None
    assert r["rollout_id"] == "broken"


@pytest.mark.parametrize("incomplete", [True, False])
def test_no_records_short_circuits(incomplete: bool) -> None:
    s = TokenCaptureSnapshot(rollout_id="empty", entries=[], incomplete=incomplete,
                             engine_refusals=[make_refusal("x", rollout_id="empty")])
    r = build_rollout(s, terminal_call_id="call-1")
    assert r["mask_reasons"] == (["capture_incomplete", "no_records"] if incomplete else ["no_records"])
    assert r["rebuilt_response"] is None and r["build"] is None
    assert r["metrics"]["n_calls"] == 0
    assert r["metrics"]["engine_refusals"] == 1
    assert r["metrics"]["error"] is None


@pytest.mark.parametrize("bad", [SimpleNamespace(model_call_id="call-weird"),
                                 None, "not an entry"],
                         ids=["namespace", "none", "str"])
def test_build_error_never_raises(bad) -> None:
    entries = linear_chain(2).entries() + [bad]
    s = TokenCaptureSnapshot(rollout_id="r1", entries=entries)
    r = build_rollout(s)
    assert r["mask_reasons"] == ["build_error"]
    assert r["mask_sample"] is True
    assert r["rebuilt_response"] is None and r["build"] is None
    assert isinstance(r["metrics"]["error"], str) and r["metrics"]["error"]


def test_malformed_refusal_record_does_not_raise() -> None:
    s = TokenCaptureSnapshot(rollout_id="r1", entries=linear_chain(2).entries(),
                             engine_refusals=[SimpleNamespace(model_call_id="x")])
    r = build_rollout(s)
    assert r["rollout_id"] == "r1"
    assert r["metrics"]["engine_refusals"] == 1


def test_build_error_with_incomplete_capture() -> None:
    s = TokenCaptureSnapshot(rollout_id="r1", entries=[SimpleNamespace(model_call_id="x")], incomplete=True)
    r = build_rollout(s)
    assert r["mask_reasons"] == ["capture_incomplete", "build_error"]


# =========================================================================== model, status


def test_model_falls_back_to_the_delivered_last_call() -> None:
    conv = Conv()
    conv.root("call-1", model="policy-A")
    conv.child("call-2", "call-1", model="policy-B")
    conv.child("call-side", "call-1", model="policy-C", created_at=0.5)  # earlier leaf: a branch
    r = run(conv)
    assert r["rebuilt_response"]["model"] == "policy-B"
    assert run(conv, model="override")["rebuilt_response"]["model"] == "override"


def test_model_follows_the_terminal_call() -> None:
    conv = Conv()
    conv.root("call-1", model="policy-A")
    conv.child("call-2", "call-1", model="policy-B")
    assert run(conv, terminal="call-1")["rebuilt_response"]["model"] == "policy-A"


def test_refusal_that_ended_the_chain_sets_status() -> None:
    conv = linear_chain(2)
    r = run(conv, refusals=[make_refusal("call-3", parent="call-0002", recorded_at=50.0)])
    assert r["mask_reasons"] == []
    assert r["rebuilt_response"]["status"] == "incomplete"
    assert r["metrics"]["status"] == "incomplete"
    assert r["metrics"]["incomplete_reason"] == "max_output_tokens"
    assert r["metrics"]["engine_refusals"] == 1


def test_null_code_refusal_is_only_counted() -> None:
    r = run(linear_chain(2), refusals=[make_refusal("call-3", parent="call-0002", code=None, recorded_at=50.0)])
    assert r["metrics"]["status"] == "completed"
    assert r["metrics"]["engine_refusals"] == 1


def _twins(reason_kept, reason_other, refusal=None):
    conv = Conv()
    conv.root("call-1", finish_reason="tool_calls")
    conv.child("call-2", "call-1", finish_reason=reason_kept)
    conv.retry("call-3", "call-2", twin=True, finish_reason=reason_other)
    return run(conv, refusals=[refusal] if refusal else [])


@pytest.mark.parametrize(("kept", "other", "status", "reason"), [
    ("length", "length", "incomplete", "max_output_tokens"),
    ("content_filter", "content_filter", "incomplete", "content_filter"),
    ("length", "stop", "completed", None),
    ("stop", "length", "completed", None),
    ("length", None, "completed", None),
    (None, "content_filter", "completed", None),
    (None, None, "completed", None),
    ("stop", "stop", "completed", None),
])
def test_finish_reason_is_withheld_when_twins_disagree(kept, other, status, reason) -> None:
    r = _twins(kept, other)
    assert r["build"].quarantined == ["call-3"]
    assert r["mask_reasons"] == []
    assert r["metrics"]["status"] == status
    assert r["metrics"]["incomplete_reason"] == reason
    assert r["rebuilt_response"]["status"] == status


def test_disagreeing_twins_do_not_withhold_a_refusal() -> None:
    r = _twins("stop", "length", refusal=make_refusal("call-4", parent="call-3", recorded_at=99.0))
    assert r["metrics"]["status"] == "incomplete"
    assert r["metrics"]["incomplete_reason"] == "max_output_tokens"


def test_a_non_twin_retry_does_not_withhold_the_verdict() -> None:
    conv = Conv()
    conv.root("call-1")
    conv.child("call-2", "call-1", finish_reason="length")
    conv.retry("call-3", "call-2", finish_reason="stop")   # different tokens: not a twin
    r = run(conv, terminal="call-2")
    assert r["mask_reasons"] == []
    assert r["metrics"]["status"] == "incomplete"
    assert r["metrics"]["incomplete_reason"] == "max_output_tokens"


def test_a_twin_outside_the_retry_group_still_counts() -> None:
    # call-u repeats call-2's request token for token but its lineage was lost (unresolved):
    # it is a twin of the delivered last call all the same (identical full sequence).
    conv = Conv()
    conv.root("call-1")
    conv.child("call-2", "call-1", finish_reason="length")
    conv.retry("call-u", "call-2", twin=True, resolution="unresolved", parent=None, finish_reason="stop")
    r = run(conv)
    assert r["mask_reasons"] == ["unresolved_parent_calls", "multiple_roots", "multiple_chains"]
    assert [link.entry.model_call_id for link in r["build"].chains[0].links] == ["call-1", "call-2"]
    assert r["metrics"]["status"] == "completed"
    refused = run(conv, refusals=[make_refusal("x", parent="call-u", recorded_at=99.0)])
    assert refused["metrics"]["incomplete_reason"] == "max_output_tokens"


def test_excluded_or_empty_calls_are_not_twins() -> None:
    conv = Conv()
    conv.root("call-1")
    conv.child("call-2", "call-1", finish_reason="length")
    conv.retry("call-3", "call-2", twin=True, finish_reason="stop", cum_len=1)     # corrupt: excluded
    conv.child("call-4", "call-2", inter=[], gen=[], finish_reason="stop")         # same sequence, no generation
    r = run(conv, terminal="call-2")
    assert r["build"].notes.empty_generation_calls == ["call-4"]
    assert "call-3" not in r["build"].entries
    assert r["metrics"]["status"] == "incomplete"
    assert r["metrics"]["incomplete_reason"] == "max_output_tokens"


# =========================================================================== scan builds (no payload)


def test_unprojected_build_has_every_verdict_and_metric_of_the_projected_one() -> None:
    # A scan row reads the verdict and metrics only; `project=False` skips the payload and
    # must change nothing else, on every situation of the bundled sample run.
    from pathlib import Path

    from tokencap.loading import iter_snapshots

    run_dir = Path(__file__).resolve().parent.parent / "sample_data" / "run"
    statuses = set()
    for snapshot in iter_snapshots(run_dir):
        full, bare = build_rollout(snapshot), build_rollout(snapshot, project=False)
        assert bare.payload is None and bare.rebuilt_response is None
        assert (bare.mask_sample, bare.mask_reasons, bare.metrics) == (full.mask_sample, full.mask_reasons,
                                                                        full.metrics), snapshot.rollout_id
        statuses.add((full.metrics["status"], full.metrics["incomplete_reason"]))
    assert {("completed", None), ("incomplete", "max_output_tokens"), (None, None)} <= statuses


def test_a_delta_rebuild_does_not_validate_its_records_again(monkeypatch) -> None:
    # Records are validated once, when loaded; a delta record given its rebuilt full prompt
    # is the same record with other token arrays, not a new record to check.
    from tokencap.records import TokenEntry

    conv = Conv()
    conv.root("c1")
    conv.child("c2", "c1", delta=True)
    conv.child("c3", "c2", delta=True)
    snapshot = snap(conv)
    checks = []
    real = TokenEntry.__post_init__
    monkeypatch.setattr(TokenEntry, "__post_init__", lambda self: checks.append(self.model_call_id) or real(self))
    result = build_rollout(snapshot)
    assert not result.mask_sample and result.metrics["n_calls"] == 3
    assert result.build.entries["c3"].prompt_is_delta is False
    assert result.build.entries["c3"].prompt_token_ids.tolist() == conv.full["c2"] + conv.records[2]["prompt_token_ids"]
    assert checks == []
