"""What a build leaves for the cyclic garbage collector (issue 19.20).

A build of 10,000 small snapshots spent a third of its time in full collector passes, each
walking every tracked object alive. These tests pin the three causes down: a loaded
record's log-probabilities kept the JSON parser's buffer object alive, a build left its
call graph as cyclic garbage, and the command ran with Python's default pass rate.
"""

from __future__ import annotations

import gc
import json

import numpy as np
from helpers import linear_chain, snapshot_dict

from tokencap import build_rollout
from tokencap.loading.capture_text import load_text


def _snapshot(n: int = 6, delta: bool = False):
    conv = linear_chain(n, delta=delta)
    [snap] = load_text(json.dumps(snapshot_dict(conv.records, rollout_id="r1")).encode(), "s.json")
    return snap


def _owner(arr: np.ndarray):
    """The object whose memory ``arr`` views (the end of its ``base`` chain)."""
    while arr.base is not None:
        arr = arr.base
        if not isinstance(arr, np.ndarray):
            return arr
    return arr


def test_loaded_arrays_keep_no_parser_buffer_alive() -> None:
    for delta in (False, True):
        snap = _snapshot(delta=delta)
        for entry in snap.entries:
            for name in ("prompt_token_ids", "generation_token_ids", "generation_log_probs"):
                owner = _owner(getattr(entry, name))
                assert isinstance(owner, np.ndarray), f"{name} (delta={delta}) views a {type(owner).__name__}"
        assert [e.generation_log_probs.tolist() for e in snap.entries] == [
            r["generation_log_probs"] for r in linear_chain(6, delta=delta).records]


def test_a_build_leaves_no_cyclic_garbage() -> None:
    snap = _snapshot()
    gc.collect()
    gc.disable()
    try:
        result = build_rollout(snap)
        assert result.payload is not None and not result.mask_sample
        del result
        assert gc.collect() == 0, "the build left reference cycles for the collector"
    finally:
        gc.enable()


def test_the_command_tunes_the_collector_and_restores_it(tmp_path, monkeypatch) -> None:
    import tokencap.cli as cli
    import tokencap.cli.build as cli_build

    seen = []
    real = cli_build.run

    def spying(args):
        seen.append((gc.get_threshold(), gc.get_freeze_count()))
        return real(args)

    monkeypatch.setattr(cli_build, "run", spying)
    source = tmp_path / "s.json"
    source.write_text(json.dumps(snapshot_dict(linear_chain(3).records)))
    before = gc.get_threshold()
    assert cli.main(["build", str(source), "-o", str(tmp_path / "out.json")]) == 0
    [(during, frozen)] = seen
    assert during[2] >= cli.FULL_COLLECTION_EVERY > before[2] and frozen > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
