"""The README stays a page a newcomer can finish, and every link in it and in docs/ leads somewhere.

The reference lives in docs/; the README keeps what tokencap is, the two set-up commands, a
five-minute tour with one screenshot of each page, and links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", REPO / "DESIGN.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md"))]
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


@pytest.mark.parametrize("module", ["tokencap", "tokencap.diagnosis", "tokencap.run"])
def test_every_public_name_is_in_the_python_api_page(module: str) -> None:
    import importlib

    text = (REPO / "docs" / "python-api.md").read_text(encoding="utf-8")
    names = importlib.import_module(module).__all__
    assert [n for n in names if f"`{n}`" not in text] == []


def test_the_documented_iter_snapshots_call_runs() -> None:
    """python-api.md writes `iter_snapshots(source, *, rollout_id=None)`: its options are keyword-only."""
    import inspect

    from tokencap.loading import iter_snapshots

    text = (REPO / "docs" / "python-api.md").read_text(encoding="utf-8")
    assert "`tokencap.loading.iter_snapshots(source, *, rollout_id=None)`" in text
    params = inspect.signature(iter_snapshots).parameters
    assert params["rollout_id"].kind is inspect.Parameter.KEYWORD_ONLY
    rid = next(iter_snapshots(REPO / "sample_data" / "run")).rollout_id
    assert [s.rollout_id for s in iter_snapshots(REPO / "sample_data" / "run", rollout_id=rid)] == [rid]


def _hand_written_synopsis(text: str, command: str) -> str:
    """The lines of the hand-written ``tokencap COMMAND`` synopses outside the generated reference."""
    generated = text[text.index("<!-- generated: cli reference -->"):text.index("<!-- end -->")]
    hand = text.replace(generated, "")
    blocks = re.findall(r"```bash\n(.*?)```", hand, flags=re.S)
    # A synopsis is its first line and the indented lines that continue it.
    found = re.findall(rf"^tokencap {command} .*(?:\n[ \t]+\[.*)*", "\n".join(blocks), flags=re.M)
    return "\n".join(found)


@pytest.mark.parametrize("command", ["scan", "export", "diff"])
def test_the_hand_written_synopses_name_every_option(command: str) -> None:
    """The synopses of "A whole run" and "Comparing two runs" list each option the parser takes."""
    from tokencap.cli import _parser

    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    synopsis = _hand_written_synopsis(text, command)
    sub = next(a for a in _parser()._actions if a.choices and "build" in a.choices)
    options = [a.option_strings for a in sub.choices[command]._actions if a.option_strings]
    missing = [o[-1] for o in options if "--help" not in o and not any(re.search(rf"[\[ ]{f}\b", synopsis) for f in o)]
    assert missing == []


def test_the_cli_summary_names_diff_s_tokenizer() -> None:
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    summary = re.search(r"## Command line\n\n```bash\n(.*?)```", text, flags=re.S)
    assert summary is not None
    diff_line = next(line for line in summary.group(1).splitlines() if line.startswith("tokencap diff"))
    assert "--tokenizer" in diff_line


def test_no_page_points_to_a_readme_section_it_lacks() -> None:
    """A page that sends the reader to the README's "X" section: the README has a heading X."""
    headings = set(re.findall(r"^#+\s+(.+)$", (REPO / "README.md").read_text(encoding="utf-8"), flags=re.M))
    cited = {m for page in PAGES for m in re.findall(r'README "([^"]+)"', page.read_text(encoding="utf-8"))}
    assert cited - headings == set()


def _anchors_of(page: Path) -> set[str]:
    """The anchors a Markdown page offers: its headings (as GitHub writes them) and its ``<a id>``s."""
    text = page.read_text(encoding="utf-8")
    found = set(re.findall(r'<a id="([\w-]+)"></a>', text))
    for heading in re.findall(r"^#+\s+(.+)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_anchor_of_a_link_exists(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", text)
    missing = []
    for target, anchor in links:
        if "://" in target:
            continue
        linked = page if not target else page.parent / target
        if linked.suffix == ".md" and anchor not in _anchors_of(linked):
            missing.append(f"{target}#{anchor}")
    assert missing == []


def test_performance_page_is_current_figures_with_a_rerun_for_each_benchmark() -> None:
    """docs/performance.md holds the latest figures, not a log; each benchmark has its command."""
    text = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    assert "CHANGELOG.md" in text
    commands = "\n".join(re.findall(r"```bash\n(.*?)```", text, flags=re.S))
    benches = sorted(p.name for p in (REPO / "benchmarks").glob("bench_*.py"))
    assert [b for b in benches if f"benchmarks/{b}" not in commands] == []


def test_changelog_is_short_and_dated() -> None:
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert len(re.findall(r"^## \d{4}-\d{2}-\d{2}", text, flags=re.M)) >= 5
