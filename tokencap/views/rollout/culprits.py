"""Culprits: for every mask reason, the call(s) that caused it, in plain words.

A masked rollout's banner names, under each reason, what caused it ("call-0003's claimed
parent call-0002 does not open its prompt"), and each culprit carries the key of the tree
node to select, so the page can make it a link. The page opens a masked rollout on its
first culprit that is a node.

Words are chosen to say what happened, never to mislead: a record whose tokens disagree
with its own stamps reads as *corrupt*, not as an unresolved link; a missing parent reads
as missing. Capture strings (call ids, messages) are kept verbatim here; the page escapes
them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...attribution import TerminalAttribution
from ...builder import (
    DELTA_UNRECONSTRUCTABLE,
    ENTRY_DIGEST_MISMATCH,
    MISSING_RESOLUTION,
    PARENT_DIGEST_MISMATCH,
    PARENT_MISSING,
    PARENT_UNRESOLVED,
    RULE_UNRESOLVED,
)
from ...loading.store_files import WITHOUT_SIBLINGS
from ...rollout import MASK_REASON_TEXT
from ..model import CALL, GHOST, RolloutView, node_key
from . import trainer
from .breaks import breaks_of


@dataclass(frozen=True)
class Culprit:
    """One cause of a mask reason: what happened, and the node to select (None: nothing to point at)."""

    reason: str
    text: str
    key: str | None = None
    why: str = ""
    """Why the lineage breaks at the culprit's call (the diagnosis's words, `breaks.break_words`), if it does."""

    @property
    def words(self) -> str:
        """What the banner shows: what happened, then why the lineage broke there."""
        return f"{self.text} — {self.why}" if self.why else self.text


@dataclass(frozen=True)
class ReasonLine:
    """One mask reason with its plain words and its culprits."""

    code: str
    words: str
    culprits: list[Culprit] = field(default_factory=list)
    explanation: str = ""  # the reason at length (what `tokencap inspect` says)


def _call(view: RolloutView, ident: str | None) -> str | None:
    """The node key of a captured call or a never-captured one drawn in the tree, else None."""
    if ident is None:
        return None
    if ident in view.records_by_id:
        return node_key(CALL, ident)
    if ident in view.announced_uncaptured:
        return node_key(GHOST, ident)
    return None


def _claimed(ident: str | None) -> str:
    """The claimed parent, named (a record may claim none)."""
    return f"claimed parent {ident}" if ident else "claimed parent (none recorded)"


def _absent_parent(view: RolloutView, ident: str) -> str:
    """Why a claimed parent is not among the chained calls, in a few words."""
    build = view.build
    if build is not None and ident in build.excluded:
        return "was excluded" + (" as corrupt" if build.excluded[ident] == ENTRY_DIGEST_MISMATCH else "")
    if build is not None and ident in build.notes.empty_generation_calls:
        return "generated nothing (not chained)"
    return "was never captured"


def _incomplete(view: RolloutView) -> list[Culprit]:
    announced = view.announced_uncaptured
    if announced:
        return [Culprit("capture_incomplete", f"{c} was announced but never captured", node_key(GHOST, c))
                for c in announced]
    notes = [n for n in view.snapshot.source_notes if "incomplete" in n]
    if view.snapshot.load_error is not None:
        # A rollout that failed to load is incomplete by definition: nothing shows which calls it had.
        return [Culprit("capture_incomplete", "the rollout could not be loaded, so nothing shows which of its "
                                              "calls were captured (load_error says why)")]
    alone = [n for n in notes if WITHOUT_SIBLINGS in n]
    if alone:
        return [Culprit("capture_incomplete", "the store file was read without the rollout's other store files "
                                              "(its .tokens.intents, .tokens.state.json, .tokens.incomplete), so "
                                              "nothing shows whether a call failed to capture; open the store "
                                              "directory, or upload a zip of it that holds those files")]
    text = ("the capture store marked this rollout incomplete without naming the call that failed"
            if notes else "the snapshot says incomplete: true without naming the call that failed")
    return [Culprit("capture_incomplete", text)]


def _unresolved_parent(view: RolloutView) -> list[Culprit]:
    build = view.build
    assert build is not None
    out = []
    for cid in build.notes.unresolved_parent_calls:
        key = _call(view, cid)
        excluded = build.excluded.get(cid)
        decision = build.links.get(cid)
        claimed = decision.claimed_parent if decision is not None else None
        if cid in build.conflicting_duplicates:
            copies = len(view.copies_by_id.get(cid, ()))
            text = f"{cid} is corrupt: {copies} records carry this id with different tokens"
        elif excluded == ENTRY_DIGEST_MISMATCH:
            text = f"{cid} is corrupt: its tokens disagree with its own stamped cum_len or digest"
        elif excluded == DELTA_UNRECONSTRUCTABLE:
            text = f"{cid} stores only a prompt suffix, and its full prompt could not be rebuilt and verified"
        elif decision is None:
            text = f"{cid}: its parent link could not be proven"
        elif decision.note == PARENT_DIGEST_MISMATCH and trainer.from_items(view):
            text = trainer.not_contiguous_text(cid)  # docs/contract.md#token-rollouts: NeMo RL's contiguity check
            # fails there
        elif decision.note == PARENT_DIGEST_MISMATCH:
            text = f"{cid}'s {_claimed(claimed)} does not open its prompt"
        elif decision.note == PARENT_MISSING:
            tie = f"; {len(decision.candidates)} calls tie for the longest prefix" if decision.candidates else ""  # 2+
            text = (f"{cid}'s {_claimed(claimed)} {_absent_parent(view, claimed or '')}, and no single call's "
                    f"tokens open its prompt{tie}")
        elif decision.note == PARENT_UNRESOLVED:
            text = f"{cid}'s parent was left unresolved when the request was made"
        elif decision.note == MISSING_RESOLUTION:
            text = f"{cid} records no parent resolution (a legacy record), so no link is trusted"
        else:
            text = f"{cid}: {decision.note}"
        out.append(Culprit("unresolved_parent_calls", text, key))
    return out


def _unresolved_retries(view: RolloutView) -> list[Culprit]:
    build = view.build
    assert build is not None
    out = []
    for group in build.retry_groups:
        if group.rule != RULE_UNRESOLVED:
            continue
        parent = f"{group.parent}'s request" if group.parent else "one root request"
        members = " / ".join(group.members)
        out.append(Culprit("unresolved_retries", f"{members}: retries of {parent} generated different tokens and "
                           "none was continued", _call(view, group.members[0])))
    return out


def _roots(view: RolloutView) -> list[Culprit]:
    build = view.build
    assert build is not None
    quarantined = set(build.quarantined)
    # Every root but the earliest, as the diagnosis's extra roots (docs/contract.md#breaks): the conversation began
    # at its earliest root whichever fragment was delivered, so after a compaction the later root is
    # the culprit, never the rollout's first call.
    roots = sorted((d for cid, d in build.links.items() if d.linked_parent is None and cid not in quarantined),
                   key=lambda d: (build.entries[d.call_id].created_at, d.call_id))[1:]
    out = []
    for d in roots:
        if d.note is None:
            text = f"{d.call_id} was recorded as the start of another conversation"
        else:
            text = f"{d.call_id} starts a fragment of its own (its parent link is unproven)"
        out.append(Culprit("multiple_roots", text, _call(view, d.call_id)))
    return out


def _chains(view: RolloutView) -> list[Culprit]:
    main = view.chain("main")
    on_main = set(main.call_ids) if main is not None else set()
    out = []
    for chain in view.chains:
        if chain.chain_id == "main" or not chain.links:
            continue
        ids = chain.call_ids
        first = next((i for i, c in enumerate(ids) if c not in on_main), 0)
        n = len(ids) - first
        calls = f"{n} call{'s' if n != 1 else ''}"
        if first:
            text = f"{chain.chain_id} forks off {ids[first - 1]} at {ids[first]} ({calls} not delivered)"
        else:
            text = f"{chain.chain_id} is a separate fragment from {ids[0]} ({calls} not delivered)"
        out.append(Culprit("multiple_chains", text, _call(view, ids[first])))
    return out


def _not_delivered(view: RolloutView) -> list[Culprit]:
    anchor = view.result.terminal_call_id
    attribution = view.result.terminal_attribution
    if anchor is None and attribution is not None and not attribution.attributed:
        return _unanchored(view, attribution)
    build = view.build
    where = build.notes.terminal_chain if build is not None else ""
    missing = view.result.notes[0] if view.result.notes else f"the anchor {anchor} is not among the chained calls"
    text = {"quarantined": f"the anchor {anchor} was quarantined: another retry of its request was kept",
            "missing": missing}.get(where, f"the anchor {anchor} is not on the delivered chain")
    return [Culprit("terminal_call_not_delivered", text, _call(view, anchor))]


def _unanchored(view: RolloutView, attribution: TerminalAttribution) -> list[Culprit]:
    """No anchor: the harness's final answer matched no call, or several different ones. The outcome
    and each candidate (a link to its call), as `tokencap inspect` names them."""
    reason = "terminal_call_not_delivered"
    if not attribution.candidates:
        return [Culprit(reason, attribution.describe())]
    others = len(attribution.candidates) - 1
    return [Culprit(reason, f"{attribution.outcome} final answer: candidate {cid} matches it, as {others} other "
                            f"call{'s' if others != 1 else ''} with a different token sequence "
                            f"{'do' if others != 1 else 'does'}; nothing is chosen between them",
                    _call(view, cid))
            for cid in attribution.candidates]


def _no_generated(view: RolloutView) -> list[Culprit]:
    main = view.chain("main")
    if main is None or not main.links:
        return [Culprit("no_generated_tokens", "no chain could be delivered")]
    last = main.call_ids[-1]
    return [Culprit("no_generated_tokens", f"the delivered chain (ending at {last}) generated no token",
                    _call(view, last))]


_BUILD_CULPRITS: dict[str, Callable[[RolloutView], list[Culprit]]] = {
    "unresolved_parent_calls": _unresolved_parent,
    "unresolved_retries": _unresolved_retries,
    "multiple_roots": _roots,
    "multiple_chains": _chains,
    "no_generated_tokens": _no_generated,
    "terminal_call_not_delivered": _not_delivered,
}
"""The culprits of each reason the build decides (none without a build)."""


WHY_REASONS = ("unresolved_parent_calls", "multiple_roots", "multiple_chains")
"""Reasons whose culprits end with why the lineage broke there (the diagnosis's words, docs/contract.md#diagnosis)."""


def _with_why(culprits: list[Culprit], words: Mapping[str, str]) -> list[Culprit]:
    """Each culprit on a call with a break, its text followed by the break's words (a record fault's
    culprit says it is corrupt already)."""
    out = []
    for c in culprits:
        ident = c.key.partition(":")[2] if c.key else None
        why = words.get(ident) if ident else None
        out.append(Culprit(c.reason, c.text, c.key, why) if why else c)
    return out


def reason_lines(view: RolloutView, breaks: list[Any] | None = None) -> list[ReasonLine]:
    """Every mask reason of the view's result, in the contract's order, with its culprits; ``breaks``
    (`breaks.breaks_of`) add why each culprit call's lineage broke."""
    result = view.result
    words = trainer.words_for(view, breaks or ())  # a rollout read from output items: the trainer's words
    error = result.metrics.get("error")
    out = []
    for code in result.mask_reasons:
        culprits: list[Culprit]
        if code == "capture_incomplete":
            culprits = _incomplete(view)
        elif code in ("load_error", "build_error"):
            culprits = [Culprit(code, str(error))] if error else []
        elif code == "no_records":
            culprits = [Culprit(code, "the snapshot holds no token entries")]
        elif view.build is not None and code in _BUILD_CULPRITS:
            culprits = _BUILD_CULPRITS[code](view)
            if code in WHY_REASONS and words:
                culprits = _with_why(culprits, words)
        else:
            culprits = []
        out.append(ReasonLine(code, REASON_WORDS.get(code, code), culprits, MASK_REASON_TEXT.get(code, "")))
    return out


REASON_WORDS = {
    "load_error": "the snapshot could not be loaded",
    "capture_incomplete": "a call may be missing from the capture",
    "no_records": "no token entries",
    "build_error": "the builder failed",
    "unresolved_retries": "retries differ and nothing shows which one the harness kept",
    "unresolved_parent_calls": "a parent link is unproven, or a record is corrupt",
    "multiple_roots": "the rollout splits into fragments",
    "multiple_chains": "branches or fragments besides the delivered chain",
    "no_generated_tokens": "nothing generated to train on",
    "terminal_call_not_delivered": "the anchor is not delivered",
}
"""Short words for the banner; the reason at length is `MASK_REASON_TEXT`."""


def culprits_of(view: RolloutView, tokenizer: Any = None, key: str = "") -> list[ReasonLine]:
    """The view's reason lines with why each lineage broke, computed once per view and tokenizer."""
    return view.derived(f"culprits:{key}" if tokenizer is not None else "culprits",
                        lambda v: reason_lines(v, breaks_of(v, tokenizer, key)))


def first_culprit(view: RolloutView) -> str | None:
    """The node a masked rollout opens on: its first culprit that is a node, else None."""
    for line in culprits_of(view):
        for culprit in line.culprits:
            if culprit.key is not None:
                return culprit.key
    return None
