"""The browser and app tests wait on conditions, never for a fixed time (issue 19, 17).

A fixed wait (`page.wait_for_timeout`, `time.sleep`) is too short on a busy machine, where the
suite then fails on a page that had not finished its rerun, and too long everywhere else. Waits
go on what matters: Playwright's `expect(...)`, `page.wait_for_function`, `locator.wait_for`,
`settled` in tests/helpers_browser.py, or a poll of a condition with a deadline.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CHECKED = sorted({*(REPO / "tests").glob("test_browser*.py"), REPO / "benchmarks" / "app_server.py",
                  *(REPO / "tests").glob("test_app*.py"), *(REPO / "tests").glob("helpers*.py"),
                  REPO / "tests" / "conftest.py"})
FIXED_WAITS = {"wait_for_timeout", "sleep"}


def fixed_waits(source: str) -> list[str]:
    """``line: call`` for each call of a fixed wait in ``source`` (Python), by name or attribute."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name in FIXED_WAITS:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", CHECKED, ids=lambda p: str(p.relative_to(REPO)))
def test_no_fixed_wait(path: Path) -> None:
    assert fixed_waits(path.read_text()) == [], f"{path.name} waits a fixed time instead of on a condition"


def test_the_scan_finds_each_kind_of_fixed_wait() -> None:
    source = ("import time\nfrom time import sleep\n"
              "def t(page):\n    page.wait_for_timeout(500)\n    time.sleep(0.1)\n    sleep(1)\n"
              "    page.wait_for_function('() => true')  # a condition: fine\n"
              "    text = 'page.wait_for_timeout(1) in a string is not a call'\n")
    assert fixed_waits(source) == ["4: page.wait_for_timeout(500)", "5: time.sleep(0.1)", "6: sleep(1)"]
