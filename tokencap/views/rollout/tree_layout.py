"""Where every node of the call tree goes: one row per node in call order, lanes as columns.

The layout reads only the nodes' display parents, times and ranks (`TreeNode`); what the
nodes are and how they are drawn live in `tree_model` and `tree_chart`. All of it is
iterative (no recursion) and near-linear, so 1,500 calls lay out in a few milliseconds:

* **depth**: calls from the root along display parents (a loop of claimed parents is cut);
* **order** (the row, 1-based): call order, by time, a parent always before its children
  (a heap over the nodes whose parent is placed; a never-captured parent takes its first
  child's time, a call announced but never captured comes last);
* **runs**: a node and the first child that continues it across a link the build made (or
  a refusal continuing it) share a *run*; every other child opens a run of its own, so a
  fragment, a branch, a retry or a sub-agent never looks like its parent's continuation;
* **lanes** (the columns): the main chain's run owns lane 0; every other run takes the
  leftmost lane right of its parent's that is free over its rows, from its parent's row
  to its last node, with one empty row between runs, so runs never look joined;
* **label lanes**: a node's label starts right of its own lane and of every lane whose
  line crosses its row, so no label is drawn over a link.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ..model import GHOST, REFUSAL

LANE_EDGES = frozenset({"verified", "recovered", "refusal"})
"""Edge kinds across which a child may continue its parent's lane (links the build made, refusals)."""


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
    group: str | None = None
    """The harness invocation the call belongs to (a sub-agent's calls never continue another's run)."""
    depth: int = 0
    order: int = 0
    """The node's row: its 1-based position in call order."""
    lane: int = 0
    run: int = 0
    label_lane: int = 0
    note: str = ""
    """Words the node's label adds after its id (the lane it opens, its break's cause, a compaction)."""
    hover: str = ""
    break_hover: str = ""


@dataclass
class Run:
    """A lane segment: a head node and the nodes continuing it, drawn in one lane."""

    head: str
    lane: int
    start: int
    """The row its line starts on: the head's parent's row (the link comes down from it), else the head's."""
    end: int
    """The row of its last node."""
    keys: list[str]
    name: str = ""


def lay_out(nodes: Mapping[str, TreeNode], main_root: str | None,
            continues: Callable[[TreeNode, TreeNode], bool] | None = None) -> tuple[list[TreeNode], list[Run]]:
    """Depth, order, run, lane and label lane of every node; the nodes in call order and the runs.

    ``main_root`` is the key of the main chain's first call (its run owns lane 0), ``continues``
    whether a first child may stay on its parent's run beyond the edge rule (e.g. same invocation).
    """
    _depths(nodes)
    children: dict[str, list[str]] = defaultdict(list)
    roots: list[str] = []
    for k, n in nodes.items():
        (children[n.parent] if n.parent is not None else roots).append(k)

    # Best chain rank in each subtree (main chain = 0), deepest nodes first.
    best = {k: n.rank for k, n in nodes.items()}
    by_depth = sorted(nodes, key=lambda k: -nodes[k].depth)
    for k in by_depth:
        p = nodes[k].parent
        if p is not None and best[k] < best[p]:
            best[p] = best[k]

    def order_key(k: str) -> tuple:
        return best[k], nodes[k].kind == REFUSAL, nodes[k].created_at, k

    for k in list(children):
        children[k].sort(key=order_key)

    ordered = _call_order(nodes, children, roots, best)

    # Runs: a node continues its parent's run when it is the first child across a lane edge.
    run_of: dict[str, int] = {}
    runs: list[Run] = []
    for n in ordered:
        up = nodes[n.parent] if n.parent is not None else None
        kids = children.get(n.parent, []) if n.parent is not None else []
        if up is not None and kids and kids[0] == n.key and n.edge in LANE_EDGES and \
                (continues is None or continues(up, n)):
            idx = run_of[up.key]
            runs[idx].keys.append(n.key)
            runs[idx].end = n.order
        else:
            idx = len(runs)
            runs.append(Run(n.key, 0, up.order if up is not None else n.order, n.order, [n.key]))
        run_of[n.key] = n.run = idx

    # Lanes: the main chain's run owns lane 0; every other run takes the leftmost lane right
    # of its parent's that has been free since one row before its start.
    main_run = run_of.get(main_root) if main_root is not None else None
    lane_end: list[int] = []
    if main_run is not None:
        runs[main_run].lane = 0
        lane_end.append(10**12)  # nothing else ever goes in lane 0
    for i in sorted(range(len(runs)), key=lambda i: (runs[i].start, i)):
        run = runs[i]
        if i == main_run:
            continue
        head = nodes[run.head]
        above = runs[run_of[head.parent]].lane if head.parent is not None else -1
        start = max(above + 1, 1 if main_run is not None else 0)
        chosen = next((lane for lane in range(start, len(lane_end)) if lane_end[lane] < run.start - 1), None)
        if chosen is None:
            lane_end.extend([-10] * (start - len(lane_end)))
            lane_end.append(run.end)
            chosen = len(lane_end) - 1
        else:
            lane_end[chosen] = run.end
        run.lane = chosen
    for n in ordered:
        n.lane = runs[n.run].lane
    _label_lanes(ordered, runs, max(len(lane_end), 1))
    return ordered, runs


def _depths(nodes: Mapping[str, TreeNode]) -> None:
    """Depth of every node: walk up to a node of known depth (or a root); a loop of claimed parents is cut."""
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


def _call_order(nodes: Mapping[str, TreeNode], children: Mapping[str, list[str]], roots: list[str],
                best: Mapping[str, int]) -> list[TreeNode]:
    """The nodes in call order: by time, each one after its parent (a heap of the nodes whose parent is placed)."""
    when: dict[str, float] = {}
    for k in sorted(nodes, key=lambda k: -nodes[k].depth):  # children before parents
        n = nodes[k]
        if n.kind == GHOST:
            kids = children.get(k, [])
            when[k] = min((when[c] for c in kids), default=float("inf"))  # a never-captured parent: its first child's
        else:
            when[k] = n.created_at
    heap = [(when[k], best[k], k) for k in roots]
    heapq.heapify(heap)
    ordered: list[TreeNode] = []
    while heap:
        _, _, k = heapq.heappop(heap)
        n = nodes[k]
        n.order = len(ordered) + 1
        ordered.append(n)
        for c in children.get(k, ()):
            heapq.heappush(heap, (when[c], best[c], c))
    return ordered


def _label_lanes(ordered: list[TreeNode], runs: list[Run], lanes: int) -> None:
    """Each node's label lane: its own, or the rightmost lane whose line crosses its row."""
    rows = len(ordered)
    if not rows:
        return
    crossing = np.zeros((lanes, rows + 2), dtype=np.int32)
    for run in runs:
        # The run's line covers the rows strictly between where it starts and its last node.
        if run.end - run.start >= 2:
            crossing[run.lane, run.start + 1] += 1
            crossing[run.lane, run.end] -= 1
    covered = np.cumsum(crossing, axis=1)[:, 1:rows + 1] > 0
    rightmost = np.where(covered, np.arange(lanes)[:, None], -1).max(axis=0)
    own = np.fromiter((n.lane for n in ordered), dtype=np.int64, count=rows)
    for n, lane in zip(ordered, np.maximum(own, rightmost).tolist(), strict=True):
        n.label_lane = int(lane)
