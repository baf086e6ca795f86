"""The call tree: every call laid out by lineage, chains as horizontal lanes.

Nodes are the snapshot's calls (chained, quarantined, empty generations, excluded
records), its engine refusals (attached to the call they continued) and "ghost" nodes for
parents that were claimed but never captured. Each node hangs under its *display parent*:
the parent the build linked (verified or recovered), else the parent the record claimed
(the link is drawn as rejected), else nothing (a root).

Layout, all iterative (no recursion, linear-ish at 1,500 calls):

* x is the depth under the display parent;
* children are ordered so the main chain comes first, then branches in chain order, then
  everything else by time; the first child continues its parent's lane, every other
  child opens a lane below, re-using the lowest lane that is free over its span. The main
  chain is therefore the straight top lane, each branch its own lane, and retries that
  were quarantined pack into a few lanes beside the calls they retried.

The figure uses one trace per mark (node category, overlay, edge category), never one
per node, and switches to WebGL (`Scattergl`) above `WEBGL_THRESHOLD` nodes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ...builder import (
    MISSING_RESOLUTION,
    PARENT_DIGEST_MISMATCH,
    PARENT_MISSING,
    PARENT_MISSING_RECOVERED,
    PARENT_UNRESOLVED,
)
from ...records import ParentResolutionStatus
from .. import style
from ..model import CALL, GHOST, REFUSAL, RolloutView, node_key, split_key
from ..text import fmt_int, html_text, md_escape

WEBGL_THRESHOLD = 1000

# Node categories: (legend label, colour, symbol, size factor). The first that applies wins.
NODE_STYLES: dict[str, tuple[str, str, str, float]] = {
    "terminal": ("terminal call (end of the delivered chain)", style.MAIN, "star", 1.7),
    "main": ("main chain (delivered)", style.MAIN, "circle", 1.0),
    "branch": ("branch", style.BRANCH, "circle", 1.0),
    "quarantined": ("quarantined retry", style.QUARANTINED, "circle", 1.0),
    "after_terminal": ("after the terminal call (not delivered)", style.AFTER_TERMINAL, "circle", 1.0),
    "chained": ("chained call", style.OTHER, "circle", 1.0),
    "empty": ("empty generation (not chained)", style.EMPTY, "circle-open", 1.0),
    "excluded": ("excluded record (corrupt digest or broken delta)", style.EXCLUDED, "x", 1.1),
    "refusal_ended": ("engine refusal that ended the chain", style.REFUSAL, "hexagon", 1.2),
    "refusal": ("engine refusal (does not end the chain)", style.REFUSAL, "hexagon-open", 1.2),
    "ghost": ("claimed parent, never captured", style.GHOST, "square-open", 1.0),
    "announced": ("announced by the store, never captured (capture incomplete)", style.REFUSAL, "square-x-open",
                  1.2),
}

# Overlay marks drawn around a node: (legend label, colour, symbol, size factor, line width).
OVERLAY_STYLES: dict[str, tuple[str, str, str, float, float]] = {
    "boundary": ("unresolved boundary (fragment root)", style.BOUNDARY, "diamond-open", 2.0, 2.5),
    "recovered": ("recovered link (parent re-found by prefix)", style.RECOVERED, "circle-open", 1.9, 2.5),
    "conflict": ("conflicting duplicate copies", style.EXCLUDED, "square-open", 1.9, 2.5),
    "final_answer": ("the harness's final answer (attributed)", style.FINAL_ANSWER, "star-open", 2.6, 2.0),
    "answer_candidate": ("matches the final answer, ambiguously", style.FINAL_ANSWER, "star-triangle-up-open", 2.6,
                         2.0),
    "selected": ("selected", style.SELECTED, "circle-open", 2.4, 3.0),
}

# Edge categories: (legend label, colour, dash, width).
EDGE_STYLES: dict[str, tuple[str, str, str, float]] = {
    "verified": ("verified link", style.EDGE_VERIFIED, "solid", 1.6),
    "recovered": ("recovered link", style.EDGE_RECOVERED, "dot", 2.2),
    "digest_mismatch": ("claimed link rejected: digest mismatch", style.EDGE_REJECTED, "dash", 1.8),
    "missing_parent": ("claimed link rejected: parent missing", style.EDGE_REJECTED, "dot", 1.8),
    "missing_resolution": ("claimed link not trusted: no resolution recorded", style.EDGE_REJECTED, "dashdot", 1.8),
    "claimed": ("claimed parent of a call left out of chaining", style.EDGE_NOT_CHAINED, "dot", 1.3),
    "refusal": ("refused request continuing this call", style.EDGE_REFUSAL, "longdash", 1.2),
}

_NOTE_EDGE = {
    PARENT_DIGEST_MISMATCH: "digest_mismatch",
    PARENT_MISSING: "missing_parent",
    MISSING_RESOLUTION: "missing_resolution",
}

_ROLE_LABEL = {
    "main": "main chain",
    "branch": "branch",
    "quarantined": "quarantined",
    "after_terminal": "after the terminal call",
}

_LANE_EDGES = frozenset({"verified", "recovered", "refusal"})

_NOTE_SHORT = {
    PARENT_UNRESOLVED: "unresolved at request time: fragment root",
    PARENT_DIGEST_MISMATCH: "claimed parent's digest does not match: fragment root",
    PARENT_MISSING: "claimed parent missing, no unique prefix: fragment root",
    PARENT_MISSING_RECOVERED: "claimed parent missing: recovered by longest prefix",
    MISSING_RESOLUTION: "no resolution recorded: fragment root",
}


def legend_frame() -> pd.DataFrame:
    """Every mark the tree can draw and what it means (the page shows it under the figure)."""
    rows = [("node", label, colour, symbol) for label, colour, symbol, _ in NODE_STYLES.values()]
    rows += [("ring", label, colour, symbol) for label, colour, symbol, _, _ in OVERLAY_STYLES.values()]
    rows += [("edge", label, colour, dash) for label, colour, dash, _ in EDGE_STYLES.values()]
    return pd.DataFrame(rows, columns=["mark", "meaning", "colour", "shape"])


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


@dataclass
class TreeNode:
    key: str
    kind: str
    ident: str
    category: str
    flags: set[str] = field(default_factory=set)
    parent: str | None = None
    edge: str | None = None
    created_at: float = 0.0
    rank: int = 10**9
    depth: int = 0
    lane: int = 0
    hover: str = ""


@dataclass
class TreeModel:
    """The laid-out call tree of one build."""

    nodes: list[TreeNode]
    index: dict[str, int]
    lanes: int
    max_depth: int
    extra_edges: list[tuple[str, str, str]]  # (from key, to key, edge category) beyond display parents
    chain_leaves: dict[str, str]             # chain id -> key of its last call
    default_key: str | None

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, key: str) -> TreeNode | None:
        i = self.index.get(key)
        return self.nodes[i] if i is not None else None

    def keys(self) -> list[str]:
        return [n.key for n in self.nodes]

    def edges(self) -> list[tuple[str, str, str]]:
        out = [(n.parent, n.key, n.edge) for n in self.nodes if n.parent is not None and n.edge is not None]
        return out + self.extra_edges  # type: ignore[return-value]

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame({
            "key": [n.key for n in self.nodes],
            "kind": [n.kind for n in self.nodes],
            "id": [n.ident for n in self.nodes],
            "category": [n.category for n in self.nodes],
            "flags": [",".join(sorted(n.flags)) for n in self.nodes],
            "parent": [n.parent for n in self.nodes],
            "edge": [n.edge for n in self.nodes],
            "depth": [n.depth for n in self.nodes],
            "lane": [n.lane for n in self.nodes],
        })

    def label(self, key: str) -> str:
        """A one-line plain-text label for pickers: id, then what the node is."""
        n = self.node(key)
        if n is None:
            return key
        what = NODE_STYLES[n.category][0]
        extra = [OVERLAY_STYLES[f][0].split(" (")[0]
                 for f in ("boundary", "recovered", "conflict", "final_answer", "answer_candidate") if f in n.flags]
        prefix = {CALL: "", REFUSAL: "refusal ", GHOST: "never captured "}[n.kind]
        return f"{prefix}{n.ident} — {what}" + (f"; {', '.join(extra)}" if extra else "")

    def figure(self, selected: str | None = None, *, webgl: bool | None = None, height: int | None = None,
               window: tuple[int, int] | None = None, labels: bool | None = None, legend: bool = True) -> go.Figure:
        return tree_figure(self, selected=selected, webgl=webgl, height=height, window=window, labels=labels,
                           legend=legend)


# --------------------------------------------------------------------------- model


def tree_of(view: RolloutView) -> TreeModel:
    """The view's laid-out tree, computed once per view."""
    return view.derived("tree", build_tree)


def build_tree(view: RolloutView) -> TreeModel:
    build = view.build
    nodes: dict[str, TreeNode] = {}
    extra_edges: list[tuple[str, str, str]] = []
    membership = view.chain_membership
    chain_rank = {c.chain_id: i for i, c in enumerate(view.chains)}
    roles = view.roles
    terminal = view.terminal_call_id
    origin = view.origin_time

    def rank_of(cid: str) -> int:
        chains = membership.get(cid)
        if chains:
            return min(chain_rank[c] for c in chains)
        return 10**6 if roles.get(cid) == "quarantined" else 10**7

    def ensure_ghost(ident: str) -> str:
        key = node_key(GHOST, ident)
        if key not in nodes:
            nodes[key] = TreeNode(key, GHOST, ident, "ghost", hover="")
        return key

    def call_key_if_present(ident: str | None) -> str | None:
        if ident is None:
            return None
        key = node_key(CALL, ident)
        return key if key in nodes else None

    # 1. Calls: everything the build saw (entries), plus excluded records.
    entries = build.entries if build is not None else {}
    excluded = build.excluded if build is not None else {}
    links = build.links if build is not None else {}
    empty = set(build.notes.empty_generation_calls) if build is not None else set()
    conflicts = set(build.conflicting_duplicates) if build is not None else set()
    if build is None:
        # Not built (load error, no records, builder failure): show the raw records unlinked.
        all_ids = list(view.records_by_id)
    else:
        all_ids = list(entries) + [c for c in excluded if c not in entries]
    answer, ambiguous = _final_answer_calls(view)
    for cid in all_ids:
        entry = view.entry(cid)
        created = entry.created_at if entry is not None else 0.0
        if cid in excluded:
            category = "excluded"
        elif cid in empty:
            category = "empty"
        elif cid == terminal:
            category = "terminal"
        elif cid in roles:
            category = roles[cid]
        else:
            category = "chained" if cid in links else "excluded"
        node = TreeNode(node_key(CALL, cid), CALL, cid, category, created_at=created, rank=rank_of(cid))
        decision = links.get(cid)
        if decision is not None and decision.note is not None:
            node.flags.add("boundary" if decision.boundary else "recovered")
        if cid in conflicts:
            node.flags.add("conflict")
        if cid in answer:
            node.flags.add("final_answer")
        elif cid in ambiguous:
            node.flags.add("answer_candidate")
        nodes[node.key] = node

    # 2. Display parents and edge kinds for calls.
    for cid in all_ids:
        node = nodes[node_key(CALL, cid)]
        decision = links.get(cid)
        entry = view.entry(cid)
        claimed = entry.parent_call_id if entry is not None else None
        if decision is not None:
            if decision.linked_parent is not None:
                node.parent = node_key(CALL, decision.linked_parent)
                node.edge = "recovered" if decision.note == PARENT_MISSING_RECOVERED else "verified"
                if decision.note == PARENT_MISSING_RECOVERED and claimed is not None:
                    claimed_key = call_key_if_present(claimed) or ensure_ghost(claimed)
                    extra_edges.append((claimed_key, node.key, "claimed"))
            elif claimed is not None and decision.note in _NOTE_EDGE:
                node.parent = call_key_if_present(claimed) or ensure_ghost(claimed)
                node.edge = _NOTE_EDGE[decision.note]
        elif claimed is not None:
            # Left out of chaining (empty generation, excluded): hang it under the parent it claimed.
            node.parent = call_key_if_present(claimed) or ensure_ghost(claimed)
            node.edge = "claimed"

    # 3. Engine refusals, attached to the call they continued.
    verdicts = {v.refusal.model_call_id: v for v in view.result.refusal_verdicts}
    for refusal in view.snapshot.engine_refusals:
        key = node_key(REFUSAL, refusal.model_call_id)
        if key in nodes:
            continue
        verdict = verdicts.get(refusal.model_call_id)
        ended = verdict is not None and verdict.ended_chain
        node = TreeNode(key, REFUSAL, refusal.model_call_id, "refusal_ended" if ended else "refusal",
                        created_at=refusal.recorded_at, rank=10**8)
        if refusal.parent_resolution is ParentResolutionStatus.RESOLVED and refusal.parent_call_id is not None:
            node.parent = call_key_if_present(refusal.parent_call_id) or ensure_ghost(refusal.parent_call_id)
            node.edge = "refusal"
        nodes[key] = node

    # 4. Calls the store announced (an intent) but never captured: why the capture is incomplete.
    for ident in view.announced_uncaptured:
        key = node_key(GHOST, ident)
        if key in nodes:
            nodes[key].category = "announced"
        else:
            nodes[key] = TreeNode(key, GHOST, ident, "announced", rank=10**8)

    _layout(nodes)
    ordered = sorted(nodes.values(), key=lambda n: (n.lane, n.depth, n.key))
    index = {n.key: i for i, n in enumerate(ordered)}
    for n in ordered:
        n.hover = _hover(n, view, origin)
    chain_leaves = {c.chain_id: node_key(CALL, c.call_ids[-1]) for c in view.chains if c.links}
    default = node_key(CALL, terminal) if terminal is not None else (ordered[0].key if ordered else None)
    return TreeModel(
        nodes=ordered, index=index,
        lanes=(max((n.lane for n in ordered), default=0) + 1) if ordered else 0,
        max_depth=max((n.depth for n in ordered), default=0),
        extra_edges=extra_edges, chain_leaves=chain_leaves, default_key=default,
    )


def _final_answer_calls(view: RolloutView) -> tuple[set[str], set[str]]:
    """(calls the harness's final answer was attributed to, calls it matched ambiguously)."""
    attribution = view.result.terminal_attribution
    if attribution is None:
        return set(), set()
    if attribution.outcome == "attributed":
        return set(attribution.candidates), set()
    if attribution.outcome == "ambiguous":
        return set(), set(attribution.candidates)
    return set(), set()


def _layout(nodes: Mapping[str, TreeNode]) -> None:
    """Depth and lane for every node; iterative, cycle-safe."""
    # Depths: walk up to a node of known depth (or a root); a loop in claimed parents is cut.
    depth: dict[str, int] = {}
    for start in nodes:
        if start in depth:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        cursor: str | None = start
        base = -1
        while cursor is not None:
            if cursor in depth:
                base = depth[cursor]
                break
            if cursor in on_path:
                # A loop of claimed parents: cut it here; this node becomes a root.
                nodes[cursor].parent = None
                nodes[cursor].edge = None
                idx = path.index(cursor)
                depth[cursor] = 0
                d = 0
                for c in reversed(path[idx + 1:]):
                    d += 1
                    depth[c] = d
                path = path[:idx]
                base = 0
                break
            path.append(cursor)
            on_path.add(cursor)
            parent = nodes[cursor].parent
            if parent is not None and parent not in nodes:
                nodes[cursor].parent = None
                nodes[cursor].edge = None
                parent = None
            cursor = parent
        d = base
        for c in reversed(path):
            d += 1
            depth[c] = d
    for k, n in nodes.items():
        n.depth = depth[k]

    children: dict[str, list[str]] = defaultdict(list)
    roots: list[str] = []
    for k, n in nodes.items():
        (children[n.parent] if n.parent is not None else roots).append(k)

    # Best chain rank in each subtree (main chain = 0), deepest nodes first.
    best = {k: n.rank for k, n in nodes.items()}
    for k in sorted(nodes, key=lambda k: -nodes[k].depth):
        p = nodes[k].parent
        if p is not None and best[k] < best[p]:
            best[p] = best[k]

    def order(keys: Iterable[str]) -> list[str]:
        return sorted(keys, key=lambda k: (best[k], nodes[k].kind == REFUSAL, nodes[k].created_at, k))

    for k in list(children):
        children[k] = order(children[k])
    roots = order(roots)

    def continues(kids: list[str]) -> bool:
        """Whether the first child stays on its parent's lane: only across a link the build
        made (or a refusal that continued the call); a fragment always opens its own lane."""
        return bool(kids) and nodes[kids[0]].edge in _LANE_EDGES

    # End depth of each node's first-child run (the lane segment it opens).
    run_end = {}
    for k in sorted(nodes, key=lambda k: -nodes[k].depth):
        kids = children.get(k, [])
        run_end[k] = run_end[kids[0]] if continues(kids) else nodes[k].depth

    # Preorder (main chain first): the tie-break among runs that start at the same depth.
    preorder: dict[str, int] = {}
    stack = list(reversed(roots))
    while stack:
        k = stack.pop()
        preorder[k] = len(preorder)
        stack.extend(reversed(children.get(k, [])))

    # A run is a node and its first-child continuation; every run gets one lane.
    head: dict[str, str] = {}
    for k in sorted(nodes, key=lambda k: nodes[k].depth):
        p = nodes[k].parent
        kids = children.get(p, []) if p is not None else []
        head[k] = head[p] if p is not None and kids and kids[0] == k and continues(kids) else k
    heads = sorted({h for h in head.values()}, key=lambda h: (nodes[h].depth, preorder.get(h, 0)))

    # Sweep by start depth: each run takes the lowest lane below its parent's lane that is
    # free over its span (with one empty slot before it, so runs never look joined).
    lane_of: dict[str, int] = {}
    lane_end: list[int] = []
    for h in heads:
        p = nodes[h].parent
        above = lane_of[head[p]] if p is not None else -1
        start_depth, end_depth = nodes[h].depth, run_end[h]
        chosen = next((lane for lane in range(above + 1, len(lane_end)) if lane_end[lane] < start_depth - 1), None)
        if chosen is None:
            lane_end.append(end_depth)
            chosen = len(lane_end) - 1
        else:
            lane_end[chosen] = end_depth
        lane_of[h] = chosen
    for k, n in nodes.items():
        n.lane = lane_of[head[k]]


def _hover(n: TreeNode, view: RolloutView, origin: float | None) -> str:
    lines = [f"<b>{html_text(n.ident, 80)}</b>  {html_text(NODE_STYLES[n.category][0])}"]
    if n.kind == CALL:
        entry = view.entry(n.ident)
        build = view.build
        if entry is not None:
            p, g = int(entry.prompt_token_ids.size), int(entry.generation_token_ids.size)
            stored = " (delta record)" if entry.prompt_is_delta else ""
            lines.append(f"prompt {fmt_int(p)} · generated {fmt_int(g)} · total {fmt_int(p + g)}{stored}")
            lines.append(f"finish {html_text(entry.finish_reason, 40)} · created {_time(entry.created_at, origin)}")
            res = entry.parent_resolution.value if entry.parent_resolution is not None else "null"
            claimed = f" → {html_text(entry.parent_call_id, 60)}" if entry.parent_call_id else ""
            lines.append(f"resolution {res}{claimed}")
        decision = build.links.get(n.ident) if build is not None else None
        if decision is not None:
            if decision.note is None:
                if decision.linked_parent is not None:
                    lines.append(f"link verified to {html_text(decision.linked_parent, 60)}")
                else:
                    lines.append("root")
            else:
                lines.append(html_text(_NOTE_SHORT.get(decision.note, decision.note)))
                if decision.note == PARENT_MISSING_RECOVERED and decision.linked_parent:
                    lines.append(f"re-attached to {html_text(decision.linked_parent, 60)}")
        if build is not None and n.ident in build.excluded:
            lines.append(f"excluded: {html_text(build.excluded[n.ident])}")
        if "conflict" in n.flags:
            lines.append("conflicting duplicate copies of this id")
        if "final_answer" in n.flags or "answer_candidate" in n.flags:
            attribution = view.result.terminal_attribution
            method = attribution.method if attribution is not None else ""
            lines.append(f"the harness's final answer (attributed by {method})" if "final_answer" in n.flags else
                         f"matches the harness's final answer by {method}, as does another sequence: ambiguous")
        if entry is not None and entry.parent_resolution_reason:
            lines.append(f"reason: {html_text(entry.parent_resolution_reason, 100)}")
        chains = view.chain_membership.get(n.ident)
        if chains:
            lines.append("on " + html_text(", ".join(chains[:6]) + (" …" if len(chains) > 6 else "")))
    elif n.kind == REFUSAL:
        r = view.refusals_by_id.get(n.ident)
        if r is not None:
            lines.append(f"code {html_text(r.code, 60)} · recorded {_time(r.recorded_at, origin)}")
            parent = f" → {html_text(r.parent_call_id, 60)}" if r.parent_call_id else ""
            lines.append(f"resolution {r.parent_resolution.value}{parent}")
            if r.message:
                lines.append(f"message: {html_text(r.message, 100)}")
    elif n.category == "announced":
        lines.append("the store wrote an intent for this call; no record of it was captured")
    else:
        lines.append("claimed as a parent; no record of this id was captured")
    return "<br>".join(lines)


def _time(t: float, origin: float | None) -> str:
    return f"{t:.3f}" + (f" (t+{t - origin:.3f} s)" if origin is not None else "")


# --------------------------------------------------------------------------- figure


LABEL_CLEARANCE = max(ring[3] for ring in OVERLAY_STYLES.values())
"""Labels keep clear of the widest mark a node can carry (the rings drawn over it)."""


def _label_clearance(size: float) -> dict[str, Any]:
    """An invisible marker as wide as a node's widest ring: plotly sets a trace's text off by its
    marker's radius, so a label never sits on a node, its ring or the selection."""
    return {"size": size * LABEL_CLEARANCE + 4, "color": "rgba(0,0,0,0)", "line": {"width": 0}}


def _marker_size(n: int) -> float:
    if n <= 40:
        return 15
    if n <= 150:
        return 12
    if n <= 600:
        return 9
    return 7


def _xy(model: TreeModel, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    idx = [model.index[k] for k in keys]
    x = np.fromiter((model.nodes[i].depth for i in idx), dtype=float, count=len(idx))
    y = np.fromiter((-model.nodes[i].lane for i in idx), dtype=float, count=len(idx))
    return x, y


def _nice_step(span: int) -> int:
    """An integer tick step giving about ten ticks."""
    raw = max(1.0, span / 10)
    magnitude = 10 ** int(np.floor(np.log10(raw)))
    for factor in (1, 2, 5, 10):
        if raw <= factor * magnitude:
            return int(factor * magnitude)
    return int(10 * magnitude)  # pragma: no cover


def _visible(model: TreeModel, window: Window | None) -> list[int]:
    """Indices of the nodes whose depth lies in ``window`` (all of them without one)."""
    if window is None:
        return list(range(len(model.nodes)))
    a, b = window
    return [i for i, n in enumerate(model.nodes) if a <= n.depth <= b]


def tree_figure(model: TreeModel, selected: str | None = None, *, webgl: bool | None = None,
                height: int | None = None, window: Window | None = None, labels: bool | None = None,
                legend: bool = True) -> go.Figure:
    """The plotly figure of a laid-out tree; every point carries its node key as ``customdata``.

    With ``window`` (an inclusive range of depths) only the nodes in it are drawn, with
    the links that touch them, on an x axis fixed to the window: the zoomed detail of a
    long rollout. ``labels`` writes each call's (shortened) id beside it; by default when
    the drawing is sparse enough to read them (`wants_labels`).
    """
    visible = _visible(model, window)
    shown = {model.nodes[i].key for i in visible}
    use_gl = webgl if webgl is not None else len(visible) > WEBGL_THRESHOLD
    Scatter: Any = go.Scattergl if use_gl else go.Scatter
    size = _marker_size(len(visible))
    lo, hi = window if window is not None else (0, model.max_depth)
    span = max(hi - lo, 1)
    dense = span > 120
    traces: list[Any] = []

    # Edges, one trace per category (segments separated by gaps); those touching a shown node.
    by_edge: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for a, b, kind in model.edges():
        if a in model.index and b in model.index and (a in shown or b in shown):
            by_edge[kind].append((a, b))
    for kind, (label, colour, dash, width) in EDGE_STYLES.items():
        pairs = by_edge.get(kind)
        if not pairs:
            continue
        xa, ya = _xy(model, [a for a, _ in pairs])
        xb, yb = _xy(model, [b for _, b in pairs])
        xs = np.column_stack((xa, xb, np.full(len(pairs), np.nan))).ravel()
        ys = np.column_stack((ya, yb, np.full(len(pairs), np.nan))).ravel()
        traces.append(Scatter(x=xs, y=ys, mode="lines", name=label, legendgroup="edges",
                              legendgrouptitle={"text": "links"} if not any(
                                  t.legendgroup == "edges" for t in traces) else None,
                              line={"color": colour, "dash": dash, "width": width},
                              hoverinfo="skip", connectgaps=False))

    # Nodes, one trace per category.
    by_cat: dict[str, list[int]] = defaultdict(list)
    for i in visible:
        by_cat[model.nodes[i].category].append(i)
    first_node_trace = True
    for cat, (label, colour, symbol, factor) in NODE_STYLES.items():
        idx = by_cat.get(cat)
        if not idx:
            continue
        keys = [model.nodes[i].key for i in idx]
        x, y = _xy(model, keys)
        open_symbol = symbol.endswith("-open") or symbol == "x"
        # A thin white rim separates neighbouring nodes; when nodes crowd (hundreds across the
        # width) the rims would paint over the fills, so dense trees get none.
        rim = {"color": colour, "width": 2} if open_symbol else \
            ({"color": "#ffffff", "width": 1} if dense is False else {"color": colour, "width": 0})
        traces.append(Scatter(
            x=x, y=y, mode="markers", name=label, legendgroup="calls",
            legendgrouptitle={"text": "calls"} if first_node_trace else None,
            marker={"symbol": symbol, "color": colour, "size": size * factor, "line": rim},
            customdata=np.array(keys, dtype=object).reshape(-1, 1),
            hovertext=[model.nodes[i].hover for i in idx],
            hovertemplate="%{hovertext}<extra></extra>",
        ))
        first_node_trace = False

    # Overlay rings (boundary, recovered, conflict) and the selection.
    first_ring = True
    for flag in ("boundary", "recovered", "conflict", "final_answer", "answer_candidate"):
        keys = [model.nodes[i].key for i in visible if flag in model.nodes[i].flags]
        if not keys:
            continue
        label, colour, symbol, factor, width = OVERLAY_STYLES[flag]
        x, y = _xy(model, keys)
        traces.append(Scatter(
            x=x, y=y, mode="markers", name=label, legendgroup="marks",
            legendgrouptitle={"text": "marks"} if first_ring else None,
            marker={"symbol": symbol, "color": colour, "size": size * factor, "line": {"color": colour, "width": width}},
            customdata=np.array(keys, dtype=object).reshape(-1, 1),
            hovertext=[model.nodes[model.index[k]].hover for k in keys],
            hovertemplate="%{hovertext}<extra></extra>",
        ))
        first_ring = False
    if selected is not None and selected in shown:
        label, colour, symbol, factor, width = OVERLAY_STYLES["selected"]
        x, y = _xy(model, [selected])
        traces.append(Scatter(
            x=x, y=y, mode="markers", name=label, legendgroup="marks",
            legendgrouptitle={"text": "marks"} if first_ring else None,
            marker={"symbol": symbol, "color": colour, "size": size * factor, "line": {"color": colour, "width": width}},
            customdata=np.array([selected], dtype=object).reshape(-1, 1),
            hovertext=[model.nodes[model.index[selected]].hover],
            hovertemplate="%{hovertext}<extra></extra>",
        ))

    # Call ids beside the nodes, when they can be read: above on even depths, below on odd
    # ones, so neighbours never share a line.
    if labels if labels is not None else wants_labels(model, window):
        idx = visible
        keys = [model.nodes[i].key for i in idx]
        x, y = _xy(model, keys)
        texts = short_labels([model.nodes[i].ident for i in idx])
        traces.append(go.Scatter(x=x, y=y, mode="markers+text", text=[html_text(t) for t in texts],
                                 marker=_label_clearance(size),
                                 textposition=["top center" if int(d) % 2 == 0 else "bottom center" for d in x],
                                 textfont={"size": 11, "color": "#1e293b"}, hoverinfo="skip", showlegend=False,
                                 name="call ids"))

    # Chain labels at each chain's leaf.
    leaves = [(c, k) for c, k in model.chain_leaves.items() if k in shown]
    if len(leaves) > 12:
        leaves = leaves[:1]  # many chains: their labels would only collide; hover names them
    if leaves:
        x, y = _xy(model, [k for _, k in leaves])
        traces.append(go.Scatter(x=x, y=y, mode="markers+text", text=[html_text(c) for c, _ in leaves],
                                 marker=_label_clearance(size), textposition="middle right",
                                 textfont={"size": 11, "color": "#334155"}, hoverinfo="skip", showlegend=False,
                                 cliponaxis=False, name="chain labels"))

    lanes_shown = [model.nodes[i].lane for i in visible] or [0]
    top, bottom = min(lanes_shown), max(lanes_shown)
    n_lanes = bottom - top + 1
    entries = sum(1 for t in traces if t.showlegend is not False)
    groups = len({t.legendgroup for t in traces if t.showlegend is not False})
    legend_height = 60 + 22 * entries + 30 * groups if legend else 0
    fig_height = height or int(min(700, max(260, 120 + 46 * n_lanes, legend_height)))
    fig = go.Figure(data=traces)
    fig.update_layout(
        **style.BASE_LAYOUT,
        height=fig_height,
        margin={"l": 10, "r": 10, "t": 14, "b": 40},
        showlegend=legend,
        legend={"orientation": "v", "x": 1.01, "xanchor": "left", "y": 1, "yanchor": "top",
                "font": {"size": 11}, "itemsizing": "constant", "groupclick": "toggleitem",
                "tracegroupgap": 8, "bgcolor": "rgba(255,255,255,0.85)"},
        hovermode="closest",
        clickmode="event+select",
        dragmode="zoom",
        xaxis={"title": {"text": "depth (calls from the root)", "font": {"size": 11}},
               "range": [lo - 0.6, hi + 0.6 + (0.04 * span if window is None else 0.9)], "zeroline": False,
               "showgrid": True, "gridcolor": "#f1f5f9", "tick0": 0, "dtick": _nice_step(span),
               "fixedrange": False},
        yaxis={"visible": False, "range": [-bottom - 0.7, -top + 0.8], "zeroline": False},
        # Plotly keeps a reader's own zoom across reruns while this stays the same: the
        # selection changing does not reset it, moving the window does.
        uirevision=f"tree:{lo}:{hi}",
    )
    return fig


# --------------------------------------------------------------------------- long rollouts: window, overview, search

Window = tuple[int, int]
"""An inclusive range of depths shown in the zoomed view."""

DETAIL_SPAN = 24
"""Depth columns the zoomed view shows by default: a node every ~36 px at 1280 px wide."""

OVERVIEW_ABOVE = 60
"""Trees deeper than this get an overview strip above a zoomed detail."""

LABEL_SPAN = 60
LABEL_NODES = 250
"""Call ids are written beside the nodes when at most this many depths and nodes are shown."""


def needs_overview(model: TreeModel) -> bool:
    """Whether the tree is too deep to draw whole with nodes one can click (and ids one can read)."""
    return model.max_depth + 1 > OVERVIEW_ABOVE


def wants_labels(model: TreeModel, window: Window | None) -> bool:
    lo, hi = window if window is not None else (0, model.max_depth)
    return hi - lo + 1 <= LABEL_SPAN and len(_visible(model, window)) <= LABEL_NODES


def clamp_window(model: TreeModel, window: Window) -> Window:
    """``window`` moved and cut to lie within the tree's depths, never empty."""
    a, b = int(min(window)), int(max(window))
    span = min(b - a, model.max_depth)
    a = max(0, min(a, model.max_depth - span))
    return a, a + span


def window_around(model: TreeModel, key: str | None, span: int = DETAIL_SPAN) -> Window:
    """A window of ``span + 1`` depths centred on node ``key`` (on the start without one)."""
    node = model.node(key) if key is not None else None
    centre = node.depth if node is not None else 0
    return clamp_window(model, (centre - span // 2, centre - span // 2 + span))


def keep_in_window(model: TreeModel, key: str | None, window: Window | None) -> Window:
    """The window to show with ``key`` selected: unchanged when the node is in it (the reader's zoom
    is kept), else one of the same width centred on the node."""
    if window is None:
        return window_around(model, key)
    window = clamp_window(model, window)
    node = model.node(key) if key is not None else None
    if node is None or window[0] <= node.depth <= window[1]:
        return window
    return window_around(model, key, window[1] - window[0])


def follow_selection(model: TreeModel, selected: str | None, window: Window | None,
                     followed: str | None) -> Window:
    """The zoomed window for this run. It moves only when the selection changed since the window last
    followed it (``followed``), and then only as far as needed to show it: the reader's own choice of
    depths (slider, box) stays put while they look around it."""
    if window is None or selected != followed:
        return keep_in_window(model, selected, window)
    return clamp_window(model, window)


def window_from_selection(model: TreeModel, selection: Any) -> Window | None:
    """The depths a box drawn on the overview covers, or None when the event is not a box."""
    boxes = selection.get("box") if isinstance(selection, Mapping) else getattr(selection, "box", None)
    if not boxes:
        return None
    box = boxes[-1]
    xs = box.get("x") if isinstance(box, Mapping) else None
    if not xs or len(xs) < 2:
        return None
    a, b = sorted(float(v) for v in xs[:2])
    return clamp_window(model, (int(np.ceil(a)), max(int(np.floor(b)), int(np.ceil(a)))))


def short_labels(idents: Sequence[str], limit: int = 10) -> list[str]:
    """Readable labels for ids drawn side by side. Ids of at most ``limit`` characters are kept whole;
    longer ones lose the prefix they all share (up to its last separator, so "call-0012" keeps its
    number), and what remains is cut to its last ``limit`` characters."""
    if not idents:
        return []
    prefix = idents[0]
    for ident in idents[1:]:
        while not ident.startswith(prefix):
            prefix = prefix[:-1]
    if len(idents) < 2 or len(prefix) < 3:
        cut, mark = 0, ""
    else:
        # Up to the shared prefix's last separator ("call-0012" keeps "0012"), else the whole prefix.
        sep = max(prefix.rfind(ch) for ch in "-_.:/")
        cut, mark = (sep + 1, "") if sep >= 2 else (len(prefix), "…")
    out = []
    for ident in idents:
        if len(ident) <= limit:
            out.append(ident)
            continue
        rest = ident[cut:] or ident
        out.append(mark + rest if len(rest) <= limit else "…" + rest[-(limit - 1):])
    return out


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


def overview_figure(model: TreeModel, window: Window, selected: str | None = None) -> go.Figure:
    """Every node as a small dot, the zoomed window outlined. Click a dot to go there; with the box tool
    (`OVERVIEW_CONFIG`'s one button) drag across depths to zoom into them. A click selects only while
    no drag mode is on: in plotly's select mode a click is not a selection event for Streamlit.
    Hovering a dot names its call (or refusal, or missing parent) and depth, never the internal key."""
    traces: list[Any] = []
    by_cat: dict[str, list[int]] = defaultdict(list)
    for i, n in enumerate(model.nodes):
        by_cat[n.category].append(i)
    for cat, (label, colour, symbol, _) in NODE_STYLES.items():
        idx = by_cat.get(cat)
        if not idx:
            continue
        keys = [model.nodes[i].key for i in idx]
        x, y = _xy(model, keys)
        traces.append(go.Scattergl(x=x, y=y, mode="markers", name=label, showlegend=False,
                                   marker={"color": colour, "size": 5, "symbol": "circle" if "open" not in symbol
                                           else "circle-open"},
                                   customdata=np.array(keys, dtype=object).reshape(-1, 1),
                                   hovertext=[overview_hover(model, k) for k in keys],
                                   hovertemplate="%{hovertext}<extra></extra>"))
    if selected is not None and selected in model.index:
        x, y = _xy(model, [selected])
        traces.append(go.Scattergl(x=x, y=y, mode="markers", name="selected", showlegend=False,
                                   marker={"color": style.SELECTED, "size": 11, "symbol": "circle-open",
                                           "line": {"width": 2, "color": style.SELECTED}},
                                   customdata=np.array([selected], dtype=object).reshape(-1, 1),
                                   hovertext=[overview_hover(model, selected)],
                                   hovertemplate="%{hovertext}<extra></extra>"))
    lanes = max(model.lanes, 1)
    a, b = window
    fig = go.Figure(data=traces)
    fig.update_layout(
        **style.BASE_LAYOUT,
        height=int(min(120, 56 + 10 * lanes)),
        margin={"l": 10, "r": 10, "t": 6, "b": 24},
        shapes=[{"type": "rect", "xref": "x", "yref": "paper", "x0": a - 0.5, "x1": b + 0.5, "y0": 0, "y1": 1,
                 "line": {"color": "#dc2626", "width": 1.5}, "fillcolor": "rgba(220,38,38,0.07)"}],
        hovermode="closest", clickmode="event+select", dragmode=False, selectdirection="h",
        xaxis={"range": [-1, model.max_depth + 1], "showgrid": False, "zeroline": False, "fixedrange": True,
               "tickformat": ",d"},
        yaxis={"visible": False, "range": [-(lanes - 1) - 0.8, 0.8], "fixedrange": True},
        uirevision="overview",
    )
    return fig


OVERVIEW_CONFIG = {"displaylogo": False, "scrollZoom": False, "modeBarButtons": [["select2d"]]}
"""The overview's plotly config: one toolbar button, the box tool (a click on a dot needs no drag mode)."""


def overview_hover(model: TreeModel, key: str) -> str:
    """What hovering an overview dot says: the call id (or the refusal / missing parent) and its depth."""
    node = model.nodes[model.index[key]]
    what = node.ident if node.kind == CALL else f"{node.kind} {node.ident}"
    return f"{html_text(what, 80)} · depth {node.depth:,}"


def key_from_selection(selection: Any) -> str | None:
    """The node key of a plotly selection event (a click), or None when nothing is selected.

    Accepts Streamlit's selection state (``event.selection``) or a plain mapping with a
    ``points`` list; each point carries its node key in ``customdata``.
    """
    if selection is None:
        return None
    points = selection.get("points") if isinstance(selection, Mapping) else getattr(selection, "points", None)
    if not points:
        return None
    for point in points:
        data = point.get("customdata") if isinstance(point, Mapping) else None
        if isinstance(data, (list, tuple)) and data:
            data = data[0]
        if isinstance(data, str) and ":" in data:
            return data
    return None


def tree_caption(model: TreeModel, window: tuple[int, int] | None) -> str:
    """What the Call tree tab says above the tree: its size, and with an overview (``window``: the
    depths zoomed into) how to move around it."""
    lanes = f"{model.lanes} lane{'s' if model.lanes != 1 else ''}"
    if window is None:
        return f"{fmt_int(len(model))} nodes in {lanes}. Click a node to inspect it; drag to zoom, double-click to reset."
    return (f"{fmt_int(len(model))} nodes in {lanes}, depths 0–{fmt_int(model.max_depth)}. Overview (all "
            "nodes): click a dot to go there, or take the box tool (top right) and drag across depths to "
            f"zoom into them. Below: depths {window[0]:,}–{window[1]:,}; click a node to inspect it.")


def search_caption(query: str, count: int) -> str:
    """What a search for a call id found (Markdown: the query escaped)."""
    shown = md_escape(query)
    if not count:
        return f"No call id contains “{shown}”."
    if count > 1:
        return f"{count} matches for “{shown}”; showing the first (exact, then prefix, then substring)."
    return f"Found “{shown}”."
