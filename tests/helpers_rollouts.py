"""Helpers shared by the tests of rollouts read from output items (not a test module): the bundled
Qwen3 rollouts, small generated rollouts files, a view of one, and the app's run fixtures they use."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers_app import SAMPLES, UPSTREAM, rerun
from rollouts_data import jsonl, rollout_record, turns_of
from streamlit.testing.v1 import AppTest

from tokencap.loading import load_snapshots
from tokencap.views.model import RolloutView
from tokencap.views.rollout.attribution import own_record

ROLLOUTS = SAMPLES / "rollouts" / "qwen3_rollouts.jsonl"


def rollouts_file(path: Path, n: int, cut: set[int] = frozenset()) -> Path:
    """``n`` rollouts of three calls; those in ``cut`` break at their second call."""
    records = [rollout_record(turns_of(3, start=100 * i + 1), rollout_id=f"r{i}", cuts=(1,) if i in cut else ())
               for i in range(n)]
    path.write_bytes(jsonl(records))
    return path


def items_view_of(data: bytes, index: int = 0) -> RolloutView:
    """The Rollout page's view of one rollout of a rollouts file's bytes, with its own record."""
    snapshot = load_snapshots(data, name="r.jsonl")[index]
    final, evidence = own_record(snapshot) or (None, None)
    return RolloutView(snapshot, final_response=final, evidence=evidence)


def make_run(tmp_path: Path) -> Path:
    """A small run directory: a capture store, a snapshot, an entries log, in subdirectories."""
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "capture_store", run / "store")
    shutil.copytree(UPSTREAM, run / "upstream")
    (run / "files").mkdir()
    for name in ("length_stop.json", "subagent_branch.json", "multi_rollout_entries.jsonl"):
        shutil.copy(SAMPLES / name, run / "files" / name)
    return run


def upload_run(at: AppTest, *files: tuple[str, bytes]) -> AppTest:
    at.file_uploader(key="run_uploader").set_value([(n, d, "application/octet-stream") for n, d in files])
    return rerun(at)


def culprit_labels(at: AppTest) -> list[str]:
    """Each call link of the banner: what its finding says, then what its hover says of the call."""
    findings = [m.value for m in at.markdown if "mask reasons `" in m.proto.help]
    return [f"{' '.join(findings)} || {b.proto.help}" for b in at.button if b.key.startswith("culprit:")]
