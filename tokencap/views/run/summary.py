"""The Run page's tiles: counts and shares of a run's rollouts, and the warning a run of single calls gets."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import rollouts as ro
from .categories import (
    DELIVERY,
)

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
