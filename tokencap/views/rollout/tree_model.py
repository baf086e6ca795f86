"""The call tree's nodes: every call, refusal and missing parent of one build, and what each is.

Nodes are the snapshot's calls (chained, quarantined, empty generations, excluded
records), its engine refusals (attached to the call they continued) and "ghost" nodes for
parents that were claimed but never captured. Each node hangs under its *display parent*:
the parent the build linked (verified or recovered), else the parent the record claimed
(the link is drawn as rejected), else nothing (a root). `build_tree` makes them in numbered
steps; `tree_layout` places them (one row per node in call order, lanes as columns),
`tree_hover` says what hovering each one shows; `tree_marks` says what each mark means,
`tree_chart` draws them and `tree_table` lists them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ...builder import (
    MISSING_RESOLUTION,
    PARENT_DIGEST_MISMATCH,
    PARENT_MISSING,
    PARENT_MISSING_RECOVERED,
)
from ...records import ParentResolutionStatus
from ..formatting import one_line
from ..model import CALL, GHOST, REFUSAL, RolloutView, node_key
from ..words import label
from . import items
from .tree_hover import node_hover
from .tree_layout import Run, TreeNode, lay_out
from .tree_marks import EDGE_STYLES, NODE_STYLES, OVERLAY_STYLES, RING_FLAGS

_NOTE_EDGE = {
    PARENT_DIGEST_MISMATCH: "digest_mismatch",
    PARENT_MISSING: "missing_parent",
    MISSING_RESOLUTION: "missing_resolution",
}

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
    runs: list[Run]                          # the lane segments, each named (`Run.name`)
    main_lane: bool = False                  # whether lane 0 is the main chain's
    item_texts: dict[str, str] = field(default_factory=dict)  # call id -> its output item's text
    # (docs/contract.md#token-rollouts)
    _edges: dict[str, np.ndarray] | None = field(default=None, repr=False, compare=False)

    @property
    def max_order(self) -> int:
        """The last row (nodes are numbered 1.. in call order)."""
        return len(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, key: str) -> TreeNode | None:
        i = self.index.get(key)
        return self.nodes[i] if i is not None else None

    def keys(self) -> list[str]:
        return [n.key for n in self.nodes]

    def edges(self) -> list[tuple[str, str, str]]:
        out = [(n.parent, n.key, n.edge) for n in self.nodes if n.parent is not None and n.edge is not None]
        return out + self.extra_edges

    def edge_table(self) -> dict[str, np.ndarray]:
        """Every drawn link as arrays (kept): rows and lanes of both ends, the `EDGE_STYLES` index of its
        kind, and whether it is drawn straight (a claim beside the link the build made) or along the lanes."""
        if self._edges is None:
            pairs = [(n.parent, n.key, n.edge, False)
                     for n in self.nodes if n.parent is not None and n.edge is not None]
            pairs += [(a, b, kind, True) for a, b, kind in self.extra_edges if a in self.index and b in self.index]
            codes = {kind: i for i, kind in enumerate(EDGE_STYLES)}
            parents = [self.nodes[self.index[a]] for a, _, _, _ in pairs]
            children = [self.nodes[self.index[b]] for _, b, _, _ in pairs]
            self._edges = {
                "parent_row": np.array([n.order for n in parents], dtype=float),
                "child_row": np.array([n.order for n in children], dtype=float),
                "parent_lane": np.array([n.lane for n in parents], dtype=float),
                "child_lane": np.array([n.lane for n in children], dtype=float),
                "kind": np.array([codes[kind] for _, _, kind, _ in pairs], dtype=np.int16),
                "straight": np.array([straight for *_, straight in pairs], dtype=bool),
            }
        return self._edges

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
            "order": [n.order for n in self.nodes],
            "lane": [n.lane for n in self.nodes],
        })

    def label(self, key: str) -> str:
        """A one-line plain-text label for pickers: id, then what the node is."""
        n = self.node(key)
        if n is None:
            return key
        what = NODE_STYLES[n.category][0]
        extra = [OVERLAY_STYLES[f][0].split(" (")[0] for f in RING_FLAGS if f in n.flags]
        prefix = {CALL: "", REFUSAL: "refusal ", GHOST: "never captured "}[n.kind]
        text = self.item_texts.get(n.ident) if n.kind == CALL else None
        return f"{prefix}{n.ident} — {what}" + (f"; {', '.join(extra)}" if extra else "") + (
            f" · {text}" if text else "")

# --------------------------------------------------------------------------- model


def tree_of(view: RolloutView, breaks: Sequence[Any] | None = None, key: str = "") -> TreeModel:
    """The view's laid-out tree with its breaks marked, computed once per view (and ``key``): ``breaks`` as
    the page diagnosed them with its tokenizer (``key`` names it), else `RolloutView.breaks` (no tokenizer).
    Node keys and positions are the same either way; only the causes beside the breaks can differ."""
    if breaks is None:
        return view.derived("tree", lambda v: build_tree(v, v.breaks))
    return view.derived(f"tree:{key}", lambda v: build_tree(v, breaks))


def build_tree(view: RolloutView, breaks: Sequence[Any] | None = None) -> TreeModel:
    """The tree of ``view``'s build; ``breaks`` (the diagnosis: `Break`s or their ``to_dict()``) adds a
    ring and the cause to each break's call, a lane per sub-agent invocation and the compactions.
    Without breaks it is the tree of the build alone."""
    nodes: dict[str, TreeNode] = {}
    all_ids = _call_nodes(view, nodes)  # 1. a node per call
    extra_edges = _call_parents(view, nodes, all_ids)  # 2. each call's display parent and link
    _refusal_nodes(view, nodes)  # 3. the engine's refusals
    _announced_nodes(view, nodes)  # 4. the calls announced, never captured
    subagents = _mark_breaks(nodes, breaks or ())  # 5. the breaks, with their causes and compactions
    # 6. The layout. A sub-agent's first call never continues its parent's lane: the invocation gets one of its own.
    main_root = _main_root(view, nodes)
    ordered, runs = lay_out(nodes, main_root, lambda parent, child: child.key not in subagents)
    origin = view.origin_time
    for n in ordered:  # 7. what hovering each node says
        n.hover = node_hover(n, view, origin)
    chain_leaves = {c.chain_id: node_key(CALL, c.call_ids[-1]) for c in view.chains if c.links}
    _name_runs(runs, nodes, chain_leaves, main_root, subagents)  # 8. each lane segment's name
    last = view.terminal_call_id  # 9. the call selected first: the terminal one, else the first row
    default = node_key(CALL, last) if last is not None else (ordered[0].key if ordered else None)
    return TreeModel(
        nodes=ordered, index={n.key: i for i, n in enumerate(ordered)},
        lanes=(max((n.lane for n in ordered), default=0) + 1) if ordered else 0,
        max_depth=max((n.depth for n in ordered), default=0),
        extra_edges=extra_edges, chain_leaves=chain_leaves, default_key=default, runs=runs,
        main_lane=main_root is not None, item_texts=items.call_texts(view),
    )


def _main_root(view: RolloutView, nodes: dict[str, TreeNode]) -> str | None:
    """Step 6. The key of the main chain's first call when the tree holds it: its run owns lane 0."""
    main = view.build.main if view.build is not None else None
    key = node_key(CALL, main.call_ids[0]) if main is not None and main.links else None
    return key if key in nodes else None


def _ghost(nodes: dict[str, TreeNode], ident: str) -> str:
    """The key of the ghost node standing for ``ident`` (a parent claimed, never captured), added if new."""
    key = node_key(GHOST, ident)
    if key not in nodes:
        nodes[key] = TreeNode(key, GHOST, ident, "ghost", hover="")
    return key


def _parent_key(nodes: dict[str, TreeNode], ident: str) -> str:
    """The key of call ``ident``'s node if the tree holds it, else of its ghost."""
    key = node_key(CALL, ident)
    return key if key in nodes else _ghost(nodes, ident)


def _call_category(view: RolloutView, cid: str, terminal: str | None) -> str:
    """What call ``cid`` is in the build: excluded, an empty generation, the terminal call, its role, ..."""
    build = view.build
    if build is not None and cid in build.excluded:
        return "excluded"
    if build is not None and cid in build.notes.empty_generation_calls:
        return "empty"
    if cid == terminal:
        return "terminal"
    if cid in view.roles:
        return view.roles[cid]
    return "chained" if build is not None and cid in build.links else "excluded"


def _call_nodes(view: RolloutView, nodes: dict[str, TreeNode]) -> list[str]:
    """Step 1. A node per call: everything the build saw (entries), plus excluded records; or, when there is
    no build (load error, no records, builder failure), the raw records unlinked. Returns the call ids."""
    build = view.build
    if build is None:
        all_ids = list(view.records_by_id)
    else:
        all_ids = list(build.entries) + [c for c in build.excluded if c not in build.entries]
    links = build.links if build is not None else {}
    conflicts = set(build.conflicting_duplicates) if build is not None else set()
    membership = view.chain_membership
    chain_rank = {c.chain_id: i for i, c in enumerate(view.chains)}
    terminal = terminal_call(view)
    answer, ambiguous = _final_answer_calls(view)
    for cid in all_ids:
        entry = view.entry(cid)
        chains = membership.get(cid)
        if chains:
            rank = min(chain_rank[c] for c in chains)
        else:
            rank = 10**6 if view.roles.get(cid) == "quarantined" else 10**7
        node = TreeNode(node_key(CALL, cid), CALL, cid, _call_category(view, cid, terminal),
                        created_at=entry.created_at if entry is not None else 0.0, rank=rank)
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
    return all_ids


def _call_parents(view: RolloutView, nodes: dict[str, TreeNode], all_ids: list[str]) -> list[tuple[str, str, str]]:
    """Step 2. Each call's display parent and edge kind; returns the extra edges (a recovered call's
    rejected claim)."""
    links = view.build.links if view.build is not None else {}
    extra_edges: list[tuple[str, str, str]] = []
    for cid in all_ids:
        node = nodes[node_key(CALL, cid)]
        decision = links.get(cid)
        entry = view.entry(cid)
        claimed = entry.parent_call_id if entry is not None else None
        if decision is None:
            if claimed is not None:
                # Left out of chaining (empty generation, excluded): hang it under the parent it claimed.
                node.parent = _parent_key(nodes, claimed)
                node.edge = "claimed"
        elif decision.linked_parent is not None:
            recovered = decision.note == PARENT_MISSING_RECOVERED
            node.parent = node_key(CALL, decision.linked_parent)
            node.edge = "recovered" if recovered else "verified"
            if recovered and claimed is not None:
                extra_edges.append((_parent_key(nodes, claimed), node.key, "claimed"))
        elif claimed is not None and decision.note in _NOTE_EDGE:
            node.parent = _parent_key(nodes, claimed)
            node.edge = _NOTE_EDGE[decision.note]
    return extra_edges


def _refusal_nodes(view: RolloutView, nodes: dict[str, TreeNode]) -> None:
    """Step 3. Engine refusals, attached to the call they continued."""
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
            node.parent = _parent_key(nodes, refusal.parent_call_id)
            node.edge = "refusal"
        nodes[key] = node


def _announced_nodes(view: RolloutView, nodes: dict[str, TreeNode]) -> None:
    """Step 4. Calls the store announced (an intent) but never captured: why the capture is incomplete."""
    for ident in view.announced_uncaptured:
        key = node_key(GHOST, ident)
        if key in nodes:
            nodes[key].category = "announced"
        else:
            nodes[key] = TreeNode(key, GHOST, ident, "announced", rank=10**8)


def _mark_breaks(nodes: dict[str, TreeNode], breaks: Sequence[Any]) -> dict[str, str]:
    """Step 5. Mark each break (a ring, its cause in the label and the hover) and the compactions its evidence
    names; returns the keys of sub-agents' first calls -> their invocation id."""
    subagents: dict[str, str] = {}
    for item in breaks:
        b = item.to_dict() if hasattr(item, "to_dict") else dict(item)
        node = nodes.get(node_key(CALL, str(b.get("call_id"))))
        if node is None:
            continue
        cause = str(b.get("cause") or "")
        node.flags.add("break")
        node.note = " · ".join(x for x in (node.note, f"↯ {label(cause)}") if x)
        lines = [f"break: {one_line(b.get('kind'))}, cause {label(cause)} (key: {one_line(cause)})"]
        if b.get("predecessor"):
            lines.append(f"should have continued {one_line(b['predecessor'], 60)} ({one_line(b.get('relation'))})")
        if b.get("hint"):
            lines.append(one_line(b["hint"]))  # our own sentence, whole (a cut hint hides what fixes it)
        for ev in b.get("evidence") or ():
            if not isinstance(ev, dict):
                continue
            target = nodes.get(node_key(CALL, str(ev.get("call_id"))))
            kind = ev.get("kind")
            if kind == "invocation" and target is not None:
                target.group = str(ev.get("invocation_id"))
                if ev.get("parent_invocation_id") is not None and cause == "subagent" and target is node:
                    subagents[node.key] = str(ev.get("invocation_id"))
            elif kind in ("compaction_after", "compaction_call") and target is not None:
                target.flags.add("compaction")
                if "compaction" not in target.note:
                    word = "compaction summary" if kind == "compaction_call" else "after a compaction"
                    target.note = " · ".join(x for x in (target.note, word) if x)
                lines.append("compaction summary request" if kind == "compaction_call" else
                             f"first call after a compaction ({one_line(ev.get('trigger'))}: "
                             f"{one_line(ev.get('tokens_before'))} → {one_line(ev.get('tokens_after'))} tokens)")
        node.break_hover = "\n".join(lines)
    return subagents


_ANONYMOUS_RUN = {"quarantined": "retry", "refusal": "refusal", "refusal_ended": "refusal", "excluded": "excluded",
                  "empty": "empty generation", "ghost": "never captured", "announced": "never captured",
                  "after_terminal": "after the terminal call", "terminal": "main", "main": "main"}


def _name_runs(runs: list[Run], nodes: dict[str, TreeNode], chain_leaves: dict[str, str],
               main_root: str | None, subagents: dict[str, str] | None = None) -> None:
    """Step 8. Each run's name: a sub-agent's invocation, else the chains ending in it (a fragment said so), else
    what its head is. The head of every named run other than the main chain's carries the name in its
    label (before its break's cause, if any)."""
    leaf_chains: dict[str, list[str]] = {}
    for chain_id, key in chain_leaves.items():
        leaf_chains.setdefault(key, []).append(chain_id)
    for run in runs:
        head = nodes[run.head]
        chains = [c for k in run.keys for c in leaf_chains.get(k, ())]
        if run.head == main_root:
            run.name = "main"
        elif subagents and run.head in subagents:
            run.name = f"sub-agent {subagents[run.head]}" + (f" ({chains[0]})" if chains else "")
            head.note = " · ".join(x for x in (run.name, head.note) if x)
        elif chains:
            cut = head.parent is None or head.edge not in ("verified", "recovered")
            run.name = ", ".join(chains[:2]) + (" …" if len(chains) > 2 else "") + (" (fragment)" if cut else "")
            head.note = " · ".join(x for x in (run.name, head.note) if x)
        else:
            run.name = _ANONYMOUS_RUN.get(head.category, head.category.replace("_", " "))


def terminal_call(view: RolloutView) -> str | None:
    """The call the tree stars as the terminal call: the delivered chain's end, unless the harness's final
    answer could not be attributed (unattributed or ambiguous) and no anchor was given: then the build
    has no anchor, the banner says so, and no call is the terminal one."""
    attribution = view.result.terminal_attribution
    if view.result.terminal_call_id is None and attribution is not None and not attribution.attributed:
        return None
    return view.terminal_call_id


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


