"""The Run page's categories: verdicts, statuses, refusals, links, causes, delivery and the bins of
the two histograms, each with its words (no Streamlit)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...diagnosis import CAUSES
from ..words import label

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

NO_REASON = "—"
"""The mask reasons of a trainable rollout, as the frame's ``reasons`` column and the table show them."""


def key_words(reasons: str) -> str:
    """A rollout's mask reasons or break causes (the frame's ``reasons`` and ``causes``: keys joined by ", ",
    `NO_REASON` for none) in words, as the table shows them (`tokencap.views.words.label`)."""
    return reasons if reasons == NO_REASON else ", ".join(label(r) for r in reasons.split(", "))


def keys_in_words(reasons: pd.Series) -> pd.Series:
    """The frame's categorical ``reasons`` or ``causes`` column (or rows of it) in words: each combination
    relabelled once."""
    return reasons.cat.rename_categories({c: key_words(c) for c in reasons.cat.categories})


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
