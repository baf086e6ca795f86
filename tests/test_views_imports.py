"""The shape of `tokencap.views`: an acyclic import graph, and no Streamlit in `tokencap` outside `tokencap/app/`.

Every import statement counts, wherever it sits: at module level, under
``if TYPE_CHECKING:`` or inside a function. A cycle hidden behind a type-checking guard
or a function-local import is still a cycle between the modules' responsibilities.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from import_graph import find_cycle, import_graph, imported_modules

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "tokencap"


def views_graph() -> dict[str, set[str]]:
    graph = import_graph(PACKAGE)
    views = {m for m in graph if m == "tokencap.views" or m.startswith("tokencap.views.")}
    # The package's __init__ re-exports; edges into it would make every module look cyclic.
    return {m: {d for d in graph[m] if d in views and d != "tokencap.views"} for m in views}


def test_views_import_graph_has_no_cycle():
    graph = views_graph()
    assert len(graph) > 5
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_model_is_the_bottom_and_page_assembly_the_top():
    graph = views_graph()
    assert graph["tokencap.views.model"] <= {"tokencap.views.formatting", "tokencap.views.style"}
    for leaf in ("formatting", "style", "words", "widgets", "trace"):
        assert graph[f"tokencap.views.{leaf}"] == set(), leaf
    importers_of_page = [m for m, deps in graph.items() if "tokencap.views.rollout.rollout_page" in deps]
    assert importers_of_page == []


def test_the_run_page_views_use_only_shared_leaves_and_nothing_uses_them_but_the_bridge():
    graph = views_graph()
    run = {m for m in graph if m.startswith("tokencap.views.run.")}
    assert {"tokencap.views.run.data", "tokencap.views.run.triage", "tokencap.views.run.charts"} <= run
    leaves = {f"tokencap.views.{leaf}" for leaf in ("formatting", "style", "words", "vega")}
    # The Vega-Lite leaf builds on the shared style only. The Run page's charts draw with it, and on the
    # Rollout page the proofs (and through them the Compare tab's sequences) and the loss mask's strip,
    # overview and log-probs do, and the call tree with its overview (through the tree's door, `tree`).
    assert graph["tokencap.views.vega"] <= {"tokencap.views.style"}
    vega_users = {m for m, deps in graph.items() if "tokencap.views.vega" in deps}
    rollout_users = {m for m in vega_users if not m.startswith("tokencap.views.run.")}
    assert vega_users - rollout_users and rollout_users == {"tokencap.views.rollout.proof_chart",
                                                               "tokencap.views.rollout.mask_chart",
                                                               "tokencap.views.rollout.logprob_chart",
                                                               "tokencap.views.rollout.tree_chart",
                                                               "tokencap.views.rollout.tree_overview",
                                                               "tokencap.views.rollout.tree_layers",
                                                               "tokencap.views.rollout.tree"}, vega_users
    for module in run:
        outside = {d for d in graph[module] if not d.startswith("tokencap.views.run")}
        assert outside <= leaves, (module, outside - leaves)
    # Only the Rollout page's app file opens a Run-page row; no Rollout-page view imports the run package.
    users = sorted(m for m, deps in graph.items()
                   if not m.startswith("tokencap.views.run") and any(d.startswith("tokencap.views.run") for d in deps))
    assert users == []


def test_the_rollout_page_parts_live_in_their_room_and_only_they_use_each_other():
    graph = views_graph()
    room = {m for m in graph if m.startswith("tokencap.views.rollout.")}
    assert {"tokencap.views.rollout.tree", "tokencap.views.rollout.rollout_page"} <= room
    # Shared view data and the Run page's room never reach into the Rollout page's parts.
    users = sorted(m for m, deps in graph.items()
                   if not m.startswith("tokencap.views.rollout") and any(d.startswith("tokencap.views.rollout")
                                                                         for d in deps))
    assert users == []
    shared = {f"tokencap.views.{name}" for name in ("formatting", "style", "words", "model", "links", "vega")}
    for module in room:
        outside = {d for d in graph[module] if not d.startswith("tokencap.views.rollout")}
        assert outside <= shared, (module, outside - shared)


APP = PACKAGE / "app"


def streamlit_importers(root: Path, allowed: Path) -> list[str]:
    """The modules under ``root``, outside the folder ``allowed``, that import Streamlit."""
    offenders = []
    for f in sorted(root.rglob("*.py")):
        if f.is_relative_to(allowed):
            continue
        mods = imported_modules(f, root)
        if any(m == "streamlit" or m.startswith("streamlit.") for m in mods):
            offenders.append(str(f.relative_to(root.parent)))
    return offenders


def test_no_module_outside_tokencap_app_imports_streamlit():
    """Streamlit is the app's alone: the library, the CLI and the views run (and are tested) without it."""
    assert (APP / "main.py").is_file()
    assert streamlit_importers(PACKAGE, APP) == []


def test_nothing_the_app_or_the_package_runs_imports_plotly():
    """Every chart is Vega-Lite (Streamlit's own): plotly's 4.8 MB browser bundle cost a fresh tab
    about a second before its first chart, and the package no longer depends on plotly."""
    files = sorted(PACKAGE.rglob("*.py")) + [REPO / "app.py"]
    offenders = [str(f.relative_to(REPO)) for f in files
                 if any(m == "plotly" or m.startswith("plotly.") for m in imported_modules(f, PACKAGE))]
    assert len(files) > 30 and offenders == []
    assert "plotly" not in (REPO / "pyproject.toml").read_text()


# --------------------------------------------------------------------------- the checker itself


@pytest.fixture
def fake_package(tmp_path):
    root = tmp_path / "pkg"
    (root / "views").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "views" / "__init__.py").write_text("from .a import A\n")
    return root


def test_checker_sees_cycles_behind_type_checking_and_local_imports(fake_package):
    v = fake_package / "views"
    (v / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\nA = 1\n")
    (v / "b.py").write_text("def f():\n    from . import c\n    return c\n")
    (v / "c.py").write_text("import pkg.views.a\n")
    graph = import_graph(fake_package)
    assert graph["pkg.views.a"] == {"pkg.views.b"}
    assert graph["pkg.views.b"] == {"pkg.views", "pkg.views.c"}
    assert graph["pkg.views.c"] == {"pkg.views.a"}
    cycle = find_cycle({m: d - {"pkg", "pkg.views"} for m, d in graph.items()})
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"pkg.views.a", "pkg.views.b",
                                                                           "pkg.views.c"}


def test_checker_accepts_a_layered_package(fake_package):
    v = fake_package / "views"
    (v / "a.py").write_text("from .. import views\nA = 1\n")
    (v / "b.py").write_text("from .a import A\nfrom ..views import a\n")
    (v / "c.py").write_text("from . import a, b\nimport streamlit as st\n")
    graph = {m: d - {"pkg", "pkg.views"} for m, d in import_graph(fake_package).items()}
    assert find_cycle(graph) is None
    assert "streamlit" in imported_modules(v / "c.py", fake_package)


def test_the_streamlit_check_sees_an_import_outside_the_app_folder(fake_package):
    (fake_package / "app").mkdir()
    (fake_package / "app" / "page.py").write_text("import streamlit as st\n")
    assert streamlit_importers(fake_package, fake_package / "app") == []
    (fake_package / "views" / "chart.py").write_text("def f():\n    from streamlit import session_state\n")
    assert streamlit_importers(fake_package, fake_package / "app") == ["pkg/views/chart.py"]
