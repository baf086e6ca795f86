"""Write the options reference of docs/cli.md from the argument parser itself.

    PYTHONPATH=$PWD python scripts/cli_reference.py          # rewrite docs/cli.md's generated part
    PYTHONPATH=$PWD python scripts/cli_reference.py --check  # exit 1 when it differs from the parser

Only the text between ``<!-- generated: cli reference -->`` and ``<!-- end -->`` is
written; the rest of the page stays hand-written. Each command gets its synopsis and a
table of its arguments, rendered here from `tokencap.cli._parser()` (not from argparse's
help text, whose layout depends on the terminal width and the Python version), so the
page changes exactly when an option does. tests/test_cli_reference.py runs ``--check``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "cli.md"
BEGIN = "<!-- generated: cli reference -->"
END = "<!-- end -->"
COMMAND = "python scripts/cli_reference.py"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """Each command's parser and its one-line help, in the order `tokencap --help` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return {name: (cmd, helps.get(name, "")) for name, cmd in action.choices.items()}
    raise SystemExit("tokencap's parser has no commands")


def _arguments(cmd: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in cmd._actions if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]


def _value(action: argparse.Action) -> str:
    """What follows an option (or names a positional), as argparse's usage writes it."""
    if action.metavar is not None:
        return str(action.metavar)
    if action.choices is not None:
        return "{" + ",".join(str(c) for c in action.choices) + "}"
    return action.dest if not action.option_strings else action.dest.upper()


def _usage_part(action: argparse.Action) -> str:
    if not action.option_strings:
        name = _value(action)
        return {"?": f"[{name}]", "*": f"[{name} ...]", "+": f"{name} [{name} ...]"}.get(str(action.nargs), name)
    flag = action.option_strings[0]
    return f"[{flag}]" if action.nargs == 0 else f"[{flag} {_value(action)}]"


def _names(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{_value(action)}`"
    if action.nargs == 0:
        return ", ".join(f"`{flag}`" for flag in action.option_strings)
    return ", ".join(f"`{flag} {_value(action)}`" for flag in action.option_strings)


def _help(action: argparse.Action) -> str:
    text = " ".join((action.help or "").split())
    if "%(" in text:
        text = text % {**vars(action), "prog": "tokencap"}
    return text.replace("|", "\\|")


def render(parser: argparse.ArgumentParser) -> str:
    """The generated part of docs/cli.md (markers excluded), from ``parser``."""
    lines = [f"<!-- Written by `{COMMAND}` from the argument parser; edit the parser, not this. -->", ""]
    for name, (cmd, summary) in _subcommands(parser).items():
        actions = _arguments(cmd)
        usage = " ".join(["tokencap", name] + [_usage_part(a) for a in actions if a.option_strings]
                         + [_usage_part(a) for a in actions if not a.option_strings])
        lines += [f"#### `tokencap {name}`", "", summary[:1].upper() + summary[1:] + ".", "",
                  "```text", usage, "```", ""]
        if actions:
            lines += ["| argument | meaning |", "|---|---|"]
            lines += [f"| {_names(a)} | {_help(a)} |" for a in actions]
            lines.append("")
    return "\n".join(lines)


def updated(page: str, generated: str) -> str:
    """``page`` with the text between its markers replaced by ``generated``."""
    head, begin, rest = page.partition(BEGIN)
    body, end, tail = rest.partition(END)
    if not begin or not end:
        raise SystemExit(f"{DOC.relative_to(REPO)}: the markers {BEGIN} ... {END} are missing")
    return f"{head}{BEGIN}\n{generated}\n{END}{tail}"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the page differs from the parser")
    ap.add_argument("--doc", type=Path, default=DOC, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    from tokencap.cli import _parser

    page = args.doc.read_text(encoding="utf-8")
    new = updated(page, render(_parser()))
    if args.check:
        if new != page:
            print(f"{args.doc}: the CLI reference differs from the argument parser; run `{COMMAND}`",
                  file=sys.stderr)
            return 1
        return 0
    if new != page:
        args.doc.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
