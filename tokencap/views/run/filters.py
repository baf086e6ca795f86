"""The Run page's filters: `RunFilter` (the whole filter state, in the URL's ``run_`` parameters),
one vectorised boolean mask per active filter, the rows passing them and their sort.

Charts cross-filter: each chart counts the rollouts that pass every filter except its own
(`passing(..., skip=dimension)`), so its bars stay clickable while the table shows those that pass them all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...diagnosis import CAUSES
from ...rollout import MASK_REASON_ORDER
from ...run.rows import LINK_NOTES
from ...run.table import STATUSES
from ..words import label
from . import reward as rw
from . import rollouts as ro
from .categories import (
    CALLS_BINS,
    DELIVERED_BINS,
    DELIVERED_LABELS,
    DELIVERY,
    DELIVERY_LABELS,
    PARAM_PREFIX,
    REFUSAL_LABELS,
    REFUSALS,
    VERDICTS,
    calls_label,
)

# --------------------------------------------------------------------------- filters


SORTS = {
    "": "table order (source, id)",
    "rollout_id": "rollout id",
    "n_calls": "calls",
    "delivered_fraction": "delivered fraction",
    "link_failures": "parent-link failures",
    "engine_refusals": "engine refusals",
    "quarantined_calls": "quarantined calls",
    "generated_tokens_delivered": "generated tokens delivered",
}
"""Columns the table can be sorted by (key -> label); "" is the scan's own order."""

DIMENSIONS = ("change", "verdict", "reasons", "statuses", "delivered", "calls", "link", "refusal", "causes", "delivery",
              "contiguous", "groups", "source", "query")
"""Every filter of `RunFilter`, each one `filter_masks` entry."""

CHANGES = ("fixed", "broke", "reasons_changed", "only_a", "only_b", "same")
"""A joined row's change from run A to run B (docs/contract.md#diff), in the page's order."""
CHANGE_LABELS = {"fixed": "fixed", "broke": "broke", "reasons_changed": "reasons changed", "only_a": "only in A",
                 "only_b": "only in B", "same": "same"}
CHANGE_TEXT = {
    "fixed": "masked in A, trainable in B",
    "broke": "trainable in A, masked in B",
    "reasons_changed": "masked in both, for different reasons",
    "only_a": "in run A only",
    "only_b": "in run B only",
    "same": "the same verdict and mask reasons in both",
}

_PARAMS = {"change": "change", "groups": "group", "verdict": "verdict", "reasons": "reason", "statuses": "status",
           "delivered": "delivered", "calls": "calls", "link": "link", "refusal": "refusal", "source": "source",
           "query": "q", "sort": "sort", "descending": "desc", "causes": "cause", "delivery": "gym",
           "contiguous": "contig"}
_TUPLES = ("reasons", "statuses", "change", "causes")
_CHARTED = _TUPLES + ("verdict", "delivered", "calls", "link", "refusal", "groups", "delivery", "contiguous")
"""The filters a chart's bar sets (`RunFilter.toggle`): a one-value tuple for those of `_TUPLES`, else the value."""


@dataclass(frozen=True)
class RunFilter:
    """The Run page's filters and sort. Empty values filter nothing; rows must pass every filter.

    ``reasons`` and ``statuses`` keep a row having any of the listed values; ``source``
    and ``query`` are case-insensitive substrings of the source path and the rollout id.
    ``change`` (a comparison's `CHANGES`) keeps rows having any of the listed changes;
    ``groups`` (`reward.GROUP_FILTERS`) keeps the rollouts of groups left without a learning signal.
    ``causes`` keeps a row with a break of any of the listed causes (docs/contract.md#causes); ``delivery``
    (`DELIVERY`) the rows in that state of what Gym delivered (docs/contract.md#delivered); ``contiguous``
    (`rollouts.FILTERS`) the rollouts read from output items that NeMo RL's contiguity check passes, or
    stops on (docs/contract.md#scan-token-source).
    """

    change: tuple[str, ...] = ()
    verdict: str = ""
    reasons: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    delivered: str = ""
    calls: str = ""
    link: str = ""
    refusal: str = ""
    groups: str = ""
    source: str = ""
    query: str = ""
    sort: str = ""
    descending: bool = False
    causes: tuple[str, ...] = ()
    delivery: str = ""
    contiguous: str = ""

    def __post_init__(self) -> None:
        # A filter comes from the URL or a widget: anything unknown is dropped, never raised.
        fix = object.__setattr__
        fix(self, "change", tuple(c for c in CHANGES if c in set(self.change)))
        fix(self, "verdict", self.verdict if self.verdict in VERDICTS else "")
        fix(self, "reasons", tuple(r for r in MASK_REASON_ORDER if r in set(self.reasons)))
        fix(self, "statuses", tuple(s for s in STATUSES if s in set(self.statuses)))
        fix(self, "delivered", self.delivered if self.delivered in DELIVERED_BINS else "")
        fix(self, "calls", self.calls if self.calls in CALLS_BINS else "")
        fix(self, "link", self.link if self.link in LINK_NOTES else "")
        fix(self, "refusal", self.refusal if self.refusal in REFUSALS else "")
        fix(self, "groups", self.groups if self.groups in rw.GROUP_FILTERS else "")
        fix(self, "source", " ".join(str(self.source).split())[:200])
        fix(self, "query", " ".join(str(self.query).split())[:200])
        fix(self, "sort", self.sort if self.sort in SORTS else "")
        fix(self, "descending", bool(self.descending) and bool(self.sort))
        fix(self, "causes", tuple(c for c in CAUSES if c in set(self.causes)))
        fix(self, "delivery", self.delivery if self.delivery in DELIVERY else "")
        fix(self, "contiguous", self.contiguous if self.contiguous in ro.FILTERS else "")

    # ----------------------------------------------------------------- URL

    def to_params(self) -> dict[str, str]:
        """The non-default filters as ``run_*`` query parameters."""
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if not value:
                continue
            text = ",".join(value) if isinstance(value, tuple) else "1" if value is True else str(value)
            out[PARAM_PREFIX + _PARAMS[f.name]] = text
        return out

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> RunFilter:
        """The filter a URL's ``run_*`` parameters describe; unknown values are ignored."""
        def get(name: str) -> str:
            value = params.get(PARAM_PREFIX + name, "")
            if isinstance(value, (list, tuple)):
                value = value[-1] if value else ""
            return str(value)

        values: dict[str, Any] = {}
        for f in fields(cls):
            text = get(_PARAMS[f.name])
            if f.name in _TUPLES:
                values[f.name] = tuple(t.strip() for t in text.split(",") if t.strip())
            elif f.name == "descending":
                values[f.name] = text in ("1", "true", "yes")
            else:
                values[f.name] = text
        return cls(**values)

    # ----------------------------------------------------------------- edits

    def set(self, **changes: Any) -> RunFilter:
        return replace(self, **changes)

    def toggle(self, dimension: str, key: str) -> RunFilter:
        """What a click on a chart bar does: filter on that bar, or clear it when it is the filter."""
        if dimension not in _CHARTED:
            raise ValueError(f"no chart filters on {dimension!r}")
        bar = (key,) if dimension in _TUPLES else key
        return self.without(dimension) if getattr(self, dimension) == bar else self.set(**{dimension: bar})

    def without(self, dimension: str) -> RunFilter:
        return self.set(**{dimension: getattr(RunFilter(), dimension)})

    def cleared(self) -> RunFilter:
        """No filter, the same sort."""
        return RunFilter(sort=self.sort, descending=self.descending)

    @property
    def active(self) -> tuple[str, ...]:
        """The dimensions that filter something, in `DIMENSIONS` order."""
        return tuple(d for d in DIMENSIONS if getattr(self, d))

    def active_keys(self, dimension: str) -> tuple[str, ...]:
        value = getattr(self, dimension)
        return value if isinstance(value, tuple) else (value,) if value else ()

    @property
    def token(self) -> str:
        """A short stable digest of the filter and sort (widget keys that must reset when it changes)."""
        text = "&".join(f"{k}={v}" for k, v in sorted(self.to_params().items()))
        return hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]

    def describe(self) -> list[tuple[str, str]]:
        """(dimension, plain words) for every active filter, for the chips above the table."""
        return [(d, _chip(d, self.active_keys(d))) for d in self.active]


_CHIPS: dict[str, tuple[str, Callable[[str], str]]] = {
    "change": ("change", CHANGE_LABELS.__getitem__),
    "groups": ("groups", rw.GROUP_FILTERS.__getitem__),
    "verdict": ("verdict", str),
    "reasons": ("mask reason", label),
    "statuses": ("status", str),
    "delivered": ("delivered", DELIVERED_LABELS.__getitem__),
    "calls": ("calls", calls_label),
    "link": ("parent-link failure", str),
    "refusal": ("refusals", REFUSAL_LABELS.__getitem__),
    "causes": ("lineage broke by", label),
    "delivery": ("Gym delivered", DELIVERY_LABELS.__getitem__),
}
"""A filter's chip above the table (`RunFilter.describe`): its name, and the words for each of its values."""


def _chip(dimension: str, keys: tuple[str, ...]) -> str:
    """The plain words of one active filter: ``name: value or value``; a contiguity filter in its own words,
    a substring filter as what the source or the id contains."""
    if dimension == "contiguous":
        return ro.filter_words(keys[0])
    if dimension in ("source", "query"):
        return f"{'source' if dimension == 'source' else 'id'} contains “{keys[0]}”"
    name, words = _CHIPS[dimension]
    return f"{name}: " + " or ".join(words(k) for k in keys)


def _contains(values: pd.Series, needle: str) -> np.ndarray:
    """Case-insensitive substring match of a string column (Arrow compute, no Python per row)."""
    found = pc.match_substring(_arrow(values), needle, ignore_case=True).fill_null(False)
    return np.asarray(found.to_numpy(zero_copy_only=False), dtype=bool)


def _categories_matching(column: pd.Series, needle: str) -> np.ndarray:
    """Rows of a categorical column whose category contains ``needle`` (each category tested once)."""
    cats = column.cat.categories
    if not len(cats):
        return np.zeros(len(column), dtype=bool)
    hits = pc.match_substring(pa.array(cats.astype(str)), needle, ignore_case=True).fill_null(False)
    return np.asarray(hits.to_numpy(zero_copy_only=False), dtype=bool)[column.cat.codes.to_numpy()]


def _code_of(column: pd.Series, key: str) -> int:
    cats = list(column.cat.categories)
    return cats.index(key) if key in cats else -2


def _any_column(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """Rows true in any of the boolean ``columns`` (a row having any of the listed reasons, or causes)."""
    keep = np.zeros(len(frame), dtype=bool)
    for column in columns:
        keep |= frame[column].to_numpy()
    return keep


def filter_masks(frame: pd.DataFrame, flt: RunFilter) -> dict[str, np.ndarray]:
    """One boolean array (rows kept) per active filter dimension."""
    masks: dict[str, np.ndarray] = {}
    if flt.change and "change" in frame:
        codes = frame["change"].cat.codes.to_numpy()
        masks["change"] = np.isin(codes, [CHANGES.index(c) for c in flt.change])
    if flt.groups:
        masks["groups"] = rw.group_filter_mask(frame["group"].cat.codes.to_numpy(), flt.groups)
    if flt.verdict:
        masks["verdict"] = frame["verdict"].cat.codes.to_numpy() == VERDICTS.index(flt.verdict)
    if flt.reasons:
        masks["reasons"] = _any_column(frame, [f"reason_{r}" for r in flt.reasons])
    if flt.statuses:
        codes = frame["status"].cat.codes.to_numpy()
        masks["statuses"] = np.isin(codes, [STATUSES.index(s) for s in flt.statuses])
    for dimension, column in (("delivered", "delivered_bin"), ("calls", "calls_bin"), ("refusal", "refusal")):
        key = getattr(flt, dimension)
        if key:
            masks[dimension] = frame[column].cat.codes.to_numpy() == _code_of(frame[column], key)
    if flt.link:
        masks["link"] = frame[f"link_{flt.link}"].to_numpy() > 0
    if flt.causes:
        masks["causes"] = _any_column(frame, [f"cause_{c}" for c in flt.causes])
    if flt.delivery:
        masks["delivery"] = frame["delivery"].cat.codes.to_numpy() == DELIVERY.index(flt.delivery)
    if flt.contiguous and "contiguity" in frame:
        masks["contiguous"] = ro.filter_mask(frame, flt.contiguous)
    if flt.source:
        masks["source"] = _categories_matching(frame["source"], flt.source)
    if flt.query:
        masks["query"] = _contains(frame["rollout_id"], flt.query)
    return masks


def passing(frame: pd.DataFrame, masks: Mapping[str, np.ndarray], skip: str | None = None) -> np.ndarray:
    """Rows that pass every filter (but the one named ``skip``)."""
    keep = np.ones(len(frame), dtype=bool)
    for dimension, mask in masks.items():
        if dimension != skip:
            keep &= mask
    return keep


def _arrow(values: pd.Series) -> pa.Array:
    """A column as one Arrow array (zero-copy for Arrow-backed and numeric columns)."""
    return pa.array(values.array) if isinstance(values.dtype, pd.ArrowDtype) else pa.array(values.to_numpy())


def sorted_rows(frame: pd.DataFrame, keep: np.ndarray, flt: RunFilter) -> np.ndarray:
    """Row numbers of the kept rows in the filter's sort order; equal values keep the table's order."""
    rows = np.flatnonzero(keep)
    if not flt.sort or not len(rows):
        return rows
    values = _arrow(frame[flt.sort]).take(pa.array(rows))
    # Arrow's sort is stable in both directions: ties stay in table order.
    order = pc.array_sort_indices(values, order="descending" if flt.descending else "ascending",
                                  null_placement="at_end")
    return rows[order.to_numpy(zero_copy_only=False)]
