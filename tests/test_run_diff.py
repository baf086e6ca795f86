"""docs/contract.md#diff: comparing two scan tables (`tokencap.run.diff`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokencap.cli import main
from tokencap.run import DiffTableGiven, read_scan
from tokencap.run.diff import DIFF_SCHEMA, DiffError, diff_tables, summary_text
from tokencap.run.table import SCHEMA

REASONS = ["load_error", "capture_incomplete", "no_records", "build_error", "unresolved_retries",
           "unresolved_parent_calls", "multiple_roots", "multiple_chains", "no_generated_tokens",
           "terminal_call_not_delivered"]

# The diff columns of docs/contract.md#diff, written out here independently of the package's declaration.
SPEC_DIFF_COLUMNS = [
    ("rollout_id_a", "string"), ("rollout_id_b", "string"), ("side", "string"), ("mask_sample_a", "bool"),
    ("mask_sample_b", "bool"), ("mask_reasons_a", "list<item: string>"), ("mask_reasons_b", "list<item: string>"),
    ("reasons_gained", "list<item: string>"), ("reasons_lost", "list<item: string>"), ("change", "string"),
    ("status_a", "string"), ("status_b", "string"), ("delivered_fraction_a", "double"),
    ("delivered_fraction_b", "double"), ("reward_a", "double"), ("reward_b", "double"), ("source_a", "string"),
    ("source_b", "string"), ("break_causes_a", "list<item: string>"), ("break_causes_b", "list<item: string>"),
    ("contiguous_a", "bool"), ("contiguous_b", "bool"),
]


def row(rollout_id: str, reasons: tuple[str, ...] = (), *, status: str | None = "completed",
        reward: float | None = None, task: int | None = None, index: int | None = None,
        delivered: float = 1.0, causes: tuple[str, ...] = ()) -> dict:
    """A scan-table row with the fields a diff reads; everything else zero."""
    out: dict = {}
    for f in SCHEMA:
        out[f.name] = [] if pa.types.is_list(f.type) else (False if pa.types.is_boolean(f.type) else
                                                            (None if pa.types.is_string(f.type) else 0))
    ordered = [r for r in REASONS if r in reasons]
    out.update(rollout_id=rollout_id, source=f"{rollout_id}.tokens.*", snapshot_id=rollout_id,
               mask_sample=bool(ordered), mask_reasons=ordered, status=status, delivered_fraction=delivered,
               reward=reward, task_index=task, rollout_index=index, source_mtime=0.0,
               breaks=len(causes), break_causes=list(causes))
    for r in REASONS:
        out[f"reason_{r}"] = r in ordered
    return out


def table(*rows: dict) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=SCHEMA)


def by_a(diff) -> dict:
    return {r["rollout_id_a"] or r["rollout_id_b"]: r for r in diff.arrow.to_pylist()}


A = table(
    row("r1", ("unresolved_retries",), reward=0.0),  # fixed
    row("r2", reward=1.0),  # broke
    row("r3", ("multiple_roots", "multiple_chains")),  # reasons changed
    row("r4"),  # same (trainable)
    row("r5", ("capture_incomplete",)),  # same (masked)
    row("r6"),  # only in A
)
B = table(
    row("r7", status="incomplete"),  # only in B
    row("r5", ("capture_incomplete",)),
    row("r4"),
    row("r3", ("unresolved_parent_calls", "multiple_chains")),
    row("r2", ("capture_incomplete", "unresolved_retries"), status=None, reward=0.5),
    row("r1", reward=1.0),
)


def test_columns_are_spec_11_2_in_order_with_their_types():
    diff = diff_tables(A, B)
    assert [(f.name, str(f.type)) for f in diff.arrow.schema] == SPEC_DIFF_COLUMNS
    assert diff.arrow.schema == DIFF_SCHEMA
    assert list(diff.table.columns) == [name for name, _ in SPEC_DIFF_COLUMNS]


def test_each_change_of_an_id_join():
    diff = diff_tables(A, B)
    got = by_a(diff)
    assert {k: v["change"] for k, v in got.items()} == {
        "r1": "fixed", "r2": "broke", "r3": "reasons_changed", "r4": "same", "r5": "same", "r6": "only_a",
        "r7": "only_b"}
    assert got["r2"]["reasons_gained"] == ["capture_incomplete", "unresolved_retries"]  # the order of docs/contract.md#rollout
    assert got["r2"]["reasons_lost"] == []
    assert got["r3"]["reasons_gained"] == ["unresolved_parent_calls"]
    assert got["r3"]["reasons_lost"] == ["multiple_roots"]
    assert (got["r1"]["reward_a"], got["r1"]["reward_b"]) == (0.0, 1.0)
    assert (got["r2"]["status_a"], got["r2"]["status_b"]) == ("completed", None)
    assert (got["r1"]["mask_sample_a"], got["r1"]["mask_sample_b"]) == (True, False)


def test_one_sided_rows_have_nulls_on_the_other_side():
    got = by_a(diff_tables(A, B))
    only_a, only_b = got["r6"], got["r7"]
    assert only_a["side"] == "only_a" and only_a["rollout_id_b"] is None and only_a["source_b"] is None
    assert only_a["mask_sample_b"] is None and only_a["mask_reasons_b"] is None
    assert only_a["reasons_gained"] is None and only_a["reasons_lost"] is None
    assert only_b["side"] == "only_b" and only_b["rollout_id_a"] is None and only_b["status_b"] == "incomplete"


def test_rows_are_sorted_by_side_then_key():
    diff = diff_tables(A, B)
    keys = [(r["side"], r["rollout_id_a"] or r["rollout_id_b"]) for r in diff.arrow.to_pylist()]
    assert keys == [("both", "r1"), ("both", "r2"), ("both", "r3"), ("both", "r4"), ("both", "r5"),
                    ("only_a", "r6"), ("only_b", "r7")]


def test_summary_counts_and_shares():
    diff = diff_tables(A, B)
    s = diff.summary
    assert (s.rollouts_a, s.rollouts_b, s.both, s.only_a, s.only_b) == (6, 6, 5, 1, 1)
    assert (s.trainable_a, s.trainable_b) == (3, 3)  # B: r1, r4, r7
    assert s.changes == {"fixed": 1, "broke": 1, "reasons_changed": 1, "same": 2, "only_a": 1, "only_b": 1}
    assert s.trainable_share_a == 0.5 and s.trainable_change_pp == pytest.approx(0.0)
    retries = s.reasons.loc["unresolved_retries"]
    assert (retries.count_a, retries.count_b) == (1, 1) and retries.change_pp == pytest.approx(0.0)
    roots = s.reasons.loc["multiple_roots"]
    assert (roots.share_a, roots.share_b) == (pytest.approx(1 / 6), 0.0)
    assert roots.change_pp == pytest.approx(-100 / 6)
    assert list(s.reasons.index) == REASONS
    assert s.statuses.loc["no response", "count_b"] == 1 and s.statuses.loc["incomplete", "count_a"] == 0
    assert diff.join.by == "id" and "5 rollout ids are in both" in diff.join.why
    text = summary_text(diff, "before.parquet", "after.parquet")
    assert "5 in both, 1 only in A, 1 only in B" in text
    assert "1 fixed" in text and "1 broke" in text and "1 reasons_changed" in text
    assert "multiple_roots" in text and "-16.7 pp" in text


# --------------------------------------------------------------------------- the join rule


def indexed(prefix: str, specs: list[tuple[int, int, tuple[str, ...]]]) -> pa.Table:
    return table(*(row(f"{prefix}-{t}-{i}", reasons, task=t, index=i, reward=float(i)) for t, i, reasons in specs))


def test_auto_joins_by_task_when_ids_share_nothing_and_both_carry_indices():
    a = indexed("old", [(1, 0, ()), (1, 1, ("unresolved_retries",)), (2, 0, ())])
    b = indexed("new", [(1, 1, ()), (1, 0, ()), (3, 0, ())])
    diff = diff_tables(a, b)
    assert diff.join.by == "task" and "share nothing" in diff.join.why
    rows = diff.arrow.to_pylist()
    assert [(r["rollout_id_a"], r["rollout_id_b"], r["change"]) for r in rows] == [
        ("old-1-0", "new-1-0", "same"), ("old-1-1", "new-1-1", "fixed"), ("old-2-0", None, "only_a"),
        (None, "new-3-0", "only_b")]


def test_join_task_on_request_and_rows_without_indices_stay_on_their_side():
    a = table(row("x-1", task=1, index=0), row("x-2", task=1, index=1), row("x-0"))  # x-0: no indices
    b = table(row("x-1", task=1, index=1), row("y-9", task=1, index=0))
    by_id = diff_tables(a, b)
    assert by_id.join.by == "id"  # ids are shared: auto keeps the id join
    assert by_id.summary.both == 1
    by_task = diff_tables(a, b, join="task")
    assert by_task.join.by == "task" and (by_task.join.unkeyed_a, by_task.join.unkeyed_b) == (1, 0)
    assert [(r["side"], r["rollout_id_a"], r["rollout_id_b"]) for r in by_task.arrow.to_pylist()] == [
        ("both", "x-1", "y-9"), ("both", "x-2", "x-1"), ("only_a", "x-0", None)]
    assert "without task and rollout index" in summary_text(by_task)


def test_auto_keeps_the_id_join_when_a_side_has_no_indices_and_says_why():
    a = indexed("old", [(1, 0, ())])
    b = table(row("new-1"))
    diff = diff_tables(a, b)
    assert diff.join.by == "id" and "B carries no task and rollout indices" in diff.join.why
    assert diff.summary.changes["only_a"] == 1 and diff.summary.changes["only_b"] == 1


def test_a_task_join_needs_indices_on_both_sides():
    with pytest.raises(DiffError, match="after.parquet: no rollout carries a task and a rollout index"):
        diff_tables(indexed("a", [(1, 0, ())]), table(row("b")), join="task", names=("before.parquet", "after.parquet"))


def test_a_key_on_two_rows_is_an_error_naming_the_table():
    with pytest.raises(DiffError, match=r"^B: rollout id 'r1' is on 2 rows"):
        diff_tables(table(row("r1")), table(row("r1"), row("r1")))
    twice = indexed("a", [(1, 0, ()), (1, 0, ())])
    with pytest.raises(DiffError, match="A: task_index 1, rollout_index 0 is on 2 rows"):
        diff_tables(twice, indexed("b", [(1, 0, ())]), join="task")


def test_an_unknown_join_and_a_table_that_is_no_scan_are_errors():
    with pytest.raises(DiffError, match="join must be one of"):
        diff_tables(A, B, join="rollout")  # type: ignore[arg-type]
    with pytest.raises(DiffError, match="x.parquet: not a tokencap scan table"):
        diff_tables(pa.table({"x": [1]}), B, names=("x.parquet", "B"))


# --------------------------------------------------------------------------- inputs


def test_a_table_written_before_the_record_columns_diffs_with_null_rewards():
    old = A.drop_columns(["reward", "task_index", "rollout_index"])
    diff = diff_tables(old, B)
    got = by_a(diff)
    assert got["r1"]["reward_a"] is None and got["r1"]["reward_b"] == 1.0
    assert diff.summary.changes == diff_tables(A, B).summary.changes


def test_a_pandas_frame_with_categoricals_diffs_like_its_table():
    frame = A.to_pandas()
    frame["status"] = frame["status"].astype("category")
    frame["source"] = frame["source"].astype("category")
    frame["extra"] = 1  # the Run page's frame has columns of its own
    assert diff_tables(frame, B).arrow.equals(diff_tables(A, B).arrow)
    assert isinstance(diff_tables(frame, B).table, pd.DataFrame)


def test_empty_tables():
    empty = SCHEMA.empty_table()
    diff = diff_tables(empty, B)
    assert diff.summary.only_b == 6 and diff.summary.trainable_share_a == 0.0
    assert diff_tables(empty, empty).arrow.num_rows == 0


def test_a_row_without_a_verdict_counts_as_masked_never_as_trainable():
    """Fail closed: a null mask_sample (a frame edited by hand, a concatenation with gaps) is not trainable."""
    a = table(row("r1"), row("r2"))
    b = table(row("r1"), row("r2")).set_column(
        SCHEMA.get_field_index("mask_sample"), "mask_sample", pa.array([None, False], pa.bool_()))
    diff = diff_tables(a, b)
    assert diff.summary.trainable_b == 1 and diff.summary.changes["broke"] == 1
    assert by_a(diff)["r1"]["change"] == "broke"


def _with_attribution(t: pa.Table, outcome: str | None) -> pa.Table:
    """``t`` as if scanned with records that attributed every rollout (``outcome``), or without any (None)."""
    i, r = SCHEMA.get_field_index("terminal_attribution"), SCHEMA.get_field_index("reward")
    t = t.set_column(r, "reward", pa.nulls(t.num_rows, pa.float64()))
    return t.set_column(i, "terminal_attribution", pa.array([outcome] * t.num_rows, pa.string()))


def test_a_run_scanned_with_records_against_one_without_is_a_note_not_a_silent_change():
    """Verdicts resting on the records (an unattributed final answer) flip when only one side has them: say so."""
    with_records, bare_b = _with_attribution(A, "attributed"), _with_attribution(B, None)
    diff = diff_tables(with_records, bare_b)
    assert diff.summary.records == (True, False)
    note = diff.summary.records_note
    assert note is not None and note.startswith("only A was scanned with rollout records")
    assert "note: " + note in summary_text(diff)
    assert diff_tables(bare_b, with_records).summary.records_note.startswith("only B was scanned")
    both = diff_tables(with_records, _with_attribution(B, "unattributed"))
    assert both.summary.records == (True, True) and both.summary.records_note is None
    assert "note:" not in summary_text(both)
    assert diff_tables(_with_attribution(A, None), bare_b).summary.records_note is None
    rewarded = table(row("r1", reward=1.0))  # a reward alone says the records were there
    assert diff_tables(rewarded, table(row("r1"))).summary.records == (True, False)


def test_runs_with_nothing_paired_say_so_instead_of_reading_as_a_comparison():
    a, b = table(row("a1"), row("a2", ("capture_incomplete",))), table(row("b1"))
    diff = diff_tables(a, b)
    assert diff.summary.both == 0
    note = diff.summary.unpaired_note
    assert note is not None and note.startswith("no rollout of A could be paired") and "--join task" in note
    assert diff.summary.notes == [note]
    text = summary_text(diff)
    assert "note: " + note in text and "(2 rollouts)" in text and "(1 rollout)\n" in text
    assert diff_tables(a, a).summary.unpaired_note is None
    assert diff_tables(a, table()).summary.unpaired_note is None  # an empty side has nothing to pair


# --------------------------------------------------------------------------- tokencap diff


SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"


def _write(table: pa.Table, path: Path) -> Path:
    pq.write_table(table, path)
    return path


def test_cli_diff_of_two_tables_prints_the_summary_and_writes_the_table(tmp_path, capsys):
    a, b = _write(A, tmp_path / "a.parquet"), _write(B, tmp_path / "b.parquet")
    out = tmp_path / "diff.parquet"
    assert main(["diff", str(a), str(b), "-o", str(out)]) == 0
    printed = capsys.readouterr()
    assert printed.out == summary_text(diff_tables(A, B), str(a), str(b))
    assert "5 in both, 1 only in A, 1 only in B" in printed.out
    assert pq.read_table(out).equals(diff_tables(A, B).arrow)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no part file left


def test_cli_diff_scans_run_directories_without_records_as_null_rewards(tmp_path, capsys):
    run = SAMPLES / "capture_store"
    assert main(["diff", str(run), str(run), "--workers", "1", "-o", str(tmp_path / "d.parquet")]) == 0
    rows = pq.read_table(tmp_path / "d.parquet").to_pylist()
    assert [r["change"] for r in rows] == ["same", "same"]
    assert all(r["reward_a"] is None and r["reward_b"] is None for r in rows)
    assert "2 in both, 0 only in A, 0 only in B" in capsys.readouterr().out


def test_cli_diff_of_a_table_and_a_directory(tmp_path, capsys):
    table = tmp_path / "store.parquet"
    assert main(["scan", str(SAMPLES / "capture_store"), "-o", str(table), "--workers", "1"]) == 0
    capsys.readouterr()
    assert main(["diff", str(table), str(SAMPLES / "capture_store"), "--workers", "1"]) == 0
    assert "2 same" in capsys.readouterr().out


def _one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tokencap: error: "), err
    return err[0]


def test_cli_diff_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    a = _write(A, tmp_path / "a.parquet")
    assert main(["diff", str(a), str(tmp_path / "missing")]) == 2
    assert "missing: no such file or directory (run B)" in _one_error(capsys)
    other = _write(pa.table({"x": [1]}), tmp_path / "other.parquet")
    assert main(["diff", str(a), str(other)]) == 2
    assert "other.parquet: not a tokencap scan table" in _one_error(capsys)
    twice = _write(table(row("r1"), row("r1")), tmp_path / "twice.parquet")
    assert main(["diff", str(twice), str(a)]) == 2
    assert "twice.parquet: rollout id 'r1' is on 2 rows" in _one_error(capsys)
    assert main(["diff", str(a), str(a), "--final-responses-b", str(a)]) == 2
    assert "is a scan table" in _one_error(capsys)
    assert main(["diff", str(a), str(a), "--join", "task"]) == 2
    assert "cannot be joined by task" in _one_error(capsys)


def test_cli_diff_of_a_parquet_name_that_is_not_parquet_is_refused_not_scanned_as_a_run(tmp_path, capsys):
    """A half-copied or mis-named table is one error, not a run of one unreadable rollout compared as if real."""
    a = _write(A, tmp_path / "a.parquet")
    for name, data in (("text.parquet", b"hello\n"), ("cut.PARQUET", a.read_bytes()[4:])):
        broken = tmp_path / name
        broken.write_bytes(data)
        assert main(["diff", str(broken), str(a)]) == 2
        error = _one_error(capsys)
        assert f"{name}: not a readable parquet file" in error and "tokencap scan RUN -o" in error
        assert capsys.readouterr().out == ""


def test_cli_diff_refuses_a_table_with_rows_without_a_verdict(tmp_path, capsys):
    a = _write(A, tmp_path / "a.parquet")
    gap = A.set_column(SCHEMA.get_field_index("mask_sample"), "mask_sample",
                       pa.array([True, None, True, False, True, None], pa.bool_()))
    b = _write(gap, tmp_path / "gap.parquet")
    assert main(["diff", str(a), str(b)]) == 2
    error = _one_error(capsys)
    assert "gap.parquet: column 'mask_sample' is null on 2 rows (first: rollout 'r2')" in error
    assert "tokencap scan RUN -o" in error


def test_cli_diff_of_a_run_with_itself_says_so(tmp_path, capsys):
    """The same table (or directory) twice is almost always a typo: the summary still prints, and a note says why
    nothing changed."""
    a = _write(A, tmp_path / "a.parquet")
    assert main(["diff", str(a), str(tmp_path / "." / "a.parquet")]) == 0
    printed = capsys.readouterr()
    assert "6 same" in printed.out
    assert f"tokencap: note: A and B are the same run ({a}): every rollout is compared with itself" in printed.err
    b = _write(B, tmp_path / "b.parquet")
    assert main(["diff", str(a), str(b)]) == 0
    assert "same run" not in capsys.readouterr().err


def test_cli_diff_never_writes_over_an_input_or_into_nowhere(tmp_path, capsys):
    a, b = _write(A, tmp_path / "a.parquet"), _write(B, tmp_path / "b.parquet")
    before = a.read_bytes()
    assert main(["diff", str(a), str(b), "-o", str(a)]) == 2
    assert _one_error(capsys) == (f"tokencap: error: -o {a}: is run A ({a}), which this command reads; writing it "
                                  "would destroy the input: choose another -o")
    assert a.read_bytes() == before
    assert main(["diff", str(a), str(b), "-o", str(tmp_path / "no" / "d.parquet")]) == 2
    assert "does not exist" in _one_error(capsys)
    assert main(["diff", str(a), str(b), "-o", str(tmp_path)]) == 2
    assert "is a directory" in _one_error(capsys)


# --------------------------------------------------------------------------- against a plain reference


def _reference(a_rows: list[dict], b_rows: list[dict]) -> list[tuple]:
    """docs/contract.md#diff by the letter, one rollout at a time (the vectorised code must agree)."""
    a_by, b_by = {r["rollout_id"]: r for r in a_rows}, {r["rollout_id"]: r for r in b_rows}
    out = []
    for rid in sorted(set(a_by) | set(b_by)):
        ra, rb = a_by.get(rid), b_by.get(rid)
        if ra and rb:
            gained = [r for r in REASONS if r in rb["mask_reasons"] and r not in ra["mask_reasons"]]
            lost = [r for r in REASONS if r in ra["mask_reasons"] and r not in rb["mask_reasons"]]
            change = ("fixed" if ra["mask_sample"] and not rb["mask_sample"] else
                      "broke" if rb["mask_sample"] and not ra["mask_sample"] else
                      "reasons_changed" if gained or lost else "same")
            out.append(("both", rid, rid, gained, lost, change, ra["reward"], rb["reward"]))
        elif ra:
            out.append(("only_a", rid, None, None, None, "only_a", ra["reward"], None))
        else:
            out.append(("only_b", None, rid, None, None, "only_b", None, rb["reward"]))
    return sorted(out, key=lambda t: (t[0], t[1] or t[2]))


@pytest.mark.parametrize("seed", range(5))
def test_the_vectorised_diff_agrees_with_a_plain_reference(seed):
    import random

    rng = random.Random(seed)

    def draw(ids):
        return [row(rid, tuple(r for r in REASONS if rng.random() < 0.2),
                    reward=rng.choice([None, 0.0, 1.0])) for rid in ids]

    universe = [f"t{rng.randrange(10_000):05d}-r{i}" for i in range(80)]
    a_rows = draw(rng.sample(universe, 50))
    b_rows = draw(rng.sample(universe, 50))
    rng.shuffle(b_rows)
    diff = diff_tables(table(*a_rows), table(*b_rows))
    got = [(r["side"], r["rollout_id_a"], r["rollout_id_b"], r["reasons_gained"], r["reasons_lost"], r["change"],
            r["reward_a"], r["reward_b"]) for r in diff.arrow.to_pylist()]
    assert got == _reference(a_rows, b_rows)
    assert sum(diff.summary.changes.values()) == len(got)


# --------------------------------------------------------------------------- messages that say which input is wrong


RECORDS_OK = SAMPLES / "final_responses" / "final_answer_by_content.json"


def test_cli_diff_of_an_empty_run_says_whether_it_is_run_a_or_run_b(tmp_path, capsys):
    """A run directory with no rollouts is an error naming its side; an empty scan table is compared, with a note
    naming its side (its join reason is not 'the ids share nothing')."""
    a = _write(A, tmp_path / "a.parquet")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["diff", str(empty), str(a)]) == 2
    assert _one_error(capsys).endswith("(run A)")
    assert main(["diff", str(a), str(empty)]) == 2
    assert _one_error(capsys).endswith("(run B)")

    none = _write(table(), tmp_path / "none.parquet")
    assert main(["diff", str(none), str(a)]) == 0
    out = capsys.readouterr().out
    assert "joined by rollout id: run A has no rollouts\n" in out
    assert "note: run A has no rollouts (an empty scan table), so nothing is compared: every rollout of run B is " \
           "only in B\n" in out
    assert main(["diff", str(a), str(none)]) == 0
    assert "note: run B has no rollouts" in capsys.readouterr().out
    assert diff_tables(table(), table()).summary.notes == [
        "runs A and B have no rollouts (empty scan tables): there is nothing to compare"]
    assert diff_tables(A, B).summary.empty_note is None


def test_cli_diff_given_a_diff_table_says_it_is_one_and_what_a_and_b_take(tmp_path, capsys):
    a, b = _write(A, tmp_path / "a.parquet"), _write(B, tmp_path / "b.parquet")
    out = tmp_path / "d.parquet"
    assert main(["diff", str(a), str(b), "-o", str(out)]) == 0
    capsys.readouterr()
    for args in ([str(out), str(b)], [str(a), str(out)]):
        assert main(["diff", *args]) == 2
        error = _one_error(capsys)
        assert f"{out}: is a diff table (what `tokencap diff -o` writes" in error
        assert "A and B take scan tables (`tokencap scan RUN -o TABLE.parquet`) or run directories" in error
    with pytest.raises(DiffTableGiven, match="is a diff table"):  # --since and the Run page say it too
        read_scan(out)
    with pytest.raises(DiffError, match="d: is a diff table"):
        diff_tables(pq.read_table(out), B, names=("d", "B"))


def test_cli_diff_broken_rollout_records_name_their_flag(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"rollout_id": "x", "response": 5}\n')
    a = _write(A, tmp_path / "a.parquet")
    run = str(SAMPLES / "capture_store")
    assert main(["diff", run, str(a), "--final-responses-a", str(bad)]) == 2
    assert _one_error(capsys) == (f"tokencap: error: --final-responses-a: {bad}, line 1: field 'response': must be "
                                  "a Responses object (a JSON object with 'output')")
    assert main(["diff", str(a), run, "--final-responses-b", str(bad)]) == 2
    assert _one_error(capsys).startswith(f"tokencap: error: --final-responses-b: {bad}, line 1: ")


def test_cli_diff_a_broken_records_path_is_blamed_on_the_records_file_not_the_runs(tmp_path, capsys):
    """Before: a path the system refuses (a name too long) read 'A vs B: OSError', a directory 'no such file', and
    JSON nested too deep a traceback. Each now names the flag and the file, and B's records are read before A is
    scanned."""
    a = _write(A, tmp_path / "a.parquet")
    run = str(SAMPLES / "capture_store")
    long_name = tmp_path / ("r" * 300 + ".jsonl")
    assert main(["diff", run, str(a), "--final-responses-a", str(long_name)]) == 2
    error = _one_error(capsys)
    assert error.startswith(f"tokencap: error: --final-responses-a: {long_name}: cannot be read (File name too long)")
    assert " vs " not in error
    assert main(["diff", run, run, "--final-responses-b", str(tmp_path)]) == 2
    assert _one_error(capsys) == (f"tokencap: error: --final-responses-b: {tmp_path}: is a directory, not a "
                                  "regular file; --final-responses-b takes a rollout records file (JSON or JSONL)")
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"rollout_id": "x", "response": {"output": ' + "[" * 5000 + "]" * 5000 + "}}\n")
    assert main(["diff", run, str(a), "--final-responses-a", str(deep)]) == 2
    assert _one_error(capsys).startswith(f"tokencap: error: --final-responses-a: {deep}: JSON nested too deeply")
    assert main(["diff", run, run, "--final-responses-a", str(RECORDS_OK),
                 "--final-responses-b", str(tmp_path / "missing.jsonl")]) == 2
    assert _one_error(capsys) == f"tokencap: error: --final-responses-b: {tmp_path / 'missing.jsonl'}: no such file"
    assert main(["diff", str(long_name)[:-6], str(a)]) == 2  # a run path the system refuses names its side
    assert _one_error(capsys).endswith("(File name too long) (run A)")
    old = _write(B, tmp_path / "old_diff.parquet")
    assert main(["diff", str(a), str(long_name)[:-6], "-o", str(old)]) == 2  # also beside an -o that exists
    assert _one_error(capsys).endswith("(File name too long) (run B)")


# --------------------------------------------------------------------------- break causes (docs/contract.md#scan-diagnosis-columns)


def test_break_causes_of_both_sides_and_their_shares():
    a = table(row("r1", ("multiple_roots",), causes=("generation_dropped",)),
              row("r2", ("multiple_roots",), causes=("generation_dropped", "seam")),
              row("r3"), row("r4", ("unresolved_parent_calls",), causes=("record_fault",)))
    b = table(row("r1"), row("r2", ("multiple_roots",), causes=("seam",)), row("r3"), row("r5"))
    diff = diff_tables(a, b)
    rows = by_a(diff)
    assert rows["r2"]["break_causes_a"] == ["generation_dropped", "seam"] and rows["r2"]["break_causes_b"] == ["seam"]
    assert rows["r4"]["break_causes_b"] is None and rows["r5"]["break_causes_a"] is None
    causes = diff.summary.causes
    assert list(causes.index[:4]) == ["compaction", "compaction_summary", "subagent", "generation_dropped"]
    assert causes.loc["generation_dropped"].tolist() == [2, 0, 0.5, 0.0, -50.0]
    assert causes.loc["seam"].tolist() == [1, 1, 0.25, 0.25, 0.0]
    text = summary_text(diff)
    assert "why lineage broke" in text
    line = next(t for t in text.splitlines() if t.strip().startswith("generation_dropped"))
    assert line.split()[1:] == ["50.0%", "0.0%", "-50.0", "pp"]
    assert not any(t.strip().startswith("subagent") for t in text.splitlines())  # no rollout of either: not listed


def test_tables_from_before_the_diagnosis_columns_diff_with_no_causes():
    old = A.drop_columns(["breaks", "break_causes", "first_break_call", "delivered_mask_sample", "delivered_by"])
    diff = diff_tables(old, B)
    assert all(r["break_causes_a"] is None or r["break_causes_a"] == [] for r in diff.arrow.to_pylist())
    assert sum(a for a, _ in diff.summary.cause_counts.values()) == 0


# --------------------------------------------------------------------------- issue 37.17: what the printout says


def test_the_records_note_for_a_scan_table_says_to_rescan_its_run(tmp_path, capsys):
    """A scan table takes no --final-responses-b: the note says to rescan B's run with its records."""
    a = _write(_with_attribution(A, "attributed"), tmp_path / "a.parquet")
    b = _write(_with_attribution(B, None), tmp_path / "b.parquet")
    assert main(["diff", str(a), str(b)]) == 0
    note = capsys.readouterr().out.splitlines()[-1]
    assert note.endswith("scan B with its rollout records too, or neither (a scan table takes no records: rescan "
                         "B's run with `tokencap scan RUN -o TABLE --final-responses RECORDS`, or give the run "
                         "directory with --final-responses-b)")
    diff = diff_tables(_with_attribution(A, "attributed"), _with_attribution(B, None))
    assert summary_text(diff).splitlines()[-1].endswith("or neither (--final-responses-b)")  # B a run directory


def test_each_printed_change_is_the_difference_of_the_printed_shares():
    # 1 of 6 (16.666...%, printed 16.7%) against 2 of 6 (33.333...%, printed 33.3%): the exact change,
    # 16.666... pp, rounds to +16.7 pp; the printed figures differ by 16.6.
    a = table(*(row(f"r{i}", ("capture_incomplete",) if i < 1 else ()) for i in range(6)))
    b = table(*(row(f"r{i}", ("capture_incomplete",) if i < 2 else ()) for i in range(6)))
    text = summary_text(diff_tables(a, b))
    (reason,) = [line for line in text.splitlines() if line.strip().startswith("capture_incomplete")]
    assert reason.split()[1:] == ["16.7%", "33.3%", "+16.6", "pp"]
    (trainable,) = [line for line in text.splitlines() if line.startswith("trainable:")]
    assert trainable == "trainable: 83.3% of A (5), 66.7% of B (4), -16.6 pp"
