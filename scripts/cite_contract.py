"""Rewrite "SPEC n.n" citations into pointers at the project's own reference, docs/contract.md.

Older docstrings, comments and tests cite sections of a planning document the repository does
not hold ("SPEC 4.6", "(SPEC 12.1-12.6)", "SPEC 4, 5 and 7", "SPEC 7 order", "SPEC 12.4 as
amended"). docs/contract.md restates that contract and maps each old number to one of its
anchors in its "§ → anchor" table; this script reads the table and rewrites each citation:

    (SPEC 4.6)            -> (docs/contract.md#builder-retries)
    SPEC 4, 5 and 7       -> docs/contract.md#builder, #projection and #rollout
    SPEC 12.1-12.6        -> docs/contract.md#breaks to #evidence
    in SPEC 7 order       -> in the order of docs/contract.md#rollout
    SPEC 12.1 as amended  -> docs/contract.md#breaks

In Markdown files the pointer is a relative link. Text that is not a numbered citation
("SPECIAL", ``"SPEC" not in message``) is left alone, so running the script twice changes
nothing. Lines it makes longer than 120 characters are listed on stderr, to be wrapped by hand.

    python scripts/cite_contract.py                      # the whole repository
    python scripts/cite_contract.py --paths tokencap/app tests/test_app.py
    python scripts/cite_contract.py --check              # exit 1 if anything would change
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONTRACT = REPO / "docs" / "contract.md"
ROW = re.compile(r"\|\s*(\d+(?:\.\d+)?)\s*\|\s*\[#([\w-]+)\]\(#[\w-]+\)")
NUMBER = r"\d+(?:\.\d+)?"
# "SPEC 4.6", "SPEC 4, 5 and 7", "SPEC 12.1-12.6", "SPEC 12.3/12.4": a number, then more numbers
# joined by a separator (a later number followed by "'s" starts a phrase of its own and stays).
SEPARATOR = r"(?:\s*[-–/]\s*|,\s+|\s+and\s+)"
CITATION = re.compile(
    rf"\bSPEC\s+(?P<numbers>{NUMBER}(?:{SEPARATOR}{NUMBER}(?!'s|\d|\.\d))*)"
    rf"(?P<order>\s+order\b)?(?P<amended>\s+as amended)?")
THE_SPECS = re.compile(r"\bthe SPEC's\b")
SUFFIXES = (".py", ".md", ".sh", ".toml", ".txt")
# sample_data/ is written by scripts/make_sample_*.py: rewrite the generators and regenerate it.
SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "build", "dist", "sample_data"}
SKIP_FILES = {"docs/contract.md", "scripts/cite_contract.py"}


def spec_table(contract: Path = CONTRACT) -> dict[str, str]:
    """Old section number -> anchor of docs/contract.md, from its table (two rows a line)."""
    return dict(ROW.findall(contract.read_text(encoding="utf-8")))


def _pointer(numbers: str, table: dict[str, str], where: str) -> str:
    """``numbers`` ("4, 5 and 7") with each number an anchor, the first one with the page."""
    parts = re.split(f"({SEPARATOR})", numbers)
    out: list[str] = []
    first = True
    for part in parts:
        if re.fullmatch(NUMBER, part):
            anchor = table.get(part)
            if anchor is None:
                raise KeyError(f"docs/contract.md has no row for section {part}: add it to the table")
            out.append(f"{where}#{anchor}" if first else f"#{anchor}")
            first = False
        elif re.fullmatch(r"\s*[-–]\s*", part):
            out.append(" to ")
        else:
            out.append(part)
    return "".join(out)


def _markdown_pointer(numbers: str, table: dict[str, str], link: str) -> str:
    """The same, as Markdown links (``link`` is the page's path relative to the file)."""
    pieces = re.split(f"({SEPARATOR})", numbers)
    out = []
    for piece in pieces:
        if re.fullmatch(NUMBER, piece):
            anchor = table[piece]
            out.append(f"[contract.md#{anchor}]({link}#{anchor})")
        elif re.fullmatch(r"\s*[-–]\s*", piece):
            out.append(" to ")
        else:
            out.append(piece)
    return "".join(out)


def rewrite(text: str, table: dict[str, str], markdown_link: str | None = None) -> str:
    """``text`` with every numbered SPEC citation pointing at docs/contract.md instead."""

    def one(match: re.Match[str]) -> str:
        numbers = match["numbers"]
        if markdown_link is None:
            pointer = _pointer(numbers, table, "docs/contract.md")
        else:
            pointer = _markdown_pointer(numbers, table, markdown_link)
        return f"the order of {pointer}" if match["order"] else pointer

    text = CITATION.sub(one, text)
    return THE_SPECS.sub("the contract's", text)


def files_under(paths: list[Path]) -> list[Path]:
    """Text files to rewrite: the given files, and those under the given directories."""
    found: list[Path] = []
    for path in paths:
        if path.is_file():
            found.append(path)
            continue
        for root, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            found.extend(Path(root) / n for n in sorted(names) if n.endswith(SUFFIXES))
    return [f for f in found if _relative(f) not in SKIP_FILES]


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return path.as_posix()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", nargs="+", type=Path, default=None,
                        help="files or directories to rewrite (default: the whole repository)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    args = parser.parse_args(argv)
    table = spec_table()
    changed = []
    for path in files_under(args.paths or [REPO]):
        text = path.read_text(encoding="utf-8")
        link = None
        if path.suffix == ".md":
            link = os.path.relpath(CONTRACT, path.resolve().parent).replace(os.sep, "/")
        new = rewrite(text, table, link)
        if new == text:
            continue
        changed.append(path)
        if not args.check:
            path.write_text(new, encoding="utf-8")
        for number, line in enumerate(new.splitlines(), 1):
            if len(line) > 120 and line not in text:
                print(f"{_relative(path)}:{number}: {len(line)} characters, wrap by hand", file=sys.stderr)
    for path in changed:
        print(_relative(path))
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
