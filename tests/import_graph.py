"""The import graph of a package, read with `ast` from every import statement in it.

Every import counts, wherever it sits: at module level, under ``if TYPE_CHECKING:`` or
inside a function (a lazy import is still a dependency). Used by tests/test_views_imports.py
(the shape of `tokencap.views`, Streamlit only in the app) and tests/test_layering.py
(no module imports from a higher layer).
"""

from __future__ import annotations

import ast
from pathlib import Path


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, root: Path) -> set[str]:
    """Every module ``path`` imports (absolute names), from every import statement in it."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            # `from . import style` imports the module `style`, not a name of the package.
            out.update(f"{target}.{alias.name}" for alias in node.names)
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports."""
    files = sorted(root.rglob("*.py"))
    modules = {module_name(f, root): f for f in files}
    graph = {}
    for name, f in modules.items():
        graph[name] = {m for m in imported_modules(f, root) if m in modules and m != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for start in sorted(graph):
        if state.get(start):
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                state[node] = 2
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif not state.get(child):
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(graph.get(child, ())))))
    return None
