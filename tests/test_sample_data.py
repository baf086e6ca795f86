"""The bundled sample captures get exactly the verdicts their README promises.

``sample_data/expected.json`` is written by ``scripts/make_sample_data.py`` from verdicts
declared by hand next to each scenario's data (never by running the builder), so these
tests compare the package with the rules, not with itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_DIR = REPO_ROOT / "sample_data"
GENERATOR = REPO_ROOT / "scripts" / "make_sample_data.py"
NOT_SAMPLES = {"README.md", "expected.json", "final_responses", "tokenizer.json"}
# The sample run has its own generator (scripts/make_sample_run.py) and tests (test_sample_run.py).
RUN = "run"
RUNS = {RUN, "run_after_fix", "rollout_records"}  # written by make_sample_run.py, tested in test_sample_run.py
# NeMo Gym rollouts with token ids in Qwen3's vocabulary: written by make_sample_rollouts.py and
# qwen_vocab.py, tested (sizes included) in test_sample_rollouts.py and test_qwen_vocabulary.py.
OTHER_SOURCES = {"rollouts", "qwen3"}

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

EXPECTED: dict = json.loads((SAMPLE_DIR / "expected.json").read_text(encoding="utf-8"))
CASES = [(name, rid) for name, sample in EXPECTED.items() for rid in sample["rollouts"]]


@cache
def _snapshots(name: str) -> dict:
    from tokencap import load_snapshots

    snaps = load_snapshots(SAMPLE_DIR / name)
    by_id = {s.rollout_id: s for s in snaps}
    assert len(by_id) == len(snaps), f"{name}: a rollout id came back twice"
    return by_id


@cache
def _final_responses(name: str):
    from tokencap import load_final_responses

    path = EXPECTED[name].get("final_responses")
    return load_final_responses(SAMPLE_DIR / path) if path else None


@cache
def _built(name: str, rollout_id: str, with_final_responses: bool = True):
    """The rollout as declared: built with the scenario's final responses when it has some."""
    from tokencap import build_rollout

    finals = _final_responses(name) if with_final_responses else None
    snapshots = _snapshots(name)
    response = finals.for_rollout(rollout_id, single_rollout=len(snapshots) == 1) if finals else None
    return build_rollout(snapshots[rollout_id], final_response=response)


# --------------------------------------------------------------------------- inventory


def test_every_sample_is_declared_and_every_declaration_exists() -> None:
    on_disk = {p.name for p in SAMPLE_DIR.iterdir()} - NOT_SAMPLES - RUNS - OTHER_SOURCES
    assert on_disk == set(EXPECTED), (
        f"undeclared samples: {sorted(on_disk - set(EXPECTED))}; "
        f"declared but missing: {sorted(set(EXPECTED) - on_disk)}"
    )


def test_readme_describes_every_sample() -> None:
    readme = (SAMPLE_DIR / "README.md").read_text(encoding="utf-8")
    missing = [name for name in EXPECTED if f"`{name}" not in readme]
    assert not missing, f"README.md has no row for {missing}"


@pytest.mark.parametrize(("name", "rollout_id"), CASES, ids=[f"{n}::{r}" for n, r in CASES])
def test_declarations_are_coherent(name: str, rollout_id: str) -> None:
    exp = EXPECTED[name]["rollouts"][rollout_id]
    reasons = exp["mask_reasons"]
    assert exp["mask_sample"] is bool(reasons)
    assert reasons == sorted(reasons, key=MASK_REASON_ORDER.index), "mask reasons out of order"
    assert exp["status"] in ("completed", "incomplete")
    assert (exp["status"] == "incomplete") is (exp["incomplete_reason"] is not None)
    assert exp["incomplete_reason"] in (None, "max_output_tokens", "content_filter")


def test_generator_reproduces_the_bundled_files(tmp_path: Path) -> None:
    out = tmp_path / "regenerated"
    subprocess.run([sys.executable, str(GENERATOR), str(out)], check=True, capture_output=True, cwd=tmp_path)

    def tree(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
                if p.is_file() and p.relative_to(root).parts[0] not in RUNS | OTHER_SOURCES}

    bundled, fresh = tree(SAMPLE_DIR), tree(out)
    assert sorted(fresh) == sorted(bundled), "the generator writes a different set of files"
    changed = [path for path in bundled if bundled[path] != fresh[path]]
    assert not changed, f"regenerating changed {changed}; run `python scripts/make_sample_data.py` and commit"


def test_every_final_responses_file_is_declared_and_exists() -> None:
    declared = {sample["final_responses"] for sample in EXPECTED.values() if "final_responses" in sample}
    on_disk = {f"final_responses/{p.name}" for p in (SAMPLE_DIR / "final_responses").iterdir()}
    assert declared == on_disk


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if "final_responses" in EXPECTED[n]))
def test_final_responses_apply_to_their_scenario(name: str) -> None:
    finals = _final_responses(name)
    snapshots = _snapshots(name)
    for rollout_id in snapshots:
        assert finals.for_rollout(rollout_id, single_rollout=len(snapshots) == 1) is not None, rollout_id
    for rollout_id in EXPECTED[name]["rollouts"]:
        assert "terminal_attribution" in EXPECTED[name]["rollouts"][rollout_id]["metrics"], \
            "a scenario with final responses pins its attribution"


def test_samples_stay_small() -> None:
    # Counted as git stores them: the run after the fix repeats most of the run's files byte
    # for byte, and an identical file is one object in the repository.
    # The bounds grew by a MiB when the ids became text of a bundled tokenizer, with a scenario per
    # cause of a broken lineage and the harness's evidence in the run's rollout records.
    # The Qwen3 vocabulary and its rollouts (OTHER_SOURCES) have their own bounds in their tests.
    files = [p for p in SAMPLE_DIR.rglob("*") if p.is_file() and p.relative_to(SAMPLE_DIR).parts[0] not in OTHER_SOURCES]
    distinct = {p.read_bytes() for p in files}
    total = sum(len(data) for data in distinct)
    assert total < 6 * 1024 * 1024, f"sample_data/ holds {total} bytes of distinct files"
    on_disk = sum(p.stat().st_size for p in files)
    assert on_disk < 9 * 1024 * 1024, f"sample_data/ is {on_disk} bytes on disk"


# --------------------------------------------------------------------------- verdicts


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_loads_exactly_the_declared_rollouts(name: str) -> None:
    assert set(_snapshots(name)) == set(EXPECTED[name]["rollouts"])


@pytest.mark.parametrize(("name", "rollout_id"), CASES, ids=[f"{n}::{r}" for n, r in CASES])
def test_sample_gets_its_declared_verdict(name: str, rollout_id: str) -> None:
    exp = EXPECTED[name]["rollouts"][rollout_id]
    r = _built(name, rollout_id)

    assert r.rollout_id == rollout_id
    got = {
        "mask_sample": r.mask_sample,
        "mask_reasons": list(r.mask_reasons),
        "status": r.metrics["status"],
        "incomplete_reason": r.metrics["incomplete_reason"],
    }
    want = {k: exp[k] for k in got}
    assert got == want, f"{name} / {rollout_id}: {EXPECTED[name]['why']}"

    pinned = {k: r.metrics[k] for k in exp["metrics"]}
    assert pinned == exp["metrics"], f"{name} / {rollout_id}: pinned metrics differ"


@pytest.mark.parametrize(("name", "rollout_id"), CASES, ids=[f"{n}::{r}" for n, r in CASES])
def test_sample_delivers_the_declared_chain(name: str, rollout_id: str) -> None:
    exp = EXPECTED[name]["rollouts"][rollout_id]
    if "main_chain" not in exp and "main_chain_len" not in exp:
        pytest.skip("no delivered chain declared")
    r = _built(name, rollout_id)
    assert r.build is not None and r.build.chains, "nothing was delivered"
    main = r.build.chains[0]
    assert main.chain_id == "main"
    calls = [link.entry.model_call_id for link in main.links]
    if "main_chain" in exp:
        assert calls == exp["main_chain"]
    if "main_chain_len" in exp:
        assert len(calls) == exp["main_chain_len"]


@pytest.mark.parametrize(("name", "rollout_id"), CASES, ids=[f"{n}::{r}" for n, r in CASES])
def test_sample_response_is_contiguous(name: str, rollout_id: str) -> None:
    from tokencap import assert_prefix_contiguity

    r = _built(name, rollout_id)
    assert r.rebuilt_response is not None, "every sample declares a status, so it must have a response"
    assert r.rebuilt_response["status"] == EXPECTED[name]["rollouts"][rollout_id]["status"]
    assert_prefix_contiguity(r.rebuilt_response)


@pytest.mark.parametrize(
    ("name", "rollout_id"),
    [(n, r) for n, r in CASES if "after_terminal_calls" in EXPECTED[n]["rollouts"][r]],
)
def test_sample_after_terminal_calls(name: str, rollout_id: str) -> None:
    exp = EXPECTED[name]["rollouts"][rollout_id]
    r = _built(name, rollout_id)
    assert r.build.notes.after_terminal_calls == exp["after_terminal_calls"]
    assert r.metrics["after_terminal_calls"] == len(exp["after_terminal_calls"])


@pytest.mark.parametrize(
    ("name", "rollout_id"),
    [(n, r) for n, r in CASES if "main_chain_without_final_responses" in EXPECTED[n]["rollouts"][r]],
)
def test_sample_without_its_final_responses_delivers_the_call_after_the_answer(name: str, rollout_id: str) -> None:
    """Without the harness's final response the default chain runs on into the request sent
    after the final answer -- the failure attribution exists to fix."""
    exp = EXPECTED[name]["rollouts"][rollout_id]
    r = _built(name, rollout_id, with_final_responses=False)
    assert r.metrics["terminal_attribution"] is None
    assert [link.call_id for link in r.build.main.links] == exp["main_chain_without_final_responses"]
    assert r.build.notes.after_terminal_calls == []


@pytest.mark.parametrize(("name", "rollout_id"), CASES, ids=[f"{n}::{r}" for n, r in CASES])
def test_every_sample_payload_is_json_native(name: str, rollout_id: str) -> None:
    """docs/contract.md#projection: what a caller receives dumps with the standard library, and equals what the
    CLI's streaming writer produced from the array payload."""
    import json

    from tokencap import project_chain_to_output_items, project_main_chain_response
    from tokencap.export import response_bytes

    r = _built(name, rollout_id)
    text = json.dumps(r.rebuilt_response)
    assert json.loads(text) == json.loads(response_bytes(r.payload))
    for chain in r.build.chains:
        json.dumps(project_chain_to_output_items(chain))
    json.dumps(project_main_chain_response(rollout_id, r.build))
    json.dumps(r.summary())
    json.dumps(r.metrics)


@pytest.mark.parametrize(
    ("name", "rollout_id"),
    [(n, r) for n, r in CASES if "source_notes_contain" in EXPECTED[n]["rollouts"][r]],
)
def test_sample_source_notes(name: str, rollout_id: str) -> None:
    notes = list(_snapshots(name)[rollout_id].source_notes)
    for needle in EXPECTED[name]["rollouts"][rollout_id]["source_notes_contain"]:
        assert any(needle in note for note in notes), f"no source note mentions {needle!r}: {notes}"
