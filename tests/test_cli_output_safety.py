"""`-o` never destroys nor changes an input (issue 37, item 1): an output that is, or lies inside, any input
-- SOURCE, either run of `diff`, `--final-responses` (and -a/-b), `--since` -- is refused before any work:
exit 2, one line, nothing touched. Symbolic and hard links lead to the input they name."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tokencap.cli import main

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err.rstrip("\n")


def _is(output: Path | str, name: str, path: Path | str) -> str:
    return (f"tokencap: error: -o {output}: is {name} ({path}), which this command reads; writing it would "
            "destroy the input: choose another -o")


def _inside(output: Path | str, name: str, path: Path | str) -> str:
    return (f"tokencap: error: -o {output}: lies inside {name} ({path}), which this command reads (a file "
            f"written there becomes part of it); write it outside {path}")


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(SAMPLES / "capture_store", copy)
    return copy


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    path = tmp_path / "src.json"
    shutil.copyfile(SAMPLES / "clean_multiturn_tools.json", path)
    return path


def test_build_over_its_source_is_refused(capture: Path, capsys) -> None:
    before = capture.read_bytes()
    assert main(["build", str(capture), "-o", str(capture)]) == 2
    assert _error(capsys) == _is(capture, "SOURCE", capture)
    assert capture.read_bytes() == before and sorted(os.listdir(capture.parent)) == ["src.json"]


def test_scan_over_a_capture_file_of_its_store_is_refused(store: Path, capsys) -> None:
    before = _tree(store)
    out = store / "store-complete.tokens.jsonl"
    assert main(["scan", str(store), "-o", str(out)]) == 2
    assert _error(capsys) == _inside(out, "SOURCE", store)
    assert _tree(store) == before


def test_export_into_its_run_is_refused(store: Path, capsys) -> None:
    before = _tree(store)
    out = store / "traj.jsonl"
    assert main(["export", str(store), "-o", str(out)]) == 2
    assert _error(capsys) == _inside(out, "SOURCE", store)
    assert _tree(store) == before


def test_an_output_reached_through_a_symbolic_link_is_refused(capture: Path, store: Path, tmp_path: Path,
                                                               capsys) -> None:
    link = tmp_path / "link.json"
    link.symlink_to(capture)
    before = capture.read_bytes()
    assert main(["build", str(capture), "-o", str(link)]) == 2
    assert _error(capsys) == _is(link, "SOURCE", capture)
    assert capture.read_bytes() == before and link.is_symlink()
    linked_dir = tmp_path / "linked"
    linked_dir.symlink_to(store, target_is_directory=True)
    before = _tree(store)
    assert main(["export", str(store), "-o", str(linked_dir / "traj.jsonl")]) == 2
    assert _error(capsys) == _inside(linked_dir / "traj.jsonl", "SOURCE", store)
    assert main(["export", str(linked_dir), "-o", str(store / "traj.jsonl")]) == 2  # the source is the link
    assert _error(capsys) == _inside(store / "traj.jsonl", "SOURCE", linked_dir)
    assert _tree(store) == before


def test_a_hard_link_to_the_source_is_the_source(capture: Path, tmp_path: Path, capsys) -> None:
    other = tmp_path / "other.json"
    os.link(capture, other)
    before = capture.read_bytes()
    assert main(["build", str(capture), "-o", str(other)]) == 2
    assert _error(capsys) == _is(other, "SOURCE", capture)
    assert capture.read_bytes() == before


def test_records_and_since_are_inputs_too(store: Path, tmp_path: Path, capsys) -> None:
    records = tmp_path / "records.jsonl"
    shutil.copyfile(SAMPLES / "rollout_records" / "run.jsonl", records)
    before = records.read_bytes()
    for command in ("scan", "export"):
        assert main([command, str(store), "-o", str(records), "--final-responses", str(records)]) == 2
        assert _error(capsys) == _is(records, "--final-responses", records)
    assert main(["build", str(SAMPLES / "clean_multiturn_tools.json"), "-o", str(records),
                 "--final-responses", str(records)]) == 2
    assert _error(capsys) == _is(records, "--final-responses", records)
    assert records.read_bytes() == before
    old = tmp_path / "old.parquet"
    assert main(["scan", str(store), "-o", str(old), "--workers", "1"]) == 0
    capsys.readouterr()
    table = old.read_bytes()
    assert main(["scan", str(store), "-o", str(old), "--since", str(old), "--workers", "1"]) == 2
    assert _error(capsys) == _is(old, "--since", old)
    assert old.read_bytes() == table


def test_diff_never_writes_over_nor_into_a_run_or_its_records(store: Path, tmp_path: Path, capsys) -> None:
    a = tmp_path / "a.parquet"
    assert main(["scan", str(store), "-o", str(a), "--workers", "1"]) == 0
    capsys.readouterr()
    before, tree = a.read_bytes(), _tree(store)
    assert main(["diff", str(a), str(store), "-o", str(a)]) == 2
    assert _error(capsys) == _is(a, "run A", a)
    assert main(["diff", str(a), str(store), "-o", str(store / "d.parquet")]) == 2
    assert _error(capsys) == _inside(store / "d.parquet", "run B", store)
    records = tmp_path / "records.jsonl"
    shutil.copyfile(SAMPLES / "rollout_records" / "run.jsonl", records)
    assert main(["diff", str(store), str(store), "--final-responses-b", str(records), "-o", str(records)]) == 2
    assert _error(capsys) == _is(records, "--final-responses-b", records)
    assert a.read_bytes() == before and _tree(store) == tree
    assert records.read_bytes() == (SAMPLES / "rollout_records" / "run.jsonl").read_bytes()


def test_an_output_beside_its_input_is_written(capture: Path, tmp_path: Path, capsys) -> None:
    # A name that merely starts like the input's (src.json.out, store2/) is not inside it.
    assert main(["build", str(capture), "-o", str(tmp_path / "src.json.out")]) == 0
    assert (tmp_path / "src.json.out").exists()
