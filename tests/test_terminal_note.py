"""A given terminal call id that anchors nothing is said, not only masked (issue 13.2).

`--terminal-call-id` naming a call the rollout does not have (or one that is not chained)
masks the rollout with `terminal_call_not_delivered`; the command says why on stderr, in
one line naming the id and the rollout, and the result carries the same words
(`RolloutResult.notes`) for the app's verdict banner. The JSON `build` writes is unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers import Conv, snapshot_dict

from tokencap import TokenCaptureSnapshot, TokenEntry, build_rollout
from tokencap.cli import main
from tokencap.views.model import RolloutView
from tokencap.views.rollout.culprits import reason_lines

MISSING = "terminal call c99 is not in rollout r1; the rollout is masked (terminal_call_not_delivered)"


def conv(rollout_id: str = "r1") -> Conv:
    c = Conv(rollout_id)
    c.root("c1")
    c.child("c2", "c1")
    return c


def snapshot(c: Conv) -> TokenCaptureSnapshot:
    return TokenCaptureSnapshot(rollout_id=c.records[0]["rollout_id"],
                                entries=[TokenEntry.from_dict(r) for r in c.records])


def write(path: Path, c: Conv) -> Path:
    path.write_text(json.dumps(snapshot_dict(c.records)))
    return path


def test_build_says_on_stderr_that_the_terminal_call_is_not_in_the_rollout(tmp_path: Path, capsys) -> None:
    source = write(tmp_path / "r1.json", conv())
    assert main(["build", str(source), "--terminal-call-id", "c99"]) == 0
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert MISSING in line and "its calls: c1, c2" in line
    out = json.loads(captured.out)
    assert out["mask_reasons"] == ["terminal_call_not_delivered"]
    assert list(out) == ["rollout_id", "mask_sample", "mask_reasons", "metrics", "rebuilt_response"]
    assert main(["build", str(source)]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert list(out["metrics"]) == list(plain["metrics"])  # the written JSON keeps the contract's keys


def test_inspect_says_it_on_stderr_too(tmp_path: Path, capsys) -> None:
    source = write(tmp_path / "r1.json", conv())
    assert main(["inspect", str(source), "--terminal-call-id", "c99"]) == 0
    assert MISSING in capsys.readouterr().err


def test_a_terminal_call_that_exists_says_nothing(tmp_path: Path, capsys) -> None:
    source = write(tmp_path / "r1.json", conv())
    assert main(["build", str(source), "--terminal-call-id", "c2"]) == 0
    assert capsys.readouterr().err == ""
    assert build_rollout(snapshot(conv()), terminal_call_id="c2").notes == []


def test_each_rollout_of_a_directory_without_the_call_is_named(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    run.mkdir()
    write(run / "a.json", conv("a"))
    b = Conv("b")
    b.root("c1")
    b.child("c99", "c1")
    write(run / "b.json", b)
    assert main(["build", str(run), "--terminal-call-id", "c99"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["tokencap: warning: terminal call c99 is not in rollout a; the rollout is masked "
                   "(terminal_call_not_delivered) (its calls: c1, c2)"]


def test_the_result_carries_the_note_as_data() -> None:
    result = build_rollout(snapshot(conv()), terminal_call_id="c99")
    assert result.mask_reasons == ["terminal_call_not_delivered"]
    assert len(result.notes) == 1 and result.notes[0].startswith(MISSING)
    assert "notes" not in result.summary()


def test_a_call_with_no_generated_token_is_named_as_not_chained() -> None:
    c = conv()
    c.child("c3", "c2", gen=[])
    result = build_rollout(snapshot(c), terminal_call_id="c3")
    (note,) = result.notes
    assert note.startswith("terminal call c3 of rollout r1 is not delivered: it generated no token")
    assert note.endswith("the rollout is masked (terminal_call_not_delivered)")


def test_the_rollout_page_shows_the_note_with_the_verdict() -> None:
    view = RolloutView(snapshot(conv()), anchor="c99")
    (line,) = [ln for ln in reason_lines(view) if ln.code == "terminal_call_not_delivered"]
    (culprit,) = line.culprits
    assert culprit.text.startswith(MISSING)
