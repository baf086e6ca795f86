"""Why a rollout's lineage broke (docs/contract.md#diagnosis): breaks, predecessors, alignments, causes, evidence.

Layer: above rollout assembly (it reads a `RolloutResult` and its build), below the
writers, run scans, views and the command line. The diagnosis explains and never
decides: nothing below it reads it, so every build, verdict, metric, payload, export and
scan column of docs/contract.md#builder to #diff is the same with or without it.

Public surface:

- ``diagnose(result, *, tokenizer=None, evidence=None) -> list[Break]``
- ``Break`` / ``Divergence`` (frozen; ``Break.to_dict()`` is JSON-native), ``BREAK_FIELDS``;
  ``break_facts(breaks) -> BreakFacts(breaks, break_causes, first_break_call)``
  (docs/contract.md#scan-diagnosis-columns)
- ``CAUSES`` (the vocabulary, in table order), ``HINTS[cause]``, ``DIVERGENCE_KINDS``,
  ``BREAK_KINDS``, ``RELATIONS``, ``cause_order(causes)``
- ``delivered_mask_sample(record) -> bool | None``, ``delivered_by(record) -> str | None``,
  ``trained_in_doubt(record, tokencap_masks) -> bool`` (docs/contract.md#delivered)
- ``parse_evidence(record, *, rollout_id, call_ids) -> HarnessEvidence`` (docs/contract.md#evidence)
- ``load_tokenizer(spec)``, ``TokenizerError``; ``find_tokenizer(spec) -> FoundTokenizer`` (a
  tokenizer.json, a model directory, or ``Org/Name`` in the local Hugging Face cache, with a label
  saying where it came from), ``tokenizer_for_model(model) -> FoundTokenizer | None`` (docs/contract.md#tokenizers)
- ``align(s, p, limit=32) -> Alignment`` (docs/contract.md#alignment, for link proofs);
  ``span_texts(result, brk, tokenizer)``: every listed divergence decoded
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_names

if TYPE_CHECKING:  # the names as type checkers and editors see them
    from .alignment import Alignment, Span, align
    from .breaks import BREAK_KINDS, RELATIONS
    from .causes import CAUSES, DIVERGENCE_KINDS, EVIDENCE_CAUSES, HINTS, cause_order
    from .decoding import TokenizerError, load_tokenizer
    from .delivered import DELIVERED_BY, delivered_by, delivered_mask_sample, trained_in_doubt
    from .evidence import EVIDENCE_FIELDS, HarnessEvidence, parse_evidence
    from .explain import diagnose, span_texts
    from .model import BREAK_FIELDS, MAX_DIVERGENCES, Break, BreakFacts, Divergence, break_facts
    from .tokenizer_lookup import FoundTokenizer, find_tokenizer, tokenizer_for_model

_HOMES = {  # submodule -> the public names it defines (the imports above)
    "alignment": ("Alignment", "Span", "align"),
    "breaks": ("BREAK_KINDS", "RELATIONS"),
    "causes": ("CAUSES", "DIVERGENCE_KINDS", "EVIDENCE_CAUSES", "HINTS", "cause_order"),
    "delivered": ("DELIVERED_BY", "delivered_by", "delivered_mask_sample", "trained_in_doubt"),
    "explain": ("diagnose", "span_texts"),
    "evidence": ("EVIDENCE_FIELDS", "HarnessEvidence", "parse_evidence"),
    "model": ("BREAK_FIELDS", "MAX_DIVERGENCES", "Break", "BreakFacts", "Divergence", "break_facts"),
    "decoding": ("TokenizerError", "load_tokenizer"),
    "tokenizer_lookup": ("FoundTokenizer", "find_tokenizer", "tokenizer_for_model"),
}

__getattr__ = lazy_names(__name__, _HOMES)

__all__ = ["Alignment", "BREAK_FIELDS", "BREAK_KINDS", "Break", "BreakFacts", "break_facts", "CAUSES", "DELIVERED_BY",
           "DIVERGENCE_KINDS", "Divergence", "EVIDENCE_CAUSES", "EVIDENCE_FIELDS", "HINTS", "HarnessEvidence",
           "MAX_DIVERGENCES", "RELATIONS", "Span", "TokenizerError", "align", "cause_order", "delivered_by",
           "delivered_mask_sample", "diagnose", "load_tokenizer", "span_texts", "parse_evidence", "trained_in_doubt",
           "FoundTokenizer", "find_tokenizer", "tokenizer_for_model"]
