"""Triage: previous / next over the Run page's table, in its filter and sort."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tokencap.services import run_sources as rs
from tokencap.services.requests import OpenRequest
from tokencap.services.uploads import Upload, table_of_uploads
from tokencap.views.run import data as rd
from tokencap.views.run import triage as tr
from tokencap.views.run.filters import RunFilter, filter_masks, passing, sorted_rows
from tokencap.views.run.frame import run_frame

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"


def uploaded_run() -> tuple[rs.RunOrigin, object]:
    uploads = tuple(Upload(name, (SAMPLES / name).read_bytes())
                    for name in ("multi_rollout_entries.jsonl", "length_stop.json", "subagent_branch.json"))
    return rs.RunOrigin("upload", "uploads", uploads=uploads), run_frame(table_of_uploads(uploads))


def test_the_order_is_the_table_the_run_page_shows():
    _, frame = uploaded_run()
    flt = RunFilter(sort="n_calls", descending=True)
    order = tr.run_order(frame, flt)
    shown = rd.table_frame(frame, sorted_rows(frame, passing(frame, filter_masks(frame, flt)), flt))
    assert [order.entry(int(r))[1] for r in order.rows] == shown["rollout"].tolist()
    first, second, last = int(order.rows[0]), int(order.rows[1]), int(order.rows[-1])
    assert order.step(first, 1) == second and order.step(second, -1) == first
    assert order.step(first, -1) is None and order.step(last, 1) is None
    assert order.where(second) == f"2 of {len(order)}"
    # A filter that hides the row: it has no place, and no neighbours.
    trainable = tr.run_order(frame, RunFilter(verdict="trainable"))
    masked_row = int(tr.run_order(frame, RunFilter(verdict="masked")).rows[0])
    assert trainable.position(masked_row) is None and trainable.step(masked_row, 1) is None
    assert trainable.where(masked_row).startswith("not among")


def test_next_opens_the_neighbour_as_the_run_page_opens_a_row_and_says_when_its_file_is_missing():
    origin, frame = uploaded_run()
    flt = RunFilter()
    order = tr.run_order(frame, flt)
    row = int(order.rows[0])
    located = rs.locate(origin, order.entry(row)[0])
    source = order.entry(row)[0]
    request = tr.with_place(rs.open_request(located, source, order.entry(row)[1], seq=1, back_params=flt.to_params()),
                            origin, frame, row)
    assert tr.order_of(request).rows.tolist() == order.rows.tolist()
    step = tr.step_request(request, order, 1, seq=2)
    source, rollout_id = order.entry(int(order.rows[1]))
    assert step.problem is None and step.request.rollout_id == rollout_id and step.request.seq == 2
    assert step.request.source == source and step.request.name == source  # its own upload
    assert tr.step_request(request, order, -1, seq=3) is None  # nothing above the first row
    # A table without its files: the neighbour cannot be opened here, and the page says why.
    alone = rs.RunOrigin("parquet", "run.parquet")
    missing = tr.step_request(replace(request, origin=alone), order, 1, seq=4)
    assert missing.request is None and rollout_id in missing.problem and "not found" in missing.problem
    assert tr.order_of(OpenRequest(rollout_id="x", path="/p", source="s")) is None  # opened by a link
