"""Two builds of one rollout side by side: anchor A against anchor B, or two captures of it.

`compare` puts the two views' verdicts, mask reasons, response status, metrics and
delivered calls in one table (with what changed marked), lists every change in words
(`verdicts.verdict_changes`: a status that flips while the verdict stays trainable is a
change too), and finds the first position where the two delivered training sequences
(the main chains' tokens, prompt and generation) differ. `.sequence_chart` draws that
(Vega-Lite): both sequences as bars on one axis, green while they agree, and the tokens
around the first difference as cells.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..formatting import count, fmt_int, json_text
from ..model import RolloutView
from .linkproof import agreement_runs, leading_agreement
from .verdicts import banner_of, verdict_changes

WINDOW_BEFORE = 6
WINDOW_AFTER = 10


@dataclass
class SequenceDiff:
    """Where two delivered sequences agree and where they first part."""

    len_a: int
    len_b: int
    agree: int                                   # leading positions both hold the same token
    runs: tuple[tuple[int, int, bool], ...]      # over the overlap
    window: tuple[int, int]
    tokens_a: np.ndarray
    tokens_b: np.ndarray
    owner_a: str | None = None                   # the call whose tokens hold the first difference, on each side
    owner_b: str | None = None

    @property
    def identical(self) -> bool:
        return self.len_a == self.len_b == self.agree

    def summary(self, a: str = "A", b: str = "B") -> str:
        if self.identical:
            return f"The delivered sequences are identical ({count(self.len_a, 'token')})."
        if self.agree == min(self.len_a, self.len_b):
            longer, shorter = (a, b) if self.len_a > self.len_b else (b, a)
            return (f"{shorter}'s delivered sequence ({count(min(self.len_a, self.len_b), 'token')}) is the start of "
                    f"{longer}'s ({max(self.len_a, self.len_b):,}): they part at position {self.agree:,}, where "
                    f"{shorter}'s ends.")
        where = ""
        if self.owner_a or self.owner_b:
            where = f" (in {self.owner_a or '—'} on {a}, {self.owner_b or '—'} on {b})"
        i = self.agree - self.window[0]
        return (f"They agree on the first {count(self.agree, 'token')} and first differ at position "
                f"{self.agree:,}{where}: "
                f"{a} has token {int(self.tokens_a[i])}, {b} has token {int(self.tokens_b[i])}.")


@dataclass
class Comparison:
    label_a: str
    label_b: str
    table: pd.DataFrame                          # what | A | B | changed
    changes: list[str] = field(default_factory=list)
    calls_common: int = 0                        # delivered calls both deliver, from the start
    calls_only_a: list[str] = field(default_factory=list)
    calls_only_b: list[str] = field(default_factory=list)
    sequence: SequenceDiff | None = None


def _main_tokens(view: RolloutView) -> tuple[np.ndarray, Any]:
    mask = view.mask("main")
    if mask is None:
        return np.zeros(0, dtype=np.int64), None
    return np.asarray(mask.token_ids), mask


def _owner(mask: Any, position: int) -> str | None:
    if mask is None or position >= len(mask) or not mask.call_ids:
        return None
    link = int(np.searchsorted(mask.link_starts, position, side="right")) - 1
    return mask.call_ids[max(link, 0)]


def sequence_diff(a: RolloutView, b: RolloutView) -> SequenceDiff:
    ta, mask_a = _main_tokens(a)
    tb, mask_b = _main_tokens(b)
    agree = leading_agreement(ta, tb)
    start = max(0, agree - WINDOW_BEFORE)
    end = max(start + 1, min(max(ta.size, tb.size), agree + WINDOW_AFTER))
    differs = agree < min(ta.size, tb.size)
    return SequenceDiff(int(ta.size), int(tb.size), agree, agreement_runs(ta, tb), (start, end), ta[start:end],
                        tb[start:end], _owner(mask_a, agree) if differs else None,
                        _owner(mask_b, agree) if differs else None)


def _metric(value: Any) -> str:
    return json_text(value, digits=4)


def compare(a: RolloutView, b: RolloutView, label_a: str = "A", label_b: str = "B") -> Comparison:
    """Everything that tells two builds of a rollout apart."""
    ra, rb = a.result, b.result
    banner_a, banner_b = banner_of(a), banner_of(b)
    main_a = a.chain("main")
    main_b = b.chain("main")
    calls_a = main_a.call_ids if main_a is not None else []
    calls_b = main_b.call_ids if main_b is not None else []
    common = 0
    while common < min(len(calls_a), len(calls_b)) and calls_a[common] == calls_b[common]:
        common += 1
    rows: list[tuple[str, str, str]] = [
        ("verdict", "trainable" if not ra.mask_sample else "masked", "trainable" if not rb.mask_sample else "masked"),
        ("mask reasons", ", ".join(ra.mask_reasons) or "—", ", ".join(rb.mask_reasons) or "—"),
        ("response status", banner_a.status_line, banner_b.status_line),
        ("anchor", a.anchor or "—", b.anchor or "—"),
        ("snapshot", f"{a.snapshot.snapshot_id or '—'} v{a.snapshot.version}",
         f"{b.snapshot.snapshot_id or '—'} v{b.snapshot.version}"),
        ("delivered calls", fmt_int(len(calls_a)), fmt_int(len(calls_b))),
        ("delivered chain ends at", calls_a[-1] if calls_a else "—", calls_b[-1] if calls_b else "—"),
    ]
    for key in dict.fromkeys(list(ra.metrics) + list(rb.metrics)):
        if key in ("status", "incomplete_reason"):
            continue
        rows.append((key, _metric(ra.metrics.get(key)), _metric(rb.metrics.get(key))))
    table = pd.DataFrame(rows, columns=["what", label_a, label_b])
    table["changed"] = ["✱" if x != y else "" for _, x, y in rows]
    changes = verdict_changes(ra, rb)
    if a.anchor != b.anchor:
        changes.insert(0, f"anchor: {a.anchor or 'none'} → {b.anchor or 'none'}")
    if calls_a != calls_b:
        changes.append(f"delivered calls: {len(calls_a):,} → {len(calls_b):,} ({common:,} in common from the start)")
    return Comparison(label_a, label_b, table, changes, common, calls_a[common:], calls_b[common:],
                      sequence_diff(a, b))


# --------------------------------------------------------------------------- the Compare tab's words


CALLS_SHOWN = 50
"""Delivered calls listed per side under "only A" / "only B" before "…"."""


def anchor_side_name(side: str, anchor: str | None) -> str:
    """One side of an anchor comparison: "A (anchored on call-7)", or "A (no anchor)"."""
    return f"{side} (anchored on {anchor})" if anchor else f"{side} (no anchor)"


def capture_side_name(side: str, source_name: str, version: Any) -> str:
    """One side of a comparison of two captures: its file and snapshot version."""
    return f"{side} ({source_name} v{version})"


def capture_label(source_name: str, snapshot_id: str | None, version: Any) -> str:
    """Another capture of the rollout, as the picker names it."""
    return f"{source_name} · snapshot {snapshot_id or '—'} · version {version}"


def calls_only_text(side: str, calls: list[str]) -> str:
    """The delivered calls only one side delivers (plain text), the first `CALLS_SHOWN` of them."""
    return f"only {side}: " + (", ".join(calls[:CALLS_SHOWN]) or "—") + (" …" if len(calls) > CALLS_SHOWN else "")


def delivered_calls_caption(cmp: Comparison) -> str | None:
    """Where the two delivered chains part (None when one holds the other's calls and no more)."""
    if not (cmp.calls_only_a or cmp.calls_only_b):
        return None
    return (f"Delivered calls: {cmp.calls_common:,} in common from the start; then A delivers "
            f"{len(cmp.calls_only_a):,} and B {len(cmp.calls_only_b):,} of its own.")
