"""Each file of the app's pages stays readable: at most 500 lines (the project's budget for a page file).

A page that outgrows it is split by page part into helpers beside it (`tokencap/app/rollout/*.py`,
`tokencap/app/run/*.py`), and any decision it makes goes to `tokencap/views/`, where it is unit-tested.
"""

from __future__ import annotations

from pathlib import Path

import pytest

PAGES = Path(__file__).resolve().parent.parent / "tokencap" / "app"
BUDGET = 500


@pytest.mark.parametrize("page", sorted(PAGES.rglob("*.py")), ids=lambda p: str(p.relative_to(PAGES)))
def test_each_app_page_file_is_at_most_500_lines(page: Path) -> None:
    lines = len(page.read_text(encoding="utf-8").splitlines())
    assert lines <= BUDGET, (f"{page.relative_to(PAGES)} is {lines} lines, over the {BUDGET}-line budget: split it by page part "
                             "into a helper beside it, and move decisions into tokencap/views/")


def test_there_are_pages_to_check() -> None:
    assert (PAGES / "rollout" / "rollout.py").is_file() and (PAGES / "run" / "run.py").is_file()


def test_each_page_has_its_own_room() -> None:
    """Page parts live in their page's folder (mirroring tokencap/views/run and views/rollout): beside the
    rooms only the package's ``__init__``, the entry script Streamlit runs (``main.py``) and the session
    keys both pages share (``state.py``)."""
    assert sorted(p.name for p in PAGES.glob("*.py")) == ["__init__.py", "main.py", "state.py"]
    for room in ("run", "rollout"):
        assert (PAGES / room / f"{room}.py").is_file()
