"""The README stays a page a newcomer can finish, and every link in it and in docs/ leads somewhere.

The reference lives in docs/; the README keeps what tokencap is, the two set-up commands, a
five-minute tour with one screenshot of each page, and links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", REPO / "DESIGN.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    targets = [t for t in LINK.findall(page.read_text(encoding="utf-8")) if "://" not in t]
    missing = [t for t in targets if not (page.parent / t).exists()]
    assert missing == []


def test_readme_is_short_and_shows_both_pages() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert "bash scripts/test.sh" in text and "python -m tokencap app" in text
    for image in ("docs/img/run-page.png", "docs/img/rollout-page.png"):
        assert f"]({image})" in text and (REPO / image).stat().st_size > 10_000


def test_design_is_what_a_maintainer_reads_first() -> None:
    assert len((REPO / "DESIGN.md").read_text(encoding="utf-8").splitlines()) <= 250


def test_every_cause_is_explained_with_its_hint() -> None:
    """docs/verdicts.md lists each cause of the vocabulary with the very hint the tools print."""
    from tokencap.diagnosis import CAUSES, HINTS

    text = (REPO / "docs" / "verdicts.md").read_text(encoding="utf-8")
    assert [c for c in CAUSES if f"| `{c}` | {HINTS[c]} |" not in text] == []
