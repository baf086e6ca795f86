"""The banner's findings: each break said once, its cause first, with the mask reasons it explains.

A masked rollout's mask reasons often share one cause: in a capture without parent
resolution every call after the first is an unproven link, starts a fragment and makes a
chain, so a banner listing culprits per reason says the same diagnosis three times per
call. `findings_of` turns the reason lines (`culprits.reason_lines`) around: culprits whose
call has a diagnosed break are grouped by the break's cause, each call once, and the
finding lists the reasons it explains; a culprit without a break stays under its reason
(a corrupt record, retries, an anchor that is not delivered).

Each finding reads cause first ("Generated tokens dropped — the chat template likely strips
earlier reasoning"), then what happened at each call, in full; each call it names carries
everything every reason said of it, for the page's hover. Capture strings are kept verbatim
here; the page escapes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..formatting import md_escape
from ..model import RolloutView
from ..words import CAUSE_LABELS
from . import trainer
from .breaks import break_facts, breaks_of, hint, likely_words
from .culprits import REASON_WORDS, Culprit, culprits_of

FACTS_SHOWN = 3
"""How many calls' facts a finding's sentence spells out; the others are counted, each on its link."""


@dataclass
class CallLink:
    """A call a finding names: its tree node, and all that the banner's reasons say of it."""

    call_id: str
    key: str
    said: list[str] = field(default_factory=list)

    def hover(self) -> str:
        """The link's tooltip: what happened at the call, and what a click does."""
        return "; ".join(self.said) + f". Click to select {self.call_id} in the call tree and see its detail."


@dataclass
class Finding:
    """One cause the banner names once: its key (a break cause of docs/contract.md#causes, or a mask reason when
    no break explains the culprits), its words, what happened, and the mask reasons it explains."""

    key: str
    title: str
    likely: str
    facts: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    calls: list[CallLink] = field(default_factory=list)
    hint: str = ""

    def sentence(self) -> str:
        """The finding's whole sentence, cause first: title — likely meaning: facts."""
        head = f"{self.title} — {self.likely}" if self.likely else self.title
        if not self.facts:
            return head
        shown = "; ".join(self.facts[:FACTS_SHOWN])
        more = len(self.facts) - FACTS_SHOWN
        tail = f"; and {more} more call{'s' if more != 1 else ''} alike" if more > 0 else ""
        return f"{head}: {shown}{tail}"

    def explains(self) -> str:
        """The mask reasons the finding explains, in words."""
        return "; ".join(REASON_WORDS.get(code, code) for code in self.reasons)

    def tooltip(self) -> str:
        """The finding's hover: its hint (how to fix it) and the keys for those who script against them."""
        keys = f"cause `{self.key}` · mask reasons " + ", ".join(f"`{r}`" for r in self.reasons)
        return f"{self.hint}\n\n{keys}" if self.hint else keys


def finding_markdown(finding: Finding) -> str:
    """A finding's line on the banner (Markdown): the cause in bold, then the rest of its sentence."""
    sentence = finding.sentence()
    return f"**{md_escape(finding.title)}** {md_escape(sentence[len(finding.title):])}"


def explains_markdown(finding: Finding) -> str:
    """Which mask reasons a break finding explains (Markdown); empty for a reason's own finding."""
    if finding.key in finding.reasons:
        return ""
    n = len(finding.reasons)
    return f"masks the rollout as {md_escape(finding.explains())}" if n == 1 else \
        f"explains {n} mask reasons: {md_escape(finding.explains())}"


def _ident(culprit: Culprit) -> str | None:
    return culprit.key.partition(":")[2] if culprit.key else None


def _group(view: RolloutView, breaks: dict[str, Any], culprit: Culprit) -> tuple[str, Any]:
    """The finding a culprit belongs to: its call's break's cause, else its reason."""
    brk = breaks.get(_ident(culprit) or "") if culprit.why else None
    if brk is None:
        return f"reason:{culprit.reason}", None
    variant = "reasoning" if brk.cause == "generation_dropped" and brk.reasoning else ""
    return f"break:{brk.cause}:{variant}", brk


def _new_finding(code: str, brk: Any, trainer_words: dict[str, str]) -> Finding:
    if brk is None:
        words = REASON_WORDS.get(code, code)
        return Finding(code, words[:1].upper() + words[1:], "")
    label = CAUSE_LABELS.get(brk.cause, brk.cause)
    # A rollout read from output items says it as the trainer would (where NeMo RL stops, and why).
    likely = trainer_words.get(brk.call_id) or likely_words(brk)
    return Finding(brk.cause, label[:1].upper() + label[1:], likely, hint=hint(brk))


def findings_of(view: RolloutView, tokenizer: Any = None, key: str = "") -> list[Finding]:
    """The view's findings, in the order their first reason comes (the contract's), each break once."""
    def compute(v: RolloutView) -> list[Finding]:
        breaks = {b.call_id: b for b in breaks_of(v, tokenizer, key) if b.cause != "record_fault"}
        said = {c: w for c, w in trainer.words_for(v, breaks.values()).items() if trainer.is_item_break(v, breaks[c])}
        found: dict[str, Finding] = {}
        for line in culprits_of(v, tokenizer, key):
            if not line.culprits:
                found.setdefault(f"reason:{line.code}", _new_finding(line.code, None, said)).reasons.append(line.code)
            for culprit in line.culprits:
                group, brk = _group(v, breaks, culprit)
                finding = found.setdefault(group, _new_finding(culprit.reason, brk, said))
                if culprit.reason not in finding.reasons:
                    finding.reasons.append(culprit.reason)
                _add(finding, culprit, brk)
        return list(found.values())
    return view.derived(f"findings:{key}" if tokenizer is not None else "findings", compute)


def _add(finding: Finding, culprit: Culprit, brk: Any) -> None:
    """Add a culprit to its finding: its facts once per call, its words to its call's link."""
    ident = _ident(culprit)
    link = next((c for c in finding.calls if c.call_id == ident), None)
    if link is None:
        facts = break_facts(brk) if brk is not None else culprit.text
        if ident is None or culprit.key is None:
            finding.facts.append(facts)
            return
        link = CallLink(ident, culprit.key, [facts] if brk is not None else [])
        finding.calls.append(link)
        finding.facts.append(facts)
    if culprit.text not in link.said:
        link.said.append(culprit.text)


__all__ = ["FACTS_SHOWN", "CallLink", "Finding", "explains_markdown", "finding_markdown", "findings_of"]
