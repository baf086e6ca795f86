"""Run tables of rollouts already in memory (uploads) and scan tables read from bytes."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokencap import load_snapshots
from tokencap.run import COLUMNS, SCHEMA, ScanTableError, read_scan, scan_table, table_of_snapshots
from tokencap.run.table import rows_of

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"


def _without(rows: list[dict], *columns: str) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in columns} for r in rows]


def test_rows_of_an_uploaded_jsonl_equal_the_scan_of_the_same_file():
    path = SAMPLES / "multi_rollout_entries.jsonl"
    data = path.read_bytes()
    progress: list[tuple[int, int]] = []
    table = table_of_snapshots(load_snapshots(data, name=path.name), path.name, source_bytes=len(data),
                               progress=lambda done, total: progress.append((done, total)))
    assert table.schema == SCHEMA and table.num_rows == 3
    assert _without(rows_of(table), "source_mtime") == _without(rows_of(scan_table(path, workers=1)), "source_mtime")
    assert progress[0] == (0, 3) and progress[-1] == (3, 3)


def test_rows_of_a_zipped_store_equal_the_scan_of_the_directory_bar_their_source():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for f in sorted((SAMPLES / "capture_store").iterdir()):
            zf.write(f, f"capture_store/{f.name}")
    table = table_of_snapshots(load_snapshots(buffer.getvalue(), name="store.zip"), "store.zip")
    assert table.column("source").to_pylist() == ["store.zip", "store.zip"]
    scanned = scan_table(SAMPLES / "capture_store", workers=1)
    skip = ("source", "source_bytes", "source_mtime")
    assert _without(rows_of(table), *skip) == _without(rows_of(scanned), *skip)
    assert table.column("rollout_id").to_pylist() == ["store-complete", "store-interrupted"]
    assert table.column("reason_capture_incomplete").to_pylist() == [False, True]


def test_table_of_no_snapshots_is_empty_with_the_schema():
    table = table_of_snapshots([], "nothing.jsonl")
    assert table.num_rows == 0 and table.schema.names == list(COLUMNS)


def test_read_scan_takes_the_bytes_of_an_upload(tmp_path):
    table = scan_table(SAMPLES / "capture_store", workers=1)
    out = io.BytesIO()
    pq.write_table(table, out)
    assert read_scan(out.getvalue(), name="run.parquet").equals(table)


def test_read_scan_names_the_upload_in_its_errors():
    with pytest.raises(ScanTableError, match=r"^run\.parquet: not a readable parquet file"):
        read_scan(b"PAR1 not really", name="run.parquet")
    other = io.BytesIO()
    pq.write_table(pa.table({"a": [1]}), other)
    with pytest.raises(ScanTableError, match=r"^x\.parquet: not a tokencap scan table \(its columns differ"):
        read_scan(other.getvalue(), name="x.parquet")


def test_read_scan_rejects_a_table_with_the_right_names_and_wrong_types():
    table = scan_table(SAMPLES / "capture_store", workers=1)
    wrong = table.set_column(COLUMNS.index("n_calls"), "n_calls", pa.array(["many"] * table.num_rows))
    out = io.BytesIO()
    pq.write_table(wrong, out)
    with pytest.raises(ScanTableError, match=r"^t\.parquet: not a tokencap scan table \(a column has another type"):
        read_scan(out.getvalue(), name="t.parquet")
