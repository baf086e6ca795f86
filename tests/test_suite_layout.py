"""The test suite's own layout: no test module imports another (shared helpers live in
tests/helpers*.py and in conftest.py's fixtures), so each test module can be read, run and
renamed on its own."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_test_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import of a `test_*` module in ``source``, at any depth (an import
    inside a function counts as well)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [(node.lineno, name) for name in names if name.split(".")[0].startswith("test_")]
    return found


def test_no_test_module_imports_another():
    offenders = [f"tests/{path.name}:{line} imports {module}"
                 for path in sorted(TESTS.glob("*.py"))
                 for line, module in imported_test_modules(path.read_text(encoding="utf-8"))]
    assert not offenders, ("a test module imports another; move what it needs to tests/helpers*.py or a "
                           "fixture in tests/conftest.py: " + "; ".join(offenders))


def test_imports_of_test_modules_are_found_at_any_depth():
    source = ("import json\nfrom helpers import Conv\nfrom test_app import open_app\n"
              "def f():\n    import test_run.x\n    from tokencap import test_like\n")
    assert imported_test_modules(source) == [(3, "test_app"), (5, "test_run.x")]


def test_helper_modules_are_not_collected_as_tests():
    helpers = sorted(p.name for p in TESTS.glob("helpers*.py"))
    assert "helpers_app.py" in helpers and "helpers_browser.py" in helpers
    assert not [name for name in helpers if name.startswith("test_")]
