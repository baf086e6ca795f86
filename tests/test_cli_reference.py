"""docs/cli.md's options reference is what the argument parser says (scripts/cli_reference.py writes it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "cli_reference.py"
DOC = REPO / "docs" / "cli.md"


def check(doc: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(SCRIPT), "--check", "--doc", str(doc)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_docs_cli_md_matches_the_argument_parser():
    proc = check(DOC)
    assert proc.returncode == 0, proc.stderr.strip() or proc.stdout.strip()


def test_every_command_and_option_is_in_the_reference():
    from tokencap.cli import _parser

    text = DOC.read_text(encoding="utf-8")
    generated = text[text.index("<!-- generated: cli reference -->"):text.index("<!-- end -->")]
    sub = next(a for a in _parser()._actions if a.choices and "build" in a.choices)
    for name, cmd in sub.choices.items():
        assert f"#### `tokencap {name}`" in generated, name
        for action in cmd._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in generated, (name, flag)


def test_a_drifted_page_fails_naming_the_command_to_run(tmp_path):
    drifted = tmp_path / "cli.md"
    drifted.write_text(DOC.read_text(encoding="utf-8").replace("| `--rollout ID` | only this rollout |",
                                                                 "| `--rollout ID` | an old wording |", 1),
                       encoding="utf-8")
    proc = check(drifted)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (f"{drifted}: the CLI reference differs from the argument parser; "
                                   "run `python scripts/cli_reference.py`")
