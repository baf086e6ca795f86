"""The Run page's bar chart spec (`tokencap.views.run.charts.bar_spec`) is pinned: each case's layers,
title and height, serialised in order, have the digest below. A refactor of how the spec is built keeps
every digest; a deliberate change to what a chart shows updates them (the failure prints the new ones).
The frame around the layers (`tokencap.views.vega.chart`) is not pinned here."""

from __future__ import annotations

import hashlib
import json

from tokencap.views.run import charts as rc
from tokencap.views.run.bars import Bars

KEYS = ("load_error", "no_records", "multiple_chains")


def _bars(dimension: str, n: int, counts_from: int = 0, **extra) -> Bars:
    keys = tuple(f"k{i}" for i in range(n)) if dimension != "reasons" else KEYS[:n]
    counts = tuple((counts_from + 7 * i) % 11 for i in range(n))
    return Bars(dimension, f"Chart of {dimension}", keys, tuple(f"label {k}" for k in keys), counts,
                sum(counts) + 3, **extra)


CASES = {
    "one run, horizontal": lambda: rc.bar_spec(_bars("reasons", 3)),
    "one run, horizontal, a bar active": lambda: rc.bar_spec(_bars("reasons", 3), ("no_records",)),
    "two runs, horizontal, first row, same names": lambda: rc.bar_spec(
        _bars("causes", 5, hover=tuple(f"hint {i}" for i in range(5))), ("k1", "k3"),
        _bars("causes", 5, 4, hover=tuple(f"hint {i}" for i in range(5))), ("run", "run")),
    "one run, horizontal, occurrences": lambda: rc.bar_spec(
        _bars("link", 4, 2, hover=tuple(f"note {i}" for i in range(4)), extra=(3, 0, 5, 9))),
    "one run, horizontal, dense": lambda: rc.bar_spec(_bars("statuses", rc.DENSE + 1)),
    "one run, horizontal, very dense": lambda: rc.bar_spec(_bars("causes", rc.DENSE + 4)),
    "one run, vertical, rotated labels": lambda: rc.bar_spec(_bars("delivered", 12), ("k4",)),
    "two runs, vertical": lambda: rc.bar_spec(_bars("calls", 6), (), _bars("calls", 6, 5), ("before", "after")),
    "one run, nothing counted": lambda: rc.bar_spec(Bars("refusal", "Refusals", ("a", "b"), ("A", "B"), (0, 0), 0)),
    "two runs, the change chart": lambda: rc.bar_spec(_bars("change", 6, 1), ("k0",), _bars("change", 6, 2)),
}

PINNED = {
    "one run, horizontal": "4633de4a7cabdf83",
    "one run, horizontal, a bar active": "0b53a0a30e575e2b",
    "two runs, horizontal, first row, same names": "29e076289cee55e0",
    "one run, horizontal, occurrences": "9a8b4ae2ced3e09a",
    "one run, horizontal, dense": "2505cb4a4a5d6bba",
    "one run, horizontal, very dense": "beaec0d5bc58e8fb",
    "one run, vertical, rotated labels": "8848eb0cdd2db8de",
    "two runs, vertical": "00555c6147c13264",
    "one run, nothing counted": "15d28487bdb22898",
    "two runs, the change chart": "47c4cda18b6b9a93",
}


def _digest(spec: dict) -> str:
    pinned = {"title": spec["title"], "height": spec["height"], "layer": spec["layer"]}
    return hashlib.sha256(json.dumps(pinned, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def test_every_case_of_the_bar_chart_spec_is_as_pinned():
    found = {name: _digest(make()) for name, make in CASES.items()}
    assert found == PINNED, "bar_spec changed; if on purpose, pin these: " + json.dumps(found, indent=4)
