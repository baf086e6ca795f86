"""The words of `tokencap check` (docs/contract.md#command-line): one line per masked rollout, one summary line.

`check` is the pre-flight a training job runs before it trains: it builds every rollout and
says, for each one a trainer should not take, where and why -- its first break's call and
cause with the cause's hint, or (a rollout masked without a break) its first mask reason in
words. A rollout read from output items (docs/contract.md#token-rollouts) is worded as the trainer that checks
contiguity would see it: "NeMo RL would stop on this rollout".

This module only words and counts what the build and the diagnosis decided: nothing here
changes a verdict, and the diagnosis is asked only about masked rollouts (a trainable
rollout has no break).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from .diagnosis import Break, cause_order
from .rollout import MASK_REASON_TEXT, RolloutResult

TRAINER = "NeMo RL"
"""The trainer whose contiguity rule a rollouts source is checked against (docs/contract.md#token-rollouts)."""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _what_broke(brk: Break) -> str:
    """What happened at the break's call, in the trainer's terms: which call's tokens its prompt
    should have continued."""
    call = brk.call_id
    if brk.kind == "record_fault":
        return f"{call}'s record is faulty ({brk.note or 'record fault'})"
    if brk.prompt_len == 0:
        return f"{call} has generated tokens but an empty prompt"
    if brk.kind == "branch":
        return f"{call} continues {brk.predecessor} a second time (beside {brk.sibling})"
    if brk.kind == "extra_root":
        return f"{call} starts a new conversation" + (f" instead of continuing {brk.predecessor}"
                                                      if brk.predecessor else "")
    if brk.predecessor is None:
        return f"{call}'s prompt continues no earlier call"
    return f"{call}'s prompt does not continue {brk.predecessor}"


def first_break(breaks: Sequence[Break], *, from_items: bool) -> Break | None:
    """The break `check` names: the first one; for a rollout read from output items, the first
    item whose prompt does not continue the items before it (a ``boundary``:
    docs/contract.md#token-rollouts-calls), which is where a trainer that checks contiguity stops."""
    if from_items:
        boundary = next((b for b in breaks if b.kind == "boundary"), None)
        if boundary is not None:
            return boundary
    return breaks[0] if breaks else None


def masked_line(result: RolloutResult, breaks: Sequence[Break], *, from_items: bool) -> str:
    """The line `check` prints for a masked rollout: its id, then its first break's call, what
    broke, its cause and the cause's hint; or, with no break, its first mask reason in words
    (and the load or build error, when that is the reason). ``from_items``: the rollout was
    read from output items (docs/contract.md#token-rollouts), so the line says the trainer would stop on it."""
    first = first_break(breaks, from_items=from_items)
    if first is not None:
        cause = first.cause
        if cause == "generation_dropped" and first.reasoning:
            cause += "; the dropped tokens are reasoning"
        opening = f"{TRAINER} would stop on this rollout" if from_items else "masked"
        more = f" ({len(breaks) - 1} more break{'s' if len(breaks) > 2 else ''})" if len(breaks) > 1 else ""
        return _one_line(f"{result.rollout_id}: {opening}: {_what_broke(first)} (cause: {cause}){more}; {first.hint}")
    reason = result.mask_reasons[0] if result.mask_reasons else "masked"
    words = MASK_REASON_TEXT.get(reason, reason)
    error = result.metrics.get("error") if reason in ("load_error", "build_error") else None
    detail = f": {error}" if error else ""
    return _one_line(f"{result.rollout_id}: masked ({reason}): {words}{detail}")


def masked_cause(result: RolloutResult, breaks: Sequence[Break], *, from_items: bool = False) -> str:
    """What a masked rollout is counted under in the summary: the cause of the break its line
    names (`first_break`), else its first mask reason."""
    first = first_break(breaks, from_items=from_items)
    if first is not None:
        return first.cause
    return result.mask_reasons[0] if result.mask_reasons else "masked"


@dataclass
class CheckTally:
    """The counts of the summary line, added to one rollout at a time (nothing else is kept)."""

    rollouts: int = 0
    trainable: int = 0
    from_items: int = 0
    by_cause: Counter[str] = field(default_factory=Counter)

    @property
    def masked(self) -> int:
        return self.rollouts - self.trainable

    def add(self, result: RolloutResult, breaks: Sequence[Break] = (), *, from_items: bool = False) -> None:
        self.rollouts += 1
        self.from_items += from_items
        if not result.mask_sample:
            self.trainable += 1
        else:
            self.by_cause[masked_cause(result, breaks, from_items=from_items)] += 1

    def summary(self) -> str:
        """One line: rollouts, trainable, masked, and the masked ones by cause (breaks' causes in
        the vocabulary's order, then mask reasons of rollouts without a break, most first)."""
        line = (f"check: {self.rollouts:,} rollout{'' if self.rollouts == 1 else 's'}, "
                f"{self.trainable:,} trainable, {self.masked:,} masked")
        if not self.by_cause:
            return line
        causes = cause_order(set(self.by_cause))
        others = sorted((c for c in self.by_cause if c not in causes), key=lambda c: (-self.by_cause[c], c))
        parts = [f"{c} {self.by_cause[c]:,}" for c in causes + others]
        stop = f"; {TRAINER} would stop on {self.masked:,}" if self.from_items == self.rollouts else ""
        return f"{line} ({', '.join(parts)}){stop}"


__all__ = ["TRAINER", "CheckTally", "first_break", "masked_cause", "masked_line"]
