"""Steps 7-8 of a build (docs/contract.md#builder-chains, #builder-main): chains and the delivered one.

Every root-to-leaf path without a quarantined call is a chain; the one the anchor ends
(or, without an anchor, the earliest root's latest leaf) is delivered as "main".
"""

from __future__ import annotations

from .calls import Call
from .output import Chain, ChainLink


def _time_key(call: Call) -> tuple[float, str]:
    return call.created_at, call.call_id


def delivered_anchor(terminal_call_id: str | None, by_id: dict[str, Call],
                     anchor_id: str | None) -> tuple[Call | None, str]:
    """Steps 7-8: the call the main chain ends on (None: no anchor) and `BuildNotes.terminal_chain`."""
    anchor = by_id.get(anchor_id) if anchor_id is not None else None
    if terminal_call_id is None:
        return anchor, ""
    if terminal_call_id not in by_id:
        return anchor, "missing"
    if anchor is None or anchor.quarantined:
        return None, "quarantined"
    return anchor, "main"


def build_chains(calls: list[Call], anchor: Call | None) -> list[Chain]:
    """Every root-to-leaf path without a quarantined call; the delivered one first as "main"."""
    cut = anchor  # paths through the anchor end there; its subtree forms no chain
    paths: list[list[Call]] = []
    for root in calls:
        if root.parent is not None or root.quarantined:
            continue
        stack: list[tuple[Call, list[Call]]] = [(root, [root])]
        while stack:
            node, path = stack.pop()
            live = [] if node is cut else [c for c in node.children if not c.quarantined]
            if not live:
                paths.append(path)
                continue
            for child in live:
                stack.append((child, path + [child]))
    if anchor is not None:
        main_path = next(p for p in paths if p[-1] is anchor)
    elif paths:
        main_path = min(paths, key=lambda p: (_time_key(p[0]), -p[-1].created_at, p[-1].call_id))
    else:
        main_path = None
    branches = sorted((p for p in paths if p is not main_path), key=lambda p: (_time_key(p[0]), _time_key(p[-1])))
    chains = []
    if main_path is not None:
        chains.append(_make_chain("main", main_path))
    chains += [_make_chain(f"branch-{i}", p) for i, p in enumerate(branches)]
    return chains


def _make_chain(chain_id: str, path: list[Call]) -> Chain:
    links = []
    for call in path:
        start = call.parent.full_len if call.parent is not None else call.prompt.size
        links.append(ChainLink(entry=call.entry, interstitial=call.prompt[start:]))
    return Chain(chain_id=chain_id, links=links, root_prompt=path[0].prompt)
