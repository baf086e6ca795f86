"""Verdicts on how the delivered rollout ended (docs/contract.md#refusal-ended, #rollout).

Two questions, each answered with its reasons so a reviewer can check them:

* Did an engine refusal end the delivered chain? Three conditions, evaluated one by one
  (`RefusalVerdict`): the refusal is a context-window refusal, it continued the chain's
  last call T (or a token-identical twin of T), and no twin of T was served at or after
  the refusal -- such a call means the harness recovered.
* Can the finish reason of T be trusted? Only when every twin of T recorded the same one;
  otherwise the status would depend on which twin drew the smaller call id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .builder import BuildOutput
from .records import CONTEXT_LENGTH_EXCEEDED, EngineRefusalRecord, ParentResolutionStatus, TokenEntry
from .tokens import joined, prefix_equals


def twins_of(terminal: TokenEntry, out: BuildOutput) -> list[TokenEntry]:
    """T and every call in ``out.entries`` with a non-empty generation and T's full sequence.

    Compared on demand, so a build without refusals or finish reasons to check compares nothing.
    """
    twins = [terminal]
    for entry in out.entries.values():
        if entry.model_call_id == terminal.model_call_id or not entry.generation_token_ids.size:
            continue
        if _same_full_sequence(entry, terminal):
            twins.append(entry)
    return sorted(twins, key=lambda e: e.model_call_id)


def _same_full_sequence(a: TokenEntry, b: TokenEntry) -> bool:
    """Prompt + generation identical as one sequence (the split point may differ)."""
    if a.full_len != b.full_len:
        return False
    whole = joined(a.prompt_token_ids, a.generation_token_ids)
    if whole is None:
        whole = np.concatenate((a.prompt_token_ids, a.generation_token_ids))
    return prefix_equals(whole, b.prompt_token_ids, b.generation_token_ids)


@dataclass(frozen=True)
class Condition:
    name: str
    holds: bool
    detail: str


@dataclass(frozen=True)
class RefusalVerdict:
    """One engine refusal judged against the delivered chain's last call."""

    refusal: EngineRefusalRecord
    conditions: tuple[Condition, ...]

    @property
    def ended_chain(self) -> bool:
        return bool(self.conditions) and all(c.holds for c in self.conditions)

    @property
    def summary(self) -> str:
        if self.ended_chain:
            return "ended the rollout: the harness's next request did not fit the context window"
        failed = next((c for c in self.conditions if not c.holds), None)
        return f"does not change the verdict: {failed.detail}" if failed else "no delivered chain to judge against"


def judge_refusal(refusal: EngineRefusalRecord, terminal: TokenEntry | None, out: BuildOutput,
                  twins: list[TokenEntry] | None = None) -> RefusalVerdict:
    """Evaluate the three conditions of docs/contract.md#refusal-ended for one refusal, each with its reason."""
    conditions: list[Condition] = []
    is_context = refusal.code == CONTEXT_LENGTH_EXCEEDED
    conditions.append(Condition(
        "context window", is_context,
        f"code is {CONTEXT_LENGTH_EXCEEDED!r}: the conversation did not fit" if is_context else
        (f"code is {refusal.code!r}, not {CONTEXT_LENGTH_EXCEEDED!r}" if refusal.code is not None else
         "code is null: the engine rejected an output-token parameter, which says nothing about length")))
    if terminal is None:
        return RefusalVerdict(refusal, tuple(conditions) + (
            Condition("continued the last call", False, "there is no delivered chain"),))
    twins = twins if twins is not None else twins_of(terminal, out)
    twin_ids = [t.model_call_id for t in twins]
    t_id = terminal.model_call_id
    if refusal.parent_resolution is not ParentResolutionStatus.RESOLVED:
        continued = Condition("continued the last call", False,
                              f"its parent is {refusal.parent_resolution.value!r}, so it continues no known call")
    elif refusal.parent_call_id == t_id:
        continued = Condition("continued the last call", True,
                              f"it continued {t_id!r}, the delivered chain's last call")
    elif refusal.parent_call_id in twin_ids:
        continued = Condition("continued the last call", True,
                              f"it continued {refusal.parent_call_id!r}, a token-identical twin of {t_id!r}")
    else:
        continued = Condition("continued the last call", False,
                              f"it continued {refusal.parent_call_id!r}, not {t_id!r} or a twin of it "
                              "(another branch or an earlier turn)")
    conditions.append(continued)
    served_after = sorted(t.model_call_id for t in twins if t.created_at >= refusal.recorded_at)
    conditions.append(Condition(
        "not recovered", not served_after,
        f"no twin of {t_id!r} was served at or after the refusal (recorded at {refusal.recorded_at:.3f})"
        if not served_after else
        f"{', '.join(served_after)} was served at or after the refusal: the harness recovered"))
    return RefusalVerdict(refusal, tuple(conditions))


def refusal_ended_chain(refusal: EngineRefusalRecord, terminal: TokenEntry, out: BuildOutput) -> bool:
    """Whether ``refusal`` was the harness's next request after the delivered last call and did not fit."""
    if refusal.code != CONTEXT_LENGTH_EXCEEDED or refusal.parent_resolution is not ParentResolutionStatus.RESOLVED:
        return False  # cheap exits first: no twin comparison needed
    return judge_refusal(refusal, terminal, out).ended_chain


@dataclass(frozen=True)
class FinishReasonVerdict:
    terminal_call_id: str | None
    finish_reasons: dict[str, str | None]  # twin call id -> its finish reason
    resolved: bool

    @property
    def summary(self) -> str:
        if self.terminal_call_id is None:
            return "no delivered chain"
        if self.resolved:
            reason = next(iter(self.finish_reasons.values()), None)
            if reason is None:  # an older writer (the upstream store's) records none
                return f"{self.terminal_call_id!r} recorded no finish reason, so it cannot mark the response incomplete"
            return f"finish reason {reason!r} of {self.terminal_call_id!r} applies"
        parts = ", ".join(f"{k}: {v!r}" for k, v in self.finish_reasons.items())
        return f"withheld: the token-identical twins of {self.terminal_call_id!r} disagree ({parts})"


def judge_finish_reason(terminal: TokenEntry | None, out: BuildOutput,
                        twins: list[TokenEntry] | None = None) -> FinishReasonVerdict:
    if terminal is None:
        return FinishReasonVerdict(None, {}, True)
    twins = twins if twins is not None else twins_of(terminal, out)
    reasons = {t.model_call_id: t.finish_reason for t in twins}
    return FinishReasonVerdict(terminal.model_call_id, reasons, len(set(reasons.values())) <= 1)


def judge_refusals(refusals: Iterable[EngineRefusalRecord], terminal: TokenEntry | None,
                   out: BuildOutput, twins: list[TokenEntry] | None = None) -> list[RefusalVerdict]:
    refusals = list(refusals)
    if terminal is not None and twins is None and refusals:
        twins = twins_of(terminal, out)
    return [judge_refusal(r, terminal, out, twins) for r in refusals]
