"""Triage: walking a run's rollouts one by one, in the order the Run page's table shows them.

A rollout opened from the Run page carries its place in the run: the run's frame, its row
number and where the run came from (the ``open_rollout`` request, see ``app_pages/run/run.py``).
`run_order` lists the rows that pass the Run page's filter (its ``run_*`` parameters) in
its sort, with the Run page's own functions (`data.filter_masks`, `passing`,
`sorted_rows`), so "next" is always the row below in the table the user left.
`step_request` opens the previous or next one as the Run page would open its row.

No Streamlit here; nothing from the Rollout page's parts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from . import data as rd
from . import source as rs


@dataclass(frozen=True, eq=False)
class RunOrder:
    """The rows of a run's table that pass a filter, in its sort (row numbers of the frame)."""

    frame: pd.DataFrame
    rows: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)

    def position(self, row: int) -> int | None:
        """Where ``row`` is in the table (0-based), or None when the filter hides it."""
        hits = np.flatnonzero(self.rows == row)
        return int(hits[0]) if len(hits) else None

    def step(self, row: int, delta: int) -> int | None:
        """The row ``delta`` places after ``row`` (before, when negative), or None past either end."""
        at = self.position(row)
        if at is None or not 0 <= at + delta < len(self.rows):
            return None
        return int(self.rows[at + delta])

    def where(self, row: int) -> str:
        """"3 of 17" (1-based), or why ``row`` has no place."""
        at = self.position(row)
        if at is None:
            return f"not among the {len(self.rows):,} rollouts of this filter"
        return f"{at + 1:,} of {len(self.rows):,}"

    def entry(self, row: int) -> tuple[str, str]:
        """(source, rollout id) of a row."""
        return str(self.frame["source"].iat[row]), str(self.frame["rollout_id"].iat[row])


def run_order(frame: pd.DataFrame, flt: rd.RunFilter) -> RunOrder:
    """The Run page's table for ``flt``: the rows passing every filter, in its sort."""
    keep = rd.passing(frame, rd.filter_masks(frame, flt))
    return RunOrder(frame, rd.sorted_rows(frame, keep, flt))


def with_place(request: dict[str, Any], origin: rs.RunOrigin, frame: pd.DataFrame, row: int) -> dict[str, Any]:
    """An ``open_rollout`` request (`source.open_request`) with the row's place in the run (``frame``,
    ``row``, ``origin``), which previous / next and the way back use."""
    return {**request, "frame": frame, "row": row, "origin": origin}


def order_of(request: Mapping[str, Any]) -> RunOrder | None:
    """The order a request opened from the Run page walks in (its filter and sort), or None for a
    rollout opened otherwise (a link, a file)."""
    frame, row = request.get("frame"), request.get("row")
    if not isinstance(frame, pd.DataFrame) or not isinstance(row, int):
        return None
    return run_order(frame, rd.RunFilter.from_params(request.get("back_params") or {}))


@dataclass(frozen=True)
class Step:
    """What previous or next does: open ``request``, or say ``problem`` (the file is not here)."""

    request: dict[str, Any] | None = None
    problem: str | None = None


def step_request(request: Mapping[str, Any], order: RunOrder, delta: int, seq: int) -> Step | None:
    """Open the rollout ``delta`` rows away in ``order``; None past the ends of the table."""
    target = order.step(int(request["row"]), delta)
    if target is None:
        return None
    origin: rs.RunOrigin = request["origin"]
    source, rollout_id = order.entry(target)
    located = rs.locate(origin, source)
    if located is None:
        return Step(problem=f"{rollout_id}: {rs.missing_message(origin, source)} Go back to the run to upload it.")
    opened = rs.open_request(located, source, rollout_id, seq=seq, back_params=request.get("back_params"),
                             records=request.get("final_responses"))
    return Step(with_place(opened, origin, order.frame, target))


__all__ = ["RunOrder", "Step", "order_of", "run_order", "step_request", "with_place"]
