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
    with pytest.raises(ScanTableError, match=r"^x\.parquet: not a tokencap scan table \(it has none of the scan "
                                             r"table's columns; its own: a\); write one with `tokencap scan"):
        read_scan(other.getvalue(), name="x.parquet")


def _refusal(table: pa.Table) -> str:
    out = io.BytesIO()
    pq.write_table(table, out)
    with pytest.raises(ScanTableError) as refused:
        read_scan(out.getvalue(), name="t.parquet")
    message = str(refused.value)
    assert message.startswith("t.parquet: not a tokencap scan table (") and "\n" not in message
    assert "SPEC" not in message
    return message


def test_a_refused_table_lists_the_missing_and_extra_columns_by_name():
    table = SCHEMA.empty_table().drop(["error", "source_bytes"]).append_column("score", pa.array([], pa.float64()))
    assert "(missing columns: error, source_bytes; extra column: score)" in _refusal(table)
    older = SCHEMA.empty_table().drop(["source_mtime"])
    assert "(missing column: source_mtime)" in _refusal(older)


def test_a_refused_table_with_many_missing_columns_names_some_and_counts_the_rest():
    kept = ["rollout_id", "source"]
    message = _refusal(SCHEMA.empty_table().select(kept))
    missing = [c for c in COLUMNS if c not in kept]
    assert f"missing columns: {', '.join(missing[:10])} and {len(missing) - 10} more)" in message


def test_a_refused_table_with_the_columns_in_another_order_says_where():
    table = SCHEMA.empty_table().select([COLUMNS[1], COLUMNS[0], *COLUMNS[2:]])
    assert "(the columns are in another order: column 1 is source, expected rollout_id)" in _refusal(table)


def test_read_scan_rejects_a_table_with_the_right_names_and_wrong_types():
    table = scan_table(SAMPLES / "capture_store", workers=1)
    wrong = table.set_column(COLUMNS.index("n_calls"), "n_calls", pa.array(["many"] * table.num_rows))
    out = io.BytesIO()
    pq.write_table(wrong, out)
    with pytest.raises(ScanTableError, match=r"^t\.parquet: not a tokencap scan table \(n_calls is string, "
                                             r"expected int64\); write one with `tokencap scan RUN -o "
                                             r"TABLE\.parquet`$"):
        read_scan(out.getvalue(), name="t.parquet")
