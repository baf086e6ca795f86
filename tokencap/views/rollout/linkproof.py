"""A parent link's proof: the parent's cumulative tokens against the child's prompt.

A link holds when the parent's whole cumulative sequence (prompt + generation, length L)
opens the child's prompt. Two 64-character digests say whether it does, not where it
stops doing so; this module finds out, and `.proof_chart` draws it as an aligned strip:

* two bars on one position axis: the parent's L tokens and the child's prompt, green as
  far as they agree, red where the parent's sequence goes on without the child, grey
  where the child's prompt goes on past the parent (its interstitial);
* a zoomed window of token cells around the first position where they diverge (or
  around the end of the parent's sequence when they agree all the way), each cell the
  token id, or its decoded text when a tokenizer is loaded;
* the lengths, and the digests in full (the page shows them copyable below the strip).

Everything is vectorised; a 100k-token prompt is one comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...digest import compute_digest, digest_of_parts
from ...records import TokenEntry
from ..formatting import count
from ..model import RolloutView

WINDOW_BEFORE = 6
WINDOW_AFTER = 10
MAX_RUNS = 400

AGREE = "#16a34a"
DIFFER = "#dc2626"
ONLY_CHILD = "#cbd5e1"
CELL = {"absent": "#f8fafc", "agree": "#bbf7d0", "differ": "#fecaca", "only_child": "#e2e8f0"}


@dataclass(frozen=True)
class LinkProof:
    """The claimed (or linked) parent's cumulative sequence against the child's prompt."""

    child: str
    parent: str
    relation: str                 # "linked parent", "claimed parent", "recovered parent"
    parent_len: int               # L: the parent's prompt + generation
    prompt_len: int               # the child's full prompt
    agree: int                    # leading positions where both hold the same token
    window: tuple[int, int]       # [start, end) of the zoomed token cells
    parent_tokens: np.ndarray     # parent's tokens in the window (shorter where it ends)
    child_tokens: np.ndarray      # child's prompt tokens in the window
    expected_digest: str          # the parent's digest (stamped, else computed)
    digest_source: str            # "stamped" or "computed"
    found_digest: str | None      # digest of the child's first L prompt tokens (None: prompt too short)
    runs: tuple[tuple[int, int, bool], ...] = ()  # (start, end, same) over the overlap, at most MAX_RUNS
    same_after: int = 0           # positions after the first difference where the two agree again

    @property
    def holds(self) -> bool:
        """Whether the parent's whole sequence opens the child's prompt."""
        return self.agree == self.parent_len and self.prompt_len >= self.parent_len

    @property
    def diverges_at(self) -> int | None:
        """The first position where the two differ (or where the child's prompt ends first); None when it holds."""
        return None if self.holds else self.agree

    def summary(self) -> str:
        """One sentence: where they agree and where they part."""
        n = self.parent_len
        if self.holds:
            return (f"All {n:,} tokens of {self.parent}'s cumulative sequence open {self.child}'s prompt "
                    f"({count(self.prompt_len, 'token')}; the next {self.prompt_len - n:,} are its interstitial).")
        if self.agree >= self.prompt_len:
            return (f"{self.child}'s prompt ({count(self.prompt_len, 'token')}) ends before {self.parent}'s "
                    f"cumulative sequence ({count(n, 'token')}): they agree on all {self.agree:,} positions it has, "
                    "but the parent's "
                    "sequence cannot open a shorter prompt.")
        overlap = min(n, self.prompt_len)
        again = (f" Of the {overlap - self.agree - 1:,} positions after it that both have, {self.same_after:,} agree "
                 "again; a link needs every one of them." if self.same_after else "")
        return (f"They agree on the first {self.agree:,} of {count(n, 'token')} of {self.parent}'s cumulative "
                f"sequence, "
                f"then differ at position {self.agree:,}: the parent has {_tok(self.parent_tokens, self)}, "
                f"{self.child}'s prompt has {_tok(self.child_tokens, self)}.{again}")


def _tok(tokens: np.ndarray, proof: LinkProof) -> str:
    i = proof.agree - proof.window[0]
    return f"token {int(tokens[i])}" if 0 <= i < tokens.size else "nothing (it ended)"


def _sequence(entry: TokenEntry) -> np.ndarray:
    return np.concatenate((entry.prompt_token_ids, entry.generation_token_ids))


def leading_agreement(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading positions ``a`` and ``b`` share."""
    n = min(a.size, b.size)
    if n == 0:
        return 0
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(diff[0]) if diff.size else n


def agreement_runs(a: np.ndarray, b: np.ndarray, max_runs: int = MAX_RUNS) -> tuple[tuple[int, int, bool], ...]:
    """Runs of agreeing / differing positions over the overlap of ``a`` and ``b``: (start, end, same).

    Beyond ``max_runs`` runs the overlap is cut into ``max_runs`` equal bins instead, a bin
    agreeing only when every position in it does, so a difference is never hidden.
    """
    n = min(a.size, b.size)
    if n == 0:
        return ()
    same = np.asarray(a[:n]) == np.asarray(b[:n])
    cuts = np.flatnonzero(np.diff(same.astype(np.int8))) + 1
    if cuts.size + 1 > max_runs:
        edges = np.unique(np.linspace(0, n, max_runs + 1).astype(np.int64))
        all_same = np.logical_and.reduceat(same, edges[:-1])
        return tuple((int(x), int(y), bool(v)) for x, y, v in zip(edges[:-1], edges[1:], all_same, strict=True))
    bounds = np.concatenate(([0], cuts, [n]))
    return tuple((int(x), int(y), bool(same[x])) for x, y in zip(bounds[:-1], bounds[1:], strict=True))


def prove(child: TokenEntry, parent: TokenEntry, relation: str = "claimed parent") -> LinkProof:
    """Compare ``parent``'s full sequence with the start of ``child``'s (full) prompt."""
    seq = _sequence(parent)
    prompt = child.prompt_token_ids
    agree = leading_agreement(seq, prompt)
    overlap = min(seq.size, prompt.size)
    same_after = int(np.count_nonzero(np.asarray(seq[agree + 1:overlap]) == np.asarray(prompt[agree + 1:overlap])))
    holds = agree == seq.size and prompt.size >= seq.size
    centre = seq.size if holds else agree
    start = max(0, centre - WINDOW_BEFORE)
    end = max(start + 1, min(max(seq.size, prompt.size), centre + WINDOW_AFTER))
    if parent.digest is not None:
        expected, source = parent.digest, "stamped"
    else:
        expected, source = digest_of_parts(parent.prompt_token_ids, parent.generation_token_ids), "computed"
    found = compute_digest(prompt[: seq.size]) if prompt.size >= seq.size else None
    return LinkProof(child.model_call_id, parent.model_call_id, relation, int(seq.size), int(prompt.size), agree,
                     (start, end), np.asarray(seq[start:end]), np.asarray(prompt[start:end]), expected, source, found,
                     agreement_runs(seq, prompt), same_after if agree < overlap else 0)


def link_proof(view: RolloutView, call_id: str) -> LinkProof | None:
    """The proof of a call's link to its linked parent, else to the parent it claimed (when that was captured
    and chained); None for a root, an excluded record, or a parent with no tokens to compare."""
    build = view.build
    if build is None or call_id not in build.entries or call_id in build.excluded:
        return None
    child = build.entries[call_id]
    decision = build.links.get(call_id)
    linked = decision.linked_parent if decision is not None else None
    claimed = child.parent_call_id
    if linked is not None and linked in build.entries:
        relation = "recovered parent" if linked != claimed else "linked parent"
        return prove(child, build.entries[linked], relation)
    if claimed is not None and claimed in build.entries:
        return prove(child, build.entries[claimed], "claimed parent")
    return None


def cell_labels(tokens: np.ndarray, decode: Callable[[int], str] | None = None) -> list[str]:
    """What each token cell shows: its id, or its decoded text (quoted, so spaces show) when a decoder is given."""
    if decode is None:
        return [str(int(t)) for t in tokens]
    out = []
    for t in tokens:
        try:
            text = decode(int(t))
        except Exception:  # noqa: BLE001 -- an id outside the vocabulary shows as its number
            text = f"⟨{int(t)}⟩"
        out.append(repr(text)[1:-1] if text else "∅")
    return out


# --------------------------------------------------------------------------- a break against its predecessor
# (docs/contract.md#diagnosis)

@dataclass(frozen=True)
class MarkedSpan:
    """One stretch of a divergence on one row of the proof: ``side`` is "parent" or "prompt"."""

    side: str
    start: int
    end: int
    kind: str  # dropped, inserted or replaced
    cause: str  # the divergence's kind (docs/contract.md#causes)


@dataclass(frozen=True)
class BreakProof:
    """A break's prompt against its predecessor's full sequence (docs/contract.md#alignment), for a boundary, an extra
    root or a branch: where they agree, every divergence marked, and the first one's tokens (and text)."""

    child: str
    parent: str
    relation: str  # how the predecessor was chosen: claimed, branch_point, nearest
    cause: str
    parent_len: int
    prompt_len: int
    agree: int
    spans: tuple[MarkedSpan, ...]
    more: int  # divergences beyond those listed
    parent_window: tuple[int, int]
    parent_tokens: np.ndarray
    prompt_window: tuple[int, int]
    prompt_tokens: np.ndarray
    parent_text: str | None = None  # the first divergence decoded (with a tokenizer), else None
    prompt_text: str | None = None

    def summary(self) -> str:
        """Where the two agree and how they part, in one or two sentences."""
        n = len({(s.cause, s.start) for s in self.spans if s.side == "parent"} |
                {(s.cause, s.start) for s in self.spans if s.side == "prompt"})
        head = (f"{self.child}'s prompt ({count(self.prompt_len, 'token')}) against {self.parent}'s cumulative "
                f"sequence ({count(self.parent_len, 'token')}, the predecessor: "
                f"{RELATION_WORDS.get(self.relation, self.relation)}): "
                f"they share a prefix of {count(self.agree, 'token')}")
        if not self.spans:
            return head + ", the whole predecessor: the prompt continues it exactly."
        more = f" and {self.more:,} more" if self.more else ""
        return head + f", then part: {n:,} divergence{'s' if n != 1 else ''}{more} marked below."


    def parted(self) -> bool:
        """Whether the two sequences diverge at all (a `link_intact` break's prompt continues its predecessor)."""
        return bool(self.spans)

    def mark_label(self) -> str:
        """The words at the chart's rule: where they part, or that nothing diverges."""
        if self.parted():
            return f"they part at {self.agree:,}"
        return f"nothing diverges: all {self.parent_len:,} carried"

    def cells_title(self) -> str:
        """What the chart's cells show: the tokens around the first divergence, or where the predecessor ends."""
        where = "around the first divergence" if self.parted() else "where the predecessor's sequence ends"
        return (f"tokens {where}: predecessor from {self.parent_window[0]:,}, "
                f"this prompt from {self.prompt_window[0]:,}")


def link_proof_shown(brk: object | None, break_drawn: bool) -> bool:
    """Whether a call's detail draws its parent link's proof beside its break's: only when the break draws
    none of its own. A break's proof draws the same two sequences (the claimed parent is the predecessor)
    with the diagnosis's divergences, decoded: a second chart of them told another story ("13 of 16
    positions agree again" against "12 tokens replaced"). A branch's link holds: its link proof stays."""
    if brk is None or getattr(brk, "kind", None) == "branch":
        return True
    return not break_drawn and getattr(brk, "relation", None) == "claimed"


RELATION_WORDS = {"claimed": "the parent its record claims", "branch_point": "the call it branches from",
                  "nearest": "the earlier call sharing the longest prefix"}


def break_proof(view: RolloutView, brk: object) -> BreakProof | None:
    """The proof of a break (a `tokencap.diagnosis.Break`) that has a predecessor; None otherwise."""
    build = view.build
    call_id, pred = getattr(brk, "call_id", None), getattr(brk, "predecessor", None)
    if build is None or pred is None or call_id not in build.entries or pred not in build.entries:
        return None
    seq = _sequence(build.entries[pred])
    prompt = build.entries[call_id].prompt_token_ids
    spans: list[MarkedSpan] = []
    for d in brk.divergences:  # type: ignore[attr-defined]
        dropped, inserted = d.parent_end > d.parent_start, d.prompt_end > d.prompt_start
        kind = "replaced" if dropped and inserted else "dropped" if dropped else "inserted"
        if dropped:
            spans.append(MarkedSpan("parent", d.parent_start, d.parent_end, kind, d.kind))
        if inserted:
            spans.append(MarkedSpan("prompt", d.prompt_start, d.prompt_end, kind, d.kind))
    first = brk.first_divergence  # type: ignore[attr-defined]
    at_parent = first.parent_start if first is not None else seq.size
    at_prompt = first.prompt_start if first is not None else seq.size

    def window(centre: int, size: int) -> tuple[int, int]:
        start = max(0, centre - WINDOW_BEFORE)
        return start, max(start + 1, min(size, centre + WINDOW_AFTER))

    pw, qw = window(at_parent, int(seq.size)), window(at_prompt, int(prompt.size))
    return BreakProof(call_id, pred, str(brk.relation), str(brk.cause), int(seq.size),  # type: ignore[attr-defined]
                      int(prompt.size), int(brk.agree or 0), tuple(spans),  # type: ignore[attr-defined]
                      int(brk.more_divergences), pw, np.asarray(seq[pw[0]:pw[1]]),  # type: ignore[attr-defined]
                      qw, np.asarray(prompt[qw[0]:qw[1]]), brk.parent_text, brk.prompt_text)  # type: ignore
