"""The call tree as a table and a search: every node as a row, and the nodes whose call id matches a query.

The table is what the figure shows, sortable and searchable (the page lists it under the tree),
one row per node in layout order; the search finds a node to select by (part of) its id.
"""

from __future__ import annotations

import pandas as pd

from ..model import CALL, GHOST, RolloutView, split_key
from .tree_marks import NODE_STYLES
from .tree_model import TreeModel


def nodes_frame(model: TreeModel, view: RolloutView) -> pd.DataFrame:
    """Every node as a table row (what the figure shows, sortable and searchable), in layout order."""
    build = view.build
    origin = view.origin_time
    rows = []
    for n in model.nodes:
        entry = view.entry(n.ident) if n.kind == CALL else None
        decision = build.links.get(n.ident) if build is not None and n.kind == CALL else None
        if decision is None:
            link = {"claimed": "claimed only (not chained)", "refusal": "refused continuation"}.get(n.edge or "", "—")
        elif decision.note is None:
            link = "verified" if decision.linked_parent else "root"
        else:
            link = decision.note
        rows.append({
            "node": n.ident,
            "what": NODE_STYLES[n.category][0],
            "link": link,
            "parent": split_key(n.parent)[1] if n.parent else "",
            "prompt": int(entry.prompt_token_ids.size) if entry is not None else None,
            "generated": int(entry.generation_token_ids.size) if entry is not None else None,
            "finish": (entry.finish_reason or "null") if entry is not None else "",
            "t (s)": round(n.created_at - origin, 3) if origin is not None and n.kind != GHOST else None,
            "depth": n.depth,
            "key": n.key,
        })
    return pd.DataFrame(rows, columns=["node", "what", "link", "parent", "prompt", "generated", "finish", "t (s)",
                                       "depth", "key"])


def search(model: TreeModel, query: str, limit: int = 50) -> list[str]:
    """Node keys whose id matches ``query`` (case-insensitive): exact first, then prefix, then substring."""
    q = query.strip().lower()
    if not q:
        return []
    exact, prefix, inside = [], [], []
    for n in model.nodes:
        ident = n.ident.lower()
        if ident == q:
            exact.append(n.key)
        elif ident.startswith(q):
            prefix.append(n.key)
        elif q in ident:
            inside.append(n.key)
    return (exact + prefix + inside)[:limit]
