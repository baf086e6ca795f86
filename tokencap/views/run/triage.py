"""Triage: walking a run's rollouts one by one, in the order the Run page's table shows them.

A rollout opened from the Run page carries its place in the run: the run's frame, its row
number and where the run came from (the `OpenRequest`, ``tokencap/services/requests.py``).
`run_order` lists the rows that pass the Run page's filter (its ``run_*`` parameters) in
its sort, with the Run page's own functions (`data.filter_masks`, `passing`,
`sorted_rows`), so "next" is always the row below in the table the user left.
`step_request` opens the previous or next one as the Run page would open its row.

No Streamlit here; nothing from the Rollout page's parts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ...services import run_sources as rs
from ...services.requests import OpenRequest
from ..formatting import count
from . import compare as cv
from .filters import RunFilter, filter_masks, passing, sorted_rows


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
            return f"not among the {count(len(self.rows), 'rollout')} of this filter"
        return f"{at + 1:,} of {len(self.rows):,}"

    def entry(self, row: int) -> tuple[str, str]:
        """(source, rollout id) of a row."""
        return str(self.frame["source"].iat[row]), str(self.frame["rollout_id"].iat[row])


def run_order(frame: pd.DataFrame, flt: RunFilter) -> RunOrder:
    """The Run page's table for ``flt``: the rows passing every filter, in its sort."""
    keep = passing(frame, filter_masks(frame, flt))
    return RunOrder(frame, sorted_rows(frame, keep, flt))


def with_place(request: OpenRequest, origin: rs.RunOrigin, frame: pd.DataFrame, row: int) -> OpenRequest:
    """An `OpenRequest` (`source.open_request`) with the row's place in the run (``frame``,
    ``row``, ``origin``), which previous / next and the way back use."""
    return replace(request, frame=frame, row=row, origin=origin)


def pair_order(cmp: cv.Comparison, flt: RunFilter) -> RunOrder:
    """The Run page's table of joined rollouts for ``flt`` (a comparison): positions in ``cmp.rows``
    passing the filters on either side, in its sort, as `tokencap/app/run/parts.show_pairs` lists them."""
    keep_a = passing(cmp.a, filter_masks(cmp.a, flt))
    keep_b = passing(cmp.b, filter_masks(cmp.b, flt))
    return RunOrder(cmp.rows, cv.sorted_pairs(cmp, cv.passing_rows(cmp, keep_a, keep_b), flt))


def row_of(frame: pd.DataFrame, source: str, rollout_id: str) -> int | None:
    """The row of a run's frame holding (source, rollout id): where a link's rollout sits in its run."""
    hits = np.flatnonzero((frame["source"].astype(str).to_numpy() == source)
                          & (frame["rollout_id"].astype(str).to_numpy() == rollout_id))
    return int(hits[0]) if len(hits) else None


def pair_position(cmp: cv.Comparison, side: str, row: int | None) -> int | None:
    """The joined rollout (a position in ``cmp.rows``) whose ``side`` ("A" or "B") is ``row``."""
    if row is None:
        return None
    hits = np.flatnonzero(cmp.rows["row_a" if side == "A" else "row_b"].to_numpy() == row)
    return int(hits[0]) if len(hits) else None


def pair_request(cmp: cv.Comparison, position: int, side: str, origins: tuple[rs.RunOrigin, rs.RunOrigin],
                 seq: int, back_params: Mapping[str, str] | None) -> Step:
    """Open joined rollout ``position`` of a comparison: its ``side`` capture ("A" or "B"; the other side's
    when this run lacks it or its file is not here), with the other run's capture as ``vs`` (the Rollout
    page's Compare tab shows both). Each capture is named by its run (``run``, ``side``) and built with
    that run's rollout records; the request keeps its place (``comparison``, ``row``, ``origin``,
    ``origin_b``) for previous / next and the way back."""
    sides: dict[str, tuple[str, str, rs.Located | None, rs.RunOrigin, str]] = {}
    for letter, frame, column, origin, name in (("A", cmp.a, "row_a", origins[0], cmp.name_a),
                                                ("B", cmp.b, "row_b", origins[1], cmp.name_b)):
        row = int(cmp.rows[column].iat[position])
        if row >= 0:
            source = str(frame["source"].iat[row])
            sides[letter] = (source, str(frame["rollout_id"].iat[row]), rs.locate(origin, source), origin, name)
    order = [side, "B" if side == "A" else "A"]
    chosen = next((s for s in order if s in sides and sides[s][2] is not None), None)
    if chosen is None:
        source, rollout_id, _, origin, _ = sides[next(s for s in order if s in sides)]
        return Step(problem=f"{rollout_id}: {rs.missing_message(origin, source)} Go back to the run to upload it.")

    def opened(letter: str, number: int) -> OpenRequest:
        source, rollout_id, located, origin, name = sides[letter]
        assert located is not None
        request = rs.open_request(located, source, rollout_id, seq=number, back_params=back_params,
                                  records=origin.records)
        return replace(request, run=name, side=letter)

    request = opened(chosen, seq)
    other = order[1] if chosen == order[0] else order[0]
    if other in sides and sides[other][2] is not None:
        request = replace(request, vs=opened(other, seq))
    return Step(replace(request, comparison=cmp, row=position, origin=origins[0], origin_b=origins[1]))


def order_of(request: OpenRequest) -> RunOrder | None:
    """The order a request opened from the Run page walks in (its filter and sort), or None for a
    rollout opened otherwise (a link, a file)."""
    if request.comparison is not None and request.row is not None:
        return pair_order(request.comparison, RunFilter.from_params(request.back_params))
    if request.frame is None or request.row is None:
        return None
    return run_order(request.frame, RunFilter.from_params(request.back_params))


@dataclass(frozen=True)
class Step:
    """What previous or next does: open ``request``, or say ``problem`` (the file is not here)."""

    request: OpenRequest | None = None
    problem: str | None = None


def step_request(request: OpenRequest, order: RunOrder, delta: int, seq: int) -> Step | None:
    """Open the rollout ``delta`` rows away in ``order``; None past the ends of the table."""
    if request.row is None or request.origin is None:
        return None
    target = order.step(request.row, delta)
    if target is None:
        return None
    origin = request.origin
    if request.comparison is not None and request.origin_b is not None:  # the next joined rollout, the same side
        return pair_request(request.comparison, target, str(request.side or "A"),
                            (origin, request.origin_b), seq, request.back_params)
    source, rollout_id = order.entry(target)
    located = rs.locate(origin, source)
    if located is None:
        return Step(problem=f"{rollout_id}: {rs.missing_message(origin, source)} Go back to the run to upload it.")
    opened = rs.open_request(located, source, rollout_id, seq=seq, back_params=request.back_params,
                             records=request.final_responses)
    return Step(with_place(opened, origin, order.frame, target))


__all__ = ["RunOrder", "Step", "order_of", "pair_order", "pair_position", "pair_request", "row_of", "run_order",
           "step_request", "with_place"]
