"""The diagnosis and delivery columns of a scan row (docs/contract.md#scan-diagnosis-columns), computed in the worker.

`diagnosis_facts` turns one built rollout (and its rollout record's evidence, and a
tokenizer when one was given) into the five values a row carries after ``rollout_index``:
``breaks``, ``break_causes``, ``first_break_call``, ``delivered_mask_sample`` and
``delivered_by``. The diagnosis explains and never decides: these values are computed
after the row's other columns and from a finished build, and nothing here can fail a
scan -- a diagnosis that raises anyway leaves ``breaks`` null (never 0: "no break" would be
a claim), and malformed evidence or an undecodable id is the diagnosis's own note.

Cost on the scan path: a rollout without a break pays one pass over its link decisions
(`diagnosis.find_breaks`, through `diagnose`); the evidence fields are parsed only for a
rollout that has a break; a tokenizer is read once per worker process (`tokenizer_at`).
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any, NamedTuple

from ..diagnosis import break_facts, delivered_by, delivered_mask_sample, diagnose
from ..diagnosis.breaks import find_breaks
from ..rollout import RolloutResult


class DiagnosisFacts(NamedTuple):
    """The docs/contract.md#scan-diagnosis-columns values of one row, in column order."""

    breaks: int | None = 0
    break_causes: list[str] = []
    first_break_call: str | None = None
    delivered_mask_sample: bool | None = None
    delivered_by: str | None = None


NOT_BUILT = DiagnosisFacts()


@lru_cache(maxsize=4)
def tokenizer_at(path: str) -> Any:
    """The tokenizer at ``path``, read once per process (a worker diagnoses many rollouts with it).
    Raises `tokencap.diagnosis.TokenizerError` for a path that holds no tokenizer.json."""
    from ..diagnosis import load_tokenizer

    return load_tokenizer(path)


def diagnosis_facts(result: RolloutResult, evidence: Any = None, tokenizer: str | os.PathLike[str] | None = None
                    ) -> DiagnosisFacts:
    """The row's diagnosis and delivery values; never raises.

    ``evidence`` is what `FinalResponses.evidence_for` gives for the rollout (None without
    a record); ``tokenizer`` a path to a tokenizer.json (checked by the caller before the
    scan starts)."""
    delivered = (delivered_mask_sample(evidence), delivered_by(evidence))
    build = result.build
    try:
        if build is None or not find_breaks(build):  # the common case: nothing to explain, nothing parsed
            return DiagnosisFacts(0, [], None, *delivered)
        decoder = tokenizer_at(os.fspath(tokenizer)) if tokenizer is not None else None
        found = diagnose(result, tokenizer=decoder, evidence=evidence if isinstance(evidence, dict) else None)
    except Exception:  # noqa: BLE001 -- the diagnosis explains and never decides: it never costs a row
        return DiagnosisFacts(None, [], None, *delivered)
    facts = break_facts(found)  # the diagnosis's own definition of the three columns
    return DiagnosisFacts(facts.breaks, list(facts.break_causes), facts.first_break_call, *delivered)


__all__ = ["DiagnosisFacts", "NOT_BUILT", "diagnosis_facts", "tokenizer_at"]
