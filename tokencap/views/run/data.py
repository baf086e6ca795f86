"""A run's scan table (docs/contract.md#scan-table) as the Run page reads it: one frame, its filters, its table.

`run_frame` turns the table into a pandas frame once per run: low-cardinality columns
become categoricals (status, verdict, the mask-reason combination, source, and the bins of
the two histograms), so a filter or a count is a comparison of small integer codes.
`RunFilter` is the page's whole filter state, small and immutable, written to and read
from the URL (``run_`` parameters) so a link or a trip to the Rollout page keeps it.
`filter_masks` gives one boolean array per active filter, all vectorised: nothing here
runs Python per row, so a 100,000-row run filters in milliseconds.

Charts cross-filter: each chart counts the rollouts that pass every filter except its
own (`passing(..., skip=dimension)`), so its bars stay clickable and comparable while
the table shows the rollouts that pass them all.

No Streamlit here, and nothing from the Rollout page's views.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...diagnosis import CAUSES, HINTS
from ...rollout import MASK_REASON_ORDER, MASK_REASON_TEXT
from ...run.rows import LINK_NOTES
from ...run.table import STATUSES, status_codes
from ..words import label, with_key
from . import reward as rw
from . import rollouts as ro

PARAM_PREFIX = "run_"

# --------------------------------------------------------------------------- categories

VERDICTS = ("trainable", "masked")


STATUS_TEXT = {
    "completed": "the delivered chain ended on its own (stop, tool call)",
    "max_output_tokens": "cut at the output-token limit, or a context-window refusal ended the run",
    "content_filter": "stopped by the content filter",
    "incomplete": "incomplete for another reason",
    "no response": "no response was built (the rollout could not be loaded or had nothing to deliver)",
}

REFUSALS = ("none", "other", "context", "ended")
REFUSAL_LABELS = {
    "none": "no refusal",
    "other": "refused, not the context window",
    "context": "context window, run went on",
    "ended": "a refusal ended the run",
}
REFUSAL_TEXT = {
    "none": "the engine refused no request of this rollout",
    "other": "the engine refused a request for another reason (a bad parameter, say); only counted",
    "context": "a request did not fit the context window, but the harness carried on (shortened or re-served)",
    "ended": "the harness's next request did not fit the context window and the run stopped there "
             "(status max_output_tokens)",
}

LINK_TEXT = {
    "parent_unresolved": "the parent was undecided when the request was made",
    "parent_digest_mismatch": "the claimed parent's tokens do not open the prompt (stale or edited history)",
    "parent_call_id_missing_recovered": "the claimed parent is absent; re-attached by a proven token prefix "
                                        "(does not mask)",
    "parent_call_id_missing": "the claimed parent is absent and no prefix proves another",
    "missing_resolution": "a legacy record without a request-time parent decision",
    "duplicate_call_id_conflict": "several records share a call id with different tokens",
    "delta_chain_unreconstructable": "a delta prompt whose parent chain is missing",
    "entry_digest_mismatch": "a record whose tokens disagree with its own digest",
}

LINK_NOT_FAILURES = frozenset({"parent_call_id_missing_recovered"})
"""Link notes that do not break a link (a proven re-attachment): charted, but not counted as failures."""

DELIVERED_BINS = ("0", "0-10", "10-20", "20-30", "30-40", "40-50", "50-60", "60-70", "70-80", "80-90", "90-100",
                  "100")
DELIVERED_LABELS = {"0": "0%", "100": "100%", "0-10": "<10%", "90-100": "90–<100%",
                    **{f"{i}-{i + 10}": f"{i}–{i + 10}%" for i in range(10, 90, 10)}}

MAX_CALLS_BINS = 24

CAUSE_COLUMNS = tuple(f"cause_{c}" for c in CAUSES)
"""One bool column per break cause (docs/contract.md#causes): the rollout has a break of that cause."""

DELIVERY = ("in_doubt", "agent", "capture_masked", "trained", "unknown")
"""What NeMo Gym delivered (docs/contract.md#delivered) beside tokencap's verdict, one state per rollout."""
DELIVERY_LABELS = {
    "in_doubt": "trained on, lineage in doubt",
    "agent": "masked by the harness itself",
    "capture_masked": "masked by token capture",
    "trained": "trained on, tokencap agrees",
    "unknown": "not in the rollout records",
}
DELIVERY_TEXT = {
    "in_doubt": "Gym delivered it as trainable (mask_sample false) but tokencap masks it: the trainer learned from "
                "a rollout whose lineage is in doubt",
    "agent": "the harness masked it for its own reasons (a timeout, an out-of-memory sandbox): mask_sample true "
             "without _ng_token_capture",
    "capture_masked": "Gym's token capture masked it (mask_sample true with _ng_token_capture)",
    "trained": "Gym delivered it as trainable and tokencap agrees",
    "unknown": "its rollout record says nothing of what was delivered (no mask_sample), or the run has no records",
}


def calls_bins(n: int = MAX_CALLS_BINS) -> tuple[str, ...]:
    """Keys of the calls-per-rollout bins: 0, 1, 2, 3-4, 5-8, 9-16, ... (powers of two)."""
    keys = ["0", "1", "2"]
    for k in range(3, n):
        keys.append(f"{2 ** (k - 2) + 1}-{2 ** (k - 1)}")
    return tuple(keys)


CALLS_BINS = calls_bins()


def calls_label(key: str) -> str:
    return key.replace("-", "–")


def calls_bin_codes(n_calls: np.ndarray) -> np.ndarray:
    """The bin index of every call count: 0 -> 0, 1 -> 1, 2 -> 2, 3-4 -> 3, 5-8 -> 4, ..."""
    n = np.asarray(n_calls, dtype=np.int64)
    codes = np.minimum(n, 2)
    big = n > 2
    if big.any():
        # ceil(log2(n)) for n >= 3, exact on integers: the bit length of n - 1.
        _, exponent = np.frexp((n[big] - 1).astype(np.float64))
        codes = codes.copy()
        codes[big] = exponent + 1
    return np.minimum(codes, MAX_CALLS_BINS - 1)


def delivered_bin_codes(fraction: np.ndarray) -> np.ndarray:
    """The bin index of every delivered fraction: exactly 0, tenths in between, exactly 1."""
    f = np.nan_to_num(np.asarray(fraction, dtype=np.float64), nan=0.0)
    codes = 1 + np.clip(np.floor(f * 10), 0, 9).astype(np.int64)
    codes[f <= 0] = 0
    codes[f >= 1] = len(DELIVERED_BINS) - 1
    return codes


# --------------------------------------------------------------------------- the frame


REASON_COLUMNS = tuple(f"reason_{r}" for r in MASK_REASON_ORDER)
LINK_COLUMNS = tuple(f"link_{n}" for n in LINK_NOTES)


def _categorical(codes: np.ndarray, categories: tuple[str, ...]) -> pd.Categorical:
    return pd.Categorical.from_codes(codes.astype(np.int64), categories=list(categories))


def _np(table: pa.Table, name: str, dtype: Any) -> np.ndarray:
    column = table.column(name)
    if dtype is bool:
        return np.asarray(column.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    return np.asarray(column.fill_null(0).to_numpy(zero_copy_only=False), dtype=dtype)


def _dictionary(table: pa.Table, name: str, null: str = "") -> pd.Categorical:
    encoded = table.column(name).fill_null(null).combine_chunks().dictionary_encode()
    return pd.Categorical.from_codes(encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64),
                                     categories=encoded.dictionary.to_pylist())


def _strings(table: pa.Table, name: str) -> pd.api.extensions.ExtensionArray:
    return pd.array(table.column(name).combine_chunks(), dtype=pd.ArrowDtype(pa.string()))


def _nullable(table: pa.Table, name: str, dtype: Any) -> Any:
    """A nullable column of docs/contract.md#scan-rollout-records (rollout records): all null when the table predates
    it."""
    n = table.num_rows
    if name not in table.column_names:
        return np.full(n, np.nan) if dtype is np.float64 else pd.array([pd.NA] * n, dtype=dtype)
    column = table.column(name).combine_chunks()
    if dtype is np.float64:
        return np.asarray(column.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    return pd.array(column.cast(pa.int64()).to_pandas(types_mapper=pd.ArrowDtype).astype("Int64"), dtype="Int64")


def reason_text(mask: np.ndarray) -> str:
    return ", ".join(r for r, on in zip(MASK_REASON_ORDER, mask) if on)


def run_frame(table: pa.Table) -> pd.DataFrame:
    """The scan table as the page's frame: index 0..n-1 (the table's row), derived columns added."""
    n = table.num_rows
    out: dict[str, Any] = {}
    out["rollout_id"] = _strings(table, "rollout_id")
    out["source"] = _dictionary(table, "source")
    masked = ~np.asarray(pc.equal(table.column("mask_sample"), False).fill_null(False), dtype=bool)  # null: masked
    out["verdict"] = _categorical(masked.astype(np.int64), VERDICTS)
    bits = np.zeros(n, dtype=np.int64)
    for i, column in enumerate(REASON_COLUMNS):
        values = _np(table, column, bool)
        out[column] = values
        bits |= values.astype(np.int64) << i
    # The reasons of a row in the order of docs/contract.md#rollout, as one category per combination seen
    # (few in practice).
    combos, codes = np.unique(bits, return_inverse=True)
    labels = [reason_text([(int(c) >> i) & 1 for i in range(len(REASON_COLUMNS))]) or "—" for c in combos]
    out["reasons"] = pd.Categorical.from_codes(codes.reshape(-1).astype(np.int64), categories=labels)
    out["status"] = _categorical(status_codes(table.column("status"), table.column("incomplete_reason")), STATUSES)
    for name in ("n_calls", "chains", "roots", "quarantined_calls", "generated_tokens_captured",
                 "generated_tokens_delivered", "unresolved_parent_calls", "empty_generation_calls",
                 "after_terminal_calls", "engine_refusals", "context_refusals", "source_bytes"):
        out[name] = _np(table, name, np.int64)
    out["delivered_fraction"] = _np(table, "delivered_fraction", np.float64)
    out["quarantined_fraction"] = _np(table, "quarantined_fraction", np.float64)
    link_total = np.zeros(n, dtype=np.int64)
    for note, column in zip(LINK_NOTES, LINK_COLUMNS):
        values = _np(table, column, np.int64)
        out[column] = values
        if note not in LINK_NOT_FAILURES:
            link_total += values
    out["link_failures"] = link_total
    ended = _np(table, "refusal_ended_chain", bool)
    out["refusal_ended_chain"] = ended
    out["capture_incomplete"] = _np(table, "capture_incomplete", bool)
    refusal = np.zeros(n, dtype=np.int64)
    refusal[out["engine_refusals"] > 0] = REFUSALS.index("other")
    refusal[out["context_refusals"] > 0] = REFUSALS.index("context")
    refusal[ended] = REFUSALS.index("ended")
    out["refusal"] = _categorical(refusal, REFUSALS)
    out["calls_bin"] = _categorical(calls_bin_codes(out["n_calls"]), CALLS_BINS)
    out["delivered_bin"] = _categorical(delivered_bin_codes(out["delivered_fraction"]), DELIVERED_BINS)
    out["reward"] = _nullable(table, "reward", np.float64)
    out["task_index"] = _nullable(table, "task_index", "Int64")
    out["rollout_index"] = _nullable(table, "rollout_index", "Int64")
    out["group"] = _categorical(rw.group_codes(out["task_index"], ~masked, out["reward"]), rw.GROUP_STATES)
    out["error"] = _strings(table, "error")
    out["snapshot_id"] = _strings(table, "snapshot_id")
    out.update(_diagnosis(table, masked))
    out["contiguity"] = ro.contiguity_column(table)
    return pd.DataFrame(out, index=pd.RangeIndex(n, name="row"))


def _cause_bits(table: pa.Table) -> np.ndarray:
    """Per row, bit i set when the row's ``break_causes`` holds `CAUSES`[i] (vectorised; 0 without the column)."""
    n = table.num_rows
    bits = np.zeros(n, dtype=np.int64)
    if "break_causes" not in table.column_names or not n:
        return bits
    column = table.column("break_causes").combine_chunks()
    flat = pc.list_flatten(column)
    if not len(flat):
        return bits
    parents = np.asarray(pc.list_parent_indices(column).to_numpy(zero_copy_only=False), dtype=np.int64)
    codes = pc.index_in(flat, value_set=pa.array(CAUSES)).fill_null(-1).to_numpy(zero_copy_only=False)
    known = codes >= 0  # a cause this version does not know is not counted
    np.bitwise_or.at(bits, parents[known], np.left_shift(1, codes[known].astype(np.int64)))
    return bits


def _diagnosis(table: pa.Table, masked: np.ndarray) -> dict[str, Any]:
    """The frame's columns of docs/contract.md#scan-diagnosis-columns: ``breaks``, one ``cause_*`` bool per cause,
    ``causes`` (the
    combination as one category, like ``reasons``) and ``delivery`` (`DELIVERY`)."""
    n = table.num_rows
    out: dict[str, Any] = {}
    out["breaks"] = _np(table, "breaks", np.int64) if "breaks" in table.column_names else np.zeros(n, np.int64)
    bits = _cause_bits(table)
    for i, column in enumerate(CAUSE_COLUMNS):
        out[column] = (bits >> i) & 1 == 1
    combos, codes = np.unique(bits, return_inverse=True)
    labels = [", ".join(c for i, c in enumerate(CAUSES) if (int(k) >> i) & 1) or "—" for k in combos]
    out["causes"] = pd.Categorical.from_codes(codes.reshape(-1).astype(np.int64), categories=labels)
    delivery = np.full(n, DELIVERY.index("unknown"), dtype=np.int64)
    if "delivered_mask_sample" in table.column_names:
        said = table.column("delivered_mask_sample")
        trainable = np.asarray(pc.equal(said, False).fill_null(False), dtype=bool)
        masked_by_gym = np.asarray(pc.equal(said, True).fill_null(False), dtype=bool)
        agent = np.asarray(pc.equal(table.column("delivered_by"), "agent").fill_null(False), dtype=bool)
        delivery[masked_by_gym] = DELIVERY.index("capture_masked")
        delivery[masked_by_gym & agent] = DELIVERY.index("agent")
        delivery[trainable] = DELIVERY.index("trained")
        delivery[trainable & masked] = DELIVERY.index("in_doubt")
    out["delivery"] = _categorical(delivery, DELIVERY)
    return out


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
        if dimension in _TUPLES:
            current = getattr(self, dimension)
            return replace(self, **{dimension: () if current == (key,) else (key,)})
        if dimension in ("verdict", "delivered", "calls", "link", "refusal", "groups", "delivery", "contiguous"):
            return replace(self, **{dimension: "" if getattr(self, dimension) == key else key})
        raise ValueError(f"no chart filters on {dimension!r}")

    def without(self, dimension: str) -> RunFilter:
        default = RunFilter()
        return replace(self, **{dimension: getattr(default, dimension)})

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
        out = []
        for d in self.active:
            value = getattr(self, d)
            if d == "change":
                text = "change: " + " or ".join(CHANGE_LABELS[c] for c in value)
            elif d == "groups":
                text = f"groups: {rw.GROUP_FILTERS[value]}"
            elif d == "verdict":
                text = f"verdict: {value}"
            elif d == "reasons":
                text = "mask reason: " + " or ".join(value)
            elif d == "statuses":
                text = "status: " + " or ".join(value)
            elif d == "delivered":
                text = f"delivered: {DELIVERED_LABELS[value]}"
            elif d == "calls":
                text = f"calls: {calls_label(value)}"
            elif d == "link":
                text = f"parent-link failure: {value}"
            elif d == "refusal":
                text = f"refusals: {REFUSAL_LABELS[value]}"
            elif d == "causes":
                text = "lineage broke by: " + " or ".join(value)
            elif d == "delivery":
                text = f"Gym delivered: {DELIVERY_LABELS[value]}"
            elif d == "contiguous":
                text = ro.filter_words(value)
            elif d == "source":
                text = f"source contains “{value}”"
            else:
                text = f"id contains “{value}”"
            out.append((d, text))
        return out


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
        keep = np.zeros(len(frame), dtype=bool)
        for r in flt.reasons:
            keep |= frame[f"reason_{r}"].to_numpy()
        masks["reasons"] = keep
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
        keep = np.zeros(len(frame), dtype=bool)
        for c in flt.causes:
            keep |= frame[f"cause_{c}"].to_numpy()
        masks["causes"] = keep
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


# --------------------------------------------------------------------------- the table shown


TABLE_COLUMNS = {
    "rollout_id": "rollout",
    "verdict": "verdict",
    "reasons": "mask reasons",
    "causes": "why lineage broke",
    "n_calls": "calls",
    "delivered_fraction": "delivered",
    "link_failures": "link failures",
    "engine_refusals": "refusals",
    "status": "status",
    "chains": "chains",
    "quarantined_calls": "quarantined",
    "generated_tokens_delivered": "gen. tokens",
    "source": "source",
    "error": "error",
}
"""Frame column -> table header, in the order the table shows them: what a reader triages by first (the
verdict, its reasons and causes, then the counts), so at 1280 px beside the sidebar the grid's first
screen ends on numbers, not on a numeric column's header whose right-aligned values are out of sight."""


_NARROW = {"n_calls": np.int32, "link_failures": np.int32, "engine_refusals": np.int32, "chains": np.int32,
           "quarantined_calls": np.int32, "delivered_fraction": np.float32}
"""Display-only narrowing: the browser receives every shown row, so half-width numbers halve the bytes."""


def table_frame(frame: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """The rows shown, in order, with the table's headers; the index keeps each row's number.

    Built for the browser, which gets every row: small counts go as 32-bit numbers, and a
    source column whose values are (nearly) all different goes as plain strings rather
    than a dictionary as large as the column.
    """
    shown = frame.iloc[rows][list(TABLE_COLUMNS)] if len(rows) else frame.iloc[:0][list(TABLE_COLUMNS)]
    shown = shown.astype(_NARROW)
    if ro.has_items(frame):  # rollouts read from output items: NeMo RL's contiguity, last (the columns before it
        shown["contiguity"] = ro.table_values(frame, rows)  # keep the widths the table's cell titles count on)
    if len(shown) and len(frame["source"].cat.categories) > len(frame) // 2:
        shown["source"] = pd.array(shown["source"].astype(str), dtype=pd.ArrowDtype(pa.string()))
    return shown.rename(columns={**TABLE_COLUMNS, "contiguity": ro.TABLE_HEADER})


def row_at(frame: pd.DataFrame, rows: np.ndarray, position: int) -> int | None:
    """The row number behind the ``position``-th row of the table shown (a selection), or None."""
    if 0 <= position < len(rows):
        return int(rows[position])
    return None


# --------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class Metric:
    label: str
    value: str
    help: str = ""
    share: str = ""  # of the whole run, shown under the value


def _share(n: int, total: int) -> str:
    if not total:
        return "–"
    share = n / total
    return f"{share:.0%}" if share in (0, 1) or share >= 0.1 else f"{share:.1%}" if share >= 0.001 else "<0.1%"


def has_delivery(frame: pd.DataFrame) -> bool:
    """Whether any rollout's record said what Gym delivered (docs/contract.md#delivered)."""
    return "delivery" in frame and bool((frame["delivery"].cat.codes != DELIVERY.index("unknown")).any())


def delivery_metrics(frame: pd.DataFrame) -> list[Metric]:
    """The tiles of what Gym delivered: rollouts trained on although tokencap masks them, and rollouts a
    harness masked on its own (the chart "What Gym delivered" filters on them)."""
    total = len(frame)
    codes = frame["delivery"].cat.codes.to_numpy() if "delivery" in frame else np.zeros(0, dtype=np.int64)
    doubt = int((codes == DELIVERY.index("in_doubt")).sum())
    agent = int((codes == DELIVERY.index("agent")).sum())

    def share(n: int) -> str:
        return _share(n, total) if total else ""  # of the whole run: seven tiles share 1280 px

    return [
        Metric("trained in doubt", f"{doubt:,}", "trained on although their lineage is in doubt: Gym delivered them "
               "as trainable (mask_sample false) and tokencap masks them; click that bar of 'What Gym delivered' "
               "to list them", share(doubt)),
        Metric("masked by harness", f"{agent:,}", "the harness masked them on its own (a timeout, an out-of-memory "
               "sandbox: mask_sample without _ng_token_capture), whatever their lineage", share(agent)),
    ]


def run_metrics(frame: pd.DataFrame, delivery: bool | None = None) -> list[Metric]:
    """The headline numbers of a run (the whole table, not the filtered rows); the tiles of what Gym
    delivered follow when ``delivery`` (by default: when a record of the run said so)."""
    total = len(frame)
    masked = int((frame["verdict"].cat.codes == 1).sum())
    trainable = total - masked
    incomplete = int(frame["status"].isin(["max_output_tokens", "content_filter", "incomplete"]).sum())
    failed = int(frame["reason_load_error"].sum())

    def share(n: int) -> str:
        return _share(n, total) if total else ""  # of the whole run: seven tiles share 1280 px

    return [
        Metric("rollouts", f"{total:,}"),
        Metric("trainable", f"{trainable:,}", "the trainer receives them (mask_sample false)", share(trainable)),
        Metric("masked", f"{masked:,}", "the trainer drops them; the chart below says why", share(masked)),
        Metric("not completed", f"{incomplete:,}", "status max_output_tokens, content_filter or another incomplete",
               share(incomplete)),
        Metric("not loaded", f"{failed:,}", "load_error: the rollout could not be read (see the error column)",
               share(failed)),
    ] + contiguity_metrics(frame) + (
        delivery_metrics(frame) if (has_delivery(frame) if delivery is None else delivery) else [])


def contiguity_metrics(frame: pd.DataFrame) -> list[Metric]:
    """The tiles of NeMo RL's contiguity check (docs/contract.md#scan-token-source), for a run holding rollouts read
    from output
    items; none otherwise."""
    if not ro.has_items(frame):
        return []
    total = len(frame)
    joined, split = ro.counts(frame)
    return [
        Metric("contiguous", f"{joined:,}", ro.CONTIGUITY_TEXT["contiguous"], _share(joined, total)),
        Metric("not contiguous", f"{split:,}", ro.CONTIGUITY_TEXT["not_contiguous"], _share(split, total)),
    ]


def single_call_warning(frame: pd.DataFrame, threshold: float = 0.9, minimum: int = 10) -> str | None:
    """Plain words when most loaded rollouts made exactly one call (the tool parser is probably missing)."""
    loaded = frame["n_calls"].to_numpy()
    loaded = loaded[loaded > 0]
    if len(loaded) < minimum:
        return None
    single = int((loaded == 1).sum())
    if single / len(loaded) < threshold:
        return None
    return (f"{single:,} of {len(loaded):,} loaded rollouts ({_share(single, len(loaded))}) made exactly one model "
            "call. An agent run that never gets past its first call usually means the harness's tool-call parser "
            "is missing or failing: the model's tool calls were never executed, so no second turn was sent.")


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
    counts = tuple(int(frame[f"reason_{r}"].to_numpy()[keep].sum()) for r in MASK_REASON_ORDER)
    return Bars("reasons", "Masked, by reason", MASK_REASON_ORDER, MASK_REASON_ORDER, counts, int(keep.sum()),
                hover=tuple(MASK_REASON_TEXT[r] for r in MASK_REASON_ORDER))


def status_bars(frame: pd.DataFrame, keep: np.ndarray) -> Bars:
    counts = _counts(frame["status"].cat.codes.to_numpy()[keep], len(STATUSES))
    return Bars("statuses", "Response status", STATUSES, STATUSES, tuple(int(c) for c in counts), int(keep.sum()),
                hover=tuple(STATUS_TEXT[s] for s in STATUSES))


def delivered_bars(frame: pd.DataFrame, keep: np.ndarray) -> Bars:
    counts = _counts(frame["delivered_bin"].cat.codes.to_numpy()[keep], len(DELIVERED_BINS))
    labels = tuple(DELIVERED_LABELS[k] for k in DELIVERED_BINS)
    return Bars("delivered", "Delivered fraction of calls", DELIVERED_BINS, labels, tuple(int(c) for c in counts),
                int(keep.sum()), hover=tuple(f"{lab} of the rollout's calls are on the delivered chain" for lab in labels))


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


__all__ = [
    "Bars", "CALLS_BINS", "CAUSE_COLUMNS", "CHARTS", "DELIVERED_BINS", "DELIVERY", "DELIVERY_LABELS", "DIMENSIONS",
    "LINK_TEXT", "Metric", "REFUSALS", "cause_bars", "delivery_bars", "delivery_metrics", "has_delivery",
    "REFUSAL_LABELS", "RunFilter", "SORTS", "STATUSES", "TABLE_COLUMNS", "calls_bars", "calls_bin_codes", "chart_bars",
    "delivered_bars", "delivered_bin_codes", "filter_masks", "link_bars", "passing", "reason_bars", "refusal_bars",
    "row_at", "run_frame", "run_metrics", "single_call_warning", "sorted_rows", "status_bars", "table_frame",
]
