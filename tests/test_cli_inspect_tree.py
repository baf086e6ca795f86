"""`tokencap inspect` on a long chain stays readable (issue 37, item 16): a linear chain is flat, the
indent is capped at `TREE_INDENT_CAP` columns, and a line indented that far says its depth."""

from __future__ import annotations

import json
import re
from pathlib import Path

from helpers import Conv, snapshot_dict

from tokencap.cli import main
from tokencap.report import TREE_INDENT_CAP

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"


def _tree(capsys, source: Path) -> list[str]:
    assert main(["inspect", str(source)]) == 0
    out = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(out) if line.startswith("call tree"))
    return out[start + 1: out.index("", start)]


def test_the_526_call_sample_is_one_flat_column(capsys) -> None:
    tree = _tree(capsys, SAMPLES / "long_rollout_delta.json")
    calls = [line for line in tree if re.search(r"call-\d{4}", line)]
    assert len(calls) >= 500
    assert max(len(line) for line in tree) <= 100, max(tree, key=len)
    # One fork (a quarantined retry of call-0260) sets the chain after it one step in; nothing else moves.
    assert {len(line) - len(line.lstrip()) for line in calls} == {2, 4, 7}
    assert sum(line.startswith("    `- ") for line in calls) == 2


def test_only_forks_indent_and_each_child_of_a_fork_is_marked(capsys) -> None:
    assert _tree(capsys, SAMPLES / "subagent_branch.json") == [
        "  * call-0001  prompt 94  gen 37  finish=tool_calls",
        "    `- * call-0002  prompt 166  gen 36  finish=tool_calls",
        "       * call-0005  prompt 251  gen 17  finish=stop",
        "    `- + call-0003  prompt 179  gen 79  finish=tool_calls  branch",
        "       + call-0004  prompt 287  gen 18  finish=length  branch",
    ]


def test_a_deep_fork_is_capped_and_says_its_depth(tmp_path: Path, capsys) -> None:
    conv = Conv("comb")
    conv.root("c00")
    for i in range(1, 31):  # every call forks: the chain goes on, and a leaf beside it
        conv.child(f"c{i:02d}", f"c{i - 1:02d}")
        conv.child(f"leaf{i:02d}", f"c{i - 1:02d}")
    source = tmp_path / "comb.json"
    source.write_text(json.dumps(snapshot_dict(conv.records)))
    tree = _tree(capsys, source)
    assert len(tree) == 61
    indents = [len(line) - len(line.lstrip()) for line in tree]
    assert max(indents) == TREE_INDENT_CAP
    deepest = next(line for line in tree if " c30 " in line)
    assert deepest.startswith(" " * TREE_INDENT_CAP + "(depth 30) `- ")
    assert not any("(depth" in line for line, indent in zip(tree, indents) if indent < TREE_INDENT_CAP)
    assert max(len(line) for line in tree) <= TREE_INDENT_CAP + 80
