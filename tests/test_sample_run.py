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
    # Scaled by largest remainders: the most common situation of the sample stays the most common.
    assert max(summary["situations"], key=summary["situations"].get) == max(
        SUMMARY["situations"], key=SUMMARY["situations"].get)
