"""What the diagnosis returns: one `Break` per place a rollout's lineage breaks (docs/contract.md#diagnosis).

Plain frozen data, so a caller can keep, compare and pickle it; `Break.to_dict` gives the
JSON-native form the scan table, the app and the command line read. Nothing here points
back into the build: positions, call ids and texts only.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .causes import cause_order

MAX_DIVERGENCES = 32
"""At most this many divergences are listed per break; ``more_divergences`` counts the rest."""


@dataclass(frozen=True)
class Divergence:
    """S[parent_start:parent_end] (the predecessor's tokens) stands where the break's prompt
    has P[prompt_start:prompt_end]; ``kind`` is one of `causes.DIVERGENCE_KINDS`."""

    parent_start: int
    parent_end: int
    prompt_start: int
    prompt_end: int
    kind: str

    def to_dict(self) -> dict[str, Any]:
        return {"parent_start": self.parent_start, "parent_end": self.parent_end,
                "prompt_start": self.prompt_start, "prompt_end": self.prompt_end, "kind": self.kind}


@dataclass(frozen=True)
class Break:
    """One call where the rollout stops being one proven chain, and why (docs/contract.md#breaks to #delivered).

    - ``call_id``, ``kind`` (`breaks.BREAK_KINDS`), ``note`` (the build's link note or
      record fault, else None), ``sibling`` (a branch's main-chain child, else None);
    - ``predecessor`` and ``relation`` (`breaks.RELATIONS`), both None for a record fault
      and when no earlier call exists;
    - ``agree`` (common prefix), ``predecessor_len`` (L) and ``prompt_len`` (M): None when
      there is no predecessor (``prompt_len`` None only when the build kept no record);
    - ``divergences`` (at most 32) and ``more_divergences`` (the rest, counted);
    - ``cause`` (`causes.CAUSES`), ``token_cause`` (the cause the tokens alone give; always
      set), ``hint`` (the cause's fixed sentence), ``reasoning`` (for
      ``generation_dropped``: the dropped span is reasoning);
    - ``parent_text``, ``prompt_text``, ``same_text``: the first divergence decoded (only
      with a tokenizer that can decode it, else None);
    - ``evidence``: the harness's evidence objects about the call and its predecessor, each
      with ``kind`` and ``call_id``; ``notes``: what was left out and why.
    """

    call_id: str
    kind: str
    note: str | None
    predecessor: str | None
    relation: str | None
    sibling: str | None
    agree: int | None
    predecessor_len: int | None
    prompt_len: int | None
    divergences: tuple[Divergence, ...]
    more_divergences: int
    cause: str
    token_cause: str
    hint: str
    reasoning: bool
    parent_text: str | None = None
    prompt_text: str | None = None
    same_text: bool | None = None
    evidence: tuple[dict[str, Any], ...] = field(default=(), hash=False)
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-native values (``json.dumps`` works), in the order above."""
        return {
            "call_id": self.call_id, "kind": self.kind, "note": self.note,
            "predecessor": self.predecessor, "relation": self.relation, "sibling": self.sibling,
            "agree": self.agree, "predecessor_len": self.predecessor_len, "prompt_len": self.prompt_len,
            "divergences": [d.to_dict() for d in self.divergences], "more_divergences": self.more_divergences,
            "cause": self.cause, "token_cause": self.token_cause, "hint": self.hint, "reasoning": self.reasoning,
            "parent_text": self.parent_text, "prompt_text": self.prompt_text, "same_text": self.same_text,
            "evidence": copy.deepcopy(list(self.evidence)), "notes": list(self.notes),
        }

    @property
    def first_divergence(self) -> Divergence | None:
        return self.divergences[0] if self.divergences else None


BREAK_FIELDS = tuple(Break.__dataclass_fields__)
"""The keys of `Break.to_dict`, in order."""


class BreakFacts(NamedTuple):
    """A rollout's breaks as the scan table's columns (docs/contract.md#scan-diagnosis-columns)."""

    breaks: int
    break_causes: list[str]
    """The distinct causes, in the order of `causes.CAUSES`."""
    first_break_call: str | None
    """The earliest break's call (breaks are listed by ``(created_at, call id)``)."""


def break_facts(breaks: Sequence[Break]) -> BreakFacts:
    """``breaks`` (as `diagnose` lists them) summed up for a table row."""
    return BreakFacts(len(breaks), cause_order({b.cause for b in breaks}), breaks[0].call_id if breaks else None)


__all__ = ["BREAK_FIELDS", "Break", "BreakFacts", "Divergence", "MAX_DIVERGENCES", "break_facts"]
