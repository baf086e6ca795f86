"""How a rollouts file (docs/contract.md#token-rollouts) is read, for `tokencap check`'s speed and memory: records that
are not well formed still fail with their field, and a mapped file's pages are given back
record by record (memory flat in the number of rollouts)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rollouts_data import jsonl, rollout_record, turns_of

from tokencap.limits import READ_WHOLE_BELOW
from tokencap.loading import iter_snapshots

ROOT = Path(__file__).resolve().parent.parent


def records_file(tmp_path: Path) -> Path:
    """Records with every top-level field a record is read for, an incomplete response, a cut,
    a duplicate id, and records that are not well formed."""
    bare = rollout_record(turns_of(2), rollout_id=None)["response"]
    recs = [
        rollout_record(turns_of(3), rollout_id="a", reward=0.5, _ng_task_index=2, _ng_rollout_index=1,
                       task_id="t-7", mask_sample=False, ng_trajectory=[{"kind": "note"}]),
        rollout_record(turns_of(3), rollout_id="b", cuts=[2], status="incomplete", reason="max_output_tokens"),
        rollout_record(turns_of(2), rollout_id="a", reward=1),
        bare,
        {"rollout_id": "no-body", "response": None},
        {"rollout_id": "bad-output", "response": {"id": "r", "output": {"type": "message"}}},
        {"rollout_id": "no-response", "reward": 1.0, "output": rollout_record(turns_of(1))["response"]["output"]},
    ]
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(jsonl(recs))
    return path


def test_records_not_well_formed_fail_with_their_field(tmp_path):
    errors = {s.rollout_id: s.load_error for s in iter_snapshots(records_file(tmp_path))}
    assert errors["a"] is None and errors["a#2"] is None and errors["b"] is None
    assert "field 'response': must be a Responses object" in errors["no-body"]
    # (the index cannot read its ids either, so it is named by its line)
    assert "field 'response.output': must be a list of output-item objects" in errors["rollouts.jsonl:6"]
    # A record with output items but neither 'response' nor "object": "response" is refused by its records.
    assert "'response'" in errors["no-response"] and "is missing" in errors["no-response"]


CHILD = r"""
import sys
from tokencap.loading import iter_snapshots
from tokencap.rollout import build_rollout

def peak_kib():  # this process's own peak (ru_maxrss would start at the parent's: Linux copies it on fork)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

before = peak_kib()
n = 0
for snapshot in iter_snapshots(sys.argv[1]):
    build_rollout(snapshot, project=False)
    n += 1
print(n, peak_kib() - before)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak from /proc")
def test_a_big_rollouts_file_is_read_in_flat_memory(tmp_path):
    """A file big enough to be mapped: reading every rollout grows the peak memory by much less
    than the file (its pages are given back once each record is read)."""
    path = tmp_path / "big.jsonl"
    with open(path, "wb") as f:
        n = 0
        while f.tell() < READ_WHOLE_BELOW * 3:
            f.write(jsonl([rollout_record(turns_of(16, start=1 + n, added=400, generated=60), rollout_id=f"r{n}")]))
            n += 1
    size_kib = path.stat().st_size // 1024
    done = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    rollouts_read, grown_kib = map(int, done.stdout.split())
    assert rollouts_read == n
    assert grown_kib < size_kib / 3, (grown_kib, size_kib)
