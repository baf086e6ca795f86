"""A call's record as the detail panel lists it: each field as (field, value) text.

Token arrays are summarised by their lengths (a delta record's full prompt length from the
build), times made relative to the rollout's first call, unknown fields kept and marked.
Values are plain text; the app shows them with plain-text elements.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from ...records import TokenEntry
from ..formatting import fmt_time, shorten
from ..model import RolloutView


def field_value(v: Any) -> str:
    """A field's value as text: null, true/false, JSON cut to 300 characters, else its string."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return shorten(json.dumps(v, ensure_ascii=False, default=str), 300)
    return str(v)


def entry_fields(entry: TokenEntry, view: RolloutView | None = None) -> pd.DataFrame:
    """A call's fields as (field, value) rows, token arrays summarised by their lengths."""
    origin = view.origin_time if view is not None else None
    full = view.build.entries.get(entry.model_call_id) if view is not None and view.build is not None else None
    prompt_len = int(full.prompt_token_ids.size) if full is not None else int(entry.prompt_token_ids.size)
    rows: list[tuple[str, str]] = [
        ("model_call_id", entry.model_call_id),
        ("rollout_id", entry.rollout_id),
        ("model", entry.model or "—"),
        ("schema_version", str(entry.schema_version)),
        ("created_at", fmt_time(entry.created_at, origin)),
        ("finish_reason", field_value(entry.finish_reason)),
        ("parent_resolution", field_value(entry.parent_resolution.value if entry.parent_resolution else None)),
        ("parent_call_id", field_value(entry.parent_call_id)),
        ("parent_resolution_reason", entry.parent_resolution_reason or "—"),
        ("prompt tokens (full)", f"{prompt_len:,}"),
        ("generated tokens", f"{int(entry.generation_token_ids.size):,}"),
    ]
    if entry.prompt_is_delta:
        rows.append(("prompt tokens stored (delta suffix)", f"{int(entry.prompt_token_ids.size):,}"))
    rows += [
        ("prompt_is_delta", field_value(entry.prompt_is_delta)),
        ("cum_len (stamped)", field_value(entry.cum_len)),
        ("digest (stamped)", field_value(entry.digest)),
        ("token_item_index", field_value(entry.token_item_index)),
        ("output items", str(len(entry.output_items))),
        ("prefix_requested / prefix_supplied",
         f"{field_value(entry.prefix_requested)} / {field_value(entry.prefix_supplied)}"),
        ("continuation_fingerprint", field_value(entry.continuation_fingerprint) or "—"),
        ("continuation_context_len", field_value(entry.continuation_context_len)),
        ("continuation_context_digest", field_value(entry.continuation_context_digest) or "—"),
        ("fingerprint_version", field_value(entry.fingerprint_version)),
        ("routed_experts", "present" if entry.routed_experts is not None else "—"),
    ]
    if entry.generation_log_probs.size:
        lp = entry.generation_log_probs
        rows.append(("log-prob mean / min", f"{float(lp.mean()):.3f} / {float(lp.min()):.3f}"))
    if view is not None:
        copies = len(view.copies_by_id.get(entry.model_call_id, ()))
        if copies > 1:
            rows.append(("records with this id", str(copies)))
    for k, v in entry.extra.items():
        rows.append((f"{k} (unknown field, kept)", field_value(v)))
    return pd.DataFrame(rows, columns=["field", "value"])
