"""`tokencap check SOURCE [--final-responses FILE] [--tokenizer T]`: the pre-flight before
training. Exit 0 when no rollout is masked, 1 when one is, 2 for unreadable input (one line);
a line per masked rollout on stdout, then the summary."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rollouts_data import jsonl, rollout_record, turns_of

from tokencap.cli import check as check_command
from tokencap.cli import main
from tokencap.diagnosis import CAUSES, EVIDENCE_CAUSES, HINTS, diagnose
from tokencap.loading import iter_snapshots, load_final_responses
from tokencap.rollout import MASK_REASON_TEXT, build_rollout

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_data"
ROLLOUTS = SAMPLES / "rollouts" / "qwen3_rollouts.jsonl"


def check(capsys, *argv: str) -> tuple[int, list[str], str]:
    code = main(["check", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def assert_one_line_error(err: str, message: str) -> None:
    """``err`` is exactly the one line "tokencap: error: MESSAGE"; a MESSAGE ending in "(" is followed by
    the words of the library that read the file (its wording, not tokencap's)."""
    assert err.endswith("\n") and "\n" not in err[:-1], err
    if message.endswith("("):
        assert err.startswith(f"tokencap: error: {message}"), err
    else:
        assert err == f"tokencap: error: {message}\n"


def test_a_clean_capture_exits_0_with_only_the_summary(capsys):
    code, lines, err = check(capsys, SAMPLES / "clean_multiturn_tools.json")
    assert code == 0
    assert lines == ["check: 1 rollout, 1 trainable, 0 masked"]
    assert err == ""


def test_a_broken_capture_exits_1_with_its_break_call_cause_and_hint(capsys):
    source = SAMPLES / "history_truncated.json"
    (snapshot,) = iter_snapshots(source)
    result = build_rollout(snapshot)
    first = diagnose(result)[0]
    code, lines, _ = check(capsys, source)
    assert code == 1
    assert len(lines) == 2
    assert lines[0].startswith(f"{snapshot.rollout_id}: masked: {first.call_id}'s prompt")
    assert f"(cause: {first.cause})" in lines[0] and lines[0].endswith(HINTS[first.cause])
    assert lines[1] == f"check: 1 rollout, 0 trainable, 1 masked ({first.cause} 1)"


def test_a_rollout_masked_without_a_break_is_said_by_its_mask_reason(capsys):
    code, lines, _ = check(capsys, SAMPLES / "final_retry_unresolved.json")
    assert code == 1
    assert f"masked (unresolved_retries): {MASK_REASON_TEXT['unresolved_retries']}" in lines[0]
    assert lines[-1].endswith("(unresolved_retries 1)")


def test_the_summary_counts_every_rollout_of_a_jsonl(capsys):
    source = SAMPLES / "multi_rollout_entries.jsonl"
    results = [build_rollout(s) for s in iter_snapshots(source)]
    masked = [r for r in results if r.mask_sample]
    code, lines, _ = check(capsys, source)
    assert code == (1 if masked else 0)
    assert [line.split(":", 1)[0] for line in lines[:-1]] == [r.rollout_id for r in masked]
    assert lines[-1].startswith(f"check: {len(results)} rollouts, {len(results) - len(masked)} trainable, "
                                f"{len(masked)} masked")


def test_final_responses_beside_a_capture_bring_the_harness_cause(capsys):
    source = SAMPLES / "subagent_observed.json"
    records = SAMPLES / "final_responses" / "subagent_observed.json"
    (snapshot,) = iter_snapshots(source)
    finals = load_final_responses(records)
    evidence = finals.evidence_for(snapshot.rollout_id, single_rollout=True)
    result = build_rollout(snapshot, final_response=finals.for_rollout(snapshot.rollout_id, single_rollout=True))
    cause = diagnose(result, evidence=evidence)[0].cause
    assert cause in EVIDENCE_CAUSES  # the harness said what happened; the tokens alone cannot
    code, lines, _ = check(capsys, source, "--final-responses", records)
    assert code == 1
    assert f"(cause: {cause})" in lines[0] and lines[-1].endswith(f"({cause} 1)")
    _, alone, _ = check(capsys, source)
    assert f"(cause: {cause})" not in alone[0]


# --------------------------------------------------------------------------- unreadable input: exit 2


def test_a_missing_file_exits_2_with_one_line(capsys, tmp_path):
    code, lines, err = check(capsys, tmp_path / "nope.jsonl")
    assert code == 2 and lines == []
    assert_one_line_error(err, f"{tmp_path / 'nope.jsonl'}: no such file or directory")


@pytest.mark.parametrize(("content", "message"), [
    (b"\x00\x01garbage\xff" * 50, ": binary data (a NUL byte at byte 0), not JSON text; expected a snapshot JSON "
     "object, entries JSONL (one record a line), a capture-store directory or a zip of one"),
    (b"not json at all\n", ", line 1: not valid JSON ("),
    (b'{"entries": 3}\n', ": snapshot JSON: Expected `array`, got `int` - at `$.entries`; 'entries' must be a list "
     "of token-entry objects")])
def test_garbage_exits_2_with_one_line(capsys, tmp_path, content, message):
    path = tmp_path / "garbage.json"
    path.write_bytes(content)
    code, lines, err = check(capsys, path)
    assert code == 2 and lines == []
    assert_one_line_error(err, f"{path}{message}")


def test_a_bad_tokenizer_exits_2_before_any_work(capsys, tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}")
    code, lines, err = check(capsys, SAMPLES / "history_truncated.json", "--tokenizer", bad)
    assert code == 2 and lines == []
    assert_one_line_error(err, f"{bad}: not a tokenizer.json the tokenizers library can read (")


# --------------------------------------------------------------------------- rollouts with token ids (docs/contract.md#token-rollouts)


def made_rollouts(tmp_path: Path) -> Path:
    """Calls are items 0, 2, 4, ... (each tool call followed by its output)."""
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(jsonl([
        rollout_record(turns_of(3), rollout_id="good"),
        rollout_record(turns_of(4), rollout_id="cut-at-2", cuts=[2]),
        rollout_record(turns_of(3), rollout_id="good-too", reward=1.0),
        rollout_record(turns_of(3), rollout_id="cut-at-1", cuts=[1]),
    ]))
    return path


def test_a_rollouts_file_lists_the_rollouts_the_trainer_would_stop_on(capsys, tmp_path):
    code, lines, err = check(capsys, made_rollouts(tmp_path))
    assert code == 1
    assert len(lines) == 3
    assert lines[0].startswith("cut-at-2: NeMo RL would stop on this rollout: item-0004's prompt does not "
                               "continue item-0002 (cause: ")
    assert lines[1].startswith("cut-at-1: NeMo RL would stop on this rollout: item-0002's prompt does not "
                               "continue item-0000 (cause: ")
    assert lines[2].startswith("check: 4 rollouts, 2 trainable, 2 masked (")
    assert lines[2].endswith("; NeMo RL would stop on 2")
    assert "error" not in err


def test_a_contiguous_rollouts_file_exits_0(capsys, tmp_path):
    path = tmp_path / "ok.jsonl"
    path.write_bytes(jsonl([rollout_record(turns_of(3), rollout_id=f"r{i}", start=1) for i in range(2)]))
    code, lines, _ = check(capsys, path)
    assert code == 0 and lines == ["check: 2 rollouts, 2 trainable, 0 masked"]


def test_the_rollouts_sample_lists_its_declared_masked_rollouts_by_their_first_non_contiguous_item(capsys):
    declared = json.loads((ROLLOUTS.parent / "expected.json.txt").read_text())["rollouts"]
    code, lines, _ = check(capsys, ROLLOUTS)
    assert code == 1
    listed = {line.split(":", 1)[0]: line for line in lines[:-1]}
    masked = {rid for rid, d in declared.items() if d["mask_sample"]}
    assert set(listed) == masked
    for rid in masked:
        first = declared[rid]["non_contiguous_items"][0]
        assert listed[rid].startswith(f"{rid}: NeMo RL would stop on this rollout: {first}"), listed[rid]
    assert lines[-1].startswith(f"check: {len(declared)} rollouts, {len(declared) - len(masked)} trainable, "
                                f"{len(masked)} masked (")


@pytest.mark.skipif("history_reordered" not in CAUSES, reason="the sample declares the amended causes (12.4)")
@pytest.mark.parametrize("tokenizer", [True, False])
def test_the_rollouts_sample_lines_give_each_declared_first_break_and_cause(capsys, tokenizer):
    declared = json.loads((ROLLOUTS.parent / "expected.json.txt").read_text())["rollouts"]
    given = ["--tokenizer", SAMPLES / "qwen3" / "tokenizer.json"] if tokenizer else []
    _, lines, _ = check(capsys, ROLLOUTS, *given)
    listed = {line.split(":", 1)[0]: line for line in lines[:-1]}
    for rid, d in declared.items():
        if d["mask_sample"]:
            first = d["first_break"]
            cause = first["cause"] if tokenizer else first.get("cause_without_tokenizer", first["cause"])
            assert listed[rid].startswith(f"{rid}: NeMo RL would stop on this rollout: {first['call_id']}")
            assert f"(cause: {cause}" in listed[rid] and listed[rid].endswith(HINTS[cause]), listed[rid]


def test_final_responses_beside_a_rollouts_file_exits_2_with_the_error(capsys, tmp_path):
    records = SAMPLES / "final_responses" / "compaction_observed.json"
    code, lines, err = check(capsys, made_rollouts(tmp_path), "--final-responses", records)
    assert code == 2 and lines == []
    assert_one_line_error(err, f"{SAMPLES / 'final_responses' / 'compaction_observed.json'}: --final-responses given "
                               "with a source of rollout records whose output items carry token ids; such a file is "
                               "its own records (its final responses, rewards and evidence): drop --final-responses")


def test_the_command_line_gates_a_job_by_its_exit_code(tmp_path):
    """As a training job's pre-flight step runs it: a process, its exit code, lines on stdout."""
    done = subprocess.run([sys.executable, "-m", "tokencap", "check", str(made_rollouts(tmp_path))], check=False,
                          capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[-1].startswith("check: 4 rollouts, 2 trainable, 2 masked")
    assert done.stderr == ""


def test_a_long_check_says_how_far_it_is_on_stderr_off_a_terminal(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(check_command, "PROGRESS_EVERY", 0.0)  # every rollout counts as long
    code, lines, err = check(capsys, made_rollouts(tmp_path))
    assert code == 1 and lines[-1].startswith("check: 4 rollouts")
    progress = err.splitlines()
    assert len(progress) == 4
    assert progress[0].startswith("tokencap check: 1 rollouts [") and progress[-1].startswith("tokencap check: 4 ")
    assert not any(line.startswith("tokencap check:") for line in lines)  # stdout holds only the check's lines


class _ClosedPipe:
    """A standard output whose reader went away after ``lines`` lines."""

    def __init__(self, lines: int) -> None:
        self.left = lines
        self.written: list[str] = []

    def write(self, text: str) -> int:
        if self.left == 0:
            raise BrokenPipeError(32, "Broken pipe")
        self.left -= 1
        self.written.append(text)
        return len(text)

    def flush(self) -> None:
        if self.left == 0:
            raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        raise io.UnsupportedOperation("no file descriptor")  # as a stream in memory says


@pytest.mark.parametrize("lines", [0, 1])
def test_a_reader_that_goes_away_does_not_turn_a_masked_check_into_a_pass(tmp_path, monkeypatch, lines):
    pipe = _ClosedPipe(lines)
    monkeypatch.setattr(sys, "stdout", pipe)
    assert main(["check", str(made_rollouts(tmp_path))]) == 1  # not 0: the check went on to its end
    assert len(pipe.written) == lines


def test_a_closed_pipe_keeps_the_exit_code_of_the_command(tmp_path):
    source = made_rollouts(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "tokencap", "check", str(source)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    proc.stdout.close()  # the reader is gone before the first line (as `| head -0`)
    err = proc.stderr.read()
    assert proc.wait() == 1, err
    assert b"Traceback" not in err


def test_a_source_that_yields_no_rollout_is_no_pass(capsys, monkeypatch):
    monkeypatch.setattr(check_command, "_inputs", lambda args, evidence: iter(()))
    code, lines, err = check(capsys, SAMPLES / "clean_multiturn_tools.json")
    assert code == 2 and lines == []
    assert_one_line_error(err, f"{SAMPLES / 'clean_multiturn_tools.json'}: no rollout to check")
