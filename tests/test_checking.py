"""The words of `tokencap check` (tokencap.checking): a masked rollout's line, and the summary's
counts, from real builds and diagnoses of the samples and of made rollouts."""

from __future__ import annotations

from pathlib import Path

from rollouts_data import jsonl, rollout_record, turns_of

from tokencap.checking import (
    TRAINER,
    CheckTally,
    first_break,
    masked_cause,
    masked_line,
)
from tokencap.diagnosis import HINTS, diagnose
from tokencap.loading import iter_snapshots
from tokencap.loading.rollouts import from_output_items
from tokencap.rollout import MASK_REASON_TEXT, build_rollout

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"


def checked(path: Path) -> list[tuple]:
    """(result, breaks, from_items) of every rollout of a source, as `check` makes them."""
    out = []
    for snapshot in iter_snapshots(path):
        result = build_rollout(snapshot, project=False)
        out.append((result, diagnose(result) if result.mask_sample else [], from_output_items(snapshot)))
    return out


def test_a_capture_break_line_names_the_call_its_predecessor_cause_and_hint():
    ((result, breaks, from_items),) = checked(SAMPLES / "history_truncated.json")
    assert result.mask_sample and breaks and not from_items
    first = breaks[0]
    line = masked_line(result, breaks, from_items=False)
    assert line.startswith(f"{result.rollout_id}: masked: {first.call_id}'s prompt does not continue "
                           f"{first.predecessor} (cause: {first.cause})")
    assert line.endswith(HINTS[first.cause])
    assert "\n" not in line and TRAINER not in line


def test_a_record_fault_and_more_breaks_are_said():
    ((result, breaks, _),) = checked(SAMPLES / "broken_delta_chain.json")
    line = masked_line(result, breaks, from_items=False)
    assert f"{breaks[0].call_id}'s record is faulty ({breaks[0].note})" in line
    assert f"(cause: record_fault) ({len(breaks) - 1} more break" in line


def test_a_masked_rollout_without_a_break_gets_its_first_mask_reason_in_words():
    ((result, breaks, _),) = checked(SAMPLES / "final_retry_unresolved.json")
    assert result.mask_sample and breaks == []
    reason = result.mask_reasons[0]
    assert masked_line(result, breaks, from_items=False) == \
        f"{result.rollout_id}: masked ({reason}): {MASK_REASON_TEXT[reason]}"
    assert masked_cause(result, breaks) == reason


def test_a_load_error_line_carries_the_error(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(jsonl([rollout_record(turns_of(2), rollout_id="ok"),
                            {"rollout_id": "broken", "response": {"id": "x", "output": [{"type": "message"}]}}]))
    results = {r.rollout_id: (r, b, f) for r, b, f in checked(path)}
    result, breaks, from_items = results["broken"]
    line = masked_line(result, breaks, from_items=from_items)
    assert line.startswith("broken: masked (load_error): the snapshot could not be loaded: ")
    assert "no output item carries generation_token_ids" in line and "\n" not in line


def test_a_rollouts_line_is_worded_as_the_trainer_would_stop(tmp_path):
    path = tmp_path / "r.jsonl"
    # Calls are items 0, 2, 4, 6 (each tool call followed by its output): the cut at call 2 is item-0004.
    path.write_bytes(jsonl([rollout_record(turns_of(4), rollout_id="cut", cuts=[2])]))
    ((result, breaks, from_items),) = checked(path)
    assert from_items
    brk = first_break(breaks, from_items=True)
    assert (brk.call_id, brk.kind, brk.predecessor) == ("item-0004", "boundary", "item-0002")
    line = masked_line(result, breaks, from_items=True)
    assert line.startswith(f"cut: {TRAINER} would stop on this rollout: item-0004's prompt does not continue "
                           f"item-0002 (cause: {brk.cause})")
    assert line.endswith(brk.hint)


def test_the_summary_counts_rollouts_trainable_masked_and_by_cause():
    tally = CheckTally()
    for result, breaks, from_items in checked(SAMPLES / "rollouts" / "qwen3_rollouts.jsonl"):
        tally.add(result, breaks, from_items=from_items)
    assert (tally.rollouts, tally.trainable, tally.masked) == (36, 10, 26)
    summary = tally.summary()
    assert summary.startswith("check: 36 rollouts, 10 trainable, 26 masked (")
    assert summary.endswith(f"; {TRAINER} would stop on 26")
    assert sum(tally.by_cause.values()) == 26
    for cause, count in tally.by_cause.items():
        assert f"{cause} {count}" in summary


def test_a_clean_summary_has_no_causes_and_no_trainer():
    tally = CheckTally()
    for result, breaks, from_items in checked(SAMPLES / "clean_multiturn_tools.json"):
        tally.add(result, breaks, from_items=from_items)
    assert tally.summary() == "check: 1 rollout, 1 trainable, 0 masked"


def test_the_summary_orders_break_causes_before_mask_reasons():
    tally = CheckTally()
    for source in ("history_truncated.json", "final_retry_unresolved.json"):
        for result, breaks, from_items in checked(SAMPLES / source):
            tally.add(result, breaks, from_items=from_items)
    assert tally.summary().endswith("(history_dropped 1, unresolved_retries 1)")
