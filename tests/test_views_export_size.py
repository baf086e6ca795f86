"""Exports of any size: estimates, routes, progress, and files written atomically."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from synth_snapshots import cli_build, kitchen_sink

from tokencap import load_snapshots
from tokencap.views import RolloutView
from tokencap.views.rollout import export as ev

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"
sys.path.insert(0, str(REPO / "benchmarks"))


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A linear 60-call full-prompt rollout (about 3.5 MB of result), as the benchmark generates it."""
    from bench_build import make_linear_rollout

    path = tmp_path_factory.mktemp("big") / "linear60.json"
    make_linear_rollout(path, 60)
    return path, RolloutView(load_snapshots(path)[0])


def test_estimates_are_close_to_the_bytes_written(big):
    _, view = big
    for kind in ("response", "result"):
        written = len(ev.render(view, kind))
        assert abs(ev.estimate(view, kind) - written) / written < 0.03, kind
    mask = len(ev.render(view, "mask"))
    assert mask <= ev.estimate(view, "mask") < 2 * mask  # the CSV estimate errs on the big side
    assert ev.estimate_all([view, view]) == 2 * ev.estimate(view, "result")


def test_routes_by_size(monkeypatch):
    assert ev.route(1_000) == "now"
    assert ev.route(ev.NOW_BYTES + 1) == "prepare"
    assert ev.route(ev.DOWNLOAD_LIMIT + 1) == "disk"
    monkeypatch.setenv("TOKENCAP_DOWNLOAD_LIMIT", "5000")
    assert ev.download_limit() == 5000 and ev.route(4_000) == "now" and ev.route(6_000) == "disk"
    monkeypatch.setenv("TOKENCAP_DOWNLOAD_LIMIT", "lots")
    assert ev.download_limit() == ev.DOWNLOAD_LIMIT


def test_rendering_reports_progress_and_gives_the_bytes_tokencap_build_writes(big, tmp_path):
    path, view = big
    seen: list[tuple[int, int]] = []
    data = ev.render(view, "result", lambda done, total: seen.append((done, total)))
    assert data == cli_build(path, tmp_path=tmp_path)
    assert len(seen) >= 10 and [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert all(total == ev.estimate(view, "result") for _, total in seen)


def test_progress_writer_counts_every_byte():
    sink = io.BytesIO()
    calls: list[int] = []
    writer = ev.ProgressWriter(sink, 100, lambda done, total: calls.append(done), step=10)
    for _ in range(25):
        writer.write(b"abcd")
    assert writer.written == 100 == len(sink.getvalue())
    assert calls == [12, 24, 36, 48, 60, 72, 84, 96]


def test_write_file_is_atomic_and_reports_progress(big, tmp_path):
    _, view = big
    target = tmp_path / "exports" / "deep" / "r.result.json"
    seen: list[int] = []
    n = ev.write_file(target, lambda h: ev.write_kind(h, view, "result"), ev.estimate(view, "result"),
                      lambda done, total: seen.append(done))
    assert target.read_bytes() == ev.render(view, "result") and n == target.stat().st_size and seen

    def broken(handle):
        handle.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        ev.write_file(tmp_path / "exports" / "broken.json", broken, 10)
    assert not (tmp_path / "exports" / "broken.json").exists()
    assert not list((tmp_path / "exports").glob(".*.part"))


def test_write_kind_refuses_what_does_not_exist():
    from tokencap import TokenCaptureSnapshot

    failed = RolloutView(TokenCaptureSnapshot.failed("bad", "bad: not JSON"))
    with pytest.raises(ValueError, match="no response"):
        ev.write_kind(io.BytesIO(), failed, "response")
    with pytest.raises(ValueError, match="no loss mask"):
        ev.write_kind(io.BytesIO(), failed, "mask")
    assert ev.estimate(failed, "response") == 0 and ev.estimate(failed, "mask") == 0
    sink = RolloutView(kitchen_sink().snapshot())
    assert ev.render_all([sink]) == ev.render(sink, "result")  # one rollout: the JSONL is its result line


def test_default_export_dir_is_under_the_working_directory(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert ev.default_export_dir() == str(tmp_path / "tokencap-exports")


def test_running_prompts_are_sized_from_one_pass_over_their_shared_buffer():
    import numpy as np

    buffer = np.array([0, 7, 12, 999, 1000, 5, 150_000, 3], dtype=np.uint64)
    lengths = ev._IdLengths()
    for n in range(1, len(buffer) + 1):
        assert lengths(buffer[:n]) == ev._json_len_of_ids(buffer[:n]) == len(str(buffer[:n].tolist()).replace(" ", ""))
    assert lengths(buffer[2:5]) == ev._json_len_of_ids(buffer[2:5])      # not a prefix: sized on its own
    assert lengths(buffer[::2]) == ev._json_len_of_ids(buffer[::2])
    assert lengths(buffer[:0]) == 2


def test_sizes_are_computed_once_per_view_with_progress(tmp_path):
    from bench_build import make_linear_rollout

    path = tmp_path / "linear300.json"
    make_linear_rollout(path, 300, tool_tokens=20, gen_tokens=10, delta=True)
    view = RolloutView(load_snapshots(path)[0])
    reports: list[tuple[int, int]] = []
    assert not ev.sized(view)
    sizes = ev.sizes(view, lambda done, total: reports.append((done, total)))
    assert ev.sized(view) and reports and reports[-1][1] == 300 and reports == sorted(reports)
    assert ev.sizes(view) is sizes and ev.estimate(view, "result") == sizes["result"]
    written = len(ev.render(view, "response"))
    assert abs(sizes["response"] - written) / written < 0.03
