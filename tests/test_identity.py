"""Which tokencap wrote a table: any change to the code makes earlier tables stale."""

from __future__ import annotations

import shutil
from pathlib import Path

import tokencap
from tokencap import identity
from tokencap.identity import code_identity, sources_digest
from tokencap.run import scan
from tokencap.services import scan_cache as rs

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"
PACKAGE = Path(tokencap.__file__).resolve().parent


def test_the_identity_is_the_version_and_the_digest_of_this_package():
    assert code_identity() == f"{tokencap.__version__}+{sources_digest(PACKAGE)}"


def test_an_edit_to_any_source_file_changes_the_digest(tmp_path):
    copy = tmp_path / "tokencap"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert sources_digest(copy) == sources_digest(PACKAGE)
    rule = copy / "run" / "rows.py"
    rule.write_text(rule.read_text() + "\n# a changed rule\n")
    assert sources_digest(copy) != sources_digest(PACKAGE)
    (copy / "run" / "rows.py").rename(copy / "run" / "rows2.py")  # a rename alone changes it too
    assert sources_digest(copy) != sources_digest(PACKAGE)


def test_since_never_reuses_a_table_written_by_other_code(tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "capture_store", run)
    first = tmp_path / "first.parquet"
    scan(run, first, workers=1)
    assert scan(run, tmp_path / "same.parquet", workers=1, since=str(first)).reused > 0
    monkeypatch.setattr(identity, "code_identity", lambda: f"{tokencap.__version__}+0000000000000000")
    summary = scan(run, tmp_path / "again.parquet", workers=1, since=str(first))
    assert summary.reused == 0
    assert summary.notes == [f"{first} is not reused (another tokencap (another version, or an edit to its code) "
                             "wrote it); every rollout was built again"]  # the actual reason, and only it


def test_the_apps_scan_cache_is_kept_apart_per_code(monkeypatch):
    fp = rs.fingerprint(SAMPLES / "capture_store")
    before = rs.cached_scan_path(fp, cache_dir="/cache")
    monkeypatch.setattr(identity, "code_identity", lambda: f"{tokencap.__version__}+0000000000000000")
    assert rs.cached_scan_path(fp, cache_dir="/cache") != before
