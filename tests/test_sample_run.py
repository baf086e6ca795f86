"""The bundled sample run gets exactly the verdicts its generator declared.

``sample_data/run/`` is one capture-store directory of about 300 rollouts written by
``scripts/make_sample_run.py``; ``expected.json.txt`` next to it holds, per rollout, the
verdict declared by the situation that built it (never by running the builder) and a
summary of the whole run. These tests load the directory with `load_snapshots`, build every
rollout with `build_rollout` and compare.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
RUN_DIR = REPO_ROOT / "sample_data" / "run"
GENERATOR = REPO_ROOT / "scripts" / "make_sample_run.py"
EXPECTED_NAME = "expected.json.txt"

MASK_REASON_ORDER = [
    "load_error",
    "capture_incomplete",
    "no_records",
    "build_error",
    "unresolved_retries",
    "unresolved_parent_calls",
    "multiple_roots",
    "multiple_chains",
    "no_generated_tokens",
    "terminal_call_not_delivered",
]

# Scenario files of sample_data/ that are a format or a size rather than a situation: the
# run is itself a capture store, and its long delta rollouts stand for the long one.
NOT_SITUATIONS = {"multi_rollout_entries", "capture_store", "long_rollout_delta"}

EXPECTED: dict = json.loads((RUN_DIR / EXPECTED_NAME).read_text(encoding="utf-8"))
DECLARED: dict = EXPECTED["rollouts"]
SUMMARY: dict = EXPECTED["summary"]
ROLLOUT_IDS = sorted(DECLARED)


@cache
def _loaded() -> dict:
    from tokencap import load_snapshots

    snaps = load_snapshots(RUN_DIR)
    by_id = {s.rollout_id: s for s in snaps}
    assert len(by_id) == len(snaps), "a rollout id came back twice"
    return by_id


@cache
def _built() -> dict:
    from tokencap import build_rollout

    return {rid: build_rollout(snap) for rid, snap in _loaded().items()}


def _verdict(result) -> dict:
    return {
        "mask_sample": result.mask_sample,
        "mask_reasons": list(result.mask_reasons),
        "status": result.metrics["status"],
        "incomplete_reason": result.metrics["incomplete_reason"],
    }


# --------------------------------------------------------------------------- the declarations


def test_the_run_mixes_every_situation_of_the_samples() -> None:
    samples = json.loads((REPO_ROOT / "sample_data" / "expected.json").read_text(encoding="utf-8"))
    # Scenarios that exist only together with a harness final-responses file (terminal
    # attribution) are not capture situations: the run is a capture store alone.
    needs_finals = {name.split(".")[0] for name, spec in samples.items() if "final_responses" in json.dumps(spec)}
    stems = {name.split(".")[0].rstrip("/") for name in samples} - NOT_SITUATIONS - needs_finals
    situations = set(SUMMARY["situations"])
    assert stems <= situations, f"situations of sample_data/ missing from the run: {sorted(stems - situations)}"
    for extra in ("stuck_at_one_call", "capture_interrupted"):
        assert extra in situations
    assert 300 <= SUMMARY["rollouts"] <= 400
    assert SUMMARY["load_errors"] >= 3
    load_situations = {d["situation"] for d in DECLARED.values() if d["load_fails"]}
    assert {"load_error_bad_field", "load_error_foreign_record", "load_error_invalid_json"} <= load_situations


def test_rollout_ids_look_like_a_training_run() -> None:
    import re

    pattern = re.compile(r"task\d{4}-rollout\d-attempt\d")
    assert all(pattern.fullmatch(rid) for rid in DECLARED)
    calls = [d["metrics"]["n_calls"] for d in DECLARED.values() if not d["load_fails"]]
    assert min(calls) == 1 and max(calls) >= 30, "the run should span one-call and long rollouts"


def test_declarations_are_coherent() -> None:
    for rid, d in DECLARED.items():
        reasons = d["mask_reasons"]
        assert d["mask_sample"] is bool(reasons), rid
        assert reasons == sorted(reasons, key=MASK_REASON_ORDER.index), rid
        assert d["load_fails"] is ("load_error" in reasons), rid
        if d["load_fails"]:
            assert d["status"] is None and d["incomplete_reason"] is None, rid
        else:
            assert d["status"] in ("completed", "incomplete"), rid
            assert (d["status"] == "incomplete") is (d["incomplete_reason"] is not None), rid


def test_summary_is_the_sum_of_the_declarations() -> None:
    decl = list(DECLARED.values())
    assert SUMMARY["rollouts"] == len(decl)
    assert SUMMARY["trainable"] == sum(not d["mask_sample"] for d in decl)
    assert SUMMARY["masked"] == sum(d["mask_sample"] for d in decl)
    assert SUMMARY["load_errors"] == sum(d["load_fails"] for d in decl)
    assert SUMMARY["mask_reasons"] == {r: sum(r in d["mask_reasons"] for d in decl) for r in MASK_REASON_ORDER}
    assert SUMMARY["status"] == dict(Counter(d["status"] or "none" for d in decl))
    assert SUMMARY["incomplete_reason"] == dict(Counter(d["incomplete_reason"] for d in decl if d["incomplete_reason"]))
    assert SUMMARY["situations"] == dict(Counter(d["situation"] for d in decl))


# --------------------------------------------------------------------------- the package against them


def test_the_store_loads_exactly_the_declared_rollouts() -> None:
    loaded = _loaded()
    assert sorted(loaded) == ROLLOUT_IDS
    failed = sorted(rid for rid, snap in loaded.items() if snap.load_error is not None)
    assert failed == sorted(rid for rid, d in DECLARED.items() if d["load_fails"])


@pytest.mark.parametrize("rollout_id", ROLLOUT_IDS)
def test_rollout_gets_its_declared_verdict(rollout_id: str) -> None:
    exp = DECLARED[rollout_id]
    snap, result = _loaded()[rollout_id], _built()[rollout_id]
    why = f"{rollout_id} ({exp['situation']}): {EXPECTED['situations'][exp['situation']]['why']}"

    assert result.rollout_id == rollout_id
    assert _verdict(result) == {k: exp[k] for k in ("mask_sample", "mask_reasons", "status", "incomplete_reason")}, why
    assert {k: result.metrics[k] for k in exp["metrics"]} == exp["metrics"], why

    if "main_chain" in exp:
        assert result.build is not None and result.build.chains, why
        main = result.build.chains[0]
        assert main.chain_id == "main"
        assert [link.entry.model_call_id for link in main.links] == exp["main_chain"], why
    for needle in exp.get("source_notes_contain", []):
        assert any(needle in note for note in snap.source_notes), f"{why}: no source note has {needle!r}"
    for needle in exp.get("error_contains", []):
        assert needle in (snap.load_error or ""), f"{why}: the load error does not name {needle!r}"
    if exp["load_fails"]:
        assert result.rebuilt_response is None and result.build is None
    else:
        from tokencap import assert_prefix_contiguity

        assert result.rebuilt_response is not None
        assert_prefix_contiguity(result.rebuilt_response)


def test_run_summary_matches_the_builder() -> None:
    results = list(_built().values())
    got = {
        "rollouts": len(results),
        "trainable": sum(not r.mask_sample for r in results),
        "masked": sum(r.mask_sample for r in results),
        "load_errors": sum(r.metrics["error"] is not None for r in results),
        "mask_reasons": {reason: sum(reason in r.mask_reasons for r in results) for reason in MASK_REASON_ORDER},
        "status": dict(sorted(Counter(r.metrics["status"] or "none" for r in results).items())),
        "incomplete_reason": dict(sorted(Counter(r.metrics["incomplete_reason"] for r in results
                                                 if r.metrics["incomplete_reason"]).items())),
    }
    assert got == {k: SUMMARY[k] for k in got}


# --------------------------------------------------------------------------- the generator


def _tree(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


def test_generator_reproduces_the_bundled_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    subprocess.run([sys.executable, str(GENERATOR), str(out)], check=True, capture_output=True, cwd=tmp_path)
    bundled, fresh = _tree(RUN_DIR), _tree(out)
    assert sorted(fresh) == sorted(bundled), "the generator writes a different set of files"
    changed = [name for name in bundled if bundled[name] != fresh[name]]
    assert not changed, f"regenerating changed {changed[:5]}; run `python scripts/make_sample_run.py` and commit"


def test_generator_replaces_an_earlier_run_but_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "task9999-rollout0-attempt0.tokens.jsonl").write_text("{}\n")  # from an earlier, bigger run
    (out / "notes.md").write_text("mine")
    subprocess.run([sys.executable, str(GENERATOR), str(out)], check=True, capture_output=True, cwd=tmp_path)
    names = {p.name for p in out.iterdir()}
    assert "task9999-rollout0-attempt0.tokens.jsonl" not in names
    assert (out / "notes.md").read_text() == "mine"
    assert names - {"notes.md"} == set(_tree(RUN_DIR))


# --------------------------------------------------------------------------- the big-run generator

BIG_RUN = REPO_ROOT / "benchmarks" / "make_big_run.py"


def _big_run(out: Path, *args: str) -> None:
    subprocess.run([sys.executable, str(BIG_RUN), str(out), *args], check=True, capture_output=True, cwd=out.parent)


def test_big_run_declarations_hold_for_other_sizes_and_seeds(tmp_path: Path) -> None:
    """The same situations at another size and seed: every declared verdict still holds."""
    from tokencap import build_rollout, load_snapshots

    out = tmp_path / "big"
    _big_run(out, "--rollouts", "120", "--calls", "9", "--seed", "3")
    expected = json.loads((out / EXPECTED_NAME).read_text(encoding="utf-8"))
    declared = expected["rollouts"]
    assert expected["summary"]["rollouts"] == len(declared) == 120
    snaps = {s.rollout_id: s for s in load_snapshots(out)}
    assert sorted(snaps) == sorted(declared)
    wrong = {}
    for rid, snap in snaps.items():
        result, exp = build_rollout(snap), declared[rid]
        want = {k: exp[k] for k in ("mask_sample", "mask_reasons", "status", "incomplete_reason")}
        pinned = {k: result.metrics[k] for k in exp["metrics"]}
        if _verdict(result) != want or pinned != exp["metrics"]:
            wrong[rid] = (exp["situation"], _verdict(result), want)
    assert not wrong, wrong


def test_big_run_is_deterministic_and_scales_the_sample_mix(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _big_run(a, "-n", "40", "-k", "4")
    _big_run(b, "-n", "40", "-k", "4")
    assert _tree(a) == _tree(b)
    summary = json.loads((a / EXPECTED_NAME).read_text(encoding="utf-8"))["summary"]
    assert summary["rollouts"] == 40
    # Scaled by largest remainders: the most common situation of the sample stays the most common
    # (another may tie with it at this size).
    most = max(SUMMARY["situations"], key=SUMMARY["situations"].get)
    assert summary["situations"][most] == max(summary["situations"].values())


# --------------------------------------------------------------------------- the run after a fix, and rollout records

AFTER_FIX_DIR = REPO_ROOT / "sample_data" / "run_after_fix"
RECORDS_DIR = REPO_ROOT / "sample_data" / "rollout_records"
RECORDS_EXPECTED: dict = json.loads((RECORDS_DIR / "expected.json").read_text(encoding="utf-8"))


@cache
def _scanned(name: str):
    """The scan table of a sample run with its rollout records, as `tokencap scan --final-responses` makes it."""
    from tokencap.run import scan_table

    return scan_table(REPO_ROOT / "sample_data" / name, workers=2, final_responses=str(RECORDS_DIR / f"{name}.jsonl"))


def test_the_run_after_the_fix_scans_to_its_declared_verdicts() -> None:
    from tokencap.run import scan_table

    declared = json.loads((AFTER_FIX_DIR / EXPECTED_NAME).read_text(encoding="utf-8"))
    table = scan_table(AFTER_FIX_DIR, workers=2).to_pylist()
    assert sorted(r["rollout_id"] for r in table) == sorted(declared["rollouts"])
    for row in table:
        want = declared["rollouts"][row["rollout_id"]]
        assert (row["mask_sample"], row["mask_reasons"], row["status"], row["incomplete_reason"]) == (
            want["mask_sample"], want["mask_reasons"], want["status"], want["incomplete_reason"]), row["rollout_id"]


def test_most_rollouts_of_the_two_runs_are_the_same_files() -> None:
    same = sum((AFTER_FIX_DIR / p.name).is_file() and (AFTER_FIX_DIR / p.name).read_bytes() == p.read_bytes()
               for p in RUN_DIR.iterdir() if p.name != EXPECTED_NAME)
    assert same >= 0.9 * (len(list(RUN_DIR.iterdir())) - 1)


@pytest.mark.parametrize("name", ["run", "run_after_fix"])
def test_rollout_records_are_harness_records_of_their_run(name: str) -> None:
    from tokencap import load_final_responses

    path = RECORDS_DIR / f"{name}.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    run_ids = set(json.loads((REPO_ROOT / "sample_data" / name / EXPECTED_NAME).read_text())["rollouts"])
    assert {r["rollout_id"] for r in records} <= run_ids
    keys = [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in records]
    assert len(set(keys)) == len(keys), "one record per task and rollout index"
    assert {r["reward"] for r in records} == {0.0, 1.0}
    assert Counter(k[0] for k in keys).most_common(1)[0][1] == 4  # groups of 4 rollouts per task
    for r in records:
        assert r["response"]["object"] == "response" and r["response"]["output"]
        assert r["response"]["output"][-1]["generation_token_ids"]
    finals = load_final_responses(path)
    assert finals.notes(run_ids) == []  # every record names a rollout of its run


def _diff_cli(tmp_path: Path, *extra: str) -> tuple[str, Path]:
    out = tmp_path / "diff.parquet"
    proc = subprocess.run(
        [sys.executable, "-m", "tokencap", "diff", str(RUN_DIR), str(AFTER_FIX_DIR), "--final-responses-a",
         str(RECORDS_DIR / "run.jsonl"), "--final-responses-b", str(RECORDS_DIR / "run_after_fix.jsonl"),
         "--workers", "2", "-o", str(out), *extra], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, out


def test_tokencap_diff_of_the_sample_runs_reports_the_declared_counts(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    declared = RECORDS_EXPECTED["diff"]
    counts = declared["counts"]
    stdout, out = _diff_cli(tmp_path)
    assert "joined by rollout id" in stdout
    assert f"rollouts: {counts['both']} in both, {counts['only_a']} only in A, {counts['only_b']} only in B" in stdout
    assert (f"{counts['fixed']} fixed" in stdout and f"{counts['broke']} broke" in stdout
            and f"{counts['reasons_changed']} reasons_changed" in stdout and f"{counts['same']} same" in stdout)
    trainable = declared["trainable"]
    assert f"of A ({trainable['a']})" in stdout and f"of B ({trainable['b']})" in stdout
    rows = pq.read_table(out).to_pylist()
    assert Counter(r["change"] for r in rows) == {k: v for k, v in counts.items() if k != "both"}
    assert len(rows) == counts["both"] + counts["only_a"] + counts["only_b"]
    for change in ("fixed", "broke", "reasons_changed"):
        assert sorted(r["rollout_id_a"] for r in rows if r["change"] == change) == declared["rollouts"][change]
    only_a = [r for r in rows if r["side"] == "only_a"]
    only_b = [r for r in rows if r["side"] == "only_b"]
    assert [r["rollout_id_a"] for r in only_a] == declared["rollouts"]["only_a"]
    assert [r["rollout_id_b"] for r in only_b] == declared["rollouts"]["only_b"]
    assert all(r["rollout_id_b"] is None and r["mask_sample_b"] is None and r["source_b"] is None for r in only_a)
    assert all(r["rollout_id_a"] is None and r["reward_a"] is None and r["reward_b"] is not None for r in only_b)
    assert [r["side"] for r in rows] == sorted(r["side"] for r in rows)  # both, only_a, only_b


def test_a_task_join_pairs_the_re_run_attempts_of_the_sample_runs(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    stdout, out = _diff_cli(tmp_path, "--join", "task")
    assert "joined by task and rollout index: asked for (--join task)" in stdout
    rows = pq.read_table(out).to_pylist()
    moved = dict(zip(RECORDS_EXPECTED["diff"]["rollouts"]["only_a"], RECORDS_EXPECTED["diff"]["rollouts"]["only_b"]))
    paired = {r["rollout_id_a"]: r["rollout_id_b"] for r in rows if r["side"] == "both"}
    assert all(paired[a] == b for a, b in moved.items())  # attempt0 in A is attempt1 in B
    # A first attempt replaced by a re-run has no record: no indices, on its own side.
    unkeyed = [r for r in rows if r["side"] != "both"]
    assert unkeyed and all(r["reward_a"] is None and r["reward_b"] is None for r in unkeyed)


@pytest.mark.parametrize("name", ["run", "run_after_fix"])
def test_reward_and_group_facts_of_the_sample_runs(name: str) -> None:
    declared = RECORDS_EXPECTED["rewards"][name]
    frame = _scanned(name).to_pandas()
    frame = frame[frame["reward"].notna()]
    assert len(frame) == declared["rollouts_with_reward"]
    assert frame["reward"].mean() == pytest.approx(declared["mean_reward"], abs=1e-6)
    assert frame.loc[~frame["mask_sample"], "reward"].mean() == pytest.approx(declared["mean_reward_trainable"],
                                                                              abs=1e-6)
    assert frame.loc[frame["mask_sample"], "reward"].mean() == pytest.approx(declared["mean_reward_masked"], abs=1e-6)
    trainable = frame[~frame["mask_sample"]].groupby("task_index")["reward"]
    per_group = trainable.size().reindex(frame["task_index"].unique(), fill_value=0)
    assert frame["task_index"].nunique() == declared["groups"]
    assert int((per_group < 2).sum()) == declared["groups_under_2_trainable"]
    assert int(((trainable.size() >= 2) & (trainable.nunique() == 1)).sum()) == declared["groups_one_reward"]


def test_masking_is_biased_towards_high_reward_in_the_first_run() -> None:
    facts = RECORDS_EXPECTED["rewards"]
    assert facts["run"]["mean_reward_masked"] > facts["run"]["mean_reward_trainable"] + 0.2
    assert facts["run"]["groups_under_2_trainable"] >= 2 and facts["run"]["groups_one_reward"] >= 2
    assert facts["run_after_fix"]["groups_under_2_trainable"] < facts["run"]["groups_under_2_trainable"]


def test_generator_reproduces_both_runs_and_the_records(tmp_path: Path) -> None:
    out = tmp_path / "samples"
    subprocess.run([sys.executable, str(GENERATOR), "--pair", str(out)], check=True, capture_output=True,
                   cwd=tmp_path)
    for name in ("run", "run_after_fix", "rollout_records"):
        bundled, fresh = _tree(REPO_ROOT / "sample_data" / name), _tree(out / name)
        assert sorted(fresh) == sorted(bundled), name
        changed = [n for n in bundled if bundled[n] != fresh[n]]
        assert not changed, f"regenerating changed {name}/{changed[:5]}; run `python scripts/make_sample_run.py`"


# --------------------------------------------------------------------------- why lineage broke, and what Gym delivered

DIAGNOSIS: dict = json.loads((RECORDS_DIR / "diagnosis.json").read_text(encoding="utf-8"))
BREAK_FIELDS = ("call_id", "kind", "cause", "token_cause", "predecessor", "relation", "reasoning")


@cache
def _diagnosed(name: str) -> dict:
    """Every rollout of a sample run diagnosed as a scan with its records does: built with its
    record's final response, its record as evidence, the bundled tokenizer; and without them."""
    from tokenizers import Tokenizer

    from tokencap import build_rollout, diagnose, load_final_responses, load_snapshots

    tok = Tokenizer.from_file(str(REPO_ROOT / "sample_data" / "tokenizer.json"))
    records = load_final_responses(RECORDS_DIR / f"{name}.jsonl")
    out = {}
    for snap in load_snapshots(REPO_ROOT / "sample_data" / name):
        rid = snap.rollout_id
        with_record = build_rollout(snap, final_response=records.for_rollout(rid, single_rollout=False))
        evidence = records.evidence_for(rid, single_rollout=False)
        out[rid] = tuple([{k: b.to_dict()[k] for k in BREAK_FIELDS} for b in breaks]
                         for breaks in (diagnose(with_record, tokenizer=tok, evidence=evidence),
                                        diagnose(build_rollout(snap), tokenizer=tok)))
    return out


@pytest.mark.parametrize("name", ["run", "run_after_fix"])
def test_every_rollout_of_the_sample_runs_diagnoses_to_its_declared_breaks(name: str) -> None:
    declared = DIAGNOSIS[name]["rollouts"]
    without = json.loads((REPO_ROOT / "sample_data" / name / EXPECTED_NAME).read_text(encoding="utf-8"))["rollouts"]
    wrong = {}
    for rid, (got, got_without) in _diagnosed(name).items():
        want = [{k: b[k] for k in BREAK_FIELDS} for b in declared.get(rid, {}).get("breaks", [])]
        want_without = [{k: b[k] for k in BREAK_FIELDS} for b in without[rid].get("breaks", [])]
        if got != want or got_without != want_without:
            wrong[rid] = (without[rid]["situation"], got, want, got_without, want_without)
    assert not wrong, wrong


@pytest.mark.parametrize("name", ["run", "run_after_fix"])
def test_the_declared_break_causes_and_first_breaks_follow_from_the_breaks(name: str) -> None:
    from tokencap.diagnosis import CAUSES

    facts = DIAGNOSIS[name]
    for rid, d in facts["rollouts"].items():
        assert d["breaks"], rid
        assert d["break_causes"] == [c for c in CAUSES if any(b["cause"] == c for b in d["breaks"])], rid
        assert d["first_break_call"] == d["breaks"][0]["call_id"], rid
    assert facts["cause_rollouts"] == {c: sum(c in d["break_causes"] for d in facts["rollouts"].values())
                                       for c in CAUSES}


def test_about_a_third_of_the_sample_run_has_breaks_of_varied_causes() -> None:
    facts = DIAGNOSIS["run"]
    assert 0.28 <= facts["rollouts_with_breaks"] / SUMMARY["rollouts"] <= 0.45
    assert sum(1 for n in facts["cause_rollouts"].values() if n) >= 12


def test_the_fixed_template_makes_generation_dropped_fall_and_nothing_else_moves_much() -> None:
    a, b = DIAGNOSIS["run"]["cause_rollouts"], DIAGNOSIS["run_after_fix"]["cause_rollouts"]
    assert a["generation_dropped"] >= 20 and b["generation_dropped"] == 0
    for cause in ("seam", "tokens_inserted", "history_dropped", "history_replaced", "opening_changed", "retokenized",
                  "history_reordered"):
        assert a[cause] == b[cause], cause
    # One rollout changed its reasons (a sub-agent instead of a compaction): with its record, a
    # compaction's later root is the break, so that rollout counts as `compaction` in A only.
    assert (a["compaction"] - b["compaction"], b["subagent"] - a["subagent"]) == (1, 1)


@pytest.mark.parametrize("name", ["run", "run_after_fix"])
def test_rollout_records_say_what_gym_delivered(name: str) -> None:
    from tokencap.diagnosis import delivered_by, delivered_mask_sample

    facts = DIAGNOSIS[name]
    records = [json.loads(line) for line in (RECORDS_DIR / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
    by_id = {r["rollout_id"]: r for r in records}
    assert sorted(r for r, rec in by_id.items() if delivered_mask_sample(rec) is True) == facts["delivered_masked"]
    assert sorted(r for r, rec in by_id.items() if delivered_mask_sample(rec) is False) == facts["delivered_trainable"]
    assert sorted(r for r, rec in by_id.items() if delivered_by(rec) == "agent") == facts["masked_by_agent"]
    assert all(delivered_by(rec) == "token_capture" for r, rec in by_id.items() if r not in facts["masked_by_agent"])
    assert facts["masked_by_agent"] and len(facts["trained_on_in_doubt"]) >= 10


@pytest.mark.parametrize("name", ["run", "run_after_fix"])
def test_rollouts_gym_trained_on_are_masked_by_tokencap(name: str) -> None:
    """Delivered trainable by Gym, masked by tokencap with the run's records: the rollouts the
    Run page counts as trained on although their lineage is in doubt."""
    rows = {r["rollout_id"]: r for r in _scanned(name).to_pylist()}
    declared = DIAGNOSIS[name]
    doubt = sorted(r for r in declared["delivered_trainable"] if rows[r]["mask_sample"])
    assert doubt == declared["trained_on_in_doubt"]


def test_without_the_tokenizer_only_the_retokenized_rollouts_read_otherwise() -> None:
    """The tokenizer refines one cause: the same text in other ids is `retokenized` with it and
    `tokens_replaced` without; every other break of the run reads the same either way."""
    from tokencap import build_rollout, diagnose, load_final_responses, load_snapshots

    records = load_final_responses(RECORDS_DIR / "run.jsonl")
    declared = DIAGNOSIS["run"]["rollouts"]
    changed = {rid for rid, d in declared.items() if any("cause_without_tokenizer" in b for b in d["breaks"])}
    assert len(changed) >= 5
    snaps = {s.rollout_id: s for s in load_snapshots(RUN_DIR)}
    for rid in sorted(changed) + sorted(set(declared) - changed)[:20]:
        result = build_rollout(snaps[rid], final_response=records.for_rollout(rid, single_rollout=False))
        got = [b.to_dict()["cause"] for b in diagnose(result, evidence=records.evidence_for(rid, single_rollout=False))]
        assert got == [b.get("cause_without_tokenizer", b["cause"]) for b in declared[rid]["breaks"]], rid
