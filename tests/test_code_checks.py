"""mypy and ruff over `tokencap/`, as ratchets that can only tighten.

mypy must be clean on every module except those a pyproject.toml ``[[tool.mypy.overrides]]``
block exempts with ``ignore_errors = true``. Such a list may only shrink: it must stay within
``tests/data/mypy_ignored.txt`` (the committed baseline), which is empty, so no module may be
exempted and mypy must be clean on all of `tokencap/`. A module whose errors are fixed leaves both lists.

ruff's findings are counted per file and rule against ``tests/data/ruff_baseline.json``: a
new finding fails, and so does a fixed one until the baseline is lowered. Both baselines are
rewritten from the current code by

    PYTHONPATH=$PWD python tests/test_code_checks.py --write-baselines

(review the diff: it must only remove entries or lower counts).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = REPO / "pyproject.toml"
MYPY_BASELINE = REPO / "tests" / "data" / "mypy_ignored.txt"
RUFF_BASELINE = REPO / "tests" / "data" / "ruff_baseline.json"
MYPY_CACHE = REPO / ".mypy_cache" / "suite"  # git-ignored; a warm run takes a few seconds
REGENERATE = "PYTHONPATH=$PWD python tests/test_code_checks.py --write-baselines"
_MYPY_ERROR = re.compile(r"^(?P<path>[^:\s]+\.py):\d+: error: ")


# --------------------------------------------------------------------------- mypy


def ignored_modules(pyproject_text: str) -> list[str]:
    """The modules pyproject.toml's mypy overrides exempt with ``ignore_errors = true``."""
    overrides = tomllib.loads(pyproject_text)["tool"]["mypy"].get("overrides", [])
    out: list[str] = []
    for block in overrides:
        if block.get("ignore_errors"):
            modules = block["module"]
            out += [modules] if isinstance(modules, str) else modules
    return out


def module_of(path: str) -> str:
    """``tokencap/loading/__init__.py`` -> ``tokencap.loading``."""
    parts = list(Path(path).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def mypy_errors_by_module(tmp_dir: Path) -> Counter[str]:
    """mypy's errors per module with the ignore list switched off (one run; exact same options otherwise)."""
    text = PYPROJECT.read_text(encoding="utf-8")
    unignored = text.replace("ignore_errors = true", "ignore_errors = false")
    config = tmp_dir / "pyproject.toml"
    config.write_text(unignored, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(MYPY_CACHE),
         "--no-error-summary", "--hide-error-context", "--no-pretty"],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), f"mypy did not run: {proc.stderr.strip() or proc.stdout.strip()}"
    errors: Counter[str] = Counter()
    for line in proc.stdout.splitlines():
        m = _MYPY_ERROR.match(line)
        if m:
            errors[module_of(m["path"])] += 1
    # A line mypy prints that is neither an error nor a note would mean the parse above is wrong.
    unknown = [ln for ln in proc.stdout.splitlines() if ln and not _MYPY_ERROR.match(ln) and ": note: " not in ln]
    assert not unknown, unknown[:5]
    return errors


def read_mypy_baseline() -> list[str]:
    return [ln.strip() for ln in MYPY_BASELINE.read_text(encoding="utf-8").splitlines()
            if ln.strip() and not ln.startswith("#")]


def test_mypy_is_clean_outside_the_ignore_list_and_the_list_only_shrinks(tmp_path):
    errors = mypy_errors_by_module(tmp_path)
    ignored = ignored_modules(PYPROJECT.read_text(encoding="utf-8"))
    baseline = read_mypy_baseline()

    new = sorted(set(errors) - set(ignored))
    assert not new, ("mypy errors in modules outside the ignore list (fix them; run `mypy` to see them): "
                     + ", ".join(f"{m} ({errors[m]})" for m in new))
    grown = sorted(set(ignored) - set(baseline))
    assert not grown, f"modules added to the mypy ignore list, which may only shrink: {grown}"
    fixed = sorted(set(ignored) - set(errors))
    assert not fixed, (f"now clean under mypy, so take them off pyproject.toml's ignore list and "
                       f"{MYPY_BASELINE.relative_to(REPO)}: {fixed}")
    stale = sorted(set(baseline) - set(ignored))
    assert not stale, f"remove from {MYPY_BASELINE.relative_to(REPO)} (no longer ignored): {stale}"


def test_the_ignore_list_is_read_from_the_override_blocks():
    text = """
[tool.mypy]
files = ["x"]

[[tool.mypy.overrides]]
module = ["numpy.*"]
ignore_missing_imports = true

[[tool.mypy.overrides]]
module = ["pkg.a", "pkg.b"]
ignore_errors = true

[[tool.mypy.overrides]]
module = "pkg.c"
ignore_errors = true
"""
    assert ignored_modules(text) == ["pkg.a", "pkg.b", "pkg.c"]
    assert module_of("tokencap/loading/__init__.py") == "tokencap.loading"
    assert module_of("tokencap/run/scanning.py") == "tokencap.run.scanning"


# --------------------------------------------------------------------------- ruff


def ruff_findings() -> dict[str, dict[str, int]]:
    """ruff's findings on tokencap/ as {file: {rule: count}}, both sorted."""
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "tokencap", "--output-format", "json",
                           "--exit-zero", "--no-cache"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"ruff did not run: {proc.stderr.strip()}"
    counts: dict[str, Counter[str]] = {}
    for finding in json.loads(proc.stdout):
        path = Path(finding["filename"]).resolve().relative_to(REPO).as_posix()
        counts.setdefault(path, Counter())[finding["code"] or "syntax"] += 1
    return {path: dict(sorted(rules.items())) for path, rules in sorted(counts.items())}


def ruff_changes(baseline: dict[str, dict[str, int]],
                 current: dict[str, dict[str, int]]) -> tuple[list[str], list[str]]:
    """(findings above the baseline, findings fixed below it), one line per file and rule."""
    worse, better = [], []
    for path in sorted(set(baseline) | set(current)):
        for rule in sorted(set(baseline.get(path, {})) | set(current.get(path, {}))):
            was, now = baseline.get(path, {}).get(rule, 0), current.get(path, {}).get(rule, 0)
            if now > was:
                worse.append(f"{path}: {rule} {was} -> {now}")
            elif now < was:
                better.append(f"{path}: {rule} {was} -> {now}")
    return worse, better


def test_ruff_findings_only_go_down():
    baseline = json.loads(RUFF_BASELINE.read_text(encoding="utf-8"))
    worse, better = ruff_changes(baseline, ruff_findings())
    assert not worse, ("new ruff findings (run `ruff check tokencap` and fix them): " + "; ".join(worse))
    assert not better, (f"ruff findings fixed, so lower the baseline ({REGENERATE}): " + "; ".join(better))


def test_ruff_changes_name_new_and_fixed_findings():
    baseline = {"tokencap/a.py": {"B905": 2}, "tokencap/b.py": {"C901": 1}}
    current = {"tokencap/a.py": {"B905": 1, "F401": 1}}
    worse, better = ruff_changes(baseline, current)
    assert worse == ["tokencap/a.py: F401 0 -> 1"]
    assert better == ["tokencap/a.py: B905 2 -> 1", "tokencap/b.py: C901 1 -> 0"]
    assert ruff_changes(current, current) == ([], [])


def write_baselines() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        errors = mypy_errors_by_module(Path(tmp))
    MYPY_BASELINE.write_text(
        "# Modules mypy may skip (pyproject.toml's ignore_errors list); this list may only shrink.\n"
        f"# Regenerate: {REGENERATE}\n" + "".join(f"{m}\n" for m in sorted(errors)), encoding="utf-8")
    RUFF_BASELINE.write_text(json.dumps(ruff_findings(), indent=1) + "\n", encoding="utf-8")
    print(f"mypy: {sum(errors.values())} errors in {len(errors)} modules "
          f"(set pyproject.toml's ignore list to: {sorted(errors)})")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write-baselines"]:
        sys.exit(f"usage: {REGENERATE}")
    write_baselines()
