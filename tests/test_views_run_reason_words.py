"""The Run page shows mask reasons in words, as it shows causes and link notes: the chart's labels, the
table's cells (one run's and a comparison's), the filter's chip and options and the reward slices. The
keys stay where a script or a link reads them: the bars' keys, the URL's filter, the frame and the scan
table."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from synth_run import after_a_fix, synthetic_scan_table

from tokencap.rollout import MASK_REASON_ORDER
from tokencap.views.run import compare as cv
from tokencap.views.run import data as rd
from tokencap.views.run import reward as rw
from tokencap.views.run.bars import reason_bars
from tokencap.views.run.filters import RunFilter, filter_masks, passing, sorted_rows
from tokencap.views.run.frame import run_frame
from tokencap.views.words import MASK_REASON_LABELS, label

VERDICTS_DOC = Path(__file__).resolve().parent.parent / "docs" / "verdicts.md"


def test_every_mask_reason_reads_as_docs_verdicts_names_it():
    documented = re.findall(r"`([a-z_]+)`", VERDICTS_DOC.read_text(encoding="utf-8").split("## ", 2)[1])
    assert list(MASK_REASON_LABELS) == list(MASK_REASON_ORDER)
    for reason in MASK_REASON_ORDER:
        assert reason in documented, reason
        assert label(reason) == MASK_REASON_LABELS[reason] == reason.replace("_", " ")


def test_the_reason_chart_labels_in_words_and_keeps_its_keys():
    frame = run_frame(synthetic_scan_table(300, seed=2))
    bars = reason_bars(frame, np.ones(len(frame), dtype=bool))
    assert bars.keys == MASK_REASON_ORDER  # a click filters on the key
    assert bars.labels == tuple(label(r) for r in MASK_REASON_ORDER)
    assert all(hover.endswith(f"(key: {r})") for hover, r in zip(bars.hover, MASK_REASON_ORDER, strict=True))


def test_the_table_cells_and_the_filter_chip_read_in_words_the_url_and_frame_keep_keys():
    table = synthetic_scan_table(300, seed=2)
    frame = run_frame(table)
    flt = RunFilter(reasons=("multiple_roots", "unresolved_retries"))
    rows = sorted_rows(frame, passing(frame, filter_masks(frame, flt)), flt)
    shown = rd.table_frame(frame, rows)
    keys = [str(frame["reasons"].iloc[int(r)]) for r in rows]
    assert shown["mask reasons"].astype(str).tolist() == [k.replace("_", " ") for k in keys]
    assert all("_" not in text for text in shown["mask reasons"].astype(str))
    causes = [str(frame["causes"].iloc[int(r)]) for r in rows]  # break causes too, each key by its label
    assert shown["why lineage broke"].astype(str).tolist() == [
        c if c == "—" else ", ".join(label(k) for k in c.split(", ")) for c in causes]
    assert any(c != "—" for c in causes)
    assert "multiple_roots" in ", ".join(keys)  # the frame keeps the keys
    assert flt.to_params() == {"run_reason": "unresolved_retries,multiple_roots"}
    assert ("reasons", "mask reason: unresolved retries or multiple roots") in flt.describe()


def test_a_comparison_s_table_and_the_reward_slices_name_reasons_in_words():
    a = synthetic_scan_table(300, seed=3)
    b = after_a_fix(a)
    cmp = cv.compare_runs(a, run_frame(a), b, run_frame(b))
    positions = cv.passing_rows(cmp, np.ones(len(cmp.a), bool), np.ones(len(cmp.b), bool))
    shown = cv.compare_table_frame(cmp, positions)
    for side in "AB":
        texts = [t for t in shown[f"mask reasons {side}"] if t is not None]
        assert texts and all("_" not in t for t in texts)
        assert any("multiple chains" in t for t in texts)
    assert shown["mask reasons A"].isna().sum() == cmp.summary.only_b  # absent from A: no text
    slices = rw.reward_slices(cmp.a)["slice"].tolist()
    assert "masked: multiple chains" in slices and not [s for s in slices if "_" in s]
