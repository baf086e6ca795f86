"""Code, tests and docs cite the contract by anchors of docs/contract.md, never by "SPEC n.n".

The repository's reference is docs/contract.md. Its "§ → anchor" table keeps the old section
numbers for readers who hold the planning document it replaces; `scripts/cite_contract.py`
rewrites a numbered citation into a pointer at the anchor. These tests keep it so: every row of
the table leads to an anchor, no numbered citation is left, and every anchor a pointer names
exists on the page.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONTRACT = REPO / "docs" / "contract.md"
ROW = re.compile(r"\|\s*(\d+(?:\.\d+)?)\s*\|\s*\[#([\w-]+)\]\(#([\w-]+)\)")
NUMBERED = re.compile(r"\bSPEC(?:\s+\d|'s\b)")
# "docs/contract.md#breaks", then any "#anchor" of the same pointer: "…#breaks, #predecessor and #causes".
POINTER = re.compile(r"contract\.md#([\w-]+)((?:(?:,\s*|\s+and\s+|\s+to\s+|/)#[\w-]+)*)")
# Files still being edited elsewhere; the lead runs `scripts/cite_contract.py --paths` over them.


def covered() -> list[Path]:
    files = [*REPO.glob("tokencap/**/*.py"), *REPO.glob("tests/*.py"), *REPO.glob("docs/*.md"),
             *REPO.glob("scripts/*.py"), *REPO.glob("benchmarks/*.py"), REPO / "DESIGN.md", REPO / "README.md",
             REPO / "CHANGELOG.md"]
    return [f for f in files if f.exists() and f.name not in ("test_contract_doc.py", "cite_contract.py")]


def anchors() -> set[str]:
    return set(re.findall(r'<a id="([\w-]+)"></a>', CONTRACT.read_text(encoding="utf-8")))


def spec_table() -> dict[str, str]:
    """Section number -> anchor, from the page's table (two of its rows a line)."""
    return {number: anchor for number, anchor, _ in ROW.findall(CONTRACT.read_text(encoding="utf-8"))}


def test_every_row_leads_to_an_anchor_of_the_page():
    text = CONTRACT.read_text(encoding="utf-8")
    table = spec_table()
    assert len(table) > 40
    for _, shown, target in ROW.findall(text):
        assert shown == target
    assert {a for a in table.values() if a not in anchors()} == set()


def test_no_file_cites_the_contract_by_section_number():
    left = {str(f.relative_to(REPO)): len(NUMBERED.findall(f.read_text(encoding="utf-8"))) for f in covered()}
    assert {f: n for f, n in left.items() if n} == {}


def test_every_anchor_a_pointer_names_exists():
    known = anchors()
    named: dict[str, str] = {}
    for f in covered():
        for first, rest in POINTER.findall(f.read_text(encoding="utf-8")):
            for anchor in [first, *re.findall(r"#([\w-]+)", rest)]:
                named.setdefault(anchor, str(f.relative_to(REPO)))
    assert len(named) > 30
    assert {a: f for a, f in named.items() if a not in known} == {}


def test_the_rewrite_points_at_the_page_and_changes_nothing_twice():
    sys.path.insert(0, str(REPO / "scripts"))
    import cite_contract

    table = spec_table()
    text = "Retries (SPEC 4.6); rules of SPEC 4, 5 and 7; breaks SPEC 12.1-12.6; in SPEC 7 order; SPEC 12.4 as amended."
    once = cite_contract.rewrite(text, table)
    assert once == ("Retries (docs/contract.md#builder-retries); rules of docs/contract.md#builder, #projection and "
                    "#rollout; breaks docs/contract.md#breaks to #evidence; in the order of docs/contract.md#rollout; "
                    "docs/contract.md#causes.")
    assert cite_contract.rewrite(once, table) == once
    assert cite_contract.rewrite('assert "SPEC" not in message; SPECIAL', table) == 'assert "SPEC" not in message; SPECIAL'
    linked = cite_contract.rewrite("(SPEC 3.4)", table, markdown_link="docs/contract.md")
    assert linked == "([contract.md#input-errors](docs/contract.md#input-errors))"
