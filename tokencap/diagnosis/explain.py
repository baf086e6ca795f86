"""`diagnose`: every break of a built rollout, with its predecessor, alignment and cause (docs/contract.md#diagnosis).

The order of work per break: find it from the build (`breaks`), choose its predecessor,
align the break's prompt against the predecessor's tokens (`alignment`), give each listed
divergence its kind and the break its token cause (`causes`), decode the first divergence
with a tokenizer (`decoding`), then let the harness's evidence replace the cause where it
applies (`evidence`). Every step only reads the build: arrays are compared, never written,
and nothing is stored on the result, so a build, verdict, metric, payload or export is the
same byte for byte whether or not this ran.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..builder import BuildOutput
from ..records import TokenEntry
from ..tokens import joined
from .alignment import Alignment, PromptRuns, Span, align
from .breaks import BreakSite, children_by_parent, find_breaks, predecessor, time_key
from .causes import HINTS, REORDERED_TOKENS, divergence_kind
from .decoding import TokenizerLike, as_tokenizer, clipped, decode, starts_with_think, think_left_open
from .evidence import HarnessEvidence, parse_evidence
from .model import MAX_DIVERGENCES, Break, Divergence
from .tokenizer_lookup import FoundTokenizer, missing_model_note, tokenizer_for_models


def diagnose(result: Any, *, tokenizer: TokenizerLike | str | os.PathLike[str] | None = None,
             evidence: Mapping[str, Any] | None = None) -> list[Break]:
    """Every break of ``result`` (what `tokencap.build_rollout` returned), by ``(created_at, call id)``.

    ``tokenizer``: a `tokenizers.Tokenizer` (or anything with ``decode`` and
    ``id_to_token``), or a ``tokenizer.json``, a model directory or ``Org/Name`` in the local
    Hugging Face cache (docs/contract.md#tokenizers; one that cannot be found raises
    `tokencap.diagnosis.TokenizerError`; load it once with `load_tokenizer` for many
    rollouts). Without one, the delivered calls' model is looked up in the local cache
    (`model_tokenizer`); a found tokenizer's label is a note on each break it decoded.
    ``evidence``: the rollout's record from the harness's rollout records (the
    object a ``--final-responses`` line holds; `FinalResponses.evidence_for` gives it).

    A rollout that was not built (load error, no records, build error) has no breaks.
    Never raises on malformed evidence or undecodable ids (each is a note on the breaks),
    and never changes ``result``.
    """
    build: BuildOutput | None = getattr(result, "build", None)
    if build is None:
        return []
    sites = find_breaks(build)
    if not sites:
        return []
    decoder = as_tokenizer(tokenizer)
    missing = None
    # The delivered calls' model, when the local cache holds its tokenizer (docs/contract.md#tokenizers).
    if decoder is None:
        decoder, missing = model_tokenizer(build)
    harness = None
    if evidence is not None:
        known = set(build.entries) | set(build.excluded)
        harness = parse_evidence(evidence, rollout_id=str(getattr(result, "rollout_id", "")), call_ids=known)
    children = children_by_parent(build)
    created = {call_id: time_key(build, call_id) for call_id in build.entries}
    out = [_one(build, site, children, decoder, harness, created) for site in sites]
    note = missing_model_note(missing) if missing is not None else None
    if note is not None:  # said once per model and process, on the first break it concerns
        out[0] = dataclasses.replace(out[0], notes=(*out[0].notes, note))
    return out


def model_tokenizer(build: BuildOutput) -> tuple[FoundTokenizer | None, str | None]:
    """The tokenizer of the model the delivered calls name, from the local Hugging Face cache
    (looked up once per model and process), else None with the model that has none (to say so)."""
    main = build.main
    calls = main.call_ids if main is not None else []
    return tokenizer_for_models(build.entries[c].model for c in calls if c in build.entries)


def span_texts(result: Any, brk: Break, tokenizer: TokenizerLike | str | os.PathLike[str]
               ) -> list[tuple[str | None, str | None]]:
    """(predecessor text, prompt text) of every divergence ``brk`` lists, decoded with
    special tokens kept and clipped like `Break.parent_text`; None for a side the tokenizer
    cannot decode. For showing every divergence (the `Break` itself carries only the first)."""
    build: BuildOutput | None = getattr(result, "build", None)
    decoder = as_tokenizer(tokenizer)
    if build is None or decoder is None or brk.predecessor not in build.entries or brk.call_id not in build.entries:
        return [(None, None) for _ in brk.divergences]
    texts = _Texts(decoder, full_sequence(build.entries[brk.predecessor]), build.entries[brk.call_id].prompt_token_ids,
                   [])
    out = []
    for d in brk.divergences:
        parent, prompt = texts.span(d)
        out.append((clipped(parent) if parent is not None else None, clipped(prompt) if prompt is not None else None))
    return out


def full_sequence(entry: TokenEntry) -> np.ndarray:
    """A call's prompt followed by its generation (a view when they share a buffer)."""
    seq = joined(entry.prompt_token_ids, entry.generation_token_ids)
    return seq if seq is not None else np.concatenate((entry.prompt_token_ids, entry.generation_token_ids))


def _lineage(build: BuildOutput, call_id: str) -> list[TokenEntry]:
    """The call and its linked ancestors, root first (iterative, loop-safe)."""
    out: list[TokenEntry] = []
    seen: set[str] = set()
    cursor: str | None = call_id
    while cursor is not None and cursor not in seen and cursor in build.entries:
        seen.add(cursor)
        out.append(build.entries[cursor])
        link = build.links.get(cursor)
        cursor = link.linked_parent if link is not None else None
    out.reverse()
    return out


class _Generated:
    """Which positions of S were generated: the predecessor's and its linked ancestors' generations."""

    def __init__(self, lineage: list[TokenEntry]) -> None:
        self.entries = lineage
        self.starts = np.array([e.prompt_token_ids.size for e in lineage], dtype=np.int64)
        self.ends = np.array([e.full_len for e in lineage], dtype=np.int64)

    def covers(self, start: int, end: int) -> bool:
        """Every position of [start, end) is generated (the generations never overlap)."""
        if end <= start:
            return False
        inside = np.clip(self.ends, start, end) - np.clip(self.starts, start, end)
        return int(inside.sum()) == end - start

    def owner(self, position: int) -> tuple[TokenEntry, int] | None:
        """The call whose generation holds ``position``, with where that generation starts in S."""
        hit = np.flatnonzero((self.starts <= position) & (position < self.ends))
        return (self.entries[int(hit[0])], int(self.starts[int(hit[0])])) if hit.size else None


def _one(build: BuildOutput, site: BreakSite, children: dict[str, list[str]], tokenizer: TokenizerLike | None,
         harness: HarnessEvidence | None, created: dict[str, tuple[float, str]]) -> Break:
    entry = build.entries.get(site.call_id)
    notes: list[str] = list(harness.notes) if harness is not None else []
    if site.kind == "record_fault":
        return Break(site.call_id, site.kind, site.note, None, None, None, None, None,
                     int(entry.prompt_token_ids.size) if entry is not None else None, (), 0,
                     "record_fault", "record_fault", HINTS["record_fault"], False, notes=tuple(notes))
    assert entry is not None  # every other break is a call the build chained
    pred_id, relation = predecessor(build, site, children)
    evidence: list[dict[str, Any]] = []
    if harness is not None:
        evidence = harness.for_call(site.call_id, _function_call_ids(entry))
        if pred_id is not None:
            evidence += harness.for_call(pred_id, _function_call_ids(build.entries[pred_id]))
    replaced = harness.cause_for(site.call_id, created) if harness is not None else None
    prompt = entry.prompt_token_ids
    if pred_id is None or not prompt.size:
        token_cause = "new_context" if prompt.size else "prompt_missing"
        cause = replaced or ("branch" if site.kind == "branch" else token_cause)
        known = pred_id is not None  # an empty prompt agrees with nothing: no alignment, no divergences
        length_or_none = build.entries[pred_id].full_len if pred_id is not None else None
        return Break(site.call_id, site.kind, site.note, pred_id, relation, site.sibling, 0 if known else None,
                     length_or_none, int(prompt.size), (), 0, cause, token_cause, HINTS[cause], False,
                     evidence=tuple(evidence), notes=tuple(notes))
    lineage = _lineage(build, pred_id)
    s = full_sequence(build.entries[pred_id])
    alignment = align(s, prompt, limit=MAX_DIVERGENCES)
    generated = _Generated(lineage)
    opening = int(lineage[0].prompt_token_ids.size)
    texts = _Texts(tokenizer, s, prompt, notes)
    divergences = tuple(_kinded(alignment, s, prompt, opening, generated, texts))
    label = getattr(tokenizer, "label", None)
    if divergences and texts.active and isinstance(label, str):
        # Name the tokenizer wherever text is shown (docs/contract.md#tokenizers).
        notes.append(f"text decoded with {label}")
    length = int(s.size)
    token_cause = _token_cause(alignment.agree, length, divergences)
    reasoning = False
    parent_text = prompt_text = same_text = None
    if divergences and texts.active:
        first = divergences[0]
        parent_full, prompt_full = texts.span(first)
        if parent_full is not None and prompt_full is not None:
            parent_text, prompt_text = clipped(parent_full), clipped(prompt_full)
            same_text = parent_full == prompt_full
    if token_cause == "generation_dropped":
        reasoning = _reasoning(divergences[0], generated, texts)
    cause = replaced or ("branch" if site.kind == "branch" else token_cause)
    return Break(site.call_id, site.kind, site.note, pred_id, relation, site.sibling, alignment.agree, length,
                 int(prompt.size), divergences, alignment.more, cause, token_cause, HINTS[cause], reasoning,
                 parent_text, prompt_text, same_text, tuple(evidence), tuple(dict.fromkeys(notes)))


def _token_cause(agree: int, length: int, divergences: tuple[Divergence, ...]) -> str:
    """docs/contract.md#causes: `link_intact` when the prompt continues all of S, else `history_reordered` when
    any listed divergence is, else the first divergence's kind."""
    if agree == length:
        return "link_intact"
    if any(d.kind == "history_reordered" for d in divergences):
        return "history_reordered"
    return divergences[0].kind


def _reasoning(first: Divergence, generated: _Generated, texts: _Texts) -> bool:
    """Whether the dropped span D is reasoning (docs/contract.md#causes): the call whose generation holds D's first
    token has a reasoning item, or (with a tokenizer) D reads as a ``<think>`` block, or the text that
    call generated before D left a ``<think>`` open."""
    found = generated.owner(first.parent_start)
    if found is not None and any(isinstance(item, Mapping) and item.get("type") == "reasoning"
                                 for item in found[0].output_items):
        return True
    if not texts.active:
        return False
    parent_full, _ = texts.span(first)
    if parent_full is not None and starts_with_think(parent_full):
        return True
    if found is None or found[1] >= first.parent_start:
        return False
    before = texts.parent(found[1], first.parent_start)
    return before is not None and think_left_open(before)


def _function_call_ids(entry: TokenEntry) -> list[str]:
    return [item["call_id"] for item in entry.output_items
            if isinstance(item, Mapping) and item.get("type") == "function_call"
            and isinstance(item.get("call_id"), str)]


class _Texts:
    """Decoded spans of S and P, memoised; the first undecodable id becomes one note."""

    def __init__(self, tokenizer: TokenizerLike | None, s: np.ndarray, p: np.ndarray, notes: list[str]) -> None:
        self.tokenizer, self.s, self.p, self.notes = tokenizer, s, p, notes
        self._memo: dict[tuple[str, int, int], str | None] = {}

    @property
    def active(self) -> bool:
        return self.tokenizer is not None

    def _decode(self, side: str, start: int, end: int) -> str | None:
        key = (side, start, end)
        if key not in self._memo:
            ids = (self.s if side == "parent" else self.p)[start:end]
            assert self.tokenizer is not None  # spans are decoded only while active
            text, bad = decode(self.tokenizer, ids)
            if bad is not None:
                self.notes.append(f"the tokenizer cannot decode token id {bad}; the divergence's text is left out")
            self._memo[key] = text
        return self._memo[key]

    def parent(self, start: int, end: int) -> str | None:
        """S[start:end] decoded (None when the tokenizer cannot)."""
        return self._decode("parent", start, end)

    def span(self, d: Divergence) -> tuple[str | None, str | None]:
        return self._decode("parent", d.parent_start, d.parent_end), self._decode("prompt", d.prompt_start,
                                                                                d.prompt_end)


def _kinded(alignment: Alignment, s: np.ndarray, p: np.ndarray, opening: int, generated: _Generated,
            texts: _Texts) -> list[Divergence]:
    """Each listed span with its kind (docs/contract.md#causes). Text is decoded only where a rule reads it: a
    short replacement (`retokenized`?) and a possible stub (the same text is no stub); P's run
    hashes are built only when some dropped span is long enough to be reordered."""
    out = []
    runs: PromptRuns | None = None
    for span in alignment.spans:
        reordered = False
        if span.parent_end - span.parent_start >= REORDERED_TOKENS:
            runs = runs if runs is not None else PromptRuns(p)
            reordered = runs.find(s[span.parent_start:span.parent_end]) is not None
        all_generated = generated.covers(span.parent_start, span.parent_end)

        def kind_of(same_text: bool | None = None, span: Span = span, reordered: bool = reordered,
                    all_generated: bool = all_generated) -> str:
            return divergence_kind(parent_start=span.parent_start, parent_end=span.parent_end,
                                   prompt_start=span.prompt_start, prompt_end=span.prompt_end, to_end=span.to_end,
                                   predecessor_len=int(s.size), opening_len=opening, all_generated=all_generated,
                                   same_text=same_text, reordered=reordered)

        kind = kind_of()
        stub = kind == "generation_dropped" and span.prompt_end > span.prompt_start
        divergence = Divergence(span.parent_start, span.parent_end, span.prompt_start, span.prompt_end, kind)
        if texts.active and (kind == "tokens_replaced" or stub):
            parent_text, prompt_text = texts.span(divergence)
            if parent_text is not None and prompt_text is not None:
                divergence = dataclasses.replace(divergence, kind=kind_of(parent_text == prompt_text))
        out.append(divergence)
    return out


__all__ = ["diagnose", "full_sequence", "model_tokenizer", "span_texts"]
