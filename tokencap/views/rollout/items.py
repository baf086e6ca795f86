"""A rollout read from output items (docs/contract.md#token-rollouts): its calls named by their items, with each
item's text.

Each token-bearing output item of such a rollout is a call ``item-NNNN`` (NNNN its place in the
response's output), and the call's ``output_items`` are the items after the call before it up to
that one. The Rollout page names each item by the same scheme (`item_names`) and says in one line
what the call's own item holds (`call_text`): the assistant's text, the tool call it makes, or the
reasoning. Capture strings are kept verbatim (the page escapes them), on one line, clipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...loading.rollouts import CALL_PREFIX, call_id
from ...records import TokenEntry
from ..formatting import one_line
from ..model import RolloutView

TEXT_LIMIT = 80
"""Characters of an item's text in a label (the detail shows the item whole)."""


def from_items(view: RolloutView) -> bool:
    """Whether the view's rollout was read from a rollout record's output items (docs/contract.md#token-rollouts)."""
    return view.snapshot.record is not None


def _index(entry: TokenEntry) -> int | None:
    """The output index of the call's own item (``item-0007`` -> 7), or None for another name."""
    ident = entry.model_call_id
    digits = ident[len(CALL_PREFIX):] if ident.startswith(CALL_PREFIX) else ""
    return int(digits) if digits.isdigit() else None


def item_names(entry: TokenEntry) -> list[str]:
    """The name of each of the call's output items by its place in the response's output (``item-0005``);
    [] when the call's id does not say where its item is."""
    index = _index(entry)
    carrier = entry.token_item_index
    if index is None or carrier is None:
        return []
    first = index - carrier
    return [call_id(first + i) for i in range(len(entry.output_items))] if first >= 0 else []


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def item_text(item: Mapping[str, Any]) -> str:
    """What one output item holds, as plain text: a message's text, a tool call as ``name(arguments)``,
    a tool result's output, the reasoning's summary or text; else its type."""
    kind = item.get("type")
    if kind == "function_call":
        arguments = item.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False) if arguments is not None else ""
        return f"{item.get('name') if isinstance(item.get('name'), str) else 'tool'}({arguments})"
    if kind == "function_call_output":
        output = item.get("output")
        return output if isinstance(output, str) else _content_text(output)
    if kind == "reasoning":
        return _content_text(item.get("summary")) or _content_text(item.get("content"))
    text = _content_text(item.get("content"))
    if text or kind == "message":
        return text
    return str(kind) if isinstance(kind, str) else "item"


def call_text(entry: TokenEntry, limit: int = TEXT_LIMIT) -> str:
    """The call's own item (the one carrying its tokens) in one clipped line: ``message: ...``,
    ``function_call: run_tests({...})`` or ``reasoning: ...``; "" when it has no such item."""
    items = entry.output_items
    carrier = entry.token_item_index if entry.token_item_index is not None else len(items) - 1
    if not 0 <= carrier < len(items) or not isinstance(items[carrier], Mapping):
        return ""
    item = items[carrier]
    kind = item.get("type") if isinstance(item.get("type"), str) else "item"
    text = item_text(item)
    return one_line(f"{kind}: {text}" if text and text != kind else str(kind), limit)


def read_from_fact(entry: TokenEntry) -> str:
    """The detail's first fact about a call read from an output item: which item, and what it holds."""
    text = call_text(entry)
    return (f"Read from the rollout record's output item {entry.model_call_id}" + (f" ({text})" if text else "")
            + ": its prompt_token_ids, generation_token_ids and generation_log_probs are this call's.")


def call_texts(view: RolloutView, limit: int = TEXT_LIMIT) -> dict[str, str]:
    """Every call's `call_text`, for a rollout read from output items; {} for a capture's."""
    if not from_items(view):
        return {}
    out = {}
    for cid in view.records_by_id:
        entry = view.entry(cid)
        text = call_text(entry, limit) if entry is not None else ""
        if text:
            out[cid] = text
    return out


__all__ = ["TEXT_LIMIT", "call_text", "call_texts", "from_items", "item_names", "item_text", "read_from_fact"]
