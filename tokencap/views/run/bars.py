"""The Run page's bar counts: one `Bars` per chart, counted over the rollouts passing every other filter."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...diagnosis import CAUSES, HINTS
from ...rollout import MASK_REASON_ORDER, MASK_REASON_TEXT
from ...run.rows import LINK_NOTES
from ...run.table import STATUSES
from ..words import label, with_key
from .categories import (
    CALLS_BINS,
    CAUSE_COLUMNS,
    DELIVERED_BINS,
    DELIVERED_LABELS,
    DELIVERY,
    DELIVERY_LABELS,
    DELIVERY_TEXT,
    LINK_TEXT,
    REFUSAL_LABELS,
    REFUSAL_TEXT,
    REFUSALS,
    STATUS_TEXT,
    calls_label,
)
from .filters import (
    passing,
)

# --------------------------------------------------------------------------- bar counts


@dataclass(frozen=True)
class Bars:
    """What one chart draws: a bar per key, with its count among ``total`` rollouts.

    ``dimension`` is the `RunFilter` field a click on a bar sets; ``keys`` are the filter
    values, stable whatever the data (a bar of zero is still a bar to click or to read).
    """

    dimension: str
    title: str
    keys: tuple[str, ...]
    labels: tuple[str, ...]
    counts: tuple[int, ...]
    total: int
    hover: tuple[str, ...] = ()
    colors: tuple[str, ...] = ()
    extra: tuple[int, ...] = field(default=())  # a second count per bar (occurrences), when it means something

    def shares(self) -> tuple[float, ...]:
        return tuple((c / self.total) if self.total else 0.0 for c in self.counts)


def _counts(codes: np.ndarray, n: int) -> np.ndarray:
    codes = codes[codes >= 0]
    return np.bincount(codes, minlength=n)[:n] if len(codes) else np.zeros(n, dtype=np.int64)


def reason_bars(frame: pd.DataFrame, keep: np.ndarray) -> Bars:
    """Rollouts masked for each reason (the order of docs/contract.md#rollout), labelled in words; each reason's
    meaning and key on hover."""
    counts = tuple(int(frame[f"reason_{r}"].to_numpy()[keep].sum()) for r in MASK_REASON_ORDER)
    return Bars("reasons", "Masked, by reason", MASK_REASON_ORDER, tuple(label(r) for r in MASK_REASON_ORDER), counts,
                int(keep.sum()), hover=tuple(with_key(MASK_REASON_TEXT[r], r) for r in MASK_REASON_ORDER))


def status_bars(frame: pd.DataFrame, keep: np.ndarray) -> Bars:
    counts = _counts(frame["status"].cat.codes.to_numpy()[keep], len(STATUSES))
    return Bars("statuses", "Response status", STATUSES, STATUSES, tuple(int(c) for c in counts), int(keep.sum()),
                hover=tuple(STATUS_TEXT[s] for s in STATUSES))


def delivered_bars(frame: pd.DataFrame, keep: np.ndarray) -> Bars:
    counts = _counts(frame["delivered_bin"].cat.codes.to_numpy()[keep], len(DELIVERED_BINS))
    labels = tuple(DELIVERED_LABELS[k] for k in DELIVERED_BINS)
    return Bars("delivered", "Delivered fraction of calls", DELIVERED_BINS, labels, tuple(int(c) for c in counts),
                int(keep.sum()),
                hover=tuple(f"{lab} of the rollout's calls are on the delivered chain" for lab in labels))


def calls_bars(frame: pd.DataFrame, keep: np.ndarray) -> Bars:
    counts = _counts(frame["calls_bin"].cat.codes.to_numpy()[keep], len(CALLS_BINS))
    present = np.flatnonzero(_counts(frame["calls_bin"].cat.codes.to_numpy(), len(CALLS_BINS)))
    last = max(int(present.max()) if len(present) else 0, 2)  # always 0, 1, 2; then up to the run's largest bin
    keys = CALLS_BINS[: last + 1]
    return Bars("calls", "Calls per rollout", keys, tuple(calls_label(k) for k in keys),
                tuple(int(c) for c in counts[: last + 1]), int(keep.sum()),
                hover=tuple(f"{calls_label(k)} model call{'s' if k != '1' else ''}" for k in keys))


def link_bars(frame: pd.DataFrame, keep: np.ndarray) -> Bars:
    rollouts, occurrences = [], []
    for note in LINK_NOTES:
        values = frame[f"link_{note}"].to_numpy()[keep]
        rollouts.append(int((values > 0).sum()))
        occurrences.append(int(values.sum()))
    return Bars("link", "Parent-link failures, by kind", LINK_NOTES, tuple(label(n) for n in LINK_NOTES),
                tuple(rollouts), int(keep.sum()), hover=tuple(with_key(LINK_TEXT[n], n) for n in LINK_NOTES),
                extra=tuple(occurrences))


def refusal_bars(frame: pd.DataFrame, keep: np.ndarray) -> Bars:
    counts = _counts(frame["refusal"].cat.codes.to_numpy()[keep], len(REFUSALS))
    return Bars("refusal", "Engine refusals, by outcome", REFUSALS, tuple(REFUSAL_LABELS[k] for k in REFUSALS),
                tuple(int(c) for c in counts), int(keep.sum()), hover=tuple(REFUSAL_TEXT[k] for k in REFUSALS))


def cause_bars(frame: pd.DataFrame, keep: np.ndarray) -> Bars:
    """Rollouts with a break of each cause (the order of docs/contract.md#causes), each cause's hint on hover."""
    counts = tuple(int(frame[c].to_numpy()[keep].sum()) if c in frame else 0 for c in CAUSE_COLUMNS)
    return Bars("causes", "Why lineage broke", CAUSES, tuple(label(c) for c in CAUSES), counts, int(keep.sum()),
                hover=tuple(with_key(HINTS[c], c) for c in CAUSES))


def delivery_bars(frame: pd.DataFrame, keep: np.ndarray) -> Bars:
    """Rollouts per state of what Gym delivered (`DELIVERY`), beside tokencap's verdict."""
    codes = frame["delivery"].cat.codes.to_numpy()[keep] if "delivery" in frame else np.zeros(0, dtype=np.int64)
    counts = _counts(codes, len(DELIVERY))
    return Bars("delivery", "What Gym delivered", DELIVERY, tuple(DELIVERY_LABELS[k] for k in DELIVERY),
                tuple(int(c) for c in counts), int(keep.sum()), hover=tuple(DELIVERY_TEXT[k] for k in DELIVERY))


CHARTS = (("reasons", reason_bars), ("statuses", status_bars), ("delivered", delivered_bars),
          ("calls", calls_bars), ("link", link_bars), ("refusal", refusal_bars), ("causes", cause_bars),
          ("delivery", delivery_bars))
"""The charts a researcher reads first, in the page's order, each with the filter its bars set."""


def chart_bars(frame: pd.DataFrame, masks: Mapping[str, np.ndarray]) -> list[Bars]:
    """Every chart's bars, each over the rows passing every filter but its own."""
    return [make(frame, passing(frame, masks, skip=dimension)) for dimension, make in CHARTS]
