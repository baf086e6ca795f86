"""No module of `tokencap` imports from a layer above its own (DESIGN.md, "Layers").

Every module under tokencap/ is given its layer from DESIGN.md's table; an import (at module
level, under ``TYPE_CHECKING`` or inside a function) may point to the same layer or below.
The package root (`tokencap/__init__.py`, re-exporting the public names) and `__main__` sit
with the CLI on top. An import that has to break the rule for a while is listed in
``ALLOWED`` with the reason it is there; the list may only shrink (a listed import that is
gone fails too, so the entry leaves with the fix). Today it is empty. Streamlit outside tokencap/app/ is checked by
tests/test_views_imports.py.
"""

from __future__ import annotations

from pathlib import Path

from import_graph import import_graph

PACKAGE = Path(__file__).resolve().parent.parent / "tokencap"

# DESIGN.md's layers, bottom up: (layer, modules or packages in it).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("records", ("records", "record_checks", "record_errors", "digest", "tokens", "limits", "identity", "lazy")),
    ("loading", ("loading",)),
    ("builder", ("builder",)),
    ("projection, verdicts, masks", ("projection", "verdicts", "lossmask", "attribution")),
    ("rollout assembly", ("rollout",)),
    ("diagnosis", ("diagnosis",)),
    ("writers", ("export", "interrupts", "report", "checking", "progress")),
    ("run", ("run",)),
    ("services", ("services",)),
    ("views", ("views",)),
    ("CLI / app", ("cli", "app", "bundled", "__main__", "")),  # "" is the package root, tokencap
]

# (importer, imported) -> why it is there today. May only shrink.
ALLOWED: dict[tuple[str, str], str] = {}


def layer_of(module: str) -> int:
    """The index in LAYERS of a module of tokencap (the longest matching entry wins)."""
    rel = module.removeprefix("tokencap").removeprefix(".")
    best, best_len = None, -1
    for index, (_, names) in enumerate(LAYERS):
        for name in names:
            matches = rel == name or (name and rel.startswith(name + "."))
            if matches and len(name) > best_len:
                best, best_len = index, len(name)
    if best is None:
        raise AssertionError(f"{module} is in no layer of DESIGN.md's table: add it to LAYERS (and DESIGN.md)")
    return best


def upward_imports(graph: dict[str, set[str]]) -> dict[tuple[str, str], str]:
    """(importer, imported) -> "importer's layer -> imported's layer", for each import that points up."""
    out = {}
    for module, deps in sorted(graph.items()):
        for dep in sorted(deps):
            low, high = layer_of(module), layer_of(dep)
            if high > low:
                out[(module, dep)] = f"{LAYERS[low][0]} -> {LAYERS[high][0]}"
    return out


def test_every_module_has_a_layer():
    graph = import_graph(PACKAGE)
    assert len(graph) > 60
    for module in graph:
        layer_of(module)


def test_no_module_imports_from_a_higher_layer():
    found = upward_imports(import_graph(PACKAGE))
    new = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not new, "imports from a higher layer (DESIGN.md, Layers): " + "; ".join(
        f"{a} imports {b} ({why})" for (a, b), why in new.items())
    gone = sorted(set(ALLOWED) - set(found))
    assert not gone, f"no longer imported upward, so remove them from ALLOWED: {gone}"


def test_the_checker_sees_a_lazy_upward_import(tmp_path):
    root = tmp_path / "tokencap"
    (root / "run").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "records.py").write_text("def f():\n    from .run import scanning\n    return scanning\n")
    (root / "builder.py").write_text("from .records import f\n")
    (root / "run" / "__init__.py").write_text("")
    (root / "run" / "scanning.py").write_text("from ..builder import f\n")
    found = upward_imports(import_graph(root))
    assert found == {("tokencap.records", "tokencap.run"): "records -> run",
                     ("tokencap.records", "tokencap.run.scanning"): "records -> run"}
