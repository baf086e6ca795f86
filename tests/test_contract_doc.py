"""docs/contract.md maps every "SPEC n.n" the code and tests cite to one of its own anchors.

The repository's reference is docs/contract.md; citations of the old numbering are being
rewritten to its anchors. Until they are, each one must have a row in the page's table,
and each row must lead to an anchor that exists.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONTRACT = REPO / "docs" / "contract.md"
ROW = re.compile(r"\|\s*(\d+(?:\.\d+)?)\s*\|\s*\[#([\w-]+)\]\(#([\w-]+)\)")
CITATION = re.compile(r"SPEC (\d+(?:\.\d+)?)")


def spec_table() -> dict[str, str]:
    """Section number -> anchor, from the page's table (two of its rows a line)."""
    return {number: anchor for number, anchor, _ in ROW.findall(CONTRACT.read_text(encoding="utf-8"))}


def test_every_row_leads_to_an_anchor_of_the_page():
    text = CONTRACT.read_text(encoding="utf-8")
    anchors = set(re.findall(r'<a id="([\w-]+)"></a>', text))
    table = spec_table()
    assert len(table) > 40
    for _, shown, target in ROW.findall(text):
        assert shown == target
    assert {a for a in table.values() if a not in anchors} == set()


def test_every_cited_spec_number_has_a_row():
    table = spec_table()
    files = [*REPO.glob("tokencap/**/*.py"), *REPO.glob("tests/*.py"), *REPO.glob("docs/*.md"),
             REPO / "DESIGN.md", REPO / "README.md"]
    cited = {n: f for f in files for n in CITATION.findall(f.read_text(encoding="utf-8"))}
    assert len(cited) > 20
    missing = {n: str(f.relative_to(REPO)) for n, f in cited.items() if n not in table}
    assert missing == {}
