"""What a comparison of two runs says first (docs/contract.md#diff): the counts and shares of each run
(`DiffSummary`, as data) and the plain lines `tokencap diff` prints of them (`summary_text`).

Shares are over each whole table; a change is B's share minus A's, in percentage points. The
printed change is the difference of the two printed shares, so a line always adds up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from .pairing import empty_sides

if TYPE_CHECKING:
    from .diff import RunDiff


@dataclass(frozen=True)
class DiffSummary:
    """What `tokencap diff` prints, as data.

    Shares are over each whole table (a fraction from 0 to 1; 0 for an empty table);
    ``change_pp`` is B's share minus A's, in percentage points.
    """

    rollouts_a: int
    rollouts_b: int
    both: int
    only_a: int
    only_b: int
    trainable_a: int
    trainable_b: int
    reason_counts: dict[str, tuple[int, int]]
    """Mask reason (the order of docs/contract.md#rollout) -> (rollouts of A, rollouts of B) masked with it."""
    status_counts: dict[str, tuple[int, int]]
    """Status as the Run page splits it (`tokencap.run.table.STATUSES`: an incomplete one by its reason, a
    null one `NO_STATUS`) -> (rollouts of A, rollouts of B); only statuses some rollout has."""
    changes: dict[str, int] = field(default_factory=dict)
    """Rows of the diff per ``change`` value, every value of `CHANGES` in that order."""
    cause_counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Break cause (the order of docs/contract.md#causes) -> (rollouts of A, rollouts of B) with a break of that
    cause."""
    records: tuple[bool, bool] = (False, False)
    """Whether A / B was scanned with rollout records (any rollout with a terminal attribution or a reward)."""

    @property
    def records_note(self) -> str | None:
        """When only one run had rollout records: verdicts that rest on them differ for that reason alone."""
        if self.records[0] == self.records[1]:
            return None
        having, lacking = ("A", "B") if self.records[0] else ("B", "A")
        return (f"only {having} was scanned with rollout records: verdicts that rest on them (a final answer "
                f"matching no call, retries the final answer settles) can differ for that reason alone, not "
                f"because of a change in the run; scan {lacking} with its rollout records too, or neither")

    @property
    def unpaired_note(self) -> str | None:
        """When both runs have rollouts but none could be paired: every change then reads only_a / only_b."""
        if self.both or not (self.rollouts_a and self.rollouts_b):
            return None
        return ("no rollout of A could be paired with one of B, so nothing here compares a rollout with "
                "itself; if the runs hold the same tasks, scan both with their rollout records (task and "
                "rollout index) and join by task (--join task)")

    @property
    def empty_note(self) -> str | None:
        """When run A or run B has no rollouts: nothing is compared, whichever side it is."""
        empty = empty_sides(self.rollouts_a, self.rollouts_b)
        if not empty:
            return None
        if len(empty) == 2:
            return "runs A and B have no rollouts (empty scan tables): there is nothing to compare"
        other = "B" if empty == ["A"] else "A"
        return (f"run {empty[0]} has no rollouts (an empty scan table), so nothing is compared: every rollout "
                f"of run {other} is only in {other}")

    @property
    def notes(self) -> list[str]:
        """What a reader must know before trusting the comparison (an empty run, one-sided records, nothing
        paired)."""
        return [n for n in (self.empty_note, self.unpaired_note, self.records_note) if n]

    @property
    def trainable_share_a(self) -> float:
        return _share(self.trainable_a, self.rollouts_a)

    @property
    def trainable_share_b(self) -> float:
        return _share(self.trainable_b, self.rollouts_b)

    @property
    def trainable_change_pp(self) -> float:
        return 100.0 * (self.trainable_share_b - self.trainable_share_a)

    def shares(self, counts: dict[str, tuple[int, int]]) -> list[tuple[str, int, int, float, float, float]]:
        """(key, count_a, count_b, share_a, share_b, change_pp) per key of ``counts``."""
        out = []
        for key, (a, b) in counts.items():
            share_a, share_b = _share(a, self.rollouts_a), _share(b, self.rollouts_b)
            out.append((key, a, b, share_a, share_b, 100.0 * (share_b - share_a)))
        return out

    @property
    def reasons(self) -> pd.DataFrame:
        """One row per mask reason (the order of docs/contract.md#rollout, index ``reason``): ``count_a``, ``count_b``,
        ``share_a``, ``share_b``, ``change_pp``."""
        return self._frame(self.reason_counts, "reason")

    @property
    def causes(self) -> pd.DataFrame:
        """One row per break cause (the order of docs/contract.md#causes, index ``cause``), the same columns as
        `reasons`."""
        return self._frame(self.cause_counts, "cause")

    @property
    def statuses(self) -> pd.DataFrame:
        """One row per status (index ``status``), the same columns as `reasons`."""
        return self._frame(self.status_counts, "status")

    def _frame(self, counts: dict[str, tuple[int, int]], name: str) -> pd.DataFrame:
        rows = self.shares(counts)
        frame = pd.DataFrame([r[1:] for r in rows], columns=["count_a", "count_b", "share_a", "share_b", "change_pp"],
                             index=pd.Index([r[0] for r in rows], name=name))
        return frame.astype({"count_a": "int64", "count_b": "int64", "share_a": "float64", "share_b": "float64",
                             "change_pp": "float64"})


def _share(count: int, total: int) -> float:
    return count / total if total else 0.0


# --------------------------------------------------------------------------- the printed summary


def _pct(share: float) -> str:
    return f"{100.0 * share:.1f}%"


def _pp(change: float) -> str:
    return f"{change:+.1f} pp"


def _printed_change(share_a: float, share_b: float) -> str:
    """B's share minus A's as printed: the difference of the two figures printed beside it (each rounded to
    0.1%), so the line adds up -- never the rounded exact difference, which can be 0.1 pp off them."""
    return _pp(float(_pct(share_b)[:-1]) - float(_pct(share_a)[:-1]))


def summary_text(diff: RunDiff, name_a: str = "A", name_b: str = "B",
                 tables: tuple[bool, bool] = (False, False)) -> str:
    """The summary `tokencap diff` prints: plain lines, A before B, changes in percentage points (the
    difference of the printed shares). ``tables``: whether A / B was given as a scan table, which takes no
    rollout records (a note then says to rescan its run with them)."""
    s, j = diff.summary, diff.join
    lines = [f"A: {name_a} ({_rollouts(s.rollouts_a)})", f"B: {name_b} ({_rollouts(s.rollouts_b)})",
             f"joined {j.label}: {j.why}"]
    if j.unkeyed_a or j.unkeyed_b:
        lines.append(f"  without task and rollout index (on their own side): {j.unkeyed_a:,} in A, "
                     f"{j.unkeyed_b:,} in B")
    lines += [f"rollouts: {s.both:,} in both, {s.only_a:,} only in A, {s.only_b:,} only in B",
              f"trainable: {_pct(s.trainable_share_a)} of A ({s.trainable_a:,}), {_pct(s.trainable_share_b)} of B "
              f"({s.trainable_b:,}), {_printed_change(s.trainable_share_a, s.trainable_share_b)}",
              f"verdicts of rollouts in both: {s.changes['fixed']:,} fixed (masked in A, trainable in B), "
              f"{s.changes['broke']:,} broke (trainable in A, masked in B), {s.changes['reasons_changed']:,} "
              f"reasons_changed (masked in both, for other reasons), {s.changes['same']:,} same"]
    first, second = "mask reasons (share of rollouts)", "status (share of rollouts)"
    causes = {k: v for k, v in s.cause_counts.items() if v != (0, 0)}
    # The labels' column is as wide as its widest line, so A, B and change head their values.
    width = max(len(first), len(second), *(2 + len(k) for k in (*s.reason_counts, *s.status_counts, *causes)))
    lines.append(f"{first:<{width}}  {'A':>7}  {'B':>7}  {'change':>10}")
    sections = [(None, s.reason_counts), (second, s.status_counts)]
    if causes:
        sections.append(("why lineage broke: rollouts with a break of each cause (share of rollouts)", causes))
    for title, counts in sections:
        if title:
            lines.append(title)
        for key, _, _, share_a, share_b, _ in s.shares(counts):
            lines.append(f"{'  ' + key:<{width}}  {_pct(share_a):>7}  {_pct(share_b):>7}  "
                         f"{_printed_change(share_a, share_b):>10}")
    for note in (s.empty_note, s.unpaired_note):
        if note:
            lines.append(f"note: {note}")
    if s.records_note:
        lacking = 1 if s.records[0] else 0
        side = "AB"[lacking]
        how = (f"a scan table takes no records: rescan {side}'s run with `tokencap scan RUN -o TABLE "
               f"--final-responses RECORDS`, or give the run directory with --final-responses-{side.lower()}"
               if tables[lacking] else f"--final-responses-{side.lower()}")
        lines.append(f"note: {s.records_note} ({how})")
    return "\n".join(lines) + "\n"


def _rollouts(n: int) -> str:
    return f"{n:,} rollout{'' if n == 1 else 's'}"


__all__ = ["DiffSummary", "summary_text"]
