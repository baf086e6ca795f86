"""What NeMo Gym handed the trainer for a rollout (docs/contract.md#delivered).

A rollout record's top-level ``mask_sample`` (a bool) is what the trainer was told, and
``_ng_token_capture`` (an object) says token capture produced the sample. Without it, a
``mask_sample`` was set by the harness for its own reasons (a timeout, a sandbox out of
memory), which says nothing about lineage. tokencap reads both and decides nothing from
them: they are shown beside tokencap's own verdict, never mixed into it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

DELIVERED_BY: Final[tuple[str, ...]] = ("token_capture", "agent")
"""The values `delivered_by` can return besides None."""


def delivered_mask_sample(record: Any) -> bool | None:
    """The record's top-level ``mask_sample`` when it is a bool, else None (also for no record)."""
    if not isinstance(record, Mapping):
        return None
    value = record.get("mask_sample")
    return value if isinstance(value, bool) else None


def delivered_by(record: Any) -> str | None:
    """``"token_capture"`` when the record's ``_ng_token_capture`` is an object; ``"agent"``
    when it carries a bool ``mask_sample`` without one (the harness masked it on its own);
    None otherwise."""
    if not isinstance(record, Mapping):
        return None
    if isinstance(record.get("_ng_token_capture"), Mapping):
        return "token_capture"
    if isinstance(record.get("mask_sample"), bool):
        return "agent"
    return None


def trained_in_doubt(record: Any, tokencap_masks: bool) -> bool:
    """Gym delivered the rollout as trainable (``mask_sample`` false) while tokencap masks
    it: trained on although its lineage is in doubt."""
    return delivered_mask_sample(record) is False and bool(tokencap_masks)


__all__ = ["DELIVERED_BY", "delivered_by", "delivered_mask_sample", "trained_in_doubt"]
