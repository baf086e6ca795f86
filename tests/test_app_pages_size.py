"""Each file of the app's pages stays readable: at most 500 lines (the project's budget for a page file).

A page that outgrows it is split by page part into helpers beside it (`app_pages/rollout_*.py`,
`app_pages/run_*.py`), and any decision it makes goes to `tokencap/views/`, where it is unit-tested.
"""

from __future__ import annotations

from pathlib import Path

import pytest

PAGES = Path(__file__).resolve().parent.parent / "app_pages"
BUDGET = 500


@pytest.mark.parametrize("page", sorted(PAGES.glob("*.py")), ids=lambda p: p.name)
def test_each_app_page_file_is_at_most_500_lines(page: Path) -> None:
    lines = len(page.read_text(encoding="utf-8").splitlines())
    assert lines <= BUDGET, (f"{page.name} is {lines} lines, over the {BUDGET}-line budget: split it by page part "
                             "into a helper beside it, and move decisions into tokencap/views/")


def test_there_are_pages_to_check() -> None:
    assert (PAGES / "rollout.py").is_file() and (PAGES / "run.py").is_file()
